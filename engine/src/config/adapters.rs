//! `[adapters]`: intent classifier training and the OpenAI-compatible LLM providers
//! (`[[adapters.llm_providers]]`).

use serde::{Deserialize, Serialize};

/// `[adapters]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AdaptersSection {
    /// Concurrent classifier training runs. Default 2.
    pub training_workers: usize,
    /// Base URL of the remote classifier service (the catalog's `remote` model_id). Unset:
    /// that model_id answers 502.
    pub remote_classifier_url: Option<String>,
    /// Upper bound on one chat stream, seconds. Default 300.
    pub llm_stream_timeout_secs: u64,
    /// How long a finished chat stream stays pollable, seconds. Default 3600.
    pub llm_retention_secs: u64,
    /// Upper bound on one LLM answer inside a live call (question/fallback
    /// `llm_properties`), seconds; the caller waits in silence meanwhile. Default 15.
    pub llm_call_timeout_secs: u64,
    /// OpenAI-compatible chat-completions upstreams:
    /// `[[adapters.llm_providers]] name = "openai", base_url = "https://api.openai.com/v1",
    /// api_key_env = "OPENAI_API_KEY", gdpr = false, models = ["gpt-4o-mini"]`.
    pub llm_providers: Vec<LlmProviderSection>,
}

/// `[[adapters.llm_providers]]`
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LlmProviderSection {
    /// Name requests and bricks select it by (`provider`).
    pub name: String,
    /// Base URL of the OpenAI-compatible API; chats go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// API key sent as `Authorization: Bearer …`.
    pub api_key: Option<String>,
    /// Name of an environment variable holding the API key (keeps it out of the file);
    /// used when `api_key` is unset.
    pub api_key_env: Option<String>,
    /// The provider processes data in line with the GDPR (eligible for `gdpr_required`).
    pub gdpr: bool,
    /// Models it serves; a chat naming no provider goes to the first provider listing its model.
    pub models: Vec<String>,
}

impl Default for AdaptersSection {
    /// The control plane's defaults (one place), plus the engine's LLM call timeout.
    fn default() -> Self {
        let c = callsmith_domain::adapters::AdaptersConfig::default();
        AdaptersSection {
            training_workers: c.training_workers,
            remote_classifier_url: c.remote_classifier_url,
            llm_stream_timeout_secs: c.llm_stream_timeout.as_secs(),
            llm_retention_secs: c.llm_retention.as_secs(),
            llm_call_timeout_secs: 15,
            llm_providers: Vec::new(),
        }
    }
}

impl AdaptersSection {
    /// The control plane's adapter configuration. Errors name a provider without a name or
    /// base URL, a duplicate name, or an `api_key_env` variable that is not set.
    pub fn to_control(&self) -> anyhow::Result<callsmith_domain::adapters::AdaptersConfig> {
        let mut providers = Vec::with_capacity(self.llm_providers.len());
        for (i, p) in self.llm_providers.iter().enumerate() {
            anyhow::ensure!(
                !p.name.trim().is_empty(),
                "adapters.llm_providers[{i}].name is required"
            );
            anyhow::ensure!(
                p.base_url.starts_with("http://") || p.base_url.starts_with("https://"),
                "adapters.llm_providers[{i}].base_url must be an http(s) URL"
            );
            anyhow::ensure!(
                !providers
                    .iter()
                    .any(|q: &callsmith_domain::adapters::LlmProvider| q.name == p.name),
                "adapters.llm_providers: the name {:?} is used twice",
                p.name
            );
            let api_key = match (&p.api_key, &p.api_key_env) {
                (Some(k), _) => Some(k.clone()),
                (None, Some(var)) => Some(std::env::var(var).map_err(|_| {
                    anyhow::anyhow!("adapters.llm_providers[{i}].api_key_env: {var} is not set")
                })?),
                (None, None) => None,
            };
            providers.push(callsmith_domain::adapters::LlmProvider {
                name: p.name.clone(),
                base_url: p.base_url.clone(),
                api_key,
                gdpr: p.gdpr,
                models: p.models.clone(),
            });
        }
        Ok(callsmith_domain::adapters::AdaptersConfig {
            training_workers: self.training_workers.max(1),
            remote_classifier_url: self.remote_classifier_url.clone(),
            llm_providers: providers,
            llm_stream_timeout: std::time::Duration::from_secs(self.llm_stream_timeout_secs.max(1)),
            llm_retention: std::time::Duration::from_secs(self.llm_retention_secs),
        })
    }
}
