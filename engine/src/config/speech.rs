//! `[speech]`: the local speech node (`media/speech-node/`) that `callsmith serve` starts,
//! supervises, and registers as a recognition node and a synthesizer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[speech]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SpeechSection {
    /// Start and supervise the local speech node. Unset: on when the node is installed
    /// (`python` and `server` both exist), off otherwise.
    pub local: Option<bool>,
    /// The speech node venv's python. Default
    /// `$CALLSMITH_CACHE/speech-venv/bin/python` (`$CALLSMITH_CACHE` defaults to
    /// `~/.cache/callsmith`), where `scripts/setup.sh` installs it.
    pub python: Option<PathBuf>,
    /// The node's `server.py`. Default: `media/speech-node/server.py` of the checkout the
    /// binary was built from.
    pub server: Option<PathBuf>,
    /// Loopback address the node listens on; port 0 picks a free port once at start (kept
    /// across restarts). Default `127.0.0.1:0`.
    pub listen: SocketAddr,
    /// CPU threads of the node's Whisper and Piper. Default: half the cores, at least 1.
    pub threads: Option<usize>,
    /// Default synthesis voice of the node (`joe`: Piper, `pico-en-US`, …). Default `joe`.
    pub voice: String,
    /// More command-line arguments of `server.py` (`["--endpoint", "fixed"]`).
    pub args: Vec<String>,
    /// A node not ready (models loaded) this many seconds after it was started is killed
    /// and started again. Default 120.
    pub startup_timeout_secs: u64,
    /// First delay before restarting a node that exited or failed to start, ms; doubles
    /// with every consecutive failure. Default 1000.
    pub restart_backoff_min_ms: u64,
    /// Upper bound of that delay, ms. Default 60000.
    pub restart_backoff_max_ms: u64,
    /// Consecutive failures (exits, start-up timeouts, hangs) after which the node is left
    /// down until callsmith restarts; 0: never give up. Default 0.
    pub give_up_after: u32,
    /// A ready node whose `/ready` has not answered for this many seconds (hung, stopped)
    /// is killed and started again; 0: never. Default 30.
    pub unresponsive_after_secs: u64,
}

impl Default for SpeechSection {
    fn default() -> Self {
        SpeechSection {
            local: None,
            python: None,
            server: None,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            threads: None,
            voice: "joe".into(),
            args: Vec::new(),
            startup_timeout_secs: 120,
            restart_backoff_min_ms: 1000,
            restart_backoff_max_ms: 60_000,
            give_up_after: 0,
            unresponsive_after_secs: 30,
        }
    }
}

/// The `[speech]` section with its defaults resolved and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeechPlan {
    /// Whether the node is to be started (`local`, or installed when unset).
    pub local: bool,
    /// `local` was set in the configuration (else it followed the installation).
    pub local_explicit: bool,
    pub python: PathBuf,
    pub server: PathBuf,
    pub listen: SocketAddr,
    pub threads: usize,
    pub voice: String,
    pub args: Vec<String>,
    pub startup_timeout: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    pub give_up_after: u32,
    pub unresponsive_after: Option<Duration>,
}

impl SpeechPlan {
    /// `python` and `server` both exist.
    pub fn installed(&self) -> bool {
        self.python.is_file() && self.server.is_file()
    }

    /// What is missing for the node to start, if anything.
    pub fn missing(&self) -> Option<String> {
        if !self.python.is_file() {
            Some(format!(
                "speech.python {} does not exist",
                self.python.display()
            ))
        } else if !self.server.is_file() {
            Some(format!(
                "speech.server {} does not exist",
                self.server.display()
            ))
        } else {
            None
        }
    }
}

/// Where `scripts/setup.sh` (and `scripts/test-deps.sh`) install the node's venv.
pub fn default_python() -> PathBuf {
    let cache = std::env::var_os("CALLSMITH_CACHE")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("callsmith"))
        })
        .unwrap_or_else(|| PathBuf::from(".cache/callsmith"));
    cache.join("speech-venv").join("bin").join("python")
}

/// `media/speech-node/server.py` of the checkout this binary was built from.
pub fn default_server() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("media")
        .join("speech-node")
        .join("server.py")
}

impl SpeechSection {
    /// Resolves the defaults and checks the values; an error names the key.
    pub fn plan(&self) -> anyhow::Result<SpeechPlan> {
        anyhow::ensure!(
            self.listen.ip().is_loopback(),
            "speech.listen {} must be a loopback address (the node has no authentication)",
            self.listen
        );
        if let Some(t) = self.threads {
            anyhow::ensure!(t > 0, "speech.threads must be above 0");
        }
        anyhow::ensure!(
            self.startup_timeout_secs > 0,
            "speech.startup_timeout_secs must be above 0"
        );
        anyhow::ensure!(
            self.restart_backoff_min_ms > 0,
            "speech.restart_backoff_min_ms must be above 0"
        );
        anyhow::ensure!(
            self.restart_backoff_max_ms >= self.restart_backoff_min_ms,
            "speech.restart_backoff_max_ms must be at least speech.restart_backoff_min_ms"
        );
        anyhow::ensure!(
            !self.voice.trim().is_empty(),
            "speech.voice must not be empty"
        );
        let threads = self.threads.unwrap_or_else(|| {
            (std::thread::available_parallelism().map_or(1, |n| n.get()) / 2).max(1)
        });
        let mut plan = SpeechPlan {
            local: false,
            local_explicit: self.local.is_some(),
            python: self.python.clone().unwrap_or_else(default_python),
            server: self.server.clone().unwrap_or_else(default_server),
            listen: self.listen,
            threads,
            voice: self.voice.clone(),
            args: self.args.clone(),
            startup_timeout: Duration::from_secs(self.startup_timeout_secs),
            backoff_min: Duration::from_millis(self.restart_backoff_min_ms),
            backoff_max: Duration::from_millis(self.restart_backoff_max_ms),
            give_up_after: self.give_up_after,
            unresponsive_after: (self.unresponsive_after_secs > 0)
                .then(|| Duration::from_secs(self.unresponsive_after_secs)),
        };
        plan.local = self.local.unwrap_or_else(|| plan.installed());
        Ok(plan)
    }
}
