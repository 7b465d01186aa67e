//! The error body of the classifier and chat endpoints: `{name, message, code, status}`
//! (the spec's adapter envelope, not the standard v1 envelope), and extractors that turn
//! every rejection (auth, scope, body, path, query) into it.
//!
//! * `name`: the lower_snake_case use-case code (`classifier_not_found`,
//!   `scope_conflict`, `upstream_error`…), the same vocabulary as the standard
//!   envelope's `error`.
//! * `code`: an integer from the gRPC canonical status code space (3 invalid argument,
//!   5 not found, 7 permission denied, 10 aborted, 13 internal, 14 unavailable,
//!   16 unauthenticated); for an upstream error the upstream's own integer code when it
//!   gave one, else 0 ("unset").
//! * `status`: mirrors the HTTP status.

use std::borrow::Cow;

use axum::{
    extract::{FromRequest, FromRequestParts, Request},
    response::{IntoResponse, Response},
};
use http::{StatusCode, request::Parts};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    adapters::{ClassifierError, llm::LlmError},
    api::ApiError,
};

/// Wire form of an adapter error (OpenAPI schema `AdapterErrorBody`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AdapterErrorBody {
    /// Stable lower_snake_case use-case code.
    pub name: String,
    pub message: String,
    /// gRPC canonical code, or the upstream's code; 0 when unset.
    pub code: i64,
    /// The HTTP status.
    pub status: u16,
}

/// An error of an adapter route.
#[derive(Debug, Clone)]
pub struct AdapterError {
    pub status: StatusCode,
    pub name: Cow<'static, str>,
    pub message: String,
    pub code: i64,
}

/// The gRPC canonical code for an HTTP status.
pub fn canonical_code(status: StatusCode) -> i64 {
    match status.as_u16() {
        400 | 422 => 3,
        401 => 16,
        403 => 7,
        404 => 5,
        409 => 10,
        429 => 8,
        500 => 13,
        502 | 503 => 14,
        504 => 4,
        _ => 2,
    }
}

impl AdapterError {
    pub fn new(
        status: StatusCode,
        name: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
    ) -> Self {
        AdapterError {
            status,
            name: name.into(),
            message: message.into(),
            code: canonical_code(status),
        }
    }
    pub fn with_code(mut self, code: i64) -> Self {
        self.code = code;
        self
    }
    pub fn bad_request(name: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, name, message)
    }
    pub fn not_found(entity: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            format!("{entity}_not_found"),
            format!("{entity} not found"),
        )
    }
    pub fn body(&self) -> AdapterErrorBody {
        AdapterErrorBody {
            name: self.name.to_string(),
            message: self.message.clone(),
            code: self.code,
            status: self.status.as_u16(),
        }
    }
}

impl IntoResponse for AdapterError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

impl From<ApiError> for AdapterError {
    fn from(e: ApiError) -> Self {
        AdapterError::new(e.status, e.error, e.message)
    }
}

impl From<crate::store::StoreError> for AdapterError {
    fn from(e: crate::store::StoreError) -> Self {
        ApiError::from(e).into()
    }
}

impl From<ClassifierError> for AdapterError {
    fn from(e: ClassifierError) -> Self {
        let m = e.to_string();
        match e {
            ClassifierError::Invalid(_) => AdapterError::bad_request("invalid_body", m),
            ClassifierError::UnknownModel(_) => {
                AdapterError::new(StatusCode::NOT_FOUND, "model_not_found", m)
            }
            ClassifierError::NotFound => AdapterError::not_found("classifier"),
            ClassifierError::VersionNotFound(_) => {
                AdapterError::new(StatusCode::NOT_FOUND, "classifier_version_not_found", m)
            }
            ClassifierError::NotReady(_) => {
                AdapterError::new(StatusCode::CONFLICT, "classifier_not_ready", m)
            }
            ClassifierError::Conflict => {
                AdapterError::new(StatusCode::CONFLICT, "concurrent_save", m)
            }
            ClassifierError::Upstream(_) => {
                AdapterError::new(StatusCode::BAD_GATEWAY, "upstream_error", m)
            }
            ClassifierError::Store(s) => s.into(),
        }
    }
}

impl From<LlmError> for AdapterError {
    fn from(e: LlmError) -> Self {
        let m = e.to_string();
        match e {
            LlmError::Invalid(_) => AdapterError::bad_request("invalid_request", m),
            LlmError::NotFound => AdapterError::not_found("chat_stream"),
            LlmError::Upstream(_, code) => {
                AdapterError::new(StatusCode::BAD_GATEWAY, "upstream_error", m).with_code(code)
            }
        }
    }
}

pub type AdapterResult<T> = Result<T, AdapterError>;

/// Wraps a request-parts extractor whose rejection is the standard envelope
/// (`Authz<…>`, `Path<…>`, `Query<…>`) so it rejects with the adapter body instead.
#[derive(Debug)]
pub struct Adapted<T>(pub T);

impl<S, T> FromRequestParts<S> for Adapted<T>
where
    S: Send + Sync,
    T: FromRequestParts<S, Rejection = ApiError>,
{
    type Rejection = AdapterError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        T::from_request_parts(parts, state)
            .await
            .map(Adapted)
            .map_err(Into::into)
    }
}

/// Wraps a body extractor (`Json<…>`) the same way.
#[derive(Debug)]
pub struct AdaptedBody<T>(pub T);

impl<S, T> FromRequest<S> for AdaptedBody<T>
where
    S: Send + Sync,
    T: FromRequest<S, Rejection = ApiError>,
{
    type Rejection = AdapterError;
    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        T::from_request(req, state)
            .await
            .map(AdaptedBody)
            .map_err(Into::into)
    }
}
