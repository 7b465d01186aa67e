//! Failed-login counters shared by every node on the database (see `auth::throttle`).

use chrono::{DateTime, Utc};

use super::{Store, StoreResult, on_db};

impl Store {
    /// Charges one failure to `key` unless it is locked: `max` failures in the window
    /// that opened at its first failure and is still open at `now` (a window opened at or
    /// before `expired` has passed, and the key starts again from one). Returns None when
    /// charged, else when its window opened (the key stays locked until that plus the
    /// window). One statement: concurrent charges on any node never overtake `max`.
    pub async fn login_failure_charge(
        &self,
        key: &str,
        max: i64,
        now: DateTime<Utc>,
        expired: DateTime<Utc>,
    ) -> StoreResult<Option<DateTime<Utc>>> {
        let charged: Option<i64> = on_db!(self, p => sqlx::query_scalar(
            "INSERT INTO login_failures (key, failures, since) VALUES ($1, 1, $2) \
             ON CONFLICT (key) DO UPDATE SET \
             failures = CASE WHEN login_failures.since <= $3 THEN 1 ELSE login_failures.failures + 1 END, \
             since = CASE WHEN login_failures.since <= $3 THEN excluded.since ELSE login_failures.since END \
             WHERE login_failures.since <= $3 OR login_failures.failures < $4 \
             RETURNING failures")
            .bind(key).bind(now).bind(expired).bind(max).fetch_optional(p).await)?;
        if charged.is_some() {
            return Ok(None);
        }
        Ok(
            on_db!(self, p => sqlx::query_scalar("SELECT since FROM login_failures WHERE key = $1")
            .bind(key).fetch_optional(p).await)?,
        )
    }

    /// Takes one failure back from `key` (a charged attempt that logged in).
    pub async fn login_failure_refund(&self, key: &str) -> StoreResult<()> {
        on_db!(self, p => sqlx::query("UPDATE login_failures SET failures = failures - 1 WHERE key = $1 AND failures > 0")
            .bind(key).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// Forgets `key`'s failures.
    pub async fn login_failure_clear(&self, key: &str) -> StoreResult<()> {
        on_db!(self, p => sqlx::query("DELETE FROM login_failures WHERE key = $1")
            .bind(key).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// Deletes the keys whose window opened at or before `expired`.
    pub async fn login_failures_forget(&self, expired: DateTime<Utc>) -> StoreResult<u64> {
        Ok(
            on_db!(self, p => sqlx::query("DELETE FROM login_failures WHERE since <= $1")
            .bind(expired).execute(p).await.map(|r| r.rows_affected()))?,
        )
    }

    /// Keys counted now, for tests and operators.
    pub async fn login_failure_keys(&self) -> StoreResult<i64> {
        Ok(
            on_db!(self, p => sqlx::query_scalar("SELECT COUNT(*) FROM login_failures").fetch_one(p).await)?,
        )
    }
}
