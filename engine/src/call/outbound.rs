//! Placing an outbound call: wait for its cps slot, place it through the SIP stack and
//! wait for the answer; every outcome before an answer is written here.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use callsmith_domain::store::communications::{CallFinish, CallWrite, NOT_ANSWERED};
use callsmith_domain::store::{AgentRecord, CommunicationRecord};
use callsmith_media::MediaSession;
use callsmith_scenarios::interpreter::CallDirection;
use callsmith_sip::{CallLeg, CallStatus, LocalMedia, NegotiatedMedia};
use chrono::{DateTime, Utc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::ForcedEnd;
use super::error::CallError;
use super::leg::Leg;
use super::lifecycle;
use super::prepare::{Prepared, prepare};
use super::ring::{RingAction, RingEnd, RingEvent, Ringing};
use super::{finish, hold_for_keys};
use crate::runtime::Runtime;

/// Waits until `at` (at once when it has passed); false when `draining` is cancelled first.
pub(super) async fn wait_for_slot(draining: &CancellationToken, at: DateTime<Utc>) -> bool {
    if draining.is_cancelled() {
        return false;
    }
    let Ok(wait) = (at - Utc::now()).to_std() else {
        return true;
    };
    tokio::select! {
        _ = tokio::time::sleep(wait) => true,
        _ = draining.cancelled() => false,
    }
}

/// Runs a claimed outbound communication to its end through the call lifecycle. Never
/// panics on bad data: every failure ends as a `failed` row with the reason, or releases
/// the claim when trying later can help. `start_at` is the call's cps start slot, which
/// the dialer claims up to one poll ahead; `agent` the row's agent as the dialer just read
/// it (None: read when the call is prepared).
pub fn run_outbound(
    rt: Runtime,
    comm: CommunicationRecord,
    start_at: Option<DateTime<Utc>>,
    agent: Option<Arc<AgentRecord>>,
) -> impl std::future::Future<Output = ()> + Send {
    lifecycle::run(
        rt,
        Dial {
            comm: Some(comm),
            start_at,
            agent,
        },
    )
}

/// Placing a claimed row: every outcome before the answer is written here (failed, not
/// answered, claim released or lost).
pub(super) struct Dial {
    /// The claimed row, until `prepare` hands it on.
    comm: Option<CommunicationRecord>,
    start_at: Option<DateTime<Utc>>,
    /// The row's agent, when the dialer passed it.
    agent: Option<Arc<AgentRecord>>,
}

#[async_trait]
impl lifecycle::Setup for Dial {
    fn direction(&self) -> CallDirection {
        CallDirection::Outbound
    }

    async fn prepare(&mut self, rt: &Runtime) -> Option<(CommunicationRecord, Prepared)> {
        let comm = self.comm.take()?;
        let token = &rt.settings.claim_token;
        let checked = match not_suppressed(rt, &comm).await {
            Ok(()) => prepare(rt, &comm, self.agent.take()).await,
            Err(e) => Err(e),
        };
        let prep = match checked {
            Ok(p) => p,
            Err(CallError::Retryable(e)) => {
                // Nothing is wrong with the row: give it back for a later attempt.
                warn!(communication = %comm.sid, error = %e, "communication not dialled now; releasing the claim");
                release(rt, &comm).await;
                return None;
            }
            Err(CallError::Permanent(e)) => {
                warn!(communication = %comm.sid, error = %e, "communication cannot be dialled");
                // The agent (when it still exists) is read again for its result targets.
                let agent = match &comm.agent_sid {
                    Some(a) => rt.store.agent_get(a).await.ok().flatten(),
                    None => None,
                };
                let write = CallWrite::Fail {
                    sid: comm.sid.clone(),
                    token: token.clone(),
                    error: e,
                    deliveries: crate::delivery::deliveries(&comm, agent.as_ref()),
                    at: Utc::now(),
                };
                if let Err(e) = rt.journal.commit(write).await {
                    warn!(communication = %comm.sid, error = %e, "recording a failed communication failed");
                }
                return None;
            }
        };
        // The strategy's calling hours (in the recipient's zones), frequency cap and
        // maximum age, right before the dial.
        match super::strategy::before_dial(rt, &comm).await {
            Ok(super::strategy::BeforeDial::Now) => {}
            Ok(super::strategy::BeforeDial::Later(due)) => {
                info!(communication = %comm.sid, due = %due, "outside the strategy's hours or cap; released until then");
                release_until(rt, &comm, Some(due)).await;
                return None;
            }
            Ok(super::strategy::BeforeDial::Never(why)) => {
                let write = CallWrite::Fail {
                    sid: comm.sid.clone(),
                    token: token.clone(),
                    error: why,
                    deliveries: crate::delivery::deliveries(&comm, prep.agent.as_deref()),
                    at: Utc::now(),
                };
                if let Err(e) = rt.journal.commit(write).await {
                    warn!(communication = %comm.sid, error = %e, "recording a failed communication failed");
                }
                return None;
            }
            Err(e) => {
                warn!(communication = %comm.sid, error = %e, "checking the strategy failed; releasing the claim");
                release(rt, &comm).await;
                return None;
            }
        }
        Some((comm, prep))
    }

    async fn media(&mut self, rt: &Runtime, comm: &CommunicationRecord) -> Option<MediaSession> {
        match rt.media.open_session(None) {
            Ok(s) => Some(s),
            Err(e) => {
                // No media resources now: give the row back for a later attempt.
                warn!(error = %e, "no media session; releasing the claim");
                release(rt, comm).await;
                None
            }
        }
    }

    async fn answered_leg(
        self,
        rt: &Runtime,
        comm: &CommunicationRecord,
        prep: &Prepared,
        session: &MediaSession,
    ) -> Option<(Leg, NegotiatedMedia)> {
        // The call waits for its cps slot with everything ready (prepared, its media
        // session open), so that only the INVITE follows the slot: a start lags its slot
        // by the task's wake-up alone, and starts stay `1/cps` apart on the wire.
        if let Some(at) = self.start_at
            && !wait_for_slot(&rt.draining, at).await
        {
            // Draining began before the slot: the call is not placed, the row goes back.
            release(rt, comm).await;
            return None;
        }
        place(rt, comm, prep, session)
            .await
            .map(|(leg, media)| (Leg::Sip(leg), media))
    }
}

/// The do-not-call list is read again right before each dial, so a number listed after
/// its communication was dispatched is never dialled: the row ends `failed` with an
/// `error` starting `recipient_suppressed` (docs/strategies.md).
async fn not_suppressed(rt: &Runtime, comm: &CommunicationRecord) -> Result<(), CallError> {
    let key = callsmith_domain::usecases::do_not_call_key(&comm.recipient);
    if rt
        .store
        .do_not_call_contains(&comm.account_sid, &key)
        .await?
    {
        return Err(CallError::permanent(format!(
            "recipient_suppressed: {key} is on the account's do-not-call list; not dialled"
        )));
    }
    Ok(())
}

/// Gives a claimed row back before its INVITE, for a later attempt.
async fn release(rt: &Runtime, comm: &CommunicationRecord) {
    release_until(rt, comm, None).await;
}

/// Gives a claimed row back before its INVITE, not due before `due_at` when given.
async fn release_until(rt: &Runtime, comm: &CommunicationRecord, due_at: Option<DateTime<Utc>>) {
    rt.journal
        .queue(CallWrite::Release {
            sid: comm.sid.clone(),
            token: rt.settings.claim_token.clone(),
            due_at,
            at: Utc::now(),
        })
        .await;
}

/// Places the call and waits for its answer.
async fn place(
    rt: &Runtime,
    comm: &CommunicationRecord,
    prep: &Prepared,
    session: &MediaSession,
) -> Option<(CallLeg, NegotiatedMedia)> {
    let token = &rt.settings.claim_token;
    let hangup = &prep.hangup;
    // From here the row is never redialled (a claim is a commitment to dial; see
    // `store::communications`): the INVITE goes out without waiting for this write.
    rt.journal
        .queue(CallWrite::Started {
            sid: comm.sid.clone(),
            token: token.clone(),
            from_number: prep.from_number.clone(),
            trunk: prep.trunk.clone(),
            at: Utc::now(),
        })
        .await;
    let local = LocalMedia::telephony(rt.settings.media_ip, session.local_port());
    hold_for_keys(rt, prep.trunk.as_deref(), session);
    let placed = rt
        .sip
        .place_call(callsmith_sip::OutboundCall {
            trunk: prep.trunk.clone(),
            from_number: prep.from_number.clone(),
            from_display: None,
            to_number: comm.recipient.clone(),
            headers: Vec::new(),
            local_media: local,
            ring_timeout: rt.settings.ring_timeout,
        })
        .await;
    let mut leg = match placed {
        Ok(l) => l,
        Err(e) => {
            let f = CallFinish::not_placed(format!("placing the call: {e}"));
            finish(rt, comm, prep.agent.as_deref(), &f).await;
            return None;
        }
    };
    info!(communication = %comm.sid, call_id = leg.call_id(), "call placed");
    // Wait for the answer (or the end): bounded by the ring timeout plus a margin; a
    // shutdown or a hang-up through the API gives up on it. A leg given up on is hung up
    // and its end awaited for 10 s.
    let deadline = Instant::now() + rt.settings.ring_timeout + Duration::from_secs(40);
    let mut ringing = Ringing::new(deadline.into_std(), Duration::from_secs(10));
    let ended = loop {
        let mut over = None;
        while let Some(action) = ringing.poll_action() {
            match action {
                RingAction::EarlyMedia(m) => {
                    let _ = super::point_media(session, &m);
                }
                RingAction::HangUp => leg.hangup(),
                RingAction::Done(end) => over = Some(end),
            }
        }
        if let Some(end) = over {
            break end;
        }
        let open = ringing.ringing();
        let timeout = ringing.poll_timeout().unwrap_or(deadline.into_std());
        let now = || Instant::now().into_std();
        tokio::select! {
            ev = leg.next_event() => ringing.handle_event(now(), match ev {
                Some(ev) => RingEvent::Leg(ev),
                None => RingEvent::LegClosed,
            }),
            _ = tokio::time::sleep_until(timeout.into()) => ringing.handle_timeout(now()),
            _ = rt.hangup_all.cancelled(), if open => ringing.handle_event(now(), RingEvent::GiveUp),
            _ = hangup.cancelled(), if open => ringing.handle_event(now(), RingEvent::GiveUp),
        }
    };
    let end = match ended {
        RingEnd::Answered(media) => Ok(media),
        RingEnd::Ended(end) => {
            // A call that could not be set up says why (no response, a 5xx...).
            let failed = end.call_status == CallStatus::Failed;
            let f = CallFinish {
                error: failed.then(|| end.reason.clone()),
                ..CallFinish::not_answered(end.call_status, end.sip_code, NOT_ANSWERED)
            };
            finish(rt, comm, prep.agent.as_deref(), &f).await;
            return None;
        }
        RingEnd::Closed => Err(None),
        RingEnd::GaveUp { end, .. } => Err(end),
    };
    let media = match end {
        Ok(media) => media,
        Err(end) => {
            let reason = if hangup.is_cancelled() {
                ForcedEnd::HangupRequested.as_str()
            } else {
                NOT_ANSWERED
            };
            let f = CallFinish::not_answered(
                end.as_ref().map_or(CallStatus::Canceled, |e| e.call_status),
                end.and_then(|e| e.sip_code),
                reason,
            );
            finish(rt, comm, prep.agent.as_deref(), &f).await;
            return None;
        }
    };
    rt.journal
        .queue(CallWrite::Answered {
            sid: comm.sid.clone(),
            token: token.clone(),
            call_id: leg.call_id().to_string(),
            dialog: leg
                .dialog_record()
                .and_then(|d| serde_json::to_string(d).ok()),
            at: Utc::now(),
        })
        .await;
    Some((leg, media))
}

#[cfg(test)]
mod tests {
    use super::*;

    // On tokio's paused clock: "at once" means no time passes at all, and a wait is
    // exactly as long as the timer it sleeps on, however busy the machine is.
    #[tokio::test(start_paused = true)]
    pub(super) async fn a_call_waits_for_its_slot_unless_draining_begins() {
        use tokio::time::Instant;
        let draining = CancellationToken::new();
        // A slot that has passed: at once.
        let t = Instant::now();
        assert!(wait_for_slot(&draining, Utc::now() - chrono::Duration::seconds(1)).await);
        assert_eq!(t.elapsed(), Duration::ZERO);
        // A slot ahead: not before it.
        let t = Instant::now();
        assert!(wait_for_slot(&draining, Utc::now() + chrono::Duration::milliseconds(80)).await);
        assert!(
            t.elapsed() >= Duration::from_millis(70),
            "{:?}",
            t.elapsed()
        );
        // Draining begins while it waits: the call is not placed, and not after the slot.
        let cancel = draining.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            cancel.cancel();
        });
        let t = Instant::now();
        assert!(!wait_for_slot(&draining, Utc::now() + chrono::Duration::seconds(30)).await);
        assert_eq!(
            t.elapsed(),
            Duration::from_millis(30),
            "when draining began"
        );
        // Once draining, even a slot that has passed is not taken.
        assert!(!wait_for_slot(&draining, Utc::now() - chrono::Duration::seconds(1)).await);
    }
}
