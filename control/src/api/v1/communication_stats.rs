//! Statistics and the report page of a set of the account's communications
//! (`GET /v1/communication/-/statistics`, `…/report.html`), selected by agent, direction,
//! creation time range or dispatch batch, and read through the statistics service
//! (`communication::service`). See docs/communications.md, "Statistics".

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::communications::{check_batch, check_direction};
use crate::api::caller::Authz;
use crate::{
    api::{ApiResult, AppState, ErrorBody, Json, Query},
    auth::cap,
    communication::{report, statistics::CallStatistics},
    store::communications::CommunicationFilter,
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(communication_statistics))
        .routes(routes!(communication_report))
}

/// Query of GET /v1/communication/-/statistics and …/report.html: which communications
/// of the account (filters combine with AND).
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StatisticsQuery {
    /// Only this agent's communications.
    #[serde(default)]
    pub agent_sid: Option<String>,
    /// `outbound` or `inbound`.
    #[serde(default)]
    #[param(pattern = "^(outbound|inbound)$")]
    pub direction: Option<String>,
    /// Created at or after this time.
    #[serde(default)]
    pub created_from: Option<DateTime<Utc>>,
    /// Created before this time.
    #[serde(default)]
    pub created_to: Option<DateTime<Utc>>,
    /// Only the communications of this dispatch batch (the `batch_sid` a dispatch or a
    /// legacy attempt answered). A batch the account does not have (unknown, or another
    /// account's) selects nothing.
    #[serde(default)]
    #[param(pattern = "^bat_[0-9a-f]{32}$")]
    pub batch: Option<String>,
}

const TOO_MANY: &str =
    "More communications match than one request reads (200,000 by default): narrow the set";

/// Statistics of the account's communications (all, or those of an agent, a direction, a
/// creation time range or a dispatch batch): counts by communication and call status,
/// calls dialled and answered, the answer rate, setup time and duration percentiles, goals
/// reached, and the audio and turn quality of the newest 2,000 saved histories (RTP loss,
/// jitter, an estimated MOS, turn latency, answering-machine verdicts). The legacy attempt
/// statistics give the same figures for an attempt's calls.
#[utoipa::path(get, path = "/v1/communication/-/statistics", tag = "communications",
    params(StatisticsQuery, ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 200, body = CallStatistics), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody, description = TOO_MANY),
        (status = 500, body = ErrorBody)))]
async fn communication_statistics(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<StatisticsQuery>,
) -> ApiResult<Json<CallStatistics>> {
    let filter = filter(&q)?;
    let account = auth.account_scope(&state).await?;
    Ok(Json(
        state
            .ops()
            .communication_set(&account.sid, &filter)
            .await?
            .statistics,
    ))
}

/// The same set as the statistics as one HTML page: the figures, live calls over time
/// against the agent's cpl, setup time and turn latency over time, and the outcomes by
/// status, call status, goal and answering-machine verdict (`communication::report`).
#[utoipa::path(get, path = "/v1/communication/-/report.html", tag = "communications",
    params(StatisticsQuery, ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 200, content_type = "text/html; charset=utf-8", body = String, description = report::PAGE_HEADERS), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody, description = TOO_MANY),
        (status = 500, body = ErrorBody)))]
async fn communication_report(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<StatisticsQuery>,
) -> ApiResult<axum::response::Response> {
    let filter = filter(&q)?;
    let account = auth.account_scope(&state).await?;
    let ops = state.ops();
    let set = ops.communication_set(&account.sid, &filter).await?;
    let page = ops
        .report_page(
            &account.sid,
            &format!("callsmith report: {}", account.name),
            set.communications.iter().rev(),
            &set.statistics,
            &set.histories,
        )
        .await?;
    Ok(crate::api::report_page::response(page))
}

/// The store filter of `q`; 400 `invalid_query` for a bad direction or batch id.
fn filter(q: &StatisticsQuery) -> ApiResult<CommunicationFilter> {
    check_direction(q.direction.as_deref())?;
    Ok(CommunicationFilter {
        agent_sid: q.agent_sid.clone(),
        communication_status: None,
        direction: q.direction.clone(),
        created_from: q.created_from,
        created_to: q.created_to,
        batch_sid: check_batch(q.batch.as_deref())?,
    })
}
