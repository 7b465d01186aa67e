//! Interop with a real phone over TLS and SRTP: baresip (Debian's, with its `srtp` module
//! and libre's TLS) calls a TLS trunk with SRTP required and is called through one, with
//! certificates the test makes (rcgen). The call's media runs through a real media
//! session with the agreed keys: baresip's SRTP is authenticated (nothing dropped), and
//! baresip plays what it hears back (aubridge), so our protected packets reach it too. It
//! also holds and resumes a call: re-INVITEs with its key again, which keep our contexts.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use callsmith_media::srtp::{SrtpParams, SrtpProfile};
use callsmith_media::{MediaConfig, MediaEngine, MediaSession};
use callsmith_sip::{
    CryptoSuite, LegEvent, LocalMedia, NegotiatedMedia, NumberFormat, OutboundCall, SipConfig,
    SipStack, SipTlsConfig, SipTransport, SrtpPolicy, TrunkConfig,
};
use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use tokio::process::Command;

const T: Duration = Duration::from_secs(30);
const SRTP: &str = ";mediaenc=srtp-mand";

/// A CA and one certificate for 127.0.0.1, written into `dir`: ca.pem, node.crt/key
/// (ours) and phone.pem (baresip's certificate and key in one file).
fn certificates(dir: &Path) {
    let ca_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "interop CA");
    let ca = params.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    for stem in ["node", "phone"] {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        std::fs::write(dir.join(format!("{stem}.crt")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{stem}.key")), key.serialize_pem()).unwrap();
        std::fs::write(
            dir.join(format!("{stem}.pem")),
            cert.pem() + &key.serialize_pem(),
        )
        .unwrap();
    }
}

/// baresip's config dir: TLS with our CA, G.711; `account_params` adds e.g.
/// `;mediaenc=srtp-mand` (SRTP mandatory: `RTP/SAVP`).
fn baresip_dir(certs: &Path, port: u16, account_params: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "poll_method epoll\nsip_listen 127.0.0.1:{port}\nsip_certificate {}\nsip_cafile {}\n\
         audio_player aubridge,ab1\naudio_source aubridge,ab1\naudio_alert aubridge,ab2\n\
         module_path /usr/lib/baresip/modules\nmodule g711.so\nmodule aubridge.so\nmodule srtp.so\n\
         module_app account.so\nmodule_app menu.so\n",
        certs.join("phone.pem").display(),
        certs.join("ca.pem").display(),
    );
    std::fs::write(dir.path().join("config"), config).expect("config");
    std::fs::write(
        dir.path().join("accounts"),
        format!(
            "<sip:tester@127.0.0.1:{port};transport=tls>;regint=0;audio_codecs=PCMU{account_params}\n"
        ),
    )
    .expect("accounts");
    dir
}

fn spawn_baresip(dir: &tempfile::TempDir, commands: &[String]) -> tokio::process::Child {
    spawn_baresip_with(dir, commands, false)
}

/// [`spawn_baresip`], with its SIP trace (every message in its log) when `trace`.
fn spawn_baresip_with(
    dir: &tempfile::TempDir,
    commands: &[String],
    trace: bool,
) -> tokio::process::Child {
    let mut cmd = Command::new("baresip");
    cmd.arg("-f").arg(dir.path()).args(["-t", "25"]);
    if trace {
        cmd.arg("-s");
    }
    for c in commands {
        cmd.arg("-e").arg(c);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd.spawn().expect("spawn baresip")
}

async fn output_of(mut child: tokio::process::Child) -> String {
    let _ = child.start_kill();
    match tokio::time::timeout(T, child.wait_with_output()).await {
        Ok(Ok(out)) => {
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr)
        }
        _ => String::new(),
    }
}

async fn tls_stack(
    certs: &Path,
    trunks: Vec<TrunkConfig>,
    known: &'static [&'static str],
) -> SipStack {
    init_tracing();
    let config = SipConfig {
        udp: Some("127.0.0.1:0".parse().unwrap()),
        tcp: None,
        tls: Some(SipTlsConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            cert_file: certs.join("node.crt"),
            key_file: certs.join("node.key"),
            ca_file: certs.join("ca.pem"),
            require_client_cert: false,
            allowed_names: Vec::new(),
        }),
        default_trunk: trunks.first().map(|t| t.name.clone()),
        trunks,
        ..Default::default()
    };
    SipStack::start(config, move |_: &str, called: &str| known.contains(&called))
        .await
        .expect("stack starts")
}

/// Points the session at the negotiated media with its SRTP keys, as the engine does.
fn point(session: &MediaSession, m: &NegotiatedMedia) {
    let keys = m.srtp.expect("SRTP was agreed");
    let params = SrtpParams {
        profile: match keys.suite {
            CryptoSuite::AesCm128HmacSha1_80 => SrtpProfile::Aes128CmHmacSha1_80,
            CryptoSuite::AesCm128HmacSha1_32 => SrtpProfile::Aes128CmHmacSha1_32,
        },
        send_key: keys.local.0,
        recv_key: keys.remote.0,
    };
    session.set_srtp(Some(&params)).unwrap();
    session
        .set_remote(
            m.remote_rtp,
            callsmith_media::g711::Codec::Pcmu,
            m.telephone_event,
        )
        .unwrap();
}

/// Media flows both ways for a while: baresip's packets are authenticated (only what
/// arrived while the session waited for the keys is dropped, a packet or two), and
/// baresip decrypts ours (checked in its log by the callers).
async fn assert_srtp_flows(session: &MediaSession) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = session.stats().await.unwrap();
    assert!(start.srtp_dropped <= 10, "{start:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let stats = session.stats().await.unwrap();
    assert!(
        stats.packets_received >= start.packets_received + 80,
        "baresip's SRTP keeps arriving, authenticated: {stats:?}"
    );
    assert_eq!(
        stats.srtp_dropped, start.srtp_dropped,
        "none dropped: {stats:?}"
    );
    assert!(stats.packets_sent > 100, "{stats:?}");
}

fn local(session: &MediaSession) -> LocalMedia {
    LocalMedia {
        codecs: vec![callsmith_sip::SdpCodec::Pcmu],
        ..LocalMedia::g711("127.0.0.1".parse().unwrap(), session.local_port())
    }
}

#[tokio::test]
async fn baresip_calls_in_over_tls_with_srtp() {
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let mut trunk = TrunkConfig::new("phone", "127.0.0.1:5999".parse().unwrap());
    trunk.srtp = SrtpPolicy::Required;
    let stack = tls_stack(certs.path(), vec![trunk], &["15550100"]).await;
    let target = stack.tls_addr().unwrap();
    let mut calls = stack.take_incoming().unwrap();
    let engine = MediaEngine::new(MediaConfig::default()).unwrap();
    let session = engine.open_session(None).unwrap();
    // As the engine does for an offer with keys: nothing leaves before them.
    session.await_srtp().unwrap();

    let mut attempt = 0;
    let (baresip, _dir, call) = loop {
        attempt += 1;
        let dir = baresip_dir(certs.path(), free_udp_port("127.0.0.1"), SRTP);
        let baresip = spawn_baresip(
            &dir,
            &[format!("/dial sip:15550100@{target};transport=tls")],
        );
        match tokio::time::timeout(Duration::from_secs(10), calls.recv()).await {
            Ok(Some(call)) => break (baresip, dir, call),
            _ if attempt < 3 => {
                eprintln!("baresip attempt {attempt}: {}", output_of(baresip).await)
            }
            _ => panic!("baresip never called: {}", output_of(baresip).await),
        }
    };
    assert!(
        call.remote_media.srtp.is_some(),
        "baresip offered SDES keys"
    );
    let mut leg = call.answer(local(&session)).await.expect("answer");
    let media = match leg.next_event().await {
        Some(LegEvent::Answered(m)) => m,
        other => panic!("expected Answered, got {other:?}"),
    };
    point(&session, &media);
    assert_srtp_flows(&session).await;
    leg.hangup();
    ended(&events_until_end(&mut leg, T).await).expect("ended");
    let log = output_of(baresip).await;
    assert!(log.contains("Call established"), "{log}");
    assert!(
        !log.contains("failed to decrypt"),
        "baresip read our SRTP: {log}"
    );
}

#[tokio::test]
async fn the_engine_calls_baresip_over_tls_with_srtp() {
    calls_baresip(false).await;
}

/// The trunk's gateway written as a `sips:` URI: the INVITE's Request-URI and Contact are
/// `sips:` (no `transport=tls`), and the phone takes the call over TLS with SRTP.
#[tokio::test]
async fn the_engine_calls_baresip_at_a_sips_gateway() {
    let log = calls_baresip(true).await;
    let invite = log
        .lines()
        .find(|l| l.starts_with("INVITE "))
        .unwrap_or_else(|| panic!("no INVITE in the trace: {log}"));
    assert!(
        invite.starts_with("INVITE sips:tester@127.0.0.1:"),
        "{invite}"
    );
    assert!(!invite.contains("transport="), "{invite}");
}

/// Calls baresip (auto-answer, SRTP mandatory) through a TLS trunk whose gateway is
/// `IP:port`, or `sips:IP:port` with `sips`; returns baresip's log.
async fn calls_baresip(sips: bool) -> String {
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let mut attempt = 0;
    let (baresip, _dir, port) = loop {
        attempt += 1;
        let port = free_udp_port("127.0.0.1");
        let dir = baresip_dir(certs.path(), port, &format!("{SRTP};answermode=auto"));
        let mut child = spawn_baresip_with(&dir, &[], sips);
        tokio::time::sleep(Duration::from_millis(800)).await;
        match child.try_wait() {
            Ok(None) => break (child, dir, port),
            _ if attempt < 3 => continue,
            _ => panic!("baresip does not start"),
        }
    };
    // libre listens for TLS one port above the SIP port.
    let scheme = if sips { "sips:" } else { "" };
    let mut trunk = TrunkConfig::new("phone", "127.0.0.1:1".parse().unwrap());
    trunk.gateway = format!("{scheme}127.0.0.1:{}", port + 1).parse().unwrap();
    trunk.transport = SipTransport::Tls;
    trunk.srtp = SrtpPolicy::Required;
    trunk.number_format = NumberFormat::AsIs;
    let stack = tls_stack(certs.path(), vec![trunk], &[]).await;
    let engine = MediaEngine::new(MediaConfig::default()).unwrap();
    let session = engine.open_session(None).unwrap();
    // As the engine does on a trunk with SRTP: baresip starts sending on its 200 OK, and
    // a latch on that would start our stream before the keys are set.
    assert_eq!(stack.srtp_policy(Some("phone")), SrtpPolicy::Required);
    session.await_srtp().unwrap();
    let mut leg = stack
        .place_call(OutboundCall {
            trunk: Some("phone".into()),
            from_number: "+15550001".into(),
            from_display: None,
            to_number: "tester".into(),
            headers: Vec::new(),
            local_media: local(&session),
            ring_timeout: T,
        })
        .await
        .expect("invite sent");
    let media = loop {
        match tokio::time::timeout(T, leg.next_event()).await {
            Ok(Some(LegEvent::Answered(m))) => break m,
            Ok(Some(LegEvent::Ended(e))) => {
                panic!("ended before answer: {e:?}\n{}", output_of(baresip).await)
            }
            Ok(Some(_)) => {}
            _ => panic!("no answer: {}", output_of(baresip).await),
        }
    };
    point(&session, &media);
    assert_srtp_flows(&session).await;
    leg.hangup();
    ended(&events_until_end(&mut leg, T).await).expect("ended");
    let log = output_of(baresip).await;
    assert!(
        log.contains("Call established") || log.contains("answered"),
        "{log}"
    );
    assert!(
        !log.contains("failed to decrypt"),
        "baresip read our SRTP: {log}"
    );
    log
}

#[tokio::test]
async fn baresip_offering_plain_rtp_to_a_required_trunk_gets_488() {
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let mut trunk = TrunkConfig::new("phone", "127.0.0.1:5999".parse().unwrap());
    trunk.srtp = SrtpPolicy::Required;
    let stack = tls_stack(certs.path(), vec![trunk], &["15550100"]).await;
    let target = stack.tls_addr().unwrap();
    let mut calls = stack.take_incoming().unwrap();
    let mut attempt = 0;
    let log = loop {
        attempt += 1;
        let dir = baresip_dir(certs.path(), free_udp_port("127.0.0.1"), "");
        let baresip = spawn_baresip(
            &dir,
            &[format!("/dial sip:15550100@{target};transport=tls")],
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        let log = output_of(baresip).await;
        if log.contains("488") || attempt == 3 {
            break log;
        }
    };
    assert!(log.contains("488 Not Acceptable Here"), "{log}");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), calls.recv())
            .await
            .is_err(),
        "the engine never hears of the call"
    );
}

/// The next leg event within `T`, passing over none.
async fn next_leg_event(leg: &mut callsmith_sip::CallLeg) -> LegEvent {
    tokio::time::timeout(T, leg.next_event())
        .await
        .expect("a leg event in time")
        .expect("the leg is open")
}

/// The re-INVITE's event (`want` names it), re-keying the session as the engine does when
/// the leg reports new keys after it. Returns whether the leg reported new keys.
async fn reinvite_handled(
    leg: &mut callsmith_sip::CallLeg,
    session: &MediaSession,
    want: fn(&LegEvent) -> bool,
) -> bool {
    let ev = next_leg_event(leg).await;
    assert!(want(&ev), "{ev:?}");
    match tokio::time::timeout(Duration::from_millis(300), leg.next_event()).await {
        Ok(Some(LegEvent::SrtpRekeyed(keys))) => {
            let params = SrtpParams {
                profile: match keys.suite {
                    CryptoSuite::AesCm128HmacSha1_80 => SrtpProfile::Aes128CmHmacSha1_80,
                    CryptoSuite::AesCm128HmacSha1_32 => SrtpProfile::Aes128CmHmacSha1_32,
                },
                send_key: keys.local.0,
                recv_key: keys.remote.0,
            };
            session.set_srtp(Some(&params)).unwrap();
            true
        }
        Ok(other) => panic!("after the re-INVITE: {other:?}"),
        Err(_) => false,
    }
}

/// A real phone calls over TLS with SRTP, then holds and resumes the call (two re-INVITEs
/// carrying its SDES key again): both are answered, the leg reports no re-key (the same
/// key keeps our contexts, counters and replay window), nothing is dropped, and baresip
/// still decrypts our audio after the resume.
#[tokio::test]
async fn baresip_holds_and_resumes_an_srtp_call() {
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let mut trunk = TrunkConfig::new("phone", "127.0.0.1:5999".parse().unwrap());
    trunk.srtp = SrtpPolicy::Required;
    let stack = tls_stack(certs.path(), vec![trunk], &["15550100"]).await;
    let target = stack.tls_addr().unwrap();
    let mut calls = stack.take_incoming().unwrap();
    let engine = MediaEngine::new(MediaConfig::default()).unwrap();
    let session = engine.open_session(None).unwrap();
    session.await_srtp().unwrap();

    let console = free_udp_port("127.0.0.1");
    let mut attempt = 0;
    let (baresip, _dir, call) = loop {
        attempt += 1;
        let dir = baresip_dir(certs.path(), free_udp_port("127.0.0.1"), SRTP);
        let config = dir.path().join("config");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "module cons.so\ncons_listen 127.0.0.1:{console}\n"
        ));
        std::fs::write(&config, text).unwrap();
        // baresip 1.0's /dial makes every target a sip: URI (a written `sips:` becomes a
        // user part), so the call is sip: over TLS; sips: is tested stack to stack.
        let baresip = spawn_baresip(
            &dir,
            &[format!("/dial sip:15550100@{target};transport=tls")],
        );
        match tokio::time::timeout(Duration::from_secs(10), calls.recv()).await {
            Ok(Some(call)) => break (baresip, dir, call),
            _ if attempt < 3 => {
                eprintln!("baresip attempt {attempt}: {}", output_of(baresip).await)
            }
            _ => panic!("baresip never called: {}", output_of(baresip).await),
        }
    };
    let mut leg = call.answer(local(&session)).await.expect("answer");
    let media = match next_leg_event(&mut leg).await {
        LegEvent::Answered(m) => m,
        other => panic!("expected Answered, got {other:?}"),
    };
    point(&session, &media);
    assert_srtp_flows(&session).await;

    let cons = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let before = session.stats().await.unwrap();
    cons.send_to(b"/hold\n", ("127.0.0.1", console))
        .await
        .unwrap();
    let held_rekeyed =
        reinvite_handled(&mut leg, &session, |e| matches!(e, LegEvent::Hold(_))).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    cons.send_to(b"/resume\n", ("127.0.0.1", console))
        .await
        .unwrap();
    let resumed_rekeyed =
        reinvite_handled(&mut leg, &session, |e| matches!(e, LegEvent::Unhold(_))).await;
    // baresip's aubridge source stays stopped after a resume (its log shows tx 0), so
    // what is checked after it is our side: still protected, still read by baresip.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let stats = session.stats().await.unwrap();
    assert!(
        !held_rekeyed && !resumed_rekeyed,
        "baresip keeps its key: no re-key, our contexts stay"
    );
    assert_eq!(
        stats.srtp_dropped, before.srtp_dropped,
        "nothing dropped across the re-INVITEs: {stats:?}"
    );
    assert!(stats.packets_sent > before.packets_sent + 100, "{stats:?}");
    leg.hangup();
    ended(&events_until_end(&mut leg, T).await).expect("ended");
    let log = output_of(baresip).await;
    assert!(
        log.contains("Call established") && log.contains("call: resume"),
        "{log}"
    );
    assert!(!log.contains("failed to decrypt"), "{log}");
    // baresip's last status line (`audio=<tx>/<rx> (bit/s)`): it still receives and
    // decrypts our audio after the resume.
    let rx: u64 = log
        .rsplit("audio=")
        .next()
        .and_then(|l| l.split(['/', ' ']).nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(rx > 0, "baresip hears us after the resume: {log}");
}
