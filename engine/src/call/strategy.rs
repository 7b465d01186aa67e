//! A communication's strategy as the dialer applies it (docs/strategies.md): checked right
//! before each dial (calling hours in the recipient's zones, the account's frequency cap,
//! the maximum age) and at the end of each dial (the outcome and, when the strategy dials
//! again, when). The decision is written with the attempt in the call's end
//! ([`CallFinish::retry_at`]): a crash before that write leaves the claimed row to the
//! reconcile (`interrupted`, never redialled), a crash after it leaves the row queued for
//! its next attempt; no attempt is lost or dialled twice.
//!
//! An in-call opt-out ([`CallFinish::opted_out`]) lists the recipient on the account's
//! do-not-call list ([`record_opt_out`]) before the end is written.

use callsmith_domain::communication::caller;
use callsmith_domain::store::communications::{CallFinish, CommunicationAttempt};
use callsmith_domain::store::{CommunicationRecord, SOURCE_OPT_OUT};
use callsmith_domain::strategy::apply::{self, Communication};
use callsmith_domain::strategy::policy::{Finish, Next};
use callsmith_domain::strategy::{Outcome, Strategy};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use tracing::{info, warn};

use crate::runtime::Runtime;

/// The strategy of a communication; None when it has none, or when it is gone or
/// unreadable (logged: the communication then runs as one dial).
pub(super) async fn strategy_of(rt: &Runtime, comm: &CommunicationRecord) -> Option<Strategy> {
    let sid = comm.strategy_sid.as_deref()?;
    let rec = match rt.store.strategy_get(sid).await {
        Ok(Some(r)) if r.account_sid == comm.account_sid => r,
        Ok(_) => {
            warn!(communication = %comm.sid, strategy = sid, "the communication's strategy no longer exists; one dial");
            return None;
        }
        Err(e) => {
            warn!(communication = %comm.sid, error = %e, "reading the strategy failed; one dial");
            return None;
        }
    };
    let parsed = serde_json::from_str(&rec.definition)
        .map_err(|e| e.to_string())
        .and_then(|v| Strategy::parse(&v).map_err(|e| e.to_string()));
    match parsed {
        Ok(s) => Some(s),
        Err(e) => {
            warn!(communication = %comm.sid, strategy = sid, error = %e, "the strategy is unreadable; one dial");
            None
        }
    }
}

/// What the policy reads from the store for a communication.
struct Inputs {
    zones: Vec<Tz>,
    earlier: Vec<CommunicationAttempt>,
    recent_dials: Vec<DateTime<Utc>>,
}

async fn inputs(
    rt: &Runtime,
    strategy: &Strategy,
    comm: &CommunicationRecord,
    now: DateTime<Utc>,
) -> Result<Inputs, callsmith_domain::store::StoreError> {
    let zones = apply::zones(strategy, &comm.recipient, caller::zone(&comm.timezone));
    let earlier = rt.store.communication_attempts_all(&comm.sid).await?;
    let recent_dials = match apply::cap_since(strategy, now) {
        Some(since) => {
            rt.store
                .recipient_dials_since(&comm.account_sid, &comm.recipient, since)
                .await?
        }
        None => Vec::new(),
    };
    Ok(Inputs {
        zones,
        earlier,
        recent_dials,
    })
}

fn communication<'a>(comm: &CommunicationRecord, i: &'a Inputs) -> Communication<'a> {
    Communication {
        created_at: comm.created_at,
        scheduled_at: comm.scheduled_at,
        earlier: &i.earlier,
        zones: &i.zones,
        recent_dials: &i.recent_dials,
    }
}

/// Right before a dial.
pub(super) enum BeforeDial {
    Now,
    /// Not now: released, due then (outside the calling hours, or the cap is full).
    Later(DateTime<Utc>),
    /// Never: the hours do not open again, or the communication is too old.
    Never(String),
}

/// Whether a claimed communication may be dialled now: its dispatch schedule (read in the
/// communication's zone) and its strategy both open ([`apply::when_to_dial`]).
pub(super) async fn before_dial(
    rt: &Runtime,
    comm: &CommunicationRecord,
) -> Result<BeforeDial, callsmith_domain::store::StoreError> {
    let schedule = comm.dispatch_schedule();
    let strategy = strategy_of(rt, comm).await;
    if schedule.is_none() && strategy.is_none() {
        return Ok(BeforeDial::Now);
    }
    let now = Utc::now();
    let read = match &strategy {
        Some(st) => Some((st, inputs(rt, st, comm, now).await?)),
        None => None,
    };
    let c = read.as_ref().map(|(st, i)| (*st, communication(comm, i)));
    let next = apply::when_to_dial(
        schedule.as_ref().map(|s| (s, caller::zone(&comm.timezone))),
        c.as_ref().map(|(st, c)| (*st, c)),
        now,
    );
    Ok(match next {
        // A second's rounding of the hours is not worth a release.
        Next::DialAt(t) if t <= now + chrono::Duration::seconds(1) => BeforeDial::Now,
        Next::DialAt(t) => BeforeDial::Later(t),
        Next::Finish(Finish::TooOld) => BeforeDial::Never(
            "strategy_expired: the communication is older than its strategy's max_age_s; not dialled".into(),
        ),
        Next::Finish(_) if schedule.is_some() => BeforeDial::Never(
            "strategy_no_calling_hours: the strategy's calling hours in the recipient's zones and the dispatch's schedule are never open together; not dialled".into(),
        ),
        Next::Finish(_) => BeforeDial::Never(
            "strategy_no_calling_hours: the strategy's calling hours do not open again in the recipient's zones; not dialled".into(),
        ),
    })
}

/// Fills in the attempt's `outcome` and, when the strategy dials again, `retry_at` (an
/// outbound communication; the strategy's `dropped_early_s` applies, 0 without one).
pub(super) async fn after_attempt(rt: &Runtime, comm: &CommunicationRecord, f: &mut CallFinish) {
    let now = Utc::now();
    let Some(strategy) = strategy_of(rt, comm).await else {
        f.outcome = Some(Outcome::of(&apply::facts(f), 0).name().into());
        return;
    };
    let i = match inputs(rt, &strategy, comm, now).await {
        Ok(i) => i,
        Err(e) => {
            warn!(communication = %comm.sid, error = %e, "reading the attempts failed; no further dial");
            f.outcome = Some(
                Outcome::of(&apply::facts(f), strategy.dropped_early_s)
                    .name()
                    .into(),
            );
            return;
        }
    };
    let mut c = communication(comm, &i);
    // This dial counts for the cap: it is not stored yet.
    let mut dials = i.recent_dials.clone();
    dials.push(now);
    c.recent_dials = &dials;
    let (outcome, retry_at) = apply::after_attempt(&strategy, &c, f, now);
    f.outcome = Some(outcome.name().into());
    f.retry_at = retry_at;
}

/// Adds the recipient of a call whose scenario recorded an opt-out to its account's
/// do-not-call list, source `opt_out`, as `POST /v1/do-not-call` adds one (a number listed
/// already keeps its entry). A party that is no phone number (a browser call) is not
/// listed; a failed write is logged (the attempt is `opted_out` and never retried
/// whatever happens here).
pub(super) async fn record_opt_out(rt: &Runtime, comm: &CommunicationRecord) {
    let Some(number) = callsmith_domain::usecases::opt_out_number(&comm.recipient) else {
        return;
    };
    match rt
        .store
        .do_not_call_add(
            &comm.tenant_sid,
            &comm.account_sid,
            std::slice::from_ref(&number),
            SOURCE_OPT_OUT,
        )
        .await
    {
        Ok(added) => {
            info!(communication = %comm.sid, number = %number, new = added > 0, "the recipient opted out; on the do-not-call list")
        }
        Err(e) => {
            warn!(communication = %comm.sid, error = %e, "adding the opted-out recipient to the do-not-call list failed")
        }
    }
}
