//! Users of an account; password-reset and magic-link issuance (admin handoff).

use axum::{extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    NameRule,
    views::{Status, User},
};
use crate::api::caller::{Authz, Caller};
use crate::text_field::TextKind;
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::{Principal, Role, cap, tokens},
    ids::{new_sid, prefix},
    store::{NewPassword, NewUser, StoreError, TokenPurpose, UserPatch, UserRecord},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_users, create_user))
        .routes(routes!(get_user, patch_user, delete_user))
        .routes(routes!(request_password_reset))
        .routes(routes!(request_magic_link))
}

/// Sort column of GET /v1/user.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum UserOrderBy {
    #[default]
    CreatedAt,
    Name,
    Email,
}

/// Sort direction.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum SortOrder {
    Asc,
    #[default]
    Desc,
}

/// Query of GET /v1/user.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UserListQuery {
    /// Include soft-deleted users.
    #[serde(default)]
    pub show_deleted: Option<bool>,
    /// created_at (default), name or email.
    #[serde(default)]
    pub order_by: Option<UserOrderBy>,
    /// asc or desc (default).
    #[serde(default)]
    pub order: Option<SortOrder>,
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// Body of POST /v1/user.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    /// Unique among live users of every tenant (case-insensitive).
    pub email: String,
    #[serde(default)]
    pub name: Option<String>,
    /// At least 8 characters; omit to create a user without a password (magic link or reset).
    #[serde(default)]
    pub password: Option<String>,
    /// Role names (admin, member, viewer); default [member].
    #[serde(default)]
    pub roles: Option<Vec<String>>,
}

/// Body of PATCH /v1/user/{sid}; omitted fields keep their value.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchUser {
    pub name: Option<String>,
    pub roles: Option<Vec<String>>,
    pub status: Option<Status>,
    /// At least 8 characters. Setting it ends every session of the user (the caller's own
    /// session survives when the caller changes its own password).
    pub password: Option<String>,
}

/// A password-reset token for the admin to hand to the user.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PasswordResetToken {
    /// Redeem at POST /v1/auth/password-reset/consume.
    pub token: String,
    pub expires_at: DateTime<Utc>,
}

/// A magic-link token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MagicLink {
    pub token: String,
    pub expires_at: DateTime<Utc>,
    /// Absolute URL of the public consume endpoint (POST the token there).
    pub consume_url: String,
}

fn check_email(v: &str) -> ApiResult<String> {
    let e = v.trim().to_ascii_lowercase();
    super::check_text("email", &e, TextKind::Line, "invalid_email")?;
    let ok = e.len() <= 254
        && !e.chars().any(char::is_whitespace)
        && e.split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && !d.is_empty() && !d.contains('@'));
    if ok {
        Ok(e)
    } else {
        Err(ApiError::unprocessable(
            "invalid_email",
            format!("email: not a valid address {v:?}"),
        ))
    }
}

fn check_roles(roles: &[String]) -> ApiResult<Vec<String>> {
    if roles.is_empty() {
        return Err(ApiError::unprocessable(
            "invalid_roles",
            "roles: at least one role is required",
        ));
    }
    let mut out = Vec::new();
    for r in roles {
        let Some(role) = Role::parse(r) else {
            return Err(ApiError::unprocessable(
                "invalid_roles",
                format!("roles: unknown role {r:?} (admin, member, viewer)"),
            ));
        };
        if !out.contains(&role.as_str().to_string()) {
            out.push(role.as_str().to_string());
        }
    }
    Ok(out)
}

/// The user addressed by a path sid, or 404 when absent, deleted or outside the
/// caller's scope. With X-Account-Sid the usual scope rules apply first.
pub(crate) async fn visible_user(
    state: &AppState,
    caller: &Caller,
    sid: &str,
) -> ApiResult<UserRecord> {
    let declared = if caller.header_account.is_some() {
        Some(caller.account_scope(state).await?.sid)
    } else {
        None
    };
    match state.store.user_get(sid).await? {
        Some(u)
            if u.deleted_at.is_none()
                && caller.sees_account(&u.account_sid, &u.tenant_sid)
                && declared.as_deref().is_none_or(|d| d == u.account_sid) =>
        {
            Ok(u)
        }
        _ => Err(ApiError::not_found("user")),
    }
}

/// List the users of the account in scope.
#[utoipa::path(get, path = "/v1/user", tag = "users", params(UserListQuery, ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Page<User>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn list_users(
    State(state): State<AppState>,
    auth: Authz<cap::UsersRead>,
    Query(q): Query<UserListQuery>,
) -> ApiResult<Json<Page<User>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let account = auth.account_scope(&state).await?;
    let order_by = match q.order_by.unwrap_or_default() {
        UserOrderBy::CreatedAt => "created_at",
        UserOrderBy::Name => "name",
        UserOrderBy::Email => "email",
    };
    let desc = matches!(q.order.unwrap_or_default(), SortOrder::Desc);
    let (rows, total) = state
        .store
        .user_list(
            &account.sid,
            q.show_deleted.unwrap_or(false),
            order_by,
            desc,
            page.limit,
            page.offset,
        )
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(User::from).collect(),
        total,
        page,
    )))
}

/// Create a user in the account in scope.
#[utoipa::path(post, path = "/v1/user", tag = "users", request_body = CreateUser, params(("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 201, body = User), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "Email taken (in any tenant)"),
        (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn create_user(
    State(state): State<AppState>,
    auth: Authz<cap::UsersWrite>,
    Json(b): Json<CreateUser>,
) -> ApiResult<(StatusCode, Json<User>)> {
    let account = auth.account_scope(&state).await?;
    let email = check_email(&b.email)?;
    let roles = check_roles(&b.roles.unwrap_or_else(|| vec!["member".into()]))?;
    let name = NameRule::FREE_NAME.check("name", b.name.as_deref().unwrap_or(""))?;
    let password_hash = match b.password {
        Some(pw) => {
            super::check_new_password(&pw)?;
            Some(super::hash_password(&state, pw).await?)
        }
        None => None,
    };
    let new = NewUser {
        sid: new_sid(prefix::USER),
        tenant_sid: account.tenant_sid,
        account_sid: account.sid,
        email,
        name,
        roles,
        status: "active".into(),
        password_hash,
    };
    match state.store.user_create(&new).await {
        Ok(u) => Ok((StatusCode::CREATED, Json(User::from(&u)))),
        Err(StoreError::Unique) => Err(ApiError::conflict(
            "email_taken",
            "email: already used by another user",
        )),
        Err(e) => Err(e.into()),
    }
}

/// Get a user.
#[utoipa::path(get, path = "/v1/user/{sid}", tag = "users", params(("sid" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = User), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_user(
    State(state): State<AppState>,
    auth: Authz<cap::UsersRead>,
    Path(sid): Path<String>,
) -> ApiResult<Json<User>> {
    Ok(Json(User::from(&visible_user(&state, &auth, &sid).await?)))
}

/// Update a user; omitted fields keep their value. Setting `password` ends every session
/// of the user (but the caller's own session when the caller is that user).
#[utoipa::path(patch, path = "/v1/user/{sid}", tag = "users", params(("sid" = String, Path)), request_body = PatchUser,
    security(("bearer" = [])),
    responses((status = 200, body = User), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn patch_user(
    State(state): State<AppState>,
    auth: Authz<cap::UsersWrite>,
    Path(sid): Path<String>,
    Json(b): Json<PatchUser>,
) -> ApiResult<Json<User>> {
    let u = visible_user(&state, &auth, &sid).await?;
    let roles = b.roles.as_deref().map(check_roles).transpose()?;
    let name = b
        .name
        .as_deref()
        .map(|n| NameRule::FREE_NAME.check("name", n))
        .transpose()?;
    let password = match b.password {
        Some(pw) => {
            super::check_new_password(&pw)?;
            // A caller setting its own password keeps the session it does it with.
            let keep_session = match &auth.principal {
                Principal::User {
                    user_sid,
                    session_hash,
                    ..
                } if *user_sid == u.sid => Some(session_hash.clone()),
                _ => None,
            };
            Some(NewPassword {
                hash: super::hash_password(&state, pw).await?,
                keep_session,
            })
        }
        None => None,
    };
    let patch = UserPatch {
        name,
        roles,
        status: b.status.map(|s| s.as_str().to_string()),
        password,
    };
    let u = state.store.user_update(&u.sid, &patch).await?;
    Ok(Json(User::from(&u)))
}

/// Soft-delete a user (its sessions end; list with show_deleted=true to see it).
#[utoipa::path(delete, path = "/v1/user/{sid}", tag = "users", params(("sid" = String, Path)), security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn delete_user(
    State(state): State<AppState>,
    auth: Authz<cap::UsersWrite>,
    Path(sid): Path<String>,
) -> ApiResult<StatusCode> {
    let u = visible_user(&state, &auth, &sid).await?;
    state.store.user_soft_delete(&u.sid).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Issue a password-reset token for the admin to hand to the user (no e-mail is sent).
/// A new token invalidates earlier ones.
#[utoipa::path(post, path = "/v1/user/{sid}/password-reset/request", tag = "users", params(("sid" = String, Path)),
    security(("bearer" = [])),
    responses((status = 201, body = PasswordResetToken), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "User not active"), (status = 500, body = ErrorBody)))]
async fn request_password_reset(
    State(state): State<AppState>,
    auth: Authz<cap::UsersWrite>,
    Path(sid): Path<String>,
) -> ApiResult<(StatusCode, Json<PasswordResetToken>)> {
    let u = visible_user(&state, &auth, &sid).await?;
    if u.status != "active" {
        return Err(ApiError::conflict(
            "user_inactive",
            "the user is not active",
        ));
    }
    let token = tokens::generate(tokens::TokenKind::PasswordReset);
    let expires_at = Utc::now() + state.settings.password_reset_ttl;
    state
        .store
        .user_token_issue(
            &tokens::hash_secret(&token),
            &u.sid,
            TokenPurpose::PasswordReset,
            expires_at,
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(PasswordResetToken { token, expires_at }),
    ))
}

/// Issue a single-use magic-link token (no e-mail is sent). Any earlier outstanding token
/// is invalidated. 409 when the user is not active.
#[utoipa::path(post, path = "/v1/user/{sid}/magic-link/request", tag = "users", params(("sid" = String, Path)),
    security(("bearer" = [])),
    responses((status = 201, body = MagicLink), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "User not active"), (status = 500, body = ErrorBody)))]
async fn request_magic_link(
    State(state): State<AppState>,
    auth: Authz<cap::UsersWrite>,
    Path(sid): Path<String>,
) -> ApiResult<(StatusCode, Json<MagicLink>)> {
    let u = visible_user(&state, &auth, &sid).await?;
    if u.status != "active" {
        return Err(ApiError::conflict(
            "user_inactive",
            "the user is not active",
        ));
    }
    let token = tokens::generate(tokens::TokenKind::MagicLink);
    let expires_at = Utc::now() + state.settings.magic_link_ttl;
    state
        .store
        .user_token_issue(
            &tokens::hash_secret(&token),
            &u.sid,
            TokenPurpose::MagicLink,
            expires_at,
        )
        .await?;
    let consume_url = format!(
        "{}/v1/auth/magic-link/consume",
        state.settings.public_url.trim_end_matches('/')
    );
    Ok((
        StatusCode::CREATED,
        Json(MagicLink {
            token,
            expires_at,
            consume_url,
        }),
    ))
}
