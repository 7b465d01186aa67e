//! Legacy campaign family: account tokens for HTTP Basic and legacy profiles.

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, now, on_db, store_row};

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
