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
    views::Status,
};
use crate::api::caller::{Authz, Caller};
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    ids::{new_sid, prefix},
    schedule::{CallingSchedule, parse_timezone},
    store::{AccountRecord, AgentConfig, AgentFilter, AgentRecord},
};

pub use crate::agent_settings::{AgentSms, CommunicationResult, Limits, Schedule};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_agent, list_agents))
        .routes(routes!(get_agent, patch_agent, delete_agent))
        .routes(routes!(archive_agent))
        .routes(routes!(unarchive_agent))
}

/// `number` or `number_pool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum GatewayType {
    Number,
    NumberPool,
}

impl GatewayType {
    fn as_str(self) -> &'static str {
        match self {
            GatewayType::Number => "number",
            GatewayType::NumberPool => "number_pool",
        }
    }
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
        Agent {
            id: a.sid.clone(),
            account_sid: a.account_sid.clone(),
            gateway_type: if a.gateway_type == "number_pool" {
                GatewayType::NumberPool
            } else {
                GatewayType::Number
            },
            number_sid: a.number_sid.clone(),
            number_pool_sid: a.number_pool_sid.clone(),
            scenario_sid: a.scenario_sid.clone(),
            voicemail_enabled: a.voicemail_enabled,
            call_recording: a.call_recording,
            calling_schedule: serde_json::from_str(&a.calling_schedule).unwrap_or(Schedule {
                strategy: "always".into(),
                args: serde_json::json!({}),
            }),
            timezone: a.timezone.clone(),
            limits: Limits {
                cps: a.cps,
                cpl: a.cpl,
            },
            is_test: a.is_test,
            communication_result: serde_json::from_str(&a.communication_result).unwrap_or_default(),
            sms: a
                .sms
                .as_deref()
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or_default(),
            strategy_sid: a.strategy_sid.clone(),
            status: Status::parse(&a.status),
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

/// The merged, not yet checked agent.
struct Draft {
    gateway_type: GatewayType,
    number_sid: Option<String>,
    number_pool_sid: Option<String>,
    scenario_sid: String,
    voicemail_enabled: bool,
    call_recording: bool,
    calling_schedule: Schedule,
    timezone: String,
    limits: Limits,
    is_test: bool,
    communication_result: CommunicationResult,
    sms: Option<AgentSms>,
    strategy_sid: Option<String>,
    status: Status,
}

const MAX_CPS: i64 = 1000;
const MAX_CPL: i64 = 100_000;
const MAX_TARGETS: usize = 10;

fn bad(error: &'static str, message: String) -> ApiError {
    ApiError::unprocessable(error, message)
}

fn blank(v: &Option<String>) -> bool {
    v.as_deref().is_none_or(|s| s.trim().is_empty())
}

/// Checks every rule of docs/agents.md against the account's resources.
async fn check(state: &AppState, account: &AccountRecord, d: Draft) -> ApiResult<AgentConfig> {
    // Gateway: the sid matching gateway_type is set, the other empty.
    let (number_sid, number_pool_sid) = match d.gateway_type {
        GatewayType::Number => {
            if blank(&d.number_sid) || !blank(&d.number_pool_sid) {
                return Err(bad(
                    "invalid_gateway",
                    "gateway_type number: number_sid is required and number_pool_sid must be empty"
                        .into(),
                ));
            }
            let sid = d.number_sid.unwrap_or_default().trim().to_string();
            match state.store.number_get(&sid).await? {
                Some(n) if n.account_sid == account.sid && n.is_active() => {}
                Some(n) if n.account_sid == account.sid => {
                    return Err(bad(
                        "invalid_gateway",
                        format!("number_sid: number {sid:?} is not active"),
                    ));
                }
                _ => {
                    return Err(bad(
                        "invalid_gateway",
                        format!("number_sid: no number {sid:?} in this account"),
                    ));
                }
            }
            (Some(sid), None)
        }
        GatewayType::NumberPool => {
            if blank(&d.number_pool_sid) || !blank(&d.number_sid) {
                return Err(bad("invalid_gateway", "gateway_type number_pool: number_pool_sid is required and number_sid must be empty".into()));
            }
            let sid = d.number_pool_sid.unwrap_or_default().trim().to_string();
            match state.store.pool_get(&sid).await? {
                Some(p) if p.account_sid == account.sid && p.is_active() => {}
                Some(p) if p.account_sid == account.sid => {
                    return Err(bad(
                        "invalid_gateway",
                        format!("number_pool_sid: pool {sid:?} is not active"),
                    ));
                }
                _ => {
                    return Err(bad(
                        "invalid_gateway",
                        format!("number_pool_sid: no number pool {sid:?} in this account"),
                    ));
                }
            }
            (None, Some(sid))
        }
    };
    match state.store.scenario_get(d.scenario_sid.trim()).await? {
        Some(s) if s.account_sid == account.sid => {}
        _ => {
            return Err(bad(
                "unknown_scenario",
                format!(
                    "scenario_sid: no scenario {:?} in this account",
                    d.scenario_sid
                ),
            ));
        }
    }
    if parse_timezone(&d.timezone).is_none() {
        return Err(bad(
            "invalid_timezone",
            format!("timezone: not an IANA time zone: {:?}", d.timezone),
        ));
    }
    CallingSchedule::parse(&d.calling_schedule.strategy, &d.calling_schedule.args)
        .map_err(|e| bad("invalid_schedule", format!("calling_schedule: {e}")))?;
    if !(1..=MAX_CPS).contains(&d.limits.cps) {
        return Err(bad(
            "invalid_limits",
            format!("limits.cps: 1 to {MAX_CPS} new calls per second"),
        ));
    }
    if !(1..=MAX_CPL).contains(&d.limits.cpl) {
        return Err(bad(
            "invalid_limits",
            format!("limits.cpl: 1 to {MAX_CPL} live calls"),
        ));
    }
    if d.communication_result.targets.len() > MAX_TARGETS {
        return Err(bad(
            "invalid_targets",
            format!("communication_result.targets: at most {MAX_TARGETS}"),
        ));
    }
    for (i, t) in d.communication_result.targets.iter().enumerate() {
        match url::Url::parse(t.url.trim()) {
            Ok(u)
                if matches!(u.scheme(), "http" | "https")
                    && u.host_str().is_some_and(|h| !h.is_empty()) => {}
            _ => {
                return Err(bad(
                    "invalid_targets",
                    format!(
                        "communication_result.targets[{i}].url: not an absolute http(s) URL: {:?}",
                        t.url
                    ),
                ));
            }
        }
        if let Some(why) = state.outbound.refusal(t.url.trim()) {
            return Err(bad(
                "target_not_allowed",
                format!("communication_result.targets[{i}].url: {why}"),
            ));
        }
    }
    let sms = match d.sms.filter(|s| !s.is_unset()) {
        None => None,
        Some(mut sms) => {
            sms.provider_sid = sms.provider_sid.trim().to_string();
            if sms.provider_sid.is_empty() {
                return Err(bad(
                    "invalid_sms",
                    "sms.provider_sid: required when another SMS setting is set".into(),
                ));
            }
            let provider = match state.store.sms_provider_get(&sms.provider_sid).await? {
                Some(p) if p.account_sid == account.sid => p,
                _ => {
                    return Err(bad(
                        "invalid_sms",
                        format!(
                            "sms.provider_sid: no SMS provider {:?} in this account",
                            sms.provider_sid
                        ),
                    ));
                }
            };
            if sms.use_alpha {
                sms.alpha = sms.alpha.trim().to_string();
                if sms.alpha.is_empty() {
                    return Err(bad(
                        "invalid_sms",
                        "sms.alpha: required when use_alpha is true".into(),
                    ));
                }
                if !provider.alpha_list().contains(&sms.alpha) {
                    return Err(bad(
                        "invalid_sms",
                        format!(
                            "sms.alpha: {:?} is not one of the provider's alphas",
                            sms.alpha
                        ),
                    ));
                }
            } else {
                sms.number = sms.number.trim().to_string();
                if sms.number.is_empty() {
                    return Err(bad(
                        "invalid_sms",
                        "sms.number: required when use_alpha is false".into(),
                    ));
                }
                if !provider.number_list().contains(&sms.number) {
                    return Err(bad(
                        "invalid_sms",
                        format!(
                            "sms.number: {:?} is not one of the provider's numbers",
                            sms.number
                        ),
                    ));
                }
            }
            Some(sms)
        }
    };
    let strategy_sid = match d.strategy_sid.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(sid) => Some(
            state
                .ops()
                .account_strategy(account, "strategy_sid", sid)
                .await?
                .sid,
        ),
    };
    Ok(AgentConfig {
        gateway_type: d.gateway_type.as_str().to_string(),
        number_sid,
        number_pool_sid,
        scenario_sid: d.scenario_sid.trim().to_string(),
        voicemail_enabled: d.voicemail_enabled,
        call_recording: d.call_recording,
        calling_schedule: json(&d.calling_schedule),
        timezone: d.timezone,
        cps: d.limits.cps,
        cpl: d.limits.cpl,
        is_test: d.is_test,
        communication_result: json(&d.communication_result),
        sms_provider_sid: sms.as_ref().map(|s| s.provider_sid.clone()),
        sms: sms.as_ref().map(json),
        strategy_sid,
        status: d.status.as_str().to_string(),
    })
}

/// JSON text of a stored shape (these plain structs always serialize).
fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "{}".into())
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
    let a = create_in_account(&state, &account, b).await?;
    Ok((StatusCode::CREATED, Json(Agent::from(&a))))
}

/// Creates an agent in `account` from a create body: defaults applied, every rule checked.
/// Shared by POST /v1/agent and the legacy POST /v1/campaign.
pub(crate) async fn create_in_account(
    state: &AppState,
    account: &AccountRecord,
    b: CreateAgent,
) -> ApiResult<AgentRecord> {
    let default_tz = if account.timezone.is_empty() {
        "UTC".to_string()
    } else {
        account.timezone.clone()
    };
    let d = Draft {
        gateway_type: b.gateway_type,
        number_sid: b.number_sid,
        number_pool_sid: b.number_pool_sid,
        scenario_sid: b.scenario_sid,
        voicemail_enabled: b.voicemail_enabled.unwrap_or(false),
        call_recording: b.call_recording.unwrap_or(false),
        calling_schedule: b.calling_schedule.unwrap_or(Schedule {
            strategy: "always".into(),
            args: serde_json::json!({}),
        }),
        timezone: b
            .timezone
            .map(|t| t.trim().to_string())
            .unwrap_or(default_tz),
        limits: b.limits.unwrap_or(Limits { cps: 1, cpl: 10 }),
        is_test: b.is_test.unwrap_or(false),
        communication_result: b.communication_result.unwrap_or_default(),
        sms: b.sms,
        strategy_sid: b.strategy_sid,
        status: b.status.unwrap_or(Status::Active),
    };
    let c = check(state, account, d).await?;
    state
        .store
        .agent_create(
            &new_sid(prefix::AGENT),
            &account.tenant_sid,
            &account.sid,
            &c,
        )
        .await
        .map_err(ApiError::from)
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
    let v = Agent::from(&cur);
    let d = Draft {
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
        sms: b.sms.unwrap_or(Some(v.sms)),
        strategy_sid: b.strategy_sid.unwrap_or(v.strategy_sid),
        status: b.status.unwrap_or(v.status),
    };
    let c = check(&state, &account, d).await?;
    let a = state.store.agent_update(&cur.sid, &c).await?;
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
