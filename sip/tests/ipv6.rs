//! SIP and SDP over IPv6 loopback with a real peer: baresip listening on `[::1]`, a trunk
//! whose gateway is `[::1]:port`, the stack listening on `[::1]`, SDP `c=IN IP6`.

mod common;

use std::process::Stdio;
use std::time::Duration;

use callsmith_sip::{
    CallStatus, LegEvent, LocalMedia, NumberFormat, OutboundCall, SdpCodec, TrunkConfig,
};
use common::*;
use tokio::process::Command;

const T: Duration = Duration::from_secs(30);

/// baresip auto-answering on `[::1]:<free port>` (no sound card), its media on `::1`.
async fn baresip_v6() -> (tokio::process::Child, tempfile::TempDir, u16) {
    for _ in 0..3 {
        let port = free_udp_port("::1");
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("config"),
            format!(
                "poll_method epoll\nsip_listen [::1]:{port}\nnet_interface ::1\nnet_prefer_ipv6 yes\n\
                 audio_player aubridge,ab1\naudio_source aubridge,ab1\naudio_alert aubridge,ab2\n\
                 module_path /usr/lib/baresip/modules\nmodule g711.so\nmodule g722.so\n\
                 module aubridge.so\nmodule_app account.so\nmodule_app menu.so\n"
            ),
        )
        .expect("config");
        std::fs::write(
            dir.path().join("accounts"),
            format!("<sip:tester@[::1]:{port}>;regint=0;answermode=auto;audio_codecs=PCMU\n"),
        )
        .expect("accounts");
        let mut child = Command::new("baresip")
            .arg("-f")
            .arg(dir.path())
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
    panic!("baresip does not start on [::1]");
}

#[tokio::test]
async fn the_stack_calls_baresip_over_ipv6_loopback() {
    let (baresip, _dir, port) = baresip_v6().await;
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
    assert_eq!(m.codec, SdpCodec::Pcmu);
    assert!(m.remote_rtp.ip().is_ipv6(), "c=IN IP6: {:?}", m.remote_rtp);
    assert!(m.remote_rtp.ip().is_loopback());
    tokio::time::sleep(Duration::from_millis(300)).await;
    leg.hangup();
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(end.call_status, CallStatus::Answered);
    drop(baresip);
}
