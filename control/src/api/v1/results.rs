//! Result deliveries: GET /v1/communication-result. The engine's delivery worker POSTs
//! each finished communication to every target of its agent (docs/communications.md).

use std::collections::BTreeMap;

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{communications::communications_map, owned::parse_include};
use crate::api::caller::Authz;
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Query},
    auth::cap,
    store::{ResultDeliveryRecord, results::DeliveryStatus},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_results))
}

/// One delivery of a communication result to one agent target.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ResultDelivery {
    pub id: String,
    pub account_sid: String,
    /// The source communication (resolvable with include=communication).
    pub communication_sid: String,
    pub agent_sid: String,
    /// Target URL the result is POSTed to.
    pub url: String,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: i64,
    /// HTTP status of the last attempt (null when no response was received).
    pub last_status_code: Option<i64>,
    /// Why the last attempt failed; null when it did not.
    pub last_error: Option<String>,
    /// When the next attempt is due (status new).
    pub next_attempt_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&ResultDeliveryRecord> for ResultDelivery {
    fn from(r: &ResultDeliveryRecord) -> Self {
        ResultDelivery {
            id: r.sid.clone(),
            account_sid: r.account_sid.clone(),
            communication_sid: r.communication_sid.clone(),
            agent_sid: r.agent_sid.clone(),
            url: r.url.clone(),
            status: r.status,
            attempts: r.attempts,
            last_status_code: r.last_status_code,
            last_error: r.last_error.clone(),
            next_attempt_at: r.next_attempt_at,
            delivered_at: r.delivered_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Query of GET /v1/communication-result.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ResultQuery {
    /// Page size, at most 500, default 100.
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// Only deliveries in this status.
    #[serde(default)]
    #[param(value_type = Option<DeliveryStatus>)]
    pub status: Option<String>,
    /// Comma-separated relations to resolve; accepted: communication.
    #[serde(default)]
    #[param(pattern = "^ *(?:communication)? *(?:, *(?:communication)? *)*$")]
    pub include: Option<String>,
}

/// Relations `include` resolves.
const INCLUDES: &[(&str, &str)] = &[("communication", "communication")];

/// List result deliveries, newest first.
#[utoipa::path(get, path = "/v1/communication-result", tag = "communications",
    params(ResultQuery, ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 200, body = Page<ResultDelivery>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_results(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<ResultQuery>,
) -> ApiResult<Json<Page<ResultDelivery>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let status = q
        .status
        .as_deref()
        .map(str::parse::<DeliveryStatus>)
        .transpose()
        .map_err(|_| {
            ApiError::bad_request(
                "invalid_query",
                format!("status: one of {}", DeliveryStatus::names()),
            )
        })?;
    let want_communications = !parse_include(q.include.as_deref(), INCLUDES)?.is_empty();
    let account = auth.account_scope(&state).await?;
    let (rows, total) = state
        .store
        .result_delivery_list(&account.sid, status, page.limit, page.offset)
        .await?;
    let mut out = Page::new(rows.iter().map(ResultDelivery::from).collect(), total, page);
    if want_communications {
        let mut ids: Vec<String> = rows.iter().map(|r| r.communication_sid.clone()).collect();
        ids.sort();
        ids.dedup();
        let map = communications_map(&state, &account, &ids).await?;
        out.included = Some(BTreeMap::from([("communications".to_string(), map)]));
    }
    Ok(Json(out))
}
