//! The sans-IO state machine of one INVITE dialog.
//!
//! [`LegMachine`] holds what a leg knows about its dialog and decides what to do about it; it
//! never touches a socket, a task, a channel or the clock. Its shell ([`super::driver`])
//! turns rsipstack's responses and dialog states and the controller's commands into
//! [`Input`]s, feeds them in with the current time, carries out the [`Action`]s it polls and
//! sleeps until [`LegMachine::poll_timeout`], then calls [`LegMachine::handle_timeout`].
//! Time moves only when the caller says so, so tests drive a leg through minutes of
//! signalling with plain `Instant`s.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tracing::info;

use super::io::{Action, Input, Reply};
use super::refer::{Decision, ReferBase, Transfers};
use super::session_timer::{SessionDeadlines, SessionTimer};
use super::{EndInfo, LegDirection, LegEvent, Party};
use crate::sdes::SrtpKeys;
use crate::sdp::{self, LocalMedia, NegotiatedMedia, SessionDescription};
use crate::status::{CallStatus, CancelCause};

mod in_dialog;
mod outbound;

/// After our CANCEL, how long to wait for the INVITE's final response before giving up
/// (longer than Timer B, so the transaction normally ends first).
const CANCEL_GUARD: Duration = Duration::from_secs(40);

/// What a leg starts from.
#[derive(Debug, Clone)]
pub(crate) struct LegSetup {
    /// For logs.
    pub call_id: String,
    /// Outbound legs start with their INVITE sent and unanswered.
    pub direction: LegDirection,
    /// Outbound: our offer. Inbound: set by the answer.
    pub local_media: Option<LocalMedia>,
    /// Outbound: CANCEL when no final response came within this time.
    pub ring_timeout: Option<Duration>,
    /// Inbound: the timer the INVITE asked for.
    pub session_timer: Option<SessionTimer>,
    /// How a number becomes a REFER target URI, and whether `sips:` targets may be used.
    pub refer: ReferBase,
    /// How long a transfer waits for its final NOTIFY.
    pub refer_timeout: Duration,
    /// SDP o= session id and the version of the last SDP we sent.
    pub session_id: u64,
    pub session_version: u64,
}

/// Where the dialog is.
#[derive(Debug)]
enum Phase {
    /// Outbound: the INVITE is out and its final response has not come.
    Calling {
        /// CANCEL then, unless canceled already.
        ring_at: Option<Instant>,
        cancel: Option<Canceling>,
    },
    /// Inbound: offered to the engine and not answered.
    Offered,
    Answered,
    Ended,
}

/// We sent CANCEL.
#[derive(Debug, Clone, Copy)]
struct Canceling {
    cause: CancelCause,
    /// Give up then if the INVITE has still no final response.
    guard_at: Instant,
}

/// The machine's timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// No final response before the ring timeout: CANCEL.
    Ring,
    /// Neither the CANCEL nor the INVITE was answered: give up.
    CancelGuard,
    /// Session timer: send the refresh.
    Refresh,
    /// Session timer: the session expired, BYE.
    Expire,
    /// A transfer's outcome is reported at the latest now.
    ReferDecided,
    /// No final NOTIFY for a REFER in time.
    ReferDeadline,
}

/// One INVITE dialog's state and decisions (see the module docs).
#[derive(Debug)]
pub(crate) struct LegMachine {
    call_id: String,
    direction: LegDirection,
    phase: Phase,
    local_media: Option<LocalMedia>,
    session_timer: Option<SessionTimer>,
    /// Armed while answered.
    session: SessionDeadlines,
    session_id: u64,
    session_version: u64,
    /// Outbound: a provisional response other than 100 Trying came (the INVITE reached a UA).
    provisional: bool,
    /// Outbound: `Ringing` was reported.
    rang: bool,
    /// The peer holds the call (its last offer was sendonly or inactive).
    on_hold: bool,
    /// The SRTP keys the answered call's media uses (None: plain RTP); a re-offer
    /// with new keys replaces them (see [`sdp::answer_reoffer`]).
    srtp_keys: Option<SrtpKeys>,
    /// Inbound: our 200 is being sent with this media; the answer's outcome follows.
    answering: Option<(LocalMedia, NegotiatedMedia)>,
    refer: ReferBase,
    refer_timeout: Duration,
    transfers: Transfers,
    actions: VecDeque<Action>,
}

impl LegMachine {
    pub fn new(setup: LegSetup, now: Instant) -> LegMachine {
        let phase = match setup.direction {
            LegDirection::Outbound => Phase::Calling {
                ring_at: setup.ring_timeout.map(|t| now + t),
                cancel: None,
            },
            LegDirection::Inbound => Phase::Offered,
        };
        LegMachine {
            call_id: setup.call_id,
            direction: setup.direction,
            phase,
            local_media: setup.local_media,
            session_timer: setup.session_timer,
            session: SessionDeadlines::default(),
            session_id: setup.session_id,
            session_version: setup.session_version,
            provisional: false,
            rang: false,
            on_hold: false,
            srtp_keys: None,
            answering: None,
            refer: setup.refer,
            refer_timeout: setup.refer_timeout,
            transfers: Transfers::default(),
            actions: VecDeque::new(),
        }
    }

    /// True once `Ended` has been emitted: the shell stops feeding the machine.
    pub fn is_ended(&self) -> bool {
        matches!(self.phase, Phase::Ended)
    }

    /// The next thing to do, in order. Once drained the queue gives its buffer back: a
    /// call acts only a few times in its life, and the machine lives as long as the call.
    pub fn poll_action(&mut self) -> Option<Action> {
        let next = self.actions.pop_front();
        if next.is_none() && self.actions.capacity() > 0 {
            self.actions = VecDeque::new();
        }
        next
    }

    /// When [`LegMachine::handle_timeout`] is due next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_due().map(|(at, _)| at)
    }

    /// Fires every timer due by `now`, earliest first.
    pub fn handle_timeout(&mut self, now: Instant) {
        while !self.is_ended()
            && let Some((at, due)) = self.next_due()
            && at <= now
        {
            self.fire(due, now);
        }
    }

    pub fn handle_event(&mut self, input: Input, now: Instant) {
        if self.is_ended() {
            return;
        }
        match input {
            Input::Invite(outcome) => self.on_invite_outcome(outcome, now),
            Input::Provisional { code, sdp } => self.on_provisional(code, sdp),
            Input::Request(req) => self.on_request(req, now),
            Input::AnswerSent => self.decided(|t| t.on_answer_sent()),
            Input::Terminated(t) => self.on_terminated(t),
            Input::DialogGone => {
                // While calling, the INVITE task still reports the final response.
                if !matches!(self.phase, Phase::Calling { .. }) {
                    self.end(self.status_if_ended(), None, "dialog closed", Party::Local);
                }
            }
            Input::Ring => self.push(Action::Ringing),
            Input::Answer {
                local,
                offer,
                supports_timer,
            } => self.on_answer(local, &offer, supports_timer),
            Input::Accepted(result) => self.on_accepted(result, now),
            Input::Reject { code, reason } => {
                self.push(Action::Reject {
                    code,
                    reason: reason.clone(),
                });
                let reason = reason.unwrap_or_else(|| "rejected by engine".into());
                self.end(CallStatus::Rejected, Some(code), reason, Party::Local);
            }
            Input::Hangup => self.on_hangup(now),
            Input::Refer { id, target } => self.on_refer(id, &target, now),
            Input::ReferResponse { id, result } => self.decided(|t| t.on_response(id, result)),
            Input::ControllerGone => match self.phase {
                // Nobody can hang up any more, so do it now; the dialog reports the end.
                Phase::Answered => self.push(Action::Bye),
                Phase::Calling { .. } => self.push(Action::Cancel { wait: true }),
                Phase::Offered => self.push(Action::Reject {
                    code: 480,
                    reason: None,
                }),
                Phase::Ended => {}
            },
        }
    }

    fn push(&mut self, action: Action) {
        self.actions.push_back(action);
    }

    fn emit(&mut self, event: LegEvent) {
        self.push(Action::Emit(event));
    }

    fn decided(&mut self, f: impl FnOnce(&mut Transfers) -> Option<Decision>) {
        if let Some((id, outcome)) = f(&mut self.transfers) {
            self.push(Action::ReferOutcome { id, outcome });
        }
    }

    fn uas(&self) -> bool {
        self.direction == LegDirection::Inbound
    }

    /// How an end that no response explains is reported.
    fn status_if_ended(&self) -> CallStatus {
        if matches!(self.phase, Phase::Answered) {
            CallStatus::Answered
        } else {
            CallStatus::Failed
        }
    }

    /// Reports `Ended` (always the last event) and settles the transfers.
    fn end(&mut self, status: CallStatus, code: Option<u16>, reason: impl Into<String>, by: Party) {
        self.emit(LegEvent::Ended(EndInfo {
            call_status: status,
            sip_code: code,
            reason: reason.into(),
            by,
        }));
        self.phase = Phase::Ended;
        let decisions: Vec<Decision> = self.transfers.finish().collect();
        for (id, outcome) in decisions {
            self.push(Action::ReferOutcome { id, outcome });
        }
    }

    fn arm_session_timer(&mut self, now: Instant) {
        if let Some(st) = self.session_timer {
            self.session = st.deadlines(now);
        }
    }

    /// Session-Expires (and Require: timer when the request supports it) for a 2xx.
    fn timer_reply(&self, sdp: Option<String>, supports_timer: bool) -> Reply {
        Reply {
            code: 200,
            session_expires: self.session_timer.map(|st| st.header_value(self.uas())),
            require_timer: self.session_timer.is_some() && supports_timer,
            sdp,
        }
    }

    fn next_due(&self) -> Option<(Instant, Due)> {
        let (ring, guard) = match &self.phase {
            Phase::Calling { ring_at, cancel } => (
                ring_at.filter(|_| cancel.is_none()),
                cancel.map(|c| c.guard_at),
            ),
            _ => (None, None),
        };
        let answered = matches!(self.phase, Phase::Answered);
        [
            ring.map(|at| (at, Due::Ring)),
            guard.map(|at| (at, Due::CancelGuard)),
            self.session
                .refresh_at
                .filter(|_| answered)
                .map(|at| (at, Due::Refresh)),
            self.session
                .expire_at
                .filter(|_| answered)
                .map(|at| (at, Due::Expire)),
            self.transfers
                .decided_at()
                .map(|at| (at, Due::ReferDecided)),
            self.transfers.deadline().map(|at| (at, Due::ReferDeadline)),
        ]
        .into_iter()
        .flatten()
        .min_by_key(|(at, _)| *at)
    }

    fn fire(&mut self, due: Due, now: Instant) {
        match due {
            Due::Ring if !self.provisional => {
                // Nothing but (at most) 100 Trying within the ring timeout: a CANCEL may not
                // be sent before a provisional response (RFC 3261 9.1), and waiting for
                // Timer B only delays what is known: the call failed.
                info!(call_id = %self.call_id, "no response within the ring timeout");
                self.end(
                    CallStatus::Failed,
                    None,
                    "no response from the gateway within the ring timeout",
                    Party::Local,
                );
            }
            Due::Ring => {
                info!(call_id = %self.call_id, "ring timeout, sending CANCEL");
                self.cancel(CancelCause::RingTimeout, now);
            }
            Due::CancelGuard => {
                let status = canceled_status(self.cancel_cause());
                self.end(status, None, "no response to CANCEL", Party::Local);
            }
            Due::Refresh => {
                self.session.refresh_at = None;
                if let Some(st) = self.session_timer {
                    self.push(Action::Refresh {
                        session_expires: st.header_value(self.uas()),
                    });
                    self.session = st.deadlines(now);
                }
            }
            Due::Expire => {
                info!(call_id = %self.call_id, "session timer expired, sending BYE");
                self.push(Action::Bye);
                self.end(
                    CallStatus::Answered,
                    None,
                    "session timer expired",
                    Party::Local,
                );
            }
            Due::ReferDecided => self.decided(Transfers::grace_over),
            Due::ReferDeadline => self.decided(Transfers::deadline_passed),
        }
    }

    /// Inbound: answer the INVITE's offer with `local`.
    fn on_answer(&mut self, local: LocalMedia, offer: &str, supports_timer: bool) {
        self.session_version += 1;
        let answer = SessionDescription::parse(offer)
            .and_then(|sd| sdp::answer_offer(&sd, &local, self.session_id, self.session_version))
            .map_err(|e| e.to_string());
        match answer {
            Ok((body, neg)) => {
                let reply = self.timer_reply(Some(body), supports_timer);
                self.answering = Some((local, neg));
                self.push(Action::Accept(reply));
            }
            Err(e) => {
                self.push(Action::Reject {
                    code: 488,
                    reason: None,
                });
                self.push(Action::AnswerResult(Err(e)));
            }
        }
    }

    fn on_accepted(&mut self, result: Result<(), String>, now: Instant) {
        let Some((local, neg)) = self.answering.take() else {
            return;
        };
        match result {
            Ok(()) => {
                self.phase = Phase::Answered;
                self.on_hold = neg.remote_direction.is_hold();
                self.srtp_keys = neg.srtp;
                self.local_media = Some(local);
                self.arm_session_timer(now);
                self.emit(LegEvent::Answered(neg.clone()));
                self.push(Action::AnswerResult(Ok(neg)));
            }
            Err(e) => self.push(Action::AnswerResult(Err(e))),
        }
    }

    /// CANCEL before answer (outbound), 480 before answer (inbound), BYE after.
    fn on_hangup(&mut self, now: Instant) {
        match self.phase {
            Phase::Answered => {
                self.push(Action::Bye);
                self.end(CallStatus::Answered, None, "hangup", Party::Local);
            }
            Phase::Calling { .. } => self.cancel(CancelCause::Hangup, now),
            Phase::Offered => {
                self.push(Action::Reject {
                    code: 480,
                    reason: None,
                });
                let reason = "hangup before answer";
                self.end(CallStatus::Canceled, Some(480), reason, Party::Local);
            }
            Phase::Ended => {}
        }
    }
}

/// The status of an outbound call that ended after our CANCEL.
fn canceled_status(cause: Option<CancelCause>) -> CallStatus {
    match cause {
        Some(CancelCause::RingTimeout) => CallStatus::NoAnswer,
        _ => CallStatus::Canceled,
    }
}

#[cfg(test)]
mod tests;
