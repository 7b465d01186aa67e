//! Shared helpers for the media integration tests: real tools (sox, flite),
//! real sockets on loopback, the real recognition node.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use callsmith_media::g711::Codec;
use callsmith_media::rtp::RtpPacket;
use callsmith_media::{MediaConfig, MediaEngine, MediaSession};
use tokio::net::UdpSocket;

/// Two sessions of `engine` sending to each other (PCMU): the caller and the bot.
pub fn connected(engine: &MediaEngine) -> (MediaSession, MediaSession) {
    let caller = engine.open_session(None).unwrap();
    let bot = engine.open_session(None).unwrap();
    caller
        .set_remote(bot.local_addr(), Codec::Pcmu, None)
        .unwrap();
    bot.set_remote(caller.local_addr(), Codec::Pcmu, None)
        .unwrap();
    (caller, bot)
}

pub fn engine() -> MediaEngine {
    engine_with(|_| {})
}

pub fn engine_with(f: impl FnOnce(&mut MediaConfig)) -> MediaEngine {
    let mut cfg = MediaConfig::default();
    // Spread test binaries over the range; busy ports are skipped anyway.
    let base = 20000 + (std::process::id() % 400) as u16 * 20;
    cfg.rtp_port_min = base;
    cfg.rtp_port_max = base + 3000;
    f(&mut cfg);
    MediaEngine::new(cfg).expect("engine starts")
}

/// Runs sox with `args`; panics with its stderr on failure.
pub fn sox(args: &[&str]) {
    let out = Command::new("sox")
        .args(args)
        .output()
        .expect("sox is installed (scripts/test-deps.sh)");
    assert!(
        out.status.success(),
        "sox {:?}: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A temp dir for generated audio.
pub fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// One received RTP packet, owned.
#[derive(Debug, Clone)]
pub struct Rx {
    pub marker: bool,
    pub pt: u8,
    pub seq: u16,
    pub ts: u32,
    pub ssrc: u32,
    pub payload: Vec<u8>,
    pub at: Instant,
}

/// A raw RTP peer on loopback (the "test receiver").
pub struct RawPeer {
    pub sock: UdpSocket,
}

impl RawPeer {
    pub async fn new() -> RawPeer {
        RawPeer {
            sock: UdpSocket::bind("127.0.0.1:0").await.unwrap(),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.sock.local_addr().unwrap()
    }

    /// Sends one 20 ms PCMU packet of silence to `to` (marker set on sequence 1).
    pub async fn send_silence(&self, to: SocketAddr, seq: u16, ts: u32, ssrc: u32) {
        let mut buf = [0u8; 256];
        let n = callsmith_media::rtp::write_rtp(&mut buf, seq == 1, 0, seq, ts, ssrc, &[0xFF; 160])
            .unwrap();
        self.sock.send_to(&buf[..n], to).await.unwrap();
    }

    /// Collects RTP packets until `until` returns true on the list or `max` passes.
    pub async fn collect(&self, max: Duration, mut until: impl FnMut(&[Rx]) -> bool) -> Vec<Rx> {
        let deadline = tokio::time::Instant::now() + max;
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        while !until(&out) {
            let r = tokio::time::timeout_at(deadline, self.sock.recv_from(&mut buf)).await;
            let Ok(Ok((n, _))) = r else { break };
            if let Ok(p) = RtpPacket::parse(&buf[..n]) {
                out.push(Rx {
                    marker: p.marker,
                    pt: p.payload_type,
                    seq: p.sequence,
                    ts: p.timestamp,
                    ssrc: p.ssrc,
                    payload: p.payload.to_vec(),
                    at: Instant::now(),
                });
            }
        }
        out
    }
}

/// Decodes payloads of `pt` packets to linear samples.
pub fn decode(packets: &[Rx], codec: Codec) -> Vec<i16> {
    packets
        .iter()
        .filter(|p| p.pt == codec.payload_type())
        .flat_map(|p| {
            p.payload
                .iter()
                .map(|b| codec.decode(*b))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Mean absolute amplitude.
pub fn level(s: &[i16]) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    s.iter().map(|v| v.unsigned_abs() as f64).sum::<f64>() / s.len() as f64
}

/// The speech node (media/speech-node/server.py) on a free loopback port.
pub struct SttNode {
    pub port: u16,
    child: std::process::Child,
}

impl Drop for SttNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl SttNode {
    /// Starts the node with `$CALLSMITH_STT_PYTHON` (from scripts/test-deps.sh) and waits until ready.
    pub fn start() -> SttNode {
        let python = std::env::var("CALLSMITH_STT_PYTHON")
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| {
                let fallback = format!(
                    "{}/.cache/callsmith/speech-venv/bin/python",
                    std::env::var("HOME").unwrap_or_default()
                );
                assert!(
                    std::path::Path::new(&fallback).exists(),
                    "CALLSMITH_STT_PYTHON is not set: run `eval \"$(bash scripts/test-deps.sh)\"`"
                );
                fallback
            });
        let port = free_port();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/speech-node/server.py");
        let child = Command::new(python)
            .args([
                script,
                "--port",
                &port.to_string(),
                "--exit-with-parent",
                "--partial-interval",
                "0.5",
                // One Whisper thread: as fast as two on a loaded 2-core machine, and the
                // test's other processes keep a core.
                "--threads",
                "1",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("start the STT node");
        let mut node = SttNode { port, child };
        let deadline = Instant::now() + Duration::from_secs(120);
        while !node.ready() {
            // A node that died (bad path, missing model) fails the test now, not in 120 s.
            if let Ok(Some(status)) = node.child.try_wait() {
                panic!("the STT node exited before it was ready: {status}");
            }
            assert!(Instant::now() < deadline, "STT node not ready within 120 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        node
    }

    /// GET /ready answered 200.
    pub fn ready(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut buf = String::new();
        let _ = s.read_to_string(&mut buf);
        buf.starts_with("HTTP/1.1 200")
    }

    pub fn vosk(&self, name: &str) -> callsmith_media::stt::SttNodeConfig {
        callsmith_media::stt::SttNodeConfig {
            name: name.into(),
            url: format!("ws://127.0.0.1:{}", self.port),
            protocol: callsmith_media::stt::SttProtocol::Vosk,
            ready_url: Some(format!("http://127.0.0.1:{}/ready", self.port)),
            api_key: None,
            api_key_env: None,
            ca_file: None,
            utterance_end_ms: None,
            turn_patience: false,
        }
    }

    pub fn deepgram(&self, name: &str) -> callsmith_media::stt::SttNodeConfig {
        callsmith_media::stt::SttNodeConfig {
            name: name.into(),
            url: format!("ws://127.0.0.1:{}/v1/listen", self.port),
            protocol: callsmith_media::stt::SttProtocol::Deepgram,
            ready_url: Some(format!("http://127.0.0.1:{}/ready", self.port)),
            api_key: None,
            api_key_env: None,
            ca_file: None,
            utterance_end_ms: None,
            turn_patience: false,
        }
    }
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Share of the expected words found in the recognised text (normalised).
pub fn word_recall(expected: &str, got: &str) -> f64 {
    let got = callsmith_media::stt::normalize_transcript(got);
    let got: Vec<&str> = got.split(' ').collect();
    let exp = callsmith_media::stt::normalize_transcript(expected);
    let words: Vec<&str> = exp.split(' ').collect();
    let hit = words.iter().filter(|w| got.contains(w)).count();
    hit as f64 / words.len().max(1) as f64
}

/// A minimal HTTP/1.1 server on loopback answering every GET with `body`
/// (a real server over real sockets, for prompt and synthesis fetches).
pub async fn serve_bytes(
    body: Vec<u8>,
    content_type: &'static str,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    serve_bytes_held(body, content_type, None).await
}

/// Where [`serve_bytes_held`] pauses a response: after `at` bytes of the body it
/// waits `pause`, then stores the instant it resumed in `resumed` (a synthesizer
/// that has spoken the first words and is still working on the rest).
#[derive(Clone)]
pub struct Hold {
    pub at: usize,
    pub pause: Duration,
    pub resumed: std::sync::Arc<std::sync::Mutex<Option<Instant>>>,
}

/// [`serve_bytes`], optionally holding the body back part way through.
pub async fn serve_bytes_held(
    body: Vec<u8>,
    content_type: &'static str,
    hold: Option<Hold>,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let body = std::sync::Arc::new(body);
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let body = body.clone();
            let hold = hold.clone();
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                // Send in pieces so streaming consumers see a growing body.
                let (first, rest) = match &hold {
                    Some(h) => body.split_at(h.at.min(body.len())),
                    None => (&body[..], &[][..]),
                };
                for (part, bytes) in [first, rest].into_iter().enumerate() {
                    if part == 1 {
                        let Some(h) = &hold else { break };
                        tokio::time::sleep(h.pause).await;
                        *h.resumed.lock().unwrap() = Some(Instant::now());
                    }
                    for chunk in bytes.chunks(4096) {
                        if sock.write_all(chunk).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                }
            });
        }
    });
    (addr, task)
}

/// A file's bytes, as the fetch of [`callsmith_media::prompt::PromptCache::get_or_load`].
pub async fn read_file(path: &str) -> Result<Vec<u8>, callsmith_media::prompt::PromptError> {
    std::fs::read(path).map_err(|e| callsmith_media::prompt::PromptError::Fetch {
        source_ref: path.to_string(),
        message: e.to_string(),
    })
}

/// Reads one HTTP/1.1 request from `sock`: its head (request line and headers, as sent)
/// and its body (`content-length` bytes). `None` if the client closes first.
pub async fn read_http_request(sock: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    buf.truncate(head_end + len);
    Some((head, buf.split_off(head_end)))
}
