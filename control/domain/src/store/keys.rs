//! Credentials: superuser tokens, tenant and account API keys, user sessions and
//! single-use user tokens (password reset, magic link). Only SHA-256 hashes of the
//! secrets are stored; the lookups here are what the auth guard runs per request.

use super::BeginWrite;
use chrono::{DateTime, Utc};

use std::sync::LazyLock;

use super::{
    AccountRecord, FromPrefixed, Store, StoreError, StoreResult, now, on_db, prefixed_columns,
    store_row,
};

store_row! {
    /// A tenant API key (`account_sid` null) or an account API key.
    #[derive(Debug, Clone)]
    pub struct ApiKeyRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub account_sid: Option<String>,
        pub label: String,
        pub expires_at: Option<DateTime<Utc>>,
        pub revoked_at: Option<DateTime<Utc>>,
        pub created_at: DateTime<Utc>,
    }
}

store_row! {
    /// What a session token resolves to (only for a live, active user of a live, active
    /// account of a live tenant).
    #[derive(Debug, Clone)]
    pub struct SessionLookup {
        pub user_sid: String,
        pub account_sid: String,
        pub tenant_sid: String,
        pub roles: String,
        pub expires_at: DateTime<Utc>,
        pub revoked_at: Option<DateTime<Utc>>,
    }
}

/// What a presented bearer secret hash resolves to. Account keys and sessions come with
/// their account, read in the same query, so account-scoped requests need not read it
/// again.
#[derive(Debug, Clone)]
pub enum AuthLookup {
    Superuser {
        sid: String,
    },
    Key {
        key: ApiKeyRecord,
        /// The key's account (None for a tenant key).
        account: Option<AccountRecord>,
    },
    Session {
        session: SessionLookup,
        account: AccountRecord,
    },
}

/// The account columns as `a_*`, with the tenant name from `t`, for the lookups below.
static ACCOUNT_COLS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}, t.name AS a_tenant_name",
        prefixed_columns("a", super::accounts::COLS, "a_")
    )
});

/// Purpose of a single-use user token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenPurpose {
    PasswordReset,
    MagicLink,
}

impl TokenPurpose {
    fn as_str(self) -> &'static str {
        match self {
            TokenPurpose::PasswordReset => "password_reset",
            TokenPurpose::MagicLink => "magic_link",
        }
    }
}

const KEY_COLS: &str =
    "k.sid, k.tenant_sid, k.account_sid, k.label, k.expires_at, k.revoked_at, k.created_at";

/// Which table a credential's hash is looked up in: the credential cache's key keeps the
/// kinds apart.
#[derive(Clone, Copy)]
enum CredentialKind {
    Superuser,
    ApiKey,
    Session,
}

impl Store {
    /// `read` answered from the credential cache when it was read at the current
    /// generation; a found credential is kept for the next request (see `caches`).
    async fn cached_credential<F>(
        &self,
        kind: CredentialKind,
        hash: &str,
        read: F,
    ) -> StoreResult<Option<AuthLookup>>
    where
        F: std::future::Future<Output = StoreResult<Option<AuthLookup>>>,
    {
        match &self.caches {
            Some(caches) => {
                let key = (kind as u8, hash.to_string());
                caches
                    .credentials
                    .read_through(key, Option::is_some, read)
                    .await
            }
            None => read.await,
        }
    }

    pub async fn superuser_token_count(&self) -> StoreResult<i64> {
        Ok(
            on_db!(self, p => sqlx::query_scalar("SELECT COUNT(*) FROM superuser_tokens WHERE revoked_at IS NULL").fetch_one(p).await)?,
        )
    }

    /// Records a superuser token hash; a hash already present is left as is.
    pub async fn superuser_token_insert(
        &self,
        sid: &str,
        label: &str,
        secret_hash: &str,
    ) -> StoreResult<()> {
        let exists: i64 = on_db!(self, p => sqlx::query_scalar("SELECT COUNT(*) FROM superuser_tokens WHERE secret_hash = $1").bind(secret_hash).fetch_one(p).await)?;
        if exists > 0 {
            return Ok(());
        }
        on_db!(self, p => sqlx::query("INSERT INTO superuser_tokens (sid, label, secret_hash, created_at) VALUES ($1, $2, $3, $4)")
            .bind(sid).bind(label).bind(secret_hash).bind(now()).execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)
    }

    pub async fn lookup_superuser(&self, secret_hash: &str) -> StoreResult<Option<AuthLookup>> {
        self.cached_credential(
            CredentialKind::Superuser,
            secret_hash,
            self.read_superuser(secret_hash),
        )
        .await
    }

    async fn read_superuser(&self, secret_hash: &str) -> StoreResult<Option<AuthLookup>> {
        let sid: Option<String> = on_db!(self, p => sqlx::query_scalar("SELECT sid FROM superuser_tokens WHERE secret_hash = $1 AND revoked_at IS NULL")
            .bind(secret_hash).fetch_optional(p).await)?;
        Ok(sid.map(|sid| AuthLookup::Superuser { sid }))
    }

    /// An API key by secret hash whose tenant (and account, for account keys) is live
    /// and active. Expiry and revocation are left to the caller to judge.
    pub async fn lookup_api_key(&self, secret_hash: &str) -> StoreResult<Option<AuthLookup>> {
        self.cached_credential(
            CredentialKind::ApiKey,
            secret_hash,
            self.read_api_key(secret_hash),
        )
        .await
    }

    async fn read_api_key(&self, secret_hash: &str) -> StoreResult<Option<AuthLookup>> {
        let sql = format!(
            "SELECT {KEY_COLS}, {} FROM api_keys k JOIN tenants t ON t.sid = k.tenant_sid LEFT JOIN accounts a ON a.sid = k.account_sid \
             WHERE k.secret_hash = $1 AND t.deleted_at IS NULL AND (k.account_sid IS NULL OR (a.deleted_at IS NULL AND a.status = 'active'))",
            ACCOUNT_COLS.as_str()
        );
        Ok(on_db!(self, p => {
            use sqlx::{FromRow, Row};
            let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(secret_hash).fetch_optional(p).await?;
            row.map(|r| {
                let account = match r.try_get::<Option<String>, _>("a_sid")? {
                    Some(_) => Some(AccountRecord::from_prefixed(&r, "a_")?),
                    None => None,
                };
                Ok::<_, sqlx::Error>(AuthLookup::Key { key: ApiKeyRecord::from_row(&r)?, account })
            })
            .transpose()
        })?)
    }

    /// A session by token hash whose user, account and tenant are live and active.
    /// Expiry and revocation are left to the caller to judge.
    pub async fn lookup_session(&self, token_hash: &str) -> StoreResult<Option<AuthLookup>> {
        self.cached_credential(
            CredentialKind::Session,
            token_hash,
            self.read_session(token_hash),
        )
        .await
    }

    async fn read_session(&self, token_hash: &str) -> StoreResult<Option<AuthLookup>> {
        let sql = format!(
            "SELECT u.sid AS user_sid, u.account_sid, u.tenant_sid, u.roles, s.expires_at, s.revoked_at, {} \
             FROM sessions s JOIN users u ON u.sid = s.user_sid JOIN accounts a ON a.sid = u.account_sid JOIN tenants t ON t.sid = u.tenant_sid \
             WHERE s.token_hash = $1 AND u.deleted_at IS NULL AND u.status = 'active' AND a.deleted_at IS NULL AND a.status = 'active' AND t.deleted_at IS NULL",
            ACCOUNT_COLS.as_str()
        );
        Ok(on_db!(self, p => {
            use sqlx::FromRow;
            let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(token_hash).fetch_optional(p).await?;
            row.map(|r| {
                Ok::<_, sqlx::Error>(AuthLookup::Session {
                    session: SessionLookup::from_row(&r)?,
                    account: AccountRecord::from_prefixed(&r, "a_")?,
                })
            })
            .transpose()
        })?)
    }

    pub async fn api_key_create(
        &self,
        sid: &str,
        tenant_sid: &str,
        account_sid: Option<&str>,
        label: &str,
        secret_hash: &str,
        expires_at: Option<DateTime<Utc>>,
    ) -> StoreResult<ApiKeyRecord> {
        on_db!(self, p => sqlx::query("INSERT INTO api_keys (sid, tenant_sid, account_sid, label, secret_hash, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)")
            .bind(sid).bind(tenant_sid).bind(account_sid).bind(label).bind(secret_hash).bind(expires_at).bind(now())
            .execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.api_key_get(sid).await?.ok_or(StoreError::NotFound)
    }

    pub async fn api_key_get(&self, sid: &str) -> StoreResult<Option<ApiKeyRecord>> {
        let sql = format!("SELECT {KEY_COLS} FROM api_keys k WHERE k.sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, ApiKeyRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// Keys of an account (`Some`) or the tenant keys of a tenant (`account_sid` None),
    /// oldest first, with the total.
    pub async fn api_key_list(
        &self,
        tenant_sid: &str,
        account_sid: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<ApiKeyRecord>, i64)> {
        let (filter, owner) = match account_sid {
            Some(a) => ("k.account_sid = $1", a),
            None => ("k.tenant_sid = $1 AND k.account_sid IS NULL", tenant_sid),
        };
        let sql = format!(
            "SELECT {KEY_COLS} FROM api_keys k WHERE {filter} ORDER BY k.created_at ASC, k.sid ASC LIMIT $2 OFFSET $3"
        );
        let count = format!("SELECT COUNT(*) FROM api_keys k WHERE {filter}");
        let rows = on_db!(self, p => sqlx::query_as::<_, ApiKeyRecord>(sqlx::AssertSqlSafe(sql)).bind(owner).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(count)).bind(owner).fetch_one(p).await)?;
        Ok((rows, total))
    }

    /// Revokes a key (idempotent: an already revoked key keeps its first revocation time).
    pub async fn api_key_revoke(&self, sid: &str) -> StoreResult<ApiKeyRecord> {
        on_db!(self, p => sqlx::query("UPDATE api_keys SET revoked_at = $2 WHERE sid = $1 AND revoked_at IS NULL")
            .bind(sid).bind(now()).execute(p).await.map(|_| ()))?;
        self.api_key_get(sid).await?.ok_or(StoreError::NotFound)
    }

    pub async fn session_create(
        &self,
        token_hash: &str,
        user_sid: &str,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        on_db!(self, p => sqlx::query("INSERT INTO sessions (token_hash, user_sid, created_at, expires_at) VALUES ($1, $2, $3, $4)")
            .bind(token_hash).bind(user_sid).bind(now()).bind(expires_at).execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)
    }

    pub async fn session_revoke(&self, token_hash: &str) -> StoreResult<()> {
        on_db!(self, p => sqlx::query("UPDATE sessions SET revoked_at = $2 WHERE token_hash = $1 AND revoked_at IS NULL")
            .bind(token_hash).bind(now()).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// Issues a single-use token for a user; every earlier outstanding token of the same
    /// purpose for that user is invalidated in the same transaction.
    pub async fn user_token_issue(
        &self,
        token_hash: &str,
        user_sid: &str,
        purpose: TokenPurpose,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let t = now();
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            sqlx::query("UPDATE user_tokens SET used_at = $3 WHERE user_sid = $1 AND purpose = $2 AND used_at IS NULL")
                .bind(user_sid).bind(purpose.as_str()).bind(t).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO user_tokens (token_hash, user_sid, purpose, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)")
                .bind(token_hash).bind(user_sid).bind(purpose.as_str()).bind(t).bind(expires_at).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(())
        }.await)
        .map_err(StoreError::from_write)
    }

    /// Atomically marks an unused, unexpired token as used and returns its user sid;
    /// `None` when the token is unknown, used, superseded or expired.
    pub async fn user_token_consume(
        &self,
        token_hash: &str,
        purpose: TokenPurpose,
    ) -> StoreResult<Option<String>> {
        let t = now();
        let user: Option<String> = on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let n = sqlx::query("UPDATE user_tokens SET used_at = $3 WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL")
                .bind(token_hash).bind(purpose.as_str()).bind(t).execute(&mut *tx).await?.rows_affected();
            if n == 0 {
                return Ok::<_, sqlx::Error>(None);
            }
            let row: Option<(String, DateTime<Utc>)> = sqlx::query_as("SELECT user_sid, expires_at FROM user_tokens WHERE token_hash = $1")
                .bind(token_hash).fetch_optional(&mut *tx).await?;
            tx.commit().await?;
            Ok(row.filter(|(_, exp)| *exp > t).map(|(u, _)| u))
        }.await)?;
        Ok(user)
    }
}
