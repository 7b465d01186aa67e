//! What an attempt's calls came to (`/v1/campaign/{campaign_id}/attempt/{attempt_id}/…`):
//! statistics, the communication report (one row per call) and the contact report (one row
//! per contact dialled, with its variables and the scenario's variables at the end of its
//! call). Everything is read from the attempt's communications as they are now. Reports
//! are JSON arrays, or CSV with `?format=csv`.

use std::collections::BTreeSet;

use axum::http::header;

use super::*;
use crate::{
    communication::{
        CommunicationStatus,
        statistics::{CallStatistics, Quality, setup_time_ms},
    },
    store::{AttemptCall, CommunicationRecord, LegacyAttemptRecord},
};
use attempts::{AttemptStatus, attempt_of};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(attempt_statistics))
        .routes(routes!(attempt_report_page))
        .routes(routes!(communication_report))
        .routes(routes!(contact_report))
}

/// Statistics of an attempt's calls: the attempt, and [`CallStatistics`] of its
/// communications (the same figures `GET /v1/communication/-/statistics` gives any set).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AttemptStatistics {
    pub attempt_sid: String,
    pub status: AttemptStatus,
    #[serde(flatten)]
    pub calls: CallStatistics,
}

fn answered(c: &CommunicationRecord) -> bool {
    c.answered_at.is_some()
}

/// The statistics of an attempt's calls, without quality.
fn statistics_of(attempt: &LegacyAttemptRecord, calls: &[AttemptCall]) -> AttemptStatistics {
    AttemptStatistics {
        attempt_sid: attempt.sid.clone(),
        status: AttemptStatus::of(attempt, crate::store::now()),
        calls: CallStatistics::of(calls.iter().map(|c| &c.communication)),
    }
}

/// The statistics of an attempt's calls, quality from their histories included.
async fn statistics(
    state: &AppState,
    who: &LegacyAccount,
    attempt: &LegacyAttemptRecord,
    calls: &[AttemptCall],
) -> AttemptStatistics {
    let mut stats = statistics_of(attempt, calls);
    // References, not copies: an attempt may hold many calls.
    let records: Vec<&CommunicationRecord> = calls.iter().map(|c| &c.communication).collect();
    stats.calls.quality = Some(state.ops().quality(&who.account_sid, &records).await);
    stats
}

/// Statistics of an attempt: counts by communication and call status, answered calls and
/// the answer rate, setup time and duration percentiles.
#[utoipa::path(get, path = "/v1/campaign/{campaign_id}/attempt/{attempt_id}/statistics", tag = "legacy",
    params(("campaign_id" = String, Path), ("attempt_id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = AttemptStatistics),
        (status = 400, body = RpcStatus, description = "More calls in the attempt than one request reads (200,000 by default): INVALID_ARGUMENT, reason too_many_communications"), (status = 401, body = RpcStatus),
        (status = 404, body = RpcStatus, description = "No such campaign in this account, or no such attempt of it"),
        (status = 500, body = RpcStatus)))]
async fn attempt_statistics(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path((campaign_id, attempt_id)): axum::extract::Path<(String, String)>,
) -> Result<axum::Json<AttemptStatistics>, LegacyError> {
    let (a, calls) = attempt_calls(&state, &who, &campaign_id, &attempt_id).await?;
    Ok(axum::Json(statistics(&state, &who, &a, &calls).await))
}

/// Query of the reports.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// `json` (default: an array of rows) or `csv` (`text/csv`, a header row, then one
    /// line per row).
    pub format: Option<String>,
}

/// Whether a report is asked for as CSV; 400 for a format other than json and csv.
fn wants_csv(q: ReportQuery) -> Result<bool, LegacyError> {
    match pick(None, q.format).as_deref() {
        None | Some("json") => Ok(false),
        Some("csv") => Ok(true),
        Some(f) => Err(LegacyError::invalid(format!(
            "format: json or csv, got {f:?}"
        ))),
    }
}

fn csv_response(filename: String, body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        body,
    )
        .into_response()
}

/// One call of an attempt (a row of the communication report). Unset strings are "",
/// unset numbers 0, unset times absent (empty cells in CSV).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CommunicationReportRow {
    pub communication_sid: String,
    pub contact_sid: String,
    /// The number dialled.
    pub phone: String,
    /// Caller id ("" until a pool number was picked).
    pub from_number: String,
    pub communication_status: CommunicationStatus,
    /// How the call leg ended (answered, busy, no_answer, rejected, failed, canceled); "".
    pub call_status: String,
    /// Final SIP code behind call_status; 0.
    pub sip_code: i64,
    pub answered: bool,
    /// Milliseconds from the INVITE to the answer; 0 unless answered.
    pub setup_time_ms: i64,
    /// Seconds from answer to hang-up; 0.
    pub duration: i64,
    /// The last goal reached; "".
    pub goal: String,
    /// Why the scenario stopped; "".
    pub end_reason: String,
    /// Why the communication failed or was interrupted; "".
    pub error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    pub creation_time: DateTime<Utc>,
}

impl From<&AttemptCall> for CommunicationReportRow {
    fn from(a: &AttemptCall) -> Self {
        let c = &a.communication;
        CommunicationReportRow {
            communication_sid: c.sid.clone(),
            contact_sid: a.contact_sid.clone(),
            phone: c.recipient.clone(),
            from_number: c.from_number.clone(),
            communication_status: c.communication_status,
            call_status: c.call_status.clone().unwrap_or_default(),
            sip_code: c.sip_code.unwrap_or(0),
            answered: answered(c),
            setup_time_ms: setup_time_ms(c).unwrap_or(0),
            duration: c.duration,
            goal: c.goal_list().pop().unwrap_or_default(),
            end_reason: c.end_reason.clone().unwrap_or_default(),
            error: c.error.clone().unwrap_or_default(),
            started_at: c.started_at,
            answered_at: c.answered_at,
            ended_at: c.ended_at,
            creation_time: c.created_at,
        }
    }
}

fn time_cell(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
        .unwrap_or_default()
}

/// The attempt `attempt_id` of campaign `campaign_id` in the caller's account, and its
/// calls, read through the statistics service: an attempt with more calls than one request
/// reads (its limit, 200,000 by default) is 400 INVALID_ARGUMENT with the reason
/// `too_many_communications`.
async fn attempt_calls(
    state: &AppState,
    who: &LegacyAccount,
    campaign_id: &str,
    attempt_id: &str,
) -> Result<(LegacyAttemptRecord, Vec<AttemptCall>), LegacyError> {
    let a = attempt_of(state, who, campaign_id, attempt_id).await?;
    let calls = state.ops().attempt_calls(&who.account_sid, &a.sid).await?;
    Ok((a, calls))
}

/// The attempt as one HTML page with no outside resources: its statistics, live calls
/// over time against the campaign's cpl, setup time and turn latency over time, and the
/// outcomes
/// (`communication::report`, the page `GET /v1/communication/-/report.html` and
/// `callsmith load` give any set of calls).
#[utoipa::path(get, path = "/v1/campaign/{campaign_id}/attempt/{attempt_id}/report.html", tag = "legacy",
    params(("campaign_id" = String, Path), ("attempt_id" = String, Path)), security(("basic" = [])),
    responses((status = 200, content_type = "text/html; charset=utf-8", body = String, description = crate::communication::report::PAGE_HEADERS),
        (status = 400, body = RpcStatus, description = "More calls in the attempt than one request reads (200,000 by default): INVALID_ARGUMENT, reason too_many_communications"), (status = 401, body = RpcStatus),
        (status = 404, body = RpcStatus, description = "No such campaign in this account, or no such attempt of it"),
        (status = 500, body = RpcStatus)))]
async fn attempt_report_page(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path((campaign_id, attempt_id)): axum::extract::Path<(String, String)>,
) -> Result<Response, LegacyError> {
    let (a, calls) = attempt_calls(&state, &who, &campaign_id, &attempt_id).await?;
    let records: Vec<&CommunicationRecord> = calls.iter().map(|c| &c.communication).collect();
    let ops = state.ops();
    let histories = ops.histories(&who.account_sid, &records).await;
    let mut stats = statistics_of(&a, &calls);
    stats.calls.quality = Some(Quality::of(&histories));
    let page = ops
        .report_page(
            &who.account_sid,
            &format!("Attempt {} of campaign {}", a.sid, a.campaign_sid),
            records.iter().copied(),
            &stats,
            &histories,
        )
        .await?;
    Ok(crate::api::report_page::response(page))
}

/// The communication report: one row per call of the attempt, oldest first.
#[utoipa::path(get, path = "/v1/campaign/{campaign_id}/attempt/{attempt_id}/report/communication", tag = "legacy",
    params(("campaign_id" = String, Path), ("attempt_id" = String, Path), ReportQuery), security(("basic" = [])),
    responses((status = 200, description = "The rows: a JSON array, or CSV with format=csv (columns as the JSON fields)",
            content((Vec<CommunicationReportRow> = "application/json"), (String = "text/csv"))),
        (status = 400, body = RpcStatus, description = "Unknown format or query parameter; or more calls in the attempt than one request reads (200,000 by default): reason too_many_communications"), (status = 401, body = RpcStatus),
        (status = 404, body = RpcStatus, description = "No such campaign in this account, or no such attempt of it"),
        (status = 500, body = RpcStatus)))]
async fn communication_report(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path((campaign_id, attempt_id)): axum::extract::Path<(String, String)>,
    q: Result<axum::extract::Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, LegacyError> {
    let csv = wants_csv(query(q)?)?;
    let (a, calls) = attempt_calls(&state, &who, &campaign_id, &attempt_id).await?;
    let rows: Vec<CommunicationReportRow> = calls.iter().map(Into::into).collect();
    if !csv {
        return Ok(axum::Json(rows).into_response());
    }
    let mut w = csv::Writer::default();
    w.record([
        "communication_sid",
        "contact_sid",
        "phone",
        "from_number",
        "communication_status",
        "call_status",
        "sip_code",
        "answered",
        "setup_time_ms",
        "duration",
        "goal",
        "end_reason",
        "error",
        "started_at",
        "answered_at",
        "ended_at",
        "creation_time",
    ]);
    for r in rows {
        w.record([
            r.communication_sid,
            r.contact_sid,
            r.phone,
            r.from_number,
            r.communication_status.as_str().to_string(),
            r.call_status,
            r.sip_code.to_string(),
            r.answered.to_string(),
            r.setup_time_ms.to_string(),
            r.duration.to_string(),
            r.goal,
            r.end_reason,
            r.error,
            time_cell(r.started_at),
            time_cell(r.answered_at),
            time_cell(r.ended_at),
            time_cell(Some(r.creation_time)),
        ]);
    }
    Ok(csv_response(
        format!("{}-communications.csv", a.sid),
        w.finish(),
    ))
}

/// One contact dialled by an attempt (a row of the contact report).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContactReportRow {
    pub contact_sid: String,
    pub phone: String,
    /// The contact's variables (the initial variables of its call).
    #[schema(value_type = Object)]
    pub variables: serde_json::Value,
    pub communication_sid: String,
    pub communication_status: CommunicationStatus,
    /// How the call leg ended; "".
    pub call_status: String,
    pub answered: bool,
    /// Seconds from answer to hang-up; 0.
    pub duration: i64,
    /// The last goal reached; "".
    pub goal: String,
    /// The scenario's variables at the end of the call (`{}` before).
    #[schema(value_type = Object)]
    pub result: serde_json::Value,
}

fn json_object(text: &str) -> serde_json::Value {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::Value::Object(Default::default()))
}

impl From<&AttemptCall> for ContactReportRow {
    fn from(a: &AttemptCall) -> Self {
        let c = &a.communication;
        ContactReportRow {
            contact_sid: a.contact_sid.clone(),
            phone: c.recipient.clone(),
            variables: json_object(&c.data),
            communication_sid: c.sid.clone(),
            communication_status: c.communication_status,
            call_status: c.call_status.clone().unwrap_or_default(),
            answered: answered(c),
            duration: c.duration,
            goal: c.goal_list().pop().unwrap_or_default(),
            result: json_object(&c.variables),
        }
    }
}

/// A variable's CSV cell: a string as it is, any other value as JSON text.
fn value_cell(v: Option<&serde_json::Value>) -> String {
    match v {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

/// The keys of an object field across rows, sorted.
fn keys<'a>(rows: impl Iterator<Item = &'a serde_json::Value>) -> Vec<String> {
    rows.filter_map(serde_json::Value::as_object)
        .flat_map(|o| o.keys().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The contact report: one row per contact the attempt dialled, oldest call first. In CSV
/// each contact variable is a column of its own (named as the variable) and each result
/// variable one named `result.<name>`, after the fixed columns.
#[utoipa::path(get, path = "/v1/campaign/{campaign_id}/attempt/{attempt_id}/report/contact", tag = "legacy",
    params(("campaign_id" = String, Path), ("attempt_id" = String, Path), ReportQuery), security(("basic" = [])),
    responses((status = 200, description = "The rows: a JSON array, or CSV with format=csv (fixed columns, then one per variable and one per result variable)",
            content((Vec<ContactReportRow> = "application/json"), (String = "text/csv"))),
        (status = 400, body = RpcStatus, description = "Unknown format or query parameter; or more calls in the attempt than one request reads (200,000 by default): reason too_many_communications"), (status = 401, body = RpcStatus),
        (status = 404, body = RpcStatus, description = "No such campaign in this account, or no such attempt of it"),
        (status = 500, body = RpcStatus)))]
async fn contact_report(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path((campaign_id, attempt_id)): axum::extract::Path<(String, String)>,
    q: Result<axum::extract::Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, LegacyError> {
    let csv = wants_csv(query(q)?)?;
    let (a, calls) = attempt_calls(&state, &who, &campaign_id, &attempt_id).await?;
    let rows: Vec<ContactReportRow> = calls.iter().map(Into::into).collect();
    if !csv {
        return Ok(axum::Json(rows).into_response());
    }
    const FIXED: [&str; 8] = [
        "contact_sid",
        "phone",
        "communication_sid",
        "communication_status",
        "call_status",
        "answered",
        "duration",
        "goal",
    ];
    let variables = keys(rows.iter().map(|r| &r.variables));
    let results = keys(rows.iter().map(|r| &r.result));
    let mut w = csv::Writer::default();
    w.record(
        FIXED
            .iter()
            .map(|f| f.to_string())
            .chain(variables.iter().cloned())
            .chain(results.iter().map(|k| format!("result.{k}"))),
    );
    for r in rows {
        let fixed = [
            r.contact_sid,
            r.phone,
            r.communication_sid,
            r.communication_status.as_str().to_string(),
            r.call_status,
            r.answered.to_string(),
            r.duration.to_string(),
            r.goal,
        ];
        w.record(
            fixed
                .into_iter()
                .chain(variables.iter().map(|k| value_cell(r.variables.get(k))))
                .chain(results.iter().map(|k| value_cell(r.result.get(k)))),
        );
    }
    Ok(csv_response(format!("{}-contacts.csv", a.sid), w.finish()))
}
