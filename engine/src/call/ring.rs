//! A leg we placed, up to its answer, as a sans-IO machine ([`Ringing`]): the one ringing
//! wait of an outbound call (`outbound.rs`) and of a bridged transfer's second leg
//! ([`super::bridge`]).
//!
//! It is fed the leg's events, a reason of the driver's to give up, and the time; it says
//! what to do through `poll_action` and gives its next deadline through `poll_timeout`.
//! When it gives up (its deadline, or the driver's reason) it hangs the leg up and waits
//! a bounded time for the leg's end, so the end can be recorded.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use callsmith_sip::{EndInfo, LegEvent, NegotiatedMedia};

/// Something that happened to a ringing leg.
#[derive(Debug)]
pub(super) enum RingEvent {
    /// An event of the leg.
    Leg(LegEvent),
    /// The leg went away without an end.
    LegClosed,
    /// The driver gives up on the leg (the call it belongs to is ending).
    GiveUp,
}

/// What the ringing leg asks of its driver, in order.
#[derive(Debug)]
pub(super) enum RingAction {
    /// The leg's early media: point the media session at it.
    EarlyMedia(NegotiatedMedia),
    /// Hang the leg up (its end is still awaited).
    HangUp,
    /// The wait is over; nothing follows.
    Done(RingEnd),
}

/// How the wait for the answer ended.
#[derive(Debug)]
pub(super) enum RingEnd {
    Answered(NegotiatedMedia),
    /// The leg ended before an answer (busy, rejected, not answered, failed).
    Ended(EndInfo),
    /// The leg went away without an end.
    Closed,
    /// The wait was given up and the leg hung up: at the deadline (`timed_out`) or for the
    /// driver's reason. `end` is the leg's end when it came within the end wait.
    GaveUp {
        timed_out: bool,
        end: Option<EndInfo>,
    },
}

#[derive(Debug)]
enum State {
    Ringing {
        deadline: Instant,
    },
    /// Hung up; its end awaited until `until`.
    HangingUp {
        timed_out: bool,
        until: Instant,
    },
    Done,
}

/// A placed leg waiting for its answer until a deadline.
#[derive(Debug)]
pub(super) struct Ringing {
    state: State,
    /// How long the leg's end is awaited after we hung it up.
    end_wait: Duration,
    actions: VecDeque<RingAction>,
}

impl Ringing {
    /// A leg placed now, given up at `deadline`; after a hang-up its end is awaited for
    /// `end_wait`.
    pub(super) fn new(deadline: Instant, end_wait: Duration) -> Ringing {
        Ringing {
            state: State::Ringing { deadline },
            end_wait,
            actions: VecDeque::new(),
        }
    }

    /// Whether the driver's reasons to give up still count (the leg still rings).
    pub(super) fn ringing(&self) -> bool {
        matches!(self.state, State::Ringing { .. })
    }

    /// Takes in what happened at `now`.
    pub(super) fn handle_event(&mut self, now: Instant, event: RingEvent) {
        match (&self.state, event) {
            (State::Done, _) => {}
            (State::Ringing { .. }, RingEvent::Leg(ev)) => match ev {
                LegEvent::EarlyMedia(m) => self.actions.push_back(RingAction::EarlyMedia(m)),
                LegEvent::Answered(m) => self.done(RingEnd::Answered(m)),
                LegEvent::Ended(end) => self.done(RingEnd::Ended(end)),
                _ => {}
            },
            (State::Ringing { .. }, RingEvent::LegClosed) => self.done(RingEnd::Closed),
            (State::Ringing { .. }, RingEvent::GiveUp) => self.give_up(now, false),
            (&State::HangingUp { timed_out, .. }, RingEvent::Leg(LegEvent::Ended(end))) => self
                .done(RingEnd::GaveUp {
                    timed_out,
                    end: Some(end),
                }),
            (&State::HangingUp { timed_out, .. }, RingEvent::LegClosed) => {
                self.done(RingEnd::GaveUp {
                    timed_out,
                    end: None,
                })
            }
            (State::HangingUp { .. }, _) => {}
        }
    }

    /// The next deadline: the answer's, or the end wait's after a hang-up.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Ringing { deadline } => Some(deadline),
            State::HangingUp { until, .. } => Some(until),
            State::Done => None,
        }
    }

    /// The time has come (`now` at or past [`Ringing::poll_timeout`]).
    pub(super) fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Ringing { deadline } if now >= deadline => self.give_up(now, true),
            State::HangingUp { timed_out, until } if now >= until => self.done(RingEnd::GaveUp {
                timed_out,
                end: None,
            }),
            _ => {}
        }
    }

    /// The next thing to do, if any.
    pub(super) fn poll_action(&mut self) -> Option<RingAction> {
        self.actions.pop_front()
    }

    fn give_up(&mut self, now: Instant, timed_out: bool) {
        self.actions.push_back(RingAction::HangUp);
        self.state = State::HangingUp {
            timed_out,
            until: now + self.end_wait,
        };
    }

    fn done(&mut self, end: RingEnd) {
        self.state = State::Done;
        self.actions.push_back(RingAction::Done(end));
    }
}

#[cfg(test)]
mod tests {
    use callsmith_sip::{CallStatus, MediaDirection, Party, SdpCodec};

    use super::*;

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

    fn end(status: CallStatus, code: u16) -> EndInfo {
        EndInfo {
            call_status: status,
            sip_code: Some(code),
            reason: "r".into(),
            by: Party::Remote,
        }
    }

    fn actions(r: &mut Ringing) -> Vec<RingAction> {
        std::iter::from_fn(|| r.poll_action()).collect()
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn the_answer_ends_the_wait_and_early_media_is_passed_on() {
        let t0 = Instant::now();
        let mut r = Ringing::new(t0 + 30 * S, 5 * S);
        r.handle_event(t0 + S, RingEvent::Leg(LegEvent::Ringing));
        assert!(r.ringing() && r.poll_action().is_none());
        r.handle_event(t0 + 3 * S, RingEvent::Leg(LegEvent::EarlyMedia(media())));
        r.handle_event(t0 + 4 * S, RingEvent::Leg(LegEvent::Answered(media())));
        let a = actions(&mut r);
        assert!(matches!(a[0], RingAction::EarlyMedia(_)), "{a:?}");
        assert!(
            matches!(a[1], RingAction::Done(RingEnd::Answered(_))),
            "{a:?}"
        );
        assert_eq!(a.len(), 2);
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn a_refusal_ends_the_wait_with_the_legs_end() {
        let t0 = Instant::now();
        let mut r = Ringing::new(t0 + 30 * S, 5 * S);
        r.handle_event(
            t0 + S,
            RingEvent::Leg(LegEvent::Ended(end(CallStatus::Busy, 486))),
        );
        let a = actions(&mut r);
        assert!(
            matches!(&a[..], [RingAction::Done(RingEnd::Ended(e))] if e.sip_code == Some(486)),
            "{a:?}"
        );
    }

    #[test]
    fn at_the_deadline_the_leg_is_hung_up_and_its_end_awaited() {
        let t0 = Instant::now();
        let mut r = Ringing::new(t0 + 30 * S, 5 * S);
        assert_eq!(r.poll_timeout(), Some(t0 + 30 * S));
        r.handle_timeout(t0 + 29 * S);
        assert!(actions(&mut r).is_empty(), "not before the deadline");
        r.handle_timeout(t0 + 30 * S);
        assert!(matches!(&actions(&mut r)[..], [RingAction::HangUp]));
        assert!(!r.ringing());
        // An answer racing the hang-up changes nothing; the end is recorded.
        r.handle_event(t0 + 30 * S, RingEvent::Leg(LegEvent::Answered(media())));
        r.handle_event(
            t0 + 31 * S,
            RingEvent::Leg(LegEvent::Ended(end(CallStatus::Canceled, 487))),
        );
        let a = actions(&mut r);
        assert!(
            matches!(&a[..], [RingAction::Done(RingEnd::GaveUp { timed_out: true, end: Some(e) })] if e.sip_code == Some(487)),
            "{a:?}"
        );
    }

    #[test]
    fn giving_up_waits_for_the_end_only_so_long() {
        let t0 = Instant::now();
        let mut r = Ringing::new(t0 + 30 * S, 5 * S);
        r.handle_event(t0 + 2 * S, RingEvent::GiveUp);
        assert!(matches!(&actions(&mut r)[..], [RingAction::HangUp]));
        assert_eq!(r.poll_timeout(), Some(t0 + 7 * S));
        r.handle_timeout(t0 + 7 * S);
        let a = actions(&mut r);
        assert!(
            matches!(
                &a[..],
                [RingAction::Done(RingEnd::GaveUp {
                    timed_out: false,
                    end: None
                })]
            ),
            "{a:?}"
        );
    }

    #[test]
    fn a_leg_that_goes_away_ends_the_wait() {
        let t0 = Instant::now();
        let mut r = Ringing::new(t0 + 30 * S, 5 * S);
        r.handle_event(t0 + S, RingEvent::LegClosed);
        assert!(matches!(
            &actions(&mut r)[..],
            [RingAction::Done(RingEnd::Closed)]
        ));
    }
}
