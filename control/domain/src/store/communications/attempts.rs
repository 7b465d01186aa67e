//! The attempts of a communication: one row per dial of an outbound communication, written
//! in the same transaction as the call's end ([`super::CallWrite::Finish`]), so a crash
//! never keeps an end without its attempt or an attempt without its end.

use chrono::{DateTime, Utc};

use crate::store::{Store, StoreResult, on_db, store_row};

store_row! {
    /// One dial of a communication (`GET /v1/communication/{id}/attempt`, and the
    /// `attempts` of its result delivery).
    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    pub struct CommunicationAttempt {
        /// 1 for the first dial.
        pub n: i64,
        /// When the INVITE was sent (None when the call failed before it).
        pub started_at: Option<DateTime<Utc>>,
        pub ended_at: DateTime<Utc>,
        pub from_number: String,
        pub trunk: Option<String>,
        /// The final SIP status of the INVITE.
        pub sip_code: Option<i64>,
        /// `answered`, `busy`, `no_answer`, `rejected`, `failed`, `canceled`.
        pub call_status: Option<String>,
        pub end_reason: Option<String>,
        /// The answering-machine detector's verdict (`human`, `machine`), when it ran.
        pub amd: Option<String>,
        /// How the attempt ended as the communication's strategy sees it (`busy`,
        /// `no_answer`, `failed`, `voicemail`, `dropped`, `declined`, `opted_out`,
        /// `completed`, `canceled`).
        pub outcome: Option<String>,
    }
}

const COLS: &str =
    "n, started_at, ended_at, from_number, trunk, sip_code, call_status, end_reason, amd, outcome";

impl Store {
    /// A page of a communication's attempts, oldest first, and their count.
    pub async fn communication_attempts(
        &self,
        communication_sid: &str,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<CommunicationAttempt>, i64)> {
        let sql = format!(
            "SELECT {COLS} FROM communication_attempts WHERE communication_sid = $1 ORDER BY n ASC LIMIT $2 OFFSET $3"
        );
        let rows = on_db!(self, p => sqlx::query_as::<_, CommunicationAttempt>(sqlx::AssertSqlSafe(sql)).bind(communication_sid).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar("SELECT COUNT(*) FROM communication_attempts WHERE communication_sid = $1")
            .bind(communication_sid).fetch_one(p).await)?;
        Ok((rows, total))
    }

    /// Every attempt of a communication, oldest first (the dialer's policy input and the
    /// result delivery's `attempts`).
    pub async fn communication_attempts_all(
        &self,
        communication_sid: &str,
    ) -> StoreResult<Vec<CommunicationAttempt>> {
        Ok(self
            .communication_attempts(communication_sid, i64::MAX / 2, 0)
            .await?
            .0)
    }

    /// When the account dialled `recipient` since `since` (every communication and agent),
    /// for a strategy's frequency cap.
    pub async fn recipient_dials_since(
        &self,
        account_sid: &str,
        recipient: &str,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<DateTime<Utc>>> {
        Ok(on_db!(self, p => sqlx::query_scalar::<_, DateTime<Utc>>(
            "SELECT COALESCE(started_at, ended_at) FROM communication_attempts WHERE account_sid = $1 AND recipient = $2 AND ended_at >= $3")
            .bind(account_sid).bind(recipient).bind(since).fetch_all(p).await)?)
    }

    /// The from-number of the account's latest attempt to `recipient`, for the sticky
    /// caller ID of a pool.
    pub async fn recipient_last_from_number(
        &self,
        account_sid: &str,
        recipient: &str,
    ) -> StoreResult<Option<String>> {
        Ok(on_db!(self, p => sqlx::query_scalar::<_, String>(
            "SELECT from_number FROM communication_attempts WHERE account_sid = $1 AND recipient = $2 AND from_number <> '' \
             ORDER BY ended_at DESC LIMIT 1")
            .bind(account_sid).bind(recipient).fetch_optional(p).await)?)
    }
}
