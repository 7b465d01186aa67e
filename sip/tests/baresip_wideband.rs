//! G.722 and IPv6 with a real peer, baresip: a phone offering G.722 first gets it (and a
//! trunk without G.722 answers it in G.711); SIP and SDP over IPv6 loopback (baresip on
//! `[::1]`, a trunk whose gateway is `[::1]:port`, the stack on `[::1]`, `c=IN IP6`).

mod common;

use std::process::Stdio;
use std::time::Duration;

use callsmith_sip::{
    CallStatus, LegEvent, LocalMedia, NumberFormat, OutboundCall, SdpCodec, TrunkConfig,
};
use common::*;
use tokio::process::Command;

const T: Duration = Duration::from_secs(30);

/// baresip on `ip`:<free port> (no sound card) with `codecs`, running `commands`; its
/// media on `ip` too.
async fn baresip_on(
    ip: &str,
    codecs: &str,
    commands: &[String],
) -> (tokio::process::Child, tempfile::TempDir, u16) {
    let v6 = ip.contains(':');
    let host = if v6 {
        format!("[{ip}]")
    } else {
        ip.to_string()
    };
    for _ in 0..3 {
        let port = free_udp_port(ip);
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("config"),
            format!(
                "poll_method epoll\nsip_listen {host}:{port}\nnet_interface {ip}\nnet_prefer_ipv6 {}\n\
                 audio_player aubridge,ab1\naudio_source aubridge,ab1\naudio_alert aubridge,ab2\n\
                 module_path /usr/lib/baresip/modules\nmodule g722.so\nmodule g711.so\n\
                 module aubridge.so\nmodule_app account.so\nmodule_app menu.so\n",
                if v6 { "yes" } else { "no" }
            ),
        )
        .expect("config");
        std::fs::write(
            dir.path().join("accounts"),
            format!("<sip:tester@{host}:{port}>;regint=0;answermode=auto;audio_codecs={codecs}\n"),
        )
        .expect("accounts");
        let mut cmd = Command::new("baresip");
        cmd.arg("-f").arg(dir.path());
        for c in commands {
            cmd.arg("-e").arg(c);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn baresip");
        tokio::time::sleep(Duration::from_millis(800)).await;
        if let Ok(None) = child.try_wait() {
            return (child, dir, port);
        }
    }
    panic!("baresip does not start on {ip}");
}

#[tokio::test]
async fn the_stack_calls_baresip_over_ipv6_loopback_in_g722() {
    let (baresip, _dir, port) = baresip_on("::1", "G722/16000/1,PCMU", &[]).await;
    let mut t = TrunkConfig::new("v6", format!("[::1]:{port}").parse().unwrap());
    t.number_format = NumberFormat::AsIs;
    t.codecs = vec![SdpCodec::G722, SdpCodec::Pcmu];
    let stack = start_stack_with(vec![t], &[], |c| {
        c.udp = Some("[::1]:0".parse().unwrap());
        c.tcp = None;
    })
    .await;
    assert!(stack.udp_addr().unwrap().is_ipv6());
    let mut leg = stack
        .place_call(OutboundCall {
            trunk: Some("v6".into()),
            from_number: "+15550001".into(),
            from_display: None,
            to_number: "tester".into(),
            headers: vec![],
            local_media: LocalMedia::telephony("::1".parse().unwrap(), 40000),
            ring_timeout: T,
        })
        .await
        .expect("invite sent");
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
    assert_eq!((m.codec, m.payload_type), (SdpCodec::G722, 9));
    assert!(m.remote_rtp.ip().is_ipv6(), "c=IN IP6: {:?}", m.remote_rtp);
    assert!(m.remote_rtp.ip().is_loopback());
    tokio::time::sleep(Duration::from_millis(300)).await;
    leg.hangup();
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(end.call_status, CallStatus::Answered);
    drop(baresip);
}

/// baresip calls in offering G.722 first: a trunk with the default codecs answers G.722 on
/// payload type 9; a trunk listing only G.711 answers PCMU.
#[tokio::test]
async fn baresip_calling_in_with_g722_first_gets_it_where_the_trunk_has_it() {
    for (codecs, want) in [
        (None, SdpCodec::G722),
        (Some(vec![SdpCodec::Pcmu, SdpCodec::Pcma]), SdpCodec::Pcmu),
    ] {
        let mut trunk = TrunkConfig::new("carrier", "127.0.0.1:5999".parse().unwrap());
        trunk.inbound_sources = vec!["127.0.0.1".parse().unwrap()];
        if let Some(c) = codecs {
            trunk.codecs = c;
        }
        let stack = start_stack(vec![trunk], &["15550100"]).await;
        let mut calls = stack.take_incoming().unwrap();
        let target = stack.udp_addr().unwrap();
        let dial = [format!("/dial sip:15550100@{target}")];
        let mut got = None;
        for _ in 0..3 {
            let (baresip, dir, _) = baresip_on("127.0.0.1", "G722/16000/1,PCMU", &dial).await;
            if let Ok(Some(call)) =
                tokio::time::timeout(Duration::from_secs(10), calls.recv()).await
            {
                got = Some((call, baresip, dir));
                break;
            }
        }
        let (call, _baresip, _dir) = got.expect("baresip called");
        assert_eq!(call.remote_media.codec, want);
        let mut leg = call
            .answer(LocalMedia::telephony("127.0.0.1".parse().unwrap(), 40000))
            .await
            .expect("answer");
        match leg.next_event().await {
            Some(LegEvent::Answered(m)) => {
                assert_eq!(m.codec, want);
                assert_eq!(m.payload_type, want.payload_type());
            }
            other => panic!("expected Answered, got {other:?}"),
        }
        leg.hangup();
        let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
        assert_eq!(end.call_status, CallStatus::Answered);
    }
}
