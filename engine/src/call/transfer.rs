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
//! what a bridged transfer does when is decided by [`BridgeTurn`], which this module feeds
//! the two legs' events and the time and whose actions it carries out. Every attempt is kept as a [`TransferLog`] in the call
//! history (`transfers`), beside the interpreter's `transferred` trace event.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use callsmith_media::{
    Bridge, MediaError, MediaSession, PlayEnd, PlayHandle, Playout, prompt::Playable,
};
use callsmith_scenarios::port::{Interruption, PromptSpec, TransferOutcome, TransferSpec};
use callsmith_sip::{LegEvent, LocalMedia, OutboundCall, ReferOutcome};
use tokio::time::Instant;
use tracing::{info, warn};

use super::bridge::{BridgeAction, BridgeEvent, BridgeTurn, END_WAIT, TargetMedia};
use super::history::{PromptLog, PromptOutcome, TransferLog, TransferMode, TransferResult};
use super::io::{CallEnd, CallEvent};
use super::port::LivePort;

/// The two messages of a bridged transfer, playing.
struct Messages {
    manager: Pin<Box<dyn Future<Output = Option<Playout>> + Send>>,
    client: Pin<Box<dyn Future<Output = Option<Playout>> + Send>>,
    manager_done: bool,
    client_done: bool,
    /// When the caller's message started (ms since the answer), for its prompt record.
    client_at: u64,
    started: Instant,
}

impl Default for Messages {
    /// Nothing plays yet.
    fn default() -> Messages {
        Messages {
            manager: Box::pin(std::future::pending()),
            client: Box::pin(std::future::pending()),
            manager_done: false,
            client_done: false,
            client_at: 0,
            started: Instant::now(),
        }
    }
}

fn ring_timeout(spec: &TransferSpec) -> Duration {
    Duration::from_secs_f64(spec.timeout_secs.clamp(0.5, 3600.0))
}

impl LivePort {
    fn keep_transfer(&mut self, mut log: TransferLog, outcome: &TransferOutcome) {
        log.ended_ms = self.ms();
        (log.outcome, log.detail) = match outcome {
            TransferOutcome::Success => (TransferResult::Success, log.detail.take()),
            TransferOutcome::Failure(why) => (TransferResult::Failure, Some(why.clone())),
            TransferOutcome::Timeout => (TransferResult::Timeout, log.detail.take()),
        };
        info!(communication = %self.ctx.comm.sid, mode = %log.mode, outcome = %log.outcome, detail = ?log.detail, "call transfer");
        self.record.keep_transfer(log);
    }

    pub(super) async fn blind_transfer(&mut self, spec: &TransferSpec) -> TransferOutcome {
        let mut log = TransferLog::new(TransferMode::Blind, &spec.number, self.ms());
        if let Some(m) = &spec.message_to_client {
            let _ = self.play_prompt(m, Interruption::NONE).await;
        }
        let outcome = if self.io.hung_up() {
            TransferOutcome::Failure("the caller hung up".into())
        } else {
            let refer = self.io.leg.refer(&spec.number, &spec.sip_headers);
            match tokio::time::timeout(ring_timeout(spec), refer).await {
                Err(_) => TransferOutcome::Timeout,
                Ok(ReferOutcome::Succeeded { sip_code }) => {
                    log.sip_code = Some(sip_code);
                    TransferOutcome::Success
                }
                Ok(ReferOutcome::Failed {
                    sip_code: None,
                    reason,
                }) if reason.contains("NOTIFY") => {
                    log.detail = Some(reason);
                    TransferOutcome::Timeout
                }
                Ok(ReferOutcome::Failed { sip_code, reason }) => {
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
        let log = TransferLog::new(TransferMode::Bridged, &spec.number, self.ms());
        let (outcome, log) = self.bridge_to_target(spec, log).await;
        self.keep_transfer(log, &outcome);
        outcome
    }

    async fn bridge_to_target(
        &mut self,
        spec: &TransferSpec,
        mut log: TransferLog,
    ) -> (TransferOutcome, TransferLog) {
        if self.io.hung_up() {
            return (TransferOutcome::Failure("the caller hung up".into()), log);
        }
        let rt = self.ctx.rt.clone();
        let mut target_media = match rt.media.open_session(None) {
            Ok(s) => s,
            Err(e) => {
                let why = format!("no media session for the transfer leg: {e}");
                return (TransferOutcome::Failure(why), log);
            }
        };
        // The target leg's media events (VAD, DTMF) play no part in the transfer.
        drop(target_media.take_events());
        super::hold_for_keys(&rt, Some(&self.ctx.trunk), &target_media);
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
                local_media: LocalMedia::telephony(rt.settings.media_ip, target_media.local_port()),
                ring_timeout: ring,
            })
            .await;
        let mut target = match placed {
            Ok(l) => l,
            Err(e) => {
                let why = format!("placing the transfer call: {e}");
                return (TransferOutcome::Failure(why), log);
            }
        };
        log.call_id = Some(target.call_id().to_string());
        let started = self.record.started().into_std();
        let mut turn = BridgeTurn::new(now(), ring, started, log);
        let mut messages = Messages::default();
        let mut bridge: Option<Bridge> = None;
        let (outcome, media) = loop {
            let mut over = None;
            while let Some(action) = turn.poll_action() {
                match action {
                    BridgeAction::Answered(m) => {
                        if let Err(e) = super::point_media(&target_media, &m) {
                            warn!(error = %e, "setting the transfer leg's media peer failed");
                        }
                        messages = self.start_messages(spec, &target_media).await;
                    }
                    BridgeAction::HangUpTarget => target.hangup(),
                    BridgeAction::StopCallerPlayout => {
                        let _ = self.io.session.stop_playout();
                    }
                    BridgeAction::StartBridge => match self.io.session.bridge(&target_media) {
                        Ok(b) => {
                            bridge = Some(b);
                            turn.handle_event(now(), BridgeEvent::BridgeStarted);
                            info!(communication = %self.ctx.comm.sid, target_call_id = target.call_id(), "transfer bridged");
                        }
                        Err(e) => {
                            turn.handle_event(now(), BridgeEvent::BridgeFailed(e.to_string()))
                        }
                    },
                    BridgeAction::StopBridge => {
                        if let Some(b) = bridge.take() {
                            b.stop();
                        }
                    }
                    BridgeAction::HangUpCaller => {
                        self.io.hangup();
                        self.io.wait_leg_end(END_WAIT).await;
                    }
                    BridgeAction::Done(outcome, media) => over = Some((outcome, media)),
                }
            }
            if let Some(o) = over {
                break o;
            }
            let (hears_caller, hears_target) = (turn.hears_caller(), turn.hears_target());
            let playing = turn.messages_playing();
            let deadline = turn.poll_timeout();
            let timeout = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            let ev = tokio::select! {
                ev = target.next_event(), if hears_target => match ev {
                    // A re-INVITE re-keyed the target's SRTP: its media takes the keys.
                    Some(LegEvent::SrtpRekeyed(keys)) => {
                        if let Err(e) = target_media.set_srtp(Some(&super::srtp_params(&keys))) {
                            warn!(error = %e, "re-keying the transfer target's SRTP failed");
                        }
                        continue;
                    }
                    Some(ev) => BridgeEvent::Target(ev),
                    None => BridgeEvent::TargetClosed,
                },
                ev = self.next(), if hears_caller => match ev {
                    CallEvent::Ended(CallEnd::HungUp) => BridgeEvent::CallerGone("the caller hung up".into()),
                    CallEvent::Ended(CallEnd::Forced(f)) => BridgeEvent::CallerGone(f.message().into()),
                    CallEvent::Digit(_) | CallEvent::Media(_) => continue,
                },
                o = &mut messages.manager, if playing && !messages.manager_done => {
                    messages.manager_done = true;
                    BridgeEvent::ManagerMessageDone(o.map(|o| o.played_ms))
                }
                o = &mut messages.client, if playing && !messages.client_done => {
                    messages.client_done = true;
                    if let (Some(o), Some(p)) = (o, spec.message_to_client.as_ref()) {
                        self.record.keep_prompt(PromptLog {
                            at_ms: messages.client_at,
                            prompt: p.clone(),
                            interruptible: false,
                            outcome: match o.end {
                                PlayEnd::Completed => PromptOutcome::Completed,
                                PlayEnd::Interrupted => PromptOutcome::Interrupted,
                                PlayEnd::Stopped => PromptOutcome::HungUp,
                            },
                            played_ms: o.played_ms,
                            elapsed_ms: messages.started.elapsed().as_millis() as u64,
                            error: None,
                        });
                    }
                    BridgeEvent::ClientMessageDone
                }
                _ = timeout => {
                    turn.handle_timeout(now());
                    continue;
                }
            };
            turn.handle_event(now(), ev);
        };
        let mut log = turn.into_log();
        match media {
            TargetMedia::Drop => {}
            TargetMedia::Close => {
                let _ = target_media.close().await;
            }
            TargetMedia::CloseWithStats => match target_media.close().await {
                Ok((stats, _)) => log.target_media = Some(stats),
                Err(e) => warn!(error = %e, "closing the transfer leg's media failed"),
            },
        }
        (outcome, log)
    }

    /// Starts the two messages at the same time: the manager hears who is coming, the
    /// caller hears that they are being connected. A message that cannot be had is in the
    /// history's errors, and counts as played.
    async fn start_messages(
        &mut self,
        spec: &TransferSpec,
        target_media: &MediaSession,
    ) -> Messages {
        let manager = self
            .prompt_playable(spec.message_to_manager.as_ref())
            .await
            .and_then(|p| start_on(p, |p| target_media.play(p, false)));
        let client_at = self.ms();
        let client = self
            .prompt_playable(spec.message_to_client.as_ref())
            .await
            .and_then(|p| start_on(p, |p| self.io.session.play(p, false)));
        for e in [&manager, &client]
            .into_iter()
            .filter_map(|r| r.as_ref().err())
        {
            self.record.error(format!("transfer prompt: {e}"));
        }
        let (manager, client) = (manager.ok().flatten(), client.ok().flatten());
        Messages {
            manager: Box::pin(async move {
                match manager {
                    Some(h) => Some(h.wait().await),
                    None => None,
                }
            }),
            client: Box::pin(async move {
                match client {
                    Some(h) => Some(h.wait().await),
                    None => None,
                }
            }),
            manager_done: false,
            client_done: false,
            client_at,
            started: Instant::now(),
        }
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

/// The time the transfer machine is fed: the runtime's clock, the one its deadline is
/// slept on.
fn now() -> std::time::Instant {
    Instant::now().into_std()
}

/// Starts a message with `play`; None when there is none.
fn start_on(
    playable: Option<Playable>,
    play: impl FnOnce(Playable) -> Result<PlayHandle, MediaError>,
) -> Result<Option<PlayHandle>, String> {
    playable
        .map(|p| play(p).map_err(|e| e.to_string()))
        .transpose()
}

#[cfg(test)]
mod tests {
    use callsmith_scenarios::port::TransferOutcome;
    use callsmith_sip::{CallStatus, EndInfo};

    use super::super::bridge::unanswered;

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
