//! Interop with a real SIP user agent: baresip (headless, own config dir) over loopback UDP.

mod common;

use std::process::Stdio;
use std::time::Duration;

use callsmith_sip::{CallStatus, LegEvent, OutboundCall, Party, SdpCodec, TrunkConfig};
use common::*;
use tokio::process::Command;

const T: Duration = Duration::from_secs(30);

/// A baresip config dir: no sound card (aubridge loops the decoded audio back), G.711 only.
fn baresip_dir(port: u16, account_params: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "poll_method epoll\nsip_listen 127.0.0.1:{port}\naudio_player aubridge,ab1\naudio_source aubridge,ab1\naudio_alert aubridge,ab2\nmodule_path /usr/lib/baresip/modules\nmodule g711.so\nmodule aubridge.so\nmodule_app account.so\nmodule_app menu.so\n"
    );
    std::fs::write(dir.path().join("config"), config).expect("config");
    std::fs::write(
        dir.path().join("accounts"),
        format!("<sip:tester@127.0.0.1:{port}>;regint=0;audio_codecs=PCMU,PCMA{account_params}\n"),
    )
    .expect("accounts");
    dir
}

fn spawn_baresip(dir: &tempfile::TempDir, commands: &[String]) -> tokio::process::Child {
    let mut cmd = Command::new("baresip");
    cmd.arg("-f").arg(dir.path()).args(["-t", "25"]);
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

#[tokio::test]
async fn baresip_calls_the_engine_which_answers_and_hangs_up() {
    let stack = start_stack(
        vec![TrunkConfig::new(
            "carrier",
            "127.0.0.1:5999".parse().unwrap(),
        )],
        &["15550100"],
    )
    .await;
    let mut calls = stack.take_incoming().unwrap();
    let target = stack.udp_addr().unwrap();
    // baresip's port is probed free; under parallel tests it can be taken before baresip
    // binds it, so a baresip that sends nothing is restarted on a fresh port.
    let mut attempt = 0;
    let (baresip, _dir, call) = loop {
        attempt += 1;
        let dir = baresip_dir(free_udp_port("127.0.0.1"), "");
        let baresip = spawn_baresip(&dir, &[format!("/dial sip:15550100@{target}")]);
        match tokio::time::timeout(Duration::from_secs(10), calls.recv()).await {
            Ok(Some(call)) => break (baresip, dir, call),
            _ if attempt < 3 => {
                let log = output_of(baresip).await;
                eprintln!("baresip attempt {attempt} sent no INVITE: {log}");
            }
            _ => panic!("baresip never called: {}", output_of(baresip).await),
        }
    };
    assert_eq!(call.from, "tester");
    assert_eq!(call.to, "15550100");
    call.ring();
    let mut leg = call.answer(media()).await.expect("answer");
    match leg.next_event().await {
        Some(LegEvent::Answered(m)) => {
            assert_eq!(m.codec, SdpCodec::Pcmu, "baresip offered PCMU first")
        }
        other => panic!("expected Answered, got {other:?}"),
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    leg.hangup();
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(
        (end.call_status, end.by),
        (CallStatus::Answered, Party::Local)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = output_of(baresip).await;
    assert!(log.contains("Call established"), "{log}");
    assert!(
        log.contains("terminated") || log.contains("session closed"),
        "baresip saw our BYE: {log}"
    );
}

#[tokio::test]
async fn engine_calls_baresip_which_auto_answers() {
    // Restart on a fresh port if baresip exits at once (its probed port was taken).
    let mut attempt = 0;
    let (mut baresip, _dir, port) = loop {
        attempt += 1;
        let port = free_udp_port("127.0.0.1");
        let dir = baresip_dir(port, ";answermode=auto");
        let mut child = spawn_baresip(&dir, &[]);
        tokio::time::sleep(Duration::from_millis(800)).await;
        match child.try_wait() {
            Ok(None) => break (child, dir, port),
            _ if attempt < 3 => continue,
            _ => panic!("baresip does not start"),
        }
    };
    // baresip's user is a name, not a number: the trunk sends numbers as-is.
    let mut t = TrunkConfig::new("bs2", format!("127.0.0.1:{port}").parse().unwrap());
    t.number_format = callsmith_sip::NumberFormat::AsIs;
    let stack = start_stack(vec![t], &[]).await;
    let leg = stack
        .place_call(OutboundCall {
            trunk: Some("bs2".into()),
            from_number: "+15550001".into(),
            from_display: Some("callsmith".into()),
            to_number: "tester".into(),
            headers: vec![("X-Interop".into(), "baresip".into())],
            local_media: media(),
            ring_timeout: T,
        })
        .await
        .map_err(|e| e.to_string());
    let mut leg = leg.expect("invite sent");
    let mut answered = None;
    while let Some(ev) = tokio::time::timeout(T, leg.next_event())
        .await
        .expect("event in time")
    {
        match ev {
            LegEvent::Answered(m) => {
                answered = Some(m);
                break;
            }
            LegEvent::Ended(e) => panic!("ended before answer: {e:?}"),
            _ => {}
        }
    }
    let m = answered.expect("baresip answered");
    assert!(matches!(m.codec, SdpCodec::Pcmu | SdpCodec::Pcma));
    tokio::time::sleep(Duration::from_millis(500)).await;
    leg.hangup();
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(end.call_status, CallStatus::Answered);
    let _ = baresip.start_kill();
    let log = output_of(baresip).await;
    assert!(
        log.contains("Call established") || log.contains("answered"),
        "{log}"
    );
}
