//! Speech recognition adapter: the model catalog (GET /v1/adapters/stt/info/model) and
//! synchronous recognition on a live node (POST /v1/adapters/stt/{engine}/run).
//!
//! Engine visibility: an engine whose catalog entry names a feature flag is visible only
//! to callers for whom that flag is on (evaluated for the caller's account: its own, or
//! the one X-Account-Sid declares). The superuser without an account sees every engine;
//! a tenant key without an account sees only ungated engines. A withheld engine is
//! indistinguishable from an absent one (404 on run, absent from the catalog).
//!
//! Run errors: every 400 is request validation a recognition gateway would do (a body that
//! does not parse, empty requests, an item type other than `source`, a missing source, a
//! language or model the engine does not serve) in the gateway envelope `{code, message,
//! details}` (`code` 3, the RPC layer's INVALID_ARGUMENT). An unknown or withheld engine is 404
//! `engine_not_found`. A node that breaks the stream is 502 `stt_node_failed`; no ready
//! node (none configured for the engine, or none passing its readiness probe) is 503
//! `no_ready_node`; both in the standard envelope. A source that cannot be read or
//! decoded is reported in that item's `error`.

use std::collections::BTreeSet;

use axum::{
    extract::{FromRequest, Request, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use callsmith_media::{
    prompt::Prompt,
    stt::{SttError, SttParams, recognize},
};
use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::api::caller::{Authz, Caller};
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    audio_ref::AudioRef,
    auth::{Principal, cap},
    catalog::ModelOption,
    store::AccountRecord,
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_models))
        .routes(routes!(run_engine))
}

/// The account whose flags and storage a request uses: the declared or own account;
/// None for the superuser and tenant keys that declare none.
pub(super) async fn optional_account(
    state: &AppState,
    caller: &Caller,
) -> ApiResult<Option<AccountRecord>> {
    if caller.header_account.is_some() || caller.principal.account_sid().is_some() {
        Ok(Some(caller.account_scope(state).await?))
    } else {
        Ok(None)
    }
}

/// Engines the caller's feature flags let it see.
pub(super) async fn visible_engines(
    state: &AppState,
    caller: &Caller,
    account: Option<&AccountRecord>,
) -> ApiResult<BTreeSet<String>> {
    let catalog = &state.stt.catalog;
    match account {
        Some(a) => Ok(catalog.visible_to_account(&state.store, a).await?),
        None => {
            let all = matches!(caller.principal, Principal::Superuser { .. });
            Ok(catalog.visible_engines(|_| all))
        }
    }
}

/// Query of the model catalog.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ModelQuery {
    /// Exact engine name.
    pub engine: Option<String>,
    /// A language (`en`: every English locale) or locale (`en-GB`: that locale, plus
    /// engines listing bare `en`).
    pub language: Option<String>,
    /// Exact model name.
    pub model: Option<String>,
    /// Page size, 0..=500, default 100.
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    /// Rows to skip, default 0.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// Recognition model options of the engines visible to the caller; filters combine
/// with AND; an unmatched filter yields an empty page.
#[utoipa::path(get, path = "/v1/adapters/stt/info/model", tag = "stt",
    params(ModelQuery, ("X-Account-Sid" = Option<String>, Header, description = "Account whose feature flags apply")), security(("bearer" = [])),
    responses((status = 200, body = Page<ModelOption>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_models(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<ModelQuery>,
) -> ApiResult<Json<Page<ModelOption>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let account = optional_account(&state, &auth).await?;
    let visible = visible_engines(&state, &auth, account.as_ref()).await?;
    let all: Vec<&ModelOption> = state
        .stt
        .catalog
        .filter(
            &visible,
            non_empty(&q.engine),
            non_empty(&q.language),
            non_empty(&q.model),
        )
        .collect();
    let total = all.len() as i64;
    let items = all
        .into_iter()
        .skip(page.offset as usize)
        .take(page.limit as usize)
        .cloned()
        .collect();
    Ok(Json(Page::new(items, total, page)))
}

/// Body of a recognition run.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// At least one item.
    #[serde(default)]
    #[schema(min_items = 1, required = true)]
    pub requests: Vec<RunItem>,
    /// Benchmark flag of the engine run (accepted; the local nodes ignore it).
    #[serde(default)]
    pub is_test: bool,
}

/// One item of a recognition run.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunItem {
    /// Only `source` is supported.
    #[serde(default, rename = "type")]
    #[schema(pattern = "^source$")]
    pub kind: String,
    #[serde(default)]
    pub params: RunParams,
    pub source: Option<RunSource>,
}

/// Recognition parameters of an item.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    /// Stream the source at 1x speed and collect interim results.
    #[serde(default)]
    pub is_realtime_processing: bool,
    /// Empty: the engine's default language.
    #[serde(default)]
    pub language: String,
    /// Empty: the engine's default model for the language.
    #[serde(default)]
    pub model: String,
}

/// Where an item's audio is.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSource {
    /// A signed link of this service, an audio id (`aud_…`), a storage URI of this
    /// service's object store, or a bare object path (`audio/<account_sid>/…`).
    #[serde(default)]
    pub url: String,
}

/// Response of a recognition run: one item per request item, in order.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunResponse {
    pub responses: Vec<RunItemResult>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunItemResult {
    #[serde(rename = "type")]
    pub kind: String,
    pub source: RunSourceResult,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunSourceResult {
    /// The audio id when the source was an audio file, else the source reference.
    pub id: String,
    /// Empty on success.
    pub error: String,
    pub transcript: String,
    pub model: String,
    /// Real-time mode only.
    pub interim_results: Vec<InterimResultView>,
}

/// One interim or final result (offsets and latency in milliseconds, as int64 decimal
/// strings).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct InterimResultView {
    pub timestamp: DateTime<Utc>,
    pub transcript: String,
    pub end_offset: String,
    pub sent_traffic_offset: String,
    pub latency: String,
    pub is_final: bool,
}

/// The recognition gateway's error envelope.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GatewayError {
    /// Status code of the RPC layer (3: invalid argument).
    pub code: i32,
    pub message: String,
    /// One `google.rpc.BadRequest` (`field_violations`: field, description) when an item
    /// fails validation; one `google.rpc.ErrorInfo` (`reason` `invalid_body`) when the body
    /// does not parse.
    pub details: Vec<serde_json::Value>,
}

/// An error of the run route: the standard envelope or the gateway envelope.
enum RunError {
    Api(ApiError),
    Gateway(GatewayError),
}

impl From<ApiError> for RunError {
    fn from(e: ApiError) -> Self {
        RunError::Api(e)
    }
}

impl IntoResponse for RunError {
    fn into_response(self) -> Response {
        match self {
            RunError::Api(e) => e.into_response(),
            RunError::Gateway(g) => (StatusCode::BAD_REQUEST, axum::Json(g)).into_response(),
        }
    }
}

/// The body of the run route. A body that does not read as a [`RunRequest`] (malformed
/// JSON, a wrong type, a missing or unknown field) is a validation failure like the others:
/// 400 in the gateway envelope, `code` 3, with one `google.rpc.ErrorInfo` detail whose
/// `reason` is `invalid_body`. A body over the size limit stays 413 in the standard
/// envelope.
struct RunBody(RunRequest);

impl<S: Send + Sync> FromRequest<S> for RunBody {
    type Rejection = RunError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<RunRequest>::from_request(req, state).await {
            Ok(Json(body)) => Ok(RunBody(body)),
            Err(e) if e.status == StatusCode::BAD_REQUEST => Err(RunError::Gateway(GatewayError {
                code: 3,
                message: e.message,
                details: vec![json!({
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": e.error,
                    "domain": "callsmith",
                })],
            })),
            Err(e) => Err(RunError::Api(e)),
        }
    }
}

fn invalid(field: String, description: impl Into<String>) -> RunError {
    let description = description.into();
    RunError::Gateway(GatewayError {
        code: 3,
        message: format!("{field}: {description}"),
        details: vec![json!({
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "field_violations": [{"field": field, "description": description}],
        })],
    })
}

/// A validated item ready to run.
struct Planned {
    kind: String,
    source: String,
    option: ModelOption,
    realtime: bool,
}

fn plan(state: &AppState, engine: &str, body: RunRequest) -> Result<Vec<Planned>, RunError> {
    if body.requests.is_empty() {
        return Err(invalid("requests".into(), "at least one item is required"));
    }
    let catalog = &state.stt.catalog;
    let mut out = Vec::with_capacity(body.requests.len());
    for (i, item) in body.requests.into_iter().enumerate() {
        if item.kind != "source" {
            return Err(invalid(
                format!("requests[{i}].type"),
                format!(
                    "unsupported item type {:?}; only source is supported",
                    item.kind
                ),
            ));
        }
        let source = item
            .source
            .map(|s| s.url.trim().to_string())
            .unwrap_or_default();
        if source.is_empty() {
            return Err(invalid(
                format!("requests[{i}].source.url"),
                "a source is required",
            ));
        }
        let language = if item.params.language.trim().is_empty() {
            catalog
                .default_option(engine)
                .map(|o| o.language.clone())
                .unwrap_or_default()
        } else {
            item.params.language.trim().to_string()
        };
        let Some(option) = catalog.option_for(engine, &language, item.params.model.trim()) else {
            let served = catalog.option_for(engine, &language, "").is_some();
            return Err(if served {
                invalid(
                    format!("requests[{i}].params.model"),
                    format!(
                        "engine {engine} has no model {:?} for {language}",
                        item.params.model
                    ),
                )
            } else {
                invalid(
                    format!("requests[{i}].params.language"),
                    format!("engine {engine} does not serve language {language:?}"),
                )
            });
        };
        let mut option = option.clone();
        // Keep the caller's locale (the option may list the bare language).
        option.language = language;
        out.push(Planned {
            kind: item.kind,
            source,
            option,
            realtime: item.params.is_realtime_processing,
        });
    }
    Ok(out)
}

/// Reads an item's audio: (source id, bytes) or the item's error message. With an account
/// scope, any stored audio the account owns (through the one audio resolver); without one,
/// only a signed link of this service (a link is itself the grant to read).
async fn read_source(
    state: &AppState,
    account: Option<&AccountRecord>,
    source: &str,
) -> Result<(String, bytes::Bytes), String> {
    let Some(account) = account else {
        let objects = &state.objects;
        let Some(signed) = objects.resolve_signed_url(source) else {
            return Err(
                "source: without an account scope (X-Account-Sid) only a signed link of this service can be read"
                    .into(),
            );
        };
        let (path, _) = signed.map_err(|e| format!("source: {e}"))?;
        return match objects.get(&path).await {
            Ok(b) => Ok((source.to_string(), b)),
            Err(crate::objects::ObjectError::NotFound) => {
                Err(format!("source: object {source} not found"))
            }
            Err(e) => Err(format!("source: {e}")),
        };
    };
    let id = match state.audio.parse(source) {
        Ok(AudioRef::Audio(id)) => id,
        _ => source.to_string(),
    };
    state
        .audio
        .fetch_stored(&account.sid, source)
        .await
        .map(|b| (id, b))
        .map_err(|e| format!("source: {e}"))
}

async fn decode(bytes: bytes::Bytes) -> Result<Prompt, String> {
    tokio::task::spawn_blocking(move || Prompt::decode(&bytes, None))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("source: {e}"))
}

/// Recognize sources with the named engine on a live node; one response item per
/// request item.
#[utoipa::path(post, path = "/v1/adapters/stt/{engine}/run", tag = "stt", request_body = RunRequest,
    params(("engine" = String, Path), ("X-Account-Sid" = Option<String>, Header, description = "Account whose flags and storage apply")), security(("bearer" = [])),
    responses((status = 200, body = RunResponse), (status = 400, body = GatewayError, description = "Validation failure (the body, an item, its source, language or model) in the gateway envelope"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody), (status = 502, body = ErrorBody, description = "The selected node failed"),
        (status = 503, body = ErrorBody, description = "No ready recognition node")))]
async fn run_engine(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(engine): Path<String>,
    RunBody(body): RunBody,
) -> Result<Json<RunResponse>, RunError> {
    let account = optional_account(&state, &auth).await?;
    let visible = visible_engines(&state, &auth, account.as_ref()).await?;
    if !visible.contains(&engine) {
        return Err(ApiError::not_found("engine").into());
    }
    tracing::debug!(%engine, is_test = body.is_test, items = body.requests.len(), "recognition run");
    let items = plan(&state, &engine, body)?;
    let Some(pool) = state.stt.pool(&engine) else {
        return Err(no_ready_node(&engine).into());
    };
    // No ready node fails the whole run before any source is read.
    if pool.pick().await.is_err() {
        return Err(no_ready_node(&engine).into());
    }
    let mut responses = Vec::with_capacity(items.len());
    for item in items {
        let mut result = RunSourceResult {
            id: item.source.clone(),
            error: String::new(),
            transcript: String::new(),
            model: item.option.model.clone(),
            interim_results: vec![],
        };
        let prompt = match read_source(&state, account.as_ref(), &item.source).await {
            Ok((id, bytes)) => {
                result.id = id;
                decode(bytes).await
            }
            Err(e) => Err(e),
        };
        match prompt {
            Err(e) => result.error = e,
            Ok(prompt) => {
                let params = SttParams {
                    language: item.option.language.clone(),
                    model: item.option.model.clone(),
                    interim_results: item.realtime,
                    ..SttParams::default()
                };
                match recognize(pool, &prompt, &params, item.realtime).await {
                    Ok(out) => {
                        result.transcript = out.transcript;
                        result.interim_results = out
                            .interim_results
                            .into_iter()
                            .map(|r| InterimResultView {
                                timestamp: Utc
                                    .timestamp_millis_opt(r.timestamp_ms)
                                    .single()
                                    .unwrap_or_else(Utc::now),
                                transcript: r.transcript,
                                end_offset: r.end_offset_ms.to_string(),
                                sent_traffic_offset: r.sent_traffic_offset_ms.to_string(),
                                latency: r.latency_ms.to_string(),
                                is_final: r.is_final,
                            })
                            .collect();
                    }
                    Err(SttError::NoReadyNode) => return Err(no_ready_node(&engine).into()),
                    Err(SttError::NodeFailed { node, message }) => {
                        tracing::warn!(%engine, %node, %message, "recognition node failed");
                        return Err(ApiError::new(
                            StatusCode::BAD_GATEWAY,
                            "stt_node_failed",
                            format!("recognition node {node} failed: {message}"),
                        )
                        .into());
                    }
                    Err(e) => result.error = e.to_string(),
                }
            }
        }
        responses.push(RunItemResult {
            kind: item.kind,
            source: result,
        });
    }
    Ok(Json(RunResponse { responses }))
}

fn no_ready_node(engine: &str) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "no_ready_node",
        format!("no ready recognition node for engine {engine}"),
    )
}
