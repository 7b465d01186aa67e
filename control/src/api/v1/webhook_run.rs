//! POST /v1/scenario/webhook/run: executes a webhook brick configuration against supplied
//! test variables with the shared executor ([`crate::webhook::WebhookExecutor`], the same
//! one live calls use) and returns the raw outcome. Stored scenario state is never touched.
//!
//! Decisions the spec leaves open:
//! * capability `resources:write`: a run changes nothing stored, but it makes the service
//!   send a request the caller composes (target, method, headers, body, proxy), an action on
//!   the account's behalf that read-only roles do not get;
//! * an invalid configuration is 422 `scenario_invalid` with `data.topic = "validation"` and
//!   the SCN entries in `data.errors.scenario` (as scenario validation answers);
//! * a configuration whose placeholders render to an unusable URL, an unreachable or refused
//!   (private) target or proxy, or a target answering 300 or above is 200 with status `fail`;
//! * `options.async` only tells a live call not to wait; a run always waits for the target
//!   (within the timeout) and returns what it answered, since the outcome is the point;
//! * `attach_call_metadata` adds nothing here: a test run has no call.

use std::collections::BTreeMap;

use axum::extract::State;
use callsmith_scenarios::webhook::{self, WebhookOutcome};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::api::caller::Authz;
use crate::{
    api::{ApiResult, AppState, ErrorBody, Json},
    auth::cap,
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(run))
}

/// Body of a webhook run.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookRunRequest {
    /// The webhook brick configuration: request, options, response_mapping.
    #[schema(value_type = Object)]
    pub properties: serde_json::Value,
    /// Test variable values the placeholders are compiled against.
    #[serde(default)]
    pub storage: BTreeMap<String, String>,
}

/// One redirect followed.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookRedirectDoc {
    pub code: i64,
    pub url: String,
    pub method: String,
}

/// The response received.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookResponseDoc {
    pub http_status_code: i64,
    pub http_status_text: String,
    /// Header name to its values.
    pub headers: BTreeMap<String, Vec<String>>,
    pub body: String,
    /// Round trip in milliseconds.
    pub duration: i64,
}

/// Webhook run outcome (documentation mirror of `callsmith_scenarios::WebhookOutcome`,
/// which is what is serialized).
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookRunOutcome {
    /// processed or fail: the outcome the scenario would branch on.
    #[schema(example = "processed")]
    pub status: String,
    /// Failure detail; empty when processed.
    pub error: String,
    /// Extracted variables (names unwrapped).
    pub variables: BTreeMap<String, String>,
    /// The equivalent curl command.
    pub curl: String,
    /// Redirects followed; null when none.
    pub redirects: Option<Vec<WebhookRedirectDoc>>,
    /// Null when no response was received.
    pub response: Option<WebhookResponseDoc>,
}

/// Run a webhook configuration against test variables.
#[utoipa::path(post, path = "/v1/scenario/webhook/run", tag = "scenarios", request_body = WebhookRunRequest,
    security(("bearer" = [])),
    responses((status = 200, body = WebhookRunOutcome, description = "The outcome; unreachable targets and statuses of 300 or above are status fail"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "`forbidden`: the caller lacks `resources:write` (a viewer)"),
        (status = 422, body = ErrorBody, description = "Invalid configuration: data.errors.scenario lists the problems"),
        (status = 500, body = ErrorBody)))]
async fn run(
    State(state): State<AppState>,
    _auth: Authz<cap::ResourcesWrite>,
    Json(body): Json<WebhookRunRequest>,
) -> ApiResult<axum::Json<WebhookOutcome>> {
    let props = webhook::parse_properties(&body.properties)
        .map_err(crate::usecases::UseCaseError::invalid_scenario)?;
    let mapping = webhook::mapping(&props);
    let outcome = match webhook::compile(&props, &body.storage, None) {
        Err(e) => WebhookOutcome::finish(String::new(), None, Err(e), mapping),
        Ok(req) => state.webhook.execute(&req, mapping).await,
    };
    Ok(axum::Json(outcome))
}
