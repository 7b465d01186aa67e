//! Communications: dispatch (agent calls and scenario test calls), list, get.
//! The dialer in the engine picks created rows up; see docs/communications.md.

use std::collections::BTreeMap;

use axum::{extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::{Authz, cap},
    ids::new_sid,
    store::{
        AccountRecord, CommunicationRecord, NewCommunication, StoreError,
        communications::{COMMUNICATION_PREFIX, CommunicationFilter, CommunicationStatus},
    },
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(dispatch))
        .routes(routes!(list_communications))
        .routes(routes!(get_communication))
        .routes(routes!(hangup_communication))
}

pub use crate::communication::Communication;
use crate::communication::caller::{self, AgentCaller, CallerIdError};

/// Body of POST /v1/communication/-/dispatch. Unknown fields (including `timezone`,
/// which is never accepted) are 400.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DispatchBody {
    /// The number to call.
    pub recipient: String,
    /// Dial through this agent (exactly one of agent_sid and scenario_sid).
    #[serde(default)]
    pub agent_sid: Option<String>,
    /// Communication strategy (agent path; recorded, not interpreted).
    #[serde(default)]
    pub strategy_sid: Option<String>,
    /// Defer dispatch until this time.
    #[serde(default)]
    pub scheduled_at: Option<DateTime<Utc>>,
    /// Flat map of scalars (agent path): the scenario's initial variables.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub data: Option<Value>,
    /// Per-communication schedule (agent path; accepted, not interpreted).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub schedule: Option<Value>,
    /// Scenario test call (exactly one of agent_sid and scenario_sid).
    #[serde(default)]
    pub scenario_sid: Option<String>,
    /// Test call: run the current draft (frozen on first use) instead of the published version.
    #[serde(default)]
    pub draft: Option<bool>,
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.trim().is_empty())
}

/// `+` and digits (spaces, dashes, dots and parentheses allowed), 3..=32 digits.
fn check_recipient(r: &str) -> ApiResult<String> {
    let trimmed: String = r
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '(' | ')'))
        .collect();
    let digits = trimmed.strip_prefix('+').unwrap_or(&trimmed);
    if (3..=32).contains(&digits.len()) && digits.chars().all(|c| c.is_ascii_digit()) {
        Ok(trimmed)
    } else {
        Err(ApiError::unprocessable(
            "invalid_recipient",
            "recipient: a phone number (digits, optional leading +)",
        ))
    }
}

/// 422 `no_from_number` for a call with no number to call from; a store failure stays 500.
fn no_from_number(e: CallerIdError) -> ApiError {
    match e {
        CallerIdError::Store(e) => e.into(),
        e => ApiError::unprocessable("no_from_number", e.to_string()),
    }
}

/// Create a communication: an agent call (`agent_sid`) or a scenario test call (`scenario_sid`).
#[utoipa::path(post, path = "/v1/communication/-/dispatch", tag = "communications", request_body = DispatchBody,
    params(("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 201, body = Communication), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn dispatch(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Json(b): Json<DispatchBody>,
) -> ApiResult<(StatusCode, Json<Communication>)> {
    let account = auth.account_scope(&state).await?;
    let (agent_sid, scenario_sid) = match (non_empty(&b.agent_sid), non_empty(&b.scenario_sid)) {
        (Some(a), None) => (Some(a.to_string()), None),
        (None, Some(s)) => (None, Some(s.to_string())),
        _ => {
            return Err(ApiError::unprocessable(
                "exactly_one_of",
                "exactly one of agent_sid and scenario_sid is required",
            ));
        }
    };
    let recipient = check_recipient(&b.recipient)?;
    let t = crate::store::now();
    let due_at = b.scheduled_at.map_or(t, |s| s.max(t));
    let mut new = NewCommunication {
        sid: new_sid(COMMUNICATION_PREFIX),
        tenant_sid: account.tenant_sid.clone(),
        account_sid: account.sid.clone(),
        agent_sid: None,
        scenario_sid: String::new(),
        version: None,
        draft_version: None,
        recipient,
        from_number: String::new(),
        trunk: None,
        direction: "outbound".into(),
        is_test: false,
        data: "{}".into(),
        strategy_sid: None,
        timezone: caller::call_timezone(None, &account),
        scheduled_at: b.scheduled_at,
        due_at,
    };
    if let Some(agent_sid) = agent_sid {
        // Rule 6: data is a flat map of scalars.
        let data = match &b.data {
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(Value::Object(m)) => {
                if let Some((k, _)) = m.iter().find(|(_, v)| v.is_object() || v.is_array()) {
                    return Err(ApiError::unprocessable(
                        "data_not_flat",
                        format!("data.{k}: values must be strings, numbers or booleans"),
                    ));
                }
                m.clone()
            }
            Some(_) => {
                return Err(ApiError::unprocessable(
                    "data_not_flat",
                    "data: must be a flat object of scalars",
                ));
            }
        };
        let agent = state
            .store
            .agent_get(&agent_sid)
            .await?
            .filter(|a| a.account_sid == account.sid)
            .ok_or_else(|| {
                ApiError::unprocessable("unknown_agent", "agent_sid: no such agent in this account")
            })?;
        let published = state
            .store
            .scenario_latest_published(&agent.scenario_sid)
            .await?
            .ok_or_else(|| {
                ApiError::unprocessable(
                    "scenario_not_published",
                    "the agent's scenario has no published version",
                )
            })?;
        // Rule 7: the agent's number; a pool number is picked (rotating) at dial time.
        match caller::agent_caller(&state.store, &agent).await {
            Ok(AgentCaller::Number(c)) => {
                new.from_number = c.number;
                new.trunk = c.trunk;
            }
            Ok(AgentCaller::Pool(_)) => {}
            Err(e) => return Err(no_from_number(e)),
        }
        new.agent_sid = Some(agent.sid.clone());
        new.scenario_sid = agent.scenario_sid.clone();
        new.version = published.version;
        new.is_test = agent.is_test;
        new.data = serde_json::to_string(&data).map_err(ApiError::internal)?;
        new.strategy_sid = b.strategy_sid.clone().filter(|s| !s.is_empty());
        new.timezone = caller::call_timezone(Some(&agent), &account);
    } else if let Some(scenario_sid) = scenario_sid {
        // Rules 3 and 5: a test call, dispatched at once; strategy, schedule and data ignored.
        let scenario = state
            .store
            .scenario_get(&scenario_sid)
            .await?
            .filter(|s| s.account_sid == account.sid)
            .ok_or_else(|| {
                ApiError::unprocessable(
                    "unknown_scenario",
                    "scenario_sid: no such scenario in this account",
                )
            })?;
        let record = if b.draft.unwrap_or(false) {
            // A draft was never validated by a publish: it is validated here, with the
            // same checks, before it is frozen and called.
            let draft = state
                .store
                .scenario_version_by_axis(&scenario.sid, 0, true)
                .await?
                .ok_or_else(|| ApiError::unprocessable("no_draft", "the scenario has no draft"))?;
            let errors =
                super::scenarios::check_snapshot(&state, &account.sid, &draft.snapshot_value())
                    .await?;
            if !errors.is_empty() {
                return Err(super::scenarios::invalid_scenario(errors));
            }
            match state.store.freeze_draft(&scenario.sid).await {
                Ok(r) => r,
                Err(StoreError::NotFound) => {
                    return Err(ApiError::unprocessable(
                        "no_draft",
                        "the scenario has no draft",
                    ));
                }
                Err(e) => return Err(e.into()),
            }
        } else {
            state
                .store
                .scenario_latest_published(&scenario.sid)
                .await?
                .ok_or_else(|| {
                    ApiError::unprocessable(
                        "scenario_not_published",
                        "the scenario has no published version (dispatch with draft=true to test the draft)",
                    )
                })?
        };
        // Rule 7: a free account number.
        let number = caller::test_call_caller(&state.store, &account.sid)
            .await
            .map_err(no_from_number)?;
        new.scenario_sid = scenario.sid.clone();
        new.version = record.version;
        new.draft_version = record.draft_version;
        new.from_number = number.number;
        new.trunk = number.trunk;
        new.is_test = true;
    }
    let rec = state.store.communication_create(&new).await?;
    Ok((StatusCode::CREATED, Json(Communication::from(&rec))))
}

/// Query of GET /v1/communication.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CommunicationQuery {
    /// Only this agent's communications.
    #[serde(default)]
    pub agent_sid: Option<String>,
    /// Only communications with this status.
    #[serde(default)]
    #[param(value_type = Option<CommunicationStatus>)]
    pub communication_status: Option<String>,
    /// `outbound` or `inbound`.
    #[serde(default)]
    #[param(pattern = "^(outbound|inbound)$")]
    pub direction: Option<String>,
    /// Created at or after this time.
    #[serde(default)]
    pub created_from: Option<DateTime<Utc>>,
    /// Created before this time.
    #[serde(default)]
    pub created_to: Option<DateTime<Utc>>,
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// List the account's communications, newest first.
#[utoipa::path(get, path = "/v1/communication", tag = "communications",
    params(CommunicationQuery, ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 200, body = Page<Communication>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_communications(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<CommunicationQuery>,
) -> ApiResult<Json<Page<Communication>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let communication_status = q
        .communication_status
        .as_deref()
        .map(str::parse::<CommunicationStatus>)
        .transpose()
        .map_err(|_| {
            ApiError::bad_request(
                "invalid_query",
                format!(
                    "communication_status: one of {}",
                    CommunicationStatus::names()
                ),
            )
        })?;
    if let Some(d) = &q.direction
        && d != "outbound"
        && d != "inbound"
    {
        return Err(ApiError::bad_request(
            "invalid_query",
            "direction: outbound or inbound",
        ));
    }
    let account = auth.account_scope(&state).await?;
    let filter = CommunicationFilter {
        agent_sid: q.agent_sid.clone(),
        communication_status,
        direction: q.direction.clone(),
        created_from: q.created_from,
        created_to: q.created_to,
    };
    let (rows, total) = state
        .store
        .communication_list(&account.sid, &filter, page.limit, page.offset)
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(Communication::from).collect(),
        total,
        page,
    )))
}

/// The communication `id` when it belongs to the caller's account.
pub(crate) async fn visible_communication(
    state: &AppState,
    account: &AccountRecord,
    id: &str,
) -> ApiResult<CommunicationRecord> {
    state
        .store
        .communication_get(id)
        .await?
        .filter(|c| c.account_sid == account.sid)
        .ok_or_else(|| ApiError::not_found("communication"))
}

/// Get one communication (out of scope reads as absent).
#[utoipa::path(get, path = "/v1/communication/{id}", tag = "communications",
    params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 200, body = Communication), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn get_communication(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Json<Communication>> {
    let account = auth.account_scope(&state).await?;
    Ok(Json(Communication::from(
        &visible_communication(&state, &account, &id).await?,
    )))
}

/// End a live call: a ringing call is canceled, an answered one hung up. The call writes
/// its end as usual (`end_reason` `hangup_requested`); poll the communication to see it.
#[utoipa::path(post, path = "/v1/communication/{id}/hangup", tag = "communications",
    params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 202, body = Communication, description = "Hang-up requested; the communication as it is now"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "`not_live`: the communication is not a live call on this node (not started, or ended)"),
        (status = 500, body = ErrorBody)))]
async fn hangup_communication(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<Communication>)> {
    let account = auth.account_scope(&state).await?;
    let c = visible_communication(&state, &account, &id).await?;
    if !state.hangups.request(&c.sid) {
        return Err(ApiError::conflict(
            "not_live",
            format!(
                "communication {} is not a live call on this node (status {})",
                c.sid, c.communication_status
            ),
        ));
    }
    Ok((StatusCode::ACCEPTED, Json(Communication::from(&c))))
}

/// Communications of `account` keyed by id, for `include=communication`.
pub(crate) async fn communications_map(
    state: &AppState,
    account: &AccountRecord,
    ids: &[String],
) -> ApiResult<BTreeMap<String, Value>> {
    let rows = state
        .store
        .communications_by_sids(&account.sid, ids)
        .await?;
    let mut out = BTreeMap::new();
    for r in &rows {
        out.insert(
            r.sid.clone(),
            serde_json::to_value(Communication::from(r)).map_err(ApiError::internal)?,
        );
    }
    Ok(out)
}
