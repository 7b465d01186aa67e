//! G.722 legs on real loopback sockets: what the session sends (payload type 9, 160 codes
//! per 20 ms on the 8000 Hz RTP clock, telephone-event beside it) and what it hears.

mod common;

use std::sync::Arc;
use std::time::Duration;

use callsmith_media::codec::RtpCodec;
use callsmith_media::g722::{G722Decoder, G722Encoder};
use callsmith_media::prompt::Prompt;
use callsmith_media::rtp::write_rtp;
use common::*;

fn tone(freq: f64, rate: f64, ms: u32, amp: f64) -> Vec<i16> {
    let n = (ms as f64 * rate / 1000.0) as usize;
    (0..n)
        .map(|i| ((i as f64 * 2.0 * std::f64::consts::PI * freq / rate).sin() * amp) as i16)
        .collect()
}

/// Power of `x` at `freq` (Goertzel), normalised by length.
fn power_at(x: &[i16], freq: f64, rate: f64) -> f64 {
    let w = 2.0 * std::f64::consts::PI * freq / rate;
    let (mut s1, mut s2) = (0f64, 0f64);
    for v in x {
        let s = *v as f64 + 2.0 * w.cos() * s1 - s2;
        s2 = s1;
        s1 = s;
    }
    (s1 * s1 + s2 * s2 - 2.0 * w.cos() * s1 * s2) / (x.len() as f64).powi(2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_g722_leg_sends_a_prompt_a_wideband_peer_decodes() {
    let engine = engine();
    let bot = engine.open_session(None).unwrap();
    let peer = RawPeer::new().await;
    bot.set_remote(peer.addr(), RtpCodec::G722, Some(101))
        .unwrap();
    let prompt = Arc::new(Prompt::from_pcm(tone(700.0, 8000.0, 600, 8000.0)));
    let handle = bot.play(prompt, false).unwrap();
    let packets = peer
        .collect(Duration::from_secs(3), |p| p.len() >= 40)
        .await;
    handle.wait().await;
    bot.send_dtmf("5").unwrap();
    let dtmf = peer
        .collect(Duration::from_secs(3), |p| p.iter().any(|x| x.pt == 101))
        .await;

    assert!(packets.len() >= 40, "{} packets", packets.len());
    assert!(packets.iter().all(|p| p.pt == 9 && p.payload.len() == 160));
    for w in packets.windows(2) {
        assert_eq!(w[1].ts.wrapping_sub(w[0].ts), 160, "8000 Hz RTP clock");
    }
    // A peer decoding the full codec hears the 700 Hz tone at 16 kHz.
    let mut dec = G722Decoder::new();
    let mut wide = vec![0i16; packets.len() * 320];
    for (p, out) in packets.iter().zip(wide.chunks_mut(320)) {
        assert_eq!(dec.decode(&p.payload, out), 320);
    }
    let voiced: Vec<i16> = wide[320 * 5..320 * 30].to_vec();
    let at_tone = power_at(&voiced, 700.0, 16000.0);
    let elsewhere = power_at(&voiced, 2100.0, 16000.0);
    assert!(level(&voiced) > 2000.0, "level {}", level(&voiced));
    assert!(at_tone > 100.0 * elsewhere, "{at_tone} vs {elsewhere}");
    // telephone-event sits beside G.722, its durations in 8 kHz units.
    let ev: Vec<_> = dtmf.iter().filter(|p| p.pt == 101).collect();
    assert!(!ev.is_empty());
    assert_eq!(ev[0].payload[0], 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_g722_leg_hears_a_wideband_caller() {
    let engine = engine();
    let bot = engine.open_session(None).unwrap();
    let caller = RawPeer::new().await;
    bot.set_remote(caller.addr(), RtpCodec::G722, None).unwrap();
    let mut tap = bot.tap_caller_audio(200).unwrap();

    // The caller sends 1 s of a 600 Hz tone, encoded by the full 16 kHz codec.
    let pcm = tone(600.0, 16000.0, 1000, 9000.0);
    let mut enc = G722Encoder::new();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let mut buf = [0u8; 256];
    let mut payload = [0u8; 160];
    for (i, frame) in pcm.chunks(320).enumerate() {
        tick.tick().await;
        enc.encode(frame, &mut payload);
        let n = write_rtp(
            &mut buf,
            i == 0,
            9,
            i as u16,
            (i * 160) as u32,
            0x1234,
            &payload,
        )
        .unwrap();
        caller
            .sock
            .send_to(&buf[..n], bot.local_addr())
            .await
            .unwrap();
    }
    let mut heard = Vec::new();
    while heard.len() < 8000 * 3 / 4 {
        let f = tokio::time::timeout(Duration::from_secs(2), tap.recv())
            .await
            .expect("caller audio")
            .expect("tap open");
        heard.extend_from_slice(&f.pcm);
    }
    // The pipeline's 8 kHz audio carries the caller's tone.
    let start = heard.iter().position(|s| s.abs() > 1000).expect("audio");
    let voiced = &heard[start + 800..start + 4000];
    assert!(level(voiced) > 2000.0, "level {}", level(voiced));
    assert!(power_at(voiced, 600.0, 8000.0) > 100.0 * power_at(voiced, 1800.0, 8000.0));
    let stats = bot.stats().await.unwrap();
    assert_eq!(stats.unknown_payload_type, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_g722_sessions_bridge_a_prompt() {
    let engine = engine();
    let a = engine.open_session(None).unwrap();
    let b = engine.open_session(None).unwrap();
    a.set_remote(b.local_addr(), RtpCodec::G722, None).unwrap();
    b.set_remote(a.local_addr(), RtpCodec::G722, None).unwrap();
    let mut tap = b.tap_caller_audio(200).unwrap();
    let sent = tone(1000.0, 8000.0, 800, 8000.0);
    a.play(Arc::new(Prompt::from_pcm(sent.clone())), false)
        .unwrap();
    let mut heard = Vec::new();
    while heard.len() < 8000 {
        let f = tokio::time::timeout(Duration::from_secs(2), tap.recv())
            .await
            .expect("audio")
            .expect("tap open");
        heard.extend_from_slice(&f.pcm);
    }
    // Sample for sample after the codec settles, at the best alignment: better than 20 dB.
    let snr_at = |off: usize| {
        let (mut sig, mut err) = (0f64, 0f64);
        for i in 800..4000 {
            let r = sent[i] as f64;
            sig += r * r;
            err += (heard[off + i] as f64 - r).powi(2);
        }
        10.0 * (sig / err.max(1.0)).log10()
    };
    let snr = (0..heard.len() - 4000).map(snr_at).fold(f64::MIN, f64::max);
    assert!(snr > 20.0, "SNR {snr:.1} dB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_on_ipv6_loopback_exchange_audio() {
    let engine = engine_with(|c| c.bind_ip = "::1".parse().unwrap());
    let a = engine.open_session(None).unwrap();
    let b = engine.open_session(None).unwrap();
    assert!(a.local_addr().is_ipv6());
    a.set_remote(b.local_addr(), RtpCodec::G722, None).unwrap();
    b.set_remote(a.local_addr(), RtpCodec::G722, None).unwrap();
    let mut tap = b.tap_caller_audio(200).unwrap();
    a.play(
        Arc::new(Prompt::from_pcm(tone(1000.0, 8000.0, 600, 8000.0))),
        false,
    )
    .unwrap();
    let mut heard = Vec::new();
    while heard.len() < 6400 {
        let f = tokio::time::timeout(Duration::from_secs(2), tap.recv())
            .await
            .expect("audio over ::1")
            .expect("tap open");
        heard.extend_from_slice(&f.pcm);
    }
    assert!(level(&heard) > 1000.0, "level {}", level(&heard));
    let stats = b.stats().await.unwrap();
    assert!(stats.packets_received > 20);
    assert_eq!(
        stats.remote,
        Some(a.local_addr()),
        "latched to the IPv6 peer"
    );
}
