//! SRTP between sessions and towards a raw peer on loopback: protected packets carry the
//! suite's tag and an encrypted payload, digits cross between two SRTP sessions, and
//! plain RTP or another key is dropped and counted, never played or latched.

mod common;

use std::time::Duration;

use callsmith_media::g711::Codec;
use callsmith_media::srtp::{MASTER_LEN, SrtpParams, SrtpProfile};
use callsmith_media::{MediaEvent, MediaSession};
use common::*;

const A: [u8; MASTER_LEN] = [0x11; MASTER_LEN];
const B: [u8; MASTER_LEN] = [0x22; MASTER_LEN];

fn params(
    profile: SrtpProfile,
    send_key: [u8; MASTER_LEN],
    recv_key: [u8; MASTER_LEN],
) -> SrtpParams {
    SrtpParams {
        profile,
        send_key,
        recv_key,
    }
}

/// The digits `b` reports within `within`.
async fn digits_heard(b: &mut MediaSession, within: Duration) -> String {
    let mut digits = String::new();
    let deadline = tokio::time::Instant::now() + within;
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, b.next_event()).await {
        if let MediaEvent::Dtmf { digit, .. } = ev {
            digits.push(digit);
        }
    }
    digits
}

#[tokio::test]
async fn two_srtp_sessions_hear_each_others_digits() {
    for profile in [
        SrtpProfile::Aes128CmHmacSha1_80,
        SrtpProfile::Aes128CmHmacSha1_32,
    ] {
        let engine = engine();
        let a = engine.open_session(None).unwrap();
        let mut b = engine.open_session(None).unwrap();
        a.set_srtp(Some(&params(profile, A, B))).unwrap();
        b.set_srtp(Some(&params(profile, B, A))).unwrap();
        a.set_remote(b.local_addr(), Codec::Pcmu, Some(101))
            .unwrap();
        b.set_remote(a.local_addr(), Codec::Pcmu, Some(101))
            .unwrap();
        a.send_dtmf("12#").unwrap();
        assert_eq!(
            digits_heard(&mut b, Duration::from_secs(3)).await,
            "12#",
            "{profile:?}"
        );
        let stats = b.stats().await.unwrap();
        assert!(stats.packets_received > 20, "{stats:?}");
        assert_eq!(stats.srtp_dropped, 0, "{stats:?}");
        let stats = a.stats().await.unwrap();
        assert!(stats.rtcp_received > 0 || stats.rtcp_sent > 0 || stats.packets_sent > 0);
    }
}

#[tokio::test]
async fn plain_rtp_or_another_key_is_dropped_and_counted() {
    let engine = engine();
    let profile = SrtpProfile::Aes128CmHmacSha1_80;
    let mut b = engine.open_session(None).unwrap();
    b.set_srtp(Some(&params(profile, B, A))).unwrap();
    // A plain sender, and an SRTP sender with a key b does not expect.
    let plain = engine.open_session(None).unwrap();
    let wrong = engine.open_session(None).unwrap();
    wrong
        .set_srtp(Some(&params(profile, [0x33; MASTER_LEN], B)))
        .unwrap();
    for s in [&plain, &wrong] {
        s.set_remote(b.local_addr(), Codec::Pcmu, Some(101))
            .unwrap();
        s.send_dtmf("5").unwrap();
    }
    assert_eq!(digits_heard(&mut b, Duration::from_secs(2)).await, "");
    let stats = b.stats().await.unwrap();
    assert!(stats.srtp_dropped > 20, "{stats:?}");
    assert_eq!(stats.packets_received, 0, "{stats:?}");
    assert_eq!(stats.remote, None, "nothing latched: {stats:?}");
}

#[tokio::test]
async fn a_session_waiting_for_its_keys_sends_nothing_and_latches_nothing() {
    let engine = engine();
    let profile = SrtpProfile::Aes128CmHmacSha1_80;
    let mut waiting = engine.open_session(None).unwrap();
    waiting.await_srtp().unwrap();
    // The peer starts first, protected: before the keys, nothing is latched or answered.
    let peer = RawPeer::new().await;
    let mut ctx = params(profile, A, B).contexts().unwrap();
    let mut buf = [0u8; 1500];
    for seq in 1..=10u16 {
        let n = callsmith_media::rtp::write_rtp(
            &mut buf,
            false,
            0,
            seq,
            seq as u32 * 160,
            7,
            &[0xFF; 160],
        )
        .unwrap();
        let n = ctx.protect_rtp(&mut buf, n).unwrap();
        peer.sock
            .send_to(&buf[..n], waiting.local_addr())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let heard = peer
        .collect(Duration::from_millis(300), |p| !p.is_empty())
        .await;
    assert!(heard.is_empty(), "nothing is sent before the keys");
    let stats = waiting.stats().await.unwrap();
    assert_eq!(stats.remote, None, "no latch: {stats:?}");
    assert_eq!(stats.packets_sent, 0, "{stats:?}");
    assert!(stats.srtp_dropped >= 10, "{stats:?}");
    // The keys come: the stream starts, protected.
    waiting.set_srtp(Some(&params(profile, B, A))).unwrap();
    waiting
        .set_remote(peer.addr(), Codec::Pcmu, Some(101))
        .unwrap();
    let heard = peer.collect(Duration::from_secs(2), |p| p.len() >= 5).await;
    assert!(heard.len() >= 5);
    assert!(heard.iter().all(|p| p.payload.len() == 170), "protected");
    drop(waiting.take_events());
}

#[tokio::test]
async fn what_goes_out_is_protected_with_the_suites_tag() {
    for (profile, tag) in [
        (SrtpProfile::Aes128CmHmacSha1_80, 10),
        (SrtpProfile::Aes128CmHmacSha1_32, 4),
    ] {
        let engine = engine();
        let session = engine.open_session(None).unwrap();
        session.set_srtp(Some(&params(profile, A, B))).unwrap();
        let peer = RawPeer::new().await;
        session
            .set_remote(peer.addr(), Codec::Pcmu, Some(101))
            .unwrap();
        let packets = peer
            .collect(Duration::from_secs(3), |p| p.len() >= 10)
            .await;
        assert!(packets.len() >= 10);
        for p in &packets {
            assert_eq!(p.payload.len(), 160 + tag, "{profile:?}");
            // Silence in the clear would be all 0xFF.
            assert!(p.payload[..160].iter().filter(|b| **b == 0xFF).count() < 16);
        }
        // The peer with the right key reads silence.
        let mut ctx = params(profile, B, A).contexts().unwrap();
        let mut buf = [0u8; 1500];
        let mut wire = vec![0u8; 12];
        wire.extend_from_slice(&packets[0].payload);
        callsmith_media::rtp::write_rtp_header(
            &mut wire,
            packets[0].marker,
            packets[0].pt,
            packets[0].seq,
            packets[0].ts,
            packets[0].ssrc,
        )
        .unwrap();
        let n = ctx.unprotect_rtp(&wire, &mut buf).unwrap();
        assert!(buf[12..n].iter().all(|b| *b == 0xFF), "{profile:?}");
    }
}

/// Sends RTP packets `seqs` (PCMU silence, SSRC 7) protected with `ctx` to `to`.
async fn send_protected(
    peer: &RawPeer,
    ctx: &mut callsmith_media::srtp::SrtpContexts,
    seqs: std::ops::RangeInclusive<u16>,
    to: std::net::SocketAddr,
) {
    let mut buf = [0u8; 1500];
    for seq in seqs {
        let n = callsmith_media::rtp::write_rtp(
            &mut buf,
            false,
            0,
            seq,
            seq as u32 * 160,
            7,
            &[0xFF; 160],
        )
        .unwrap();
        let n = ctx.protect_rtp(&mut buf, n).unwrap();
        peer.sock.send_to(&buf[..n], to).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A re-key in the middle of a call (a re-INVITE's new keys): the session sends under its
/// new key at once, takes the peer's packets sent under the old key until the first one
/// under the new key, and none is lost on the way.
#[tokio::test]
async fn a_re_key_mid_call_switches_both_ways_without_losing_a_packet() {
    const A2: [u8; MASTER_LEN] = [0x44; MASTER_LEN];
    const B2: [u8; MASTER_LEN] = [0x55; MASTER_LEN];
    let profile = SrtpProfile::Aes128CmHmacSha1_80;
    let engine = engine();
    let session = engine.open_session(None).unwrap();
    session.set_srtp(Some(&params(profile, B, A))).unwrap();
    let peer = RawPeer::new().await;
    session
        .set_remote(peer.addr(), Codec::Pcmu, Some(101))
        .unwrap();
    let mut peer_tx = params(profile, A, B).contexts().unwrap();
    send_protected(&peer, &mut peer_tx, 1..=5, session.local_addr()).await;

    // Our answer carries our new key and takes the peer's new one.
    session.set_srtp(Some(&params(profile, B2, A2))).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Late packets under the peer's old key, then the peer switches.
    send_protected(&peer, &mut peer_tx, 6..=8, session.local_addr()).await;
    let mut peer_tx2 = params(profile, A2, B2).contexts().unwrap();
    peer_tx2.continue_from(peer_tx);
    send_protected(&peer, &mut peer_tx2, 9..=15, session.local_addr()).await;
    // The old key is let go after the new one was heard.
    let mut stale = params(profile, A, B).contexts().unwrap();
    send_protected(&peer, &mut stale, 16..=16, session.local_addr()).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stats = session.stats().await.unwrap();
    assert_eq!(stats.packets_received, 15, "{stats:?}");
    assert_eq!(stats.srtp_dropped, 1, "{stats:?}");

    // What the session sends now is under its new key (the last of what came meanwhile).
    let heard = peer.collect(Duration::from_millis(500), |_| false).await;
    let last = heard.last().expect("packets after the re-key");
    let mut wire = vec![0u8; 12];
    wire.extend_from_slice(&last.payload);
    callsmith_media::rtp::write_rtp_header(
        &mut wire,
        last.marker,
        last.pt,
        last.seq,
        last.ts,
        last.ssrc,
    )
    .unwrap();
    let mut buf = [0u8; 1500];
    let mut peer_rx = params(profile, A2, B2).contexts().unwrap();
    let n = peer_rx.unprotect_rtp(&wire, &mut buf).unwrap();
    assert!(buf[12..n].iter().all(|b| *b == 0xFF), "silence under B2");
    let mut old_rx = params(profile, A, B).contexts().unwrap();
    assert!(old_rx.unprotect_rtp(&wire, &mut buf).is_err());
}
