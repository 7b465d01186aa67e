//! What SRTP costs the engine: the same inbound call load with plain RTP and with SRTP,
//! alternated in one sitting, on loopback.
//!
//! ```text
//! cargo build --release -p callsmith-bench -p callsmith-cli --bin srtp_cost --bin callsmith
//! CALLSMITH_BIN=$CARGO_TARGET_DIR/release/callsmith \
//!   $CARGO_TARGET_DIR/release/srtp_cost --rate 300 --seconds 8 --hold-ms 3400 --rounds 2
//! ```
//!
//! SIPp (3.6) speaks no SRTP, so the caller is a second `callsmith` node: its dialer places
//! `rate × seconds` calls at `--rate` calls/s through a trunk to the measured engine, and
//! its bot plays a `--hold-ms` tone and hangs up. The measured engine answers as in
//! `call_rate`'s inbound steps (the question "Press one to confirm." by TTS, listening 12 s
//! for DTMF, so the caller always hangs up first), with RTP both ways for the whole call.
//! Both nodes' trunks have `srtp = "off"` in a plain step and `srtp = "required"` in an
//! SRTP step (AES_CM_128_HMAC_SHA1_80, the first suite offered), and nothing else differs;
//! the steps alternate plain, SRTP, plain, SRTP, … (`--rounds` pairs), each with two
//! fresh nodes (SQLite), a warm-up, and 2 s of the measured engine idle.
//!
//! Per step, for the measured engine only (the caller's CPU is noted beside it):
//! - **CPU ms per call**: utime + stime (`/proc/<pid>/stat`) from the first scheduled start
//!   until every inbound call is stored as ended, less its idle CPU over the same time,
//!   divided by the calls answered.
//! - **plateau**: with calls held `hold` and arriving for `seconds > hold + 2 s`, from
//!   `hold + 1 s` after the first start until the last start about `rate × hold` calls are
//!   up: the CPU there as % of a core, and per live call.
//! - **RSS KiB per live call**: (peak RSS − RSS before the load) / the most calls up at
//!   once (from the stored `answered_at` and `ended_at` of every call).
//!
//! At the end: the median of each figure per mode and SRTP's ratio to plain RTP. Bounded:
//! each step by its own time budget, the whole run by `--timeout-secs`; both nodes of a step
//! are killed when it ends.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use callsmith_bench::calls::{Sampler, all_rows, wait_all_ended};
use callsmith_bench::{CLK_TCK, percentile, proc_stat};
use callsmith_domain::communication::CommunicationStatus;
use callsmith_domain::store::CommunicationRecord;
use callsmith_domain::store::communications::CommunicationFilter;
use callsmith_e2e::{
    AgentSpec, Engine, EngineOptions, Tenancy, create_agent, create_scenario, free_udp_port,
    provision, store_of, tone_wav, upload_audio,
};
use chrono::{DateTime, Utc};
use clap::Parser;
use futures::StreamExt;
use serde_json::{Value, json};

/// The number the caller dials on the measured engine.
const NUMBER: &str = "+4930100900";
/// The caller's own number.
const CALLER_NUMBER: &str = "+4930100901";
/// RTP ports of the measured engine and of the caller (each below Linux's ephemeral range).
const RTP_MEASURED: (u16, u16) = (10000, 20999);
const RTP_CALLER: (u16, u16) = (21000, 31999);

#[derive(Parser, Debug)]
#[command(about = "SRTP against plain RTP: the measured engine's CPU and RSS per call")]
struct Args {
    /// New calls per second.
    #[arg(long, default_value_t = 300)]
    rate: u32,
    /// Seconds of call arrivals per step.
    #[arg(long, default_value_t = 8)]
    seconds: u32,
    /// How long the caller keeps each call up after the answer, ms.
    #[arg(long, default_value_t = 3400)]
    hold_ms: u64,
    /// Pairs of steps (plain, then SRTP).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=5))]
    rounds: u32,
    /// Warm-up calls before each measured step.
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    /// Give up after this many seconds in all.
    #[arg(long, default_value_t = 1200)]
    timeout_secs: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Plain,
    Srtp,
}

impl Mode {
    fn policy(self) -> &'static str {
        match self {
            Mode::Plain => "off",
            Mode::Srtp => "required",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain RTP",
            Mode::Srtp => "SRTP",
        }
    }
}

/// The measured figures of one step.
#[derive(Debug, Clone)]
struct Step {
    mode: Mode,
    load: f64,
    placed: u64,
    answered: u64,
    cpu_ms_per_call: f64,
    /// Plateau: live calls, % of a core, % of a core per live call.
    plateau: Option<(u64, f64, f64)>,
    peak_live: u64,
    rss_kib_per_live: f64,
    caller_core: f64,
    /// Answered → INVITE handled at the measured engine (`started_at` → `answered_at`), ms.
    setup_p50: f64,
    setup_p99: f64,
    srtp_dropped: u64,
    packets_received: u64,
    /// Calls the caller placed that were not answered, by how they ended.
    unanswered: std::collections::BTreeMap<String, u64>,
}

fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

fn secs(a: DateTime<Utc>, b: DateTime<Utc>) -> f64 {
    (b - a).num_microseconds().unwrap_or(0) as f64 / 1e6
}

/// The caller's scenario: play the hold tone (an uploaded audio file), then hang up.
fn caller_scenario(audio_id: &str) -> Value {
    json!({"name": "hold", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {
            "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""}},
            "outputs": [{"type": "next", "description": "", "next": "hold"}]}]},
        "audio_file": {"v1": [{"id": "hold", "description": "", "properties": {"url": audio_id},
            "outputs": [{"type": "next", "description": "", "next": "bye"}]}]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

/// The most calls up at once among `rows` (answered → ended).
fn peak_live(rows: &[CommunicationRecord]) -> u64 {
    let mut edges: Vec<(DateTime<Utc>, i64)> = rows
        .iter()
        .filter_map(|r| Some([(r.answered_at?, 1), (r.ended_at?, -1)]))
        .flatten()
        .collect();
    edges.sort();
    let (mut live, mut peak) = (0i64, 0i64);
    for (_, d) in edges {
        live += d;
        peak = peak.max(live);
    }
    peak as u64
}

/// CPU of a process over 2 s, as a fraction of a core.
async fn idle_core(pid: u32) -> Result<f64> {
    let a = proc_stat(pid).context("engine /proc")?;
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let b = proc_stat(pid).context("engine /proc")?;
    Ok((b.cpu_ticks - a.cpu_ticks) as f64 / CLK_TCK / t0.elapsed().as_secs_f64())
}

fn engine_options(mode: Mode, gateway: SocketAddr, rtp: (u16, u16), lag_ms: u32) -> EngineOptions {
    EngineOptions {
        trunks: vec![("carrier".into(), gateway)],
        trunk_toml: format!("srtp = \"{}\"\n", mode.policy()),
        dialer_toml: format!("max_live_calls = 5000\nmax_timer_lag_ms = {lag_ms}\n"),
        rtp_ports: Some(rtp),
        ..Default::default()
    }
}

async fn step(args: &Args, mode: Mode) -> Result<Step> {
    let load = loadavg();
    // The measured engine: its trunk matches the caller's address (127.0.0.1) inbound.
    // The production default of the overload check, as in call_rate.
    let gateway = SocketAddr::from(([127, 0, 0, 1], free_udp_port()));
    let mut measured = Engine::start(engine_options(mode, gateway, RTP_MEASURED, 100)).await;
    let mut caller = Engine::start(engine_options(mode, measured.sip_addr, RTP_CALLER, 1000)).await;
    let r = run_step(args, mode, load, &measured, &caller).await;
    if r.is_err() {
        let path = std::env::temp_dir().join(format!("srtp_cost_{}.log", std::process::id()));
        let _ = std::fs::write(&path, measured.log() + "\n--- caller ---\n" + &caller.log());
        eprintln!("logs of the failed step: {}", path.display());
    }
    measured.kill().await;
    caller.kill().await;
    r
}

async fn run_step(
    args: &Args,
    mode: Mode,
    load: f64,
    measured: &Engine,
    caller: &Engine,
) -> Result<Step> {
    let pid = measured.pid().context("engine pid")?;
    let caller_pid = caller.pid().context("caller pid")?;
    let total = u64::from(args.rate) * u64::from(args.seconds);
    let budget = Duration::from_secs(u64::from(args.seconds) + args.hold_ms / 1000 + 60);

    let tm: Tenancy = provision(measured, "measured", "carrier", NUMBER).await;
    let store_m = store_of(measured, None).await;
    let scn = create_scenario(
        &store_m,
        &tm,
        &callsmith_bench::calls::rate_scenario(),
        true,
    )
    .await;
    create_agent(&store_m, &tm, &AgentSpec::new(scn, tm.number_id.clone())).await;

    let tc: Tenancy = provision(caller, "caller", "carrier", CALLER_NUMBER).await;
    let store_c = store_of(caller, None).await;
    let audio = upload_audio(caller, &tc.account, tone_wav(args.hold_ms as f32 / 1000.0)).await;
    let audio_id = audio["id"].as_str().context("audio id")?;
    let scn = create_scenario(&store_c, &tc, &caller_scenario(audio_id), true).await;
    let spec = |cps: u32| AgentSpec {
        cps: i64::from(cps),
        cpl: 5000,
        ..AgentSpec::new(scn.clone(), tc.number_id.clone())
    };
    let warm_agent = create_agent(&store_c, &tc, &spec(0)).await;
    let load_agent = create_agent(&store_c, &tc, &spec(args.rate)).await;
    let inbound = CommunicationFilter {
        direction: Some("inbound".into()),
        ..Default::default()
    };
    let of_agent = |a: &str| CommunicationFilter {
        agent_sid: Some(a.to_string()),
        ..Default::default()
    };

    for _ in 0..args.warmup {
        caller
            .dispatch(&tc, json!({"recipient": NUMBER, "agent_sid": warm_agent}))
            .await;
    }
    if !wait_all_ended(
        &store_c,
        &tc.account,
        &of_agent(&warm_agent),
        Duration::from_secs(60),
    )
    .await?
        || !wait_all_ended(&store_m, &tm.account, &inbound, Duration::from_secs(30)).await?
    {
        bail!("warm-up calls did not end");
    }
    let warm_rows = all_rows(&store_m, &tm.account, &inbound).await?;
    let warm_answered = warm_rows.iter().filter(|r| r.answered_at.is_some()).count() as u64;
    if warm_answered < args.warmup {
        bail!(
            "{warm_answered} of {} warm-up calls were answered ({})",
            args.warmup,
            warm_rows
                .iter()
                .map(|r| format!("{:?}/{:?}", r.sip_code, r.error))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let idle = idle_core(pid).await?;

    // Every communication dispatched for one moment ahead, so dialling starts after the
    // requests are done.
    let at = Utc::now() + chrono::Duration::milliseconds(2000 + (total as i64 * 1000) / 400);
    let at_s = at.to_rfc3339();
    let account = tc.account.as_str();
    let refused = futures::stream::iter(0..total)
        .map(|_| {
            let body = json!({"recipient": NUMBER, "agent_sid": load_agent, "scheduled_at": at_s});
            async move {
                caller
                    .post("/v1/communication/-/dispatch", Some(account), body)
                    .await
                    .0
            }
        })
        .buffer_unordered(8)
        .filter(|s| std::future::ready(*s != 201))
        .count()
        .await;
    if refused > 0 {
        bail!("{refused} of {total} dispatch requests were refused");
    }
    let lead = secs(Utc::now(), at);
    if lead > 0.1 {
        tokio::time::sleep(Duration::from_secs_f64(lead - 0.1)).await;
    }
    let sampler = Sampler::start(pid);
    let caller_before = proc_stat(caller_pid).context("caller /proc")?;
    let before = proc_stat(pid).context("engine /proc")?;
    let t0 = Instant::now();
    let ended = wait_all_ended(&store_c, &tc.account, &of_agent(&load_agent), budget).await?
        && wait_all_ended(&store_m, &tm.account, &inbound, Duration::from_secs(30)).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = proc_stat(pid).context("engine /proc")?;
    let caller_after = proc_stat(caller_pid).context("caller /proc")?;
    let wall = t0.elapsed().as_secs_f64();
    if !ended {
        bail!("calls still open {} s after the load", budget.as_secs());
    }

    let warm: std::collections::BTreeSet<&str> = warm_rows.iter().map(|r| r.sid.as_str()).collect();
    let rows: Vec<CommunicationRecord> = all_rows(&store_m, &tm.account, &inbound)
        .await?
        .into_iter()
        .filter(|r| !warm.contains(r.sid.as_str()))
        .collect();
    let answered = rows
        .iter()
        .filter(|r| {
            r.communication_status == CommunicationStatus::Completed
                && r.call_status.as_deref() == Some("answered")
        })
        .count() as u64;
    let caller_rows = all_rows(&store_c, &tc.account, &of_agent(&load_agent)).await?;
    let placed = caller_rows
        .iter()
        .filter(|r| r.started_at.is_some())
        .count() as u64;
    let mut unanswered = std::collections::BTreeMap::new();
    for r in caller_rows.iter().filter(|r| r.answered_at.is_none()) {
        let k = format!(
            "{} {}: {}",
            r.call_status.as_deref().unwrap_or("-"),
            r.sip_code.map(|c| c.to_string()).unwrap_or_default(),
            r.error.as_deref().unwrap_or("no error recorded")
        );
        *unanswered.entry(k).or_default() += 1;
    }
    let cpu = (after.cpu_ticks - before.cpu_ticks) as f64 / CLK_TCK - idle * wall;
    let peak = peak_live(&rows);
    let rss_peak = sampler.peak_rss().max(after.rss_kib);

    // The plateau: from hold + 1 s after the first start until the last start.
    let hold = Duration::from_millis(args.hold_ms);
    let plateau = sampler
        .window(
            t0 + hold + Duration::from_secs(1),
            t0 + Duration::from_secs(u64::from(args.seconds)),
        )
        .map(|(s, c, _)| {
            let live = u64::from(args.rate) * args.hold_ms / 1000;
            let core = c / s * 100.0;
            (live, core, core / live.max(1) as f64)
        });
    let mut setup: Vec<f64> = rows
        .iter()
        .filter_map(|r| Some(secs(r.started_at?, r.answered_at?) * 1000.0))
        .collect();
    setup.sort_by(f64::total_cmp);

    // What the calls' histories counted: packets received, and SRTP packets dropped.
    let (mut srtp_dropped, mut packets_received) = (0, 0);
    for r in rows.iter().filter(|r| r.has_history) {
        let path = measured.object_path(
            &callsmith_domain::objects::CallObjects::new(&tm.account, &r.sid).history(),
        );
        if let Some(h) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        {
            srtp_dropped += h["media"]["srtp_dropped"].as_u64().unwrap_or(0);
            packets_received += h["media"]["packets_received"].as_u64().unwrap_or(0);
        }
    }

    Ok(Step {
        mode,
        load,
        placed,
        answered,
        cpu_ms_per_call: cpu * 1000.0 / answered.max(1) as f64,
        plateau,
        peak_live: peak,
        rss_kib_per_live: rss_peak.saturating_sub(before.rss_kib) as f64 / peak.max(1) as f64,
        caller_core: (caller_after.cpu_ticks - caller_before.cpu_ticks) as f64 / CLK_TCK / wall
            * 100.0,
        setup_p50: if setup.is_empty() {
            0.0
        } else {
            percentile(&setup, 50.0)
        },
        setup_p99: if setup.is_empty() {
            0.0
        } else {
            percentile(&setup, 99.0)
        },
        srtp_dropped,
        packets_received,
        unanswered,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One figure of a step, when the step has it.
type Figure = dyn Fn(&Step) -> Option<f64>;

fn print_report(args: &Args, steps: &[Step]) {
    println!(
        "\n{} calls/s for {} s, calls held {} ms (about {} up at once), {} rounds\n",
        args.rate,
        args.seconds,
        args.hold_ms,
        u64::from(args.rate) * args.hold_ms / 1000,
        args.rounds
    );
    println!(
        "| step | media | placed | answered | set-up p50 / p99 ms | CPU ms/call | plateau: live, % core, % core/live | peak live | RSS KiB/live | caller % core | RTP rx/call | srtp dropped | load |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, s) in steps.iter().enumerate() {
        let plateau = s
            .plateau
            .map_or("-".to_string(), |(l, c, p)| format!("{l}, {c:.1}, {p:.4}"));
        println!(
            "| {} | {} | {} | {} | {:.2} / {:.2} | {:.3} | {plateau} | {} | {:.1} | {:.1} | {:.0} | {} | {:.2} |",
            i + 1,
            s.mode.name(),
            s.placed,
            s.answered,
            s.setup_p50,
            s.setup_p99,
            s.cpu_ms_per_call,
            s.peak_live,
            s.rss_kib_per_live,
            s.caller_core,
            s.packets_received as f64 / s.answered.max(1) as f64,
            s.srtp_dropped,
            s.load
        );
    }
    for (i, s) in steps.iter().enumerate() {
        for (why, n) in &s.unanswered {
            println!("\nstep {}: {n} calls not answered: {why}", i + 1);
        }
    }
    let of =
        |m: Mode, f: &Figure| median(steps.iter().filter(|s| s.mode == m).filter_map(f).collect());
    let figures: [(&str, &Figure); 3] = [
        ("CPU ms per call", &|s| Some(s.cpu_ms_per_call)),
        ("% of a core per live call (plateau)", &|s| {
            s.plateau.map(|p| p.2)
        }),
        ("RSS KiB per live call", &|s| Some(s.rss_kib_per_live)),
    ];
    println!("\n| median | plain RTP | SRTP | SRTP / plain |\n|---|---|---|---|");
    for (name, f) in figures {
        let (p, s) = (of(Mode::Plain, f), of(Mode::Srtp, f));
        println!("| {name} | {p:.4} | {s:.4} | {:.2} |", s / p);
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let deadline = Duration::from_secs(args.timeout_secs);
        let run = async {
            let mut steps = Vec::new();
            for round in 0..args.rounds {
                for mode in [Mode::Plain, Mode::Srtp] {
                    eprintln!("round {} of {}: {}", round + 1, args.rounds, mode.name());
                    let s = step(&args, mode)
                        .await
                        .with_context(|| format!("round {}, {}", round + 1, mode.name()))?;
                    eprintln!("{s:?}");
                    steps.push(s);
                }
            }
            anyhow::Ok(steps)
        };
        let steps = tokio::time::timeout(deadline, run)
            .await
            .context("the run took longer than --timeout-secs")??;
        print_report(&args, &steps);
        Ok(())
    })
}
