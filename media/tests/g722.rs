//! G.722 legs on real loopback sockets: what the session sends (payload type 9, 160 codes
//! per 20 ms on the 8000 Hz RTP clock, telephone-event beside it) and what it hears. A
//! G.722 session is wideband end to end: its prompts, caller audio taps, recognition and
//! recording carry 16 kHz audio, upper band included; a G.711 session stays at 8 kHz.

mod common;

use std::sync::Arc;
use std::time::Duration;

use callsmith_media::amd::{AmdConfig, AmdDecision};
use callsmith_media::codec::RtpCodec;
use callsmith_media::g722::{G722Decoder, G722Encoder};
use callsmith_media::prompt::{Prompt, StreamingAudio};
use callsmith_media::recording::RecordingTarget;
use callsmith_media::rtp::write_rtp;
use callsmith_media::stt::{SttNodeConfig, SttParams, SttPool, SttProtocol};
use callsmith_media::tone::power_at;
use callsmith_media::tts::{TtsRequest, TtsService};
use callsmith_media::{AudioRate, MediaEvent, MediaSession};
use common::*;
use object_store::ObjectStore;

/// `a` and `b` summed, sample by sample.
fn mix(a: &[i16], b: &[i16]) -> Vec<i16> {
    a.iter().zip(b).map(|(x, y)| x.saturating_add(*y)).collect()
}

/// A mono 16-bit WAV of `pcm` at `rate`.
fn wav(pcm: &[i16], rate: u32) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for s in pcm {
        w.write_sample(*s).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

/// Sends `pcm` (16 kHz) to `to` as a G.722 stream, one packet per 20 ms.
async fn send_g722(from: &RawPeer, to: std::net::SocketAddr, pcm: &[i16]) {
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
        from.sock.send_to(&buf[..n], to).await.unwrap();
    }
}

fn tone(freq: f64, rate: f64, ms: u32, amp: f64) -> Vec<i16> {
    let n = (ms as f64 * rate / 1000.0) as usize;
    (0..n)
        .map(|i| ((i as f64 * 2.0 * std::f64::consts::PI * freq / rate).sin() * amp) as i16)
        .collect()
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
async fn a_16k_prompt_reaches_a_g722_peer_with_its_upper_band() {
    let engine = engine();
    let bot = engine.open_session(None).unwrap();
    let peer = RawPeer::new().await;
    bot.set_remote(peer.addr(), RtpCodec::G722, None).unwrap();
    assert_eq!(bot.audio_rate(), AudioRate::Wide);
    // A 16 kHz file: a 1 kHz tone and a 6 kHz tone, which 8 kHz audio cannot carry.
    let pcm = mix(
        &tone(1000.0, 16000.0, 800, 6000.0),
        &tone(6000.0, 16000.0, 800, 6000.0),
    );
    let prompt = Prompt::decode(&wav(&pcm, 16000), Some("wav")).unwrap();
    assert_eq!(
        prompt.wide().map(<[i16]>::len),
        Some(prompt.pcm().len() * 2)
    );
    let handle = bot.play(Arc::new(prompt), false).unwrap();
    let packets = peer
        .collect(Duration::from_secs(3), |p| p.len() >= 40)
        .await;
    handle.wait().await;
    let mut dec = G722Decoder::new();
    let mut wide = vec![0i16; packets.len() * 320];
    for (p, out) in packets.iter().zip(wide.chunks_mut(320)) {
        dec.decode(&p.payload, out);
    }
    let voiced = &wide[320 * 5..320 * 35];
    let upper = power_at(voiced, 6000.0, 16000.0);
    let lower = power_at(voiced, 1000.0, 16000.0);
    let between = power_at(voiced, 5000.0, 16000.0);
    assert!(upper > 0.1 * lower, "6 kHz {upper} vs 1 kHz {lower}");
    assert!(upper > 100.0 * between, "6 kHz {upper} vs 5 kHz {between}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_16k_growing_source_reaches_a_g722_peer_and_a_g711_peer() {
    let engine = engine();
    let wide_peer = RawPeer::new().await;
    let narrow_peer = RawPeer::new().await;
    let wide = engine.open_session(None).unwrap();
    wide.set_remote(wide_peer.addr(), RtpCodec::G722, None)
        .unwrap();
    let narrow = engine.open_session(None).unwrap();
    narrow
        .set_remote(narrow_peer.addr(), RtpCodec::Pcmu, None)
        .unwrap();
    // Streamed synthesis at 16 kHz: a 1 kHz and a 6 kHz tone.
    let pcm = mix(
        &tone(1000.0, 16000.0, 800, 6000.0),
        &tone(6000.0, 16000.0, 800, 6000.0),
    );
    let play = |s: &MediaSession| {
        let src = StreamingAudio::new_at(AudioRate::Wide, usize::MAX / 2);
        src.push(&pcm);
        src.finish();
        s.play(src, false).unwrap()
    };
    let (a, b) = (play(&wide), play(&narrow));
    let wide_packets = wide_peer
        .collect(Duration::from_secs(3), |p| p.len() >= 40)
        .await;
    let narrow_packets = narrow_peer
        .collect(Duration::from_secs(3), |p| p.len() >= 40)
        .await;
    a.wait().await;
    b.wait().await;
    let mut dec = G722Decoder::new();
    let mut heard = vec![0i16; wide_packets.len() * 320];
    for (p, out) in wide_packets.iter().zip(heard.chunks_mut(320)) {
        dec.decode(&p.payload, out);
    }
    let voiced = &heard[320 * 5..320 * 35];
    let upper = power_at(voiced, 6000.0, 16000.0);
    assert!(upper > 0.1 * power_at(voiced, 1000.0, 16000.0));
    assert!(upper > 100.0 * power_at(voiced, 5000.0, 16000.0));
    // The G.711 peer hears the 1 kHz tone at 8 kHz.
    let heard = decode(&narrow_packets, callsmith_media::g711::Codec::Pcmu);
    let voiced = &heard[160 * 5..160 * 35];
    assert!(power_at(voiced, 1000.0, 8000.0) > 10.0 * power_at(voiced, 2000.0, 8000.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_and_answering_machine_detection_work_on_a_g722_call() {
    let engine = engine();
    let caller = engine.open_session(None).unwrap();
    let mut bot = engine.open_session(None).unwrap();
    caller
        .set_remote(bot.local_addr(), RtpCodec::G722, None)
        .unwrap();
    bot.set_remote(caller.local_addr(), RtpCodec::G722, None)
        .unwrap();
    bot.watch_speech(true).unwrap();
    let amd = bot
        .spawn_answering_machine_detection(AmdConfig::default())
        .unwrap();
    let greeting = TtsService::with_local_engines(4)
        .prompt(&TtsRequest {
            engine: "flite".into(),
            text: "Hello, you have reached the voicemail of John Smith. I am not available \
                   right now, please leave a message"
                .into(),
            speed: 1.0,
            rate: AudioRate::Wide,
            ..Default::default()
        })
        .await
        .unwrap();
    caller.play(greeting, false).unwrap();
    let verdict = tokio::time::timeout(Duration::from_secs(15), amd)
        .await
        .expect("a verdict")
        .unwrap();
    assert_eq!(verdict, AmdDecision::Machine);
    let mut started = false;
    while let Ok(Some(ev)) =
        tokio::time::timeout(Duration::from_millis(200), bot.next_event()).await
    {
        started |= matches!(ev, MediaEvent::SpeechStarted { .. });
    }
    assert!(started, "speech detected at 16 kHz");
}

/// Reads a stored stereo recording: its rate, left (caller) and right (bot) channels.
async fn read_recording(store: &dyn ObjectStore, path: &str) -> (u32, Vec<i16>, Vec<i16>) {
    let bytes = store
        .get(&path.into())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let r = hound::WavReader::new(std::io::Cursor::new(bytes.to_vec())).unwrap();
    let rate = r.spec().sample_rate;
    let s: Vec<i16> = r.into_samples::<i16>().map(|x| x.unwrap()).collect();
    let left = s.iter().step_by(2).copied().collect();
    let right = s.iter().skip(1).step_by(2).copied().collect();
    (rate, left, right)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_g722_callers_upper_band_reaches_the_tap_and_the_recording() {
    let engine = engine();
    let bot = engine.open_session(None).unwrap();
    let caller = RawPeer::new().await;
    bot.set_remote(caller.addr(), RtpCodec::G722, None).unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    bot.start_recording(RecordingTarget {
        store: store.clone(),
        path: "rec/wide.wav".into(),
    })
    .unwrap();
    let mut tap = bot.tap_caller_audio(200).unwrap();

    // The caller sends 1 s of a 600 Hz and a 6 kHz tone, encoded by the full codec.
    let pcm = mix(
        &tone(600.0, 16000.0, 1000, 6000.0),
        &tone(6000.0, 16000.0, 1000, 6000.0),
    );
    send_g722(&caller, bot.local_addr(), &pcm).await;
    let mut heard = Vec::new();
    let mut last_at = None;
    while heard.len() < 16000 * 3 / 4 {
        let f = tokio::time::timeout(Duration::from_secs(2), tap.recv())
            .await
            .expect("caller audio")
            .expect("tap open");
        assert_eq!((f.rate, f.duration_ms()), (AudioRate::Wide, 10));
        if let Some(prev) = last_at {
            assert_eq!(f.at_ms, prev + 10, "two 10 ms frames per tick");
        }
        last_at = Some(f.at_ms);
        heard.extend_from_slice(&f.pcm);
    }
    // The tap's 16 kHz audio carries both tones.
    let start = heard.iter().position(|s| s.abs() > 1000).expect("audio");
    let voiced = &heard[start + 1600..start + 8000];
    let (upper, lower) = (
        power_at(voiced, 6000.0, 16000.0),
        power_at(voiced, 600.0, 16000.0),
    );
    assert!(lower > 100.0 * power_at(voiced, 1800.0, 16000.0));
    assert!(upper > 0.1 * lower, "6 kHz {upper} vs 600 Hz {lower}");
    assert!(upper > 100.0 * power_at(voiced, 5000.0, 16000.0));

    let (stats, rec) = bot.close().await.unwrap();
    assert_eq!(stats.unknown_payload_type, 0);
    let rec = rec.expect("recorded");
    assert_eq!(rec.sample_rate, 16000);
    let (rate, left, _) = read_recording(store.as_ref(), "rec/wide.wav").await;
    assert_eq!(rate, 16000);
    let start = left
        .iter()
        .position(|s| s.abs() > 1000)
        .expect("caller audio");
    let voiced = &left[start + 1600..start + 8000];
    assert!(power_at(voiced, 6000.0, 16000.0) > 0.1 * power_at(voiced, 600.0, 16000.0));
}

/// A Deepgram-style node on loopback that accepts any number of connections (the pool's
/// readiness probe is one) and records each stream's query and audio bytes.
async fn recording_node() -> (SttNodeConfig, Arc<std::sync::Mutex<Vec<(String, usize)>>>) {
    use futures::StreamExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<std::sync::Mutex<Vec<(String, usize)>>> = Arc::default();
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let s = s.clone();
            tokio::spawn(async move {
                let query = Arc::new(std::sync::Mutex::new(String::new()));
                let q = query.clone();
                #[allow(clippy::result_large_err)]
                let record =
                    move |req: &tokio_tungstenite::tungstenite::handshake::server::Request,
                          resp| {
                        *q.lock().unwrap() = req.uri().query().unwrap_or("").to_string();
                        Ok(resp)
                    };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, record).await else {
                    return;
                };
                let i = {
                    let mut v = s.lock().unwrap();
                    v.push((query.lock().unwrap().clone(), 0));
                    v.len() - 1
                };
                while let Some(Ok(msg)) = ws.next().await {
                    if let tokio_tungstenite::tungstenite::Message::Binary(b) = msg {
                        s.lock().unwrap()[i].1 += b.len();
                    }
                }
            });
        }
    });
    let node = SttNodeConfig::new(
        "local",
        format!("ws://127.0.0.1:{port}/v1/listen"),
        SttProtocol::Deepgram,
    );
    (node, seen)
}

/// Streams `session`'s caller audio for about a second; returns the query and the audio
/// bytes per millisecond the node received.
async fn recognise_for_a_second(session: &MediaSession) -> (String, f64) {
    let (node, seen) = recording_node().await;
    let pool = SttPool::new(vec![node]);
    let started = std::time::Instant::now();
    let mut stream = session
        .start_stt(&pool, SttParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let elapsed = started.elapsed().as_millis() as f64;
    stream.finish();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let v = seen.lock().unwrap();
    assert_eq!(v.len(), 1, "one stream: {v:?}");
    (v[0].0.clone(), v[0].1 as f64 / elapsed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recognition_streams_16k_on_a_g722_call_and_8k_on_a_g711_call() {
    let engine = engine();
    let peer = RawPeer::new().await;
    let wide = engine.open_session(None).unwrap();
    wide.set_remote(peer.addr(), RtpCodec::G722, None).unwrap();
    let (query, per_ms) = recognise_for_a_second(&wide).await;
    assert!(
        query.contains("encoding=linear16&sample_rate=16000"),
        "{query}"
    );
    // 16 samples of 2 bytes per millisecond.
    assert!((24.0..=33.0).contains(&per_ms), "{per_ms} bytes/ms");

    let narrow = engine.open_session(None).unwrap();
    narrow
        .set_remote(peer.addr(), RtpCodec::Pcmu, None)
        .unwrap();
    assert_eq!(narrow.audio_rate(), AudioRate::Narrow);
    let (query, per_ms) = recognise_for_a_second(&narrow).await;
    assert!(
        query.contains("encoding=linear16&sample_rate=8000"),
        "{query}"
    );
    assert!((12.0..=16.5).contains(&per_ms), "{per_ms} bytes/ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_g711_session_stays_narrowband() {
    let engine = engine();
    let (caller, bot) = connected(&engine);
    assert_eq!(bot.audio_rate(), AudioRate::Narrow);
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    bot.start_recording(RecordingTarget {
        store: store.clone(),
        path: "rec/narrow.wav".into(),
    })
    .unwrap();
    let mut tap = bot.tap_caller_audio(200).unwrap();
    // A 16 kHz prompt plays to a G.711 caller from its 8 kHz samples.
    let pcm = tone(1000.0, 16000.0, 600, 8000.0);
    let prompt = Arc::new(Prompt::decode(&wav(&pcm, 16000), Some("wav")).unwrap());
    caller.play(prompt, false).unwrap().wait().await;
    let mut heard = Vec::new();
    let mut last_at = None;
    while heard.len() < 4000 {
        let f = tokio::time::timeout(Duration::from_secs(2), tap.recv())
            .await
            .expect("audio")
            .expect("tap open");
        assert_eq!((f.rate, f.duration_ms()), (AudioRate::Narrow, 20));
        if let Some(prev) = last_at {
            assert_eq!(f.at_ms, prev + 20, "one frame per tick");
        }
        last_at = Some(f.at_ms);
        heard.extend_from_slice(&f.pcm);
    }
    let start = heard.iter().position(|s| s.abs() > 1000).expect("audio");
    let voiced = &heard[start + 800..start + 3200];
    assert!(power_at(voiced, 1000.0, 8000.0) > 100.0 * power_at(voiced, 2500.0, 8000.0));
    let (_, rec) = bot.close().await.unwrap();
    assert_eq!(rec.expect("recorded").sample_rate, 8000);
    let (rate, _, _) = read_recording(store.as_ref(), "rec/narrow.wav").await;
    assert_eq!(rate, 8000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_g722_sessions_bridge_a_prompt() {
    let engine = engine();
    let a = engine.open_session(None).unwrap();
    let b = engine.open_session(None).unwrap();
    a.set_remote(b.local_addr(), RtpCodec::G722, None).unwrap();
    b.set_remote(a.local_addr(), RtpCodec::G722, None).unwrap();
    let mut tap = b.tap_caller_audio(200).unwrap();
    let sent = tone(1000.0, 16000.0, 800, 8000.0);
    a.play(
        Arc::new(Prompt::from_pcm_at(sent.clone(), AudioRate::Wide)),
        false,
    )
    .unwrap();
    let mut heard = Vec::new();
    while heard.len() < 16000 {
        let f = tokio::time::timeout(Duration::from_secs(2), tap.recv())
            .await
            .expect("audio")
            .expect("tap open");
        heard.extend_from_slice(&f.pcm);
    }
    // Sample for sample after the codec settles, at the best alignment: better than 20 dB.
    let snr_at = |off: usize| {
        let (mut sig, mut err) = (0f64, 0f64);
        for i in 1600..8000 {
            let r = sent[i] as f64;
            sig += r * r;
            err += (heard[off + i] as f64 - r).powi(2);
        }
        10.0 * (sig / err.max(1.0)).log10()
    };
    let snr = (0..heard.len() - 8000).map(snr_at).fold(f64::MIN, f64::max);
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
    while heard.len() < 12800 {
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
