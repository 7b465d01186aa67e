//! `callsmith`: the control plane and the call engine in one binary.
//!
//! * `callsmith serve` (default): migrate the database, make sure a superuser credential
//!   exists, start the call engine (`node`) and the local speech node (`speech`, when
//!   `[speech]` has it on), and serve the HTTP API until SIGINT/SIGTERM; then drain the
//!   calls and stop the speech node.
//! * `callsmith migrate`: apply database migrations (and the superuser bootstrap) and exit.
//! * `callsmith load`: call a SIP target with a scenario from a throwaway node (embedded
//!   database, loopback API, the local speech node as `serve` starts it), write a report,
//!   print a summary, and exit 1 when a threshold is not kept (`load`).

#[cfg(feature = "mimalloc")]
mod alloc;
mod browser;
mod call;
mod config;
mod delivery;
mod dialer;
mod inbound;
mod journal;
mod load;
mod logging;
mod node;
mod persist;
mod runtime;
mod speech;

use std::{path::PathBuf, time::Duration};

use anyhow::Context;
use callsmith_control::{
    AppState, Services, Settings, Store, auth::password::PasswordCost, bootstrap,
};
use clap::{Parser, Subcommand};
use config::Config;

#[derive(Debug, Parser)]
#[command(
    name = "callsmith",
    version,
    about = "Telephony media engine with a control API"
)]
struct Cli {
    /// TOML configuration file (default: ./callsmith.toml if it exists).
    #[arg(long, short, global = true, env = "CALLSMITH_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the control API (the default).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Call a SIP target with a scenario from a throwaway node, write a report and print a
    /// summary; exit 1 when a call failed or another threshold is not kept.
    Load(load::LoadArgs),
}

async fn open_store(cfg: &Config) -> anyhow::Result<Store> {
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

/// A running node: the store, the services the call engine and the HTTP layer share, the
/// call engine, and the HTTP settings and router of the control API.
struct Node {
    store: Store,
    /// The services the call engine and the HTTP layer share (the speech node reports its
    /// state and figures into them).
    services: Services,
    /// The call engine and the local speech node, stopped in that order.
    running: Running,
    http: callsmith_control::settings::HttpSettings,
    app: callsmith_control::api::Router,
}

/// What a node stops when it ends: the call engine (its calls drained) and then the local
/// speech node, which the calls speak and listen through until they end.
struct Running {
    engine: Option<node::Engine>,
    speech: Option<speech::SpeechNode>,
}

impl Running {
    async fn stop(self) {
        if let Some(e) = self.engine {
            e.drain().await;
        }
        if let Some(s) = self.speech {
            s.stop().await;
        }
    }
}

/// Opens the store, starts the call engine and the local speech node (when `[speech]` has
/// it on and it is installed); `serve` and `load` both run on it. The node's recognition
/// node and synthesizer are registered into `cfg` before the services are built (see
/// `speech`).
async fn start(cfg: &mut Config) -> anyhow::Result<Node> {
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
        stt: callsmith_control::catalog::SttConfig {
            catalog_path: cfg.stt.catalog_path.clone(),
            engines: cfg.stt.engines.clone(),
        },
        tts_engines: cfg.tts.engine_names(),
        webhook_allow_private: cfg.webhook.allow_private,
        webhook_allow_hosts: cfg.webhook.allow_hosts.clone(),
        adapters: cfg.adapters.to_control()?,
        statistics_max_communications:
            callsmith_control::communication::service::DEFAULT_MAX_COMMUNICATIONS,
        legacy_max_contacts_per_campaign:
            callsmith_control::settings::DEFAULT_LEGACY_MAX_CONTACTS_PER_CAMPAIGN,
        max_test_calls_per_account: cfg.dialer.max_test_calls_per_account,
        // A node that places calls refuses at once what its trunks could not place.
        sip_trunks: cfg.dialer.enabled.then(|| cfg.sip.node_trunks()),
    };
    let http = settings.http;
    // One set of services for the call engine and the HTTP layer.
    let services = Services::new(store.clone(), &settings).map_err(anyhow::Error::msg)?;
    // The call engine (SIP, dialer, inbound calls, result delivery); drained before exit.
    // A node that cannot take calls (a SIP port in use, no RTP ports) does not start: it
    // would look healthy to the API while every call failed.
    let engine = node::start(cfg, services.clone(), local_tts_engine)
        .await
        .context("starting the call engine")?;
    let app = callsmith_control::router(AppState::with_services(services.clone(), settings));
    let speech = speech::launch(speech, &services);
    Ok(Node {
        store,
        services,
        running: Running { engine, speech },
        http,
        app,
    })
}

/// The control API of `node` on a loopback port of its own until `shutdown` completes:
/// its base URL and the server task.
async fn loopback_api(
    node: &Node,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<(String, tokio::task::JoinHandle<anyhow::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let base = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn(callsmith_control::api::serve(
        listener,
        node.app.clone(),
        node.http,
        shutdown,
    ));
    Ok((base, server))
}

async fn serve(mut cfg: Config) -> anyhow::Result<()> {
    let Node {
        store,
        running,
        http,
        app,
        ..
    } = start(&mut cfg).await?;
    let listener = tokio::net::TcpListener::bind(cfg.http.listen)
        .await
        .with_context(|| format!("binding {}", cfg.http.listen))?;
    let listen = listener.local_addr()?;
    tracing::info!(%listen, backend = ?store.backend(), "control API listening");
    let console = cfg.console_url(listen);
    tracing::info!(url = %console, "web console: open {console} in a browser");
    let shutdown = async move {
        shutdown_signal().await;
        running.stop().await;
    };
    callsmith_control::api::serve(listener, app, http, shutdown).await?;
    store.close().await;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut cfg =
        Config::load(cli.config.as_deref(), Config::env()).context("loading configuration")?;
    if matches!(cli.command, Some(Command::Load(_))) && cfg.log.filter == "info" {
        // The progress line is the output; the node's own log only says what went wrong.
        cfg.log.filter = "warn".into();
    }
    logging::init(&cfg.log);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.runtime_threads())
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match cli.command.unwrap_or(Command::Serve) {
            Command::Serve => serve(cfg).await,
            Command::Load(args) => load::run(cfg, args).await.map(|_| ()),
            Command::Migrate => {
                let store = open_store(&cfg).await?;
                store.close().await;
                Ok(())
            }
        }
    })
}
