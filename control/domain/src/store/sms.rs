//! SMS providers of an account. Type `http`: one templated HTTP request per message.
//! Lists (headers, alphas, numbers) are JSON text.

use super::BeginWrite;
use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, now, on_db, store_row};

store_row! {
    #[derive(Debug, Clone)]
    pub struct SmsProviderRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub account_sid: String,
        pub name: String,
        pub kind: String,
        pub url: String,
        pub method: String,
        pub headers: String,
        pub body_template: String,
        pub alphas: String,
        pub numbers: String,
        pub status: String,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
    }
}

impl SmsProviderRecord {
    pub fn alpha_list(&self) -> Vec<String> {
        super::from_json_list(&self.alphas)
    }
    pub fn number_list(&self) -> Vec<String> {
        super::from_json_list(&self.numbers)
    }
}

/// The full, checked configuration of a provider (create and the merged result of a patch).
#[derive(Debug, Clone)]
pub struct SmsProviderConfig {
    pub name: String,
    pub kind: String,
    pub url: String,
    pub method: String,
    /// JSON array of {name, value}.
    pub headers: String,
    pub body_template: String,
    pub alphas: Vec<String>,
    pub numbers: Vec<String>,
    pub status: String,
}

const COLS: &str = "sid, tenant_sid, account_sid, name, type AS kind, url, method, headers, body_template, alphas, numbers, status, created_at, updated_at";

impl Store {
    /// `Unique` when the account already has a provider of that name.
    pub async fn sms_provider_create(
        &self,
        sid: &str,
        tenant_sid: &str,
        account_sid: &str,
        c: &SmsProviderConfig,
    ) -> StoreResult<SmsProviderRecord> {
        let alphas = super::to_json_list(&c.alphas);
        let numbers = super::to_json_list(&c.numbers);
        on_db!(self, p => sqlx::query("INSERT INTO sms_providers (sid, tenant_sid, account_sid, name, type, url, method, headers, body_template, alphas, numbers, status, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)")
            .bind(sid).bind(tenant_sid).bind(account_sid).bind(&c.name).bind(&c.kind).bind(&c.url).bind(&c.method)
            .bind(&c.headers).bind(&c.body_template).bind(&alphas).bind(&numbers).bind(&c.status).bind(now())
            .execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.sms_provider_get(sid)
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn sms_provider_get(&self, sid: &str) -> StoreResult<Option<SmsProviderRecord>> {
        let sql = format!("SELECT {COLS} FROM sms_providers WHERE sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, SmsProviderRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// A page of an account's providers (optionally one status), newest first.
    pub async fn sms_provider_list(
        &self,
        account_sid: &str,
        status: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<SmsProviderRecord>, i64)> {
        let filter = "account_sid = $1 AND ($2 IS NULL OR status = $2)";
        let sql = format!(
            "SELECT {COLS} FROM sms_providers WHERE {filter} ORDER BY created_at DESC, sid DESC LIMIT $3 OFFSET $4"
        );
        let count = format!("SELECT COUNT(*) FROM sms_providers WHERE {filter}");
        let status = status.map(str::to_string);
        let rows = on_db!(self, p => sqlx::query_as::<_, SmsProviderRecord>(sqlx::AssertSqlSafe(sql)).bind(account_sid).bind(&status).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(count)).bind(account_sid).bind(&status).fetch_one(p).await)?;
        Ok((rows, total))
    }

    /// Replaces the configuration (the API merges a patch and re-checks it first).
    pub async fn sms_provider_update(
        &self,
        sid: &str,
        c: &SmsProviderConfig,
    ) -> StoreResult<SmsProviderRecord> {
        let alphas = super::to_json_list(&c.alphas);
        let numbers = super::to_json_list(&c.numbers);
        let n = on_db!(self, p => sqlx::query("UPDATE sms_providers SET name = $2, type = $3, url = $4, method = $5, headers = $6, body_template = $7, \
             alphas = $8, numbers = $9, status = $10, updated_at = $11 WHERE sid = $1")
            .bind(sid).bind(&c.name).bind(&c.kind).bind(&c.url).bind(&c.method).bind(&c.headers).bind(&c.body_template)
            .bind(&alphas).bind(&numbers).bind(&c.status).bind(now())
            .execute(p).await.map(|r| r.rows_affected()))
        .map_err(StoreError::from_write)?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        self.sms_provider_get(sid)
            .await?
            .ok_or(StoreError::NotFound)
    }

    /// Deletes a provider unless an agent sends SMS through it (`Conflict`).
    pub async fn sms_provider_delete(&self, sid: &str) -> StoreResult<()> {
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let refs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM agents WHERE sms_provider_sid = $1")
                .bind(sid).fetch_one(&mut *tx).await?;
            if refs > 0 {
                return Err(StoreError::Conflict("referenced by agents".into()));
            }
            let n = sqlx::query("DELETE FROM sms_providers WHERE sid = $1").bind(sid).execute(&mut *tx).await?.rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            tx.commit().await?;
            Ok(())
        }.await)
    }
}
