//! RTP playout, pacing, DTMF, malformed input and jitter handling on loopback.

mod common;

use std::sync::Arc;
use std::time::Duration;

use callsmith_media::dtmf::TelephoneEvent;
use callsmith_media::g711::Codec;
use callsmith_media::prompt::{Prompt, PromptCache};
use callsmith_media::rtp::write_rtp;
use callsmith_media::{MediaEvent, PlayEnd};
use common::*;

/// Generates an 8 kHz mono sweep with sox and loads it as a prompt.
async fn sweep_prompt(dir: &std::path::Path, secs: &str) -> (Arc<Prompt>, Vec<i16>) {
    let path = dir.join("sweep.wav");
    let p = path.to_str().unwrap();
    sox(&[
        "-n", "-r", "8000", "-c", "1", "-b", "16", p, "synth", secs, "sine", "300-1500", "vol",
        "0.5",
    ]);
    let source: Vec<i16> = hound::WavReader::open(&path)
        .unwrap()
        .into_samples::<i16>()
        .map(|s| s.unwrap())
        .collect();
    let prompt = PromptCache::new(8)
        .get_or_load(p, || common::read_file(p))
        .await
        .unwrap();
    (prompt, source)
}

async fn prompt_round_trip(codec: Codec) {
    let dir = tmpdir();
    let (prompt, source) = sweep_prompt(dir.path(), "1").await;
    assert!(
        prompt.pcm()[..source.len()] == source[..],
        "8 kHz source is loaded unchanged"
    );
    let engine = engine();
    let session = engine.open_session(None).unwrap();
    let peer = RawPeer::new().await;
    session.set_remote(peer.addr(), codec, Some(101)).unwrap();
    let requested = callsmith_media::clock::now_ns();
    let handle = session.play(prompt.clone(), false).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), handle.wait())
        .await
        .unwrap();
    assert_eq!(outcome.end, PlayEnd::Completed);
    assert_eq!(outcome.played_ms, 1000);
    // The first packet of the prompt left within one frame period (plus scheduling slack).
    let first = outcome
        .first_rtp_ns
        .expect("the prompt's first packet was sent");
    assert!(
        first >= requested && first - requested < 60_000_000,
        "first RTP {} ms after the request",
        (first - requested) / 1_000_000
    );
    // Silence follows the prompt; collect a little of it too.
    let packets = peer
        .collect(Duration::from_secs(5), |p| p.len() >= 75)
        .await;
    let mut all = packets;
    // What was sent before `collect` started sits in the socket buffer and was read first.
    assert!(all.len() >= 10);
    all.retain(|p| p.pt == codec.payload_type());

    // Pacing: every packet steps the timestamp by exactly 160 and the sequence by 1.
    for w in all.windows(2) {
        assert_eq!(w[1].ts.wrapping_sub(w[0].ts), 160, "timestamp step");
        assert_eq!(w[1].seq.wrapping_sub(w[0].seq), 1, "sequence step");
        assert_eq!(w[1].ssrc, w[0].ssrc);
    }
    assert!(
        all[0].marker,
        "first packet of the stream carries the marker"
    );
    assert!(all.iter().all(|p| p.payload.len() == 160));

    // Find the prompt in the stream and compare it with the source after a G.711 round trip.
    let bytes: Vec<u8> = all.iter().flat_map(|p| p.payload.clone()).collect();
    let enc = prompt.encoded(codec);
    let start = bytes
        .windows(160)
        .position(|w| w == &enc[..160])
        .expect("prompt start found");
    assert_eq!(start % 160, 0, "prompt starts on a packet boundary");
    assert!(
        all[start / 160].marker,
        "talkspurt start carries the marker"
    );
    let marked: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, p)| p.marker)
        .map(|(i, _)| i)
        .collect();
    assert!(
        marked.iter().all(|i| *i == 0 || *i == start / 160),
        "marker only on talkspurt starts: {marked:?}"
    );
    let sent = &bytes[start..start + source.len()];
    assert!(
        sent == &enc[..source.len()],
        "payload bytes are the pre-encoded prompt"
    );
    for (i, (b, s)) in sent.iter().zip(&source).enumerate() {
        let d = codec.decode(*b) as i32;
        let tol = (*s as i32).abs() / 14 + 20;
        assert!(
            (d - *s as i32).abs() <= tol,
            "sample {i}: sent {d}, source {s}"
        );
    }
    // After the prompt: silence.
    let after = &bytes[start + enc.len()..];
    assert!(!after.is_empty() && after.iter().all(|b| *b == codec.silence_byte()));
    let (stats, _) = session.close().await.unwrap();
    assert!(stats.packets_sent >= 50);
}

#[tokio::test]
async fn prompt_over_rtp_decodes_to_source_pcmu() {
    prompt_round_trip(Codec::Pcmu).await;
}

#[tokio::test]
async fn prompt_over_rtp_decodes_to_source_pcma() {
    prompt_round_trip(Codec::Pcma).await;
}

#[tokio::test]
async fn dtmf_is_sent_as_rfc4733_events() {
    let engine = engine();
    let session = engine.open_session(None).unwrap();
    let peer = RawPeer::new().await;
    session
        .set_remote(peer.addr(), Codec::Pcmu, Some(101))
        .unwrap();
    session.send_dtmf("9").unwrap();
    assert!(session.send_dtmf("x").is_err());
    let packets = peer
        .collect(Duration::from_secs(5), |p| {
            p.iter().filter(|x| x.pt == 101).count() >= 7 && p.last().is_some_and(|x| x.pt == 0)
        })
        .await;
    let events: Vec<_> = packets.iter().filter(|p| p.pt == 101).collect();
    // 100 ms digit: 4 progress packets (20..80 ms) + the end packet three times.
    assert_eq!(events.len(), 7, "{events:?}");
    assert!(events[0].marker);
    let ts = events[0].ts;
    let parsed: Vec<TelephoneEvent> = events
        .iter()
        .map(|e| TelephoneEvent::parse(&e.payload).unwrap())
        .collect();
    assert!(
        events.iter().all(|e| e.ts == ts),
        "one timestamp for the whole event"
    );
    assert!(parsed.iter().all(|e| e.event == 9));
    assert_eq!(parsed.iter().filter(|e| e.end).count(), 3);
    assert!(parsed[4..].iter().all(|e| e.end && e.duration == 800));
    assert!(parsed.windows(2).all(|w| w[1].duration >= w[0].duration));
    // Sequence numbers keep counting across voice and events.
    for w in packets.windows(2) {
        assert_eq!(w[1].seq.wrapping_sub(w[0].seq), 1);
    }
}

#[tokio::test]
async fn dtmf_between_two_sessions_reports_each_digit_once() {
    let engine = engine();
    let a = engine.open_session(None).unwrap();
    let mut b = engine.open_session(None).unwrap();
    a.set_remote(b.local_addr(), Codec::Pcmu, Some(101))
        .unwrap();
    b.set_remote(a.local_addr(), Codec::Pcmu, Some(101))
        .unwrap();
    a.send_dtmf("12#*").unwrap();
    let mut digits = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while digits.len() < 4 {
        match tokio::time::timeout_at(deadline, b.next_event()).await {
            Ok(Some(MediaEvent::Dtmf {
                digit, duration_ms, ..
            })) => {
                assert_eq!(duration_ms, 100);
                digits.push(digit);
            }
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    assert_eq!(digits, "12#*");
    // No duplicates arrive afterwards.
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_millis(50), b.next_event()).await {
        assert!(!matches!(ev, MediaEvent::Dtmf { .. }), "duplicate {ev:?}");
    }
}

#[tokio::test]
async fn received_events_with_redundant_end_packets_give_one_digit() {
    let engine = engine();
    let mut session = engine.open_session(None).unwrap();
    let peer = RawPeer::new().await;
    session
        .set_remote(peer.addr(), Codec::Pcmu, Some(101))
        .unwrap();
    let mut buf = [0u8; 64];
    let mut seq = 1000u16;
    for (ts, digit) in [(8000u32, 5u8), (16000, 11)] {
        for i in 1..=8u16 {
            let end = i >= 6;
            let ev = TelephoneEvent {
                event: digit,
                end,
                volume: 10,
                duration: (i.min(5)) * 160,
            };
            let n = write_rtp(&mut buf, i == 1, 101, seq, ts, 77, &ev.to_bytes()).unwrap();
            peer.sock
                .send_to(&buf[..n], session.local_addr())
                .await
                .unwrap();
            seq = seq.wrapping_add(1);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let mut got = vec![];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, session.next_event()).await {
        if let MediaEvent::Dtmf { digit, .. } = ev {
            got.push(digit);
        }
        if got.len() == 2 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            while let Ok(Some(ev)) =
                tokio::time::timeout(Duration::from_millis(50), session.next_event()).await
            {
                if let MediaEvent::Dtmf { digit, .. } = ev {
                    got.push(digit);
                }
            }
            break;
        }
    }
    assert_eq!(got, vec!['5', '#']);
}

#[tokio::test]
async fn malformed_rtp_and_rtcp_are_dropped_and_counted() {
    let engine = engine();
    let mut session = engine.open_session(None).unwrap();
    let peer = RawPeer::new().await;
    session
        .set_remote(peer.addr(), Codec::Pcmu, Some(101))
        .unwrap();
    let rtp = session.local_addr();
    let rtcp = std::net::SocketAddr::new(rtp.ip(), rtp.port() + 1);
    let garbage: Vec<Vec<u8>> = vec![
        vec![0x80; 5],                                 // shorter than a header
        vec![0x40; 20],                                // version 1
        [vec![0x8F], vec![0; 11]].concat(),            // 15 CSRCs announced, none present
        [vec![0xA0], vec![0; 11], vec![250]].concat(), // padding longer than the packet
        vec![0x80, 200, 0, 50, 1, 2, 3, 4],            // RTCP SR with a length past the datagram
        vec![],
    ];
    for g in &garbage {
        peer.sock.send_to(g, rtp).await.unwrap();
    }
    for g in &garbage[4..5] {
        peer.sock.send_to(g, rtcp).await.unwrap();
    }
    // Random bytes too.
    let mut x: u32 = 99;
    for _ in 0..200 {
        let len = (x % 60) as usize;
        let b: Vec<u8> = (0..len)
            .map(|_| {
                x = x.wrapping_mul(1664525).wrapping_add(1013904223);
                (x >> 24) as u8 & 0x3F // version bits 0: never valid RTP
            })
            .collect();
        peer.sock.send_to(&b, rtp).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let stats = session.stats().await.unwrap();
    assert!(stats.malformed_rtp >= 4 + 150, "{stats:?}");
    assert!(stats.malformed_rtcp >= 2, "{stats:?}");
    assert_eq!(stats.packets_received, 0);
    // The session still works: a valid event after the garbage is reported.
    let mut buf = [0u8; 64];
    for i in 0..3u16 {
        let ev = TelephoneEvent {
            event: 3,
            end: true,
            volume: 10,
            duration: 800,
        };
        let n = write_rtp(&mut buf, false, 101, 10 + i, 4000, 5, &ev.to_bytes()).unwrap();
        peer.sock.send_to(&buf[..n], rtp).await.unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut digit = None;
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, session.next_event()).await {
        if let MediaEvent::Dtmf { digit: d, .. } = ev {
            digit = Some(d);
            break;
        }
    }
    assert_eq!(digit, Some('3'));
}

/// Sends one 20 ms PCMU packet per tick from `peer` to `session`, packet `seq` at the
/// constant level 200×seq; `before(seq)` runs just before each packet is sent.
async fn send_level_packets(
    session: &callsmith_media::MediaSession,
    peer: &RawPeer,
    seqs: impl IntoIterator<Item = u16>,
    mut before: impl FnMut(u16),
) {
    let mut buf = [0u8; 256];
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    for seq in seqs {
        tick.tick().await;
        before(seq);
        let payload = [Codec::Pcmu.encode(200 * seq as i16); 160];
        let n = write_rtp(&mut buf, seq == 1, 0, seq, seq as u32 * 160, 9, &payload).unwrap();
        peer.sock
            .send_to(&buf[..n], session.local_addr())
            .await
            .unwrap();
    }
}

/// The levels of the frames a tap heard, from the first non-silent one to the last.
fn heard_levels(tap: &mut callsmith_media::AudioReceiver) -> Vec<i32> {
    let mut levels = vec![];
    while let Ok(f) = tap.try_recv() {
        let l = common::level(&f.pcm) as i32;
        if l > 0 || !levels.is_empty() {
            levels.push(l);
        }
    }
    while levels.last() == Some(&0) {
        levels.pop();
    }
    levels
}

/// The level a packet of `send_level_packets` decodes to.
fn level_of(seq: i32) -> i32 {
    Codec::Pcmu.decode(Codec::Pcmu.encode(200 * seq as i16)) as i32
}

#[tokio::test]
async fn jitter_buffer_reorders_and_counts_loss() {
    let engine = engine_with(|c| {
        // A deep fixed buffer: the test sender may stall on a loaded machine.
        c.jitter_min_packets = 8;
        c.jitter_max_packets = 8;
        c.vad = None;
    });
    let session = engine.open_session(None).unwrap();
    let mut tap = session.tap_caller_audio(200).unwrap();
    let peer = RawPeer::new().await;
    session.set_remote(peer.addr(), Codec::Pcmu, None).unwrap();
    // Packets 1..=30, each a constant level 200*k; 11 and 12 swapped, 20 lost.
    let mut order: Vec<u16> = (1..=30).filter(|s| *s != 20).collect();
    order.swap(10, 11);
    send_level_packets(&session, &peer, order, |_| {}).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let levels = heard_levels(&mut tap);
    let expected: Vec<i32> = (1..=30)
        .map(|k| if k == 20 { 0 } else { level_of(k) })
        .collect();
    assert_eq!(
        levels, expected,
        "frames in sequence order, the lost one concealed as silence"
    );
    let stats = session.stats().await.unwrap();
    assert_eq!(stats.packets_received, 29);
    assert_eq!(stats.packets_expected, 30);
    assert_eq!(stats.packets_lost, 1);
    assert_eq!(stats.concealed, 1);
    assert_eq!(stats.late, 0);
}

/// Nothing takes the caller's audio at first (no tap, no recorder, no speech detection),
/// so the worker pops the jitter buffer without decoding; a tap added mid-stream then gets
/// every later frame, in order, with nothing lost or repeated.
#[tokio::test]
async fn a_tap_added_mid_stream_gets_the_frames_from_then_on_in_order() {
    let engine = engine_with(|c| {
        c.jitter_min_packets = 8;
        c.jitter_max_packets = 8;
        c.vad = None;
    });
    let session = engine.open_session(None).unwrap();
    let peer = RawPeer::new().await;
    session.set_remote(peer.addr(), Codec::Pcmu, None).unwrap();
    let mut tap = None;
    send_level_packets(&session, &peer, 1..=40, |seq| {
        if seq == 16 {
            tap = Some(session.tap_caller_audio(200).unwrap());
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let levels = heard_levels(tap.as_mut().unwrap());
    let first = (1..=40)
        .find(|k| levels.first() == Some(&level_of(*k)))
        .expect("the tap heard the stream");
    assert!(
        first <= 16,
        "the tap started with packet {first}, after packets it should have heard"
    );
    let expected: Vec<i32> = (first..=40).map(level_of).collect();
    assert_eq!(
        levels, expected,
        "every frame after the tap, once, in order"
    );
    let stats = session.stats().await.unwrap();
    assert_eq!(stats.packets_received, 40);
    assert_eq!(stats.packets_lost, 0);
    assert_eq!(stats.concealed, 0);
}

#[tokio::test]
async fn symmetric_rtp_latches_to_first_source() {
    let engine = engine();
    let mut session = engine.open_session(None).unwrap();
    let signalled = RawPeer::new().await;
    let actual = RawPeer::new().await;
    let intruder = RawPeer::new().await;
    session
        .set_remote(signalled.addr(), Codec::Pcmu, Some(101))
        .unwrap();
    actual.send_silence(session.local_addr(), 1, 160, 3).await;
    assert_eq!(next_latch(&mut session).await, Some(actual.addr()));
    intruder.send_silence(session.local_addr(), 1, 160, 3).await;
    let got = actual
        .collect(Duration::from_secs(2), |p| p.len() >= 5)
        .await;
    assert!(got.len() >= 5, "RTP now flows to the latched source");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stats = session.stats().await.unwrap();
    assert_eq!(stats.foreign_packets, 1);
    assert_eq!(stats.remote, Some(actual.addr()));
}

async fn next_latch(session: &mut callsmith_media::MediaSession) -> Option<std::net::SocketAddr> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, session.next_event()).await {
        if let MediaEvent::RemoteLatched { addr, .. } = ev {
            return Some(addr);
        }
    }
    None
}

/// Signals `peer`'s address to `session` and latches it with a first packet from there.
async fn latch_signalled(session: &mut callsmith_media::MediaSession, peer: &RawPeer) {
    session
        .set_remote(peer.addr(), Codec::Pcmu, Some(101))
        .unwrap();
    peer.send_silence(session.local_addr(), 1, 160, 3).await;
    assert_eq!(next_latch(session).await, Some(peer.addr()));
}

/// A stale stream (an earlier call's peer still sending to this recycled port) may latch
/// first, but once the peer the SDP named sends from its signalled address, RTP goes there
/// and the stale source is foreign.
#[tokio::test]
async fn the_signalled_address_wins_the_latch_from_a_stale_stream() {
    let engine = engine();
    let mut session = engine.open_session(None).unwrap();
    let signalled = RawPeer::new().await;
    let stale = RawPeer::new().await;
    session
        .set_remote(signalled.addr(), Codec::Pcmu, Some(101))
        .unwrap();
    stale.send_silence(session.local_addr(), 1, 160, 3).await;
    let mut latched = Vec::new();
    latched.push(next_latch(&mut session).await);
    signalled
        .send_silence(session.local_addr(), 9, 160, 4)
        .await;
    latched.push(next_latch(&mut session).await);
    assert_eq!(latched, vec![Some(stale.addr()), Some(signalled.addr())]);
    // The stale source keeps sending: dropped as foreign, and our RTP goes to the peer.
    for _ in 0..3 {
        stale.send_silence(session.local_addr(), 1, 160, 3).await;
    }
    let got = signalled
        .collect(Duration::from_secs(2), |p| p.len() >= 5)
        .await;
    assert!(got.len() >= 5, "RTP flows to the signalled peer");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stats = session.stats().await.unwrap();
    assert_eq!(stats.remote, Some(signalled.addr()));
    // The latch is final: the socket is connected to the signalled peer and the kernel
    // drops the stale source's datagrams before the session sees them.
    assert_eq!(stats.packets_received, 2, "the stale packet and the peer's");
    assert_eq!(stats.foreign_packets, 0);
}

/// An engine bound to the unspecified address does not connect its sockets: a connected
/// socket would receive only on the route's source address towards the peer, and a peer
/// sending to another of the host's addresses (here 127.0.0.2) would go unheard.
#[tokio::test]
async fn a_wildcard_bound_session_hears_its_peer_on_every_local_address() {
    let engine = engine_with(|c| c.bind_ip = std::net::Ipv4Addr::UNSPECIFIED.into());
    let mut session = engine.open_session(None).unwrap();
    let port = session.local_addr().port();
    let on = |ip: [u8; 4]| std::net::SocketAddr::from((ip, port));
    let peer = RawPeer::new().await;
    let other = RawPeer::new().await;
    session
        .set_remote(peer.addr(), Codec::Pcmu, Some(101))
        .unwrap();
    peer.send_silence(on([127, 0, 0, 1]), 1, 160, 3).await;
    assert_eq!(next_latch(&mut session).await, Some(peer.addr()));
    peer.send_silence(on([127, 0, 0, 2]), 2, 320, 3).await;
    other.send_silence(on([127, 0, 0, 1]), 1, 160, 9).await;
    let got = peer.collect(Duration::from_secs(2), |p| p.len() >= 5).await;
    assert!(got.len() >= 5, "RTP flows to the peer");
    let stats = session.stats().await.unwrap();
    assert_eq!(stats.packets_received, 2, "both of the peer's packets");
    assert_eq!(
        stats.foreign_packets, 1,
        "the other source is seen and dropped"
    );
}

/// A connected socket hears of a closed peer port (ICMP port-unreachable) as an error on
/// its next receive or send. A peer that closes its port and binds it again gets every
/// packet after that, is heard again, and none of it counts as a send error.
#[tokio::test]
async fn a_peer_port_closed_and_reopened_gets_rtp_again_without_send_errors() {
    let engine = engine();
    let mut session = engine.open_session(None).unwrap();
    let peer = RawPeer::new().await;
    let addr = peer.addr();
    latch_signalled(&mut session, &peer).await;
    drop(peer);
    // A dozen packets meet the closed port, each answered with port-unreachable.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let peer = RawPeer {
        sock: tokio::net::UdpSocket::bind(addr).await.unwrap(),
    };
    let got = peer
        .collect(Duration::from_secs(2), |p| p.len() >= 10)
        .await;
    assert!(
        got.len() >= 10,
        "RTP reaches the reopened port: {}",
        got.len()
    );
    let seqs: Vec<u16> = got.iter().map(|p| p.seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0].wrapping_add(1)),
        "no packet after the reopening is lost: {seqs:?}"
    );
    // The peer's packets are heard again too.
    peer.send_silence(session.local_addr(), 2, 320, 3).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stats = session.stats().await.unwrap();
    assert_eq!(stats.send_errors, 0);
    assert_eq!(stats.packets_received, 2);
    assert_eq!(stats.remote, Some(addr));
}

/// A new signalled address (a re-INVITE moving the peer's media) undoes the final latch on
/// the old one: the new address is heard, latched, and sent to.
#[tokio::test]
async fn a_new_signalled_address_replaces_a_final_latch() {
    let engine = engine();
    let mut session = engine.open_session(None).unwrap();
    let first = RawPeer::new().await;
    let second = RawPeer::new().await;
    latch_signalled(&mut session, &first).await;
    session
        .set_remote(second.addr(), Codec::Pcmu, Some(101))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    second.send_silence(session.local_addr(), 1, 160, 4).await;
    assert_eq!(next_latch(&mut session).await, Some(second.addr()));
    let got = second
        .collect(Duration::from_secs(2), |p| p.len() >= 5)
        .await;
    assert!(got.len() >= 5, "RTP flows to the new address");
    let stats = session.stats().await.unwrap();
    assert_eq!(stats.remote, Some(second.addr()));
    assert_eq!(stats.packets_received, 2);
    assert_eq!(stats.foreign_packets, 0);
}

#[tokio::test]
async fn rtcp_reports_flow_between_sessions() {
    let engine = engine_with(|c| c.rtcp_interval_ms = 200);
    let a = engine.open_session(None).unwrap();
    let b = engine.open_session(None).unwrap();
    a.set_remote(b.local_addr(), Codec::Pcmu, None).unwrap();
    b.set_remote(a.local_addr(), Codec::Pcmu, None).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let sa = a.stats().await.unwrap();
    let sb = b.stats().await.unwrap();
    assert!(sa.rtcp_sent >= 3 && sb.rtcp_received >= 3, "{sa:?} {sb:?}");
    assert!(sb.packets_received >= 40);
    assert_eq!(sb.packets_lost, 0);
    assert_eq!(sa.remote_cumulative_lost, 0);
    assert!(sb.jitter_ms < 20.0);
    assert_eq!(sa.malformed_rtcp, 0);
}

#[tokio::test]
async fn rtp_timeout_is_reported() {
    let engine = engine_with(|c| c.rtp_timeout_ms = 300);
    let mut s = engine.open_session(None).unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(3), s.next_event())
        .await
        .unwrap();
    assert!(matches!(ev, Some(MediaEvent::RtpTimeout { .. })), "{ev:?}");
}

/// A peer that restarts its stream (a new SSRC with a new sequence base, as after a
/// re-INVITE or a transfer): the call's counters keep both sources, the jump in sequence
/// numbers is no loss, and the new source is played out.
#[tokio::test]
async fn a_new_ssrc_keeps_the_counters_and_plays_the_new_source() {
    let engine = engine_with(|c| {
        c.jitter_min_packets = 2;
        c.jitter_max_packets = 8;
        c.vad = None;
    });
    let session = engine.open_session(None).unwrap();
    let mut tap = session.tap_caller_audio(400).unwrap();
    let peer = RawPeer::new().await;
    session.set_remote(peer.addr(), Codec::Pcmu, None).unwrap();
    let mut buf = [0u8; 256];
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    // Source A: 40 packets from sequence 1000 at level 1000; source B: 30 packets from
    // sequence 61000 (another base, another timestamp origin) at level 6000, one lost.
    let a: Vec<(u32, u16, u32, i16)> = (0..40u16)
        .map(|i| (0xAAAA, 1000 + i, 5000 + u32::from(i) * 160, 1000))
        .collect();
    let b: Vec<(u32, u16, u32, i16)> = (0..30u16)
        .filter(|i| *i != 10)
        .map(|i| (0xBBBB, 61000 + i, 900_000 + u32::from(i) * 160, 6000))
        .collect();
    for (ssrc, seq, ts, level) in a.iter().chain(b.iter()) {
        tick.tick().await;
        let payload = [Codec::Pcmu.encode(*level); 160];
        let n = write_rtp(&mut buf, false, 0, *seq, *ts, *ssrc, &payload).unwrap();
        peer.sock
            .send_to(&buf[..n], session.local_addr())
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats = session.stats().await.unwrap();
    assert_eq!(stats.ssrc_changes, 1);
    assert_eq!(
        stats.packets_received, 69,
        "both sources counted: {stats:?}"
    );
    assert_eq!(stats.packets_expected, 70);
    assert_eq!(
        stats.packets_lost, 1,
        "only the packet B lost, no gap at the switch"
    );
    let loud_b = Codec::Pcmu.decode(Codec::Pcmu.encode(6000)) as i32;
    let mut frames_b = 0;
    while let Ok(f) = tap.try_recv() {
        if common::level(&f.pcm) as i32 == loud_b {
            frames_b += 1;
        }
    }
    assert!(frames_b >= 25, "source B played out: {frames_b} frames");
}
