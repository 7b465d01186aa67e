//! Browser test calls and the live view of test calls:
//! `POST /v1/communication/-/browser-call` answers a browser's WebRTC offer and runs a
//! scenario's draft or published version with the browser as the call's leg;
//! `GET /v1/communication/{id}/live` streams what a running test call does as
//! Server-Sent Events (see [`crate::live_feed`]).

use std::convert::Infallible;
use std::time::Duration;

use axum::{
    extract::State,
    http::{HeaderMap, StatusCode},
    response::sse::{Event, KeepAlive, Sse},
};
use futures::{Stream, StreamExt, stream::BoxStream};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::communications::{Communication, visible_communication};
use crate::api::caller::Authz;
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Path},
    auth::cap,
    live_feed::LiveEvent,
    live_relay,
    usecases::{BrowserCallInput, Direction},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(browser_call))
        .routes(routes!(live))
}

/// Body of POST /v1/communication/-/browser-call.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowserCallBody {
    /// The scenario to call.
    #[schema(min_length = 1)]
    pub scenario_sid: String,
    /// true runs the current draft (validated, then frozen as a test dispatch freezes it);
    /// false or absent runs the latest published version.
    #[serde(default)]
    pub draft: Option<bool>,
    /// The direction the scenario sees (which entry brick it starts at); default
    /// `outbound`.
    #[serde(default)]
    #[schema(pattern = "^(outbound|inbound)$")]
    pub direction: Option<String>,
    /// The browser's complete SDP offer (ICE gathering finished: no trickle), with Opus
    /// or PCMU audio and host candidates the engine's media address can reach.
    #[schema(min_length = 1, max_length = 32768)]
    pub sdp: String,
    /// Test variables (an extension of this service): a flat object of strings, numbers
    /// and booleans the scenario starts with, as an agent call's dispatch `data`
    /// (`{{first_name}}` in a prompt speaks its value). A dispatch with `scenario_sid`
    /// still ignores its `data`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Value>,
    /// Record the call (an extension of this service), as an agent with `call_recording`
    /// does: `GET /v1/communication/{id}/recording` serves it once the call has ended.
    #[serde(default)]
    pub record: Option<bool>,
}

/// Answer of POST /v1/communication/-/browser-call.
#[derive(Debug, Serialize, ToSchema)]
pub struct BrowserCallAnswer {
    /// The call's communication (`is_test`, `in_progress`, run by this node).
    pub communication: Communication,
    /// The SDP answer to set as the browser's remote description.
    pub sdp: String,
}

/// Call a scenario from the browser: the browser's microphone and speaker become the
/// call's leg (WebRTC: ICE host candidates, DTLS-SRTP, Opus when offered, else
/// PCMU/8000), and the call runs through the same lifecycle as a SIP call. A draft is
/// validated and frozen as by a test dispatch; the communication is `is_test`, its
/// recipient and from-number `browser`.
/// Two extensions of this service serve scenario designers: `data` gives the call test
/// variables (kept as the communication's `data`), and `record` records it.
/// Watch it with `GET /v1/communication/{id}/live`; end it with
/// `POST /v1/communication/{id}/hangup` or by closing the peer connection.
#[utoipa::path(post, path = "/v1/communication/-/browser-call", tag = "communications",
    request_body = BrowserCallBody,
    params(("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 201, body = BrowserCallAnswer), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "`unknown_scenario`, `no_draft`, `invalid_scenario` (with the SCN errors), `scenario_not_published`, `invalid_sdp` (the offer cannot be answered: the message says why), `data_not_flat` (`data` is not a flat object of scalars)"),
        (status = 429, body = ErrorBody, description = "`too_many_test_calls`: the account has `dialer.max_test_calls_per_account` test and browser calls open (`Retry-After` set)"),
        (status = 500, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "`browser_calls_unavailable`: this process runs no calls, or cannot take one now")))]
async fn browser_call(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Json(b): Json<BrowserCallBody>,
) -> ApiResult<(StatusCode, Json<BrowserCallAnswer>)> {
    let account = auth.account_scope(&state).await?;
    let direction = match b.direction.as_deref() {
        None | Some("outbound") => Direction::Outbound,
        Some("inbound") => Direction::Inbound,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_direction",
                format!("direction: {other:?} is not outbound or inbound"),
            ));
        }
    };
    let input = BrowserCallInput {
        scenario_sid: b.scenario_sid,
        draft: b.draft.unwrap_or(false),
        direction,
        sdp: b.sdp,
        data: b.data,
        record: b.record.unwrap_or(false),
    };
    let started = state.ops().browser_call(&account, &input).await?;
    Ok((
        StatusCode::CREATED,
        Json(BrowserCallAnswer {
            communication: Communication::from(&started.communication),
            sdp: started.sdp,
        }),
    ))
}

/// Stream what a running test call does, as Server-Sent Events (`text/event-stream`).
/// Events (the `event:` field; `data:` is JSON): `brick` (`brick_id`, `kind`, `at_ms`),
/// `variable` (`name`, `old`, `new`, `at_ms`), `prompt` (`brick_id`, `text`, `played_ms`,
/// `interrupted`, `at_ms`), `transcript` (`text`, `final`, `at_ms`), `turn` (one listen
/// turn with its latency breakdown in ms), `trace` (any other trace event, as in the saved
/// history), and `ended` (`communication_status`, `call_status`, `goals`, `end_reason`),
/// after which the stream closes. A subscriber that comes late first gets what the call
/// published so far. Comments (`: keepalive`) are sent every 15 s. Test calls only
/// (`is_test`); a call that has ended answers one `ended` event. On PostgreSQL any node
/// serves the feed of a call another node runs: it relays the feed of the node running
/// the call (found by the call's claim, reached at its `http.internal_url`), which checks
/// the caller's credentials again; if that node stops mid-call, the stream gets `ended`
/// once a peer has ended the call (or closes if none does within 30 s).
#[utoipa::path(get, path = "/v1/communication/{id}/live", tag = "communications",
    params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 200, content_type = "text/event-stream", body = String, description = "The call's events"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "`not_live`: the call has not ended and has no live feed (not a test call, or not started yet; on SQLite also a call another process ran)"),
        (status = 500, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "`live_node_unreachable`: the call runs on another node whose feed cannot be relayed (the node stopped writing its heartbeat, publishes no `http.internal_url`, or does not answer within 5 s); the message says which")))]
async fn live(
    State(state): State<AppState>,
    headers: HeaderMap,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let account = auth.account_scope(&state).await?;
    let c = visible_communication(&state, &account, &id).await?;
    let events: BoxStream<'static, Event> = match state.live_feeds.subscribe(&c.sid) {
        Some(sub) => local(sub.replay, Some(sub.rx)),
        None if c.communication_status.is_final() => {
            local(vec![live_relay::ended_from_row(&c)], None)
        }
        None if live_relay::relayable(&state, &c, &headers) => {
            live_relay::open(&state, &c, &headers)
                .await?
                .map(|e| Event::default().event(e.name).data(e.data))
                .boxed()
        }
        None => {
            return Err(ApiError::conflict(
                "not_live",
                format!(
                    "communication {} has no live feed (status {}; live feeds are kept for \
                     test calls by the node running them, and relayed from it by its peers)",
                    c.sid, c.communication_status
                ),
            ));
        }
    };
    Ok(Sse::new(events.map(Ok::<_, Infallible>)).keep_alive(
        KeepAlive::new()
            .interval(Duration::from_secs(15))
            .text("keepalive"),
    ))
}

/// A feed of this node: the replay, then what comes until `ended`.
fn local(
    replay: Vec<LiveEvent>,
    rx: Option<tokio::sync::broadcast::Receiver<LiveEvent>>,
) -> BoxStream<'static, Event> {
    let ended_in_replay = replay.iter().any(|e| e.name == LiveEvent::ENDED);
    let rest = futures::stream::unfold((rx, ended_in_replay), |(rx, done)| async move {
        let mut rx = rx?;
        if done {
            return None;
        }
        loop {
            match rx.recv().await {
                Ok(e) => {
                    let done = e.name == LiveEvent::ENDED;
                    return Some((e, (Some(rx), done)));
                }
                // A slow reader missed some events: go on with the next ones.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    futures::stream::iter(replay)
        .chain(rest)
        .map(|e| Event::default().event(e.name).data(e.data.to_string()))
        .boxed()
}
