//! Streaming speech recognition over websockets.
//!
//! Two wire protocols: the Vosk-server protocol (config text frame, binary
//! 16-bit LE PCM, `{"partial"}` / `{"result","text"}` answers, `{"eof":1}`) and a
//! Deepgram-style protocol ([`deepgram`]: query parameters, binary audio, `Results` and
//! `UtteranceEnd` answers whose final segments are joined into the caller's turn,
//! `KeepAlive` and `CloseStream`).
//!
//! Nodes come from configuration ([`SttNodeConfig`]); [`SttPool::pick`] returns
//! a node whose readiness probe answers 200 and that has not failed recently.
//! A node failing mid-stream is reported as [`SttEvent::NodeFailed`] and marked,
//! so the next stream picks another ready node.
//!
//! A node's URL is `ws://` or `wss://`. Over `wss://` the client speaks TLS (rustls, ring)
//! trusting the public web roots (`webpki-roots`, the set reqwest's `rustls-tls` uses) and
//! the CA certificates of the node's `ca_file` (private deployments). A node with an API
//! key (`api_key`, or `api_key_env` naming the variable that holds it) sends it as
//! `Authorization: Token <key>`, as Deepgram expects. Node URLs come from the operator's
//! configuration only (a tenant names an engine, never a URL), so they are trusted like
//! every configured upstream and not subject to the reach rules of tenant-named URLs.
//!
//! Also the batch helper [`recognize`] used by POST /v1/adapters/stt/{engine}/run.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::MediaError;

mod deepgram;
use crate::prompt::{FRAME_SAMPLES, Prompt, PromptError};
use crate::{
    MediaSession,
    events::{AudioFrame, AudioReceiver},
};

/// Wire protocol of a recognition node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SttProtocol {
    Vosk,
    Deepgram,
}

/// One recognition node from configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SttNodeConfig {
    pub name: String,
    /// Websocket URL, e.g. `ws://127.0.0.1:2700` (Vosk), `ws://host/v1/listen` (Deepgram-style)
    /// or `wss://api.deepgram.com/v1/listen` (TLS).
    pub url: String,
    pub protocol: SttProtocol,
    /// HTTP readiness probe answering 200 when the node can serve (e.g. `http://127.0.0.1:2700/ready`).
    /// Without one, a TCP connect to the websocket's host and port is the probe.
    #[serde(default)]
    pub ready_url: Option<String>,
    /// API key, sent as `Authorization: Token <key>` when the stream connects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Name of an environment variable holding the API key; used when `api_key` is unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// PEM file of CA certificates trusted for this node's `wss://` URL besides the public
    /// roots (a private deployment's own CA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Deepgram-style nodes: milliseconds without a word after which the service sends
    /// `UtteranceEnd`, which ends a turn whose segments were finalized without
    /// `speech_final` (noisy lines, where endpointing on silence never fires). At least
    /// 1000 (the service measures it on its interim results, about one a second). Unset:
    /// not asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utterance_end_ms: Option<u32>,
    /// The node takes the local speech node's `patience` stream option (how soon it may end
    /// the caller's turn; docs/voice.md, "Turn policy"): sent only to such a node. The local
    /// node registered by `[speech]` has it on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub turn_patience: bool,
}

impl SttNodeConfig {
    /// A node without key, CA file or readiness URL.
    pub fn new(name: impl Into<String>, url: impl Into<String>, protocol: SttProtocol) -> Self {
        SttNodeConfig {
            name: name.into(),
            url: url.into(),
            protocol,
            ready_url: None,
            api_key: None,
            api_key_env: None,
            ca_file: None,
            utterance_end_ms: None,
            turn_patience: false,
        }
    }

    /// The API key: `api_key`, else the value of `api_key_env` (an error when that variable
    /// is not set), else none.
    pub fn key(&self) -> Result<Option<String>, String> {
        match (&self.api_key, &self.api_key_env) {
            (Some(k), _) => Ok(Some(k.clone())),
            (None, Some(var)) => std::env::var(var)
                .map(Some)
                .map_err(|_| format!("api_key_env: {var} is not set")),
            (None, None) => Ok(None),
        }
    }

    /// Checks what can be checked before a call: the URL (`ws://` or `wss://` with a host),
    /// the key's variable, that `ca_file` reads as PEM certificates (and is only given
    /// with `wss://`), and that `utterance_end_ms` is only given to a Deepgram-style node,
    /// at 1000 or more.
    pub fn check(&self) -> Result<(), String> {
        match (self.utterance_end_ms, self.protocol) {
            (Some(_), SttProtocol::Vosk) => {
                return Err(
                    "utterance_end_ms is a Deepgram-style setting; this node speaks the Vosk \
                     protocol"
                        .into(),
                );
            }
            (Some(ms), _) if ms < 1000 => {
                return Err(format!(
                    "utterance_end_ms = {ms}: at least 1000 (the service measures it on its \
                     interim results, about one a second)"
                ));
            }
            _ => {}
        }
        let u = url::Url::parse(&self.url).map_err(|e| format!("url {:?}: {e}", self.url))?;
        if u.host_str().is_none() {
            return Err(format!("url {:?} has no host", self.url));
        }
        match u.scheme() {
            "wss" => {
                tls_client_config(self)?;
            }
            "ws" if self.ca_file.is_some() => {
                return Err(format!(
                    "ca_file is set but url {:?} is not wss://",
                    self.url
                ));
            }
            "ws" => {}
            other => {
                return Err(format!(
                    "url {:?}: scheme {other} is not ws or wss",
                    self.url
                ));
            }
        }
        self.key().map(|_| ())
    }
}

/// The TLS client settings of a `wss://` node: the public web roots plus the certificates
/// of its `ca_file`, ring as the crypto provider.
pub fn tls_client_config(node: &SttNodeConfig) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = &node.ca_file {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!("ca_file {}: no certificate in it", path.display()));
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        }
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(cfg))
}

/// Recognition parameters of one stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SttParams {
    pub language: String,
    pub model: String,
    pub interim_results: bool,
    /// Silence in milliseconds after speech that ends the caller's turn, for this stream
    /// (a question's `speech_timeout`). Sent as Deepgram's `endpointing` query parameter, or
    /// `endpointing` in the Vosk config frame (the local speech node's extension). `None`:
    /// the node decides (the local node: Smart Turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpointing_ms: Option<u32>,
    /// Whether the node ends the caller's turn on silence (its voice activity detection).
    /// `false` (a question's `enable_voice_activity_detection: false`): the node never
    /// ends the turn by itself (`endpointing=false`), the client's finish does.
    #[serde(default = "yes")]
    pub vad_endpointing: bool,
    /// Further languages the caller may speak besides `language` (a question's
    /// `fallback_languages`): the node identifies the spoken one among `language` and
    /// these. Empty: `language` alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternative_languages: Vec<String>,
    /// Words and phrases to favour (a question's `tokens` and `class_token.tokens`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
    /// How soon the node may end the caller's turn (`short`, `normal`, `long`, `digits`:
    /// from the question, `callsmith_scenarios::listening::patience`). Sent as `patience`
    /// (a query parameter, or in the Vosk config frame) to a node that takes it
    /// ([`SttNodeConfig::turn_patience`]); the question's `speech_timeout`
    /// (`endpointing_ms`) wins over the patience's silence cap. `None`: not sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patience: Option<String>,
    /// The rate of the audio streamed (sent as `sample_rate`): the session's
    /// ([`MediaSession::audio_rate`], set by [`MediaSession::start_stt`]), 16 kHz on a
    /// G.722 call. Frames of another rate are converted to it.
    #[serde(skip)]
    pub audio_rate: crate::rate::AudioRate,
}

fn yes() -> bool {
    true
}

impl Default for SttParams {
    fn default() -> Self {
        SttParams {
            language: "en-US".into(),
            model: String::new(),
            interim_results: true,
            endpointing_ms: None,
            vad_endpointing: true,
            alternative_languages: Vec::new(),
            hints: Vec::new(),
            patience: None,
            audio_rate: crate::rate::AudioRate::Narrow,
        }
    }
}

impl SttParams {
    /// The languages to identify among, `language` first; empty when there is only one.
    pub fn candidate_languages(&self) -> Vec<&str> {
        if self.alternative_languages.is_empty() {
            return Vec::new();
        }
        let mut out = vec![self.language.as_str()];
        for l in &self.alternative_languages {
            if !out.contains(&l.as_str()) {
                out.push(l);
            }
        }
        out
    }

    /// The patience to send to `node`: the stream's, when the node takes it.
    fn patience_for(&self, node: &SttNodeConfig) -> Option<&str> {
        self.patience.as_deref().filter(|_| node.turn_patience)
    }

    /// Whether a Deepgram-style node takes the hints as `keyterm` (Nova-3 models, and the
    /// provider's default model) rather than `keywords` (older models).
    fn keyterms(&self) -> bool {
        self.model.is_empty() || self.model.starts_with("nova-3")
    }
}

#[derive(Debug, Error)]
pub enum SttError {
    #[error("no ready recognition node")]
    NoReadyNode,
    #[error("recognition node {node} failed: {message}")]
    NodeFailed { node: String, message: String },
    #[error("audio source: {0}")]
    Source(#[from] PromptError),
    #[error(transparent)]
    Media(#[from] MediaError),
}

/// A recognition result in call time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transcript {
    pub text: String,
    pub is_final: bool,
    /// Call time of the audio sent so far when the result arrived.
    pub at_ms: u64,
    /// Call time where the recognised speech ends (word timings when the node gives them, else `at_ms`).
    pub end_ms: u64,
    pub node: String,
    /// For a final: milliseconds between the node's end-of-turn decision and its sending
    /// this result (its decoding), when the node reports it (`decision_to_final_ms`, the
    /// local speech node's extension of both protocols).
    pub decision_to_final_ms: Option<u64>,
    /// The language the node recognised (`channel.alternatives[0].languages[0]` of a
    /// Deepgram-style result, `language` of a Vosk one), when it reports one.
    pub language: Option<String>,
    /// An interim transcript the node sent with its end-of-turn decision, ahead of the
    /// final (the local speech node's `EndOfTurn` event): the listener may decide from it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub end_of_turn: bool,
}

/// What a stream reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum SttEvent {
    Transcript(Transcript),
    /// The node broke the stream (connect failure, reset, protocol error).
    NodeFailed {
        node: String,
        error: String,
    },
    /// The node closed the stream after the final result.
    Ended,
    /// The local speech node's eager end of turn (`EagerEndOfTurn`): after a short silence,
    /// the turn's transcript so far; the node may take it back ([`SttEvent::TurnResumed`]),
    /// and its `EndOfTurn` and final follow as usual.
    EagerEndOfTurn {
        text: String,
    },
    /// The caller went on speaking in the turn after an eager end of turn (`TurnResumed`):
    /// the turn goes on, and its final covers both parts.
    TurnResumed,
}

struct NodeState {
    cfg: SttNodeConfig,
    failed_at: Mutex<Option<Instant>>,
    /// TLS settings of a `wss://` node, built on its first stream.
    tls: OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
}

/// The configured nodes with their health.
#[derive(Clone)]
pub struct SttPool {
    nodes: Arc<Vec<NodeState>>,
    next: Arc<AtomicUsize>,
    http: reqwest::Client,
    /// A failed node is skipped for this long.
    pub retry_after: Duration,
}

impl SttPool {
    pub fn new(nodes: Vec<SttNodeConfig>) -> SttPool {
        SttPool {
            nodes: Arc::new(
                nodes
                    .into_iter()
                    .map(|cfg| NodeState {
                        cfg,
                        failed_at: Mutex::new(None),
                        tls: OnceLock::new(),
                    })
                    .collect(),
            ),
            next: Arc::new(AtomicUsize::new(0)),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap_or_default(),
            retry_after: Duration::from_secs(10),
        }
    }

    pub fn nodes(&self) -> impl Iterator<Item = &SttNodeConfig> {
        self.nodes.iter().map(|n| &n.cfg)
    }

    /// Runs the node's readiness probe.
    pub async fn probe(&self, node: &SttNodeConfig) -> bool {
        if let Some(u) = &node.ready_url {
            return matches!(self.http.get(u).send().await, Ok(r) if r.status().is_success());
        }
        let Ok(url) = url::Url::parse(&node.url) else {
            return false;
        };
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return false;
        };
        matches!(
            tokio::time::timeout(
                Duration::from_secs(2),
                tokio::net::TcpStream::connect((host, port))
            )
            .await,
            Ok(Ok(_))
        )
    }

    /// The TLS settings of `node` (kept per pool node; built afresh for a node not in it).
    fn tls(&self, node: &SttNodeConfig) -> Result<Arc<rustls::ClientConfig>, String> {
        match self.nodes.iter().find(|n| n.cfg == *node) {
            Some(n) => n.tls.get_or_init(|| tls_client_config(node)).clone(),
            None => tls_client_config(node),
        }
    }

    /// Marks a node failed; `pick` skips it for `retry_after`.
    pub fn mark_failed(&self, name: &str) {
        for n in self.nodes.iter().filter(|n| n.cfg.name == name) {
            *n.failed_at.lock() = Some(Instant::now());
        }
    }

    /// A ready node, round-robin over the healthy ones.
    pub async fn pick(&self) -> Result<SttNodeConfig, SttError> {
        let count = self.nodes.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..count {
            let n = &self.nodes[(start + i) % count];
            let recently_failed = n
                .failed_at
                .lock()
                .is_some_and(|t| t.elapsed() < self.retry_after);
            if recently_failed {
                continue;
            }
            if self.probe(&n.cfg).await {
                return Ok(n.cfg.clone());
            }
            self.mark_failed(&n.cfg.name);
        }
        Err(SttError::NoReadyNode)
    }
}

/// A running recognition stream.
pub struct SttStream {
    pub node: SttNodeConfig,
    events: mpsc::Receiver<SttEvent>,
    finish: Option<oneshot::Sender<()>>,
}

impl SttStream {
    /// A stream whose events `events` receives and whose `finish` sends on `finish`:
    /// [`start_stream`]'s, or a stand-in recognizer's (an in-process test peer).
    pub fn new(
        node: SttNodeConfig,
        events: mpsc::Receiver<SttEvent>,
        finish: oneshot::Sender<()>,
    ) -> SttStream {
        SttStream {
            node,
            events,
            finish: Some(finish),
        }
    }

    /// Next event; None once the stream task ended.
    pub async fn next(&mut self) -> Option<SttEvent> {
        self.events.recv().await
    }

    /// Ends the audio: the node flushes its final result, then `Ended` is reported.
    pub fn finish(&mut self) {
        if let Some(f) = self.finish.take() {
            let _ = f.send(());
        }
    }
}

impl MediaSession {
    /// Streams this session's caller audio to a ready node of `pool`, at the session's
    /// audio rate.
    pub async fn start_stt(
        &self,
        pool: &SttPool,
        mut params: SttParams,
    ) -> Result<SttStream, SttError> {
        let node = pool.pick().await?;
        params.audio_rate = self.audio_rate();
        let audio = self.tap_caller_audio(500)?;
        Ok(start_stream(pool.clone(), node, params, audio))
    }
}

/// Streams the frames from `audio` to `node` at `params.audio_rate` (ends when `audio`
/// closes or on `finish`).
pub fn start_stream(
    pool: SttPool,
    node: SttNodeConfig,
    params: SttParams,
    audio: AudioReceiver,
) -> SttStream {
    let (etx, erx) = mpsc::channel(256);
    let (ftx, frx) = oneshot::channel();
    let n = node.clone();
    tokio::spawn(async move {
        if let Err(error) = run_stream(&pool, &n, &params, audio, frx, &etx).await {
            pool.mark_failed(&n.name);
            let _ = etx
                .send(SttEvent::NodeFailed {
                    node: n.name.clone(),
                    error,
                })
                .await;
        }
    });
    SttStream {
        node,
        events: erx,
        finish: Some(ftx),
    }
}

/// The Vosk protocol's first text frame.
fn vosk_config(node: &SttNodeConfig, params: &SttParams) -> String {
    let mut config = serde_json::json!({"sample_rate": params.audio_rate.hz()});
    if !params.vad_endpointing {
        config["endpointing"] = false.into();
    } else if let Some(ms) = params.endpointing_ms {
        config["endpointing"] = ms.into();
    }
    let languages = params.candidate_languages();
    if !languages.is_empty() {
        config["languages"] = languages.into();
    }
    if !params.hints.is_empty() {
        config["hints"] = params.hints.clone().into();
    }
    if let Some(p) = params.patience_for(node) {
        config["patience"] = p.into();
    }
    serde_json::json!({ "config": config }).to_string()
}

fn stream_url(node: &SttNodeConfig, params: &SttParams) -> Result<String, String> {
    match node.protocol {
        SttProtocol::Vosk => Ok(node.url.clone()),
        SttProtocol::Deepgram => deepgram::listen_url(node, params),
    }
}

/// A final's `decision_to_final_ms` (the local speech node's extension of the Vosk and
/// Deepgram-style results: its end-of-turn decision to the final sent), if present and sane
/// (under a minute).
fn decision_lag(text: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let ms = v.get("decision_to_final_ms")?.as_f64()?;
    (ms.is_finite() && (0.0..60_000.0).contains(&ms)).then_some(ms.round() as u64)
}

/// One node message's result.
#[derive(Debug, PartialEq)]
struct Parsed {
    text: String,
    is_final: bool,
    /// Where the speech ends, in seconds of the stream, if known.
    end_s: Option<f64>,
    /// The language the node recognised, if it says.
    language: Option<String>,
    /// The node's end-of-turn event (an interim transcript ahead of the final).
    end_of_turn: bool,
    /// The node's eager end of turn, or its taking it back (Deepgram-style streams).
    eager: Option<Eager>,
}

/// The local speech node's eager end of turn and its taking back.
#[derive(Debug, PartialEq, Clone, Copy)]
enum Eager {
    EndOfTurn,
    Resumed,
}

/// Parses one Vosk-protocol message into its result (text, finality, speech end,
/// language).
fn parse_vosk(text: &str) -> Option<Parsed> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    if let Some(p) = v.get("partial").and_then(|p| p.as_str()) {
        return Some(Parsed {
            text: p.to_string(),
            is_final: false,
            end_s: None,
            language: None,
            end_of_turn: false,
            eager: None,
        });
    }
    let t = v.get("text").and_then(|t| t.as_str())?;
    let end_s = v
        .get("result")
        .and_then(|r| r.as_array())
        .and_then(|a| a.last())
        .and_then(|w| w.get("end"))
        .and_then(|e| e.as_f64());
    let language = v.get("language").and_then(|l| l.as_str());
    Some(Parsed {
        text: t.to_string(),
        is_final: true,
        end_s,
        language: language.filter(|l| !l.is_empty()).map(str::to_string),
        end_of_turn: false,
        eager: None,
    })
}

/// What one stream's node messages say, per protocol: a Vosk message is a result of its
/// own; Deepgram-style segments are joined into the caller's turn.
enum Decoder {
    Vosk,
    Deepgram(deepgram::TurnAssembler),
}

impl Decoder {
    fn new(protocol: SttProtocol) -> Decoder {
        match protocol {
            SttProtocol::Vosk => Decoder::Vosk,
            SttProtocol::Deepgram => Decoder::Deepgram(Default::default()),
        }
    }

    fn on_message(&mut self, text: &str) -> Option<Parsed> {
        match self {
            Decoder::Vosk => parse_vosk(text),
            Decoder::Deepgram(turn) => turn.on(deepgram::parse(text)?),
        }
    }

    /// The client's end-of-audio message.
    fn eof(&self) -> &'static str {
        match self {
            Decoder::Vosk => r#"{"eof": 1}"#,
            Decoder::Deepgram(_) => deepgram::CLOSE_STREAM,
        }
    }

    /// What the node finalized but no message ended, when the stream closes.
    fn on_close(&mut self) -> Option<Parsed> {
        match self {
            Decoder::Vosk => None,
            Decoder::Deepgram(turn) => turn.flush(),
        }
    }

    /// The message keeping an idle stream open, where the protocol has one.
    fn keep_alive(&self) -> Option<&'static str> {
        match self {
            Decoder::Vosk => None,
            Decoder::Deepgram(_) => Some(deepgram::KEEP_ALIVE),
        }
    }
}

/// Milliseconds of caller audio per message of a recognition stream.
const STREAM_MESSAGE_MS: usize = 20;

/// How long a Deepgram-style stream may go without audio before the client sends
/// `KeepAlive` (the service closes a stream that receives nothing for about 10 s).
const KEEP_ALIVE_AFTER: Duration = Duration::from_secs(3);

/// The byte stream under a node's websocket: TCP, or TLS over TCP.
trait WsIo: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> WsIo for T {}

/// Opens the node's websocket at `url` (`ws://` or `wss://`), with its key when it has one.
async fn connect(
    pool: &SttPool,
    node: &SttNodeConfig,
    url: &str,
) -> Result<WebSocketStream<Box<dyn WsIo>>, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("url: {e}"))?;
    let tls = match parsed.scheme() {
        "ws" => None,
        "wss" => Some(pool.tls(node)?),
        other => return Err(format!("url scheme {other} is not ws or wss")),
    };
    let host = parsed
        .host_str()
        .ok_or_else(|| "url has no host".to_string())?
        .trim_matches(['[', ']'])
        .to_string();
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| "url has no port".to_string())?;
    let mut request = url
        .into_client_request()
        .map_err(|e| format!("request: {e}"))?;
    if let Some(key) = node.key()? {
        let value = format!("Token {key}")
            .parse()
            .map_err(|_| "the API key is not a valid header value".to_string())?;
        request.headers_mut().insert("authorization", value);
    }
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("connect to {host}:{port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let io: Box<dyn WsIo> = match tls {
        None => Box::new(tcp),
        Some(cfg) => {
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|e| format!("TLS server name {host:?}: {e}"))?;
            let stream = tokio_rustls::TlsConnector::from(cfg)
                .connect(name, tcp)
                .await
                .map_err(|e| {
                    let hint = if e.to_string().contains("invalid peer certificate") {
                        " (the node's certificate is not trusted: is its CA in the public \
                         roots, or in the node's ca_file?)"
                    } else {
                        ""
                    };
                    format!("TLS handshake with {host}:{port} failed: {e}{hint}")
                })?;
            Box::new(stream)
        }
    };
    let (ws, _) = tokio_tungstenite::client_async(request, io)
        .await
        .map_err(|e| format!("websocket handshake with {host}:{port}: {e}"))?;
    Ok(ws)
}

async fn run_stream(
    pool: &SttPool,
    node: &SttNodeConfig,
    params: &SttParams,
    mut audio: AudioReceiver,
    mut finish: oneshot::Receiver<()>,
    events: &mpsc::Sender<SttEvent>,
) -> Result<(), String> {
    let url = stream_url(node, params)?;
    let ws = tokio::time::timeout(Duration::from_secs(5), connect(pool, node, &url))
        .await
        .map_err(|_| "connect timed out".to_string())??;
    let (mut tx, mut rx) = ws.split();
    if node.protocol == SttProtocol::Vosk {
        tx.send(Message::text(vosk_config(node, params)))
            .await
            .map_err(|e| e.to_string())?;
    }
    let mut decoder = Decoder::new(node.protocol);
    // First frame's call time: the node counts time from its first sample.
    let mut first_ms: Option<u64> = None;
    let mut sent_ms: u64 = 0;
    // One message per 20 ms frame: the recogniser counts the silence that ends a turn as
    // the audio arrives, and a batch of 100 ms held that end back by 50 ms on average.
    let rate = params.audio_rate;
    let batch_bytes = STREAM_MESSAGE_MS * rate.samples_per_ms() * 2;
    let mut batch: Vec<u8> = Vec::with_capacity(batch_bytes);
    let mut audio_open = true;
    let mut eof_sent = false;
    let mut last_partial = String::new();
    let eof_deadline = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(eof_deadline);
    let idle = tokio::time::sleep(KEEP_ALIVE_AFTER);
    tokio::pin!(idle);
    // Tells the listener one result, as a transcript at the stream's call time.
    let mut report = |p: Parsed, raw: &str, first_ms: Option<u64>, sent_ms: u64| {
        let Parsed {
            text,
            is_final,
            end_s,
            language,
            end_of_turn,
            eager,
        } = p;
        match eager {
            Some(Eager::EndOfTurn) if params.interim_results && !text.is_empty() => {
                return Some(SttEvent::EagerEndOfTurn { text });
            }
            Some(Eager::Resumed) => return Some(SttEvent::TurnResumed),
            Some(Eager::EndOfTurn) => return None,
            None => {}
        }
        // Nodes repeat the current partial for every audio frame: report changes only (the
        // end-of-turn event always: it says when, not what).
        if !is_final
            && (!params.interim_results
                || text.is_empty()
                || (text == last_partial && !end_of_turn))
        {
            return None;
        }
        last_partial = if is_final {
            String::new()
        } else {
            text.clone()
        };
        let base = first_ms.unwrap_or(0);
        let end_ms = end_s
            .map(|e| base + (e * 1000.0) as u64)
            .unwrap_or(sent_ms)
            .min(sent_ms.max(base));
        let decision_to_final_ms = if is_final { decision_lag(raw) } else { None };
        Some(SttEvent::Transcript(Transcript {
            text,
            is_final,
            at_ms: sent_ms,
            end_ms,
            node: node.name.clone(),
            decision_to_final_ms,
            language,
            end_of_turn,
        }))
    };
    loop {
        tokio::select! {
            // What the node says first: a close with its reason is read before more audio
            // is sent into a stream the node has closed.
            biased;
            msg = rx.next() => {
                match msg {
                    Some(Ok(Message::Text(t))) => {
                        if let Some(ev) = decoder
                            .on_message(t.as_str())
                            .and_then(|p| report(p, t.as_str(), first_ms, sent_ms))
                        {
                            let _ = events.send(ev).await;
                        }
                    }
                    // A close with an error code fails the stream, whenever it comes.
                    Some(Ok(Message::Close(Some(frame))))
                        if !matches!(frame.code, CloseCode::Normal | CloseCode::Away) =>
                    {
                        return Err(format!(
                            "node closed the stream ({} {})",
                            u16::from(frame.code),
                            frame.reason
                        ));
                    }
                    Some(Ok(Message::Close(_))) | None if eof_sent => {
                        if let Some(ev) = decoder
                            .on_close()
                            .and_then(|p| report(p, "", first_ms, sent_ms))
                        {
                            let _ = events.send(ev).await;
                        }
                        let _ = events.send(SttEvent::Ended).await;
                        return Ok(());
                    }
                    Some(Ok(Message::Close(_))) | None => {
                        return Err("node closed the stream before end of audio".into());
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e.to_string()),
                }
            }
            frame = audio.recv(), if audio_open && !eof_sent => {
                match frame {
                    Some(f) => {
                        first_ms.get_or_insert(f.at_ms);
                        sent_ms = f.at_ms + f.duration_ms();
                        for s in crate::rate::samples_at(&f.pcm, f.rate, rate) {
                            batch.extend_from_slice(&s.to_le_bytes());
                        }
                        if batch.len() >= batch_bytes {
                            if let Err(e) = tx.send(Message::binary(std::mem::take(&mut batch))).await {
                                return Err(send_failed(&mut rx, e).await);
                            }
                            batch.reserve(batch_bytes);
                            idle.as_mut().reset(tokio::time::Instant::now() + KEEP_ALIVE_AFTER);
                        }
                    }
                    None => audio_open = false,
                }
            }
            _ = &mut finish, if !eof_sent => {
                audio_open = false;
            }
            _ = &mut idle, if !eof_sent => {
                if let Some(keep_alive) = decoder.keep_alive()
                    && let Err(e) = tx.send(Message::text(keep_alive)).await
                {
                    return Err(send_failed(&mut rx, e).await);
                }
                idle.as_mut().reset(tokio::time::Instant::now() + KEEP_ALIVE_AFTER);
            }
            _ = &mut eof_deadline, if eof_sent => {
                return Err("no final result within 30 s of end of audio".into());
            }
        }
        if !audio_open && !eof_sent {
            if !batch.is_empty()
                && let Err(e) = tx.send(Message::binary(std::mem::take(&mut batch))).await
            {
                return Err(send_failed(&mut rx, e).await);
            }
            if let Err(e) = tx.send(Message::text(decoder.eof())).await {
                return Err(send_failed(&mut rx, e).await);
            }
            eof_sent = true;
            eof_deadline
                .as_mut()
                .reset(tokio::time::Instant::now() + Duration::from_secs(30));
        }
    }
}

/// Why a send to the node failed: the close the node sent with an error code, when it is
/// still to be read (a node that closes a stream on bad audio may reset the connection
/// under the client's next message), else the send's own error.
async fn send_failed<S>(rx: &mut S, error: tokio_tungstenite::tungstenite::Error) -> String
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let read = async {
        while let Some(Ok(msg)) = rx.next().await {
            if let Message::Close(Some(frame)) = msg
                && !matches!(frame.code, CloseCode::Normal | CloseCode::Away)
            {
                return Some(format!(
                    "node closed the stream ({} {})",
                    u16::from(frame.code),
                    frame.reason
                ));
            }
        }
        None
    };
    match tokio::time::timeout(Duration::from_millis(500), read).await {
        Ok(Some(reason)) => reason,
        _ => error.to_string(),
    }
}

/// One interim or final result of a batch recognition (offsets in ms of audio).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InterimResult {
    /// Wall-clock time the result arrived (Unix ms).
    pub timestamp_ms: i64,
    pub transcript: String,
    /// Where the recognised speech ends in the source.
    pub end_offset_ms: i64,
    /// How much audio had been sent when the result arrived.
    pub sent_traffic_offset_ms: i64,
    /// Result arrival minus the time the audio at `end_offset_ms` was sent.
    pub latency_ms: i64,
    pub is_final: bool,
}

/// Outcome of [`recognize`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecognizeOutcome {
    pub node: String,
    /// Final results joined with spaces.
    pub transcript: String,
    pub model: String,
    /// Filled in real-time mode only (as the endpoint specifies).
    pub interim_results: Vec<InterimResult>,
}

/// Recognises decoded audio on a ready node. `realtime`: send at 1x speed and collect
/// interim results; otherwise send as fast as the node takes it and return the transcript.
pub async fn recognize(
    pool: &SttPool,
    prompt: &Prompt,
    params: &SttParams,
    realtime: bool,
) -> Result<RecognizeOutcome, SttError> {
    let node = pool.pick().await?;
    let (atx, arx) = mpsc::channel::<AudioFrame>(64);
    // Audio decoded from a source of 16 kHz or more is recognised at 16 kHz.
    let (rate, pcm) = match prompt.wide() {
        Some(w) => (crate::rate::AudioRate::Wide, w.to_vec()),
        None => (crate::rate::AudioRate::Narrow, prompt.pcm().to_vec()),
    };
    let params = SttParams {
        audio_rate: rate,
        ..params.clone()
    };
    let mut stream = start_stream(pool.clone(), node.clone(), params.clone(), arx);
    let started = Instant::now();
    let feeder = tokio::spawn(async move {
        let frame_ms = 20 / rate.factor() as u64;
        let mut tick = tokio::time::interval(Duration::from_millis(frame_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        for (i, chunk) in pcm.chunks(FRAME_SAMPLES).enumerate() {
            if realtime {
                tick.tick().await;
            }
            let mut f = [0i16; FRAME_SAMPLES];
            f[..chunk.len()].copy_from_slice(chunk);
            if atx
                .send(AudioFrame {
                    pcm: f,
                    at_ms: i as u64 * frame_ms,
                    rate,
                })
                .await
                .is_err()
            {
                break;
            }
        }
        // Dropping `atx` ends the audio: the stream sends end-of-stream.
    });
    let mut finals = Vec::new();
    let mut interim = Vec::new();
    let result = loop {
        let Some(ev) = tokio::time::timeout(Duration::from_secs(120), stream.next())
            .await
            .ok()
            .flatten()
        else {
            break Err(SttError::NodeFailed {
                node: node.name.clone(),
                message: "stream ended without a final result".into(),
            });
        };
        match ev {
            SttEvent::Transcript(t) => {
                let now = started.elapsed().as_millis() as i64;
                if t.is_final && !t.text.trim().is_empty() {
                    finals.push(t.text.trim().to_string());
                }
                if realtime {
                    interim.push(InterimResult {
                        timestamp_ms: std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_millis() as i64)
                            .unwrap_or(0),
                        transcript: t.text,
                        end_offset_ms: t.end_ms as i64,
                        sent_traffic_offset_ms: t.at_ms as i64,
                        latency_ms: (now - t.end_ms as i64).max(0),
                        is_final: t.is_final,
                    });
                }
            }
            SttEvent::EagerEndOfTurn { .. } | SttEvent::TurnResumed => {}
            SttEvent::Ended => break Ok(()),
            SttEvent::NodeFailed { node, error } => {
                break Err(SttError::NodeFailed {
                    node,
                    message: error,
                });
            }
        }
    };
    feeder.abort();
    result?;
    Ok(RecognizeOutcome {
        node: node.name,
        transcript: finals.join(" "),
        model: params.model.clone(),
        interim_results: interim,
    })
}

/// Lower-cases, drops punctuation and collapses spaces (for comparing transcripts).
pub fn normalize_transcript(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '\'' {
                c.to_ascii_lowercase()
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str, is_final: bool, end_s: Option<f64>, language: Option<&str>) -> Parsed {
        Parsed {
            text: text.into(),
            is_final,
            end_s,
            language: language.map(str::to_string),
            end_of_turn: false,
            eager: None,
        }
    }

    #[test]
    fn parses_both_protocols() {
        assert_eq!(
            parse_vosk(r#"{"partial": "hel"}"#),
            Some(parsed("hel", false, None, None))
        );
        assert_eq!(
            parse_vosk(
                r#"{"result": [{"word":"hi","start":0.1,"end":0.5,"conf":1}], "text": "hi"}"#
            ),
            Some(parsed("hi", true, Some(0.5), None))
        );
        assert_eq!(
            parse_vosk(r#"{"text": "ja", "language": "de"}"#),
            Some(parsed("ja", true, None, Some("de")))
        );
        assert_eq!(parse_vosk("not json"), None);
        assert_eq!(
            decision_lag(r#"{"text": "hi", "decision_to_final_ms": 212.4}"#),
            Some(212)
        );
        assert_eq!(decision_lag(r#"{"text": "hi"}"#), None);
        assert_eq!(decision_lag(r#"{"decision_to_final_ms": -5}"#), None);
        assert_eq!(decision_lag(r#"{"decision_to_final_ms": "soon"}"#), None);
        // A Deepgram-style final without `speech_final` is the turn's final.
        let dg = r#"{"type":"Results","is_final":true,"start":1.0,"duration":0.5,"channel":{"alternatives":[{"transcript":"yes"}]}}"#;
        assert_eq!(
            Decoder::new(SttProtocol::Deepgram).on_message(dg),
            Some(parsed("yes", true, Some(1.5), None))
        );
        // The language a multilingual stream recognised (Deepgram's `languages`).
        let multi = r#"{"type":"Results","is_final":true,"channel":{"alternatives":[{"transcript":"oui","languages":["fr"]}]}}"#;
        assert_eq!(
            Decoder::new(SttProtocol::Deepgram).on_message(multi),
            Some(parsed("oui", true, None, Some("fr")))
        );
        assert_eq!(
            Decoder::new(SttProtocol::Deepgram).on_message(r#"{"type":"Metadata"}"#),
            None
        );
    }

    #[test]
    fn deepgram_url_carries_parameters() {
        let n = SttNodeConfig::new("d", "ws://127.0.0.1:1/v1/listen", SttProtocol::Deepgram);
        let p = SttParams {
            language: "en-US".into(),
            model: "nova".into(),
            interim_results: true,
            ..SttParams::default()
        };
        let u = stream_url(&n, &p).unwrap();
        assert!(
            u.contains("encoding=linear16")
                && u.contains("sample_rate=8000")
                && u.contains("language=en-US")
        );
        assert!(u.contains("model=nova") && u.contains("interim_results=true"));
        assert!(!u.contains("endpointing"), "{u}");
        let timed = SttParams {
            endpointing_ms: Some(1500),
            ..p
        };
        assert!(stream_url(&n, &timed).unwrap().contains("endpointing=1500"));
        // A node URL's own query (the local node's `words=false`) is kept.
        let local = SttNodeConfig::new(
            "l",
            "ws://127.0.0.1:1/v1/listen?words=false",
            SttProtocol::Deepgram,
        );
        let u = stream_url(&local, &timed).unwrap();
        assert!(
            u.contains("?words=false&") && u.contains("endpointing=1500"),
            "{u}"
        );
    }

    /// The listening settings of a question as the Deepgram-style stream carries them:
    /// languages, hints, and no endpointing without voice activity detection.
    #[test]
    fn deepgram_url_carries_languages_hints_and_vad() {
        let n = SttNodeConfig::new("d", "ws://127.0.0.1:1/v1/listen", SttProtocol::Deepgram);
        let query = |p: &SttParams| -> Vec<(String, String)> {
            let u = url::Url::parse(&stream_url(&n, p).unwrap()).unwrap();
            u.query_pairs().map(|(k, v)| (k.into(), v.into())).collect()
        };
        let values = |q: &[(String, String)], key: &str| -> Vec<String> {
            q.iter()
                .filter(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .collect()
        };
        // One language: as given, nothing to identify.
        let q = query(&SttParams::default());
        assert_eq!(values(&q, "language"), ["en-US"]);
        assert!(values(&q, "detect_language").is_empty());
        // Fallback languages: a multilingual stream, the candidates primary first.
        let p = SttParams {
            language: "de-DE".into(),
            alternative_languages: vec!["en-US".into(), "de-DE".into(), "fr-FR".into()],
            hints: vec!["Callsmith".into(), "order number".into()],
            endpointing_ms: Some(900),
            ..SttParams::default()
        };
        let q = query(&p);
        assert_eq!(values(&q, "language"), ["multi"]);
        assert_eq!(values(&q, "detect_language"), ["de-DE", "en-US", "fr-FR"]);
        // Hints: `keyterm` on Nova-3 (and the default model), `keywords` on older models.
        assert_eq!(values(&q, "keyterm"), ["Callsmith", "order number"]);
        assert!(values(&q, "keywords").is_empty());
        let old = query(&SttParams {
            model: "nova-2".into(),
            ..p.clone()
        });
        assert_eq!(values(&old, "keywords"), ["Callsmith", "order number"]);
        assert!(values(&old, "keyterm").is_empty());
        assert_eq!(values(&q, "endpointing"), ["900"]);
        // No voice activity detection: the node never ends the turn by itself.
        let q = query(&SttParams {
            vad_endpointing: false,
            ..p
        });
        assert_eq!(values(&q, "endpointing"), ["false"]);
    }

    #[test]
    fn vosk_config_carries_languages_hints_and_vad() {
        let p = SttParams {
            language: "en-US".into(),
            alternative_languages: vec!["es-ES".into()],
            hints: vec!["Callsmith".into()],
            vad_endpointing: false,
            endpointing_ms: Some(900),
            ..SttParams::default()
        };
        let v: serde_json::Value = serde_json::from_str(&vosk_config(&vosk_node(), &p)).unwrap();
        assert_eq!(
            v["config"],
            serde_json::json!({"sample_rate": 8000, "endpointing": false,
                "languages": ["en-US", "es-ES"], "hints": ["Callsmith"]})
        );
    }

    fn vosk_node() -> SttNodeConfig {
        SttNodeConfig::new("v", "ws://127.0.0.1:1/", SttProtocol::Vosk)
    }

    /// The question's patience reaches a node that takes it (the local speech node), in
    /// either protocol, and no other node.
    #[test]
    fn patience_is_sent_only_to_a_node_that_takes_it() {
        let p = SttParams {
            patience: Some("digits".into()),
            endpointing_ms: Some(1000),
            ..SttParams::default()
        };
        let mut dg = SttNodeConfig::new("d", "ws://127.0.0.1:1/v1/listen", SttProtocol::Deepgram);
        assert!(!stream_url(&dg, &p).unwrap().contains("patience"));
        dg.turn_patience = true;
        let u = stream_url(&dg, &p).unwrap();
        assert!(
            u.contains("patience=digits") && u.contains("endpointing=1000"),
            "{u}"
        );
        let mut vosk = vosk_node();
        let config = |n: &SttNodeConfig| -> serde_json::Value {
            serde_json::from_str(&vosk_config(n, &p)).unwrap()
        };
        assert!(config(&vosk)["config"].get("patience").is_none());
        vosk.turn_patience = true;
        assert_eq!(config(&vosk)["config"]["patience"], "digits");
        // None asked: none sent.
        assert!(
            !stream_url(&dg, &SttParams::default())
                .unwrap()
                .contains("patience")
        );
    }

    #[test]
    fn vosk_config_carries_the_endpointing() {
        let v: serde_json::Value =
            serde_json::from_str(&vosk_config(&vosk_node(), &SttParams::default())).unwrap();
        assert_eq!(v, serde_json::json!({"config": {"sample_rate": 8000}}));
        let timed = SttParams {
            endpointing_ms: Some(900),
            ..SttParams::default()
        };
        let v: serde_json::Value =
            serde_json::from_str(&vosk_config(&vosk_node(), &timed)).unwrap();
        assert_eq!(v["config"]["endpointing"], 900);
    }

    #[test]
    fn a_wideband_stream_says_16000_in_both_protocols() {
        let wide = SttParams {
            audio_rate: crate::rate::AudioRate::Wide,
            ..SttParams::default()
        };
        let v: serde_json::Value = serde_json::from_str(&vosk_config(&vosk_node(), &wide)).unwrap();
        assert_eq!(v, serde_json::json!({"config": {"sample_rate": 16000}}));
        let dg = SttNodeConfig::new("dg", "ws://127.0.0.1:1/v1/listen", SttProtocol::Deepgram);
        let u = stream_url(&dg, &wide).unwrap();
        assert!(
            u.contains("encoding=linear16&sample_rate=16000&channels=1"),
            "{u}"
        );
    }

    #[test]
    fn transcripts_normalise() {
        assert_eq!(
            normalize_transcript(" The quick, brown FOX!  "),
            "the quick brown fox"
        );
    }

    #[tokio::test]
    async fn no_node_is_an_error() {
        let pool = SttPool::new(vec![SttNodeConfig::new(
            "down",
            "ws://127.0.0.1:9/",
            SttProtocol::Vosk,
        )]);
        assert!(matches!(pool.pick().await, Err(SttError::NoReadyNode)));
    }
}
