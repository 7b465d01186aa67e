//! Communications (calls) and the dialer's row-level claims.
//!
//! A communication waits as `new` (or `queued` when the agent's calling schedule deferred
//! it) until `due_at`. A dialer claims due rows by writing a random `claim_token` and a
//! lease (`claimed_until`) in ONE statement: on PostgreSQL the candidate rows are picked
//! with `FOR UPDATE SKIP LOCKED`, on SQLite the single conditional `UPDATE … RETURNING` is
//! atomic because SQLite serialises writers. Every later write of the call names the token,
//! so a process that lost its claim (lease expired, another process reconciled it) can
//! never overwrite the row. While a call is live its owner renews the lease; a row whose
//! lease expired is reconciled by [`Store::communications_reconcile`]: `interrupted`,
//! never redialled.
//!
//! A claim is a commitment to dial: the calls a process runs write their progress
//! (INVITE sent, answered, ended) behind the call, in batches ([`writes`]), so a row whose
//! owner died may have been dialled even when `started_at` is unset. Such a row is
//! interrupted with an error that says the call may not have been placed; a row goes back
//! to `new` only when its owner releases it before the INVITE ([`CallWrite::Release`]).

use super::BeginWrite;
use chrono::{DateTime, Utc};

pub use crate::communication::CommunicationStatus;
use crate::communication::SqlList;

/// The status groups the statements below select by ([`CommunicationStatus::WAITING`]…).
const WAITING: SqlList = SqlList(CommunicationStatus::WAITING);
const LIVE: SqlList = SqlList(CommunicationStatus::LIVE);
const OPEN: SqlList = SqlList(CommunicationStatus::OPEN);

use super::{Backend, Store, StoreError, StoreResult, now, on_db, store_row};

/// Prefix of communication sids.
pub const COMMUNICATION_PREFIX: &str = "com";

store_row! {
    #[derive(Debug, Clone)]
    pub struct CommunicationRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub account_sid: String,
        pub agent_sid: Option<String>,
        pub scenario_sid: String,
        pub version: Option<i64>,
        pub draft_version: Option<i64>,
        pub recipient: String,
        pub from_number: String,
        pub trunk: Option<String>,
        pub direction: String,
        pub communication_status: CommunicationStatus,
        pub call_status: Option<String>,
        pub sip_code: Option<i64>,
        pub duration: i64,
        pub goals: String,
        pub variables: String,
        pub is_test: bool,
        pub consent_granted: bool,
        pub has_recording: bool,
        pub has_history: bool,
        pub history_path: Option<String>,
        pub recording_path: Option<String>,
        pub data: String,
        pub strategy_sid: Option<String>,
        /// The dispatch batch (`bat_…`); None for inbound and browser calls.
        pub batch_sid: Option<String>,
        pub timezone: String,
        pub end_reason: Option<String>,
        pub error: Option<String>,
        pub call_id: Option<String>,
        pub scheduled_at: Option<DateTime<Utc>>,
        /// The dispatch's own calling schedule (checked `{"strategy", "args"}` JSON text),
        /// read in `timezone` instead of the agent's `calling_schedule`; None: the agent's.
        pub schedule: Option<String>,
        pub due_at: DateTime<Utc>,
        pub claim_token: Option<String>,
        pub claimed_by: Option<String>,
        pub claimed_until: Option<DateTime<Utc>>,
        pub started_at: Option<DateTime<Utc>>,
        pub answered_at: Option<DateTime<Utc>>,
        pub ended_at: Option<DateTime<Utc>>,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
    }
}

impl CommunicationRecord {
    /// The dispatch's own calling schedule, followed instead of the agent's; None when it
    /// has none (a stored one was checked at dispatch, so it always reads).
    pub fn dispatch_schedule(&self) -> Option<crate::schedule::CallingSchedule> {
        let s: crate::agent_settings::Schedule =
            serde_json::from_str(self.schedule.as_deref()?).ok()?;
        crate::schedule::CallingSchedule::parse(&s.strategy, &s.args).ok()
    }

    /// Goals reached, in order.
    pub fn goal_list(&self) -> Vec<String> {
        super::from_json_list(&self.goals)
    }
}

pub(crate) const COLS: &str = "sid, tenant_sid, account_sid, agent_sid, scenario_sid, version, draft_version, recipient, \
    from_number, trunk, direction, communication_status, call_status, sip_code, duration, goals, variables, is_test, \
    consent_granted, has_recording, has_history, history_path, recording_path, data, strategy_sid, batch_sid, timezone, \
    end_reason, error, call_id, scheduled_at, schedule, due_at, claim_token, claimed_by, claimed_until, started_at, \
    answered_at, ended_at, created_at, updated_at";

/// Which due rows of an agent [`Store::communication_defer_agent`] defers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defer {
    /// Every due row (the agent is inactive).
    All,
    /// The rows that follow the agent's calling schedule (no dispatch schedule).
    AgentSchedule,
}

/// A communication to create.
#[derive(Debug, Clone)]
pub struct NewCommunication {
    pub sid: String,
    pub tenant_sid: String,
    pub account_sid: String,
    pub agent_sid: Option<String>,
    pub scenario_sid: String,
    pub version: Option<i64>,
    pub draft_version: Option<i64>,
    pub recipient: String,
    pub from_number: String,
    pub trunk: Option<String>,
    /// `outbound` or `inbound`.
    pub direction: String,
    pub is_test: bool,
    /// JSON object text of the dispatch `data`.
    pub data: String,
    pub strategy_sid: Option<String>,
    /// The dispatch batch (`bat_…`); None for inbound and browser calls.
    pub batch_sid: Option<String>,
    pub timezone: String,
    pub scheduled_at: Option<DateTime<Utc>>,
    /// The dispatch's own calling schedule (checked JSON text); None: the agent's.
    pub schedule: Option<String>,
    pub due_at: DateTime<Utc>,
}

/// List filters of GET /v1/communication.
#[derive(Debug, Clone, Default)]
pub struct CommunicationFilter {
    pub agent_sid: Option<String>,
    pub communication_status: Option<CommunicationStatus>,
    pub direction: Option<String>,
    pub created_from: Option<DateTime<Utc>>,
    pub created_to: Option<DateTime<Utc>>,
    /// Only the communications of this dispatch batch.
    pub batch_sid: Option<String>,
}

/// Who claims and for how long.
#[derive(Debug, Clone)]
pub struct Claim {
    pub token: String,
    /// Process identity (host:pid), for operators.
    pub by: String,
    pub until: DateTime<Utc>,
}

/// Which due rows a claim takes.
#[derive(Debug, Clone)]
pub enum ClaimScope {
    /// Rows of one agent.
    Agent(String),
    /// Scenario test calls (no agent).
    TestCalls,
}

/// An agent's limits as the dialer applies them (see [`Store::communication_claim_agent`]).
#[derive(Debug, Clone, Copy)]
pub struct AgentLimits {
    /// Call starts per second (0 = no limit).
    pub cps: i64,
    /// Live calls at once (0 = no limit).
    pub cpl: i64,
    /// How far back unused start slots may still be taken, µs: a dialer polling late
    /// catches up on the slots it missed (at most this much), so the long-run start rate
    /// is exactly `cps`. The dialer passes its poll interval.
    pub slack_us: i64,
    /// How far ahead start slots are claimed, µs. Each claimed row carries its slot's time
    /// and the dialer places the call then, so calls start on their slots rather than on
    /// the dialer's polls. The dialer passes its poll interval.
    pub lookahead_us: i64,
}

/// A row claimed for an agent, with the time of its start slot.
#[derive(Debug, Clone)]
pub struct AgentClaimed {
    pub row: CommunicationRecord,
    /// When the call should start (its cps slot; may be a little in the past). `None`
    /// without a cps limit: at once.
    pub start_at: Option<DateTime<Utc>>,
}

/// Free start slots of an agent at one moment (a GCRA-style schedule: one slot every
/// `1/cps` s; unused slots older than the slack are gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartSlots {
    /// The first usable slot, µs since the epoch.
    pub base_us: i64,
    /// The slot interval, µs.
    pub interval_us: i64,
    /// Slots usable now.
    pub available: i64,
}

impl StartSlots {
    /// The next free slot after `used` slots were taken; also the time of slot `used`
    /// (counting from 0), µs since the epoch.
    pub fn next_after(&self, used: i64) -> i64 {
        self.base_us + used * self.interval_us
    }
}

/// The start slots an agent may claim at `now_us`: those free now (see [`start_slots`]) and
/// those up to `lookahead_us` ahead, which the dialer starts when their time comes.
pub fn claimable_slots(next_us: i64, now_us: i64, limits: &AgentLimits) -> StartSlots {
    let ahead = limits.lookahead_us.max(0);
    // Seen from the horizon `now + ahead`, the slack reaches back just as far from now.
    start_slots(
        next_us,
        now_us + ahead,
        limits.cps,
        limits.slack_us.max(0) + ahead,
    )
}

/// The start slots free at `now_us` given the next unused slot `next_us` (sans-IO core of
/// the cps limit; the store keeps `next_us` per agent).
pub fn start_slots(next_us: i64, now_us: i64, cps: i64, slack_us: i64) -> StartSlots {
    let interval_us = (1_000_000 / cps.max(1)).max(1);
    let base_us = next_us.max(now_us - slack_us.max(0));
    let available = if now_us >= base_us {
        (now_us - base_us) / interval_us + 1
    } else {
        0
    };
    StartSlots {
        base_us,
        interval_us,
        available,
    }
}

/// What [`Store::communications_reconcile`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Claims that expired with the INVITE recorded as sent: `interrupted`.
    pub interrupted: u64,
    /// Claims that expired before an INVITE was recorded: `interrupted` too (the owner
    /// may have sent it and died before recording it), with an error saying so.
    pub maybe_placed: u64,
}

/// A bind value for dynamically built statements.
#[derive(Debug, Clone)]
enum Bind {
    S(String),
    I(i64),
    T(DateTime<Utc>),
}

macro_rules! bind_all {
    ($q:expr, $binds:expr) => {{
        let mut q = $q;
        for b in $binds {
            q = match b {
                Bind::S(s) => q.bind(s.clone()),
                Bind::I(i) => q.bind(*i),
                Bind::T(t) => q.bind(*t),
            };
        }
        q
    }};
}

/// Rows one `INSERT` of [`insert_communications`] writes: 20 parameters each, well under
/// SQLite's 32,766 and PostgreSQL's 65,535 per statement.
pub(crate) const INSERT_ROWS: usize = 500;

/// Inserts [`NewCommunication`]s as `new` rows created at `$t`, [`INSERT_ROWS`] rows to
/// a statement, on any executor of either backend (a pool, or a transaction that writes
/// more rows with it). Evaluates to the first error, if any (the rows before it stay
/// written unless the caller's transaction rolls back).
macro_rules! insert_communications {
    ($exec:expr, $cs:expr, $t:expr) => {{
        let t: chrono::DateTime<chrono::Utc> = $t;
        let mut result: Result<(), sqlx::Error> = Ok(());
        for chunk in $cs.chunks($crate::store::communications::INSERT_ROWS) {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO communications (sid, tenant_sid, account_sid, agent_sid, scenario_sid, version, draft_version, \
                recipient, from_number, trunk, direction, communication_status, duration, goals, variables, is_test, consent_granted, has_recording, \
                has_history, data, strategy_sid, timezone, scheduled_at, due_at, created_at, updated_at, batch_sid, schedule) ",
            );
            q.push_values(chunk, |mut b, c| {
                let c: &$crate::store::NewCommunication = c;
                b.push_bind(&c.sid).push_bind(&c.tenant_sid).push_bind(&c.account_sid).push_bind(&c.agent_sid)
                    .push_bind(&c.scenario_sid).push_bind(c.version).push_bind(c.draft_version).push_bind(&c.recipient)
                    .push_bind(&c.from_number).push_bind(&c.trunk).push_bind(&c.direction)
                    .push("'new'").push("0").push("'[]'").push("'{}'")
                    .push_bind(c.is_test).push("FALSE").push("FALSE").push("FALSE")
                    .push_bind(&c.data).push_bind(&c.strategy_sid).push_bind(&c.timezone)
                    .push_bind(c.scheduled_at).push_bind(c.due_at).push_bind(t).push_bind(t).push_bind(&c.batch_sid)
                    .push_bind(&c.schedule);
            });
            if let Err(e) = q.build().execute($exec).await {
                result = Err(e);
                break;
            }
        }
        result
    }};
}
pub(crate) use insert_communications;

impl Store {
    pub async fn communication_create(
        &self,
        c: &NewCommunication,
    ) -> StoreResult<CommunicationRecord> {
        let t = now();
        on_db!(self, p => insert_communications!(p, std::slice::from_ref(c), t))
            .map_err(StoreError::from_write)?;
        self.communication_get(&c.sid)
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn communication_get(&self, sid: &str) -> StoreResult<Option<CommunicationRecord>> {
        let sql = format!("SELECT {COLS} FROM communications WHERE sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, CommunicationRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// Rows of an account among `sids` (for `include=communication`).
    pub async fn communications_by_sids(
        &self,
        account_sid: &str,
        sids: &[String],
    ) -> StoreResult<Vec<CommunicationRecord>> {
        if sids.is_empty() {
            return Ok(Vec::new());
        }
        let marks: Vec<String> = (0..sids.len()).map(|i| format!("${}", i + 2)).collect();
        let sql = format!(
            "SELECT {COLS} FROM communications WHERE account_sid = $1 AND sid IN ({})",
            marks.join(", ")
        );
        let mut binds = vec![Bind::S(account_sid.to_string())];
        binds.extend(sids.iter().map(|s| Bind::S(s.clone())));
        Ok(
            on_db!(self, p => bind_all!(sqlx::query_as::<_, CommunicationRecord>(sqlx::AssertSqlSafe(sql)), &binds).fetch_all(p).await)?,
        )
    }

    /// A page of an account's communications, newest first, with the total.
    pub async fn communication_list(
        &self,
        account_sid: &str,
        f: &CommunicationFilter,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<CommunicationRecord>, i64)> {
        let mut cond = vec!["account_sid = $1".to_string()];
        let mut binds = vec![Bind::S(account_sid.to_string())];
        let mut add = |col: &str, op: &str, b: Bind| {
            binds.push(b);
            cond.push(format!("{col} {op} ${}", binds.len()));
        };
        if let Some(v) = &f.agent_sid {
            add("agent_sid", "=", Bind::S(v.clone()));
        }
        if let Some(v) = &f.communication_status {
            add("communication_status", "=", Bind::S(v.as_str().to_string()));
        }
        if let Some(v) = &f.direction {
            add("direction", "=", Bind::S(v.clone()));
        }
        if let Some(v) = f.created_from {
            add("created_at", ">=", Bind::T(v));
        }
        if let Some(v) = f.created_to {
            add("created_at", "<", Bind::T(v));
        }
        if let Some(v) = &f.batch_sid {
            add("batch_sid", "=", Bind::S(v.clone()));
        }
        let wher = cond.join(" AND ");
        let count = format!("SELECT COUNT(*) FROM communications WHERE {wher}");
        let total: i64 = on_db!(self, p => bind_all!(sqlx::query_scalar(sqlx::AssertSqlSafe(count.clone())), &binds).fetch_one(p).await)?;
        let n = binds.len();
        let sql = format!(
            "SELECT {COLS} FROM communications WHERE {wher} ORDER BY created_at DESC, sid DESC LIMIT ${} OFFSET ${}",
            n + 1,
            n + 2
        );
        binds.push(Bind::I(limit));
        binds.push(Bind::I(offset));
        let rows = on_db!(self, p => bind_all!(sqlx::query_as::<_, CommunicationRecord>(sqlx::AssertSqlSafe(sql.clone())), &binds).fetch_all(p).await)?;
        Ok((rows, total))
    }

    /// Whether the account has a communication in the dispatch batch `batch_sid` (another
    /// account's batch reads as absent).
    pub async fn communication_batch_exists(
        &self,
        account_sid: &str,
        batch_sid: &str,
    ) -> StoreResult<bool> {
        let n: i64 = on_db!(self, p => sqlx::query_scalar("SELECT COUNT(*) FROM (SELECT 1 FROM communications \
            WHERE account_sid = $1 AND batch_sid = $2 LIMIT 1) b")
            .bind(account_sid).bind(batch_sid).fetch_one(p).await)?;
        Ok(n > 0)
    }

    /// Agents with due outbound rows (`new`/`queued`, `due_at <= now`).
    pub async fn communications_due_agents(&self) -> StoreResult<Vec<String>> {
        let t = now();
        Ok(
            on_db!(self, p => sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(format!("SELECT DISTINCT agent_sid FROM communications WHERE communication_status IN ({WAITING}) \
            AND due_at <= $1 AND agent_sid IS NOT NULL AND direction = 'outbound'")))
            .bind(t).fetch_all(p).await)?,
        )
    }

    /// Whether scenario test calls are due.
    pub async fn communications_test_due(&self) -> StoreResult<bool> {
        let t = now();
        let n: i64 = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM communications WHERE communication_status IN ({WAITING}) \
            AND due_at <= $1 AND agent_sid IS NULL AND direction = 'outbound'")))
            .bind(t).fetch_one(p).await)?;
        Ok(n > 0)
    }

    /// Test calls of an account that have not ended (scenario test dispatches and browser
    /// calls: `is_test` without an agent, `new` to `in_progress`), across every engine;
    /// the share `dialer.max_test_calls_per_account` bounds.
    pub async fn communication_open_test_calls(&self, account_sid: &str) -> StoreResult<i64> {
        Ok(
            on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM communications WHERE agent_sid IS NULL AND account_sid = $1 \
            AND is_test AND communication_status IN ({OPEN})")))
            .bind(account_sid).fetch_one(p).await)?,
        )
    }

    /// Live calls (`dialing` or `in_progress`) of an agent, across every engine.
    pub async fn communication_live_count(&self, agent_sid: &str) -> StoreResult<i64> {
        Ok(
            on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM communications WHERE agent_sid = $1 \
            AND communication_status IN ({LIVE})")))
            .bind(agent_sid).fetch_one(p).await)?,
        )
    }

    /// The claim statement (bind order: token, by, until, now, limit, agent).
    fn claim_sql(&self, scope: &ClaimScope) -> String {
        let agent_cond = match scope {
            ClaimScope::Agent(_) => "agent_sid = $6",
            ClaimScope::TestCalls => "agent_sid IS NULL AND $6 = $6",
        };
        let lock = match self.backend() {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        format!(
            "UPDATE communications SET communication_status = 'dialing', claim_token = $1, claimed_by = $2, claimed_until = $3, updated_at = $4 \
             WHERE communication_status IN ({WAITING}) AND sid IN (SELECT sid FROM communications WHERE communication_status IN ({WAITING}) \
             AND direction = 'outbound' AND due_at <= $4 AND {agent_cond} ORDER BY due_at ASC, sid ASC LIMIT $5{lock}) RETURNING {COLS}"
        )
    }

    /// Claims up to `limit` due outbound rows of `scope` (oldest due first): status
    /// `dialing`, the claim's token and lease. Atomic; see the module doc. No agent limit
    /// is applied here: agents' rows go through [`Store::communication_claim_agent`].
    pub async fn communication_claim_due(
        &self,
        claim: &Claim,
        scope: &ClaimScope,
        limit: i64,
    ) -> StoreResult<Vec<CommunicationRecord>> {
        if limit <= 0 {
            return Ok(Vec::new());
        }
        let t = now();
        let agent = match scope {
            ClaimScope::Agent(a) => a.clone(),
            ClaimScope::TestCalls => String::new(),
        };
        let sql = self.claim_sql(scope);
        let mut rows = on_db!(self, p => sqlx::query_as::<_, CommunicationRecord>(sqlx::AssertSqlSafe(sql.clone()))
            .bind(&claim.token).bind(&claim.by).bind(claim.until).bind(t).bind(limit).bind(&agent)
            .fetch_all(p).await)?;
        rows.sort_by(|a, b| a.due_at.cmp(&b.due_at).then(a.sid.cmp(&b.sid)));
        Ok(rows)
    }

    /// Claims up to `want` due rows of an agent within the agent's limits, across every
    /// engine on this database: in ONE transaction it locks the agent's row of
    /// `agent_dial_slots` (PostgreSQL `FOR UPDATE`; SQLite serialises writers), counts the
    /// agent's live calls (`cpl`), takes free start slots ([`start_slots`], `cps`), claims
    /// that many rows and moves the next free slot past the ones used. Two engines claiming
    /// for one agent therefore queue on that row and see each other's claims.
    pub async fn communication_claim_agent(
        &self,
        claim: &Claim,
        agent_sid: &str,
        limits: &AgentLimits,
        want: i64,
    ) -> StoreResult<Vec<AgentClaimed>> {
        if want <= 0 {
            return Ok(Vec::new());
        }
        let t = now();
        let now_us = t.timestamp_micros();
        let lock = match self.backend() {
            Backend::Postgres => " FOR UPDATE",
            Backend::Sqlite => "",
        };
        let select_slot =
            format!("SELECT next_start_us FROM agent_dial_slots WHERE agent_sid = $1{lock}");
        let claim_sql = self.claim_sql(&ClaimScope::Agent(agent_sid.to_string()));
        let (mut rows, slots) = on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            sqlx::query("INSERT INTO agent_dial_slots (agent_sid, next_start_us) VALUES ($1, $2) ON CONFLICT (agent_sid) DO NOTHING")
                .bind(agent_sid).bind(now_us).execute(&mut *tx).await?;
            let next_us: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(select_slot.clone()))
                .bind(agent_sid).fetch_one(&mut *tx).await?;
            let mut n = want;
            if limits.cpl > 0 {
                let live: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM communications WHERE agent_sid = $1 \
                    AND communication_status IN ({LIVE})")))
                    .bind(agent_sid).fetch_one(&mut *tx).await?;
                n = n.min(limits.cpl - live);
            }
            let slots = (limits.cps > 0).then(|| claimable_slots(next_us, now_us, limits));
            if let Some(s) = slots {
                n = n.min(s.available);
            }
            if n <= 0 {
                tx.rollback().await?;
                return Ok::<_, StoreError>((Vec::new(), None));
            }
            let rows = sqlx::query_as::<_, CommunicationRecord>(sqlx::AssertSqlSafe(claim_sql.clone()))
                .bind(&claim.token).bind(&claim.by).bind(claim.until).bind(t).bind(n).bind(agent_sid)
                .fetch_all(&mut *tx).await?;
            if let Some(s) = slots
                && !rows.is_empty()
            {
                sqlx::query("UPDATE agent_dial_slots SET next_start_us = $2 WHERE agent_sid = $1")
                    .bind(agent_sid).bind(s.next_after(rows.len() as i64)).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok((rows, slots))
        }.await)?;
        rows.sort_by(|a, b| a.due_at.cmp(&b.due_at).then(a.sid.cmp(&b.sid)));
        // Row k takes slot k; without a cps limit a row starts at once.
        Ok(rows
            .into_iter()
            .enumerate()
            .map(|(k, row)| {
                let start_at = slots
                    .map(|s| s.next_after(k as i64))
                    .and_then(DateTime::from_timestamp_micros);
                AgentClaimed { row, start_at }
            })
            .collect())
    }

    /// Defers an agent's due rows to `until`: status `queued`. `Defer::All` (the agent
    /// cannot dial now) takes every due row; `Defer::AgentSchedule` (the agent's calling
    /// schedule is closed) only those without a dispatch schedule of their own, which the
    /// dialer checks per row.
    pub async fn communication_defer_agent(
        &self,
        agent_sid: &str,
        until: DateTime<Utc>,
        which: Defer,
    ) -> StoreResult<u64> {
        let t = now();
        let own = match which {
            Defer::All => "",
            Defer::AgentSchedule => " AND schedule IS NULL",
        };
        Ok(
            on_db!(self, p => sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE communications SET communication_status = 'queued', due_at = $2, updated_at = $3 \
            WHERE agent_sid = $1 AND communication_status IN ({WAITING}) AND due_at <= $3 AND direction = 'outbound'{own}")))
            .bind(agent_sid).bind(until).bind(t).execute(p).await.map(|r| r.rows_affected()))?,
        )
    }

    /// Extends the lease of every row `token` holds. Returns the rows renewed.
    pub async fn communication_renew(&self, token: &str, until: DateTime<Utc>) -> StoreResult<u64> {
        Ok(
            on_db!(self, p => sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE communications SET claimed_until = $2 WHERE claim_token = $1 \
            AND communication_status IN ({LIVE})")))
            .bind(token).bind(until).execute(p).await.map(|r| r.rows_affected()))?,
        )
    }

    /// Reconciles expired claims (see the module doc).
    pub async fn communications_reconcile(&self) -> StoreResult<Reconciled> {
        let t = now();
        let [maybe_placed, interrupted] = interrupt_sql("claimed_until < $2");
        let maybe_placed = on_db!(self, p => sqlx::query(sqlx::AssertSqlSafe(maybe_placed.clone()))
            .bind(t).bind(t).execute(p).await.map(|r| r.rows_affected()))?;
        let interrupted = on_db!(self, p => sqlx::query(sqlx::AssertSqlSafe(interrupted.clone()))
            .bind(t).bind(t).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(Reconciled {
            interrupted,
            maybe_placed,
        })
    }
}

/// The two statements that interrupt the live rows whose claims `cond` selects (binds:
/// `$1` now, `$2` the one value `cond` compares with): first those dialling without a recorded INVITE (it
/// may have gone out), then every other live one. Expired leases
/// ([`Store::communications_reconcile`]) and a lost node's claims
/// ([`Store::node_take_over`]) end this way.
pub(crate) fn interrupt_sql(cond: &str) -> [String; 2] {
    [
        format!(
            "UPDATE communications SET communication_status = 'interrupted', \
             error = 'the engine that claimed the call stopped around its start; it may not have been placed', ended_at = $1, \
             updated_at = $1, claim_token = NULL, claimed_by = NULL, claimed_until = NULL, sip_dialog = NULL \
             WHERE communication_status = 'dialing' AND started_at IS NULL AND {cond}"
        ),
        format!(
            "UPDATE communications SET communication_status = 'interrupted', \
             error = 'the engine running the call stopped', ended_at = $1, updated_at = $1, claim_token = NULL, \
             claimed_by = NULL, claimed_until = NULL, sip_dialog = NULL \
             WHERE communication_status IN ({LIVE}) AND {cond}"
        ),
    ]
}

mod attempts;
mod bulk;
mod due;
mod finish;
mod writes;

pub use attempts::CommunicationAttempt;
pub use due::DUE_CHANNEL;
pub use finish::{
    CONSENT_VARIABLE, CallFinish, DECLINED, NODE_LOST, NOT_ANSWERED, OPT_OUT, ScenarioVerdict,
    consent_granted,
};

pub use writes::{CallWrite, Deliveries, claimed_record};

#[cfg(test)]
mod tests;
