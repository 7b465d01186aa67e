//! Agents: dial through a gateway (one number or one pool), run a scenario, within a
//! calling schedule and limits, and deliver results to target URLs. Rules and field
//! meanings: docs/agents.md.

use axum::{extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    owned::{nullable, sees_row},
    users::SortOrder,
};
use crate::api::caller::{Authz, Caller};
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    store::{AgentFilter, AgentRecord},
    usecases::{AgentDraft, NewAgent},
};

pub use crate::agent_settings::{
    AgentSms, CommunicationResult, GatewayType, Limits, Schedule, Status,
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_agent, list_agents))
        .routes(routes!(get_agent, patch_agent, delete_agent))
        .routes(routes!(archive_agent))
        .routes(routes!(unarchive_agent))
}

/// An agent.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Agent {
    /// `agt_` prefixed.
    pub id: String,
    pub account_sid: String,
    pub gateway_type: GatewayType,
    pub number_sid: Option<String>,
    pub number_pool_sid: Option<String>,
    pub scenario_sid: String,
    /// Answering-machine detection: run the outbound_call brick's voicemail branch.
    pub voicemail_enabled: bool,
    pub call_recording: bool,
    pub calling_schedule: Schedule,
    /// IANA time zone of the schedule and the scenario's time variables.
    pub timezone: String,
    pub limits: Limits,
    pub is_test: bool,
    pub communication_result: CommunicationResult,
    /// The agent's SMS settings; the empty settings (`provider_sid` empty) when it sends
    /// no SMS. Never null.
    pub sms: AgentSms,
    /// The communication strategy a dispatch through this agent follows when it names
    /// none (docs/strategies.md); null: none.
    pub strategy_sid: Option<String>,
    pub status: Status,
    /// Set while archived (an archived agent never dials).
    pub archive_time: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&AgentRecord> for Agent {
    fn from(a: &AgentRecord) -> Self {
        let d = AgentDraft::of(a);
        Agent {
            id: a.sid.clone(),
            account_sid: a.account_sid.clone(),
            gateway_type: d.gateway_type,
            number_sid: d.number_sid,
            number_pool_sid: d.number_pool_sid,
            scenario_sid: d.scenario_sid,
            voicemail_enabled: d.voicemail_enabled,
            call_recording: d.call_recording,
            calling_schedule: d.calling_schedule,
            timezone: d.timezone,
            limits: d.limits,
            is_test: d.is_test,
            communication_result: d.communication_result,
            sms: d.sms.unwrap_or_default(),
            strategy_sid: d.strategy_sid,
            status: d.status,
            archive_time: a.archive_time,
            created_at: a.created_at,
            updated_at: a.updated_at,
        }
    }
}

/// Body of POST /v1/agent.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAgent {
    pub gateway_type: GatewayType,
    /// Required (and only allowed) with gateway_type number.
    #[serde(default)]
    pub number_sid: Option<String>,
    /// Required (and only allowed) with gateway_type number_pool.
    #[serde(default)]
    pub number_pool_sid: Option<String>,
    pub scenario_sid: String,
    #[serde(default)]
    pub voicemail_enabled: Option<bool>,
    #[serde(default)]
    pub call_recording: Option<bool>,
    /// Default `{"strategy": "always", "args": {}}`.
    #[serde(default)]
    pub calling_schedule: Option<Schedule>,
    /// Default: the account's timezone.
    #[serde(default)]
    pub timezone: Option<String>,
    /// Default cps 1, cpl 10.
    #[serde(default)]
    pub limits: Option<Limits>,
    #[serde(default)]
    pub is_test: Option<bool>,
    #[serde(default)]
    pub communication_result: Option<CommunicationResult>,
    /// Omitted, null or the empty settings: the agent sends no SMS.
    #[serde(default)]
    pub sms: Option<AgentSms>,
    /// Default communication strategy of the account (a `stg_` id); absent or null: none.
    #[serde(default)]
    pub strategy_sid: Option<String>,
    #[serde(default)]
    pub status: Option<Status>,
}

impl From<CreateAgent> for NewAgent {
    fn from(b: CreateAgent) -> Self {
        NewAgent {
            gateway_type: b.gateway_type,
            number_sid: b.number_sid,
            number_pool_sid: b.number_pool_sid,
            scenario_sid: b.scenario_sid,
            voicemail_enabled: b.voicemail_enabled,
            call_recording: b.call_recording,
            calling_schedule: b.calling_schedule,
            timezone: b.timezone,
            limits: b.limits,
            is_test: b.is_test,
            communication_result: b.communication_result,
            sms: b.sms,
            strategy_sid: b.strategy_sid,
            status: b.status,
        }
    }
}

/// Body of PATCH /v1/agent/{id}: omitted fields keep their value; null clears
/// number_sid, number_pool_sid or sms (as do the empty sms settings). The merged agent is
/// checked whole.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchAgent {
    pub gateway_type: Option<GatewayType>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub number_sid: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub number_pool_sid: Option<Option<String>>,
    pub scenario_sid: Option<String>,
    pub voicemail_enabled: Option<bool>,
    pub call_recording: Option<bool>,
    pub calling_schedule: Option<Schedule>,
    pub timezone: Option<String>,
    pub limits: Option<Limits>,
    pub is_test: Option<bool>,
    pub communication_result: Option<CommunicationResult>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<AgentSms>)]
    pub sms: Option<Option<AgentSms>>,
    /// null clears the default strategy.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub strategy_sid: Option<Option<String>>,
    pub status: Option<Status>,
}

/// Query of GET /v1/agent.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AgentListQuery {
    #[serde(default)]
    pub status: Option<Status>,
    #[serde(default)]
    pub scenario_sid: Option<String>,
    #[serde(default)]
    pub gateway_type: Option<GatewayType>,
    #[serde(default)]
    pub number_sid: Option<String>,
    #[serde(default)]
    pub number_pool_sid: Option<String>,
    /// Omitted: live agents only; true: archived only; false: both.
    #[serde(default)]
    pub archived: Option<bool>,
    /// By created_at; desc (default) or asc.
    #[serde(default)]
    pub order: Option<SortOrder>,
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// The agent addressed by a path id, or 404 when absent or outside the caller's scope.
async fn visible_agent(state: &AppState, caller: &Caller, id: &str) -> ApiResult<AgentRecord> {
    match state.store.agent_get(id).await? {
        Some(a) if sees_row(state, caller, &a.account_sid, &a.tenant_sid).await? => Ok(a),
        _ => Err(ApiError::not_found("agent")),
    }
}

/// Create an agent in the account in scope.
#[utoipa::path(post, path = "/v1/agent", tag = "agents", request_body = CreateAgent, params(("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 201, body = Agent), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "Gateway, scenario, timezone, schedule, limits, targets, SMS or strategy (`unknown_strategy`) rule violated"),
        (status = 500, body = ErrorBody)))]
async fn create_agent(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Json(b): Json<CreateAgent>,
) -> ApiResult<(StatusCode, Json<Agent>)> {
    let account = auth.account_scope(&state).await?;
    let a = state.ops().create_agent(&account, b.into()).await?;
    Ok((StatusCode::CREATED, Json(Agent::from(&a))))
}

/// List the agents of the account in scope.
#[utoipa::path(get, path = "/v1/agent", tag = "agents", params(AgentListQuery, ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Page<Agent>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_agents(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<AgentListQuery>,
) -> ApiResult<Json<Page<Agent>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let account = auth.account_scope(&state).await?;
    let f = AgentFilter {
        status: q.status.map(|s| s.as_str().to_string()),
        scenario_sid: q.scenario_sid,
        gateway_type: q.gateway_type.map(|g| g.as_str().to_string()),
        number_sid: q.number_sid,
        number_pool_sid: q.number_pool_sid,
        archived: q.archived,
        descending: matches!(q.order.unwrap_or_default(), SortOrder::Desc),
    };
    let (rows, total) = state
        .store
        .agent_list(&account.sid, &f, page.limit, page.offset)
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(Agent::from).collect(),
        total,
        page,
    )))
}

/// Get an agent.
#[utoipa::path(get, path = "/v1/agent/{id}", tag = "agents", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Agent), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn get_agent(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Json<Agent>> {
    Ok(Json(Agent::from(&visible_agent(&state, &auth, &id).await?)))
}

/// Update an agent; the merged agent is checked by the same rules as a new one.
#[utoipa::path(patch, path = "/v1/agent/{id}", tag = "agents", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    request_body = PatchAgent, security(("bearer" = [])),
    responses((status = 200, body = Agent), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn patch_agent(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
    Json(b): Json<PatchAgent>,
) -> ApiResult<Json<Agent>> {
    let cur = visible_agent(&state, &auth, &id).await?;
    let Some(account) = state.store.account_get(&cur.account_sid).await? else {
        return Err(ApiError::not_found("agent"));
    };
    let v = AgentDraft::of(&cur);
    let d = AgentDraft {
        gateway_type: b.gateway_type.unwrap_or(v.gateway_type),
        number_sid: b.number_sid.unwrap_or(v.number_sid),
        number_pool_sid: b.number_pool_sid.unwrap_or(v.number_pool_sid),
        scenario_sid: b.scenario_sid.unwrap_or(v.scenario_sid),
        voicemail_enabled: b.voicemail_enabled.unwrap_or(v.voicemail_enabled),
        call_recording: b.call_recording.unwrap_or(v.call_recording),
        calling_schedule: b.calling_schedule.unwrap_or(v.calling_schedule),
        timezone: b
            .timezone
            .map(|t| t.trim().to_string())
            .unwrap_or(v.timezone),
        limits: b.limits.unwrap_or(v.limits),
        is_test: b.is_test.unwrap_or(v.is_test),
        communication_result: b.communication_result.unwrap_or(v.communication_result),
        sms: b.sms.unwrap_or(v.sms),
        strategy_sid: b.strategy_sid.unwrap_or(v.strategy_sid),
        status: b.status.unwrap_or(v.status),
    };
    let a = state.ops().update_agent(&account, &cur.sid, d).await?;
    Ok(Json(Agent::from(&a)))
}

/// Delete an agent.
#[utoipa::path(delete, path = "/v1/agent/{id}", tag = "agents", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn delete_agent(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let a = visible_agent(&state, &auth, &id).await?;
    state.store.agent_delete(&a.sid).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Archive an agent: sets archive_time (kept if already archived); it stops dialing.
#[utoipa::path(post, path = "/v1/agent/{id}/archive", tag = "agents", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Agent), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn archive_agent(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<Json<Agent>> {
    let a = visible_agent(&state, &auth, &id).await?;
    if a.archive_time.is_some() {
        return Ok(Json(Agent::from(&a)));
    }
    let a = state
        .store
        .agent_set_archive(&a.sid, Some(crate::store::now()))
        .await?;
    Ok(Json(Agent::from(&a)))
}

/// Restore an archived agent (archive_time becomes null).
#[utoipa::path(post, path = "/v1/agent/{id}/unarchive", tag = "agents", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Agent), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn unarchive_agent(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<Json<Agent>> {
    let a = visible_agent(&state, &auth, &id).await?;
    let a = state.store.agent_set_archive(&a.sid, None).await?;
    Ok(Json(Agent::from(&a)))
}
