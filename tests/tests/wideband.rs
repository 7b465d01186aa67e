//! Wideband SIP legs end to end: the real `callsmith` binary calls baresip (Debian's SIP
//! phone) over a trunk that prefers G.722; baresip answers in G.722, plays a 6 kHz tone and
//! says "yes" (flite, 16 kHz), the real recognition node transcribes it (streamed at
//! 16 kHz), and the call is recorded at 16 kHz with the tone in it: audio above 4 kHz, which
//! no 8 kHz stage could have carried.

use std::time::Duration;

use callsmith_e2e::*;
use serde_json::json;

/// One second of a quiet 6 kHz tone (about -20 dBFS), then flite saying `text` as a mono WAV
/// at `rate`, after `lead_ms` of silence and with 3 s after (baresip's `aufile` plays a
/// file only at its codec's own rate; at 8 kHz the tone cannot be carried and is left out).
fn speech_wav(dir: &std::path::Path, text: &str, rate: u32, lead_ms: u32) -> std::path::PathBuf {
    let raw = dir.join("flite.wav");
    let st = std::process::Command::new("flite")
        .args(["-t", text, "-o"])
        .arg(&raw)
        .status()
        .expect("run flite");
    assert!(st.success(), "flite failed");
    let out = dir.join("speech.wav");
    let st = std::process::Command::new("sox")
        .arg(&raw)
        .args(["-r", &rate.to_string(), "-c", "1", "-b", "16"])
        .arg(&out)
        .args(["pad", &format!("{:.3}", f64::from(lead_ms) / 1000.0), "3.0"])
        .status()
        .expect("run sox");
    assert!(st.success(), "sox failed");
    if rate < 16000 {
        return out;
    }
    let tone = dir.join("tone.wav");
    let st = std::process::Command::new("sox")
        .args(["-n", "-r", &rate.to_string(), "-c", "1", "-b", "16"])
        .arg(&tone)
        .args(["synth", "1.0", "sine", "6000", "vol", "0.1"])
        .status()
        .expect("run sox");
    assert!(st.success(), "sox synth failed");
    let both = dir.join("tone-speech.wav");
    let st = std::process::Command::new("sox")
        .arg(&tone)
        .arg(&out)
        .arg(&both)
        .status()
        .expect("run sox");
    assert!(st.success(), "sox concatenation failed");
    both
}

/// Runs an agent call to a baresip offering and accepting `baresip_codecs` over a trunk
/// listing `trunk_codecs`; returns the finished communication, its history, the engine's
/// log, the stored recording (with the first speech turn's stored audio) and baresip's
/// output.
async fn call_baresip(
    ip: std::net::IpAddr,
    baresip_codecs: &str,
    rate: u32,
    trunk_codecs: &str,
) -> (
    serde_json::Value,
    serde_json::Value,
    String,
    (Vec<u8>, Vec<u8>),
    String,
) {
    let node = SttNode::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = speech_wav(dir.path(), "yes", rate, 4000);
    let phone = Baresip::callee_on(ip, "+15550123", baresip_codecs, &wav).await;
    let e = Engine::start(EngineOptions {
        stt_url: Some(node.url.clone()),
        sip_ip: Some(ip),
        media_toml: format!("bind_ip = \"{ip}\"\n"),
        extra_toml: format!(
            "[[sip.trunks]]\nname = \"pbx\"\ngateway = \"{}\"\nnumber_format = {{ kind = \"as_is\" }}\ncodecs = {trunk_codecs}\n",
            phone.addr
        ),
        ..Default::default()
    })
    .await;
    let t = provision(&e, "w", "pbx", "+4930100400").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &question_scenario(), true).await;
    let agent = create_agent(
        &store,
        &t,
        &AgentSpec {
            cps: 1,
            cpl: 1,
            call_recording: true,
            ..AgentSpec::new(scn.clone(), t.number_id.clone())
        },
    )
    .await;
    let c = e
        .dispatch(&t, json!({"recipient": "+15550123", "agent_sid": agent}))
        .await;
    let id = c["id"].as_str().expect("id").to_string();
    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(120))
        .await;
    let history = if done["has_history"] == true {
        e.history(&t.account, &id)
    } else {
        serde_json::Value::Null
    };
    let recording = std::fs::read(
        e.data_dir
            .join("objects")
            .join(format!("calls/{}/{id}/recording.wav", t.account)),
    )
    .unwrap_or_default();
    let turn = std::fs::read(
        e.data_dir
            .join("objects")
            .join(format!("calls/{}/{id}/speech/1.wav", t.account)),
    )
    .unwrap_or_default();
    let log = e.log();
    (done, history, log, (recording, turn), phone.output().await)
}

const V4: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// The sample rate in a WAV header.
fn wav_rate(wav: &[u8]) -> u32 {
    assert!(wav.starts_with(b"RIFF") && wav.len() > 44, "a WAV file");
    u32::from_le_bytes(wav[24..28].try_into().unwrap())
}

/// Power of `x` at `freq` (Goertzel) at `rate`, normalised by length.
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

/// The loudest 20 ms of a 6 kHz tone in a stereo 16 kHz recording's left (caller) channel,
/// as the tone's amplitude, with the power beside it (at 5 kHz) in the same window.
fn caller_tone_6k(wav: &[u8]) -> (f64, f64) {
    let r = hound::WavReader::new(std::io::Cursor::new(wav)).expect("recording parses");
    assert_eq!(r.spec().channels, 2);
    let s: Vec<i16> = r.into_samples::<i16>().map(|x| x.unwrap()).collect();
    let left: Vec<i16> = s.iter().step_by(2).copied().collect();
    left.chunks_exact(320)
        .map(|w| (power_at(w, 6000.0, 16000.0), power_at(w, 5000.0, 16000.0)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(p, beside)| ((4.0 * p).sqrt(), (4.0 * beside).sqrt()))
        .unwrap_or((0.0, 0.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_g722_call_with_baresip_is_recognised_and_recorded() {
    let (done, h, log, (recording, turn), phone) =
        call_baresip(V4, "G722/16000/1", 16000, "[\"G722\", \"PCMU\"]").await;
    assert_eq!(
        done["communication_status"], "completed",
        "{done}\n{log}\n{phone}"
    );
    assert!(
        log.contains("call media negotiated") && log.contains("codec=\"G722\""),
        "{log}"
    );
    assert!(
        log.contains("payload_type=9"),
        "static payload type 9: {log}"
    );
    assert_eq!(
        done["goals"],
        json!(["agreed"]),
        "history: {}\n{phone}",
        h["turns"]
    );
    let transcript = h["turns"][0]["transcript"]
        .as_str()
        .unwrap_or("")
        .to_lowercase();
    assert!(transcript.contains("yes"), "{}", h["turns"]);
    assert_eq!(done["has_recording"], true);
    // A G.722 call is recorded at 16 kHz, the caller's upper band included: the phone's
    // 6 kHz tone (amplitude about 3300) is there (docs/trunks.md#g722).
    assert_eq!(wav_rate(&recording), 16000);
    let (tone, beside) = caller_tone_6k(&recording);
    assert!(
        tone > 1000.0 && tone > 10.0 * beside,
        "6 kHz tone {tone:.0}, 5 kHz {beside:.0}"
    );
    // The speech turn's stored audio, what recognition got, is 16 kHz too.
    assert_eq!(wav_rate(&turn), 16000, "{}", h["turns"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pcmu_only_phone_still_gets_pcmu() {
    let (done, h, log, (recording, turn), phone) =
        call_baresip(V4, "PCMU", 8000, "[\"G722\", \"PCMU\"]").await;
    assert_eq!(
        done["communication_status"], "completed",
        "{done}\n{log}\n{phone}"
    );
    assert!(log.contains("codec=\"PCMU\""), "{log}");
    assert_eq!(done["goals"], json!(["agreed"]), "history: {}", h["turns"]);
    // A G.711 call stays narrowband.
    assert_eq!(wav_rate(&recording), 8000);
    assert_eq!(wav_rate(&turn), 8000);
}

/// IPv6 loopback end to end: the engine listens for SIP and binds RTP on `::1`, its trunk's
/// gateway is baresip at `[::1]:port` (which has no other address), both SDPs say
/// `c=IN IP6 ::1`, and the G.722 call's speech is recognised as over IPv4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_g722_call_over_ipv6_loopback() {
    let ip: std::net::IpAddr = "::1".parse().unwrap();
    let (done, h, log, _, phone) = call_baresip(ip, "G722/16000/1", 16000, "[\"G722\"]").await;
    assert_eq!(
        done["communication_status"], "completed",
        "{done}\n{log}\n{phone}"
    );
    assert!(log.contains("udp=Some([::1]:"), "{log}");
    assert!(log.contains("codec=\"G722\""), "{log}");
    assert_eq!(done["goals"], json!(["agreed"]), "history: {}", h["turns"]);
}
