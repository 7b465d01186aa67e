//! What goes into and comes out of the leg's state machine: plain data, no SIP objects.
//!
//! The shell extracts [`Input`]s from rsipstack's responses, dialog states and the
//! controller's commands, and carries out the machine's [`Action`]s on the dialog.

use rsipstack::sip::Uri;

use super::refer::ReferId;
use super::{LegEvent, ReferOutcome};
use crate::sdp::{LocalMedia, NegotiatedMedia};

/// Something that happened to the leg.
#[derive(Debug)]
pub(crate) enum Input {
    /// Outbound: how the INVITE transaction ended.
    Invite(InviteOutcome),
    /// Outbound: a provisional response other than 100 (with its SDP body, if any).
    Provisional { code: u16, sdp: Option<String> },
    /// An in-dialog request from the peer. The machine answers it with one
    /// [`Action::Respond`] while handling this input.
    Request(PeerRequest),
    /// The dialog is confirmed again: our answer to an in-dialog request went out.
    AnswerSent,
    /// The dialog ended (rsipstack's `Terminated`).
    Terminated(Termination),
    /// The dialog's state queue closed.
    DialogGone,

    /// Controller: send 180 Ringing (inbound).
    Ring,
    /// Controller: answer the INVITE's `offer` with `local` (inbound).
    Answer {
        local: LocalMedia,
        offer: String,
        /// The INVITE carried `Supported: timer`.
        supports_timer: bool,
    },
    /// The result of [`Action::Accept`].
    Accepted(Result<(), String>),
    /// Controller: reject the INVITE (inbound).
    Reject { code: u16, reason: Option<String> },
    /// Controller: end the call.
    Hangup,
    /// Controller: blind transfer to `target` (a number or a URI).
    Refer { id: ReferId, target: String },
    /// The final response to our REFER `id` (its status, or why there is none).
    ReferResponse {
        id: ReferId,
        result: Result<u16, String>,
    },
    /// Every controller handle is gone: nobody can end the call any more.
    ControllerGone,
}

/// How the outbound INVITE transaction ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InviteOutcome {
    Final(FinalResponse),
    /// The transaction ended without a final response.
    NoFinal,
    /// The transaction failed; `code` is the status behind a dialog error.
    Error {
        code: Option<u16>,
        message: String,
    },
    /// The INVITE task itself failed.
    TaskFailed(String),
}

/// A final response to our INVITE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FinalResponse {
    pub code: u16,
    /// The reason phrase, else the status as text.
    pub reason: String,
    /// The body (the SDP answer of a 2xx).
    pub sdp: String,
    pub session_expires: Option<String>,
    /// Made by our own transaction layer (Timer B), not received from the network.
    pub made_locally: bool,
}

/// An in-dialog request from the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PeerRequest {
    /// re-INVITE or UPDATE.
    Update(UpdateRequest),
    /// INFO, with the DTMF digit it carries.
    Info {
        dtmf: Option<char>,
    },
    Options,
    /// MESSAGE or PUBLISH.
    NotAllowed,
    /// REFER: the peer wants us to transfer.
    Refer,
    /// NOTIFY, with the sipfrag status of a REFER progress report and whether the
    /// subscription ended.
    Notify {
        refer: Option<(u16, bool)>,
    },
}

/// A re-INVITE or UPDATE from the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UpdateRequest {
    /// re-INVITE (an UPDATE otherwise).
    pub invite: bool,
    pub session_expires: Option<String>,
    /// The request carried `Supported: timer`.
    pub supports_timer: bool,
    /// The body; empty when the request carries no offer.
    pub sdp: String,
}

/// Why rsipstack ended the dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Termination {
    /// The caller's CANCEL (inbound).
    CallerCanceled,
    /// A BYE, from either side.
    Bye,
    /// No ACK or no response.
    Timeout,
    /// We declined the INVITE.
    Declined,
    /// Anything else, described.
    Other(String),
}

/// Something for the shell to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Deliver an event to the leg's owner.
    Emit(LegEvent),
    /// 180 Ringing to the INVITE.
    Ringing,
    /// 200 to the INVITE with this answer; report the result as [`Input::Accepted`].
    Accept(Reply),
    /// A final error response to the INVITE.
    Reject { code: u16, reason: Option<String> },
    /// CANCEL the INVITE: in the background, or (`wait`) before going on.
    Cancel { wait: bool },
    /// BYE, before going on.
    Bye,
    /// Session refresh (UPDATE with this Session-Expires), in the background.
    Refresh { session_expires: String },
    /// Send REFER `id`; report its final response as [`Input::ReferResponse`].
    Refer { id: ReferId, target: Uri },
    /// Answer the in-dialog request of the input being handled.
    Respond(Reply),
    /// Tell the controller how its answer went.
    AnswerResult(Result<NegotiatedMedia, String>),
    /// Tell the controller how transfer `id` went.
    ReferOutcome { id: ReferId, outcome: ReferOutcome },
}

/// A response we send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub code: u16,
    /// Session-Expires to send.
    pub session_expires: Option<String>,
    /// Send `Require: timer` (the request supports session timers and one is running).
    pub require_timer: bool,
    /// An SDP body.
    pub sdp: Option<String>,
}

impl Reply {
    /// A response with a status and nothing else.
    pub fn plain(code: u16) -> Reply {
        Reply {
            code,
            session_expires: None,
            require_timer: false,
            sdp: None,
        }
    }
}
