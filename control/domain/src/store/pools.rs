//! Number pools of an account: a named set of numbers an agent dials through (the
//! dialer picks one active member per call, see [`crate::communication::caller`]).

use super::BeginWrite;
use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, now, on_db, store_row};

store_row! {
    #[derive(Debug, Clone)]
    pub struct PoolRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub account_sid: String,
        pub name: String,
        pub status: String,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
    }
}

impl PoolRecord {
    pub fn is_active(&self) -> bool {
        self.status == "active"
    }
}

const COLS: &str = "sid, tenant_sid, account_sid, name, status, created_at, updated_at";

impl Store {
    /// `Unique` when the account already has a pool of that name.
    pub async fn pool_create(
        &self,
        sid: &str,
        tenant_sid: &str,
        account_sid: &str,
        name: &str,
        status: &str,
    ) -> StoreResult<PoolRecord> {
        on_db!(self, p => sqlx::query("INSERT INTO number_pools (sid, tenant_sid, account_sid, name, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)")
            .bind(sid).bind(tenant_sid).bind(account_sid).bind(name).bind(status).bind(now()).execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.pool_get(sid).await?.ok_or(StoreError::NotFound)
    }

    pub async fn pool_get(&self, sid: &str) -> StoreResult<Option<PoolRecord>> {
        let sql = format!("SELECT {COLS} FROM number_pools WHERE sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, PoolRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// The pools of `account_sid` among `sids` (for `include=pool`).
    pub async fn pools_of_account(
        &self,
        account_sid: &str,
        sids: &[String],
    ) -> StoreResult<Vec<PoolRecord>> {
        if sids.is_empty() {
            return Ok(Vec::new());
        }
        let marks: Vec<String> = (0..sids.len()).map(|i| format!("${}", i + 2)).collect();
        let sql = format!(
            "SELECT {COLS} FROM number_pools WHERE account_sid = $1 AND sid IN ({})",
            marks.join(", ")
        );
        Ok(on_db!(self, p => {
            let mut q = sqlx::query_as::<_, PoolRecord>(sqlx::AssertSqlSafe(sql.clone())).bind(account_sid);
            for s in sids {
                q = q.bind(s);
            }
            q.fetch_all(p).await
        })?)
    }

    /// A page of an account's pools (optionally one status), newest first.
    pub async fn pool_list(
        &self,
        account_sid: &str,
        status: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<PoolRecord>, i64)> {
        let filter = "account_sid = $1 AND ($2 IS NULL OR status = $2)";
        let sql = format!(
            "SELECT {COLS} FROM number_pools WHERE {filter} ORDER BY created_at DESC, sid DESC LIMIT $3 OFFSET $4"
        );
        let count = format!("SELECT COUNT(*) FROM number_pools WHERE {filter}");
        let status = status.map(str::to_string);
        let rows = on_db!(self, p => sqlx::query_as::<_, PoolRecord>(sqlx::AssertSqlSafe(sql)).bind(account_sid).bind(&status).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(count)).bind(account_sid).bind(&status).fetch_one(p).await)?;
        Ok((rows, total))
    }

    /// Partial update (`None` keeps the value); `Unique` on a taken name.
    pub async fn pool_update(
        &self,
        sid: &str,
        name: Option<&str>,
        status: Option<&str>,
    ) -> StoreResult<PoolRecord> {
        let n = on_db!(self, p => sqlx::query("UPDATE number_pools SET name = COALESCE($2, name), status = COALESCE($3, status), updated_at = $4 WHERE sid = $1")
            .bind(sid).bind(name).bind(status).bind(now()).execute(p).await.map(|r| r.rows_affected()))
        .map_err(StoreError::from_write)?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        self.pool_get(sid).await?.ok_or(StoreError::NotFound)
    }

    /// Deletes a pool unless an agent references it (`Conflict` carries nothing: the
    /// caller lists the agents with [`Store::agents_referencing`]); its numbers are
    /// detached (pool_sid becomes null), all in one transaction.
    pub async fn pool_delete(&self, sid: &str) -> StoreResult<()> {
        let t = now();
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let refs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM agents WHERE number_pool_sid = $1")
                .bind(sid).fetch_one(&mut *tx).await?;
            if refs > 0 {
                return Err(StoreError::Conflict("referenced by agents".into()));
            }
            sqlx::query("UPDATE numbers SET pool_sid = NULL, updated_at = $2 WHERE pool_sid = $1")
                .bind(sid).bind(t).execute(&mut *tx).await?;
            let n = sqlx::query("DELETE FROM number_pools WHERE sid = $1").bind(sid).execute(&mut *tx).await?.rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            tx.commit().await?;
            Ok(())
        }.await)
    }
}
