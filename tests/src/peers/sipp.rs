//! SIPp peers: callers and callees of the engine, one process each.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::ports::free_udp_port;

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
    /// SIPp with `scenario` on 127.0.0.1:`port` (one from [`free_udp_port`] when None:
    /// SIPp takes its ports on its command line). `target`: where a UAC
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
