//! `amd_bench`: how well answering-machine detection tells people from machines (issue #44).
//!
//! The labelled clip set of [`callsmith_bench::amd_set`] (generated and cached on first
//! use) goes through the detector two ways:
//!
//! - **offline**: each clip straight into the sans-IO detector
//!   (`callsmith_media::amd::detect_recorded`: the live path's VAD, detector and beep wait)
//!   — seconds for the whole set, for tuning;
//! - **calls**: real calls. The engine binary (`$CALLSMITH_BIN`, else the target dir's
//!   debug build) dials, through a SIP trunk on loopback, a callee of this process (the
//!   workspace's SIP stack) that answers and plays the clip chosen by the called number as
//!   RTP (µ-law, 20 ms packets), then silence until the BYE. The agent has
//!   `voicemail_enabled`; its scenario is start_call → outbound_call (`is_voicemail`) →
//!   a goal `human` or `machine` → end_call. The verdict is the history's
//!   `answering_machine` event; its time is that event's `at_ms` minus the outbound_call
//!   brick's entry (for a machine it includes the engine's wait for the beep).
//!
//! Reported per way: accuracy, the share of people called machines, the share of machines
//! called people, and the decision time (median, p90): the first verdict's audio time
//! offline, the verdict event in calls. Every miss is listed. `--report` writes
//! bench/reports/amd.md.
//!
//! ```sh
//! cargo build -p callsmith-cli --bin callsmith -p callsmith-bench --bin amd_bench
//! $CARGO_TARGET_DIR/debug/amd_bench --mode both --report bench/reports/amd.md
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use callsmith_bench::amd_set::{self, Clip, Label};
use callsmith_bench::calls::{all_rows, wait_all_ended};
use callsmith_bench::percentile;
use callsmith_domain::objects::CallObjects;
use callsmith_domain::store::communications::CommunicationFilter;
use callsmith_e2e::scenario::{brick, next, outs, snapshot};
use callsmith_e2e::{Engine, EngineOptions, create_scenario, provision, store_of};
use callsmith_media::amd::{AmdConfig, AmdDecision, detect_recorded};
use callsmith_sip::{LegEvent, SdpCodec, SipConfig, SipStack, TrunkConfig};
use clap::{Parser, ValueEnum};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Offline,
    Calls,
    Both,
}

#[derive(Parser, Debug)]
#[command(about = "Answering-machine detection against a labelled set of generated clips")]
struct Args {
    #[arg(long, value_enum, default_value = "both")]
    mode: Mode,
    /// Calls in flight at once (the agent's cpl).
    #[arg(long, default_value_t = 8)]
    concurrency: u32,
    /// Only clips whose id starts with one of these (e.g. `h0,m1`).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Write the report here (markdown).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Offline runs, one per value: the detector starts this many ms into each clip (in a
    /// call it starts when the outbound_call brick is entered, a moment after the answer,
    /// while the callee already plays).
    #[arg(long, value_delimiter = ',', default_value = "0,200,400")]
    offsets_ms: Vec<u32>,
    /// Print every clip's outcome.
    #[arg(long)]
    verbose: bool,
    /// Regenerate the clip set even when cached.
    #[arg(long)]
    regenerate: bool,
    /// Whole run bound, seconds.
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
}

/// The engine's settings for live calls (engine/src/call/port.rs `amd_config`).
fn live_config() -> AmdConfig {
    AmdConfig {
        beep_wait_ms: 10_000,
        ..AmdConfig::default()
    }
}

/// One clip's outcome in one way.
#[derive(Debug, Clone)]
struct Outcome {
    id: String,
    label: Label,
    /// Called a machine (machine or beep); None: no verdict (unknown).
    machine: Option<bool>,
    verdict: String,
    decision_ms: Option<f64>,
}

impl Outcome {
    fn correct(&self) -> bool {
        self.machine == Some(self.label == Label::Machine)
    }
}

#[derive(Debug, Clone, Default)]
struct Figures {
    n: usize,
    humans: usize,
    machines: usize,
    correct: usize,
    human_as_machine: usize,
    machine_as_human: usize,
    no_verdict: usize,
    decision: Vec<f64>,
    human_decision: Vec<f64>,
    machine_decision: Vec<f64>,
}

fn figures(outcomes: &[Outcome]) -> Figures {
    let mut f = Figures {
        n: outcomes.len(),
        ..Default::default()
    };
    for o in outcomes {
        match o.label {
            Label::Human => f.humans += 1,
            Label::Machine => f.machines += 1,
        }
        if o.correct() {
            f.correct += 1;
        }
        match (o.label, o.machine) {
            (Label::Human, Some(true)) => f.human_as_machine += 1,
            (Label::Machine, Some(false)) => f.machine_as_human += 1,
            (_, None) => f.no_verdict += 1,
            _ => {}
        }
        if let Some(ms) = o.decision_ms {
            f.decision.push(ms);
            match o.label {
                Label::Human => f.human_decision.push(ms),
                Label::Machine => f.machine_decision.push(ms),
            }
        }
    }
    for v in [
        &mut f.decision,
        &mut f.human_decision,
        &mut f.machine_decision,
    ] {
        v.sort_by(f64::total_cmp);
    }
    f
}

fn pct(a: usize, b: usize) -> f64 {
    a as f64 * 100.0 / b.max(1) as f64
}

fn secs(v: &[f64], q: f64) -> String {
    if v.is_empty() {
        "–".into()
    } else {
        format!("{:.2}", percentile(v, q) / 1000.0)
    }
}

/// Whether the verdict targets hold: ≥ 95 % accuracy, ≤ 2 % of people called machines.
fn verdict_targets(f: &Figures) -> bool {
    pct(f.correct, f.n) >= 95.0 && pct(f.human_as_machine, f.humans) <= 2.0
}

/// What a way's times measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timing {
    /// The detector's first verdict (offline): the decision-time target applies.
    FirstVerdict,
    /// The history's verdict event (real calls): a person's wait, a machine's beep wait.
    VerdictEvent,
}

fn table_row(way: &str, f: &Figures, timing: Timing) -> String {
    let targets = match timing {
        Timing::FirstVerdict => {
            let ok = verdict_targets(f)
                && !f.decision.is_empty()
                && percentile(&f.decision, 50.0) <= 2500.0;
            if ok { "yes" } else { "no" }
        }
        Timing::VerdictEvent => {
            if verdict_targets(f) {
                "verdicts: yes"
            } else {
                "verdicts: no"
            }
        }
    };
    format!(
        "| {way} | {} ({} people, {} machines) | {}/{} = {:.1} % | {}/{} = {:.1} % | {}/{} = {:.1} % | {} | {} | {} / {} | {} / {} | {} / {} | {targets} |",
        f.n,
        f.humans,
        f.machines,
        f.correct,
        f.n,
        pct(f.correct, f.n),
        f.human_as_machine,
        f.humans,
        pct(f.human_as_machine, f.humans),
        f.machine_as_human,
        f.machines,
        pct(f.machine_as_human, f.machines),
        f.no_verdict,
        match timing {
            Timing::FirstVerdict => "first verdict",
            Timing::VerdictEvent => "verdict event (machines: after the beep wait)",
        },
        secs(&f.decision, 50.0),
        secs(&f.decision, 90.0),
        secs(&f.human_decision, 50.0),
        secs(&f.human_decision, 90.0),
        secs(&f.machine_decision, 50.0),
        secs(&f.machine_decision, 90.0),
    )
}

const TABLE_HEAD: &str = "| way | clips | accuracy | people called machines | machines called people | no verdict | time measured | all p50 / p90 s | people p50 / p90 s | machines p50 / p90 s | targets met |\n|---|---|---|---|---|---|---|---|---|---|---|";

fn misses(outcomes: &[Outcome], clips: &BTreeMap<String, Clip>) -> Vec<String> {
    outcomes
        .iter()
        .filter(|o| !o.correct())
        .map(|o| {
            let c = &clips[&o.id].info;
            let beep = match (c.beep_hz, c.beep_ms, c.gap_ms) {
                (Some(hz), Some(ms), Some(gap)) => format!(", beep {hz} Hz {ms} ms after {gap} ms"),
                _ => String::new(),
            };
            format!(
                "- `{}` ({:?}, {}, {}, {:?}, speech {} ms, lead {} ms, noise {}, {} dBFS{beep}) → {}{}",
                o.id,
                o.label,
                c.kind,
                c.voice,
                c.text,
                c.speech_ms,
                c.lead_ms,
                c.noise,
                c.speech_dbfs,
                o.verdict,
                o.decision_ms
                    .map(|ms| format!(" after {:.2} s", ms / 1000.0))
                    .unwrap_or_default()
            )
        })
        .collect()
}

fn offline(clips: &[Clip], offset_ms: u32) -> Vec<Outcome> {
    let cfg = live_config();
    clips
        .iter()
        .map(|c| {
            let pcm = c.pcm();
            let skip = (offset_ms as usize * 8).min(pcm.len());
            let d = detect_recorded(&pcm[skip..], cfg);
            let machine = match d.verdict {
                AmdDecision::Machine | AmdDecision::Beep => Some(true),
                AmdDecision::Human => Some(false),
                AmdDecision::Undecided => None,
            };
            Outcome {
                id: c.info.id.clone(),
                label: c.info.label,
                machine,
                verdict: format!("{:?}", d.verdict).to_lowercase(),
                decision_ms: d.decided_at_ms.map(f64::from),
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Real calls.

/// What went wrong on the callee's side of one call.
#[derive(Debug, Clone, Default)]
struct CalleeRecord {
    error: Option<String>,
}

/// The clip index of a called number: its last four digits.
fn clip_of(to: &str) -> Option<usize> {
    let digits: String = to.chars().filter(char::is_ascii_digit).collect();
    digits.get(digits.len().checked_sub(4)?..)?.parse().ok()
}

fn number_of(i: usize) -> String {
    format!("+1555044{i:04}")
}

struct Callee {
    _stack: Arc<SipStack>,
    addr: SocketAddr,
    records: Arc<Mutex<BTreeMap<String, CalleeRecord>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Callee {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Callee {
    async fn start(clips: Arc<Vec<Clip>>) -> Result<Callee> {
        let cfg = SipConfig {
            udp: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            tcp: None,
            trunks: vec![TrunkConfig::new(
                "engine",
                SocketAddr::from(([127, 0, 0, 1], 5999)),
            )],
            default_trunk: None,
            codecs: vec![SdpCodec::Pcmu],
            user_agent: "amd_bench-callee".into(),
            ..Default::default()
        };
        let stack = Arc::new(
            SipStack::start(cfg, |_: &str, _: &str| true)
                .await
                .context("callee SIP stack")?,
        );
        let addr = stack.udp_addr().context("callee SIP address")?;
        let mut incoming = stack.take_incoming().context("incoming calls")?;
        let records: Arc<Mutex<BTreeMap<String, CalleeRecord>>> = Arc::default();
        let r2 = records.clone();
        let task = tokio::spawn(async move {
            while let Some(call) = incoming.recv().await {
                let (records, clips) = (r2.clone(), clips.clone());
                tokio::spawn(async move {
                    let to = call.to.clone();
                    let clip = clip_of(&to).and_then(|i| clips.get(i));
                    let mut rec = CalleeRecord::default();
                    match clip {
                        Some(c) => {
                            if let Err(e) = play(call, &c.ulaw).await {
                                rec.error = Some(format!("{e:#}"));
                            }
                        }
                        None => rec.error = Some(format!("no clip for {to}")),
                    }
                    records.lock().expect("records").insert(to, rec);
                });
            }
        });
        Ok(Callee {
            _stack: stack,
            addr,
            records,
            task,
        })
    }

    fn records(&self) -> BTreeMap<String, CalleeRecord> {
        self.records.lock().expect("records").clone()
    }
}

/// Answers, plays the clip as 20 ms µ-law packets, then silence, until the BYE.
async fn play(call: callsmith_sip::IncomingCall, ulaw: &[u8]) -> Result<()> {
    let (sock, mut leg, media) = callsmith_bench::voice::answer_pcmu(call).await?;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let (mut seq, mut ts) = (0u16, 0u32);
    let mut frames = ulaw.chunks(160);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut buf = [0u8; 2048];
    loop {
        tokio::select! {
            ev = leg.next_event() => match ev {
                Some(LegEvent::Ended(_)) | None => return Ok(()),
                Some(_) => {}
            },
            // Drain what the engine sends (the bot is silent in this scenario).
            _ = sock.recv_from(&mut buf) => {}
            _ = tick.tick() => {
                if Instant::now() > deadline {
                    leg.hangup();
                    bail!("the call lasted 60 s");
                }
                let mut payload = [0xFFu8; 160];
                if let Some(f) = frames.next() {
                    payload[..f.len()].copy_from_slice(f);
                }
                let mut pkt = Vec::with_capacity(172);
                pkt.extend_from_slice(&[0x80, 0]);
                pkt.extend_from_slice(&seq.to_be_bytes());
                pkt.extend_from_slice(&ts.to_be_bytes());
                pkt.extend_from_slice(&0x0a3d_0044u32.to_be_bytes());
                pkt.extend_from_slice(&payload);
                let _ = sock.send_to(&pkt, media.remote_rtp).await;
                seq = seq.wrapping_add(1);
                ts = ts.wrapping_add(160);
            }
        }
    }
}

/// start_call → outbound_call (is_voicemail) → goal human|machine → end_call.
fn scenario() -> Value {
    snapshot(
        "amd bench",
        json!({
            "start_call": {"v1": [brick("s", json!({
                "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""},
                "stt_general": {"language": "en-US", "engine": "whisper", "model": "", "primary_language": "", "fallback_languages": []}
            }), next("oc"))]},
            "outbound_call": {"v1": [brick("oc", json!({"is_voicemail": true}),
                outs(&[("human", "g_human"), ("voicemail", "g_machine")]))]},
            "goal": {"v1": [brick("g_human", json!({"goal": "human"}), next("bye")),
                            brick("g_machine", json!({"goal": "machine"}), next("bye"))]},
            "end_call": {"v1": [brick("bye", json!({"signal": ""}), json!([]))]}
        }),
    )
}

fn trace_at(h: &Value, event: &str, brick: &str) -> Option<i64> {
    h["trace"].as_array()?.iter().find_map(|e| {
        (e["event"] == event && e["brick_id"] == brick)
            .then(|| e["at_ms"].as_i64())
            .flatten()
    })
}

async fn calls(clips: &[Clip], concurrency: u32) -> Result<(Vec<Outcome>, Vec<String>)> {
    let shared = Arc::new(clips.to_vec());
    let callee = Callee::start(shared.clone()).await?;
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "amd", "carrier", "+4930100944").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &scenario(), true).await;
    let agent = e
        .post_ok(
            "/v1/agent",
            Some(&t.account),
            json!({"gateway_type": "number", "number_sid": t.number_id, "scenario_sid": scn,
                   "voicemail_enabled": true,
                   "limits": {"cps": concurrency, "cpl": concurrency}}),
            201,
        )
        .await;
    let agent = agent["id"].as_str().context("agent id")?.to_string();
    for i in 0..clips.len() {
        e.dispatch(&t, json!({"recipient": number_of(i), "agent_sid": agent}))
            .await;
    }
    let f = CommunicationFilter {
        agent_sid: Some(agent),
        ..Default::default()
    };
    let longest = clips.iter().map(|c| c.info.clip_ms).max().unwrap_or(0);
    let budget = Duration::from_secs(
        60 + (clips.len() as u64 * (u64::from(longest) / 1000 + 12)) / u64::from(concurrency),
    );
    let mut failures = Vec::new();
    if !wait_all_ended(&store, &t.account, &f, budget).await? {
        failures.push(format!("calls still open after {budget:?}"));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let records = callee.records();
    let mut outcomes = Vec::new();
    for r in all_rows(&store, &t.account, &f).await? {
        let Some(i) = clip_of(&r.recipient).filter(|i| *i < clips.len()) else {
            failures.push(format!("{}: not a clip's number", r.recipient));
            continue;
        };
        let clip = &clips[i];
        if let Some(err) = records.get(&r.recipient).and_then(|c| c.error.clone()) {
            failures.push(format!("{} ({}): callee: {err}", r.recipient, clip.info.id));
        }
        let path = e.object_path(&CallObjects::new(&t.account, &r.sid).history());
        let Some(h) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        else {
            failures.push(format!(
                "{} ({}): no history ({:?})",
                r.recipient, clip.info.id, r.communication_status
            ));
            continue;
        };
        let ev = h["trace"].as_array().and_then(|t| {
            t.iter()
                .find(|e| e["event"] == "answering_machine")
                .cloned()
        });
        let verdict = ev
            .as_ref()
            .and_then(|e| e["verdict"].as_str())
            .unwrap_or("none")
            .to_string();
        let machine = match verdict.as_str() {
            "machine" => Some(true),
            "human" => Some(false),
            _ => None,
        };
        let decision_ms = trace_at(&h, "answering_machine", "oc")
            .zip(trace_at(&h, "brick_entered", "oc"))
            .map(|(a, b)| (a - b) as f64);
        outcomes.push(Outcome {
            id: clip.info.id.clone(),
            label: clip.info.label,
            machine,
            verdict,
            decision_ms,
        });
    }
    outcomes.sort_by(|a, b| a.id.cmp(&b.id));
    Ok((outcomes, failures))
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(String::from))
        .unwrap_or_default()
}

/// The name of an offline run.
fn offline_way(offset_ms: u32) -> String {
    if offset_ms == 0 {
        "offline (detector)".into()
    } else {
        format!("offline (detector), from {offset_ms} ms")
    }
}

fn report(
    args: &Args,
    clips: &[Clip],
    offline: &[(u32, Vec<Outcome>)],
    calls: Option<&(Vec<Outcome>, Vec<String>)>,
) -> String {
    let by_id: BTreeMap<String, Clip> = clips
        .iter()
        .map(|c| (c.info.id.clone(), c.clone()))
        .collect();
    let humans = clips
        .iter()
        .filter(|c| c.info.label == Label::Human)
        .count();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for c in clips {
        *kinds.entry(c.info.kind.as_str()).or_default() += 1;
    }
    let mut s = String::new();
    s.push_str(&format!(
        "## Results\n\n`amd_bench --mode {}` on set {} ({} clips: {} people, {} machines; {}), load average {} ({} cores).\n\n",
        format!("{:?}", args.mode).to_lowercase(),
        amd_set::SET_VERSION,
        clips.len(),
        humans,
        clips.len() - humans,
        kinds
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", "),
        loadavg(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    ));
    s.push_str(TABLE_HEAD);
    s.push('\n');
    for (ms, o) in offline {
        s.push_str(&table_row(
            &offline_way(*ms),
            &figures(o),
            Timing::FirstVerdict,
        ));
        s.push('\n');
    }
    if let Some((o, _)) = calls {
        s.push_str(&table_row(
            "real calls (engine)",
            &figures(o),
            Timing::VerdictEvent,
        ));
        s.push('\n');
    }
    s.push_str(
        "\nTargets: accuracy ≥ 95 %, people called machines ≤ 2 %, median decision ≤ 2.5 s. The \
         decision time is the first verdict's, which only the offline run sees: in a call a \
         machine's verdict event comes after the beep (or 1.6 s without speech), by design; \
         a person's verdict event is their wait for the bot.\n",
    );
    if let (Some((_, off)), Some((on, _))) = (offline.first(), calls) {
        let off: BTreeMap<&str, &Outcome> = off.iter().map(|o| (o.id.as_str(), o)).collect();
        let same = on
            .iter()
            .filter(|o| {
                off.get(o.id.as_str())
                    .is_some_and(|f| f.machine == o.machine)
            })
            .count();
        s.push_str(&format!(
            "\nThe real calls and the first offline run agree on {same} of {} clips.\n",
            on.len()
        ));
    }
    let ways = offline
        .iter()
        .map(|(ms, o)| (offline_way(*ms), o.as_slice()))
        .chain(calls.map(|c| ("real calls".to_string(), c.0.as_slice())));
    for (way, o) in ways {
        {
            let m = misses(o, &by_id);
            s.push_str(&format!("\nMisses ({way}): {}\n", m.len()));
            if !m.is_empty() {
                s.push('\n');
            }
            for line in m {
                s.push_str(&line);
                s.push('\n');
            }
        }
    }
    if let Some((_, failures)) = calls
        && !failures.is_empty()
    {
        s.push_str("\nCall failures:\n\n");
        for f in failures {
            s.push_str(&format!("- {f}\n"));
        }
    }
    s
}

async fn run(args: &Args) -> Result<String> {
    if args.regenerate {
        amd_set::generate(&amd_set::cache_dir())?;
    }
    let mut clips = amd_set::load_or_generate()?;
    if !args.only.is_empty() {
        clips.retain(|c| args.only.iter().any(|p| c.info.id.starts_with(p.as_str())));
    }
    if clips.is_empty() {
        bail!("no clip selected");
    }
    println!(
        "{} clips from {}",
        clips.len(),
        amd_set::cache_dir().display()
    );
    let off: Vec<(u32, Vec<Outcome>)> = if matches!(args.mode, Mode::Offline | Mode::Both) {
        args.offsets_ms
            .iter()
            .map(|&ms| (ms, offline(&clips, ms)))
            .collect()
    } else {
        Vec::new()
    };
    println!("{TABLE_HEAD}");
    for (ms, o) in &off {
        if args.verbose {
            for o in o {
                println!(
                    "{ms} {} {:?} {} {:?}",
                    o.id, o.label, o.verdict, o.decision_ms
                );
            }
        }
        println!(
            "{}",
            table_row(&offline_way(*ms), &figures(o), Timing::FirstVerdict)
        );
    }
    let on = if matches!(args.mode, Mode::Calls | Mode::Both) {
        let r = calls(&clips, args.concurrency).await?;
        println!(
            "{}",
            table_row("real calls (engine)", &figures(&r.0), Timing::VerdictEvent)
        );
        Some(r)
    } else {
        None
    };
    Ok(report(args, &clips, &off, on.as_ref()))
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let out = rt.block_on(async {
        tokio::select! {
            r = run(&args) => r,
            _ = tokio::time::sleep(Duration::from_secs(args.timeout_secs)) => {
                Err(anyhow::anyhow!("stopped after --timeout-secs {}", args.timeout_secs))
            }
        }
    });
    drop(rt);
    let results = out?;
    println!("\n{results}");
    if let Some(path) = &args.report {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // The report keeps its hand-written method above the generated results.
        let head = text
            .find("## Results")
            .map_or(text.as_str(), |i| &text[..i]);
        std::fs::write(path, format!("{head}{results}"))?;
        println!("report: {}", path.display());
    }
    Ok(())
}
