//! Attempts of a campaign (`/v1/campaign/{campaign_id}/attempt…`): one launch of the
//! campaign for its contacts. An attempt dials every contact of the campaign that no
//! earlier attempt dialled, once, through the campaign's agent: it creates one
//! communication per contact with [`AgentDispatch`], as POST /v1/communication/-/dispatch
//! does, and the engine's dialer claims them within the agent's cps, cpl and calling
//! schedule like any other.

use super::*;
use crate::{
    api::v1::communications::AgentDispatch,
    ids::{new_sid, prefix},
    store::{LegacyAttemptRecord, NewAttempt},
    text_enum::text_enum,
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_attempts, create_attempt))
        .routes(routes!(get_attempt))
        .routes(routes!(cancel_attempt))
}

text_enum!(
    "attempt status",
    /// Where an attempt is, derived from its calls: `scheduled` (delayed, not yet due),
    /// `running` (due, calls not all final), `completed` (every call final), `canceled`
    /// (cancel requested; its undialled calls were canceled, calls already live end on
    /// their own).
    pub enum AttemptStatus {
        Scheduled = "scheduled",
        Running = "running",
        Completed = "completed",
        Canceled = "canceled",
    }
);

impl AttemptStatus {
    pub fn of(a: &LegacyAttemptRecord, now: DateTime<Utc>) -> AttemptStatus {
        if a.canceled_at.is_some() {
            AttemptStatus::Canceled
        } else if a.open_count == 0 {
            AttemptStatus::Completed
        } else if a.scheduled_at > now {
            AttemptStatus::Scheduled
        } else {
            AttemptStatus::Running
        }
    }
}

/// Legacy attempt record.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Attempt {
    /// `att_…`.
    pub sid: String,
    pub campaign_sid: String,
    pub status: AttemptStatus,
    /// Whether it was created with a `scheduled_at`.
    pub delayed: bool,
    /// When its calls are due: the given time, or the creation time of an instant attempt.
    pub scheduled_at: DateTime<Utc>,
    /// Contacts it dials (one communication each).
    pub contact_count: i64,
    pub creation_time: DateTime<Utc>,
    pub update_time: DateTime<Utc>,
}

impl Attempt {
    fn of(a: &LegacyAttemptRecord) -> Attempt {
        Attempt {
            sid: a.sid.clone(),
            campaign_sid: a.campaign_sid.clone(),
            status: AttemptStatus::of(a, crate::store::now()),
            delayed: a.delayed,
            scheduled_at: a.scheduled_at,
            contact_count: a.contact_count,
            creation_time: a.creation_time,
            update_time: a.update_time,
        }
    }
}

/// Body of POST /v1/campaign/{campaign_id}/attempt (`{}` for an instant attempt).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAttempt {
    /// Delayed attempt: its calls are due at this time (in the future). Absent or null:
    /// an instant attempt, due now.
    #[serde(default)]
    pub scheduled_at: Option<DateTime<Utc>>,
}

/// The attempt `attempt_id` of the campaign `campaign_id` of the authenticated account;
/// 404 naming the campaign or the attempt otherwise.
pub(super) async fn attempt_of(
    state: &AppState,
    who: &LegacyAccount,
    campaign_id: &str,
    attempt_id: &str,
) -> Result<LegacyAttemptRecord, LegacyError> {
    let c = campaign_of(state, who, campaign_id).await?;
    state
        .store
        .legacy_attempt_get(&who.account_sid, &c.sid, attempt_id)
        .await?
        .ok_or_else(|| LegacyError::not_found("attempt"))
}

/// Launch the campaign for every contact no earlier attempt dialled: instant, or delayed
/// to `scheduled_at`. 200 returns the attempt.
#[utoipa::path(post, path = "/v1/campaign/{campaign_id}/attempt", tag = "legacy", params(("campaign_id" = String, Path)),
    request_body = CreateAttempt, security(("basic" = [])),
    responses((status = 200, body = Attempt),
        (status = 400, body = RpcStatus, description = "INVALID_ARGUMENT (3): malformed body, scheduled_at not in the future, the campaign's scenario unpublished or no number to call from; FAILED_PRECONDITION (9): no contact left to dial, or the campaign is archived"),
        (status = 401, body = RpcStatus), (status = 404, body = RpcStatus, description = "No such campaign in this account"),
        (status = 409, body = RpcStatus, description = "ABORTED (10): a concurrent attempt took some of the contacts; create the attempt again to dial the rest"),
        (status = 500, body = RpcStatus)))]
async fn create_attempt(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(campaign_id): axum::extract::Path<String>,
    b: Result<axum::Json<CreateAttempt>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<Attempt>, LegacyError> {
    let b = body(b)?;
    let c = campaign_of(&state, &who, &campaign_id).await?;
    let now = crate::store::now();
    if let Some(t) = b.scheduled_at
        && t <= now
    {
        return Err(LegacyError::invalid(format!(
            "scheduled_at: {} is not in the future (omit it for an instant attempt)",
            t.to_rfc3339()
        )));
    }
    if c.archive_time.is_some() {
        return Err(LegacyError::failed_precondition(
            "the campaign is archived: an archived campaign never dials",
        ));
    }
    let account = state
        .store
        .account_get(&who.account_sid)
        .await?
        .ok_or_else(LegacyError::unauthenticated)?;
    let dispatch = AgentDispatch::prepare(&state, &account, &c.sid).await?;
    let contacts = state
        .store
        .legacy_contacts_undialled(&who.account_sid, &c.sid)
        .await?;
    if contacts.is_empty() {
        return Err(LegacyError::failed_precondition(
            "no contact to dial: the campaign has none that an earlier attempt did not dial",
        ));
    }
    let calls = contacts
        .iter()
        .map(|k| {
            let data: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&k.variables).map_err(|e| {
                    tracing::error!(contact = %k.sid, error = %e, "stored contact variables unreadable");
                    LegacyError::internal()
                })?;
            let new = dispatch.communication(k.phone.clone(), &data, b.scheduled_at, None)?;
            Ok((k.sid.clone(), new))
        })
        .collect::<Result<Vec<_>, LegacyError>>()?;
    let attempt = NewAttempt {
        sid: new_sid(prefix::LEGACY_ATTEMPT),
        tenant_sid: who.tenant_sid.clone(),
        account_sid: who.account_sid.clone(),
        campaign_sid: c.sid.clone(),
        scheduled_at: b.scheduled_at.unwrap_or(now),
        delayed: b.scheduled_at.is_some(),
    };
    state
        .store
        .legacy_attempt_create(&attempt, &calls)
        .await
        .map_err(|e| match e {
            StoreError::Unique => LegacyError::aborted(
                "a concurrent attempt took some of these contacts; create the attempt again to dial the rest",
            ),
            other => other.into(),
        })?;
    let a = state
        .store
        .legacy_attempt_get(&who.account_sid, &c.sid, &attempt.sid)
        .await?
        .ok_or_else(LegacyError::internal)?;
    Ok(axum::Json(Attempt::of(&a)))
}

/// Query of GET /v1/campaign/{campaign_id}/attempt: strings, as GET /v1/campaign's.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AttemptListQuery {
    /// Page size (int64): absent or 0 → 100, at most 500.
    #[serde(rename = "options.limit")]
    pub options_limit: Option<String>,
    /// Attempts skipped (int64), default 0.
    #[serde(rename = "options.offset")]
    pub options_offset: Option<String>,
    /// Flat form of options.limit.
    pub limit: Option<String>,
    /// Flat form of options.offset.
    pub offset: Option<String>,
}

/// List a campaign's attempts, newest first. 200 returns an array.
#[utoipa::path(get, path = "/v1/campaign/{campaign_id}/attempt", tag = "legacy", params(("campaign_id" = String, Path), AttemptListQuery),
    security(("basic" = [])),
    responses((status = 200, body = Vec<Attempt>), (status = 400, body = RpcStatus), (status = 401, body = RpcStatus),
        (status = 404, body = RpcStatus, description = "No such campaign in this account"), (status = 500, body = RpcStatus)))]
async fn list_attempts(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(campaign_id): axum::extract::Path<String>,
    q: Result<axum::extract::Query<AttemptListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<axum::Json<Vec<Attempt>>, LegacyError> {
    let q = query(q)?;
    let (limit, offset) = page(q.options_limit, q.limit, q.options_offset, q.offset)?;
    let c = campaign_of(&state, &who, &campaign_id).await?;
    let rows = state
        .store
        .legacy_attempt_list(&who.account_sid, &c.sid, limit, offset)
        .await?;
    Ok(axum::Json(rows.iter().map(Attempt::of).collect()))
}

/// Get an attempt.
#[utoipa::path(get, path = "/v1/campaign/{campaign_id}/attempt/{attempt_id}", tag = "legacy",
    params(("campaign_id" = String, Path), ("attempt_id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = Attempt), (status = 401, body = RpcStatus),
        (status = 404, body = RpcStatus, description = "No such campaign in this account, or no such attempt of it"),
        (status = 500, body = RpcStatus)))]
async fn get_attempt(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path((campaign_id, attempt_id)): axum::extract::Path<(String, String)>,
) -> Result<axum::Json<Attempt>, LegacyError> {
    let a = attempt_of(&state, &who, &campaign_id, &attempt_id).await?;
    Ok(axum::Json(Attempt::of(&a)))
}

/// Cancel an attempt: its calls no dialer has claimed yet (`new`, `queued`) end
/// `canceled` at once; calls already dialling or answered run to their end. 200 returns
/// the attempt (status `canceled`).
#[utoipa::path(post, path = "/v1/campaign/{campaign_id}/attempt/{attempt_id}/cancel", tag = "legacy",
    params(("campaign_id" = String, Path), ("attempt_id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = Attempt), (status = 401, body = RpcStatus),
        (status = 404, body = RpcStatus, description = "No such campaign in this account, or no such attempt of it"),
        (status = 409, body = RpcStatus, description = "ABORTED (10): the attempt was canceled already, or has completed"),
        (status = 500, body = RpcStatus)))]
async fn cancel_attempt(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path((campaign_id, attempt_id)): axum::extract::Path<(String, String)>,
) -> Result<axum::Json<Attempt>, LegacyError> {
    let a = attempt_of(&state, &who, &campaign_id, &attempt_id).await?;
    let already = || LegacyError::aborted("the attempt was canceled already");
    match AttemptStatus::of(&a, crate::store::now()) {
        AttemptStatus::Canceled => return Err(already()),
        AttemptStatus::Completed => {
            return Err(LegacyError::aborted(
                "the attempt has completed: every call of it has ended",
            ));
        }
        AttemptStatus::Scheduled | AttemptStatus::Running => {}
    }
    state
        .store
        .legacy_attempt_cancel(&who.account_sid, &a.sid)
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => already(),
            StoreError::NotFound => LegacyError::not_found("attempt"),
            other => other.into(),
        })?;
    let a = attempt_of(&state, &who, &campaign_id, &attempt_id).await?;
    Ok(axum::Json(Attempt::of(&a)))
}
