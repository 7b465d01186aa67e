//! Shared test harness: real SIPp children on loopback, free ports, a stack per test.
#![allow(dead_code)]

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use callsmith_sip::{LegEvent, SipConfig, SipStack, TrunkConfig};
use tokio::process::{Child, Command};

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/sipp")
        .join(name)
}

/// A UDP port free on `ip` right now (tests run in parallel, so never hard-code ports).
pub fn free_udp_port(ip: &str) -> u16 {
    let s = UdpSocket::bind((ip, 0)).expect("bind probe socket");
    s.local_addr().expect("probe addr").port()
}

/// A SIPp child killed on drop.
pub struct Sipp {
    child: Child,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    finished: Option<bool>,
}

impl Sipp {
    /// Start SIPp with `scenario` bound to `ip`:free-port. `target` is where a UAC sends.
    /// Free ports are probed, so another test may grab one before SIPp binds it: a SIPp that
    /// exits at once (bind failure) is restarted on fresh ports, a few times at most.
    pub async fn start(
        scenario_name: &str,
        ip: &str,
        target: Option<SocketAddr>,
        extra: &[&str],
    ) -> Sipp {
        for _attempt in 0..5 {
            let mut sipp = Sipp::spawn(scenario_name, ip, target, extra);
            tokio::time::sleep(Duration::from_millis(200)).await;
            match sipp.child.try_wait() {
                Ok(None) => return sipp,
                // A UAC scenario may already be done (fast 4xx/OPTIONS): only retry failures.
                Ok(Some(status)) if status.success() => {
                    sipp.finished = Some(true);
                    return sipp;
                }
                _ => continue,
            }
        }
        panic!("SIPp could not start {scenario_name} on {ip}");
    }

    fn spawn(scenario_name: &str, ip: &str, target: Option<SocketAddr>, extra: &[&str]) -> Sipp {
        let port = free_udp_port(ip);
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new("sipp");
        cmd.arg("-sf")
            .arg(scenario(scenario_name))
            .args([
                "-nostdin",
                "-m",
                "1",
                "-l",
                "1",
                "-i",
                ip,
                "-p",
                &port.to_string(),
            ])
            .args(["-mp", &free_udp_port(ip).to_string()])
            .args([
                "-timeout",
                "30s",
                "-recv_timeout",
                "20000",
                "-max_recv_loops",
                "1",
            ])
            .args(["-trace_err", "-trace_logs", "-trace_msg"])
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
            addr: SocketAddr::new(ip.parse().expect("ip"), port),
            dir,
            finished: None,
        }
    }

    /// Wait for SIPp to exit; true when every call of its scenario succeeded (exit code 0).
    pub async fn success(&mut self, within: Duration) -> bool {
        if let Some(ok) = self.finished {
            return ok;
        }
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(Ok(status)) => {
                if !status.success() {
                    eprintln!("sipp failed: {status}; files: {}", self.dump());
                }
                status.success()
            }
            _ => {
                eprintln!("sipp did not finish; files: {}", self.dump());
                false
            }
        }
    }

    /// Text of SIPp's trace files (errors, logs, messages) for diagnostics and checks.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        if let Ok(rd) = std::fs::read_dir(self.dir.path()) {
            for e in rd.flatten() {
                if let Ok(t) = std::fs::read_to_string(e.path()) {
                    out.push_str(&format!("\n=== {}\n{}", e.path().display(), t));
                }
            }
        }
        out
    }

    pub fn logs(&self) -> String {
        let mut out = String::new();
        if let Ok(rd) = std::fs::read_dir(self.dir.path()) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().ends_with("_logs.log") {
                    out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
                }
            }
        }
        out
    }
}

/// Start a stack on a free loopback UDP port with the given trunks.
pub async fn start_stack(trunks: Vec<TrunkConfig>, known: &'static [&'static str]) -> SipStack {
    start_stack_with(trunks, known, |_| {}).await
}

/// Like [`start_stack`], with a hook to adjust the configuration.
pub async fn start_stack_with(
    trunks: Vec<TrunkConfig>,
    known: &'static [&'static str],
    adjust: impl FnOnce(&mut SipConfig),
) -> SipStack {
    init_tracing();
    let mut config = SipConfig {
        udp: Some("127.0.0.1:0".parse().expect("addr")),
        tcp: Some("127.0.0.1:0".parse().expect("addr")),
        default_trunk: trunks.first().map(|t| t.name.clone()),
        trunks,
        ..Default::default()
    };
    adjust(&mut config);
    SipStack::start(config, move |_trunk: &str, called: &str| {
        known.contains(&called)
    })
    .await
    .expect("stack starts")
}

pub fn media() -> callsmith_sip::LocalMedia {
    callsmith_sip::LocalMedia::g711("127.0.0.1".parse().expect("ip"), 40000)
}

/// Collect events until `Ended` (or the time limit).
pub async fn events_until_end(leg: &mut callsmith_sip::CallLeg, within: Duration) -> Vec<LegEvent> {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(within, async {
        while let Some(ev) = leg.next_event().await {
            let end = matches!(ev, LegEvent::Ended(_));
            out.push(ev);
            if end {
                break;
            }
        }
    })
    .await;
    out
}

pub fn ended(events: &[LegEvent]) -> Option<callsmith_sip::EndInfo> {
    events.iter().find_map(|e| match e {
        LegEvent::Ended(i) => Some(i.clone()),
        _ => None,
    })
}

/// An INVITE from `me` to 15550100 with an SDP offer whose media section is `media` (its
/// `m=` line and attributes), as a phone on a plain socket sends it.
pub fn raw_invite(me: SocketAddr, call_id: &str, media: &str) -> String {
    let sdp = format!(
        "v=0\r\no=peer 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n{media}"
    );
    format!(
        "INVITE sip:15550100@127.0.0.1 SIP/2.0\r\n\
         Via: SIP/2.0/UDP {me};rport;branch=z9hG4bK-{call_id}\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:+15550001@127.0.0.1>;tag=offer\r\n\
         To: <sip:15550100@127.0.0.1>\r\n\
         Call-ID: {call_id}@127.0.0.1\r\n\
         CSeq: 1 INVITE\r\n\
         Contact: <sip:+15550001@{me}>\r\n\
         Content-Type: application/sdp\r\n\
         Content-Length: {}\r\n\r\n{sdp}",
        sdp.len()
    )
}

/// The next final response on `sock` (1xx skipped), as text; `None` when none comes in time.
pub async fn final_response(sock: &tokio::net::UdpSocket, within: Duration) -> Option<String> {
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = vec![0u8; 65536];
    loop {
        let (n, _) = tokio::time::timeout_at(deadline, sock.recv_from(&mut buf))
            .await
            .ok()?
            .ok()?;
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        if !text.starts_with("SIP/2.0 1") {
            return Some(text);
        }
    }
}
