//! Login, logout, password change, password-reset and magic-link consumption.

use std::net::SocketAddr;

use axum::{
    Extension,
    extract::{ConnectInfo, State},
    http::StatusCode,
};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::views::Session;
use crate::api::caller::{Authz, Caller};
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json},
    auth::{Principal, cap, throttle, tokens},
    store::{NewPassword, TokenPurpose, UserPatch, UserRecord},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(login))
        .routes(routes!(logout))
        .routes(routes!(change_password))
        .routes(routes!(consume_password_reset))
        .routes(routes!(consume_magic_link))
}

/// Body of POST /v1/auth/login.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    pub email: String,
    pub password: String,
}

/// Body of POST /v1/auth/password/change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangePassword {
    pub current_password: String,
    /// At least 8 characters.
    pub new_password: String,
}

/// Body of POST /v1/auth/password-reset/consume.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsumePasswordReset {
    pub token: String,
    /// At least 8 characters.
    pub new_password: String,
}

/// Body of POST /v1/auth/magic-link/consume.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsumeMagicLink {
    pub token: String,
}

fn invalid_credentials() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "invalid_credentials",
        "email or password is wrong",
    )
}

/// A live user of a live, active account and tenant (None otherwise).
async fn usable_user(state: &AppState, sid: &str) -> ApiResult<Option<UserRecord>> {
    let Some(u) = state.store.user_get(sid).await? else {
        return Ok(None);
    };
    if u.deleted_at.is_some() {
        return Ok(None);
    }
    let account = state.store.account_get(&u.account_sid).await?;
    let ok = match account {
        Some(a) if a.deleted_at.is_none() && a.status == "active" => state
            .store
            .tenant_get(&a.tenant_sid)
            .await?
            .is_some_and(|t| t.deleted_at.is_none()),
        _ => false,
    };
    Ok(ok.then_some(u))
}

fn too_many_attempts(wait: std::time::Duration) -> ApiError {
    let secs = throttle::retry_after_secs(wait);
    ApiError::too_many_requests(
        "too_many_attempts",
        format!("too many failed logins; try again in {secs} s"),
        secs,
    )
}

/// Log in with email and password; returns a session whose token is a bearer credential.
///
/// Failed logins are limited per email and per source address (`[auth] login_*`); once a
/// limit is reached, every login of that email or address (right password included) is
/// 429 `too_many_attempts` until the window ends, with `Retry-After` in seconds. A
/// successful login clears the email's count.
#[utoipa::path(post, path = "/v1/auth/login", tag = "auth", request_body = LoginRequest,
    responses((status = 200, body = Session), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 429, body = ErrorBody, description = "Too many failed logins for this email or from this address",
            headers(("Retry-After" = u64, description = "Seconds until a login may be tried again"))),
        (status = 500, body = ErrorBody)))]
async fn login(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    Json(b): Json<LoginRequest>,
) -> ApiResult<Json<Session>> {
    let email = b.email.trim().to_ascii_lowercase();
    let peer = peer.map(|Extension(ConnectInfo(addr))| addr.ip());
    // Refused before any lookup or hashing: known and unknown emails alike.
    let attempt = state
        .login_throttle
        .begin(&email, peer, chrono::Utc::now())
        .await?
        .map_err(too_many_attempts)?;
    let Some(user) = state.store.user_by_email(&email).await? else {
        // Same work as a real check, so timing does not reveal which emails exist.
        let _ = super::verify_password(b.password, Some(state.dummy_hash.to_string())).await;
        return Err(invalid_credentials());
    };
    let ok = super::verify_password(b.password, user.password_hash.clone()).await;
    if !ok || user.status != "active" || usable_user(&state, &user.sid).await?.is_none() {
        return Err(invalid_credentials());
    }
    state.login_throttle.succeeded(attempt).await?;
    Ok(Json(super::open_session(&state, &user).await?))
}

/// End the current session (session tokens only).
#[utoipa::path(post, path = "/v1/auth/logout", tag = "auth", security(("bearer" = [])),
    responses((status = 204, description = "Session ended"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn logout(State(state): State<AppState>, caller: Caller) -> ApiResult<StatusCode> {
    match &caller.principal {
        Principal::User { session_hash, .. } => {
            state.store.session_revoke(session_hash).await?;
            Ok(StatusCode::NO_CONTENT)
        }
        _ => Err(ApiError::forbidden(
            "only a session can log out; revoke API keys instead",
        )),
    }
}

/// Change the authenticated user's password. Every other session of the user ends; the
/// session making the change stays valid.
#[utoipa::path(post, path = "/v1/auth/password/change", tag = "auth", request_body = ChangePassword, security(("bearer" = [])),
    responses((status = 204, description = "Changed"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn change_password(
    State(state): State<AppState>,
    auth: Authz<cap::PasswordChange>,
    Json(b): Json<ChangePassword>,
) -> ApiResult<StatusCode> {
    let Principal::User {
        user_sid,
        session_hash,
        ..
    } = &auth.principal
    else {
        return Err(ApiError::forbidden("only users have passwords"));
    };
    let Some(user) = state.store.user_get(user_sid).await? else {
        return Err(ApiError::unauthenticated("user gone"));
    };
    if !super::verify_password(b.current_password, user.password_hash.clone()).await {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_current_password",
            "current_password is wrong",
        ));
    }
    super::check_new_password(&b.new_password)?;
    let hash = super::hash_password(&state, b.new_password).await?;
    state
        .store
        .user_update(
            &user.sid,
            &UserPatch {
                password: Some(NewPassword {
                    hash,
                    keep_session: Some(session_hash.clone()),
                }),
                ..Default::default()
            },
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Set a new password with a reset token (public); ends every other session of the user
/// and returns a new one. The token is single-use.
#[utoipa::path(post, path = "/v1/auth/password-reset/consume", tag = "auth", request_body = ConsumePasswordReset,
    responses((status = 200, body = Session), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn consume_password_reset(
    State(state): State<AppState>,
    Json(b): Json<ConsumePasswordReset>,
) -> ApiResult<Json<Session>> {
    // Length first, so a too-short password does not burn the token.
    super::check_new_password(&b.new_password)?;
    let invalid = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "reset token is unknown, used, superseded or expired",
        )
    };
    if tokens::TokenKind::of(&b.token) != Some(tokens::TokenKind::PasswordReset) {
        return Err(invalid());
    }
    let Some(user_sid) = state
        .store
        .user_token_consume(&tokens::hash_secret(&b.token), TokenPurpose::PasswordReset)
        .await?
    else {
        return Err(invalid());
    };
    let Some(user) = usable_user(&state, &user_sid).await? else {
        return Err(invalid());
    };
    let hash = super::hash_password(&state, b.new_password).await?;
    let user = state
        .store
        .user_update(
            &user.sid,
            &UserPatch {
                password: Some(NewPassword {
                    hash,
                    keep_session: None,
                }),
                ..Default::default()
            },
        )
        .await?;
    Ok(Json(super::open_session(&state, &user).await?))
}

/// Redeem a magic-link token (public, single use); returns a session.
#[utoipa::path(post, path = "/v1/auth/magic-link/consume", tag = "auth", request_body = ConsumeMagicLink,
    responses((status = 200, body = Session), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "User not active"), (status = 500, body = ErrorBody)))]
async fn consume_magic_link(
    State(state): State<AppState>,
    Json(b): Json<ConsumeMagicLink>,
) -> ApiResult<Json<Session>> {
    let invalid = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "magic-link token is unknown, used, superseded or expired",
        )
    };
    if tokens::TokenKind::of(&b.token) != Some(tokens::TokenKind::MagicLink) {
        return Err(invalid());
    }
    let Some(user_sid) = state
        .store
        .user_token_consume(&tokens::hash_secret(&b.token), TokenPurpose::MagicLink)
        .await?
    else {
        return Err(invalid());
    };
    let Some(user) = usable_user(&state, &user_sid).await? else {
        return Err(invalid());
    };
    if user.status != "active" {
        return Err(ApiError::conflict(
            "user_inactive",
            "the user is not active",
        ));
    }
    Ok(Json(super::open_session(&state, &user).await?))
}
