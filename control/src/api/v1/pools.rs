//! Number pools: named sets of an account's numbers an agent can dial through.

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
    ids::{new_sid, prefix},
    store::{AgentRef, PoolRecord, StoreError},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_pool, list_pools))
        .routes(routes!(get_pool, patch_pool, delete_pool))
}

/// A number pool (also the `included.pools` entry of GET /v1/number).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NumberPool {
    /// `npl_` prefixed.
    pub id: String,
    pub account_sid: String,
    /// Unique within the account.
    pub name: String,
    /// An inactive pool is never dialed through (agents must reference an active pool).
    pub status: Status,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&PoolRecord> for NumberPool {
    fn from(p: &PoolRecord) -> Self {
        NumberPool {
            id: p.sid.clone(),
            account_sid: p.account_sid.clone(),
            name: p.name.clone(),
            status: Status::parse(&p.status),
            created_at: p.created_at,
            updated_at: p.updated_at,
        }
    }
}

/// Body of POST /v1/number-pool.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePool {
    /// 1–200 characters, unique within the account.
    pub name: String,
    /// Default active.
    #[serde(default)]
    pub status: Option<Status>,
}

/// Body of PATCH /v1/number-pool/{id}; omitted fields keep their value.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchPool {
    pub name: Option<String>,
    pub status: Option<Status>,
}

/// Query of GET /v1/number-pool.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PoolListQuery {
    /// Only pools with this status.
    #[serde(default)]
    pub status: Option<Status>,
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

fn name_taken() -> ApiError {
    ApiError::unprocessable(
        "name_taken",
        "name: the account already has a pool with this name",
    )
}

/// The pool addressed by a path id, or 404 when absent or outside the caller's scope.
pub(crate) async fn visible_pool(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> ApiResult<PoolRecord> {
    match state.store.pool_get(id).await? {
        Some(p) if sees_row(state, caller, &p.account_sid, &p.tenant_sid).await? => Ok(p),
        _ => Err(ApiError::not_found("number_pool")),
    }
}

/// Create a number pool in the account in scope.
#[utoipa::path(post, path = "/v1/number-pool", tag = "numbers", request_body = CreatePool, params(("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 201, body = NumberPool), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody, description = "Invalid or taken name"), (status = 500, body = ErrorBody)))]
async fn create_pool(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Json(b): Json<CreatePool>,
) -> ApiResult<(StatusCode, Json<NumberPool>)> {
    let account = auth.account_scope(&state).await?;
    let name = NameRule::NAME.check("name", &b.name)?;
    let status = b.status.unwrap_or(Status::Active);
    match state
        .store
        .pool_create(
            &new_sid(prefix::NUMBER_POOL),
            &account.tenant_sid,
            &account.sid,
            &name,
            status.as_str(),
        )
        .await
    {
        Ok(p) => Ok((StatusCode::CREATED, Json(NumberPool::from(&p)))),
        Err(StoreError::Unique) => Err(name_taken()),
        Err(e) => Err(e.into()),
    }
}

/// List the number pools of the account in scope, newest first.
#[utoipa::path(get, path = "/v1/number-pool", tag = "numbers", params(PoolListQuery, ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Page<NumberPool>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_pools(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<PoolListQuery>,
) -> ApiResult<Json<Page<NumberPool>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let account = auth.account_scope(&state).await?;
    let (rows, total) = state
        .store
        .pool_list(
            &account.sid,
            q.status.map(Status::as_str),
            page.limit,
            page.offset,
        )
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(NumberPool::from).collect(),
        total,
        page,
    )))
}

/// Get a number pool.
#[utoipa::path(get, path = "/v1/number-pool/{id}", tag = "numbers", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = NumberPool), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn get_pool(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Json<NumberPool>> {
    Ok(Json(NumberPool::from(
        &visible_pool(&state, &auth, &id).await?,
    )))
}

/// Update a number pool; omitted fields keep their value.
#[utoipa::path(patch, path = "/v1/number-pool/{id}", tag = "numbers", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    request_body = PatchPool, security(("bearer" = [])),
    responses((status = 200, body = NumberPool), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn patch_pool(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
    Json(b): Json<PatchPool>,
) -> ApiResult<Json<NumberPool>> {
    let p = visible_pool(&state, &auth, &id).await?;
    let name = b
        .name
        .as_deref()
        .map(|n| NameRule::NAME.check("name", n))
        .transpose()?;
    match state
        .store
        .pool_update(&p.sid, name.as_deref(), b.status.map(Status::as_str))
        .await
    {
        Ok(p) => Ok(Json(NumberPool::from(&p))),
        Err(StoreError::Unique) => Err(name_taken()),
        Err(StoreError::NotFound) => Err(ApiError::not_found("number_pool")),
        Err(e) => Err(e.into()),
    }
}

/// Delete a number pool; its numbers stay and leave the pool. 409 while agents dial
/// through it (`data.agents` lists the first 20, the message the total).
#[utoipa::path(delete, path = "/v1/number-pool/{id}", tag = "numbers", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Agents reference the pool"), (status = 500, body = ErrorBody)))]
async fn delete_pool(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let p = visible_pool(&state, &auth, &id).await?;
    match state.store.pool_delete(&p.sid).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::Conflict(_)) => {
            let (ids, total) = state
                .store
                .agents_referencing(AgentRef::Pool, &p.sid, CONFLICT_AGENTS_LISTED)
                .await?;
            Err(in_use("number_pool", ids, total))
        }
        Err(StoreError::NotFound) => Err(ApiError::not_found("number_pool")),
        Err(e) => Err(e.into()),
    }
}
