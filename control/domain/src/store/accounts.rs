//! Accounts (the unit that owns users and, later, every resource).

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, now, on_db, store_row};

store_row! {
    #[derive(Debug, Clone)]
    pub struct AccountRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub tenant_name: String,
        pub name: String,
        pub email: String,
        pub external_id: String,
        pub country: String,
        pub region: String,
        pub timezone: String,
        pub phone: String,
        pub status: String,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
        pub deleted_at: Option<DateTime<Utc>>,
    }
}

/// Fields of a new account (validated by the API layer).
#[derive(Debug, Clone)]
pub struct NewAccount {
    pub sid: String,
    pub tenant_sid: String,
    pub name: String,
    pub email: String,
    pub external_id: String,
    pub country: String,
    pub region: String,
    pub timezone: String,
    pub phone: String,
    pub status: String,
}

/// A partial update: `None` keeps the stored value.
#[derive(Debug, Clone, Default)]
pub struct AccountPatch {
    pub name: Option<String>,
    pub email: Option<String>,
    pub external_id: Option<String>,
    pub country: Option<String>,
    pub region: Option<String>,
    pub timezone: Option<String>,
    pub phone: Option<String>,
    pub status: Option<String>,
}

/// The columns of `accounts` (AccountRecord without the joined `tenant_name`).
pub(super) const COLS: &str = "sid, tenant_sid, name, email, external_id, country, region, timezone, phone, status, created_at, updated_at, deleted_at";

const SELECT: &str = "SELECT a.sid, a.tenant_sid, t.name AS tenant_name, a.name, a.email, a.external_id, a.country, a.region, \
    a.timezone, a.phone, a.status, a.created_at, a.updated_at, a.deleted_at FROM accounts a JOIN tenants t ON t.sid = a.tenant_sid";

impl Store {
    pub async fn account_create(&self, a: &NewAccount) -> StoreResult<AccountRecord> {
        let t = now();
        on_db!(self, p => sqlx::query("INSERT INTO accounts (sid, tenant_sid, name, email, external_id, country, region, timezone, phone, status, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)")
            .bind(&a.sid).bind(&a.tenant_sid).bind(&a.name).bind(&a.email).bind(&a.external_id).bind(&a.country)
            .bind(&a.region).bind(&a.timezone).bind(&a.phone).bind(&a.status).bind(t)
            .execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.account_get(&a.sid).await?.ok_or(StoreError::NotFound)
    }

    /// An account by sid, including soft-deleted ones (check `deleted_at`).
    pub async fn account_get(&self, sid: &str) -> StoreResult<Option<AccountRecord>> {
        let sql = format!("{SELECT} WHERE a.sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, AccountRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// A page of a tenant's accounts (creation order) and the total.
    pub async fn account_list(
        &self,
        tenant_sid: &str,
        show_deleted: bool,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<AccountRecord>, i64)> {
        let filter = if show_deleted {
            ""
        } else {
            " AND a.deleted_at IS NULL"
        };
        let sql = format!(
            "{SELECT} WHERE a.tenant_sid = $1{filter} ORDER BY a.created_at ASC, a.sid ASC LIMIT $2 OFFSET $3"
        );
        let count = format!("SELECT COUNT(*) FROM accounts a WHERE a.tenant_sid = $1{filter}");
        let rows = on_db!(self, p => sqlx::query_as::<_, AccountRecord>(sqlx::AssertSqlSafe(sql)).bind(tenant_sid).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(count)).bind(tenant_sid).fetch_one(p).await)?;
        Ok((rows, total))
    }

    pub async fn account_update(
        &self,
        sid: &str,
        patch: &AccountPatch,
    ) -> StoreResult<AccountRecord> {
        let t = now();
        let n = on_db!(self, p => sqlx::query(
            "UPDATE accounts SET name = COALESCE($2, name), email = COALESCE($3, email), external_id = COALESCE($4, external_id), \
             country = COALESCE($5, country), region = COALESCE($6, region), timezone = COALESCE($7, timezone), \
             phone = COALESCE($8, phone), status = COALESCE($9, status), updated_at = $10 WHERE sid = $1")
            .bind(sid).bind(&patch.name).bind(&patch.email).bind(&patch.external_id).bind(&patch.country)
            .bind(&patch.region).bind(&patch.timezone).bind(&patch.phone).bind(&patch.status).bind(t)
            .execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        self.account_get(sid).await?.ok_or(StoreError::NotFound)
    }
}
