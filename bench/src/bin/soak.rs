//! soak: the engine under a steady call load for a set time, checked for what leaks.
//!
//! SIPp calls the real binary (inbound, the `call_rate` bot: a TTS question and 12 s of
//! listening for DTMF, RTP both ways every 20 ms) at `--live / (--hold-ms / 1000)` calls a
//! second for `--seconds`, so about `--live` calls are up at once. Every `--sample-secs`
//! it reads the engine's RSS and open file descriptors from `/proc`, and its live calls and
//! tokio tasks from `/metrics`. It fails (exit 1) unless:
//! - every call SIPp placed (after two warm-up calls) succeeded and the engine stored each one, all final and
//!   answered;
//! - the engine received at least 99.999 % of the RTP packets of the calls (its histories:
//!   received ÷ (received + lost));
//! - RSS and open files stay flat while the load is steady: the fitted slope, projected
//!   over that window, grows RSS by less than 5 % (+ 2 MiB) and open files by fewer than 8;
//! - once the calls are over, open files and tokio tasks are back where they were before
//!   the load (at most 8 files and 8 tasks more): no task or timer outlives its call.
//!
//! ```sh
//! cargo build --release -p callsmith-cli -p callsmith-bench --bin callsmith --bin soak
//! CALLSMITH_BIN=target/release/callsmith target/release/soak --seconds 600 --live 100
//! ```
//! The test command runs `soak --seconds 60 --live 20` against the debug build.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use callsmith_bench::calls::{
    Sipp, SippJob, all_rows, count_open, history_totals, rate_scenario, wait_all_ended,
};
use callsmith_bench::{proc_stat, slope};
use callsmith_domain::communication::CommunicationStatus;
use callsmith_domain::store::communications::CommunicationFilter;
use callsmith_e2e::{
    AgentSpec, Engine, EngineOptions, create_agent, create_scenario, free_udp_port, provision,
    store_of,
};
use clap::Parser;

const NUMBER: &str = "+4930100800";

#[derive(Parser, Debug)]
#[command(about = "A steady call load for a set time; fails on leaks or lost RTP")]
struct Args {
    /// How long the load runs.
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// Calls up at once (the rate is live ÷ hold).
    #[arg(long, default_value_t = 200)]
    live: u64,
    /// How long SIPp holds each call.
    #[arg(long, default_value_t = 10_000)]
    hold_ms: u64,
    /// Time between samples.
    #[arg(long, default_value_t = 5)]
    sample_secs: u64,
}

/// One reading of the engine.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at_s: f64,
    rss_kib: u64,
    fds: u64,
    tasks: i64,
    live: i64,
}

fn open_fds(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// What each open file descriptor points at (`socket:[…]` numbers reduced to `socket`).
fn fd_targets(pid: u32) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|d| std::fs::read_link(d.path()).ok())
        .map(|p| {
            let t = p.display().to_string();
            if t.starts_with("socket:") {
                "socket".into()
            } else {
                t
            }
        })
        .collect();
    out.sort();
    out
}

/// A gauge's value in a Prometheus text page.
fn gauge(page: &str, name: &str) -> Option<i64> {
    page.lines().find_map(|l| {
        let v = l.strip_prefix(name)?.strip_prefix(' ')?;
        v.trim().parse::<f64>().ok().map(|f| f as i64)
    })
}

async fn sample(e: &Engine, pid: u32, t0: Instant) -> Result<Sample> {
    let page = e
        .client
        .get(format!("{}/metrics", e.base_url))
        .send()
        .await?
        .text()
        .await?;
    Ok(Sample {
        at_s: t0.elapsed().as_secs_f64(),
        rss_kib: proc_stat(pid).context("engine /proc stat")?.rss_kib,
        fds: open_fds(pid).context("engine /proc fd")?,
        tasks: gauge(&page, "callsmith_runtime_alive_tasks").context("tasks gauge")?,
        live: gauge(&page, "callsmith_live_calls").unwrap_or(0),
    })
}

/// The engine's refused inbound calls by reason (`callsmith_inbound_calls_refused`), as
/// `reason=count` pairs; empty when it refused none.
async fn refusals(e: &Engine) -> String {
    let page = match e.client.get(format!("{}/metrics", e.base_url)).send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(err) => return format!("(metrics unreadable: {err})"),
    };
    page.lines()
        .filter(|l| l.starts_with("callsmith_inbound_calls_refused_total{"))
        .map(|l| l.trim_start_matches("callsmith_inbound_calls_refused_total"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Slope per minute of `f` over the samples, and what it adds over their span.
fn trend(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> (f64, f64) {
    let points: Vec<(f64, f64)> = samples.iter().map(|s| (s.at_s, f(s))).collect();
    let per_s = slope(&points).unwrap_or(0.0);
    let span = match (samples.first(), samples.last()) {
        (Some(a), Some(b)) => b.at_s - a.at_s,
        _ => 0.0,
    };
    (per_s * 60.0, per_s * span)
}

async fn run(args: Args) -> Result<Vec<String>> {
    let mut failures = Vec::new();
    let rate = (args.live * 1000 / args.hold_ms.max(1)).max(1) as u32;
    let total = u64::from(rate) * args.seconds;
    let gateway = std::net::SocketAddr::from(([127, 0, 0, 1], free_udp_port()));
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), gateway)],
        rtp_ports: Some((10000, 31999)),
        dialer_toml: format!("max_live_calls = {}\n", args.live * 4 + 100),
        ..Default::default()
    })
    .await;
    let pid = e.pid().context("engine pid")?;
    let t = provision(&e, "soak", "carrier", NUMBER).await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &rate_scenario(), true).await;
    create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;
    let inbound = CommunicationFilter {
        direction: Some("inbound".into()),
        ..Default::default()
    };

    // Two calls before the load: the first calls after start touch code pages and files
    // nothing has touched yet, and on a machine whose page cache was just emptied by other
    // work that can stall the process long enough for it to shed a call as overloaded.
    // The soak measures the steady state, so the warm-up is not part of its counts.
    let mut warm = Sipp::spawn(
        &SippJob {
            scenario: "rate_uac_caller",
            port: free_udp_port(),
            target: Some(e.sip_addr),
            calls: 2,
            rate: Some(1),
            hold_ms: Some(1000),
            service: Some(NUMBER),
            budget_secs: 60,
            extra_args: &[],
        },
        1000,
    )?;
    if warm.wait(Duration::from_secs(90)).await != Some(true) {
        failures.push(format!("the warm-up calls failed: {:?}", warm.errors()));
    }
    wait_all_ended(&store, &t.account, &inbound, Duration::from_secs(30)).await?;
    let warm_rows = all_rows(&store, &t.account, &inbound).await?.len() as u64;

    let t0 = Instant::now();
    let before = sample(&e, pid, t0).await?;
    let files_before = fd_targets(pid);
    println!(
        "soak: {total} calls at {rate}/s held {} ms (about {} live) for {} s; engine before: RSS {} KiB, {} open files, {} tasks",
        args.hold_ms, args.live, args.seconds, before.rss_kib, before.fds, before.tasks
    );
    let mut sipp = Sipp::spawn(
        &SippJob {
            scenario: "rate_uac_caller",
            port: free_udp_port(),
            target: Some(e.sip_addr),
            calls: total,
            rate: Some(rate),
            hold_ms: Some(args.hold_ms),
            service: Some(NUMBER),
            budget_secs: args.seconds + args.hold_ms / 1000 + 120,
            extra_args: &[],
        },
        args.hold_ms,
    )?;
    let mut samples = vec![before];
    let deadline = Duration::from_secs(args.seconds + args.hold_ms / 1000 + 150);
    let exited = loop {
        let wait = Duration::from_secs(args.sample_secs);
        if let Some(ok) = sipp.wait(wait).await {
            break Some(ok);
        }
        let s = sample(&e, pid, t0).await?;
        println!(
            "  {:>6.0} s  live {:>5}  RSS {:>8} KiB  files {:>5}  tasks {:>6}",
            s.at_s, s.live, s.rss_kib, s.fds, s.tasks
        );
        samples.push(s);
        if t0.elapsed() > deadline {
            sipp.kill().await;
            break None;
        }
    };
    let ended = wait_all_ended(&store, &t.account, &inbound, Duration::from_secs(60)).await?;
    // Let the last calls' tasks and sockets go, then read the idle engine again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = sample(&e, pid, t0).await?;
    let mut opened = fd_targets(pid);
    for f in &files_before {
        if let Some(i) = opened.iter().position(|o| o == f) {
            opened.remove(i);
        }
    }

    // The calls.
    let st = sipp.stat();
    println!(
        "SIPp: {} placed, {} successful, {} failed, {} retransmissions",
        st.outgoing, st.successful, st.failed, st.retransmissions
    );
    if exited != Some(true) || st.failed > 0 || st.outgoing < total {
        failures.push(format!(
            "SIPp: {} of {total} calls placed, {} failed (exit {exited:?}); SIPp's errors: {:?}; the engine refused: {}",
            st.outgoing,
            st.failed,
            sipp.errors(),
            refusals(&e).await
        ));
    }
    let rows = all_rows(&store, &t.account, &inbound).await?;
    let open = count_open(&store, &t.account, &inbound).await?;
    let answered = rows
        .iter()
        .filter(|r| {
            r.communication_status == CommunicationStatus::Completed
                && r.call_status.as_deref() == Some("answered")
        })
        .count() as u64;
    println!(
        "engine: {} calls stored, {answered} completed and answered, {open} not final",
        rows.len()
    );
    if !ended || open > 0 {
        failures.push(format!(
            "{open} communications not final 60 s after the load"
        ));
    }
    let stored = (rows.len() as u64).saturating_sub(warm_rows);
    if stored != st.outgoing || answered != rows.len() as u64 {
        failures.push(format!(
            "SIPp placed {} calls; the engine stored {stored} of them and answered {answered} of {} (with {warm_rows} warm-up calls)",
            st.outgoing,
            rows.len()
        ));
    }

    // The media.
    let h = history_totals(&e, &t.account, &rows);
    let expected = h.packets_received as f64 + h.packets_lost.max(0) as f64;
    let delivered = if expected > 0.0 {
        h.packets_received as f64 / expected
    } else {
        0.0
    };
    println!(
        "RTP: {} packets received, {} lost over {} histories: {:.4} % delivered; {} sent",
        h.packets_received,
        h.packets_lost,
        h.calls,
        delivered * 100.0,
        h.packets_sent
    );
    if h.calls != rows.len() as u64 {
        failures.push(format!(
            "{} of {} calls have a history",
            h.calls,
            rows.len()
        ));
    }
    if delivered < 0.99999 {
        failures.push(format!(
            "RTP delivered {:.4} % < 99.999 %",
            delivered * 100.0
        ));
    }

    // Memory, files and tasks while the load was steady: from one hold time (plus a fifth
    // of the run) after the start to the end of the calls.
    let steady_from = args.hold_ms as f64 / 1000.0 + args.seconds as f64 / 5.0;
    let steady: Vec<Sample> = samples
        .iter()
        .copied()
        .filter(|s| s.at_s >= steady_from && s.at_s <= args.seconds as f64)
        .collect();
    if steady.len() < 3 {
        failures.push(format!(
            "only {} samples in the steady window",
            steady.len()
        ));
    } else {
        let mean_rss = steady.iter().map(|s| s.rss_kib as f64).sum::<f64>() / steady.len() as f64;
        let (rss_per_min, rss_growth) = trend(&steady, |s| s.rss_kib as f64);
        let (fds_per_min, fds_growth) = trend(&steady, |s| s.fds as f64);
        let (tasks_per_min, _) = trend(&steady, |s| s.tasks as f64);
        println!(
            "steady window {:.0}–{:.0} s ({} samples): RSS {:+.1} KiB/min (grows {:+.0} KiB over it, mean {:.0} KiB), open files {:+.2}/min, tasks {:+.1}/min",
            steady[0].at_s,
            steady[steady.len() - 1].at_s,
            steady.len(),
            rss_per_min,
            rss_growth,
            mean_rss,
            fds_per_min,
            tasks_per_min
        );
        if rss_growth > mean_rss * 0.05 + 2048.0 {
            failures.push(format!(
                "RSS grows {rss_growth:.0} KiB over the steady window ({rss_per_min:+.1} KiB/min)"
            ));
        }
        if fds_growth >= 8.0 {
            failures.push(format!(
                "open files grow {fds_growth:.1} over the steady window"
            ));
        }
    }
    println!(
        "engine after: RSS {} KiB, {} open files, {} tasks (before: {} KiB, {}, {})",
        after.rss_kib, after.fds, after.tasks, before.rss_kib, before.fds, before.tasks
    );
    if !opened.is_empty() {
        println!("open after the load, not before: {opened:?}");
    }
    if after.fds > before.fds + 8 {
        failures.push(format!(
            "open files {} after the load, {} before",
            after.fds, before.fds
        ));
    }
    if after.tasks > before.tasks + 8 {
        failures.push(format!(
            "tokio tasks {} after the load, {} before",
            after.tasks, before.tasks
        ));
    }
    let log = e.log();
    if log.contains("panicked") {
        failures.push("the engine panicked (see its log)".into());
    }
    if !failures.is_empty() {
        let path = std::env::temp_dir().join(format!("soak_{}.log", std::process::id()));
        let _ = std::fs::write(&path, &log);
        println!("engine log kept at {}", path.display());
    }
    Ok(failures)
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.seconds == 0 || args.live == 0 || args.hold_ms < 1000 {
        bail!("--seconds and --live must be positive and --hold-ms at least 1000");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let failures = rt.block_on(run(args))?;
    if failures.is_empty() {
        println!("soak: PASS");
        Ok(())
    } else {
        for f in &failures {
            println!("soak: FAIL {f}");
        }
        std::process::exit(1);
    }
}
