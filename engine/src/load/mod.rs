//! `callsmith load`: a speech-aware SIPp. It runs a throwaway node (an embedded SQLite
//! database in a temporary directory, the local speech node as `serve` starts it, no
//! control API: the run calls the use cases every front end calls, [`provision`]),
//! provisions a tenant, an account, a trunk to `--target`, a number, the scenario of
//! `--scenario` (validated and published, so a bad file gets the same SCN1xx errors as the
//! API gives) and an agent with `--cps` and `--cpl`, checks that every question that
//! listens for speech has a recognition node ([`recognition`]), dispatches `--calls` calls
//! to the target's user in one dispatch batch, shows their progress, writes `report.json`
//! and `report.html` (the figures of `GET /v1/communication/-/statistics?batch=…`, the
//! calls, the turns of their saved histories over time, and the run's [`outcome`]), prints
//! a summary, and fails when a threshold is not kept.

mod outcome;
mod provision;
mod recognition;

use std::{
    io::Write,
    net::SocketAddr,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use callsmith_domain::test_calls::TestCallGate;
use serde_json::{Value, json};

use crate::config::Config;
use outcome::{Outcome, Retransmissions, Thresholds};

/// Arguments of `callsmith load`.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {
    /// Who to call: `sip:USER@HOST:PORT`, USER a number (digits, optional `+`).
    #[arg(long)]
    pub target: String,
    /// Scenario JSON: the `constructor` (bricks and their outputs), or an object holding it
    /// under `constructor`.
    #[arg(long)]
    pub scenario: PathBuf,
    /// Calls to place.
    #[arg(long, default_value_t = 10)]
    pub calls: u64,
    /// New calls per second.
    #[arg(long, default_value_t = 1)]
    pub cps: u32,
    /// Calls live at once.
    #[arg(long, default_value_t = 10)]
    pub cpl: u32,
    /// Folder for report.json and report.html (created). Default `./callsmith-load-<time>`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Stop waiting for the calls this long after the last one could have started (calls
    /// still open then count as failed, and the run fails).
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
    /// Fail (exit 1) when more calls than this failed: not answered, not attempted,
    /// canceled, interrupted or still open. The default 0 fails on any failed call, as
    /// SIPp does.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_failed: u64,
    /// Fail (exit 1) when fewer calls than this were answered.
    #[arg(long, value_name = "N")]
    pub min_answered: Option<u64>,
    /// Fail (exit 1) when the 95th percentile of the caller's wait (end of the caller's
    /// speech or key → first RTP packet of the reply) is above this, or when no turn
    /// measured one.
    #[arg(long, value_name = "MS")]
    pub max_turn_p95_ms: Option<u64>,
}

/// `sip:USER@HOST:PORT` → (USER, HOST:PORT); the port defaults to 5060.
pub fn parse_target(target: &str) -> anyhow::Result<(String, SocketAddr)> {
    let rest = target
        .strip_prefix("sip:")
        .context("--target: a SIP URI, sip:USER@HOST:PORT")?;
    let (user, host) = rest
        .split_once('@')
        .context("--target: sip:USER@HOST:PORT needs a user")?;
    let digits = user.strip_prefix('+').unwrap_or(user);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        bail!("--target: the user {user:?} is not a number (digits, optional +)");
    }
    let host = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:5060")
    };
    let addr = host
        .parse::<SocketAddr>()
        .with_context(|| format!("--target: {host:?} is not IP:PORT"))?;
    Ok((user.to_string(), addr))
}

/// The throwaway node's configuration: `cfg` with its data, database and trunk replaced
/// (and a superuser token of its own, so the empty database gets no generated token file),
/// and its SIP UDP port picked by the system on the configured `sip.udp` address (loopback
/// when the configuration has none), so it runs beside a `serve` on the same machine and
/// reaches a target off the host when `sip.udp` is an address that can.
fn node_config(mut cfg: Config, data_dir: &Path, gateway: SocketAddr) -> Config {
    cfg.data_dir = data_dir.to_path_buf();
    cfg.database.url = None;
    cfg.bootstrap_superuser_token = Some(format!("cs_su_load_{}", uuid::Uuid::new_v4().simple()));
    let ip = cfg
        .sip
        .udp
        .map_or(std::net::IpAddr::from([127, 0, 0, 1]), |a| a.ip());
    cfg.sip.udp = Some(SocketAddr::new(ip, 0));
    cfg.sip.tcp = None;
    let mut trunk = callsmith_sip::TrunkConfig::new("load", gateway);
    trunk.number_format = callsmith_sip::NumberFormat::AsIs;
    cfg.sip.trunks = vec![trunk];
    cfg.sip.default_trunk = Some("load".into());
    cfg
}

/// Runs the load: prints the summary and the report's paths, and returns the report folder;
/// an error when the run could not be made or a threshold was not kept (the report is
/// written then too).
pub async fn run(cfg: Config, args: LoadArgs) -> anyhow::Result<PathBuf> {
    if args.calls == 0 || args.cps == 0 || args.cpl == 0 {
        bail!("--calls, --cps and --cpl must be at least 1");
    }
    let (user, gateway) = parse_target(&args.target)?;
    let text = std::fs::read_to_string(&args.scenario)
        .with_context(|| format!("reading {}", args.scenario.display()))?;
    let file: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", args.scenario.display()))?;
    let constructor = file.get("constructor").cloned().unwrap_or(file);
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "callsmith-load-{}",
            chrono::Utc::now().format("%Y%m%dT%H%M%S")
        ))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;

    let data = tempfile::tempdir().context("a temporary data directory")?;
    let mut cfg = node_config(cfg, data.path(), gateway);
    let node = crate::start(&mut cfg).await?;
    let ran = load(&node, &cfg, &args, &user, constructor, &out).await;
    // The node stops whatever the run came to: its calls drained, then the speech node.
    let crate::Node { store, running, .. } = node;
    running.stop().await;
    store.close().await;
    let passed = ran?;
    println!(
        "report: {} and {}",
        out.join("report.json").display(),
        out.join("report.html").display()
    );
    if !passed {
        bail!(
            "a threshold was not kept (see the summary above); report in {}",
            out.display()
        );
    }
    Ok(out)
}

/// Provisions the throwaway node, places the calls, waits for them, writes the report and
/// prints the summary; whether every threshold held.
async fn load(
    node: &crate::Node,
    cfg: &Config,
    args: &LoadArgs,
    user: &str,
    constructor: Value,
    out: &Path,
) -> anyhow::Result<bool> {
    let gate = TestCallGate::default();
    let ops = provision::ops(node, &gate);
    let stem = args
        .scenario
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "scenario".into());
    let run = provision::provision(&ops, &stem, &constructor, args.cps, args.cpl).await?;
    // Every question that listens for speech can be heard, before any call.
    recognition::ensure(node, cfg, &constructor).await?;
    let account_sid = run.account.sid.as_str();

    let started = chrono::Utc::now();
    let t0 = Instant::now();
    // The first dispatch starts the batch; every other one joins it.
    let mut batch: Option<String> = None;
    for _ in 0..args.calls {
        let b = provision::dispatch(&ops, &run, user, batch.as_deref()).await?;
        batch.get_or_insert(b);
    }
    let batch = batch.unwrap_or_default();
    // Poll the statistics until every call is final (or the deadline).
    let deadline = Duration::from_secs(args.calls / u64::from(args.cps) + args.timeout_secs);
    let mut stats;
    let mut timed_out = false;
    loop {
        stats = provision::statistics(&ops, account_sid, &batch).await?;
        let open = ["new", "queued", "dialing", "in_progress"]
            .iter()
            .map(|s| stats["communication_status"][*s].as_i64().unwrap_or(0))
            .sum::<i64>();
        progress(&stats, open, args.calls, t0.elapsed());
        if open == 0 {
            break;
        }
        if t0.elapsed() > deadline {
            timed_out = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!();
    let elapsed = t0.elapsed().as_secs_f64();
    let finished = chrono::Utc::now();
    let (rows, turns) = provision::calls_and_turns(&ops, account_sid, &batch).await?;
    let retransmissions = node.running.engine.as_ref().map(|e| {
        let c = e.rt.sip.retransmissions();
        Retransmissions {
            sent: c.sent,
            received: c.received,
        }
    });
    let outcome = Outcome::of(args.calls, &rows, retransmissions);
    let thresholds = Thresholds {
        max_failed: args.max_failed,
        min_answered: args.min_answered,
        max_turn_p95_ms: args.max_turn_p95_ms,
    };
    let checks = outcome::check(
        &thresholds,
        &outcome,
        &stats,
        timed_out.then_some(args.timeout_secs),
    );
    let passed = checks.iter().all(|c| c.passed);
    let report = json!({
        "target": args.target,
        "scenario": args.scenario.display().to_string(),
        "calls": args.calls,
        "cps": args.cps,
        "cpl": args.cpl,
        "started_at": started,
        "finished_at": finished,
        "timed_out": timed_out,
        "statistics": stats,
        "outcome": outcome,
        "calls_started_per_second": outcome::started_per_second(started, &rows),
        "thresholds": checks,
        "passed": passed,
        "communications": rows,
        "turns": turns,
        "batch_sid": batch,
    });
    std::fs::write(out.join("report.json"), serde_json::to_vec_pretty(&report)?)?;
    std::fs::write(
        out.join("report.html"),
        callsmith_domain::communication::report::html(&report),
    )?;
    print!(
        "{}",
        outcome::summary(&args.target, args.cps, elapsed, &outcome, &stats, &checks)
    );
    println!(
        "  {:<16}{}",
        "result",
        if passed { "PASSED" } else { "FAILED" }
    );
    Ok(passed)
}

/// One line of progress on stderr, redrawn in place.
fn progress(stats: &Value, open: i64, calls: u64, elapsed: Duration) {
    let done = stats["total"].as_i64().unwrap_or(0) - open;
    let width = 30usize;
    let filled = (done.max(0) as usize * width) / (calls.max(1) as usize);
    let live = stats["communication_status"]["dialing"]
        .as_i64()
        .unwrap_or(0)
        + stats["communication_status"]["in_progress"]
            .as_i64()
            .unwrap_or(0);
    // Answered calls that are still live are not done; every done call that was not
    // answered (whatever its SIP code) failed.
    let answered = stats["answered"].as_i64().unwrap_or(0);
    let answered_done = answered
        - stats["communication_status"]["in_progress"]
            .as_i64()
            .unwrap_or(0);
    let failed = (done - answered_done).max(0);
    eprint!(
        "\r[{}{}] {done}/{calls} done, {live} live, {answered} answered, {failed} failed  {:.0} s ",
        "#".repeat(filled.min(width)),
        ".".repeat(width - filled.min(width)),
        elapsed.as_secs_f64()
    );
    let _ = std::io::stderr().flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_listens_on_the_configured_sip_address() {
        let dir = tempfile::tempdir().unwrap();
        let gateway: SocketAddr = "127.0.0.1:5070".parse().unwrap();
        let mut cfg = Config::default();
        cfg.sip.udp = Some("127.0.0.2:5080".parse().unwrap());
        let node = node_config(cfg, dir.path(), gateway);
        assert_eq!(node.sip.udp, Some("127.0.0.2:0".parse().unwrap()));
        let mut cfg = Config::default();
        cfg.sip.udp = None;
        let node = node_config(cfg, dir.path(), gateway);
        assert_eq!(node.sip.udp, Some("127.0.0.1:0".parse().unwrap()));
        assert_eq!(node.sip.trunks[0].name, "load");
        assert_eq!(node.sip.default_trunk.as_deref(), Some("load"));
    }

    #[test]
    fn targets_are_sip_uris_with_a_number() {
        assert_eq!(
            parse_target("sip:100@127.0.0.1:5070").unwrap(),
            ("100".into(), "127.0.0.1:5070".parse().unwrap())
        );
        assert_eq!(
            parse_target("sip:+4930@127.0.0.1").unwrap().1,
            "127.0.0.1:5060".parse::<std::net::SocketAddr>().unwrap()
        );
        for bad in [
            "100@127.0.0.1",
            "sip:127.0.0.1:5060",
            "sip:bob@127.0.0.1",
            "sip:1@host:x",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
