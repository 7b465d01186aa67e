//! Call load through the real `callsmith` binary: N communications of one agent (cps, cpl)
//! dispatched to a SIPp UAS callee that answers a question ("Press one to confirm.") by
//! DTMF (SIP INFO, default) or by speech ("yes", recognised by the real STT node); the
//! engine replies with a TTS prompt and ends the call.
//!
//! Prints calls/s achieved against cps, peak concurrency against cpl, call setup (INVITE
//! sent → answered) and turn latency (answer available → first RTP packet of the reply,
//! as the engine records it per turn in the call history and on /metrics) p50/p99, engine
//! CPU (from /proc/<pid>/stat) per live call while the live calls hold steady and per
//! call-second over the whole load (setup and end included), and memory per live call
//! (RSS growth / peak live calls). Writes SVG plots (concurrency and latency over time) into bench/reports/.
//! Loopback only; bounded in calls and time.
//!
//! ```text
//! cargo build --release -p callsmith-bench --bin call_load -p callsmith-cli
//! CALLSMITH_BIN=$CARGO_TARGET_DIR/release/callsmith \
//!   $CARGO_TARGET_DIR/release/call_load --calls 200 --cps 10 --cpl 60
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use callsmith_bench::{Limit, Series, percentile, svg_plot};
use callsmith_domain::store::CommunicationRecord;
use callsmith_domain::store::communications::CommunicationFilter;
use callsmith_e2e::*;
use chrono::{DateTime, Utc};
use clap::{Parser, ValueEnum};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Answer {
    /// The callee presses 1 (SIP INFO) 2.5 s after answering.
    Dtmf,
    /// The callee says "yes" (flite, µ-law) 3.5 s after answering; the real STT node
    /// recognises it (slow on 2 cores: keep N, cps and cpl small).
    Speech,
}

#[derive(Parser, Debug)]
#[command(about = "Call load: N communications through the callsmith binary to SIPp callees")]
struct Args {
    /// Communications to dispatch (at most 2000).
    #[arg(long, default_value_t = 200)]
    calls: usize,
    /// The agent's cps (call starts per second).
    #[arg(long, default_value_t = 10)]
    cps: i64,
    /// The agent's cpl (live calls at once; at most 500: the engine gets two RTP/RTCP port
    /// pairs per live call, from 40000 up).
    #[arg(long, default_value_t = 60)]
    cpl: i64,
    /// How the callee answers the question.
    #[arg(long, value_enum, default_value_t = Answer::Dtmf)]
    answer: Answer,
    /// Where the SVG plots go (default: bench/reports of the workspace).
    #[arg(long)]
    report_dir: Option<std::path::PathBuf>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Warm-up calls (another agent, same scenario) before the measured load: they fill
    /// the TTS cache and open the database connections, so neither the first reply's
    /// synthesis nor one-off allocations count as per-call cost.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// How long the DTMF callee waits after answering before it presses 1 (the call's
    /// length is this plus the reply, about 1.5 s).
    #[arg(long, default_value_t = 2500)]
    hold_ms: u64,
    /// Name of this run in the plot file names (default: the answer mode).
    #[arg(long)]
    tag: Option<String>,
}

/// One /proc sample of the engine.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: DateTime<Utc>,
    cpu_ticks: u64,
    rss_kib: u64,
}

/// One measured turn.
#[derive(Debug, Clone, Copy)]
struct TurnSample {
    /// Wall time of the reply's first RTP packet.
    at: DateTime<Utc>,
    total_ms: f64,
    engine_ms: f64,
}

const CLK_TCK: f64 = 100.0;

fn secs(a: DateTime<Utc>, b: DateTime<Utc>) -> f64 {
    (b - a).num_microseconds().unwrap_or(0) as f64 / 1e6
}

/// The engine's turn latency histogram so far: (count, sum in seconds).
async fn turn_count(e: &Engine) -> (f64, f64) {
    let (_, m) = e.get("/metrics", None).await;
    let m = m.as_str().unwrap_or_default().to_string();
    let get = |name: &str| {
        m.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (
        get("callsmith_turn_latency_seconds_count"),
        get("callsmith_turn_latency_seconds_sum"),
    )
}

fn p(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    percentile(v, q)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.calls == 0 || args.calls > 2000 {
        bail!("--calls: 1 to 2000");
    }
    if !(1..=500).contains(&args.cpl) || args.cps < 1 {
        bail!("--cpl: 1 to 500; --cps: at least 1");
    }
    let report_dir = args
        .report_dir
        .clone()
        .unwrap_or_else(|| workspace().join("bench").join("reports"));
    std::fs::create_dir_all(&report_dir)?;
    let mode = match args.answer {
        Answer::Dtmf => "dtmf",
        Answer::Speech => "speech",
    };

    // The callee, the recognition node (speech only) and the engine.
    let total = (args.calls + args.warmup).to_string();
    let (stt, mut callee) = match args.answer {
        Answer::Dtmf => (
            None,
            Sipp::spawn(
                "uas_answer_dtmf.xml",
                None,
                None,
                &["-m", &total, "-rtp_echo", "-d", &args.hold_ms.to_string()],
            ),
        ),
        Answer::Speech => {
            let node = SttNode::start().await;
            let dir = tempfile::tempdir()?;
            ulaw_speech(dir.path(), "answer.ulaw", "yes", 3500);
            (
                Some(node),
                Sipp::spawn_in(dir, "dialer_uas_speak.xml", None, None, &["-m", &total]),
            )
        }
    };
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        stt_url: stt.as_ref().map(|n| n.url.clone()),
        dialer_toml: format!("max_live_calls = {}\n", args.cpl + 10),
        rtp_ports: Some((40000, 40000 + 4 * (args.cpl as u16 + 10))),
        ..Default::default()
    })
    .await;
    let pid = e.pid().context("engine pid")?;
    let t = provision(&e, "load", "carrier", "+4930100900").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &reply_scenario(mode), true).await;
    let spec = |cps, cpl| AgentSpec {
        cps,
        cpl,
        ..AgentSpec::new(scn.clone(), t.number_id.clone())
    };
    let agent = create_agent(&store, &t, &spec(args.cps, args.cpl)).await;

    // Warm-up.
    if args.warmup > 0 {
        let warm = create_agent(&store, &t, &spec(0, 0)).await;
        let mut ids = Vec::new();
        for i in 0..args.warmup {
            let c = e
                .dispatch(
                    &t,
                    json!({"recipient": format!("+1666{i:07}"), "agent_sid": warm}),
                )
                .await;
            ids.push(c["id"].as_str().unwrap_or_default().to_string());
        }
        for id in ids {
            e.wait_communication(&t.account, &id, Duration::from_secs(120))
                .await;
        }
        eprintln!("{} warm-up calls done", args.warmup);
    }

    // Idle engine: CPU over 2 s before the load, and the turn metric so far (warm-up).
    let idle0 = proc_usage(pid).context("/proc")?;
    let idle_t0 = Utc::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle1 = proc_usage(pid).context("/proc")?;
    let idle_core = (idle1.0 - idle0.0) as f64 / CLK_TCK / secs(idle_t0, Utc::now());
    let turns_before = turn_count(&e).await;

    // Dispatch everything for one moment a little ahead, so dialling starts after the
    // dispatch requests are done (they are not part of the measured load).
    let at = Utc::now() + chrono::Duration::milliseconds(3000 + 15 * args.calls as i64);
    for i in 0..args.calls {
        e.dispatch(&t, json!({"recipient": format!("+1555{i:07}"), "agent_sid": agent, "scheduled_at": at.to_rfc3339()}))
        .await;
    }
    eprintln!(
        "dispatched {} communications for {at}; cps {} cpl {} answer {mode}",
        args.calls, args.cps, args.cpl
    );

    // Sample the engine's CPU and memory every 100 ms until the load is over.
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let sampling = {
        let samples = samples.clone();
        tokio::spawn(async move {
            loop {
                if let Some((cpu_ticks, rss_kib)) = proc_usage(pid) {
                    samples.lock().expect("samples").push(Sample {
                        at: Utc::now(),
                        cpu_ticks,
                        rss_kib,
                    });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    // Wait until every communication ended.
    let filter = CommunicationFilter {
        agent_sid: Some(agent.clone()),
        ..Default::default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout_secs);
    let rows: Vec<CommunicationRecord> = loop {
        let (rows, _) = store
            .communication_list(&t.account, &filter, 5000, 0)
            .await?;
        let done = rows.iter().filter(|r| r.ended_at.is_some()).count();
        if done == args.calls {
            break rows;
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "{done}/{} communications ended after {} s\n{}",
                args.calls,
                args.timeout_secs,
                e.log()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    sampling.abort();
    let samples = samples.lock().expect("samples").clone();
    let callee_ok = callee.success(Duration::from_secs(30)).await;

    // Outcomes.
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for r in &rows {
        let goal = r.goal_list().last().cloned().unwrap_or_default();
        *outcomes
            .entry(format!("{}/{goal}", r.communication_status))
            .or_default() += 1;
    }
    let mut starts: Vec<DateTime<Utc>> = rows.iter().filter_map(|r| r.started_at).collect();
    starts.sort();
    let first = *starts.first().context("no call started")?;
    let last_start = *starts.last().context("no call started")?;
    let last_end = rows
        .iter()
        .filter_map(|r| r.ended_at)
        .max()
        .context("no call ended")?;

    // Start rate: over the whole run and the most in any one-second window.
    let rate = if starts.len() > 1 {
        (starts.len() - 1) as f64 / secs(first, last_start)
    } else {
        f64::NAN
    };
    let mut max_in_second = 0;
    for (i, s) in starts.iter().enumerate() {
        let n = starts[i..]
            .iter()
            .take_while(|x| secs(*s, **x) < 1.0)
            .count();
        max_in_second = max_in_second.max(n);
    }

    // Concurrency (INVITE sent → end written) over time.
    let mut edges: Vec<(DateTime<Utc>, i64)> = Vec::new();
    for r in &rows {
        if let (Some(s), Some(x)) = (r.started_at, r.ended_at) {
            edges.push((s, 1));
            edges.push((x, -1));
        }
    }
    edges.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut live, mut peak, mut call_secs) = (0i64, 0i64, 0.0);
    let mut conc_points = vec![(0.0, 0.0)];
    let mut prev = first;
    for (at, d) in &edges {
        call_secs += live as f64 * secs(prev, *at);
        prev = *at;
        conc_points.push((secs(first, *at), live as f64));
        live += d;
        peak = peak.max(live);
        conc_points.push((secs(first, *at), live as f64));
    }
    let mean_live = call_secs / secs(first, last_end);
    // The longest stretch in which no call started or ended: the live calls held steady.
    let mut steady: Option<(DateTime<Utc>, DateTime<Utc>, i64)> = None;
    let mut live_now = 0i64;
    for w in edges.windows(2) {
        live_now += w[0].1;
        let longer = steady.is_none_or(|(a, b, _)| secs(w[0].0, w[1].0) > secs(a, b));
        if live_now > 0 && longer {
            steady = Some((w[0].0, w[1].0, live_now));
        }
    }

    // Call setup: INVITE sent → answered.
    let mut setup: Vec<f64> = rows
        .iter()
        .filter_map(|r| Some(secs(r.started_at?, r.answered_at?) * 1000.0))
        .collect();
    let setup_points: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| {
            Some((
                secs(first, r.started_at?),
                secs(r.started_at?, r.answered_at?) * 1000.0,
            ))
        })
        .collect();

    // Turn latency from the saved histories.
    let mut turns: Vec<TurnSample> = Vec::new();
    for r in &rows {
        if !r.has_history {
            continue;
        }
        let h = e.history(&t.account, &r.sid);
        let Some(answered) = h["answered_at"]
            .as_str()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        else {
            continue;
        };
        for turn in h["turns"].as_array().into_iter().flatten() {
            let (Some(total), Some(engine), Some(at_ms)) = (
                turn["turn_latency_us"].as_u64(),
                turn["turn_engine_us"].as_u64(),
                turn["reply_first_rtp_ms"].as_u64(),
            ) else {
                continue;
            };
            turns.push(TurnSample {
                at: answered.with_timezone(&Utc) + chrono::Duration::milliseconds(at_ms as i64),
                total_ms: total as f64 / 1000.0,
                engine_ms: engine as f64 / 1000.0,
            });
        }
    }
    let mut total: Vec<f64> = turns.iter().map(|t| t.total_ms).collect();
    let mut engine_part: Vec<f64> = turns.iter().map(|t| t.engine_ms).collect();
    let turns_after = turn_count(&e).await;
    let (m_count, m_sum) = (
        turns_after.0 - turns_before.0,
        turns_after.1 - turns_before.1,
    );

    // CPU and memory over the load (first start → last end).
    let in_load: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.at >= first && s.at <= last_end)
        .collect();
    let before = samples
        .iter()
        .rev()
        .find(|s| s.at < first)
        .or(in_load.first().copied())
        .context("no /proc samples")?;
    let after = in_load.last().copied().unwrap_or(before);
    let cpu_secs = (after.cpu_ticks - before.cpu_ticks) as f64 / CLK_TCK;
    let wall = secs(before.at, after.at).max(1e-9);
    let cpu_core = cpu_secs / wall;
    let cpu_per_call = cpu_secs / call_secs.max(1e-9);
    let cpu_per_call_net = (cpu_secs - idle_core * wall).max(0.0) / call_secs.max(1e-9);
    let rss_peak = in_load
        .iter()
        .map(|s| s.rss_kib)
        .max()
        .unwrap_or(before.rss_kib);
    let mem_per_call = rss_peak.saturating_sub(before.rss_kib) as f64 / peak.max(1) as f64;
    // Memory per live call as the slope of RSS over live calls while they ramp up (first
    // start → peak first reached): what one more live call adds, without the allocator's
    // one-time growth that the upper bound above carries.
    let live_at = |t: DateTime<Utc>| {
        edges
            .iter()
            .filter(|(at, _)| *at <= t)
            .map(|(_, d)| d)
            .sum::<i64>()
    };
    let peak_at = {
        let mut live = 0;
        edges
            .iter()
            .find(|(_, d)| {
                live += d;
                live == peak
            })
            .map(|(at, _)| *at)
            .unwrap_or(last_end)
    };
    let ramp: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.at >= first && s.at <= peak_at)
        .map(|s| (live_at(s.at) as f64, s.rss_kib as f64))
        .collect();
    // Below ~100 live calls RSS moves in allocator-sized steps, not per call.
    let mem_slope = (peak >= 100)
        .then(|| callsmith_bench::slope(&ramp))
        .flatten();
    // CPU per live call while the live calls held steady, half a second in from each edge
    // (what keeping a call up costs: media both ways, its turn, timers), against the whole
    // load's per call-second figure above (which also carries every call's setup and end).
    let steady_cpu = steady.and_then(|(a, b, live)| {
        let margin = chrono::Duration::milliseconds(500);
        let inside: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.at >= a + margin && s.at <= b - margin)
            .collect();
        let (s0, s1) = (inside.first()?, inside.last()?);
        let wall = secs(s0.at, s1.at);
        (wall >= 1.0).then(|| {
            let cpu = (s1.cpu_ticks - s0.cpu_ticks) as f64 / CLK_TCK;
            (
                wall,
                live,
                cpu / wall / live as f64,
                (cpu - idle_core * wall).max(0.0) / wall / live as f64,
            )
        })
    });

    // The table. The harness polls every 100 ms: slots missed by one poll may start late.
    let catch_up = (args.cps as f64 * 0.1).ceil() as i64;
    // The table.
    let ok = |b: bool| if b { "yes" } else { "NO" };
    let cps_err = (rate - args.cps as f64).abs() / args.cps as f64 * 100.0;
    println!(
        "\ncall_load: {} calls, answer by {mode}, cps {}, cpl {}",
        args.calls, args.cps, args.cpl
    );
    println!("outcomes: {outcomes:?}; SIPp callee clean: {callee_ok}");
    println!("\n| metric | value | target | met |\n|---|---|---|---|");
    println!(
        "| calls/s achieved (first → last start) | {rate:.3} ({cps_err:.2} % off cps {}) | within 1 % of cps when cps binds | {} |",
        args.cps,
        ok(cps_err <= 1.0)
    );
    println!(
        "| most starts in any 1 s window | {max_in_second} | ≤ cps + 1 + slots of one poll interval ({}: a late poll catches up) | {} |",
        args.cps + 1 + catch_up,
        ok(max_in_second as i64 <= args.cps + 1 + catch_up)
    );
    println!(
        "| peak concurrency (INVITE sent → end written) | {peak} (mean {mean_live:.1}) | ≤ cpl {} | {} |",
        args.cpl,
        ok(peak <= args.cpl)
    );
    println!(
        "| call setup p50 / p99 (INVITE sent → answered) | {:.2} / {:.2} ms | – | |",
        p(&mut setup, 50.0),
        p(&mut setup, 99.0)
    );
    println!(
        "| turn latency p50 / p99 (answer → first RTP of reply), {} turns | {:.2} / {:.2} ms | – | |",
        total.len(),
        p(&mut total, 50.0),
        p(&mut total, 99.0)
    );
    let eng99 = p(&mut engine_part, 99.0);
    println!(
        "| turn overhead p50 / p99 (answer → reply handed to the media worker) | {:.3} / {:.3} ms | p99 ≤ 5 ms | {} |",
        p(&mut engine_part, 50.0),
        eng99,
        ok(eng99 <= 5.0)
    );
    println!(
        "| /metrics callsmith_turn_latency_seconds count / mean (this load) | {m_count} / {:.2} ms | = turns above | {} |",
        m_sum / m_count * 1000.0,
        ok(m_count as usize == total.len())
    );
    println!(
        "| engine CPU during the load | {:.1} % of a core ({cpu_secs:.2} s CPU over {wall:.1} s) | – | |",
        cpu_core * 100.0
    );
    println!(
        "| engine CPU per call-second, whole load incl. setup and end (gross / net of idle {:.2} %) | {:.3} / {:.3} % of a core ({call_secs:.0} call-seconds) | ≤ 0.1 % | {} |",
        idle_core * 100.0,
        cpu_per_call * 100.0,
        cpu_per_call_net * 100.0,
        ok(cpu_per_call_net <= 0.001)
    );
    match steady_cpu {
        Some((wall, live, gross, net)) => println!(
            "| engine CPU per live call, steady (no call starting or ending for {wall:.1} s, {live} live; gross / net) | {:.3} / {:.3} % of a core | ≤ 0.1 % | {} |",
            gross * 100.0,
            net * 100.0,
            ok(net <= 0.001)
        ),
        None => println!(
            "| engine CPU per live call, steady | no stretch of 2 s without a call starting or ending (hold calls longer, e.g. --hold-ms 20000) | ≤ 0.1 % | |"
        ),
    }
    println!(
        "| memory per live call, upper bound: (peak RSS − RSS before) / peak live | {mem_per_call:.1} KiB (RSS {} → {} KiB, peak {peak} live) | ≤ 64 KiB | {} |",
        before.rss_kib,
        rss_peak,
        ok(mem_per_call <= 64.0)
    );
    match mem_slope {
        Some(kib) => println!(
            "| memory per live call, marginal: slope of RSS over live calls during the ramp ({} samples) | {kib:.1} KiB | ≤ 64 KiB | {} |",
            ramp.len(),
            ok(kib <= 64.0)
        ),
        None => println!(
            "| memory per live call, marginal | needs 100 or more live calls and samples during their ramp | ≤ 64 KiB | |"
        ),
    }

    // Plots.
    let conc = svg_plot(
        &format!(
            "Live calls over time ({} calls, cps {}, cpl {}, {mode})",
            args.calls, args.cps, args.cpl
        ),
        "seconds since the first start",
        "live calls",
        &[Series {
            name: "live calls".into(),
            color: "#1f77b4".into(),
            points: conc_points,
            line: true,
        }],
        &[Limit {
            y: args.cpl as f64,
            label: format!("cpl {}", args.cpl),
        }],
    );
    let lat = svg_plot(
        &format!("Latency over time ({} calls, {mode})", args.calls),
        "seconds since the first start",
        "milliseconds",
        &[
            Series {
                name: "turn latency".into(),
                color: "#d62728".into(),
                points: turns
                    .iter()
                    .map(|t| (secs(first, t.at), t.total_ms))
                    .collect(),
                line: false,
            },
            Series {
                name: "turn overhead".into(),
                color: "#2ca02c".into(),
                points: turns
                    .iter()
                    .map(|t| (secs(first, t.at), t.engine_ms))
                    .collect(),
                line: false,
            },
            Series {
                name: "call setup".into(),
                color: "#1f77b4".into(),
                points: setup_points,
                line: false,
            },
        ],
        &[Limit {
            y: 5.0,
            label: "5 ms".into(),
        }],
    );
    let tag = args.tag.clone().unwrap_or_else(|| mode.to_string());
    let cp = report_dir.join(format!("call_load_{tag}_concurrency.svg"));
    let lp = report_dir.join(format!("call_load_{tag}_latency.svg"));
    std::fs::write(&cp, conc)?;
    std::fs::write(&lp, lat)?;
    println!("\nplots: {} {}", cp.display(), lp.display());
    let failed = rows.len() - outcomes.get("completed/confirmed").copied().unwrap_or(0);
    if failed > 0 {
        eprintln!("{failed} communications did not end confirmed: {outcomes:?}");
    }
    Ok(())
}
