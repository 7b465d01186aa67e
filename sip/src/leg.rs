//! Call legs: the engine-facing handle ([`CallLeg`]) and the task that drives one dialog.
//!
//! One driver task per leg owns the rsipstack dialog and its state channel, and turns SIP
//! happenings into [`LegEvent`]s. The engine talks to it through commands, so the leg is
//! never blocked by the engine and the engine never touches SIP objects.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use rsipstack::dialog::DialogId;
use rsipstack::dialog::dialog::{DialogState, TerminatedReason, TransactionHandle};
use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::dialog::invitation::InviteAsyncResult;
use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::sip::{Header, HeadersExt, Method, Request, StatusCode};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};
use tracing::{debug, info, warn};

use crate::sdp::{self, LocalMedia, MediaDirection, NegotiatedMedia, SessionDescription};
use crate::states::LegStates;
use crate::status::{CallStatus, CancelCause};

/// Which way the leg was set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegDirection {
    Inbound,
    Outbound,
}

/// Who ended the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
        let headers = match crate::stack::custom_headers(headers) {
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
}

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
    pub fn hangup(&self) {
        self.controller.hangup()
    }
    pub async fn refer(&self, target: &str, headers: &[(String, String)]) -> ReferOutcome {
        self.controller.refer(target, headers).await
    }
}

/// RFC 4028 session timer negotiated for a leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionTimer {
    pub interval: u32,
    /// True when this side must send the refreshes.
    pub we_refresh: bool,
}

impl SessionTimer {
    /// Parse `Session-Expires: 1800;refresher=uac`. `we_are_uas` tells which side we are.
    pub fn from_header(value: &str, we_are_uas: bool) -> Option<SessionTimer> {
        let mut parts = value.split(';');
        let interval: u32 = parts.next()?.trim().parse().ok()?;
        let refresher = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("refresher"))
            .map(|(_, v)| v.trim().to_ascii_lowercase());
        let we_refresh = match refresher.as_deref() {
            Some("uas") => we_are_uas,
            Some("uac") => !we_are_uas,
            // No refresher chosen by the UAC: a UAS answering picks "uac" (the peer).
            _ => !we_are_uas,
        };
        Some(SessionTimer {
            interval: interval.max(1),
            we_refresh,
        })
    }

    pub fn header_value(&self, we_are_uas: bool) -> String {
        let refresher = if self.we_refresh == we_are_uas {
            "uas"
        } else {
            "uac"
        };
        format!("{};refresher={refresher}", self.interval)
    }
}

pub(crate) struct Driver {
    pub dialog: InviteDialog,
    pub dialog_layer: Arc<DialogLayer>,
    pub state_rx: LegStates,
    pub cmd_rx: UnboundedReceiver<Command>,
    pub events: UnboundedSender<LegEvent>,
    pub direction: LegDirection,
    pub local_media: Option<LocalMedia>,
    /// Outbound only: the INVITE transaction task.
    pub invite: Option<JoinHandle<InviteAsyncResult>>,
    pub ring_deadline: Option<Instant>,
    pub session_timer: Option<SessionTimer>,
    /// Host used to turn a number into a REFER target URI.
    pub refer_host: String,
    pub refer_timeout: Duration,
    pub session_version: u64,
    pub session_id: u64,
}

/// REFER transaction outcomes sent back to the driver loop: the final status or an error.
type ReferResults = (
    UnboundedSender<Result<u16, String>>,
    UnboundedReceiver<Result<u16, String>>,
);

struct PendingRefer {
    reply: oneshot::Sender<ReferOutcome>,
    deadline: Instant,
}

/// A REFER outcome decided by a final NOTIFY, held until our 200 to that NOTIFY is sent (the
/// dialog reports `Confirmed` again) so that a BYE the engine sends next cannot overtake it.
struct ReferDecided {
    reply: oneshot::Sender<ReferOutcome>,
    outcome: ReferOutcome,
    /// Deliver anyway by then.
    at_latest: Instant,
}

/// How long a decided REFER outcome waits for the NOTIFY's 200 to go out.
const NOTIFY_ANSWER_GRACE: Duration = Duration::from_millis(500);

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

fn status_u16(s: &StatusCode) -> u16 {
    u16::from(s.clone())
}

/// The driver's timers (see `Driver::run`).
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

impl Driver {
    fn emit(&self, ev: LegEvent) {
        let _ = self.events.unbounded_send(ev);
    }

    fn sdp_headers(&self) -> Vec<Header> {
        vec![Header::ContentType("application/sdp".into())]
    }

    fn timer_headers(&self, request: Option<&Request>) -> Vec<Header> {
        let mut out = Vec::new();
        if let Some(st) = self.session_timer {
            let uas = self.direction == LegDirection::Inbound;
            out.push(Header::Other(
                "Session-Expires".into(),
                st.header_value(uas),
            ));
            let supported = request.is_some_and(|r| r.header_contains_token("Supported", "timer"));
            if supported {
                out.push(Header::Other("Require".into(), "timer".into()));
            }
        }
        out
    }

    /// Drives the dialog to its end. The awaits that happen once or rarely (BYE, CANCEL,
    /// a re-INVITE) are boxed, so this task, alive for the whole call, does not carry
    /// room for their state.
    pub async fn run(mut self) {
        let mut answered = false;
        let mut cmd_open = true;
        let mut state_open = true;
        let mut ended = false;
        let mut cancel_cause: Option<CancelCause> = None;
        let mut local_bye = false;
        let mut rang = false;
        // A provisional response other than 100 Trying came: the INVITE reached a UA.
        let mut provisional = false;
        let mut on_hold = false;
        let mut pending_refer: Option<PendingRefer> = None;
        let mut refer_decided: Option<ReferDecided> = None;
        let mut refresh_at = far_future();
        let mut expire_at = far_future();
        let mut cancel_guard_deadline = far_future();
        let mut refer_results: ReferResults = unbounded();
        let mut initial_invite = self.invite.take();
        let mut ring_deadline = self.ring_deadline.unwrap_or_else(far_future);
        // An outbound INVITE whose final response has not come yet.
        let mut awaiting_final = initial_invite.is_some();

        let end_info = |status: CallStatus, code: Option<u16>, reason: String, by: Party| EndInfo {
            call_status: status,
            sip_code: code,
            reason,
            by,
        };

        while !ended {
            // One sleep, until the earliest armed timer: a `Sleep` per timer would each
            // take room in this task, which lives as long as the call.
            let (due_at, due) = [
                (awaiting_final && cancel_cause.is_none()).then_some((ring_deadline, Due::Ring)),
                awaiting_final.then_some((cancel_guard_deadline, Due::CancelGuard)),
                answered.then_some((refresh_at, Due::Refresh)),
                answered.then_some((expire_at, Due::Expire)),
                refer_decided
                    .as_ref()
                    .map(|d| (d.at_latest, Due::ReferDecided)),
                pending_refer
                    .as_ref()
                    .map(|p| (p.deadline, Due::ReferDeadline)),
            ]
            .into_iter()
            .flatten()
            .min_by_key(|(at, _)| *at)
            .map_or((far_future(), None), |(at, due)| (at, Some(due)));
            tokio::select! {
                res = async { initial_invite.as_mut().expect("guarded").await }, if initial_invite.is_some() => {
                    initial_invite = None;
                    awaiting_final = false;
                    ring_deadline = far_future();
                    match res {
                        Ok(Ok((_id, Some(resp)))) => {
                            let code = status_u16(&resp.status_code);
                            if (200..300).contains(&code) {
                                if cancel_cause.is_some() {
                                    // rsipstack ACKs and BYEs a 2xx that crossed our CANCEL.
                                    let status = match cancel_cause { Some(CancelCause::RingTimeout) => CallStatus::NoAnswer, _ => CallStatus::Canceled };
                                    self.emit(LegEvent::Ended(end_info(status, Some(code), "answered after cancel; hung up".into(), Party::Local)));
                                    ended = true;
                                    continue;
                                }
                                let neg = self.local_media.as_ref().ok_or_else(|| "no local media".to_string()).and_then(|local| {
                                    let text = String::from_utf8_lossy(&resp.body);
                                    SessionDescription::parse(&text)
                                        .and_then(|sd| sdp::negotiated_from_answer(&sd, local))
                                        .map_err(|e| e.to_string())
                                });
                                match neg {
                                    Ok(neg) => {
                                        answered = true;
                                        if let Some(v) = resp.header_value("Session-Expires") {
                                            self.session_timer = SessionTimer::from_header(&v, false);
                                            if let Some(st) = self.session_timer {
                                                let (r, e) = timer_deadlines(st);
                                                refresh_at = r;
                                                expire_at = e;
                                            }
                                        }
                                        self.emit(LegEvent::Answered(neg));
                                    }
                                    Err(e) => {
                                        warn!(call_id = %self.dialog.id().call_id, error = %e, "2xx without usable SDP answer; hanging up");
                                        let _ = Box::pin(self.dialog.bye()).await;
                                        self.emit(LegEvent::Ended(end_info(CallStatus::Failed, Some(code), format!("unusable SDP answer: {e}"), Party::Local)));
                                        ended = true;
                                    }
                                }
                            } else {
                                let reason = reason_text(resp.reason_phrase().map(str::to_string).unwrap_or_else(|| resp.status_code.to_string()).as_str(), code);
                                let status = match CallStatus::from_final_response(code, cancel_cause) {
                                    // The transaction's own 408 (Timer B: not even 100 Trying
                                    // came): nobody was reached.
                                    CallStatus::NoAnswer if code == 408 && !provisional && made_locally(&resp) => CallStatus::Failed,
                                    s => s,
                                };
                                let by = if code == 487 && cancel_cause.is_some() { Party::Local } else { Party::Remote };
                                self.emit(LegEvent::Ended(end_info(status, Some(code), reason, by)));
                                ended = true;
                            }
                        }
                        Ok(Ok((_id, None))) => {
                            let status = if cancel_cause == Some(CancelCause::RingTimeout) { CallStatus::NoAnswer } else if cancel_cause.is_some() { CallStatus::Canceled } else { CallStatus::Failed };
                            self.emit(LegEvent::Ended(end_info(status, None, "no final response".into(), Party::Local)));
                            ended = true;
                        }
                        Ok(Err(e)) => {
                            let code = match &e { rsipstack::Error::DialogError(_, _, c) => Some(status_u16(c)), _ => None };
                            let status = match code.map(|c| CallStatus::from_final_response(c, cancel_cause)) {
                                Some(s) => s,
                                None if cancel_cause.is_some() => CallStatus::Canceled,
                                None => CallStatus::Failed,
                            };
                            self.emit(LegEvent::Ended(end_info(status, code, e.to_string(), Party::Local)));
                            ended = true;
                        }
                        Err(e) => {
                            self.emit(LegEvent::Ended(end_info(CallStatus::Failed, None, format!("invite task failed: {e}"), Party::Local)));
                            ended = true;
                        }
                    }
                }
                _ = sleep_until(due_at), if due.is_some() => match due {
                    Some(Due::Ring) if !provisional => {
                        // Nothing but (at most) 100 Trying within the ring timeout: a CANCEL
                        // may not be sent before a provisional response (RFC 3261 9.1), and
                        // waiting for Timer B only delays what is known: the call failed.
                        info!(call_id = %self.dialog.id().call_id, "no response within the ring timeout");
                        self.emit(LegEvent::Ended(end_info(CallStatus::Failed, None, "no response from the gateway within the ring timeout".into(), Party::Local)));
                        ended = true;
                    }
                    Some(Due::Ring) => {
                        info!(call_id = %self.dialog.id().call_id, "ring timeout, sending CANCEL");
                        cancel_cause = Some(CancelCause::RingTimeout);
                        cancel_guard_deadline = Instant::now() + Duration::from_secs(40);
                        let d = self.dialog.clone();
                        tokio::spawn(async move { if let Err(e) = d.cancel().await { debug!(error = %e, "cancel"); } });
                    }
                    Some(Due::CancelGuard) => {
                        // The peer never answered our CANCEL nor the INVITE: give up.
                        let status = if cancel_cause == Some(CancelCause::RingTimeout) { CallStatus::NoAnswer } else { CallStatus::Canceled };
                        self.emit(LegEvent::Ended(end_info(status, None, "no response to CANCEL".into(), Party::Local)));
                        ended = true;
                    }
                    Some(Due::Refresh) => {
                        refresh_at = far_future();
                        if let Some(st) = self.session_timer {
                            let d = self.dialog.clone();
                            let hv = st.header_value(self.direction == LegDirection::Inbound);
                            tokio::spawn(async move {
                                let h = vec![Header::Other("Session-Expires".into(), hv)];
                                if let Err(e) = d.update(Some(h), None).await { debug!(error = %e, "session refresh failed"); }
                            });
                            let (r, e) = timer_deadlines(st);
                            refresh_at = r;
                            expire_at = e;
                        }
                    }
                    Some(Due::Expire) => {
                        info!(call_id = %self.dialog.id().call_id, "session timer expired, sending BYE");
                        let _ = Box::pin(self.dialog.bye()).await;
                        self.emit(LegEvent::Ended(end_info(CallStatus::Answered, None, "session timer expired".into(), Party::Local)));
                        ended = true;
                    }
                    Some(Due::ReferDecided) => {
                        if let Some(d) = refer_decided.take() {
                            let _ = d.reply.send(d.outcome);
                        }
                    }
                    Some(Due::ReferDeadline) => {
                        if let Some(p) = pending_refer.take() {
                            let _ = p.reply.send(ReferOutcome::Failed { sip_code: None, reason: "no final NOTIFY before timeout".into() });
                        }
                    }
                    None => {}
                },
                Some(r) = refer_results.1.next() => {
                    match r {
                        Ok(code) if (200..300).contains(&code) => {}
                        Ok(code) => {
                            if let Some(p) = pending_refer.take() {
                                let _ = p.reply.send(ReferOutcome::Failed { sip_code: Some(code), reason: "REFER refused".into() });
                            }
                        }
                        Err(e) => {
                            if let Some(p) = pending_refer.take() {
                                let _ = p.reply.send(ReferOutcome::Failed { sip_code: None, reason: e });
                            }
                        }
                    }
                }
                cmd = self.cmd_rx.next(), if cmd_open => {
                    let Some(cmd) = cmd else {
                        // Every handle dropped: nobody can hang up any more, so do it now.
                        if answered { let _ = Box::pin(self.dialog.bye()).await; } else if awaiting_final { let _ = Box::pin(self.dialog.cancel()).await; } else if self.direction == LegDirection::Inbound { let _ = self.dialog.reject(Some(StatusCode::TemporarilyUnavailable), None); }
                        // Keep running until the dialog reports its end; stop polling commands.
                        cmd_open = false;
                        continue;
                    };
                    match cmd {
                        Command::Ring => { let _ = self.dialog.ringing(None, None); }
                        Command::Answer { local, reply } => {
                            let req = self.dialog.initial_request();
                            let text = String::from_utf8_lossy(&req.body).to_string();
                            self.session_version += 1;
                            let result = SessionDescription::parse(&text)
                                .and_then(|sd| sdp::answer_offer(&sd, &local, self.session_id, self.session_version))
                                .map_err(|e| e.to_string());
                            match result {
                                Ok((body, neg)) => {
                                    let mut headers = self.sdp_headers();
                                    headers.extend(self.timer_headers(Some(&req)));
                                    match self.dialog.accept(Some(headers), Some(body.into_bytes())) {
                                        Ok(()) => {
                                            answered = true;
                                            on_hold = neg.remote_direction.is_hold();
                                            self.local_media = Some(local);
                                            if let Some(st) = self.session_timer {
                                                let (r, e) = timer_deadlines(st);
                                                refresh_at = r;
                                                expire_at = e;
                                            }
                                            self.emit(LegEvent::Answered(neg.clone()));
                                            let _ = reply.send(Ok(neg));
                                        }
                                        Err(e) => { let _ = reply.send(Err(e.to_string())); }
                                    }
                                }
                                Err(e) => {
                                    let _ = self.dialog.reject(Some(StatusCode::NotAcceptableHere), None);
                                    let _ = reply.send(Err(e));
                                }
                            }
                        }
                        Command::Reject { code, reason } => {
                            let _ = self.dialog.reject(Some(StatusCode::from(code)), reason.clone());
                            self.emit(LegEvent::Ended(end_info(CallStatus::Rejected, Some(code), reason.unwrap_or_else(|| "rejected by engine".into()), Party::Local)));
                            ended = true;
                        }
                        Command::Hangup => {
                            if answered {
                                local_bye = true;
                                let d = self.dialog.clone();
                                let _ = Box::pin(d.bye()).await;
                                self.emit(LegEvent::Ended(end_info(CallStatus::Answered, None, "hangup".into(), Party::Local)));
                                ended = true;
                            } else if awaiting_final {
                                if cancel_cause.is_none() {
                                    cancel_cause = Some(CancelCause::Hangup);
                                    cancel_guard_deadline = Instant::now() + Duration::from_secs(40);
                                    let d = self.dialog.clone();
                                    tokio::spawn(async move { if let Err(e) = d.cancel().await { debug!(error = %e, "cancel"); } });
                                }
                            } else if self.direction == LegDirection::Inbound {
                                let _ = self.dialog.reject(Some(StatusCode::TemporarilyUnavailable), None);
                                self.emit(LegEvent::Ended(end_info(CallStatus::Canceled, Some(480), "hangup before answer".into(), Party::Local)));
                                ended = true;
                            }
                        }
                        Command::Refer { target, headers, reply } => {
                            if !answered {
                                let _ = reply.send(ReferOutcome::Failed { sip_code: None, reason: "call not answered".into() });
                                continue;
                            }
                            if pending_refer.is_some() {
                                let _ = reply.send(ReferOutcome::Failed { sip_code: None, reason: "a transfer is already in progress".into() });
                                continue;
                            }
                            let uri = if target.starts_with("sip:") || target.starts_with("sips:") || target.starts_with("tel:") { target.clone() } else { format!("sip:{target}@{}", self.refer_host) };
                            let refer_to = match rsipstack::sip::Uri::try_from(uri.as_str()) {
                                Ok(u) => u,
                                Err(e) => { let _ = reply.send(ReferOutcome::Failed { sip_code: None, reason: format!("bad transfer target: {e}") }); continue; }
                            };
                            pending_refer = Some(PendingRefer { reply, deadline: Instant::now() + self.refer_timeout });
                            let d = self.dialog.clone();
                            let results = refer_results.0.clone();
                            tokio::spawn(async move {
                                let r = match d.refer(refer_to, Some(headers), None).await {
                                    Ok(Some(resp)) => Ok(status_u16(&resp.status_code)),
                                    Ok(None) => Err("no response to REFER".to_string()),
                                    Err(e) => Err(e.to_string()),
                                };
                                let _ = results.unbounded_send(r);
                            });
                        }
                    }
                }
                state = self.state_rx.recv(), if state_open => {
                    let Some(state) = state else {
                        if self.direction == LegDirection::Outbound && awaiting_final {
                            // The INVITE task still reports the final response.
                            state_open = false;
                            continue;
                        }
                        self.emit(LegEvent::Ended(end_info(if answered { CallStatus::Answered } else { CallStatus::Failed }, None, "dialog closed".into(), Party::Local)));
                        break;
                    };
                    match state {
                        DialogState::Early(_, resp) => {
                            let code = status_u16(&resp.status_code);
                            if self.direction == LegDirection::Outbound {
                                let with_sdp = !resp.body.is_empty();
                                let neg = if with_sdp { self.local_media.as_ref().and_then(|l| SessionDescription::parse(&String::from_utf8_lossy(&resp.body)).ok().and_then(|sd| sdp::negotiated_from_answer(&sd, l).ok())) } else { None };
                                provisional = true;
                                if code == 180 && !rang { rang = true; self.emit(LegEvent::Ringing); }
                                if let Some(neg) = neg { self.emit(LegEvent::EarlyMedia(neg)); }
                            }
                        }
                        DialogState::Updated(_, req, handle) => {
                            Box::pin(self.on_update(req, handle, &mut on_hold)).await;
                            if let Some(st) = self.session_timer { let (r, e) = timer_deadlines(st); refresh_at = r; expire_at = e; }
                        }
                        DialogState::Info(_, req, handle) => {
                            if let Some(d) = dtmf_from_info(&req) { self.emit(LegEvent::Dtmf(d)); }
                            let _ = handle.reply(StatusCode::OK).await;
                        }
                        DialogState::Options(_, _, handle) => { let _ = handle.reply(StatusCode::OK).await; }
                        DialogState::Message(_, _, handle) | DialogState::Publish(_, _, handle) => { let _ = handle.reply(StatusCode::MethodNotAllowed).await; }
                        DialogState::Refer(_, _, handle) => {
                            // We transfer others; we do not act as a transferee.
                            let _ = handle.reply(StatusCode::Decline).await;
                        }
                        DialogState::Notify(_, req, handle) => {
                            let _ = handle.reply(StatusCode::OK).await;
                            if let Some((code, terminated)) = refer_notify_status(&req) {
                                self.emit(LegEvent::TransferProgress { sip_code: code });
                                if (code >= 200 || terminated)
                                    && let Some(p) = pending_refer.take()
                                    {
                                        let outcome = if (200..300).contains(&code) { ReferOutcome::Succeeded { sip_code: code } } else { ReferOutcome::Failed { sip_code: Some(code), reason: "transfer target did not answer".into() } };
                                        refer_decided = Some(ReferDecided { reply: p.reply, outcome, at_latest: Instant::now() + NOTIFY_ANSWER_GRACE });
                                    }
                            }
                        }
                        DialogState::Confirmed(..) => {
                            // Our answer to an in-dialog request went out.
                            if let Some(d) = refer_decided.take() {
                                let _ = d.reply.send(d.outcome);
                            }
                        }
                        DialogState::Terminated(_, reason) => {
                            if self.direction == LegDirection::Outbound && awaiting_final {
                                // The INVITE task reports the final response with its code.
                                continue;
                            }
                            let info = match reason {
                                TerminatedReason::UacCancel => end_info(CallStatus::Canceled, Some(487), "caller canceled".into(), Party::Remote),
                                TerminatedReason::UacBye | TerminatedReason::UasBye => end_info(CallStatus::Answered, None, "BYE".into(), if local_bye { Party::Local } else { Party::Remote }),
                                TerminatedReason::Timeout => end_info(if answered { CallStatus::Answered } else { CallStatus::Failed }, Some(408), "timeout (no ACK or no response)".into(), Party::Remote),
                                TerminatedReason::UasDecline => end_info(CallStatus::Rejected, None, "declined".into(), Party::Local),
                                other => end_info(if answered { CallStatus::Answered } else { CallStatus::Failed }, None, format!("{other:?}"), Party::Remote),
                            };
                            self.emit(LegEvent::Ended(info));
                            ended = true;
                        }
                        _ => {}
                    }
                }
            }
        }
        if let Some(d) = refer_decided.take() {
            let _ = d.reply.send(d.outcome);
        }
        if let Some(p) = pending_refer.take() {
            let _ = p.reply.send(ReferOutcome::Failed {
                sip_code: None,
                reason: "call ended".into(),
            });
        }
        let id: DialogId = self.dialog.id();
        self.dialog_layer.remove_dialog(&id);
        debug!(call_id = %id.call_id, "leg driver finished");
    }

    /// A re-INVITE or UPDATE from the peer: answer its SDP (mirroring direction) and report
    /// hold changes; echo the session timer.
    async fn on_update(&mut self, req: Request, handle: TransactionHandle, on_hold: &mut bool) {
        if let Some(v) = req.header_value("Session-Expires") {
            let uas = self.direction == LegDirection::Inbound;
            // A refresh keeps the refresher role as the request states it.
            if let Some(st) = SessionTimer::from_header(&v, uas) {
                self.session_timer = Some(SessionTimer {
                    interval: st.interval,
                    we_refresh: st.we_refresh,
                });
            }
        }
        let mut headers = self.timer_headers(Some(&req));
        if req.body.is_empty() {
            if req.method == Method::Invite {
                // Offerless re-INVITE: offer our current media; the ACK carries the answer.
                if let Some(local) = &self.local_media {
                    self.session_version += 1;
                    let body = sdp::build_offer(
                        local,
                        self.session_id,
                        self.session_version,
                        MediaDirection::SendRecv,
                    );
                    headers.extend(self.sdp_headers());
                    let _ = handle
                        .respond(StatusCode::OK, Some(headers), Some(body.into_bytes()))
                        .await;
                    return;
                }
            }
            let _ = handle.respond(StatusCode::OK, Some(headers), None).await;
            return;
        }
        let Some(local) = self.local_media.clone() else {
            let _ = handle.reply(StatusCode::NotAcceptableHere).await;
            return;
        };
        let text = String::from_utf8_lossy(&req.body).to_string();
        self.session_version += 1;
        match SessionDescription::parse(&text)
            .and_then(|sd| sdp::answer_offer(&sd, &local, self.session_id, self.session_version))
        {
            Ok((body, neg)) => {
                headers.extend(self.sdp_headers());
                let _ = handle
                    .respond(StatusCode::OK, Some(headers), Some(body.into_bytes()))
                    .await;
                let hold = neg.remote_direction.is_hold();
                let ev = match (*on_hold, hold) {
                    (false, true) => LegEvent::Hold(neg),
                    (true, false) => LegEvent::Unhold(neg),
                    _ => LegEvent::MediaChanged(neg),
                };
                *on_hold = hold;
                self.emit(ev);
            }
            Err(e) => {
                debug!(error = %e, "re-INVITE offer not acceptable");
                let _ = handle.reply(StatusCode::NotAcceptableHere).await;
            }
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

/// When to refresh (half the interval, RFC 4028 §10) and when to give up on a session the
/// peer should have refreshed (interval minus min(32 s, interval/3), §10).
fn timer_deadlines(st: SessionTimer) -> (Instant, Instant) {
    let now = Instant::now();
    let interval = Duration::from_secs(st.interval as u64);
    if st.we_refresh {
        (now + interval / 2, far_future())
    } else {
        let margin = Duration::from_secs((st.interval as u64 / 3).min(32));
        (far_future(), now + interval - margin)
    }
}

/// The sipfrag status of a REFER progress NOTIFY and whether the subscription ended.
/// (rsipstack's `ReferStatus::parse` misses parsed `Event` headers, hence our own.)
pub(crate) fn refer_notify_status(req: &Request) -> Option<(u16, bool)> {
    let event = req.header_value("Event")?;
    let package = event.split(';').next().unwrap_or("").trim();
    if !package.eq_ignore_ascii_case("refer") {
        return None;
    }
    let terminated = req
        .header_value("Subscription-State")
        .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("terminated"));
    let body = String::from_utf8_lossy(&req.body);
    let line = body
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("SIP/2.0"))?;
    let code: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
    (100..700).contains(&code).then_some((code, terminated))
}

/// A DTMF digit from an INFO body (`application/dtmf-relay` "Signal=5" or `application/dtmf` "5").
pub(crate) fn dtmf_from_info(req: &Request) -> Option<char> {
    let ct = req.header_value("Content-Type")?.to_ascii_lowercase();
    let body = String::from_utf8_lossy(&req.body);
    let raw = if ct.contains("dtmf-relay") {
        body.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("signal"))
            .map(|(_, v)| v.trim().to_string())?
    } else if ct.contains("application/dtmf") {
        body.trim().to_string()
    } else {
        return None;
    };
    match raw.as_str() {
        "10" => return Some('*'),
        "11" => return Some('#'),
        _ => {}
    }
    if raw.chars().count() != 1 {
        return None;
    }
    let c = raw.chars().next()?;
    match c {
        '0'..='9' | '*' | '#' | 'A'..='D' => Some(c),
        'a'..='d' => Some(c.to_ascii_uppercase()),
        _ => None,
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
        },
        cmd_rx,
        ev_tx,
    )
}

/// Whether a final response was made by our own transaction layer rather than received:
/// every response a UA or proxy sends to an INVITE (other than 100) carries a To tag
/// (RFC 3261 8.2.6.2, 16.7); the one rsipstack makes on Timer B copies the request's To,
/// which has none.
fn made_locally(resp: &rsipstack::sip::Response) -> bool {
    resp.to_header()
        .ok()
        .and_then(|t| t.tag().ok())
        .is_some_and(|tag| tag.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(to: &str) -> rsipstack::sip::Response {
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

    #[test]
    fn session_timer_roles() {
        let st = SessionTimer::from_header("1800;refresher=uac", true).unwrap();
        assert_eq!(
            st,
            SessionTimer {
                interval: 1800,
                we_refresh: false
            }
        );
        assert_eq!(st.header_value(true), "1800;refresher=uac");
        let st = SessionTimer::from_header("90;refresher=uas", true).unwrap();
        assert!(st.we_refresh);
        assert_eq!(st.header_value(true), "90;refresher=uas");
        let st = SessionTimer::from_header("120", true).unwrap();
        assert!(!st.we_refresh);
        let st = SessionTimer::from_header("600;refresher=uac", false).unwrap();
        assert!(st.we_refresh);
        assert_eq!(st.header_value(false), "600;refresher=uac");
        assert!(SessionTimer::from_header("soon", true).is_none());
    }

    fn info(ct: &str, body: &str) -> Request {
        let text = format!(
            "INFO sip:a@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bK2\r\nFrom: <sip:b@127.0.0.1>;tag=1\r\nTo: <sip:a@127.0.0.1>;tag=2\r\nCall-ID: x\r\nCSeq: 3 INFO\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        Request::try_from(text.as_bytes()).unwrap()
    }

    fn notify(event: &str, state: &str, body: &str) -> Request {
        let text = format!(
            "NOTIFY sip:a@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bK3\r\nFrom: <sip:b@127.0.0.1>;tag=1\r\nTo: <sip:a@127.0.0.1>;tag=2\r\nCall-ID: x\r\nCSeq: 4 NOTIFY\r\nEvent: {event}\r\nSubscription-State: {state}\r\nContent-Type: message/sipfrag\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        Request::try_from(text.as_bytes()).unwrap()
    }

    #[test]
    fn refer_notify_sipfrag() {
        assert_eq!(
            refer_notify_status(&notify(
                "refer",
                "active;expires=60",
                "SIP/2.0 100 Trying\r\n"
            )),
            Some((100, false))
        );
        assert_eq!(
            refer_notify_status(&notify(
                "refer;id=7",
                "terminated;reason=noresource",
                "SIP/2.0 200 OK"
            )),
            Some((200, true))
        );
        assert_eq!(
            refer_notify_status(&notify("refer", "terminated", "SIP/2.0 486 Busy Here")),
            Some((486, true))
        );
        assert_eq!(
            refer_notify_status(&notify("presence", "active", "SIP/2.0 200 OK")),
            None
        );
        assert_eq!(
            refer_notify_status(&notify("refer", "active", "garbage")),
            None
        );
    }

    #[test]
    fn dtmf_info_bodies() {
        assert_eq!(
            dtmf_from_info(&info(
                "application/dtmf-relay",
                "Signal=5\r\nDuration=160\r\n"
            )),
            Some('5')
        );
        assert_eq!(
            dtmf_from_info(&info("application/dtmf-relay", "Signal= #\r\n")),
            Some('#')
        );
        assert_eq!(dtmf_from_info(&info("application/dtmf", "9")), Some('9'));
        assert_eq!(
            dtmf_from_info(&info("application/dtmf-relay", "Signal=11")),
            Some('#')
        );
        assert_eq!(dtmf_from_info(&info("text/plain", "5")), None);
        assert_eq!(dtmf_from_info(&info("application/dtmf", "x")), None);
    }
}
