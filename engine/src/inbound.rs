//! Inbound calls: a call to one of our numbers is answered by the active agent whose
//! gateway is that number (or the number's pool) and runs the agent's published scenario
//! with direction `inbound`. Unknown numbers are rejected 404; while draining, 503.

use callsmith_control::communication::caller;
use callsmith_control::store::{
    NewCommunication,
    communications::{COMMUNICATION_PREFIX, Claim},
};
use callsmith_scenarios::interpreter::CallDirection;
use callsmith_sip::{IncomingCall, IncomingCalls, LegEvent, LocalMedia};
use chrono::Utc;
use tracing::{info, warn};

use std::sync::Arc;

use callsmith_control::store::{AccountRecord, AgentRecord, ScenarioVersionRecord};
use callsmith_scenarios::Program;

use crate::call::{AnsweredCall, CallError, Prepared};
use crate::runtime::{LiveGuard, Runtime};
use callsmith_control::hangups::HangupHandle;

/// Serves the inbound call stream until it closes.
pub async fn run(rt: Runtime, mut incoming: IncomingCalls) {
    while let Some(call) = incoming.recv().await {
        // The task holds pointers only: the answering phase is boxed (and freed once the
        // call is up or over), and the answered call is one `AnsweredCall` box.
        let answering = Box::pin(answer(rt.clone(), call));
        tokio::spawn(async move {
            // The live-call guard and the hang-up registration are held until the call's
            // end is written: live-call caps and the shutdown drain count it.
            if let Some((call, _live, _hangup)) = answering.await {
                call.run().await;
            }
        });
    }
}

/// Routes and answers an inbound call; `None` when it was rejected or ended before it
/// was up (each such outcome is written here). With the answered call come its live-call
/// guard and hang-up registration, to be held while it runs.
async fn answer(
    rt: Runtime,
    call: IncomingCall,
) -> Option<(Box<AnsweredCall>, LiveGuard, HangupHandle)> {
    if rt.draining.is_cancelled() {
        call.reject(503, Some("shutting down".into()));
        return None;
    }
    let Route {
        agent,
        identifier,
        published,
        program,
        account,
    } = match route(&rt, &call.to).await {
        Ok(r) => r,
        Err(refusal) => {
            call.reject(refusal.code, refusal.reason);
            return None;
        }
    };
    let timezone = caller::call_timezone(Some(&agent), &account);
    let session = match rt.media.open_session(Some(call.remote_media.remote_rtp)) {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "no media session for an inbound call: 503");
            call.reject(503, None);
            return None;
        }
    };
    let live = rt.live.enter(Some(&agent.sid));
    let lease =
        chrono::Duration::from_std(rt.settings.lease).unwrap_or(chrono::Duration::seconds(30));
    let new = NewCommunication {
        sid: callsmith_control::ids::new_sid(COMMUNICATION_PREFIX),
        tenant_sid: agent.tenant_sid.clone(),
        account_sid: agent.account_sid.clone(),
        agent_sid: Some(agent.sid.clone()),
        scenario_sid: agent.scenario_sid.clone(),
        version: published.version,
        draft_version: None,
        recipient: call.from.clone(),
        from_number: identifier.clone(),
        trunk: Some(call.trunk.clone()),
        direction: "inbound".into(),
        is_test: agent.is_test,
        data: "{}".into(),
        strategy_sid: None,
        timezone: timezone.clone(),
        scheduled_at: None,
        due_at: Utc::now(),
    };
    let claim = Claim {
        token: rt.settings.claim_token.clone(),
        by: rt.settings.instance.clone(),
        until: Utc::now() + lease,
    };
    let comm = match rt.store.communication_create_inbound(&new, &claim).await {
        Ok(c) => c,
        Err(e) => {
            let refusal = Refusal::from_call_error(e.into(), 500);
            call.reject(refusal.code, refusal.reason);
            return None;
        }
    };
    call.ring();
    let local = LocalMedia::g711(rt.settings.media_ip, session.local_port());
    let mut leg = match call.answer(local).await {
        Ok(l) => l,
        Err(e) => {
            warn!(error = %e, "answering failed");
            let _ = rt
                .store
                .communication_fail_unclaimed(
                    &comm.sid,
                    &rt.settings.claim_token,
                    &format!("answering failed: {e}"),
                )
                .await;
            return None;
        }
    };
    // The first event of an answered leg carries the final media.
    let media =
        match tokio::time::timeout(std::time::Duration::from_secs(10), leg.next_event()).await {
            Ok(Some(LegEvent::Answered(m))) => Some(m),
            _ => call_media_fallback(&comm.sid),
        };
    let Some(media) = media else {
        let _ = rt
            .store
            .communication_fail_unclaimed(
                &comm.sid,
                &rt.settings.claim_token,
                "the caller left while answering",
            )
            .await;
        return None;
    };
    let _ = rt
        .store
        .communication_mark_answered(&comm.sid, &rt.settings.claim_token, leg.call_id())
        .await;
    info!(communication = %comm.sid, agent = %agent.sid, "inbound call answered");
    let hangup = rt.services.hangups.register(&comm.sid);
    let prep = Prepared {
        program,
        agent: Some(agent),
        from_number: identifier,
        trunk: Some(leg.trunk().to_string()),
        tz: caller::zone(&timezone),
        data: Default::default(),
        hangup: hangup.token(),
    };
    let answered = AnsweredCall::new(rt, comm, prep, session, leg, media, CallDirection::Inbound);
    Some((answered, live, hangup))
}

/// What an inbound call to a number runs.
struct Route {
    agent: AgentRecord,
    /// The number called, as stored.
    identifier: String,
    published: ScenarioVersionRecord,
    program: Arc<Program>,
    account: AccountRecord,
}

/// Why an inbound call is refused, as a SIP final response.
#[derive(Debug, PartialEq, Eq)]
struct Refusal {
    code: u16,
    reason: Option<String>,
}

impl Refusal {
    fn from_call_error(e: CallError, permanent_code: u16) -> Refusal {
        match e {
            // The store did not answer: the number may well be served; the caller may retry.
            CallError::Retryable(why) => {
                warn!(error = %why, "inbound routing failed: 503");
                Refusal {
                    code: 503,
                    reason: Some("temporarily unavailable".into()),
                }
            }
            CallError::Permanent(why) => {
                info!(error = %why, code = permanent_code, "inbound call refused");
                Refusal {
                    code: permanent_code,
                    reason: None,
                }
            }
        }
    }
}

/// Finds the agent serving the number `to` and what it runs. A number no active agent
/// serves is 404; an agent whose scenario has no published version 480; a store that does
/// not answer 503.
async fn route(rt: &Runtime, to: &str) -> Result<Route, Refusal> {
    let not_found = |e: CallError| Refusal::from_call_error(e, 404);
    let Some((agent_sid, identifier)) = rt
        .store
        .inbound_agent_for_number(to)
        .await
        .map_err(|e| not_found(e.into()))?
    else {
        info!(to = %to, "inbound call to a number no active agent serves: 404");
        return Err(Refusal {
            code: 404,
            reason: None,
        });
    };
    let agent = rt
        .store
        .agent_get(&agent_sid)
        .await
        .map_err(|e| not_found(e.into()))?
        .ok_or_else(|| not_found(CallError::permanent("the agent no longer exists")))?;
    let unpublished = |e: CallError| Refusal {
        reason: (!e.is_retryable()).then(|| "scenario not published".to_string()),
        ..Refusal::from_call_error(e, 480)
    };
    let published = rt
        .store
        .scenario_latest_published(&agent.scenario_sid)
        .await
        .map_err(|e| unpublished(e.into()))?
        .ok_or_else(|| {
            unpublished(CallError::permanent(
                "the agent's scenario has no published version",
            ))
        })?;
    let program = rt
        .program(&published)
        .map_err(|e| Refusal::from_call_error(CallError::Permanent(e), 500))?;
    let account = rt
        .store
        .account_get(&agent.account_sid)
        .await
        .map_err(|e| not_found(e.into()))?
        .ok_or_else(|| not_found(CallError::permanent("the agent's account no longer exists")))?;
    Ok(Route {
        agent,
        identifier,
        published,
        program,
        account,
    })
}

fn call_media_fallback(sid: &str) -> Option<callsmith_sip::NegotiatedMedia> {
    warn!(communication = %sid, "answered leg did not report media");
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals() {
        let busy_store = CallError::Retryable("store: pool timed out".into());
        assert_eq!(
            Refusal::from_call_error(busy_store, 480),
            Refusal {
                code: 503,
                reason: Some("temporarily unavailable".into())
            },
            "a store that did not answer is never a 4xx"
        );
        let gone = CallError::permanent("the agent no longer exists");
        assert_eq!(Refusal::from_call_error(gone, 404).code, 404);
    }
}
