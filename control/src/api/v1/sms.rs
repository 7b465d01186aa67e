//! SMS providers of an account (type `http`: one templated HTTP request per message).

use axum::{extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    NameRule,
    owned::{CONFLICT_AGENTS_LISTED, in_use, sees_row},
    views::Status,
};
use crate::api::caller::{Authz, Caller};
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    guarded_http::GuardedClient,
    ids::{new_sid, prefix},
    sms_template,
    store::{AgentRef, SmsProviderConfig, SmsProviderRecord, StoreError},
    usecases::check_phone,
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_provider, list_providers))
        .routes(routes!(get_provider, patch_provider, delete_provider))
}

/// One HTTP header of the send request; `value` may use the template variables.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SmsHeader {
    pub name: String,
    pub value: String,
}

/// An SMS provider.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SmsProvider {
    /// `smp_` prefixed.
    pub id: String,
    pub account_sid: String,
    /// Unique within the account.
    pub name: String,
    /// `http`: a generic gateway called with one HTTP request per message.
    #[serde(rename = "type")]
    pub kind: String,
    /// Absolute http(s) send endpoint; `{{from}}`, `{{to}}`, `{{text}}` allowed
    /// (substituted percent-encoded).
    pub url: String,
    /// GET, POST (default), PUT or PATCH.
    pub method: String,
    /// Request headers; values may use the template variables (substituted verbatim).
    pub headers: Vec<SmsHeader>,
    /// Request body; may use the template variables (substituted verbatim). Empty: no body.
    pub body_template: String,
    /// Registered alpha sender names agents may send as.
    pub alphas: Vec<String>,
    /// Registered sender numbers agents may send from.
    pub numbers: Vec<String>,
    /// Inactive providers reject sends (recorded as failed); their configuration stays editable.
    pub status: Status,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&SmsProviderRecord> for SmsProvider {
    fn from(r: &SmsProviderRecord) -> Self {
        SmsProvider {
            id: r.sid.clone(),
            account_sid: r.account_sid.clone(),
            name: r.name.clone(),
            kind: r.kind.clone(),
            url: r.url.clone(),
            method: r.method.clone(),
            headers: serde_json::from_str(&r.headers).unwrap_or_default(),
            body_template: r.body_template.clone(),
            alphas: r.alpha_list(),
            numbers: r.number_list(),
            status: Status::parse(&r.status),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Body of POST /v1/sms/provider.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSmsProvider {
    pub name: String,
    /// `http` (the only type).
    #[serde(rename = "type")]
    pub kind: String,
    pub url: String,
    /// Default POST.
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub headers: Option<Vec<SmsHeader>>,
    #[serde(default)]
    pub body_template: Option<String>,
    #[serde(default)]
    pub alphas: Option<Vec<String>>,
    #[serde(default)]
    pub numbers: Option<Vec<String>>,
    /// Default active.
    #[serde(default)]
    pub status: Option<Status>,
}

/// Body of PATCH /v1/sms/provider/{id}; omitted fields keep their value (lists are
/// replaced whole). Works on inactive providers too.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchSmsProvider {
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub url: Option<String>,
    pub method: Option<String>,
    pub headers: Option<Vec<SmsHeader>>,
    pub body_template: Option<String>,
    pub alphas: Option<Vec<String>>,
    pub numbers: Option<Vec<String>>,
    pub status: Option<Status>,
}

/// Query of GET /v1/sms/provider.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SmsProviderListQuery {
    #[serde(default)]
    pub status: Option<Status>,
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH"];
const MAX_ALPHA_LEN: usize = 11;
const MAX_LIST: usize = 100;

fn template(field: &str, v: &str) -> ApiResult<()> {
    sms_template::check(v).map_err(|e| {
        ApiError::unprocessable(
            "invalid_template",
            format!("{field}: {} ({:?})", e.reason, e.fragment),
        )
    })
}

/// The checked configuration of a provider (all fields merged already).
fn check_config(
    c: &mut SmsProviderConfig,
    headers: &[SmsHeader],
    outbound: &GuardedClient,
) -> ApiResult<()> {
    c.name = NameRule::NAME.check("name", &c.name)?;
    if c.kind != "http" {
        return Err(ApiError::unprocessable(
            "invalid_field",
            format!(
                "type: unsupported provider type {:?} (supported: http)",
                c.kind
            ),
        ));
    }
    c.method = c.method.trim().to_ascii_uppercase();
    if !METHODS.contains(&c.method.as_str()) {
        return Err(ApiError::unprocessable(
            "invalid_field",
            format!(
                "method: {:?} is not one of {}",
                c.method,
                METHODS.join(", ")
            ),
        ));
    }
    c.url = c.url.trim().to_string();
    template("url", &c.url)?;
    // The URL must be absolute http(s) once the variables are filled in.
    let sample = sms_template::render(&c.url, "1", "2", "x", sms_template::url_escape)
        .map_err(|_| ApiError::unprocessable("invalid_template", "url: bad template"))?;
    match url::Url::parse(&sample) {
        Ok(u)
            if matches!(u.scheme(), "http" | "https")
                && u.host_str().is_some_and(|h| !h.is_empty()) => {}
        _ => {
            return Err(ApiError::unprocessable(
                "invalid_url",
                format!("url: not an absolute http(s) URL: {:?}", c.url),
            ));
        }
    }
    if let Some(why) = outbound.refusal(&sample) {
        // The message names the URL as the caller wrote it, not the rendered sample.
        let why = why.replace(&format!("{sample:?}"), &format!("{:?}", c.url));
        return Err(ApiError::unprocessable(
            "target_not_allowed",
            format!("url: {why}"),
        ));
    }
    if headers.len() > MAX_LIST {
        return Err(ApiError::unprocessable(
            "invalid_field",
            format!("headers: at most {MAX_LIST}"),
        ));
    }
    for (i, h) in headers.iter().enumerate() {
        let valid_name = !h.name.is_empty()
            && h.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !valid_name {
            return Err(ApiError::unprocessable(
                "invalid_field",
                format!("headers[{i}].name: not a valid header name {:?}", h.name),
            ));
        }
        if h.value.contains(['\r', '\n']) {
            return Err(ApiError::unprocessable(
                "invalid_field",
                format!("headers[{i}].value: must not contain line breaks"),
            ));
        }
        template(&format!("headers[{i}].value"), &h.value)?;
    }
    template("body_template", &c.body_template)?;
    let mut alphas: Vec<String> = Vec::new();
    for (i, a) in c.alphas.iter().enumerate() {
        let a = a.trim();
        let ok = !a.is_empty()
            && a.chars().count() <= MAX_ALPHA_LEN
            && a.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, ' ' | '-' | '.' | '_'))
            && a.chars().any(|ch| ch.is_ascii_alphabetic());
        if !ok {
            return Err(ApiError::unprocessable(
                "invalid_field",
                format!(
                    "alphas[{i}]: 1 to {MAX_ALPHA_LEN} letters, digits, space, '-', '.', '_' with at least one letter, got {a:?}"
                ),
            ));
        }
        if !alphas.iter().any(|x| x == a) {
            alphas.push(a.to_string());
        }
    }
    let mut numbers: Vec<String> = Vec::new();
    for (i, n) in c.numbers.iter().enumerate() {
        let n = check_phone(&format!("numbers[{i}]"), "invalid_field", n)?;
        if !numbers.contains(&n) {
            numbers.push(n);
        }
    }
    if alphas.len() > MAX_LIST || numbers.len() > MAX_LIST {
        return Err(ApiError::unprocessable(
            "invalid_field",
            format!("alphas, numbers: at most {MAX_LIST} each"),
        ));
    }
    c.alphas = alphas;
    c.numbers = numbers;
    c.headers = serde_json::to_string(headers).map_err(ApiError::internal)?;
    Ok(())
}

fn name_taken() -> ApiError {
    ApiError::unprocessable(
        "name_taken",
        "name: the account already has an SMS provider with this name",
    )
}

/// The provider addressed by a path id, or 404 when absent or outside the caller's scope.
pub(crate) async fn visible_provider(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> ApiResult<SmsProviderRecord> {
    match state.store.sms_provider_get(id).await? {
        Some(p) if sees_row(state, caller, &p.account_sid, &p.tenant_sid).await? => Ok(p),
        _ => Err(ApiError::not_found("sms_provider")),
    }
}

/// Create an SMS provider in the account in scope.
#[utoipa::path(post, path = "/v1/sms/provider", tag = "sms", request_body = CreateSmsProvider, params(("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 201, body = SmsProvider), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody, description = "Invalid configuration: unknown template variable, bad URL, method, header, alpha or number; taken name"),
        (status = 500, body = ErrorBody)))]
async fn create_provider(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Json(b): Json<CreateSmsProvider>,
) -> ApiResult<(StatusCode, Json<SmsProvider>)> {
    let account = auth.account_scope(&state).await?;
    let headers = b.headers.unwrap_or_default();
    let mut c = SmsProviderConfig {
        name: b.name,
        kind: b.kind,
        url: b.url,
        method: b.method.unwrap_or_else(|| "POST".into()),
        headers: String::new(),
        body_template: b.body_template.unwrap_or_default(),
        alphas: b.alphas.unwrap_or_default(),
        numbers: b.numbers.unwrap_or_default(),
        status: b.status.unwrap_or(Status::Active).as_str().to_string(),
    };
    check_config(&mut c, &headers, &state.outbound)?;
    match state
        .store
        .sms_provider_create(
            &new_sid(prefix::SMS_PROVIDER),
            &account.tenant_sid,
            &account.sid,
            &c,
        )
        .await
    {
        Ok(p) => Ok((StatusCode::CREATED, Json(SmsProvider::from(&p)))),
        Err(StoreError::Unique) => Err(name_taken()),
        Err(e) => Err(e.into()),
    }
}

/// List the SMS providers of the account in scope, newest first.
#[utoipa::path(get, path = "/v1/sms/provider", tag = "sms", params(SmsProviderListQuery, ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Page<SmsProvider>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_providers(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<SmsProviderListQuery>,
) -> ApiResult<Json<Page<SmsProvider>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let account = auth.account_scope(&state).await?;
    let (rows, total) = state
        .store
        .sms_provider_list(
            &account.sid,
            q.status.map(Status::as_str),
            page.limit,
            page.offset,
        )
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(SmsProvider::from).collect(),
        total,
        page,
    )))
}

/// Get an SMS provider.
#[utoipa::path(get, path = "/v1/sms/provider/{id}", tag = "sms", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = SmsProvider), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn get_provider(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Json<SmsProvider>> {
    Ok(Json(SmsProvider::from(
        &visible_provider(&state, &auth, &id).await?,
    )))
}

/// Update an SMS provider (active or not); the merged configuration is checked whole.
#[utoipa::path(patch, path = "/v1/sms/provider/{id}", tag = "sms", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    request_body = PatchSmsProvider, security(("bearer" = [])),
    responses((status = 200, body = SmsProvider), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn patch_provider(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
    Json(b): Json<PatchSmsProvider>,
) -> ApiResult<Json<SmsProvider>> {
    let cur = visible_provider(&state, &auth, &id).await?;
    let view = SmsProvider::from(&cur);
    let headers = b.headers.unwrap_or(view.headers);
    let mut c = SmsProviderConfig {
        name: b.name.unwrap_or(view.name),
        kind: b.kind.unwrap_or(view.kind),
        url: b.url.unwrap_or(view.url),
        method: b.method.unwrap_or(view.method),
        headers: String::new(),
        body_template: b.body_template.unwrap_or(view.body_template),
        alphas: b.alphas.unwrap_or(view.alphas),
        numbers: b.numbers.unwrap_or(view.numbers),
        status: b.status.unwrap_or(view.status).as_str().to_string(),
    };
    check_config(&mut c, &headers, &state.outbound)?;
    match state.store.sms_provider_update(&cur.sid, &c).await {
        Ok(p) => Ok(Json(SmsProvider::from(&p))),
        Err(StoreError::Unique) => Err(name_taken()),
        Err(StoreError::NotFound) => Err(ApiError::not_found("sms_provider")),
        Err(e) => Err(e.into()),
    }
}

/// Delete an SMS provider. 409 while agents send through it (`data.agents` lists the
/// first 20, the message the total).
#[utoipa::path(delete, path = "/v1/sms/provider/{id}", tag = "sms", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Agents reference the provider"), (status = 500, body = ErrorBody)))]
async fn delete_provider(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let p = visible_provider(&state, &auth, &id).await?;
    match state.store.sms_provider_delete(&p.sid).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::Conflict(_)) => {
            let (ids, total) = state
                .store
                .agents_referencing(AgentRef::SmsProvider, &p.sid, CONFLICT_AGENTS_LISTED)
                .await?;
            Err(in_use("sms_provider", ids, total))
        }
        Err(StoreError::NotFound) => Err(ApiError::not_found("sms_provider")),
        Err(e) => Err(e.into()),
    }
}
