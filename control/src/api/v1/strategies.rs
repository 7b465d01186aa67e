//! Communication strategies: an account's retry rules per outcome, calling hours in the
//! recipient's time and per-recipient frequency cap, named by a dispatch's `strategy_sid`
//! or an agent's default. Rules and worked examples: docs/strategies.md.

use axum::{extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    NameRule,
    owned::{CONFLICT_AGENTS_LISTED, in_use, sees_row},
};
use crate::api::caller::{Authz, Caller};
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    ids::{new_sid, prefix},
    store::{AgentRef, StoreError, StrategyRecord},
    usecases::check_strategy_definition,
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_strategy, list_strategies))
        .routes(routes!(get_strategy, patch_strategy, delete_strategy))
}

/// Retries of one outcome.
#[derive(ToSchema)]
#[allow(dead_code)] // documents the definition's schema; the definition is read by Strategy::parse
pub struct RetryRuleDoc {
    /// Retries of this outcome after the first dial, 0 to 20 (`busy.attempts = 3` dials a
    /// busy recipient at most four times).
    pub attempts: u32,
    /// Seconds to wait before the first retry of this outcome, 0 to 2592000 (30 days).
    pub delay_s: u64,
    /// Factor each further retry's wait grows by (the n-th retry waits
    /// `delay_s × backoffⁿ⁻¹`), 1 to 10; default 1.
    #[schema(minimum = 1.0, maximum = 10.0)]
    pub backoff: Option<f64>,
    /// Longest wait between two attempts, whatever the backoff; not shorter than `delay_s`.
    pub max_delay_s: Option<u64>,
}

/// Retry rules per outcome. An outcome without a rule is not retried. A deliberate decline
/// (SIP 603, 607, 608, an explicit "no" outcome of the conversation), an opt-out and a
/// completed conversation are never retried.
#[derive(ToSchema)]
#[allow(dead_code)] // documents the definition's schema; the definition is read by Strategy::parse
pub struct RetryRulesDoc {
    /// The line was busy (SIP 486 Busy Here, 600 Busy Everywhere).
    pub busy: Option<RetryRuleDoc>,
    /// It rang out or was not answered in time (SIP 408, 480, the ring timeout).
    pub no_answer: Option<RetryRuleDoc>,
    /// The call did not connect for another reason (another 4xx–6xx, no trunk answer, a
    /// transport error).
    pub failed: Option<RetryRuleDoc>,
    /// An answering machine answered (the agent's `voicemail_enabled` detector).
    pub voicemail: Option<RetryRuleDoc>,
    /// A person answered and hung up within `dropped_early_s` seconds.
    pub dropped: Option<RetryRuleDoc>,
}

/// At most `calls` dials to one number per rolling `period_s` seconds, across every
/// communication and agent of the account.
#[derive(ToSchema)]
#[allow(dead_code)] // documents the definition's schema; the definition is read by Strategy::parse
pub struct FrequencyCapDoc {
    /// 1 to 1000 (0 is refused: omit the cap instead).
    pub calls: u32,
    /// 60 to 2592000 seconds.
    pub period_s: u64,
}

/// A strategy's definition. Every member is optional; unknown members are refused
/// (422 `invalid_strategy` naming the member in `message` and `data.field`).
#[derive(ToSchema)]
#[allow(dead_code)] // documents the definition's schema; the definition is read by Strategy::parse
pub struct StrategyDefinition {
    /// Retry rules per outcome.
    pub retry: Option<RetryRulesDoc>,
    /// Seconds after the communication's creation after which no further attempt is made
    /// (60 to 2592000); none: no limit.
    pub max_age_s: Option<u64>,
    /// An answered call the callee leaves within this many seconds is the outcome
    /// `dropped` (0 to 600; default 0: never).
    pub dropped_early_s: Option<u64>,
    /// Calling hours in the recipient's local time, in the agent's `calling_schedule`
    /// form (`always` or `weekly` with per-weekday `[start, end)` windows and
    /// `excluded_dates`; windows of a day may not overlap). The recipient's zones come
    /// from the number's prefix (libphonenumber's map, embedded); when a prefix spans
    /// several zones a call starts only while every one of them is inside a window.
    /// A dispatch's `scheduled_at` only ever defers the first dial further.
    #[schema(value_type = Option<crate::agent_settings::Schedule>)]
    pub calling_hours: Option<Value>,
    /// IANA zone the calling hours are read in when the number maps to no zone; default:
    /// the agent's `timezone`. An unknown zone is refused.
    pub fallback_timezone: Option<String>,
    /// Per-recipient frequency cap.
    pub frequency_cap: Option<FrequencyCapDoc>,
}

/// A communication strategy.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Strategy {
    /// `stg_` prefixed.
    pub id: String,
    pub account_sid: String,
    /// Unique within the account.
    pub name: String,
    /// The definition as accepted.
    #[schema(value_type = StrategyDefinition)]
    pub definition: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&StrategyRecord> for Strategy {
    fn from(s: &StrategyRecord) -> Self {
        Strategy {
            id: s.sid.clone(),
            account_sid: s.account_sid.clone(),
            name: s.name.clone(),
            definition: serde_json::from_str(&s.definition)
                .unwrap_or_else(|_| Value::Object(Default::default())),
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

/// Body of POST /v1/strategy.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateStrategy {
    /// 1–200 characters, unique within the account.
    pub name: String,
    /// Default `{}`: no retries, any hour, no cap.
    #[serde(default)]
    #[schema(value_type = Option<StrategyDefinition>)]
    pub definition: Option<Value>,
}

/// Body of PATCH /v1/strategy/{id}; omitted fields keep their value, a `definition`
/// replaces the whole definition.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchStrategy {
    pub name: Option<String>,
    #[schema(value_type = Option<StrategyDefinition>)]
    pub definition: Option<Value>,
}

/// Query of GET /v1/strategy.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StrategyListQuery {
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

fn name_taken() -> ApiError {
    ApiError::unprocessable(
        "name_taken",
        "name: the account already has a strategy with this name",
    )
}

/// The definition's JSON text, checked.
fn definition_text(v: &Value) -> ApiResult<String> {
    check_strategy_definition(v)?;
    serde_json::to_string(v).map_err(ApiError::internal)
}

/// The strategy addressed by a path id, or 404 when absent or outside the caller's scope.
async fn visible_strategy(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> ApiResult<StrategyRecord> {
    match state.store.strategy_get(id).await? {
        Some(s) if sees_row(state, caller, &s.account_sid, &s.tenant_sid).await? => Ok(s),
        _ => Err(ApiError::not_found("strategy")),
    }
}

/// Create a communication strategy in the account in scope.
#[utoipa::path(post, path = "/v1/strategy", tag = "strategies", request_body = CreateStrategy, params(("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 201, body = Strategy), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "`invalid_name`, `name_taken`, or `invalid_strategy` naming the definition member in `message` and `data.field`; nothing stored"),
        (status = 500, body = ErrorBody)))]
async fn create_strategy(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Json(b): Json<CreateStrategy>,
) -> ApiResult<(StatusCode, Json<Strategy>)> {
    let account = auth.account_scope(&state).await?;
    let name = NameRule::NAME.check("name", &b.name)?;
    let definition = definition_text(
        &b.definition
            .unwrap_or_else(|| Value::Object(Default::default())),
    )?;
    match state
        .store
        .strategy_create(
            &new_sid(prefix::STRATEGY),
            &account.tenant_sid,
            &account.sid,
            &name,
            &definition,
        )
        .await
    {
        Ok(s) => Ok((StatusCode::CREATED, Json(Strategy::from(&s)))),
        Err(StoreError::Unique) => Err(name_taken()),
        Err(e) => Err(e.into()),
    }
}

/// List the strategies of the account in scope, newest first.
#[utoipa::path(get, path = "/v1/strategy", tag = "strategies", params(StrategyListQuery, ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Page<Strategy>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_strategies(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<StrategyListQuery>,
) -> ApiResult<Json<Page<Strategy>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let account = auth.account_scope(&state).await?;
    let (rows, total) = state
        .store
        .strategy_list(&account.sid, page.limit, page.offset)
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(Strategy::from).collect(),
        total,
        page,
    )))
}

/// Get a strategy.
#[utoipa::path(get, path = "/v1/strategy/{id}", tag = "strategies", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Strategy), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn get_strategy(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Json<Strategy>> {
    Ok(Json(Strategy::from(
        &visible_strategy(&state, &auth, &id).await?,
    )))
}

/// Update a strategy; omitted fields keep their value. Communications already dispatched
/// follow the definition as it is when each of their attempts is decided.
#[utoipa::path(patch, path = "/v1/strategy/{id}", tag = "strategies", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    request_body = PatchStrategy, security(("bearer" = [])),
    responses((status = 200, body = Strategy), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "`invalid_name`, `name_taken` or `invalid_strategy`; nothing changed"),
        (status = 500, body = ErrorBody)))]
async fn patch_strategy(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
    Json(b): Json<PatchStrategy>,
) -> ApiResult<Json<Strategy>> {
    let s = visible_strategy(&state, &auth, &id).await?;
    let name = b
        .name
        .as_deref()
        .map(|n| NameRule::NAME.check("name", n))
        .transpose()?;
    let definition = b.definition.as_ref().map(definition_text).transpose()?;
    match state
        .store
        .strategy_update(&s.sid, name.as_deref(), definition.as_deref())
        .await
    {
        Ok(s) => Ok(Json(Strategy::from(&s))),
        Err(StoreError::Unique) => Err(name_taken()),
        Err(StoreError::NotFound) => Err(ApiError::not_found("strategy")),
        Err(e) => Err(e.into()),
    }
}

/// Delete a strategy. 409 `strategy_in_use` while agents name it as their default
/// (`data.agents` lists the first 20, the message the total). Communications that follow
/// it keep its sid and get no further retry.
#[utoipa::path(delete, path = "/v1/strategy/{id}", tag = "strategies", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Agents name the strategy as their default"), (status = 500, body = ErrorBody)))]
async fn delete_strategy(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let s = visible_strategy(&state, &auth, &id).await?;
    match state.store.strategy_delete(&s.sid).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::Conflict(_)) => {
            let (ids, total) = state
                .store
                .agents_referencing(AgentRef::Strategy, &s.sid, CONFLICT_AGENTS_LISTED)
                .await?;
            Err(in_use("strategy", ids, total))
        }
        Err(StoreError::NotFound) => Err(ApiError::not_found("strategy")),
        Err(e) => Err(e.into()),
    }
}
