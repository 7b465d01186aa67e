//! Control-API throughput: authenticated `GET /v1/profile` (user session) and
//! `GET /v1/user` (account API key) at a fixed concurrency, on SQLite and PostgreSQL.
//! Prints requests/s and p50/p99 latency per backend and endpoint.
//!
//! ```text
//! cargo run --release -p callsmith-bench --bin http_api -- --concurrency 32 --seconds 5
//! ```
//! PostgreSQL needs `CALLSMITH_TEST_PG_ADMIN_URL` (a role with CREATEDB; run
//! `eval "$(bash scripts/test-deps.sh)"`); `--backend sqlite` skips it. The server runs
//! in-process on 127.0.0.1:0 with production password hashing; only loopback traffic.
//! Targets on SQLite: ≥ 5000 req/s and p99 ≤ 10 ms.

use std::time::{Duration, Instant};

/// The allocator of the shipped `callsmith` binary (engine's default `mimalloc` feature),
/// so the server half of this process allocates as the service does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{Context, bail};
use callsmith_control::AppState;
use callsmith_domain::{Settings, Store, auth::tokens, bootstrap};
use clap::{Parser, ValueEnum};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    Sqlite,
    Postgres,
    Both,
}

#[derive(Debug, Parser)]
struct Args {
    /// Concurrent client connections.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Measured seconds per endpoint (after a one-second warm-up).
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    #[arg(long, value_enum, default_value_t = Backend::Both)]
    backend: Backend,
    /// Rows in the user table of the measured account (GET /v1/user returns one page of 100).
    #[arg(long, default_value_t = 150)]
    users: usize,
    /// Page size of the measured GET /v1/user (`?limit=`).
    #[arg(long, default_value_t = 100)]
    user_limit: u32,
    /// Store connection pool size (the service's `database.max_connections`); by default
    /// the service's default for the backend (4 on SQLite, 16 on PostgreSQL).
    #[arg(long)]
    pool: Option<u32>,
    /// Send every read to the database (on SQLite the store keeps user pages and
    /// credential lookups until a table they read changes; this measures a miss every time).
    #[arg(long)]
    no_read_cache: bool,
}

struct Row {
    backend: &'static str,
    endpoint: &'static str,
    requests: usize,
    errors: usize,
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
}

struct Target {
    base: String,
    session: String,
    account_key: String,
    _dir: tempfile::TempDir,
}

async fn start(backend: Backend, pool: Option<u32>, read_cache: bool) -> anyhow::Result<Target> {
    let dir = tempfile::tempdir()?;
    let url = match backend {
        Backend::Sqlite => format!("sqlite://{}", dir.path().join("bench.db").display()),
        _ => {
            let admin = std::env::var("CALLSMITH_TEST_PG_ADMIN_URL")
                .context("CALLSMITH_TEST_PG_ADMIN_URL is not set: run `eval \"$(bash scripts/test-deps.sh)\"` or pass --backend sqlite")?;
            callsmith_domain::store::create_postgres_database(&admin, "csfb_").await?
        }
    };
    let pool = pool.unwrap_or_else(|| callsmith_domain::store::default_pool_size(&url));
    let store = Store::connect(&url, pool).await?;
    let store = if read_cache {
        store
    } else {
        store.without_read_cache()
    };
    store.migrate().await?;
    let su = tokens::generate(tokens::TokenKind::Superuser);
    bootstrap::ensure_superuser(&store, dir.path(), Some(&su)).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let state = AppState::new(
        store,
        Settings {
            public_url: base.clone(),
            ..Settings::default()
        },
    );
    let app = callsmith_control::router(state);
    tokio::spawn(async move {
        let _ = callsmith_control::api::serve(
            listener,
            app,
            Default::default(),
            std::future::pending(),
        )
        .await;
    });

    let c = reqwest::Client::new();
    let post = |path: &str, body: Value, token: &str, header: Option<(&str, &str)>| {
        let mut r = c
            .post(format!("{base}{path}"))
            .bearer_auth(token)
            .json(&body);
        if let Some((k, v)) = header {
            r = r.header(k, v);
        }
        r.send()
    };
    let tenant: Value = post("/v1/internal/tenant", json!({"name": "bench"}), &su, None)
        .await?
        .json()
        .await?;
    let tenant = tenant["sid"].as_str().context("tenant sid")?.to_string();
    let account: Value = post(
        "/v1/internal/account",
        json!({"name": "bench", "email": "bench@example.test", "country": "de"}),
        &su,
        Some(("X-Tenant-Sid", &tenant)),
    )
    .await?
    .json()
    .await?;
    let account = account["sid"].as_str().context("account sid")?.to_string();
    let key: Value = post(
        &format!("/v1/internal/account/{account}/api-key"),
        json!({}),
        &su,
        None,
    )
    .await?
    .json()
    .await?;
    let account_key = key["secret"].as_str().context("key secret")?.to_string();
    let r = post(
        "/v1/user",
        json!({"email": "admin@example.test", "name": "admin", "password": "bench-password", "roles": ["admin"]}),
        &account_key,
        None,
    )
    .await?;
    if r.status() != 201 {
        bail!("creating the admin user: {}", r.text().await?);
    }
    for i in 1..args_users() {
        post(
            "/v1/user",
            json!({"email": format!("u{i}@example.test"), "name": format!("user {i}")}),
            &account_key,
            None,
        )
        .await?;
    }
    let session: Value = c
        .post(format!("{base}/v1/auth/login"))
        .json(&json!({"email": "admin@example.test", "password": "bench-password"}))
        .send()
        .await?
        .json()
        .await?;
    let session = session["session_token"]
        .as_str()
        .context("session token")?
        .to_string();
    Ok(Target {
        base,
        session,
        account_key,
        _dir: dir,
    })
}

static USERS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
fn args_users() -> usize {
    *USERS.get().unwrap_or(&150)
}

/// Runs `concurrency` loops of GET `url` for `secs`; returns (latencies in µs, errors).
async fn load(url: String, token: String, concurrency: usize, secs: Duration) -> (Vec<u32>, usize) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()
        .expect("client");
    let deadline = Instant::now() + secs;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, url, token) = (client.clone(), url.clone(), token.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(50_000);
            let mut errors = 0;
            while Instant::now() < deadline {
                let t = Instant::now();
                match client.get(&url).bearer_auth(&token).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
                    }
                    _ => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        if let Ok((l, e)) = t.await {
            all.extend(l);
            errors += e;
        }
    }
    (all, errors)
}

/// Milliseconds at quantile `q` of sorted microsecond latencies.
fn percentile(sorted: &[u32], q: f64) -> f64 {
    callsmith_bench::nearest_rank(sorted, q).map_or(f64::NAN, |us| f64::from(us) / 1000.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _ = USERS.set(args.users.max(1));
    let backends: Vec<(Backend, &'static str)> = match args.backend {
        Backend::Sqlite => vec![(Backend::Sqlite, "sqlite")],
        Backend::Postgres => vec![(Backend::Postgres, "postgres")],
        Backend::Both => vec![(Backend::Sqlite, "sqlite"), (Backend::Postgres, "postgres")],
    };
    let mut rows = Vec::new();
    for (backend, name) in backends {
        let t = start(backend, args.pool, !args.no_read_cache).await?;
        for (endpoint, token) in [
            ("GET /v1/profile", &t.session),
            ("GET /v1/user", &t.account_key),
        ] {
            let path = endpoint.trim_start_matches("GET ");
            let url = match path {
                "/v1/user" => format!("{}{path}?limit={}", t.base, args.user_limit),
                _ => format!("{}{path}", t.base),
            };
            load(
                url.clone(),
                token.clone(),
                args.concurrency,
                Duration::from_secs(1),
            )
            .await; // warm-up
            let started = Instant::now();
            let (mut lat, errors) = load(
                url,
                token.clone(),
                args.concurrency,
                Duration::from_secs(args.seconds),
            )
            .await;
            let elapsed = started.elapsed().as_secs_f64();
            lat.sort_unstable();
            rows.push(Row {
                backend: name,
                endpoint,
                requests: lat.len(),
                errors,
                rps: lat.len() as f64 / elapsed,
                p50_ms: percentile(&lat, 0.50),
                p99_ms: percentile(&lat, 0.99),
            });
        }
    }
    println!(
        "concurrency {}, {} s per endpoint, {} users in the account, /v1/user pages of {}",
        args.concurrency, args.seconds, args.users, args.user_limit
    );
    println!(
        "{:<9} {:<16} {:>9} {:>7} {:>10} {:>9} {:>9}",
        "backend", "endpoint", "requests", "errors", "req/s", "p50 ms", "p99 ms"
    );
    for r in &rows {
        println!(
            "{:<9} {:<16} {:>9} {:>7} {:>10.0} {:>9.2} {:>9.2}",
            r.backend, r.endpoint, r.requests, r.errors, r.rps, r.p50_ms, r.p99_ms
        );
    }
    Ok(())
}
