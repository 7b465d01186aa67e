//! Accounts (administrative view) and account API keys.

use axum::{extract::State, http::StatusCode};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    NameRule,
    views::{AccountAdmin, ApiKey, ApiKeySecret, IssueApiKey, ListQuery, Status},
};
use crate::api::caller::Authz;
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::{cap, tokens},
    ids::{new_sid, prefix},
    store::AccountPatch,
    usecases::{
        NewAccountInput, check_country, check_email, check_line, check_region, check_timezone,
    },
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_account, list_accounts))
        .routes(routes!(get_account, patch_account))
        .routes(routes!(issue_account_key, list_account_keys))
        .routes(routes!(revoke_account_key))
}

/// Body of POST /v1/internal/account.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAccount {
    pub name: String,
    pub email: String,
    #[serde(default)]
    pub external_id: Option<String>,
    /// ISO 3166-1 alpha-2 (any case; stored lowercase).
    #[serde(default)]
    #[schema(value_type = Option<crate::api::vocab::AccountCountry>)]
    pub country: Option<String>,
    /// Region code: af, ap, eu, me, na, sa.
    #[serde(default)]
    #[schema(value_type = Option<crate::api::vocab::AccountRegion>)]
    pub region: Option<String>,
    /// IANA time zone, default UTC.
    #[serde(default)]
    pub timezone: Option<String>,
    #[serde(default)]
    pub phone: Option<String>,
    #[serde(default)]
    pub status: Option<Status>,
}

/// Body of PATCH /v1/internal/account/{sid}; omitted fields keep their value.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchAccount {
    pub name: Option<String>,
    pub email: Option<String>,
    pub external_id: Option<String>,
    #[schema(value_type = Option<crate::api::vocab::AccountCountry>)]
    pub country: Option<String>,
    #[schema(value_type = Option<crate::api::vocab::AccountRegion>)]
    pub region: Option<String>,
    pub timezone: Option<String>,
    pub phone: Option<String>,
    pub status: Option<Status>,
}

/// Create an account under the tenant in scope (X-Tenant-Sid).
#[utoipa::path(post, path = "/v1/internal/account", tag = "accounts", request_body = CreateAccount,
    params(("X-Tenant-Sid" = Option<String>, Header, description = "Tenant; required for the superuser")), security(("bearer" = [])),
    responses((status = 201, body = AccountAdmin), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn create_account(
    State(state): State<AppState>,
    auth: Authz<cap::AccountsWrite>,
    Json(b): Json<CreateAccount>,
) -> ApiResult<(StatusCode, Json<AccountAdmin>)> {
    let tenant = auth.tenant_scope(&state).await?;
    let a = state.ops().create_account(&tenant.sid, b.into()).await?;
    Ok((StatusCode::CREATED, Json(AccountAdmin::from(&a))))
}

impl From<CreateAccount> for NewAccountInput {
    fn from(b: CreateAccount) -> Self {
        NewAccountInput {
            name: b.name,
            email: b.email,
            external_id: b.external_id,
            country: b.country,
            region: b.region,
            timezone: b.timezone,
            phone: b.phone,
            status: b.status,
        }
    }
}

/// List the accounts of the tenant in scope, oldest first.
#[utoipa::path(get, path = "/v1/internal/account", tag = "accounts",
    params(ListQuery, ("X-Tenant-Sid" = Option<String>, Header, description = "Tenant; required for the superuser")), security(("bearer" = [])),
    responses((status = 200, body = Page<AccountAdmin>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_accounts(
    State(state): State<AppState>,
    auth: Authz<cap::AccountsRead>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Page<AccountAdmin>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let tenant = auth.tenant_scope(&state).await?;
    let (rows, total) = state
        .store
        .account_list(
            &tenant.sid,
            q.show_deleted.unwrap_or(false),
            page.limit,
            page.offset,
        )
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(AccountAdmin::from).collect(),
        total,
        page,
    )))
}

/// Get an account (administrative view; soft-deleted accounts carry deleted_at).
#[utoipa::path(get, path = "/v1/internal/account/{sid}", tag = "accounts", params(("sid" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = AccountAdmin), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_account(
    State(state): State<AppState>,
    auth: Authz<cap::AccountsRead>,
    Path(sid): Path<String>,
) -> ApiResult<Json<AccountAdmin>> {
    let a = auth.visible_account(&state, &sid, true).await?;
    Ok(Json(AccountAdmin::from(&a)))
}

/// Update an account; omitted fields keep their value.
#[utoipa::path(patch, path = "/v1/internal/account/{sid}", tag = "accounts", params(("sid" = String, Path)), request_body = PatchAccount,
    security(("bearer" = [])),
    responses((status = 200, body = AccountAdmin), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn patch_account(
    State(state): State<AppState>,
    auth: Authz<cap::AccountsWrite>,
    Path(sid): Path<String>,
    Json(b): Json<PatchAccount>,
) -> ApiResult<Json<AccountAdmin>> {
    let a = auth.visible_account(&state, &sid, false).await?;
    let patch = AccountPatch {
        name: b
            .name
            .as_deref()
            .map(|n| NameRule::ADMIN_NAME.check("name", n))
            .transpose()?,
        email: b.email.as_deref().map(check_email).transpose()?,
        external_id: b
            .external_id
            .map(|v| check_line("external_id", v))
            .transpose()?,
        country: b.country.as_deref().map(check_country).transpose()?,
        region: b.region.as_deref().map(check_region).transpose()?,
        timezone: b.timezone.as_deref().map(check_timezone).transpose()?,
        phone: b.phone.map(|v| check_line("phone", v)).transpose()?,
        status: b.status.map(|s| s.as_str().to_string()),
    };
    let a = state.store.account_update(&a.sid, &patch).await?;
    Ok(Json(AccountAdmin::from(&a)))
}

/// Issue an account API key.
#[utoipa::path(post, path = "/v1/internal/account/{sid}/api-key", tag = "accounts", params(("sid" = String, Path)), request_body = IssueApiKey,
    security(("bearer" = [])),
    responses((status = 201, body = ApiKeySecret), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn issue_account_key(
    State(state): State<AppState>,
    auth: Authz<cap::AccountKeysManage>,
    Path(sid): Path<String>,
    Json(body): Json<IssueApiKey>,
) -> ApiResult<(StatusCode, Json<ApiKeySecret>)> {
    let a = auth.visible_account(&state, &sid, false).await?;
    super::check_expiry(body.expires_at)?;
    let label = NameRule::KEY_LABEL.check("label", body.label.as_deref().unwrap_or(""))?;
    let secret = tokens::generate(tokens::TokenKind::AccountKey);
    let key = state
        .store
        .api_key_create(
            &new_sid(prefix::API_KEY),
            &a.tenant_sid,
            Some(&a.sid),
            &label,
            &tokens::hash_secret(&secret),
            body.expires_at,
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(ApiKeySecret {
            sid: key.sid,
            secret,
        }),
    ))
}

/// List an account's API keys (without secrets).
#[utoipa::path(get, path = "/v1/internal/account/{sid}/api-key", tag = "accounts", params(("sid" = String, Path), ListQuery),
    security(("bearer" = [])),
    responses((status = 200, body = Page<ApiKey>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn list_account_keys(
    State(state): State<AppState>,
    auth: Authz<cap::AccountKeysManage>,
    Path(sid): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Page<ApiKey>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let a = auth.visible_account(&state, &sid, true).await?;
    let (rows, total) = state
        .store
        .api_key_list(&a.tenant_sid, Some(&a.sid), page.limit, page.offset)
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(ApiKey::from).collect(),
        total,
        page,
    )))
}

/// Revoke an account API key (it stops authenticating at once).
#[utoipa::path(delete, path = "/v1/internal/account/{sid}/api-key/{key_sid}", tag = "accounts",
    params(("sid" = String, Path), ("key_sid" = String, Path)), security(("bearer" = [])),
    responses((status = 204, description = "Revoked"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn revoke_account_key(
    State(state): State<AppState>,
    auth: Authz<cap::AccountKeysManage>,
    Path((sid, key_sid)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let a = auth.visible_account(&state, &sid, true).await?;
    match state.store.api_key_get(&key_sid).await? {
        Some(k) if k.account_sid.as_deref() == Some(a.sid.as_str()) => {
            state.store.api_key_revoke(&k.sid).await?;
            Ok(StatusCode::NO_CONTENT)
        }
        _ => Err(ApiError::not_found("api_key")),
    }
}
