//! GET /v1/adapters/tts/normalize/{path}: rewrites a synthesis URL to platform-safe
//! parameters (wraps `callsmith_media::tts::normalize_tts_url`: forces `f=wav`, keeps a
//! valid `sr` else 16000, drops `sampleRate`, `format`, `fsFix`, carries the text as
//! `text`, decoded from `text_b64` when `text` is absent).
//!
//! `{path}` is the engine URL and may contain slashes (`tts.example.com/v1/synth`; no
//! scheme means https), so the route is registered as a catch-all. Status codes the
//! spec leaves open, decided here:
//! * neither `text` nor `text_b64`, or `text_b64` that is not base64 of UTF-8: 400 with
//!   the body `{"error": "<message>"}` (the spec's TTS normalization envelope);
//! * an engine path that names no usable http(s) synthesis endpoint: 502
//!   `invalid_engine_path` in the standard envelope (the upstream engine address is
//!   unusable — the spec's upstream adapter error);
//! * 401 without valid credentials; 403 when scope headers conflict with the caller.

use axum::{
    extract::{RawQuery, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use callsmith_media::tts::{NormalizeError, normalize_tts_url};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::api::caller::Authz;
use crate::{
    api::{ApiError, AppState, ErrorBody},
    auth::cap,
};

/// The documented path; the served route is the catch-all form of it.
const ROUTE: &str = "/v1/adapters/tts/normalize/{*path}";

pub(super) fn routes() -> OpenApiRouter<AppState> {
    let (schemas, paths, method_router) = routes!(normalize);
    let mut doc = utoipa::openapi::OpenApi::default();
    doc.paths = paths;
    doc.components = Some(
        utoipa::openapi::ComponentsBuilder::new()
            .schemas_from_iter(schemas)
            .build(),
    );
    OpenApiRouter::with_openapi(doc).route(ROUTE, method_router)
}

/// Result of a normalization.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NormalizedUrl {
    /// The normalized synthesis URL.
    pub url: String,
}

/// Body of a normalization without text.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NormalizeTextError {
    pub error: String,
}

/// Query of a normalization (every other parameter is carried over to the URL).
#[derive(Debug, Deserialize, IntoParams)]
#[allow(dead_code)]
pub struct NormalizeQuery {
    /// Plain text; required unless text_b64 is set.
    text: Option<String>,
    /// Base64-encoded text; required unless text is set.
    text_b64: Option<String>,
    /// Synthesis sample rate (default 16000).
    sr: Option<u32>,
}

/// Rewrite a synthesis URL to platform-safe parameters.
#[utoipa::path(get, path = "/v1/adapters/tts/normalize/{path}", tag = "tts",
    params(("path" = String, Path, description = "Engine URL to normalize (may contain slashes; https assumed without a scheme)"), NormalizeQuery,
        ("X-Account-Sid" = Option<String>, Header)), security(("bearer" = [])),
    responses((status = 200, body = NormalizedUrl), (status = 400, body = NormalizeTextError, description = "text and text_b64 missing, or text_b64 invalid"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 502, body = ErrorBody, description = "The engine path names no usable synthesis endpoint")))]
async fn normalize(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    axum::extract::Path(path): axum::extract::Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    if auth.header_account.is_some() || auth.header_tenant.is_some() {
        // Scope headers are optional here; if sent they must match the caller.
        if let Err(e) = auth.account_scope(&state).await {
            return e.into_response();
        }
    }
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(raw.as_deref().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    match normalize_tts_url(&path, &query) {
        Ok(url) => (StatusCode::OK, axum::Json(NormalizedUrl { url })).into_response(),
        Err(e @ (NormalizeError::MissingText | NormalizeError::InvalidTextB64)) => (
            StatusCode::BAD_REQUEST,
            axum::Json(NormalizeTextError {
                error: e.to_string(),
            }),
        )
            .into_response(),
        Err(e @ NormalizeError::InvalidUrl(_)) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "invalid_engine_path",
            e.to_string(),
        )
        .into_response(),
    }
}
