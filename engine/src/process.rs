//! The callsmith process: open the store (migrations and the superuser bootstrap), build
//! the services, start the call engine ([`crate::node`]) and serve the control API until
//! shutdown (`serve`; `load` runs the use cases on the node instead). The API itself is HTTP, which this library does not know: the binary hands
//! in a [`ControlApiFactory`] that builds it over the node's services.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use anyhow::Context;
use callsmith_domain::{Services, Settings, Store, auth::password::PasswordCost, bootstrap};

use crate::{config::Config, node, speech};

/// A boxed future the control API runs or waits on.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A node's control API, built by the binary over the node's services (the HTTP crate's
/// router and server).
pub trait ControlApi: Send + Sync + 'static {
    /// Serves the API on `listener` until `shutdown` completes and the open requests
    /// are answered.
    fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: BoxFuture<()>,
    ) -> BoxFuture<anyhow::Result<()>>;
}

/// Builds a node's control API over the services the call engine shares and the
/// control plane's settings.
pub type ControlApiFactory = fn(Services, Settings) -> Arc<dyn ControlApi>;

pub async fn open_store(cfg: &Config) -> anyhow::Result<Store> {
    let url = cfg.database_url();
    if !url.starts_with("postgres") {
        std::fs::create_dir_all(&cfg.data_dir)
            .with_context(|| format!("creating data dir {}", cfg.data_dir.display()))?;
    }
    let store = Store::connect(&url, cfg.database_pool_size())
        .await
        .context("connecting to the database")?;
    let applied = store.migrate().await.context("applying migrations")?;
    if !applied.is_empty() {
        tracing::info!(versions = ?applied, backend = ?store.backend(), "migrations applied");
    }
    match bootstrap::ensure_superuser(
        &store,
        &cfg.data_dir,
        cfg.bootstrap_superuser_token.as_deref(),
    )
    .await?
    {
        bootstrap::Bootstrap::Generated(path) => tracing::warn!(
            path = %path.display(),
            "generated the first superuser token; read it from this file (mode 0600), keep it safe and delete the file"
        ),
        bootstrap::Bootstrap::Explicit => {
            tracing::info!("superuser token from configuration installed")
        }
        bootstrap::Bootstrap::Existing => {}
    }
    Ok(store)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

/// A running node: the store, the services the call engine and the control API share, the
/// control plane's settings and the call engine.
pub struct Node {
    pub store: Store,
    /// The services the call engine and the HTTP layer share (the speech node reports its
    /// state and figures into them).
    pub services: Services,
    /// The control plane's settings (what the use cases and the control API run with).
    pub settings: Settings,
    /// The call engine and the local speech node, stopped in that order.
    pub running: Running,
}

/// What a node stops when it ends: the call engine (its calls drained) and then the local
/// speech node, which the calls speak and listen through until they end.
pub struct Running {
    /// The call engine; None on a node that takes no calls.
    pub engine: Option<node::Engine>,
    pub speech: Option<speech::SpeechNode>,
}

impl Running {
    pub async fn stop(self) {
        if let Some(e) = self.engine {
            e.drain().await;
        }
        if let Some(s) = self.speech {
            s.stop().await;
        }
    }
}

/// Opens the store, starts the call engine and the local speech node (when `[speech]` has
/// it on and it is installed); `serve` (with the control API over the node's services) and
/// `load` (with the use cases on them) both run on it. The node's recognition node and
/// synthesizer are registered into `cfg` before the services are built (see `speech`).
pub async fn start(cfg: &mut Config) -> anyhow::Result<Node> {
    let speech = speech::prepare(cfg)?;
    let local_tts_engine = speech.tts_engine();
    let cfg = &*cfg;
    cfg.stt.check()?;
    // Trunk names and `sip.default_trunk` are checked on every node, the ones that place no
    // calls too: a misspelled default stops the start rather than every call later.
    cfg.sip.to_sip()?;
    let store = open_store(cfg).await?;
    let settings = Settings {
        public_url: cfg.public_url(),
        session_ttl: Duration::from_secs(cfg.auth.session_ttl_secs),
        password_reset_ttl: Duration::from_secs(cfg.auth.password_reset_ttl_secs),
        magic_link_ttl: Duration::from_secs(cfg.auth.magic_link_ttl_secs),
        password_cost: PasswordCost {
            memory_kib: cfg.auth.argon2_memory_kib,
            iterations: cfg.auth.argon2_iterations,
            parallelism: 1,
        },
        login_throttle: cfg.auth.login_throttle()?,
        http: cfg.http.to_control()?,
        objects: cfg.objects.to_control(&cfg.data_dir),
        stt: callsmith_domain::catalog::SttConfig {
            catalog_path: cfg.stt.catalog_path.clone(),
            engines: cfg.stt.engines.clone(),
        },
        tts_engines: cfg.tts.engine_names(),
        webhook_allow_private: cfg.webhook.allow_private,
        webhook_allow_hosts: cfg.webhook.allow_hosts.clone(),
        adapters: cfg.adapters.to_control()?,
        statistics_max_communications:
            callsmith_domain::communication::service::DEFAULT_MAX_COMMUNICATIONS,
        legacy_max_contacts_per_campaign:
            callsmith_domain::settings::DEFAULT_LEGACY_MAX_CONTACTS_PER_CAMPAIGN,
        max_test_calls_per_account: cfg.dialer.max_test_calls_per_account,
        // A node that places calls refuses at once what its trunks could not place.
        sip_trunks: cfg.dialer.enabled.then(|| cfg.sip.node_trunks()),
    };
    // One set of services for the call engine and the HTTP layer.
    let services = Services::new(store.clone(), &settings).map_err(anyhow::Error::msg)?;
    // The call engine (SIP, dialer, inbound calls, result delivery); drained before exit.
    // A node that cannot take calls (a SIP port in use, no RTP ports) does not start: it
    // would look healthy to the API while every call failed.
    let engine = node::start(cfg, services.clone(), local_tts_engine)
        .await
        .context("starting the call engine")?;
    let speech = speech::launch(speech, &services);
    Ok(Node {
        store,
        services,
        settings,
        running: Running { engine, speech },
    })
}

/// `callsmith serve`: the node and its control API on `http.listen` until SIGINT/SIGTERM;
/// then the calls drain and the speech node stops.
///
/// The API's socket is bound before the node starts, and `http.listen` becomes the bound
/// address: with port 0 the system picks a free port, and the public URL derived from
/// `http.listen` and the `control API listening` line name the port it picked.
pub async fn serve(mut cfg: Config, control_api: ControlApiFactory) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(cfg.http.listen)
        .await
        .with_context(|| format!("binding {}", cfg.http.listen))?;
    let listen = listener.local_addr()?;
    cfg.http.listen = listen;
    let Node {
        store,
        services,
        settings,
        running,
    } = start(&mut cfg).await?;
    let api = control_api(services, settings);
    tracing::info!(%listen, backend = ?store.backend(), "control API listening");
    let console = cfg.console_url(listen);
    tracing::info!(url = %console, "web console: open {console} in a browser");
    let shutdown = async move {
        shutdown_signal().await;
        running.stop().await;
    };
    api.serve(listener, Box::pin(shutdown)).await?;
    store.close().await;
    Ok(())
}
