//! The engine process: the real `callsmith serve` with a generated configuration, its
//! log, its addresses, and what the tests read back from it (the API, the saved
//! histories, its database, its CPU and memory).
//!
//! The engine binds its control API and its SIP UDP socket to port 0 and the harness reads
//! the bound addresses from the engine's own start-up log lines (`control API listening
//! listen=…` and `call engine started udp=Some(…)`), so no port is picked and dropped
//! before the engine binds it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use callsmith_domain::communication::{CommunicationStatus, history::CallHistory};
use serde_json::Value;
use tokio::process::{Child, Command};

use crate::fixtures::Tenancy;
use crate::ports::rtp_range;

/// A superuser token the tests install through `CALLSMITH_BOOTSTRAP_SUPERUSER_TOKEN`.
pub const SU_TOKEN: &str = "cs_su_e2e_superuser_token_for_tests_0123456789abcdef";

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The `callsmith` binary to test.
pub fn binary() -> PathBuf {
    if let Ok(b) = std::env::var("CALLSMITH_BIN") {
        return PathBuf::from(b);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace().join("target"));
    let p = target.join("debug").join("callsmith");
    assert!(
        p.exists(),
        "{} does not exist: run `cargo build -p callsmith-cli --bin callsmith` (same CARGO_TARGET_DIR) first",
        p.display()
    );
    p
}

/// Log directives the harness adds to any filter: the engine's start-up lines that name
/// its bound addresses are INFO events of these targets.
const ADDRESS_LINES: &str = "callsmith_engine::process=info,callsmith_engine::node=info";

/// The addresses a starting engine bound, read from its log.
struct Bound {
    /// The control API (`control API listening listen=127.0.0.1:41234`).
    http: SocketAddr,
    /// The SIP UDP socket (`call engine started udp=Some(127.0.0.1:40312) …`); None on an
    /// engine that takes no calls.
    sip: Option<SocketAddr>,
}

impl Bound {
    /// Waits until the engine logged that its control API listens (its call engine started
    /// before that); panics with the log when it exits first or takes over a minute.
    async fn wait(mut child: Child, log_path: &Path) -> (Child, Bound) {
        for _ in 0..1200 {
            let log = std::fs::read_to_string(log_path).unwrap_or_default();
            if let Some(http) = logged_addr(&log, "control API listening", "listen") {
                let sip = logged_addr(&log, "call engine started", "udp");
                return (child, Bound { http, sip });
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the engine exited ({status}) before it listened; log:\n{log}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "the engine did not log its listen address within 60 s; log:\n{}",
            std::fs::read_to_string(log_path).unwrap_or_default()
        );
    }
}

/// The address in `field` of the first whole text-format log line carrying `message`
/// (`field=127.0.0.1:5060` or, for an `Option`, `field=Some(127.0.0.1:5060)`).
fn logged_addr(log: &str, message: &str, field: &str) -> Option<SocketAddr> {
    // Only lines the engine finished writing.
    let whole = &log[..log.rfind('\n')?];
    let line = whole.lines().find(|l| l.contains(message))?;
    let key = format!(" {field}=");
    let value = line[line.find(&key)? + key.len()..]
        .split_whitespace()
        .next()?;
    let value = value
        .strip_prefix("Some(")
        .and_then(|v| v.strip_suffix(')'))
        .unwrap_or(value);
    value.parse().ok()
}

/// Options of an engine process.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Database URL; None = SQLite under the data dir.
    pub database_url: Option<String>,
    /// Data dir to use (kept across restarts); None = a fresh temp dir.
    pub data_dir: Option<PathBuf>,
    /// Trunks: (name, gateway).
    pub trunks: Vec<(String, SocketAddr)>,
    /// Extra keys of every `[[sip.trunks]]` section (`edge_route = true\n`).
    pub trunk_toml: String,
    /// Websocket URL of a Vosk-protocol recognition node (engine `whisper`).
    pub stt_url: Option<String>,
    /// Extra TOML appended to the generated configuration.
    pub extra_toml: String,
    /// SIP UDP port; None = port 0, a free one the engine binds (read back from its log).
    pub sip_port: Option<u16>,
    /// The address SIP listens on; None = 127.0.0.1 (`::1` for a call over IPv6).
    pub sip_ip: Option<std::net::IpAddr>,
    /// Extra keys of the `[dialer]` section (`lease_secs = 2\n…`). Test engines refuse
    /// calls for timer lag only beyond a second (`max_timer_lag_ms = 1000`): tests run
    /// side by side on two cores, where 100 ms stalls happen without any call load. They
    /// poll every 100 ms (`poll_interval_ms = 100`) unless these keys name another.
    pub dialer_toml: String,
    /// Extra keys of the `[media]` section (`rtp_timeout_ms = 1500\n…`).
    pub media_toml: String,
    /// Extra keys of the `[sip]` section (`ring_timeout_secs = 2\n…`).
    pub sip_toml: String,
    /// The address the control API listens on; None = 127.0.0.1 (the test reaches it
    /// on 127.0.0.1 either way: give an unspecified one to serve another address too).
    pub http_ip: Option<std::net::IpAddr>,
    /// RTP port range; None = [`rtp_range`] (give each of several engines in one test
    /// its own part of it). Its last 20 ports are the ICE ports of browser calls.
    pub rtp_ports: Option<(u16, u16)>,
}

/// The trunk of an engine whose test places no SIP call but provisions a number on
/// `name` (a number may name only a trunk its node configures): its gateway is a loopback
/// port nothing answers on.
pub fn idle_trunk(name: &str) -> Vec<(String, SocketAddr)> {
    vec![(name.to_string(), SocketAddr::from(([127, 0, 0, 1], 9)))]
}

/// A running `callsmith serve`.
pub struct Engine {
    pub child: Option<Child>,
    /// `http://127.0.0.1:<the API's bound port>`.
    pub base_url: String,
    /// The SIP UDP address the engine bound (`127.0.0.1:0` on an engine that takes no
    /// calls, `[dialer] enabled = false`).
    pub sip_addr: SocketAddr,
    pub data_dir: PathBuf,
    pub log_path: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    pub client: reqwest::Client,
}

impl Engine {
    /// Starts the binary and waits until /readyz answers 200.
    pub async fn start(opts: EngineOptions) -> Engine {
        let tmp = if opts.data_dir.is_none() {
            Some(tempfile::tempdir().expect("tempdir"))
        } else {
            None
        };
        let data_dir = opts
            .data_dir
            .clone()
            .unwrap_or_else(|| tmp.as_ref().expect("tmp").path().to_path_buf());
        std::fs::create_dir_all(&data_dir).expect("data dir");
        let sip_port = opts.sip_port.unwrap_or(0);
        let (rtp_min, rtp_max) = opts.rtp_ports.unwrap_or_else(rtp_range);
        let mut toml = format!(
            "data_dir = {:?}\nbootstrap_superuser_token = {SU_TOKEN:?}\n[http]\nlisten = \"{}\"\n\
             [auth]\nargon2_memory_kib = 64\nargon2_iterations = 1\n\
             [media]\nrtp_port_min = {rtp_min}\nrtp_port_max = {}\nice_port_min = {}\nice_port_max = {rtp_max}\n{}\
             [dialer]\nresult_backoff_base_ms = 200\n{}{}{}",
            data_dir.display().to_string(),
            SocketAddr::new(
                opts.http_ip.unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()),
                0
            ),
            // The range's last 20 ports are the ICE ports of browser calls.
            rtp_max - 20,
            rtp_max - 19,
            opts.media_toml,
            if opts.dialer_toml.contains("poll_interval_ms") {
                ""
            } else {
                "poll_interval_ms = 100\n"
            },
            if opts.dialer_toml.contains("max_timer_lag_ms") {
                ""
            } else {
                "max_timer_lag_ms = 1000\n"
            },
            opts.dialer_toml
        );
        if let Some(db) = &opts.database_url {
            toml.push_str(&format!("[database]\nurl = {db:?}\n"));
        }
        let sip_udp = SocketAddr::new(
            opts.sip_ip.unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()),
            sip_port,
        );
        toml.push_str(&format!("[sip]\nudp = \"{sip_udp}\"\n{}", opts.sip_toml));
        if let Some((first, _)) = opts.trunks.first() {
            toml.push_str(&format!("default_trunk = {first:?}\n"));
        }
        for (name, gw) in &opts.trunks {
            toml.push_str(&format!(
                "[[sip.trunks]]\nname = {name:?}\ngateway = \"{gw}\"\nnumber_format = {{ kind = \"as_is\" }}\n{}",
                opts.trunk_toml
            ));
        }
        if let Some(url) = &opts.stt_url {
            let ready = url
                .replace("ws://", "http://")
                .trim_end_matches('/')
                .to_string()
                + "/ready";
            toml.push_str(&format!(
                "[[stt.engines.whisper]]\nname = \"local\"\nurl = {url:?}\nprotocol = \"vosk\"\nready_url = {ready:?}\n"
            ));
        }
        // The test's HTTP peers listen on 127.0.0.1 and stand in for public hosts; every
        // other non-public address (127.0.0.2, 10/8, …) stays refused, so the guard of
        // tenant-named URLs is on in every test that does not configure `[webhook]` itself.
        if !opts.extra_toml.contains("[webhook]") {
            toml.push_str("[webhook]\nallow_hosts = [\"127.0.0.1\"]\n");
        }
        // The local speech node starts with `serve` when it is installed; only the tests
        // about it (their own `[speech]` section) want it.
        if !opts.extra_toml.contains("[speech]") {
            toml.push_str("[speech]\nlocal = false\n");
        }
        toml.push_str(&opts.extra_toml);
        let cfg_path = data_dir.join("callsmith.toml");
        std::fs::write(&cfg_path, toml).expect("write config");
        // One log per start: a restarted engine (same data dir) writes a new one.
        let (log, log_path) = tempfile::Builder::new()
            .prefix("engine-")
            .suffix(".log")
            .tempfile_in(&data_dir)
            .and_then(|f| f.keep().map_err(|e| e.error))
            .expect("log file");
        let log2 = log.try_clone().expect("log file");
        let child = Command::new(binary())
            .arg("--config")
            .arg(&cfg_path)
            .arg("serve")
            // CALLSMITH_E2E_LOG overrides the engine's log filter (benches use `info`).
            .env(
                "RUST_LOG",
                format!(
                    "{},{ADDRESS_LINES}",
                    std::env::var("CALLSMITH_E2E_LOG")
                        .unwrap_or_else(|_| "info,callsmith_engine=debug".into())
                ),
            )
            .env_remove("CALLSMITH_DATABASE__URL")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn callsmith");
        let (child, bound) = Bound::wait(child, &log_path).await;
        let e = Engine {
            child: Some(child),
            // Reached on loopback also when the API listens on an unspecified address.
            base_url: format!("http://127.0.0.1:{}", bound.http.port()),
            sip_addr: bound
                .sip
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], sip_port))),
            data_dir,
            log_path,
            _tmp: tmp,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("client"),
        };
        e.wait_ready().await;
        e
    }

    async fn wait_ready(&self) {
        for _ in 0..300 {
            if let Ok(r) = self
                .client
                .get(format!("{}/readyz", self.base_url))
                .send()
                .await
                && r.status().is_success()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("engine did not become ready; log:\n{}", self.log());
    }

    /// The engine's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The engine's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.id())
    }

    /// SIGKILL, and wait for the process to be gone.
    pub async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
            let _ = c.wait().await;
        }
    }

    /// SIGTERM; returns the exit status once the process exited (None on timeout).
    pub async fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        if let Some(pid) = self.pid() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
        let c = self.child.as_mut()?;
        let r = tokio::time::timeout(within, c.wait()).await.ok()?.ok();
        self.child = None;
        r
    }

    /// A request as the superuser, with X-Account-Sid when given.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        account: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut b = self
            .client
            .request(method, format!("{}{}", self.base_url, path))
            .bearer_auth(SU_TOKEN);
        if let Some(a) = account {
            b = b.header("X-Account-Sid", a);
        }
        if let Some(v) = body {
            b = b.json(&v);
        }
        let r = b.send().await.expect("request to the engine");
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, v)
    }

    pub async fn post(&self, path: &str, account: Option<&str>, body: Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, account, Some(body))
            .await
    }

    pub async fn get(&self, path: &str, account: Option<&str>) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, account, None).await
    }

    /// POST expecting `want`; returns the body (panics with the body and log otherwise).
    /// `POST /v1/communication/-/dispatch` in the tenancy's account, expecting 201;
    /// returns the communication.
    pub async fn dispatch(&self, t: &Tenancy, body: Value) -> Value {
        self.post_ok("/v1/communication/-/dispatch", Some(&t.account), body, 201)
            .await
    }

    pub async fn post_ok(
        &self,
        path: &str,
        account: Option<&str>,
        body: Value,
        want: u16,
    ) -> Value {
        let (s, v) = self.post(path, account, body.clone()).await;
        assert_eq!(s, want, "POST {path} {body} -> {v}");
        v
    }

    /// Polls a communication until its status is terminal (or `within` passed).
    pub async fn wait_communication(&self, account: &str, id: &str, within: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let (s, v) = self
                .get(&format!("/v1/communication/{id}"), Some(account))
                .await;
            assert_eq!(s, 200, "GET communication: {v}");
            let st = v["communication_status"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if st
                .parse::<CommunicationStatus>()
                .is_ok_and(CommunicationStatus::is_final)
            {
                return v;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "communication {id} still {st} after {within:?}: {v}\nlog:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Whether this engine saved a history for a communication (it ran the call).
    pub fn has_history(&self, account: &str, id: &str) -> bool {
        self.history_path(account, id).exists()
    }

    fn history_path(&self, account: &str, id: &str) -> PathBuf {
        self.object_path(&callsmith_domain::objects::CallObjects::new(account, id).history())
    }

    /// Where the engine's local object store keeps the object at `path`.
    pub fn object_path(&self, path: &str) -> PathBuf {
        self.data_dir.join("objects").join(path)
    }

    /// The saved history JSON of a communication (local object storage under the data dir).
    /// It must read as the typed [`CallHistory`] (which refuses unknown fields), so what
    /// the engine writes cannot drift from what the API documents.
    pub fn history(&self, account: &str, id: &str) -> Value {
        let p = self.history_path(account, id);
        let text =
            std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("history {}: {e}", p.display()));
        if let Err(e) = serde_json::from_str::<CallHistory>(&text) {
            panic!("history {} is not a CallHistory: {e}\n{text}", p.display());
        }
        serde_json::from_str(&text).expect("history is JSON")
    }

    /// The history of a communication as `GET /v1/communication/{id}/history` serves it.
    pub async fn history_from_api(&self, account: &str, id: &str) -> CallHistory {
        let (s, v) = self
            .get(&format!("/v1/communication/{id}/history"), Some(account))
            .await;
        assert_eq!(s, 200, "GET history: {v}");
        serde_json::from_value(v).expect("a CallHistory")
    }
}

/// Direct store access to the engine's database (same file or server the binary uses),
/// for resources whose HTTP routes are not part of what a test exercises.
pub async fn store_of(e: &Engine, database_url: Option<&str>) -> callsmith_domain::Store {
    let url = database_url
        .map(String::from)
        .unwrap_or_else(|| format!("sqlite://{}", e.data_dir.join("callsmith.db").display()));
    callsmith_domain::Store::connect(&url, 2)
        .await
        .expect("connect to the engine's database")
}

/// CPU time (user + system, clock ticks) and resident memory (KiB) of a process, from
/// `/proc/<pid>/stat`.
pub fn proc_usage(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start at state (field 3).
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    let rss_pages: u64 = f.get(21)?.parse().ok()?;
    Some((utime + stime, rss_pages * 4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_addresses_are_read_from_whole_log_lines() {
        let log = "2026-01-01T00:00:00.000000Z  INFO callsmith_engine::node: call engine started \
                   udp=Some(127.0.0.1:40312) tcp=None trunks=1 media=127.0.0.1\n\
                   2026-01-01T00:00:00.100000Z  INFO callsmith_engine::process: control API \
                   listening listen=0.0.0.0:41234 backend=Sqlite\n";
        assert_eq!(
            logged_addr(log, "control API listening", "listen"),
            Some(SocketAddr::from(([0, 0, 0, 0], 41234)))
        );
        assert_eq!(
            logged_addr(log, "call engine started", "udp"),
            Some(SocketAddr::from(([127, 0, 0, 1], 40312)))
        );
        // A line still being written is not read: its port may be cut short.
        let partial = "INFO callsmith_engine::process: control API listening listen=127.0.0.1:412";
        assert_eq!(
            logged_addr(partial, "control API listening", "listen"),
            None
        );
    }
}
