//! Agents: what dials (gateway: one number or one pool), what runs (a scenario), when
//! (calling schedule in a time zone), how fast (limits), and where results go.
//! Structured parts (schedule, result targets, SMS block) are stored as JSON text; the
//! SMS provider sid is duplicated into its own column so delete conflicts can find it.

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;

use crate::agent_settings::{AgentSms, CommunicationResult, Schedule};

use super::{Store, StoreError, StoreResult, filter::Where, now, on_db, store_row};

store_row! {
    /// An agent's row as stored: its structured settings as JSON text.
    #[derive(Debug, Clone)]
    struct AgentRow {
        sid: String,
        tenant_sid: String,
        account_sid: String,
        gateway_type: String,
        number_sid: Option<String>,
        number_pool_sid: Option<String>,
        scenario_sid: String,
        voicemail_enabled: bool,
        call_recording: bool,
        calling_schedule: String,
        timezone: String,
        cps: i64,
        cpl: i64,
        is_test: bool,
        communication_result: String,
        sms: Option<String>,
        sms_provider_sid: Option<String>,
        strategy_sid: Option<String>,
        status: String,
        archive_time: Option<DateTime<Utc>>,
        created_at: DateTime<Utc>,
        updated_at: DateTime<Utc>,
    }
}

/// An agent, its structured settings decoded once, when it is read from the store (the
/// one place the stored JSON of `calling_schedule`, `communication_result` and `sms` is
/// read): a stored value that does not decode is a store error naming the column and the
/// agent.
#[derive(Debug, Clone)]
pub struct AgentRecord {
    pub sid: String,
    pub tenant_sid: String,
    pub account_sid: String,
    pub gateway_type: String,
    pub number_sid: Option<String>,
    pub number_pool_sid: Option<String>,
    pub scenario_sid: String,
    pub voicemail_enabled: bool,
    pub call_recording: bool,
    /// The calling schedule (column `calling_schedule`).
    pub schedule: Schedule,
    pub timezone: String,
    pub cps: i64,
    pub cpl: i64,
    pub is_test: bool,
    /// Where results go (column `communication_result`).
    pub result: CommunicationResult,
    /// The SMS settings; `None` when the agent sends no SMS (no stored settings, or the
    /// empty ones).
    pub sms: Option<AgentSms>,
    pub sms_provider_sid: Option<String>,
    /// The strategy a dispatch through this agent follows when it names none.
    pub strategy_sid: Option<String>,
    pub status: String,
    pub archive_time: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The JSON text of column `column` of agent `sid`, decoded; a column decode error
/// otherwise.
fn decode<T: DeserializeOwned>(sid: &str, column: &str, text: &str) -> Result<T, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| sqlx::Error::ColumnDecode {
        index: format!("{column:?} of agent {sid}"),
        source: Box::new(e),
    })
}

impl TryFrom<AgentRow> for AgentRecord {
    type Error = sqlx::Error;

    fn try_from(r: AgentRow) -> Result<Self, sqlx::Error> {
        let schedule = decode(&r.sid, "calling_schedule", &r.calling_schedule)?;
        let result = decode(&r.sid, "communication_result", &r.communication_result)?;
        let sms = match r.sms.as_deref() {
            None => None,
            Some(text) => Some(decode::<AgentSms>(&r.sid, "sms", text)?),
        }
        .filter(|s| !s.is_unset());
        Ok(AgentRecord {
            sid: r.sid,
            tenant_sid: r.tenant_sid,
            account_sid: r.account_sid,
            gateway_type: r.gateway_type,
            number_sid: r.number_sid,
            number_pool_sid: r.number_pool_sid,
            scenario_sid: r.scenario_sid,
            voicemail_enabled: r.voicemail_enabled,
            call_recording: r.call_recording,
            schedule,
            timezone: r.timezone,
            cps: r.cps,
            cpl: r.cpl,
            is_test: r.is_test,
            result,
            sms,
            sms_provider_sid: r.sms_provider_sid,
            strategy_sid: r.strategy_sid,
            status: r.status,
            archive_time: r.archive_time,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

impl<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> for AgentRecord {
    fn from_row(row: &'r sqlx::sqlite::SqliteRow) -> Result<Self, sqlx::Error> {
        AgentRow::from_row(row)?.try_into()
    }
}

impl<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> for AgentRecord {
    fn from_row(row: &'r sqlx::postgres::PgRow) -> Result<Self, sqlx::Error> {
        AgentRow::from_row(row)?.try_into()
    }
}

impl AgentRecord {
    /// Whether the agent may dial now: active and not archived.
    pub fn is_dialable(&self) -> bool {
        self.status == "active" && self.archive_time.is_none()
    }
}

/// The full, checked configuration of an agent (create, and the merged result of a patch).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub gateway_type: String,
    pub number_sid: Option<String>,
    pub number_pool_sid: Option<String>,
    pub scenario_sid: String,
    pub voicemail_enabled: bool,
    pub call_recording: bool,
    /// JSON of {strategy, args}.
    pub calling_schedule: String,
    pub timezone: String,
    pub cps: i64,
    pub cpl: i64,
    pub is_test: bool,
    /// JSON of {targets: [{url}]}.
    pub communication_result: String,
    /// JSON of the SMS block, None when the agent sends no SMS.
    pub sms: Option<String>,
    pub sms_provider_sid: Option<String>,
    /// The default communication strategy (checked to be the account's).
    pub strategy_sid: Option<String>,
    pub status: String,
}

/// Filters of an agent list.
#[derive(Debug, Clone, Default)]
pub struct AgentFilter {
    pub status: Option<String>,
    pub scenario_sid: Option<String>,
    pub gateway_type: Option<String>,
    pub number_sid: Option<String>,
    pub number_pool_sid: Option<String>,
    /// None: only live agents; Some(true): only archived; Some(false): both.
    pub archived: Option<bool>,
    pub descending: bool,
}

/// Agent columns that reference another resource (for delete conflicts).
#[derive(Debug, Clone, Copy)]
pub enum AgentRef {
    Number,
    Pool,
    Scenario,
    SmsProvider,
    Strategy,
}

impl AgentRef {
    fn column(self) -> &'static str {
        match self {
            AgentRef::Number => "number_sid",
            AgentRef::Pool => "number_pool_sid",
            AgentRef::Scenario => "scenario_sid",
            AgentRef::SmsProvider => "sms_provider_sid",
            AgentRef::Strategy => "strategy_sid",
        }
    }
}

const COLS: &str = "sid, tenant_sid, account_sid, gateway_type, number_sid, number_pool_sid, scenario_sid, voicemail_enabled, \
    call_recording, calling_schedule, timezone, cps, cpl, is_test, communication_result, sms, sms_provider_sid, strategy_sid, status, \
    archive_time, created_at, updated_at";

impl Store {
    pub async fn agent_create(
        &self,
        sid: &str,
        tenant_sid: &str,
        account_sid: &str,
        c: &AgentConfig,
    ) -> StoreResult<AgentRecord> {
        on_db!(self, p => sqlx::query("INSERT INTO agents (sid, tenant_sid, account_sid, gateway_type, number_sid, number_pool_sid, scenario_sid, \
             voicemail_enabled, call_recording, calling_schedule, timezone, cps, cpl, is_test, communication_result, sms, sms_provider_sid, status, \
             archive_time, created_at, updated_at, strategy_sid) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, NULL, $19, $19, $20)")
            .bind(sid).bind(tenant_sid).bind(account_sid).bind(&c.gateway_type).bind(&c.number_sid).bind(&c.number_pool_sid)
            .bind(&c.scenario_sid).bind(c.voicemail_enabled).bind(c.call_recording).bind(&c.calling_schedule).bind(&c.timezone)
            .bind(c.cps).bind(c.cpl).bind(c.is_test).bind(&c.communication_result).bind(&c.sms).bind(&c.sms_provider_sid)
            .bind(&c.status).bind(now()).bind(&c.strategy_sid).execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.agent_get(sid).await?.ok_or(StoreError::NotFound)
    }

    /// Dialer helper: an agent by id (archived ones too; check [`AgentRecord::is_dialable`]).
    pub async fn agent_get(&self, sid: &str) -> StoreResult<Option<AgentRecord>> {
        let sql = format!("SELECT {COLS} FROM agents WHERE sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, AgentRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// A page of an account's agents, by creation time.
    pub async fn agent_list(
        &self,
        account_sid: &str,
        f: &AgentFilter,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<AgentRecord>, i64)> {
        let mut w = Where::new("account_sid", account_sid);
        w.eq("status", f.status.as_ref());
        w.eq("scenario_sid", f.scenario_sid.as_ref());
        w.eq("gateway_type", f.gateway_type.as_ref());
        w.eq("number_sid", f.number_sid.as_ref());
        w.eq("number_pool_sid", f.number_pool_sid.as_ref());
        match f.archived {
            None => w.and("archive_time IS NULL"),
            Some(true) => w.and("archive_time IS NOT NULL"),
            Some(false) => {}
        }
        let dir = if f.descending { "DESC" } else { "ASC" };
        let select = format!("SELECT {COLS} FROM agents");
        let order = format!("created_at {dir}, sid {dir}");
        let rows = w.page(self, &select, &order, limit, offset).await?;
        let total = w.count(self, "agents").await?;
        Ok((rows, total))
    }

    /// Replaces the configuration (the API merges a patch and re-checks it first).
    pub async fn agent_update(&self, sid: &str, c: &AgentConfig) -> StoreResult<AgentRecord> {
        let n = on_db!(self, p => sqlx::query("UPDATE agents SET gateway_type = $2, number_sid = $3, number_pool_sid = $4, scenario_sid = $5, \
             voicemail_enabled = $6, call_recording = $7, calling_schedule = $8, timezone = $9, cps = $10, cpl = $11, is_test = $12, \
             communication_result = $13, sms = $14, sms_provider_sid = $15, status = $16, updated_at = $17, strategy_sid = $18 WHERE sid = $1")
            .bind(sid).bind(&c.gateway_type).bind(&c.number_sid).bind(&c.number_pool_sid).bind(&c.scenario_sid)
            .bind(c.voicemail_enabled).bind(c.call_recording).bind(&c.calling_schedule).bind(&c.timezone)
            .bind(c.cps).bind(c.cpl).bind(c.is_test).bind(&c.communication_result).bind(&c.sms).bind(&c.sms_provider_sid)
            .bind(&c.status).bind(now()).bind(&c.strategy_sid).execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        self.agent_get(sid).await?.ok_or(StoreError::NotFound)
    }

    /// Sets (Some) or clears (None) the archive time.
    pub async fn agent_set_archive(
        &self,
        sid: &str,
        at: Option<DateTime<Utc>>,
    ) -> StoreResult<AgentRecord> {
        let n = on_db!(self, p => sqlx::query("UPDATE agents SET archive_time = $2, updated_at = $3 WHERE sid = $1")
            .bind(sid).bind(at).bind(now()).execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        self.agent_get(sid).await?.ok_or(StoreError::NotFound)
    }

    pub async fn agent_delete(&self, sid: &str) -> StoreResult<()> {
        let n = on_db!(self, p => sqlx::query("DELETE FROM agents WHERE sid = $1").bind(sid).execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            Err(StoreError::NotFound)
        } else {
            Ok(())
        }
    }

    /// The first `limit` ids (oldest first) of the agents, archived or not, whose
    /// `what` column names `sid`, and how many there are in all.
    pub async fn agents_referencing(
        &self,
        what: AgentRef,
        sid: &str,
        limit: i64,
    ) -> StoreResult<(Vec<String>, i64)> {
        let col = what.column();
        let sql = format!(
            "SELECT sid FROM agents WHERE {col} = $1 ORDER BY created_at ASC, sid ASC LIMIT $2"
        );
        let count = format!("SELECT COUNT(*) FROM agents WHERE {col} = $1");
        let ids: Vec<String> = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(sid).bind(limit).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(count)).bind(sid).fetch_one(p).await)?;
        Ok((ids, total))
    }
}
