//! A bridged transfer as a sans-IO machine ([`BridgeTurn`]): the target's leg rings
//! ([`Ringing`]), the two messages play (the manager hears who is coming, the caller that
//! they are being connected), then the two legs are bridged until either side hangs up,
//! and the other side is hung up.
//!
//! It is fed the target leg's events, the caller's side (gone, and why), the messages'
//! ends and the time; it keeps the attempt's [`TransferLog`], says what to do through
//! `poll_action` and gives its next deadline through `poll_timeout`. `transfer.rs` drives
//! it from the call's I/O and the second leg, and the tests below on simulated time.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use callsmith_scenarios::port::TransferOutcome;
use callsmith_sip::{CallStatus, EndInfo, LegEvent, NegotiatedMedia};

use super::history::{BridgeSide, TransferLog};
use super::ring::{RingAction, RingEnd, RingEvent, Ringing};

/// Longest a caller or target may take to acknowledge our hang-up.
pub(super) const END_WAIT: Duration = Duration::from_secs(5);
/// Extra time past the ring timeout before the engine gives up on the target leg itself.
pub(super) const RING_GUARD: Duration = Duration::from_secs(10);

/// Something that happened during a bridged transfer.
#[derive(Debug)]
pub(super) enum BridgeEvent {
    /// An event of the target's leg.
    Target(LegEvent),
    /// The target's leg went away without an end.
    TargetClosed,
    /// The caller is gone (hung up, or the engine ends the call), and why.
    CallerGone(String),
    /// The message to the manager ended (how much of it played; `None`: there was none).
    ManagerMessageDone(Option<u64>),
    /// The message to the caller ended (or there was none).
    ClientMessageDone,
    /// The bridge asked for by [`BridgeAction::StartBridge`] runs.
    BridgeStarted,
    /// It could not start.
    BridgeFailed(String),
}

/// What to do with the target leg's media session once the transfer is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TargetMedia {
    /// Leave it to be dropped.
    Drop,
    /// Close it.
    Close,
    /// Close it and keep its counters in the transfer's record.
    CloseWithStats,
}

/// What the transfer asks of its driver, in order.
#[derive(Debug)]
pub(super) enum BridgeAction {
    /// The target answered: point its media session at it and start the two messages.
    Answered(NegotiatedMedia),
    /// Hang up the target's leg (its end is still awaited).
    HangUpTarget,
    /// Stop what plays to the caller.
    StopCallerPlayout,
    /// Bridge the two media sessions; answer with [`BridgeEvent::BridgeStarted`] or
    /// [`BridgeEvent::BridgeFailed`] before polling again.
    StartBridge,
    /// Stop the bridge.
    StopBridge,
    /// Hang up the caller's leg and wait (at most [`END_WAIT`]) for its end.
    HangUpCaller,
    /// The transfer is over; nothing follows.
    Done(TransferOutcome, TargetMedia),
}

#[derive(Debug)]
enum Phase {
    /// The target's leg rings.
    Ringing(Ringing),
    /// The two messages play.
    Messages {
        manager: bool,
        client: bool,
    },
    /// The bridge was asked for.
    Starting,
    /// The legs are bridged.
    Bridged,
    /// The target was hung up; its end is awaited until `until`.
    Ending {
        until: Instant,
        outcome: TransferOutcome,
        record_end: bool,
        media: TargetMedia,
    },
    Done,
}

/// A bridged transfer from the moment its target's leg was placed.
#[derive(Debug)]
pub(super) struct BridgeTurn {
    phase: Phase,
    /// The answer of the call the transfer runs in: the record's times are ms since then.
    call_started: Instant,
    /// Why the caller's side gave up while the target rang.
    gone: Option<String>,
    log: TransferLog,
    actions: VecDeque<BridgeAction>,
}

/// How a call_transfer attempt is kept in the call history.
trait TransferRecord {
    fn target_ended(&mut self, end: &EndInfo);
}

impl TransferRecord for TransferLog {
    fn target_ended(&mut self, end: &EndInfo) {
        self.call_status = Some(end.call_status);
        if end.sip_code.is_some() {
            self.sip_code = end.sip_code;
        }
    }
}

/// The brick output for a target leg that ended without being answered.
pub(super) fn unanswered(end: &EndInfo) -> TransferOutcome {
    match end.call_status {
        CallStatus::NoAnswer => TransferOutcome::Timeout,
        status => TransferOutcome::Failure(match end.sip_code {
            Some(code) => format!("transfer target {status}: {code} {}", end.reason),
            None => format!("transfer target {status}: {}", end.reason),
        }),
    }
}

impl BridgeTurn {
    /// A transfer whose target's leg was placed at `now` with `ring` as its ring timeout,
    /// in a call answered at `call_started`; `log` is its record so far.
    pub(super) fn new(
        now: Instant,
        ring: Duration,
        call_started: Instant,
        log: TransferLog,
    ) -> BridgeTurn {
        BridgeTurn {
            phase: Phase::Ringing(Ringing::new(now + ring + RING_GUARD, END_WAIT)),
            call_started,
            gone: None,
            log,
            actions: VecDeque::new(),
        }
    }

    /// Whether the caller's side is heard (its end counts).
    pub(super) fn hears_caller(&self) -> bool {
        match &self.phase {
            Phase::Ringing(r) => r.ringing(),
            Phase::Messages { .. } | Phase::Bridged => true,
            Phase::Starting | Phase::Ending { .. } | Phase::Done => false,
        }
    }

    /// Whether the target's leg is heard.
    pub(super) fn hears_target(&self) -> bool {
        !matches!(self.phase, Phase::Done)
    }

    /// Whether the messages play (their ends are awaited).
    pub(super) fn messages_playing(&self) -> bool {
        matches!(self.phase, Phase::Messages { .. })
    }

    /// The attempt's record so far.
    #[cfg(test)]
    pub(super) fn log(&self) -> &TransferLog {
        &self.log
    }

    /// The attempt's record, taken once the transfer is over.
    pub(super) fn into_log(self) -> TransferLog {
        self.log
    }

    fn ms(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.call_started).as_millis() as u64
    }

    /// Takes in what happened at `now`. Nothing changes once the transfer is over.
    pub(super) fn handle_event(&mut self, now: Instant, event: BridgeEvent) {
        let at = self.ms(now);
        match (&mut self.phase, event) {
            (Phase::Done, _) => {}
            (Phase::Ringing(r), ev) => {
                let ev = match ev {
                    BridgeEvent::Target(LegEvent::Ringing) => {
                        self.log.ringing_ms.get_or_insert(at);
                        return;
                    }
                    BridgeEvent::Target(ev) => RingEvent::Leg(ev),
                    BridgeEvent::TargetClosed => RingEvent::LegClosed,
                    BridgeEvent::CallerGone(why) => {
                        if !r.ringing() {
                            return;
                        }
                        self.gone = Some(why);
                        RingEvent::GiveUp
                    }
                    _ => return,
                };
                r.handle_event(now, ev);
                self.ring_actions(now);
            }
            (Phase::Messages { manager, client }, ev) => match ev {
                BridgeEvent::ManagerMessageDone(played) => {
                    *manager = true;
                    self.log.manager_prompt_played_ms = played;
                    self.messages_over();
                }
                BridgeEvent::ClientMessageDone => {
                    *client = true;
                    self.messages_over();
                }
                BridgeEvent::Target(LegEvent::Ended(end)) => {
                    self.log.target_ended(&end);
                    self.log.ended_by = Some(BridgeSide::Target);
                    self.actions.push_back(BridgeAction::StopCallerPlayout);
                    self.done(
                        TransferOutcome::Failure(
                            "the transfer target hung up before the bridge".into(),
                        ),
                        TargetMedia::Close,
                    );
                }
                BridgeEvent::TargetClosed => {
                    self.actions.push_back(BridgeAction::StopCallerPlayout);
                    self.done(
                        TransferOutcome::Failure("the transfer leg closed".into()),
                        TargetMedia::Drop,
                    );
                }
                BridgeEvent::CallerGone(why) => {
                    self.log.ended_by = Some(BridgeSide::Caller);
                    self.actions.push_back(BridgeAction::StopCallerPlayout);
                    self.hang_up_target(
                        now,
                        TransferOutcome::Failure(why),
                        true,
                        TargetMedia::Close,
                    );
                }
                _ => {}
            },
            (Phase::Starting, BridgeEvent::BridgeStarted) => {
                self.log.bridged_ms = Some(at);
                self.phase = Phase::Bridged;
            }
            (Phase::Starting, BridgeEvent::BridgeFailed(e)) => self.hang_up_target(
                now,
                TransferOutcome::Failure(format!("bridging the legs failed: {e}")),
                false,
                TargetMedia::Drop,
            ),
            (Phase::Starting, _) => {}
            (Phase::Bridged, ev) => match ev {
                BridgeEvent::Target(LegEvent::Ended(end)) => {
                    self.log.target_ended(&end);
                    self.target_left();
                }
                BridgeEvent::TargetClosed => self.target_left(),
                BridgeEvent::CallerGone(_) => {
                    self.log.ended_by = Some(BridgeSide::Caller);
                    self.actions.push_back(BridgeAction::StopBridge);
                    self.hang_up_target(
                        now,
                        TransferOutcome::Success,
                        true,
                        TargetMedia::CloseWithStats,
                    );
                }
                _ => {}
            },
            (Phase::Ending { record_end, .. }, ev) => {
                let end = match ev {
                    BridgeEvent::Target(LegEvent::Ended(end)) => Some(end),
                    BridgeEvent::TargetClosed => None,
                    _ => return,
                };
                if let (Some(end), true) = (&end, *record_end) {
                    self.log.target_ended(end);
                }
                self.end_awaited();
            }
        }
    }

    /// The next deadline: the target's ring guard, or the end of the wait for its end.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Ringing(r) => r.poll_timeout(),
            Phase::Ending { until, .. } => Some(*until),
            _ => None,
        }
    }

    /// The time has come (`now` at or past [`BridgeTurn::poll_timeout`]).
    pub(super) fn handle_timeout(&mut self, now: Instant) {
        match &mut self.phase {
            Phase::Ringing(r) => {
                r.handle_timeout(now);
                self.ring_actions(now);
            }
            Phase::Ending { until, .. } if now >= *until => self.end_awaited(),
            _ => {}
        }
    }

    /// The next thing to do, if any.
    pub(super) fn poll_action(&mut self) -> Option<BridgeAction> {
        self.actions.pop_front()
    }

    /// Does what the ringing leg asks.
    fn ring_actions(&mut self, now: Instant) {
        let Phase::Ringing(r) = &mut self.phase else {
            return;
        };
        let mut end = None;
        while let Some(a) = r.poll_action() {
            match a {
                // Early media plays no part in a transfer.
                RingAction::EarlyMedia(_) => {}
                RingAction::HangUp => self.actions.push_back(BridgeAction::HangUpTarget),
                RingAction::Done(e) => end = Some(e),
            }
        }
        let Some(end) = end else {
            return;
        };
        match end {
            RingEnd::Answered(media) => {
                self.log.answered_ms = Some(self.ms(now));
                self.log.call_status = Some(CallStatus::Answered);
                self.log.sip_code = Some(200);
                self.actions.push_back(BridgeAction::Answered(media));
                self.phase = Phase::Messages {
                    manager: false,
                    client: false,
                };
            }
            RingEnd::Ended(end) => {
                self.log.target_ended(&end);
                self.done(unanswered(&end), TargetMedia::Drop);
            }
            RingEnd::Closed => self.done(
                TransferOutcome::Failure("the transfer leg closed".into()),
                TargetMedia::Drop,
            ),
            RingEnd::GaveUp { timed_out, end } => {
                if let Some(end) = &end {
                    self.log.target_ended(end);
                }
                let outcome = match self.gone.take() {
                    Some(why) if !timed_out => TransferOutcome::Failure(why),
                    _ => TransferOutcome::Timeout,
                };
                self.done(outcome, TargetMedia::Drop);
            }
        }
    }

    fn messages_over(&mut self) {
        if let Phase::Messages {
            manager: true,
            client: true,
        } = self.phase
        {
            self.phase = Phase::Starting;
            self.actions.push_back(BridgeAction::StartBridge);
        }
    }

    /// The target left the bridge: the caller is hung up.
    fn target_left(&mut self) {
        self.log.ended_by = Some(BridgeSide::Target);
        self.actions.push_back(BridgeAction::StopBridge);
        self.actions.push_back(BridgeAction::HangUpCaller);
        self.done(TransferOutcome::Success, TargetMedia::CloseWithStats);
    }

    fn hang_up_target(
        &mut self,
        now: Instant,
        outcome: TransferOutcome,
        record_end: bool,
        media: TargetMedia,
    ) {
        self.actions.push_back(BridgeAction::HangUpTarget);
        self.phase = Phase::Ending {
            until: now + END_WAIT,
            outcome,
            record_end,
            media,
        };
    }

    fn end_awaited(&mut self) {
        if let Phase::Ending { outcome, media, .. } =
            std::mem::replace(&mut self.phase, Phase::Done)
        {
            self.done(outcome, media);
        }
    }

    fn done(&mut self, outcome: TransferOutcome, media: TargetMedia) {
        // A bridge that ran leaves the call status `answered`, whatever the target's leg
        // said when it ended (its reason and code are kept).
        if outcome == TransferOutcome::Success {
            self.log.call_status = Some(CallStatus::Answered);
        }
        self.phase = Phase::Done;
        self.actions.push_back(BridgeAction::Done(outcome, media));
    }
}

#[cfg(test)]
mod tests;
