//! The one webhook HTTP executor: runs a [`CompiledRequest`] (from the sans-IO
//! `callsmith_scenarios::webhook::compile`) and returns the [`WebhookOutcome`]. It backs both
//! `POST /v1/scenario/webhook/run` and the engine's `CallPort::webhook`, so a test run and a
//! live call behave the same.
//!
//! Webhook URLs come from scenario designers, so every request goes through the guarded
//! client ([`crate::guarded_http`]): a target, a redirect hop or a `request.proxy` that is or
//! resolves to a non-public address is refused unless the operator sets
//! `webhook.allow_private`. Redirects are followed by hand there, so the outcome records
//! every hop (`redirects`).

use std::time::Duration;

use bytes::Bytes;
use callsmith_scenarios::{
    model::MappingEntry,
    webhook::{self, CompiledRequest, Redirect, WebhookOutcome, WebhookResponse},
};

use crate::guarded_http::{GuardedClient, OutboundRequest};

pub use crate::guarded_http::MAX_REDIRECTS;

/// Most bytes of a webhook response body read before the run fails.
pub const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// The shared webhook executor. Cheap to clone.
#[derive(Clone, Debug)]
pub struct WebhookExecutor {
    http: GuardedClient,
}

impl WebhookExecutor {
    /// The executor over the process's guarded client.
    pub fn new(http: GuardedClient) -> Self {
        WebhookExecutor { http }
    }

    /// Whether private targets are allowed.
    pub fn allow_private(&self) -> bool {
        self.http.allow_private()
    }

    /// Executes `req` and maps the response with `mapping`. Never errors: a transport
    /// failure, a refused target or a status of 300 or above is an outcome with status fail.
    pub async fn execute(&self, req: &CompiledRequest, mapping: &[MappingEntry]) -> WebhookOutcome {
        let curl = webhook::to_curl(req);
        let timeout =
            Duration::from_secs_f64(req.timeout_secs.clamp(0.1, webhook::MAX_TIMEOUT_SECS));
        let out = OutboundRequest {
            method: req.method.clone(),
            url: req.url.clone(),
            headers: req.headers.clone(),
            body: req.body.clone().map(Bytes::from),
            timeout,
            max_body: MAX_RESPONSE_BYTES,
            follow_redirects: true,
            proxy: req.proxy_url.clone(),
            insecure_skip_verify: req.insecure_skip_verify,
        };
        let mut hops = Vec::new();
        let received = self
            .http
            .send_recording(&out, &mut hops)
            .await
            .map_err(|e| e.to_string());
        let hops = match &received {
            Ok(r) => r.redirects.clone(),
            Err(_) => hops,
        };
        let redirects: Vec<Redirect> = hops
            .into_iter()
            .map(|h| Redirect {
                code: i64::from(h.code),
                url: h.url,
                method: h.method,
            })
            .collect();
        let redirects = (!redirects.is_empty()).then_some(redirects);
        let received = received.map(|r| {
            let mut headers = std::collections::BTreeMap::<String, Vec<String>>::new();
            for (k, v) in r.headers {
                headers.entry(k).or_default().push(v);
            }
            WebhookResponse {
                http_status_code: i64::from(r.status),
                http_status_text: http::StatusCode::from_u16(r.status)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                    .unwrap_or("")
                    .to_string(),
                headers,
                body: String::from_utf8_lossy(&r.body).into_owned(),
                duration: i64::try_from(r.elapsed.as_millis()).unwrap_or(i64::MAX),
            }
        });
        WebhookOutcome::finish(curl, redirects, received, mapping)
    }
}
