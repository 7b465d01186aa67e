//! Legacy campaign family over HTTP Basic (`account_sid:account_token`) with an RPC-style
//! status object as the error body: the Profile group (`/profile…`), the account record
//! (`GET /v1/accounts/{sid}`) and campaigns (`/v1/campaign`). Account tokens are issued by
//! `POST /v1/internal/account/{sid}/legacy-token`.
//!
//! A legacy campaign is the legacy view of an agent: the same row and sid, so a campaign
//! created here is an agent on the v1 routes and every agent is a campaign here. The
//! campaign's `number` is the identifier of the agent's number, `pool_sid` its number pool,
//! `archived` whether it has an archive time; `description` (which agents do not have) is
//! kept beside the agent. Shapes and query semantics: docs/control-api.md, "Legacy family".

use axum::{
    extract::{FromRequestParts, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use base64::Engine;
use chrono::{DateTime, Utc};
use http::request::Parts;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    ApiError, ApiResult, AppState, ErrorBody, Json, Path,
    v1::{
        agents::{CreateAgent, GatewayType, create_in_account},
        views::Status,
    },
};
use crate::{
    auth::{Authz, cap, tokens},
    store::{
        AccountRecord, CampaignField, CampaignFilter, CampaignOrder, LegacyCampaignRecord,
        LegacyProfileRecord, StoreError,
    },
};

mod accounts;
mod campaigns;
mod profile;

// The legacy family's request and response shapes (documented in the OpenAPI document).
pub use accounts::{LegacyAccountRecord, LegacyToken};
pub use campaigns::{Campaign, CampaignListQuery, CreateCampaign};
pub use profile::{LegacyProfile, ProfileInput};

/// The legacy route groups, one router per module.
pub(super) fn groups() -> Vec<OpenApiRouter<AppState>> {
    vec![profile::routes(), accounts::routes(), campaigns::routes()]
}

/// RPC-style status object: the legacy family's error body.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RpcStatus {
    /// RPC status code (3 invalid argument, 5 not found, 7 permission denied, 10 aborted,
    /// 13 internal, 16 unauthenticated).
    pub code: i32,
    pub message: String,
    /// Empty, or one `google.rpc.ErrorInfo` (`@type`, `reason`: the stable
    /// lower_snake_case use-case code, `domain`: `callsmith`).
    #[schema(value_type = Vec<Object>)]
    pub details: Vec<serde_json::Value>,
}

/// An error of the legacy family: HTTP status, RPC code, message and an optional reason
/// (rendered as an ErrorInfo detail).
#[derive(Debug)]
pub struct LegacyError {
    status: StatusCode,
    code: i32,
    message: String,
    reason: Option<String>,
}

impl LegacyError {
    fn new(status: StatusCode, code: i32, message: impl Into<String>) -> Self {
        LegacyError {
            status,
            code,
            message: message.into(),
            reason: None,
        }
    }
    fn invalid(m: impl Into<String>) -> Self {
        LegacyError::new(StatusCode::BAD_REQUEST, 3, m)
    }
    fn not_found(what: &str) -> Self {
        LegacyError::new(StatusCode::NOT_FOUND, 5, format!("{what} not found"))
    }
    fn unauthenticated() -> Self {
        LegacyError::new(
            StatusCode::UNAUTHORIZED,
            16,
            "invalid account_sid or account_token",
        )
    }
    fn internal() -> Self {
        LegacyError::new(StatusCode::INTERNAL_SERVER_ERROR, 13, "internal error")
    }
}

impl From<StoreError> for LegacyError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => LegacyError::not_found("resource"),
            other => {
                tracing::error!(error = %other, "legacy store error");
                LegacyError::internal()
            }
        }
    }
}

/// A v1 rule violation seen through the legacy family, with the status mapping RPC
/// gateways use: 400 and 422 → 400 INVALID_ARGUMENT, 401 → UNAUTHENTICATED, 403 →
/// PERMISSION_DENIED, 404 → NOT_FOUND, 409 → ABORTED, anything else → 500 INTERNAL. The v1
/// use-case code travels as the ErrorInfo reason.
impl From<ApiError> for LegacyError {
    fn from(e: ApiError) -> Self {
        let (status, code) = match e.status.as_u16() {
            400 | 422 => (StatusCode::BAD_REQUEST, 3),
            401 => (StatusCode::UNAUTHORIZED, 16),
            403 => (StatusCode::FORBIDDEN, 7),
            404 => (StatusCode::NOT_FOUND, 5),
            409 => (StatusCode::CONFLICT, 10),
            _ => {
                tracing::error!(error = %e.message, "legacy internal error");
                return LegacyError::internal();
            }
        };
        LegacyError {
            status,
            code,
            message: e.message,
            reason: Some(e.error.into_owned()),
        }
    }
}

impl IntoResponse for LegacyError {
    fn into_response(self) -> Response {
        let details = self
            .reason
            .map(|r| {
                vec![serde_json::json!({
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": r,
                    "domain": "callsmith",
                })]
            })
            .unwrap_or_default();
        let mut r = (
            self.status,
            axum::Json(RpcStatus {
                code: self.code,
                message: self.message,
                details,
            }),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
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

/// A JSON body, or 400 INVALID_ARGUMENT naming the problem.
fn body<T>(
    r: Result<axum::Json<T>, axum::extract::rejection::JsonRejection>,
) -> Result<T, LegacyError> {
    r.map(|axum::Json(b)| b)
        .map_err(|e| LegacyError::invalid(e.body_text()))
}
