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
use serde_json::value::RawValue;

use super::error::ApiError;

/// Largest request body the router reads (JSON bodies; the audio upload route sets its
/// own limit). `api::router` applies it as axum's `DefaultBodyLimit`.
pub const MAX_JSON_BODY_BYTES: usize = 2 * 1024 * 1024;

/// JSON body extractor and responder. Malformed JSON, a wrong type, a missing field or an
/// unknown field (with `deny_unknown_fields`) is 400 `invalid_body`; a body over
/// [`MAX_JSON_BODY_BYTES`] is 413 `payload_too_large`. A number with a zero fraction
/// (`5.0`) is an integer, as JSON Schema counts it: an integer field takes it. Every body
/// this extractor reads is an object: an array is 400 too (serde would otherwise fill a
/// struct from an array's items in field order).
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let axum::Json(raw) = axum::Json::<Box<RawValue>>::from_request(req, state)
            .await
            .map_err(json_rejection)?;
        if raw.get().starts_with('[') {
            return Err(ApiError::bad_request(
                "invalid_body",
                "invalid body: expected a JSON object, got an array",
            ));
        }
        match axum::Json::<T>::from_bytes(raw.get().as_bytes()) {
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(rejection) => match integral_floats_as_integers(raw.get()) {
                // The error after the integral floats are read as integers is the one
                // left to report (a `5.0` may only have hidden an unknown field).
                Some(v) => serde_path_to_error::deserialize::<_, T>(v)
                    .map(Json)
                    .map_err(|e| {
                        ApiError::bad_request("invalid_body", format!("invalid body: {e}"))
                    }),
                None => Err(json_rejection(rejection)),
            },
        }
    }
}

/// The body with every number that has a zero fraction and fits an i64 written as an
/// integer, or None when it has no such number.
fn integral_floats_as_integers(text: &str) -> Option<serde_json::Value> {
    fn walk(v: &mut serde_json::Value) -> bool {
        match v {
            serde_json::Value::Number(n) if n.is_f64() => match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 => {
                    *v = serde_json::Value::from(f as i64);
                    true
                }
                _ => false,
            },
            serde_json::Value::Array(items) => items.iter_mut().fold(false, |c, i| walk(i) | c),
            serde_json::Value::Object(map) => map.values_mut().fold(false, |c, i| walk(i) | c),
            _ => false,
        }
    }
    let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
    walk(&mut v).then_some(v)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Limits {
        cps: i64,
        ratio: f64,
    }

    async fn read(body: &str) -> Result<Limits, ApiError> {
        let req = Request::builder()
            .method("POST")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.to_string()))
            .expect("request");
        Json::<Limits>::from_request(req, &())
            .await
            .map(|Json(v)| v)
    }

    #[tokio::test]
    async fn an_integral_float_is_an_integer() {
        assert_eq!(
            read(r#"{"cps": 5.0, "ratio": 2}"#).await.expect("5.0 is 5"),
            Limits { cps: 5, ratio: 2.0 }
        );
        assert_eq!(
            read(r#"{"cps": -7e2, "ratio": 0.5}"#)
                .await
                .expect("-7e2 is -700"),
            Limits {
                cps: -700,
                ratio: 0.5
            }
        );
    }

    #[tokio::test]
    async fn a_fraction_or_a_wrong_body_keeps_its_error() {
        for (body, names) in [
            (r#"{"cps": 5.5, "ratio": 1}"#, "cps"),
            (r#"{"cps": 1e300, "ratio": 1}"#, "cps"),
            (r#"{"cps": 5.0, "ratio": 1, "other": 1}"#, "other"),
            (r#"{"cps": "5", "ratio": 1}"#, "cps"),
        ] {
            let e = read(body).await.expect_err(body);
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{body}");
            assert_eq!(e.error, "invalid_body", "{body}");
            assert!(e.message.contains(names), "{body}: {}", e.message);
        }
        let e = read(r#"{"cps": 5.0,"#).await.expect_err("malformed");
        assert!(e.message.starts_with("malformed JSON"), "{}", e.message);
        // serde would read a struct from an array's items in field order.
        let e = read(" [5, 1.5]").await.expect_err("an array");
        assert_eq!(e.error, "invalid_body");
        assert!(
            e.message.contains("expected a JSON object"),
            "{}",
            e.message
        );
    }
}
