//! Result deliveries: one row per agent target per finished communication.
//!
//! Status moves `new` → `delivering` (claimed by a delivery worker, with a token and a
//! lease) → `delivered`, or back to `new` with a later `next_attempt_at` after a failed
//! attempt, or `failed` after the last allowed attempt. A `delivering` row whose lease
//! expired (the worker died) is claimable again.

use chrono::{DateTime, Utc};

use super::{Backend, Store, StoreResult, now, on_db, store_row};

/// Prefix of result delivery sids.
pub const RESULT_DELIVERY_PREFIX: &str = "rdl";

crate::text_enum::text_enum!(
    "delivery status",
    /// Where a result delivery is (see the module doc).
    pub enum DeliveryStatus {
        /// Waiting for its next attempt (`next_attempt_at`).
        New = "new",
        /// Claimed by a delivery worker.
        Delivering = "delivering",
        /// The target answered 2xx.
        Delivered = "delivered",
        /// The last allowed attempt failed.
        Failed = "failed",
    }
);

store_row! {
    #[derive(Debug, Clone)]
    pub struct ResultDeliveryRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub account_sid: String,
        pub communication_sid: String,
        pub agent_sid: String,
        pub url: String,
        pub status: DeliveryStatus,
        pub attempts: i64,
        pub last_status_code: Option<i64>,
        pub last_error: Option<String>,
        pub next_attempt_at: DateTime<Utc>,
        pub claim_token: Option<String>,
        pub claimed_until: Option<DateTime<Utc>>,
        pub delivered_at: Option<DateTime<Utc>>,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
    }
}

const COLS: &str = "sid, tenant_sid, account_sid, communication_sid, agent_sid, url, status, attempts, last_status_code, \
    last_error, next_attempt_at, claim_token, claimed_until, delivered_at, created_at, updated_at";

/// The outcome of one delivery attempt.
#[derive(Debug, Clone)]
pub enum AttemptOutcome {
    Delivered {
        status_code: i64,
    },
    /// Try again at `next_attempt_at`.
    Retry {
        status_code: Option<i64>,
        error: String,
        next_attempt_at: DateTime<Utc>,
    },
    /// Give up.
    Failed {
        status_code: Option<i64>,
        error: String,
    },
}

impl Store {
    /// Claims up to `limit` due deliveries (`new` and due, or `delivering` with an expired lease).
    pub async fn result_delivery_claim_due(
        &self,
        token: &str,
        until: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<ResultDeliveryRecord>> {
        let t = now();
        let lock = match self.backend() {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        let due = "((status = 'new' AND next_attempt_at <= $3) OR (status = 'delivering' AND claimed_until < $3))";
        let sql = format!(
            "UPDATE result_deliveries SET status = 'delivering', claim_token = $1, claimed_until = $2, updated_at = $3 \
             WHERE {due} AND sid IN (SELECT sid FROM result_deliveries WHERE {due} ORDER BY next_attempt_at ASC, sid ASC LIMIT $4{lock}) \
             RETURNING {COLS}"
        );
        Ok(
            on_db!(self, p => sqlx::query_as::<_, ResultDeliveryRecord>(sqlx::AssertSqlSafe(sql.clone()))
            .bind(token).bind(until).bind(t).bind(limit).fetch_all(p).await)?,
        )
    }

    /// Records an attempt's outcome. False when the claim was lost.
    pub async fn result_delivery_record(
        &self,
        sid: &str,
        token: &str,
        outcome: &AttemptOutcome,
    ) -> StoreResult<bool> {
        let t = now();
        let (status, code, error, next, delivered_at) = match outcome {
            AttemptOutcome::Delivered { status_code } => (
                DeliveryStatus::Delivered,
                Some(*status_code),
                None,
                t,
                Some(t),
            ),
            AttemptOutcome::Retry {
                status_code,
                error,
                next_attempt_at,
            } => (
                DeliveryStatus::New,
                *status_code,
                Some(error.clone()),
                *next_attempt_at,
                None,
            ),
            AttemptOutcome::Failed { status_code, error } => (
                DeliveryStatus::Failed,
                *status_code,
                Some(error.clone()),
                t,
                None,
            ),
        };
        Ok(
            on_db!(self, p => sqlx::query("UPDATE result_deliveries SET status = $3, attempts = attempts + 1, last_status_code = $4, \
            last_error = $5, next_attempt_at = $6, delivered_at = $7, claim_token = NULL, claimed_until = NULL, updated_at = $8 \
            WHERE sid = $1 AND claim_token = $2")
            .bind(sid).bind(token).bind(status).bind(code).bind(error).bind(next).bind(delivered_at).bind(t)
            .execute(p).await.map(|r| r.rows_affected() == 1))?,
        )
    }

    /// A page of an account's deliveries, newest first, optionally one status.
    pub async fn result_delivery_list(
        &self,
        account_sid: &str,
        status: Option<DeliveryStatus>,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<ResultDeliveryRecord>, i64)> {
        let filter = if status.is_some() {
            " AND status = $2"
        } else {
            " AND $2 = $2"
        };
        let st = status.map_or("", DeliveryStatus::as_str);
        let count =
            format!("SELECT COUNT(*) FROM result_deliveries WHERE account_sid = $1{filter}");
        let sql = format!(
            "SELECT {COLS} FROM result_deliveries WHERE account_sid = $1{filter} ORDER BY created_at DESC, sid DESC LIMIT $3 OFFSET $4"
        );
        let total: i64 = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(count.clone())).bind(account_sid).bind(st).fetch_one(p).await)?;
        let rows = on_db!(self, p => sqlx::query_as::<_, ResultDeliveryRecord>(sqlx::AssertSqlSafe(sql.clone()))
            .bind(account_sid).bind(st).bind(limit).bind(offset).fetch_all(p).await)?;
        Ok((rows, total))
    }
}
