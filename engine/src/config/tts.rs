//! `[tts]`: the synthesizers prompts are spoken with (espeak-ng, flite and named
//! `[[tts.engines]]`).

use serde::{Deserialize, Serialize};

/// `[tts]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TtsSection {
    /// Engine for prompts whose brick names none (or an unknown one): `espeak-ng`, `flite`,
    /// or the name of one of `engines`. Unset: `piper` while the local speech node is
    /// started (see `[speech]`), else `espeak-ng`.
    pub default_engine: Option<String>,
    /// Syntheses kept in memory. Default 256.
    pub cache_capacity: usize,
    /// Synthesizers beside espeak-ng and flite: `[[tts.engines]] name = "piper", kind =
    /// "openai", url = "http://127.0.0.1:2700"`. Their URLs are the operator's (trusted).
    pub engines: Vec<TtsEngineSection>,
}

impl Default for TtsSection {
    fn default() -> Self {
        TtsSection {
            default_engine: None,
            cache_capacity: 256,
            engines: Vec::new(),
        }
    }
}

/// What speaks behind a `[[tts.engines]]` entry.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TtsEngineKind {
    /// An OpenAI-compatible `POST {url}/v1/audio/speech` (OpenAI, the local speech node).
    #[default]
    Openai,
}

/// `[[tts.engines]]`: one named synthesizer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TtsEngineSection {
    /// Name bricks select it by (`engine`); unique, neither `espeak-ng` nor `flite`.
    pub name: String,
    /// `openai` (the only kind).
    pub kind: TtsEngineKind,
    /// Base URL: syntheses go to `{url}/v1/audio/speech` (`https://api.openai.com`, or
    /// `http://127.0.0.1:2700` for the local speech node).
    pub url: String,
    /// API key sent as `Authorization: Bearer …`.
    pub api_key: Option<String>,
    /// Name of an environment variable holding the API key; used when `api_key` is unset.
    pub api_key_env: Option<String>,
    /// Model when the brick names none. Default `tts-1`.
    pub model: String,
    /// Voice when the brick names none. Default `alloy`.
    pub voice: String,
    /// Bound on one synthesis (connect, answer, whole body), seconds. Default 60.
    pub timeout_secs: u64,
    /// Rate of a `pcm` answer without an `X-Sample-Rate` header. Default 24000 (OpenAI's).
    pub pcm_sample_rate: u32,
}

impl Default for TtsEngineSection {
    fn default() -> Self {
        let c = callsmith_media::tts::OpenAiTtsConfig::default();
        TtsEngineSection {
            name: String::new(),
            kind: TtsEngineKind::Openai,
            url: String::new(),
            api_key: None,
            api_key_env: None,
            model: c.model,
            voice: c.voice,
            timeout_secs: c.timeout.as_secs(),
            pcm_sample_rate: c.pcm_sample_rate,
        }
    }
}

/// The synthesizer prompts are spoken with when neither the brick nor `default_engine`
/// names one, and no local speech node is started.
pub const FALLBACK_ENGINE: &str = "espeak-ng";

impl TtsSection {
    /// The names bricks may select a synthesizer by: espeak-ng, flite and every
    /// `[[tts.engines]]` name (what [`TtsSection::service`] registers).
    pub fn engine_names(&self) -> Vec<String> {
        callsmith_media::tts::LOCAL_ENGINES
            .iter()
            .map(|e| e.to_string())
            .chain(self.engines.iter().map(|e| e.name.clone()))
            .collect()
    }

    /// The default engine in effect.
    pub fn default_engine(&self) -> &str {
        self.default_engine.as_deref().unwrap_or(FALLBACK_ENGINE)
    }

    /// The synthesis service: espeak-ng, flite and every configured engine. Errors name an
    /// engine without a name or with a taken one, a bad URL or rate, an `api_key_env`
    /// variable that is not set, or a `default_engine` that is none of them.
    pub fn service(&self) -> anyhow::Result<callsmith_media::tts::TtsService> {
        use callsmith_media::tts::{OpenAiTts, OpenAiTtsConfig, TtsService};
        let mut svc = TtsService::with_local_engines(self.cache_capacity.max(1));
        for (i, e) in self.engines.iter().enumerate() {
            anyhow::ensure!(
                !e.name.trim().is_empty(),
                "tts.engines[{i}].name is required"
            );
            anyhow::ensure!(
                !svc.has_engine(&e.name),
                "tts.engines[{i}]: the name {:?} is taken",
                e.name
            );
            let api_key = match (&e.api_key, &e.api_key_env) {
                (Some(k), _) => Some(k.clone()),
                (None, Some(var)) => Some(std::env::var(var).map_err(|_| {
                    anyhow::anyhow!("tts.engines[{i}].api_key_env: {var} is not set")
                })?),
                (None, None) => None,
            };
            let engine = match e.kind {
                TtsEngineKind::Openai => OpenAiTts::new(OpenAiTtsConfig {
                    url: e.url.clone(),
                    api_key,
                    model: e.model.clone(),
                    voice: e.voice.clone(),
                    timeout: std::time::Duration::from_secs(e.timeout_secs.max(1)),
                    pcm_sample_rate: e.pcm_sample_rate,
                })
                .map_err(|err| anyhow::anyhow!("tts.engines[{i}] ({}): {err}", e.name))?,
            };
            svc.register(&e.name, std::sync::Arc::new(engine));
        }
        anyhow::ensure!(
            svc.has_engine(self.default_engine()),
            "tts.default_engine {:?} is neither espeak-ng, flite nor one of tts.engines",
            self.default_engine()
        );
        Ok(svc)
    }
}
