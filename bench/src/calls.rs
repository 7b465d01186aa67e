//! The calls of the load generators: SIPp processes as callers and callees with the
//! audio they stream, the engine process sampled from `/proc`, the scenario the engine
//! runs, and the engine's own record of the calls (its communications and histories).

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use callsmith_domain::communication::CommunicationStatus;
use callsmith_domain::objects::CallObjects;
use callsmith_domain::store::CommunicationRecord;
use callsmith_domain::store::communications::CommunicationFilter;
use callsmith_e2e::{Engine, free_udp_port, reply_scenario, ulaw_tone, workspace};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::{
    CLK_TCK, ProcStat, SippStat, proc_stat, read_sipp_errors, read_sipp_rtts, read_sipp_stat,
};

/// `/proc/<pid>/stat` every 100 ms until the process is gone or a zombie.
pub struct Sampler {
    samples: Arc<Mutex<Vec<(Instant, ProcStat)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sampler {
    pub fn start(pid: u32) -> Sampler {
        let samples: Arc<Mutex<Vec<(Instant, ProcStat)>>> = Arc::default();
        let s2 = samples.clone();
        let task = tokio::spawn(async move {
            while let Some(s) = proc_stat(pid) {
                s2.lock().expect("samples").push((Instant::now(), s));
                if s.state == 'Z' {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Sampler { samples, task }
    }

    pub fn last(&self) -> Option<ProcStat> {
        self.samples.lock().expect("samples").last().map(|s| s.1)
    }

    pub fn first(&self) -> Option<ProcStat> {
        self.samples.lock().expect("samples").first().map(|s| s.1)
    }

    pub fn peak_rss(&self) -> u64 {
        self.samples
            .lock()
            .expect("samples")
            .iter()
            .map(|s| s.1.rss_kib)
            .max()
            .unwrap_or(0)
    }

    /// The process over `[from, to]`: seconds between the first and last reading inside,
    /// CPU seconds spent between them, and the highest RSS read.
    pub fn window(&self, from: Instant, to: Instant) -> Option<(f64, f64, u64)> {
        let samples = self.samples.lock().expect("samples");
        let inside: Vec<&(Instant, ProcStat)> = samples
            .iter()
            .filter(|s| s.0 >= from && s.0 <= to)
            .collect();
        let (a, b) = (inside.first()?, inside.last()?);
        let secs = b.0.duration_since(a.0).as_secs_f64();
        (secs > 1.0).then(|| {
            (
                secs,
                (b.1.cpu_ticks - a.1.cpu_ticks) as f64 / CLK_TCK,
                inside.iter().map(|s| s.1.rss_kib).max().unwrap_or(0),
            )
        })
    }

    /// Waits until the process exited (its last reading is final) or `within` passed.
    pub async fn wait_exit(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.task.is_finished() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

/// A SIPp media port pair (`-mp` and `-mp`+2, which SIPp also binds) free right now, in
/// 6000–9999 (apart from the engine's RTP ports and the ephemeral range).
pub fn media_port() -> Result<u16> {
    static NEXT: AtomicU16 = AtomicU16::new(6000);
    for _ in 0..1000 {
        let p = NEXT.fetch_add(4, Ordering::Relaxed);
        if p > 9990 {
            NEXT.store(6000, Ordering::Relaxed);
            continue;
        }
        let free = |port: u16| UdpSocket::bind(("127.0.0.1", port)).is_ok();
        if free(p) && free(p + 1) && free(p + 2) && free(p + 3) {
            return Ok(p);
        }
    }
    bail!("no free SIPp media port in 6000-9999")
}

/// What a SIPp run is asked to do.
pub struct SippJob<'a> {
    /// Scenario file in bench/sipp, without `.xml`.
    pub scenario: &'static str,
    pub port: u16,
    pub target: Option<SocketAddr>,
    pub calls: u64,
    /// Call rate of a UAC.
    pub rate: Option<u32>,
    /// `-d`: what a bare `<pause/>` waits.
    pub hold_ms: Option<u64>,
    /// `-s`: the request-URI user of a UAC.
    pub service: Option<&'a str>,
    /// `-timeout`: SIPp stops (failing) after this long.
    pub budget_secs: u64,
    /// More arguments, last before the target.
    pub extra_args: &'a [&'a str],
}

/// A SIPp process (killed on drop) and its working directory with its statistics.
pub struct Sipp {
    child: Child,
    /// SIPp's process id (to sample it).
    pub pid: u32,
    scenario: &'static str,
    dir: tempfile::TempDir,
}

/// The audio the scenarios stream, in every SIPp's working directory: what the caller
/// says (a 440 Hz tone), what the callee says (520 Hz) for the hold time, and the prompt
/// SIPp plays in the engine's place (660 Hz, 1.6 s, about the length of the engine's
/// "Press one to confirm."). SIPp repeats the prompt until the call ends: the engine sends
/// a packet every 20 ms for the whole call (the prompt, then silence), and so does SIPp.
pub fn write_audio(dir: &Path, hold_ms: u64) {
    let hold = hold_ms as f32 / 1000.0;
    ulaw_tone(dir, "caller.ulaw", 440.0, hold);
    ulaw_tone(dir, "callee.ulaw", 520.0, hold);
    ulaw_tone(dir, "prompt.ulaw", 660.0, 1.6);
}

impl Sipp {
    pub fn spawn(job: &SippJob<'_>, hold_ms_audio: u64) -> Result<Sipp> {
        let dir = tempfile::tempdir()?;
        write_audio(dir.path(), hold_ms_audio);
        let scenario = workspace()
            .join("bench")
            .join("sipp")
            .join(format!("{}.xml", job.scenario));
        let mut cmd = Command::new("sipp");
        cmd.arg("-sf").arg(&scenario);
        cmd.args(["-nostdin", "-i", "127.0.0.1", "-mi", "127.0.0.1"])
            .args(["-p", &job.port.to_string()])
            .args(["-cp", &free_udp_port().to_string()])
            .args(["-mp", &media_port()?.to_string()])
            .args(["-m", &job.calls.to_string()])
            .args(["-aa", "-trace_err", "-trace_stat", "-fd", "1"])
            // SIPp's own socket buffers are 64 KiB unless told: at 700 calls/s it drops
            // datagrams of bursts itself. The engine's SIP socket asks 4 MiB.
            .args(["-buff_size", "4194304"])
            .args(["-trace_rtt", "-rtt_freq", "1"])
            .args(["-recv_timeout", "15000"])
            .args([
                "-timeout",
                &format!("{}s", job.budget_secs),
                "-timeout_error",
            ]);
        if let Some(r) = job.rate {
            let limit = (u64::from(r) * (job.hold_ms.unwrap_or(0) / 1000 + 20)).max(100);
            cmd.args(["-r", &r.to_string(), "-rp", "1000"])
                .args(["-l", &limit.to_string()]);
        }
        if let Some(d) = job.hold_ms {
            cmd.args(["-d", &d.to_string()]);
        }
        if let Some(s) = job.service {
            cmd.args(["-s", s]);
        }
        cmd.args(job.extra_args);
        if let Some(t) = job.target {
            cmd.arg(t.to_string());
        }
        let child = cmd
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("spawn sipp (install sip-tester)")?;
        let pid = child.id().context("sipp pid")?;
        Ok(Sipp {
            child,
            pid,
            scenario: job.scenario,
            dir,
        })
    }

    /// Waits for SIPp to exit; Some(true) when every call succeeded, None on timeout.
    pub async fn wait(&mut self, within: Duration) -> Option<bool> {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(Ok(s)) => Some(s.success()),
            _ => None,
        }
    }

    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    pub fn stat(&self) -> SippStat {
        read_sipp_stat(self.dir.path(), self.scenario).unwrap_or_default()
    }

    /// Response times of timer 1, sorted.
    pub fn rtts(&self) -> Vec<f64> {
        read_sipp_rtts(self.dir.path(), self.scenario, 1)
    }

    /// The kinds of error SIPp logged (`-trace_err`), with their counts.
    pub fn errors(&self) -> Vec<(String, usize)> {
        read_sipp_errors(self.dir.path(), self.scenario)
    }
}

/// Several SIPp callers side by side, sharing one job: one SIPp process tops out near
/// 1,000–1,250 calls/s on its own, so higher rates are split between `n` of them, each
/// placing its share of the calls at its share of the rate (the first ones take the
/// remainders). Counted together as one caller.
pub struct Callers(Vec<Sipp>);

impl Callers {
    pub fn spawn(job: &SippJob<'_>, n: usize, hold_ms_audio: u64) -> Result<Callers> {
        let n = n.max(1);
        let mut callers = Vec::with_capacity(n);
        for i in 0..n {
            let share = |total: u64| total / n as u64 + u64::from((i as u64) < total % n as u64);
            let part = SippJob {
                port: if i == 0 { job.port } else { free_udp_port() },
                calls: share(job.calls),
                rate: job.rate.map(|r| share(u64::from(r)) as u32),
                ..*job
            };
            if part.calls > 0 {
                callers.push(Sipp::spawn(&part, hold_ms_audio)?);
            }
        }
        Ok(Callers(callers))
    }

    /// Waits for every caller to exit; Some(true) when every call of every one succeeded,
    /// None when one of them did not exit in time.
    pub async fn wait(&mut self, within: Duration) -> Option<bool> {
        let deadline = tokio::time::Instant::now() + within;
        let mut all = true;
        for c in &mut self.0 {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            all &= c.wait(left).await?;
        }
        Some(all)
    }

    pub async fn kill(&mut self) {
        for c in &mut self.0 {
            c.kill().await;
        }
    }

    pub fn stat(&self) -> SippStat {
        SippStat::combine(&self.0.iter().map(Sipp::stat).collect::<Vec<_>>())
    }

    /// Response times of timer 1 of every caller, sorted.
    pub fn rtts(&self) -> Vec<f64> {
        let mut all: Vec<f64> = self.0.iter().flat_map(Sipp::rtts).collect();
        all.sort_by(f64::total_cmp);
        all
    }

    /// The kinds of error the callers logged, with their counts added, most frequent first.
    pub fn errors(&self) -> Vec<(String, usize)> {
        let mut counts = std::collections::BTreeMap::<String, usize>::new();
        for (kind, n) in self.0.iter().flat_map(Sipp::errors) {
            *counts.entry(kind).or_default() += n;
        }
        let mut all: Vec<(String, usize)> = counts.into_iter().collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all
    }
}

/// The engine's scenario: `reply_scenario("dtmf")` (question "Press one to confirm." by
/// TTS, listening 12 s for DTMF) with an inbound entry as well.
pub fn rate_scenario() -> Value {
    let mut s = reply_scenario("dtmf");
    s["constructor"]["bricks"]["inbound_call"] = json!({"v1": [{"id": "in", "description": "",
        "properties": {}, "outputs": [{"type": "next", "description": "", "next": "ask"}]}]});
    s
}

/// Counts of an account's communications, by status.
pub async fn count_status(
    store: &callsmith_domain::Store,
    account: &str,
    base: &CommunicationFilter,
    status: CommunicationStatus,
) -> Result<i64> {
    let f = CommunicationFilter {
        communication_status: Some(status),
        ..base.clone()
    };
    Ok(store.communication_list(account, &f, 1, 0).await?.1)
}

/// Communications not ended yet (new, queued, dialing or in progress).
pub async fn count_open(
    store: &callsmith_domain::Store,
    account: &str,
    f: &CommunicationFilter,
) -> Result<i64> {
    let mut n = 0;
    for s in [
        CommunicationStatus::New,
        CommunicationStatus::Queued,
        CommunicationStatus::Dialing,
        CommunicationStatus::InProgress,
    ] {
        n += count_status(store, account, f, s).await?;
    }
    Ok(n)
}

/// Every communication matching `f`.
pub async fn all_rows(
    store: &callsmith_domain::Store,
    account: &str,
    f: &CommunicationFilter,
) -> Result<Vec<CommunicationRecord>> {
    let mut out = Vec::new();
    loop {
        let (rows, total) = store
            .communication_list(account, f, 5000, out.len() as i64)
            .await?;
        let n = rows.len();
        out.extend(rows);
        if n == 0 || out.len() as i64 >= total {
            return Ok(out);
        }
    }
}

/// Waits until no communication matching `f` is open (or `within` passed); false on timeout.
pub async fn wait_all_ended(
    store: &callsmith_domain::Store,
    account: &str,
    f: &CommunicationFilter,
    within: Duration,
) -> Result<bool> {
    let deadline = Instant::now() + within;
    loop {
        if count_open(store, account, f).await? == 0 {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What the histories of some calls say about their media and prompts.
#[derive(Debug, Default, Clone)]
pub struct HistoryTotals {
    /// Calls with a readable history.
    pub calls: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Packets the engine counted lost (sequence gaps), over every call.
    pub packets_lost: i64,
    /// Errors the histories recorded.
    pub errors: u64,
    /// Prompts by outcome.
    pub prompts: std::collections::BTreeMap<String, u64>,
    pub played_ms: u64,
}

/// Sums the histories of `rows` (those that have one) as the engine stored them.
pub fn history_totals(e: &Engine, account: &str, rows: &[CommunicationRecord]) -> HistoryTotals {
    let mut t = HistoryTotals::default();
    for r in rows.iter().filter(|r| r.has_history) {
        let path = e.object_path(&CallObjects::new(account, &r.sid).history());
        let Some(h) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        else {
            continue;
        };
        t.calls += 1;
        let m = &h["media"];
        t.packets_sent += m["packets_sent"].as_u64().unwrap_or(0);
        t.packets_received += m["packets_received"].as_u64().unwrap_or(0);
        t.packets_lost += m["packets_lost"].as_i64().unwrap_or(0);
        t.errors += h["errors"].as_array().map_or(0, |a| a.len() as u64);
        for p in h["prompts"].as_array().into_iter().flatten() {
            *t.prompts
                .entry(p["outcome"].as_str().unwrap_or("?").to_string())
                .or_default() += 1;
            t.played_ms += p["played_ms"].as_u64().unwrap_or(0);
        }
    }
    t
}
