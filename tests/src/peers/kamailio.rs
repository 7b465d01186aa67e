//! The SIP edge: Kamailio (Debian's package) with the repository's configuration
//! (`deploy/kamailio/kamailio.cfg`), on a loopback port, in front of the test's nodes.
//!
//! The test names the nodes and the trunks' gateways; the harness writes them into a
//! dispatcher list and a trunks table of its own and hands the configuration its listen
//! address, list file, trunks folder, control socket, probe interval and node timeout as
//! `-A` defines, so the shipped file runs unedited. Kamailio runs in the foreground in a process group of its own, logging
//! to a file; dropping the edge kills that group.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::engine::workspace;
use crate::ports::free_udp_port;

/// Seconds between the edge's OPTIONS probes of every node (`PROBE_INTERVAL`).
pub const PROBE_INTERVAL_SECS: u64 = 1;
/// How long a node may stay silent before the edge gives up on it (`NODE_TIMEOUT_MS`).
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// The Kamailio binary: `CALLSMITH_KAMAILIO` (scripts/test-deps.sh exports it), else
/// Debian's path.
pub fn kamailio_binary() -> PathBuf {
    std::env::var("CALLSMITH_KAMAILIO")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from("/usr/sbin/kamailio"))
}

/// The edge's worker processes and memory (`-n`, `-m` shared MB, `-M` per-process MB).
#[derive(Debug, Clone, Copy)]
pub struct Sizing {
    pub workers: u32,
    pub shm_mb: u32,
    pub pkg_mb: u32,
}

impl Sizing {
    /// Two workers and small memory: enough for a test's few calls.
    pub const TEST: Sizing = Sizing {
        workers: 2,
        shm_mb: 32,
        pkg_mb: 4,
    };
    /// Four workers, 512 MB shared and 32 MB per process: hundreds of calls a second
    /// at once.
    pub const LOAD: Sizing = Sizing {
        workers: 4,
        shm_mb: 512,
        pkg_mb: 32,
    };
}

/// A running edge.
pub struct Kamailio {
    child: Child,
    /// Where callers send and where the nodes' trunk points.
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Kamailio {
    /// A free loopback port for the edge, to name as the nodes' trunk gateway before
    /// the edge starts.
    pub fn pick_addr() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], free_udp_port()))
    }

    /// Starts the edge on `addr` with `nodes` (set 1, call load) and `trunk_gateways`
    /// (set 2, the default trunk, named `carrier`); returns once it answers OPTIONS.
    pub async fn start(
        addr: SocketAddr,
        nodes: &[SocketAddr],
        trunk_gateways: &[SocketAddr],
    ) -> Kamailio {
        Kamailio::start_with_trunks(addr, nodes, &[("carrier", trunk_gateways)]).await
    }

    /// Starts the edge with named trunks: the i-th trunk's gateways are set 2 + i (the
    /// first is also the default), and the trunks table maps each name to its set.
    pub async fn start_with_trunks(
        addr: SocketAddr,
        nodes: &[SocketAddr],
        trunks: &[(&str, &[SocketAddr])],
    ) -> Kamailio {
        Kamailio::start_sized(addr, nodes, trunks, Sizing::TEST).await
    }

    /// Starts the edge with `sizing` (worker processes and memory): a test's few calls
    /// need little, a load of hundreds of calls a second needs a deployment's sizes
    /// (a Kamailio short of shared memory answers `500 … (2/SL)`).
    pub async fn start_sized(
        addr: SocketAddr,
        nodes: &[SocketAddr],
        trunks: &[(&str, &[SocketAddr])],
        sizing: Sizing,
    ) -> Kamailio {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut list = String::new();
        for (i, n) in nodes.iter().enumerate() {
            list.push_str(&format!("1 sip:{n} 0 0 duid=node{i};maxload=0\n"));
        }
        // The trunks table, in the shipped file's db_text format.
        let mut table = String::from(
            "id(int,auto) key_name(string) key_type(int) value_type(int) key_value(string) \
             expires(int)\n",
        );
        for (t, (name, gateways)) in trunks.iter().enumerate() {
            let set = 2 + t;
            table.push_str(&format!("{}:{name}:0:1:{set}:0\n", t + 1));
            for (i, g) in gateways.iter().enumerate() {
                list.push_str(&format!("{set} sip:{g} 0 0 duid={name}{i}\n"));
            }
        }
        let list_path = dir.path().join("dispatcher.list");
        std::fs::write(&list_path, list).expect("dispatcher list");
        let db = dir.path().join("db");
        std::fs::create_dir(&db).expect("db dir");
        std::fs::write(db.join("trunks"), table).expect("trunks table");
        std::fs::copy(
            workspace().join("deploy/kamailio/db/version"),
            db.join("version"),
        )
        .expect("version table");
        let log = std::fs::File::create(dir.path().join("kamailio.log")).expect("log");
        let log2 = log.try_clone().expect("log");
        let cfg = workspace().join("deploy/kamailio/kamailio.cfg");
        let child = Command::new(kamailio_binary())
            .arg("-f")
            .arg(&cfg)
            // Foreground, log to stderr.
            .args(["-DD", "-E"])
            .args(["-n", &sizing.workers.to_string()])
            .args(["-m", &sizing.shm_mb.to_string()])
            .args(["-M", &sizing.pkg_mb.to_string()])
            .arg("-Y")
            .arg(dir.path())
            .arg("-P")
            .arg(dir.path().join("kamailio.pid"))
            .arg("-w")
            .arg(dir.path())
            .arg("-A")
            .arg(format!("EDGE_LISTEN=udp:{addr}"))
            .arg("-A")
            .arg(format!("DISPATCHER_LIST=\"{}\"", list_path.display()))
            .arg("-A")
            .arg(format!(
                "CTL_SOCKET=\"unix:{}\"",
                dir.path().join("ctl").display()
            ))
            .arg("-A")
            .arg(format!("TRUNKS_DB=\"text://{}\"", db.display()))
            .arg("-A")
            .arg(format!("PROBE_INTERVAL={PROBE_INTERVAL_SECS}"))
            .arg("-A")
            .arg(format!("NODE_TIMEOUT_MS={NODE_TIMEOUT_MS}"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn kamailio (scripts/test-deps.sh installs it)");
        let edge = Kamailio { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if options_status(addr, Duration::from_millis(300)).await == Some(200) {
                return edge;
            }
        }
        panic!(
            "the edge did not answer OPTIONS within 20 s; log:\n{}",
            edge.log()
        );
    }

    /// Kamailio's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kamailio.log")).unwrap_or_default()
    }

    /// Waits until the edge logged `node` going down (a failed probe, or an INVITE it
    /// left unanswered); the time it took from `since`.
    pub async fn wait_down(
        &self,
        node: SocketAddr,
        since: Instant,
        within: Duration,
    ) -> Option<Duration> {
        let probed = format!("destination down: sip:{node}");
        let silent = format!("node sip:{node} did not answer");
        while since.elapsed() < within {
            let log = self.log();
            if log.contains(&probed) || log.contains(&silent) {
                return Some(since.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
}

impl Drop for Kamailio {
    fn drop(&mut self) {
        // The workers are children of the main process: end the whole group.
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
        }
    }
}

/// SIPp callers calling `service` through the edge at `edge` (`tests/sipp/uac_edge_call.xml`,
/// whose ACK and BYE follow the Record-Route): `n` calls at `rate` a second, each held
/// `hold_ms`. Kamailio's workers may pass a 180 on after the 200 that overtook it, so a
/// late provisional answer is ignored, not a failed call.
pub fn edge_callers(
    edge: SocketAddr,
    service: &str,
    n: usize,
    rate: u32,
    hold_ms: u64,
) -> crate::peers::sipp::Sipp {
    crate::peers::sipp::Sipp::spawn(
        "uac_edge_call.xml",
        None,
        Some(edge),
        &[
            "-m",
            &n.to_string(),
            "-r",
            &rate.to_string(),
            "-l",
            &n.to_string(),
            "-d",
            &hold_ms.to_string(),
            "-s",
            service,
            "-default_behaviors",
            "all,-abortunexp",
        ],
    )
}

/// The status code a SIP peer at `to` answers an OPTIONS with, None without an answer
/// within `within`.
pub async fn options_status(to: SocketAddr, within: Duration) -> Option<u16> {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.ok()?;
    let me = sock.local_addr().ok()?;
    let n: u32 = rand_tag();
    let req = format!(
        "OPTIONS sip:{to} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch=z9hG4bKedge{n};rport\r\n\
         From: <sip:probe@{me}>;tag={n}\r\nTo: <sip:{to}>\r\nCall-ID: edge-probe-{n}\r\n\
         CSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
    );
    sock.send_to(req.as_bytes(), to).await.ok()?;
    let mut buf = [0u8; 4096];
    let (len, _) = tokio::time::timeout(within, sock.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf[..len]);
    text.strip_prefix("SIP/2.0 ")?.get(..3)?.parse().ok()
}

/// A tag unlikely to repeat within a test run.
fn rand_tag() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    nanos ^ std::process::id()
}
