//! Inbound legs (SIPp as the caller, the stack as UAS) over loopback UDP.

mod common;

use std::time::Duration;

use callsmith_sip::{CallStatus, LegEvent, Party, SdpCodec, TrunkConfig};
use common::*;

const T: Duration = Duration::from_secs(30);

fn trunk_for_loopback() -> TrunkConfig {
    // Gateway address only matters for its IP here: 127.0.0.1 is the allowed source.
    TrunkConfig::new("carrier", "127.0.0.1:5999".parse().unwrap())
}

#[tokio::test]
async fn inbound_answered_then_caller_hangs_up() {
    let stack = start_stack(vec![trunk_for_loopback()], &["15550100"]).await;
    let mut calls = stack.take_incoming().unwrap();
    let mut sipp = Sipp::start(
        "uac_answered_caller_bye.xml",
        "127.0.0.1",
        stack.udp_addr(),
        &["-s", "15550100"],
    )
    .await;

    let call = tokio::time::timeout(T, calls.recv())
        .await
        .expect("call arrives")
        .expect("stream open");
    assert_eq!(call.trunk, "carrier");
    assert_eq!(call.from, "+15550001");
    assert_eq!(call.to, "15550100");
    assert_eq!(call.from_display.as_deref(), Some("Alice"));
    assert!(
        call.headers
            .iter()
            .any(|(n, v)| n == "X-Test-Header" && v == "inbound-42"),
        "{:?}",
        call.headers
    );
    assert_eq!(
        call.remote_media.codec,
        SdpCodec::Pcma,
        "offerer's first codec wins"
    );
    call.ring();
    let mut leg = call.answer(media()).await.expect("answer");
    let events = events_until_end(&mut leg, T).await;
    assert!(
        matches!(events.first(), Some(LegEvent::Answered(m)) if m.codec == SdpCodec::Pcma && m.telephone_event == Some(101)),
        "{events:?}"
    );
    let end = ended(&events).expect("ended");
    assert_eq!(end.call_status, CallStatus::Answered);
    assert_eq!(end.by, Party::Remote);
    assert!(
        sipp.success(T).await,
        "SIPp saw 200 with PCMA answer and a 200 to its BYE"
    );
}

#[tokio::test]
async fn inbound_answered_then_engine_hangs_up() {
    let stack = start_stack(vec![trunk_for_loopback()], &["15550100"]).await;
    let mut calls = stack.take_incoming().unwrap();
    let mut sipp = Sipp::start(
        "uac_answered_engine_bye.xml",
        "127.0.0.1",
        stack.udp_addr(),
        &["-s", "15550100"],
    )
    .await;
    let call = tokio::time::timeout(T, calls.recv())
        .await
        .unwrap()
        .unwrap();
    let mut leg = call.answer(media()).await.expect("answer");
    assert!(matches!(
        leg.next_event().await,
        Some(LegEvent::Answered(_))
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    leg.hangup();
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(
        (end.call_status, end.by),
        (CallStatus::Answered, Party::Local)
    );
    assert!(
        sipp.success(T).await,
        "SIPp saw its Record-Route echoed and our BYE carried the Route"
    );
}

#[tokio::test]
async fn inbound_cancel_before_answer_gets_487() {
    let stack = start_stack(vec![trunk_for_loopback()], &["15550100"]).await;
    let mut calls = stack.take_incoming().unwrap();
    let mut sipp = Sipp::start(
        "uac_cancel.xml",
        "127.0.0.1",
        stack.udp_addr(),
        &["-s", "15550100"],
    )
    .await;
    let mut call = tokio::time::timeout(T, calls.recv())
        .await
        .unwrap()
        .unwrap();
    call.ring();
    let ev = tokio::time::timeout(T, call.next_event())
        .await
        .expect("event")
        .expect("some");
    match ev {
        LegEvent::Ended(end) => {
            assert_eq!(end.call_status, CallStatus::Canceled);
            assert_eq!(end.sip_code, Some(487));
            assert_eq!(end.by, Party::Remote);
        }
        other => panic!("expected Ended, got {other:?}"),
    }
    assert!(sipp.success(T).await, "SIPp got 200 to CANCEL and 487");
}

#[tokio::test]
async fn options_gets_200() {
    let stack = start_stack(vec![trunk_for_loopback()], &[]).await;
    let mut sipp = Sipp::start("uac_options.xml", "127.0.0.1", stack.udp_addr(), &[]).await;
    assert!(sipp.success(T).await);
}

#[tokio::test]
async fn invite_from_unknown_source_gets_403_and_no_call() {
    let stack = start_stack(vec![trunk_for_loopback()], &["15550100"]).await;
    let mut calls = stack.take_incoming().unwrap();
    // 127.0.0.2 is loopback but not an address of the trunk.
    let mut sipp = Sipp::start(
        "uac_expect_403.xml",
        "127.0.0.2",
        stack.udp_addr(),
        &["-s", "15550100"],
    )
    .await;
    assert!(sipp.success(T).await, "SIPp got 403");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), calls.recv())
            .await
            .is_err(),
        "no call reached the engine"
    );
}

#[tokio::test]
async fn unknown_number_gets_404() {
    let stack = start_stack(vec![trunk_for_loopback()], &["15550100"]).await;
    let mut calls = stack.take_incoming().unwrap();
    let mut sipp = Sipp::start(
        "uac_expect_404.xml",
        "127.0.0.1",
        stack.udp_addr(),
        &["-s", "19990000"],
    )
    .await;
    assert!(sipp.success(T).await, "SIPp got 404");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), calls.recv())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn no_common_codec_gets_488() {
    let stack = start_stack(vec![trunk_for_loopback()], &["15550100"]).await;
    let mut sipp = Sipp::start(
        "uac_expect_488.xml",
        "127.0.0.1",
        stack.udp_addr(),
        &["-s", "15550100"],
    )
    .await;
    assert!(sipp.success(T).await, "SIPp got 488");
}

#[tokio::test]
async fn hold_unhold_dtmf_info_and_session_timer() {
    let stack = start_stack(vec![trunk_for_loopback()], &["15550100"]).await;
    let mut calls = stack.take_incoming().unwrap();
    let mut sipp = Sipp::start(
        "uac_hold_timer.xml",
        "127.0.0.1",
        stack.udp_addr(),
        &["-s", "15550100"],
    )
    .await;
    let call = tokio::time::timeout(T, calls.recv())
        .await
        .unwrap()
        .unwrap();
    let mut leg = call.answer(media()).await.expect("answer");
    let events = events_until_end(&mut leg, T).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            LegEvent::Answered(_) => "answered",
            LegEvent::Hold(_) => "hold",
            LegEvent::Unhold(_) => "unhold",
            LegEvent::Dtmf('5') => "dtmf5",
            LegEvent::Ended(_) => "ended",
            _ => "other",
        })
        .collect();
    assert!(
        sipp.success(T).await,
        "SIPp saw Session-Expires echoed and recvonly/sendrecv answers"
    );
    assert_eq!(
        kinds,
        ["answered", "hold", "unhold", "dtmf5", "ended"],
        "{events:?}"
    );
}

#[tokio::test]
async fn inbound_over_tcp() {
    let stack = start_stack(vec![trunk_for_loopback()], &["15550100"]).await;
    let mut calls = stack.take_incoming().unwrap();
    let mut sipp = Sipp::start(
        "uac_answered_caller_bye.xml",
        "127.0.0.1",
        stack.tcp_addr(),
        &["-s", "15550100", "-t", "t1"],
    )
    .await;
    let call = tokio::time::timeout(T, calls.recv())
        .await
        .expect("call arrives over TCP")
        .unwrap();
    let mut leg = call.answer(media()).await.expect("answer");
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(
        (end.call_status, end.by),
        (CallStatus::Answered, Party::Remote)
    );
    assert!(sipp.success(T).await);
}

#[tokio::test]
async fn engine_refreshes_session_when_it_is_the_refresher() {
    let stack = start_stack_with(vec![trunk_for_loopback()], &["15550100"], |c| {
        c.timers.min_session_expires = 2;
    })
    .await;
    let mut calls = stack.take_incoming().unwrap();
    let mut sipp = Sipp::start(
        "uac_session_refresh.xml",
        "127.0.0.1",
        stack.udp_addr(),
        &["-s", "15550100"],
    )
    .await;
    let call = tokio::time::timeout(T, calls.recv())
        .await
        .unwrap()
        .unwrap();
    let mut leg = call.answer(media()).await.expect("answer");
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(
        (end.call_status, end.by),
        (CallStatus::Answered, Party::Remote)
    );
    assert!(
        sipp.success(T).await,
        "SIPp received an UPDATE with Session-Expires before the 4 s session expired"
    );
}

#[tokio::test]
async fn too_short_session_expires_gets_422() {
    let stack = start_stack(vec![trunk_for_loopback()], &["15550100"]).await;
    // Default Min-SE is 90 s; the scenario asks for 4 s.
    let mut sipp = Sipp::start(
        "uac_expect_422.xml",
        "127.0.0.1",
        stack.udp_addr(),
        &["-s", "15550100"],
    )
    .await;
    assert!(
        sipp.success(T).await,
        "SIPp got 422 Session Interval Too Small"
    );
}

/// A node at capacity refuses before any dialog exists: 503 with Retry-After (SIPp checks
/// both headers) and nothing reaches the engine.
#[tokio::test]
async fn busy_node_gets_503_with_retry_after() {
    struct Full;
    impl callsmith_sip::CallRouter for Full {
        fn admit(&self, _trunk: &str, _called: &str) -> callsmith_sip::Admission {
            callsmith_sip::Admission::Busy {
                retry_after_secs: 2,
                reason: "at capacity".into(),
            }
        }
    }
    init_tracing();
    let config = callsmith_sip::SipConfig {
        udp: Some("127.0.0.1:0".parse().expect("addr")),
        trunks: vec![trunk_for_loopback()],
        ..Default::default()
    };
    let stack = callsmith_sip::SipStack::start(config, Full)
        .await
        .expect("stack starts");
    let mut calls = stack.take_incoming().unwrap();
    let mut sipp = Sipp::start(
        "uac_expect_503.xml",
        "127.0.0.1",
        stack.udp_addr(),
        &["-s", "15550100"],
    )
    .await;
    assert!(sipp.success(T).await, "SIPp got 503 with Retry-After");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), calls.recv())
            .await
            .is_err(),
        "no call reached the engine"
    );
}
