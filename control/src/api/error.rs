//! The standard error envelope and the error-code registry.
//!
//! Every error response of the v1 family is `{"error", "code", "message", "data"?}`:
//! `error` is a stable lower_snake_case use-case code (`user_not_found`,
//! `scope_conflict`…), `code` the registered machine code. [`REGISTRY`] is the single
//! source of truth for the codes (docs/error-codes.md is checked against it by a test);
//! it is append-only: never renumber or reuse an entry.

use std::borrow::Cow;

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::{store::StoreError, usecases::UseCaseError};

/// One registered machine code.
#[derive(Debug, Clone, Copy)]
pub struct RegisteredCode {
    pub code: &'static str,
    pub status: u16,
    pub meaning: &'static str,
}

/// The append-only registry. ERR001–ERR020 are the generic codes by status class.
pub const REGISTRY: &[RegisteredCode] = &[
    RegisteredCode {
        code: "ERR001",
        status: 400,
        meaning: "Invalid request body or parameters",
    },
    RegisteredCode {
        code: "ERR002",
        status: 401,
        meaning: "Missing or invalid credentials",
    },
    RegisteredCode {
        code: "ERR003",
        status: 403,
        meaning: "Caller has no access (includes scope_conflict)",
    },
    RegisteredCode {
        code: "ERR004",
        status: 404,
        meaning: "Resource does not exist or is outside the caller's scope",
    },
    RegisteredCode {
        code: "ERR005",
        status: 409,
        meaning: "Request conflicts with current resource state",
    },
    RegisteredCode {
        code: "ERR006",
        status: 422,
        meaning: "Semantic validation failure",
    },
    RegisteredCode {
        code: "ERR007",
        status: 500,
        meaning: "Internal server error",
    },
    RegisteredCode {
        code: "ERR008",
        status: 502,
        meaning: "Bad gateway (upstream adapter error)",
    },
    RegisteredCode {
        code: "ERR009",
        status: 405,
        meaning: "Method not allowed on this route",
    },
    RegisteredCode {
        code: "ERR010",
        status: 413,
        meaning: "Request body too large",
    },
    RegisteredCode {
        code: "ERR011",
        status: 415,
        meaning: "Unsupported media type",
    },
    RegisteredCode {
        code: "ERR012",
        status: 429,
        meaning: "Too many requests",
    },
    RegisteredCode {
        code: "ERR013",
        status: 503,
        meaning: "Service unavailable (dependency not ready)",
    },
    RegisteredCode {
        code: "ERR014",
        status: 504,
        meaning: "Upstream timeout",
    },
    RegisteredCode {
        code: "ERR015",
        status: 408,
        meaning: "Request not received in time",
    },
];

/// The registered code for a status (500's code for an unregistered status).
pub fn code_for_status(status: StatusCode) -> &'static str {
    REGISTRY
        .iter()
        .find(|c| c.status == status.as_u16())
        .map(|c| c.code)
        .unwrap_or("ERR007")
}

/// The wire form of an error (also the OpenAPI schema `ErrorBody`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorBody {
    /// Stable lower_snake_case use-case code, e.g. `user_not_found`, `scope_conflict`.
    pub error: String,
    /// Registered machine code (ERRxxx), see docs/error-codes.md.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
    /// Structured details, present only where there is structure to carry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

/// An error a handler returns; renders as the standard envelope.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub error: Cow<'static, str>,
    pub message: String,
    /// Boxed to keep `Result<_, ApiError>` small.
    pub data: Option<Box<serde_json::Value>>,
    /// Seconds sent as `Retry-After` (429 answers).
    pub retry_after: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(
        status: StatusCode,
        error: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            error: error.into(),
            message: message.into(),
            data: None,
            retry_after: None,
        }
    }
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(Box::new(data));
        self
    }
    /// 400 `invalid_request` (or a more specific `error`).
    pub fn bad_request(error: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, error, message)
    }
    /// 401 `unauthenticated`.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthenticated", message)
    }
    /// 403 `forbidden`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    /// 403 `scope_conflict`: X-Account-Sid / X-Tenant-Sid disagree with the caller's scope.
    pub fn scope_conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "scope_conflict", message)
    }
    /// 404 `<entity>_not_found`.
    pub fn not_found(entity: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            format!("{entity}_not_found"),
            format!("{entity} not found"),
        )
    }
    /// 409 with a use-case code; `data.topic` is `conflict`.
    pub fn conflict(error: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, error, message)
            .with_data(serde_json::json!({"topic": "conflict"}))
    }
    /// 422 with a use-case code; `data.topic` is `validation`.
    pub fn unprocessable(error: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, error, message)
            .with_data(serde_json::json!({"topic": "validation"}))
    }
    /// 429 with a use-case code and `Retry-After: <retry_after_secs>`.
    pub fn too_many_requests(
        error: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
        retry_after_secs: u64,
    ) -> Self {
        let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, error, message);
        e.retry_after = Some(retry_after_secs);
        e
    }
    /// 500; the cause is logged, never sent.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "internal server error",
        )
    }
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.error.to_string(),
            code: code_for_status(self.status).to_string(),
            message: self.message.clone(),
            data: self.data.as_deref().cloned(),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.error,
            self.message
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
        }
        response
    }
}

impl From<crate::scenario_check::CheckError> for ApiError {
    fn from(e: crate::scenario_check::CheckError) -> Self {
        match e {
            crate::scenario_check::CheckError::Store(e) => e.into(),
            e => ApiError::internal(e),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => ApiError::not_found("resource"),
            StoreError::Unique => {
                ApiError::conflict("conflict", "a resource with these values already exists")
            }
            StoreError::Conflict(m) => ApiError::conflict("conflict", m),
            StoreError::PurgeFailed(m) => ApiError::internal(format!("purge failed: {m}")),
            other => ApiError::internal(other),
        }
    }
}

/// A use case's refusal in the v1 envelope: a broken rule is 422 (`data.topic` is
/// `validation`, with the error's own `data` after it), an exhausted share 429 with
/// `Retry-After`, a conflict with a running request 409, an unavailable operation 503, a
/// vanished entity 404; store failures answer as everywhere.
impl From<UseCaseError> for ApiError {
    fn from(e: UseCaseError) -> Self {
        match e {
            UseCaseError::Invalid {
                reason,
                message,
                data,
            } => {
                let e = ApiError::unprocessable(reason, message);
                match data {
                    Some(serde_json::Value::Object(more)) => {
                        let mut d = serde_json::Map::new();
                        d.insert("topic".into(), "validation".into());
                        d.extend(more);
                        e.with_data(serde_json::Value::Object(d))
                    }
                    _ => e,
                }
            }
            UseCaseError::TooMany {
                reason,
                message,
                retry_after_secs,
            } => ApiError::too_many_requests(reason, message, retry_after_secs),
            UseCaseError::Malformed { reason, message } => ApiError::bad_request(reason, message),
            UseCaseError::Conflict { reason, message } => ApiError::conflict(reason, message),
            UseCaseError::Unavailable { reason, message } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, reason, message)
            }
            UseCaseError::NotFound { entity } => ApiError::not_found(entity),
            UseCaseError::Store(e) => e.into(),
            UseCaseError::Internal(cause) => ApiError::internal(cause),
        }
    }
}

/// Fallback for unmatched routes: 404 `route_not_found` in the envelope.
pub async fn route_not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "route_not_found", "no such route")
}

/// Fallback for a known route with another method: 405 `method_not_allowed`.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this route",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_unique_and_generic_codes_are_in_range() {
        let mut codes: Vec<_> = REGISTRY.iter().map(|c| c.code).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), REGISTRY.len());
        let mut statuses: Vec<_> = REGISTRY.iter().map(|c| c.status).collect();
        statuses.sort();
        statuses.dedup();
        assert_eq!(
            statuses.len(),
            REGISTRY.len(),
            "one generic code per status"
        );
        assert_eq!(code_for_status(StatusCode::NOT_FOUND), "ERR004");
    }

    #[test]
    fn docs_list_every_registered_code() {
        let doc = include_str!("../../../docs/error-codes.md");
        for c in REGISTRY {
            let row = format!("| {} | {} |", c.code, c.status);
            assert!(
                doc.contains(&row),
                "docs/error-codes.md lacks the row `{row}`"
            );
        }
    }
}
