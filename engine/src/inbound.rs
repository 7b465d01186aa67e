//! Inbound calls: a call to one of our numbers is answered by the active agent whose
//! gateway is that number (or the number's pool) and runs the agent's published scenario
//! with direction `inbound`. A call arriving on a trunk bound to a tenant
//! (`[[sip.trunks]] inbound_tenant`) reaches only that tenant's numbers (`Store::inbound_route`).
//! Unknown numbers are rejected 404; while draining, 503.

use callsmith_domain::communication::caller;
use callsmith_domain::store::communications::{CallWrite, Claim, claimed_record};
use callsmith_domain::usecases::inbound_communication;
use callsmith_scenarios::interpreter::CallDirection;
use callsmith_sip::{IncomingCall, IncomingCalls, LegEvent, LocalMedia};
use chrono::Utc;
use tracing::{info, warn};

use std::sync::Arc;

use callsmith_domain::store::InboundRoute;
use callsmith_scenarios::Program;

use std::time::Duration;

use async_trait::async_trait;
use callsmith_domain::store::CommunicationRecord;
use callsmith_media::MediaSession;
use callsmith_sip::NegotiatedMedia;

use crate::call::{CallError, Leg, Prepared, fail, lifecycle};
use crate::runtime::Runtime;

/// Serves the inbound call stream until it closes: each call goes through the call
/// lifecycle ([`crate::call::lifecycle`]) with [`Answer`] as its setup.
pub async fn run(rt: Runtime, mut incoming: IncomingCalls) {
    while let Some(call) = incoming.recv().await {
        tokio::spawn(lifecycle::run(rt.clone(), Answer { call: Some(call) }));
    }
}

/// Answering an INVITE to one of our numbers: every outcome before the answer is answered
/// (a SIP refusal) or written here.
struct Answer {
    /// The INVITE, until it is answered or refused.
    call: Option<IncomingCall>,
}

impl Answer {
    fn refuse(&mut self, code: u16, reason: Option<String>) {
        if let Some(call) = self.call.take() {
            call.reject(code, reason);
        }
    }
}

#[async_trait]
impl lifecycle::Setup for Answer {
    fn direction(&self) -> CallDirection {
        CallDirection::Inbound
    }

    /// Routes the call to its agent and records the communication (claimed by this node).
    async fn prepare(&mut self, rt: &Runtime) -> Option<(CommunicationRecord, Prepared)> {
        let call = self.call.as_ref()?;
        // Capacity was checked as the INVITE arrived (503 with Retry-After); a drain that
        // began since is answered the same way.
        if rt.draining.is_cancelled() {
            self.refuse(503, Some("shutting down".into()));
            return None;
        }
        let Route {
            found,
            version,
            program,
            timezone,
        } = match route(rt, &call.to, &call.trunk).await {
            Ok(r) => r,
            Err(refusal) => {
                self.refuse(refusal.code, refusal.reason);
                return None;
            }
        };
        let agent = &found.agent;
        let identifier = found.identifier.clone();
        let lease =
            chrono::Duration::from_std(rt.settings.lease).unwrap_or(chrono::Duration::seconds(30));
        let new = inbound_communication(
            agent,
            version,
            call.from.clone(),
            identifier.clone(),
            call.trunk.clone(),
            timezone.clone(),
        );
        let claim = Claim {
            token: rt.settings.claim_token.clone(),
            by: rt.settings.instance.clone(),
            until: Utc::now() + lease,
        };
        let trunk = call.trunk.clone();
        // The row is written behind the call; a full queue means the database is behind.
        let at = Utc::now();
        let comm = claimed_record(&new, &claim, at);
        if rt
            .journal
            .record(CallWrite::CreateClaimed {
                new: Box::new(new),
                claim,
                at,
            })
            .is_err()
        {
            warn!("the call progress queue is full: 503");
            self.refuse(503, Some("temporarily unavailable".into()));
            return None;
        }
        let prep = Prepared {
            program,
            agent: Some(agent.clone()),
            from_number: identifier,
            trunk: Some(trunk),
            tz: caller::zone(&timezone),
            data: Default::default(),
            hangup: Default::default(),
            live: None,
            record: agent.call_recording,
        };
        Some((comm, prep))
    }

    async fn media(&mut self, rt: &Runtime, comm: &CommunicationRecord) -> Option<MediaSession> {
        let offered = &self.call.as_ref()?.remote_media;
        // An SRTP call's session learns its peer with its keys, at the answer: before
        // that it would send plain RTP.
        let remote = offered.srtp.is_none().then_some(offered.remote_rtp);
        let srtp = offered.srtp.is_some();
        match rt.media.open_session(remote) {
            Ok(s) => {
                if srtp && let Err(e) = s.await_srtp() {
                    warn!(error = %e, "holding the media for its SRTP keys failed");
                }
                Some(s)
            }
            Err(e) => {
                warn!(error = %e, "no media session for an inbound call: 503");
                self.refuse(503, None);
                fail(rt, comm, &format!("no media session: {e}")).await;
                None
            }
        }
    }

    async fn answered_leg(
        mut self,
        rt: &Runtime,
        comm: &CommunicationRecord,
        _prep: &Prepared,
        session: &MediaSession,
    ) -> Option<(Leg, NegotiatedMedia)> {
        let call = self.call.take()?;
        call.ring();
        let local = LocalMedia::telephony(rt.settings.media_ip, session.local_port());
        let mut leg = match call.answer(local).await {
            Ok(l) => l,
            Err(e) => {
                warn!(error = %e, "answering failed");
                fail(rt, comm, &format!("answering failed: {e}")).await;
                return None;
            }
        };
        // The first event of an answered leg carries the final media.
        let media = match tokio::time::timeout(Duration::from_secs(10), leg.next_event()).await {
            Ok(Some(LegEvent::Answered(m))) => m,
            _ => {
                warn!(communication = %comm.sid, "answered leg did not report media");
                fail(rt, comm, "the caller left while answering").await;
                return None;
            }
        };
        rt.journal
            .queue(CallWrite::Answered {
                sid: comm.sid.clone(),
                token: rt.settings.claim_token.clone(),
                call_id: leg.call_id().to_string(),
                dialog: leg
                    .dialog_record()
                    .and_then(|d| serde_json::to_string(d).ok()),
                at: Utc::now(),
            })
            .await;
        info!(communication = %comm.sid, "inbound call answered");
        Some((Leg::Sip(leg), media))
    }
}

/// What an inbound call to a number runs.
struct Route {
    /// The agent, number, account and published version, as routed.
    found: Arc<InboundRoute>,
    /// The published version's number.
    version: i64,
    program: Arc<Program>,
    /// The time zone the call runs in (the agent's, else its account's).
    timezone: String,
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

/// The tenant whose numbers alone calls on the trunk named `trunk` reach
/// (`inbound_tenant`); None for a trunk whose calls reach every tenant's numbers.
fn trunk_tenant<'a>(rt: &'a Runtime, trunk: &str) -> Option<&'a str> {
    rt.sip
        .trunks()
        .iter()
        .find(|t| t.name == trunk)
        .and_then(|t| t.inbound_tenant.as_deref())
}

/// Finds the agent serving the number `to` for a call that arrived on `trunk`, and what it
/// runs. A number no active agent serves (for that trunk's tenant, when it has one) is
/// 404; an agent whose scenario has no published version 480; a store that does not
/// answer 503.
async fn route(rt: &Runtime, to: &str, trunk: &str) -> Result<Route, Refusal> {
    let not_found = |e: CallError| Refusal::from_call_error(e, 404);
    let Some(found) = rt
        .store
        .inbound_route(to, trunk_tenant(rt, trunk))
        .await
        .map_err(|e| not_found(e.into()))?
    else {
        info!(to = %callsmith_sip::redact_number(to), %trunk, "inbound call to a number no active agent serves on this trunk: 404");
        return Err(Refusal {
            code: 404,
            reason: None,
        });
    };
    let Some(published) = &found.published else {
        info!(agent = %found.agent.sid, "the agent's scenario has no published version: 480");
        return Err(Refusal {
            code: 480,
            reason: Some("scenario not published".into()),
        });
    };
    let program = rt
        .program(published)
        .map_err(|e| Refusal::from_call_error(CallError::Permanent(e), 500))?;
    let version = published.version.unwrap_or_default();
    let Some(account) = &found.account else {
        return Err(not_found(CallError::permanent(
            "the agent's account no longer exists",
        )));
    };
    let timezone = caller::call_timezone(Some(&found.agent), account);
    Ok(Route {
        found,
        version,
        program,
        timezone,
    })
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
