//! Phone numbers of an account (the caller ids agents dial from), with filtering,
//! search, ordering and `include=pool`.

use std::collections::BTreeMap;

use axum::{extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    NameRule,
    owned::{CONFLICT_AGENTS_LISTED, in_use, nullable, parse_include, sees_row},
    pools::NumberPool,
    users::SortOrder,
    views::Status,
};
use crate::api::caller::{Authz, Caller};
use crate::{
    api::{
        ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query, comma_list,
    },
    auth::cap,
    store::{AccountRecord, AgentRef, NumberFilter, NumberPatch, NumberRecord, StoreError},
    usecases::{NewNumberInput, check_identifier, non_blank, number_write_error},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_number, list_numbers))
        .routes(routes!(get_number, patch_number, delete_number))
}

/// A phone number of an account.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Number {
    /// `num_` prefixed.
    pub id: String,
    pub account_sid: String,
    /// The number itself: an optional `+` and 1–32 digits; unique within the account, and
    /// active in one account of the whole service at a time (compared without a leading
    /// `+` or `00`).
    pub identifier: String,
    /// Free label.
    pub name: String,
    /// The pool the number belongs to, if any.
    pub pool_sid: Option<String>,
    /// Name of the tenant's SIP trunk outbound calls from this number leave through
    /// (the SIP layer routes by it); null uses the engine's default trunk.
    pub trunk: Option<String>,
    /// An inactive number is never dialed from and never answers inbound calls.
    pub status: Status,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&NumberRecord> for Number {
    fn from(n: &NumberRecord) -> Self {
        Number {
            id: n.sid.clone(),
            account_sid: n.account_sid.clone(),
            identifier: n.identifier.clone(),
            name: n.name.clone(),
            pool_sid: n.pool_sid.clone(),
            trunk: n.trunk.clone(),
            status: Status::parse(&n.status),
            created_at: n.created_at,
            updated_at: n.updated_at,
        }
    }
}

/// Body of POST /v1/number.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateNumber {
    /// An optional `+` and 1–32 digits; unique within the account. An active number's
    /// identifier must not be active in any account (409 `identifier_active`).
    pub identifier: String,
    /// Free label (default empty).
    #[serde(default)]
    pub name: Option<String>,
    /// A pool of the same account.
    #[serde(default)]
    pub pool_sid: Option<String>,
    /// Name of a live trunk of the account's tenant.
    #[serde(default)]
    pub trunk: Option<String>,
    /// Default active.
    #[serde(default)]
    pub status: Option<Status>,
}

/// Body of PATCH /v1/number/{id}; omitted fields keep their value, null clears
/// `pool_sid` / `trunk`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchNumber {
    pub identifier: Option<String>,
    pub name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub pool_sid: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub trunk: Option<Option<String>>,
    pub status: Option<Status>,
}

/// Sort column of GET /v1/number.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum NumberOrderBy {
    #[default]
    CreatedAt,
    Name,
    Identifier,
}

/// Query of GET /v1/number.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct NumberListQuery {
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// Only numbers of this account. A superuser or tenant key that sends no
    /// X-Account-Sid may name the account here instead (same scope rules).
    #[serde(default)]
    pub account_sid: Option<String>,
    #[serde(default)]
    pub status: Option<Status>,
    /// Exact identifier.
    #[serde(default)]
    pub identifier: Option<String>,
    /// Only numbers of this pool.
    #[serde(default)]
    pub pool_sid: Option<String>,
    /// Comma-separated fields OR-searched for `filter_query`: `identifier`, `name`
    /// (substring, case-insensitive in every script). Default both when `filter_query` is set.
    #[serde(default)]
    #[param(pattern = "^ *(?:identifier|name)? *(?:, *(?:identifier|name)? *)*$")]
    pub filter_or: Option<String>,
    /// Search term for `filter_or`.
    #[serde(default)]
    pub filter_query: Option<String>,
    /// created_at (default), name or identifier.
    #[serde(default)]
    pub order_by: Option<NumberOrderBy>,
    /// asc or desc (default).
    #[serde(default)]
    pub order: Option<SortOrder>,
    /// Comma-separated relations to resolve into `included`: `pool` (→ `included.pools`
    /// keyed by pool id). Any other name is 400.
    #[serde(default)]
    #[param(pattern = "^ *(?:pool)? *(?:, *(?:pool)? *)*$")]
    pub include: Option<String>,
}

/// Relations `include` resolves.
const INCLUDES: &[(&str, &str)] = &[("pool", "pool")];
/// Fields `filter_or` searches (name, column).
const SEARCH_FIELDS: &[(&str, &str)] = &[("identifier", "identifier"), ("name", "name")];

/// The number addressed by a path id, or 404 when absent or outside the caller's scope.
async fn visible_number(state: &AppState, caller: &Caller, id: &str) -> ApiResult<NumberRecord> {
    match state.store.number_get(id).await? {
        Some(n) if sees_row(state, caller, &n.account_sid, &n.tenant_sid).await? => Ok(n),
        _ => Err(ApiError::not_found("number")),
    }
}

/// Create a number in the account in scope.
#[utoipa::path(post, path = "/v1/number", tag = "numbers", request_body = CreateNumber, params(("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 201, body = Number), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "`identifier_active`: the number is active, with this identifier or another spelling of it, in this or another account (a number is active in one account at a time)"),
        (status = 422, body = ErrorBody, description = "Invalid or taken identifier, unknown pool or trunk (`unknown_trunk`: no live trunk of the tenant; `trunk_not_configured`: no `[[sip.trunks]]` of the node has the name)"),
        (status = 500, body = ErrorBody)))]
async fn create_number(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Json(b): Json<CreateNumber>,
) -> ApiResult<(StatusCode, Json<Number>)> {
    let account = auth.account_scope(&state).await?;
    let n = state.ops().create_number(&account, b.into()).await?;
    Ok((StatusCode::CREATED, Json(Number::from(&n))))
}

impl From<CreateNumber> for NewNumberInput {
    fn from(b: CreateNumber) -> Self {
        NewNumberInput {
            identifier: b.identifier,
            name: b.name,
            pool_sid: b.pool_sid,
            trunk: b.trunk,
            status: b.status,
        }
    }
}

/// The account a number list reads: the usual X-Account-Sid rules, where a principal
/// broader than one account may declare the account with the `account_sid` filter
/// instead of the header.
async fn list_account(
    state: &AppState,
    caller: &Caller,
    filter: Option<&str>,
) -> ApiResult<AccountRecord> {
    if caller.header_account.is_none()
        && caller.principal.account_sid().is_none()
        && let Some(a) = filter
    {
        let mut declared = caller.clone();
        declared.header_account = Some(a.to_string());
        return declared.account_scope(state).await;
    }
    caller.account_scope(state).await
}

/// List numbers of the account in scope: filters (AND), OR-search over identifier and
/// name, ordering, and `include=pool`.
#[utoipa::path(get, path = "/v1/number", tag = "numbers", params(NumberListQuery, ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Page<Number>, description = "Numbers; with include=pool, `included.pools` maps pool id to NumberPool"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn list_numbers(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<NumberListQuery>,
) -> ApiResult<Json<Page<Number>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let include = parse_include(q.include.as_deref(), INCLUDES)?;
    let mut search_fields =
        comma_list::parse(q.filter_or.as_deref(), SEARCH_FIELDS).map_err(|part| {
            ApiError::bad_request(
                "invalid_query",
                format!(
                    "filter_or: unknown field {part:?} (accepted: {})",
                    comma_list::names(SEARCH_FIELDS)
                ),
            )
        })?;
    if search_fields.is_empty() {
        search_fields = vec!["identifier", "name"];
    }
    let account = list_account(&state, &auth, q.account_sid.as_deref()).await?;
    let mut out = if q.account_sid.as_deref().is_some_and(|a| a != account.sid) {
        Page::new(Vec::new(), 0, page)
    } else {
        let filter = NumberFilter {
            status: q.status.map(|s| s.as_str().to_string()),
            identifier: q.identifier.clone(),
            pool_sid: q.pool_sid.clone(),
            search_fields,
            query: q.filter_query.clone(),
            order_by: match q.order_by.unwrap_or_default() {
                NumberOrderBy::CreatedAt => "created_at",
                NumberOrderBy::Name => "name",
                NumberOrderBy::Identifier => "identifier",
            },
            descending: matches!(q.order.unwrap_or_default(), SortOrder::Desc),
        };
        let (rows, total) = state
            .store
            .number_list(&account.sid, &filter, page.limit, page.offset)
            .await?;
        Page::new(rows.iter().map(Number::from).collect(), total, page)
    };
    if include.contains(&"pool") {
        let mut wanted: Vec<String> = out
            .items
            .iter()
            .filter_map(|n| n.pool_sid.clone())
            .collect();
        wanted.sort();
        wanted.dedup();
        let mut pools = BTreeMap::new();
        // Only pools of the account in scope resolve; anything else stays a bare sid.
        for p in state.store.pools_of_account(&account.sid, &wanted).await? {
            let v = serde_json::to_value(NumberPool::from(&p)).map_err(ApiError::internal)?;
            pools.insert(p.sid.clone(), v);
        }
        out.included = Some(BTreeMap::from([("pools".to_string(), pools)]));
    }
    Ok(Json(out))
}

/// Get a number.
#[utoipa::path(get, path = "/v1/number/{id}", tag = "numbers", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Number), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn get_number(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Json<Number>> {
    Ok(Json(Number::from(
        &visible_number(&state, &auth, &id).await?,
    )))
}

/// Update a number; omitted fields keep their value, null clears pool_sid / trunk.
#[utoipa::path(patch, path = "/v1/number/{id}", tag = "numbers", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    request_body = PatchNumber, security(("bearer" = [])),
    responses((status = 200, body = Number), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "`identifier_active`: the number would be active while another number with its identifier (in any spelling) is active, in this or another account"),
        (status = 422, body = ErrorBody, description = "Invalid or taken identifier, unknown pool or trunk (`unknown_trunk`, `trunk_not_configured` as on create)"), (status = 500, body = ErrorBody)))]
async fn patch_number(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
    Json(b): Json<PatchNumber>,
) -> ApiResult<Json<Number>> {
    let n = visible_number(&state, &auth, &id).await?;
    let ops = state.ops();
    let identifier = b.identifier.as_deref().map(check_identifier).transpose()?;
    let pool_sid = b.pool_sid.map(non_blank);
    if let Some(Some(p)) = &pool_sid {
        ops.check_number_pool(&n.account_sid, p).await?;
    }
    let trunk = b.trunk.map(non_blank);
    if let Some(Some(t)) = &trunk {
        ops.check_number_trunk(&n.tenant_sid, t).await?;
    }
    let patch = NumberPatch {
        identifier,
        name: b
            .name
            .as_deref()
            .map(|n| NameRule::FREE_NAME.check("name", n))
            .transpose()?,
        pool_sid,
        trunk,
        status: b.status.map(|s| s.as_str().to_string()),
    };
    state
        .store
        .number_update(&n.sid, &patch)
        .await
        .map(|n| Json(Number::from(&n)))
        .map_err(|e| number_write_error(e).into())
}

/// Delete a number. 409 while agents dial through it (`data.agents` lists the first 20,
/// the message the total).
#[utoipa::path(delete, path = "/v1/number/{id}", tag = "numbers", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Agents reference the number"), (status = 500, body = ErrorBody)))]
async fn delete_number(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let n = visible_number(&state, &auth, &id).await?;
    match state.store.number_delete(&n.sid).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::Conflict(_)) => {
            let (ids, total) = state
                .store
                .agents_referencing(AgentRef::Number, &n.sid, CONFLICT_AGENTS_LISTED)
                .await?;
            Err(in_use("number", ids, total))
        }
        Err(StoreError::NotFound) => Err(ApiError::not_found("number")),
        Err(e) => Err(e.into()),
    }
}
