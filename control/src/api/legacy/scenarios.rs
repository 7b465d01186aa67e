//! Legacy scenarios (`/v1/scenarios`): the legacy view of the account's v1 scenarios (same
//! rows, same sids). A legacy create is the v1 create followed by the v1 publish, so the
//! scenario a campaign is created with is ready to dial.

use super::*;
use crate::{store::ScenarioRecord, usecases::NewScenario};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_scenarios, create_scenario))
        .routes(routes!(get_scenario))
}

/// Legacy scenario record: a v1 scenario (`scn_…`, the same resource on
/// GET /v1/scenario/{id}).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LegacyScenario {
    pub sid: String,
    pub account_sid: String,
    pub name: String,
    /// "" when none was given.
    pub description: String,
    /// Newest published version; 0 before the first publish (a scenario made on the v1
    /// routes may have none).
    pub version: i64,
    pub creation_time: DateTime<Utc>,
    pub update_time: DateTime<Utc>,
}

impl From<&ScenarioRecord> for LegacyScenario {
    fn from(s: &ScenarioRecord) -> Self {
        LegacyScenario {
            sid: s.sid.clone(),
            account_sid: s.account_sid.clone(),
            name: s.name.clone(),
            description: s.description.clone(),
            version: s.latest_version.unwrap_or(0),
            creation_time: s.created_at,
            update_time: s.updated_at,
        }
    }
}

/// Body of POST /v1/scenarios: as POST /v1/scenario; the content is published at once.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateLegacyScenario {
    /// The scenario's name (the v1 name rule: trimmed, no control characters).
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The voice-bot algorithm: `{"bricks": {<kind>: {"v1": [...]}}}` (docs/bricks.md).
    #[schema(value_type = Object)]
    pub constructor: serde_json::Map<String, serde_json::Value>,
}

/// Create a scenario and publish it as version 1: the v1 create (name rule) and the v1
/// publish (every SCN1xx check). When the content is invalid nothing is kept and the
/// message lists the SCN1xx entries.
#[utoipa::path(post, path = "/v1/scenarios", tag = "legacy", request_body = CreateLegacyScenario, security(("basic" = [])),
    responses((status = 200, body = LegacyScenario, description = "The created, published scenario"),
        (status = 400, body = RpcStatus, description = "Malformed body, a bad name, or invalid content (SCN1xx entries in the message; reason `scenario_invalid`)"),
        (status = 401, body = RpcStatus), (status = 500, body = RpcStatus)))]
async fn create_scenario(
    State(state): State<AppState>,
    who: LegacyAccount,
    b: Result<axum::Json<CreateLegacyScenario>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<LegacyScenario>, LegacyError> {
    let b = body(b)?;
    let account = state
        .store
        .account_get(&who.account_sid)
        .await?
        .ok_or_else(LegacyError::unauthenticated)?;
    let ops = state.ops();
    let s = ops
        .create_scenario(
            &account,
            NewScenario {
                name: b.name,
                description: Some(b.description),
                constructor: Some(b.constructor),
            },
        )
        .await?;
    if let Err(e) = ops.publish_draft(&s).await {
        // Nothing half-made stays behind.
        let _ = state.store.scenario_delete(&s.sid).await;
        return Err(e.into());
    }
    let s = state
        .store
        .scenario_get(&s.sid)
        .await?
        .ok_or_else(LegacyError::internal)?;
    Ok(axum::Json(LegacyScenario::from(&s)))
}

/// Query of GET /v1/scenarios: strings, as GET /v1/campaign's; an empty value is the same
/// as an absent one.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ScenarioListQuery {
    /// Page size (int64): absent or 0 → 100, at most 500.
    #[serde(rename = "options.limit")]
    pub options_limit: Option<String>,
    /// Scenarios skipped (int64), default 0.
    #[serde(rename = "options.offset")]
    pub options_offset: Option<String>,
    /// Flat form of options.limit.
    pub limit: Option<String>,
    /// Flat form of options.offset.
    pub offset: Option<String>,
    /// Substring of the name, case-insensitive in every script.
    pub filter_query: Option<String>,
}

/// List the account's scenarios, newest first. 200 returns an array.
#[utoipa::path(get, path = "/v1/scenarios", tag = "legacy", params(ScenarioListQuery), security(("basic" = [])),
    responses((status = 200, body = Vec<LegacyScenario>), (status = 400, body = RpcStatus), (status = 401, body = RpcStatus),
        (status = 500, body = RpcStatus)))]
async fn list_scenarios(
    State(state): State<AppState>,
    who: LegacyAccount,
    q: Result<axum::extract::Query<ScenarioListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<axum::Json<Vec<LegacyScenario>>, LegacyError> {
    let q = query(q)?;
    let (limit, offset) = page(q.options_limit, q.limit, q.options_offset, q.offset)?;
    let (rows, _) = state
        .store
        .scenario_list(
            &who.account_sid,
            pick(None, q.filter_query).as_deref(),
            "created_at",
            true,
            limit,
            offset,
        )
        .await?;
    Ok(axum::Json(rows.iter().map(LegacyScenario::from).collect()))
}

/// Get a scenario of the account; another account's reads as absent.
#[utoipa::path(get, path = "/v1/scenarios/{scenario_id}", tag = "legacy", params(("scenario_id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = LegacyScenario), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus),
        (status = 500, body = RpcStatus)))]
async fn get_scenario(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(scenario_id): axum::extract::Path<String>,
) -> Result<axum::Json<LegacyScenario>, LegacyError> {
    let s = state
        .store
        .scenario_get(&scenario_id)
        .await?
        .filter(|s| s.account_sid == who.account_sid)
        .ok_or_else(|| LegacyError::not_found("scenario"))?;
    Ok(axum::Json(LegacyScenario::from(&s)))
}
