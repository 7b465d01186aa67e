//! Prometheus metrics: request counts and latency by matched route, method and status.

use std::time::Instant;

use axum::{
    extract::{MatchedPath, Request, State},
    middleware::Next,
    response::Response,
};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::Registry,
};

use super::AppState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
    status: u16,
}

/// The registry and the HTTP metric families. Later subsystems may register their own
/// metrics through [`Metrics::registry`].
#[derive(Debug)]
pub struct Metrics {
    registry: parking_lot::Mutex<Registry>,
    requests: Family<RouteLabels, Counter>,
    latency: Family<RouteLabels, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RouteLabels, Counter>::default();
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ])
        });
        registry.register(
            "callsmith_http_requests",
            "HTTP requests served",
            requests.clone(),
        );
        registry.register(
            "callsmith_http_request_duration_seconds",
            "HTTP request latency",
            latency.clone(),
        );
        Metrics {
            registry: parking_lot::Mutex::new(registry),
            requests,
            latency,
        }
    }

    /// Mutable access to the registry, to register further metrics.
    pub fn registry(&self) -> parking_lot::MutexGuard<'_, Registry> {
        self.registry.lock()
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry.lock()) {
            tracing::error!(error = %e, "metrics encoding failed");
        }
        out
    }
}

/// Middleware recording every request under its matched route template (unmatched
/// requests share the label `unmatched`, so random paths cannot blow up cardinality).
pub(super) async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().as_str().to_string();
    let start = Instant::now();
    let resp = next.run(req).await;
    let labels = RouteLabels {
        method,
        route,
        status: resp.status().as_u16(),
    };
    state.metrics.requests.get_or_create(&labels).inc();
    state
        .metrics
        .latency
        .get_or_create(&labels)
        .observe(start.elapsed().as_secs_f64());
    resp
}
