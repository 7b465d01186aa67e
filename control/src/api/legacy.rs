//! Legacy campaign family over HTTP Basic (`account_sid:account_token`) with an RPC-style
//! status object as the error body: the Profile group (`/profile…`), the account record
//! (`GET /v1/accounts/{sid}`) and campaigns (`/v1/campaign`). Account tokens are issued by
//! `POST /v1/internal/account/{sid}/legacy-token`.
//!
//! A legacy campaign is the legacy view of an agent: the same row and sid, so a campaign
//! created here is an agent on the v1 routes and every agent is a campaign here. The
//! campaign's `number` is the identifier of the agent's number, `pool_sid` its number pool,
//! `archived` whether it has an archive time; `description` (which agents do not have) is
//! kept beside the agent. Shapes and query semantics: docs/control-api.md, "Legacy family".

use axum::{
    extract::{FromRequestParts, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use base64::Engine;
use chrono::{DateTime, Utc};
use http::request::Parts;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    ApiError, ApiResult, AppState, ErrorBody, Json, Path,
    v1::{
        agents::{CreateAgent, GatewayType, create_in_account},
        views::Status,
    },
};
use crate::{
    auth::{Authz, cap, tokens},
    store::{
        AccountRecord, CampaignField, CampaignFilter, CampaignOrder, LegacyCampaignRecord,
        LegacyProfileRecord, StoreError,
    },
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_profile))
        .routes(routes!(get_profile, delete_profile, patch_profile))
        .routes(routes!(issue_legacy_token))
        .routes(routes!(get_account))
        .routes(routes!(list_campaigns, create_campaign))
        .routes(routes!(delete_campaign))
}

/// RPC-style status object: the legacy family's error body.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RpcStatus {
    /// RPC status code (3 invalid argument, 5 not found, 7 permission denied, 10 aborted,
    /// 13 internal, 16 unauthenticated).
    pub code: i32,
    pub message: String,
    /// Empty, or one `google.rpc.ErrorInfo` (`@type`, `reason`: the stable
    /// lower_snake_case use-case code, `domain`: `callsmith`).
    #[schema(value_type = Vec<Object>)]
    pub details: Vec<serde_json::Value>,
}

/// An error of the legacy family: HTTP status, RPC code, message and an optional reason
/// (rendered as an ErrorInfo detail).
#[derive(Debug)]
pub struct LegacyError {
    status: StatusCode,
    code: i32,
    message: String,
    reason: Option<String>,
}

impl LegacyError {
    fn new(status: StatusCode, code: i32, message: impl Into<String>) -> Self {
        LegacyError {
            status,
            code,
            message: message.into(),
            reason: None,
        }
    }
    fn invalid(m: impl Into<String>) -> Self {
        LegacyError::new(StatusCode::BAD_REQUEST, 3, m)
    }
    fn not_found(what: &str) -> Self {
        LegacyError::new(StatusCode::NOT_FOUND, 5, format!("{what} not found"))
    }
    fn unauthenticated() -> Self {
        LegacyError::new(
            StatusCode::UNAUTHORIZED,
            16,
            "invalid account_sid or account_token",
        )
    }
    fn internal() -> Self {
        LegacyError::new(StatusCode::INTERNAL_SERVER_ERROR, 13, "internal error")
    }
}

impl From<StoreError> for LegacyError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => LegacyError::not_found("resource"),
            other => {
                tracing::error!(error = %other, "legacy store error");
                LegacyError::internal()
            }
        }
    }
}

/// A v1 rule violation seen through the legacy family, with the status mapping RPC
/// gateways use: 400 and 422 → 400 INVALID_ARGUMENT, 401 → UNAUTHENTICATED, 403 →
/// PERMISSION_DENIED, 404 → NOT_FOUND, 409 → ABORTED, anything else → 500 INTERNAL. The v1
/// use-case code travels as the ErrorInfo reason.
impl From<ApiError> for LegacyError {
    fn from(e: ApiError) -> Self {
        let (status, code) = match e.status.as_u16() {
            400 | 422 => (StatusCode::BAD_REQUEST, 3),
            401 => (StatusCode::UNAUTHORIZED, 16),
            403 => (StatusCode::FORBIDDEN, 7),
            404 => (StatusCode::NOT_FOUND, 5),
            409 => (StatusCode::CONFLICT, 10),
            _ => {
                tracing::error!(error = %e.message, "legacy internal error");
                return LegacyError::internal();
            }
        };
        LegacyError {
            status,
            code,
            message: e.message,
            reason: Some(e.error.into_owned()),
        }
    }
}

impl IntoResponse for LegacyError {
    fn into_response(self) -> Response {
        let details = self
            .reason
            .map(|r| {
                vec![serde_json::json!({
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": r,
                    "domain": "callsmith",
                })]
            })
            .unwrap_or_default();
        let mut r = (
            self.status,
            axum::Json(RpcStatus {
                code: self.code,
                message: self.message,
                details,
            }),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Basic realm=\"callsmith\""),
            );
        }
        r
    }
}

/// The account authenticated by HTTP Basic `account_sid:account_token`.
#[derive(Debug, Clone)]
pub struct LegacyAccount {
    pub tenant_sid: String,
    pub account_sid: String,
}

impl FromRequestParts<AppState> for LegacyAccount {
    type Rejection = LegacyError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let Some((scheme, b64)) = header.split_once(' ') else {
            return Err(LegacyError::unauthenticated());
        };
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(LegacyError::unauthenticated());
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|_| LegacyError::unauthenticated())?;
        let decoded = String::from_utf8(decoded).map_err(|_| LegacyError::unauthenticated())?;
        let Some((account_sid, token)) = decoded.split_once(':') else {
            return Err(LegacyError::unauthenticated());
        };
        match state
            .store
            .legacy_token_check(account_sid, &tokens::hash_secret(token))
            .await?
        {
            Some(tenant_sid) => Ok(LegacyAccount {
                tenant_sid,
                account_sid: account_sid.to_string(),
            }),
            None => Err(LegacyError::unauthenticated()),
        }
    }
}

/// Legacy Profile.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Profile {
    pub id: String,
    pub email: String,
    pub timezone: String,
    pub creation_time: DateTime<Utc>,
    pub update_time: DateTime<Utc>,
}

impl From<&LegacyProfileRecord> for Profile {
    fn from(p: &LegacyProfileRecord) -> Self {
        Profile {
            id: p.id.clone(),
            email: p.email.clone(),
            timezone: p.timezone.clone(),
            creation_time: p.creation_time,
            update_time: p.update_time,
        }
    }
}

/// Body of POST /profile and PATCH /profile/{id}: every field optional; `id`,
/// `creation_time` and `update_time` are maintained by the service and ignored on input.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileInput {
    pub id: Option<String>,
    pub email: Option<String>,
    pub timezone: Option<String>,
    pub creation_time: Option<DateTime<Utc>>,
    pub update_time: Option<DateTime<Utc>>,
}

/// A JSON body, or 400 INVALID_ARGUMENT naming the problem.
fn body<T>(
    r: Result<axum::Json<T>, axum::extract::rejection::JsonRejection>,
) -> Result<T, LegacyError> {
    r.map(|axum::Json(b)| b)
        .map_err(|e| LegacyError::invalid(e.body_text()))
}

/// A store error of a profile route (NotFound names the profile).
fn profile_missing(e: StoreError) -> LegacyError {
    match e {
        StoreError::NotFound => LegacyError::not_found("profile"),
        other => other.into(),
    }
}

fn timezone(tz: &str) -> Result<String, LegacyError> {
    tz.parse::<chrono_tz::Tz>()
        .map(|t| t.name().to_string())
        .map_err(|_| LegacyError::invalid(format!("timezone: unknown IANA time zone {tz:?}")))
}

/// Create a legacy profile of the authenticated account.
#[utoipa::path(post, path = "/profile", tag = "legacy", request_body = ProfileInput, security(("basic" = [])),
    responses((status = 200, body = Profile), (status = 400, body = RpcStatus), (status = 401, body = RpcStatus), (status = 500, body = RpcStatus)))]
async fn create_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    b: Result<axum::Json<ProfileInput>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<Profile>, LegacyError> {
    let b = body(b)?;
    let tz = timezone(b.timezone.as_deref().unwrap_or("UTC"))?;
    let id = crate::ids::new_sid("prf");
    let p = state
        .store
        .legacy_profile_create(
            &id,
            &who.tenant_sid,
            &who.account_sid,
            b.email.as_deref().unwrap_or("").trim(),
            &tz,
        )
        .await?;
    Ok(axum::Json(Profile::from(&p)))
}

/// Get a legacy profile of the authenticated account.
#[utoipa::path(get, path = "/profile/{id}", tag = "legacy", params(("id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = Profile), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus)))]
async fn get_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<axum::Json<Profile>, LegacyError> {
    let p = state
        .store
        .legacy_profile_get(&who.account_sid, &id)
        .await?
        .ok_or_else(|| LegacyError::not_found("profile"))?;
    Ok(axum::Json(Profile::from(&p)))
}

/// Delete a legacy profile; 200 with an empty object.
#[utoipa::path(delete, path = "/profile/{id}", tag = "legacy", params(("id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = Object, description = "Empty object"), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus)))]
async fn delete_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<axum::Json<serde_json::Value>, LegacyError> {
    state
        .store
        .legacy_profile_delete(&who.account_sid, &id)
        .await
        .map_err(profile_missing)?;
    Ok(axum::Json(serde_json::json!({})))
}

/// Update a legacy profile (`email`, `timezone`; the times are service-maintained).
#[utoipa::path(patch, path = "/profile/{id}", tag = "legacy", params(("id" = String, Path, description = "profile.id")), request_body = ProfileInput,
    security(("basic" = [])),
    responses((status = 200, body = Profile), (status = 400, body = RpcStatus), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus)))]
async fn patch_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(id): axum::extract::Path<String>,
    b: Result<axum::Json<ProfileInput>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<Profile>, LegacyError> {
    let b = body(b)?;
    let tz = b.timezone.as_deref().map(timezone).transpose()?;
    let p = state
        .store
        .legacy_profile_update(
            &who.account_sid,
            &id,
            b.email.as_deref().map(str::trim),
            tz.as_deref(),
        )
        .await
        .map_err(profile_missing)?;
    Ok(axum::Json(Profile::from(&p)))
}

/// Legacy credentials of an account.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LegacyToken {
    pub account_sid: String,
    /// HTTP Basic password for the legacy family; shown once.
    pub account_token: String,
}

/// Issue (or rotate) the account_token for the legacy family's HTTP Basic.
#[utoipa::path(post, path = "/v1/internal/account/{sid}/legacy-token", tag = "accounts", params(("sid" = String, Path)),
    security(("bearer" = [])),
    responses((status = 201, body = LegacyToken), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn issue_legacy_token(
    State(state): State<AppState>,
    auth: Authz<cap::AccountKeysManage>,
    Path(sid): Path<String>,
) -> ApiResult<(StatusCode, Json<LegacyToken>)> {
    let a = auth.visible_account(&state, &sid, false).await?;
    let token = tokens::generate(tokens::TokenKind::LegacyAccount);
    state
        .store
        .legacy_token_set(&a.tenant_sid, &a.sid, &tokens::hash_secret(&token))
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(LegacyToken {
            account_sid: a.sid,
            account_token: token,
        }),
    ))
}

// --- Account -------------------------------------------------------------------------------

/// Legacy account record: the authenticated account.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LegacyAccountRecord {
    pub sid: String,
    pub tenant_sid: String,
    pub name: String,
    pub email: String,
    pub external_id: String,
    /// ISO 3166-1 alpha-2, lowercase.
    pub country: String,
    /// Region code (docs/control-api.md).
    pub region: String,
    /// IANA time zone.
    pub timezone: String,
    pub phone: String,
    /// `active` or `inactive`.
    pub status: String,
    pub creation_time: DateTime<Utc>,
    pub update_time: DateTime<Utc>,
}

impl From<&AccountRecord> for LegacyAccountRecord {
    fn from(a: &AccountRecord) -> Self {
        LegacyAccountRecord {
            sid: a.sid.clone(),
            tenant_sid: a.tenant_sid.clone(),
            name: a.name.clone(),
            email: a.email.clone(),
            external_id: a.external_id.clone(),
            country: a.country.clone(),
            region: a.region.clone(),
            timezone: a.timezone.clone(),
            phone: a.phone.clone(),
            status: a.status.clone(),
            creation_time: a.created_at,
            update_time: a.updated_at,
        }
    }
}

/// Get the account record; only the authenticated account's own sid is visible (any other
/// sid reads as absent).
#[utoipa::path(get, path = "/v1/accounts/{sid}", tag = "legacy", params(("sid" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = LegacyAccountRecord), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus),
        (status = 500, body = RpcStatus)))]
async fn get_account(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(sid): axum::extract::Path<String>,
) -> Result<axum::Json<LegacyAccountRecord>, LegacyError> {
    if sid != who.account_sid {
        return Err(LegacyError::not_found("account"));
    }
    let a = state
        .store
        .account_get(&sid)
        .await?
        .filter(|a| a.deleted_at.is_none())
        .ok_or_else(|| LegacyError::not_found("account"))?;
    Ok(axum::Json(LegacyAccountRecord::from(&a)))
}

// --- Campaign ------------------------------------------------------------------------------

/// Legacy campaign record (list item and create reply): the legacy view of an agent.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Campaign {
    /// The agent's id (`agt_…`): the same resource on GET /v1/agent/{id}.
    pub sid: String,
    pub account_sid: String,
    /// Free text; "" for an agent created on the v1 routes.
    pub description: String,
    pub scenario_sid: String,
    /// Identifier (phone number) of the number the campaign dials from; "" for a pool.
    pub number: String,
    /// Number pool the campaign dials through; "" for a single number.
    pub pool_sid: String,
    /// `active` or `inactive`.
    pub status: String,
    /// Whether the agent is archived (an archived campaign never dials).
    pub archived: bool,
    pub creation_time: DateTime<Utc>,
    pub update_time: DateTime<Utc>,
}

impl From<&LegacyCampaignRecord> for Campaign {
    fn from(c: &LegacyCampaignRecord) -> Self {
        Campaign {
            sid: c.sid.clone(),
            account_sid: c.account_sid.clone(),
            description: c.description.clone(),
            scenario_sid: c.scenario_sid.clone(),
            number: c.number.clone(),
            pool_sid: c.pool_sid.clone(),
            status: c.status.clone(),
            archived: c.archive_time.is_some(),
            creation_time: c.created_at,
            update_time: c.updated_at,
        }
    }
}

/// Body of POST /v1/campaign. Exactly one of `number` and `pool_sid` is set. The agent
/// behind the campaign gets the v1 defaults for everything else (schedule `always`, the
/// account's time zone, limits cps 1 / cpl 10, no SMS, no result targets).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCampaign {
    /// Free text, at most 1000 characters.
    #[serde(default)]
    pub description: String,
    /// A scenario of the account.
    pub scenario_sid: String,
    /// Identifier of an active number of the account (the number gateway).
    #[serde(default)]
    pub number: String,
    /// An active number pool of the account (the pool gateway).
    #[serde(default)]
    pub pool_sid: String,
    /// Default `active`.
    #[serde(default)]
    pub status: Option<Status>,
}

/// Longest campaign description.
const MAX_DESCRIPTION: usize = 1000;

/// Create a campaign: an agent of the authenticated account. 200 returns the campaign.
#[utoipa::path(post, path = "/v1/campaign", tag = "legacy", request_body = CreateCampaign, security(("basic" = [])),
    responses((status = 200, body = Campaign, description = "The created campaign (create-campaign reply)"),
        (status = 400, body = RpcStatus, description = "Malformed body, or a rule of the agent violated (unknown number, pool or scenario, inactive gateway)"),
        (status = 401, body = RpcStatus), (status = 500, body = RpcStatus)))]
async fn create_campaign(
    State(state): State<AppState>,
    who: LegacyAccount,
    b: Result<axum::Json<CreateCampaign>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<Campaign>, LegacyError> {
    let b = body(b)?;
    let description = b.description.trim().to_string();
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(LegacyError::invalid(format!(
            "description: at most {MAX_DESCRIPTION} characters"
        )));
    }
    if b.scenario_sid.trim().is_empty() {
        return Err(LegacyError::invalid("scenario_sid: required"));
    }
    let (number, pool_sid) = (b.number.trim(), b.pool_sid.trim());
    let account = state
        .store
        .account_get(&who.account_sid)
        .await?
        .ok_or_else(LegacyError::unauthenticated)?;
    let (gateway_type, number_sid, number_pool_sid) = match (number.is_empty(), pool_sid.is_empty())
    {
        (false, true) => {
            let n = state
                .store
                .number_by_identifier(&account.sid, number)
                .await?
                .ok_or_else(|| {
                    LegacyError::invalid(format!("number: no number {number:?} in this account"))
                })?;
            (GatewayType::Number, Some(n.sid), None)
        }
        (true, false) => (GatewayType::NumberPool, None, Some(pool_sid.to_string())),
        _ => {
            return Err(LegacyError::invalid(
                "number, pool_sid: exactly one of them is required",
            ));
        }
    };
    let agent = create_in_account(
        &state,
        &account,
        CreateAgent {
            gateway_type,
            number_sid,
            number_pool_sid,
            scenario_sid: b.scenario_sid,
            voicemail_enabled: None,
            call_recording: None,
            calling_schedule: None,
            timezone: None,
            limits: None,
            is_test: None,
            communication_result: None,
            sms: None,
            status: b.status,
        },
    )
    .await?;
    if !description.is_empty()
        && let Err(e) = state
            .store
            .legacy_campaign_describe(&agent.sid, &description)
            .await
    {
        // Nothing half-made stays behind.
        let _ = state.store.agent_delete(&agent.sid).await;
        return Err(e.into());
    }
    let c = state
        .store
        .legacy_campaign_get(&account.sid, &agent.sid)
        .await?
        .ok_or_else(LegacyError::internal)?;
    Ok(axum::Json(Campaign::from(&c)))
}

/// Query of GET /v1/campaign. Every value is a string (integers and booleans in their text
/// form); an empty value is the same as an absent one. Where a parameter has a structured
/// (`filter.*`, `options.*`) and a flat form, the structured form wins when both are given.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CampaignListQuery {
    /// `true`: archived campaigns only; `false`: live ones only; absent: both.
    #[serde(rename = "filter.archived")]
    pub filter_archived: Option<String>,
    /// Exact campaign sid.
    #[serde(rename = "filter.sid")]
    pub filter_sid: Option<String>,
    /// Exact scenario sid.
    #[serde(rename = "filter.scenario_sid")]
    pub filter_scenario_sid: Option<String>,
    /// Exact description.
    #[serde(rename = "filter.description")]
    pub filter_description: Option<String>,
    /// Exact number identifier.
    #[serde(rename = "filter.number")]
    pub filter_number: Option<String>,
    /// Page size (int64): default 100, at most 500.
    #[serde(rename = "options.limit")]
    pub options_limit: Option<String>,
    /// Campaigns skipped (int64), default 0.
    #[serde(rename = "options.offset")]
    pub options_offset: Option<String>,
    /// Order (int64 or name): 0 `CREATION_TIME_DESC` (default), 1 `CREATION_TIME_ASC`,
    /// 2 `DESCRIPTION_ASC`, 3 `DESCRIPTION_DESC`.
    #[serde(rename = "options.order_by")]
    pub options_order_by: Option<String>,
    /// Flat form of options.limit.
    pub limit: Option<String>,
    /// Flat form of options.offset.
    pub offset: Option<String>,
    /// Flat form of options.order_by.
    pub order_by: Option<String>,
    /// Flat form of filter.archived.
    pub archived: Option<String>,
    /// Flat form of filter.sid.
    pub sid: Option<String>,
    /// Flat form of filter.scenario_sid.
    pub scenario_sid: Option<String>,
    /// Flat form of filter.description.
    pub description: Option<String>,
    /// Flat form of filter.number.
    pub number: Option<String>,
    /// `active` or `inactive`.
    pub status: Option<String>,
    /// Exact number pool sid.
    pub pool_sid: Option<String>,
    /// Comma-separated fields searched by filter_query (any of them matching):
    /// sid, description, scenario_sid, number, pool_sid. Default: all of them.
    pub filter_or: Option<String>,
    /// Case-insensitive substring searched for in the filter_or fields.
    pub filter_query: Option<String>,
}

/// The structured value when given (non-empty), else the flat one.
fn pick(structured: Option<String>, flat: Option<String>) -> Option<String> {
    let set = |v: Option<String>| v.filter(|s| !s.is_empty());
    set(structured).or_else(|| set(flat))
}

fn int_param(name: &str, v: Option<String>) -> Result<Option<i64>, LegacyError> {
    v.map(|v| {
        v.trim()
            .parse::<i64>()
            .map_err(|_| LegacyError::invalid(format!("{name}: not an integer: {v:?}")))
    })
    .transpose()
}

fn bool_param(name: &str, v: Option<String>) -> Result<Option<bool>, LegacyError> {
    v.map(|v| match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(LegacyError::invalid(format!(
            "{name}: expected true or false, got {v:?}"
        ))),
    })
    .transpose()
}

/// Campaign orders by number and by name.
const ORDERS: [(i64, &str, CampaignOrder); 4] = [
    (0, "CREATION_TIME_DESC", CampaignOrder::CreationTimeDesc),
    (1, "CREATION_TIME_ASC", CampaignOrder::CreationTimeAsc),
    (2, "DESCRIPTION_ASC", CampaignOrder::DescriptionAsc),
    (3, "DESCRIPTION_DESC", CampaignOrder::DescriptionDesc),
];

fn order_param(name: &str, v: Option<String>) -> Result<CampaignOrder, LegacyError> {
    let Some(v) = v else {
        return Ok(CampaignOrder::default());
    };
    let t = v.trim();
    ORDERS
        .iter()
        .find(|(n, s, _)| t == n.to_string() || t.eq_ignore_ascii_case(s))
        .map(|(_, _, o)| *o)
        .ok_or_else(|| {
            LegacyError::invalid(format!(
                "{name}: unknown order {v:?} (0 CREATION_TIME_DESC, 1 CREATION_TIME_ASC, 2 DESCRIPTION_ASC, 3 DESCRIPTION_DESC)"
            ))
        })
}

/// Default and largest page of a campaign list (as v1 lists).
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 500;

/// The list query resolved into a filter and a page; 400 for a malformed value.
fn campaign_query(q: CampaignListQuery) -> Result<(CampaignFilter, i64, i64), LegacyError> {
    let limit_name = if q.options_limit.as_deref().is_some_and(|v| !v.is_empty()) {
        "options.limit"
    } else {
        "limit"
    };
    let limit = match int_param(limit_name, pick(q.options_limit, q.limit))? {
        None | Some(0) => DEFAULT_LIMIT,
        Some(n) if !(1..=MAX_LIMIT).contains(&n) => {
            return Err(LegacyError::invalid(format!(
                "{limit_name}: 0 to {MAX_LIMIT} (0 or absent means {DEFAULT_LIMIT})"
            )));
        }
        Some(n) => n,
    };
    let offset_name = if q.options_offset.as_deref().is_some_and(|v| !v.is_empty()) {
        "options.offset"
    } else {
        "offset"
    };
    let offset = int_param(offset_name, pick(q.options_offset, q.offset))?.unwrap_or(0);
    if offset < 0 {
        return Err(LegacyError::invalid(format!(
            "{offset_name}: must not be negative"
        )));
    }
    let order_name = if q.options_order_by.as_deref().is_some_and(|v| !v.is_empty()) {
        "options.order_by"
    } else {
        "order_by"
    };
    let order = order_param(order_name, pick(q.options_order_by, q.order_by))?;
    let archived_name = if q.filter_archived.as_deref().is_some_and(|v| !v.is_empty()) {
        "filter.archived"
    } else {
        "archived"
    };
    let archived = bool_param(archived_name, pick(q.filter_archived, q.archived))?;
    let status = match pick(None, q.status) {
        None => None,
        Some(s) if s == "active" || s == "inactive" => Some(s),
        Some(s) => {
            return Err(LegacyError::invalid(format!(
                "status: expected active or inactive, got {s:?}"
            )));
        }
    };
    let mut search_fields = Vec::new();
    for f in q
        .filter_or
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
    {
        let field = CampaignField::ALL
            .iter()
            .find(|(n, _)| *n == f)
            .map(|(_, c)| *c)
            .ok_or_else(|| {
                LegacyError::invalid(format!(
                    "filter_or: unknown field {f:?} (accepted: sid, description, scenario_sid, number, pool_sid)"
                ))
            })?;
        if !search_fields.contains(&field) {
            search_fields.push(field);
        }
    }
    if search_fields.is_empty() {
        search_fields = CampaignField::ALL.iter().map(|(_, c)| *c).collect();
    }
    let filter = CampaignFilter {
        sid: pick(q.filter_sid, q.sid),
        scenario_sid: pick(q.filter_scenario_sid, q.scenario_sid),
        description: pick(q.filter_description, q.description),
        number: pick(q.filter_number, q.number),
        pool_sid: pick(None, q.pool_sid),
        status,
        archived,
        search_fields,
        query: pick(None, q.filter_query),
        order,
    };
    Ok((filter, limit, offset))
}

/// List the authenticated account's campaigns (every agent of the account). 200 returns an
/// array of campaigns.
#[utoipa::path(get, path = "/v1/campaign", tag = "legacy", params(CampaignListQuery), security(("basic" = [])),
    responses((status = 200, body = Vec<Campaign>), (status = 400, body = RpcStatus), (status = 401, body = RpcStatus),
        (status = 500, body = RpcStatus)))]
async fn list_campaigns(
    State(state): State<AppState>,
    who: LegacyAccount,
    q: Result<axum::extract::Query<CampaignListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<axum::Json<Vec<Campaign>>, LegacyError> {
    let axum::extract::Query(q) = q.map_err(|e| LegacyError::invalid(e.body_text()))?;
    let (filter, limit, offset) = campaign_query(q)?;
    let rows = state
        .store
        .legacy_campaign_list(&who.account_sid, &filter, limit, offset)
        .await?;
    Ok(axum::Json(rows.iter().map(Campaign::from).collect()))
}

/// Delete a campaign (the agent behind it, as DELETE /v1/agent/{id}); 200 with an empty
/// object. Another account's campaign reads as absent.
#[utoipa::path(delete, path = "/v1/campaign/{campaign_id}", tag = "legacy", params(("campaign_id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = Object, description = "Empty object"), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus),
        (status = 500, body = RpcStatus)))]
async fn delete_campaign(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(campaign_id): axum::extract::Path<String>,
) -> Result<axum::Json<serde_json::Value>, LegacyError> {
    let c = state
        .store
        .legacy_campaign_get(&who.account_sid, &campaign_id)
        .await?
        .ok_or_else(|| LegacyError::not_found("campaign"))?;
    state
        .store
        .agent_delete(&c.sid)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => LegacyError::not_found("campaign"),
            other => other.into(),
        })?;
    Ok(axum::Json(serde_json::json!({})))
}
