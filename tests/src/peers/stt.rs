//! The local speech node as a peer of the engine.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::engine::workspace;

/// The local speech node (`media/speech-node/server.py`), killed on drop.
pub struct SttNode {
    _child: Child,
    /// The node's log (its stderr).
    _log: tempfile::NamedTempFile,
    pub url: String,
}

impl SttNode {
    /// Starts the node with `$CALLSMITH_STT_PYTHON` on port 0 (it logs the port it bound,
    /// `listening on 127.0.0.1:<port>`) and waits until it is ready (model loaded).
    pub async fn start() -> SttNode {
        let python = std::env::var("CALLSMITH_STT_PYTHON").unwrap_or_else(|_| {
            panic!("CALLSMITH_STT_PYTHON is not set: run `eval \"$(bash scripts/test-deps.sh)\"`")
        });
        let log = tempfile::NamedTempFile::new().expect("speech node log");
        let mut child = Command::new(python)
            .arg(workspace().join("media/speech-node/server.py"))
            // One Whisper thread: as fast as two on a loaded 2-core machine, and the
            // engine and its peers keep a core.
            .args(["--port", "0", "--threads", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.reopen().expect("speech node log"))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the STT node");
        let text = || std::fs::read_to_string(log.path()).unwrap_or_default();
        let c = reqwest::Client::new();
        let mut port = None;
        for _ in 0..1200 {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the STT node exited ({status}); log:\n{}", text());
            }
            port = port.or_else(|| listening_port(&text()));
            if let Some(port) = port
                && let Ok(r) = c.get(format!("http://127.0.0.1:{port}/ready")).send().await
                && r.status().is_success()
            {
                return SttNode {
                    _child: child,
                    _log: log,
                    url: format!("ws://127.0.0.1:{port}"),
                };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "the STT node did not become ready within 120 s; log:\n{}",
            text()
        );
    }
}

/// The port of the node's `listening on <host>:<port>` log line.
fn listening_port(log: &str) -> Option<u16> {
    // Only lines the node finished writing.
    let whole = &log[..log.rfind('\n')?];
    let line = whole.lines().find(|l| l.contains("listening on "))?;
    line.rsplit(':').next()?.trim().parse().ok()
}
