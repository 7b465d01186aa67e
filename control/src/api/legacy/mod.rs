//! Legacy campaign family over HTTP Basic (`account_sid:account_token`) with an RPC-style
//! status object as the error body: the Profile group (`/profile…`), the account record
//! (`GET /v1/accounts/{sid}`), scenarios (`/v1/scenarios`), campaigns (`/v1/campaign`), and
//! under a campaign its contacts, attempts, attempt statistics and reports. Account tokens
//! are issued by `POST /v1/internal/account/{sid}/legacy-token`.
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

use super::{ApiError, ApiResult, AppState, ErrorBody, Json, Path};
use crate::api::caller::Authz;
use crate::{
    agent_settings::{GatewayType, Status},
    auth::{cap, tokens},
    store::{
        AccountRecord, CampaignField, CampaignFilter, CampaignOrder, LegacyCampaignRecord,
        LegacyProfileRecord, StoreError,
    },
    usecases::{NewAgent, UseCaseError},
};

mod accounts;
mod attempts;
mod campaigns;
mod contacts;
mod csv;
mod profile;
mod reports;
mod scenarios;

// The legacy family's request and response shapes (documented in the OpenAPI document).
pub use accounts::{LegacyAccountRecord, LegacyToken};
pub use attempts::{Attempt, AttemptListQuery, AttemptStatus, CreateAttempt};
pub use campaigns::{Campaign, CampaignListQuery, CreateCampaign};
pub use contacts::{Contact, ContactInput, ContactListQuery};
pub use profile::{LegacyProfile, ProfileInput};
pub use reports::{AttemptStatistics, CommunicationReportRow, ContactReportRow, ReportQuery};
pub use scenarios::{CreateLegacyScenario, LegacyScenario, ScenarioListQuery};

/// The legacy route groups, one router per module.
pub(super) fn groups() -> Vec<OpenApiRouter<AppState>> {
    vec![
        profile::routes(),
        accounts::routes(),
        campaigns::routes(),
        scenarios::routes(),
        contacts::routes(),
        attempts::routes(),
        reports::routes(),
    ]
}

/// RPC-style status object: the legacy family's error body.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RpcStatus {
    /// RPC status code (3 invalid argument, 5 not found, 7 permission denied, 9 failed
    /// precondition, 10 aborted, 13 internal, 16 unauthenticated).
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
    /// 400 FAILED_PRECONDITION: the request is well formed but the resource is not in a
    /// state that allows it (nothing to dial, an archived campaign).
    fn failed_precondition(m: impl Into<String>) -> Self {
        LegacyError::new(StatusCode::BAD_REQUEST, 9, m)
    }
    /// 409 ABORTED: the request conflicts with the resource's current state.
    fn aborted(m: impl Into<String>) -> Self {
        LegacyError::new(StatusCode::CONFLICT, 10, m)
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
    /// The same error with its message rewritten by `f`.
    fn with_message(mut self, f: impl FnOnce(&str) -> String) -> Self {
        self.message = f(&self.message);
        self
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
/// use-case code travels as the ErrorInfo reason; scenario validation entries
/// (`data.errors.scenario`) are listed in the message as `CODE message` pairs.
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
        let entries: Vec<String> = e
            .data
            .as_ref()
            .and_then(|d| d["errors"]["scenario"].as_array())
            .into_iter()
            .flatten()
            .map(|x| {
                format!(
                    "{} {}",
                    x["code"].as_str().unwrap_or_default(),
                    x["message"].as_str().unwrap_or_default()
                )
            })
            .collect();
        let message = if entries.is_empty() {
            e.message
        } else {
            format!("{}: {}", e.message, entries.join("; "))
        };
        LegacyError {
            status,
            code,
            message,
            reason: Some(e.error.into_owned()),
        }
    }
}

/// A use case's refusal, mapped as its v1 answer is.
impl From<UseCaseError> for LegacyError {
    fn from(e: UseCaseError) -> Self {
        ApiError::from(e).into()
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

// --- Query conventions shared by the legacy lists ------------------------------------------

/// The structured value when given (non-empty), else the flat one.
pub(super) fn pick(structured: Option<String>, flat: Option<String>) -> Option<String> {
    let set = |v: Option<String>| v.filter(|s| !s.is_empty());
    set(structured).or_else(|| set(flat))
}

/// An int64 parameter in its text form; 400 naming `name` otherwise.
pub(super) fn int_param(name: &str, v: Option<String>) -> Result<Option<i64>, LegacyError> {
    v.map(|v| {
        v.trim()
            .parse::<i64>()
            .map_err(|_| LegacyError::invalid(format!("{name}: not an integer: {v:?}")))
    })
    .transpose()
}

/// A boolean parameter (`true`/`1`, `false`/`0`); 400 naming `name` otherwise.
pub(super) fn bool_param(name: &str, v: Option<String>) -> Result<Option<bool>, LegacyError> {
    v.map(|v| match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(LegacyError::invalid(format!(
            "{name}: expected true or false, got {v:?}"
        ))),
    })
    .transpose()
}

/// Default and largest page of a legacy list (as v1 lists).
pub(super) const DEFAULT_LIMIT: i64 = 100;
pub(super) const MAX_LIMIT: i64 = 500;

/// The page of a legacy list from its `options.limit`/`limit` and `options.offset`/`offset`
/// parameters (structured form first): limit absent or 0 → 100, else 1..=500; offset ≥ 0,
/// default 0. 400 naming the parameter otherwise.
pub(super) fn page(
    options_limit: Option<String>,
    limit: Option<String>,
    options_offset: Option<String>,
    offset: Option<String>,
) -> Result<(i64, i64), LegacyError> {
    let limit_name = if options_limit.as_deref().is_some_and(|v| !v.is_empty()) {
        "options.limit"
    } else {
        "limit"
    };
    let limit = match int_param(limit_name, pick(options_limit, limit))? {
        None | Some(0) => DEFAULT_LIMIT,
        Some(n) if !(1..=MAX_LIMIT).contains(&n) => {
            return Err(LegacyError::invalid(format!(
                "{limit_name}: 0 to {MAX_LIMIT} (0 or absent means {DEFAULT_LIMIT})"
            )));
        }
        Some(n) => n,
    };
    let offset_name = if options_offset.as_deref().is_some_and(|v| !v.is_empty()) {
        "options.offset"
    } else {
        "offset"
    };
    let offset = int_param(offset_name, pick(options_offset, offset))?.unwrap_or(0);
    if offset < 0 {
        return Err(LegacyError::invalid(format!(
            "{offset_name}: must not be negative"
        )));
    }
    Ok((limit, offset))
}

/// A query string, or 400 INVALID_ARGUMENT naming the problem (unknown or repeated
/// parameter, malformed value).
fn query<T>(
    q: Result<axum::extract::Query<T>, axum::extract::rejection::QueryRejection>,
) -> Result<T, LegacyError> {
    q.map(|axum::extract::Query(q)| q)
        .map_err(|e| LegacyError::invalid(e.body_text()))
}

/// The campaign `sid` of the authenticated account; 404 for an unknown sid or another
/// account's campaign (the ownership check of every route under a campaign).
async fn campaign_of(
    state: &AppState,
    who: &LegacyAccount,
    sid: &str,
) -> Result<LegacyCampaignRecord, LegacyError> {
    state
        .store
        .legacy_campaign_get(&who.account_sid, sid)
        .await?
        .ok_or_else(|| LegacyError::not_found("campaign"))
}
