//! Scenarios, their work-in-progress draft, publishing and version records.
//!
//! * PUT /v1/scenario/{id}/draft rewrites the draft (draft_version 0); it stays mutable
//!   and may be invalid while being designed.
//! * POST /v1/scenario/{id}/publish validates the draft (SCN1xx entries in a 422 with
//!   `data.errors.scenario`) and records it as the next immutable published version;
//!   publishing content identical to the newest version returns that version (200).
//! * Test calls freeze the draft into draft_version ≥ 1 ([`crate::store::Store::freeze_draft`]).

use axum::{extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    NameRule,
    owned::{CONFLICT_AGENTS_LISTED, in_use, sees_row},
    users::SortOrder,
};
use crate::api::caller::{Authz, Caller};
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    store::{AgentRef, ScenarioRecord, ScenarioVersionRecord, StoreError, VersionAxis},
    usecases::{NewScenario, check_description, snapshot_of},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_scenario, list_scenarios))
        .routes(routes!(get_scenario, patch_scenario, delete_scenario))
        .routes(routes!(save_draft))
        .routes(routes!(publish_scenario))
        .routes(routes!(validate_scenario))
        .routes(routes!(list_versions))
        .routes(routes!(version_by_scenario))
        .routes(routes!(get_version))
}

/// A scenario (the versioned content lives in its version records).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Scenario {
    /// `scn_` prefixed.
    pub id: String,
    pub account_sid: String,
    pub name: String,
    pub description: String,
    /// Newest published version; null before the first publish.
    pub latest_version: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&ScenarioRecord> for Scenario {
    fn from(r: &ScenarioRecord) -> Self {
        Scenario {
            id: r.sid.clone(),
            account_sid: r.account_sid.clone(),
            name: r.name.clone(),
            description: r.description.clone(),
            latest_version: r.latest_version,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// A scenario version record: exactly one of `version` (published) and
/// `draft_version` (draft: 0 = work in progress, ≥ 1 frozen) is set.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ScenarioVersion {
    /// `scv_` prefixed.
    pub id: String,
    pub scenario_sid: String,
    pub version: Option<i64>,
    pub draft_version: Option<i64>,
    /// Lower-case hex SHA-256 of the canonical JSON of `snapshot`.
    pub content_hash: String,
    /// `{name, constructor: {bricks: {<kind>: {v1: [...]}}}}` (docs/bricks.md).
    #[schema(value_type = Object)]
    pub snapshot: serde_json::Value,
    pub created_at: DateTime<Utc>,
    /// Changes only on draft 0.
    pub updated_at: DateTime<Utc>,
}

impl From<&ScenarioVersionRecord> for ScenarioVersion {
    fn from(r: &ScenarioVersionRecord) -> Self {
        ScenarioVersion {
            id: r.sid.clone(),
            scenario_sid: r.scenario_sid.clone(),
            version: r.version,
            draft_version: r.draft_version,
            content_hash: r.content_hash.clone(),
            snapshot: r.snapshot_value(),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Body of POST /v1/scenario.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateScenario {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Initial draft content (default `{"bricks": {}}`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub constructor: Option<serde_json::Map<String, serde_json::Value>>,
}

impl From<CreateScenario> for NewScenario {
    fn from(b: CreateScenario) -> Self {
        NewScenario {
            name: b.name,
            description: b.description,
            constructor: b.constructor,
        }
    }
}

/// Body of PATCH /v1/scenario/{id}.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchScenario {
    pub name: Option<String>,
    pub description: Option<String>,
}

/// Body of PUT /v1/scenario/{id}/draft: the whole draft snapshot.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DraftBody {
    pub name: String,
    #[schema(value_type = Object)]
    pub constructor: serde_json::Map<String, serde_json::Value>,
}

/// Result of POST /v1/scenario/{id}/validate.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ValidationReport {
    /// True when `errors` is empty: the draft can be published and called.
    pub valid: bool,
    /// SCN1xx errors (docs/scenario-codes.md): each refuses a publish and a test call.
    #[schema(value_type = Vec<Object>)]
    pub errors: Vec<callsmith_scenarios::ScenarioError>,
    /// SCN1xx warnings, entries of the same shape (docs/scenario-codes.md, e.g. SCN127 a
    /// variable no brick sets): likely mistakes that refuse nothing.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub warnings: Vec<callsmith_scenarios::ScenarioError>,
}

/// Sort column of GET /v1/scenario.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum ScenarioOrderBy {
    #[default]
    CreatedAt,
    Name,
}

/// Query of GET /v1/scenario.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ScenarioListQuery {
    /// Substring of the name, case-insensitive in every script.
    #[serde(default)]
    pub filter_query: Option<String>,
    #[serde(default)]
    pub order_by: Option<ScenarioOrderBy>,
    #[serde(default)]
    pub order: Option<SortOrder>,
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// Which records GET /v1/scenario-version lists.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum AxisFilter {
    #[default]
    All,
    Published,
    Draft,
}

/// Query of GET /v1/scenario-version.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct VersionListQuery {
    pub scenario_sid: String,
    /// all (default), published or draft.
    #[serde(default)]
    pub axis: Option<AxisFilter>,
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// Query of GET /v1/scenario-version/by-scenario.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ByScenarioQuery {
    pub scenario_sid: String,
    /// The published version (draft=false) or the draft_version (draft=true; 0 = the
    /// work-in-progress draft).
    pub version: i64,
    /// Default false.
    #[serde(default)]
    pub draft: Option<bool>,
}

/// The scenario addressed by a path id, or 404 when absent or outside the caller's scope.
pub(crate) async fn visible_scenario(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> ApiResult<ScenarioRecord> {
    match state.store.scenario_get(id).await? {
        Some(s) if sees_row(state, caller, &s.account_sid, &s.tenant_sid).await? => Ok(s),
        _ => Err(ApiError::not_found("scenario")),
    }
}

/// Create a scenario with its draft in the account in scope.
#[utoipa::path(post, path = "/v1/scenario", tag = "scenarios", request_body = CreateScenario, params(("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 201, body = Scenario), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn create_scenario(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Json(b): Json<CreateScenario>,
) -> ApiResult<(StatusCode, Json<Scenario>)> {
    let account = auth.account_scope(&state).await?;
    let s = state.ops().create_scenario(&account, b.into()).await?;
    Ok((StatusCode::CREATED, Json(Scenario::from(&s))))
}

/// List the scenarios of the account in scope.
#[utoipa::path(get, path = "/v1/scenario", tag = "scenarios", params(ScenarioListQuery, ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Page<Scenario>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_scenarios(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<ScenarioListQuery>,
) -> ApiResult<Json<Page<Scenario>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let account = auth.account_scope(&state).await?;
    let order_by = match q.order_by.unwrap_or_default() {
        ScenarioOrderBy::CreatedAt => "created_at",
        ScenarioOrderBy::Name => "name",
    };
    let desc = matches!(q.order.unwrap_or_default(), SortOrder::Desc);
    let (rows, total) = state
        .store
        .scenario_list(
            &account.sid,
            q.filter_query.as_deref(),
            order_by,
            desc,
            page.limit,
            page.offset,
        )
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(Scenario::from).collect(),
        total,
        page,
    )))
}

/// Get a scenario.
#[utoipa::path(get, path = "/v1/scenario/{id}", tag = "scenarios", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Scenario), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn get_scenario(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Json<Scenario>> {
    Ok(Json(Scenario::from(
        &visible_scenario(&state, &auth, &id).await?,
    )))
}

/// Rename or re-describe a scenario (content changes go through the draft).
#[utoipa::path(patch, path = "/v1/scenario/{id}", tag = "scenarios", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    request_body = PatchScenario, security(("bearer" = [])),
    responses((status = 200, body = Scenario), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn patch_scenario(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
    Json(b): Json<PatchScenario>,
) -> ApiResult<Json<Scenario>> {
    let s = visible_scenario(&state, &auth, &id).await?;
    let name = b
        .name
        .as_deref()
        .map(|n| NameRule::NAME.check("name", n))
        .transpose()?;
    let description = b
        .description
        .as_deref()
        .map(check_description)
        .transpose()?;
    let s = state
        .store
        .scenario_update(&s.sid, name.as_deref(), description.as_deref())
        .await?;
    Ok(Json(Scenario::from(&s)))
}

/// Delete a scenario with all its version records. 409 while agents run it
/// (`data.agents` lists the first 20, the message the total).
#[utoipa::path(delete, path = "/v1/scenario/{id}", tag = "scenarios", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Agents reference the scenario"), (status = 500, body = ErrorBody)))]
async fn delete_scenario(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let s = visible_scenario(&state, &auth, &id).await?;
    match state.store.scenario_delete(&s.sid).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::Conflict(_)) => {
            let (ids, total) = state
                .store
                .agents_referencing(AgentRef::Scenario, &s.sid, CONFLICT_AGENTS_LISTED)
                .await?;
            Err(in_use("scenario", ids, total))
        }
        Err(StoreError::NotFound) => Err(ApiError::not_found("scenario")),
        Err(e) => Err(e.into()),
    }
}

/// Save the work-in-progress draft (draft_version 0); not validated, stays mutable.
#[utoipa::path(put, path = "/v1/scenario/{id}/draft", tag = "scenarios", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    request_body = DraftBody, security(("bearer" = [])),
    responses((status = 200, body = ScenarioVersion), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn save_draft(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
    Json(b): Json<DraftBody>,
) -> ApiResult<Json<ScenarioVersion>> {
    let s = visible_scenario(&state, &auth, &id).await?;
    let (text, hash) = snapshot_of(&b.name, b.constructor);
    let v = state
        .store
        .scenario_draft_save(&s.sid, &text, &hash)
        .await?;
    Ok(Json(ScenarioVersion::from(&v)))
}

/// Validate the draft and record it as the next published version (201). Content
/// identical to the newest published version returns that version (200). 422 with
/// every SCN1xx problem in `data.errors.scenario` when the draft is invalid.
#[utoipa::path(post, path = "/v1/scenario/{id}/publish", tag = "scenarios", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 201, body = ScenarioVersion, description = "New published version"),
        (status = 200, body = ScenarioVersion, description = "Unchanged since the newest published version"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Concurrent publishers kept taking the version number; safe to repeat"),
        (status = 422, body = ErrorBody, description = "Validation errors in data.errors.scenario"), (status = 500, body = ErrorBody)))]
async fn publish_scenario(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<ScenarioVersion>)> {
    let s = visible_scenario(&state, &auth, &id).await?;
    let (v, created) = state.ops().publish_draft(&s).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(ScenarioVersion::from(&v))))
}

/// Validate the draft without publishing.
#[utoipa::path(post, path = "/v1/scenario/{id}/validate", tag = "scenarios", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = ValidationReport), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn validate_scenario(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Json<ValidationReport>> {
    let s = visible_scenario(&state, &auth, &id).await?;
    let report = state.ops().validate_draft(&s).await?;
    Ok(Json(ValidationReport {
        valid: report.errors.is_empty(),
        errors: report.errors,
        warnings: report.warnings,
    }))
}

/// List a scenario's version records: published newest first, then drafts (frozen
/// newest first, draft 0 last).
#[utoipa::path(get, path = "/v1/scenario-version", tag = "scenarios", params(VersionListQuery, ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Page<ScenarioVersion>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_versions(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<VersionListQuery>,
) -> ApiResult<Json<Page<ScenarioVersion>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let s = visible_scenario(&state, &auth, &q.scenario_sid).await?;
    let axis = match q.axis.unwrap_or_default() {
        AxisFilter::All => VersionAxis::All,
        AxisFilter::Published => VersionAxis::Published,
        AxisFilter::Draft => VersionAxis::Draft,
    };
    let (rows, total) = state
        .store
        .scenario_version_list(&s.sid, axis, page.limit, page.offset)
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(ScenarioVersion::from).collect(),
        total,
        page,
    )))
}

/// A version record by scenario and axis number.
#[utoipa::path(get, path = "/v1/scenario-version/by-scenario", tag = "scenarios", params(ByScenarioQuery, ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = ScenarioVersion), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn version_by_scenario(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<ByScenarioQuery>,
) -> ApiResult<Json<ScenarioVersion>> {
    let s = visible_scenario(&state, &auth, &q.scenario_sid).await?;
    match state
        .store
        .scenario_version_by_axis(&s.sid, q.version, q.draft.unwrap_or(false))
        .await?
    {
        Some(v) => Ok(Json(ScenarioVersion::from(&v))),
        None => Err(ApiError::not_found("scenario_version")),
    }
}

/// A version record by id.
#[utoipa::path(get, path = "/v1/scenario-version/{id}", tag = "scenarios", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = ScenarioVersion), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn get_version(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Json<ScenarioVersion>> {
    let Some(v) = state.store.scenario_version_get(&id).await? else {
        return Err(ApiError::not_found("scenario_version"));
    };
    match visible_scenario(&state, &auth, &v.scenario_sid).await {
        Ok(_) => Ok(Json(ScenarioVersion::from(&v))),
        Err(_) => Err(ApiError::not_found("scenario_version")),
    }
}
