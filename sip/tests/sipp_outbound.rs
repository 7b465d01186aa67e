//! Outbound legs (the stack as UAC, SIPp as the trunk's gateway) over loopback UDP.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use callsmith_sip::{
    CallStatus, DigestCredentials, LegEvent, OutboundCall, Party, ReferOutcome, SdpCodec, SipStack,
    TrunkConfig,
};
use common::*;

const T: Duration = Duration::from_secs(30);

fn trunk(name: &str, gateway: SocketAddr) -> TrunkConfig {
    TrunkConfig::new(name, gateway)
}

fn call(to: &str, ring_timeout: Duration) -> OutboundCall {
    OutboundCall {
        trunk: Some("gw".into()),
        from_number: "+15550001".into(),
        from_display: None,
        to_number: to.into(),
        headers: vec![("X-Transfer-Id".into(), "transfer-7".into())],
        local_media: media(),
        ring_timeout,
    }
}

async fn gateway(scenario: &str) -> (Sipp, SipStack) {
    let sipp = Sipp::start(scenario, "127.0.0.1", None, &[]).await;
    let stack = start_stack(vec![trunk("gw", sipp.addr)], &[]).await;
    (sipp, stack)
}

#[tokio::test]
async fn outbound_early_media_answer_and_engine_hangup() {
    let (mut sipp, stack) = gateway("uas_answer_wait_bye.xml").await;
    let mut leg = stack
        .place_call(call("+15550100", T))
        .await
        .expect("invite sent");
    let mut events = Vec::new();
    while let Some(ev) = tokio::time::timeout(T, leg.next_event())
        .await
        .expect("event in time")
    {
        let answered = matches!(ev, LegEvent::Answered(_));
        events.push(ev);
        if answered {
            break;
        }
    }
    assert!(events.contains(&LegEvent::Ringing), "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, LegEvent::EarlyMedia(m) if m.codec == SdpCodec::Pcmu)),
        "{events:?}"
    );
    match events.last() {
        Some(LegEvent::Answered(m)) => {
            assert_eq!(m.codec, SdpCodec::Pcmu);
            assert_eq!(m.remote_rtp.ip().to_string(), "127.0.0.1");
        }
        other => panic!("expected Answered, got {other:?}"),
    }
    leg.hangup();
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(
        (end.call_status, end.by),
        (CallStatus::Answered, Party::Local)
    );
    assert!(
        sipp.success(T).await,
        "SIPp checked caller id, custom header and offer, and got our BYE"
    );
}

#[tokio::test]
async fn outbound_remote_hangup() {
    let (mut sipp, stack) = gateway("uas_answer_then_bye.xml").await;
    let mut leg = stack.place_call(call("+15550100", T)).await.unwrap();
    let events = events_until_end(&mut leg, T).await;
    assert!(
        events.iter().any(|e| matches!(e, LegEvent::Answered(_))),
        "{events:?}"
    );
    let end = ended(&events).expect("ended");
    assert_eq!(
        (end.call_status, end.by),
        (CallStatus::Answered, Party::Remote)
    );
    assert!(sipp.success(T).await);
}

async fn rejected_with(scenario: &str) -> callsmith_sip::EndInfo {
    let (mut sipp, stack) = gateway(scenario).await;
    let mut leg = stack.place_call(call("+15550100", T)).await.unwrap();
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert!(
        sipp.success(T).await,
        "SIPp got the ACK for its final response"
    );
    end
}

#[tokio::test]
async fn busy_486_maps_to_busy() {
    let end = rejected_with("uas_reject_486.xml").await;
    assert_eq!(
        (end.call_status, end.sip_code, end.by),
        (CallStatus::Busy, Some(486), Party::Remote)
    );
    assert_eq!(end.reason, "Busy Here");
}

#[tokio::test]
async fn unavailable_480_maps_to_no_answer() {
    let end = rejected_with("uas_reject_480.xml").await;
    assert_eq!(
        (end.call_status, end.sip_code),
        (CallStatus::NoAnswer, Some(480))
    );
}

#[tokio::test]
async fn timeout_408_maps_to_no_answer() {
    let end = rejected_with("uas_reject_408.xml").await;
    assert_eq!(
        (end.call_status, end.sip_code),
        (CallStatus::NoAnswer, Some(408))
    );
}

#[tokio::test]
async fn decline_603_maps_to_rejected() {
    let end = rejected_with("uas_reject_603.xml").await;
    assert_eq!(
        (end.call_status, end.sip_code),
        (CallStatus::Rejected, Some(603))
    );
}

#[tokio::test]
async fn ring_timeout_sends_cancel_and_reports_no_answer() {
    let (mut sipp, stack) = gateway("uas_ring_forever.xml").await;
    let mut leg = stack
        .place_call(call("+15550100", Duration::from_secs(2)))
        .await
        .unwrap();
    let events = events_until_end(&mut leg, T).await;
    assert!(events.contains(&LegEvent::Ringing), "{events:?}");
    let end = ended(&events).expect("ended");
    assert_eq!(
        (end.call_status, end.sip_code, end.by),
        (CallStatus::NoAnswer, Some(487), Party::Local)
    );
    assert!(sipp.success(T).await, "SIPp received the CANCEL");
}

#[tokio::test]
async fn engine_hangup_while_ringing_is_canceled() {
    let (mut sipp, stack) = gateway("uas_ring_forever.xml").await;
    let mut leg = stack.place_call(call("+15550100", T)).await.unwrap();
    assert_eq!(
        tokio::time::timeout(T, leg.next_event()).await.unwrap(),
        Some(LegEvent::Ringing)
    );
    leg.hangup();
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(
        (end.call_status, end.sip_code),
        (CallStatus::Canceled, Some(487))
    );
    assert!(sipp.success(T).await);
}

fn with_credentials(mut t: TrunkConfig) -> TrunkConfig {
    t.credentials = Some(DigestCredentials {
        username: "alice".into(),
        password: "s3cret".into(),
        realm: None,
    });
    t
}

#[tokio::test]
async fn digest_md5_challenge_answered_and_verified_by_sipp() {
    let mut sipp = Sipp::start("uas_auth_md5.xml", "127.0.0.1", None, &[]).await;
    let stack = start_stack(vec![with_credentials(trunk("gw", sipp.addr))], &[]).await;
    let mut leg = stack.place_call(call("+15550100", T)).await.unwrap();
    let ev = tokio::time::timeout(T, leg.next_event()).await.unwrap();
    assert!(
        matches!(ev, Some(LegEvent::Answered(_))),
        "SIPp answers only a valid MD5 Authorization: {ev:?}"
    );
    leg.hangup();
    let _ = events_until_end(&mut leg, T).await;
    assert!(sipp.success(T).await);
    assert!(sipp.logs().contains("algorithm=MD5"), "{}", sipp.logs());
}

#[tokio::test]
async fn digest_sha256_challenge_answered_with_valid_response() {
    let mut sipp = Sipp::start("uas_auth_sha256.xml", "127.0.0.1", None, &[]).await;
    let stack = start_stack(vec![with_credentials(trunk("gw", sipp.addr))], &[]).await;
    let mut leg = stack.place_call(call("+15550100", T)).await.unwrap();
    let ev = tokio::time::timeout(T, leg.next_event()).await.unwrap();
    assert!(matches!(ev, Some(LegEvent::Answered(_))), "{ev:?}");
    leg.hangup();
    let _ = events_until_end(&mut leg, T).await;
    assert!(sipp.success(T).await);
    let logs = sipp.logs();
    let authz = logs
        .lines()
        .find_map(|l| l.split_once("AUTHZ ").map(|(_, v)| v.trim().to_string()))
        .expect("Authorization logged");
    assert!(authz.contains("SHA-256"), "{authz}");
    assert!(
        callsmith_sip::digest::verify_authorization(&authz, "INVITE", "s3cret"),
        "valid SHA-256 digest: {authz}"
    );
    assert!(!callsmith_sip::digest::verify_authorization(
        &authz, "INVITE", "wrong"
    ));
}

#[tokio::test]
async fn blind_transfer_by_refer_reports_success() {
    let (mut sipp, stack) = gateway("uas_refer.xml").await;
    let mut leg = stack.place_call(call("+15550100", T)).await.unwrap();
    assert!(matches!(
        tokio::time::timeout(T, leg.next_event()).await.unwrap(),
        Some(LegEvent::Answered(_))
    ));
    let outcome = leg
        .refer("+15550999", &[("X-Transfer-Id".into(), "blind-1".into())])
        .await;
    assert_eq!(outcome, ReferOutcome::Succeeded { sip_code: 200 });
    let mut progress = Vec::new();
    while let Ok(Some(LegEvent::TransferProgress { sip_code })) =
        tokio::time::timeout(Duration::from_millis(200), leg.next_event()).await
    {
        progress.push(sip_code);
    }
    assert_eq!(progress, [100, 200]);
    leg.hangup();
    let _ = events_until_end(&mut leg, T).await;
    assert!(
        sipp.success(T).await,
        "SIPp checked Refer-To and the custom header"
    );
}

#[tokio::test]
async fn bridged_transfer_places_second_leg_with_headers() {
    // First leg: an inbound call from SIPp A; second leg: the transfer target SIPp B.
    let mut target = Sipp::start("uas_answer_wait_bye.xml", "127.0.0.1", None, &[]).await;
    let mut trunks = vec![trunk("gw", target.addr)];
    trunks.push(TrunkConfig::new(
        "carrier",
        "127.0.0.1:5999".parse().unwrap(),
    ));
    let stack = start_stack(trunks, &["15550100"]).await;
    let mut calls = stack.take_incoming().unwrap();
    let mut caller = Sipp::start(
        "uac_answered_engine_bye.xml",
        "127.0.0.1",
        stack.udp_addr(),
        &["-s", "15550100"],
    )
    .await;
    let incoming = tokio::time::timeout(T, calls.recv())
        .await
        .unwrap()
        .unwrap();
    let mut first = incoming.answer(media()).await.unwrap();
    assert!(matches!(
        first.next_event().await,
        Some(LegEvent::Answered(_))
    ));

    // The call_transfer brick: place the second leg with the brick's sip_headers.
    let mut second = stack.place_call(call("+15550777", T)).await.unwrap();
    let mut answered = false;
    while let Some(ev) = tokio::time::timeout(T, second.next_event()).await.unwrap() {
        if matches!(ev, LegEvent::Answered(_)) {
            answered = true;
            break;
        }
    }
    assert!(answered, "transfer target answered");
    second.hangup();
    first.hangup();
    let _ = events_until_end(&mut second, T).await;
    let _ = events_until_end(&mut first, T).await;
    assert!(
        target.success(T).await,
        "target saw X-Transfer-Id and got BYE"
    );
    assert!(caller.success(T).await);
}

#[tokio::test]
async fn outbound_over_tcp() {
    let mut sipp = Sipp::start("uas_answer_then_bye.xml", "127.0.0.1", None, &["-t", "t1"]).await;
    let mut t = trunk("gw", sipp.addr);
    t.transport = callsmith_sip::SipTransport::Tcp;
    let stack = start_stack(vec![t], &[]).await;
    let mut leg = stack.place_call(call("+15550100", T)).await.unwrap();
    let events = events_until_end(&mut leg, T).await;
    assert!(
        events.iter().any(|e| matches!(e, LegEvent::Answered(_))),
        "{events:?}"
    );
    let end = ended(&events).expect("ended");
    assert_eq!(
        (end.call_status, end.by),
        (CallStatus::Answered, Party::Remote)
    );
    assert!(sipp.success(T).await);
}

#[tokio::test]
async fn proxy_digest_407_answered_with_valid_proxy_authorization() {
    let mut sipp = Sipp::start("uas_proxy_auth_md5.xml", "127.0.0.1", None, &[]).await;
    let stack = start_stack(vec![with_credentials(trunk("gw", sipp.addr))], &[]).await;
    let mut leg = stack.place_call(call("+15550100", T)).await.unwrap();
    let ev = tokio::time::timeout(T, leg.next_event()).await.unwrap();
    assert!(matches!(ev, Some(LegEvent::Answered(_))), "{ev:?}");
    leg.hangup();
    let _ = events_until_end(&mut leg, T).await;
    assert!(sipp.success(T).await);
    let logs = sipp.logs();
    let authz = logs
        .lines()
        .find_map(|l| l.split_once("AUTHZ ").map(|(_, v)| v.trim().to_string()))
        .expect("Proxy-Authorization logged");
    assert!(
        callsmith_sip::digest::verify_authorization(&authz, "INVITE", "s3cret"),
        "valid MD5 digest: {authz}"
    );
}

#[tokio::test]
async fn challenge_is_answered_only_once() {
    let mut sipp = Sipp::start("uas_auth_twice.xml", "127.0.0.1", None, &[]).await;
    let stack = start_stack(vec![with_credentials(trunk("gw", sipp.addr))], &[]).await;
    let mut leg = stack.place_call(call("+15550100", T)).await.unwrap();
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(
        (end.call_status, end.sip_code),
        (CallStatus::Rejected, Some(401)),
        "{end:?}"
    );
    assert!(sipp.success(T).await, "exactly two INVITEs, both ACKed");
}
