//! Communications: dispatch (agent calls and scenario test calls), list, get.
//! The dialer in the engine picks created rows up; see docs/communications.md.

use std::collections::BTreeMap;

use axum::{extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::api::caller::Authz;
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    ids::new_sid,
    store::{
        AccountRecord, AgentRecord, CommunicationRecord, NewCommunication, ScenarioRecord,
        ScenarioVersionRecord, StoreError,
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
    /// Add the communication to this dispatch batch (a `batch_sid` an earlier dispatch of
    /// the account answered), so statistics and reports can select the set with
    /// `?batch=`. Absent: a new batch of its own. No such batch in the account: 422
    /// `unknown_batch`.
    #[serde(default)]
    #[schema(pattern = "^bat_[0-9a-f]{32}$")]
    pub batch_sid: Option<String>,
}

/// The pattern of a batch id (`bat_` and 32 lowercase hex digits).
pub(crate) fn is_batch_sid(s: &str) -> bool {
    s.strip_prefix("bat_")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The batch a dispatch joins: `batch_sid` when the account has communications in it,
/// else a new one; 422 `unknown_batch` for a batch the account does not have (another
/// account's batch answers the same).
async fn dispatch_batch(
    state: &AppState,
    account: &AccountRecord,
    batch_sid: Option<&str>,
) -> ApiResult<String> {
    let Some(b) = batch_sid else {
        return Ok(new_sid(crate::ids::prefix::BATCH));
    };
    if is_batch_sid(b)
        && state
            .store
            .communication_batch_exists(&account.sid, b)
            .await?
    {
        return Ok(b.to_string());
    }
    Err(ApiError::unprocessable(
        "unknown_batch",
        "batch_sid: no such dispatch batch in this account (omit it to start a new batch)",
    ))
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.trim().is_empty())
}

/// A number to call, as `field` of a request: `+` and digits (spaces, dashes, dots and
/// parentheses allowed and dropped), 3..=32 digits; 422 `invalid_recipient` naming `field`
/// otherwise. Returns the number without the separators. Dispatch recipients and legacy
/// contact phones are checked with it.
pub(crate) fn check_recipient(field: &str, r: &str) -> ApiResult<String> {
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
            format!("{field}: a phone number (digits, optional leading +)"),
        ))
    }
}

/// The initial variables of an agent call, as `field` of a request: absent, null or a flat
/// object of strings, numbers and booleans (rule 6); 422 `data_not_flat` naming the key
/// otherwise. Dispatch `data` and legacy contact variables are checked with it.
pub(crate) fn flat_data(
    field: &str,
    v: Option<&Value>,
) -> ApiResult<serde_json::Map<String, Value>> {
    match v {
        None | Some(Value::Null) => Ok(serde_json::Map::new()),
        Some(Value::Object(m)) => {
            if let Some((k, _)) = m.iter().find(|(_, v)| v.is_object() || v.is_array()) {
                return Err(ApiError::unprocessable(
                    "data_not_flat",
                    format!("{field}.{k}: values must be strings, numbers or booleans"),
                ));
            }
            Ok(m.clone())
        }
        Some(_) => Err(ApiError::unprocessable(
            "data_not_flat",
            format!("{field}: must be a flat object of scalars"),
        )),
    }
}

/// An agent of an account made ready to dial: its scenario's newest published version and
/// its caller id (rule 7: the agent's number; a pool number is picked, rotating, at dial
/// time), looked up once. POST /v1/communication/-/dispatch creates its agent call with
/// [`AgentDispatch::communication`], and so does a legacy attempt for each contact.
pub(crate) struct AgentDispatch {
    pub(crate) agent: AgentRecord,
    tenant_sid: String,
    account_sid: String,
    version: Option<i64>,
    from_number: String,
    trunk: Option<String>,
    timezone: String,
}

impl AgentDispatch {
    /// 422 `unknown_agent` unless `agent_sid` is an agent of `account`,
    /// `scenario_not_published` when its scenario has no published version,
    /// `no_from_number` when it has no number to call from, `no_trunk` when no trunk of
    /// this node could place its calls ([`check_placeable`]).
    pub(crate) async fn prepare(
        state: &AppState,
        account: &AccountRecord,
        agent_sid: &str,
    ) -> ApiResult<AgentDispatch> {
        let agent = state
            .store
            .agent_get(agent_sid)
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
        let (from_number, trunk, trunks) = match caller::agent_caller(&state.store, &agent).await {
            Ok(AgentCaller::Number(c)) => (c.number, c.trunk.clone(), vec![c.trunk]),
            Ok(AgentCaller::Pool(p)) => {
                // The number is picked when the call is placed: any of the pool's.
                let numbers = state.store.pool_active_numbers(&p).await?;
                let trunks = numbers.into_iter().map(|n| n.trunk).collect();
                (String::new(), None, trunks)
            }
            Err(e) => return Err(no_from_number(e)),
        };
        check_placeable(state, &account.tenant_sid, &trunks).await?;
        Ok(AgentDispatch {
            tenant_sid: account.tenant_sid.clone(),
            account_sid: account.sid.clone(),
            version: published.version,
            from_number,
            trunk,
            timezone: caller::call_timezone(Some(&agent), account),
            agent,
        })
    }

    /// The row of one call to `recipient` (checked with [`check_recipient`]) with `data`
    /// (checked with [`flat_data`]) as its initial variables, due at `scheduled_at` or now,
    /// in the dispatch batch `batch_sid`.
    pub(crate) fn communication(
        &self,
        recipient: String,
        data: &serde_json::Map<String, Value>,
        scheduled_at: Option<DateTime<Utc>>,
        strategy_sid: Option<String>,
        batch_sid: &str,
    ) -> ApiResult<NewCommunication> {
        Ok(NewCommunication {
            sid: new_sid(COMMUNICATION_PREFIX),
            tenant_sid: self.tenant_sid.clone(),
            account_sid: self.account_sid.clone(),
            agent_sid: Some(self.agent.sid.clone()),
            scenario_sid: self.agent.scenario_sid.clone(),
            version: self.version,
            draft_version: None,
            recipient,
            from_number: self.from_number.clone(),
            trunk: self.trunk.clone(),
            direction: "outbound".into(),
            is_test: self.agent.is_test,
            data: serde_json::to_string(data).map_err(ApiError::internal)?,
            strategy_sid: strategy_sid.filter(|s| !s.is_empty()),
            batch_sid: Some(batch_sid.to_string()),
            timezone: self.timezone.clone(),
            scheduled_at,
            due_at: due_at(scheduled_at),
        })
    }
}

/// 422 `no_from_number` for a call with no number to call from; a store failure stays 500.
fn no_from_number(e: CallerIdError) -> ApiError {
    match e {
        CallerIdError::Store(e) => e.into(),
        e => ApiError::unprocessable("no_from_number", e.to_string()),
    }
}

/// 422 `no_trunk` when no trunk of this node could place a call of `tenant_sid` from a
/// number on one of `trunks` (the trunks of the numbers the call may be from; `[]` when
/// none is known yet), by the rule the dialer places it by
/// ([`caller::NodeTrunks::can_place`]). A process that places no calls checks nothing.
pub(crate) async fn check_placeable(
    state: &AppState,
    tenant_sid: &str,
    trunks: &[Option<String>],
) -> ApiResult<()> {
    let Some(node) = &state.settings.sip_trunks else {
        return Ok(());
    };
    if node.can_place(&state.store, tenant_sid, trunks).await? {
        Ok(())
    } else {
        Err(ApiError::unprocessable("no_trunk", caller::NO_TRUNK))
    }
}

/// What a dispatch calls through (rule 1: exactly one of them).
enum Target<'a> {
    Agent(&'a str),
    Scenario(&'a str),
}

/// When a call scheduled at `scheduled_at` (or now) is due: never in the past.
fn due_at(scheduled_at: Option<DateTime<Utc>>) -> DateTime<Utc> {
    let t = crate::store::now();
    scheduled_at.map_or(t, |s| s.max(t))
}

/// Create a communication: an agent call (`agent_sid`) or a scenario test call
/// (`scenario_sid`), in a new dispatch batch or the `batch_sid` of an earlier dispatch.
#[utoipa::path(post, path = "/v1/communication/-/dispatch", tag = "communications", request_body = DispatchBody,
    params(("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 201, body = Communication), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "Invalid dispatch; among others `no_from_number` (no number to call from) and `no_trunk` (no trunk of the node can place the call: neither the number's trunk nor a tenant trunk is one of its `[[sip.trunks]]`, and it has no `sip.default_trunk`), both refused before anything is stored"),
        (status = 429, body = ErrorBody, description = "`too_many_test_calls`: a test call while the account has `dialer.max_test_calls_per_account` test and browser calls open (`Retry-After` set)"),
        (status = 500, body = ErrorBody)))]
async fn dispatch(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Json(b): Json<DispatchBody>,
) -> ApiResult<(StatusCode, Json<Communication>)> {
    let account = auth.account_scope(&state).await?;
    let target = match (non_empty(&b.agent_sid), non_empty(&b.scenario_sid)) {
        (Some(a), None) => Target::Agent(a),
        (None, Some(s)) => Target::Scenario(s),
        _ => {
            return Err(ApiError::unprocessable(
                "exactly_one_of",
                "exactly one of agent_sid and scenario_sid is required",
            ));
        }
    };
    let recipient = check_recipient("recipient", &b.recipient)?;
    let batch = dispatch_batch(&state, &account, b.batch_sid.as_deref()).await?;
    // A test call holds its account's admission until its row is stored.
    let _admitted = match target {
        Target::Scenario(_) => admit_test_call(&state, &account).await?,
        Target::Agent(_) => None,
    };
    let new = match target {
        Target::Agent(agent_sid) => {
            let data = flat_data("data", b.data.as_ref())?;
            AgentDispatch::prepare(&state, &account, agent_sid)
                .await?
                .communication(
                    recipient,
                    &data,
                    b.scheduled_at,
                    b.strategy_sid.clone(),
                    &batch,
                )?
        }
        Target::Scenario(scenario_sid) => {
            test_call(&state, &account, scenario_sid, &b, recipient, batch).await?
        }
    };
    let rec = state.store.communication_create(&new).await?;
    Ok((StatusCode::CREATED, Json(Communication::from(&rec))))
}

/// Admits one more test or browser call of `account` under its share
/// (`dialer.max_test_calls_per_account`, see [`crate::test_calls`]): 429
/// `too_many_test_calls` when the account has that many open already. The guard returned
/// must be held until the new call is stored; `None` when no share is set.
pub(crate) async fn admit_test_call<'a>(
    state: &'a AppState,
    account: &AccountRecord,
) -> ApiResult<Option<tokio::sync::MutexGuard<'a, ()>>> {
    let limit = state.settings.max_test_calls_per_account;
    if limit == 0 {
        return Ok(None);
    }
    let guard = state.test_call_gate.lock(&account.sid).await;
    let open = state
        .store
        .communication_open_test_calls(&account.sid)
        .await?;
    if open >= i64::from(limit) {
        return Err(ApiError::too_many_requests(
            "too_many_test_calls",
            format!(
                "the account has {open} test or browser calls open, its share is {limit}: \
                 place another when one has ended"
            ),
            crate::test_calls::RETRY_AFTER_SECS,
        ));
    }
    Ok(Some(guard))
}

/// A scenario test call (rules 3 and 5): dispatched at once; strategy, schedule and data
/// ignored.
async fn test_call(
    state: &AppState,
    account: &AccountRecord,
    scenario_sid: &str,
    b: &DispatchBody,
    recipient: String,
    batch_sid: String,
) -> ApiResult<NewCommunication> {
    let (scenario, record) =
        test_version(state, account, scenario_sid, b.draft.unwrap_or(false)).await?;
    // Rule 7: a free account number.
    let number = caller::test_call_caller(&state.store, &account.sid)
        .await
        .map_err(no_from_number)?;
    check_placeable(
        state,
        &account.tenant_sid,
        std::slice::from_ref(&number.trunk),
    )
    .await?;
    Ok(NewCommunication {
        sid: new_sid(COMMUNICATION_PREFIX),
        tenant_sid: account.tenant_sid.clone(),
        account_sid: account.sid.clone(),
        agent_sid: None,
        scenario_sid: scenario.sid.clone(),
        version: record.version,
        draft_version: record.draft_version,
        recipient,
        from_number: number.number,
        trunk: number.trunk,
        direction: "outbound".into(),
        is_test: true,
        data: "{}".into(),
        strategy_sid: None,
        batch_sid: Some(batch_sid),
        timezone: caller::call_timezone(None, account),
        scheduled_at: b.scheduled_at,
        due_at: due_at(b.scheduled_at),
    })
}

/// The version a test call of `scenario_sid` runs (rule 3): the draft, validated and frozen
/// on first use, when `draft`; else the latest published version.
pub(crate) async fn test_version(
    state: &AppState,
    account: &AccountRecord,
    scenario_sid: &str,
    draft: bool,
) -> ApiResult<(ScenarioRecord, ScenarioVersionRecord)> {
    let scenario = state
        .store
        .scenario_get(scenario_sid)
        .await?
        .filter(|s| s.account_sid == account.sid)
        .ok_or_else(|| {
            ApiError::unprocessable(
                "unknown_scenario",
                "scenario_sid: no such scenario in this account",
            )
        })?;
    let record = if draft {
        // A draft was never validated by a publish: it is validated here, with the
        // same checks, before it is frozen and called.
        let draft = state
            .store
            .scenario_version_by_axis(&scenario.sid, 0, true)
            .await?
            .ok_or_else(|| ApiError::unprocessable("no_draft", "the scenario has no draft"))?;
        let errors = super::scenarios::check_snapshot(state, &account.sid, &draft.snapshot_value())
            .await?
            .errors;
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
    Ok((scenario, record))
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
    /// Only the communications of this dispatch batch (`batch_sid` of a dispatch).
    #[serde(default)]
    #[param(pattern = "^bat_[0-9a-f]{32}$")]
    pub batch: Option<String>,
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
    check_direction(q.direction.as_deref())?;
    let batch_sid = check_batch(q.batch.as_deref())?;
    let account = auth.account_scope(&state).await?;
    let filter = CommunicationFilter {
        agent_sid: q.agent_sid.clone(),
        communication_status,
        direction: q.direction.clone(),
        created_from: q.created_from,
        created_to: q.created_to,
        batch_sid,
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

/// A `direction` filter: `outbound` or `inbound` (400 otherwise).
pub(super) fn check_direction(direction: Option<&str>) -> ApiResult<()> {
    match direction {
        None | Some("outbound") | Some("inbound") => Ok(()),
        Some(_) => Err(ApiError::bad_request(
            "invalid_query",
            "direction: outbound or inbound",
        )),
    }
}

/// A `batch` filter: a batch id (400 otherwise). A well-formed id the account does not
/// have selects nothing, whoever's it is.
pub(super) fn check_batch(batch: Option<&str>) -> ApiResult<Option<String>> {
    match batch {
        None => Ok(None),
        Some(b) if is_batch_sid(b) => Ok(Some(b.to_string())),
        Some(_) => Err(ApiError::bad_request(
            "invalid_query",
            "batch: a dispatch batch id (bat_ and 32 lowercase hex digits), as dispatch answers it in batch_sid",
        )),
    }
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
