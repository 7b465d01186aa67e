//! The dialer: claims due communications and starts their calls within each agent's
//! limits, renews this process's leases, reconciles expired claims, and drains on shutdown.
//!
//! Limits (docs/communications.md):
//! * `cpl` (calls per line): live calls of the agent at once (`dialing` + `in_progress`);
//!   0 = no limit;
//! * `cps` (calls per second): call starts per second, one start slot every `1/cps` s;
//!   0 = no limit;
//! * both hold across every engine on one database: the claim counts live calls and takes
//!   start slots in one transaction that locks the agent's slot row
//!   ([`callsmith_domain::store::Store::communication_claim_agent`]);
//! * the agent must be active (not archived), else its due rows wait (`queued`, retried
//!   every `inactive_retry_secs`);
//! * `calling_schedule`: outside a window the agent's due rows are deferred (`queued`) to the
//!   next window start ([`callsmith_domain::schedule::next_allowed`]), except rows with a
//!   dispatch `schedule` of their own: those follow it instead, checked per row right
//!   before the dial (`call::strategy::before_dial`).
//!
//! Scenario test calls have no agent: they start at once, bounded only by
//! `dialer.max_live_calls` (which bounds every call of this process).
//!
//! Wake-up: on PostgreSQL a communication stored due on any engine is announced to every
//! engine (`store::communications::DUE_CHANNEL`) and the claim runs at once; the poll stays
//! as the fallback (rows that become due later, notifications missed while the listener
//! reconnects). SQLite (one engine) polls.
//!
//! Pacing: the claim loop runs every `poll_interval_ms`, counted from one claim's start to
//! the next (a slow claim does not push the next one back). Each claim takes the start
//! slots up to two poll intervals ahead ([`agent_limits`]), so the next claim, a poll
//! interval later, may itself take up to a poll interval (it waits behind the call
//! journal's batch on a busy database) before any of the slots it takes is due: every call
//! starts on its slot instead of in a burst after a late claim.

use std::time::{Duration, Instant};

use callsmith_domain::agent_settings::Schedule;
use callsmith_domain::schedule::{CallingSchedule, next_allowed};
use callsmith_domain::store::AgentRecord;
use callsmith_domain::store::communications::{AgentLimits, CallWrite, Claim, ClaimScope, Defer};
use chrono::Utc;
use tracing::{info, warn};

use crate::runtime::Runtime;

/// The checked schedule of an agent ([`AgentRecord::schedule`]); none when it does not
/// check (the agent then calls at any time).
fn schedule_of(agent: &AgentRecord) -> Option<CallingSchedule> {
    checked(&agent.schedule)
}

fn checked(s: &Schedule) -> Option<CallingSchedule> {
    CallingSchedule::parse(&s.strategy, &s.args).ok()
}

/// Runs until `rt.draining` is cancelled; then stops claiming and returns.
pub async fn run(rt: Runtime) {
    let cfg = rt.settings.dialer.clone();
    let poll = Duration::from_millis(cfg.poll_interval_ms.max(20));
    let lease =
        chrono::Duration::from_std(rt.settings.lease).unwrap_or(chrono::Duration::seconds(30));
    let mut last_renew = Instant::now();
    let mut last_reconcile = Instant::now() - Duration::from_secs(3600);
    info!(instance = %rt.settings.instance, "dialer started");
    let mut polls = tokio::time::interval(poll);
    polls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // On PostgreSQL a dispatch on any engine wakes the claim at once (see the module doc).
    let due = rt.store.communications_due_signal();
    loop {
        tokio::select! {
            biased;
            _ = rt.draining.cancelled() => break,
            _ = polls.tick() => {}
            _ = async { due.as_ref().expect("guarded").notified().await }, if due.is_some() => {
                // The next poll counts from this claim.
                polls.reset();
            }
        }
        let now = Instant::now();
        if now.duration_since(last_renew) >= rt.settings.lease / 3 {
            last_renew = now;
            rt.journal
                .renew(&rt.settings.claim_token, Utc::now() + lease)
                .await;
        }
        if now.duration_since(last_reconcile)
            >= Duration::from_secs(cfg.reconcile_interval_secs.max(1))
        {
            last_reconcile = now;
            match rt.store.communications_reconcile().await {
                Ok(r) if r.interrupted + r.maybe_placed > 0 => {
                    info!(
                        maybe_placed = r.maybe_placed,
                        interrupted = r.interrupted,
                        "expired claims reconciled"
                    )
                }
                Ok(_) => {}
                Err(e) => warn!(error = %e, "reconciling claims failed"),
            }
        }
        if let Err(e) = tick(&rt, lease).await {
            warn!(error = %e, "dialer tick failed");
        }
    }
    info!("dialer stopped claiming");
}

/// Keeps leases of live calls fresh while draining (the claim loop has stopped).
pub async fn renew_while_live(rt: Runtime) {
    let lease =
        chrono::Duration::from_std(rt.settings.lease).unwrap_or(chrono::Duration::seconds(30));
    while rt.live.total() > 0 {
        rt.journal
            .renew(&rt.settings.claim_token, Utc::now() + lease)
            .await;
        tokio::time::sleep(rt.settings.lease / 3).await;
    }
}

fn claim(rt: &Runtime, lease: chrono::Duration) -> Claim {
    Claim {
        token: rt.settings.claim_token.clone(),
        by: rt.settings.instance.clone(),
        until: Utc::now() + lease,
    }
}

async fn tick(
    rt: &Runtime,
    lease: chrono::Duration,
) -> Result<(), callsmith_domain::store::StoreError> {
    let room = |rt: &Runtime| rt.capacity.room() as i64;
    // Scenario test calls: at once.
    if room(rt) > 0 && rt.store.communications_test_due().await? {
        let rows = rt
            .store
            .communication_claim_due(&claim(rt, lease), &ClaimScope::TestCalls, room(rt))
            .await?;
        for c in rows {
            tokio::spawn(crate::call::run_outbound(rt.clone(), c, None, None));
        }
    }
    let poll_us = rt.settings.dialer.poll_interval_ms.max(20) as i64 * 1000;
    let agents = rt.store.communications_due_agents().await?;
    for agent_sid in agents {
        if room(rt) <= 0 {
            break;
        }
        let Some(agent) = rt.store.agent_get(&agent_sid).await? else {
            // The agent is gone: claim its rows so they fail with a reason.
            let rows = rt
                .store
                .communication_claim_due(
                    &claim(rt, lease),
                    &ClaimScope::Agent(agent_sid.clone()),
                    100,
                )
                .await?;
            for c in rows {
                rt.journal
                    .queue(CallWrite::Fail {
                        sid: c.sid,
                        token: rt.settings.claim_token.clone(),
                        error: "the agent no longer exists".into(),
                        deliveries: None,
                        at: Utc::now(),
                    })
                    .await;
            }
            continue;
        };
        // One copy for every call this poll places for the agent.
        let agent = std::sync::Arc::new(agent);
        if !agent.is_dialable() {
            let until = Utc::now()
                + chrono::Duration::seconds(rt.settings.dialer.inactive_retry_secs.max(1) as i64);
            rt.store
                .communication_defer_agent(&agent.sid, until, Defer::All)
                .await?;
            continue;
        }
        let tz = callsmith_domain::schedule::parse_timezone(&agent.timezone)
            .unwrap_or(chrono_tz::Tz::UTC);
        if let Some(s) = schedule_of(&agent) {
            let t = Utc::now();
            // No window within years: park for a day and look again.
            let closed_until = match next_allowed(&s, tz, t) {
                Some(at) if at > t => Some(at),
                Some(_) => None,
                None => Some(t + chrono::Duration::days(1)),
            };
            if let Some(until) = closed_until {
                rt.store
                    .communication_defer_agent(&agent.sid, until, Defer::AgentSchedule)
                    .await?;
                // The rows still due follow a dispatch schedule of their own.
            }
        }
        let limits = agent_limits(agent.cps, agent.cpl, poll_us);
        let rows = rt
            .store
            .communication_claim_agent(&claim(rt, lease), &agent.sid, &limits, room(rt))
            .await?;
        for c in rows {
            tokio::spawn(crate::call::run_outbound(
                rt.clone(),
                c.row,
                c.start_at,
                Some(agent.clone()),
            ));
        }
    }
    Ok(())
}

/// An agent's limits as the dialer claims with them, polling every `poll_us`: the start
/// slots of the next two poll intervals are claimed now, each call started at its slot
/// (see the module doc's pacing), so a claim up to a poll interval late still finds its
/// slots ahead of it. A slot already past is never taken: a carrier counts starts in any
/// one second, and taking a missed slot late puts two starts closer than `1/cps`.
fn agent_limits(cps: i64, cpl: i64, poll_us: i64) -> AgentLimits {
    AgentLimits {
        cps,
        cpl,
        slack_us: 0,
        lookahead_us: 2 * poll_us,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callsmith_domain::store::communications::claimable_slots;

    /// Claims every `poll_us` from `0`, claim `k` read by the store `delays_us[k % len]`
    /// after it was due (it waited behind other writes); returns every slot taken with the
    /// time of the claim that took it, after the first claim, as `claim_agent` keeps the
    /// agent's next free slot.
    fn slots_taken(limits: &AgentLimits, poll_us: i64, delays_us: &[i64]) -> Vec<(i64, i64)> {
        let mut next_us = 0;
        let mut out = Vec::new();
        for k in 0..30 {
            let now_us = k * poll_us + delays_us[k as usize % delays_us.len()];
            let s = claimable_slots(next_us, now_us, limits);
            for i in 0..s.available {
                if k > 0 {
                    out.push((s.next_after(i), now_us));
                }
            }
            next_us = s.next_after(s.available).max(next_us);
        }
        out
    }

    #[test]
    fn a_claim_up_to_a_poll_interval_slow_starts_no_call_late() {
        let poll_us = 100_000;
        let limits = agent_limits(500, 0, poll_us);
        for delays in [
            &[0][..],
            &[30_000],
            &[95_000],
            &[0, 95_000],
            &[95_000, 0, 50_000],
        ] {
            let taken = slots_taken(&limits, poll_us, delays);
            let late: Vec<_> = taken
                .iter()
                .filter(|(slot, claimed)| slot < claimed)
                .collect();
            assert!(
                late.is_empty(),
                "claims {delays:?} µs late: slots due before their claim {late:?}"
            );
            // One slot every 2 ms, no gap, no slot twice: the rate stays 500 per second.
            for w in taken.windows(2) {
                assert_eq!(w[1].0 - w[0].0, 2_000, "claims {delays:?} µs late: {w:?}");
            }
            assert!(
                taken.len() >= 28 * 50,
                "claims {delays:?}: {} slots",
                taken.len()
            );
        }
    }

    #[test]
    fn starts_after_a_pause_in_demand_keep_a_slot_interval_apart() {
        // cps 2, polls every 100 ms: a call started on its slot at 0, then the agent's
        // cpl was full until 600 ms, so the slot of 500 ms went unused. The claim at
        // 600 ms starts no call before 1 s: three starts never fall within one second.
        let limits = agent_limits(2, 0, 100_000);
        let s = claimable_slots(500_000, 600_000, &limits);
        assert_eq!(s.base_us, 600_000, "a missed slot is not taken late");
        assert!(s.available >= 1);
        let starts = [0, s.next_after(0), s.next_after(1)];
        assert!(
            starts[2] - starts[0] >= 1_000_000,
            "three starts within a second: {starts:?}"
        );
        // After idle time too, the first start is now and the next one 1/cps later.
        let idle = claimable_slots(0, 60_000_000, &limits);
        assert_eq!(idle.base_us, 60_000_000);
        assert_eq!(idle.next_after(1) - idle.next_after(0), 500_000);
    }

    #[test]
    fn one_poll_interval_of_lookahead_loses_slots_when_a_claim_is_slow() {
        // What the second interval is for: claiming only the next one, a claim read 90 ms
        // late after one read on time finds the slots between its predecessor's horizon
        // and itself already past, and a past slot is never taken: the rate falls short.
        let poll_us = 100_000;
        let one = AgentLimits {
            lookahead_us: poll_us,
            ..agent_limits(500, 0, poll_us)
        };
        let taken = slots_taken(&one, poll_us, &[0, 90_000]);
        assert!(
            taken.len() < 28 * 50 * 3 / 4,
            "{} slots taken in 2.8 s at 500 cps",
            taken.len()
        );
        assert!(taken.iter().all(|(slot, claimed)| slot >= claimed));
        let two = slots_taken(&agent_limits(500, 0, poll_us), poll_us, &[0, 90_000]);
        assert!(
            two.len() >= 28 * 50,
            "{} slots with two intervals",
            two.len()
        );
    }

    #[test]
    fn schedule_defaults_to_always() {
        assert!(checked(&Schedule::always()).is_some());
        let garbage = Schedule {
            strategy: "garbage".into(),
            args: serde_json::json!({}),
        };
        assert!(checked(&garbage).is_none());
    }
}
