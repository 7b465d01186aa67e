//! Communications: dispatch (agent calls and scenario test calls), list, get.
//! The dialer in the engine picks created rows up; see docs/communications.md.

use std::collections::BTreeMap;

use axum::{
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::agent_settings::Schedule;
use crate::api::caller::Authz;
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    store::{
        AccountRecord, CommunicationRecord,
        communications::{CommunicationAttempt, CommunicationFilter, CommunicationStatus},
    },
    usecases::{DispatchInput, Idempotent, is_batch_sid, request_hash},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(dispatch))
        .routes(routes!(list_communications))
        .routes(routes!(get_communication))
        .routes(routes!(hangup_communication))
        .routes(routes!(list_attempts))
}

pub use crate::communication::Communication;

/// Body of POST /v1/communication/-/dispatch. Unknown fields (including `timezone`,
/// which is never accepted) are 400.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DispatchBody {
    /// The number to call.
    pub recipient: String,
    /// Dial through this agent (exactly one of agent_sid and scenario_sid).
    #[serde(default)]
    pub agent_sid: Option<String>,
    /// Communication strategy of the account (agent path; docs/strategies.md): its
    /// retry rules, calling hours in the recipient's time and frequency cap. Absent: the
    /// agent's default `strategy_sid`, if any. No such strategy in the account: 422
    /// `unknown_strategy`.
    #[serde(default)]
    pub strategy_sid: Option<String>,
    /// Defer dispatch until this time.
    #[serde(default)]
    pub scheduled_at: Option<DateTime<Utc>>,
    /// Flat map of scalars (agent path): the scenario's initial variables.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub data: Option<Value>,
    /// This communication's own calling schedule (agent path; ignored with
    /// `scenario_sid`), in the form of the agent's `calling_schedule` (`always`, or
    /// `weekly` windows per weekday and `excluded_dates`) and checked by the same rules: the
    /// dialer starts its dials only inside it, read in the communication's `timezone` (the
    /// agent's), instead of the agent's `calling_schedule`. A strategy's calling hours in
    /// the recipient's zones still apply: a dial starts only when both are open
    /// (docs/strategies.md). Absent or null: the agent's schedule. A schedule that does not
    /// check: 422 `invalid_schedule`, nothing stored.
    #[serde(default)]
    pub schedule: Option<Schedule>,
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

/// Create a communication: an agent call (`agent_sid`) or a scenario test call
/// (`scenario_sid`), in a new dispatch batch or the `batch_sid` of an earlier dispatch.
/// A recipient on the account's do-not-call list is refused. With an `Idempotency-Key`,
/// a repeat of the same request within 24 hours creates nothing and answers the
/// communication the first one created (as it is now, with `Idempotent-Replayed: true`).
#[utoipa::path(post, path = "/v1/communication/-/dispatch", tag = "communications", request_body = DispatchBody,
    params(("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys"),
        ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 255, pattern = "^[!-~]{1,255}$", description = "1 to 255 visible ASCII characters chosen by the client, unique per intended communication; kept 24 hours per account")),
    security(("bearer" = [])),
    responses((status = 201, body = Communication, description = "Created, or (header `Idempotent-Replayed: true`) the communication an earlier request with the same `Idempotency-Key` and body created"),
        (status = 400, body = ErrorBody, description = "Malformed body, or `invalid_idempotency_key`"), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "`idempotency_key_in_flight`: the first request with this key is still running"),
        (status = 422, body = ErrorBody, description = "Invalid dispatch, refused before anything is stored; among others `recipient_suppressed` (the number is on the account's do-not-call list), `unknown_strategy`, `invalid_schedule` (the `schedule` does not check), `idempotency_key_reused` (an earlier request with this key had another body), `no_from_number` (no number to call from) and `no_trunk` (no trunk of the node can place the call: neither the number's trunk nor a tenant trunk is one of its `[[sip.trunks]]`, and it has no `sip.default_trunk`)"),
        (status = 429, body = ErrorBody, description = "`too_many_test_calls`: a test call while the account has `dialer.max_test_calls_per_account` test and browser calls open (`Retry-After` set)"),
        (status = 500, body = ErrorBody)))]
async fn dispatch(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    headers: HeaderMap,
    Json(b): Json<DispatchBody>,
) -> ApiResult<Response> {
    let key = crate::api::idempotency::key(&headers)?;
    let account = auth.account_scope(&state).await?;
    let ops = state.ops();
    let Some(key) = key else {
        let rec = ops.dispatch(&account, &b.into()).await?;
        return Ok((StatusCode::CREATED, Json(Communication::from(&rec))).into_response());
    };
    let body = serde_json::to_value(&b).map_err(ApiError::internal)?;
    let hash = request_hash("POST /v1/communication/-/dispatch", &body);
    match ops.idempotency_start(&account.sid, &key, &hash).await? {
        Idempotent::Replay(sid) => {
            let rec = visible_communication(&state, &account, &sid).await?;
            let mut r = (StatusCode::CREATED, Json(Communication::from(&rec))).into_response();
            r.headers_mut().insert(
                crate::api::idempotency::REPLAYED_HEADER,
                HeaderValue::from_static("true"),
            );
            Ok(r)
        }
        Idempotent::Run => {
            let res = ops.dispatch(&account, &b.into()).await;
            let created = res.as_ref().ok().map(|r| r.sid.as_str());
            ops.idempotency_finish(&account.sid, &key, created).await?;
            let rec = res?;
            Ok((StatusCode::CREATED, Json(Communication::from(&rec))).into_response())
        }
    }
}

impl From<DispatchBody> for DispatchInput {
    fn from(b: DispatchBody) -> Self {
        DispatchInput {
            recipient: b.recipient,
            agent_sid: b.agent_sid,
            strategy_sid: b.strategy_sid,
            scheduled_at: b.scheduled_at,
            data: b.data,
            schedule: b.schedule,
            scenario_sid: b.scenario_sid,
            draft: b.draft.unwrap_or(false),
            batch_sid: b.batch_sid,
        }
    }
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

/// Query of GET /v1/communication/{id}/attempt.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AttemptListQuery {
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// List a communication's attempts (every dial, oldest first; docs/strategies.md). The
/// communication's own fields show its last attempt.
#[utoipa::path(get, path = "/v1/communication/{id}/attempt", tag = "communications",
    params(("id" = String, Path), AttemptListQuery, ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 200, body = Page<CommunicationAttempt>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_attempts(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
    Query(q): Query<AttemptListQuery>,
) -> ApiResult<Json<Page<CommunicationAttempt>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let account = auth.account_scope(&state).await?;
    let c = visible_communication(&state, &account, &id).await?;
    let (rows, total) = state
        .store
        .communication_attempts(&c.sid, page.limit, page.offset)
        .await?;
    Ok(Json(Page::new(rows, total, page)))
}

/// End a live call: a ringing call is canceled, an answered one hung up. The call writes
/// its end as usual (`end_reason` `hangup_requested`); poll the communication to see it.
/// Any node takes the request: a call another node runs is marked in the database, and
/// that node hangs it up at its next heartbeat (`dialer.heartbeat_interval_ms`).
#[utoipa::path(post, path = "/v1/communication/{id}/hangup", tag = "communications",
    params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 202, body = Communication, description = "Hang-up requested; the communication as it is now"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "`not_live`: the communication is not a live call (not started, or ended)"),
        (status = 500, body = ErrorBody)))]
async fn hangup_communication(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<Communication>)> {
    let account = auth.account_scope(&state).await?;
    let c = visible_communication(&state, &account, &id).await?;
    // The call runs here, else on the node holding its claim.
    if !state.hangups.request(&c.sid) && !state.store.communication_request_hangup(&c.sid).await? {
        return Err(ApiError::conflict(
            "not_live",
            format!(
                "communication {} is not a live call (status {})",
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
