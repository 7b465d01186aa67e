//! `callsmith`: the control plane and the call engine in one binary. This file only
//! wires: the call runtime (callsmith-engine) gets the HTTP control API
//! (callsmith-control) as its [`ControlApi`]; nothing else names the HTTP crate.
//!
//! * `callsmith serve` (default): migrate the database, make sure a superuser credential
//!   exists, start the call engine (`node`) and the local speech node (`speech`, when
//!   `[speech]` has it on), and serve the HTTP API until SIGINT/SIGTERM; then drain the
//!   calls and stop the speech node.
//! * `callsmith migrate`: apply database migrations (and the superuser bootstrap) and exit.
//! * `callsmith load`: call a SIP target with a scenario from a throwaway node (embedded
//!   database, the use cases run on it directly, the local speech node as `serve` starts
//!   it), write a report, print a summary, and exit 1 when a threshold is not kept (`load`).

#[cfg(feature = "mimalloc")]
mod alloc;

use std::{path::PathBuf, sync::Arc};

use anyhow::Context;
use callsmith_control::{AppState, api::Router};
use callsmith_domain::{Services, Settings, settings::HttpSettings};
use callsmith_engine::{ControlApi, config::Config, load, logging, open_store, process::BoxFuture};
use clap::{Parser, Subcommand};

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

/// The HTTP control API of a node: the router over the node's services and the
/// connection limits it is served with.
struct HttpApi {
    app: Router,
    limits: HttpSettings,
}

impl ControlApi for HttpApi {
    fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: BoxFuture<()>,
    ) -> BoxFuture<anyhow::Result<()>> {
        Box::pin(callsmith_control::api::serve(
            listener,
            self.app.clone(),
            self.limits,
            shutdown,
        ))
    }
}

/// The [`callsmith_engine::ControlApiFactory`] of the binary.
fn http_api(services: Services, settings: Settings) -> Arc<dyn ControlApi> {
    let limits = settings.http;
    let app = callsmith_control::router(AppState::with_services(services, settings));
    Arc::new(HttpApi { app, limits })
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
            Command::Serve => callsmith_engine::serve(cfg, http_api).await,
            Command::Load(args) => load::run(cfg, args).await.map(|_| ()),
            Command::Migrate => {
                let store = open_store(&cfg).await?;
                store.close().await;
                Ok(())
            }
        }
    })
}
