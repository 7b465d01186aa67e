//! The tokio shell around [`LegMachine`]: one task per leg owns the rsipstack dialog, its
//! state queue and the controller's command queue, turns what arrives into machine inputs,
//! carries out the machine's actions and sleeps until the machine's next deadline.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use rsipstack::dialog::dialog::{DialogState, TerminatedReason, TransactionHandle};
use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::dialog::invitation::InviteAsyncResult;
use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::sip::{Header, HeadersExt, Method, Response, StatusCode};
use tokio::sync::oneshot;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::{Instant, sleep_until};
use tracing::debug;

use super::info::dtmf_from_info;
use super::io::{
    Action, FinalResponse, Input, InviteOutcome, PeerRequest, Reply, Termination, UpdateRequest,
};
use super::machine::LegMachine;
use super::refer::{ReferId, refer_notify_status};
use super::{Command, LegEvent, ReferOutcome};
use crate::outbound::Registered;
use crate::sdp::NegotiatedMedia;
use crate::states::LegStates;

pub(crate) struct Driver {
    pub dialog: InviteDialog,
    pub dialog_layer: Arc<DialogLayer>,
    pub state_rx: LegStates,
    pub cmd_rx: UnboundedReceiver<Command>,
    pub events: UnboundedSender<LegEvent>,
    /// Outbound only: the INVITE transaction task.
    pub invite: Option<JoinHandle<InviteAsyncResult>>,
    /// Outbound only: the dialog's entry in the stack's table, removed when the leg ends.
    pub outbound: Option<Registered>,
    pub machine: LegMachine,
    /// Filled with the dialog's record when the call is answered (see [`CallLeg`]).
    ///
    /// [`CallLeg`]: super::CallLeg
    pub answered: super::AnsweredDialog,
}

/// What woke the driver.
enum Wake {
    Invite(Result<InviteAsyncResult, JoinError>),
    Timer,
    ReferResponse(ReferId, Result<u16, String>),
    Command(Option<Command>),
    State(Option<DialogState>),
}

/// What the shell holds for the machine: whom to answer once it has decided.
#[derive(Default)]
struct Owed {
    /// The in-dialog request being handled.
    request: Option<TransactionHandle>,
    /// The controller waiting for its answer to go out.
    answer: Option<oneshot::Sender<Result<NegotiatedMedia, String>>>,
    /// Transfers: their callers and the extra headers for the REFER.
    refers: Vec<(ReferId, oneshot::Sender<ReferOutcome>, Vec<Header>)>,
    next_refer: ReferId,
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

impl Driver {
    /// Drives the dialog to its end. The awaits that happen once or rarely (BYE, a waited
    /// CANCEL, an answer to an in-dialog request) are boxed, so this task, alive for the
    /// whole call, does not carry room for their state.
    pub async fn run(mut self) {
        let (refer_tx, mut refer_rx) = unbounded();
        let mut initial_invite = self.invite.take();
        let mut cmd_open = true;
        let mut state_open = true;
        let mut owed = Owed::default();
        while !self.machine.is_ended() {
            // One sleep, until the machine's earliest deadline: a `Sleep` per timer would
            // each take room in this task, which lives as long as the call.
            let timeout = self.machine.poll_timeout();
            // Biased, dialog states first: a provisional response (early media, ringing)
            // that is ready together with the final response is handled before it, in
            // the order the peer sent them.
            let wake = tokio::select! {
                biased;
                state = self.state_rx.recv(), if state_open => Wake::State(state),
                res = async { initial_invite.as_mut().expect("guarded").await }, if initial_invite.is_some() => {
                    initial_invite = None;
                    Wake::Invite(res)
                }
                Some((id, r)) = refer_rx.next() => Wake::ReferResponse(id, r),
                cmd = self.cmd_rx.next(), if cmd_open => Wake::Command(cmd),
                _ = sleep_until(timeout.map_or_else(far_future, Instant::from_std)), if timeout.is_some() => Wake::Timer,
            };
            let input = match wake {
                Wake::Invite(res) => Some(Input::Invite(invite_outcome(res))),
                Wake::Timer => {
                    self.machine.handle_timeout(now());
                    None
                }
                Wake::ReferResponse(id, result) => Some(Input::ReferResponse { id, result }),
                Wake::Command(None) => {
                    // Every handle dropped; keep running until the dialog reports its end.
                    cmd_open = false;
                    Some(Input::ControllerGone)
                }
                Wake::Command(Some(cmd)) => Some(self.command(cmd, &mut owed)),
                Wake::State(None) => {
                    state_open = false;
                    Some(Input::DialogGone)
                }
                Wake::State(Some(state)) => dialog_state(state, &mut owed),
            };
            if let Some(input) = input {
                self.machine.handle_event(input, now());
            }
            self.carry_out(&mut owed, &refer_tx).await;
        }
        let id = self.dialog.id();
        self.dialog_layer.remove_dialog(&id);
        self.outbound = None;
        debug!(call_id = %id.call_id, "leg driver finished");
    }

    fn command(&self, cmd: Command, owed: &mut Owed) -> Input {
        match cmd {
            Command::Ring => Input::Ring,
            Command::Answer { local, reply } => {
                owed.answer = Some(reply);
                let req = self.dialog.initial_request();
                Input::Answer {
                    local,
                    offer: String::from_utf8_lossy(&req.body).into_owned(),
                    supports_timer: req.header_contains_token("Supported", "timer"),
                }
            }
            Command::Reject { code, reason } => Input::Reject { code, reason },
            Command::Hangup => Input::Hangup,
            Command::Refer {
                target,
                headers,
                reply,
            } => {
                let id = owed.next_refer;
                owed.next_refer += 1;
                owed.refers.push((id, reply, headers));
                Input::Refer { id, target }
            }
        }
    }

    /// Carries out what the machine decided, in order.
    async fn carry_out(
        &mut self,
        owed: &mut Owed,
        refer_results: &UnboundedSender<(ReferId, Result<u16, String>)>,
    ) {
        while let Some(action) = self.machine.poll_action() {
            match action {
                Action::Emit(ev) => {
                    if matches!(ev, LegEvent::Answered(_)) {
                        let _ = self
                            .answered
                            .set(crate::takeover::DialogRecord::of(&self.dialog));
                    }
                    let _ = self.events.unbounded_send(ev);
                }
                Action::Ringing => {
                    let _ = self.dialog.ringing(None, None);
                }
                Action::Accept(reply) => {
                    let mut headers = vec![Header::ContentType("application/sdp".into())];
                    headers.extend(timer_headers(&reply));
                    let body = reply.sdp.map(String::into_bytes);
                    let result = self
                        .dialog
                        .accept(Some(headers), body)
                        .map_err(|e| e.to_string());
                    self.machine.handle_event(Input::Accepted(result), now());
                }
                Action::Reject { code, reason } => {
                    let _ = self.dialog.reject(Some(StatusCode::from(code)), reason);
                }
                Action::Cancel { wait: true } => {
                    let _ = Box::pin(self.dialog.cancel()).await;
                }
                Action::Cancel { wait: false } => {
                    let d = self.dialog.clone();
                    tokio::spawn(async move {
                        if let Err(e) = d.cancel().await {
                            debug!(error = %e, "cancel");
                        }
                    });
                }
                Action::Bye => {
                    let _ = Box::pin(self.dialog.bye()).await;
                }
                Action::Refresh { session_expires } => {
                    let d = self.dialog.clone();
                    tokio::spawn(async move {
                        let h = vec![Header::Other("Session-Expires".into(), session_expires)];
                        if let Err(e) = d.update(Some(h), None).await {
                            debug!(error = %e, "session refresh failed");
                        }
                    });
                }
                Action::Refer { id, target } => {
                    let headers = owed
                        .refers
                        .iter_mut()
                        .find(|(i, ..)| *i == id)
                        .map(|(.., h)| std::mem::take(h))
                        .unwrap_or_default();
                    let d = self.dialog.clone();
                    let results = refer_results.clone();
                    tokio::spawn(async move {
                        let r = match d.refer(target, Some(headers), None).await {
                            Ok(Some(resp)) => Ok(u16::from(resp.status_code)),
                            Ok(None) => Err("no response to REFER".to_string()),
                            Err(e) => Err(e.to_string()),
                        };
                        let _ = results.unbounded_send((id, r));
                    });
                }
                Action::Respond(reply) => {
                    if let Some(handle) = owed.request.take() {
                        Box::pin(respond(handle, reply)).await;
                    }
                }
                Action::AnswerResult(result) => {
                    if let Some(tx) = owed.answer.take() {
                        let _ = tx.send(result);
                    }
                }
                Action::ReferOutcome { id, outcome } => {
                    if let Some(i) = owed.refers.iter().position(|(r, ..)| *r == id) {
                        let (_, tx, _) = owed.refers.swap_remove(i);
                        let _ = tx.send(outcome);
                    }
                }
            }
        }
    }
}

/// Session-Expires and Require for a reply.
fn timer_headers(reply: &Reply) -> Vec<Header> {
    let mut out = Vec::new();
    if let Some(v) = &reply.session_expires {
        out.push(Header::Other("Session-Expires".into(), v.clone()));
        if reply.require_timer {
            out.push(Header::Other("Require".into(), "timer".into()));
        }
    }
    out
}

async fn respond(handle: TransactionHandle, reply: Reply) {
    let mut headers = timer_headers(&reply);
    if reply.sdp.is_some() {
        headers.push(Header::ContentType("application/sdp".into()));
    }
    let headers = (!headers.is_empty()).then_some(headers);
    let body = reply.sdp.map(String::into_bytes);
    let _ = handle
        .respond(StatusCode::from(reply.code), headers, body)
        .await;
}

/// The input a dialog state means, if any; keeps the handle of a request to answer.
fn dialog_state(state: DialogState, owed: &mut Owed) -> Option<Input> {
    let request = match state {
        DialogState::Early(_, resp) => {
            let sdp = (!resp.body.is_empty()).then(|| String::from_utf8_lossy(&resp.body).into());
            return Some(Input::Provisional {
                code: u16::from(resp.status_code),
                sdp,
            });
        }
        DialogState::Confirmed(..) => return Some(Input::AnswerSent),
        DialogState::Terminated(_, reason) => {
            return Some(Input::Terminated(match reason {
                TerminatedReason::UacCancel => Termination::CallerCanceled,
                TerminatedReason::UacBye | TerminatedReason::UasBye => Termination::Bye,
                TerminatedReason::Timeout => Termination::Timeout,
                TerminatedReason::UasDecline => Termination::Declined,
                other => Termination::Other(format!("{other:?}")),
            }));
        }
        DialogState::Updated(_, req, handle) => {
            owed.request = Some(handle);
            PeerRequest::Update(UpdateRequest {
                invite: req.method == Method::Invite,
                session_expires: req.header_value("Session-Expires"),
                supports_timer: req.header_contains_token("Supported", "timer"),
                sdp: String::from_utf8_lossy(&req.body).into_owned(),
            })
        }
        DialogState::Info(_, req, handle) => {
            owed.request = Some(handle);
            PeerRequest::Info {
                dtmf: dtmf_from_info(&req),
            }
        }
        DialogState::Options(_, _, handle) => {
            owed.request = Some(handle);
            PeerRequest::Options
        }
        DialogState::Message(_, _, handle) | DialogState::Publish(_, _, handle) => {
            owed.request = Some(handle);
            PeerRequest::NotAllowed
        }
        DialogState::Refer(_, _, handle) => {
            owed.request = Some(handle);
            PeerRequest::Refer
        }
        DialogState::Notify(_, req, handle) => {
            owed.request = Some(handle);
            PeerRequest::Notify {
                refer: refer_notify_status(&req),
            }
        }
        DialogState::Calling(_) | DialogState::Trying(_) | DialogState::WaitAck(..) => {
            return None;
        }
    };
    Some(Input::Request(request))
}

/// The INVITE task's result as the machine reads it.
fn invite_outcome(res: Result<InviteAsyncResult, JoinError>) -> InviteOutcome {
    match res {
        Ok(Ok((_id, Some(resp)))) => InviteOutcome::Final(FinalResponse {
            code: u16::from(resp.status_code.clone()),
            reason: resp
                .reason_phrase()
                .map(str::to_string)
                .unwrap_or_else(|| resp.status_code.to_string()),
            sdp: String::from_utf8_lossy(&resp.body).into_owned(),
            session_expires: resp.header_value("Session-Expires"),
            made_locally: made_locally(&resp),
        }),
        Ok(Ok((_id, None))) => InviteOutcome::NoFinal,
        Ok(Err(e)) => InviteOutcome::Error {
            code: match &e {
                rsipstack::Error::DialogError(_, _, c) => Some(u16::from(c.clone())),
                _ => None,
            },
            message: e.to_string(),
        },
        Err(e) => InviteOutcome::TaskFailed(e.to_string()),
    }
}

/// Whether a final response was made by our own transaction layer rather than received:
/// every response a UA or proxy sends to an INVITE (other than 100) carries a To tag
/// (RFC 3261 8.2.6.2, 16.7); the one rsipstack makes on Timer B copies the request's To,
/// which has none.
fn made_locally(resp: &Response) -> bool {
    resp.to_header()
        .ok()
        .and_then(|t| t.tag().ok())
        .is_some_and(|tag| tag.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(to: &str) -> Response {
        let text = format!(
            "SIP/2.0 408 Request Timeout\r\nVia: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK1\r\n\
             From: <sip:a@127.0.0.1>;tag=1\r\nTo: {to}\r\nCall-ID: c1\r\nCSeq: 1 INVITE\r\n\
             Content-Length: 0\r\n\r\n"
        );
        match rsipstack::sip::SipMessage::try_from(text.as_bytes()).expect("parses") {
            rsipstack::sip::SipMessage::Response(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_408_without_a_to_tag_is_our_own_timeout() {
        assert!(made_locally(&response("<sip:b@127.0.0.1>")));
        assert!(!made_locally(&response("<sip:b@127.0.0.1>;tag=x9")));
    }
}
