//! Language adapters: versioned intent classifiers (trainer, queue, predictor) and LLM
//! chat streams against OpenAI-compatible upstreams. The HTTP routes live in
//! `api/v1/{classifiers,llm}.rs`; the shape of everything is documented in
//! docs/adapters.md.
//!
//! One [`Adapters`] per process, held by `AppState::adapters`. Its configuration
//! ([`AdaptersConfig`]) is applied with [`Adapters::configure`]; the training worker pool
//! starts on first use.

pub mod classifier;
pub mod llm;
mod llm_sse;

use std::{sync::Arc, time::Duration};

pub use classifier::{ClassifierError, Classifiers};
pub use llm::{LlmProvider, LlmService};

use crate::store::{Store, TenantPurger};

/// Configuration of the adapters.
#[derive(Debug, Clone)]
pub struct AdaptersConfig {
    /// Size of the training worker pool (concurrent training runs), at least 1.
    pub training_workers: usize,
    /// Base URL of the remote classifier service behind the catalog's `remote` model_id
    /// (the upstream whose failures are 502). None: that model_id answers 502.
    pub remote_classifier_url: Option<String>,
    /// OpenAI-compatible chat-completions upstreams.
    pub llm_providers: Vec<LlmProvider>,
    /// Upper bound on one chat stream's duration.
    pub llm_stream_timeout: Duration,
    /// How long a finished chat stream stays pollable.
    pub llm_retention: Duration,
}

impl Default for AdaptersConfig {
    fn default() -> Self {
        AdaptersConfig {
            training_workers: 2,
            remote_classifier_url: None,
            llm_providers: vec![],
            llm_stream_timeout: Duration::from_secs(300),
            llm_retention: Duration::from_secs(3600),
        }
    }
}

/// The adapter services of one process.
#[derive(Debug)]
pub struct Adapters {
    pub classifiers: Arc<Classifiers>,
    pub llm: Arc<LlmService>,
}

/// Tenant purge hook: drops cached models and queued jobs of the purged accounts and
/// deletes what the remote classifier service holds for them. The classifier rows
/// themselves go with the account (ON DELETE CASCADE).
#[derive(Debug)]
struct ClassifierPurger(Arc<Classifiers>);

#[async_trait::async_trait]
impl TenantPurger for ClassifierPurger {
    fn name(&self) -> &str {
        "classifiers"
    }
    async fn purge_account(&self, _tenant_sid: &str, account_sid: &str) -> anyhow::Result<()> {
        self.0.purge_remote(account_sid).await
    }
}

impl Adapters {
    /// Builds the services and registers the classifier tenant purger with the store.
    pub fn new(store: Store, cfg: AdaptersConfig) -> Adapters {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        let classifiers = Arc::new(Classifiers::new(
            store.clone(),
            http.clone(),
            cfg.remote_classifier_url.clone(),
            cfg.training_workers,
        ));
        store.register_purger(Arc::new(ClassifierPurger(classifiers.clone())));
        Adapters {
            classifiers,
            llm: Arc::new(LlmService::new(
                http,
                cfg.llm_providers,
                cfg.llm_stream_timeout,
                cfg.llm_retention,
            )),
        }
    }

    /// Applies the runtime-changeable parts of a configuration: the remote classifier
    /// URL and the LLM providers (the worker pool size is fixed at construction).
    pub fn configure(&self, cfg: &AdaptersConfig) {
        self.classifiers
            .set_remote_url(cfg.remote_classifier_url.clone());
        self.llm.set_providers(cfg.llm_providers.clone());
    }
}
