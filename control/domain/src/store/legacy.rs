//! Legacy campaign family: account tokens for HTTP Basic, legacy profiles and legacy
//! campaigns (the legacy view of agents: the agent row plus a description).

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, filter::Where, now, on_db, store_row};

store_row! {
    /// A legacy profile of an account.
    #[derive(Debug, Clone)]
    pub struct LegacyProfileRecord {
        pub id: String,
        pub tenant_sid: String,
        pub account_sid: String,
        pub email: String,
        pub timezone: String,
        pub creation_time: DateTime<Utc>,
        pub update_time: DateTime<Utc>,
    }
}

const COLS: &str = "id, tenant_sid, account_sid, email, timezone, creation_time, update_time";

impl Store {
    /// Sets (or rotates) an account's legacy token hash.
    pub async fn legacy_token_set(
        &self,
        tenant_sid: &str,
        account_sid: &str,
        token_hash: &str,
    ) -> StoreResult<()> {
        on_db!(self, p => sqlx::query(
            "INSERT INTO legacy_credentials (account_sid, tenant_sid, token_hash, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (account_sid) DO UPDATE SET token_hash = excluded.token_hash, created_at = excluded.created_at")
            .bind(account_sid).bind(tenant_sid).bind(token_hash).bind(now()).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// Whether `token_hash` is the current legacy token of a live, active account of a
    /// live tenant; returns the tenant sid.
    pub async fn legacy_token_check(
        &self,
        account_sid: &str,
        token_hash: &str,
    ) -> StoreResult<Option<String>> {
        Ok(on_db!(self, p => sqlx::query_scalar(
            "SELECT a.tenant_sid FROM legacy_credentials c JOIN accounts a ON a.sid = c.account_sid JOIN tenants t ON t.sid = a.tenant_sid \
             WHERE c.account_sid = $1 AND c.token_hash = $2 AND a.deleted_at IS NULL AND a.status = 'active' AND t.deleted_at IS NULL")
            .bind(account_sid).bind(token_hash).fetch_optional(p).await)?)
    }

    pub async fn legacy_profile_create(
        &self,
        id: &str,
        tenant_sid: &str,
        account_sid: &str,
        email: &str,
        timezone: &str,
    ) -> StoreResult<LegacyProfileRecord> {
        let t = now();
        on_db!(self, p => sqlx::query(
            "INSERT INTO legacy_profiles (id, tenant_sid, account_sid, email, timezone, creation_time, update_time) VALUES ($1, $2, $3, $4, $5, $6, $6)")
            .bind(id).bind(tenant_sid).bind(account_sid).bind(email).bind(timezone).bind(t).execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.legacy_profile_get(account_sid, id)
            .await?
            .ok_or(StoreError::NotFound)
    }

    /// A profile of `account_sid` (None for another account's id).
    pub async fn legacy_profile_get(
        &self,
        account_sid: &str,
        id: &str,
    ) -> StoreResult<Option<LegacyProfileRecord>> {
        let sql = format!("SELECT {COLS} FROM legacy_profiles WHERE id = $1 AND account_sid = $2");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, LegacyProfileRecord>(sqlx::AssertSqlSafe(sql)).bind(id).bind(account_sid).fetch_optional(p).await)?,
        )
    }

    pub async fn legacy_profile_update(
        &self,
        account_sid: &str,
        id: &str,
        email: Option<&str>,
        timezone: Option<&str>,
    ) -> StoreResult<LegacyProfileRecord> {
        let n = on_db!(self, p => sqlx::query(
            "UPDATE legacy_profiles SET email = COALESCE($3, email), timezone = COALESCE($4, timezone), update_time = $5 WHERE id = $1 AND account_sid = $2")
            .bind(id).bind(account_sid).bind(email).bind(timezone).bind(now()).execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        self.legacy_profile_get(account_sid, id)
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn legacy_profile_delete(&self, account_sid: &str, id: &str) -> StoreResult<()> {
        let n = on_db!(self, p => sqlx::query("DELETE FROM legacy_profiles WHERE id = $1 AND account_sid = $2")
            .bind(id).bind(account_sid).execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            Err(StoreError::NotFound)
        } else {
            Ok(())
        }
    }
}

store_row! {
    /// A legacy campaign: an agent of the account seen through the legacy family.
    #[derive(Debug, Clone)]
    pub struct LegacyCampaignRecord {
        pub sid: String,
        pub account_sid: String,
        /// "" when none was given (agents created on the v1 routes).
        pub description: String,
        pub scenario_sid: String,
        /// Identifier of the agent's number; "" for a pool gateway.
        pub number: String,
        /// The agent's number pool; "" for a number gateway.
        pub pool_sid: String,
        pub status: String,
        pub archive_time: Option<DateTime<Utc>>,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
    }
}

/// A campaign field the free-text search (`filter_or`) can look through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CampaignField {
    Sid,
    Description,
    ScenarioSid,
    Number,
    PoolSid,
}

impl CampaignField {
    /// Every searchable field, by its legacy name.
    pub const ALL: [(&'static str, CampaignField); 5] = [
        ("sid", CampaignField::Sid),
        ("description", CampaignField::Description),
        ("scenario_sid", CampaignField::ScenarioSid),
        ("number", CampaignField::Number),
        ("pool_sid", CampaignField::PoolSid),
    ];

    fn expr(self) -> &'static str {
        match self {
            CampaignField::Sid => "a.sid",
            CampaignField::Description => "COALESCE(c.description, '')",
            CampaignField::ScenarioSid => "a.scenario_sid",
            CampaignField::Number => "COALESCE(n.identifier, '')",
            CampaignField::PoolSid => "COALESCE(a.number_pool_sid, '')",
        }
    }
}

/// Order of a campaign list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CampaignOrder {
    #[default]
    CreationTimeDesc,
    CreationTimeAsc,
    DescriptionAsc,
    DescriptionDesc,
}

/// Filters of a campaign list: exact matches, ANDed; `query` is a case-insensitive
/// substring searched through `search_fields` (ORed).
#[derive(Debug, Clone, Default)]
pub struct CampaignFilter {
    pub sid: Option<String>,
    pub scenario_sid: Option<String>,
    pub description: Option<String>,
    pub number: Option<String>,
    pub pool_sid: Option<String>,
    pub status: Option<String>,
    /// None: archived and live; Some(true): archived only; Some(false): live only.
    pub archived: Option<bool>,
    pub search_fields: Vec<CampaignField>,
    pub query: Option<String>,
    pub order: CampaignOrder,
}

const CAMPAIGN_SELECT: &str = "SELECT a.sid, a.account_sid, COALESCE(c.description, '') AS description, a.scenario_sid, \
    COALESCE(n.identifier, '') AS number, COALESCE(a.number_pool_sid, '') AS pool_sid, a.status, a.archive_time, a.created_at, a.updated_at \
    FROM agents a LEFT JOIN numbers n ON n.sid = a.number_sid LEFT JOIN legacy_campaigns c ON c.agent_sid = a.sid";

impl Store {
    /// Sets the legacy description of an agent.
    pub async fn legacy_campaign_describe(
        &self,
        agent_sid: &str,
        description: &str,
    ) -> StoreResult<()> {
        on_db!(self, p => sqlx::query(
            "INSERT INTO legacy_campaigns (agent_sid, description) VALUES ($1, $2) \
             ON CONFLICT (agent_sid) DO UPDATE SET description = excluded.description")
            .bind(agent_sid).bind(description).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// A campaign of `account_sid` (None for another account's sid).
    pub async fn legacy_campaign_get(
        &self,
        account_sid: &str,
        sid: &str,
    ) -> StoreResult<Option<LegacyCampaignRecord>> {
        let sql = format!("{CAMPAIGN_SELECT} WHERE a.sid = $1 AND a.account_sid = $2");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, LegacyCampaignRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).bind(account_sid).fetch_optional(p).await)?,
        )
    }

    /// A page of an account's campaigns matching `f`.
    pub async fn legacy_campaign_list(
        &self,
        account_sid: &str,
        f: &CampaignFilter,
        limit: i64,
        offset: i64,
    ) -> StoreResult<Vec<LegacyCampaignRecord>> {
        let mut w = Where::new("a.account_sid", account_sid);
        for (field, v) in [
            (CampaignField::Sid, &f.sid),
            (CampaignField::ScenarioSid, &f.scenario_sid),
            (CampaignField::Description, &f.description),
            (CampaignField::Number, &f.number),
            (CampaignField::PoolSid, &f.pool_sid),
        ] {
            w.eq(field.expr(), v.as_ref());
        }
        w.eq("a.status", f.status.as_ref());
        match f.archived {
            None => {}
            Some(true) => w.and("a.archive_time IS NOT NULL"),
            Some(false) => w.and("a.archive_time IS NULL"),
        }
        let columns: Vec<&str> = f.search_fields.iter().map(|c| c.expr()).collect();
        w.search(f.query.as_deref(), &columns);
        let order = match f.order {
            CampaignOrder::CreationTimeDesc => "a.created_at DESC, a.sid DESC",
            CampaignOrder::CreationTimeAsc => "a.created_at ASC, a.sid ASC",
            CampaignOrder::DescriptionAsc => "description ASC, a.created_at ASC, a.sid ASC",
            CampaignOrder::DescriptionDesc => "description DESC, a.created_at DESC, a.sid DESC",
        };
        w.page(self, CAMPAIGN_SELECT, order, limit, offset).await
    }
}
