//! Requests from the peer inside the dialog, the dialog's end, and our transfers.

use std::time::Instant;

use tracing::debug;

use super::{LegMachine, Phase};
use crate::leg::io::{Action, PeerRequest, Reply, Termination, UpdateRequest};
use crate::leg::refer::{ReferId, refer_target};
use crate::leg::session_timer::SessionTimer;
use crate::leg::{LegEvent, Party, ReferOutcome};
use crate::sdp::{self, MediaDirection, SessionDescription};
use crate::status::CallStatus;

impl LegMachine {
    pub(super) fn on_request(&mut self, req: PeerRequest, now: Instant) {
        match req {
            PeerRequest::Update(u) => self.on_update(u, now),
            PeerRequest::Info { dtmf } => {
                if let Some(d) = dtmf {
                    self.emit(LegEvent::Dtmf(d));
                }
                self.push(Action::Respond(Reply::plain(200)));
            }
            PeerRequest::Options => self.push(Action::Respond(Reply::plain(200))),
            PeerRequest::NotAllowed => self.push(Action::Respond(Reply::plain(405))),
            // We transfer others; we do not act as a transferee.
            PeerRequest::Refer => self.push(Action::Respond(Reply::plain(603))),
            PeerRequest::Notify { refer } => {
                self.push(Action::Respond(Reply::plain(200)));
                if let Some((code, terminated)) = refer {
                    self.emit(LegEvent::TransferProgress { sip_code: code });
                    self.decided(|t| t.on_notify(code, terminated, now));
                }
            }
        }
    }

    /// A re-INVITE or UPDATE from the peer: answer its SDP (mirroring direction) and report
    /// hold changes; echo the session timer.
    pub(super) fn on_update(&mut self, req: UpdateRequest, now: Instant) {
        if let Some(v) = &req.session_expires
            && let Some(st) = SessionTimer::from_header(v, self.uas())
        {
            // A refresh keeps the refresher role as the request states it.
            self.session_timer = Some(st);
        }
        let reply = if req.sdp.is_empty() {
            // Offerless re-INVITE: offer our current media; the ACK carries the answer.
            let offer = match &self.local_media {
                Some(local) if req.invite => {
                    self.session_version += 1;
                    let (id, version) = (self.session_id, self.session_version);
                    Some(sdp::build_offer(
                        local,
                        id,
                        version,
                        MediaDirection::SendRecv,
                    ))
                }
                _ => None,
            };
            self.timer_reply(offer, req.supports_timer)
        } else if let Some(local) = &self.local_media {
            self.session_version += 1;
            let (id, version) = (self.session_id, self.session_version);
            match SessionDescription::parse(&req.sdp).and_then(|sd| {
                sdp::answer_reoffer(&sd, local, self.srtp_keys.as_ref(), id, version)
            }) {
                Ok((body, neg)) => {
                    let reply = self.timer_reply(Some(body), req.supports_timer);
                    self.push(Action::Respond(reply));
                    let rekeyed = neg.srtp.filter(|k| Some(k) != self.srtp_keys.as_ref());
                    let hold = neg.remote_direction.is_hold();
                    let event = match (self.on_hold, hold) {
                        (false, true) => LegEvent::Hold(neg),
                        (true, false) => LegEvent::Unhold(neg),
                        _ => LegEvent::MediaChanged(neg),
                    };
                    self.on_hold = hold;
                    self.emit(event);
                    if let Some(keys) = rekeyed {
                        // Our later offers (a refresh) carry the key we now send with.
                        if let Some(srtp) = self.local_media.as_mut().and_then(|l| l.srtp.as_mut())
                        {
                            srtp.key = keys.local;
                        }
                        self.srtp_keys = Some(keys);
                        self.emit(LegEvent::SrtpRekeyed(keys));
                    }
                    self.arm_session_timer(now);
                    return;
                }
                Err(e) => {
                    debug!(call_id = %self.call_id, error = %e, "re-INVITE offer not acceptable");
                    Reply::plain(488)
                }
            }
        } else {
            Reply::plain(488)
        };
        self.push(Action::Respond(reply));
        self.arm_session_timer(now);
    }

    pub(super) fn on_terminated(&mut self, t: Termination) {
        if matches!(self.phase, Phase::Calling { .. }) {
            // The INVITE task reports the final response with its code.
            return;
        }
        let otherwise = self.status_if_ended();
        match t {
            Termination::CallerCanceled => self.end(
                CallStatus::Canceled,
                Some(487),
                "caller canceled",
                Party::Remote,
            ),
            Termination::Bye => self.end(CallStatus::Answered, None, "BYE", Party::Remote),
            Termination::Timeout => self.end(
                otherwise,
                Some(408),
                "timeout (no ACK or no response)",
                Party::Remote,
            ),
            Termination::Declined => self.end(CallStatus::Rejected, None, "declined", Party::Local),
            Termination::Other(reason) => self.end(otherwise, None, reason, Party::Remote),
        }
    }

    /// Blind transfer: only on an answered call, one at a time.
    pub(super) fn on_refer(&mut self, id: ReferId, target: &str, now: Instant) {
        let failed = |reason: String| Action::ReferOutcome {
            id,
            outcome: ReferOutcome::Failed {
                sip_code: None,
                reason,
            },
        };
        if !matches!(self.phase, Phase::Answered) {
            self.push(failed("call not answered".into()));
        } else if self.transfers.in_progress() {
            self.push(failed("a transfer is already in progress".into()));
        } else {
            match refer_target(target, &self.refer) {
                Ok(uri) => {
                    self.transfers.start(id, now + self.refer_timeout);
                    self.push(Action::Refer { id, target: uri });
                }
                Err(e) => self.push(failed(e)),
            }
        }
    }
}
