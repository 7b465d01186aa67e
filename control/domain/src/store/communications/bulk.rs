//! A batch of call writes as a few set statements on PostgreSQL: one statement per kind of
//! write (rows created, INVITEs sent, answers, ends, failures, releases, result
//! deliveries), each taking its values as arrays (`UNNEST`), instead of one statement
//! per write.
//!
//! Why: on PostgreSQL every statement is a round trip to a server process, so a batch of
//! 500 writes applied one by one costs 500 round trips and wakes the server 500 times; at
//! 500 calls a second that server work competes with the calls for the CPU. As sets, a
//! batch costs at most seven round trips whatever its size.
//!
//! Why it is the same as applying the writes in order: a call's writes come in the order
//! of its life (created or INVITE sent, then answered, then ended, failed or released),
//! and a row given back by a release is claimed again only after the release is stored,
//! so within one batch a communication has at most one write of each kind and they go in
//! that order. [`kind_order`] checks both; a batch that breaks them (which the engine does
//! not make) is applied write by write instead.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row};

use super::CallWrite;
use crate::store::StoreResult;

/// The kinds of write in the order a call makes them; a batch is applied kind by kind.
const KINDS: usize = 6;

fn kind(w: &CallWrite) -> usize {
    match w {
        CallWrite::CreateClaimed { .. } => 0,
        CallWrite::Started { .. } => 1,
        CallWrite::Answered { .. } => 2,
        CallWrite::Finish { .. } => 3,
        CallWrite::Fail { .. } => 4,
        CallWrite::Release { .. } => 5,
    }
}

/// Whether applying `writes` kind by kind gives what applying them in order gives: no
/// communication has two writes of one kind, nor a write after one of a later kind, nor
/// more than one of the kinds that end its claim.
pub(super) fn kind_order(writes: &[CallWrite]) -> bool {
    let mut last: std::collections::HashMap<&str, usize> = Default::default();
    for w in writes {
        let k = kind(w);
        match last.insert(w.sid(), k) {
            Some(prev) if prev >= k || prev >= 3 => return false,
            _ => {}
        }
    }
    true
}

/// Applies `writes` (which pass [`kind_order`]) on an open PostgreSQL transaction; returns
/// per write whether it changed its row, as applying them one by one would.
pub(super) async fn apply(tx: &mut PgConnection, writes: &[CallWrite]) -> StoreResult<Vec<bool>> {
    let mut changed = vec![false; writes.len()];
    let mut by_kind: [Vec<usize>; KINDS] = Default::default();
    for (i, w) in writes.iter().enumerate() {
        by_kind[kind(w)].push(i);
    }
    create(tx, writes, &by_kind[0], &mut changed).await?;
    started(tx, writes, &by_kind[1], &mut changed).await?;
    answered(tx, writes, &by_kind[2], &mut changed).await?;
    finish(tx, writes, &by_kind[3], &mut changed).await?;
    fail(tx, writes, &by_kind[4], &mut changed).await?;
    release(tx, writes, &by_kind[5], &mut changed).await?;
    deliveries(tx, writes, &changed).await?;
    Ok(changed)
}

/// Marks the writes at `idx` whose sid is in `updated` as changed.
fn mark(writes: &[CallWrite], idx: &[usize], updated: &HashSet<String>, changed: &mut [bool]) {
    for &i in idx {
        changed[i] = updated.contains(writes[i].sid());
    }
}

async fn returned_sids(
    tx: &mut PgConnection,
    q: sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
) -> StoreResult<HashSet<String>> {
    let rows = q.fetch_all(&mut *tx).await?;
    rows.iter()
        .map(|r| r.try_get::<String, _>(0).map_err(Into::into))
        .collect()
}

async fn create(
    tx: &mut PgConnection,
    writes: &[CallWrite],
    idx: &[usize],
    changed: &mut [bool],
) -> StoreResult<()> {
    if idx.is_empty() {
        return Ok(());
    }
    let mut c = CreateColumns::default();
    for &i in idx {
        if let CallWrite::CreateClaimed { new, claim, at } = &writes[i] {
            c.sid.push(new.sid.clone());
            c.tenant.push(new.tenant_sid.clone());
            c.account.push(new.account_sid.clone());
            c.agent.push(new.agent_sid.clone());
            c.scenario.push(new.scenario_sid.clone());
            c.version.push(new.version);
            c.draft.push(new.draft_version);
            c.recipient.push(new.recipient.clone());
            c.from_number.push(new.from_number.clone());
            c.trunk.push(new.trunk.clone());
            c.direction.push(new.direction.clone());
            c.is_test.push(new.is_test);
            c.data.push(new.data.clone());
            c.strategy.push(new.strategy_sid.clone());
            c.timezone.push(new.timezone.clone());
            c.scheduled.push(new.scheduled_at);
            c.due.push(new.due_at);
            c.token.push(claim.token.clone());
            c.by.push(claim.by.clone());
            c.until.push(claim.until);
            c.at.push(*at);
            c.batch.push(new.batch_sid.clone());
            c.schedule.push(new.schedule.clone());
        }
    }
    // Every row is inserted or the statement fails (a sid stored twice): all or none, as
    // the batch's transaction is.
    sqlx::query(
        "INSERT INTO communications (sid, tenant_sid, account_sid, agent_sid, scenario_sid, version, draft_version, \
         recipient, from_number, trunk, direction, communication_status, duration, goals, variables, is_test, consent_granted, \
         has_recording, has_history, data, strategy_sid, timezone, scheduled_at, due_at, claim_token, claimed_by, claimed_until, \
         started_at, created_at, updated_at, batch_sid, schedule) \
         SELECT sid, tenant_sid, account_sid, agent_sid, scenario_sid, version, draft_version, recipient, from_number, trunk, \
         direction, 'in_progress', 0, '[]', '{}', is_test, FALSE, FALSE, FALSE, data, strategy_sid, timezone, scheduled_at, \
         due_at, claim_token, claimed_by, claimed_until, at, at, at, batch_sid, schedule \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::text[], \
         $9::text[], $10::text[], $11::text[], $12::boolean[], $13::text[], $14::text[], $15::text[], $16::timestamptz[], \
         $17::timestamptz[], $18::text[], $19::text[], $20::timestamptz[], $21::timestamptz[], $22::text[], $23::text[]) \
         AS v(sid, tenant_sid, account_sid, agent_sid, scenario_sid, version, draft_version, recipient, from_number, trunk, \
         direction, is_test, data, strategy_sid, timezone, scheduled_at, due_at, claim_token, claimed_by, claimed_until, at, \
         batch_sid, schedule)",
    )
    .bind(&c.sid).bind(&c.tenant).bind(&c.account).bind(&c.agent).bind(&c.scenario).bind(&c.version)
    .bind(&c.draft).bind(&c.recipient).bind(&c.from_number).bind(&c.trunk).bind(&c.direction).bind(&c.is_test)
    .bind(&c.data).bind(&c.strategy).bind(&c.timezone).bind(&c.scheduled).bind(&c.due).bind(&c.token)
    .bind(&c.by).bind(&c.until).bind(&c.at).bind(&c.batch).bind(&c.schedule)
    .execute(&mut *tx)
    .await?;
    for &i in idx {
        changed[i] = true;
    }
    Ok(())
}

#[derive(Default)]
struct CreateColumns {
    sid: Vec<String>,
    tenant: Vec<String>,
    account: Vec<String>,
    agent: Vec<Option<String>>,
    scenario: Vec<String>,
    version: Vec<Option<i64>>,
    draft: Vec<Option<i64>>,
    recipient: Vec<String>,
    from_number: Vec<String>,
    trunk: Vec<Option<String>>,
    direction: Vec<String>,
    is_test: Vec<bool>,
    data: Vec<String>,
    strategy: Vec<Option<String>>,
    timezone: Vec<String>,
    scheduled: Vec<Option<DateTime<Utc>>>,
    due: Vec<DateTime<Utc>>,
    token: Vec<String>,
    by: Vec<String>,
    until: Vec<DateTime<Utc>>,
    at: Vec<DateTime<Utc>>,
    batch: Vec<Option<String>>,
    schedule: Vec<Option<String>>,
}

async fn started(
    tx: &mut PgConnection,
    writes: &[CallWrite],
    idx: &[usize],
    changed: &mut [bool],
) -> StoreResult<()> {
    if idx.is_empty() {
        return Ok(());
    }
    let (mut sid, mut token, mut at, mut from, mut trunk) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &i in idx {
        if let CallWrite::Started {
            sid: s,
            token: t,
            from_number,
            trunk: tr,
            at: a,
        } = &writes[i]
        {
            sid.push(s.clone());
            token.push(t.clone());
            at.push(*a);
            from.push(from_number.clone());
            trunk.push(tr.clone());
        }
    }
    let q = sqlx::query(
        "UPDATE communications c SET started_at = v.at, from_number = v.from_number, trunk = v.trunk, updated_at = v.at \
         FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[]) AS v(sid, token, at, from_number, trunk) \
         WHERE c.sid = v.sid AND c.claim_token = v.token AND c.communication_status = 'dialing' RETURNING c.sid",
    )
    .bind(sid)
    .bind(token)
    .bind(at)
    .bind(from)
    .bind(trunk);
    let updated = returned_sids(tx, q).await?;
    mark(writes, idx, &updated, changed);
    Ok(())
}

async fn answered(
    tx: &mut PgConnection,
    writes: &[CallWrite],
    idx: &[usize],
    changed: &mut [bool],
) -> StoreResult<()> {
    if idx.is_empty() {
        return Ok(());
    }
    let (mut sid, mut token, mut at, mut call) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut dialogs: Vec<Option<String>> = Vec::new();
    for &i in idx {
        if let CallWrite::Answered {
            sid: s,
            token: t,
            call_id,
            dialog,
            at: a,
        } = &writes[i]
        {
            sid.push(s.clone());
            token.push(t.clone());
            at.push(*a);
            call.push(call_id.clone());
            dialogs.push(dialog.clone());
        }
    }
    let q = sqlx::query(
        "UPDATE communications c SET communication_status = 'in_progress', answered_at = v.at, call_id = v.call_id, \
         sip_dialog = v.dialog, updated_at = v.at \
         FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[]) AS v(sid, token, at, call_id, dialog) \
         WHERE c.sid = v.sid AND c.claim_token = v.token RETURNING c.sid",
    )
    .bind(sid)
    .bind(token)
    .bind(at)
    .bind(call)
    .bind(dialogs);
    let updated = returned_sids(tx, q).await?;
    mark(writes, idx, &updated, changed);
    Ok(())
}

async fn finish(
    tx: &mut PgConnection,
    writes: &[CallWrite],
    idx: &[usize],
    changed: &mut [bool],
) -> StoreResult<()> {
    if idx.is_empty() {
        return Ok(());
    }
    let mut c = FinishColumns::default();
    for &i in idx {
        if let CallWrite::Finish {
            sid,
            token,
            finish: f,
            at,
            ..
        } = &writes[i]
        {
            c.sid.push(sid.clone());
            c.token.push(token.clone());
            c.status.push(f.communication_status.as_str().to_string());
            c.call_status.push(f.call_status.clone());
            c.sip_code.push(f.sip_code);
            c.duration.push(f.duration);
            c.goals.push(crate::store::to_json_list(&f.goals));
            c.variables.push(f.variables.clone());
            c.history.push(f.history_path.clone());
            c.recording.push(f.recording_path.clone());
            c.end_reason.push(f.end_reason.clone());
            c.error.push(f.error.clone());
            c.answered.push(f.answered_at);
            c.at.push(*at);
            c.consent.push(f.consent_granted);
        }
    }
    let q = sqlx::query(
        "UPDATE communications c SET communication_status = v.status, call_status = v.call_status, sip_code = v.sip_code, \
         duration = v.duration, goals = v.goals, variables = v.variables, has_history = v.history_path IS NOT NULL, \
         history_path = v.history_path, has_recording = v.recording_path IS NOT NULL, recording_path = v.recording_path, \
         end_reason = v.end_reason, error = v.error, answered_at = COALESCE(c.answered_at, v.answered_at), ended_at = v.at, \
         updated_at = v.at, claim_token = NULL, claimed_by = NULL, claimed_until = NULL, consent_granted = v.consent, sip_dialog = NULL, \
         hangup_requested_at = NULL \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], \
         $9::text[], $10::text[], $11::text[], $12::text[], $13::timestamptz[], $14::timestamptz[], $15::boolean[]) \
         AS v(sid, token, status, call_status, sip_code, duration, goals, variables, history_path, recording_path, \
         end_reason, error, answered_at, at, consent) \
         WHERE c.sid = v.sid AND c.claim_token = v.token RETURNING c.sid",
    )
    .bind(c.sid)
    .bind(c.token)
    .bind(c.status)
    .bind(c.call_status)
    .bind(c.sip_code)
    .bind(c.duration)
    .bind(c.goals)
    .bind(c.variables)
    .bind(c.history)
    .bind(c.recording)
    .bind(c.end_reason)
    .bind(c.error)
    .bind(c.answered)
    .bind(c.at)
    .bind(c.consent);
    let updated = returned_sids(tx, q).await?;
    mark(writes, idx, &updated, changed);
    // Each changed end stores its attempt (and a retry puts its row back), as one by one.
    for &i in idx {
        if let CallWrite::Finish {
            sid, finish: f, at, ..
        } = &writes[i]
            && changed[i]
        {
            super::writes::record_attempt!(tx, sid, f, at);
        }
    }
    Ok(())
}

#[derive(Default)]
struct FinishColumns {
    sid: Vec<String>,
    token: Vec<String>,
    status: Vec<String>,
    call_status: Vec<Option<String>>,
    sip_code: Vec<Option<i64>>,
    duration: Vec<i64>,
    goals: Vec<String>,
    variables: Vec<String>,
    history: Vec<Option<String>>,
    recording: Vec<Option<String>>,
    end_reason: Vec<Option<String>>,
    error: Vec<Option<String>>,
    answered: Vec<Option<DateTime<Utc>>>,
    at: Vec<DateTime<Utc>>,
    consent: Vec<bool>,
}

async fn fail(
    tx: &mut PgConnection,
    writes: &[CallWrite],
    idx: &[usize],
    changed: &mut [bool],
) -> StoreResult<()> {
    if idx.is_empty() {
        return Ok(());
    }
    let (mut sid, mut token, mut error, mut at) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &i in idx {
        if let CallWrite::Fail {
            sid: s,
            token: t,
            error: e,
            at: a,
            ..
        } = &writes[i]
        {
            sid.push(s.clone());
            token.push(t.clone());
            error.push(e.clone());
            at.push(*a);
        }
    }
    let q = sqlx::query(
        "UPDATE communications c SET communication_status = 'failed', error = v.error, ended_at = v.at, updated_at = v.at, \
         claim_token = NULL, claimed_by = NULL, claimed_until = NULL \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS v(sid, token, error, at) \
         WHERE c.sid = v.sid AND c.claim_token = v.token RETURNING c.sid",
    )
    .bind(sid)
    .bind(token)
    .bind(error)
    .bind(at);
    let updated = returned_sids(tx, q).await?;
    mark(writes, idx, &updated, changed);
    Ok(())
}

async fn release(
    tx: &mut PgConnection,
    writes: &[CallWrite],
    idx: &[usize],
    changed: &mut [bool],
) -> StoreResult<()> {
    if idx.is_empty() {
        return Ok(());
    }
    let (mut sid, mut token, mut at, mut due) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &i in idx {
        if let CallWrite::Release {
            sid: s,
            token: t,
            due_at: d,
            at: a,
        } = &writes[i]
        {
            sid.push(s.clone());
            token.push(t.clone());
            at.push(*a);
            due.push(*d);
        }
    }
    let q = sqlx::query(
        "UPDATE communications c SET communication_status = 'new', claim_token = NULL, claimed_by = NULL, \
         claimed_until = NULL, updated_at = v.at, due_at = COALESCE(v.due, c.due_at) \
         FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS v(sid, token, at, due) \
         WHERE c.sid = v.sid AND c.claim_token = v.token AND c.started_at IS NULL RETURNING c.sid",
    )
    .bind(sid)
    .bind(token)
    .bind(at)
    .bind(due);
    let updated = returned_sids(tx, q).await?;
    mark(writes, idx, &updated, changed);
    Ok(())
}

/// The result deliveries of the ends and failures that changed their row, in one insert
/// (a target already queued for its communication is left as it is).
async fn deliveries(
    tx: &mut PgConnection,
    writes: &[CallWrite],
    changed: &[bool],
) -> StoreResult<()> {
    let (mut sid, mut tenant, mut account, mut comm, mut agent, mut url, mut at) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for (w, _) in writes.iter().zip(changed).filter(|(_, c)| **c) {
        let (s, d, a) = match w {
            // A retry queues no delivery: it comes after the last attempt.
            CallWrite::Finish { finish, .. } if finish.retry_at.is_some() => continue,
            CallWrite::Finish {
                sid,
                deliveries: Some(d),
                at,
                ..
            }
            | CallWrite::Fail {
                sid,
                deliveries: Some(d),
                at,
                ..
            } => (sid, d, at),
            _ => continue,
        };
        for u in &d.urls {
            sid.push(crate::ids::new_sid(
                crate::store::results::RESULT_DELIVERY_PREFIX,
            ));
            tenant.push(d.tenant_sid.clone());
            account.push(d.account_sid.clone());
            comm.push(s.clone());
            agent.push(d.agent_sid.clone());
            url.push(u.clone());
            at.push(*a);
        }
    }
    if sid.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO result_deliveries (sid, tenant_sid, account_sid, communication_sid, agent_sid, url, status, attempts, \
         next_attempt_at, created_at, updated_at) \
         SELECT sid, tenant_sid, account_sid, communication_sid, agent_sid, url, 'new', 0, at, at, at \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[]) \
         AS v(sid, tenant_sid, account_sid, communication_sid, agent_sid, url, at) \
         ON CONFLICT (communication_sid, url) DO NOTHING",
    )
    .bind(sid)
    .bind(tenant)
    .bind(account)
    .bind(comm)
    .bind(agent)
    .bind(url)
    .bind(at)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(sid: &str) -> CallWrite {
        CallWrite::Answered {
            sid: sid.into(),
            token: "t".into(),
            call_id: "c".into(),
            dialog: None,
            at: Utc::now(),
        }
    }

    fn release(sid: &str) -> CallWrite {
        CallWrite::Release {
            sid: sid.into(),
            token: "t".into(),
            due_at: None,
            at: Utc::now(),
        }
    }

    fn fail(sid: &str) -> CallWrite {
        CallWrite::Fail {
            sid: sid.into(),
            token: "t".into(),
            error: "e".into(),
            deliveries: None,
            at: Utc::now(),
        }
    }

    #[test]
    fn a_batch_in_life_order_is_applied_as_sets() {
        assert!(kind_order(&[
            answered("a"),
            answered("b"),
            fail("a"),
            release("c")
        ]));
    }

    #[test]
    fn a_batch_out_of_life_order_is_applied_write_by_write() {
        assert!(
            !kind_order(&[answered("a"), answered("a")]),
            "two of a kind"
        );
        assert!(
            !kind_order(&[fail("a"), answered("a")]),
            "a later kind first"
        );
        assert!(!kind_order(&[fail("a"), release("a")]), "two ends");
    }
}
