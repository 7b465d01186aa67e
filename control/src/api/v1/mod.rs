//! The v1 family. One module per resource group; [`groups`] lists their routers.

mod accounts;
mod adapter_error;
mod agents;
mod audio;
mod auth;
pub mod browser_call;
mod call_objects;
mod classifiers;
mod communication_stats;
pub mod communications;
mod dictionaries;
mod do_not_call;
mod flags;
mod llm;
mod numbers;
mod owned;
mod pools;
mod profile;
mod results;
mod scenarios;
mod sms;
mod strategies;
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

/// Enums that query parameters name by `value_type`: utoipa registers the schemas a
/// body reaches, not those of parameters, so they are listed here once.
#[derive(utoipa::OpenApi)]
#[openapi(components(schemas(
    users::SortOrder,
    users::UserOrderBy,
    numbers::NumberOrderBy,
    scenarios::ScenarioOrderBy,
    scenarios::AxisFilter,
    crate::adapters::llm::PartsBehavior,
    crate::communication::CommunicationStatus,
    crate::store::results::DeliveryStatus,
)))]
struct ParameterSchemas;

/// The v1 route groups, one router per module, in the order the API merges them.
pub(super) fn groups() -> Vec<OpenApiRouter<AppState>> {
    use utoipa::OpenApi as _;
    vec![
        OpenApiRouter::with_openapi(ParameterSchemas::openapi()),
        auth::routes(),
        profile::routes(),
        users::routes(),
        tenants::routes(),
        accounts::routes(),
        trunks::routes(),
        flags::routes(),
        numbers::routes(),
        pools::routes(),
        sms::routes(),
        scenarios::routes(),
        agents::routes(),
        strategies::routes(),
        do_not_call::routes(),
        audio::routes(),
        dictionaries::routes(),
        stt::routes(),
        tts::routes(),
        communications::routes(),
        communication_stats::routes(),
        browser_call::routes(),
        call_objects::routes(),
        results::routes(),
        classifiers::routes(),
        llm::routes(),
        webhook_run::routes(),
    ]
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

pub(crate) use crate::text_field::{NameRule, check_text};

#[cfg(test)]
mod tests {
    use super::NameRule;
    use crate::api::ApiError;

    #[test]
    fn names_refuse_control_characters() {
        let free = NameRule {
            max_chars: None,
            error: "invalid_name",
        };
        assert_eq!(
            NameRule::NAME.check("name", "  Café 東京 ").unwrap(),
            "Café 東京"
        );
        assert_eq!(free.check("name", " ").unwrap(), "");
        // Surrounding whitespace (control characters included) is trimmed, not refused.
        assert_eq!(NameRule::NAME.check("name", "\tok\n").unwrap(), "ok");
        for bad in [
            "a\0b",
            "a\tb",
            "line\nbreak",
            "esc\u{1b}[31m",
            "del\u{7f}",
            "c1\u{85}x\u{9f}",
        ] {
            for rule in [NameRule::NAME, free] {
                let e = ApiError::from(rule.check("name", bad).unwrap_err());
                assert_eq!(e.status.as_u16(), 422, "{bad:?}");
                assert_eq!(e.error, "invalid_name");
                assert!(
                    e.message
                        .starts_with("name: must not contain control characters"),
                    "{}",
                    e.message
                );
            }
        }
        assert_eq!(
            ApiError::from(NameRule::NAME.check("name", "a\0").unwrap_err()).message,
            "name: must not contain control characters (found U+0000)"
        );
        assert!(NameRule::NAME.check("name", "").is_err());
        assert!(NameRule::NAME.check("name", &"x".repeat(201)).is_err());
        assert!(NameRule::NAME.check("name", &"é".repeat(200)).is_ok());
    }
}
