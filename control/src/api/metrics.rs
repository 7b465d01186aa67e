//! Prometheus metrics: request counts and latency by matched route, method and status.

use std::time::Instant;

use super::AppState;
use axum::{
    extract::{MatchedPath, Request, State},
    middleware::Next,
    response::Response,
};

/// Middleware recording every request under its matched route template (unmatched
/// requests share the label `unmatched`, so random paths cannot blow up cardinality).
pub(super) async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().clone();
    let start = Instant::now();
    let resp = next.run(req).await;
    state.metrics.record_request(
        method.as_str(),
        route,
        resp.status().as_u16(),
        start.elapsed().as_secs_f64(),
    );
    resp
}
