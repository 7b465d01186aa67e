//! The domain services the HTTP handlers and the call engine share: the store, object
//! storage, recognition nodes, adapters, the guarded outbound client and what is built on
//! it (webhooks, the audio resolver), hang-up requests, live feeds of test calls, the
//! browser-call runner and metrics. Nothing here knows
//! HTTP: the engine holds a [`Services`], the HTTP layer wraps the same value in its
//! `AppState`.

use std::sync::Arc;

use crate::{
    adapters::Adapters,
    audio_ref::AudioResolver,
    browser_calls::BrowserCalls,
    catalog::SttEngines,
    communication::service::StatisticsService,
    guarded_http::GuardedClient,
    hangups::Hangups,
    live_feed::LiveFeeds,
    metrics::Metrics,
    objects::{Objects, ObjectsPurger},
    readiness::Readiness,
    settings::Settings,
    store::Store,
    webhook::WebhookExecutor,
};

/// The shared services. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Services {
    pub store: Store,
    /// Object storage (see [`crate::objects`]).
    pub objects: Arc<Objects>,
    /// Recognition catalog and node pools (see [`crate::catalog`]).
    pub stt: Arc<SttEngines>,
    /// Names of the synthesizers the node speaks with (`Settings::tts_engines`).
    pub tts_engines: Arc<[String]>,
    /// Intent classifiers and LLM chat streams (see [`crate::adapters`]).
    pub adapters: Arc<Adapters>,
    /// The guarded client for every URL a tenant names (see [`crate::guarded_http`]).
    pub outbound: GuardedClient,
    /// The shared webhook executor (see [`crate::webhook`]).
    pub webhook: WebhookExecutor,
    /// The resolver of every audio reference (see [`crate::audio_ref`]).
    pub audio: AudioResolver,
    /// Hang-up requests for the calls this process runs (see [`crate::hangups`]).
    pub hangups: Arc<Hangups>,
    /// Live event feeds of the test calls this process runs (see [`crate::live_feed`]).
    pub live_feeds: Arc<LiveFeeds>,
    /// The engine's browser-call runner, once installed (see [`crate::browser_calls`]).
    pub browser: Arc<BrowserCalls>,
    /// The Prometheus registry (see [`crate::metrics`]).
    pub metrics: Arc<Metrics>,
    /// Statistics of sets of communications (see [`crate::communication::service`]).
    pub statistics: StatisticsService,
    /// Components beside the database and their states, for `/readyz` (see
    /// [`crate::readiness`]).
    pub readiness: Arc<Readiness>,
}

impl Services {
    /// Opens object storage, loads the recognition catalog and builds the clients (an
    /// error names the offending setting).
    pub fn new(store: Store, settings: &Settings) -> Result<Services, String> {
        let objects = Objects::new(&settings.objects, &settings.public_url)
            .map_err(|e| format!("objects: {e}"))?;
        let objects = Arc::new(objects);
        store.register_purger(Arc::new(ObjectsPurger(objects.clone())));
        let stt = SttEngines::new(&settings.stt)?;
        let adapters = Arc::new(Adapters::new(store.clone(), settings.adapters.clone()));
        let outbound = GuardedClient::with_allowed_hosts(
            settings.webhook_allow_private,
            &settings.webhook_allow_hosts,
        )?;
        let webhook = WebhookExecutor::new(outbound.clone());
        let audio = AudioResolver::new(store.clone(), objects.clone(), outbound.clone());
        Ok(Services {
            store,
            objects,
            stt: Arc::new(stt),
            tts_engines: settings.tts_engines.clone().into(),
            adapters,
            outbound,
            webhook,
            audio,
            hangups: Arc::default(),
            live_feeds: Arc::default(),
            browser: Arc::default(),
            metrics: Arc::new(Metrics::new()),
            readiness: Arc::default(),
            statistics: StatisticsService::new(settings.statistics_max_communications),
        })
    }
}
