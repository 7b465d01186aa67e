//! Shared helpers for the media integration tests: real tools (sox, flite),
//! real sockets on loopback, the real recognition node.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use callsmith_media::g711::Codec;
use callsmith_media::rtp::RtpPacket;
use callsmith_media::{MediaConfig, MediaEngine};
use tokio::net::UdpSocket;

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
