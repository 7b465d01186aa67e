//! The call journal's own throughput, with no calls around it: how many call-progress
//! writes per second the write-behind path ([`callsmith_engine::journal`]) stores on
//! SQLite and on PostgreSQL on this machine.
//!
//! ```text
//! eval "$(bash scripts/test-deps.sh)"   # PostgreSQL for the second backend
//! cargo run --release -p callsmith-bench --bin journal_rate -- --calls 20000 --runs 3
//! ```
//!
//! Each simulated call makes the writes an answered inbound call makes: its row created
//! claimed ([`CallWrite::CreateClaimed`]), answered ([`CallWrite::Answered`]) and ended
//! ([`CallWrite::Finish`]), three writes. A producer task queues them as fast as the
//! queue takes them, waiting for room as a call's later writes do (the journal's capacity
//! is the node's default), and the clock stops when the last one is stored. Printed per
//! backend and run: writes/s, the calls/s that rate stores at three writes a call, and
//! the mean batch size; then the median of the runs.
//!
//! SQLite runs on a file in a fresh temporary directory (the node's default database,
//! WAL); PostgreSQL on a fresh database under `CALLSMITH_TEST_PG_ADMIN_URL` (left out,
//! with a line saying so, when it is not set).

use std::time::{Duration, Instant};

use anyhow::Context;
use callsmith_domain::Store;
use callsmith_domain::ids::{self, prefix};
use callsmith_domain::metrics::Metrics;
use callsmith_domain::store::communications::{CallFinish, CallWrite, Claim, CommunicationStatus};
use callsmith_domain::store::{NewAccount, create_postgres_database};
use callsmith_domain::usecases::{Direction, Parties, ScenarioRun, new_communication};
use callsmith_engine::journal::Journal;
use chrono::Utc;
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Calls per run (three writes each).
    #[arg(long, default_value_t = 20_000)]
    calls: usize,
    /// Runs per backend.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The journal's queue capacity (the node's `dialer.write_queue` default).
    #[arg(long, default_value_t = 4096)]
    capacity: usize,
    /// Backends to measure.
    #[arg(long, value_delimiter = ',', default_value = "sqlite,postgres")]
    backends: Vec<String>,
}

struct Figures {
    writes_per_s: f64,
    mean_batch: f64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    println!(
        "journal_rate: {} calls x 3 writes per run, {} runs, queue capacity {}",
        args.calls, args.runs, args.capacity
    );
    for backend in &args.backends {
        let dir = tempfile::tempdir()?;
        let url = match backend.as_str() {
            "sqlite" => format!("sqlite://{}", dir.path().join("callsmith.db").display()),
            "postgres" => match std::env::var("CALLSMITH_TEST_PG_ADMIN_URL") {
                Ok(admin) if !admin.is_empty() => {
                    create_postgres_database(&admin, "csbench_journal_").await?
                }
                _ => {
                    println!("postgres: skipped (CALLSMITH_TEST_PG_ADMIN_URL is not set)");
                    continue;
                }
            },
            other => anyhow::bail!("unknown backend {other:?} (sqlite, postgres)"),
        };
        let store = Store::connect(&url, callsmith_domain::store::default_pool_size(&url))
            .await
            .with_context(|| format!("connecting to {backend}"))?;
        store.migrate().await?;
        let (tenant, account) = owners(&store).await?;
        let mut rates = Vec::new();
        for run in 1..=args.runs {
            let f = run_once(&store, &tenant, &account, args.calls, args.capacity).await?;
            println!(
                "{backend:>8} run {run}: {:>8.0} writes/s = {:>7.0} calls/s at 3 writes a call, mean batch {:.0}",
                f.writes_per_s,
                f.writes_per_s / 3.0,
                f.mean_batch
            );
            rates.push(f.writes_per_s);
        }
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        println!(
            "{backend:>8} median: {median:>8.0} writes/s = {:>7.0} calls/s",
            median / 3.0
        );
    }
    Ok(())
}

/// A tenant and an account for the rows to belong to.
async fn owners(store: &Store) -> anyhow::Result<(String, String)> {
    let tenant = ids::new_sid(prefix::TENANT);
    store.tenant_create(&tenant, "journal bench").await?;
    let account = ids::new_sid(prefix::ACCOUNT);
    store
        .account_create(&NewAccount {
            sid: account.clone(),
            tenant_sid: tenant.clone(),
            name: "journal bench".into(),
            email: String::new(),
            external_id: String::new(),
            country: String::new(),
            region: String::new(),
            timezone: "UTC".into(),
            phone: String::new(),
            status: "active".into(),
        })
        .await?;
    Ok((tenant, account))
}

async fn run_once(
    store: &Store,
    tenant: &str,
    account: &str,
    calls: usize,
    capacity: usize,
) -> anyhow::Result<Figures> {
    let metrics = Metrics::new();
    let journal = Journal::start(store.clone(), capacity, &metrics);
    let claim = Claim {
        token: ids::new_sid("clm"),
        by: "journal_rate".into(),
        until: Utc::now() + chrono::Duration::hours(1),
    };
    let started = Instant::now();
    let mut sids = Vec::with_capacity(calls);
    for i in 0..calls {
        let new = new_communication(
            Parties {
                tenant_sid: tenant.into(),
                account_sid: account.into(),
                recipient: format!("+1555{i:07}"),
                from_number: "+15550000000".into(),
                trunk: Some("bench".into()),
                timezone: "UTC".into(),
            },
            ScenarioRun {
                scenario_sid: "scn_bench".into(),
                version: Some(1),
                draft_version: None,
            },
            Direction::Inbound,
        );
        let sid = new.sid.clone();
        sids.push(sid.clone());
        let at = Utc::now();
        journal
            .queue(CallWrite::CreateClaimed {
                new: Box::new(new),
                claim: Claim {
                    token: claim.token.clone(),
                    by: claim.by.clone(),
                    until: claim.until,
                },
                at,
            })
            .await;
        journal
            .queue(CallWrite::Answered {
                sid: sid.clone(),
                token: claim.token.clone(),
                call_id: format!("bench-{i}"),
                dialog: None,
                at,
            })
            .await;
        let mut finish = CallFinish::new(CommunicationStatus::Completed);
        finish.answered_at = Some(at);
        finish.duration = 1;
        journal
            .queue(CallWrite::Finish {
                sid,
                token: claim.token.clone(),
                finish: Box::new(finish),
                deliveries: None,
                at,
            })
            .await;
    }
    journal.flush().await;
    let elapsed = started.elapsed().max(Duration::from_micros(1));
    // Every call's row is stored and ended (checked on a sample: the first, last and
    // every hundredth).
    for sid in sids.iter().step_by(100).chain(sids.last()) {
        let row = store.communication_get(sid).await?;
        anyhow::ensure!(
            row.as_ref().map(|r| r.communication_status) == Some(CommunicationStatus::Completed),
            "{sid} was not stored as completed"
        );
    }
    let writes = (calls * 3) as f64;
    // The batch histogram also counts the final flush request as an entry.
    let entries = metric(&metrics, "callsmith_call_write_batch_sum");
    let batches = metric(&metrics, "callsmith_call_write_batch_count");
    Ok(Figures {
        writes_per_s: writes / elapsed.as_secs_f64(),
        mean_batch: entries / batches.max(1.0),
    })
}

fn metric(m: &Metrics, name: &str) -> f64 {
    m.render()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}
