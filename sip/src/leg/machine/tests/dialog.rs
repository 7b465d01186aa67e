//! The established dialog and the inbound side: answer, session timers, hold, DTMF and
//! the end.

use super::*;

#[test]
fn session_timer_refreshes_at_half_the_interval_when_we_refresh() {
    let t0 = Instant::now();
    let mut m = outbound(t0);
    // As the UAC, refresher=uac is us.
    m.handle_event(ok_200(Some("90;refresher=uac")), t0);
    assert!(is_answered(&drain(&mut m)[0]));
    assert_eq!(m.poll_timeout(), Some(t0 + secs(45)));
    m.handle_timeout(t0 + secs(45));
    assert_eq!(
        drain(&mut m),
        [Action::Refresh {
            session_expires: "90;refresher=uac".into()
        }]
    );
    assert_eq!(m.poll_timeout(), Some(t0 + secs(90)));
    m.handle_timeout(t0 + secs(90));
    assert_eq!(drain(&mut m).len(), 1);
    assert!(!m.is_ended());
}

#[test]
fn session_timer_expiry_sends_bye_when_the_peer_stops_refreshing() {
    let t0 = Instant::now();
    let mut m = outbound(t0);
    m.handle_event(ok_200(Some("90;refresher=uas")), t0);
    drain(&mut m);
    // 90 s minus min(32 s, 90/3 s).
    let expiry = t0 + secs(60);
    assert_eq!(m.poll_timeout(), Some(expiry));

    // The peer refreshes at 40 s: the expiry moves.
    let refresh = UpdateRequest {
        invite: false,
        session_expires: Some("90;refresher=uas".into()),
        supports_timer: true,
        sdp: String::new(),
    };
    m.handle_event(Input::Request(PeerRequest::Update(refresh)), t0 + secs(40));
    assert_eq!(
        drain(&mut m),
        [Action::Respond(Reply {
            code: 200,
            session_expires: Some("90;refresher=uas".into()),
            require_timer: true,
            sdp: None
        })]
    );
    let expiry = t0 + secs(100);
    assert_eq!(m.poll_timeout(), Some(expiry));
    m.handle_timeout(expiry - Duration::from_millis(1));
    assert!(drain(&mut m).is_empty());

    m.handle_timeout(expiry);
    assert_eq!(
        drain(&mut m),
        [
            Action::Bye,
            ended(
                CallStatus::Answered,
                None,
                "session timer expired",
                Party::Local
            )
        ]
    );
}

#[test]
fn local_hangup_sends_bye_and_ends_by_us() {
    let t0 = Instant::now();
    let mut m = answered_call(t0);
    m.handle_event(Input::Hangup, t0 + secs(10));
    assert_eq!(
        drain(&mut m),
        [
            Action::Bye,
            ended(CallStatus::Answered, None, "hangup", Party::Local)
        ]
    );
    assert!(m.is_ended());
    // Nothing after the end.
    m.handle_event(Input::Terminated(Termination::Bye), t0 + secs(10));
    assert!(drain(&mut m).is_empty());
}

#[test]
fn remote_bye_ends_by_the_peer() {
    let t0 = Instant::now();
    let mut m = answered_call(t0);
    m.handle_event(Input::Terminated(Termination::Bye), t0 + secs(10));
    assert_eq!(
        drain(&mut m),
        [ended(CallStatus::Answered, None, "BYE", Party::Remote)]
    );
}

fn inbound(t0: Instant, session_timer: Option<SessionTimer>) -> LegMachine {
    LegMachine::new(
        LegSetup {
            session_timer,
            ..setup(LegDirection::Inbound)
        },
        t0,
    )
}

#[test]
fn inbound_answer_accepts_then_reports_and_arms_the_session_timer() {
    let t0 = Instant::now();
    let st = SessionTimer::from_header("1800;refresher=uac", true);
    let mut m = inbound(t0, st);
    assert_eq!(m.poll_timeout(), None, "no ring timeout inbound");
    m.handle_event(Input::Ring, t0);
    assert_eq!(drain(&mut m), [Action::Ringing]);
    let local = LocalMedia::g711(LOOPBACK, 40000);
    m.handle_event(
        Input::Answer {
            local,
            offer: sdp("sendrecv"),
            supports_timer: true,
        },
        t0 + secs(1),
    );
    let reply = match drain(&mut m).as_slice() {
        [Action::Accept(reply)] => reply.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(reply.code, 200);
    assert_eq!(reply.session_expires.as_deref(), Some("1800;refresher=uac"));
    assert!(reply.require_timer);
    assert!(reply.sdp.unwrap().contains("o=callsmith 7 2 IN IP4"));
    m.handle_event(Input::Accepted(Ok(())), t0 + secs(1));
    let actions = drain(&mut m);
    assert!(is_answered(&actions[0]), "{actions:?}");
    assert!(matches!(actions[1], Action::AnswerResult(Ok(_))));
    // The peer refreshes: we BYE at 1800 - 32 s without one.
    assert_eq!(m.poll_timeout(), Some(t0 + secs(1 + 1800 - 32)));
}

#[test]
fn inbound_answer_with_no_common_codec_rejects_488() {
    let t0 = Instant::now();
    let mut m = inbound(t0, None);
    let offer = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
                 m=audio 6000 RTP/AVP 18\r\na=rtpmap:18 G729/8000\r\n";
    m.handle_event(
        Input::Answer {
            local: LocalMedia::g711(LOOPBACK, 40000),
            offer: offer.into(),
            supports_timer: false,
        },
        t0,
    );
    let actions = drain(&mut m);
    assert_eq!(
        actions[0],
        Action::Reject {
            code: 488,
            reason: None
        }
    );
    assert!(matches!(actions[1], Action::AnswerResult(Err(_))));
    assert!(!m.is_ended(), "the dialog reports the end");
}

#[test]
fn inbound_hangup_before_answer_is_480_and_caller_cancel_is_canceled() {
    let t0 = Instant::now();
    let mut m = inbound(t0, None);
    m.handle_event(Input::Hangup, t0);
    assert_eq!(
        drain(&mut m),
        [
            Action::Reject {
                code: 480,
                reason: None
            },
            ended(
                CallStatus::Canceled,
                Some(480),
                "hangup before answer",
                Party::Local
            )
        ]
    );
    let mut m = inbound(t0, None);
    m.handle_event(Input::Terminated(Termination::CallerCanceled), t0);
    assert_eq!(
        drain(&mut m),
        [ended(
            CallStatus::Canceled,
            Some(487),
            "caller canceled",
            Party::Remote
        )]
    );
}

#[test]
fn reinvite_hold_unhold_and_info_dtmf() {
    let t0 = Instant::now();
    let mut m = answered_call(t0);
    let update = |dir: &str| {
        Input::Request(PeerRequest::Update(UpdateRequest {
            invite: true,
            session_expires: None,
            supports_timer: false,
            sdp: sdp(dir),
        }))
    };
    m.handle_event(update("sendonly"), t0 + secs(1));
    let actions = drain(&mut m);
    assert!(
        matches!(&actions[0], Action::Respond(r) if r.code == 200 && r.sdp.as_ref().is_some_and(|s| s.contains("a=recvonly"))),
        "{actions:?}"
    );
    assert!(matches!(actions[1], Action::Emit(LegEvent::Hold(_))));
    m.handle_event(update("sendrecv"), t0 + secs(2));
    assert!(matches!(
        drain(&mut m)[1],
        Action::Emit(LegEvent::Unhold(_))
    ));
    m.handle_event(update("sendrecv"), t0 + secs(3));
    assert!(matches!(
        drain(&mut m)[1],
        Action::Emit(LegEvent::MediaChanged(_))
    ));
    m.handle_event(
        Input::Request(PeerRequest::Info { dtmf: Some('5') }),
        t0 + secs(4),
    );
    assert_eq!(
        drain(&mut m),
        [
            Action::Emit(LegEvent::Dtmf('5')),
            Action::Respond(Reply::plain(200))
        ]
    );
    m.handle_event(Input::Request(PeerRequest::Refer), t0 + secs(5));
    assert_eq!(drain(&mut m), [Action::Respond(Reply::plain(603))]);
}

#[test]
fn a_dropped_controller_ends_the_call_through_the_dialog() {
    let t0 = Instant::now();
    let mut m = answered_call(t0);
    m.handle_event(Input::ControllerGone, t0);
    assert_eq!(drain(&mut m), [Action::Bye]);
    assert!(!m.is_ended());
    m.handle_event(Input::Terminated(Termination::Bye), t0);
    assert_eq!(
        drain(&mut m),
        [ended(CallStatus::Answered, None, "BYE", Party::Remote)]
    );

    let mut m = outbound(t0);
    m.handle_event(Input::ControllerGone, t0);
    assert_eq!(drain(&mut m), [Action::Cancel { wait: true }]);
}

/// A re-INVITE's SRTP (RFC 4568 §7.1.4): the same key changes nothing, a new key from
/// the peer is answered with a fresh key of ours and reported for the media, and an offer
/// without crypto is answered 488 with the call keeping its keys.
#[test]
fn a_reinvite_with_new_keys_rekeys_and_one_without_crypto_gets_488() {
    use crate::sdes::{CryptoAttribute, LocalSrtp, SrtpPolicy};
    const KEY1: &str = "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz";
    const KEY2: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd";
    let with_key = |key: &str| {
        format!(
            "{}a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{key}\r\n",
            sdp("sendrecv").replace("RTP/AVP", "RTP/SAVP")
        )
    };
    let our_key = |reply: &Reply| {
        let body = reply.sdp.as_deref().expect("an answer");
        let line = body.lines().find_map(|l| l.strip_prefix("a=crypto:"));
        CryptoAttribute::parse(line.expect("a=crypto in the answer"))
            .unwrap()
            .key
    };
    for policy in [SrtpPolicy::Optional, SrtpPolicy::Required] {
        let t0 = Instant::now();
        let mut m = inbound(t0, None);
        let local = LocalMedia {
            srtp: LocalSrtp::for_policy(policy),
            ..LocalMedia::g711(LOOPBACK, 40000)
        };
        let first_key = local.srtp.unwrap().key;
        m.handle_event(
            Input::Answer {
                local,
                offer: with_key(KEY1),
                supports_timer: false,
            },
            t0,
        );
        assert!(matches!(drain(&mut m).as_slice(), [Action::Accept(r)] if our_key(r) == first_key));
        m.handle_event(Input::Accepted(Ok(())), t0);
        drain(&mut m);
        let reinvite = |sdp: String| {
            Input::Request(PeerRequest::Update(UpdateRequest {
                invite: true,
                session_expires: None,
                supports_timer: false,
                sdp,
            }))
        };

        m.handle_event(reinvite(with_key(KEY1)), t0 + secs(1));
        let actions = drain(&mut m);
        assert!(
            matches!(&actions[..], [Action::Respond(r), Action::Emit(LegEvent::MediaChanged(_))] if r.code == 200 && our_key(r) == first_key),
            "the same key: {actions:?}"
        );

        m.handle_event(reinvite(with_key(KEY2)), t0 + secs(2));
        let actions = drain(&mut m);
        let [
            Action::Respond(r),
            Action::Emit(LegEvent::MediaChanged(_)),
            Action::Emit(LegEvent::SrtpRekeyed(keys)),
        ] = &actions[..]
        else {
            panic!("a new key: {actions:?}");
        };
        assert_eq!(r.code, 200);
        let second_key = our_key(r);
        assert_ne!(second_key, first_key, "a fresh key of ours");
        assert_eq!(keys.local, second_key);
        assert_eq!(
            keys.remote,
            CryptoAttribute::parse(&format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY2}"))
                .unwrap()
                .key
        );

        // No crypto: 488, whatever the policy, and the keys stay.
        m.handle_event(reinvite(sdp("sendrecv")), t0 + secs(3));
        assert_eq!(
            drain(&mut m),
            [Action::Respond(Reply::plain(488))],
            "{policy:?}"
        );
        m.handle_event(reinvite(with_key(KEY2)), t0 + secs(4));
        let actions = drain(&mut m);
        assert!(
            matches!(&actions[..], [Action::Respond(r), Action::Emit(LegEvent::MediaChanged(_))] if our_key(r) == second_key),
            "the keys after the 488: {actions:?}"
        );
    }
}
