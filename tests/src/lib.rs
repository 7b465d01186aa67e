//! End-to-end test helpers: the real `callsmith` binary, real SIPp peers, the real
//! recognition node and a tiny HTTP result sink, all on loopback.
//!
//! The binary is looked up as `$CALLSMITH_BIN`, else `$CARGO_TARGET_DIR/debug/callsmith`,
//! else `<workspace>/target/debug/callsmith`; build it first with
//! `cargo build -p callsmith-cli --bin callsmith`.

pub mod netns;
pub mod scenario;

use std::net::{SocketAddr, TcpListener as StdTcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use callsmith_domain::communication::{CommunicationStatus, history::CallHistory};
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
        "{} does not exist: run `cargo build -p callsmith-cli --bin callsmith` (same CARGO_TARGET_DIR) first",
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
    /// Extra keys of the `[dialer]` section (`lease_secs = 2\n…`). Test engines refuse
    /// calls for timer lag only beyond a second (`max_timer_lag_ms = 1000`): tests run
    /// side by side on two cores, where 100 ms stalls happen without any call load.
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
            "data_dir = {:?}\nbootstrap_superuser_token = {SU_TOKEN:?}\n[http]\nlisten = \"{}\"\n\
             [auth]\nargon2_memory_kib = 64\nargon2_iterations = 1\n\
             [media]\nrtp_port_min = {rtp_min}\nrtp_port_max = {}\nice_port_min = {}\nice_port_max = {rtp_max}\n{}\
             [dialer]\npoll_interval_ms = 100\nresult_backoff_base_ms = 200\n{}{}",
            data_dir.display().to_string(),
            SocketAddr::new(
                opts.http_ip.unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()),
                http_port
            ),
            // The range's last 20 ports are the ICE ports of browser calls.
            rtp_max - 20,
            rtp_max - 19,
            opts.media_toml,
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
        toml.push_str(&format!(
            "[sip]\nudp = \"127.0.0.1:{sip_port}\"\n{}",
            opts.sip_toml
        ));
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
        let log_path = data_dir.join(format!("engine-{}.log", free_tcp_port()));
        let log = std::fs::File::create(&log_path).expect("log file");
        let log2 = log.try_clone().expect("log file");
        let child = Command::new(binary())
            .arg("--config")
            .arg(&cfg_path)
            .arg("serve")
            // CALLSMITH_E2E_LOG overrides the engine's log filter (benches use `info`).
            .env(
                "RUST_LOG",
                std::env::var("CALLSMITH_E2E_LOG")
                    .unwrap_or_else(|_| "info,callsmith_engine=debug".into()),
            )
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

/// Writes `secs` seconds of a `freq_hz` sine (8 kHz, raw µ-law, what SIPp `rtp_stream`
/// plays) to `dir/name`.
pub fn ulaw_tone(dir: &Path, name: &str, freq_hz: f32, secs: f32) -> PathBuf {
    let bytes: Vec<u8> = tone_frame_iter(freq_hz)
        .take((secs * 50.0) as usize)
        .flatten()
        .map(callsmith_media::g711::ulaw_encode)
        .collect();
    let out = dir.join(name);
    std::fs::write(&out, bytes).expect("write tone");
    out
}

/// 20 ms frames (160 samples at 8 kHz) of a continuous sine at half scale.
fn tone_frame_iter(freq_hz: f32) -> impl Iterator<Item = Vec<i16>> {
    (0u64..).map(move |f| {
        (0..160u64)
            .map(|i| {
                let t = (f * 160 + i) as f32 / 8000.0;
                ((2.0 * std::f32::consts::PI * freq_hz * t).sin() * 16000.0) as i16
            })
            .collect()
    })
}

/// How many 20 ms frames of `pcm` carry a clear `freq_hz` tone (Goertzel share of the
/// frame's energy above 0.5, and not near-silence).
pub fn tone_frames(pcm: &[i16], freq_hz: f32) -> usize {
    pcm.chunks_exact(160)
        .filter(|f| {
            let rms = (f.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / 160.0).sqrt();
            rms > 500.0 && callsmith_media::amd::tone_ratio(f, freq_hz) > 0.5
        })
        .count()
}

/// The two channels of a 16-bit stereo WAV (a call recording: left = caller, right = bot).
pub fn wav_channels(path: &Path) -> (Vec<i16>, Vec<i16>) {
    let r = hound::WavReader::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    assert_eq!(r.spec().channels, 2, "a stereo recording");
    let samples: Vec<i16> = r
        .into_samples::<i16>()
        .map(|s| s.expect("sample"))
        .collect();
    let left = samples.iter().step_by(2).copied().collect();
    let right = samples.iter().skip(1).step_by(2).copied().collect();
    (left, right)
}

/// A bare RTP endpoint on 127.0.0.1 standing in for a SIP peer's media (a SIPp UAS can put
/// its port in the SDP it answers with) for transfer tests: it decodes the PCMU it receives and, once the
/// first packet told it where the engine is, answers with a continuous PCMU tone.
pub struct TonePeer {
    pub port: u16,
    received: Arc<Mutex<Vec<i16>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TonePeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TonePeer {
    /// Binds a free port; sends a `tone_hz` sine back to whoever sends to it.
    pub async fn start(tone_hz: f32) -> TonePeer {
        use callsmith_media::{g711, rtp};
        let sock = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind rtp peer");
        let port = sock.local_addr().expect("rtp peer addr").port();
        let received: Arc<Mutex<Vec<i16>>> = Arc::default();
        let rx = received.clone();
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            let mut out = [0u8; 12 + 160];
            let mut tone = tone_frame_iter(tone_hz);
            let mut peer: Option<SocketAddr> = None;
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            let (mut seq, mut ts) = (0u16, 0u32);
            loop {
                tokio::select! {
                    r = sock.recv_from(&mut buf) => {
                        let Ok((n, from)) = r else { return };
                        if let Ok(p) = rtp::RtpPacket::parse(&buf[..n])
                            && p.payload_type == 0
                        {
                            peer.get_or_insert(from);
                            let mut pcm = vec![0i16; p.payload.len()];
                            g711::Codec::Pcmu.decode_into(p.payload, &mut pcm);
                            rx.lock().expect("rtp peer lock").extend_from_slice(&pcm);
                        }
                    }
                    _ = tick.tick() => {
                        let Some(to) = peer else { continue };
                        let frame = tone.next().unwrap_or_default();
                        let mut payload = [0u8; 160];
                        g711::Codec::Pcmu.encode_into(&frame, &mut payload);
                        if let Ok(n) = rtp::write_rtp(&mut out, seq == 0, 0, seq, ts, 0x5eed_0001, &payload) {
                            let _ = sock.send_to(&out[..n], to).await;
                        }
                        seq = seq.wrapping_add(1);
                        ts = ts.wrapping_add(160);
                    }
                }
            }
        });
        TonePeer {
            port,
            received,
            task,
        }
    }

    /// Everything received so far, decoded to 8 kHz linear PCM.
    pub fn received(&self) -> Vec<i16> {
        self.received.lock().expect("rtp peer lock").clone()
    }
}

/// The local speech node (`media/speech-node/server.py`), killed on drop.
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
            .arg(workspace().join("media/speech-node/server.py"))
            // One Whisper thread: as fast as two on a loaded 2-core machine, and the
            // engine and its peers keep a core.
            .args(["--port", &port.to_string(), "--threads", "1"])
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

/// One request an [`HttpPeer`] received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The body as JSON (Null when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The answer of an [`HttpPeer`]: a status, a content type and the body, written in
/// chunks with a pause before each (a server-sent event stream is several chunks).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub chunks: Vec<(Duration, Vec<u8>)>,
}

impl Reply {
    pub fn json(status: u16, v: &Value) -> Reply {
        Reply {
            status,
            content_type: "application/json".into(),
            chunks: vec![(Duration::ZERO, v.to_string().into_bytes())],
        }
    }

    pub fn empty(status: u16) -> Reply {
        Reply {
            status,
            content_type: "text/plain".into(),
            chunks: vec![],
        }
    }

    /// An OpenAI-compatible chat-completions stream: `content` split into chunks of a few
    /// characters, one `data:` event each (`gap` apart), a finish chunk and `data: [DONE]`.
    pub fn chat_stream(model: &str, content: &str, gap: Duration) -> Reply {
        let chunk = |delta: Value, finish: Value| {
            let v = json!({"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 1,
                "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            (gap, format!("data: {v}\n\n").into_bytes())
        };
        let mut chunks = vec![chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        )];
        let chars: Vec<char> = content.chars().collect();
        for piece in chars.chunks(3) {
            chunks.push(chunk(
                json!({"content": piece.iter().collect::<String>()}),
                Value::Null,
            ));
        }
        chunks.push(chunk(json!({}), json!("stop")));
        chunks.push((gap, b"data: [DONE]\n\n".to_vec()));
        Reply {
            status: 200,
            content_type: "text/event-stream".into(),
            chunks,
        }
    }
}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

/// When an [`HttpPeer`] read a request, and when it wrote the last byte of its answer.
pub type Timing = (tokio::time::Instant, Option<tokio::time::Instant>);

/// A small HTTP/1.1 server on 127.0.0.1 that records every request and answers with what
/// its handler returns (one request per connection, `connection: close`).
pub struct HttpPeer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// Per answered request: when it was read and when its answer's last byte was written.
    timings: Arc<Mutex<Vec<Timing>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one HTTP/1.1 request (head and content-length body).
async fn read_request(s: &mut tokio::net::TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head_end, len) = loop {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
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
            return None;
        }
    };
    while buf.len() < head_end + len {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf[..head_end - 4]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let target = first.next().unwrap_or_default().to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(Recorded {
        method,
        target,
        headers,
        body: buf[head_end..(head_end + len).min(buf.len())].to_vec(),
    })
}

impl HttpPeer {
    pub async fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> HttpPeer {
        let handler: Arc<Handler> = Arc::new(handler);
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind http peer");
        let addr = l.local_addr().expect("http peer addr");
        let requests: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let r2 = requests.clone();
        let timings: Arc<Mutex<Vec<_>>> = Arc::default();
        let t2 = timings.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                let requests = r2.clone();
                let timings = t2.clone();
                let handler = handler.clone();
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut s).await else {
                        return;
                    };
                    let read_at = tokio::time::Instant::now();
                    let reply = handler(&req);
                    let slot = {
                        let mut t = timings.lock().expect("peer lock");
                        t.push((read_at, None));
                        t.len() - 1
                    };
                    requests.lock().expect("peer lock").push(req);
                    let len = if reply.content_type == "text/event-stream" {
                        String::new()
                    } else {
                        let n: usize = reply.chunks.iter().map(|(_, c)| c.len()).sum();
                        format!("content-length: {n}\r\n")
                    };
                    let head = format!(
                        "HTTP/1.1 {} X\r\ncontent-type: {}\r\n{len}connection: close\r\n\r\n",
                        reply.status, reply.content_type
                    );
                    if s.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    for (pause, c) in &reply.chunks {
                        tokio::time::sleep(*pause).await;
                        if s.write_all(c).await.is_err() {
                            return;
                        }
                        let _ = s.flush().await;
                    }
                    timings.lock().expect("peer lock")[slot].1 = Some(tokio::time::Instant::now());
                    let _ = s.shutdown().await;
                });
            }
        });
        HttpPeer {
            url: format!("http://{addr}"),
            requests,
            timings,
            task,
        }
    }

    /// Per request, in the order they were read: when it was read and when the last byte
    /// of its answer was written (`None` while it is being answered).
    pub fn timings(&self) -> Vec<Timing> {
        self.timings.lock().expect("peer lock").clone()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("peer lock").clone()
    }
}

/// A tiny HTTP server recording every request body it receives (as JSON).
pub struct Sink {
    pub url: String,
    peer: HttpPeer,
    fail_first: usize,
}

impl Sink {
    /// Serves on 127.0.0.1; the first `fail_first` requests get 503, later ones 200.
    pub async fn start(fail_first: usize) -> Sink {
        let seen = std::sync::atomic::AtomicUsize::new(0);
        let peer = HttpPeer::start(move |_| {
            if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < fail_first {
                Reply::empty(503)
            } else {
                Reply::empty(200)
            }
        })
        .await;
        Sink {
            url: format!("{}/results", peer.url),
            peer,
            fail_first,
        }
    }

    /// Bodies of the requests answered 200.
    pub fn bodies(&self) -> Vec<Value> {
        self.peer
            .requests()
            .iter()
            .skip(self.fail_first)
            .map(Recorded::json)
            .collect()
    }
}

/// What an [`RtpPeer`] does once the engine's first RTP packet arrived.
#[derive(Debug, Clone)]
pub enum RtpStep {
    /// Silence for this long.
    Wait(Duration),
    /// RFC 4733 telephone-events (payload type 101): 100 ms per digit, three end packets,
    /// 60 ms of silence between digits.
    Digits(String),
    /// Raw 8 kHz µ-law audio, 160 bytes per 20 ms packet.
    Audio(Vec<u8>),
}

#[derive(Debug, Default)]
struct RtpCounters {
    received: u64,
    voiced: u64,
    /// Milliseconds after the first received packet of the first voiced packet after the
    /// script finished.
    sent_done_ms: Option<u64>,
    voiced_after_script: u64,
    /// When each voiced packet arrived.
    voiced_at: Vec<tokio::time::Instant>,
    /// When each scripted key's first telephone-event packet was sent.
    keys_at: Vec<(char, tokio::time::Instant)>,
}

/// The callee's RTP endpoint, owned by the test: a UDP socket on 127.0.0.1 (announce its
/// `port` in the callee's SDP). After the engine's first packet it sends PCMU every 20 ms
/// from the same socket (symmetric RTP): the script's audio and telephone-events, silence
/// otherwise, until the engine has been silent for 1.5 s. It counts what it receives, and
/// how much of it is voice.
pub struct RtpPeer {
    pub port: u16,
    counters: Arc<Mutex<RtpCounters>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RtpPeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An RTP packet (version 2, no CSRC).
fn rtp_packet(pt: u8, marker: bool, seq: u16, ts: u32, payload: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(12 + payload.len());
    p.push(0x80);
    p.push(pt | if marker { 0x80 } else { 0 });
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&ts.to_be_bytes());
    p.extend_from_slice(&0x00e2_e2e2u32.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

/// Whether a µ-law payload carries voice (more than a quarter of its samples above ~ -40 dBFS).
fn ulaw_voiced(payload: &[u8]) -> bool {
    let loud = payload.iter().filter(|b| ((!**b) >> 4) & 0x07 >= 3).count();
    loud * 4 > payload.len()
}

impl RtpPeer {
    pub async fn start(script: Vec<RtpStep>) -> RtpPeer {
        let sock = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind rtp peer");
        let port = sock.local_addr().expect("rtp addr").port();
        // The plan: one (payload type, marker, timestamp, payload) per 20 ms slot.
        let mut plan: Vec<(u8, bool, u32, Vec<u8>)> = Vec::new();
        // The slot of each key's first telephone-event packet.
        let mut key_slots: Vec<(usize, char)> = Vec::new();
        let mut ts: u32 = 0;
        let silence = vec![0xFFu8; 160];
        for step in script {
            match step {
                RtpStep::Wait(d) => {
                    for _ in 0..(d.as_millis() / 20) {
                        plan.push((0, false, ts, silence.clone()));
                        ts = ts.wrapping_add(160);
                    }
                }
                RtpStep::Audio(bytes) => {
                    for c in bytes.chunks(160) {
                        let mut f = c.to_vec();
                        f.resize(160, 0xFF);
                        plan.push((0, false, ts, f));
                        ts = ts.wrapping_add(160);
                    }
                }
                RtpStep::Digits(digits) => {
                    for d in digits.chars() {
                        let event = match d {
                            '0'..='9' => d as u8 - b'0',
                            '*' => 10,
                            '#' => 11,
                            other => panic!("not a DTMF digit: {other:?}"),
                        };
                        let start = ts;
                        key_slots.push((plan.len(), d));
                        for i in 1..=5u16 {
                            let dur = (i * 160).to_be_bytes();
                            plan.push((101, i == 1, start, vec![event, 10, dur[0], dur[1]]));
                            ts = ts.wrapping_add(160);
                        }
                        for _ in 0..3 {
                            let dur = 800u16.to_be_bytes();
                            plan.push((101, false, start, vec![event, 0x80 | 10, dur[0], dur[1]]));
                            ts = ts.wrapping_add(160);
                        }
                        for _ in 0..3 {
                            plan.push((0, false, ts, silence.clone()));
                            ts = ts.wrapping_add(160);
                        }
                    }
                }
            }
        }
        let counters: Arc<Mutex<RtpCounters>> = Arc::default();
        let c2 = counters.clone();
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            // The engine's first packet tells where to send.
            let Ok((n, engine)) = sock.recv_from(&mut buf).await else {
                return;
            };
            let first = tokio::time::Instant::now();
            let count = |n: usize, buf: &[u8], done: bool| {
                let mut c = c2.lock().expect("rtp lock");
                c.received += 1;
                if n > 12 && ulaw_voiced(&buf[12..n]) {
                    c.voiced += 1;
                    c.voiced_at.push(tokio::time::Instant::now());
                    if done {
                        c.voiced_after_script += 1;
                    }
                }
            };
            count(n, &buf, false);
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            let mut seq: u16 = 1;
            let mut i = 0usize;
            let mut last = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    r = sock.recv_from(&mut buf) => {
                        if let Ok((n, _)) = r {
                            last = tokio::time::Instant::now();
                            count(n, &buf, i >= plan.len());
                        }
                    }
                    _ = tick.tick() => {
                        // The engine stopped sending (the call ended): stop too, so no stale
                        // stream reaches a media port the engine hands to a later call.
                        if last.elapsed() > Duration::from_millis(1500) {
                            return;
                        }
                        if let Some((_, key)) = key_slots.iter().find(|(slot, _)| *slot == i) {
                            c2.lock().expect("rtp lock").keys_at.push((*key, tokio::time::Instant::now()));
                        }
                        let pkt = match plan.get(i) {
                            Some((pt, m, t, p)) => rtp_packet(*pt, *m, seq, *t, p),
                            None => {
                                c2.lock().expect("rtp lock").sent_done_ms
                                    .get_or_insert(first.elapsed().as_millis() as u64);
                                rtp_packet(0, false, seq, ts.wrapping_add(160 * (i - plan.len()) as u32), &silence)
                            }
                        };
                        let _ = sock.send_to(&pkt, engine).await;
                        seq = seq.wrapping_add(1);
                        i += 1;
                    }
                }
            }
        });
        RtpPeer {
            port,
            counters,
            task,
        }
    }

    /// RTP packets received from the engine.
    pub fn received(&self) -> u64 {
        self.counters.lock().expect("rtp lock").received
    }

    /// Received packets carrying voice (the engine's prompts), and how many of them arrived
    /// after the script was sent.
    pub fn voiced(&self) -> (u64, u64) {
        let c = self.counters.lock().expect("rtp lock");
        (c.voiced, c.voiced_after_script)
    }

    /// When the voiced packets received from `from` on arrived.
    pub fn voiced_since(&self, from: tokio::time::Instant) -> Vec<tokio::time::Instant> {
        let c = self.counters.lock().expect("rtp lock");
        c.voiced_at.iter().copied().filter(|t| *t >= from).collect()
    }

    /// The scripted keys sent so far, each with when its first telephone-event packet was
    /// sent.
    pub fn keys_sent(&self) -> Vec<(char, tokio::time::Instant)> {
        self.counters.lock().expect("rtp lock").keys_at.clone()
    }

    /// Milliseconds after the engine's first packet at which the script was fully sent.
    pub fn script_done_ms(&self) -> Option<u64> {
        self.counters.lock().expect("rtp lock").sent_done_ms
    }
}

/// Runs sox with `args` (panics with its error output on failure).
pub fn sox(args: &[&str]) {
    let out = std::process::Command::new("sox")
        .args(args)
        .output()
        .expect("run sox");
    assert!(
        out.status.success(),
        "sox {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A voicemail greeting as raw 8 kHz µ-law: 200 ms of silence, flite speaking `text`,
/// 400 ms of silence, a 1 kHz beep of `beep_ms`, then one second of silence.
pub fn ulaw_greeting_with_beep(dir: &Path, name: &str, text: &str, beep_ms: u32) -> PathBuf {
    let wav = dir.join(format!("{name}.flite.wav"));
    let st = std::process::Command::new("flite")
        .args(["-t", text, "-o"])
        .arg(&wav)
        .status()
        .expect("run flite");
    assert!(st.success(), "flite failed");
    let speech = dir.join(format!("{name}.speech.ul"));
    let (w, sp) = (wav.display().to_string(), speech.display().to_string());
    sox(&[
        &w, "-r", "8000", "-c", "1", "-t", "ul", &sp, "pad", "0.2", "0.4",
    ]);
    let beep = dir.join(format!("{name}.beep.ul"));
    let b = beep.display().to_string();
    let secs = format!("{:.3}", f64::from(beep_ms) / 1000.0);
    sox(&[
        "-n", "-r", "8000", "-c", "1", "-t", "ul", &b, "synth", &secs, "sine", "1000", "vol",
        "0.5", "pad", "0", "1.0",
    ]);
    let out = dir.join(name);
    let mut bytes = std::fs::read(&speech).expect("speech");
    bytes.extend(std::fs::read(&beep).expect("beep"));
    std::fs::write(&out, bytes).expect("write greeting");
    out
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
pub async fn store_of(e: &Engine, database_url: Option<&str>) -> callsmith_domain::Store {
    let url = database_url
        .map(String::from)
        .unwrap_or_else(|| format!("sqlite://{}", e.data_dir.join("callsmith.db").display()));
    callsmith_domain::Store::connect(&url, 2)
        .await
        .expect("connect to the engine's database")
}

/// Creates a scenario whose draft is `snapshot`; publishes it too when `publish`.
/// Returns the scenario sid.
pub async fn create_scenario(
    store: &callsmith_domain::Store,
    t: &Tenancy,
    snapshot: &Value,
    publish: bool,
) -> String {
    let sid = callsmith_domain::ids::new_sid(callsmith_domain::ids::prefix::SCENARIO);
    let draft = callsmith_domain::ids::new_sid(callsmith_domain::ids::prefix::SCENARIO_VERSION);
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

impl AgentSpec {
    /// An agent on `number_sid` running `scenario_sid` with the defaults most tests want:
    /// no cps or cpl limit, no result targets, always open, UTC, no recording. Change a
    /// field with struct update syntax.
    pub fn new(scenario_sid: impl Into<String>, number_sid: impl Into<String>) -> AgentSpec {
        AgentSpec {
            scenario_sid: scenario_sid.into(),
            number_sid: number_sid.into(),
            cps: 0,
            cpl: 0,
            targets: vec![],
            calling_schedule: always(),
            timezone: "UTC".into(),
            call_recording: false,
        }
    }
}

/// The calling schedule that is always open.
pub fn always() -> Value {
    json!({"strategy": "always", "args": {}})
}

/// Creates an active agent dialling from one number. Returns its sid.
pub async fn create_agent(store: &callsmith_domain::Store, t: &Tenancy, a: &AgentSpec) -> String {
    let sid = callsmith_domain::ids::new_sid(callsmith_domain::ids::prefix::AGENT);
    let targets: Vec<Value> = a.targets.iter().map(|u| json!({"url": u})).collect();
    let cfg = callsmith_domain::store::AgentConfig {
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
        strategy_sid: None,
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

/// A WAV of `secs` of a loud 440 Hz tone at 8 kHz, 16-bit mono.
pub fn tone_wav(secs: f32) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 8000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).expect("wav");
    for i in 0..(8000.0 * secs) as usize {
        let v = (i as f32 * 2.0 * std::f32::consts::PI * 440.0 / 8000.0).sin() * 16000.0;
        w.write_sample(v as i16).expect("sample");
    }
    w.finalize().expect("finalize");
    out.into_inner()
}

/// Uploads a WAV as an audio file of `account` (as the superuser); returns the audio file.
pub async fn upload_audio(e: &Engine, account: &str, wav: Vec<u8>) -> Value {
    let part = reqwest::multipart::Part::bytes(wav)
        .file_name("tone.wav")
        .mime_str("audio/wav")
        .expect("mime");
    let r = e
        .client
        .post(format!("{}/v1/audio", e.base_url))
        .bearer_auth(SU_TOKEN)
        .header("X-Account-Sid", account)
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .expect("upload");
    assert_eq!(r.status().as_u16(), 201);
    r.json().await.expect("audio json")
}
