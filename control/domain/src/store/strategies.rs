//! Communication strategies of an account (docs/strategies.md): a name and the checked
//! definition ([`crate::strategy::Strategy::parse`]) as JSON text.

use super::BeginWrite;
use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, now, on_db, store_row};

store_row! {
    #[derive(Debug, Clone)]
    pub struct StrategyRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub account_sid: String,
        pub name: String,
        /// The definition's JSON text, as the API accepted it.
        pub definition: String,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
    }
}

const COLS: &str = "sid, tenant_sid, account_sid, name, definition, created_at, updated_at";

impl Store {
    /// `Unique` when the account already has a strategy of that name.
    pub async fn strategy_create(
        &self,
        sid: &str,
        tenant_sid: &str,
        account_sid: &str,
        name: &str,
        definition: &str,
    ) -> StoreResult<StrategyRecord> {
        on_db!(self, p => sqlx::query("INSERT INTO strategies (sid, tenant_sid, account_sid, name, definition, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)")
            .bind(sid).bind(tenant_sid).bind(account_sid).bind(name).bind(definition).bind(now()).execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.strategy_get(sid).await?.ok_or(StoreError::NotFound)
    }

    pub async fn strategy_get(&self, sid: &str) -> StoreResult<Option<StrategyRecord>> {
        let sql = format!("SELECT {COLS} FROM strategies WHERE sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, StrategyRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// A page of an account's strategies, newest first.
    pub async fn strategy_list(
        &self,
        account_sid: &str,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<StrategyRecord>, i64)> {
        let sql = format!(
            "SELECT {COLS} FROM strategies WHERE account_sid = $1 ORDER BY created_at DESC, sid DESC LIMIT $2 OFFSET $3"
        );
        let rows = on_db!(self, p => sqlx::query_as::<_, StrategyRecord>(sqlx::AssertSqlSafe(sql)).bind(account_sid).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar("SELECT COUNT(*) FROM strategies WHERE account_sid = $1").bind(account_sid).fetch_one(p).await)?;
        Ok((rows, total))
    }

    /// Partial update (`None` keeps the value); `Unique` on a taken name.
    pub async fn strategy_update(
        &self,
        sid: &str,
        name: Option<&str>,
        definition: Option<&str>,
    ) -> StoreResult<StrategyRecord> {
        let n = on_db!(self, p => sqlx::query("UPDATE strategies SET name = COALESCE($2, name), definition = COALESCE($3, definition), updated_at = $4 WHERE sid = $1")
            .bind(sid).bind(name).bind(definition).bind(now()).execute(p).await.map(|r| r.rows_affected()))
        .map_err(StoreError::from_write)?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        self.strategy_get(sid).await?.ok_or(StoreError::NotFound)
    }

    /// Deletes a strategy unless an agent names it as its default (`Conflict`: the caller
    /// lists the agents with [`Store::agents_referencing`]). Communications that followed
    /// it keep its sid.
    pub async fn strategy_delete(&self, sid: &str) -> StoreResult<()> {
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let refs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM agents WHERE strategy_sid = $1")
                .bind(sid).fetch_one(&mut *tx).await?;
            if refs > 0 {
                return Err(StoreError::Conflict("referenced by agents".into()));
            }
            let n = sqlx::query("DELETE FROM strategies WHERE sid = $1").bind(sid).execute(&mut *tx).await?.rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            tx.commit().await?;
            Ok(())
        }.await)
    }
}
