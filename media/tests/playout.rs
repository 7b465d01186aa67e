//! Barge-in, recording, bridging, prompt formats and sources, TTS engines,
//! answering-machine detection.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use callsmith_media::amd::{AmdConfig, AmdDecision, tone_ratio};
use callsmith_media::g711::Codec;
use callsmith_media::prompt::{Prompt, PromptCache};
use callsmith_media::recording::RecordingTarget;
use callsmith_media::rtp::write_rtp;
use callsmith_media::tts::{HttpTts, TtsEngine, TtsRequest, TtsService};
use callsmith_media::{BargeIn, Bridge, MediaEvent, PlayEnd};
use common::*;
use object_store::ObjectStore;

fn tone(freq: f32, ms: u32, amp: f32) -> Arc<Prompt> {
    let n = (ms * 8) as usize;
    Arc::new(Prompt::from_pcm(
        (0..n)
            .map(|i| ((i as f32 * 2.0 * std::f32::consts::PI * freq / 8000.0).sin() * amp) as i16)
            .collect(),
    ))
}

async fn flite(text: &str) -> Arc<Prompt> {
    TtsService::with_local_engines(4)
        .prompt(&TtsRequest {
            engine: "flite".into(),
            text: text.into(),
            speed: 1.0,
            ..Default::default()
        })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_speech_interrupts_an_interruptible_prompt() {
    let engine = engine();
    let bot = engine.open_session(None).unwrap();
    let peer = Arc::new(RawPeer::new().await);
    bot.set_remote(peer.addr(), Codec::Pcmu, Some(101)).unwrap();
    let speech = flite("Stop, I want to speak to a person").await;
    let handle = bot.play(tone(440.0, 10_000, 8000.0), true).unwrap();

    // Receiver: note when the bot's tone turns to silence.
    let rx_peer = peer.clone();
    let receiver = tokio::spawn(async move {
        let pkts = rx_peer
            .collect(Duration::from_secs(8), |p| {
                p.len() > 20
                    && p.last()
                        .is_some_and(|x| x.payload.iter().all(|b| *b == 0xFF))
            })
            .await;
        pkts.last().map(|p| p.at)
    });
    // Caller: 400 ms of silence, then speech, paced at 20 ms.
    let mut frames: Vec<[u8; 160]> = vec![[0xFF; 160]; 20];
    for c in speech.encoded(Codec::Pcmu).chunks(160) {
        let mut f = [0xFF; 160];
        f[..c.len()].copy_from_slice(c);
        frames.push(f);
    }
    // Onset: the first frame the VAD itself classifies as voiced.
    let first_voiced = 20 + {
        let mut vad = callsmith_media::vad::SpeechDetector::new(Default::default());
        speech
            .pcm()
            .chunks(160)
            .position(|c| vad.is_voiced(c))
            .unwrap()
    };
    let mut onset_sent: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let mut buf = [0u8; 256];
    for (i, f) in frames.iter().enumerate() {
        tick.tick().await;
        let n = write_rtp(&mut buf, i == 0, 0, i as u16, i as u32 * 160, 42, f).unwrap();
        peer.sock
            .send_to(&buf[..n], bot.local_addr())
            .await
            .unwrap();
        if i == first_voiced {
            onset_sent = Some(Instant::now());
        }
        if i > first_voiced + 25 {
            break;
        }
    }
    let outcome = tokio::time::timeout(Duration::from_secs(5), handle.wait())
        .await
        .unwrap();
    assert_eq!(outcome.end, PlayEnd::Interrupted);
    assert!(outcome.played_ms < 10_000);
    let stopped_at = receiver
        .await
        .unwrap()
        .expect("bot audio turned to silence");
    let onset = onset_sent.unwrap();
    assert!(
        stopped_at >= onset,
        "stopped before the first voiced packet was sent"
    );
    let ms = stopped_at.duration_since(onset).as_millis();
    // Includes one packet of transit, the jitter buffer (1 packet) and the VAD onset (2 frames).
    eprintln!("barge-in: bot silent {ms} ms after the first voiced caller packet was sent");
    assert!(ms < 1000, "playout stopped {ms} ms after speech onset");

    // A non-interruptible prompt plays through speech.
    let handle = bot.play(tone(440.0, 600, 8000.0), false).unwrap();
    for (i, f) in frames[first_voiced..first_voiced + 40].iter().enumerate() {
        tick.tick().await;
        let n = write_rtp(
            &mut buf,
            false,
            0,
            1000 + i as u16,
            (1000 + i as u32) * 160,
            42,
            f,
        )
        .unwrap();
        peer.sock
            .send_to(&buf[..n], bot.local_addr())
            .await
            .unwrap();
    }
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), handle.wait())
            .await
            .unwrap()
            .end,
        PlayEnd::Completed
    );
}

#[tokio::test]
async fn speech_events_and_stop_playout() {
    let engine = engine();
    let (caller, mut bot) = connected(&engine);
    bot.watch_speech(true).unwrap();
    let long = bot.play(tone(300.0, 5000, 6000.0), false).unwrap();
    let queued = bot.play(tone(300.0, 5000, 6000.0), false).unwrap();
    caller
        .play(flite("Hello there, how are you today").await, false)
        .unwrap()
        .wait()
        .await;
    let mut started = None;
    let mut stopped = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while stopped.is_none() {
        match tokio::time::timeout_at(deadline, bot.next_event()).await {
            Ok(Some(MediaEvent::SpeechStarted { at_ms })) => started = started.or(Some(at_ms)),
            Ok(Some(MediaEvent::SpeechStopped { at_ms, hangover_ms })) => {
                assert_eq!(hangover_ms, 400, "the default hangover");
                stopped = Some(at_ms)
            }
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    let (s, e) = (
        started.expect("speech start"),
        stopped.expect("speech stop"),
    );
    assert!(e > s);
    bot.stop_playout().unwrap();
    assert_eq!(long.wait().await.end, PlayEnd::Stopped);
    assert_eq!(queued.wait().await.end, PlayEnd::Stopped);
}

/// Detection turned off before the hangover ends the caller's speech (a recogniser that
/// decides sooner): the session reports where the speech ended instead of a stop, and a
/// later stretch of speech is a new onset.
#[tokio::test]
async fn detection_turned_off_mid_hangover_reports_where_the_speech_ended() {
    let engine = engine();
    let (caller, mut bot) = connected(&engine);
    bot.watch_speech(true).unwrap();
    caller
        .play(flite("Hello there, how are you today").await, false)
        .unwrap()
        .wait()
        .await;
    let mut started = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !started {
        match tokio::time::timeout_at(deadline, bot.next_event()).await {
            Ok(Some(MediaEvent::SpeechStarted { .. })) => started = true,
            Ok(Some(_)) => {}
            _ => panic!("no speech onset"),
        }
    }
    // The caller's audio is played out: 200 ms into the 400 ms hangover, stop watching.
    tokio::time::sleep(Duration::from_millis(200)).await;
    bot.watch_speech(false).unwrap();
    let silence_ms = loop {
        match tokio::time::timeout_at(deadline, bot.next_event()).await {
            Ok(Some(MediaEvent::SpeechUnwatched { silence_ms, .. })) => break silence_ms,
            Ok(Some(MediaEvent::SpeechStopped { .. })) => panic!("the hangover ran out first"),
            Ok(Some(_)) => {}
            _ => panic!("no SpeechUnwatched"),
        }
    };
    // flite's trailing quiet and the jitter buffer's packet sit between the playout's end
    // and the last voiced frame the detector heard.
    assert!(
        (120..=400).contains(&silence_ms),
        "speech ended {silence_ms} ms before detection stopped"
    );
    // Watching again, the next speech is an onset of its own.
    bot.watch_speech(true).unwrap();
    caller.play(flite("Yes").await, false).unwrap().wait().await;
    let again = loop {
        match tokio::time::timeout_at(deadline, bot.next_event()).await {
            Ok(Some(MediaEvent::SpeechStarted { .. })) => break true,
            Ok(Some(_)) => {}
            _ => break false,
        }
    };
    assert!(again, "no onset for the next speech");
}

/// A prompt whose barge-in opens 2.5 s in: the caller's speech at its start does not stop
/// it, speech after 2.5 s does.
#[tokio::test]
async fn speech_interrupts_only_once_the_barge_in_window_opens() {
    let engine = engine();
    let (caller, bot) = connected(&engine);
    let speech = flite("Hello there").await;
    let t0 = tokio::time::Instant::now();
    let prompt = bot
        .play(tone(300.0, 6000, 6000.0), BargeIn::After(2500))
        .unwrap();
    caller.play(speech.clone(), false).unwrap().wait().await;
    assert!(
        t0.elapsed() < Duration::from_millis(2300),
        "{:?}",
        t0.elapsed()
    );
    tokio::time::sleep_until(t0 + Duration::from_millis(2600)).await;
    caller.play(speech, false).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(5), prompt.wait())
        .await
        .unwrap();
    assert_eq!(out.end, PlayEnd::Interrupted);
    assert!((2600..4500).contains(&out.played_ms), "{out:?}");
}

#[tokio::test]
async fn speech_is_detected_only_while_someone_listens() {
    let engine = engine();
    let (caller, mut bot) = connected(&engine);
    let speech = flite("Hello there, how are you today").await;
    // Nobody listens and the bot's prompt cannot be interrupted: no detection.
    let prompt = bot.play(tone(300.0, 10_000, 6000.0), false).unwrap();
    caller.play(speech.clone(), false).unwrap().wait().await;
    let mut events = Vec::new();
    while let Ok(Some(ev)) =
        tokio::time::timeout(Duration::from_millis(600), bot.next_event()).await
    {
        events.push(ev);
    }
    assert!(
        !events.iter().any(|e| matches!(
            e,
            MediaEvent::SpeechStarted { .. } | MediaEvent::SpeechStopped { .. }
        )),
        "{events:?}"
    );
    // Once someone listens, the same speech is detected.
    bot.watch_speech(true).unwrap();
    caller.play(speech, false).unwrap().wait().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut started = false;
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, bot.next_event()).await {
        if matches!(ev, MediaEvent::SpeechStarted { .. }) {
            started = true;
            break;
        }
    }
    assert!(started, "speech start once watched");
    bot.stop_playout().unwrap();
    assert_eq!(prompt.wait().await.end, PlayEnd::Stopped);
}

#[tokio::test]
async fn recording_holds_both_parties() {
    let engine = engine();
    let (caller, bot) = connected(&engine);
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    bot.start_recording(RecordingTarget {
        store: store.clone(),
        path: "rec/call-1.wav".into(),
    })
    .unwrap();
    assert!(
        bot.start_recording(RecordingTarget {
            store: store.clone(),
            path: "x".into()
        })
        .is_err()
    );
    let a = caller.play(tone(400.0, 1000, 8000.0), false).unwrap();
    let b = bot.play(tone(1000.0, 1000, 8000.0), false).unwrap();
    a.wait().await;
    b.wait().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (_stats, rec) = bot.close().await.unwrap();
    let rec = rec.expect("recording stored");
    assert_eq!(rec.path, "rec/call-1.wav");
    assert_eq!(rec.dropped_frames, 0);
    let bytes = store
        .get(&"rec/call-1.wav".into())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(bytes.len() as u64, rec.bytes);
    let reader = hound::WavReader::new(std::io::Cursor::new(bytes.to_vec())).unwrap();
    assert_eq!(reader.spec().channels, 2);
    assert_eq!(reader.spec().sample_rate, 8000);
    let samples: Vec<i16> = reader.into_samples::<i16>().map(|s| s.unwrap()).collect();
    let left: Vec<i16> = samples.iter().step_by(2).copied().collect();
    let right: Vec<i16> = samples.iter().skip(1).step_by(2).copied().collect();
    // Left = caller (400 Hz), right = bot (1000 Hz): find a loud frame in each and check its pitch.
    let loud = |ch: &[i16]| {
        ch.chunks(160)
            .filter(|c| c.len() == 160 && level(c) > 2000.0)
            .map(|c| c.to_vec())
            .collect::<Vec<_>>()
    };
    let lf = loud(&left);
    let rf = loud(&right);
    assert!(
        lf.len() >= 40,
        "caller audio on the left: {} loud frames",
        lf.len()
    );
    assert!(
        rf.len() >= 40,
        "bot audio on the right: {} loud frames",
        rf.len()
    );
    assert!(
        tone_ratio(&lf[10], 400.0) > 0.8 && tone_ratio(&rf[10], 1000.0) > 0.8,
        "channels are not swapped"
    );
}

#[tokio::test]
async fn bridge_relays_audio_between_sessions() {
    let engine = engine();
    // caller1 <-> leg1 == bridge == leg2 <-> caller2
    let caller1 = engine.open_session(None).unwrap();
    let leg1 = engine.open_session(None).unwrap();
    let caller2 = engine.open_session(None).unwrap();
    let leg2 = engine.open_session(None).unwrap();
    for (a, b) in [(&caller1, &leg1), (&caller2, &leg2)] {
        a.set_remote(b.local_addr(), Codec::Pcmu, None).unwrap();
        b.set_remote(a.local_addr(), Codec::Pcmu, None).unwrap();
    }
    let bridge = Bridge::start(&leg1, &leg2).unwrap();
    let mut heard2 = caller2.tap_caller_audio(200).unwrap();
    let mut heard1 = caller1.tap_caller_audio(200).unwrap();
    let p1 = caller1.play(tone(500.0, 800, 8000.0), false).unwrap();
    let p2 = caller2.play(tone(1200.0, 800, 8000.0), false).unwrap();
    p1.wait().await;
    p2.wait().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pitch = |rx: &mut callsmith_media::AudioReceiver, f: f32| {
        let mut hits = 0;
        while let Ok(fr) = rx.try_recv() {
            if level(&fr.pcm) > 2000.0 && tone_ratio(&fr.pcm, f) > 0.7 {
                hits += 1;
            }
        }
        hits
    };
    assert!(pitch(&mut heard2, 500.0) >= 25, "caller2 hears caller1");
    assert!(pitch(&mut heard1, 1200.0) >= 25, "caller1 hears caller2");
    bridge.stop();
}

#[tokio::test]
async fn prompts_decode_from_every_format_and_source() {
    let dir = tmpdir();
    let d = dir.path();
    let wav = d.join("t.wav");
    let w = wav.to_str().unwrap();
    // 44.1 kHz stereo source; every format is resampled and mixed down to 8 kHz mono.
    sox(&[
        "-n", "-r", "44100", "-c", "2", "-b", "16", w, "synth", "1.0", "sine", "440", "vol", "0.5",
    ]);
    let flac = d.join("t.flac");
    let ogg = d.join("t.ogg");
    let wav48 = d.join("t48.wav");
    sox(&[w, flac.to_str().unwrap()]);
    sox(&[w, ogg.to_str().unwrap()]);
    sox(&[
        w,
        "-r",
        "48000",
        "-c",
        "1",
        "-e",
        "floating-point",
        "-b",
        "32",
        wav48.to_str().unwrap(),
    ]);
    let mut sources = vec![wav.clone(), flac, ogg, wav48];
    // MP3: encoded with PyAV's libmp3lame from the speech node's venv when present.
    let mp3 = d.join("t.mp3");
    if let Some(py) = std::env::var("CALLSMITH_STT_PYTHON")
        .ok()
        .or_else(|| {
            Some(format!(
                "{}/.cache/callsmith/speech-venv/bin/python",
                std::env::var("HOME").ok()?
            ))
        })
        .filter(|p| std::path::Path::new(p).exists())
    {
        let script = format!(
            "import av\ni=av.open({w:?})\no=av.open({m:?},'w')\ns=o.add_stream('libmp3lame',rate=44100)\n\
             for f in i.decode(audio=0):\n  f.pts=None\n  [o.mux(p) for p in s.encode(f)]\n\
             [o.mux(p) for p in s.encode(None)]\no.close()\n",
            m = mp3.to_str().unwrap()
        );
        let st = std::process::Command::new(py)
            .args(["-c", &script])
            .status()
            .unwrap();
        assert!(st.success(), "mp3 encode");
        sources.push(mp3);
    } else {
        eprintln!("no encoder for MP3 found: MP3 decode not exercised");
    }
    let cache = PromptCache::new(16);
    for src in &sources {
        let src = src.to_str().unwrap();
        let p = cache
            .get_or_load(src, || common::read_file(src))
            .await
            .unwrap_or_else(|e| panic!("{src:?}: {e}"));
        let ms = p.duration_ms() as i64;
        assert!((ms - 1000).abs() <= 80, "{src:?}: {ms} ms");
        let mid = &p.pcm()[3200..3360];
        assert!(
            tone_ratio(mid, 440.0) > 0.8,
            "{src:?}: 440 Hz tone survives"
        );
    }
    // Cached and shared: the second load does not fetch.
    let a = cache.get_or_load(w, || common::read_file(w)).await.unwrap();
    let b = cache
        .get_or_load(w, || async { panic!("a cached prompt is fetched again") })
        .await
        .unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // Errors, not panics.
    assert!(
        cache
            .get_or_load("/nonexistent.wav", || common::read_file("/nonexistent.wav"))
            .await
            .is_err()
    );
    let junk = d.join("junk.mp3");
    std::fs::write(&junk, b"this is not audio").unwrap();
    let junk = junk.to_str().unwrap();
    assert!(
        cache
            .get_or_load(junk, || common::read_file(junk))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn tts_engines_local_and_http_streaming() {
    let svc = Arc::new(TtsService::with_local_engines(8));
    for engine in ["espeak-ng", "flite"] {
        let req = TtsRequest {
            engine: engine.into(),
            text: "Your call is important to us".into(),
            speed: 1.0,
            ..Default::default()
        };
        let p = svc.prompt(&req).await.unwrap();
        assert!(
            (1000..5000).contains(&p.duration_ms()),
            "{engine}: {} ms",
            p.duration_ms()
        );
        assert!(level(p.pcm()) > 200.0, "{engine} produced audio");
        let faster = svc
            .prompt(&TtsRequest {
                speed: 2.0,
                ..req.clone()
            })
            .await
            .unwrap();
        assert!(
            faster.duration_ms() < p.duration_ms(),
            "{engine}: speed changes duration"
        );
    }
    assert!(
        svc.prompt(&TtsRequest {
            engine: "nope".into(),
            text: "x".into(),
            ..Default::default()
        })
        .await
        .is_err()
    );
    assert!(
        svc.prompt(&TtsRequest {
            engine: "flite".into(),
            text: "  ".into(),
            ..Default::default()
        })
        .await
        .is_err()
    );

    // HTTP engine: a 16 kHz WAV from a loopback server, streamed into a growing source.
    let dir = tmpdir();
    let f8 = dir.path().join("f.wav");
    let f16 = dir.path().join("f16.wav");
    let st = std::process::Command::new("flite")
        .args(["-t", "Thank you for calling", "-o", f8.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    sox(&[f8.to_str().unwrap(), "-r", "16000", f16.to_str().unwrap()]);
    let (addr, server) = serve_bytes(std::fs::read(&f16).unwrap(), "audio/wav").await;
    let http = Arc::new(HttpTts::new(format!(
        "http://{addr}/synth?text={{text}}&voice={{voice}}"
    )));
    let req = TtsRequest {
        engine: "http".into(),
        text: "Thank you for calling".into(),
        voice: "a b".into(),
        speed: 1.0,
        ..Default::default()
    };
    assert!(
        http.url_for(&req)
            .contains("text=Thank+you+for+calling&voice=a+b")
    );
    let whole = http.synthesize(&req).await.unwrap();
    let mut svc2 = TtsService::new(8);
    svc2.register("http", http.clone());
    let svc2 = Arc::new(svc2);
    let playable = svc2.playable(&req).unwrap();
    assert!(matches!(
        playable,
        callsmith_media::prompt::Playable::Stream(_)
    ));
    let engine = engine();
    let session = engine.open_session(None).unwrap();
    let peer = RawPeer::new().await;
    session.set_remote(peer.addr(), Codec::Pcmu, None).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        session.play(playable, false).unwrap().wait(),
    )
    .await
    .unwrap();
    assert_eq!(out.end, PlayEnd::Completed);
    let expect = whole.duration_ms() as i64;
    assert!(
        (out.played_ms as i64 - expect).abs() <= 60,
        "streamed {} ms vs whole {expect} ms",
        out.played_ms
    );
    // The finished stream was cached: the next request plays the cached prompt.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(matches!(
        svc2.playable(&req).unwrap(),
        callsmith_media::prompt::Playable::Prompt(_)
    ));
    server.abort();
}

/// With `beep_wait_ms`, a machine verdict waits for the beep at the end of the greeting
/// (Beep), or for the greeting to end in silence (Machine). Both calls run at once.
#[tokio::test]
async fn answering_machine_waits_for_the_beep() {
    let engine = engine();
    let greeting = flite("Hello, you have reached the voicemail of John Smith. Please leave a message after the tone.").await;
    let greeting_ms = greeting.duration_ms();
    let mut runs = Vec::new();
    for with_beep in [true, false] {
        let (caller, bot) = connected(&engine);
        let cfg = AmdConfig {
            beep_wait_ms: 10_000,
            ..AmdConfig::default()
        };
        let task = bot.spawn_answering_machine_detection(cfg).unwrap();
        caller.play(greeting.clone(), false).unwrap();
        if with_beep {
            caller.play(tone(1000.0, 500, 10000.0), false).unwrap();
        }
        runs.push((with_beep, task, caller, bot));
    }
    let t0 = std::time::Instant::now();
    for (with_beep, task, _caller, _bot) in runs {
        let v = tokio::time::timeout(Duration::from_secs(15), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            v,
            if with_beep {
                AmdDecision::Beep
            } else {
                AmdDecision::Machine
            }
        );
        assert!(
            t0.elapsed().as_millis() as u64 + 200 >= greeting_ms,
            "decided after the greeting ({} ms of {greeting_ms} ms)",
            t0.elapsed().as_millis()
        );
    }
}

#[tokio::test]
async fn answering_machine_heuristics() {
    let engine = engine();
    // A long greeting is a machine.
    let (caller, bot) = connected(&engine);
    let greeting = flite("Hello, you have reached the voicemail of John Smith. I am not available right now, please leave a message").await;
    let verdict = tokio::spawn({
        let cfg = AmdConfig::default();
        async move { bot.detect_answering_machine(cfg).await.map(|v| (v, bot)) }
    });
    caller.play(greeting, false).unwrap();
    let (v, _bot) = tokio::time::timeout(Duration::from_secs(10), verdict)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(v, AmdDecision::Machine);

    // A short "hello?" then silence is a person.
    let (caller, bot) = connected(&engine);
    let hello = flite("Hello?").await;
    let verdict = tokio::spawn(async move {
        bot.detect_answering_machine(AmdConfig::default())
            .await
            .map(|v| (v, bot))
    });
    caller.play(hello, false).unwrap();
    let (v, _bot) = tokio::time::timeout(Duration::from_secs(10), verdict)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(v, AmdDecision::Human);

    // A beep.
    let (caller, bot) = connected(&engine);
    let verdict = tokio::spawn(async move {
        bot.detect_answering_machine(AmdConfig::default())
            .await
            .map(|v| (v, bot))
    });
    caller.play(tone(1000.0, 500, 10000.0), false).unwrap();
    let (v, _bot) = tokio::time::timeout(Duration::from_secs(10), verdict)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(v, AmdDecision::Beep);
}

/// Streamed synthesis starts playing before the synthesizer has finished: the
/// HTTP engine's server sends the WAV header and the first second of speech, then
/// holds the rest back for 1.5 s. The caller must hear speech on the wire before
/// the server releases the rest, and the whole prompt must still be played.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_tts_plays_before_synthesis_ends() {
    let dir = tmpdir();
    let f8 = dir.path().join("s.wav");
    let f16 = dir.path().join("s16.wav");
    let st = std::process::Command::new("flite")
        .args([
            "-t",
            "Thank you for calling. Your call is important to us.",
            "-o",
            f8.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(st.success());
    sox(&[f8.to_str().unwrap(), "-r", "16000", f16.to_str().unwrap()]);
    let wav = std::fs::read(&f16).unwrap();
    let whole_ms = ((wav.len() - 44) / 32) as u64;
    assert!(
        whole_ms > 2000,
        "the prompt outlasts the held part: {whole_ms} ms"
    );
    let hold = Hold {
        at: 44 + 32_000, // the header and one second of 16 kHz speech
        pause: Duration::from_millis(1500),
        resumed: Default::default(),
    };
    let (addr, server) = serve_bytes_held(wav, "audio/wav", Some(hold.clone())).await;
    let mut svc = TtsService::new(4);
    svc.register(
        "http",
        Arc::new(HttpTts::new(format!("http://{addr}/synth?text={{text}}"))),
    );
    let svc = Arc::new(svc);
    let req = TtsRequest {
        engine: "http".into(),
        text: "Thank you for calling. Your call is important to us.".into(),
        speed: 1.0,
        ..Default::default()
    };

    let engine = engine();
    let session = engine.open_session(None).unwrap();
    let peer = RawPeer::new().await;
    session.set_remote(peer.addr(), Codec::Pcmu, None).unwrap();
    let requested = Instant::now();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let play = {
        let done = done.clone();
        let handle = session.play(svc.playable(&req).unwrap(), false).unwrap();
        tokio::spawn(async move {
            let out = tokio::time::timeout(Duration::from_secs(15), handle.wait()).await;
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            out
        })
    };
    let packets = peer
        .collect(Duration::from_secs(15), |_| {
            done.load(std::sync::atomic::Ordering::SeqCst)
        })
        .await;
    let out = play.await.unwrap().expect("playback ends");
    let resumed = hold
        .resumed
        .lock()
        .unwrap()
        .expect("the server sent the rest");

    let first_speech = packets
        .iter()
        .find(|p| level(&decode(std::slice::from_ref(p), Codec::Pcmu)) > 300.0)
        .expect("speech reached the caller")
        .at;
    assert!(
        first_speech < resumed,
        "speech was on the wire {} ms after the request, before the synthesizer's rest \
         arrived at {} ms",
        (first_speech - requested).as_millis(),
        (resumed - requested).as_millis()
    );
    assert!(
        first_speech - requested < Duration::from_millis(800),
        "playout began {} ms after the request",
        (first_speech - requested).as_millis()
    );
    assert_eq!(out.end, PlayEnd::Completed);
    assert!(
        out.played_ms + 60 >= whole_ms,
        "the whole prompt played: {} of {whole_ms} ms",
        out.played_ms
    );
    server.abort();
}

/// A vowel-like voiced signal (a 150 Hz pulse train through resonances), `ms` long.
fn vowel(ms: usize) -> Vec<i16> {
    (0..ms * 8)
        .map(|i| {
            let f0 = 2.0 * std::f32::consts::PI * 150.0 * i as f32 / 8000.0;
            ((f0.sin() * 0.5 + (f0 * 5.0).sin() * 0.3 + (f0 * 14.0).sin() * 0.2) * 9000.0) as i16
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backchannel_does_not_interrupt_a_prompt() {
    let engine = engine();
    let bot = engine.open_session(None).unwrap();
    let peer = RawPeer::new().await;
    bot.set_remote(peer.addr(), Codec::Pcmu, Some(101)).unwrap();
    let handle = bot.play(tone(440.0, 2_000, 8000.0), true).unwrap();
    // 200 ms of "mm-hm" after 200 ms of silence, then silence: shorter than the 300 ms
    // that interrupt.
    let mm = Prompt::from_pcm(vowel(200));
    let mut frames: Vec<[u8; 160]> = vec![[0xFF; 160]; 10];
    for c in mm.encoded(Codec::Pcmu).chunks(160) {
        let mut f = [0xFF; 160];
        f[..c.len()].copy_from_slice(c);
        frames.push(f);
    }
    frames.extend(std::iter::repeat_n([0xFF; 160], 50));
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let mut buf = [0u8; 256];
    for (i, f) in frames.iter().enumerate() {
        tick.tick().await;
        let n = write_rtp(&mut buf, i == 0, 0, i as u16, i as u32 * 160, 42, f).unwrap();
        peer.sock
            .send_to(&buf[..n], bot.local_addr())
            .await
            .unwrap();
    }
    let outcome = tokio::time::timeout(Duration::from_secs(5), handle.wait())
        .await
        .unwrap();
    assert_eq!(outcome.end, PlayEnd::Completed, "a backchannel plays on");
    assert!(outcome.played_ms >= 1_900, "{}", outcome.played_ms);
    let (stats, _) = bot.close().await.unwrap();
    assert_eq!(stats.backchannels, 1, "{stats:?}");
}
