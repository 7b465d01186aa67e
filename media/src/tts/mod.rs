//! Speech synthesis: the engine trait ([`TtsEngine`]) and its requests; the engines: local
//! programs (espeak-ng or flite as a subprocess, [`LocalTts`]), a synthesis URL (GET
//! returning WAV, streamed into a growing source as it downloads, [`HttpTts`]) and an
//! OpenAI-compatible endpoint (POST `/v1/audio/speech`, PCM streamed as it arrives,
//! [`OpenAiTts`]); and [`TtsService`], the engines by name with a cache keyed by (engine,
//! voice, language, model, speed, text, rate). A request's [`TtsRequest::rate`] is the
//! session's audio rate: a wideband (G.722) call's synthesis is made at 16 kHz, from a
//! synthesizer's 16 kHz (or higher) audio, a narrowband call's at 8 kHz.
//! [`normalize_tts_url`] is the pure URL normaliser behind GET /v1/adapters/tts/normalize/{path}. Playing a synthesis as it is made,
//! sentence by sentence, is in `tts_sentences` ([`TtsService::synthesis`],
//! [`TtsService::speech`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::prompt::{Prompt, PromptError, StreamingAudio};
use crate::rate::AudioRate;
pub use crate::tts_sentences::{Speech, SynthStatus, Synthesis};

mod http;
mod local;
mod normalize;
mod openai;
mod wav;

pub use http::HttpTts;
pub use local::{LocalProgram, LocalTts};
pub use normalize::{DEFAULT_SYNTH_SAMPLE_RATE, NormalizeError, normalize_tts_url};
pub use openai::{OpenAiTts, OpenAiTtsConfig};

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
    /// The rate the audio is made at: the playing session's ([`crate::MediaSession::audio_rate`]).
    #[serde(skip)]
    pub rate: AudioRate,
}

fn one() -> f64 {
    1.0
}

impl TtsRequest {
    /// The cache key (speed rounded to 1/1000; a 16 kHz synthesis is its own entry).
    pub fn cache_key(&self) -> String {
        let speed = if self.speed.is_finite() && self.speed > 0.0 {
            self.speed
        } else {
            1.0
        };
        let rate = match self.rate {
            AudioRate::Narrow => "",
            AudioRate::Wide => "\u{1f}16000",
        };
        format!(
            "{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{:.3}\u{1f}{}{rate}",
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

/// A speech synthesizer.
#[async_trait]
pub trait TtsEngine: Send + Sync {
    /// Synthesizes the whole text: a prompt with 16 kHz samples too when the request is
    /// wideband and the synthesizer's audio has them.
    async fn synthesize(&self, req: &TtsRequest) -> Result<Prompt, TtsError>;

    /// Synthesizes into a growing source at its rate (default: all at once, then pushed).
    /// Engines that stream push audio as it arrives, so playout can start early.
    async fn synthesize_into(
        &self,
        req: &TtsRequest,
        out: &StreamingAudio,
    ) -> Result<(), TtsError> {
        let p = self.synthesize(req).await?;
        out.push_prompt(&p);
        Ok(())
    }
}

/// Samples a player of a streamed synthesis may buffer (a synthesis runs ahead of
/// real time; it is bounded by its text).
pub(crate) const STREAM_BUFFER: usize = usize::MAX / 2;

/// Cached syntheses by key, with insertion order for eviction.
type SynthCache = (HashMap<String, Arc<Prompt>>, VecDeque<String>);

/// The synthesizers every node has, by the names bricks select them with.
pub const LOCAL_ENGINES: &[&str] = &["espeak-ng", "flite"];

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

    /// With `espeak-ng` and `flite` registered under those names ([`LOCAL_ENGINES`]).
    pub fn with_local_engines(capacity: usize) -> TtsService {
        let mut s = TtsService::new(capacity);
        s.register(
            LOCAL_ENGINES[0],
            Arc::new(LocalTts {
                program: LocalProgram::EspeakNg,
            }),
        );
        s.register(
            LOCAL_ENGINES[1],
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Playable;

    /// Pushes 20 ms of silence, then 1000, 1001, 1002, … in three chunks with pauses,
    /// counting its runs.
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
            // The silence a synthesiser puts before its speech: not played.
            out.push(&[0; 160]);
            for chunk in 0..3i16 {
                let pcm: Vec<i16> = (1000 + chunk * 160..1000 + (chunk + 1) * 160).collect();
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
            ..Default::default()
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
        let expected: Vec<i16> = (1000..1480).collect();
        assert_eq!(drain(&first), expected);
        assert_eq!(drain(&second), expected, "the follower heard it all");
        assert_eq!(slow.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Once done, it is cached, from its first audible sample: a third call needs no
        // synthesis.
        let Playable::Prompt(cached) = svc.playable(&req).unwrap() else {
            panic!("cached")
        };
        assert_eq!(&cached.pcm()[..480], &expected[..]);
        assert_eq!(slow.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn cache_key_covers_every_field() {
        let a = TtsRequest {
            engine: "flite".into(),
            text: "hi".into(),
            speed: 1.0,
            ..Default::default()
        };
        let mut wide = a.clone();
        wide.rate = AudioRate::Wide;
        assert_ne!(a.cache_key(), wide.cache_key());
        assert_eq!(
            a.cache_key(),
            "flite\u{1f}\u{1f}\u{1f}\u{1f}1.000\u{1f}hi",
            "a narrowband key is as it always was"
        );
        let mut b = a.clone();
        b.voice = "slt".into();
        assert_ne!(a.cache_key(), b.cache_key());
        let mut c = a.clone();
        c.speed = 1.2;
        assert_ne!(a.cache_key(), c.cache_key());
        assert_eq!(a.cache_key(), a.clone().cache_key());
    }
}
