//! Users of an account: identity, roles, password hash, soft delete.

use super::BeginWrite;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{
    Store, StoreError, StoreResult, filter::Where, from_json_list, now, on_db, store_row,
    to_json_list,
};

store_row! {
    #[derive(Debug, Clone, serde::Deserialize)]
    pub struct UserRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub account_sid: String,
        pub email: String,
        pub name: String,
        pub roles: String,
        pub status: String,
        pub password_hash: Option<String>,
        pub last_login_at: Option<DateTime<Utc>>,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
        pub deleted_at: Option<DateTime<Utc>>,
    }
}

impl UserRecord {
    /// The role names (stored as a JSON list).
    pub fn role_list(&self) -> Vec<String> {
        from_json_list(&self.roles)
    }
}

#[derive(Debug, Clone)]
pub struct NewUser {
    pub sid: String,
    pub tenant_sid: String,
    pub account_sid: String,
    /// Lowercased by the caller; unique among live users of every tenant.
    pub email: String,
    pub name: String,
    pub roles: Vec<String>,
    pub status: String,
    pub password_hash: Option<String>,
}

/// A partial update: `None` keeps the stored value.
#[derive(Debug, Clone, Default)]
pub struct UserPatch {
    pub name: Option<String>,
    pub roles: Option<Vec<String>>,
    pub status: Option<String>,
    /// A new password; setting one ends the user's sessions (see [`NewPassword`]).
    pub password: Option<NewPassword>,
}

/// A password set on an existing user: by an administrator (`PATCH /v1/user/{sid}`), by
/// the user (`POST /v1/auth/password/change`) or with a reset token. Whoever knew the old
/// password may hold a session opened with it, so every session of the user ends with the
/// change, in the same transaction, except `keep_session`: the session that made the change
/// itself, when it is the user's own.
#[derive(Debug, Clone)]
pub struct NewPassword {
    /// The argon2id PHC string of the new password.
    pub hash: String,
    /// Token hash of the session that survives the change.
    pub keep_session: Option<String>,
}

pub(super) const COLS: &str = "sid, tenant_sid, account_sid, email, name, roles, status, password_hash, last_login_at, created_at, updated_at, deleted_at";

impl Store {
    /// Inserts a user; `Unique` when a live user anywhere already has the email.
    pub async fn user_create(&self, u: &NewUser) -> StoreResult<UserRecord> {
        let t = now();
        on_db!(self, p => sqlx::query("INSERT INTO users (sid, tenant_sid, account_sid, email, name, roles, status, password_hash, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)")
            .bind(&u.sid).bind(&u.tenant_sid).bind(&u.account_sid).bind(&u.email).bind(&u.name)
            .bind(to_json_list(&u.roles)).bind(&u.status).bind(&u.password_hash).bind(t)
            .execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.user_get(&u.sid).await?.ok_or(StoreError::NotFound)
    }

    /// A user by sid, including soft-deleted ones.
    pub async fn user_get(&self, sid: &str) -> StoreResult<Option<UserRecord>> {
        let sql = format!("SELECT {COLS} FROM users WHERE sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, UserRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// The live user with this (lowercased) email, if any.
    pub async fn user_by_email(&self, email: &str) -> StoreResult<Option<UserRecord>> {
        let sql = format!("SELECT {COLS} FROM users WHERE email = $1 AND deleted_at IS NULL");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, UserRecord>(sqlx::AssertSqlSafe(sql)).bind(email).fetch_optional(p).await)?,
        )
    }

    /// A page of an account's users and how many match in all. `order_by` must be one of
    /// created_at, name, email (checked by the caller; anything else falls back to
    /// created_at). On SQLite a page read since the last change to any user comes from
    /// memory (see `caches`).
    pub async fn user_list(
        &self,
        account_sid: &str,
        show_deleted: bool,
        order_by: &str,
        descending: bool,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Arc<[UserRecord]>, i64)> {
        let column = match order_by {
            "name" => "name",
            "email" => "email",
            _ => "created_at",
        };
        let dir = if descending { "DESC" } else { "ASC" };
        let order = format!("{column} {dir}, sid {dir}");
        let read = async {
            let mut w = Where::new("account_sid", account_sid);
            if !show_deleted {
                w.and("deleted_at IS NULL");
            }
            let (rows, total) = w
                .page_packed::<UserRecord>(self, COLS, "users", &order, limit, offset)
                .await?;
            Ok((rows.into(), total))
        };
        match &self.caches {
            Some(caches) => {
                let key = UserPageKey {
                    account_sid: account_sid.to_string(),
                    show_deleted,
                    order: order.clone(),
                    limit,
                    offset,
                };
                caches.user_pages.read_through(key, |_| true, read).await
            }
            None => read.await,
        }
    }

    /// Applies `patch` to a live user. This is the only place a stored password changes:
    /// with `patch.password` every session of the user but its `keep_session` is revoked in
    /// the same transaction.
    pub async fn user_update(&self, sid: &str, patch: &UserPatch) -> StoreResult<UserRecord> {
        let t = now();
        let roles = patch.roles.as_ref().map(|r| to_json_list(r));
        let hash = patch.password.as_ref().map(|p| p.hash.as_str());
        let keep = patch
            .password
            .as_ref()
            .and_then(|p| p.keep_session.as_deref());
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let n = sqlx::query(
                "UPDATE users SET name = COALESCE($2, name), roles = COALESCE($3, roles), status = COALESCE($4, status), \
                 password_hash = COALESCE($5, password_hash), updated_at = $6 WHERE sid = $1 AND deleted_at IS NULL")
                .bind(sid).bind(&patch.name).bind(&roles).bind(&patch.status).bind(hash).bind(t)
                .execute(&mut *tx).await?.rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            if hash.is_some() {
                sqlx::query(
                    "UPDATE sessions SET revoked_at = $2 WHERE user_sid = $1 AND revoked_at IS NULL \
                     AND ($3 IS NULL OR token_hash <> $3)")
                    .bind(sid).bind(t).bind(keep).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        }.await)?;
        self.user_get(sid).await?.ok_or(StoreError::NotFound)
    }

    /// Soft-deletes a live user and revokes its sessions.
    pub async fn user_soft_delete(&self, sid: &str) -> StoreResult<()> {
        let t = now();
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let n = sqlx::query("UPDATE users SET deleted_at = $2, updated_at = $2 WHERE sid = $1 AND deleted_at IS NULL")
                .bind(sid).bind(t).execute(&mut *tx).await?.rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            sqlx::query("UPDATE sessions SET revoked_at = $2 WHERE user_sid = $1 AND revoked_at IS NULL")
                .bind(sid).bind(t).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(())
        }.await)
    }

    pub async fn user_touch_login(&self, sid: &str) -> StoreResult<()> {
        on_db!(self, p => sqlx::query("UPDATE users SET last_login_at = $2 WHERE sid = $1").bind(sid).bind(now()).execute(p).await.map(|_| ()))?;
        Ok(())
    }
}

/// Which page of which account's users, in which order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct UserPageKey {
    pub account_sid: String,
    pub show_deleted: bool,
    pub order: String,
    pub limit: i64,
    pub offset: i64,
}

/// A page of users and how many match in all.
pub(crate) type UserPage = (std::sync::Arc<[UserRecord]>, i64);
