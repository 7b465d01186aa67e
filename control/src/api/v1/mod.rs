//! The v1 family. One module per resource group; [`routes`] merges them.

mod accounts;
pub(crate) mod agents;
mod audio;
mod auth;
mod classifiers;
pub mod communications;
mod dictionaries;
mod flags;
mod llm;
mod numbers;
mod owned;
mod pools;
mod profile;
mod results;
mod scenarios;
mod sms;
mod stt;
mod tenants;
mod trunks;
mod tts;
mod users;
pub mod views;
mod webhook_run;

use chrono::{DateTime, Utc};
use utoipa_axum::router::OpenApiRouter;

use super::{ApiError, ApiResult, AppState};
use crate::{
    auth::{password, tokens},
    store::UserRecord,
};

/// Every v1 route.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(auth::routes())
        .merge(profile::routes())
        .merge(users::routes())
        .merge(tenants::routes())
        .merge(accounts::routes())
        .merge(trunks::routes())
        .merge(flags::routes())
        .merge(numbers::routes())
        .merge(pools::routes())
        .merge(sms::routes())
        .merge(scenarios::routes())
        .merge(agents::routes())
        .merge(audio::routes())
        .merge(dictionaries::routes())
        .merge(stt::routes())
        .merge(tts::routes())
        .merge(communications::routes())
        .merge(results::routes())
        .merge(classifiers::routes())
        .merge(llm::routes())
        .merge(webhook_run::routes())
}

/// Hashes a password off the async runtime (argon2 is deliberately slow).
pub(crate) async fn hash_password(state: &AppState, pw: String) -> ApiResult<String> {
    let cost = state.settings.password_cost;
    tokio::task::spawn_blocking(move || password::hash_password(&pw, cost))
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::internal)
}

/// Verifies a password off the async runtime.
pub(crate) async fn verify_password(pw: String, phc: Option<String>) -> bool {
    let Some(phc) = phc else { return false };
    tokio::task::spawn_blocking(move || password::verify_password(&pw, &phc))
        .await
        .unwrap_or(false)
}

/// 422 unless a new password is long enough.
pub(crate) fn check_new_password(pw: &str) -> ApiResult<()> {
    if password::long_enough(pw) {
        Ok(())
    } else {
        Err(ApiError::unprocessable(
            "password_too_short",
            format!(
                "new_password: must be at least {} characters",
                password::MIN_PASSWORD_LEN
            ),
        ))
    }
}

/// Opens a session for `user` and records the login time.
pub(crate) async fn open_session(state: &AppState, user: &UserRecord) -> ApiResult<views::Session> {
    let token = tokens::generate(tokens::TokenKind::Session);
    let expires_at = Utc::now() + state.settings.session_ttl;
    state
        .store
        .session_create(&tokens::hash_secret(&token), &user.sid, expires_at)
        .await?;
    state.store.user_touch_login(&user.sid).await?;
    Ok(views::Session {
        session_token: token,
        user_sid: user.sid.clone(),
        account_sid: user.account_sid.clone(),
        tenant_sid: user.tenant_sid.clone(),
        email: user.email.clone(),
        expires_at,
    })
}

/// 422 unless an optional expiry lies in the future.
pub(crate) fn check_expiry(expires_at: Option<DateTime<Utc>>) -> ApiResult<()> {
    match expires_at {
        Some(t) if t <= Utc::now() => Err(ApiError::unprocessable(
            "invalid_expiry",
            "expires_at: must be in the future",
        )),
        _ => Ok(()),
    }
}
