//! Wideband SIP legs end to end: the real `callsmith` binary calls baresip (Debian's SIP
//! phone) over a trunk that prefers G.722; baresip answers in G.722, plays a 6 kHz tone and
//! says "yes" (flite, 16 kHz), the real recognition node transcribes it (streamed at
//! 16 kHz), and the call is recorded at 16 kHz with the tone in it: audio above 4 kHz, which
//! no 8 kHz stage could have carried. The same call over SIP TLS with SRTP required is
//! recognised and recorded the same way.

use std::time::Duration;

use callsmith_e2e::*;
use serde_json::json;

/// Runs an agent call to a baresip offering and accepting `baresip_codecs` over a trunk
/// listing `trunk_codecs` (with `certs`: over SIP TLS with SRTP required, both sides
/// trusting `certs/ca.pem`, [`tls_certificates`]); returns the finished communication, its history, the engine's
/// log, the stored recording (with the first speech turn's stored audio) and baresip's
/// output.
async fn call_baresip(
    ip: std::net::IpAddr,
    baresip_codecs: &str,
    rate: u32,
    trunk_codecs: &str,
    certs: Option<&std::path::Path>,
) -> (
    serde_json::Value,
    serde_json::Value,
    String,
    (Vec<u8>, Vec<u8>),
    String,
) {
    let node = SttNode::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = tone_and_speech_wav(dir.path(), "yes", rate, 4000);
    let (phone, secure) = match certs {
        None => (
            Baresip::callee_on(ip, "+15550123", baresip_codecs, &wav).await,
            String::new(),
        ),
        Some(certs) => {
            let file = |f: &str| certs.join(f).display().to_string();
            (
                Baresip::secure_callee("+15550123", baresip_codecs, &wav, certs).await,
                format!(
                    "transport = \"tls\"\nsrtp = \"required\"\n[sip.tls]\nlisten = \"127.0.0.1:0\"\n\
                     cert_file = {:?}\nkey_file = {:?}\nca_file = {:?}\n",
                    file("node.crt"),
                    file("node.key"),
                    file("ca.pem"),
                ),
            )
        }
    };
    let e = Engine::start(EngineOptions {
        stt_url: Some(node.url.clone()),
        sip_ip: Some(ip),
        media_toml: format!("bind_ip = \"{ip}\"\n"),
        extra_toml: format!(
            "[[sip.trunks]]\nname = \"pbx\"\ngateway = \"{}\"\nnumber_format = {{ kind = \"as_is\" }}\ncodecs = {trunk_codecs}\n{secure}",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_g722_call_with_baresip_is_recognised_and_recorded() {
    let (done, h, log, (recording, turn), phone) =
        call_baresip(V4, "G722/16000/1", 16000, "[\"G722\", \"PCMU\"]", None).await;
    assert_wideband_call(&done, &h, &log, &recording, &turn, &phone);
}

/// What docs/trunks.md promises a newcomer: a trunk over SIP TLS with SRTP required places a
/// G.722 call to a secure phone (baresip, `mediaenc=srtp-mand`) that is recognised and
/// recorded at 16 kHz like a plain one, and no key reaches the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_g722_call_over_tls_with_srtp_is_recognised_and_recorded_at_16_khz() {
    let certs = tempfile::tempdir().expect("tempdir");
    tls_certificates(certs.path());
    let (done, h, log, (recording, turn), phone) = call_baresip(
        V4,
        "G722/16000/1",
        16000,
        "[\"G722\", \"PCMU\"]",
        Some(certs.path()),
    )
    .await;
    assert_wideband_call(&done, &h, &log, &recording, &turn, &phone);
    assert!(
        phone.contains("srtp-mand") && !phone.contains("failed to decrypt"),
        "baresip required SRTP and decrypted every packet of ours: {phone}"
    );
    assert!(!log.contains("inline:"), "no SDES key in the engine's log");
}

/// A completed G.722 call that took the spoken branch, recorded at 16 kHz with the phone's
/// 6 kHz tone (amplitude about 3300) on the caller's channel, its speech turn's audio (what
/// recognition got) at 16 kHz too (docs/trunks.md#g722).
fn assert_wideband_call(
    done: &serde_json::Value,
    h: &serde_json::Value,
    log: &str,
    recording: &[u8],
    turn: &[u8],
    phone: &str,
) {
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
    assert_eq!(wav_rate(recording), 16000);
    let (tone, beside) = caller_tone_6k(recording);
    assert!(
        tone > 1000.0 && tone > 10.0 * beside,
        "6 kHz tone {tone:.0}, 5 kHz {beside:.0}"
    );
    assert_eq!(wav_rate(turn), 16000, "{}", h["turns"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pcmu_only_phone_still_gets_pcmu() {
    let (done, h, log, (recording, turn), phone) =
        call_baresip(V4, "PCMU", 8000, "[\"G722\", \"PCMU\"]", None).await;
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
    let (done, h, log, _, phone) =
        call_baresip(ip, "G722/16000/1", 16000, "[\"G722\"]", None).await;
    assert_eq!(
        done["communication_status"], "completed",
        "{done}\n{log}\n{phone}"
    );
    assert!(log.contains("udp=Some([::1]:"), "{log}");
    assert!(log.contains("codec=\"G722\""), "{log}");
    assert_eq!(done["goals"], json!(["agreed"]), "history: {}", h["turns"]);
}
