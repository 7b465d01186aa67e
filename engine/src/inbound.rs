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

use crate::call::{AnsweredCall, Prepared};
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
    let route = match rt.store.inbound_agent_for_number(&call.to).await {
        Ok(r) => r,
        Err(e) => {
            warn!(error = %e, "inbound routing failed");
            call.reject(500, None);
            return None;
        }
    };
    let Some((agent_sid, identifier)) = route else {
        info!(to = %call.to, "inbound call to a number no active agent serves: 404");
        call.reject(404, None);
        return None;
    };
    let agent = match rt.store.agent_get(&agent_sid).await {
        Ok(Some(a)) => a,
        _ => {
            call.reject(404, None);
            return None;
        }
    };
    let published = match rt
        .store
        .scenario_latest_published(&agent.scenario_sid)
        .await
    {
        Ok(Some(v)) => v,
        _ => {
            warn!(agent = %agent.sid, "inbound agent's scenario has no published version: 480");
            call.reject(480, Some("scenario not published".into()));
            return None;
        }
    };
    let program = match rt.program(&published) {
        Ok(s) => s,
        Err(_) => {
            call.reject(500, None);
            return None;
        }
    };
    let account = match rt.store.account_get(&agent.account_sid).await {
        Ok(Some(a)) => a,
        _ => {
            call.reject(404, None);
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
            warn!(error = %e, "recording an inbound call failed: 500");
            call.reject(500, None);
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

fn call_media_fallback(sid: &str) -> Option<callsmith_sip::NegotiatedMedia> {
    warn!(communication = %sid, "answered leg did not report media");
    None
}
