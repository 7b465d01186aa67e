//! SIP trunks of a tenant (administrative).

use axum::{extract::State, http::StatusCode};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::views::{ListQuery, Trunk};
use crate::api::caller::{Authz, Caller};
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    store::{StoreError, TrunkRecord},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_trunk, list_trunks))
        .routes(routes!(get_trunk, delete_trunk))
}

/// Body of POST /v1/internal/trunk.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTrunk {
    /// Edge routing key: 1–128 characters of letters, digits, '.', '-', '_'; unique
    /// among the tenant's live trunks.
    pub name: String,
}

async fn visible_trunk(state: &AppState, caller: &Caller, sid: &str) -> ApiResult<TrunkRecord> {
    match state.store.trunk_get(sid).await? {
        Some(t)
            if caller.sees_tenant(&t.tenant_sid)
                && caller
                    .header_tenant
                    .as_deref()
                    .is_none_or(|h| h == t.tenant_sid) =>
        {
            Ok(t)
        }
        _ => Err(ApiError::not_found("trunk")),
    }
}

/// Create a trunk under the tenant in scope. 422 when a live trunk has the name.
#[utoipa::path(post, path = "/v1/internal/trunk", tag = "trunks", request_body = CreateTrunk,
    params(("X-Tenant-Sid" = Option<String>, Header, description = "Tenant; required for the superuser")), security(("bearer" = [])),
    responses((status = 201, body = Trunk), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn create_trunk(
    State(state): State<AppState>,
    auth: Authz<cap::TrunksWrite>,
    Json(b): Json<CreateTrunk>,
) -> ApiResult<(StatusCode, Json<Trunk>)> {
    let tenant = auth.tenant_scope(&state).await?;
    let t = state.ops().create_trunk(&tenant.sid, &b.name).await?;
    Ok((StatusCode::CREATED, Json(Trunk::from(&t))))
}

/// List the trunks of the tenant in scope, oldest first.
#[utoipa::path(get, path = "/v1/internal/trunk", tag = "trunks",
    params(ListQuery, ("X-Tenant-Sid" = Option<String>, Header, description = "Tenant; required for the superuser")), security(("bearer" = [])),
    responses((status = 200, body = Page<Trunk>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_trunks(
    State(state): State<AppState>,
    auth: Authz<cap::TrunksRead>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Page<Trunk>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let tenant = auth.tenant_scope(&state).await?;
    let (rows, total) = state
        .store
        .trunk_list(
            &tenant.sid,
            q.show_deleted.unwrap_or(false),
            page.limit,
            page.offset,
        )
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(Trunk::from).collect(),
        total,
        page,
    )))
}

/// Get a trunk (a sid outside the caller's scope reads as absent).
#[utoipa::path(get, path = "/v1/internal/trunk/{sid}", tag = "trunks", params(("sid" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = Trunk), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_trunk(
    State(state): State<AppState>,
    auth: Authz<cap::TrunksRead>,
    Path(sid): Path<String>,
) -> ApiResult<Json<Trunk>> {
    Ok(Json(Trunk::from(
        &visible_trunk(&state, &auth, &sid).await?,
    )))
}

/// Soft-delete a trunk (its name becomes free again).
#[utoipa::path(delete, path = "/v1/internal/trunk/{sid}", tag = "trunks", params(("sid" = String, Path)), security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn delete_trunk(
    State(state): State<AppState>,
    auth: Authz<cap::TrunksWrite>,
    Path(sid): Path<String>,
) -> ApiResult<StatusCode> {
    let t = visible_trunk(&state, &auth, &sid).await?;
    match state.store.trunk_soft_delete(&t.sid).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::NotFound) => Err(ApiError::not_found("trunk")),
        Err(e) => Err(e.into()),
    }
}
