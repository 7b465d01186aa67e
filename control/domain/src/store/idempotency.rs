//! Idempotency keys (docs/strategies.md, "Idempotent dispatch"): the first request an
//! account sent with a key, by a hash of what it asked, and what it created.

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, on_db, store_row};

store_row! {
    #[derive(Debug, Clone)]
    pub struct IdempotencyRecord {
        pub request_hash: String,
        /// What the first request created; None while it runs.
        pub resource_sid: Option<String>,
        pub created_at: DateTime<Utc>,
    }
}

/// What reserving a key found.
#[derive(Debug, Clone)]
pub enum Reservation {
    /// The key is this request's now: run it, then [`Store::idempotency_complete`] (or
    /// [`Store::idempotency_release`] when it fails).
    Reserved,
    /// A request within the window holds the key.
    Held(IdempotencyRecord),
}

impl Store {
    /// Reserves `key` of `account_sid` for a request with `hash` at `now` (expired keys
    /// are dropped first with [`Store::idempotency_prune`]).
    pub async fn idempotency_reserve(
        &self,
        account_sid: &str,
        key: &str,
        hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Reservation> {
        let ins = on_db!(self, p => sqlx::query("INSERT INTO idempotency_keys (account_sid, idem_key, request_hash, resource_sid, created_at) VALUES ($1, $2, $3, NULL, $4)")
            .bind(account_sid).bind(key).bind(hash).bind(now).execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write);
        match ins {
            Ok(()) => Ok(Reservation::Reserved),
            Err(StoreError::Unique) => {
                let held = on_db!(self, p => sqlx::query_as::<_, IdempotencyRecord>("SELECT request_hash, resource_sid, created_at FROM idempotency_keys WHERE account_sid = $1 AND idem_key = $2")
                    .bind(account_sid).bind(key).fetch_optional(p).await)?;
                match held {
                    Some(h) => Ok(Reservation::Held(h)),
                    // Released between the insert and the read: the caller may try again.
                    None => Err(StoreError::Conflict(
                        "idempotency key released concurrently".into(),
                    )),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Records what the reserving request created.
    pub async fn idempotency_complete(
        &self,
        account_sid: &str,
        key: &str,
        resource_sid: &str,
    ) -> StoreResult<()> {
        on_db!(self, p => sqlx::query("UPDATE idempotency_keys SET resource_sid = $3 WHERE account_sid = $1 AND idem_key = $2")
            .bind(account_sid).bind(key).bind(resource_sid).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// Frees a key whose request failed (it created nothing, so a retry may run).
    pub async fn idempotency_release(&self, account_sid: &str, key: &str) -> StoreResult<()> {
        on_db!(self, p => sqlx::query("DELETE FROM idempotency_keys WHERE account_sid = $1 AND idem_key = $2 AND resource_sid IS NULL")
            .bind(account_sid).bind(key).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// Drops keys older than `before` (the window has passed).
    pub async fn idempotency_prune(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        Ok(
            on_db!(self, p => sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
            .bind(before).execute(p).await.map(|r| r.rows_affected()))?,
        )
    }
}
