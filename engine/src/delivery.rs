//! Result delivery: every finished communication of an agent is POSTed as JSON to each of
//! the agent's `communication_result.targets`, retried with exponential backoff.
//! Rows live in `result_deliveries` (claimed with a token and a lease like communications,
//! so several engines share the work and a crash loses nothing). Payload: see
//! docs/communications.md.
//!
//! Exactly once, as the target sees it: one row per communication and target (a unique
//! index; queuing again, as a peer ending a lost node's call does, inserts nothing), a
//! `delivered` or `failed` row is never claimed again, and each POST carries the row's sid
//! as `delivery_id` in the body and as the `Idempotency-Key` header. A node that dies
//! after its POST but before recording it leaves the row `delivering`: the peer taking it
//! over (or any node, once the lease ran out) sends it again with the same key, which the
//! target dedupes on.

use std::time::Duration;

use callsmith_domain::communication::Communication;
use callsmith_domain::guarded_http::OutboundRequest;
use callsmith_domain::store::communications::{CommunicationAttempt, Deliveries};
use callsmith_domain::store::{
    AgentRecord, CommunicationRecord, ResultDeliveryRecord, results::AttemptOutcome,
};
use serde_json::{Value, json};
use tracing::{debug, warn};

use crate::runtime::Runtime;

/// The result deliveries of a communication that ended: one per target of its agent;
/// None for a call without an agent (a scenario test call) or an agent without targets.
/// Queued with the call's end, in the same transaction (`CallWrite::Finish`).
pub fn deliveries(
    comm: &CommunicationRecord,
    agent: Option<&AgentRecord>,
) -> Option<Box<Deliveries>> {
    let agent = agent?;
    let urls = agent.result.urls();
    (!urls.is_empty()).then(|| {
        Box::new(Deliveries {
            tenant_sid: comm.tenant_sid.clone(),
            account_sid: comm.account_sid.clone(),
            agent_sid: agent.sid.clone(),
            urls,
        })
    })
}

/// The header carrying the delivery's `delivery_id` (its row's sid): the same on every
/// attempt, whichever node sends it, so a target that dedupes on it sees each result once
/// even when a node dies between its POST and recording it, and a peer sends it again.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Delay before attempt `attempts + 1`: base · 2^attempts, at most one hour.
pub fn backoff(base: Duration, attempts: i64) -> Duration {
    let exp = attempts.clamp(0, 20) as u32;
    base.saturating_mul(2u32.saturating_pow(exp))
        .min(Duration::from_secs(3600))
}

/// The JSON body POSTed to a target: the communication and its attempts (every dial,
/// oldest first; `attempt` is this delivery's own try), and `outcome`, the last dial's
/// outcome as the strategy saw it (`completed`, `opted_out`, `declined`, `busy` …; null
/// when nothing was dialled).
pub fn payload(
    rec: &ResultDeliveryRecord,
    comm: &Communication,
    attempts: &[CommunicationAttempt],
) -> Value {
    json!({
        "event": "communication.result",
        "delivery_id": rec.sid,
        "attempt": rec.attempts + 1,
        "agent_sid": rec.agent_sid,
        "communication": comm,
        "outcome": attempts.last().and_then(|a| a.outcome.as_deref()),
        "attempts": attempts,
    })
}

/// The delivery loop: claims due deliveries and attempts them until `stop`.
pub async fn run(rt: Runtime, stop: tokio_util::sync::CancellationToken) {
    let cfg = rt.settings.dialer.clone();
    let base = Duration::from_millis(cfg.result_backoff_base_ms.max(1));
    let lease = Duration::from_secs(60);
    loop {
        if stop.is_cancelled() {
            return;
        }
        let until =
            callsmith_domain::store::now() + chrono::Duration::from_std(lease).unwrap_or_default();
        let batch = rt
            .store
            .result_delivery_claim_due(&rt.settings.claim_token, until, 16)
            .await
            .unwrap_or_else(|e| {
                warn!(error = %e, "claiming result deliveries failed");
                Vec::new()
            });
        let mut tasks = Vec::new();
        for rec in batch {
            let rt = rt.clone();
            tasks.push(tokio::spawn(async move {
                attempt(&rt, rec, base).await;
            }));
        }
        let idle = tasks.is_empty();
        for t in tasks {
            let _ = t.await;
        }
        if idle {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(cfg.poll_interval_ms.max(50))) => {}
                _ = stop.cancelled() => return,
            }
        }
    }
}

async fn attempt(rt: &Runtime, rec: ResultDeliveryRecord, base: Duration) {
    let max_attempts = rt.settings.dialer.result_max_attempts.max(1) as i64;
    let comm = match rt.store.communication_get(&rec.communication_sid).await {
        Ok(Some(c)) => c,
        _ => return,
    };
    let attempts = match rt.store.communication_attempts_all(&comm.sid).await {
        Ok(a) => a,
        Err(e) => {
            warn!(communication = %comm.sid, error = %e, "reading the attempts failed");
            return;
        }
    };
    let body = payload(&rec, &Communication::from(&comm), &attempts);
    let req = OutboundRequest::new("POST", rec.url.clone())
        .header("content-type", "application/json")
        .header(IDEMPOTENCY_KEY, rec.sid.clone())
        .body(serde_json::to_vec(&body).unwrap_or_default())
        .timeout(Duration::from_secs(10))
        .max_body(0);
    // Targets are tenant-named URLs: they go through the guarded client, and a refused
    // target (a non-public address) fails at once, since retrying cannot help.
    let (code, error, permanent) = match rt.services.outbound.send(&req).await {
        Ok(r) if r.is_success() => (Some(i64::from(r.status)), None, false),
        Ok(r) => (
            Some(i64::from(r.status)),
            Some(format!("target answered {}", r.status)),
            false,
        ),
        Err(e) => (None, Some(e.to_string()), !e.is_retryable()),
    };
    let outcome = match error {
        None => AttemptOutcome::Delivered {
            status_code: code.unwrap_or(200),
        },
        Some(error) if permanent || rec.attempts + 1 >= max_attempts => AttemptOutcome::Failed {
            status_code: code,
            error,
        },
        Some(error) => AttemptOutcome::Retry {
            status_code: code,
            error,
            next_attempt_at: callsmith_domain::store::now()
                + chrono::Duration::from_std(backoff(base, rec.attempts)).unwrap_or_default(),
        },
    };
    debug!(delivery = %rec.sid, ?outcome, "result delivery attempt");
    if let Err(e) = rt
        .store
        .result_delivery_record(&rec.sid, &rt.settings.claim_token, &outcome)
        .await
    {
        warn!(delivery = %rec.sid, error = %e, "recording a delivery attempt failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callsmith_domain::store::communications::{Claim, claimed_record};
    use callsmith_domain::store::results::DeliveryStatus;
    use callsmith_domain::usecases::{Direction, Parties, ScenarioRun, new_communication};

    fn attempt(n: i64, outcome: &str) -> CommunicationAttempt {
        CommunicationAttempt {
            n,
            started_at: None,
            ended_at: chrono::Utc::now(),
            from_number: "+4930100".into(),
            trunk: None,
            sip_code: Some(200),
            call_status: Some("answered".into()),
            end_reason: None,
            amd: None,
            outcome: Some(outcome.into()),
        }
    }

    /// The body names the last dial's outcome: an opted-out recipient's result says so.
    #[test]
    fn the_payload_carries_the_last_attempts_outcome() {
        let new = new_communication(
            Parties {
                tenant_sid: "ten_1".into(),
                account_sid: "acc_1".into(),
                recipient: "+4915550777".into(),
                from_number: "+4930100".into(),
                trunk: None,
                timezone: "UTC".into(),
            },
            ScenarioRun {
                scenario_sid: "scn_1".into(),
                version: Some(1),
                draft_version: None,
            },
            Direction::Outbound,
        );
        let now = chrono::Utc::now();
        let claim = Claim {
            token: "t".into(),
            by: "b".into(),
            until: now,
        };
        let comm = Communication::from(&claimed_record(&new, &claim, now));
        let rec = ResultDeliveryRecord {
            sid: "rdl_1".into(),
            tenant_sid: "ten_1".into(),
            account_sid: "acc_1".into(),
            communication_sid: new.sid.clone(),
            agent_sid: "agt_1".into(),
            url: "https://a.example/r".into(),
            status: DeliveryStatus::Delivering,
            attempts: 0,
            last_status_code: None,
            last_error: None,
            next_attempt_at: now,
            claim_token: None,
            claimed_until: None,
            delivered_at: None,
            created_at: now,
            updated_at: now,
        };
        let body = payload(&rec, &comm, &[attempt(1, "busy"), attempt(2, "opted_out")]);
        assert_eq!(body["outcome"], "opted_out");
        assert_eq!(body["attempts"].as_array().map(Vec::len), Some(2));
        assert!(payload(&rec, &comm, &[])["outcome"].is_null());
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Duration::from_secs(1);
        assert_eq!(backoff(b, 0), Duration::from_secs(1));
        assert_eq!(backoff(b, 3), Duration::from_secs(8));
        assert_eq!(backoff(b, 30), Duration::from_secs(3600));
    }
}
