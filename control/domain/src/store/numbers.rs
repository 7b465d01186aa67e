//! Phone numbers of an account: the caller ids agents dial from. A number may belong to
//! one pool and may name the trunk its outbound calls leave through.
//!
//! A phone number is active in one account at a time, across every tenant: the database
//! holds each number's [`routing_key`] and a unique index over the keys of active rows
//! (migration 0372), so inbound routing finds at most one number for a call.

use super::BeginWrite;
use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, filter::Where, now, on_db, store_row};

store_row! {
    #[derive(Debug, Clone)]
    pub struct NumberRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub account_sid: String,
        pub identifier: String,
        pub name: String,
        pub pool_sid: Option<String>,
        pub trunk: Option<String>,
        pub status: String,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
    }
}

impl NumberRecord {
    pub fn is_active(&self) -> bool {
        self.status == "active"
    }
}

/// A new number (fields checked by the caller).
#[derive(Debug, Clone)]
pub struct NewNumber {
    pub sid: String,
    pub tenant_sid: String,
    pub account_sid: String,
    pub identifier: String,
    pub name: String,
    pub pool_sid: Option<String>,
    pub trunk: Option<String>,
    pub status: String,
}

/// A partial update: `None` keeps the value; `Some(None)` clears a nullable column.
#[derive(Debug, Clone, Default)]
pub struct NumberPatch {
    pub identifier: Option<String>,
    pub name: Option<String>,
    pub pool_sid: Option<Option<String>>,
    pub trunk: Option<Option<String>>,
    pub status: Option<String>,
}

/// Filters, search and order of a number list (the API checks the enumerations).
#[derive(Debug, Clone, Default)]
pub struct NumberFilter {
    pub status: Option<String>,
    pub identifier: Option<String>,
    pub pool_sid: Option<String>,
    /// Columns (`identifier`, `name`) OR-searched for `query`, substring, case-insensitive.
    pub search_fields: Vec<&'static str>,
    pub query: Option<String>,
    /// `created_at`, `name` or `identifier`.
    pub order_by: &'static str,
    pub descending: bool,
}

const COLS: &str = "sid, tenant_sid, account_sid, identifier, name, pool_sid, trunk, status, created_at, updated_at";

/// The [`StoreError::Conflict`] of a write that would make a number active while another
/// row (of any account) holds the same [`routing_key`] active.
pub const NUMBER_ACTIVE_ELSEWHERE: &str = "an active number has this identifier";

/// The form numbers are compared in, by inbound routing and by the one-active-number rule:
/// the identifier less a leading `+` or, failing that, a leading international prefix `00`
/// (`+4930…`, `4930…` and `004930…` are one number). Identifiers are an optional `+` and
/// digits (the API checks them); a called number comes the same way from the SIP layer.
/// Migration 0372 computes the same key in SQL for rows written before it.
pub fn routing_key(identifier: &str) -> String {
    let digits = identifier.trim_start_matches('+');
    digits.strip_prefix("00").unwrap_or(digits).to_string()
}

impl Store {
    /// `Unique` when the account already has a number with that identifier;
    /// `Conflict(`[`NUMBER_ACTIVE_ELSEWHERE`]`)` when the new number is active and another
    /// number with its [`routing_key`] is active, in this or any other account.
    pub async fn number_create(&self, n: &NewNumber) -> StoreResult<NumberRecord> {
        let key = routing_key(&n.identifier);
        let written = on_db!(self, p => sqlx::query("INSERT INTO numbers (sid, tenant_sid, account_sid, identifier, routing_key, name, pool_sid, trunk, status, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)")
            .bind(&n.sid).bind(&n.tenant_sid).bind(&n.account_sid).bind(&n.identifier).bind(&key).bind(&n.name)
            .bind(&n.pool_sid).bind(&n.trunk).bind(&n.status).bind(now()).execute(p).await.map(|_| ()));
        if let Err(e) = written {
            return Err(self
                .number_write_error(e, &n.account_sid, &n.identifier, None)
                .await);
        }
        self.number_get(&n.sid).await?.ok_or(StoreError::NotFound)
    }

    /// Which rule a failed number write broke: a unique violation is `Unique` when the
    /// account has another number (not `sid`) spelled `identifier`, otherwise the
    /// one-active-number index: `Conflict(`[`NUMBER_ACTIVE_ELSEWHERE`]`)`. Asked after the
    /// fact so the answer does not depend on which index the database checked first.
    async fn number_write_error(
        &self,
        e: sqlx::Error,
        account_sid: &str,
        identifier: &str,
        sid: Option<&str>,
    ) -> StoreError {
        match StoreError::from_write(e) {
            StoreError::Unique => match self.number_by_identifier(account_sid, identifier).await {
                Ok(Some(same)) if Some(same.sid.as_str()) != sid => StoreError::Unique,
                Ok(_) => StoreError::Conflict(NUMBER_ACTIVE_ELSEWHERE.into()),
                Err(e) => e,
            },
            other => other,
        }
    }

    pub async fn number_get(&self, sid: &str) -> StoreResult<Option<NumberRecord>> {
        let sql = format!("SELECT {COLS} FROM numbers WHERE sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, NumberRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// The number of an account with this identifier (inbound routing, SMS sender checks).
    pub async fn number_by_identifier(
        &self,
        account_sid: &str,
        identifier: &str,
    ) -> StoreResult<Option<NumberRecord>> {
        let sql = format!("SELECT {COLS} FROM numbers WHERE account_sid = $1 AND identifier = $2");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, NumberRecord>(sqlx::AssertSqlSafe(sql)).bind(account_sid).bind(identifier).fetch_optional(p).await)?,
        )
    }

    /// A page of an account's numbers matching `f`, with the total.
    pub async fn number_list(
        &self,
        account_sid: &str,
        f: &NumberFilter,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<NumberRecord>, i64)> {
        let mut w = Where::new("account_sid", account_sid);
        w.eq("status", f.status.as_ref());
        w.eq("identifier", f.identifier.as_ref());
        w.eq("pool_sid", f.pool_sid.as_ref());
        w.search(f.query.as_deref(), &f.search_fields);
        let column = match f.order_by {
            "name" => "name",
            "identifier" => "identifier",
            _ => "created_at",
        };
        let dir = if f.descending { "DESC" } else { "ASC" };
        let select = format!("SELECT {COLS} FROM numbers");
        let order = format!("{column} {dir}, sid {dir}");
        let rows = w.page(self, &select, &order, limit, offset).await?;
        let total = w.count(self, "numbers").await?;
        Ok((rows, total))
    }

    /// Partial update; `Unique` on an identifier the account has on another number,
    /// `Conflict(`[`NUMBER_ACTIVE_ELSEWHERE`]`)` when the number would be active while
    /// another with its [`routing_key`] is (see [`Store::number_create`]).
    pub async fn number_update(&self, sid: &str, patch: &NumberPatch) -> StoreResult<NumberRecord> {
        let Some(cur) = self.number_get(sid).await? else {
            return Err(StoreError::NotFound);
        };
        let identifier = patch.identifier.clone().unwrap_or(cur.identifier);
        let name = patch.name.clone().unwrap_or(cur.name);
        let pool_sid = patch.pool_sid.clone().unwrap_or(cur.pool_sid);
        let trunk = patch.trunk.clone().unwrap_or(cur.trunk);
        let status = patch.status.clone().unwrap_or(cur.status);
        let key = routing_key(&identifier);
        let written = on_db!(self, p => sqlx::query("UPDATE numbers SET identifier = $2, routing_key = $3, name = $4, pool_sid = $5, trunk = $6, status = $7, updated_at = $8 WHERE sid = $1")
            .bind(sid).bind(&identifier).bind(&key).bind(&name).bind(&pool_sid).bind(&trunk).bind(&status).bind(now())
            .execute(p).await.map(|r| r.rows_affected()));
        let n = match written {
            Ok(n) => n,
            Err(e) => {
                return Err(self
                    .number_write_error(e, &cur.account_sid, &identifier, Some(sid))
                    .await);
            }
        };
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        self.number_get(sid).await?.ok_or(StoreError::NotFound)
    }

    /// Deletes a number unless an agent dials through it (`Conflict`).
    pub async fn number_delete(&self, sid: &str) -> StoreResult<()> {
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let refs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM agents WHERE number_sid = $1")
                .bind(sid).fetch_one(&mut *tx).await?;
            if refs > 0 {
                return Err(StoreError::Conflict("referenced by agents".into()));
            }
            let n = sqlx::query("DELETE FROM numbers WHERE sid = $1").bind(sid).execute(&mut *tx).await?.rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            tx.commit().await?;
            Ok(())
        }.await)
    }

    /// The active numbers of an active pool (empty when the pool is inactive or absent).
    pub async fn pool_active_numbers(&self, pool_sid: &str) -> StoreResult<Vec<NumberRecord>> {
        let sql = format!(
            "SELECT {COLS} FROM numbers WHERE pool_sid = $1 AND status = 'active' \
             AND EXISTS (SELECT 1 FROM number_pools WHERE number_pools.sid = numbers.pool_sid AND number_pools.status = 'active') \
             ORDER BY created_at ASC, sid ASC"
        );
        Ok(
            on_db!(self, p => sqlx::query_as::<_, NumberRecord>(sqlx::AssertSqlSafe(sql)).bind(pool_sid).fetch_all(p).await)?,
        )
    }

    /// Dialer helper: the from-number of a test call or an agent-less dispatch ("a free
    /// account number"): one active number of the account, chosen at random; None when
    /// the account has no active number.
    pub async fn number_pick_for_account(
        &self,
        account_sid: &str,
    ) -> StoreResult<Option<NumberRecord>> {
        let sql = format!(
            "SELECT {COLS} FROM numbers WHERE account_sid = $1 AND status = 'active' ORDER BY created_at ASC, sid ASC LIMIT 500"
        );
        let mut all = on_db!(self, p => sqlx::query_as::<_, NumberRecord>(sqlx::AssertSqlSafe(sql)).bind(account_sid).fetch_all(p).await)?;
        if all.is_empty() {
            return Ok(None);
        }
        let i = rand::random_range(0..all.len());
        Ok(Some(all.swap_remove(i)))
    }
}
