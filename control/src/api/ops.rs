//! Operational routes: liveness, readiness, metrics and the OpenAPI document.

use std::{collections::BTreeMap, sync::OnceLock};

use axum::{extract::State, response::IntoResponse};
use http::{StatusCode, header};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{ApiError, AppState, Json};
use crate::readiness::ComponentStatus;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(openapi_json))
}

/// Health status.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: String,
}

/// Readiness: the database answers; the other components and their states.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    /// `ok`, or `degraded` while a component is `starting` or `down`.
    pub status: String,
    /// Components beside the database by name (`speech`: the local speech node), each
    /// `ok`, `starting`, `down` or `disabled`.
    pub components: BTreeMap<String, ComponentStatus>,
}

/// Liveness: the process serves HTTP.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

/// Readiness: 200 while the database answers, 503 when it does not. Components beside it
/// (the local speech node) are listed with their states; one that is `starting` or `down`
/// makes the status `degraded`, never the answer 503 (see `callsmith_control::readiness`).
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, body = Readiness), (status = 503, body = super::ErrorBody, description = "Database unreachable")))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Readiness>, ApiError> {
    if !state.store.ping().await {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "database_unavailable",
            "database unreachable",
        ));
    }
    let components = state.readiness.snapshot();
    let degraded = components.values().any(|c| c.degrades());
    Ok(Json(Readiness {
        status: if degraded { "degraded" } else { "ok" }.into(),
        components,
    }))
}

/// Prometheus metrics in the text exposition format.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8", body = String)))]
async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

/// This OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200, body = Object)))]
async fn openapi_json() -> impl IntoResponse {
    static DOC: OnceLock<String> = OnceLock::new();
    let body = DOC.get_or_init(|| super::openapi().to_json().unwrap_or_else(|_| "{}".into()));
    ([(header::CONTENT_TYPE, "application/json")], body.clone())
}
