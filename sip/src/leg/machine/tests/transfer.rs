//! Blind transfer: REFER, its NOTIFYs, the grace for our answer to the final NOTIFY and
//! the deadline.

use super::*;

fn notify(code: u16, terminated: bool) -> Input {
    Input::Request(PeerRequest::Notify {
        refer: Some((code, terminated)),
    })
}

fn refer_sent(m: &mut LegMachine, id: u64, now: Instant) {
    m.handle_event(
        Input::Refer {
            id,
            target: "+4930123".into(),
        },
        now,
    );
    match drain(m).as_slice() {
        [Action::Refer { id: i, target }] => {
            assert_eq!(*i, id);
            assert_eq!(target.to_string(), "sip:+4930123@10.0.0.1");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn refer_outcome_is_held_until_the_notify_answer_is_sent() {
    let t0 = Instant::now();
    let mut m = answered_call(t0);
    refer_sent(&mut m, 1, t0);
    assert_eq!(m.poll_timeout(), Some(t0 + REFER_TIMEOUT));
    m.handle_event(
        Input::ReferResponse {
            id: 1,
            result: Ok(202),
        },
        t0,
    );
    assert!(drain(&mut m).is_empty());

    m.handle_event(notify(100, false), t0 + secs(1));
    assert_eq!(
        drain(&mut m),
        [
            Action::Respond(Reply::plain(200)),
            Action::Emit(LegEvent::TransferProgress { sip_code: 100 })
        ]
    );
    let at = t0 + secs(3);
    m.handle_event(notify(200, true), at);
    assert_eq!(
        drain(&mut m),
        [
            Action::Respond(Reply::plain(200)),
            Action::Emit(LegEvent::TransferProgress { sip_code: 200 })
        ]
    );
    assert_eq!(m.poll_timeout(), Some(at + NOTIFY_ANSWER_GRACE));
    m.handle_event(Input::AnswerSent, at + Duration::from_millis(2));
    assert_eq!(
        drain(&mut m),
        [Action::ReferOutcome {
            id: 1,
            outcome: ReferOutcome::Succeeded { sip_code: 200 }
        }]
    );
    assert_eq!(m.poll_timeout(), None);
    // The transfer is over: the call stays up and a new one may start.
    refer_sent(&mut m, 2, at + secs(1));
}

#[test]
fn refer_outcome_is_told_after_the_grace_without_the_notify_answer() {
    let t0 = Instant::now();
    let mut m = answered_call(t0);
    refer_sent(&mut m, 1, t0);
    m.handle_event(notify(486, true), t0 + secs(2));
    drain(&mut m);
    m.handle_timeout(t0 + secs(2) + NOTIFY_ANSWER_GRACE - Duration::from_millis(1));
    assert!(drain(&mut m).is_empty());
    m.handle_timeout(t0 + secs(2) + NOTIFY_ANSWER_GRACE);
    assert_eq!(
        drain(&mut m),
        [Action::ReferOutcome {
            id: 1,
            outcome: ReferOutcome::Failed {
                sip_code: Some(486),
                reason: "transfer target did not answer".into()
            }
        }]
    );
    // A later Confirmed has nothing left to tell.
    m.handle_event(Input::AnswerSent, t0 + secs(3));
    assert!(drain(&mut m).is_empty());
}

#[test]
fn refer_without_final_notify_times_out() {
    let t0 = Instant::now();
    let mut m = answered_call(t0);
    refer_sent(&mut m, 4, t0);
    m.handle_event(
        Input::ReferResponse {
            id: 4,
            result: Ok(202),
        },
        t0,
    );
    m.handle_event(notify(100, false), t0 + secs(1));
    drain(&mut m);
    m.handle_timeout(t0 + REFER_TIMEOUT);
    assert_eq!(
        drain(&mut m),
        [Action::ReferOutcome {
            id: 4,
            outcome: ReferOutcome::Failed {
                sip_code: None,
                reason: "no final NOTIFY before timeout".into()
            }
        }]
    );
    assert!(!m.is_ended());
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn refer_refused_with_4xx_fails_at_once() {
    let t0 = Instant::now();
    let mut m = answered_call(t0);
    refer_sent(&mut m, 1, t0);
    m.handle_event(
        Input::ReferResponse {
            id: 1,
            result: Ok(403),
        },
        t0,
    );
    assert_eq!(
        drain(&mut m),
        [Action::ReferOutcome {
            id: 1,
            outcome: ReferOutcome::Failed {
                sip_code: Some(403),
                reason: "REFER refused".into()
            }
        }]
    );
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn refer_is_refused_before_answer_and_while_another_runs() {
    let t0 = Instant::now();
    let mut m = outbound(t0);
    m.handle_event(
        Input::Refer {
            id: 1,
            target: "100".into(),
        },
        t0,
    );
    assert_eq!(
        drain(&mut m),
        [Action::ReferOutcome {
            id: 1,
            outcome: ReferOutcome::Failed {
                sip_code: None,
                reason: "call not answered".into()
            }
        }]
    );
    let mut m = answered_call(t0);
    refer_sent(&mut m, 2, t0);
    m.handle_event(
        Input::Refer {
            id: 3,
            target: "100".into(),
        },
        t0,
    );
    assert!(matches!(
        drain(&mut m).as_slice(),
        [Action::ReferOutcome { id: 3, outcome: ReferOutcome::Failed { reason, .. } }]
            if reason == "a transfer is already in progress"
    ));
}

#[test]
fn the_end_settles_held_and_pending_transfers() {
    let t0 = Instant::now();
    let mut m = answered_call(t0);
    refer_sent(&mut m, 1, t0);
    m.handle_event(notify(200, true), t0 + secs(1));
    drain(&mut m);
    m.handle_event(Input::Terminated(Termination::Bye), t0 + secs(1));
    let actions = drain(&mut m);
    assert_eq!(
        actions,
        [
            ended(CallStatus::Answered, None, "BYE", Party::Remote),
            Action::ReferOutcome {
                id: 1,
                outcome: ReferOutcome::Succeeded { sip_code: 200 }
            }
        ]
    );

    let mut m = answered_call(t0);
    refer_sent(&mut m, 5, t0);
    m.handle_event(Input::Hangup, t0 + secs(1));
    assert_eq!(
        drain(&mut m)[2],
        Action::ReferOutcome {
            id: 5,
            outcome: ReferOutcome::Failed {
                sip_code: None,
                reason: "call ended".into()
            }
        }
    );
}
