//! RTP peers: the callee's scripted media endpoint ([`RtpPeer`]) and a tone-answering
//! endpoint for transfer targets ([`TonePeer`]), each on a socket bound to port 0.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::audio::{tone_frame_iter, ulaw_voiced};

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
