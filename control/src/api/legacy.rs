//! Legacy campaign family, Profile group: `/profile…` with HTTP Basic
//! (`account_sid:account_token`) and an RPC-style status object as the error body.
//! Account tokens are issued by `POST /v1/internal/account/{sid}/legacy-token`.

use axum::{
    extract::{FromRequestParts, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use base64::Engine;
use chrono::{DateTime, Utc};
use http::request::Parts;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{ApiResult, AppState, ErrorBody, Json, Path};
use crate::{
    auth::{Authz, cap, tokens},
    store::{LegacyProfileRecord, StoreError},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_profile))
        .routes(routes!(get_profile, delete_profile, patch_profile))
        .routes(routes!(issue_legacy_token))
}

/// RPC-style status object: the legacy family's error body.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RpcStatus {
    /// RPC status code (3 invalid argument, 5 not found, 7 permission denied, 13 internal, 16 unauthenticated).
    pub code: i32,
    pub message: String,
    #[schema(value_type = Vec<Object>)]
    pub details: Vec<serde_json::Value>,
}

/// An error of the legacy family.
#[derive(Debug)]
pub struct LegacyError(StatusCode, i32, String);

impl LegacyError {
    fn invalid(m: impl Into<String>) -> Self {
        LegacyError(StatusCode::BAD_REQUEST, 3, m.into())
    }
    fn not_found() -> Self {
        LegacyError(StatusCode::NOT_FOUND, 5, "profile not found".into())
    }
    fn unauthenticated() -> Self {
        LegacyError(
            StatusCode::UNAUTHORIZED,
            16,
            "invalid account_sid or account_token".into(),
        )
    }
}

impl From<StoreError> for LegacyError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => LegacyError::not_found(),
            other => {
                tracing::error!(error = %other, "legacy profile store error");
                LegacyError(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    13,
                    "internal error".into(),
                )
            }
        }
    }
}

impl IntoResponse for LegacyError {
    fn into_response(self) -> Response {
        let mut r = (
            self.0,
            axum::Json(RpcStatus {
                code: self.1,
                message: self.2,
                details: vec![],
            }),
        )
            .into_response();
        if self.0 == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Basic realm=\"callsmith\""),
            );
        }
        r
    }
}

/// The account authenticated by HTTP Basic `account_sid:account_token`.
#[derive(Debug, Clone)]
pub struct LegacyAccount {
    pub tenant_sid: String,
    pub account_sid: String,
}

impl FromRequestParts<AppState> for LegacyAccount {
    type Rejection = LegacyError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let Some((scheme, b64)) = header.split_once(' ') else {
            return Err(LegacyError::unauthenticated());
        };
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(LegacyError::unauthenticated());
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|_| LegacyError::unauthenticated())?;
        let decoded = String::from_utf8(decoded).map_err(|_| LegacyError::unauthenticated())?;
        let Some((account_sid, token)) = decoded.split_once(':') else {
            return Err(LegacyError::unauthenticated());
        };
        match state
            .store
            .legacy_token_check(account_sid, &tokens::hash_secret(token))
            .await?
        {
            Some(tenant_sid) => Ok(LegacyAccount {
                tenant_sid,
                account_sid: account_sid.to_string(),
            }),
            None => Err(LegacyError::unauthenticated()),
        }
    }
}

/// Legacy Profile.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Profile {
    pub id: String,
    pub email: String,
    pub timezone: String,
    pub creation_time: DateTime<Utc>,
    pub update_time: DateTime<Utc>,
}

impl From<&LegacyProfileRecord> for Profile {
    fn from(p: &LegacyProfileRecord) -> Self {
        Profile {
            id: p.id.clone(),
            email: p.email.clone(),
            timezone: p.timezone.clone(),
            creation_time: p.creation_time,
            update_time: p.update_time,
        }
    }
}

/// Body of POST /profile and PATCH /profile/{id}: every field optional; `id`,
/// `creation_time` and `update_time` are maintained by the service and ignored on input.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileInput {
    pub id: Option<String>,
    pub email: Option<String>,
    pub timezone: Option<String>,
    pub creation_time: Option<DateTime<Utc>>,
    pub update_time: Option<DateTime<Utc>>,
}

fn body(
    r: Result<axum::Json<ProfileInput>, axum::extract::rejection::JsonRejection>,
) -> Result<ProfileInput, LegacyError> {
    r.map(|axum::Json(b)| b)
        .map_err(|e| LegacyError::invalid(e.body_text()))
}

fn timezone(tz: &str) -> Result<String, LegacyError> {
    tz.parse::<chrono_tz::Tz>()
        .map(|t| t.name().to_string())
        .map_err(|_| LegacyError::invalid(format!("timezone: unknown IANA time zone {tz:?}")))
}

/// Create a legacy profile of the authenticated account.
#[utoipa::path(post, path = "/profile", tag = "legacy", request_body = ProfileInput, security(("basic" = [])),
    responses((status = 200, body = Profile), (status = 400, body = RpcStatus), (status = 401, body = RpcStatus), (status = 500, body = RpcStatus)))]
async fn create_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    b: Result<axum::Json<ProfileInput>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<Profile>, LegacyError> {
    let b = body(b)?;
    let tz = timezone(b.timezone.as_deref().unwrap_or("UTC"))?;
    let id = crate::ids::new_sid("prf");
    let p = state
        .store
        .legacy_profile_create(
            &id,
            &who.tenant_sid,
            &who.account_sid,
            b.email.as_deref().unwrap_or("").trim(),
            &tz,
        )
        .await?;
    Ok(axum::Json(Profile::from(&p)))
}

/// Get a legacy profile of the authenticated account.
#[utoipa::path(get, path = "/profile/{id}", tag = "legacy", params(("id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = Profile), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus)))]
async fn get_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<axum::Json<Profile>, LegacyError> {
    let p = state
        .store
        .legacy_profile_get(&who.account_sid, &id)
        .await?
        .ok_or_else(LegacyError::not_found)?;
    Ok(axum::Json(Profile::from(&p)))
}

/// Delete a legacy profile; 200 with an empty object.
#[utoipa::path(delete, path = "/profile/{id}", tag = "legacy", params(("id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = Object, description = "Empty object"), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus)))]
async fn delete_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<axum::Json<serde_json::Value>, LegacyError> {
    state
        .store
        .legacy_profile_delete(&who.account_sid, &id)
        .await?;
    Ok(axum::Json(serde_json::json!({})))
}

/// Update a legacy profile (`email`, `timezone`; the times are service-maintained).
#[utoipa::path(patch, path = "/profile/{id}", tag = "legacy", params(("id" = String, Path, description = "profile.id")), request_body = ProfileInput,
    security(("basic" = [])),
    responses((status = 200, body = Profile), (status = 400, body = RpcStatus), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus)))]
async fn patch_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(id): axum::extract::Path<String>,
    b: Result<axum::Json<ProfileInput>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<Profile>, LegacyError> {
    let b = body(b)?;
    let tz = b.timezone.as_deref().map(timezone).transpose()?;
    let p = state
        .store
        .legacy_profile_update(
            &who.account_sid,
            &id,
            b.email.as_deref().map(str::trim),
            tz.as_deref(),
        )
        .await?;
    Ok(axum::Json(Profile::from(&p)))
}

/// Legacy credentials of an account.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LegacyToken {
    pub account_sid: String,
    /// HTTP Basic password for the legacy family; shown once.
    pub account_token: String,
}

/// Issue (or rotate) the account_token for the legacy family's HTTP Basic.
#[utoipa::path(post, path = "/v1/internal/account/{sid}/legacy-token", tag = "accounts", params(("sid" = String, Path)),
    security(("bearer" = [])),
    responses((status = 201, body = LegacyToken), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn issue_legacy_token(
    State(state): State<AppState>,
    auth: Authz<cap::AccountKeysManage>,
    Path(sid): Path<String>,
) -> ApiResult<(StatusCode, Json<LegacyToken>)> {
    let a = auth.visible_account(&state, &sid, false).await?;
    let token = tokens::generate(tokens::TokenKind::LegacyAccount);
    state
        .store
        .legacy_token_set(&a.tenant_sid, &a.sid, &tokens::hash_secret(&token))
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(LegacyToken {
            account_sid: a.sid,
            account_token: token,
        }),
    ))
}
