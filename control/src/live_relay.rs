//! The live view of a test call that another node runs (engines as peers on PostgreSQL).
//!
//! A call's live feed ([`callsmith_domain::live_feed`]) lives in the memory of the node
//! running the call. A node asked for the feed of a call it does not run finds the node that
//! holds the call's claim (the claim token names the node's heartbeat row, `engine_nodes`)
//! and relays that node's own `GET /v1/communication/{id}/live`: the same events in the same
//! order, the replay for a late subscriber included. The address comes from that row, which
//! the node writes from its operator setting `http.internal_url`; nothing a tenant sends
//! names it. The caller's credentials (`Authorization`, `Cookie`, `X-Account-Sid`,
//! `X-Tenant-Sid`) go with the request, so the owner checks them again as for any request.
//! A relayed request carries [`RELAYED`]: the node answering it never relays further.
//!
//! When the owner stops (killed, or its machine gone), the relayed stream does not hang:
//! every [`CHECK_EVERY`] the relay reads the call's row, and once the row is final (the peer
//! that took the node over wrote the call's end) it sends `ended` from the row, if the owner
//! did not send its own within [`OWN_END_GRACE`]. An owner gone for [`LOST_WAIT`] without a
//! final row closes the stream.

use std::collections::VecDeque;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use futures::Stream;

use crate::api::{ApiError, AppState, ErrorBody};
use crate::live_feed::LiveEvent;
use crate::store::CommunicationRecord;

/// The header marking a request one node relays to another.
pub const RELAYED: &str = "x-callsmith-relayed";
/// The caller's headers the relayed request carries (the owner authorizes them again).
const FORWARDED: [&str; 4] = ["authorization", "cookie", "x-account-sid", "x-tenant-sid"];
/// Longest wait for the owner to answer the relayed request with its response head.
pub const CONNECT_WITHIN: Duration = Duration::from_secs(5);
/// How often a relay reads the call's row while it streams.
pub const CHECK_EVERY: Duration = Duration::from_millis(500);
/// How long the owner's own `ended` is awaited once the row is final.
pub const OWN_END_GRACE: Duration = Duration::from_secs(2);
/// How long a relay whose owner went silent or away waits for the row to become final.
pub const LOST_WAIT: Duration = Duration::from_secs(30);

/// The error code of a feed whose node cannot be relayed from.
pub const UNREACHABLE: &str = "live_node_unreachable";

fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .unwrap_or_default()
    })
}

/// One event as relayed: its name and its `data` as the owner sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayedEvent {
    pub name: String,
    pub data: String,
}

/// The `ended` event of a call whose row is final, as the row has it.
pub fn ended_from_row(c: &CommunicationRecord) -> LiveEvent {
    let goals: serde_json::Value =
        serde_json::from_str(&c.goals).unwrap_or(serde_json::Value::Null);
    LiveEvent {
        name: LiveEvent::ENDED,
        data: serde_json::json!({
            "communication_status": c.communication_status,
            "call_status": c.call_status,
            "goals": goals,
            "end_reason": c.end_reason,
        }),
    }
}

/// Whether this request may be relayed to the node holding `c`'s claim: a test call
/// claimed by a node, on PostgreSQL (an SQLite file belongs to one process), and not a
/// request relayed already.
pub fn relayable(state: &AppState, c: &CommunicationRecord, headers: &HeaderMap) -> bool {
    c.is_test
        && c.claim_token.is_some()
        && state.store.backend() == crate::store::Backend::Postgres
        && !headers.contains_key(RELAYED)
}

fn unreachable(message: String) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, UNREACHABLE, message)
}

/// Opens the relay of `c`'s feed from the node holding its claim: 503
/// `live_node_unreachable` when that node is unknown, publishes no address or does not
/// answer in time; the owner's own refusal (its envelope and status) otherwise.
pub async fn open(
    state: &AppState,
    c: &CommunicationRecord,
    headers: &HeaderMap,
) -> Result<impl Stream<Item = RelayedEvent> + Send + 'static, ApiError> {
    let token = c.claim_token.as_deref().unwrap_or_default();
    let Some(node) = state.store.node_get(token).await? else {
        return Err(unreachable(format!(
            "communication {} runs on a node that writes no heartbeat any more (it stopped; a \
             peer ends its calls): its live feed cannot be relayed",
            c.sid
        )));
    };
    let Some(base) = node.api_url.as_deref() else {
        return Err(unreachable(format!(
            "communication {} runs on node {}, which publishes no address for its peers \
             (http.internal_url): its live feed cannot be relayed",
            c.sid, node.instance
        )));
    };
    let url = format!(
        "{}/v1/communication/{}/live",
        base.trim_end_matches('/'),
        c.sid
    );
    let mut req = client().get(&url).header(RELAYED, "1");
    for name in FORWARDED {
        for v in headers.get_all(name) {
            req = req.header(name, v.clone());
        }
    }
    let resp = match tokio::time::timeout(CONNECT_WITHIN, req.send()).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            return Err(unreachable(format!(
                "communication {} runs on node {} at {base}, which cannot be reached: {e}",
                c.sid, node.instance
            )));
        }
        Err(_) => {
            return Err(unreachable(format!(
                "communication {} runs on node {} at {base}, which did not answer within {} s",
                c.sid,
                node.instance,
                CONNECT_WITHIN.as_secs()
            )));
        }
    };
    if resp.status() != reqwest::StatusCode::OK {
        let status =
            StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        let body = resp.text().await.unwrap_or_default();
        return Err(match serde_json::from_str::<ErrorBody>(&body) {
            Ok(b) => {
                let e = ApiError::new(status, b.error, b.message);
                match b.data {
                    Some(d) => e.with_data(d),
                    None => e,
                }
            }
            Err(_) => unreachable(format!(
                "communication {} runs on node {} at {base}, which answered {status} without \
                 the API's envelope",
                c.sid, node.instance
            )),
        });
    }
    Ok(relay(state.clone(), c.sid.clone(), resp))
}

/// What a relay is doing between two events.
struct Relay {
    state: AppState,
    sid: String,
    /// The owner's response; None once it ended or failed.
    upstream: Option<reqwest::Response>,
    parser: SseParser,
    ready: VecDeque<RelayedEvent>,
    /// When the owner's stream ended or failed.
    lost_at: Option<Instant>,
    /// When the row was first seen final.
    final_at: Option<Instant>,
    done: bool,
}

fn relay(
    state: AppState,
    sid: String,
    resp: reqwest::Response,
) -> impl Stream<Item = RelayedEvent> + Send + 'static {
    let r = Relay {
        state,
        sid,
        upstream: Some(resp),
        parser: SseParser::default(),
        ready: VecDeque::new(),
        lost_at: None,
        final_at: None,
        done: false,
    };
    futures::stream::unfold(r, |mut r| async move {
        let e = r.next().await?;
        Some((e, r))
    })
}

impl Relay {
    async fn next(&mut self) -> Option<RelayedEvent> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                if e.name == LiveEvent::ENDED {
                    self.done = true;
                    self.ready.clear();
                }
                return Some(e);
            }
            if self.done {
                return None;
            }
            let chunk = match self.upstream.as_mut() {
                Some(up) => tokio::time::timeout(CHECK_EVERY, up.chunk()).await.ok(),
                None => {
                    tokio::time::sleep(CHECK_EVERY).await;
                    None
                }
            };
            match chunk {
                Some(Ok(Some(bytes))) => {
                    self.ready.extend(self.parser.push(&bytes));
                    continue;
                }
                // The owner's stream ended without `ended`, or broke: its node stopped.
                Some(Ok(None)) | Some(Err(_)) => {
                    self.upstream = None;
                    self.lost_at.get_or_insert_with(Instant::now);
                }
                // No bytes for a while: look at the row below.
                None => {}
            }
            self.check_row().await;
        }
    }

    /// Reads the row: a final row ends the relay with `ended` from it once the owner had
    /// its grace to send its own; an owner lost for [`LOST_WAIT`] closes it.
    async fn check_row(&mut self) {
        let row = match self.state.store.communication_get(&self.sid).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                self.done = true;
                return;
            }
            Err(e) => {
                tracing::warn!(communication = %self.sid, error = %e, "a live relay could not read its call");
                if self.lost_at.is_some_and(|t| t.elapsed() >= LOST_WAIT) {
                    self.done = true;
                }
                return;
            }
        };
        if row.communication_status.is_final() {
            let since = *self.final_at.get_or_insert_with(Instant::now);
            if self.upstream.is_none() || since.elapsed() >= OWN_END_GRACE {
                let e = ended_from_row(&row);
                self.ready.push_back(RelayedEvent {
                    name: e.name.to_string(),
                    data: e.data.to_string(),
                });
            }
        } else if self.lost_at.is_some_and(|t| t.elapsed() >= LOST_WAIT) {
            self.done = true;
        }
    }
}

/// Splits a `text/event-stream` body into events (comments and keep-alives dropped).
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    /// Adds bytes; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<RelayedEvent> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = self.buf.drain(..end + 2).collect();
            let block = String::from_utf8_lossy(&block);
            let (mut name, mut data) = (String::new(), Vec::new());
            for line in block.lines() {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => name = value.to_string(),
                    "data" => data.push(value.to_string()),
                    _ => {}
                }
            }
            if !data.is_empty() {
                if name.is_empty() {
                    name = "message".into();
                }
                out.push(RelayedEvent {
                    name,
                    data: data.join("\n"),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_parsed_and_comments_dropped() {
        let mut p = SseParser::default();
        assert!(p.push(b"event: brick\ndata: {\"brick_id\"").is_empty());
        let got = p.push(b":\"s\"}\n\n: keepalive\n\nevent: ended\ndata: {}\n\nevent: tr");
        assert_eq!(
            got,
            vec![
                RelayedEvent {
                    name: "brick".into(),
                    data: "{\"brick_id\":\"s\"}".into()
                },
                RelayedEvent {
                    name: "ended".into(),
                    data: "{}".into()
                },
            ]
        );
        assert_eq!(
            p.push(b"ace\ndata: 1\n\n"),
            vec![RelayedEvent {
                name: "trace".into(),
                data: "1".into()
            }]
        );
    }
}
