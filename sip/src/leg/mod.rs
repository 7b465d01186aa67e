//! Call legs: the engine-facing handle ([`CallLeg`]) and what drives one INVITE dialog.
//!
//! Each leg is a sans-IO state machine ([`machine::LegMachine`]: ring timeout and CANCEL,
//! answer, session timers, hold, INFO DTMF, transfer, the end) inside a thin tokio shell
//! ([`driver::Driver`]), one task per leg, that owns the rsipstack dialog and its state
//! queue, feeds the machine and carries out its actions. The engine talks to the task
//! through commands, so the leg is never blocked by the engine and the engine never touches
//! SIP objects.
//!
//! Files: `io` (the machine's inputs and actions), `machine`, `driver`, `session_timer`
//! (RFC 4028), `refer` (REFER/NOTIFY and transfer outcomes), `info` (INFO DTMF).

use std::sync::{Arc, OnceLock};

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use rsipstack::sip::Header;
use tokio::sync::oneshot;

use crate::sdes::SrtpKeys;
use crate::sdp::{LocalMedia, NegotiatedMedia};
use crate::status::CallStatus;
use crate::takeover::DialogRecord;

mod driver;
mod info;
mod io;
mod machine;
mod refer;
mod session_timer;

pub(crate) use driver::Driver;
pub(crate) use machine::{LegMachine, LegSetup};
pub(crate) use refer::ReferBase;
pub(crate) use session_timer::SessionTimer;

/// Which way the leg was set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegDirection {
    Inbound,
    Outbound,
}

/// Who ended the call; `local` or `remote` as text (the saved call history's
/// `hangup.by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Party {
    /// This engine (hangup, ring timeout, session timer).
    Local,
    /// The peer (BYE, CANCEL, final error response).
    Remote,
}

/// How a leg ended: the call_status vocabulary plus the SIP detail behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndInfo {
    pub call_status: CallStatus,
    /// The final SIP code behind the status (None when no SIP response was involved).
    pub sip_code: Option<u16>,
    /// Reason phrase or local explanation.
    pub reason: String,
    pub by: Party,
}

/// Outcome of a blind transfer (REFER), from the NOTIFY sipfrag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReferOutcome {
    /// The transfer target answered (sipfrag 2xx).
    Succeeded { sip_code: u16 },
    /// REFER refused, sipfrag final failure, or no final NOTIFY in time (sip_code None).
    Failed {
        sip_code: Option<u16>,
        reason: String,
    },
}

/// What happens on a leg, in order. `Ended` is always the last event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LegEvent {
    /// 180 received (outbound).
    Ringing,
    /// 183/180 with SDP: early media can flow to `remote_rtp`.
    EarlyMedia(NegotiatedMedia),
    /// The call is up; media parameters are final.
    Answered(NegotiatedMedia),
    /// The peer put us on hold (sendonly/inactive re-INVITE).
    Hold(NegotiatedMedia),
    /// The peer took us off hold.
    Unhold(NegotiatedMedia),
    /// A re-INVITE changed media without a hold change (new address or codec).
    MediaChanged(NegotiatedMedia),
    /// A re-offer brought new SRTP keys (RFC 4568 §7.1.4) and our answer a fresh key of
    /// ours: the media re-keys with these. Follows the re-offer's `Hold`, `Unhold` or
    /// `MediaChanged`; a re-offer keeping the keys brings none.
    SrtpRekeyed(SrtpKeys),
    /// A DTMF digit carried by SIP INFO (application/dtmf-relay or application/dtmf).
    Dtmf(char),
    /// NOTIFY progress of our REFER (sipfrag status code).
    TransferProgress {
        sip_code: u16,
    },
    Ended(EndInfo),
}

pub(crate) enum Command {
    Ring,
    Answer {
        local: LocalMedia,
        reply: oneshot::Sender<Result<NegotiatedMedia, String>>,
    },
    Reject {
        code: u16,
        reason: Option<String>,
    },
    Hangup,
    Refer {
        target: String,
        headers: Vec<Header>,
        reply: oneshot::Sender<ReferOutcome>,
    },
}

/// A cheap, cloneable handle to act on a leg from anywhere.
#[derive(Clone)]
pub struct LegController {
    cmd: UnboundedSender<Command>,
}

impl LegController {
    /// End the call: CANCEL before answer (outbound), 480 before answer (inbound), BYE after.
    /// The leg reports `Ended` when done. Idempotent.
    pub fn hangup(&self) {
        let _ = self.cmd.unbounded_send(Command::Hangup);
    }

    /// Blind transfer: send REFER to `target` (a phone number, formatted for the leg's trunk,
    /// or a full `sip:` URI) with extra headers on the REFER, and wait for the final NOTIFY.
    /// The leg stays up; the engine hangs up after a success.
    pub async fn refer(&self, target: &str, headers: &[(String, String)]) -> ReferOutcome {
        let headers = match crate::headers::custom_headers(headers) {
            Ok(h) => h,
            Err(e) => {
                return ReferOutcome::Failed {
                    sip_code: None,
                    reason: e.to_string(),
                };
            }
        };
        let (tx, rx) = oneshot::channel();
        if self
            .cmd
            .unbounded_send(Command::Refer {
                target: target.to_string(),
                headers,
                reply: tx,
            })
            .is_err()
        {
            return ReferOutcome::Failed {
                sip_code: None,
                reason: "call has ended".into(),
            };
        }
        rx.await.unwrap_or(ReferOutcome::Failed {
            sip_code: None,
            reason: "call has ended".into(),
        })
    }

    pub(crate) fn send(&self, c: Command) -> bool {
        self.cmd.unbounded_send(c).is_ok()
    }
}

/// One call leg (inbound or outbound). Drop does not end the call; call [`CallLeg::hangup`].
pub struct CallLeg {
    pub(crate) call_id: String,
    pub(crate) direction: LegDirection,
    pub(crate) trunk: String,
    pub(crate) controller: LegController,
    pub(crate) events: UnboundedReceiver<LegEvent>,
    /// The dialog as it stood when the call was answered (set by the leg's driver before
    /// it reports `Answered`).
    pub(crate) answered: AnsweredDialog,
}

/// Where a leg's driver leaves the [`DialogRecord`] of the answered dialog for the leg.
pub(crate) type AnsweredDialog = Arc<OnceLock<DialogRecord>>;

impl std::fmt::Debug for CallLeg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallLeg")
            .field("call_id", &self.call_id)
            .field("direction", &self.direction)
            .field("trunk", &self.trunk)
            .finish()
    }
}

impl CallLeg {
    /// The SIP Call-ID (stable for the life of the leg).
    pub fn call_id(&self) -> &str {
        &self.call_id
    }
    pub fn direction(&self) -> LegDirection {
        self.direction
    }
    /// Name of the trunk the leg runs on.
    pub fn trunk(&self) -> &str {
        &self.trunk
    }
    /// The next event; `None` after `Ended` has been delivered and the driver finished.
    pub async fn next_event(&mut self) -> Option<LegEvent> {
        self.events.next().await
    }
    pub fn controller(&self) -> LegController {
        self.controller.clone()
    }
    /// The dialog as it stood at the answer, for another process to end it
    /// ([`crate::SipStack::end_dialog`]); None before the answer.
    pub fn dialog_record(&self) -> Option<&DialogRecord> {
        self.answered.get()
    }
    pub fn hangup(&self) {
        self.controller.hangup()
    }
    pub async fn refer(&self, target: &str, headers: &[(String, String)]) -> ReferOutcome {
        self.controller.refer(target, headers).await
    }
}

pub(crate) fn new_leg(
    call_id: String,
    direction: LegDirection,
    trunk: String,
) -> (
    CallLeg,
    UnboundedReceiver<Command>,
    UnboundedSender<LegEvent>,
) {
    // futures' queues allocate per message; a tokio channel would allocate 32 slots up
    // front, and a leg sees a handful of commands and events.
    let (cmd_tx, cmd_rx) = unbounded();
    let (ev_tx, ev_rx) = unbounded();
    (
        CallLeg {
            call_id,
            direction,
            trunk,
            controller: LegController { cmd: cmd_tx },
            events: ev_rx,
            answered: AnsweredDialog::default(),
        },
        cmd_rx,
        ev_tx,
    )
}
