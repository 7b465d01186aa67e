//! The do-not-call list of an account (docs/strategies.md): E.164 numbers its calls never
//! dial. Numbers are stored normalised ([`crate::usecases::normalize_e164`]).

use super::BeginWrite;
use chrono::{DateTime, Utc};

use super::{Store, StoreResult, now, on_db, store_row};

/// The `source` of an entry an in-call opt-out added (the API's are `api` and `import`).
pub const SOURCE_OPT_OUT: &str = "opt_out";

store_row! {
    #[derive(Debug, Clone)]
    pub struct DoNotCallRecord {
        pub number: String,
        /// How it was added: `api`, `import` or `opt_out`.
        pub source: String,
        pub created_at: DateTime<Utc>,
    }
}

impl Store {
    /// Adds `numbers` (already normalised) in one transaction; a number already listed
    /// keeps its entry. Returns how many were new.
    pub async fn do_not_call_add(
        &self,
        tenant_sid: &str,
        account_sid: &str,
        numbers: &[String],
        source: &str,
    ) -> StoreResult<u64> {
        let t = now();
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let mut added = 0;
            for n in numbers {
                added += sqlx::query("INSERT INTO do_not_call (account_sid, tenant_sid, number, source, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (account_sid, number) DO NOTHING")
                    .bind(account_sid).bind(tenant_sid).bind(n).bind(source).bind(t)
                    .execute(&mut *tx).await?.rows_affected();
            }
            tx.commit().await?;
            Ok(added)
        }.await)
    }

    /// Removes a number; false when it was not listed.
    pub async fn do_not_call_remove(&self, account_sid: &str, number: &str) -> StoreResult<bool> {
        let n = on_db!(self, p => sqlx::query("DELETE FROM do_not_call WHERE account_sid = $1 AND number = $2")
            .bind(account_sid).bind(number).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n > 0)
    }

    /// Whether `number` (normalised) is on the account's list.
    pub async fn do_not_call_contains(&self, account_sid: &str, number: &str) -> StoreResult<bool> {
        let n: i64 = on_db!(self, p => sqlx::query_scalar("SELECT COUNT(*) FROM do_not_call WHERE account_sid = $1 AND number = $2")
            .bind(account_sid).bind(number).fetch_one(p).await)?;
        Ok(n > 0)
    }

    /// One listed number of the account.
    pub async fn do_not_call_get(
        &self,
        account_sid: &str,
        number: &str,
    ) -> StoreResult<Option<DoNotCallRecord>> {
        Ok(
            on_db!(self, p => sqlx::query_as::<_, DoNotCallRecord>("SELECT number, source, created_at FROM do_not_call WHERE account_sid = $1 AND number = $2")
            .bind(account_sid).bind(number).fetch_optional(p).await)?,
        )
    }

    /// A page of the account's list, newest first.
    pub async fn do_not_call_list(
        &self,
        account_sid: &str,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<DoNotCallRecord>, i64)> {
        let rows = on_db!(self, p => sqlx::query_as::<_, DoNotCallRecord>("SELECT number, source, created_at FROM do_not_call WHERE account_sid = $1 ORDER BY created_at DESC, number ASC LIMIT $2 OFFSET $3")
            .bind(account_sid).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar("SELECT COUNT(*) FROM do_not_call WHERE account_sid = $1").bind(account_sid).fetch_one(p).await)?;
        Ok((rows, total))
    }
}
