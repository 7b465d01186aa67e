//! End-to-end test helpers: the real `callsmith` binary, real SIPp peers, the real
//! recognition node and a tiny HTTP result sink, all on loopback.
//!
//! The binary is looked up as `$CALLSMITH_BIN`, else `$CARGO_TARGET_DIR/debug/callsmith`,
//! else `<workspace>/target/debug/callsmith`; build it first with
//! `cargo build -p callsmith-engine --bin callsmith`.

use std::net::{SocketAddr, TcpListener as StdTcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

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
        "{} does not exist: run `cargo build -p callsmith-engine --bin callsmith` (same CARGO_TARGET_DIR) first",
        p.display()
    );
    p
}

/// A UDP port free on 127.0.0.1 right now.
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("free udp port")
}

/// A TCP port free on 127.0.0.1 right now.
pub fn free_tcp_port() -> u16 {
    StdTcpListener::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("free tcp port")
}

/// A free even RTP port range start (200 ports) for one engine.
pub fn rtp_range() -> (u16, u16) {
    // Spread engines of parallel tests over the range by process id.
    let base = 30000 + ((std::process::id() % 150) as u16) * 200;
    (base, base + 199)
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
    /// Websocket URL of a Vosk-protocol recognition node (engine `whisper`).
    pub stt_url: Option<String>,
    /// Extra TOML appended to the generated configuration.
    pub extra_toml: String,
    /// SIP UDP port; None = a free one.
    pub sip_port: Option<u16>,
    /// Extra keys of the `[dialer]` section (`lease_secs = 2\n…`).
    pub dialer_toml: String,
    /// RTP port range; None = [`rtp_range`] (give each of several engines in one test
    /// its own part of it).
    pub rtp_ports: Option<(u16, u16)>,
}

/// A running `callsmith serve`.
pub struct Engine {
    pub child: Option<Child>,
    pub base_url: String,
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
        let http_port = free_tcp_port();
        let sip_port = opts.sip_port.unwrap_or_else(free_udp_port);
        let (rtp_min, rtp_max) = opts.rtp_ports.unwrap_or_else(rtp_range);
        let mut toml = format!(
            "data_dir = {:?}\nbootstrap_superuser_token = {SU_TOKEN:?}\n[http]\nlisten = \"127.0.0.1:{http_port}\"\n\
             [auth]\nargon2_memory_kib = 64\nargon2_iterations = 1\n\
             [media]\nrtp_port_min = {rtp_min}\nrtp_port_max = {rtp_max}\n\
             [dialer]\npoll_interval_ms = 100\nresult_backoff_base_ms = 200\n{}",
            data_dir.display().to_string(),
            opts.dialer_toml
        );
        if let Some(db) = &opts.database_url {
            toml.push_str(&format!("[database]\nurl = {db:?}\n"));
        }
        toml.push_str(&format!("[sip]\nudp = \"127.0.0.1:{sip_port}\"\n"));
        if let Some((first, _)) = opts.trunks.first() {
            toml.push_str(&format!("default_trunk = {first:?}\n"));
        }
        for (name, gw) in &opts.trunks {
            toml.push_str(&format!(
                "[[sip.trunks]]\nname = {name:?}\ngateway = \"{gw}\"\nnumber_format = {{ kind = \"as_is\" }}\n"
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
        toml.push_str(&opts.extra_toml);
        let cfg_path = data_dir.join("callsmith.toml");
        std::fs::write(&cfg_path, toml).expect("write config");
        let log_path = data_dir.join(format!("engine-{}.log", free_tcp_port()));
        let log = std::fs::File::create(&log_path).expect("log file");
        let log2 = log.try_clone().expect("log file");
        let child = Command::new(binary())
            .arg("--config")
            .arg(&cfg_path)
            .arg("serve")
            .env("RUST_LOG", "info,callsmith_engine=debug")
            .env_remove("CALLSMITH_DATABASE__URL")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn callsmith");
        let e = Engine {
            child: Some(child),
            base_url: format!("http://127.0.0.1:{http_port}"),
            sip_addr: SocketAddr::from(([127, 0, 0, 1], sip_port)),
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

    /// SIGKILL, and wait for the process to be gone.
    pub async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
            let _ = c.wait().await;
        }
    }

    /// SIGTERM; returns the exit status once the process exited (None on timeout).
    pub async fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let c = self.child.as_mut()?;
        if let Some(pid) = c.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
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
            if ["completed", "failed", "canceled", "interrupted"].contains(&st.as_str()) {
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
        self.data_dir
            .join("objects")
            .join("calls")
            .join(account)
            .join(id)
            .join("history.json")
    }

    /// The saved history JSON of a communication (local object storage under the data dir).
    pub fn history(&self, account: &str, id: &str) -> Value {
        let p = self.history_path(account, id);
        let text =
            std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("history {}: {e}", p.display()));
        serde_json::from_str(&text).expect("history is JSON")
    }
}

/// Ids made by [`provision`].
#[derive(Debug, Clone)]
pub struct Tenancy {
    pub tenant: String,
    pub account: String,
    /// The number calls come from.
    pub number: String,
    pub number_id: String,
}

/// Creates a tenant, an account (timezone `Europe/Berlin`), a trunk named `trunk` and one
/// number `identifier` on that trunk, as the superuser through the public API.
pub async fn provision(e: &Engine, tag: &str, trunk: &str, identifier: &str) -> Tenancy {
    let t = e
        .post_ok(
            "/v1/internal/tenant",
            None,
            json!({"name": format!("tenant {tag}")}),
            201,
        )
        .await;
    let tenant = t["sid"].as_str().expect("tenant sid").to_string();
    let a = {
        let r = e
            .client
            .post(format!("{}/v1/internal/account", e.base_url))
            .bearer_auth(SU_TOKEN)
            .header("X-Tenant-Sid", &tenant)
            .json(&json!({"name": format!("account {tag}"), "email": format!("owner-{tag}@example.test"), "country": "de", "timezone": "Europe/Berlin"}))
            .send()
            .await
            .expect("create account");
        assert_eq!(r.status().as_u16(), 201, "create account");
        r.json::<Value>().await.expect("account json")
    };
    let account = a["sid"].as_str().expect("account sid").to_string();
    let r = e
        .client
        .post(format!("{}/v1/internal/trunk", e.base_url))
        .bearer_auth(SU_TOKEN)
        .header("X-Tenant-Sid", &tenant)
        .json(&json!({"name": trunk}))
        .send()
        .await
        .expect("create trunk");
    assert_eq!(r.status().as_u16(), 201, "create trunk");
    let n = e
        .post_ok(
            "/v1/number",
            Some(&account),
            json!({"identifier": identifier, "name": "main line", "trunk": trunk}),
            201,
        )
        .await;
    Tenancy {
        tenant,
        account,
        number: identifier.to_string(),
        number_id: n["id"].as_str().expect("number id").to_string(),
    }
}

/// A SIPp child killed on drop.
pub struct Sipp {
    child: Child,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
}

/// Path of a SIPp scenario of this crate.
pub fn sipp_scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("sipp")
        .join(name)
}

impl Sipp {
    /// SIPp with `scenario` on 127.0.0.1:`port` (a free one when None). `target`: where a UAC
    /// sends. `extra`: more arguments. Files the scenario names are looked up in `dir`.
    pub fn spawn(
        scenario: &str,
        port: Option<u16>,
        target: Option<SocketAddr>,
        extra: &[&str],
    ) -> Sipp {
        Sipp::spawn_in(
            tempfile::tempdir().expect("tempdir"),
            scenario,
            port,
            target,
            extra,
        )
    }

    /// Like [`Sipp::spawn`], in a prepared working directory (files the scenario streams
    /// must exist before SIPp starts: it loads them while parsing the scenario).
    pub fn spawn_in(
        dir: tempfile::TempDir,
        scenario: &str,
        port: Option<u16>,
        target: Option<SocketAddr>,
        extra: &[&str],
    ) -> Sipp {
        let port = port.unwrap_or_else(free_udp_port);
        let mut cmd = Command::new("sipp");
        cmd.arg("-sf")
            .arg(sipp_scenario(scenario))
            .args(["-nostdin", "-i", "127.0.0.1", "-p", &port.to_string()])
            .args(["-mp", &free_udp_port().to_string()])
            .args(["-trace_err", "-trace_msg", "-trace_logs"])
            .args(extra)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(t) = target {
            cmd.arg(t.to_string());
        }
        let child = cmd.spawn().expect("spawn sipp (install sip-tester)");
        Sipp {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
        }
    }

    /// Waits for SIPp to exit; true when every call succeeded.
    pub async fn success(&mut self, within: Duration) -> bool {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(Ok(s)) => s.success(),
            _ => false,
        }
    }

    /// Trace files (messages, errors, logs).
    pub fn dump(&self) -> String {
        let mut out = String::new();
        if let Ok(rd) = std::fs::read_dir(self.dir.path()) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if (name.ends_with(".log") || name.ends_with(".txt"))
                    && let Ok(t) = std::fs::read_to_string(e.path())
                {
                    out.push_str(&format!("\n=== {name}\n{t}"));
                }
            }
        }
        out
    }

    /// The distinct INVITEs SIPp saw, as (request-URI user, Call-ID), retransmissions
    /// counted once: a callee dialled twice shows two Call-IDs for one user.
    pub fn invites(&self) -> std::collections::BTreeSet<(String, String)> {
        let log = self.messages();
        let lines: Vec<&str> = log.lines().map(str::trim).collect();
        let mut out = std::collections::BTreeSet::new();
        for (i, l) in lines.iter().enumerate() {
            let Some(uri) = l.strip_prefix("INVITE sip:") else {
                continue;
            };
            let user = uri.split(['@', ' ', ';']).next().unwrap_or_default();
            let call_id = lines[i + 1..]
                .iter()
                .take_while(|l| !l.is_empty())
                .find_map(|l| {
                    let (name, v) = l.split_once(':')?;
                    (name.eq_ignore_ascii_case("call-id") || name == "i").then(|| v.trim())
                })
                .unwrap_or_default();
            out.insert((user.to_string(), call_id.to_string()));
        }
        out
    }

    /// The SIP messages SIPp exchanged.
    pub fn messages(&self) -> String {
        let mut out = String::new();
        if let Ok(rd) = std::fs::read_dir(self.dir.path()) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().ends_with("_messages.log") {
                    out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
                }
            }
        }
        out
    }
}

/// Speaks `text` with flite and writes raw 8 kHz µ-law (what SIPp `rtp_stream` plays) to
/// `dir/name`, with `lead_ms` of silence first and one second after.
pub fn ulaw_speech(dir: &Path, name: &str, text: &str, lead_ms: u32) -> PathBuf {
    let wav = dir.join(format!("{name}.flite.wav"));
    let st = std::process::Command::new("flite")
        .args(["-t", text, "-o"])
        .arg(&wav)
        .status()
        .expect("run flite");
    assert!(st.success(), "flite failed");
    let out = dir.join(name);
    let st = std::process::Command::new("sox")
        .arg(&wav)
        .args(["-r", "8000", "-c", "1", "-t", "ul"])
        .arg(&out)
        .args(["pad", &format!("{:.3}", f64::from(lead_ms) / 1000.0), "1.0"])
        .status()
        .expect("run sox");
    assert!(st.success(), "sox failed");
    out
}

/// The local recognition node (`tools/stt-node/server.py`), killed on drop.
pub struct SttNode {
    _child: Child,
    pub url: String,
}

impl SttNode {
    /// Starts the node with `$CALLSMITH_STT_PYTHON` and waits until it is ready (model loaded).
    pub async fn start() -> SttNode {
        let python = std::env::var("CALLSMITH_STT_PYTHON").unwrap_or_else(|_| {
            panic!("CALLSMITH_STT_PYTHON is not set: run `eval \"$(bash scripts/test-deps.sh)\"`")
        });
        let port = free_tcp_port();
        let child = Command::new(python)
            .arg(workspace().join("tools/stt-node/server.py"))
            .args(["--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the STT node");
        let ready = format!("http://127.0.0.1:{port}/ready");
        let c = reqwest::Client::new();
        for _ in 0..1200 {
            if let Ok(r) = c.get(&ready).send().await
                && r.status().is_success()
            {
                return SttNode {
                    _child: child,
                    url: format!("ws://127.0.0.1:{port}"),
                };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the STT node did not become ready within 120 s");
    }
}

/// A tiny HTTP server recording every request body it receives; answers `status`.
pub struct Sink {
    pub url: String,
    pub received: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sink {
    /// Serves on 127.0.0.1; the first `fail_first` requests get 503, later ones 200.
    pub async fn start(fail_first: usize) -> Sink {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind sink");
        let addr = l.local_addr().expect("sink addr");
        let received: Arc<Mutex<Vec<Value>>> = Arc::default();
        let r2 = received.clone();
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                let received = r2.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let (head_end, len) = loop {
                        let Ok(n) = s.read(&mut chunk).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                            let len = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            break (i + 4, len);
                        }
                        if buf.len() > 1 << 20 {
                            return;
                        }
                    };
                    while buf.len() < head_end + len {
                        let Ok(n) = s.read(&mut chunk).await else {
                            return;
                        };
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    let body = &buf[head_end..(head_end + len).min(buf.len())];
                    let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let status = if n < fail_first {
                        "503 Service Unavailable"
                    } else {
                        "200 OK"
                    };
                    if n >= fail_first {
                        let v = serde_json::from_slice(body).unwrap_or(Value::Null);
                        received.lock().expect("sink lock").push(v);
                    }
                    let resp = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    );
                    let _ = s.write_all(resp.as_bytes()).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        Sink {
            url: format!("http://{addr}/results"),
            received,
            task,
        }
    }

    pub fn bodies(&self) -> Vec<Value> {
        self.received.lock().expect("sink lock").clone()
    }
}

/// Polls `f` every 200 ms until it returns Some or `within` passes.
pub async fn eventually<T, F, Fut>(within: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Direct store access to the engine's database (same file or server the binary uses),
/// for resources whose HTTP routes are not part of what a test exercises.
pub async fn store_of(e: &Engine, database_url: Option<&str>) -> callsmith_control::Store {
    let url = database_url
        .map(String::from)
        .unwrap_or_else(|| format!("sqlite://{}", e.data_dir.join("callsmith.db").display()));
    callsmith_control::Store::connect(&url, 2)
        .await
        .expect("connect to the engine's database")
}

/// Creates a scenario whose draft is `snapshot`; publishes it too when `publish`.
/// Returns the scenario sid.
pub async fn create_scenario(
    store: &callsmith_control::Store,
    t: &Tenancy,
    snapshot: &Value,
    publish: bool,
) -> String {
    let sid = callsmith_control::ids::new_sid(callsmith_control::ids::prefix::SCENARIO);
    let draft = callsmith_control::ids::new_sid(callsmith_control::ids::prefix::SCENARIO_VERSION);
    let text = snapshot.to_string();
    let hash = callsmith_scenarios::canonical::content_hash_value(snapshot);
    store
        .scenario_create(&sid, &t.tenant, &t.account, "e2e", "", &draft, &text, &hash)
        .await
        .expect("create scenario");
    if publish {
        store
            .scenario_publish(&sid, &t.account, &text, &hash)
            .await
            .expect("publish scenario");
    }
    sid
}

/// Agent settings for [`create_agent`].
#[derive(Debug, Clone)]
pub struct AgentSpec {
    pub scenario_sid: String,
    pub number_sid: String,
    pub cps: i64,
    pub cpl: i64,
    pub targets: Vec<String>,
    /// `{"strategy": ..., "args": ...}`.
    pub calling_schedule: Value,
    pub timezone: String,
    pub call_recording: bool,
}

/// Creates an active agent dialling from one number. Returns its sid.
pub async fn create_agent(store: &callsmith_control::Store, t: &Tenancy, a: &AgentSpec) -> String {
    let sid = callsmith_control::ids::new_sid(callsmith_control::ids::prefix::AGENT);
    let targets: Vec<Value> = a.targets.iter().map(|u| json!({"url": u})).collect();
    let cfg = callsmith_control::store::AgentConfig {
        gateway_type: "number".into(),
        number_sid: Some(a.number_sid.clone()),
        number_pool_sid: None,
        scenario_sid: a.scenario_sid.clone(),
        voicemail_enabled: false,
        call_recording: a.call_recording,
        calling_schedule: a.calling_schedule.to_string(),
        timezone: a.timezone.clone(),
        cps: a.cps,
        cpl: a.cpl,
        is_test: false,
        communication_result: json!({"targets": targets}).to_string(),
        sms: None,
        sms_provider_sid: None,
        status: "active".into(),
    };
    store
        .agent_create(&sid, &t.tenant, &t.account, &cfg)
        .await
        .expect("create agent");
    sid
}

/// A scenario: greet with a TTS prompt, record goal `greeted`, end the call.
pub fn greeting_scenario(text: &str) -> Value {
    json!({"name": "greeting", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {
            "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""}},
            "outputs": [{"type": "next", "description": "", "next": "hello"}]}]},
        "inbound_call": {"v1": [{"id": "in", "description": "", "properties": {},
            "outputs": [{"type": "next", "description": "", "next": "hello"}]}]},
        "audio_tts": {"v1": [{"id": "hello", "description": "", "properties": {"text": text, "language": "", "voice": "", "engine": "", "model": ""},
            "outputs": [{"type": "next", "description": "", "next": "g"}]}]},
        "goal": {"v1": [{"id": "g", "description": "", "properties": {"goal": "greeted"},
            "outputs": [{"type": "next", "description": "", "next": "bye"}]}]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

/// A scenario: ask a yes/no question by speech; `yes` → goal `agreed`, `no` → goal
/// `declined`, nothing → goal `silent`; then end the call.
pub fn question_scenario() -> Value {
    let goal = |id: &str, g: &str| {
        json!({"id": id, "description": "", "properties": {"goal": g},
        "outputs": [{"type": "next", "description": "", "next": "bye"}]})
    };
    json!({"name": "question", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {
            "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""},
            "stt_general": {"language": "en-US", "engine": "whisper", "model": "", "primary_language": "", "fallback_languages": []}},
            "outputs": [{"type": "next", "description": "", "next": "ask"}]}]},
        "question": {"v1": [{"id": "ask", "description": "", "properties": {
            "stt_properties": {"no_input_timeout": 12, "speech_timeout": 1},
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Do you want a call back?"}}, "is_interruptible": false},
            "type": "standard",
            "input_mode": "speech",
            "answer": {"answers": [
                {"answer_id": "yes", "description": "", "speech_input": {"tokens": ["yes", "yeah", "sure"], "mode": "contains"}},
                {"answer_id": "no", "description": "", "speech_input": {"tokens": ["no"], "mode": "contains"}}
            ]}},
            "outputs": [
                {"type": "yes", "description": "", "next": "g_yes"},
                {"type": "no", "description": "", "next": "g_no"},
                {"type": "invalid", "description": "", "next": "g_invalid"},
                {"type": "empty", "description": "", "next": "g_empty"}
            ]}]},
        "goal": {"v1": [goal("g_yes", "agreed"), goal("g_no", "declined"), goal("g_invalid", "unclear"), goal("g_empty", "silent")]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

/// A scenario: ask "Press one to confirm." and listen by `input_mode` (`dtmf`: the key 1;
/// `speech`: "yes"/"yeah"/"sure" by the `whisper` engine); the answer is replied to with a
/// TTS prompt ("Thank you, goodbye.") — the reply whose first RTP packet ends the turn
/// latency — and goal `confirmed`; anything else → goal `unconfirmed`; then the call ends.
pub fn reply_scenario(input_mode: &str) -> Value {
    let end = |id: &str, g: &str| {
        json!({"id": id, "description": "", "properties": {"goal": g},
        "outputs": [{"type": "next", "description": "", "next": "bye"}]})
    };
    json!({"name": "confirm", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {
            "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""},
            "stt_general": {"language": "en-US", "engine": "whisper", "model": "", "primary_language": "", "fallback_languages": []}},
            "outputs": [{"type": "next", "description": "", "next": "ask"}]}]},
        "question": {"v1": [{"id": "ask", "description": "", "properties": {
            "stt_properties": {"no_input_timeout": 12, "speech_timeout": 1},
            "dtmf_properties": {"max_symbols": 1},
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Press one to confirm."}}, "is_interruptible": false},
            "type": "standard",
            "input_mode": input_mode,
            "answer": {"answers": [
                {"answer_id": "yes", "description": "", "speech_input": {"tokens": ["yes", "yeah", "sure"], "mode": "contains"}, "dtmf_input": {"value": "1"}}
            ]}},
            "outputs": [
                {"type": "yes", "description": "", "next": "thanks"},
                {"type": "invalid", "description": "", "next": "g_no"},
                {"type": "empty", "description": "", "next": "g_no"}
            ]}]},
        "audio_tts": {"v1": [{"id": "thanks", "description": "", "properties": {"text": "Thank you, goodbye.", "language": "", "voice": "", "engine": "", "model": ""},
            "outputs": [{"type": "next", "description": "", "next": "g_yes"}]}]},
        "goal": {"v1": [end("g_yes", "confirmed"), end("g_no", "unconfirmed")]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
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
