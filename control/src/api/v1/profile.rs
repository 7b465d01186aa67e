//! GET /v1/profile: the caller's own user, account and evaluated feature flags.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::views::{Status, User};
use crate::api::caller::Authz;
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json},
    auth::{Capability, Principal, cap},
    flags::{self, Subject},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_profile))
}

/// The user part of the profile (User without deleted_at).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ProfileUser {
    pub sid: String,
    pub account_sid: String,
    pub email: String,
    pub name: String,
    pub roles: Vec<String>,
    pub status: Status,
    pub has_password: bool,
    pub last_login_at: Option<DateTime<Utc>>,
}

/// Account-level usage caps aggregated across the account's agents and strategies
/// (currently empty).
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct AccountLimits {}

/// The account's own profile view.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AccountOwn {
    pub sid: String,
    pub tenant_sid: String,
    pub tenant_name: String,
    pub name: String,
    pub email: String,
    pub external_id: String,
    pub country: String,
    pub timezone: String,
    pub phone: String,
    pub status: Status,
    /// Present only when the caller holds the limits:account capability.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<AccountLimits>,
}

/// Every declared flag, evaluated for the caller. The set is closed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FeatureFlags {
    pub global_llm: bool,
    pub global_stt: bool,
    pub global_tts: bool,
}

/// Profile response.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Profile {
    pub user: ProfileUser,
    pub account: AccountOwn,
    pub feature_flags: FeatureFlags,
}

/// The caller's own user, account and evaluated feature flags (users only; API keys
/// and the superuser have no profile: 403).
#[utoipa::path(get, path = "/v1/profile", tag = "profile", security(("bearer" = [])),
    responses((status = 200, body = Profile), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn get_profile(
    State(state): State<AppState>,
    auth: Authz<cap::ProfileRead>,
) -> ApiResult<Json<Profile>> {
    let Principal::User { user_sid, .. } = &auth.principal else {
        return Err(ApiError::forbidden("only users have a profile"));
    };
    if auth.header_account.is_some() || auth.header_tenant.is_some() {
        // Scope headers are optional here; if sent they must match.
        auth.account_scope(&state).await?;
    }
    let profile = state
        .store
        .profile_get(user_sid)
        .await?
        .ok_or_else(|| ApiError::unauthenticated("user gone"))?;
    let (user, account, rules) = (profile.user, profile.account, profile.flag_rules);
    let evaluated = flags::evaluate_all(
        &rules,
        Subject {
            account_sid: &account.sid,
            country: &account.country,
            region: &account.region,
        },
    );
    let flag = |n: &str| evaluated.iter().any(|(name, on)| *name == n && *on);
    let u = User::from(&user);
    Ok(Json(Profile {
        user: ProfileUser {
            sid: u.sid,
            account_sid: u.account_sid,
            email: u.email,
            name: u.name,
            roles: u.roles,
            status: u.status,
            has_password: u.has_password,
            last_login_at: u.last_login_at,
        },
        account: AccountOwn {
            sid: account.sid.clone(),
            tenant_sid: account.tenant_sid.clone(),
            tenant_name: account.tenant_name.clone(),
            name: account.name.clone(),
            email: account.email.clone(),
            external_id: account.external_id.clone(),
            country: account.country.clone(),
            timezone: account.timezone.clone(),
            phone: account.phone.clone(),
            status: Status::parse(&account.status),
            limits: auth
                .has(Capability::LimitsAccount)
                .then(AccountLimits::default),
        },
        feature_flags: FeatureFlags {
            global_llm: flag("global_llm"),
            global_stt: flag("global_stt"),
            global_tts: flag("global_tts"),
        },
    }))
}
