//! The bridged transfer on simulated time: `t0` (the call's answer) plus offsets, no clock
//! read. Each phase is ended by either side.

use std::time::{Duration, Instant};

use callsmith_sip::{
    CallStatus, EndInfo, LegEvent, MediaDirection, NegotiatedMedia, Party, SdpCodec,
};

use super::{BridgeAction as A, BridgeEvent as E, BridgeTurn, END_WAIT, RING_GUARD};
use crate::call::history::{BridgeSide, TransferLog, TransferMode};

const S: Duration = Duration::from_secs(1);

fn media() -> NegotiatedMedia {
    NegotiatedMedia {
        remote_rtp: "127.0.0.1:4000".parse().unwrap(),
        codec: SdpCodec::Pcmu,
        payload_type: 0,
        telephone_event: Some(101),
        remote_direction: MediaDirection::SendRecv,
        ptime: None,
        srtp: None,
    }
}

fn end(status: CallStatus, code: Option<u16>, reason: &str) -> E {
    E::Target(LegEvent::Ended(EndInfo {
        call_status: status,
        sip_code: code,
        reason: reason.into(),
        by: Party::Remote,
    }))
}

/// A transfer placed 1 s into the call with a 20 s ring timeout.
fn placed(t0: Instant) -> BridgeTurn {
    BridgeTurn::new(
        t0 + S,
        20 * S,
        t0,
        TransferLog::new(TransferMode::Bridged, "+15550001111", 1000),
    )
}

/// Feeds `ev` and names the actions it asked for; `StartBridge` is answered as started.
fn feed(b: &mut BridgeTurn, now: Instant, ev: E) -> Vec<String> {
    b.handle_event(now, ev);
    drain(b, now)
}

fn drain(b: &mut BridgeTurn, now: Instant) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(a) = b.poll_action() {
        out.push(match &a {
            A::Answered(_) => "answered".to_string(),
            A::Done(o, m) => format!("done {o:?} {m:?}"),
            a => format!("{a:?}"),
        });
        if matches!(a, A::StartBridge) {
            b.handle_event(now, E::BridgeStarted);
        }
    }
    out
}

/// Rings at 2 s, answered at 5 s, both messages done at 8 s: bridged.
fn bridged(t0: Instant) -> BridgeTurn {
    let mut b = placed(t0);
    assert!(feed(&mut b, t0 + 2 * S, E::Target(LegEvent::Ringing)).is_empty());
    assert_eq!(
        feed(&mut b, t0 + 5 * S, E::Target(LegEvent::Answered(media()))),
        ["answered"]
    );
    assert!(b.messages_playing());
    assert!(feed(&mut b, t0 + 7 * S, E::ManagerMessageDone(Some(1500))).is_empty());
    assert_eq!(
        feed(&mut b, t0 + 8 * S, E::ClientMessageDone),
        ["StartBridge"]
    );
    assert!(b.hears_caller() && !b.messages_playing());
    let log = b.log();
    assert_eq!(
        (log.ringing_ms, log.answered_ms, log.bridged_ms),
        (Some(2000), Some(5000), Some(8000))
    );
    assert_eq!(log.manager_prompt_played_ms, Some(1500));
    b
}

#[test]
fn a_hang_up_while_the_target_rings_hangs_the_target_up_and_records_its_end() {
    let t0 = Instant::now();
    let mut b = placed(t0);
    feed(&mut b, t0 + 2 * S, E::Target(LegEvent::Ringing));
    assert_eq!(
        feed(
            &mut b,
            t0 + 3 * S,
            E::CallerGone("the caller hung up".into())
        ),
        ["HangUpTarget"]
    );
    // The caller's side is no longer heard while the target's end is awaited.
    assert!(!b.hears_caller() && b.hears_target());
    assert_eq!(
        feed(
            &mut b,
            t0 + 3 * S,
            end(CallStatus::Canceled, Some(487), "Request Terminated")
        ),
        [r#"done Failure("the caller hung up") Drop"#]
    );
    let log = b.into_log();
    assert_eq!(log.call_status, Some(CallStatus::Canceled));
    assert_eq!(log.sip_code, Some(487));
    assert_eq!(log.answered_ms, None);
}

#[test]
fn a_target_that_does_not_answer_in_time_is_hung_up_and_times_out() {
    let t0 = Instant::now();
    let mut b = placed(t0);
    let guard = t0 + S + 20 * S + RING_GUARD;
    assert_eq!(b.poll_timeout(), Some(guard));
    b.handle_timeout(guard);
    assert_eq!(drain(&mut b, guard), ["HangUpTarget"]);
    // The target never acknowledges: the end is waited for only so long.
    assert_eq!(b.poll_timeout(), Some(guard + END_WAIT));
    b.handle_timeout(guard + END_WAIT);
    assert_eq!(drain(&mut b, guard + END_WAIT), ["done Timeout Drop"]);
}

#[test]
fn a_refusing_target_ends_the_transfer_as_it_said() {
    let t0 = Instant::now();
    let mut b = placed(t0);
    assert_eq!(
        feed(
            &mut b,
            t0 + 2 * S,
            end(CallStatus::Busy, Some(486), "Busy Here")
        ),
        [r#"done Failure("transfer target busy: 486 Busy Here") Drop"#]
    );
    let mut b = placed(t0);
    assert_eq!(
        feed(
            &mut b,
            t0 + 2 * S,
            end(CallStatus::NoAnswer, Some(480), "Temporarily Unavailable")
        ),
        ["done Timeout Drop"]
    );
}

#[test]
fn a_hang_up_during_the_messages_stops_them_and_hangs_the_target_up() {
    let t0 = Instant::now();
    let mut b = placed(t0);
    feed(&mut b, t0 + 5 * S, E::Target(LegEvent::Answered(media())));
    assert_eq!(
        feed(
            &mut b,
            t0 + 6 * S,
            E::CallerGone("maximum call duration reached".into())
        ),
        ["StopCallerPlayout", "HangUpTarget"]
    );
    assert!(!b.messages_playing());
    assert_eq!(
        feed(&mut b, t0 + 6 * S, end(CallStatus::Answered, None, "BYE")),
        [r#"done Failure("maximum call duration reached") Close"#]
    );
    let log = b.into_log();
    assert_eq!(log.ended_by, Some(BridgeSide::Caller));
    assert_eq!(log.bridged_ms, None);
}

#[test]
fn the_target_hanging_up_during_the_messages_fails_the_transfer() {
    let t0 = Instant::now();
    let mut b = placed(t0);
    feed(&mut b, t0 + 5 * S, E::Target(LegEvent::Answered(media())));
    feed(&mut b, t0 + 6 * S, E::ClientMessageDone);
    assert_eq!(
        feed(&mut b, t0 + 7 * S, end(CallStatus::Answered, None, "BYE")),
        [
            "StopCallerPlayout",
            r#"done Failure("the transfer target hung up before the bridge") Close"#
        ]
    );
    assert_eq!(b.log().ended_by, Some(BridgeSide::Target));
}

#[test]
fn a_caller_hanging_up_while_bridged_hangs_up_the_target_and_succeeds() {
    let t0 = Instant::now();
    let mut b = bridged(t0);
    assert_eq!(
        feed(
            &mut b,
            t0 + 60 * S,
            E::CallerGone("the caller hung up".into())
        ),
        ["StopBridge", "HangUpTarget"]
    );
    // Keys or a second end of the caller change nothing now.
    assert!(feed(&mut b, t0 + 60 * S, E::CallerGone("again".into())).is_empty());
    assert_eq!(
        feed(
            &mut b,
            t0 + 61 * S,
            end(CallStatus::Answered, Some(200), "BYE")
        ),
        ["done Success CloseWithStats"]
    );
    let log = b.into_log();
    assert_eq!(log.ended_by, Some(BridgeSide::Caller));
    assert_eq!(log.call_status, Some(CallStatus::Answered));
}

#[test]
fn the_target_hanging_up_while_bridged_hangs_up_the_caller() {
    let t0 = Instant::now();
    let mut b = bridged(t0);
    assert_eq!(
        feed(&mut b, t0 + 90 * S, end(CallStatus::Answered, None, "BYE")),
        ["StopBridge", "HangUpCaller", "done Success CloseWithStats"]
    );
    assert!(!b.hears_target() && !b.hears_caller());
    let log = b.into_log();
    assert_eq!(log.ended_by, Some(BridgeSide::Target));
    assert_eq!(log.call_status, Some(CallStatus::Answered));
}

#[test]
fn a_bridge_that_cannot_start_hangs_the_target_up() {
    let t0 = Instant::now();
    let mut b = placed(t0);
    feed(&mut b, t0 + 5 * S, E::Target(LegEvent::Answered(media())));
    feed(&mut b, t0 + 6 * S, E::ManagerMessageDone(None));
    b.handle_event(t0 + 7 * S, E::ClientMessageDone);
    assert!(matches!(b.poll_action(), Some(A::StartBridge)));
    assert_eq!(
        feed(&mut b, t0 + 7 * S, E::BridgeFailed("no port".into())),
        ["HangUpTarget"]
    );
    b.handle_timeout(t0 + 7 * S + END_WAIT);
    assert_eq!(
        drain(&mut b, t0 + 7 * S + END_WAIT),
        [r#"done Failure("bridging the legs failed: no port") Drop"#]
    );
}
