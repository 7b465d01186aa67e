//! An OpenAI-compatible speech endpoint (`POST /v1/audio/speech`): 16-bit PCM (or WAV)
//! read as it streams in, converted to the request's rate (8 kHz, or 16 kHz for a G.722
//! call).

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;

use super::wav::{WavHeader, WavStreamDecoder, parse_wav_header};
use super::{TtsEngine, TtsError, TtsRequest};
use crate::prompt::{Prompt, StreamingAudio};
use crate::rate::AudioRate;

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
/// `{"model","input","voice","response_format":"pcm","speed","sample_rate"}` (the
/// request's rate: 8000, or 16000 for a wideband session), the
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
            "sample_rate": req.rate.hz(),
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

    /// Posts `req` and hands the samples, at `target`, to `sink` as they arrive; returns
    /// how many there were in all.
    async fn stream(
        &self,
        req: &TtsRequest,
        target: AudioRate,
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
            if let Some((d, rest)) = self.start_decoder(&head, declared, target, false)? {
                let mut d = d;
                let pcm = d.feed(&head[rest..])?;
                total += pcm.len();
                sink(&pcm);
                dec = Some(d);
                head = Vec::new();
            }
        }
        if dec.is_none() {
            match self.start_decoder(&head, declared, target, true)? {
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
        target: AudioRate,
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
            return Ok(Some((WavStreamDecoder::new(rate, 1, target)?, 0)));
        }
        match parse_wav_header(head) {
            WavHeader::Pcm16 {
                rate,
                channels,
                data_offset,
            } => Ok(Some((
                WavStreamDecoder::new(rate, channels, target)?,
                data_offset,
            ))),
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
        self.stream(req, req.rate, |s| pcm.extend_from_slice(s))
            .await?;
        Ok(Prompt::from_pcm_at(pcm, req.rate))
    }

    /// Pushes audio into `out` as the body arrives (the speech node sends each sentence
    /// as soon as it is synthesised).
    async fn synthesize_into(
        &self,
        req: &TtsRequest,
        out: &StreamingAudio,
    ) -> Result<(), TtsError> {
        self.stream(req, out.rate(), |s| {
            if !s.is_empty() {
                out.push(s)
            }
        })
        .await?;
        Ok(())
    }
}
