//! SIP trunks of a tenant; `name` is the edge routing key, unique among live trunks.

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, now, on_db, store_row};

store_row! {
    #[derive(Debug, Clone)]
    pub struct TrunkRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub name: String,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
        pub deleted_at: Option<DateTime<Utc>>,
    }
}

const COLS: &str = "sid, tenant_sid, name, created_at, updated_at, deleted_at";

impl Store {
    /// `Unique` when a live trunk of the tenant already has the name.
    pub async fn trunk_create(
        &self,
        sid: &str,
        tenant_sid: &str,
        name: &str,
    ) -> StoreResult<TrunkRecord> {
        on_db!(self, p => sqlx::query("INSERT INTO trunks (sid, tenant_sid, name, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)")
            .bind(sid).bind(tenant_sid).bind(name).bind(now()).execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.trunk_get(sid).await?.ok_or(StoreError::NotFound)
    }

    pub async fn trunk_get(&self, sid: &str) -> StoreResult<Option<TrunkRecord>> {
        let sql = format!("SELECT {COLS} FROM trunks WHERE sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, TrunkRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// The live trunk of a tenant with this routing name (for the SIP edge).
    pub async fn trunk_by_name(
        &self,
        tenant_sid: &str,
        name: &str,
    ) -> StoreResult<Option<TrunkRecord>> {
        let sql = format!(
            "SELECT {COLS} FROM trunks WHERE tenant_sid = $1 AND name = $2 AND deleted_at IS NULL"
        );
        Ok(
            on_db!(self, p => sqlx::query_as::<_, TrunkRecord>(sqlx::AssertSqlSafe(sql)).bind(tenant_sid).bind(name).fetch_optional(p).await)?,
        )
    }

    /// A page of a tenant's trunks, oldest first, with the total.
    pub async fn trunk_list(
        &self,
        tenant_sid: &str,
        show_deleted: bool,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<TrunkRecord>, i64)> {
        let filter = if show_deleted {
            ""
        } else {
            " AND deleted_at IS NULL"
        };
        let sql = format!(
            "SELECT {COLS} FROM trunks WHERE tenant_sid = $1{filter} ORDER BY created_at ASC, sid ASC LIMIT $2 OFFSET $3"
        );
        let count = format!("SELECT COUNT(*) FROM trunks WHERE tenant_sid = $1{filter}");
        let rows = on_db!(self, p => sqlx::query_as::<_, TrunkRecord>(sqlx::AssertSqlSafe(sql)).bind(tenant_sid).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(count)).bind(tenant_sid).fetch_one(p).await)?;
        Ok((rows, total))
    }

    pub async fn trunk_soft_delete(&self, sid: &str) -> StoreResult<()> {
        let t = now();
        let n = on_db!(self, p => sqlx::query("UPDATE trunks SET deleted_at = $2, updated_at = $2 WHERE sid = $1 AND deleted_at IS NULL")
            .bind(sid).bind(t).execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            Err(StoreError::NotFound)
        } else {
            Ok(())
        }
    }
}
