//! `voice_turn`: the bot's response to speech, on the wire (issue #19).
//!
//! Starts the real binary (`$CALLSMITH_BIN`, a release build) with `[speech] local = true`:
//! one supervised speech node (Whisper base with Silero VAD + Smart Turn end of turn,
//! Piper voice `joe`). Its scenario asks "Would you like a callback?" by speech and
//! answers yes, no and anything else with a spoken reply. Per concurrency level N
//! (`--concurrency 1,5,10`) an agent with cpl = N places `--calls-per-level` calls to a
//! callee of this process ([`callsmith_bench::voice::Callee`], the workspace's SIP stack),
//! which answers, waits for the question to end, speaks a flite phrase (a voice other than
//! the bot's) and timestamps, on its own socket, the packet carrying its last voiced frame
//! and the first voiced packet of the reply after it. Two phrase sets (`--sets`): `plain`,
//! 12 short answers, and `paused`, 8 answers with a 300–800 ms pause mid-sentence ("I'd
//! like to … maybe next week"); each level runs each set.
//!
//! Per level and set: on-wire response p50/p95/p99, **false cut-offs** (the bot's voice
//! reached the callee while its phrase, pauses included, was still being spoken: the bot
//! talked over the caller; such a turn has no response time), the history's `response_ms`
//! and its parts (speech end → final transcript → reply requested → first RTP),
//! recognition (the history's final transcript against the whole phrase, normalised: exact
//! phrases, word errors, the branch taken), and the CPU of the engine and of the speech
//! node (% of one core over the level). Writes `voice_turn[_TAG].svg` (the plain set) to
//! `--out` and prints a markdown table.
//!
//! Turn policies (`--policy baseline,hold,patience,interim,recheck,interim+eager,all`, docs/voice.md "Turn
//! policy") are measured side by side in one sitting: each runs on a fresh engine and
//! speech node whose remedies are switched on or off by the node's flags
//! (`--turn-hold`, `--patience`, `--end-of-turn-events`, `--turn-recheck`,
//! `--eager-end-of-turn`), with its own warm-up; every row
//! of the table names its policy, and each policy gets its plot (`voice_turn[_TAG]_POLICY.svg`
//! when several ran).
//!
//! ```sh
//! eval "$(bash scripts/test-deps.sh)"   # CALLSMITH_STT_PYTHON: the speech node's venv
//! cargo build --release -p callsmith-bench -p callsmith-cli --bin voice_turn --bin callsmith
//! CALLSMITH_BIN=$CARGO_TARGET_DIR/release/callsmith \
//!   $CARGO_TARGET_DIR/release/voice_turn --concurrency 1,5,10 --calls-per-level 12
//! # the remedies side by side
//! CALLSMITH_BIN=$CARGO_TARGET_DIR/release/callsmith $CARGO_TARGET_DIR/release/voice_turn \
//!   --concurrency 1,5 --calls-per-level 10 --sets plain,paused \
//!   --policy baseline,hold,patience,interim,recheck,interim+eager,all --tag policies
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use callsmith_bench::calls::{Sampler, all_rows, wait_all_ended};
use callsmith_bench::voice::{self, CallRecord, Callee, Phrase, word_errors};
use callsmith_bench::{Limit, Series, percentile, svg_plot};
use callsmith_domain::objects::CallObjects;
use callsmith_domain::store::communications::CommunicationFilter;
use callsmith_e2e::{
    AgentSpec, Engine, EngineOptions, create_agent, create_scenario, provision, store_of,
};
use callsmith_media::stt::normalize_transcript;
use clap::Parser;
use serde_json::{Value, json};

#[derive(Parser, Debug, Clone)]
#[command(
    about = "End of caller speech → first reply RTP, on the wire, at N concurrent speech calls"
)]
struct Args {
    /// Concurrency levels (the agent's cpl).
    #[arg(long, value_delimiter = ',', default_value = "1,5,10")]
    concurrency: Vec<u32>,
    /// Phrase sets run at each level, in this order: `plain`, `paused`.
    #[arg(long, value_delimiter = ',', default_value = "plain,paused")]
    sets: Vec<String>,
    /// Calls per level (at least twice the level, so the cpl is reached and held).
    #[arg(long, default_value_t = 12)]
    calls_per_level: u32,
    /// Warm-up calls before the first level (one per branch primes the synthesis cache
    /// and the recogniser); not counted.
    #[arg(long, default_value_t = 3)]
    warmup: u32,
    /// Whisper/Piper threads of the speech node (default: the node's, half the cores).
    #[arg(long)]
    speech_threads: Option<usize>,
    /// Turn policies, each measured on a fresh engine and speech node, in this order:
    /// `baseline` (none of the remedies), `hold`, `patience`, `interim`, `recheck`, `eager`,
    /// several joined with `+` (`interim+eager`: the engine acts on the eager end of turn
    /// only with the end-of-turn events on), or `all`. Each names the speech node's switches
    /// ([`policy_args`]); the node's defaults are `all` but `eager`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    policy: Vec<String>,
    /// More arguments of the speech node's server.py (`[speech] args`), e.g.
    /// `--speech-args=--final-window,trim`.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    speech_args: Vec<String>,
    /// The speech node's `server.py` (`[speech] server`; default: the binary's checkout),
    /// e.g. a previous commit's checkout, to measure two nodes side by side in one sitting.
    #[arg(long)]
    speech_server: Option<PathBuf>,
    /// Where the plot goes.
    #[arg(long, default_value = "bench/reports")]
    out: PathBuf,
    /// Suffix of the plot's file name (`voice_turn_TAG.svg`).
    #[arg(long, default_value = "")]
    tag: String,
    /// Whole run bound, seconds.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
}

/// One answered turn: the callee's measurement beside the engine's history.
#[derive(Debug, Clone)]
struct Turn {
    /// None when the bot talked over the caller (`cut_off`).
    wire_ms: Option<f64>,
    /// The bot's voice reached the caller before its phrase ended.
    cut_off: bool,
    history_response_ms: Option<f64>,
    speech_to_final_ms: Option<f64>,
    final_to_requested_ms: Option<f64>,
    requested_to_rtp_ms: Option<f64>,
    /// The transcript is the phrase (normalised).
    exact: bool,
    errors: usize,
    words: usize,
    branch_ok: bool,
    /// The answer was decided from the interim transcript (the turn's `notes` say so).
    from_interim: bool,
    /// An answer was decided at the recogniser's eager end of turn (a turn's `notes`).
    from_eager: bool,
    /// Its reply was taken back (a prompt's outcome `taken_back`).
    taken_back: bool,
    live: usize,
    transcript: String,
    phrase: String,
}

#[derive(Debug, Clone, Default)]
struct Level {
    policy: String,
    n: u32,
    set: String,
    calls: usize,
    completed: usize,
    turns: Vec<Turn>,
    failures: Vec<String>,
    secs: f64,
    engine_cpu_pct: f64,
    node_cpu_pct: f64,
    load: (f64, f64),
}

fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn sorted(v: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = v.filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

fn p(v: &[f64], q: f64) -> String {
    if v.is_empty() {
        "–".into()
    } else {
        format!("{:.0}", percentile(v, q))
    }
}

fn node_pid(e: &Engine) -> Option<u32> {
    let log = e.log();
    let line = log.lines().rfind(|l| l.contains("speech node started"))?;
    let rest = &line[line.find("pid=")? + 4..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

fn diff(a: Option<u64>, b: Option<u64>) -> Option<f64> {
    Some(b? as f64 - a? as f64)
}

/// Reads one call's answer from its history (its last turn: a reply taken back after an
/// eager end of turn leaves a first turn that the second continues) and pairs it with the
/// callee's record.
fn turn_of(h: &Value, rec: &CallRecord, phrase: &Phrase) -> Turn {
    let t = h["turns"]
        .as_array()
        .and_then(|a| a.last())
        .unwrap_or(&Value::Null);
    let u = |k: &str| t[k].as_u64();
    // Recognition is scored on the final transcript: a turn decided from the interim one
    // records its final beside it (`final_transcript`).
    let transcript = t["final_transcript"]
        .as_str()
        .or(t["transcript"].as_str())
        .unwrap_or_default()
        .to_string();
    let (want, got) = (
        normalize_transcript(&phrase.text),
        normalize_transcript(&transcript),
    );
    let (errors, words) = word_errors(&want, &got);
    let goals: Vec<String> = h["goals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str().map(String::from))
        .collect();
    let cut_off = rec.talked_over.is_some();
    Turn {
        wire_ms: rec.response_ms().filter(|_| !cut_off),
        cut_off,
        history_response_ms: u("response_ms").map(|v| v as f64),
        speech_to_final_ms: diff(u("speech_ended_ms"), u("final_ms")),
        final_to_requested_ms: diff(u("final_ms"), u("reply_requested_ms")),
        requested_to_rtp_ms: diff(u("reply_requested_ms"), u("reply_first_rtp_ms")),
        exact: want == got,
        errors,
        words,
        branch_ok: goals.contains(&phrase.branch),
        from_interim: t["notes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n.as_str().is_some_and(|n| n.contains("interim transcript"))),
        from_eager: h["turns"].as_array().into_iter().flatten().any(|t| {
            t["notes"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|n| n.as_str().is_some_and(|n| n.contains("eager end of turn")))
        }),
        taken_back: h["prompts"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["outcome"] == "taken_back"),
        live: rec.live_at_speech_end,
        transcript,
        phrase: phrase.text.clone(),
    }
}

/// The remedies of the turn policy, each a switch of the speech node (docs/voice.md,
/// "Turn policy"): the unfinished-transcript hold, the question's patience, the
/// end-of-turn event that lets an interim transcript decide the answer, Smart Turn asked
/// again while a pause goes on, and the eager end of turn whose reply is taken back when
/// the caller goes on (the engine acts on it only with the end-of-turn events on).
const REMEDIES: &[(&str, &str)] = &[
    ("hold", "--turn-hold"),
    ("patience", "--patience"),
    ("interim", "--end-of-turn-events"),
    ("recheck", "--turn-recheck"),
    ("eager", "--eager-end-of-turn"),
];

/// The speech node's arguments for a policy: `baseline`, `all`, or remedies joined with
/// `+`; each remedy named is on, the others off.
fn policy_args(policy: &str) -> Result<Vec<String>> {
    let on: Vec<&str> = match policy {
        "baseline" => Vec::new(),
        "all" => REMEDIES.iter().map(|(name, _)| *name).collect(),
        p => p.split('+').map(str::trim).collect(),
    };
    if let Some(bad) = on
        .iter()
        .find(|n| !REMEDIES.iter().any(|(name, _)| name == *n))
    {
        let names: Vec<&str> = REMEDIES.iter().map(|(name, _)| *name).collect();
        bail!(
            "--policy {policy:?}: {bad:?} is not baseline, all or one of {}",
            names.join(", ")
        );
    }
    Ok(REMEDIES
        .iter()
        .flat_map(|(name, flag)| {
            let state = if on.contains(name) { "on" } else { "off" };
            [flag.to_string(), state.to_string()]
        })
        .collect())
}

async fn wait_speech_ready(e: &Engine) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let (_, body) = e.get("/readyz", None).await;
        if body["components"]["speech"] == "ok" {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the speech node is not ready after 180 s: {body}\n{}",
                e.log()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn run(args: &Args, levels: &mut Vec<Level>) -> Result<()> {
    let python = std::env::var("CALLSMITH_STT_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/callsmith/speech-venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let dir = tempfile::tempdir()?;
    // Every phrase of both sets; a call's recipient number picks one (`voice::phrase_of`).
    let plain = voice::make_phrases(dir.path())?;
    let paused = voice::make_paused_phrases(dir.path())?;
    let sets: Vec<(String, std::ops::Range<usize>)> = args
        .sets
        .iter()
        .map(|name| match name.as_str() {
            "plain" => Ok((name.clone(), 0..plain.len())),
            "paused" => Ok((name.clone(), plain.len()..plain.len() + paused.len())),
            other => Err(anyhow::anyhow!("--sets: {other:?} is not plain or paused")),
        })
        .collect::<Result<_>>()?;
    let phrases: Vec<Phrase> = plain.into_iter().chain(paused).collect();
    let callee = Callee::start(phrases.clone()).await?;
    let policies: Vec<(String, Vec<String>)> = args
        .policy
        .iter()
        .map(|p| Ok((p.clone(), policy_args(p)?)))
        .collect::<Result<_>>()?;
    // Numbers stay unique across policies: the callee keys its records by them.
    let mut next_call = 0usize;
    for (policy, node_args) in &policies {
        println!("policy {policy}: speech node {}", node_args.join(" "));
        run_policy(
            args,
            &python,
            policy,
            node_args,
            &callee,
            &phrases,
            &sets,
            &mut next_call,
            levels,
        )
        .await?;
    }
    Ok(())
}

/// One policy: a fresh engine and speech node with the policy's switches, its warm-up,
/// then every level and set.
#[allow(clippy::too_many_arguments)]
async fn run_policy(
    args: &Args,
    python: &str,
    policy: &str,
    node_args: &[String],
    callee: &Callee,
    phrases: &[Phrase],
    sets: &[(String, std::ops::Range<usize>)],
    next_call: &mut usize,
    levels: &mut Vec<Level>,
) -> Result<()> {
    let mut speech = format!("[speech]\nlocal = true\npython = {python:?}\n");
    if let Some(t) = args.speech_threads {
        speech.push_str(&format!("threads = {t}\n"));
    }
    if let Some(server) = &args.speech_server {
        speech.push_str(&format!("server = {server:?}\n"));
    }
    let speech_args: Vec<&String> = args.speech_args.iter().chain(node_args).collect();
    speech.push_str(&format!("args = {speech_args:?}\n"));
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        extra_toml: speech,
        dialer_toml: "max_timer_lag_ms = 100\n".into(),
        ..Default::default()
    })
    .await;
    let t0 = Instant::now();
    wait_speech_ready(&e).await?;
    println!(
        "speech node ready after {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let engine_pid = e.pid().context("engine pid")?;
    let node = node_pid(&e).context("speech node pid in the log")?;
    let t = provision(&e, "voice", "carrier", "+4930100900").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &voice::scenario(), true).await;

    // Warm-up: one call per phrase of a different branch, one after the other.
    if args.warmup > 0 {
        let agent = create_agent(
            &store,
            &t,
            &AgentSpec {
                cpl: 1,
                ..AgentSpec::new(scn.clone(), t.number_id.clone())
            },
        )
        .await;
        for _ in 0..args.warmup as usize {
            // Phrases of different branches, one after the other.
            let number = *next_call * phrases.len() + *next_call % phrases.len();
            e.dispatch(
                &t,
                json!({"recipient": format!("+1555{number:07}"), "agent_sid": agent}),
            )
            .await;
            *next_call += 1;
        }
        let f = CommunicationFilter {
            agent_sid: Some(agent),
            ..Default::default()
        };
        if !wait_all_ended(&store, &t.account, &f, Duration::from_secs(120)).await? {
            bail!("warm-up calls did not end\n{}", e.log());
        }
        println!("warm-up: {} calls", args.warmup);
    }

    let levels_and_sets = args
        .concurrency
        .iter()
        .flat_map(|&n| sets.iter().map(move |s| (n, s)));
    for (n, (set, range)) in levels_and_sets {
        let engine_s = Sampler::start(engine_pid);
        let node_s = Sampler::start(node);
        let load0 = loadavg();
        // Starts spread by the cps (calls last ~8 s), so turns do not all end at once.
        let cps = i64::from(n.div_ceil(6).max(1));
        let agent = create_agent(
            &store,
            &t,
            &AgentSpec {
                cps,
                cpl: i64::from(n),
                ..AgentSpec::new(scn.clone(), t.number_id.clone())
            },
        )
        .await;
        let start = Instant::now();
        let calls = args.calls_per_level.max(2 * n);
        for i in 0..calls as usize {
            // A number whose phrase (number modulo the phrases) is the set's i-th.
            let phrase = range.start + i % range.len();
            let number = *next_call * phrases.len() + phrase;
            e.dispatch(
                &t,
                json!({"recipient": format!("+1555{number:07}"), "agent_sid": agent}),
            )
            .await;
            *next_call += 1;
        }
        let f = CommunicationFilter {
            agent_sid: Some(agent),
            ..Default::default()
        };
        let budget = Duration::from_secs(60 + u64::from(calls) * 12 / u64::from(n));
        let all_ended = wait_all_ended(&store, &t.account, &f, budget).await?;
        let end = Instant::now();
        // The callee's record of a call is written when its BYE arrived.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut level = Level {
            policy: policy.to_string(),
            n,
            set: set.clone(),
            secs: end.duration_since(start).as_secs_f64(),
            load: (load0, loadavg()),
            ..Default::default()
        };
        if !all_ended {
            level
                .failures
                .push(format!("calls still open after {budget:?}"));
        }
        let cpu = |s: &Sampler| {
            s.window(start, end)
                .map_or(f64::NAN, |(secs, cpu, _)| cpu / secs * 100.0)
        };
        level.engine_cpu_pct = cpu(&engine_s);
        level.node_cpu_pct = cpu(&node_s);
        let records: BTreeMap<String, CallRecord> = callee.records();
        let rows = all_rows(&store, &t.account, &f).await?;
        level.calls = rows.len();
        for r in &rows {
            let Some(rec) = records.get(&r.recipient) else {
                level
                    .failures
                    .push(format!("{}: the callee saw no call", r.recipient));
                continue;
            };
            if let Some(err) = &rec.error {
                level.failures.push(format!("{}: {err}", r.recipient));
            }
            let path = e.object_path(&CallObjects::new(&t.account, &r.sid).history());
            let Some(h) = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            else {
                level.failures.push(format!(
                    "{}: no history ({:?})",
                    r.recipient, r.communication_status
                ));
                continue;
            };
            level.completed += 1;
            let turn = turn_of(&h, rec, &phrases[rec.phrase]);
            if turn.wire_ms.is_none() && !turn.cut_off {
                level.failures.push(format!(
                    "{}: no reply measured (heard {:?}, transcript {:?})",
                    r.recipient, h["turns"][0]["heard"], turn.transcript
                ));
            }
            level.turns.push(turn);
        }
        print_level(&level);
        levels.push(level);
    }
    Ok(())
}

fn print_level(l: &Level) {
    let wire = sorted(l.turns.iter().filter_map(|t| t.wire_ms));
    println!(
        "policy {}, level {} ({} set): {} calls, {} turns measured, {} false cut-offs in {:.0} s; on-wire p50 {} p95 {} ms; engine {:.0} %, node {:.0} % of a core",
        l.policy,
        l.n,
        l.set,
        l.calls,
        wire.len(),
        l.turns.iter().filter(|t| t.cut_off).count(),
        l.secs,
        p(&wire, 50.0),
        p(&wire, 95.0),
        l.engine_cpu_pct,
        l.node_cpu_pct
    );
    for t in &l.turns {
        if t.cut_off {
            println!("  talked over {:?} (heard {:?})", t.phrase, t.transcript);
        } else if !t.exact {
            println!("  heard {:?} for {:?}", t.transcript, t.phrase);
        }
    }
    for f in &l.failures {
        println!("  failure: {f}");
    }
}

fn print_table(levels: &[Level]) {
    println!(
        "\n| policy | calls live (cpl) | set | turns | false cut-offs | on-wire p50 / p95 / p99 ms | history response_ms p50 | speech end → final p50 | final → reply requested p50 | → first RTP p50 | mean live at speech end | exact phrases | word errors | branch right | from interim | eager / taken back | engine CPU % | node CPU % | load 1-min |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for l in levels {
        let wire = sorted(l.turns.iter().filter_map(|t| t.wire_ms));
        let hist = sorted(l.turns.iter().filter_map(|t| t.history_response_ms));
        let s2f = sorted(l.turns.iter().filter_map(|t| t.speech_to_final_ms));
        let f2r = sorted(l.turns.iter().filter_map(|t| t.final_to_requested_ms));
        let r2p = sorted(l.turns.iter().filter_map(|t| t.requested_to_rtp_ms));
        let n = l.turns.len().max(1) as f64;
        let exact = l.turns.iter().filter(|t| t.exact).count();
        let (errs, words) = l
            .turns
            .iter()
            .fold((0, 0), |a, t| (a.0 + t.errors, a.1 + t.words));
        let branch = l.turns.iter().filter(|t| t.branch_ok).count();
        let cut = l.turns.iter().filter(|t| t.cut_off).count();
        let live = l.turns.iter().map(|t| t.live as f64).sum::<f64>() / n;
        println!(
            "| {} | {} | {} | {} | {}/{} ({:.0} %) | {} / {} / {} | {} | {} | {} | {} | {:.1} | {}/{} ({:.0} %) | {:.1} % | {}/{} | {}/{} | {}/{} | {:.0} | {:.0} | {:.1}–{:.1} |",
            l.policy,
            l.n,
            l.set,
            l.turns.len(),
            cut,
            l.turns.len(),
            cut as f64 * 100.0 / n,
            p(&wire, 50.0),
            p(&wire, 95.0),
            p(&wire, 99.0),
            p(&hist, 50.0),
            p(&s2f, 50.0),
            p(&f2r, 50.0),
            p(&r2p, 50.0),
            live,
            exact,
            l.turns.len(),
            exact as f64 * 100.0 / n,
            errs as f64 * 100.0 / words.max(1) as f64,
            branch,
            l.turns.len(),
            l.turns.iter().filter(|t| t.from_interim).count(),
            l.turns.len(),
            l.turns.iter().filter(|t| t.from_eager).count(),
            l.turns.iter().filter(|t| t.taken_back).count(),
            l.engine_cpu_pct,
            l.node_cpu_pct,
            l.load.0,
            l.load.1
        );
    }
    // The difference between the two clocks of one turn: the callee's wire time against
    // the engine's own response_ms.
    let d = sorted(levels.iter().flat_map(|l| {
        l.turns
            .iter()
            .filter_map(|t| Some(t.wire_ms? - t.history_response_ms?))
    }));
    if !d.is_empty() {
        println!(
            "\non-wire minus history response_ms: p5 {} p50 {} p95 {} ms",
            p(&d, 5.0),
            p(&d, 50.0),
            p(&d, 95.0)
        );
    }
}

/// One plot per policy (`voice_turn[_TAG][_POLICY].svg`, the policy named when several
/// ran).
fn write_plots(args: &Args, levels: &[Level]) -> Result<Vec<PathBuf>> {
    let several = args.policy.len() > 1;
    args.policy
        .iter()
        .map(|policy| {
            let of: Vec<Level> = levels
                .iter()
                .filter(|l| &l.policy == policy)
                .cloned()
                .collect();
            let suffix: Vec<&str> = [args.tag.as_str(), if several { policy } else { "" }]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect();
            write_plot(args, &of, policy, &suffix.join("_"))
        })
        .collect()
}

fn write_plot(args: &Args, levels: &[Level], policy: &str, suffix: &str) -> Result<PathBuf> {
    let paused: Vec<&Level> = levels.iter().filter(|l| l.set == "paused").collect();
    let levels: Vec<&Level> = levels.iter().filter(|l| l.set == "plain").collect();
    let q = |f: fn(&Turn) -> Option<f64>, pct: f64| -> Vec<(f64, f64)> {
        levels
            .iter()
            .filter_map(|l| {
                let v = sorted(l.turns.iter().filter_map(f));
                (!v.is_empty()).then(|| (f64::from(l.n), percentile(&v, pct)))
            })
            .collect()
    };
    let series = vec![
        Series {
            name: "on-wire, each turn".into(),
            color: "#999".into(),
            points: levels
                .iter()
                .flat_map(|l| {
                    l.turns
                        .iter()
                        .filter_map(move |t| Some((f64::from(l.n), t.wire_ms?)))
                })
                .collect(),
            line: false,
        },
        Series {
            name: "on-wire p50".into(),
            color: "#1f77b4".into(),
            points: q(|t| t.wire_ms, 50.0),
            line: true,
        },
        Series {
            name: "on-wire p95".into(),
            color: "#d62728".into(),
            points: q(|t| t.wire_ms, 95.0),
            line: true,
        },
        Series {
            name: "history response p50".into(),
            color: "#2ca02c".into(),
            points: q(|t| t.history_response_ms, 50.0),
            line: true,
        },
        Series {
            name: "speech end → final p50".into(),
            color: "#ff7f0e".into(),
            points: q(|t| t.speech_to_final_ms, 50.0),
            line: true,
        },
        Series {
            name: "paused set on-wire p50".into(),
            color: "#9467bd".into(),
            points: paused
                .iter()
                .filter_map(|l| {
                    let v = sorted(l.turns.iter().filter_map(|t| t.wire_ms));
                    (!v.is_empty()).then(|| (f64::from(l.n), percentile(&v, 50.0)))
                })
                .collect(),
            line: true,
        },
    ];
    let limits = [
        Limit {
            y: 300.0,
            label: "p50 target 300".into(),
        },
        Limit {
            y: 600.0,
            label: "p95 target 600".into(),
        },
    ];
    let title = format!("End of caller speech → first reply audio (voice_turn, policy {policy})");
    let svg = svg_plot(
        &title,
        "concurrent speech calls (cpl)",
        "ms",
        &series,
        &limits,
    );
    std::fs::create_dir_all(&args.out)?;
    let name = if suffix.is_empty() {
        "voice_turn.svg".to_string()
    } else {
        format!("voice_turn_{suffix}.svg")
    };
    let path = args.out.join(name);
    std::fs::write(&path, svg)?;
    Ok(path)
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.concurrency.contains(&0) || args.calls_per_level == 0 {
        bail!("--concurrency levels and --calls-per-level must be at least 1");
    }
    for p in &args.policy {
        policy_args(p)?;
    }
    if std::env::var_os("CALLSMITH_E2E_LOG").is_none() {
        // SAFETY: no other thread exists yet (the runtime is built below).
        unsafe { std::env::set_var("CALLSMITH_E2E_LOG", "info") };
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut levels = Vec::new();
    let outcome = rt.block_on(async {
        tokio::select! {
            r = run(&args, &mut levels) => r,
            _ = tokio::time::sleep(Duration::from_secs(args.timeout_secs)) => {
                Err(anyhow::anyhow!("stopped after --timeout-secs {}", args.timeout_secs))
            }
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted (SIGINT)")),
        }
    });
    // Dropping the runtime kills the engine (and with it the speech node).
    drop(rt);
    println!(
        "\nvoice_turn: {} (load average now {:.2}, {} cores)",
        std::env::args().collect::<Vec<_>>().join(" "),
        loadavg(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    if !levels.is_empty() {
        print_table(&levels);
        for path in write_plots(&args, &levels)? {
            println!("\nplot: {}", path.display());
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::{CallRecord, Phrase, json, policy_args, turn_of};

    /// A turn decided from the interim transcript is scored on its final, recorded
    /// beside it; a turn without one on its transcript.
    #[test]
    fn recognition_is_scored_on_the_final_transcript() {
        let phrase = Phrase {
            text: "Yes, in the afternoon.".into(),
            branch: "yes".into(),
            frames: Vec::new(),
            last_voiced: 0,
            pause_ms: None,
        };
        let history = |turn| json!({"turns": [turn], "goals": ["yes"]});
        let rec = CallRecord::default();
        let decided = history(json!({
            "transcript": "Yes", "final_transcript": "yes in the afternoon",
            "notes": ["answer decided from the interim transcript at the recogniser's end of turn, before its final"],
        }));
        let t = turn_of(&decided, &rec, &phrase);
        assert!(t.exact && t.from_interim && t.branch_ok, "{t:?}");
        assert!(!t.from_eager && !t.taken_back);
        assert_eq!(t.errors, 0);
        let plain = history(json!({"transcript": "yes in the afternoon"}));
        assert!(turn_of(&plain, &rec, &phrase).exact);
        // A reply taken back: the second turn, which continues the first, is the answer.
        let taken_back = json!({"turns": [
            {"transcript": "Yes", "notes": ["answer decided from the transcript at the recogniser's eager end of turn, before its end of turn"]},
            {"transcript": "yes in the afternoon"}],
            "prompts": [{"outcome": "completed"}, {"outcome": "taken_back"}, {"outcome": "completed"}],
            "goals": ["yes"]});
        let t = turn_of(&taken_back, &rec, &phrase);
        assert!(
            t.exact && t.from_eager && t.taken_back && !t.from_interim,
            "{t:?}"
        );
        let interim_only = history(json!({"transcript": "Yes"}));
        let t = turn_of(&interim_only, &rec, &phrase);
        assert!(!t.exact && t.errors == 3, "{t:?}");
    }

    #[test]
    fn each_policy_names_the_speech_nodes_switches() {
        let flags = |p: &str| policy_args(p).unwrap().join(" ");
        assert_eq!(
            flags("baseline"),
            "--turn-hold off --patience off --end-of-turn-events off --turn-recheck off --eager-end-of-turn off"
        );
        assert_eq!(
            flags("hold"),
            "--turn-hold on --patience off --end-of-turn-events off --turn-recheck off --eager-end-of-turn off"
        );
        assert_eq!(
            flags("patience+interim"),
            "--turn-hold off --patience on --end-of-turn-events on --turn-recheck off --eager-end-of-turn off"
        );
        assert_eq!(
            flags("recheck"),
            "--turn-hold off --patience off --end-of-turn-events off --turn-recheck on --eager-end-of-turn off"
        );
        assert_eq!(
            flags("all"),
            "--turn-hold on --patience on --end-of-turn-events on --turn-recheck on --eager-end-of-turn on"
        );
        assert_eq!(
            flags("interim+eager"),
            "--turn-hold off --patience off --end-of-turn-events on --turn-recheck off --eager-end-of-turn on"
        );
        assert!(policy_args("eagerly").is_err());
        assert!(policy_args("hold+soon").is_err());
    }
}
