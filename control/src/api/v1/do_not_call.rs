//! The do-not-call list of an account: numbers its calls never dial. A dispatch to a listed
//! number is refused (422 `recipient_suppressed`, nothing stored); a call already
//! dispatched whose number is listed later fails without a dial (`error` starting
//! `recipient_suppressed`). Numbers are kept in E.164 form. See docs/strategies.md.

use axum::{
    extract::State,
    http::{HeaderMap, StatusCode, header},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::api::caller::Authz;
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    store::DoNotCallRecord,
    usecases::{normalize_e164, parse_do_not_call_csv},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(add_number, list_numbers))
        .routes(routes!(get_number, remove_number))
        .routes(routes!(import_csv))
}

/// A number on the do-not-call list.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DoNotCallEntry {
    /// E.164 (`+` and digits).
    pub number: String,
    /// How it was added: `api` (POST /v1/do-not-call), `import` (the CSV import) or
    /// `opt_out` (the recipient asked during a call).
    pub source: String,
    pub created_at: DateTime<Utc>,
}

impl From<&DoNotCallRecord> for DoNotCallEntry {
    fn from(r: &DoNotCallRecord) -> Self {
        DoNotCallEntry {
            number: r.number.clone(),
            source: r.source.clone(),
            created_at: r.created_at,
        }
    }
}

/// Body of POST /v1/do-not-call.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddNumber {
    /// An international number: `+` or `00`, the country code and the number; spaces,
    /// dashes, dots and parentheses are dropped. Stored in E.164 form.
    pub number: String,
}

/// Result of a CSV import.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ImportResult {
    /// Distinct numbers in the file.
    pub numbers: u64,
    /// Of those, the ones that were not listed yet.
    pub added: u64,
}

/// Query of GET /v1/do-not-call.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DoNotCallListQuery {
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// Add a number to the account's do-not-call list. 201 when it is new, 200 with the
/// existing entry when it was listed already.
#[utoipa::path(post, path = "/v1/do-not-call", tag = "do-not-call", request_body = AddNumber, params(("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 201, body = DoNotCallEntry), (status = 200, body = DoNotCallEntry, description = "Listed already"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "`invalid_number`: not an international number"), (status = 500, body = ErrorBody)))]
async fn add_number(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Json(b): Json<AddNumber>,
) -> ApiResult<(StatusCode, Json<DoNotCallEntry>)> {
    let account = auth.account_scope(&state).await?;
    let number = normalize_e164("number", &b.number)?;
    let added = state
        .store
        .do_not_call_add(
            &account.tenant_sid,
            &account.sid,
            std::slice::from_ref(&number),
            "api",
        )
        .await?;
    let entry = state
        .store
        .do_not_call_get(&account.sid, &number)
        .await?
        .ok_or_else(|| ApiError::not_found("do_not_call_entry"))?;
    let status = if added > 0 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(DoNotCallEntry::from(&entry))))
}

/// List the account's do-not-call numbers, newest first.
#[utoipa::path(get, path = "/v1/do-not-call", tag = "do-not-call", params(DoNotCallListQuery, ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = Page<DoNotCallEntry>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_numbers(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<DoNotCallListQuery>,
) -> ApiResult<Json<Page<DoNotCallEntry>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let account = auth.account_scope(&state).await?;
    let (rows, total) = state
        .store
        .do_not_call_list(&account.sid, page.limit, page.offset)
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(DoNotCallEntry::from).collect(),
        total,
        page,
    )))
}

/// Whether a number is listed: 200 with its entry, 404 `do_not_call_entry_not_found`.
/// The path takes the number in any form POST accepts (`+` may be sent as `%2B`).
#[utoipa::path(get, path = "/v1/do-not-call/{number}", tag = "do-not-call", params(("number" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = DoNotCallEntry), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody, description = "`invalid_number`"), (status = 500, body = ErrorBody)))]
async fn get_number(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(number): Path<String>,
) -> ApiResult<Json<DoNotCallEntry>> {
    let account = auth.account_scope(&state).await?;
    let number = normalize_e164("number", &number)?;
    let entry = state
        .store
        .do_not_call_get(&account.sid, &number)
        .await?
        .ok_or_else(|| ApiError::not_found("do_not_call_entry"))?;
    Ok(Json(DoNotCallEntry::from(&entry)))
}

/// Remove a number from the list (calls to it may be dispatched again). 404 when it is
/// not listed.
#[utoipa::path(delete, path = "/v1/do-not-call/{number}", tag = "do-not-call", params(("number" = String, Path), ("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 204, description = "Removed"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody, description = "`invalid_number`"), (status = 500, body = ErrorBody)))]
async fn remove_number(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(number): Path<String>,
) -> ApiResult<StatusCode> {
    let account = auth.account_scope(&state).await?;
    let number = normalize_e164("number", &number)?;
    if state
        .store
        .do_not_call_remove(&account.sid, &number)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("do_not_call_entry"))
    }
}

/// Import numbers from a CSV body (`text/csv` or `text/plain`): one number per line in
/// the first column (further columns ignored), an optional header line whose first cell
/// is `number` or `phone`, blank lines skipped, `,` `;` or tab as separator. All or
/// nothing: the first bad line is 422 `invalid_csv` naming it (`data.line`, 1-based) and
/// nothing is added. At most 100000 numbers per import.
#[utoipa::path(post, path = "/v1/do-not-call/-/import", tag = "do-not-call",
    request_body(content = String, content_type = "text/csv", description = "One international number per line, first column"),
    params(("X-Account-Sid" = Option<String>, Header)),
    security(("bearer" = [])),
    responses((status = 200, body = ImportResult), (status = 400, body = ErrorBody, description = "`invalid_body`: not UTF-8 text"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 415, body = ErrorBody, description = "`unsupported_content_type`: not text/csv or text/plain"),
        (status = 422, body = ErrorBody, description = "`invalid_csv` naming the first bad line; nothing imported"),
        (status = 500, body = ErrorBody)))]
async fn import_csv(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Json<ImportResult>> {
    let account = auth.account_scope(&state).await?;
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if !matches!(ct.as_str(), "text/csv" | "text/plain") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_content_type",
            "Content-Type: text/csv or text/plain",
        ));
    }
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::bad_request("invalid_body", "the CSV is not UTF-8 text"))?;
    let numbers = parse_do_not_call_csv(text)?;
    let added = state
        .store
        .do_not_call_add(&account.tenant_sid, &account.sid, &numbers, "import")
        .await?;
    Ok(Json(ImportResult {
        numbers: numbers.len() as u64,
        added,
    }))
}
