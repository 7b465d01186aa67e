//! The leg machine on simulated time: each test feeds inputs at chosen instants and checks
//! the actions and the next deadline. No sockets, no runtime.

use std::time::{Duration, Instant};

use super::*;
use crate::leg::ReferOutcome;
use crate::leg::io::{FinalResponse, InviteOutcome, PeerRequest, Termination, UpdateRequest};
use crate::leg::refer::NOTIFY_ANSWER_GRACE;
use crate::sdp::LOOPBACK;
use crate::status::CallStatus;

const RING: Duration = Duration::from_secs(30);
const REFER_TIMEOUT: Duration = Duration::from_secs(32);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn sdp(direction: &str) -> String {
    format!(
        "v=0\r\no=peer 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
         m=audio 6000 RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\n\
         a=rtpmap:101 telephone-event/8000\r\na={direction}\r\n"
    )
}

fn setup(direction: LegDirection) -> LegSetup {
    LegSetup {
        call_id: "test-call".into(),
        direction,
        local_media: (direction == LegDirection::Outbound)
            .then(|| LocalMedia::g711(LOOPBACK, 40000)),
        ring_timeout: (direction == LegDirection::Outbound).then_some(RING),
        session_timer: None,
        refer: crate::leg::refer::ReferBase {
            host: "10.0.0.1".into(),
            sips: false,
            tls: false,
        },
        refer_timeout: REFER_TIMEOUT,
        session_id: 7,
        session_version: 1,
    }
}

fn outbound(t0: Instant) -> LegMachine {
    LegMachine::new(setup(LegDirection::Outbound), t0)
}

fn drain(m: &mut LegMachine) -> Vec<Action> {
    std::iter::from_fn(|| m.poll_action()).collect()
}

fn final_response(code: u16, reason: &str) -> FinalResponse {
    FinalResponse {
        code,
        reason: reason.into(),
        sdp: String::new(),
        session_expires: None,
        made_locally: false,
    }
}

fn ok_200(session_expires: Option<&str>) -> Input {
    Input::Invite(InviteOutcome::Final(FinalResponse {
        sdp: sdp("sendrecv"),
        session_expires: session_expires.map(str::to_string),
        ..final_response(200, "OK")
    }))
}

fn ringing() -> Input {
    Input::Provisional {
        code: 180,
        sdp: None,
    }
}

fn ended(status: CallStatus, code: Option<u16>, reason: &str, by: Party) -> Action {
    Action::Emit(LegEvent::Ended(EndInfo {
        call_status: status,
        sip_code: code,
        reason: reason.into(),
        by,
    }))
}

fn is_answered(a: &Action) -> bool {
    matches!(a, Action::Emit(LegEvent::Answered(_)))
}

/// An outbound call answered at `t0` (no session timer).
fn answered_call(t0: Instant) -> LegMachine {
    let mut m = outbound(t0);
    m.handle_event(ringing(), t0);
    m.handle_event(ok_200(None), t0);
    let actions = drain(&mut m);
    assert_eq!(actions[0], Action::Emit(LegEvent::Ringing));
    assert!(is_answered(&actions[1]), "{actions:?}");
    m
}

#[test]
fn ring_timeout_cancels_then_the_cancel_guard_ends_with_no_answer() {
    let t0 = Instant::now();
    let mut m = outbound(t0);
    assert_eq!(m.poll_timeout(), Some(t0 + RING));
    m.handle_event(ringing(), t0 + secs(1));
    assert_eq!(drain(&mut m), [Action::Emit(LegEvent::Ringing)]);

    // Nothing is due before the ring timeout.
    m.handle_timeout(t0 + RING - Duration::from_millis(1));
    assert!(drain(&mut m).is_empty());

    m.handle_timeout(t0 + RING);
    assert_eq!(drain(&mut m), [Action::Cancel { wait: false }]);
    assert_eq!(m.poll_timeout(), Some(t0 + RING + CANCEL_GUARD));
    // A second hangup sends no second CANCEL.
    m.handle_event(Input::Hangup, t0 + RING + secs(1));
    assert!(drain(&mut m).is_empty());

    m.handle_timeout(t0 + RING + CANCEL_GUARD);
    assert_eq!(
        drain(&mut m),
        [ended(
            CallStatus::NoAnswer,
            None,
            "no response to CANCEL",
            Party::Local
        )]
    );
    assert!(m.is_ended());
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn ring_timeout_then_487_is_no_answer_by_us() {
    let t0 = Instant::now();
    let mut m = outbound(t0);
    m.handle_event(ringing(), t0);
    m.handle_timeout(t0 + RING);
    drain(&mut m);
    let resp = final_response(487, "Request Terminated");
    m.handle_event(
        Input::Invite(InviteOutcome::Final(resp)),
        t0 + RING + secs(1),
    );
    assert_eq!(
        drain(&mut m),
        [ended(
            CallStatus::NoAnswer,
            Some(487),
            "Request Terminated",
            Party::Local
        )]
    );
}

#[test]
fn no_provisional_by_the_ring_timeout_fails_without_cancel() {
    let t0 = Instant::now();
    let mut m = outbound(t0);
    m.handle_timeout(t0 + RING);
    assert_eq!(
        drain(&mut m),
        [ended(
            CallStatus::Failed,
            None,
            "no response from the gateway within the ring timeout",
            Party::Local
        )]
    );
    assert!(m.is_ended());
}

#[test]
fn a_2xx_crossing_our_cancel_ends_with_the_cancel_cause_and_no_answer_event() {
    let t0 = Instant::now();
    // The ring timeout's CANCEL.
    let mut m = outbound(t0);
    m.handle_event(ringing(), t0);
    m.handle_timeout(t0 + RING);
    assert_eq!(drain(&mut m)[1], Action::Cancel { wait: false });
    m.handle_event(ok_200(None), t0 + RING + Duration::from_millis(5));
    let actions = drain(&mut m);
    assert_eq!(
        actions,
        [ended(
            CallStatus::NoAnswer,
            Some(200),
            "answered after cancel; hung up",
            Party::Local
        )]
    );

    // The engine's hangup.
    let mut m = outbound(t0);
    m.handle_event(ringing(), t0);
    m.handle_event(Input::Hangup, t0 + secs(2));
    assert_eq!(drain(&mut m)[1], Action::Cancel { wait: false });
    m.handle_event(ok_200(None), t0 + secs(2));
    let actions = drain(&mut m);
    assert!(!actions.iter().any(is_answered), "{actions:?}");
    assert_eq!(
        actions,
        [ended(
            CallStatus::Canceled,
            Some(200),
            "answered after cancel; hung up",
            Party::Local
        )]
    );
}

#[test]
fn a_terminated_dialog_while_calling_waits_for_the_invite_result() {
    let t0 = Instant::now();
    let mut m = outbound(t0);
    m.handle_event(Input::Terminated(Termination::Timeout), t0);
    m.handle_event(Input::DialogGone, t0);
    assert!(drain(&mut m).is_empty());
    assert!(!m.is_ended());
}

#[test]
fn our_own_timer_b_408_is_failed_a_received_408_is_no_answer() {
    let t0 = Instant::now();
    let local = FinalResponse {
        made_locally: true,
        ..final_response(408, "Request Timeout")
    };
    let mut m = outbound(t0);
    m.handle_event(
        Input::Invite(InviteOutcome::Final(local.clone())),
        t0 + secs(32),
    );
    assert_eq!(
        drain(&mut m),
        [ended(
            CallStatus::Failed,
            Some(408),
            "Request Timeout",
            Party::Remote
        )]
    );

    // After a provisional response someone was reached: no answer.
    let mut m = outbound(t0);
    m.handle_event(ringing(), t0);
    m.handle_event(Input::Invite(InviteOutcome::Final(local)), t0 + secs(32));
    assert_eq!(
        drain(&mut m)[1],
        ended(
            CallStatus::NoAnswer,
            Some(408),
            "Request Timeout",
            Party::Remote
        )
    );

    // A 408 the peer sent.
    let mut m = outbound(t0);
    let received = final_response(408, "408 Request Timeout");
    m.handle_event(Input::Invite(InviteOutcome::Final(received)), t0 + secs(5));
    assert_eq!(
        drain(&mut m),
        [ended(
            CallStatus::NoAnswer,
            Some(408),
            "Request Timeout",
            Party::Remote
        )]
    );
}

#[test]
fn busy_and_early_media_are_reported() {
    let t0 = Instant::now();
    let mut m = outbound(t0);
    m.handle_event(
        Input::Provisional {
            code: 183,
            sdp: Some(sdp("sendrecv")),
        },
        t0,
    );
    m.handle_event(ringing(), t0);
    m.handle_event(ringing(), t0);
    let actions = drain(&mut m);
    assert!(
        matches!(actions.as_slice(), [Action::Emit(LegEvent::EarlyMedia(neg)), Action::Emit(LegEvent::Ringing)] if neg.remote_rtp.port() == 6000),
        "{actions:?}"
    );
    let busy = final_response(486, "Busy Here");
    m.handle_event(Input::Invite(InviteOutcome::Final(busy)), t0 + secs(1));
    assert_eq!(
        drain(&mut m),
        [ended(
            CallStatus::Busy,
            Some(486),
            "Busy Here",
            Party::Remote
        )]
    );
}

#[test]
fn a_2xx_without_a_usable_answer_is_hung_up() {
    let t0 = Instant::now();
    let mut m = outbound(t0);
    let resp = FinalResponse {
        sdp: "garbage".into(),
        ..final_response(200, "OK")
    };
    m.handle_event(Input::Invite(InviteOutcome::Final(resp)), t0);
    let actions = drain(&mut m);
    assert_eq!(actions[0], Action::Bye);
    assert!(
        matches!(&actions[1], Action::Emit(LegEvent::Ended(e)) if e.call_status == CallStatus::Failed && e.reason.starts_with("unusable SDP answer")),
        "{actions:?}"
    );
}

#[test]
fn a_2xx_rejecting_our_audio_or_answering_srtp_is_hung_up_as_failed() {
    for (from, to, reason) in [
        (
            "m=audio 6000 RTP/AVP",
            "m=audio 0 RTP/AVP",
            "unusable SDP answer: sdp audio stream is rejected (port 0)",
        ),
        (
            "m=audio 6000 RTP/AVP",
            "m=audio 6000 RTP/SAVP",
            "unusable SDP answer: sdp audio transport RTP/SAVP is not supported (RTP/AVP, or RTP/SAVP on a trunk with SRTP)",
        ),
    ] {
        let t0 = Instant::now();
        let mut m = outbound(t0);
        let resp = FinalResponse {
            sdp: sdp("sendrecv").replace(from, to),
            ..final_response(200, "OK")
        };
        m.handle_event(Input::Invite(InviteOutcome::Final(resp)), t0);
        assert_eq!(
            drain(&mut m),
            [
                Action::Bye,
                ended(CallStatus::Failed, Some(200), reason, Party::Local)
            ],
            "{to}"
        );
    }
}

#[test]
fn early_media_rejecting_our_audio_is_not_media() {
    let t0 = Instant::now();
    let mut m = outbound(t0);
    let early = |s: String| Input::Provisional {
        code: 183,
        sdp: Some(s),
    };
    m.handle_event(
        early(sdp("sendrecv").replace("m=audio 6000", "m=audio 0")),
        t0,
    );
    m.handle_event(
        early(sdp("sendrecv").replace("RTP/AVP", "RTP/SAVP")),
        t0 + secs(1),
    );
    assert!(drain(&mut m).is_empty());
}

mod dialog;
mod transfer;
