//! The call_transfer brick on a live call.
//!
//! - **blind**: `message_to_client` to the caller, then REFER through the caller's leg; the
//!   NOTIFY sipfrag decides success or failure, no final NOTIFY within the brick's timeout
//!   is `timeout`.
//! - **bridged**: a second outbound leg to the target through the call's trunk (the brick's
//!   `sip_headers` on its INVITE, ring timeout = the brick's timeout). Once the target answers,
//!   `message_to_manager` plays to the target while `message_to_client` plays to the caller;
//!   then the two media sessions relay audio both ways ([`Bridge`]) until either side hangs up,
//!   and the other side is hung up. No answer in time → `timeout`; a refusal (busy, rejected,
//!   failed) → `failure`; a bridge that ran → `success`.
//!
//! SIP stays in callsmith-sip (legs, events) and audio in callsmith-media (sessions, bridge);
//! this module only sequences them. Every attempt is kept as a [`TransferLog`] in the call
//! history (`transfers`), beside the interpreter's `transferred` trace event.

use std::time::Duration;

use callsmith_media::{Bridge, MediaSession, PlayEnd, prompt::Playable};
use callsmith_scenarios::port::{PromptSpec, TransferOutcome, TransferSpec};
use callsmith_sip::{CallStatus, EndInfo, LegEvent, LocalMedia, OutboundCall};
use tokio::time::Instant;
use tracing::{info, warn};

use super::history::{PromptLog, TransferLog};
use super::io::{CallEnd, CallEvent};
use super::port::LivePort;
use super::{media_codec, wait_end};

/// Longest a caller or target may take to acknowledge our hang-up.
const END_WAIT: Duration = Duration::from_secs(5);
/// Extra time past the ring timeout before the engine gives up on the target leg itself.
const RING_GUARD: Duration = Duration::from_secs(10);

/// How a call_transfer attempt is kept in the call history.
trait TransferRecord {
    fn started(mode: &str, spec: &TransferSpec, started_ms: u64) -> Self;
    fn target_ended(&mut self, end: &EndInfo);
}

impl TransferRecord for TransferLog {
    fn started(mode: &str, spec: &TransferSpec, started_ms: u64) -> TransferLog {
        TransferLog::new(mode, &spec.number, started_ms)
    }

    fn target_ended(&mut self, end: &EndInfo) {
        self.call_status = Some(end.call_status.as_str().to_string());
        if end.sip_code.is_some() {
            self.sip_code = end.sip_code;
        }
    }
}

/// The brick output for a target leg that ended without being answered.
fn unanswered(end: &EndInfo) -> TransferOutcome {
    match end.call_status {
        CallStatus::NoAnswer => TransferOutcome::Timeout,
        status => TransferOutcome::Failure(match end.sip_code {
            Some(code) => format!("transfer target {status}: {code} {}", end.reason),
            None => format!("transfer target {status}: {}", end.reason),
        }),
    }
}

fn ring_timeout(spec: &TransferSpec) -> Duration {
    Duration::from_secs_f64(spec.timeout_secs.clamp(0.5, 3600.0))
}

impl LivePort {
    fn keep_transfer(&mut self, mut log: TransferLog, outcome: &TransferOutcome) {
        log.ended_ms = self.ms();
        (log.outcome, log.detail) = match outcome {
            TransferOutcome::Success => ("success".into(), log.detail.take()),
            TransferOutcome::Failure(why) => ("failure".into(), Some(why.clone())),
            TransferOutcome::Timeout => ("timeout".into(), log.detail.take()),
        };
        info!(communication = %self.ctx.comm.sid, mode = %log.mode, outcome = %log.outcome, detail = ?log.detail, "call transfer");
        self.record.keep_transfer(log);
    }

    /// Handles something that happened on the caller's side during a transfer; returns why the
    /// transfer must stop when the caller is gone (or the call must end).
    fn caller_gone(ev: CallEvent) -> Option<String> {
        match ev {
            CallEvent::Digit(_) | CallEvent::Media(_) => None,
            CallEvent::Ended(CallEnd::HungUp) => Some("the caller hung up".into()),
            CallEvent::Ended(CallEnd::Forced(f)) => Some(f.message().into()),
        }
    }

    pub(super) async fn blind_transfer(&mut self, spec: &TransferSpec) -> TransferOutcome {
        let mut log = TransferLog::started("blind", spec, self.ms());
        if let Some(m) = &spec.message_to_client {
            let _ = self.play_prompt(m, false).await;
        }
        let outcome = if self.io.hung_up() {
            TransferOutcome::Failure("the caller hung up".into())
        } else {
            let refer = self.io.leg.refer(&spec.number, &spec.sip_headers);
            match tokio::time::timeout(ring_timeout(spec), refer).await {
                Err(_) => TransferOutcome::Timeout,
                Ok(callsmith_sip::ReferOutcome::Succeeded { sip_code }) => {
                    log.sip_code = Some(sip_code);
                    TransferOutcome::Success
                }
                Ok(callsmith_sip::ReferOutcome::Failed {
                    sip_code: None,
                    reason,
                }) if reason.contains("NOTIFY") => {
                    log.detail = Some(reason);
                    TransferOutcome::Timeout
                }
                Ok(callsmith_sip::ReferOutcome::Failed { sip_code, reason }) => {
                    log.sip_code = sip_code;
                    TransferOutcome::Failure(match sip_code {
                        Some(c) => format!("{reason} ({c})"),
                        None => reason,
                    })
                }
            }
        };
        self.keep_transfer(log, &outcome);
        outcome
    }

    pub(super) async fn bridged_transfer(&mut self, spec: &TransferSpec) -> TransferOutcome {
        let mut log = TransferLog::started("bridged", spec, self.ms());
        let outcome = self.bridge_to_target(spec, &mut log).await;
        self.keep_transfer(log, &outcome);
        outcome
    }

    async fn bridge_to_target(
        &mut self,
        spec: &TransferSpec,
        log: &mut TransferLog,
    ) -> TransferOutcome {
        if self.io.hung_up() {
            return TransferOutcome::Failure("the caller hung up".into());
        }
        let rt = self.ctx.rt.clone();
        let mut target_media = match rt.media.open_session(None) {
            Ok(s) => s,
            Err(e) => {
                return TransferOutcome::Failure(format!(
                    "no media session for the transfer leg: {e}"
                ));
            }
        };
        // The target leg's media events (VAD, DTMF) play no part in the transfer.
        drop(target_media.take_events());
        let ring = ring_timeout(spec);
        let from_number = match spec.from.trim() {
            "" => self.ctx.from_number.clone(),
            f => f.to_string(),
        };
        let placed = rt
            .sip
            .place_call(OutboundCall {
                trunk: Some(self.ctx.trunk.clone()),
                from_number,
                from_display: None,
                to_number: spec.number.clone(),
                headers: spec.sip_headers.clone(),
                local_media: LocalMedia::g711(rt.settings.media_ip, target_media.local_port()),
                ring_timeout: ring,
            })
            .await;
        let mut target = match placed {
            Ok(l) => l,
            Err(e) => return TransferOutcome::Failure(format!("placing the transfer call: {e}")),
        };
        log.call_id = Some(target.call_id().to_string());

        // 1. Ringing: the target answers, refuses, or the brick's timeout passes.
        let guard = Instant::now() + ring + RING_GUARD;
        let media = loop {
            tokio::select! {
                ev = target.next_event() => match ev {
                    Some(LegEvent::Ringing) => { log.ringing_ms.get_or_insert(self.ms()); }
                    Some(LegEvent::Answered(m)) => break m,
                    Some(LegEvent::Ended(end)) => {
                        log.target_ended(&end);
                        return unanswered(&end);
                    }
                    Some(_) => {}
                    None => return TransferOutcome::Failure("the transfer leg closed".into()),
                },
                ev = self.next() => {
                    if let Some(why) = Self::caller_gone(ev) {
                        target.hangup();
                        if let Some(end) = wait_end(&mut target, END_WAIT).await { log.target_ended(&end); }
                        return TransferOutcome::Failure(why);
                    }
                }
                _ = tokio::time::sleep_until(guard) => {
                    target.hangup();
                    if let Some(end) = wait_end(&mut target, END_WAIT).await { log.target_ended(&end); }
                    return TransferOutcome::Timeout;
                }
            }
        };
        log.answered_ms = Some(self.ms());
        log.call_status = Some(CallStatus::Answered.as_str().into());
        log.sip_code = Some(200);
        if let Err(e) = target_media.set_remote(
            media.remote_rtp,
            media_codec(media.codec),
            media.telephone_event,
        ) {
            warn!(error = %e, "setting the transfer leg's media peer failed");
        }

        // 2. The two messages, at the same time: the manager hears who is coming, the caller
        //    hears that they are being connected.
        let manager = self
            .prompt_playable(spec.message_to_manager.as_ref())
            .await
            .and_then(|p| start_on(&target_media, p));
        let client_at = self.ms();
        let client = self
            .prompt_playable(spec.message_to_client.as_ref())
            .await
            .and_then(|p| start_on(&self.io.session, p));
        for e in [&manager, &client]
            .into_iter()
            .filter_map(|r| r.as_ref().err())
        {
            self.record.error(format!("transfer prompt: {e}"));
        }
        let (manager, client) = (manager.ok().flatten(), client.ok().flatten());
        let t0 = Instant::now();
        let mut manager_wait = std::pin::pin!(async move {
            match manager {
                Some(h) => Some(h.wait().await),
                None => None,
            }
        });
        let mut client_wait = std::pin::pin!(async move {
            match client {
                Some(h) => Some(h.wait().await),
                None => None,
            }
        });
        let (mut manager_done, mut client_done) = (false, false);
        while !(manager_done && client_done) {
            tokio::select! {
                o = &mut manager_wait, if !manager_done => {
                    manager_done = true;
                    log.manager_prompt_played_ms = o.map(|o| o.played_ms);
                }
                o = &mut client_wait, if !client_done => {
                    client_done = true;
                    if let (Some(o), Some(p)) = (o, spec.message_to_client.as_ref()) {
                        self.record.keep_prompt(PromptLog {
                            at_ms: client_at,
                            prompt: p.clone(),
                            interruptible: false,
                            outcome: match o.end {
                                PlayEnd::Completed => "completed",
                                PlayEnd::Interrupted => "interrupted",
                                PlayEnd::Stopped => "hung_up",
                            }.into(),
                            played_ms: o.played_ms,
                            elapsed_ms: t0.elapsed().as_millis() as u64,
                            error: None,
                        });
                    }
                }
                ev = target.next_event() => match ev {
                    Some(LegEvent::Ended(end)) => {
                        log.target_ended(&end);
                        log.ended_by = Some("target".into());
                        let _ = self.io.session.stop_playout();
                        let _ = target_media.close().await;
                        return TransferOutcome::Failure("the transfer target hung up before the bridge".into());
                    }
                    Some(_) => {}
                    None => {
                        let _ = self.io.session.stop_playout();
                        return TransferOutcome::Failure("the transfer leg closed".into());
                    }
                },
                ev = self.next() => {
                    if let Some(why) = Self::caller_gone(ev) {
                        log.ended_by = Some("caller".into());
                        let _ = self.io.session.stop_playout();
                        target.hangup();
                        if let Some(end) = wait_end(&mut target, END_WAIT).await { log.target_ended(&end); }
                        let _ = target_media.close().await;
                        return TransferOutcome::Failure(why);
                    }
                }
            }
        }

        // 3. The bridge, until either side hangs up; then the other side is hung up.
        let bridge = match Bridge::start(&self.io.session, &target_media) {
            Ok(b) => b,
            Err(e) => {
                target.hangup();
                let _ = wait_end(&mut target, END_WAIT).await;
                return TransferOutcome::Failure(format!("bridging the legs failed: {e}"));
            }
        };
        log.bridged_ms = Some(self.ms());
        info!(communication = %self.ctx.comm.sid, target_call_id = target.call_id(), "transfer bridged");
        loop {
            tokio::select! {
                ev = target.next_event() => match ev {
                    Some(LegEvent::Ended(end)) => {
                        log.target_ended(&end);
                        log.ended_by = Some("target".into());
                        bridge.stop();
                        self.io.hangup();
                        self.io.wait_leg_end(END_WAIT).await;
                        break;
                    }
                    Some(_) => {}
                    None => {
                        log.ended_by = Some("target".into());
                        bridge.stop();
                        self.io.hangup();
                        self.io.wait_leg_end(END_WAIT).await;
                        break;
                    }
                },
                ev = self.next() => {
                    if Self::caller_gone(ev).is_some() {
                        log.ended_by = Some("caller".into());
                        bridge.stop();
                        target.hangup();
                        if let Some(end) = wait_end(&mut target, END_WAIT).await { log.target_ended(&end); }
                        break;
                    }
                }
            }
        }
        // The call status stays `answered`; keep the reason the target leg gave.
        log.call_status = Some(CallStatus::Answered.as_str().into());
        match target_media.close().await {
            Ok((stats, _)) => log.target_media = Some(stats),
            Err(e) => warn!(error = %e, "closing the transfer leg's media failed"),
        }
        TransferOutcome::Success
    }

    /// The audio of a transfer message; None when there is none.
    async fn prompt_playable(
        &mut self,
        prompt: Option<&PromptSpec>,
    ) -> Result<Option<Playable>, String> {
        match prompt {
            Some(p) => self.playable(p).await.map(|s| Some(s.playable)),
            None => Ok(None),
        }
    }
}

/// Starts a non-interruptible prompt on `session`; None when there is none.
fn start_on(
    session: &MediaSession,
    playable: Option<Playable>,
) -> Result<Option<callsmith_media::PlayHandle>, String> {
    playable
        .map(|p| session.play(p, false).map_err(|e| e.to_string()))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(status: CallStatus, code: Option<u16>, reason: &str) -> EndInfo {
        EndInfo {
            call_status: status,
            sip_code: code,
            reason: reason.into(),
            by: callsmith_sip::Party::Remote,
        }
    }

    #[test]
    fn an_unanswered_target_maps_to_timeout_or_failure() {
        assert_eq!(
            unanswered(&end(CallStatus::NoAnswer, Some(487), "Request Terminated")),
            TransferOutcome::Timeout
        );
        assert_eq!(
            unanswered(&end(
                CallStatus::NoAnswer,
                Some(480),
                "Temporarily Unavailable"
            )),
            TransferOutcome::Timeout
        );
        assert_eq!(
            unanswered(&end(CallStatus::Busy, Some(486), "Busy Here")),
            TransferOutcome::Failure("transfer target busy: 486 Busy Here".into())
        );
        assert_eq!(
            unanswered(&end(CallStatus::Failed, None, "no final response")),
            TransferOutcome::Failure("transfer target failed: no final response".into())
        );
    }
}
