//! The tokio shell around the [`Supervisor`]: starts `server.py`, probes its `/ready`,
//! waits for its exit, sleeps until the supervisor's next deadline, forwards the node's log
//! lines, and publishes the node's state as the `speech` component of `/readyz`.

use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use callsmith_domain::Services;
use callsmith_domain::readiness::{ComponentStatus, Readiness};
use prometheus_client::metrics::{counter::Counter, gauge::Gauge};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::supervisor::{Action, Policy, State, Supervisor};
use crate::config::SpeechPlan;

/// How often a starting node's `/ready` is asked.
const PROBE_EVERY: Duration = Duration::from_millis(250);
/// How often a ready node's `/ready` is asked, at most.
const WATCH_EVERY: Duration = Duration::from_secs(5);

/// The supervised node; [`SpeechNode::stop`] kills it.
pub struct SpeechNode {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl SpeechNode {
    /// Starts the node and its supervision. `listen` is the address the node serves on
    /// (`speech.listen` with its port resolved).
    /// Its starts and readiness are on `/metrics` (`callsmith_speech_node_starts_total`,
    /// `callsmith_speech_node_ready`).
    pub fn start(plan: &SpeechPlan, listen: SocketAddr, services: &Services) -> SpeechNode {
        let stop = CancellationToken::new();
        let policy = Policy {
            startup_timeout: plan.startup_timeout,
            backoff_min: plan.backoff_min,
            backoff_max: plan.backoff_max,
            give_up_after: plan.give_up_after,
            unresponsive_after: plan.unresponsive_after,
        };
        let starts = Counter::default();
        let ready = Gauge::default();
        {
            let mut registry = services.metrics.registry();
            registry.register(
                "callsmith_speech_node_starts",
                "Starts of the local speech node, the first included",
                starts.clone(),
            );
            registry.register(
                "callsmith_speech_node_ready",
                "1 while the local speech node is ready, else 0",
                ready.clone(),
            );
        }
        let shell = Shell {
            plan: plan.clone(),
            listen,
            readiness: services.readiness.clone(),
            starts,
            ready,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(1))
                .no_proxy()
                .build()
                .unwrap_or_default(),
        };
        let task = tokio::spawn(shell.run(Supervisor::new(policy), stop.clone()));
        SpeechNode { stop, task }
    }

    /// Kills the node and waits until it is gone.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

struct Shell {
    plan: SpeechPlan,
    listen: SocketAddr,
    readiness: Arc<Readiness>,
    starts: Counter,
    ready: Gauge,
    http: reqwest::Client,
}

impl Shell {
    async fn run(self, mut sup: Supervisor, stop: CancellationToken) {
        let mut child: Option<Child> = None;
        let mut started_at = Instant::now();
        let mut pending = sup.start();
        loop {
            match pending.take() {
                Some(Action::Spawn) => match self.spawn() {
                    Ok(c) => {
                        started_at = Instant::now();
                        sup.spawned(started_at);
                        self.starts.inc();
                        tracing::info!(
                            pid = c.id(),
                            start = sup.starts(),
                            listen = %self.listen,
                            python = %self.plan.python.display(),
                            "speech node started; loading its models"
                        );
                        child = Some(c);
                    }
                    Err(e) => {
                        tracing::error!(python = %self.plan.python.display(), "speech node could not be started: {e}");
                        sup.spawn_failed(Instant::now());
                        self.log_next(&sup);
                    }
                },
                Some(Action::Kill) => {
                    if let Some(c) = child.as_mut() {
                        let _ = c.start_kill();
                    }
                }
                None => {}
            }
            self.readiness.set(super::COMPONENT, sup.status());
            self.ready
                .set(i64::from(sup.status() == ComponentStatus::Ok));
            if sup.state() == State::Stopped {
                return;
            }
            let probe_at = if sup.wants_probe() {
                Some(tokio::time::Instant::now() + PROBE_EVERY)
            } else if sup.wants_watch() {
                let every = (self.plan.unresponsive_after.unwrap_or(WATCH_EVERY) / 3)
                    .clamp(PROBE_EVERY, WATCH_EVERY);
                Some(tokio::time::Instant::now() + every)
            } else {
                None
            };
            let wake = [probe_at, sup.deadline().map(tokio::time::Instant::from_std)]
                .into_iter()
                .flatten()
                .min();
            tokio::select! {
                _ = stop.cancelled(), if !matches!(sup.state(), State::Stopping) => {
                    pending = sup.shutdown();
                    if pending.is_some() {
                        tracing::info!("stopping the speech node");
                    }
                }
                status = wait(&mut child) => {
                    child = None;
                    let was = sup.state();
                    sup.exited(Instant::now());
                    if was != State::Stopping {
                        let up = started_at.elapsed().as_secs_f64();
                        tracing::warn!(status = %describe(status), uptime_secs = format!("{up:.1}"), "speech node exited");
                        self.log_next(&sup);
                    }
                }
                _ = sleep_until(wake) => {
                    if sup.wants_probe() && self.probe().await {
                        sup.answered(Instant::now());
                        tracing::info!(
                            url = %format!("http://{}", self.listen),
                            secs = format!("{:.1}", started_at.elapsed().as_secs_f64()),
                            "speech node ready"
                        );
                    } else if sup.wants_watch() {
                        if self.probe().await {
                            sup.answered(Instant::now());
                        } else {
                            pending = sup.unanswered(Instant::now());
                            if pending == Some(Action::Kill) {
                                tracing::warn!(
                                    after_secs = self.plan.unresponsive_after.map(|d| d.as_secs()),
                                    "speech node stopped answering /ready (speech.unresponsive_after_secs): killing it"
                                );
                            }
                        }
                    }
                    if pending.is_none() {
                        pending = sup.tick(Instant::now());
                        if pending == Some(Action::Kill) {
                            tracing::warn!(
                                timeout_secs = self.plan.startup_timeout.as_secs(),
                                "speech node not ready within speech.startup_timeout_secs: killing it"
                            );
                        }
                    }
                }
            }
        }
    }

    /// Says what follows a failure.
    fn log_next(&self, sup: &Supervisor) {
        match sup.state() {
            State::Backoff { until } => tracing::info!(
                in_ms = until.saturating_duration_since(Instant::now()).as_millis() as u64,
                failures = sup.failures(),
                "restarting the speech node"
            ),
            State::GaveUp => tracing::error!(
                failures = sup.failures(),
                "speech node failed speech.give_up_after times in a row: left down until callsmith restarts"
            ),
            _ => {}
        }
    }

    fn spawn(&self) -> std::io::Result<Child> {
        let mut cmd = Command::new(&self.plan.python);
        cmd.arg(&self.plan.server)
            .args(["--host", &self.listen.ip().to_string()])
            .args(["--port", &self.listen.port().to_string()])
            .args(["--threads", &self.plan.threads.to_string()])
            .args(["--voice", &self.plan.voice])
            // The node polls its parent and exits when the parent is gone, so it does not
            // outlive a callsmith that was killed (SIGKILL included).
            .arg("--exit-with-parent")
            .env("SPEECH_NODE_PARENT_PID", std::process::id().to_string())
            .args(&self.plan.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        if let Some(err) = child.stderr.take() {
            tokio::spawn(forward_log(err));
        }
        Ok(child)
    }

    async fn probe(&self) -> bool {
        let url = format!("http://{}/ready", self.listen);
        matches!(self.http.get(url).send().await, Ok(r) if r.status().is_success())
    }
}

/// The node's stderr lines into this process's log (target `speech_node`).
async fn forward_log(err: tokio::process::ChildStderr) {
    let mut lines = tokio::io::BufReader::new(err).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = strip_timestamp(&line);
        if line.contains(" ERROR ") || line.contains("Traceback") {
            tracing::warn!(target: "speech_node", "{line}");
        } else {
            tracing::info!(target: "speech_node", "{line}");
        }
    }
}

/// A node log line without its own timestamp (`2026-11-23 15:55:47,845 `): this log has one.
fn strip_timestamp(line: &str) -> &str {
    let b = line.as_bytes();
    let stamped = b.len() > 24
        && b[4] == b'-'
        && b[10] == b' '
        && b[19] == b','
        && b[23] == b' '
        && b[..4].iter().all(u8::is_ascii_digit);
    if stamped { &line[24..] } else { line }
}

async fn wait(child: &mut Option<Child>) -> std::io::Result<ExitStatus> {
    match child {
        Some(c) => c.wait().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[test]
fn node_timestamps_are_stripped() {
    assert_eq!(
        strip_timestamp("2026-11-23 15:55:47,845 speech-node INFO listening"),
        "speech-node INFO listening"
    );
    assert_eq!(
        strip_timestamp("Traceback (most recent call last):"),
        "Traceback (most recent call last):"
    );
}

fn describe(status: std::io::Result<ExitStatus>) -> String {
    match status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            match (s.code(), s.signal()) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => s.to_string(),
            }
        }
        Err(e) => format!("wait failed: {e}"),
    }
}
