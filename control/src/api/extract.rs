//! Request extractors that turn every rejection into the standard envelope (400 with a
//! message naming the offending field, 413 for a body over [`MAX_JSON_BODY_BYTES`]),
//! instead of axum's plain-text rejections.
//! Request types derive `Deserialize` with `#[serde(deny_unknown_fields)]`.

use axum::{
    extract::{
        FromRequest, FromRequestParts, Request,
        rejection::{JsonRejection, PathRejection, QueryRejection},
    },
    response::{IntoResponse, Response},
};
use http::{StatusCode, request::Parts};
use serde::{Serialize, de::DeserializeOwned};

use super::error::ApiError;

/// Largest request body the router reads (JSON bodies; the audio upload route sets its
/// own limit). `api::router` applies it as axum's `DefaultBodyLimit`.
pub const MAX_JSON_BODY_BYTES: usize = 2 * 1024 * 1024;

/// JSON body extractor and responder. Malformed JSON, a wrong type, a missing field or an
/// unknown field (with `deny_unknown_fields`) is 400 `invalid_body`; a body over
/// [`MAX_JSON_BODY_BYTES`] is 413 `payload_too_large`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body larger than {MAX_JSON_BODY_BYTES} bytes"),
        );
    }
    let message = match &r {
        JsonRejection::JsonDataError(e) => {
            format!("invalid body: {}", inner_message(&e.body_text()))
        }
        JsonRejection::JsonSyntaxError(e) => {
            format!("malformed JSON: {}", inner_message(&e.body_text()))
        }
        JsonRejection::MissingJsonContentType(_) => {
            "expected Content-Type: application/json".to_string()
        }
        other => other.body_text(),
    };
    ApiError::bad_request("invalid_body", message)
}

/// axum prefixes its messages ("Failed to deserialize the JSON body into the target
/// type: "); keep the part that names the field.
fn inner_message(text: &str) -> String {
    match text.split_once(": ") {
        Some((head, rest)) if head.starts_with("Failed to") => rest.to_string(),
        _ => text.to_string(),
    }
}

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// Query-string extractor; bad or unknown parameters are 400 `invalid_query`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Query(v)),
            Err(r) => Err(query_rejection(r)),
        }
    }
}

fn query_rejection(r: QueryRejection) -> ApiError {
    ApiError::bad_request(
        "invalid_query",
        format!(
            "invalid query parameters: {}",
            inner_message(&r.body_text())
        ),
    )
}

/// Path-parameter extractor; a bad segment is 400 `invalid_path`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Path<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(Path(v)),
            Err(r) => Err(path_rejection(r)),
        }
    }
}

fn path_rejection(r: PathRejection) -> ApiError {
    ApiError::bad_request(
        "invalid_path",
        format!("invalid path parameter: {}", inner_message(&r.body_text())),
    )
}
