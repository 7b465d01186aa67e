//! The process's Prometheus registry: the HTTP request families (recorded by the HTTP
//! layer's middleware) and whatever the call engine registers (turn latency, recognition
//! failures); served at `GET /metrics`.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

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
    /// Tasks alive on the tokio runtime that serves `/metrics`, read when it is rendered
    /// (a task or timer leak shows as a count that keeps growing with no calls live).
    alive_tasks: Gauge,
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
        let alive_tasks = Gauge::default();
        registry.register(
            "callsmith_runtime_alive_tasks",
            "Tasks alive on the process's tokio runtime",
            alive_tasks.clone(),
        );
        Metrics {
            registry: parking_lot::Mutex::new(registry),
            requests,
            latency,
            alive_tasks,
        }
    }

    /// Counts one HTTP request answered with `status` under its matched `route` template
    /// and records how long it took.
    pub fn record_request(&self, method: &str, route: String, status: u16, seconds: f64) {
        let labels = RouteLabels {
            method: method.to_string(),
            route,
            status,
        };
        self.requests.get_or_create(&labels).inc();
        self.latency.get_or_create(&labels).observe(seconds);
    }

    /// Mutable access to the registry, to register further metrics.
    pub fn registry(&self) -> parking_lot::MutexGuard<'_, Registry> {
        self.registry.lock()
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            self.alive_tasks
                .set(i64::try_from(rt.metrics().num_alive_tasks()).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry.lock()) {
            tracing::error!(error = %e, "metrics encoding failed");
        }
        out
    }
}
