//! LLM chat streams: a chat is started against an OpenAI-compatible chat-completions
//! upstream (`POST {base_url}/chat/completions` with `stream: true`, answered with
//! server-sent events `data: {chunk}` … `data: [DONE]`), accumulated in memory as it
//! arrives, and polled by id.
//!
//! * [`SseDecoder`] and [`Accumulator`] are the sans-IO core: bytes in, `data:` payloads
//!   out; chunks in, assistant content and assembled tool calls out (a tool call's
//!   arguments arrive split across chunks and are concatenated by `index`).
//! * [`LlmService`] holds the providers and the streams and runs one task per stream.
//!
//! Stream state lives in memory only: a restart forgets running and finished streams
//! (polls then answer 404). Finished streams are forgotten after the retention period.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use futures::StreamExt;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One configured upstream.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LlmProvider {
    /// Name requests select it by (`provider`).
    pub name: String,
    /// Base URL of the OpenAI-compatible API, e.g. `https://api.example.com/v1`; the chat
    /// endpoint is `{base_url}/chat/completions`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// Whether the provider processes data in line with the GDPR (eligible for
    /// `gdpr_required` chats).
    pub gdpr: bool,
    /// Models it serves; a chat naming no provider goes to the first provider listing
    /// its model.
    pub models: Vec<String>,
}

/// A chat message (OpenAI chat format).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChatMessage {
    /// system, user, assistant or tool.
    pub role: String,
    #[serde(default)]
    pub content: Option<String>,
    /// Tool calls of an earlier assistant turn being replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// For role tool: the call this message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

pub use super::llm_sse::{Accumulator, ChunkEffect, FunctionCall, SseDecoder, ToolCall};

/// Lifecycle of a chat stream. `in_progress` until the upstream finishes; `completed`
/// after `[DONE]` (or the end of the event stream after a finish_reason); `failed` when
/// the upstream refused, broke off or reported an error (polls then answer 502).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ChatStatus {
    InProgress,
    Completed,
    Failed,
}

/// How a poll returns generated parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PartsBehavior {
    /// Nothing until the stream finished, then everything (status in_progress before).
    #[default]
    OnFinishGetAll,
    /// The content generated since this stream's previous poll; tool calls once the
    /// stream finished. Status stays in_progress until a poll has delivered everything.
    Incremental,
}

/// One stream's state.
#[derive(Debug)]
struct ChatStream {
    account_sid: String,
    provider: String,
    model: String,
    status: ChatStatus,
    acc: Accumulator,
    error: Option<(String, i64)>,
    /// Bytes of `acc.content` an incremental poll has delivered.
    delivered: usize,
    finished_at: Option<Instant>,
}

impl ChatStream {
    fn new(account_sid: &str, provider: &LlmProvider, req: &ChatRequest) -> ChatStream {
        ChatStream {
            account_sid: account_sid.to_string(),
            provider: provider.name.clone(),
            model: req.model.clone(),
            status: ChatStatus::InProgress,
            acc: Accumulator::default(),
            error: None,
            delivered: 0,
            finished_at: None,
        }
    }
}

/// Whether the account's `global_llm` feature flag is on: the gate of the chat routes
/// and of the LLM bricks of live calls.
pub async fn llm_enabled(
    store: &crate::store::Store,
    account: &crate::store::AccountRecord,
) -> crate::store::StoreResult<bool> {
    let rules = store.flag_rules(&account.tenant_sid).await?;
    Ok(crate::flags::evaluate_all(
        &rules,
        crate::flags::Subject {
            account_sid: &account.sid,
            country: &account.country,
            region: &account.region,
        },
    )
    .iter()
    .any(|(n, on)| *n == "global_llm" && *on))
}

/// What a poll sees.
#[derive(Debug, Clone)]
pub struct PollResult {
    pub id: String,
    pub status: ChatStatus,
    pub provider: String,
    pub model: String,
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
}

/// Why a chat could not start or be polled.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("{0}")]
    Invalid(String),
    #[error("chat stream not found")]
    NotFound,
    #[error("{0}")]
    Upstream(String, i64),
}

/// A chat to start.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub model: String,
    pub provider: Option<String>,
    pub temperature: Option<f64>,
    pub tools: Vec<Value>,
    pub gdpr_required: bool,
}

/// Providers and streams.
#[derive(Debug)]
pub struct LlmService {
    http: reqwest::Client,
    providers: RwLock<Vec<LlmProvider>>,
    streams: Mutex<HashMap<String, Arc<Mutex<ChatStream>>>>,
    /// Upper bound on one stream's duration.
    pub stream_timeout: Duration,
    /// How long a finished stream stays pollable.
    pub retention: Duration,
}

impl LlmService {
    pub fn new(
        http: reqwest::Client,
        providers: Vec<LlmProvider>,
        stream_timeout: Duration,
        retention: Duration,
    ) -> Self {
        LlmService {
            http,
            providers: RwLock::new(providers),
            streams: Mutex::new(HashMap::new()),
            stream_timeout,
            retention,
        }
    }

    pub fn set_providers(&self, providers: Vec<LlmProvider>) {
        *self.providers.write() = providers;
    }

    /// Picks the provider: the named one (it must be GDPR-flagged when required), or the
    /// first serving the model (GDPR-flagged ones only when required).
    pub fn select(&self, req: &ChatRequest) -> Result<LlmProvider, LlmError> {
        let providers = self.providers.read();
        match &req.provider {
            Some(name) if !name.is_empty() => {
                let p = providers.iter().find(|p| p.name == *name).ok_or_else(|| {
                    LlmError::Invalid(format!("provider: no provider named {name:?}"))
                })?;
                if req.gdpr_required && !p.gdpr {
                    return Err(LlmError::Invalid(format!(
                        "provider: {name:?} is not GDPR-compliant and gdpr_required is set"
                    )));
                }
                Ok(p.clone())
            }
            _ => providers
                .iter()
                .find(|p| p.models.contains(&req.model) && (p.gdpr || !req.gdpr_required))
                .cloned()
                .ok_or_else(|| {
                    LlmError::Invalid(format!(
                        "model: no {}provider serves {:?}",
                        if req.gdpr_required {
                            "GDPR-compliant "
                        } else {
                            ""
                        },
                        req.model
                    ))
                }),
        }
    }

    /// Validates a chat request and picks its provider (see [`Self::select`]).
    fn checked_provider(&self, req: &ChatRequest) -> Result<LlmProvider, LlmError> {
        if req.messages.is_empty() {
            return Err(LlmError::Invalid(
                "messages: at least one message is required".into(),
            ));
        }
        if req.model.trim().is_empty() {
            return Err(LlmError::Invalid("model: required".into()));
        }
        if let Some(t) = req.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(LlmError::Invalid(
                "temperature: must be between 0 and 2".into(),
            ));
        }
        for (i, t) in req.tools.iter().enumerate() {
            if t["type"] != "function" || !t["function"]["name"].is_string() {
                return Err(LlmError::Invalid(format!(
                    "tools[{i}]: expected {{\"type\": \"function\", \"function\": {{\"name\", \"parameters\"…}}}}"
                )));
            }
        }
        self.select(req)
    }

    /// One-shot completion for callers inside the process (the LLM bricks of live calls):
    /// the same validation, provider choice and streaming upstream client as [`Self::start`],
    /// awaited to the end within `within` (and the stream timeout). Nothing is kept for
    /// polling. Returns the accumulated answer (content, tool calls, finish reason).
    pub async fn complete(
        &self,
        account_sid: &str,
        req: ChatRequest,
        within: Duration,
    ) -> Result<Accumulator, LlmError> {
        self.complete_streaming(account_sid, req, within, None)
            .await
    }

    /// [`Self::complete`], handing each piece of the answer's content to `deltas` as it
    /// arrives (a provider that answers one JSON document instead of a stream hands over
    /// its whole content at once). What was handed over before an error stays handed over.
    pub async fn complete_streaming(
        &self,
        account_sid: &str,
        req: ChatRequest,
        within: Duration,
        deltas: Option<&tokio::sync::mpsc::UnboundedSender<String>>,
    ) -> Result<Accumulator, LlmError> {
        let provider = self.checked_provider(&req)?;
        let stream = Mutex::new(ChatStream::new(account_sid, &provider, &req));
        let within = within.min(self.stream_timeout);
        let run = run_upstream(&self.http, &provider, &req, &stream, deltas);
        match tokio::time::timeout(within, run).await {
            Ok(Ok(())) => Ok(std::mem::take(&mut stream.lock().acc)),
            Ok(Err((m, c))) => Err(LlmError::Upstream(m, c)),
            Err(_) => Err(LlmError::Upstream(
                format!(
                    "provider {}: no complete answer within {} ms",
                    provider.name,
                    within.as_millis()
                ),
                0,
            )),
        }
    }

    /// Starts a chat for an account; returns the stream id at once (the upstream is
    /// read by a background task).
    pub fn start(
        self: &Arc<Self>,
        account_sid: &str,
        req: ChatRequest,
    ) -> Result<String, LlmError> {
        let provider = self.checked_provider(&req)?;
        self.forget_expired();
        let id = format!("chat_{}", uuid::Uuid::now_v7().simple());
        let stream = Arc::new(Mutex::new(ChatStream::new(account_sid, &provider, &req)));
        self.streams.lock().insert(id.clone(), stream.clone());
        let http = self.http.clone();
        let timeout = self.stream_timeout;
        tokio::spawn(async move {
            let result =
                tokio::time::timeout(timeout, run_upstream(&http, &provider, &req, &stream, None))
                    .await;
            let mut s = stream.lock();
            match result {
                Ok(Ok(())) => s.status = ChatStatus::Completed,
                Ok(Err((m, c))) => {
                    s.status = ChatStatus::Failed;
                    s.error = Some((m, c));
                }
                Err(_) => {
                    s.status = ChatStatus::Failed;
                    s.error = Some((
                        format!("upstream did not finish within {} s", timeout.as_secs()),
                        0,
                    ));
                }
            }
            s.finished_at = Some(Instant::now());
        });
        Ok(id)
    }

    fn forget_expired(&self) {
        let retention = self.retention;
        self.streams
            .lock()
            .retain(|_, s| s.lock().finished_at.is_none_or(|t| t.elapsed() < retention));
    }

    /// The account a stream belongs to (for scope checks before polling).
    pub fn owner(&self, id: &str) -> Option<String> {
        self.streams
            .lock()
            .get(id)
            .map(|s| s.lock().account_sid.clone())
    }

    /// Polls a stream.
    pub fn poll(&self, id: &str, behavior: PartsBehavior) -> Result<PollResult, LlmError> {
        let stream = self
            .streams
            .lock()
            .get(id)
            .cloned()
            .ok_or(LlmError::NotFound)?;
        let mut s = stream.lock();
        if s.status == ChatStatus::Failed {
            let (m, c) = s
                .error
                .clone()
                .unwrap_or_else(|| ("upstream failed".into(), 0));
            return Err(LlmError::Upstream(m, c));
        }
        let finished = s.status == ChatStatus::Completed;
        let mut out = PollResult {
            id: id.to_string(),
            status: ChatStatus::InProgress,
            provider: s.provider.clone(),
            model: s.model.clone(),
            content: String::new(),
            tool_calls: vec![],
            finish_reason: None,
        };
        match behavior {
            PartsBehavior::OnFinishGetAll => {
                if finished {
                    out.status = ChatStatus::Completed;
                    out.content = s.acc.content.clone();
                    out.tool_calls = s.acc.tool_calls.clone();
                    out.finish_reason = s.acc.finish_reason.clone();
                    s.delivered = s.acc.content.len();
                }
            }
            PartsBehavior::Incremental => {
                out.content = s.acc.content[s.delivered..].to_string();
                s.delivered = s.acc.content.len();
                if finished {
                    out.status = ChatStatus::Completed;
                    out.tool_calls = s.acc.tool_calls.clone();
                    out.finish_reason = s.acc.finish_reason.clone();
                }
            }
        }
        Ok(out)
    }
}

/// Largest non-streamed (JSON) answer read.
const MAX_JSON_ANSWER: usize = 4 << 20;

/// Reads one chat from its upstream into `stream`, each piece of content also sent to
/// `deltas`. The upstream streams server-sent events; an `application/json` answer (a
/// provider that does not stream) is read as one chat completion. Err carries message
/// and code.
async fn run_upstream(
    http: &reqwest::Client,
    provider: &LlmProvider,
    req: &ChatRequest,
    stream: &Mutex<ChatStream>,
    deltas: Option<&tokio::sync::mpsc::UnboundedSender<String>>,
) -> Result<(), (String, i64)> {
    let url = format!(
        "{}/chat/completions",
        provider.base_url.trim_end_matches('/')
    );
    let mut body =
        serde_json::json!({"model": req.model, "messages": req.messages, "stream": true});
    if let Some(t) = req.temperature {
        body["temperature"] = t.into();
    }
    if !req.tools.is_empty() {
        body["tools"] = Value::Array(req.tools.clone());
    }
    let mut rb = http
        .post(&url)
        .json(&body)
        .header("accept", "text/event-stream");
    if let Some(k) = &provider.api_key {
        rb = rb.bearer_auth(k);
    }
    let resp = rb
        .send()
        .await
        .map_err(|e| (format!("provider {}: {e}", provider.name), 0))?;
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let msg = v["error"]["message"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| text.chars().take(200).collect());
        return Err((
            format!(
                "provider {} answered HTTP {}: {msg}",
                provider.name,
                status.as_u16()
            ),
            v["error"]["code"].as_i64().unwrap_or(0),
        ));
    }
    let is_json = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            t.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    let send = |piece: &str| {
        if let Some(tx) = deltas
            && !piece.is_empty()
        {
            let _ = tx.send(piece.to_string());
        }
    };
    if is_json {
        let body = read_bounded(resp, MAX_JSON_ANSWER)
            .await
            .map_err(|e| (format!("provider {}: {e}", provider.name), 0))?;
        let mut acc = Accumulator::default();
        acc.apply_completion(&body)
            .map_err(|(m, c)| (format!("provider {}: {m}", provider.name), c))?;
        send(&acc.content);
        stream.lock().acc = acc;
        return Ok(());
    }
    let mut decoder = SseDecoder::default();
    let mut bytes = resp.bytes_stream();
    let apply = |payload: &str| -> Result<bool, (String, i64)> {
        let mut s = stream.lock();
        let before = s.acc.content.len();
        let effect = s.acc.apply(payload);
        send(&s.acc.content[before..]);
        match effect {
            ChunkEffect::Continue => Ok(false),
            ChunkEffect::Done => Ok(true),
            ChunkEffect::Error(m, c) => Err((format!("provider {}: {m}", provider.name), c)),
        }
    };
    while let Some(chunk) = bytes.next().await {
        let chunk = chunk.map_err(|e| {
            (
                format!("provider {}: stream broke off: {e}", provider.name),
                0,
            )
        })?;
        for payload in decoder.feed(&chunk) {
            if apply(&payload)? {
                return Ok(());
            }
        }
    }
    if let Some(payload) = decoder.finish()
        && apply(&payload)?
    {
        return Ok(());
    }
    if stream.lock().acc.finish_reason.is_some() {
        Ok(())
    } else {
        Err((
            format!(
                "provider {}: stream ended before the answer finished",
                provider.name
            ),
            0,
        ))
    }
}

/// A body of at most `max` bytes.
async fn read_bounded(resp: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    let mut bytes = resp.bytes_stream();
    while let Some(chunk) = bytes.next().await {
        let chunk = chunk.map_err(|e| format!("the answer broke off: {e}"))?;
        if body.len() + chunk.len() > max {
            return Err(format!("the answer is larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_decoder_splits_events_across_reads() {
        let mut d = SseDecoder::default();
        assert!(d.feed(b"data: {\"a\"").is_empty());
        assert_eq!(
            d.feed(b":1}\n\n: comment\n\ndata: [DONE]\r\n\r\n"),
            vec!["{\"a\":1}", "[DONE]"]
        );
        assert!(d.feed(b"data: x").is_empty());
        assert_eq!(d.finish().as_deref(), Some("x"));
    }

    #[test]
    fn accumulator_joins_content_and_split_tool_call_arguments() {
        let mut a = Accumulator::default();
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"ci"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Berlin\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ];
        for c in chunks {
            assert_eq!(a.apply(c), ChunkEffect::Continue);
        }
        assert_eq!(a.apply("[DONE]"), ChunkEffect::Done);
        assert_eq!(a.content, "Hello");
        assert_eq!(a.tool_calls.len(), 1);
        assert_eq!(a.tool_calls[0].id, "call_1");
        assert_eq!(a.tool_calls[0].function.name, "get_weather");
        let args: Value =
            serde_json::from_str(&a.tool_calls[0].function.arguments).expect("JSON args");
        assert_eq!(args["city"], "Berlin");
        assert_eq!(a.finish_reason.as_deref(), Some("tool_calls"));
        assert!(
            matches!(a.apply(r#"{"error":{"message":"quota","code":429}}"#), ChunkEffect::Error(m, 429) if m == "quota")
        );
        assert!(matches!(a.apply("not json"), ChunkEffect::Error(_, 0)));
    }
}
