//! The outbound INVITE: provisional responses, the ring timeout's CANCEL and the final
//! response.

use std::time::Instant;

use tracing::warn;

use super::{CANCEL_GUARD, Canceling, LegMachine, Phase, canceled_status};
use crate::leg::io::{Action, InviteOutcome};
use crate::leg::session_timer::SessionTimer;
use crate::leg::{LegDirection, LegEvent, Party};
use crate::sdp::{self, SessionDescription};
use crate::status::{CallStatus, CancelCause};

impl LegMachine {
    pub(super) fn cancel_cause(&self) -> Option<CancelCause> {
        match &self.phase {
            Phase::Calling {
                cancel: Some(c), ..
            } => Some(c.cause),
            _ => None,
        }
    }

    /// Sends CANCEL (once) for an INVITE still waiting for its final response.
    pub(super) fn cancel(&mut self, cause: CancelCause, now: Instant) {
        if let Phase::Calling { cancel, .. } = &mut self.phase
            && cancel.is_none()
        {
            *cancel = Some(Canceling {
                cause,
                guard_at: now + CANCEL_GUARD,
            });
            self.push(Action::Cancel { wait: false });
        }
    }

    pub(super) fn on_invite_outcome(&mut self, outcome: InviteOutcome, now: Instant) {
        if !matches!(self.phase, Phase::Calling { .. }) {
            return;
        }
        let cause = self.cancel_cause();
        match outcome {
            InviteOutcome::Final(resp) if (200..300).contains(&resp.code) => {
                let code = resp.code;
                if cause.is_some() {
                    // rsipstack ACKs and BYEs a 2xx that crossed our CANCEL.
                    let status = canceled_status(cause);
                    let reason = "answered after cancel; hung up";
                    self.end(status, Some(code), reason, Party::Local);
                    return;
                }
                let neg = self
                    .local_media
                    .as_ref()
                    .ok_or_else(|| "no local media".to_string())
                    .and_then(|local| {
                        SessionDescription::parse(&resp.sdp)
                            .and_then(|sd| sdp::negotiated_from_answer(&sd, local))
                            .map_err(|e| e.to_string())
                    });
                match neg {
                    Ok(neg) => {
                        self.phase = Phase::Answered;
                        self.srtp_keys = neg.srtp;
                        if let Some(v) = &resp.session_expires {
                            self.session_timer = SessionTimer::from_header(v, false);
                            self.arm_session_timer(now);
                        }
                        self.emit(LegEvent::Answered(neg));
                    }
                    Err(e) => {
                        warn!(call_id = %self.call_id, error = %e, "2xx without usable SDP answer; hanging up");
                        self.push(Action::Bye);
                        let reason = format!("unusable SDP answer: {e}");
                        self.end(CallStatus::Failed, Some(code), reason, Party::Local);
                    }
                }
            }
            InviteOutcome::Final(resp) => {
                let code = resp.code;
                let status = match CallStatus::from_final_response(code, cause) {
                    // The transaction's own 408 (Timer B: not even 100 Trying came):
                    // nobody was reached.
                    CallStatus::NoAnswer
                        if code == 408 && !self.provisional && resp.made_locally =>
                    {
                        CallStatus::Failed
                    }
                    s => s,
                };
                let by = if code == 487 && cause.is_some() {
                    Party::Local
                } else {
                    Party::Remote
                };
                self.end(status, Some(code), reason_text(&resp.reason, code), by);
            }
            InviteOutcome::NoFinal => {
                let status = match cause {
                    None => CallStatus::Failed,
                    cause => canceled_status(cause),
                };
                self.end(status, None, "no final response", Party::Local);
            }
            InviteOutcome::Error { code, message } => {
                let status = match code {
                    Some(c) => CallStatus::from_final_response(c, cause),
                    None if cause.is_some() => CallStatus::Canceled,
                    None => CallStatus::Failed,
                };
                self.end(status, code, message, Party::Local);
            }
            InviteOutcome::TaskFailed(e) => {
                let reason = format!("invite task failed: {e}");
                self.end(CallStatus::Failed, None, reason, Party::Local);
            }
        }
    }

    pub(super) fn on_provisional(&mut self, code: u16, body: Option<String>) {
        if self.direction != LegDirection::Outbound {
            return;
        }
        let neg = body
            .zip(self.local_media.as_ref())
            .and_then(|(text, local)| {
                SessionDescription::parse(&text)
                    .ok()
                    .and_then(|sd| sdp::negotiated_from_answer(&sd, local).ok())
            });
        self.provisional = true;
        if code == 180 && !self.rang {
            self.rang = true;
            self.emit(LegEvent::Ringing);
        }
        if let Some(neg) = neg {
            self.emit(LegEvent::EarlyMedia(neg));
        }
    }
}

/// The reason phrase without a leading status code ("486 Busy Here" -> "Busy Here").
fn reason_text(phrase: &str, code: u16) -> String {
    let p = phrase.trim();
    let p = p.strip_prefix(&code.to_string()).unwrap_or(p).trim();
    if p.is_empty() {
        format!("SIP {code}")
    } else {
        p.to_string()
    }
}
