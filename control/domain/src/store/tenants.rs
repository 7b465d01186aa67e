//! Tenants, their soft-delete cascade and the hard purge.

use super::BeginWrite;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, now, on_db, store_row};

store_row! {
    #[derive(Debug, Clone)]
    pub struct TenantRecord {
        pub sid: String,
        pub name: String,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
        pub deleted_at: Option<DateTime<Utc>>,
    }
}

/// Purges data a tenant's accounts own outside this database (for example classifiers
/// in the classifier service). Registered with [`Store::register_purger`]; a hard tenant
/// delete calls every purger for every account of the tenant inside the database
/// transaction that removes the subtree, and rolls that transaction back if any purger
/// fails, so a failed purge leaves the tenant untouched and the delete can be retried.
#[async_trait::async_trait]
pub trait TenantPurger: Send + Sync + std::fmt::Debug {
    /// A short name for logs and error messages.
    fn name(&self) -> &str;
    /// Removes everything this purger owns for `account_sid` of `tenant_sid`. Must be
    /// idempotent: a retried delete calls it again.
    async fn purge_account(&self, tenant_sid: &str, account_sid: &str) -> anyhow::Result<()>;
}

const COLS: &str = "sid, name, created_at, updated_at, deleted_at";

impl Store {
    /// Adds a purger consulted by every later hard tenant delete.
    pub fn register_purger(&self, purger: Arc<dyn TenantPurger>) {
        self.purgers.write().push(purger);
    }

    pub async fn tenant_create(&self, sid: &str, name: &str) -> StoreResult<TenantRecord> {
        let t = now();
        on_db!(self, p => sqlx::query("INSERT INTO tenants (sid, name, created_at, updated_at) VALUES ($1, $2, $3, $3)")
            .bind(sid).bind(name).bind(t).execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.tenant_get(sid).await?.ok_or(StoreError::NotFound)
    }

    /// A tenant by sid, including a soft-deleted one (check `deleted_at`).
    pub async fn tenant_get(&self, sid: &str) -> StoreResult<Option<TenantRecord>> {
        let sql = format!("SELECT {COLS} FROM tenants WHERE sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, TenantRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// A page of tenants in creation order and the total count.
    pub async fn tenant_list(
        &self,
        show_deleted: bool,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<TenantRecord>, i64)> {
        let filter = if show_deleted {
            ""
        } else {
            "WHERE deleted_at IS NULL"
        };
        let sql = format!(
            "SELECT {COLS} FROM tenants {filter} ORDER BY created_at ASC, sid ASC LIMIT $1 OFFSET $2"
        );
        let count = format!("SELECT COUNT(*) FROM tenants {filter}");
        let rows = on_db!(self, p => sqlx::query_as::<_, TenantRecord>(sqlx::AssertSqlSafe(sql)).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 =
            on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(count)).fetch_one(p).await)?;
        Ok((rows, total))
    }

    /// Soft-deletes a live tenant and, with the same timestamp, its live accounts and
    /// users, so [`Store::tenant_restore`] can undo exactly this cascade.
    pub async fn tenant_soft_delete(&self, sid: &str) -> StoreResult<()> {
        let t = now();
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let n = sqlx::query("UPDATE tenants SET deleted_at = $2, updated_at = $2 WHERE sid = $1 AND deleted_at IS NULL")
                .bind(sid).bind(t).execute(&mut *tx).await?.rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            sqlx::query("UPDATE accounts SET deleted_at = $2, updated_at = $2 WHERE tenant_sid = $1 AND deleted_at IS NULL")
                .bind(sid).bind(t).execute(&mut *tx).await?;
            sqlx::query("UPDATE users SET deleted_at = $2, updated_at = $2 WHERE tenant_sid = $1 AND deleted_at IS NULL")
                .bind(sid).bind(t).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(())
        }.await)
    }

    /// Undoes a soft delete: the tenant and the accounts and users its delete cascaded to
    /// (those carrying the tenant's deletion timestamp) come back. Rows deleted on their
    /// own before the tenant stay deleted. A user whose email was taken meanwhile makes
    /// the restore fail with `Unique` and nothing changes.
    pub async fn tenant_restore(&self, sid: &str) -> StoreResult<TenantRecord> {
        let Some(tenant) = self.tenant_get(sid).await? else {
            return Err(StoreError::NotFound);
        };
        let Some(deleted_at) = tenant.deleted_at else {
            return Ok(tenant);
        };
        let t = now();
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            sqlx::query("UPDATE tenants SET deleted_at = NULL, updated_at = $2 WHERE sid = $1")
                .bind(sid).bind(t).execute(&mut *tx).await?;
            sqlx::query("UPDATE accounts SET deleted_at = NULL, updated_at = $3 WHERE tenant_sid = $1 AND deleted_at = $2")
                .bind(sid).bind(deleted_at).bind(t).execute(&mut *tx).await?;
            sqlx::query("UPDATE users SET deleted_at = NULL, updated_at = $3 WHERE tenant_sid = $1 AND deleted_at = $2")
                .bind(sid).bind(deleted_at).bind(t).execute(&mut *tx).await.map_err(StoreError::from_write)?;
            tx.commit().await?;
            Ok::<_, StoreError>(())
        }.await)?;
        self.tenant_get(sid).await?.ok_or(StoreError::NotFound)
    }

    /// Permanently removes a tenant (live or soft-deleted) and its whole subtree. Every
    /// registered purger runs for every account first, inside the transaction that
    /// deletes the rows; if one fails the transaction rolls back and nothing is removed.
    pub async fn tenant_hard_delete(&self, sid: &str) -> StoreResult<()> {
        let purgers: Vec<Arc<dyn TenantPurger>> = self.purgers.read().clone();
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            // A write first: it takes SQLite's write lock at once (no upgrade deadlock later)
            // and tells us whether the tenant exists.
            let n = sqlx::query("UPDATE tenants SET updated_at = updated_at WHERE sid = $1")
                .bind(sid).execute(&mut *tx).await?.rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            let accounts: Vec<String> = sqlx::query_scalar("SELECT sid FROM accounts WHERE tenant_sid = $1 ORDER BY sid")
                .bind(sid).fetch_all(&mut *tx).await?;
            sqlx::query("DELETE FROM tenants WHERE sid = $1").bind(sid).execute(&mut *tx).await?;
            for purger in &purgers {
                for account in &accounts {
                    if let Err(e) = purger.purge_account(sid, account).await {
                        tx.rollback().await?;
                        return Err(StoreError::PurgeFailed(format!("{}: {e}", purger.name())));
                    }
                }
            }
            tx.commit().await?;
            Ok(())
        }.await)
    }
}
