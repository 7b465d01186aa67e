//! Legacy campaign flow: contacts of a campaign, attempts (launches) and the calls an
//! attempt made. A campaign is an agent (see `legacy`); an attempt's calls are ordinary
//! communications, written with the same statement as every other
//! ([`super::communications::insert_communications`]) and linked to their attempt and
//! contact in `legacy_attempt_calls` (migration 0350). A contact's calls are numbered by
//! `dial` (1, 2, … as later attempts redial it; unique per contact, migration 0360).

use super::BeginWrite;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};

use super::{
    CommunicationRecord, FromPrefixed, NewCommunication, Store, StoreError, StoreResult,
    communications::{COLS as COMMUNICATION_COLS, INSERT_ROWS, insert_communications},
    filter::Where,
    now, on_db, prefixed_columns, store_row,
};
use crate::communication::{CommunicationStatus, SqlList};

store_row! {
    /// A contact of a campaign, with the attempt that dialled it last (if one did).
    #[derive(Debug, Clone)]
    pub struct LegacyContactRecord {
        pub sid: String,
        pub account_sid: String,
        pub campaign_sid: String,
        pub phone: String,
        /// JSON object text: the contact's variables (a flat map of scalars).
        pub variables: String,
        /// The attempt that dialled the contact last; "" before one did.
        pub attempt_sid: String,
        /// The communication that attempt made; "" before.
        pub communication_sid: String,
        /// Calls made to the contact (0 before the first attempt; more when redialled).
        pub dial_count: i64,
        pub creation_time: DateTime<Utc>,
    }
}

/// A contact to add.
#[derive(Debug, Clone)]
pub struct NewContact {
    pub sid: String,
    pub phone: String,
    /// JSON object text.
    pub variables: String,
}

/// A contact with its latest call (the link with the highest `dial`).
const CONTACT_SELECT: &str = "SELECT c.sid, c.account_sid, c.campaign_sid, c.phone, c.variables, \
    COALESCE(l.attempt_sid, '') AS attempt_sid, COALESCE(l.communication_sid, '') AS communication_sid, \
    COALESCE(l.dial, 0) AS dial_count, c.creation_time \
    FROM legacy_contacts c LEFT JOIN legacy_attempt_calls l ON l.contact_sid = c.sid \
    AND l.dial = (SELECT MAX(x.dial) FROM legacy_attempt_calls x WHERE x.contact_sid = c.sid)";

/// Which contacts an attempt dials besides those never dialled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redial {
    /// None: only contacts no attempt dialled.
    None,
    /// Also contacts whose latest call ended without an answer.
    Failed,
    /// Also every contact whose latest call has ended.
    All,
}

/// A call an attempt makes: the contact, its dial number (the contact's calls so far + 1)
/// and the communication.
#[derive(Debug, Clone)]
pub struct NewAttemptCall {
    pub contact_sid: String,
    pub dial: i64,
    pub communication: NewCommunication,
}

store_row! {
    /// An attempt with the counts its status is derived from.
    #[derive(Debug, Clone)]
    pub struct LegacyAttemptRecord {
        pub sid: String,
        pub account_sid: String,
        pub campaign_sid: String,
        /// When its calls are due (the creation time for an instant attempt).
        pub scheduled_at: DateTime<Utc>,
        pub delayed: bool,
        pub canceled_at: Option<DateTime<Utc>>,
        pub creation_time: DateTime<Utc>,
        pub update_time: DateTime<Utc>,
        /// Calls the attempt made (one per contact).
        pub contact_count: i64,
        /// The dispatch batch of its calls (`bat_…`); "" for an attempt made before batches.
        pub batch_sid: String,
        /// Those of its calls not yet final (`new`, `queued`, `dialing`, `in_progress`).
        pub open_count: i64,
    }
}

/// An attempt to create.
#[derive(Debug, Clone)]
pub struct NewAttempt {
    pub sid: String,
    pub tenant_sid: String,
    pub account_sid: String,
    pub campaign_sid: String,
    pub scheduled_at: DateTime<Utc>,
    pub delayed: bool,
    /// The dispatch batch its calls carry.
    pub batch_sid: String,
}

/// The select of attempts with their contact and open call counts.
static ATTEMPT_SELECT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT a.sid, a.account_sid, a.campaign_sid, a.scheduled_at, a.delayed, a.canceled_at, \
    a.creation_time, a.update_time, \
    (SELECT COUNT(*) FROM legacy_attempt_calls l WHERE l.attempt_sid = a.sid) AS contact_count, \
    (SELECT COUNT(*) FROM legacy_attempt_calls l JOIN communications m ON m.sid = l.communication_sid \
     WHERE l.attempt_sid = a.sid AND m.communication_status IN ({OPEN})) AS open_count, \
    COALESCE(a.batch_sid, '') AS batch_sid \
    FROM legacy_attempts a",
        OPEN = SqlList(CommunicationStatus::OPEN)
    )
});

/// One call of an attempt: the contact it dialled and its communication.
#[derive(Debug, Clone)]
pub struct AttemptCall {
    pub contact_sid: String,
    pub communication: CommunicationRecord,
}

/// What [`Store::legacy_contacts_add`] did.
#[derive(Debug)]
pub enum ContactsAdded {
    /// The contacts, as stored.
    Added(Vec<LegacyContactRecord>),
    /// Nothing: with them the campaign would hold `total` contacts, more than its limit.
    OverLimit { total: i64 },
}

impl Store {
    /// Adds contacts to a campaign of `account_sid`, all or none, so long as the campaign
    /// then holds at most `max_contacts`. The count is taken after the insert, in the
    /// same transaction: on SQLite, where the insert holds the write lock, the limit is
    /// exact; on PostgreSQL two concurrent requests can each pass it by what the other adds.
    pub async fn legacy_contacts_add(
        &self,
        tenant_sid: &str,
        account_sid: &str,
        campaign_sid: &str,
        contacts: &[NewContact],
        max_contacts: i64,
    ) -> StoreResult<ContactsAdded> {
        let t = now();
        let total = on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            for chunk in contacts.chunks(INSERT_ROWS) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO legacy_contacts (sid, tenant_sid, account_sid, campaign_sid, phone, variables, creation_time) ");
                q.push_values(chunk, |mut b, c| {
                    b.push_bind(&c.sid).push_bind(tenant_sid).push_bind(account_sid).push_bind(campaign_sid)
                        .push_bind(&c.phone).push_bind(&c.variables).push_bind(t);
                });
                q.build().execute(&mut *tx).await?;
            }
            let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM legacy_contacts WHERE campaign_sid = $1 AND account_sid = $2")
                .bind(campaign_sid).bind(account_sid).fetch_one(&mut *tx).await?;
            if total > max_contacts {
                tx.rollback().await?;
            } else {
                tx.commit().await?;
            }
            Ok::<_, sqlx::Error>(total)
        }.await)
        .map_err(StoreError::from_write)?;
        if total > max_contacts {
            return Ok(ContactsAdded::OverLimit { total });
        }
        Ok(ContactsAdded::Added(
            contacts
                .iter()
                .map(|c| LegacyContactRecord {
                    sid: c.sid.clone(),
                    account_sid: account_sid.to_string(),
                    campaign_sid: campaign_sid.to_string(),
                    phone: c.phone.clone(),
                    variables: c.variables.clone(),
                    attempt_sid: String::new(),
                    communication_sid: String::new(),
                    dial_count: 0,
                    creation_time: t,
                })
                .collect(),
        ))
    }

    /// A page of a campaign's contacts, oldest first; `phone` filters exactly.
    pub async fn legacy_contact_list(
        &self,
        account_sid: &str,
        campaign_sid: &str,
        phone: Option<&String>,
        limit: i64,
        offset: i64,
    ) -> StoreResult<Vec<LegacyContactRecord>> {
        let mut w = Where::new("c.account_sid", account_sid);
        w.eq("c.campaign_sid", Some(&campaign_sid.to_string()));
        w.eq("c.phone", phone);
        w.page(
            self,
            CONTACT_SELECT,
            "c.creation_time ASC, c.sid ASC",
            limit,
            offset,
        )
        .await
    }

    /// The contacts of a campaign an attempt dials, oldest first: those no attempt has
    /// dialled, and with `redial` those whose latest call ended (`All`) or ended without an
    /// answer (`Failed`). A contact whose latest call has not ended is never taken.
    pub async fn legacy_contacts_to_dial(
        &self,
        account_sid: &str,
        campaign_sid: &str,
        redial: Redial,
    ) -> StoreResult<Vec<LegacyContactRecord>> {
        let ended = format!(
            "m.communication_status IN ({})",
            SqlList(CommunicationStatus::FINAL)
        );
        let again = match redial {
            Redial::None => "1 = 0".to_string(),
            Redial::Failed => format!("{ended} AND m.answered_at IS NULL"),
            Redial::All => ended,
        };
        let sql = format!(
            "{CONTACT_SELECT} LEFT JOIN communications m ON m.sid = l.communication_sid \
             WHERE c.account_sid = $1 AND c.campaign_sid = $2 AND (l.contact_sid IS NULL OR ({again})) \
             ORDER BY c.creation_time ASC, c.sid ASC"
        );
        Ok(
            on_db!(self, p => sqlx::query_as::<_, LegacyContactRecord>(sqlx::AssertSqlSafe(sql)).bind(account_sid).bind(campaign_sid).fetch_all(p).await)?,
        )
    }

    /// Deletes a contact of a campaign of `account_sid` (NotFound for any other).
    pub async fn legacy_contact_delete(
        &self,
        account_sid: &str,
        campaign_sid: &str,
        sid: &str,
    ) -> StoreResult<()> {
        let n = on_db!(self, p => sqlx::query("DELETE FROM legacy_contacts WHERE sid = $1 AND campaign_sid = $2 AND account_sid = $3")
            .bind(sid).bind(campaign_sid).bind(account_sid).execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            Err(StoreError::NotFound)
        } else {
            Ok(())
        }
    }

    /// Creates an attempt with its calls in one transaction: each communication is
    /// inserted and linked to the attempt and to its contact under its dial number.
    /// `Unique` when another attempt took one of the contacts (that dial number) first
    /// (nothing is written then).
    pub async fn legacy_attempt_create(
        &self,
        a: &NewAttempt,
        calls: &[NewAttemptCall],
    ) -> StoreResult<()> {
        let t = now();
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            sqlx::query("INSERT INTO legacy_attempts (sid, tenant_sid, account_sid, campaign_sid, scheduled_at, delayed, creation_time, update_time, batch_sid) \
                VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8)")
                .bind(&a.sid).bind(&a.tenant_sid).bind(&a.account_sid).bind(&a.campaign_sid).bind(a.scheduled_at).bind(a.delayed).bind(t)
                .bind(&a.batch_sid)
                .execute(&mut *tx).await?;
            let communications: Vec<&NewCommunication> = calls.iter().map(|c| &c.communication).collect();
            insert_communications!(&mut *tx, communications, t)?;
            for chunk in calls.chunks(INSERT_ROWS) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO legacy_attempt_calls (communication_sid, tenant_sid, account_sid, attempt_sid, contact_sid, dial) ");
                q.push_values(chunk, |mut b, call| {
                    b.push_bind(&call.communication.sid).push_bind(&a.tenant_sid).push_bind(&a.account_sid)
                        .push_bind(&a.sid).push_bind(&call.contact_sid).push_bind(call.dial);
                });
                q.build().execute(&mut *tx).await?;
            }
            tx.commit().await
        }.await)
        .map_err(StoreError::from_write)
    }

    /// An attempt of a campaign of `account_sid` (None for any other).
    pub async fn legacy_attempt_get(
        &self,
        account_sid: &str,
        campaign_sid: &str,
        sid: &str,
    ) -> StoreResult<Option<LegacyAttemptRecord>> {
        let sql = format!(
            "{} WHERE a.sid = $1 AND a.campaign_sid = $2 AND a.account_sid = $3",
            *ATTEMPT_SELECT
        );
        Ok(
            on_db!(self, p => sqlx::query_as::<_, LegacyAttemptRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).bind(campaign_sid).bind(account_sid).fetch_optional(p).await)?,
        )
    }

    /// A page of a campaign's attempts, newest first.
    pub async fn legacy_attempt_list(
        &self,
        account_sid: &str,
        campaign_sid: &str,
        limit: i64,
        offset: i64,
    ) -> StoreResult<Vec<LegacyAttemptRecord>> {
        let mut w = Where::new("a.account_sid", account_sid);
        w.eq("a.campaign_sid", Some(&campaign_sid.to_string()));
        w.page(
            self,
            &ATTEMPT_SELECT,
            "a.creation_time DESC, a.sid DESC",
            limit,
            offset,
        )
        .await
    }

    /// Cancels an attempt of `account_sid`: marks it canceled and, in the same
    /// transaction, ends every call of it not yet claimed by a dialer (`new`, `queued`)
    /// as `canceled`. Returns the calls canceled; `Conflict` when the attempt was
    /// canceled already, `NotFound` when it is not the account's.
    pub async fn legacy_attempt_cancel(&self, account_sid: &str, sid: &str) -> StoreResult<u64> {
        let t = now();
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let exists: Option<Option<DateTime<Utc>>> = sqlx::query_scalar(
                "SELECT canceled_at FROM legacy_attempts WHERE sid = $1 AND account_sid = $2")
                .bind(sid).bind(account_sid).fetch_optional(&mut *tx).await?;
            match exists {
                None => return Err(StoreError::NotFound),
                Some(Some(_)) => return Err(StoreError::Conflict("attempt already canceled".into())),
                Some(None) => {}
            }
            let n = sqlx::query("UPDATE legacy_attempts SET canceled_at = $3, update_time = $3 \
                WHERE sid = $1 AND account_sid = $2 AND canceled_at IS NULL")
                .bind(sid).bind(account_sid).bind(t).execute(&mut *tx).await?.rows_affected();
            if n == 0 {
                return Err(StoreError::Conflict("attempt already canceled".into()));
            }
            let canceled = sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE communications SET communication_status = 'canceled', ended_at = $2, updated_at = $2 \
                WHERE communication_status IN ({}) \
                AND sid IN (SELECT communication_sid FROM legacy_attempt_calls WHERE attempt_sid = $1)", SqlList(CommunicationStatus::WAITING))))
                .bind(sid).bind(t).execute(&mut *tx).await?.rows_affected();
            tx.commit().await?;
            Ok(canceled)
        }.await)
    }

    /// The calls of an attempt of `account_sid`, oldest first, at most `limit` of them.
    pub async fn legacy_attempt_calls(
        &self,
        account_sid: &str,
        attempt_sid: &str,
        limit: i64,
    ) -> StoreResult<Vec<AttemptCall>> {
        let sql = format!(
            "SELECT l.contact_sid, {} FROM legacy_attempt_calls l JOIN communications m ON m.sid = l.communication_sid \
             WHERE l.attempt_sid = $1 AND l.account_sid = $2 ORDER BY m.created_at ASC, m.sid ASC LIMIT $3",
            prefixed_columns("m", COMMUNICATION_COLS, "m_")
        );
        Ok(on_db!(self, p => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(attempt_sid).bind(account_sid).bind(limit).fetch_all(p).await?;
            rows.iter()
                .map(|r| {
                    use sqlx::Row;
                    Ok(AttemptCall {
                        contact_sid: r.try_get("contact_sid")?,
                        communication: CommunicationRecord::from_prefixed(r, "m_")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
        })?)
    }

    /// How many calls an attempt of `account_sid` has.
    pub async fn legacy_attempt_call_count(
        &self,
        account_sid: &str,
        attempt_sid: &str,
    ) -> StoreResult<i64> {
        Ok(on_db!(self, p => sqlx::query_scalar(
            "SELECT COUNT(*) FROM legacy_attempt_calls WHERE attempt_sid = $1 AND account_sid = $2")
            .bind(attempt_sid).bind(account_sid).fetch_one(p).await)?)
    }
}
