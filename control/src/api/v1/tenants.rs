//! Tenants (administrative): create, list, get, soft/hard delete, restore, tenant API keys.

use axum::{extract::State, http::StatusCode};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    NameRule,
    views::{ApiKey, ApiKeySecret, IssueApiKey, ListQuery, Tenant},
};
use crate::api::caller::{Authz, Caller};
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::{cap, tokens},
    ids::{new_sid, prefix},
    store::{StoreError, TenantRecord},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_tenant, list_tenants))
        .routes(routes!(get_tenant, delete_tenant))
        .routes(routes!(restore_tenant))
        .routes(routes!(issue_tenant_key, list_tenant_keys))
        .routes(routes!(revoke_tenant_key))
}

/// Body of POST /v1/internal/tenant.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTenant {
    pub name: String,
}

/// Query of DELETE /v1/internal/tenant/{sid}.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeleteTenantQuery {
    /// Permanently remove the tenant and its subtree (default: soft delete).
    #[serde(default)]
    pub hard: Option<bool>,
}

/// The tenant addressed by a path sid if the caller may see it (404 otherwise).
pub(crate) async fn visible_tenant(
    state: &AppState,
    caller: &Caller,
    sid: &str,
    include_deleted: bool,
) -> ApiResult<TenantRecord> {
    match state.store.tenant_get(sid).await? {
        Some(t) if caller.sees_tenant(&t.sid) && (include_deleted || t.deleted_at.is_none()) => {
            Ok(t)
        }
        _ => Err(ApiError::not_found("tenant")),
    }
}

/// Create a tenant.
#[utoipa::path(post, path = "/v1/internal/tenant", tag = "tenants", request_body = CreateTenant,
    security(("bearer" = [])),
    responses((status = 201, body = Tenant), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn create_tenant(
    State(state): State<AppState>,
    _auth: Authz<cap::TenantsManage>,
    Json(body): Json<CreateTenant>,
) -> ApiResult<(StatusCode, Json<Tenant>)> {
    let t = state.ops().create_tenant(&body.name).await?;
    Ok((StatusCode::CREATED, Json(Tenant::from(&t))))
}

/// List tenants (a tenant key sees only its own), oldest first.
#[utoipa::path(get, path = "/v1/internal/tenant", tag = "tenants", params(ListQuery), security(("bearer" = [])),
    responses((status = 200, body = Page<Tenant>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_tenants(
    State(state): State<AppState>,
    auth: Authz<cap::TenantsRead>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Page<Tenant>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let show_deleted = q.show_deleted.unwrap_or(false);
    if let Some(own) = auth.principal.tenant_sid() {
        let rows: Vec<TenantRecord> = state
            .store
            .tenant_get(own)
            .await?
            .into_iter()
            .filter(|t| show_deleted || t.deleted_at.is_none())
            .collect();
        let total = rows.len() as i64;
        let items = rows
            .iter()
            .skip(page.offset as usize)
            .take(page.limit as usize)
            .map(Tenant::from)
            .collect();
        return Ok(Json(Page::new(items, total, page)));
    }
    let (rows, total) = state
        .store
        .tenant_list(show_deleted, page.limit, page.offset)
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(Tenant::from).collect(),
        total,
        page,
    )))
}

/// Get a tenant (soft-deleted tenants are returned with deleted_at set).
#[utoipa::path(get, path = "/v1/internal/tenant/{sid}", tag = "tenants", params(("sid" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = Tenant), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_tenant(
    State(state): State<AppState>,
    auth: Authz<cap::TenantsRead>,
    Path(sid): Path<String>,
) -> ApiResult<Json<Tenant>> {
    let t = visible_tenant(&state, &auth, &sid, true).await?;
    Ok(Json(Tenant::from(&t)))
}

/// Delete a tenant. Soft by default: the tenant, its accounts and users are marked
/// deleted (reversible with POST …/restore). `hard=true` purges the subtree; if any
/// registered purge fails the delete aborts with nothing removed (500 `purge_failed`).
#[utoipa::path(delete, path = "/v1/internal/tenant/{sid}", tag = "tenants", params(("sid" = String, Path), DeleteTenantQuery),
    security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn delete_tenant(
    State(state): State<AppState>,
    _auth: Authz<cap::TenantsManage>,
    Path(sid): Path<String>,
    Query(q): Query<DeleteTenantQuery>,
) -> ApiResult<StatusCode> {
    let result = if q.hard.unwrap_or(false) {
        state.store.tenant_hard_delete(&sid).await
    } else {
        state.store.tenant_soft_delete(&sid).await
    };
    match result {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::NotFound) => Err(ApiError::not_found("tenant")),
        Err(StoreError::PurgeFailed(m)) => {
            tracing::warn!(tenant = %sid, error = %m, "hard tenant delete aborted");
            Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "purge_failed",
                format!("purge failed, nothing was removed: {m}"),
            ))
        }
        Err(e) => Err(e.into()),
    }
}

/// Restore a soft-deleted tenant with the accounts and users its delete cascaded to.
#[utoipa::path(post, path = "/v1/internal/tenant/{sid}/restore", tag = "tenants", params(("sid" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = Tenant), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "A user's email was taken meanwhile"),
        (status = 500, body = ErrorBody)))]
async fn restore_tenant(
    State(state): State<AppState>,
    _auth: Authz<cap::TenantsManage>,
    Path(sid): Path<String>,
) -> ApiResult<Json<Tenant>> {
    match state.store.tenant_restore(&sid).await {
        Ok(t) => Ok(Json(Tenant::from(&t))),
        Err(StoreError::NotFound) => Err(ApiError::not_found("tenant")),
        Err(StoreError::Unique) => Err(ApiError::conflict(
            "email_taken",
            "a restored user's email now belongs to another live user",
        )),
        Err(e) => Err(e.into()),
    }
}

/// Issue a tenant API key.
#[utoipa::path(post, path = "/v1/internal/tenant/{sid}/api-key", tag = "tenants", params(("sid" = String, Path)), request_body = IssueApiKey,
    security(("bearer" = [])),
    responses((status = 201, body = ApiKeySecret), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn issue_tenant_key(
    State(state): State<AppState>,
    auth: Authz<cap::TenantsManage>,
    Path(sid): Path<String>,
    Json(body): Json<IssueApiKey>,
) -> ApiResult<(StatusCode, Json<ApiKeySecret>)> {
    let t = visible_tenant(&state, &auth, &sid, false).await?;
    super::check_expiry(body.expires_at)?;
    let label = NameRule::KEY_LABEL.check("label", body.label.as_deref().unwrap_or(""))?;
    let secret = tokens::generate(tokens::TokenKind::TenantKey);
    let key = state
        .store
        .api_key_create(
            &new_sid(prefix::API_KEY),
            &t.sid,
            None,
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

/// List a tenant's API keys (without secrets).
#[utoipa::path(get, path = "/v1/internal/tenant/{sid}/api-key", tag = "tenants", params(("sid" = String, Path), ListQuery),
    security(("bearer" = [])),
    responses((status = 200, body = Page<ApiKey>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn list_tenant_keys(
    State(state): State<AppState>,
    auth: Authz<cap::TenantsManage>,
    Path(sid): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Page<ApiKey>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let t = visible_tenant(&state, &auth, &sid, true).await?;
    let (rows, total) = state
        .store
        .api_key_list(&t.sid, None, page.limit, page.offset)
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(ApiKey::from).collect(),
        total,
        page,
    )))
}

/// Revoke a tenant API key (it stops authenticating at once).
#[utoipa::path(delete, path = "/v1/internal/tenant/{sid}/api-key/{key_sid}", tag = "tenants",
    params(("sid" = String, Path), ("key_sid" = String, Path)), security(("bearer" = [])),
    responses((status = 204, description = "Revoked"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn revoke_tenant_key(
    State(state): State<AppState>,
    auth: Authz<cap::TenantsManage>,
    Path((sid, key_sid)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let t = visible_tenant(&state, &auth, &sid, true).await?;
    match state.store.api_key_get(&key_sid).await? {
        Some(k) if k.tenant_sid == t.sid && k.account_sid.is_none() => {
            state.store.api_key_revoke(&k.sid).await?;
            Ok(StatusCode::NO_CONTENT)
        }
        _ => Err(ApiError::not_found("api_key")),
    }
}
