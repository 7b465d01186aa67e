//! Phone numbers of an account: the caller ids agents dial from. A number may belong to
//! one pool and may name the trunk its outbound calls leave through.

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

impl Store {
    /// `Unique` when the account already has a number with that identifier.
    pub async fn number_create(&self, n: &NewNumber) -> StoreResult<NumberRecord> {
        on_db!(self, p => sqlx::query("INSERT INTO numbers (sid, tenant_sid, account_sid, identifier, name, pool_sid, trunk, status, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)")
            .bind(&n.sid).bind(&n.tenant_sid).bind(&n.account_sid).bind(&n.identifier).bind(&n.name)
            .bind(&n.pool_sid).bind(&n.trunk).bind(&n.status).bind(now()).execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.number_get(&n.sid).await?.ok_or(StoreError::NotFound)
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

    /// Partial update; `Unique` on a taken identifier.
    pub async fn number_update(&self, sid: &str, patch: &NumberPatch) -> StoreResult<NumberRecord> {
        let Some(cur) = self.number_get(sid).await? else {
            return Err(StoreError::NotFound);
        };
        let identifier = patch.identifier.clone().unwrap_or(cur.identifier);
        let name = patch.name.clone().unwrap_or(cur.name);
        let pool_sid = patch.pool_sid.clone().unwrap_or(cur.pool_sid);
        let trunk = patch.trunk.clone().unwrap_or(cur.trunk);
        let status = patch.status.clone().unwrap_or(cur.status);
        let n = on_db!(self, p => sqlx::query("UPDATE numbers SET identifier = $2, name = $3, pool_sid = $4, trunk = $5, status = $6, updated_at = $7 WHERE sid = $1")
            .bind(sid).bind(&identifier).bind(&name).bind(&pool_sid).bind(&trunk).bind(&status).bind(now())
            .execute(p).await.map(|r| r.rows_affected()))
        .map_err(StoreError::from_write)?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        self.number_get(sid).await?.ok_or(StoreError::NotFound)
    }

    /// Deletes a number unless an agent dials through it (`Conflict`).
    pub async fn number_delete(&self, sid: &str) -> StoreResult<()> {
        on_db!(self, p => async {
            let mut tx = p.begin().await?;
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
