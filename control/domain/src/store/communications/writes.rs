//! The writes a call makes to its communication row while it runs, as values, so that a
//! writer can apply many of them (of many calls) in one transaction.
//!
//! Each write carries the time it describes (`at`): a write applied later, in a batch,
//! still records when the call was answered or ended, not when the batch ran. Every write
//! but [`CallWrite::CreateClaimed`] names the claim token, so a process that lost its
//! claim never overwrites the row (see the module doc of `store::communications`).

use super::BeginWrite;
use chrono::{DateTime, Utc};

use super::{CallFinish, Claim, CommunicationRecord, CommunicationStatus, NewCommunication};
use crate::store::{Store, StoreError, StoreResult, on_db};

/// One write of a call to its communication row.
#[derive(Debug, Clone)]
pub enum CallWrite {
    /// A call this process runs from its first moment (an inbound call it answers, a
    /// browser call it takes): the row, created claimed and `in_progress` (see
    /// [`claimed_record`]).
    CreateClaimed {
        new: Box<NewCommunication>,
        claim: Claim,
        at: DateTime<Utc>,
    },
    /// The INVITE of a claimed row is sent: its from-number and trunk.
    Started {
        sid: String,
        token: String,
        from_number: String,
        trunk: Option<String>,
        at: DateTime<Utc>,
    },
    /// The call was answered: `in_progress`, with the SIP dialog a peer ends the call
    /// from when this process is lost (`callsmith_sip::DialogRecord` as JSON; None for a
    /// call without one, a browser call).
    Answered {
        sid: String,
        token: String,
        call_id: String,
        dialog: Option<String>,
        at: DateTime<Utc>,
    },
    /// How the call ended; clears the claim, stores the dial as an attempt of an outbound
    /// communication and, unless the strategy dials again (`finish.retry_at`), queues its
    /// result deliveries, all in the same transaction.
    Finish {
        sid: String,
        token: String,
        finish: Box<CallFinish>,
        deliveries: Option<Box<Deliveries>>,
        at: DateTime<Utc>,
    },
    /// The row fails without a call (`failed`, with the reason); clears the claim and
    /// queues its result deliveries.
    Fail {
        sid: String,
        token: String,
        error: String,
        deliveries: Option<Box<Deliveries>>,
        at: DateTime<Utc>,
    },
    /// The row goes back to `new`, unclaimed, for a later attempt: only before its INVITE.
    /// With `due_at` it is not due before then (outside the recipient's calling hours).
    Release {
        sid: String,
        token: String,
        due_at: Option<DateTime<Utc>>,
        at: DateTime<Utc>,
    },
}

/// The result deliveries of an ended call: one per target URL of its agent
/// (`result_deliveries`, sent by the engine's delivery loop).
#[derive(Debug, Clone)]
pub struct Deliveries {
    pub tenant_sid: String,
    pub account_sid: String,
    pub agent_sid: String,
    pub urls: Vec<String>,
}

impl CallWrite {
    /// The communication the write is for.
    pub fn sid(&self) -> &str {
        match self {
            CallWrite::CreateClaimed { new, .. } => &new.sid,
            CallWrite::Started { sid, .. }
            | CallWrite::Answered { sid, .. }
            | CallWrite::Finish { sid, .. }
            | CallWrite::Fail { sid, .. }
            | CallWrite::Release { sid, .. } => sid,
        }
    }
}

/// The row [`CallWrite::CreateClaimed`] writes, as the call sees it before it is stored.
pub fn claimed_record(
    new: &NewCommunication,
    claim: &Claim,
    at: DateTime<Utc>,
) -> CommunicationRecord {
    CommunicationRecord {
        sid: new.sid.clone(),
        tenant_sid: new.tenant_sid.clone(),
        account_sid: new.account_sid.clone(),
        agent_sid: new.agent_sid.clone(),
        scenario_sid: new.scenario_sid.clone(),
        version: new.version,
        draft_version: new.draft_version,
        recipient: new.recipient.clone(),
        from_number: new.from_number.clone(),
        trunk: new.trunk.clone(),
        direction: new.direction.clone(),
        communication_status: CommunicationStatus::InProgress,
        call_status: None,
        sip_code: None,
        duration: 0,
        goals: "[]".into(),
        variables: "{}".into(),
        is_test: new.is_test,
        consent_granted: false,
        has_recording: false,
        has_history: false,
        history_path: None,
        recording_path: None,
        data: new.data.clone(),
        strategy_sid: new.strategy_sid.clone(),
        batch_sid: new.batch_sid.clone(),
        timezone: new.timezone.clone(),
        end_reason: None,
        error: None,
        call_id: None,
        scheduled_at: new.scheduled_at,
        schedule: new.schedule.clone(),
        due_at: new.due_at,
        claim_token: Some(claim.token.clone()),
        claimed_by: Some(claim.by.clone()),
        claimed_until: Some(claim.until),
        started_at: Some(at),
        answered_at: None,
        ended_at: None,
        created_at: at,
        updated_at: at,
    }
}

/// Queues the result deliveries of communication `sid` on an open transaction (a target
/// already queued for it is left as it is).
macro_rules! insert_deliveries {
    ($tx:ident, $sid:expr, $d:expr, $at:expr) => {
        for url in &$d.urls {
            sqlx::query(
                "INSERT INTO result_deliveries (sid, tenant_sid, account_sid, communication_sid, agent_sid, url, \
                 status, attempts, next_attempt_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 'new', 0, $7, $7, $7) \
                 ON CONFLICT (communication_sid, url) DO NOTHING",
            )
            .bind(crate::ids::new_sid(crate::store::results::RESULT_DELIVERY_PREFIX))
            .bind(&$d.tenant_sid).bind(&$d.account_sid).bind($sid).bind(&$d.agent_sid).bind(url).bind(*$at)
            .execute(&mut *$tx).await?;
        }
    };
}

/// After a [`CallWrite::Finish`] changed its outbound row (on an open transaction): stores
/// the dial as the communication's next attempt (its start, from-number and trunk as the
/// row has them, its end as the finish wrote it) and, when the strategy dials again, puts
/// the row back to `queued`, due at `retry_at`, with the previous dial's start, answer and
/// call id cleared (the row is unclaimed already). A row without a start (the call failed
/// before its INVITE was recorded) still counts as an attempt.
macro_rules! record_attempt {
    ($tx:ident, $sid:expr, $f:expr, $at:expr) => {{
        sqlx::query(
            "INSERT INTO communication_attempts (communication_sid, n, account_sid, recipient, started_at, ended_at, \
             from_number, trunk, sip_code, call_status, end_reason, amd, outcome) \
             SELECT c.sid, (SELECT COALESCE(MAX(a.n), 0) + 1 FROM communication_attempts a WHERE a.communication_sid = c.sid), \
             c.account_sid, c.recipient, c.started_at, $2, c.from_number, c.trunk, c.sip_code, c.call_status, c.end_reason, $3, $4 \
             FROM communications c WHERE c.sid = $1 AND c.direction = 'outbound'",
        )
        .bind($sid).bind(*$at).bind(&$f.amd).bind(&$f.outcome)
        .execute(&mut *$tx).await?;
        if let Some(due) = $f.retry_at {
            sqlx::query(
                "UPDATE communications SET communication_status = 'queued', due_at = $2, started_at = NULL, \
                 answered_at = NULL, call_id = NULL WHERE sid = $1",
            )
            .bind($sid).bind(due)
            .execute(&mut *$tx).await?;
        }
    }};
}
pub(super) use record_attempt;

/// Applies one write on an open transaction; true when it changed its row (false: the
/// claim was lost, or a release came after the INVITE).
macro_rules! apply_write {
    ($tx:ident, $w:expr) => {{
        match $w {
            CallWrite::CreateClaimed { new: c, claim, at } => sqlx::query(
                "INSERT INTO communications (sid, tenant_sid, account_sid, agent_sid, scenario_sid, version, draft_version, \
                 recipient, from_number, trunk, direction, communication_status, duration, goals, variables, is_test, consent_granted, \
                 has_recording, has_history, data, strategy_sid, timezone, scheduled_at, due_at, claim_token, claimed_by, claimed_until, \
                 started_at, created_at, updated_at, batch_sid, schedule) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'in_progress', 0, '[]', '{}', $12, FALSE, FALSE, FALSE, $13, $14, $15, \
                 $16, $17, $18, $19, $20, $21, $21, $21, $22, $23)",
            )
            .bind(&c.sid).bind(&c.tenant_sid).bind(&c.account_sid).bind(&c.agent_sid).bind(&c.scenario_sid)
            .bind(c.version).bind(c.draft_version).bind(&c.recipient).bind(&c.from_number).bind(&c.trunk)
            .bind(&c.direction).bind(c.is_test).bind(&c.data).bind(&c.strategy_sid).bind(&c.timezone)
            .bind(c.scheduled_at).bind(c.due_at).bind(&claim.token).bind(&claim.by).bind(claim.until).bind(*at).bind(&c.batch_sid)
            .bind(&c.schedule)
            .execute(&mut *$tx).await?.rows_affected() == 1,
            CallWrite::Started { sid, token, from_number, trunk, at } => sqlx::query(
                "UPDATE communications SET started_at = $3, from_number = $4, trunk = $5, updated_at = $3 \
                 WHERE sid = $1 AND claim_token = $2 AND communication_status = 'dialing'",
            )
            .bind(sid).bind(token).bind(*at).bind(from_number).bind(trunk)
            .execute(&mut *$tx).await?.rows_affected() == 1,
            CallWrite::Answered { sid, token, call_id, dialog, at } => sqlx::query(
                "UPDATE communications SET communication_status = 'in_progress', answered_at = $3, call_id = $4, \
                 sip_dialog = $5, updated_at = $3 WHERE sid = $1 AND claim_token = $2",
            )
            .bind(sid).bind(token).bind(*at).bind(call_id).bind(dialog)
            .execute(&mut *$tx).await?.rows_affected() == 1,
            CallWrite::Finish { sid, token, finish: f, deliveries, at } => {
                let changed = sqlx::query(
                "UPDATE communications SET communication_status = $3, call_status = $4, sip_code = $5, duration = $6, \
                 goals = $7, variables = $8, has_history = $9, history_path = $10, has_recording = $11, recording_path = $12, \
                 end_reason = $13, error = $14, answered_at = COALESCE(answered_at, $15), ended_at = $16, updated_at = $16, \
                 claim_token = NULL, claimed_by = NULL, claimed_until = NULL, consent_granted = $17, sip_dialog = NULL, \
                 hangup_requested_at = NULL \
                 WHERE sid = $1 AND claim_token = $2",
            )
            .bind(sid).bind(token).bind(f.communication_status).bind(&f.call_status).bind(f.sip_code).bind(f.duration)
            .bind(crate::store::to_json_list(&f.goals)).bind(&f.variables).bind(f.history_path.is_some())
            .bind(&f.history_path).bind(f.recording_path.is_some()).bind(&f.recording_path).bind(&f.end_reason)
            .bind(&f.error).bind(f.answered_at).bind(*at).bind(f.consent_granted)
            .execute(&mut *$tx).await?.rows_affected() == 1;
                if changed {
                    record_attempt!($tx, sid, f, at);
                }
                if changed && f.retry_at.is_none() && let Some(d) = deliveries {
                    insert_deliveries!($tx, sid, d, at);
                }
                changed
            }
            CallWrite::Fail { sid, token, error, deliveries, at } => {
                let changed = sqlx::query(
                    "UPDATE communications SET communication_status = 'failed', error = $3, ended_at = $4, updated_at = $4, \
                     claim_token = NULL, claimed_by = NULL, claimed_until = NULL WHERE sid = $1 AND claim_token = $2",
                )
                .bind(sid).bind(token).bind(error).bind(*at)
                .execute(&mut *$tx).await?.rows_affected() == 1;
                if changed && let Some(d) = deliveries {
                    insert_deliveries!($tx, sid, d, at);
                }
                changed
            }
            CallWrite::Release { sid, token, due_at, at } => sqlx::query(
                "UPDATE communications SET communication_status = 'new', claim_token = NULL, claimed_by = NULL, \
                 claimed_until = NULL, updated_at = $3, due_at = COALESCE($4, due_at) \
                 WHERE sid = $1 AND claim_token = $2 AND started_at IS NULL",
            )
            .bind(sid).bind(token).bind(*at).bind(*due_at)
            .execute(&mut *$tx).await?.rows_affected() == 1,
        }
    }};
}

impl Store {
    /// Applies `writes` in order in ONE transaction: all or none. Returns, per write,
    /// whether it changed its row (see [`CallWrite`]). A write that breaks a constraint
    /// (an inbound sid created twice) fails the whole batch. On PostgreSQL a batch is
    /// applied as one statement per kind of write (see `bulk`).
    pub async fn communications_apply(&self, writes: &[CallWrite]) -> StoreResult<Vec<bool>> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        if let crate::store::Pool::Postgres(p) = &self.pool
            && writes.len() > 1
            && super::bulk::kind_order(writes)
        {
            let mut tx = p.begin_write().await?;
            let changed = super::bulk::apply(&mut tx, writes).await?;
            tx.commit().await?;
            return Ok(changed);
        }
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let mut changed = Vec::with_capacity(writes.len());
            for w in writes {
                changed.push(apply_write!(tx, w));
            }
            tx.commit().await?;
            Ok::<_, StoreError>(changed)
        }.await)
    }

    /// Applies one write on its own (see [`Store::communications_apply`]).
    pub async fn communication_apply(&self, write: CallWrite) -> StoreResult<bool> {
        Ok(self
            .communications_apply(std::slice::from_ref(&write))
            .await?
            .first()
            .copied()
            .unwrap_or(false))
    }
}
