//! Speech synthesis: an engine trait, a local engine (espeak-ng or flite as a
//! subprocess), an HTTP engine (GET a synthesis URL returning WAV, streamed
//! into a growing source as it downloads), an OpenAI-compatible engine (POST
//! `/v1/audio/speech`, 8 kHz PCM streamed as it arrives), a cache keyed by
//! (engine, voice, language, model, speed, text), and the pure URL normaliser
//! behind GET /v1/adapters/tts/normalize/{path}. Playing a synthesis as it is made,
//! sentence by sentence, is in `tts_sentences` ([`TtsService::synthesis`],
//! [`TtsService::speech`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use futures::StreamExt;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::prompt::{Prompt, PromptError, SAMPLE_RATE, StreamingAudio};
pub use crate::tts_sentences::{Speech, SynthStatus, Synthesis};

#[derive(Debug, Error)]
pub enum TtsError {
    #[error("unknown TTS engine {0:?}")]
    UnknownEngine(String),
    #[error("empty text")]
    EmptyText,
    #[error("synthesizer failed: {0}")]
    Synth(String),
    #[error("synthesis request failed: {0}")]
    Http(String),
    /// The synthesizer answered an error status; `message` is its own explanation
    /// (OpenAI's `error.message`, or the start of the body).
    #[error("synthesizer answered {status}: {message}")]
    Rejected { status: u16, message: String },
    #[error("synthesis did not complete within {0:?}")]
    Timeout(Duration),
    /// Engine settings that cannot work (a bad URL or rate).
    #[error("{0}")]
    Settings(String),
    #[error(transparent)]
    Audio(#[from] PromptError),
}

/// One synthesis request; every field is part of the cache key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TtsRequest {
    pub engine: String,
    #[serde(default)]
    pub voice: String,
    #[serde(default)]
    pub language: String,
    #[serde(default)]
    pub model: String,
    /// 1.0 is normal speed.
    #[serde(default = "one")]
    pub speed: f64,
    pub text: String,
}

fn one() -> f64 {
    1.0
}

impl TtsRequest {
    /// The cache key (speed rounded to 1/1000).
    pub fn cache_key(&self) -> String {
        let speed = if self.speed.is_finite() && self.speed > 0.0 {
            self.speed
        } else {
            1.0
        };
        format!(
            "{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{:.3}\u{1f}{}",
            self.engine, self.voice, self.language, self.model, speed, self.text
        )
    }

    fn speed(&self) -> f64 {
        if self.speed.is_finite() && self.speed > 0.0 {
            self.speed.clamp(0.25, 4.0)
        } else {
            1.0
        }
    }
}

/// A speech synthesizer producing 8 kHz audio.
#[async_trait]
pub trait TtsEngine: Send + Sync {
    /// Synthesizes the whole text.
    async fn synthesize(&self, req: &TtsRequest) -> Result<Prompt, TtsError>;

    /// Synthesizes into a growing source (default: all at once, then pushed).
    /// Engines that stream push audio as it arrives, so playout can start early.
    async fn synthesize_into(
        &self,
        req: &TtsRequest,
        out: &StreamingAudio,
    ) -> Result<(), TtsError> {
        let p = self.synthesize(req).await?;
        out.push(p.pcm());
        Ok(())
    }
}

/// Which local program speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LocalProgram {
    EspeakNg,
    Flite,
}

/// espeak-ng or flite run as a subprocess writing a WAV file (converted to 8 kHz).
#[derive(Debug, Clone)]
pub struct LocalTts {
    pub program: LocalProgram,
}

struct TempFile(std::path::PathBuf);
impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[async_trait]
impl TtsEngine for LocalTts {
    async fn synthesize(&self, req: &TtsRequest) -> Result<Prompt, TtsError> {
        if req.text.trim().is_empty() {
            return Err(TtsError::EmptyText);
        }
        let file = TempFile(
            std::env::temp_dir().join(format!("callsmith-tts-{}.wav", rand::random::<u64>())),
        );
        let mut cmd = match self.program {
            LocalProgram::EspeakNg => {
                let mut c = tokio::process::Command::new("espeak-ng");
                let wpm = (175.0 * req.speed()).round() as u32;
                c.arg("-w").arg(&file.0).arg("-s").arg(wpm.to_string());
                let voice = if !req.voice.is_empty() {
                    req.voice.clone()
                } else {
                    language_to_espeak(&req.language)
                };
                if !voice.is_empty() {
                    c.arg("-v").arg(voice);
                }
                // "--" so text starting with '-' is not an option.
                c.arg("--").arg(&req.text);
                c
            }
            LocalProgram::Flite => {
                let mut c = tokio::process::Command::new("flite");
                if !req.voice.is_empty() {
                    c.arg("-voice").arg(&req.voice);
                }
                let stretch = 1.0 / req.speed();
                c.arg("--setf")
                    .arg(format!("duration_stretch={stretch:.3}"));
                c.arg("-t").arg(&req.text).arg("-o").arg(&file.0);
                c
            }
        };
        cmd.kill_on_drop(true).stdin(std::process::Stdio::null());
        let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .map_err(|_| TtsError::Synth("synthesizer timed out".into()))?
            .map_err(|e| TtsError::Synth(e.to_string()))?;
        if !out.status.success() {
            return Err(TtsError::Synth(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        let bytes = tokio::fs::read(&file.0)
            .await
            .map_err(|e| TtsError::Synth(e.to_string()))?;
        let p = tokio::task::spawn_blocking(move || Prompt::decode(&bytes, Some("wav")))
            .await
            .map_err(|e| TtsError::Synth(e.to_string()))??;
        Ok(p)
    }
}

fn language_to_espeak(lang: &str) -> String {
    // espeak-ng voices are language tags: "en-us", "de", "fr"...
    lang.to_ascii_lowercase()
}

/// GETs a synthesis URL returning WAV. `url_template` placeholders
/// `{text}`, `{voice}`, `{language}`, `{model}`, `{speed}` are replaced URL-encoded.
#[derive(Debug, Clone)]
pub struct HttpTts {
    pub url_template: String,
    client: reqwest::Client,
}

impl HttpTts {
    pub fn new(url_template: impl Into<String>) -> HttpTts {
        HttpTts {
            url_template: url_template.into(),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap_or_default(),
        }
    }

    /// The request URL for `req`.
    pub fn url_for(&self, req: &TtsRequest) -> String {
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        self.url_template
            .replace("{text}", &enc(&req.text))
            .replace("{voice}", &enc(&req.voice))
            .replace("{language}", &enc(&req.language))
            .replace("{model}", &enc(&req.model))
            .replace("{speed}", &format!("{:.3}", req.speed()))
    }

    async fn get(&self, req: &TtsRequest) -> Result<reqwest::Response, TtsError> {
        if req.text.trim().is_empty() {
            return Err(TtsError::EmptyText);
        }
        let resp = self
            .client
            .get(self.url_for(req))
            .send()
            .await
            .map_err(|e| TtsError::Http(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(TtsError::Http(format!("status {}", resp.status())));
        }
        Ok(resp)
    }
}

#[async_trait]
impl TtsEngine for HttpTts {
    async fn synthesize(&self, req: &TtsRequest) -> Result<Prompt, TtsError> {
        let bytes = self
            .get(req)
            .await?
            .bytes()
            .await
            .map_err(|e| TtsError::Http(e.to_string()))?;
        let p = tokio::task::spawn_blocking(move || Prompt::decode(&bytes, Some("wav")))
            .await
            .map_err(|e| TtsError::Synth(e.to_string()))??;
        Ok(p)
    }

    /// Streams 16-bit PCM WAV bodies into `out` as they download; other
    /// encodings are decoded once complete.
    async fn synthesize_into(
        &self,
        req: &TtsRequest,
        out: &StreamingAudio,
    ) -> Result<(), TtsError> {
        let resp = self.get(req).await?;
        let mut body = resp.bytes_stream();
        let mut head: Vec<u8> = Vec::new();
        let mut wav: Option<(WavStreamDecoder, usize)> = None;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| TtsError::Http(e.to_string()))?;
            match wav.as_mut() {
                Some((dec, _)) => out.push(&dec.feed(&chunk)?),
                None => {
                    head.extend_from_slice(&chunk);
                    match parse_wav_header(&head) {
                        WavHeader::Pcm16 {
                            rate,
                            channels,
                            data_offset,
                        } => {
                            let mut dec = WavStreamDecoder::new(rate, channels)?;
                            out.push(&dec.feed(&head[data_offset..])?);
                            wav = Some((dec, data_offset));
                        }
                        WavHeader::NeedMore if head.len() < 64 * 1024 => {}
                        _ => {
                            // Not streamable: collect the rest and decode once.
                            while let Some(c) = body.next().await {
                                head.extend_from_slice(
                                    &c.map_err(|e| TtsError::Http(e.to_string()))?,
                                );
                            }
                            let p =
                                tokio::task::spawn_blocking(move || Prompt::decode(&head, None))
                                    .await
                                    .map_err(|e| TtsError::Synth(e.to_string()))??;
                            out.push(p.pcm());
                            return Ok(());
                        }
                    }
                }
            }
        }
        match wav.as_mut() {
            Some((dec, _)) => out.push(&dec.flush()?),
            None => {
                let p = Prompt::decode(&head, None)?;
                out.push(p.pcm());
            }
        }
        Ok(())
    }
}

/// Settings of an [`OpenAiTts`] engine.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiTtsConfig {
    /// Base URL: synthesis is `POST {url}/v1/audio/speech` (a `url` ending in `/v1` is
    /// taken as the API root itself).
    pub url: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// Model sent when the request names none.
    pub model: String,
    /// Voice sent when the request names none.
    pub voice: String,
    /// Bound on one synthesis: connecting, the answer and the whole body.
    pub timeout: Duration,
    /// Rate of a `pcm` body whose answer carries no `X-Sample-Rate` header (OpenAI's own
    /// `pcm` is 24 kHz whatever `sample_rate` asked).
    pub pcm_sample_rate: u32,
}

impl Default for OpenAiTtsConfig {
    fn default() -> Self {
        OpenAiTtsConfig {
            url: String::new(),
            api_key: None,
            model: "tts-1".into(),
            voice: "alloy".into(),
            timeout: Duration::from_secs(60),
            pcm_sample_rate: 24000,
        }
    }
}

/// Rates a `pcm` answer may declare.
const PCM_RATES: std::ops::RangeInclusive<u32> = 4000..=192_000;

/// An OpenAI-compatible speech endpoint: `POST {url}/v1/audio/speech` with
/// `{"model","input","voice","response_format":"pcm","speed","sample_rate":8000}`, the
/// body read as it streams in (16-bit mono PCM at the `X-Sample-Rate` the answer names,
/// else [`OpenAiTtsConfig::pcm_sample_rate`]; a WAV body is recognised by its header).
#[derive(Debug, Clone)]
pub struct OpenAiTts {
    endpoint: String,
    config: OpenAiTtsConfig,
    client: reqwest::Client,
}

impl OpenAiTts {
    /// An engine over its own HTTP client. The URL must be http(s) with a host.
    pub fn new(config: OpenAiTtsConfig) -> Result<OpenAiTts, TtsError> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| TtsError::Settings(e.to_string()))?;
        OpenAiTts::with_client(config, client)
    }

    /// An engine over `client` (one with its own address policy, for instance); the
    /// configured timeout still bounds every synthesis.
    pub fn with_client(
        config: OpenAiTtsConfig,
        client: reqwest::Client,
    ) -> Result<OpenAiTts, TtsError> {
        let bad = |why: &str| {
            TtsError::Settings(format!("invalid synthesis URL {:?}: {why}", config.url))
        };
        let parsed = url::Url::parse(&config.url).map_err(|e| bad(&e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(bad("not an http(s) URL with a host"));
        }
        if !PCM_RATES.contains(&config.pcm_sample_rate) {
            return Err(TtsError::Settings(format!(
                "pcm_sample_rate {} is outside 4000-192000",
                config.pcm_sample_rate
            )));
        }
        let root = config.url.trim_end_matches('/');
        let root = root.strip_suffix("/v1").unwrap_or(root);
        Ok(OpenAiTts {
            endpoint: format!("{root}/v1/audio/speech"),
            config,
            client,
        })
    }

    /// Where syntheses are posted.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The JSON body for `req`.
    pub fn body_for(&self, req: &TtsRequest) -> serde_json::Value {
        let or = |v: &str, d: &str| {
            if v.is_empty() {
                d.to_string()
            } else {
                v.to_string()
            }
        };
        serde_json::json!({
            "model": or(&req.model, &self.config.model),
            "input": req.text,
            "voice": or(&req.voice, &self.config.voice),
            "response_format": "pcm",
            "speed": req.speed(),
            "sample_rate": SAMPLE_RATE,
        })
    }

    fn transport_error(&self, e: reqwest::Error) -> TtsError {
        if e.is_timeout() {
            return TtsError::Timeout(self.config.timeout);
        }
        // reqwest's own message is generic ("error decoding response body"); the causes
        // say what happened (a connection closed mid-body, refused, reset).
        let mut msg = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            msg.push_str(": ");
            msg.push_str(&c.to_string());
            cause = c.source();
        }
        if e.is_body() || e.is_decode() {
            msg = format!("the answer broke off: {msg}");
        }
        TtsError::Http(msg)
    }

    async fn post(
        &self,
        req: &TtsRequest,
        deadline: tokio::time::Instant,
    ) -> Result<reqwest::Response, TtsError> {
        if req.text.trim().is_empty() {
            return Err(TtsError::EmptyText);
        }
        let mut rb = self.client.post(&self.endpoint).json(&self.body_for(req));
        if let Some(key) = self.config.api_key.as_deref().filter(|k| !k.is_empty()) {
            rb = rb.bearer_auth(key);
        }
        let resp = tokio::time::timeout_at(deadline, rb.send())
            .await
            .map_err(|_| TtsError::Timeout(self.config.timeout))?
            .map_err(|e| self.transport_error(e))?;
        let status = resp.status();
        if !status.is_success() {
            let body = tokio::time::timeout_at(deadline, resp.bytes())
                .await
                .ok()
                .and_then(|b| b.ok())
                .unwrap_or_default();
            return Err(TtsError::Rejected {
                status: status.as_u16(),
                message: error_message(&body)
                    .unwrap_or_else(|| status.canonical_reason().unwrap_or("").to_string()),
            });
        }
        let ctype = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if ctype.starts_with("application/json") || ctype.starts_with("text/") {
            return Err(TtsError::Synth(format!(
                "the synthesizer answered {ctype:?} instead of audio"
            )));
        }
        Ok(resp)
    }

    /// Posts `req` and hands the 8 kHz samples to `sink` as they arrive; returns how
    /// many there were in all.
    async fn stream(
        &self,
        req: &TtsRequest,
        mut sink: impl FnMut(&[i16]),
    ) -> Result<usize, TtsError> {
        let deadline = tokio::time::Instant::now() + self.config.timeout;
        let resp = self.post(req, deadline).await?;
        let declared = match resp.headers().get("x-sample-rate") {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .ok()
                    .and_then(|v| v.trim().parse::<u32>().ok())
                    .filter(|r| PCM_RATES.contains(r))
                    .ok_or_else(|| {
                        TtsError::Synth(format!("the answer names a bad X-Sample-Rate {v:?}"))
                    })?,
            ),
        };
        let mut body = resp.bytes_stream();
        let mut head: Vec<u8> = Vec::new();
        let mut dec: Option<WavStreamDecoder> = None;
        let mut total = 0usize;
        loop {
            let next = tokio::time::timeout_at(deadline, body.next())
                .await
                .map_err(|_| TtsError::Timeout(self.config.timeout))?;
            let chunk = match next {
                Some(c) => c.map_err(|e| self.transport_error(e))?,
                None => break,
            };
            if let Some(d) = dec.as_mut() {
                let pcm = d.feed(&chunk)?;
                total += pcm.len();
                sink(&pcm);
                continue;
            }
            head.extend_from_slice(&chunk);
            if let Some((d, rest)) = self.start_decoder(&head, declared, false)? {
                let mut d = d;
                let pcm = d.feed(&head[rest..])?;
                total += pcm.len();
                sink(&pcm);
                dec = Some(d);
                head = Vec::new();
            }
        }
        if dec.is_none() {
            match self.start_decoder(&head, declared, true)? {
                Some((mut d, rest)) => {
                    let pcm = d.feed(&head[rest..])?;
                    total += pcm.len();
                    sink(&pcm);
                    dec = Some(d);
                }
                None => return Err(TtsError::Synth("the synthesizer answered no audio".into())),
            }
        }
        if let Some(d) = dec.as_mut() {
            let pcm = d.flush()?;
            total += pcm.len();
            sink(&pcm);
        }
        if total == 0 {
            return Err(TtsError::Synth("the synthesizer answered no audio".into()));
        }
        Ok(total)
    }

    /// The decoder for a body starting with `head` and where its samples start, once
    /// enough of it is known: a WAV header is parsed (16-bit PCM only), anything else is
    /// raw `pcm`. `None` while more bytes are needed; `end`: the body is complete.
    fn start_decoder(
        &self,
        head: &[u8],
        declared: Option<u32>,
        end: bool,
    ) -> Result<Option<(WavStreamDecoder, usize)>, TtsError> {
        if head.len() < 4 && !end {
            return Ok(None);
        }
        if !head.starts_with(b"RIFF") {
            if head.is_empty() {
                return Ok(None);
            }
            let rate = declared.unwrap_or(self.config.pcm_sample_rate);
            return Ok(Some((WavStreamDecoder::new(rate, 1)?, 0)));
        }
        match parse_wav_header(head) {
            WavHeader::Pcm16 {
                rate,
                channels,
                data_offset,
            } => Ok(Some((WavStreamDecoder::new(rate, channels)?, data_offset))),
            WavHeader::NeedMore if !end && head.len() < 64 * 1024 => Ok(None),
            WavHeader::NeedMore => Err(TtsError::Synth(
                "the synthesizer's WAV answer has no complete header".into(),
            )),
            WavHeader::Other => Err(TtsError::Synth(
                "the synthesizer answered WAV that is not 16-bit PCM".into(),
            )),
        }
    }
}

/// The explanation in an error answer: OpenAI's `{"error":{"message"}}`, a plain
/// `{"error": "..."}` or `{"message"}`, else the start of a text body.
fn error_message(body: &[u8]) -> Option<String> {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        let m = v
            .pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("message"))
            .and_then(|m| m.as_str());
        if let Some(m) = m {
            return Some(m.to_string());
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(text.chars().take(300).collect())
}

#[async_trait]
impl TtsEngine for OpenAiTts {
    async fn synthesize(&self, req: &TtsRequest) -> Result<Prompt, TtsError> {
        let mut pcm = Vec::new();
        self.stream(req, |s| pcm.extend_from_slice(s)).await?;
        Ok(Prompt::from_pcm(pcm))
    }

    /// Pushes audio into `out` as the body arrives (the speech node sends each sentence
    /// as soon as it is synthesised).
    async fn synthesize_into(
        &self,
        req: &TtsRequest,
        out: &StreamingAudio,
    ) -> Result<(), TtsError> {
        self.stream(req, |s| {
            if !s.is_empty() {
                out.push(s)
            }
        })
        .await?;
        Ok(())
    }
}

enum WavHeader {
    NeedMore,
    Pcm16 {
        rate: u32,
        channels: u16,
        data_offset: usize,
    },
    Other,
}

fn parse_wav_header(b: &[u8]) -> WavHeader {
    if b.len() < 12 {
        return WavHeader::NeedMore;
    }
    if &b[..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        return WavHeader::Other;
    }
    let mut off = 12;
    let mut fmt: Option<(u16, u16, u32, u16)> = None;
    loop {
        if b.len() < off + 8 {
            return WavHeader::NeedMore;
        }
        let id = &b[off..off + 4];
        let size = u32::from_le_bytes([b[off + 4], b[off + 5], b[off + 6], b[off + 7]]) as usize;
        if id == b"data" {
            return match fmt {
                Some((1, ch, rate, 16)) if ch > 0 && rate > 0 => WavHeader::Pcm16 {
                    rate,
                    channels: ch,
                    data_offset: off + 8,
                },
                _ => WavHeader::Other,
            };
        }
        if id == b"fmt " {
            if b.len() < off + 8 + 16 {
                return WavHeader::NeedMore;
            }
            let f = &b[off + 8..];
            fmt = Some((
                u16::from_le_bytes([f[0], f[1]]),
                u16::from_le_bytes([f[2], f[3]]),
                u32::from_le_bytes([f[4], f[5], f[6], f[7]]),
                u16::from_le_bytes([f[14], f[15]]),
            ));
        }
        off = match off.checked_add(8 + size + (size & 1)) {
            Some(o) => o,
            None => return WavHeader::Other,
        };
        if off > 1 << 20 {
            return WavHeader::Other;
        }
    }
}

/// Incremental 16-bit PCM → 8 kHz mono converter.
struct WavStreamDecoder {
    channels: usize,
    carry: Vec<u8>,
    resampler: Option<rubato::FftFixedInOut<f32>>,
    pending: Vec<f32>,
    delay_left: usize,
    rate: u32,
    in_total: u64,
    out_total: u64,
}

impl WavStreamDecoder {
    fn new(rate: u32, channels: u16) -> Result<WavStreamDecoder, TtsError> {
        use rubato::Resampler;
        let resampler = if rate == SAMPLE_RATE {
            None
        } else {
            Some(
                rubato::FftFixedInOut::<f32>::new(rate as usize, SAMPLE_RATE as usize, 1024, 1)
                    .map_err(|e| TtsError::Synth(e.to_string()))?,
            )
        };
        let delay_left = resampler.as_ref().map(|r| r.output_delay()).unwrap_or(0);
        Ok(WavStreamDecoder {
            channels: channels as usize,
            carry: Vec::new(),
            resampler,
            pending: Vec::new(),
            delay_left,
            rate,
            in_total: 0,
            out_total: 0,
        })
    }

    fn feed(&mut self, data: &[u8]) -> Result<Vec<i16>, TtsError> {
        self.carry.extend_from_slice(data);
        let frame_bytes = 2 * self.channels;
        let whole = self.carry.len() / frame_bytes * frame_bytes;
        let mono: Vec<f32> = self.carry[..whole]
            .chunks_exact(frame_bytes)
            .map(|f| {
                f.chunks_exact(2)
                    .map(|s| i16::from_le_bytes([s[0], s[1]]) as f32 / 32768.0)
                    .sum::<f32>()
                    / self.channels as f32
            })
            .collect();
        self.carry.drain(..whole);
        self.convert(&mono, false)
    }

    fn flush(&mut self) -> Result<Vec<i16>, TtsError> {
        self.convert(&[], true)
    }

    fn convert(&mut self, mono: &[f32], last: bool) -> Result<Vec<i16>, TtsError> {
        use rubato::Resampler;
        let to_i16 = |v: f32| (v * 32768.0).round().clamp(-32768.0, 32767.0) as i16;
        let Some(rs) = self.resampler.as_mut() else {
            return Ok(mono.iter().map(|v| to_i16(*v)).collect());
        };
        self.in_total += mono.len() as u64;
        self.pending.extend_from_slice(mono);
        let mut out = Vec::new();
        let err = |e: rubato::ResampleError| TtsError::Synth(e.to_string());
        while self.pending.len() >= rs.input_frames_next() {
            let n = rs.input_frames_next();
            let r = rs.process(&[&self.pending[..n]], None).map_err(err)?;
            out.extend_from_slice(&r[0]);
            self.pending.drain(..n);
        }
        if last {
            if !self.pending.is_empty() {
                let r = rs
                    .process_partial(Some(&[&self.pending[..]]), None)
                    .map_err(err)?;
                out.extend_from_slice(&r[0]);
                self.pending.clear();
            }
            let r = rs.process_partial::<&[f32]>(None, None).map_err(err)?;
            out.extend_from_slice(&r[0]);
        }
        let skip = self.delay_left.min(out.len());
        self.delay_left -= skip;
        // Never emit more than the input's duration (the final partial chunk is zero-padded).
        let allowed =
            (self.in_total * SAMPLE_RATE as u64 / self.rate as u64).saturating_sub(self.out_total);
        let n = ((out.len() - skip) as u64).min(allowed) as usize;
        self.out_total += n as u64;
        Ok(out[skip..skip + n].iter().map(|v| to_i16(*v)).collect())
    }
}

/// Samples a player of a streamed synthesis may buffer (a synthesis runs ahead of
/// real time; it is bounded by its text).
pub(crate) const STREAM_BUFFER: usize = usize::MAX / 2;

/// Cached syntheses by key, with insertion order for eviction.
type SynthCache = (HashMap<String, Arc<Prompt>>, VecDeque<String>);

/// Engines by name plus the shared synthesis cache.
pub struct TtsService {
    engines: HashMap<String, Arc<dyn TtsEngine>>,
    cache: Mutex<SynthCache>,
    capacity: usize,
    /// Streamed syntheses under way, by cache key: a call that asks for the same prompt
    /// meanwhile follows that stream instead of starting its own synthesis (500 calls a
    /// second asking for one uncached greeting start one engine process, not 500).
    pub(crate) in_flight: Mutex<HashMap<String, InFlight>>,
}

/// A streamed synthesis under way: its source (which keeps its history) and how it ends.
pub(crate) type InFlight = (Arc<StreamingAudio>, Arc<SynthStatus>);

impl TtsService {
    /// `capacity`: cached syntheses kept (oldest evicted first).
    pub fn new(capacity: usize) -> TtsService {
        TtsService {
            engines: HashMap::new(),
            cache: Mutex::new((HashMap::new(), VecDeque::new())),
            capacity: capacity.max(1),
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// With `espeak-ng` and `flite` registered under those names.
    pub fn with_local_engines(capacity: usize) -> TtsService {
        let mut s = TtsService::new(capacity);
        s.register(
            "espeak-ng",
            Arc::new(LocalTts {
                program: LocalProgram::EspeakNg,
            }),
        );
        s.register(
            "flite",
            Arc::new(LocalTts {
                program: LocalProgram::Flite,
            }),
        );
        s
    }

    pub fn register(&mut self, name: &str, engine: Arc<dyn TtsEngine>) {
        self.engines.insert(name.to_string(), engine);
    }

    /// An engine of that name is registered.
    pub fn has_engine(&self, name: &str) -> bool {
        self.engines.contains_key(name)
    }

    pub(crate) fn engine(&self, name: &str) -> Result<Arc<dyn TtsEngine>, TtsError> {
        self.engines
            .get(name)
            .cloned()
            .ok_or_else(|| TtsError::UnknownEngine(name.to_string()))
    }

    /// A cached synthesis, if present.
    pub fn cached(&self, req: &TtsRequest) -> Option<Arc<Prompt>> {
        self.cache.lock().0.get(&req.cache_key()).cloned()
    }

    pub(crate) fn store(&self, key: String, p: Arc<Prompt>) {
        let mut g = self.cache.lock();
        if g.0.insert(key.clone(), p).is_none() {
            g.1.push_back(key);
        }
        while g.0.len() > self.capacity {
            let Some(old) = g.1.pop_front() else { break };
            g.0.remove(&old);
        }
    }

    /// The whole synthesis (from cache when present).
    pub async fn prompt(&self, req: &TtsRequest) -> Result<Arc<Prompt>, TtsError> {
        if let Some(p) = self.cached(req) {
            return Ok(p);
        }
        let p = Arc::new(self.engine(&req.engine)?.synthesize(req).await?);
        self.store(req.cache_key(), p.clone());
        Ok(p)
    }
}

/// Why a synthesis URL could not be normalised.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum NormalizeError {
    /// Neither `text` nor `text_b64` was given (the route answers `{"error": ...}`).
    #[error("text or text_b64 is required")]
    MissingText,
    #[error("text_b64 is not valid base64 UTF-8")]
    InvalidTextB64,
    #[error("invalid synthesis URL: {0}")]
    InvalidUrl(String),
}

/// Default `sr` of a normalised synthesis URL.
pub const DEFAULT_SYNTH_SAMPLE_RATE: u32 = 16000;

/// GET /v1/adapters/tts/normalize/{path}: rewrites a synthesis URL to platform-safe parameters.
///
/// `path` is the engine URL (scheme optional, `https://` assumed; it may carry its own query);
/// `query` is the request's query. The result keeps every parameter except `sampleRate`,
/// `format`, `fsFix` and `text_b64`; forces `f=wav`; keeps a valid positive integer `sr`,
/// else sets `sr=16000`; and carries the text as `text` (decoded from `text_b64` when
/// `text` is absent). Missing text is an error.
pub fn normalize_tts_url(path: &str, query: &[(String, String)]) -> Result<String, NormalizeError> {
    let text = match query.iter().find(|(k, _)| k == "text") {
        Some((_, t)) => t.clone(),
        None => {
            let b64 = query
                .iter()
                .find(|(k, _)| k == "text_b64")
                .map(|(_, v)| v)
                .ok_or(NormalizeError::MissingText)?;
            decode_b64_text(b64)?
        }
    };
    let path = path.trim_start_matches('/');
    if path.is_empty() {
        return Err(NormalizeError::InvalidUrl("empty path".into()));
    }
    let with_scheme = if path.contains("://") {
        path.to_string()
    } else {
        format!("https://{path}")
    };
    let mut url =
        url::Url::parse(&with_scheme).map_err(|e| NormalizeError::InvalidUrl(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(NormalizeError::InvalidUrl(format!(
            "scheme {} is not http(s)",
            url.scheme()
        )));
    }
    let mut params: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    params.extend(query.iter().cloned());
    const DROP: [&str; 7] = [
        "sampleRate",
        "format",
        "fsFix",
        "text_b64",
        "text",
        "f",
        "sr",
    ];
    let sr = params
        .iter()
        .rev()
        .find(|(k, _)| k == "sr")
        .and_then(|(_, v)| v.parse::<u32>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(DEFAULT_SYNTH_SAMPLE_RATE);
    let mut kept: Vec<(String, String)> = Vec::new();
    for (k, v) in params {
        if DROP.contains(&k.as_str()) || kept.iter().any(|(kk, _)| *kk == k) {
            continue;
        }
        kept.push((k, v));
    }
    url.set_query(None);
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in &kept {
            q.append_pair(k, v);
        }
        q.append_pair("text", &text);
        q.append_pair("f", "wav");
        q.append_pair("sr", &sr.to_string());
    }
    Ok(url.to_string())
}

fn decode_b64_text(s: &str) -> Result<String, NormalizeError> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let s = s.trim();
    let bytes = STANDARD
        .decode(s)
        .or_else(|_| STANDARD_NO_PAD.decode(s))
        .or_else(|_| URL_SAFE.decode(s))
        .or_else(|_| URL_SAFE_NO_PAD.decode(s))
        .map_err(|_| NormalizeError::InvalidTextB64)?;
    String::from_utf8(bytes).map_err(|_| NormalizeError::InvalidTextB64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Playable;

    /// Pushes 0, 1, 2, … in three chunks with pauses, counting its runs.
    struct Slow {
        runs: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl TtsEngine for Slow {
        async fn synthesize(&self, _req: &TtsRequest) -> Result<Prompt, TtsError> {
            unreachable!("streams only")
        }
        async fn synthesize_into(
            &self,
            _req: &TtsRequest,
            out: &StreamingAudio,
        ) -> Result<(), TtsError> {
            self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            for chunk in 0..3i16 {
                let pcm: Vec<i16> = (chunk * 160..(chunk + 1) * 160).collect();
                out.push(&pcm);
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            }
            Ok(())
        }
    }

    fn drain(s: &StreamingAudio) -> Vec<i16> {
        let mut all = Vec::new();
        let mut frame = [0i16; crate::prompt::FRAME_SAMPLES];
        while s.take_frame(&mut frame) == crate::prompt::StreamFrame::Frame {
            all.extend_from_slice(&frame);
        }
        all
    }

    #[tokio::test]
    async fn one_synthesis_serves_every_call_that_asks_meanwhile() {
        let slow = Arc::new(Slow {
            runs: Default::default(),
        });
        let mut svc = TtsService::new(8);
        svc.register("slow", slow.clone());
        let svc = Arc::new(svc);
        let req = TtsRequest {
            engine: "slow".into(),
            voice: String::new(),
            language: String::new(),
            model: String::new(),
            speed: 1.0,
            text: "hello".into(),
        };
        let Playable::Stream(first) = svc.playable(&req).unwrap() else {
            panic!("not cached yet")
        };
        // A second call arrives mid-synthesis: it follows from the start.
        tokio::time::sleep(std::time::Duration::from_millis(45)).await;
        let Playable::Stream(second) = svc.playable(&req).unwrap() else {
            panic!("still in flight")
        };
        while !(first.is_finished() && second.is_finished()) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let expected: Vec<i16> = (0..480).collect();
        assert_eq!(drain(&first), expected);
        assert_eq!(drain(&second), expected, "the follower heard it all");
        assert_eq!(slow.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Once done, it is cached: a third call needs no synthesis.
        assert!(matches!(svc.playable(&req).unwrap(), Playable::Prompt(_)));
        assert_eq!(slow.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn params(url: &str) -> Vec<(String, String)> {
        url::Url::parse(url)
            .unwrap()
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    #[test]
    fn normalize_forces_wav_and_default_sr() {
        let u = normalize_tts_url(
            "tts.example.com/v1/synth",
            &q(&[
                ("text", "hello world"),
                ("voice", "anna"),
                ("sampleRate", "8000"),
                ("format", "mp3"),
                ("fsFix", "1"),
                ("f", "mp3"),
            ]),
        )
        .unwrap();
        assert!(u.starts_with("https://tts.example.com/v1/synth?"));
        let p = params(&u);
        assert!(p.contains(&("voice".into(), "anna".into())));
        assert!(p.contains(&("text".into(), "hello world".into())));
        assert!(p.contains(&("f".into(), "wav".into())));
        assert!(p.contains(&("sr".into(), "16000".into())));
        for gone in ["sampleRate", "format", "fsFix"] {
            assert!(!p.iter().any(|(k, _)| k == gone), "{gone} kept in {u}");
        }
        assert_eq!(p.iter().filter(|(k, _)| k == "f").count(), 1);
    }

    #[test]
    fn normalize_keeps_valid_sr_and_decodes_b64() {
        let b64 = base64::engine::general_purpose::STANDARD.encode("привет, мир");
        let u = normalize_tts_url(
            "http://127.0.0.1:9/s?sr=8000&lang=ru",
            &q(&[("text_b64", &b64)]),
        )
        .unwrap();
        let p = params(&u);
        assert!(p.contains(&("sr".into(), "8000".into())));
        assert!(p.contains(&("lang".into(), "ru".into())));
        assert!(p.contains(&("text".into(), "привет, мир".into())));
        assert!(!p.iter().any(|(k, _)| k == "text_b64"));
        let u = normalize_tts_url("http://h/s", &q(&[("text", "x"), ("sr", "abc")])).unwrap();
        assert!(params(&u).contains(&("sr".into(), "16000".into())));
    }

    #[test]
    fn normalize_errors() {
        assert_eq!(
            normalize_tts_url("h/s", &q(&[("voice", "a")])),
            Err(NormalizeError::MissingText)
        );
        assert_eq!(
            normalize_tts_url("h/s", &q(&[("text_b64", "%%%")])),
            Err(NormalizeError::InvalidTextB64)
        );
        assert!(matches!(
            normalize_tts_url("", &q(&[("text", "a")])),
            Err(NormalizeError::InvalidUrl(_))
        ));
        assert!(matches!(
            normalize_tts_url("ftp://h/s", &q(&[("text", "a")])),
            Err(NormalizeError::InvalidUrl(_))
        ));
    }

    #[test]
    fn cache_key_covers_every_field() {
        let a = TtsRequest {
            engine: "flite".into(),
            text: "hi".into(),
            speed: 1.0,
            ..Default::default()
        };
        let mut b = a.clone();
        b.voice = "slt".into();
        assert_ne!(a.cache_key(), b.cache_key());
        let mut c = a.clone();
        c.speed = 1.2;
        assert_ne!(a.cache_key(), c.cache_key());
        assert_eq!(a.cache_key(), a.clone().cache_key());
    }

    #[test]
    fn wav_header_parsing() {
        let mut h = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
        h.extend_from_slice(&16u32.to_le_bytes());
        h.extend_from_slice(&1u16.to_le_bytes());
        h.extend_from_slice(&1u16.to_le_bytes());
        h.extend_from_slice(&16000u32.to_le_bytes());
        h.extend_from_slice(&32000u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&16u16.to_le_bytes());
        assert!(matches!(parse_wav_header(&h), WavHeader::NeedMore));
        h.extend_from_slice(b"data\xff\xff\xff\xff");
        assert!(matches!(
            parse_wav_header(&h),
            WavHeader::Pcm16 {
                rate: 16000,
                channels: 1,
                data_offset: 44
            }
        ));
        assert!(matches!(
            parse_wav_header(b"ID3\x03\0\0\0\0\0\0\0\0\0"),
            WavHeader::Other
        ));
    }

    #[test]
    fn streaming_decoder_resamples_16k() {
        let mut d = WavStreamDecoder::new(16000, 1).unwrap();
        let bytes: Vec<u8> = (0..16000i32)
            .flat_map(|i| (((i % 40) as i16 - 20) * 500).to_le_bytes())
            .collect();
        let mut total = 0;
        for c in bytes.chunks(777) {
            total += d.feed(c).unwrap().len();
        }
        total += d.flush().unwrap().len();
        assert!((7800..=8300).contains(&total), "got {total} samples");
    }
}
