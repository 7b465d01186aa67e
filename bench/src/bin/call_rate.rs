//! Call rate through the real `callsmith` binary against SIPp, side by side with SIPp
//! doing the same job, on loopback.
//!
//! ```text
//! eval "$(bash scripts/test-deps.sh)"     # PostgreSQL only (CALLSMITH_TEST_PG_ADMIN_URL)
//! cargo build --release -p callsmith-bench -p callsmith-cli --bin call_rate --bin callsmith
//! CALLSMITH_BIN=$CARGO_TARGET_DIR/release/callsmith \
//!   $CARGO_TARGET_DIR/release/call_rate --direction both --database both \
//!   --rates 100,200,300,500 --seconds 10 --find-ceiling
//! ```
//!
//! Per rate and direction, every target runs alone, one after the other, each against a
//! fresh process (a new engine with a new database, a new SIPp). The engine's data
//! directory is made under `TMPDIR` (the system's temporary directory by default).
//!
//! - **inbound**: a SIPp UAC (`sipp/rate_uac_caller.xml`) calls at `-r RATE` for
//!   `--seconds` (`-m RATE×seconds`), streams a µ-law tone (`rtp_stream`) from its `-mp`
//!   port and hangs up with BYE after `--hold-ms`. Target `callsmith`: the engine answers
//!   with an agent whose published scenario asks "Press one to confirm." (TTS) and listens
//!   for DTMF for 12 s, so the caller always hangs up first. With `--prompt recorded` the
//!   question plays an uploaded 3 s WAV by its `location` instead (`--prompt tts,recorded`
//!   runs both, side by side at every rate, as targets `callsmith/<db>` and
//!   `callsmith/<db>/recorded`). Reference `sipp`: SIPp's own
//!   UAS (`sipp/rate_uas_prompt.xml`) answers, streams a prompt file and answers the BYE.
//!   One SIPp caller tops out near 1,000–1,250 calls/s: a rate above `--rate-per-caller`
//!   (default 1000) is split between ⌈RATE / rate-per-caller⌉ callers started side by
//!   side, each with its share of the calls and the rate, for both targets; their counts
//!   are added, their set-up times pooled, and the calls open at once summed second by
//!   second.
//! - **outbound**: the engine's dialer places RATE×seconds communications (dispatched
//!   through `POST /v1/communication/-/dispatch` for one moment ahead, agent cps = RATE)
//!   to a SIPp UAS (`sipp/rate_uas_callee.xml`) that answers, streams a tone and hangs up
//!   with BYE after `--hold-ms`. Reference `sipp`: SIPp's own UAC
//!   (`sipp/rate_uac_prompt.xml`) at `-r RATE` against the same UAS, streaming a prompt.
//!   Rates above 1000 are not run for callsmith: the control API caps an agent's cps there.
//!
//! What is printed per rate (a markdown table at the end), for the process under test
//! (the engine, or the SIPp doing its job):
//!
//! - **attempted / failed**: calls the load generator placed (inbound: the UAC's
//!   `OutgoingCall(C)`; outbound callsmith: communications dispatched) and calls that did
//!   not complete: SIPp's `FailedCall(C)` of either SIPp, and for outbound callsmith also
//!   the communications that did not end `completed` with `call_status` `answered` (the
//!   larger of the two counts).
//! - **retrans**: `Retransmissions(C)` of the peer SIPp, the one that plays the same role
//!   against both targets (inbound: the caller; outbound: the callee).
//! - **setup p50 / p99**: INVITE sent → 200 received. Inbound: the caller's `-trace_rtt`
//!   for both targets. Outbound callsmith: the engine's own record of every call
//!   (`started_at` = INVITE sent → `answered_at` = 200 handled, from the communication
//!   rows, µs resolution), since the callee cannot time the engine's INVITE → 200;
//!   outbound SIPp: its UAC's `-trace_rtt`. SIPp's clock is coarse: on this machine its
//!   times step by 4 ms (the kernel tick), so a percentile under one step is printed as
//!   `<4`, the smallest non-zero time SIPp recorded in the step. For
//!   inbound calls the engine's own record is printed too (a note: `started_at`, set
//!   once the INVITE is routed → `answered_at`, µs resolution).
//! - **callee INVITE→ACK** (outbound only): the same callee timing both targets (INVITE
//!   received → ACK received; `start_rtd`/`rtd` in the callee's scenario, SIPp's clock).
//! - **achieved cps** (outbound callsmith): (starts − 1) / (last start − first start) from
//!   `started_at`, and how far off RATE it is.
//! - **CPU per call**: utime + stime of the process under test (`/proc/<pid>/stat`) over
//!   the load, divided by the calls attempted; for callsmith also net of its idle CPU
//!   (2 s measured before the load). The window: inbound, from the caller's start until
//!   every inbound call of the engine is stored as ended; outbound, from the moment the
//!   calls were dispatched for until every communication ended. A SIPp under test is
//!   measured from its start until it exited (its CPU times read while it is a zombie).
//!   The PostgreSQL server's CPU is not counted.
//! - **highest clean rate** per target: the highest rate whose step had no failed call
//!   and, for the dialer, an achieved cps within 5 % of the asked one. With
//!   `--find-ceiling` a target stops climbing at its first step that is not clean.
//! - **peak RSS** and **RSS per live call** = (peak RSS − RSS before the load) / the most
//!   calls the peer SIPp had open in any second (`CurrentCall`).
//! - **the plateau** (inbound, when `--seconds` exceeds the hold by more than 2 s): with
//!   calls arriving at RATE and held `--hold-ms`, RATE × hold calls are up from hold + 1 s
//!   after the first arrival until the last one, while as many start and end per second.
//!   Over that window: the CPU of the process under test (% of a core, and per live call),
//!   its ratio to SIPp's UAS at the same rate, and RSS per live call. `--rates 30,100
//!   --seconds 22 --hold-ms 10000` holds 300 and 1000 live calls. SIPp's UAS repeats its
//!   prompt until the BYE, so both send a packet every 20 ms for the whole call; the
//!   engine also reads, decodes and listens to the caller's 50 packets a second, which
//!   SIPp leaves unread.
//!
//! Notes under each table say what the engine itself recorded: its rows (calls stored and
//! answered), the saved call histories (prompts played, RTP packets sent and received per
//! call, errors), the start rate fitted over every start and the longest pause between
//! two starts, how long the dispatch took, and the warnings and errors of its log. A
//! step with failed calls also says why: the engine's stored reasons for the unanswered
//! calls (call status, SIP code, error) and the kinds of error each SIPp logged
//! (`-trace_err`), with counts. SIPp runs with 4 MiB socket buffers (`-buff_size`), as the
//! engine's SIP socket does, so neither side drops bursts that the other would not.
//!
//! SVG plots (setup p99 and CPU per call against rate, callsmith against SIPp) go to
//! `bench/reports/call_rate_<tag>_<direction>_{setup,cpu}.svg`. The engine logs at
//! `info` unless `CALLSMITH_E2E_LOG` says otherwise; a step whose engine logged warnings
//! or errors (every step, with `--keep-logs`) leaves its log in the temp dir and prints
//! the path.
//!
//! Engine set-up: RTP ports 10000–31999 (11000 pairs; one pair per call), `[dialer]
//! max_live_calls` as many calls as the open-file limit allows (two sockets each, at most
//! 10000). SIPp media ports (`-mp`, and `-mp`+2) come from 6000–9999, its control ports
//! (`-cp`) and SIP ports are free ephemeral ports. Bounded: each step by its own time
//! budget, the whole run by `--timeout-secs`; every child is killed when the bench ends,
//! by a timeout or by SIGINT/SIGTERM.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use callsmith_bench::calls::{
    Callers, Sampler, Sipp, SippJob, all_rows, history_totals, rate_scenario, wait_all_ended,
};
use callsmith_bench::{
    CLK_TCK, Limit, ProcStat, Series, cpu_ticks_of_command, fmt_setup, percentile, proc_stat,
    svg_plot,
};
use callsmith_domain::communication::CommunicationStatus;
use callsmith_domain::store::CommunicationRecord;
use callsmith_domain::store::communications::CommunicationFilter;
use callsmith_e2e::{
    AgentSpec, Engine, EngineOptions, Tenancy, create_agent, create_scenario, free_udp_port,
    provision, store_of, tone_wav, upload_audio, workspace,
};
use chrono::{DateTime, Utc};
use clap::{Parser, ValueEnum};
use futures::StreamExt;
use serde_json::json;
use tokio::process::Command;

/// The number the inbound calls dial (and the outbound calls come from).
const NUMBER: &str = "+4930100900";
/// The engine's RTP ports: below Linux's ephemeral range (32768–60999), where the SIP and
/// control ports of the SIPp processes come from.
const RTP_PORTS: (u16, u16) = (10000, 31999);
/// The control API's cap on an agent's cps (`control/src/api/v1/agents.rs`).
const MAX_AGENT_CPS: u32 = 1000;
/// Rates tried above the given ones by `--find-ceiling`.
const CEILING_LADDER: [u32; 9] = [500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 7000];

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DirectionArg {
    Inbound,
    Outbound,
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DatabaseArg {
    Sqlite,
    Postgres,
    Both,
}

/// What the engine's bot plays before it listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
enum PromptArg {
    /// "Press one to confirm." synthesised (from the synthesis cache after the warm-up).
    Tts,
    /// An uploaded 3 s WAV (`POST /v1/audio`), played by its `location`.
    Recorded,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Dir {
    Inbound,
    Outbound,
}

impl Dir {
    fn name(self) -> &'static str {
        match self {
            Dir::Inbound => "inbound",
            Dir::Outbound => "outbound",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Db {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Target {
    Callsmith(Db, PromptArg),
    Sipp,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Callsmith(Db::Sqlite, PromptArg::Tts) => "callsmith/sqlite",
            Target::Callsmith(Db::Postgres, PromptArg::Tts) => "callsmith/postgres",
            Target::Callsmith(Db::Sqlite, PromptArg::Recorded) => "callsmith/sqlite/recorded",
            Target::Callsmith(Db::Postgres, PromptArg::Recorded) => "callsmith/postgres/recorded",
            Target::Sipp => "sipp",
        }
    }
    fn color(self) -> &'static str {
        match self {
            Target::Callsmith(Db::Sqlite, PromptArg::Tts) => "#1f77b4",
            Target::Callsmith(Db::Postgres, PromptArg::Tts) => "#2ca02c",
            Target::Callsmith(Db::Sqlite, PromptArg::Recorded) => "#ff7f0e",
            Target::Callsmith(Db::Postgres, PromptArg::Recorded) => "#9467bd",
            Target::Sipp => "#d62728",
        }
    }
}

#[derive(Parser, Debug, Clone)]
#[command(
    about = "Call rate: SIPp against the callsmith binary (inbound and outbound), side by side with SIPp against SIPp"
)]
struct Args {
    /// Which side places the calls: SIPp calls the engine (inbound), the engine's dialer
    /// calls SIPp (outbound), or both.
    #[arg(long, value_enum, default_value_t = DirectionArg::Both)]
    direction: DirectionArg,
    /// The engine's database (PostgreSQL: a fresh database per step through
    /// CALLSMITH_TEST_PG_ADMIN_URL).
    #[arg(long, value_enum, default_value_t = DatabaseArg::Sqlite)]
    database: DatabaseArg,
    /// What the engine's bot plays, comma separated: `tts`, `recorded` or both (each kind
    /// is a target of its own, run one after the other at every rate, so a recorded and a
    /// synthesised prompt are measured side by side in one sitting).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "tts")]
    prompt: Vec<PromptArg>,
    /// Call rates (calls per second) to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "100,200,300,500")]
    rates: Vec<u32>,
    /// Seconds of call arrivals per step (the step places rate × seconds calls).
    #[arg(long, default_value_t = 10)]
    seconds: u32,
    /// How long each call stays up after the answer, ms (the side that hangs up waits
    /// this long before its BYE).
    #[arg(long, default_value_t = 2000)]
    hold_ms: u64,
    /// After the given rates keep stepping up (500, 700, 1000, 1500, 2000, 3000, …) until a
    /// step of a target is not clean (failed calls, or a dialer more than 5 % short of
    /// the asked cps); the highest clean rate is printed per target.
    #[arg(long)]
    find_ceiling: bool,
    /// The highest rate --find-ceiling tries.
    #[arg(long, default_value_t = 3000)]
    ceiling_max: u32,
    /// Skip SIPp's own UAS/UAC (the reference).
    #[arg(long)]
    no_reference: bool,
    /// Inbound: the most calls per second one SIPp caller places. A higher rate is split
    /// between ⌈rate / this⌉ SIPp callers started side by side (one SIPp tops out near
    /// 1,000–1,250 calls/s), against the engine and the reference alike.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    rate_per_caller: u32,
    /// Warm-up calls before each measured callsmith step (fills the TTS cache, opens the
    /// database connections).
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// More keys for the engine's `[dialer]` section, e.g. `write_queue = 20000`.
    #[arg(long, default_value = "")]
    dialer_toml: String,
    /// More keys for the engine's `[media]` section, e.g. `rtp_timeout_ms = 60000`.
    #[arg(long, default_value = "")]
    media_toml: String,
    /// Give up after this many seconds in all (every child is killed).
    #[arg(long, default_value_t = 3600)]
    timeout_secs: u64,
    /// Where the SVG plots go (default: bench/reports of the workspace).
    #[arg(long)]
    report_dir: Option<PathBuf>,
    /// Name of this run in the plot file names.
    #[arg(long, default_value = "run")]
    tag: String,
    /// Keep every step's engine log in the temp dir, not only those with warnings (with
    /// `CALLSMITH_E2E_LOG=info,sqlx::query=debug`, say, to count the statements a call
    /// runs).
    #[arg(long)]
    keep_logs: bool,
}

/// The measured figures of one target at one rate.
#[derive(Debug, Clone)]
struct Step {
    dir: Dir,
    target: Target,
    rate: u32,
    /// 1-minute load average when the step started.
    load: f64,
    attempted: u64,
    failed: u64,
    retrans: u64,
    /// INVITE → 200, ms.
    setup: Vec<f64>,
    /// Outbound: INVITE received → ACK received at the callee, ms.
    callee_setup: Vec<f64>,
    /// Outbound callsmith: starts per second from the communication rows.
    achieved_cps: Option<f64>,
    cpu_secs: f64,
    /// CPU of the idle process over the same wall time (callsmith only).
    idle_cpu_secs: Option<f64>,
    wall_secs: f64,
    rss_before_kib: u64,
    rss_peak_kib: u64,
    peak_live: u64,
    /// Inbound, calls held longer than a second past the ramp: the plateau (see
    /// [`Plateau`]).
    plateau: Option<Plateau>,
    notes: Vec<String>,
    error: Option<String>,
}

/// The process while the live calls stand still: with calls held `hold` and arriving for
/// `seconds > hold + 2 s`, from `hold + 1 s` after the first arrival until the last one,
/// `rate × hold` calls are up and as many start and end per second as at any other time.
/// This is the steady load of a node holding that many calls (set-up and teardown
/// included, as on a real node), the figure a capacity plan divides by.
#[derive(Debug, Clone, Copy)]
struct Plateau {
    /// Calls up during the window (`rate × hold`).
    live: u64,
    /// CPU over the window, fraction of one core.
    core: f64,
    /// Highest RSS read in the window.
    rss_kib: u64,
    secs: f64,
}

impl Plateau {
    fn measure(args: &Args, rate: u32, sampler: &Sampler, t0: Instant) -> Option<Plateau> {
        let hold = Duration::from_millis(args.hold_ms);
        let arrivals = Duration::from_secs(u64::from(args.seconds));
        let from = t0 + hold + Duration::from_secs(1);
        let to = t0 + arrivals;
        if to <= from + Duration::from_secs(1) {
            return None;
        }
        let (secs, cpu, rss_kib) = sampler.window(from, to)?;
        Some(Plateau {
            live: u64::from(rate) * args.hold_ms / 1000,
            core: cpu / secs,
            rss_kib,
            secs,
        })
    }

    /// Percent of one core per live call.
    fn pct_core_per_call(&self) -> f64 {
        self.core * 100.0 / self.live.max(1) as f64
    }
}

impl Step {
    fn new(dir: Dir, target: Target, rate: u32) -> Step {
        Step {
            dir,
            target,
            rate,
            load: loadavg(),
            attempted: 0,
            failed: 0,
            retrans: 0,
            setup: Vec::new(),
            callee_setup: Vec::new(),
            achieved_cps: None,
            cpu_secs: 0.0,
            idle_cpu_secs: None,
            wall_secs: 0.0,
            rss_before_kib: 0,
            rss_peak_kib: 0,
            peak_live: 0,
            plateau: None,
            notes: Vec::new(),
            error: None,
        }
    }

    /// No call failed, and a dialer kept within 5 % of the asked rate (one that falls
    /// further behind did not place the step's calls at that rate).
    fn clean(&self) -> bool {
        self.error.is_none()
            && self.failed == 0
            && self.attempted > 0
            && self
                .achieved_cps
                .is_none_or(|a| a >= 0.95 * f64::from(self.rate))
    }

    /// What the engine spent between two readings `wall` seconds apart, beside its idle
    /// cost over the same time (`idle`: a fraction of a core).
    fn engine_usage(&mut self, before: &ProcStat, after: &ProcStat, idle: f64, wall: f64) {
        self.cpu_secs = (after.cpu_ticks - before.cpu_ticks) as f64 / CLK_TCK;
        self.idle_cpu_secs = Some(idle * wall);
        self.wall_secs = wall;
        self.rss_before_kib = before.rss_kib;
        self.rss_peak_kib = self.rss_peak_kib.max(after.rss_kib);
    }

    /// Notes what the PostgreSQL server spent over the step (`ticks` of every `postgres`
    /// process), per call and as a share of a core; the engine's CPU figures leave it out.
    fn database_cpu(&mut self, ticks: u64, wall: f64) {
        if !matches!(self.target, Target::Callsmith(Db::Postgres, _)) {
            return;
        }
        let secs = ticks as f64 / CLK_TCK;
        self.notes.push(format!(
            "PostgreSQL server: {:.3} ms CPU per call, {:.1} % of a core",
            secs * 1000.0 / self.attempted.max(1) as f64,
            secs / wall.max(1e-9) * 100.0
        ));
    }

    fn pct(&self, q: f64) -> String {
        fmt_setup(&self.setup, q)
    }

    fn cpu_ms_per_call(&self) -> f64 {
        self.cpu_secs * 1000.0 / self.attempted.max(1) as f64
    }

    fn cpu_ms_per_call_net(&self) -> Option<f64> {
        self.idle_cpu_secs
            .map(|idle| (self.cpu_secs - idle).max(0.0) * 1000.0 / self.attempted.max(1) as f64)
    }

    fn rss_per_live_kib(&self) -> f64 {
        self.rss_peak_kib.saturating_sub(self.rss_before_kib) as f64 / self.peak_live.max(1) as f64
    }
}

fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The soft limit of open files of this process (children inherit it).
fn open_files_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Max open files"))?
                .split_whitespace()
                .nth(3)?
                .parse()
                .ok()
        })
        .unwrap_or(1024)
}

/// Live calls one engine may hold: two sockets per call within the open-file limit, and
/// within the RTP port range.
fn max_live_calls() -> u64 {
    let pairs = u64::from(RTP_PORTS.1 - RTP_PORTS.0 + 1) / 2;
    (open_files_limit().saturating_sub(1000) / 2)
        .min(10_000)
        .min(pairs - 500)
        .max(100)
}

fn secs(a: DateTime<Utc>, b: DateTime<Utc>) -> f64 {
    (b - a).num_microseconds().unwrap_or(0) as f64 / 1e6
}

/// What the saved call histories of `rows` say about the bot's work: prompts played and
/// RTP both ways (per call on average), and errors the calls recorded.
fn history_summary(e: &Engine, account: &str, rows: &[CommunicationRecord]) -> String {
    let t = history_totals(e, account, rows);
    let n = t.calls.max(1) as f64;
    format!(
        "histories of {} calls: prompts {:?}, {:.0} ms of prompt played per call; RTP per call {:.0} sent, {:.0} received, {} lost in all; {} errors recorded",
        t.calls,
        t.prompts,
        t.played_ms as f64 / n,
        t.packets_sent as f64 / n,
        t.packets_received as f64 / n,
        t.packets_lost,
        t.errors
    )
}

/// Warning and error lines of an engine log, counted by message (the text after the
/// level and target, up to the first `key=value` field).
fn log_findings(log: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for line in log.lines() {
        let mut words = line.split_whitespace();
        let _time = words.next();
        let Some(level) = words.next() else { continue };
        if level != "WARN" && level != "ERROR" {
            continue;
        }
        let rest: Vec<&str> = words.take_while(|w| !w.contains('=')).collect();
        let msg = format!("{level} {}", rest.join(" "));
        *out.entry(msg).or_default() += 1;
    }
    out
}

/// A scratch PostgreSQL database (dropped by [`drop_database`]).
async fn new_database() -> Result<String> {
    let admin = std::env::var("CALLSMITH_TEST_PG_ADMIN_URL").context(
        "CALLSMITH_TEST_PG_ADMIN_URL is not set: run `eval \"$(bash scripts/test-deps.sh)\"` or pass --database sqlite",
    )?;
    Ok(callsmith_domain::store::create_postgres_database(&admin, "cscr_").await?)
}

/// Drops a database made by [`new_database`] (best effort, with psql; databases left
/// behind are dropped by the next `create_postgres_database` two hours later).
async fn drop_database(url: &str) {
    let (Ok(admin), Some(name)) = (
        std::env::var("CALLSMITH_TEST_PG_ADMIN_URL"),
        url.rsplit('/')
            .next()
            .map(|n| n.split('?').next().unwrap_or(n)),
    ) else {
        return;
    };
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return;
    }
    let run = Command::new("psql")
        .arg(&admin)
        .args([
            "-q",
            "-c",
            &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    let _ = tokio::time::timeout(Duration::from_secs(20), run).await;
}

/// The time budget of one step's load: arrivals, the hold, and room for slow set-ups.
fn budget_secs(args: &Args) -> u64 {
    u64::from(args.seconds) + args.hold_ms / 1000 + 60
}

/// One step of the callsmith binary: a fresh engine (and database), warm-up, 2 s idle,
/// then the load.
async fn callsmith_step(
    args: &Args,
    dir: Dir,
    db: Db,
    prompt: PromptArg,
    rate: u32,
) -> Result<Step> {
    let db_url = match db {
        Db::Sqlite => None,
        Db::Postgres => Some(new_database().await?),
    };
    let r = callsmith_step_on(args, dir, db, prompt, rate, db_url.as_deref()).await;
    if let Some(url) = &db_url {
        drop_database(url).await;
    }
    r
}

async fn callsmith_step_on(
    args: &Args,
    dir: Dir,
    db: Db,
    prompt: PromptArg,
    rate: u32,
    db_url: Option<&str>,
) -> Result<Step> {
    let mut step = Step::new(dir, Target::Callsmith(db, prompt), rate);
    let total = u64::from(rate) * u64::from(args.seconds);
    let budget = budget_secs(args);
    let max_live = max_live_calls();
    // The callee (outbound) listens here; for inbound calls the trunk only matches the
    // caller's address (127.0.0.1).
    let gw_port = free_udp_port();
    let gateway = SocketAddr::from(([127, 0, 0, 1], gw_port));
    let mut e = Engine::start(EngineOptions {
        database_url: db_url.map(String::from),
        trunks: vec![("carrier".into(), gateway)],
        // The production default of the overload check (the e2e harness relaxes it).
        dialer_toml: format!(
            "max_live_calls = {max_live}\n{}{}\n",
            if args.dialer_toml.contains("max_timer_lag_ms") {
                ""
            } else {
                "max_timer_lag_ms = 100\n"
            },
            args.dialer_toml
        ),
        rtp_ports: Some(RTP_PORTS),
        media_toml: format!("{}\n", args.media_toml),
        ..Default::default()
    })
    .await;
    let pid = e.pid().context("engine pid")?;
    let t: Tenancy = provision(&e, "rate", "carrier", NUMBER).await;
    let store = store_of(&e, db_url).await;
    let mut scenario = rate_scenario();
    if prompt == PromptArg::Recorded {
        let audio = upload_audio(&e, &t.account, tone_wav(3.0)).await;
        let location = audio["location"].as_str().context("audio location")?;
        scenario["constructor"]["bricks"]["question"]["v1"][0]["properties"]["statement"]["audio"] =
            json!({"mode": "file", "tts": {"text": ""}, "file": {"url": location}});
    }
    let scn = create_scenario(&store, &t, &scenario, true).await;
    let spec = |cps: u32, cpl: u64| AgentSpec {
        cps: i64::from(cps),
        cpl: cpl as i64,
        ..AgentSpec::new(scn.clone(), t.number_id.clone())
    };
    // The inbound route (and the outbound warm-up) use this agent, without limits.
    let open_agent = create_agent(&store, &t, &spec(0, 0)).await;

    let result = match dir {
        Dir::Inbound => {
            inbound_load(args, &e, &store, &t, pid, rate, total, budget, &mut step).await
        }
        Dir::Outbound => {
            let load_agent = create_agent(&store, &t, &spec(rate, max_live)).await;
            outbound_load(
                args,
                &e,
                &store,
                &t,
                pid,
                gw_port,
                (&open_agent, &load_agent),
                total,
                budget,
                &mut step,
            )
            .await
        }
    };
    if let Err(err) = result {
        step.error = Some(format!("{err:#}"));
    }

    // What the engine logged.
    let log = e.log();
    let findings = log_findings(&log);
    if !findings.is_empty() || args.keep_logs {
        let path = std::env::temp_dir().join(format!(
            "call_rate_{}_{}_{}_{rate}.log",
            std::process::id(),
            dir.name(),
            match db {
                Db::Sqlite => "sqlite",
                Db::Postgres => "postgres",
            }
        ));
        let _ = std::fs::write(&path, &log);
        let mut found: Vec<(String, usize)> = findings.into_iter().collect();
        found.sort_by_key(|f| std::cmp::Reverse(f.1));
        for (msg, n) in found.iter().take(6) {
            step.notes.push(format!("engine log: {n} × {msg}"));
        }
        step.notes
            .push(format!("engine log kept at {}", path.display()));
    }
    let pool = log.matches("pool timed out").count();
    if pool > 0 {
        step.notes
            .push(format!("engine log: `pool timed out` {pool} times"));
    }
    e.kill().await;
    Ok(step)
}

/// CPU of the idle engine over 2 s, as a fraction of a core.
async fn idle_core(pid: u32) -> Result<f64> {
    let a = proc_stat(pid).context("engine /proc")?;
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let b = proc_stat(pid).context("engine /proc")?;
    Ok((b.cpu_ticks - a.cpu_ticks) as f64 / CLK_TCK / t0.elapsed().as_secs_f64())
}

#[allow(clippy::too_many_arguments)]
async fn inbound_load(
    args: &Args,
    e: &Engine,
    store: &callsmith_domain::Store,
    t: &Tenancy,
    pid: u32,
    rate: u32,
    total: u64,
    budget: u64,
    step: &mut Step,
) -> Result<()> {
    let inbound = CommunicationFilter {
        direction: Some("inbound".into()),
        ..Default::default()
    };
    let caller = |calls: u64, rate: u32| SippJob {
        scenario: "rate_uac_caller",
        port: free_udp_port(),
        target: Some(e.sip_addr),
        calls,
        rate: Some(rate),
        hold_ms: Some(args.hold_ms),
        service: Some(NUMBER),
        budget_secs: budget,
        extra_args: &[],
    };
    if args.warmup > 0 {
        let mut warm = Callers::spawn(&caller(args.warmup, 10), 1, args.hold_ms)?;
        if warm.wait(Duration::from_secs(60)).await != Some(true) {
            bail!("warm-up calls failed\n{}", e.log());
        }
        if !wait_all_ended(store, &t.account, &inbound, Duration::from_secs(30)).await? {
            bail!("warm-up calls did not end in the engine");
        }
    }
    let idle = idle_core(pid).await?;
    let warm_rows = all_rows(store, &t.account, &inbound).await?;

    let sampler = Sampler::start(pid);
    let before = proc_stat(pid).context("engine /proc")?;
    let db_before = cpu_ticks_of_command("postgres");
    let t0 = Instant::now();
    let mut uac = Callers::spawn(&caller(total, rate), callers(args, rate), args.hold_ms)?;
    let exited = uac.wait(Duration::from_secs(budget + 30)).await;
    if exited.is_none() {
        uac.kill().await;
        step.notes
            .push("the caller SIPp did not finish in time".into());
    }
    note_callers(args, rate, step);
    step.plateau = Plateau::measure(args, rate, &sampler, t0);
    let ended = wait_all_ended(store, &t.account, &inbound, Duration::from_secs(60)).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = proc_stat(pid).context("engine /proc")?;
    let wall = t0.elapsed().as_secs_f64();
    let db_ticks = cpu_ticks_of_command("postgres").saturating_sub(db_before);
    sampler_peak(&sampler, step);
    drop(sampler);

    let st = uac.stat();
    step.attempted = st.outgoing;
    step.failed = st.failed;
    step.retrans = st.retransmissions;
    step.peak_live = st.peak_current;
    step.setup = uac.rtts();
    step.engine_usage(&before, &after, idle, wall);
    step.database_cpu(db_ticks, wall);
    note_sipp_errors(step, "caller", uac.errors());
    if st.outgoing < total {
        step.failed += total - st.outgoing;
        step.notes.push(format!(
            "the caller placed {} of {total} calls",
            st.outgoing
        ));
        step.attempted = total;
    }
    if !ended {
        step.notes
            .push("inbound calls still open in the engine 60 s after the caller ended".into());
    }
    // The engine's own record of the load.
    let answered = |rows: &[CommunicationRecord]| {
        rows.iter()
            .filter(|r| {
                r.communication_status == CommunicationStatus::Completed
                    && r.call_status.as_deref() == Some("answered")
            })
            .count() as i64
    };
    let rows = all_rows(store, &t.account, &inbound).await?;
    let stored = rows.len() as i64 - warm_rows.len() as i64;
    let answered = answered(&rows) - answered(&warm_rows);
    step.notes.push(format!(
        "engine rows: {stored} inbound calls stored, {answered} completed/answered (idle engine {:.1} % of a core)",
        idle * 100.0
    ));
    let warm: BTreeSet<&str> = warm_rows.iter().map(|r| r.sid.as_str()).collect();
    let load_rows: Vec<CommunicationRecord> = rows
        .iter()
        .filter(|r| !warm.contains(r.sid.as_str()))
        .cloned()
        .collect();
    let mut engine_setup: Vec<f64> = load_rows
        .iter()
        .filter_map(|r| Some(secs(r.started_at?, r.answered_at?) * 1000.0))
        .collect();
    engine_setup.sort_by(f64::total_cmp);
    if !engine_setup.is_empty() {
        step.notes.push(format!(
            "the engine's own record (`started_at`, the row made once the INVITE is routed → `answered_at`): p50 {:.2} / p99 {:.2} ms",
            percentile(&engine_setup, 50.0),
            percentile(&engine_setup, 99.0)
        ));
    }
    step.notes.push(history_summary(e, &t.account, &load_rows));
    Ok(())
}

/// Takes the peak RSS of the sampler's readings into the step.
fn sampler_peak(sampler: &Sampler, step: &mut Step) {
    step.rss_peak_kib = step.rss_peak_kib.max(sampler.peak_rss());
}

#[allow(clippy::too_many_arguments)]
async fn outbound_load(
    args: &Args,
    e: &Engine,
    store: &callsmith_domain::Store,
    t: &Tenancy,
    pid: u32,
    gw_port: u16,
    (warm_agent, agent): (&str, &str),
    total: u64,
    budget: u64,
    step: &mut Step,
) -> Result<()> {
    let callee = |calls: u64| SippJob {
        scenario: "rate_uas_callee",
        port: gw_port,
        target: None,
        calls,
        rate: None,
        hold_ms: Some(args.hold_ms),
        service: None,
        budget_secs: budget + 60,
        extra_args: &[],
    };
    if args.warmup > 0 {
        let mut warm = Sipp::spawn(&callee(args.warmup), args.hold_ms)?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let f = CommunicationFilter {
            agent_sid: Some(warm_agent.to_string()),
            ..Default::default()
        };
        for i in 0..args.warmup {
            e.dispatch(
                t,
                json!({"recipient": format!("+1666{i:07}"), "agent_sid": warm_agent}),
            )
            .await;
        }
        if !wait_all_ended(store, &t.account, &f, Duration::from_secs(60)).await? {
            bail!("warm-up calls did not end\n{}", e.log());
        }
        if warm.wait(Duration::from_secs(20)).await != Some(true) {
            bail!("the warm-up callee failed\n{}", e.log());
        }
    }
    let mut uas = Sipp::spawn(&callee(total), args.hold_ms)?;
    let idle = idle_core(pid).await?;

    // Dispatch every communication for one moment ahead (with room for the requests at
    // about 400/s), so dialling starts after the requests are done.
    let at = Utc::now() + chrono::Duration::milliseconds(2000 + (total as i64 * 1000) / 400);
    let at_s = at.to_rfc3339();
    let dispatch_t0 = Instant::now();
    let refused = futures::stream::iter(0..total)
        .map(|i| {
            let body = json!({"recipient": format!("+1555{i:07}"), "agent_sid": agent, "scheduled_at": at_s});
            async move {
                e.post("/v1/communication/-/dispatch", Some(&t.account), body)
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
    step.notes.push(format!(
        "{total} communications dispatched in {:.1} s",
        dispatch_t0.elapsed().as_secs_f64()
    ));
    let lead = secs(Utc::now(), at);
    if lead < 0.2 {
        step.notes.push(format!(
            "dispatch overran the first start by {:.1} s (its requests count in the CPU)",
            -lead
        ));
    } else {
        tokio::time::sleep(Duration::from_secs_f64(lead - 0.1)).await;
    }
    let sampler = Sampler::start(pid);
    let before = proc_stat(pid).context("engine /proc")?;
    let db_before = cpu_ticks_of_command("postgres");
    let t0 = Instant::now();
    let f = CommunicationFilter {
        agent_sid: Some(agent.to_string()),
        ..Default::default()
    };
    let ended = wait_all_ended(store, &t.account, &f, Duration::from_secs(budget)).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = proc_stat(pid).context("engine /proc")?;
    let wall = t0.elapsed().as_secs_f64();
    let db_ticks = cpu_ticks_of_command("postgres").saturating_sub(db_before);
    sampler_peak(&sampler, step);
    if uas
        .wait(Duration::from_secs(args.hold_ms / 1000 + 15))
        .await
        .is_none()
    {
        uas.kill().await;
        step.notes
            .push("the callee SIPp did not see every call end".into());
    }
    let st = uas.stat();
    step.retrans = st.retransmissions;
    step.peak_live = st.peak_current;
    step.callee_setup = uas.rtts();
    step.engine_usage(&before, &after, idle, wall);
    if !ended {
        step.notes
            .push(format!("communications still open after {budget} s"));
    }

    let rows = all_rows(store, &t.account, &f).await?;
    step.attempted = total;
    step.database_cpu(db_ticks, wall);
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for r in &rows {
        let k = format!(
            "{}/{}",
            r.communication_status,
            r.call_status.as_deref().unwrap_or("-")
        );
        *outcomes.entry(k).or_default() += 1;
    }
    let answered = outcomes.get("completed/answered").copied().unwrap_or(0) as u64;
    let row_failures = total.saturating_sub(answered);
    step.failed = row_failures.max(st.failed);
    if row_failures > 0 || st.failed > 0 {
        step.notes.push(format!(
            "outcomes {outcomes:?}; the callee counted {} failed calls",
            st.failed
        ));
        // Why the engine's unanswered calls ended, as stored.
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        for r in rows
            .iter()
            .filter(|r| r.call_status.as_deref() != Some("answered"))
        {
            let k = format!(
                "{} {}: {}",
                r.call_status.as_deref().unwrap_or("-"),
                r.sip_code.map(|c| c.to_string()).unwrap_or_default(),
                r.error.as_deref().unwrap_or("no error recorded")
            );
            *reasons.entry(k).or_default() += 1;
        }
        for (k, n) in reasons.iter().take(4) {
            step.notes.push(format!("unanswered: {n} × {k}"));
        }
    }
    note_sipp_errors(step, "callee", uas.errors());
    let mut starts: Vec<DateTime<Utc>> = rows.iter().filter_map(|r| r.started_at).collect();
    starts.sort();
    if let (Some(first), Some(last)) = (starts.first(), starts.last())
        && starts.len() > 1
    {
        step.achieved_cps = Some((starts.len() - 1) as f64 / secs(*first, *last).max(1e-9));
    }
    let mut setup: Vec<f64> = rows
        .iter()
        .filter_map(|r| Some(secs(r.started_at?, r.answered_at?) * 1000.0))
        .collect();
    setup.sort_by(f64::total_cmp);
    step.setup = setup;
    // Starts per second fitted over every start: unlike first → last above, one early or
    // late start at either end barely moves it.
    let first = starts.first().copied();
    let fit_points: Vec<(f64, f64)> = starts
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((secs(first?, *s), i as f64)))
        .collect();
    // The longest pause between two starts: a dialer poll that ran late (slots older
    // than one poll interval are not started any more, so the run stretches).
    if let Some((at, gap)) = fit_points
        .windows(2)
        .map(|w| (w[0].0, w[1].0 - w[0].0))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    {
        step.notes.push(format!(
            "longest pause between two starts: {:.0} ms, {at:.2} s after the first start (slot interval {:.1} ms)",
            gap * 1000.0,
            1000.0 / f64::from(step.rate)
        ));
    }
    if let Some(fit) = callsmith_bench::slope(&fit_points) {
        step.notes.push(format!(
            "starts per second, least-squares fit over all starts: {fit:.2} ({:+.2} % off)",
            (fit - f64::from(step.rate)) / f64::from(step.rate) * 100.0
        ));
    }
    step.notes.push(format!(
        "idle engine {:.1} % of a core; {}",
        idle * 100.0,
        history_summary(e, &t.account, &rows)
    ));
    Ok(())
}

/// One step of SIPp against SIPp: the same peer as against the engine, and SIPp's own
/// UAS (inbound) or UAC (outbound) in the engine's place, measured alone.
async fn sipp_step(args: &Args, dir: Dir, rate: u32) -> Result<Step> {
    let mut step = Step::new(dir, Target::Sipp, rate);
    let total = u64::from(rate) * u64::from(args.seconds);
    let budget = budget_secs(args);
    let uas_port = free_udp_port();
    let uas_addr = SocketAddr::from(([127, 0, 0, 1], uas_port));
    match dir {
        Dir::Inbound => {
            let mut uas = Sipp::spawn(
                &SippJob {
                    scenario: "rate_uas_prompt",
                    port: uas_port,
                    target: None,
                    calls: total,
                    rate: None,
                    hold_ms: None,
                    service: None,
                    budget_secs: budget + 30,
                    extra_args: &[],
                },
                args.hold_ms,
            )?;
            let sampler = Sampler::start(uas.pid);
            tokio::time::sleep(Duration::from_millis(500)).await;
            let before = sampler.last().or(sampler.first()).context("sipp /proc")?;
            let t0 = Instant::now();
            let mut uac = Callers::spawn(
                &SippJob {
                    scenario: "rate_uac_caller",
                    port: free_udp_port(),
                    target: Some(uas_addr),
                    calls: total,
                    rate: Some(rate),
                    hold_ms: Some(args.hold_ms),
                    service: Some(NUMBER),
                    budget_secs: budget,
                    extra_args: &[],
                },
                callers(args, rate),
                args.hold_ms,
            )?;
            if uac.wait(Duration::from_secs(budget + 30)).await.is_none() {
                uac.kill().await;
                step.notes
                    .push("the caller SIPp did not finish in time".into());
            }
            note_callers(args, rate, &mut step);
            step.plateau = Plateau::measure(args, rate, &sampler, t0);
            if !sampler.wait_exit(Duration::from_secs(10)).await {
                step.notes
                    .push("SIPp's UAS did not exit (calls missing): measured while running".into());
            }
            let after = sampler.last().context("sipp /proc")?;
            let wall = t0.elapsed().as_secs_f64();
            let peak = sampler.peak_rss();
            drop(sampler);
            uas.kill().await;
            let _ = uas.wait(Duration::from_secs(5)).await;
            let (c, s) = (uac.stat(), uas.stat());
            note_sipp_errors(&mut step, "caller", uac.errors());
            note_sipp_errors(&mut step, "callee", uas.errors());
            step.attempted = c.outgoing.max(total);
            step.failed = c.failed.max(s.failed) + total.saturating_sub(c.outgoing);
            step.retrans = c.retransmissions;
            step.peak_live = c.peak_current;
            step.setup = uac.rtts();
            step.cpu_secs = (after.cpu_ticks - before.cpu_ticks) as f64 / CLK_TCK;
            step.wall_secs = wall;
            step.rss_before_kib = before.rss_kib;
            step.rss_peak_kib = peak;
        }
        Dir::Outbound => {
            let mut uas = Sipp::spawn(
                &SippJob {
                    scenario: "rate_uas_callee",
                    port: uas_port,
                    target: None,
                    calls: total,
                    rate: None,
                    hold_ms: Some(args.hold_ms),
                    service: None,
                    budget_secs: budget + 30,
                    extra_args: &[],
                },
                args.hold_ms,
            )?;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let t0 = Instant::now();
            let uac = Sipp::spawn(
                &SippJob {
                    scenario: "rate_uac_prompt",
                    port: free_udp_port(),
                    target: Some(uas_addr),
                    calls: total,
                    rate: Some(rate),
                    hold_ms: None,
                    service: Some("+15550000000"),
                    budget_secs: budget,
                    extra_args: &[],
                },
                args.hold_ms,
            )?;
            let mut uac = uac;
            let sampler = Sampler::start(uac.pid);
            let before = sampler_first(&sampler).await.context("sipp /proc")?;
            if !sampler.wait_exit(Duration::from_secs(budget + 30)).await {
                step.notes.push("SIPp's UAC did not finish in time".into());
            }
            let after = sampler.last().context("sipp /proc")?;
            let wall = t0.elapsed().as_secs_f64();
            let peak = sampler.peak_rss();
            drop(sampler);
            if uac.wait(Duration::from_secs(5)).await.is_none() {
                uac.kill().await;
            }
            if uas.wait(Duration::from_secs(10)).await.is_none() {
                uas.kill().await;
            }
            let (c, s) = (uac.stat(), uas.stat());
            note_sipp_errors(&mut step, "caller", uac.errors());
            note_sipp_errors(&mut step, "callee", uas.errors());
            step.attempted = c.outgoing.max(total);
            step.failed = c.failed.max(s.failed) + total.saturating_sub(c.outgoing);
            step.retrans = s.retransmissions;
            step.peak_live = s.peak_current;
            step.setup = uac.rtts();
            step.callee_setup = uas.rtts();
            step.cpu_secs = (after.cpu_ticks - before.cpu_ticks) as f64 / CLK_TCK;
            step.wall_secs = wall;
            // SIPp's UAC starts calling at once: its RSS before the load is its first
            // reading, a few milliseconds in.
            step.rss_before_kib = before.rss_kib;
            step.rss_peak_kib = peak;
        }
    }
    Ok(step)
}

/// The first reading of a sampler (waits up to a second for it).
async fn sampler_first(s: &Sampler) -> Option<ProcStat> {
    for _ in 0..100 {
        if let Some(f) = s.first() {
            return Some(f);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

fn summary_line(s: &Step) -> String {
    let mut out = format!(
        "{:>8} {:>5} cps {:<18} {:>6} calls {:>5} failed {:>5} retrans  setup p50 {} p99 {} ms  CPU {:.3} ms/call  RSS {:.1} MiB (peak live {}, {:.1} KiB each)  load {:.2}",
        s.dir.name(),
        s.rate,
        s.target.name(),
        s.attempted,
        s.failed,
        s.retrans,
        s.pct(50.0),
        s.pct(99.0),
        s.cpu_ms_per_call(),
        s.rss_peak_kib as f64 / 1024.0,
        s.peak_live,
        s.rss_per_live_kib(),
        s.load
    );
    if let Some(a) = s.achieved_cps {
        out.push_str(&format!("  achieved {a:.2} cps"));
    }
    if let Some(p) = &s.plateau {
        out.push_str(&format!(
            "  plateau {} live: {:.1} % of a core, {:.4} % per live call, {:.1} KiB RSS per live call",
            p.live,
            p.core * 100.0,
            p.pct_core_per_call(),
            p.rss_kib.saturating_sub(s.rss_before_kib) as f64 / p.live.max(1) as f64
        ));
    }
    if let Some(e) = &s.error {
        out.push_str(&format!("  ERROR: {e}"));
    }
    out
}

fn print_tables(args: &Args, steps: &[Step]) {
    let dirs: BTreeSet<Dir> = steps.iter().map(|s| s.dir).collect();
    for dir in dirs {
        let mine: Vec<&Step> = steps.iter().filter(|s| s.dir == dir).collect();
        println!(
            "\n### {} ({} s of arrivals per rate, calls held {} ms)\n",
            dir.name(),
            args.seconds,
            args.hold_ms
        );
        let outbound = dir == Dir::Outbound;
        print!("| rate | target | attempted | failed | retrans | setup p50 / p99 ms |");
        if outbound {
            print!(" callee INVITE→ACK p50 / p99 ms | achieved cps (off) |");
        }
        println!(
            " CPU ms/call (net) | CPU % of a core | peak RSS MiB | peak live | RSS KiB/live call | load |"
        );
        print!("|---|---|---|---|---|---|");
        if outbound {
            print!("---|---|");
        }
        println!("---|---|---|---|---|---|");
        for s in &mine {
            let net = s
                .cpu_ms_per_call_net()
                .map(|n| format!(" ({n:.3})"))
                .unwrap_or_default();
            print!(
                "| {} | {} | {} | {} | {} | {} / {} |",
                s.rate,
                s.target.name(),
                s.attempted,
                if s.error.is_some() {
                    format!("{} (error)", s.failed)
                } else {
                    s.failed.to_string()
                },
                s.retrans,
                s.pct(50.0),
                s.pct(99.0)
            );
            if outbound {
                let achieved = s
                    .achieved_cps
                    .map(|a| {
                        format!(
                            "{a:.2} ({:+.2} %)",
                            (a - f64::from(s.rate)) / f64::from(s.rate) * 100.0
                        )
                    })
                    .unwrap_or_else(|| "–".into());
                print!(
                    " {} / {} | {achieved} |",
                    fmt_setup(&s.callee_setup, 50.0),
                    fmt_setup(&s.callee_setup, 99.0)
                );
            }
            println!(
                " {:.3}{net} | {:.1} | {:.1} | {} | {:.1} | {:.2} |",
                s.cpu_ms_per_call(),
                s.cpu_secs / s.wall_secs.max(1e-9) * 100.0,
                s.rss_peak_kib as f64 / 1024.0,
                s.peak_live,
                s.rss_per_live_kib(),
                s.load
            );
        }
        println!();
        let targets: BTreeSet<Target> = mine.iter().map(|s| s.target).collect();
        for t in targets {
            let best = mine
                .iter()
                .filter(|s| s.target == t && s.clean())
                .map(|s| s.rate)
                .max();
            let first_bad = mine
                .iter()
                .filter(|s| s.target == t && !s.clean())
                .map(|s| s.rate)
                .min();
            println!(
                "- {} {}: highest clean rate {}{}",
                dir.name(),
                t.name(),
                best.map(|b| format!("{b} cps"))
                    .unwrap_or_else(|| "none".into()),
                first_bad
                    .map(|b| format!(" (first rate that was not: {b} cps)"))
                    .unwrap_or_default()
            );
        }
        print_plateaus(&mine);
        let notes: Vec<String> = mine
            .iter()
            .flat_map(|s| {
                s.notes
                    .iter()
                    .map(move |n| format!("- {} cps {}: {n}", s.rate, s.target.name()))
            })
            .collect();
        if !notes.is_empty() {
            println!("\nNotes:\n{}", notes.join("\n"));
        }
    }
}

/// The steady load per live call (see [`Plateau`]), each target beside SIPp at the same
/// rate.
fn print_plateaus(steps: &[&Step]) {
    let with: Vec<&&Step> = steps.iter().filter(|s| s.plateau.is_some()).collect();
    if with.is_empty() {
        return;
    }
    println!("\nWhile the live calls stand still (arrivals and ends at the rate, calls held):\n");
    println!(
        "| rate | target | live calls | window s | CPU % of a core | % of a core per live call | × SIPp | RSS KiB per live call |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for s in with {
        let Some(p) = s.plateau else { continue };
        let sipp = steps
            .iter()
            .find(|o| o.target == Target::Sipp && o.rate == s.rate)
            .and_then(|o| o.plateau);
        let ratio = sipp
            .filter(|r| r.core > 0.0)
            .map(|r| format!("{:.2}", p.pct_core_per_call() / r.pct_core_per_call()))
            .unwrap_or_else(|| "–".into());
        println!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.4} | {ratio} | {:.1} |",
            s.rate,
            s.target.name(),
            p.live,
            p.secs,
            p.core * 100.0,
            p.pct_core_per_call(),
            p.rss_kib.saturating_sub(s.rss_before_kib) as f64 / p.live.max(1) as f64
        );
    }
    println!();
}

fn write_plots(args: &Args, steps: &[Step]) -> Result<Vec<PathBuf>> {
    let report_dir = args
        .report_dir
        .clone()
        .unwrap_or_else(|| workspace().join("bench").join("reports"));
    std::fs::create_dir_all(&report_dir)?;
    let mut written = Vec::new();
    let dirs: BTreeSet<Dir> = steps.iter().map(|s| s.dir).collect();
    for dir in dirs {
        let mine: Vec<&Step> = steps.iter().filter(|s| s.dir == dir).collect();
        let targets: BTreeSet<Target> = mine.iter().map(|s| s.target).collect();
        let series = |f: &dyn Fn(&Step) -> f64| -> Vec<Series> {
            targets
                .iter()
                .map(|t| Series {
                    name: t.name().into(),
                    color: t.color().into(),
                    points: mine
                        .iter()
                        .filter(|s| s.target == *t && s.error.is_none())
                        .map(|s| (f64::from(s.rate), f(s)))
                        .filter(|p| p.1.is_finite())
                        .collect(),
                    line: true,
                })
                .collect()
        };
        let plots = [
            (
                "setup",
                format!(
                    "Call setup p99 against call rate ({}, INVITE → 200)",
                    dir.name()
                ),
                "setup p99, ms",
                series(&|s| percentile(&s.setup, 99.0)),
            ),
            (
                "cpu",
                format!(
                    "CPU per call against call rate ({}, process under test)",
                    dir.name()
                ),
                "CPU ms per call",
                series(&|s| s.cpu_ms_per_call()),
            ),
        ];
        for (name, title, y, series) in plots {
            let svg = svg_plot(&title, "calls per second", y, &series, &[] as &[Limit]);
            let path = report_dir.join(format!("call_rate_{}_{}_{name}.svg", args.tag, dir.name()));
            std::fs::write(&path, svg)?;
            written.push(path);
        }
    }
    Ok(written)
}

/// The rates to run: the given ones, then (with --find-ceiling) the ladder above them.
fn ladder(args: &Args) -> Vec<u32> {
    let mut rates: Vec<u32> = args.rates.iter().copied().filter(|r| *r > 0).collect();
    rates.sort_unstable();
    rates.dedup();
    if args.find_ceiling {
        let top = rates.last().copied().unwrap_or(0);
        rates.extend(
            CEILING_LADDER
                .iter()
                .copied()
                .filter(|r| *r > top && *r <= args.ceiling_max),
        );
    }
    rates
}

async fn run(args: Args, results: Arc<Mutex<Vec<Step>>>) -> Result<()> {
    let dirs: Vec<Dir> = match args.direction {
        DirectionArg::Inbound => vec![Dir::Inbound],
        DirectionArg::Outbound => vec![Dir::Outbound],
        DirectionArg::Both => vec![Dir::Inbound, Dir::Outbound],
    };
    let dbs = match args.database {
        DatabaseArg::Sqlite => vec![Db::Sqlite],
        DatabaseArg::Postgres => vec![Db::Postgres],
        DatabaseArg::Both => vec![Db::Sqlite, Db::Postgres],
    };
    let mut targets: Vec<Target> = dbs
        .iter()
        .flat_map(|&db| args.prompt.iter().map(move |&p| Target::Callsmith(db, p)))
        .collect();
    if !args.no_reference {
        targets.push(Target::Sipp);
    }
    let rates = ladder(&args);
    eprintln!(
        "call_rate: binary {}, rates {rates:?}, {} s per rate, hold {} ms, engine max_live_calls {}, RTP ports {}-{}, engine log {}",
        callsmith_e2e::binary().display(),
        args.seconds,
        args.hold_ms,
        max_live_calls(),
        RTP_PORTS.0,
        RTP_PORTS.1,
        std::env::var("CALLSMITH_E2E_LOG").unwrap_or_default()
    );
    let mut stopped: BTreeSet<(Dir, Target)> = BTreeSet::new();
    for rate in rates {
        for &dir in &dirs {
            for &target in &targets {
                if stopped.contains(&(dir, target)) {
                    continue;
                }
                if dir == Dir::Outbound
                    && matches!(target, Target::Callsmith(..))
                    && rate > MAX_AGENT_CPS
                {
                    eprintln!(
                        "outbound {rate} cps {}: skipped (an agent's cps is at most {MAX_AGENT_CPS})",
                        target.name()
                    );
                    continue;
                }
                let step_args = args.clone();
                let limit = Duration::from_secs(budget_secs(&args) * 2 + 120);
                let task = AbortOnDrop(tokio::spawn(async move {
                    match target {
                        Target::Callsmith(db, prompt) => {
                            callsmith_step(&step_args, dir, db, prompt, rate).await
                        }
                        Target::Sipp => sipp_step(&step_args, dir, rate).await,
                    }
                }));
                let step = match tokio::time::timeout(limit, task.wait()).await {
                    Ok(Ok(Ok(s))) => s,
                    Ok(Ok(Err(e))) => failed_step(dir, target, rate, &args, format!("{e:#}")),
                    Ok(Err(e)) => failed_step(dir, target, rate, &args, e),
                    Err(_) => failed_step(
                        dir,
                        target,
                        rate,
                        &args,
                        format!("the step took longer than {} s", limit.as_secs()),
                    ),
                };
                eprintln!("{}", summary_line(&step));
                for n in &step.notes {
                    eprintln!("    {n}");
                }
                if !step.clean() && args.find_ceiling {
                    stopped.insert((dir, target));
                }
                results.lock().expect("results").push(step);
                // Lingering transactions (2xx retransmission windows, Timer K) drain.
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
    Ok(())
}

fn failed_step(dir: Dir, target: Target, rate: u32, args: &Args, error: String) -> Step {
    let mut s = Step::new(dir, target, rate);
    s.attempted = u64::from(rate) * u64::from(args.seconds);
    s.failed = s.attempted;
    // A panic message from the harness carries the whole engine log: keep its start.
    let mut e: String = error.chars().take(2000).collect();
    if e.len() < error.len() {
        e.push_str(" …");
    }
    s.error = Some(e);
    s
}

/// A spawned step: aborted (its children killed on drop) when the bench stops waiting.
struct AbortOnDrop(tokio::task::JoinHandle<Result<Step>>);

impl AbortOnDrop {
    async fn wait(mut self) -> Result<Result<Step>, String> {
        (&mut self.0).await.map_err(|e| {
            if e.is_panic() {
                let p = e.into_panic();
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .map(|m| format!("panicked: {m}"))
                    .unwrap_or_else(|| "panicked".into())
            } else {
                "cancelled".into()
            }
        })
    }
}

/// What a SIPp of the step logged as errors (`-trace_err`), the most frequent kinds first.
/// SIPp callers an inbound step at `rate` runs side by side (`--rate-per-caller`).
fn callers(args: &Args, rate: u32) -> usize {
    rate.div_ceil(args.rate_per_caller).max(1) as usize
}

fn note_callers(args: &Args, rate: u32, step: &mut Step) {
    let n = callers(args, rate);
    if n > 1 {
        step.notes.push(format!(
            "{n} SIPp callers side by side, {} calls/s or less each",
            rate.div_ceil(n as u32)
        ));
    }
}

fn note_sipp_errors(step: &mut Step, role: &str, errors: Vec<(String, usize)>) {
    for (kind, n) in errors.iter().take(4) {
        let kind: String = kind.chars().take(200).collect();
        step.notes.push(format!("{role} SIPp error: {n} × {kind}"));
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.rates.is_empty() || args.seconds == 0 || args.hold_ms < 100 {
        bail!("--rates needs at least one rate; --seconds at least 1; --hold-ms at least 100");
    }
    if std::env::var_os("CALLSMITH_E2E_LOG").is_none() {
        // SAFETY: no other thread exists yet (the runtime is built below).
        unsafe { std::env::set_var("CALLSMITH_E2E_LOG", "info") };
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let results: Arc<Mutex<Vec<Step>>> = Arc::default();
    let outcome = rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = run(args.clone(), results.clone()) => r,
            _ = tokio::time::sleep(Duration::from_secs(args.timeout_secs)) => {
                Err(anyhow::anyhow!("stopped after --timeout-secs {}", args.timeout_secs))
            }
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted (SIGINT)")),
            _ = term.recv() => Err(anyhow::anyhow!("terminated (SIGTERM)")),
        }
    });
    // Dropping the runtime drops every step still running: their engines and SIPps are
    // killed (kill_on_drop).
    drop(rt);
    let steps = results.lock().expect("results").clone();
    println!(
        "\ncall_rate: {} (load average now {:.2}, {} cores)",
        std::env::args().collect::<Vec<_>>().join(" "),
        loadavg(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    print_tables(&args, &steps);
    if !steps.is_empty() {
        let plots = write_plots(&args, &steps)?;
        println!(
            "\nplots: {}",
            plots
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    outcome
}
