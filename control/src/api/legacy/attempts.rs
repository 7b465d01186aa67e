//! Attempts of a campaign (`/v1/campaign/{campaign_id}/attempt…`): one launch of the
//! campaign for its contacts. An attempt dials every contact of the campaign that no
//! earlier attempt dialled, once, and with `redial` also contacts whose latest call ended
//! (`all`) or ended unanswered (`failed`), through the campaign's agent: it creates one
//! communication per contact with [`AgentDispatch`], as POST /v1/communication/-/dispatch
//! does, all in one dispatch batch, and the engine's dialer claims them within the agent's
//! cps, cpl and calling schedule like any other.

use super::*;
use crate::{
    ids::{new_sid, prefix},
    store::{LegacyAttemptRecord, NewAttempt, NewAttemptCall, Redial},
    text_enum::text_enum,
    usecases::{AgentDispatch, Idempotent, request_hash},
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

text_enum!(
    "redial mode",
    /// Which contacts an attempt dials besides those no attempt dialled yet: `none` (the
    /// default), `failed` (also those whose latest call ended without an answer: busy, no
    /// answer, rejected, failed, canceled, interrupted) or `all` (also every contact whose
    /// latest call has ended). A contact whose latest call has not ended is never redialled.
    pub enum RedialMode {
        None = "none",
        Failed = "failed",
        All = "all",
    }
);

impl From<RedialMode> for Redial {
    fn from(m: RedialMode) -> Redial {
        match m {
            RedialMode::None => Redial::None,
            RedialMode::Failed => Redial::Failed,
            RedialMode::All => Redial::All,
        }
    }
}

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
    /// The dispatch batch of its calls (`bat_…`): `GET /v1/communication/-/statistics?batch=…`
    /// and the v1 list and report take it. "" for an attempt created before batches existed.
    pub batch_sid: String,
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
            batch_sid: a.batch_sid.clone(),
            creation_time: a.creation_time,
            update_time: a.update_time,
        }
    }
}

/// Body of POST /v1/campaign/{campaign_id}/attempt (`{}` for an instant attempt).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAttempt {
    /// Delayed attempt: its calls are due at this time (in the future). Absent or null:
    /// an instant attempt, due now.
    #[serde(default)]
    pub scheduled_at: Option<DateTime<Utc>>,
    /// Contacts to dial again besides those never dialled: `none` (default), `failed`, `all`.
    #[serde(default)]
    pub redial: Option<RedialMode>,
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

/// Launch the campaign for every contact no earlier attempt dialled (and, with `redial`,
/// those to dial again): instant, or delayed to `scheduled_at`. 200 returns the attempt.
/// With an `Idempotency-Key`, a repeat of the same request within 24 hours creates
/// nothing and answers the attempt the first one created (`Idempotent-Replayed: true`).
#[utoipa::path(post, path = "/v1/campaign/{campaign_id}/attempt", tag = "legacy", params(("campaign_id" = String, Path),
        ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 255, pattern = "^[!-~]{1,255}$", description = "1 to 255 visible ASCII characters chosen by the client; kept 24 hours per account")),
    request_body = CreateAttempt, security(("basic" = [])),
    responses((status = 200, body = Attempt),
        (status = 400, body = RpcStatus, description = "INVALID_ARGUMENT (3): malformed body, scheduled_at not in the future, the campaign's scenario unpublished or no number to call from, a malformed `Idempotency-Key` (reason `invalid_idempotency_key`) or one an earlier request with another body used (reason `idempotency_key_reused`); FAILED_PRECONDITION (9): no contact left to dial (none new, none to redial), or the campaign is archived"),
        (status = 401, body = RpcStatus), (status = 404, body = RpcStatus, description = "No such campaign in this account"),
        (status = 409, body = RpcStatus, description = "ABORTED (10): a concurrent attempt took (or redialled) some of the contacts; create the attempt again to dial the rest. Also (reason `idempotency_key_in_flight`) while the first request with the same `Idempotency-Key` still runs"),
        (status = 500, body = RpcStatus)))]
async fn create_attempt(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(campaign_id): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
    b: Result<axum::Json<CreateAttempt>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::response::Response, LegacyError> {
    use axum::response::IntoResponse;
    let b = body(b)?;
    let key = crate::api::idempotency::key(&headers)?;
    let Some(key) = key else {
        let a = launch(&state, &who, &campaign_id, b).await?;
        return Ok(axum::Json(a).into_response());
    };
    let body = serde_json::to_value(&b).map_err(|_| LegacyError::internal())?;
    let hash = request_hash(&format!("POST /v1/campaign/{campaign_id}/attempt"), &body);
    let ops = state.ops();
    match ops.idempotency_start(&who.account_sid, &key, &hash).await? {
        Idempotent::Replay(sid) => {
            let a = attempt_of(&state, &who, &campaign_id, &sid).await?;
            let mut r = axum::Json(Attempt::of(&a)).into_response();
            r.headers_mut().insert(
                crate::api::idempotency::REPLAYED_HEADER,
                axum::http::HeaderValue::from_static("true"),
            );
            Ok(r)
        }
        Idempotent::Run => {
            let res = launch(&state, &who, &campaign_id, b).await;
            let created = res.as_ref().ok().map(|a| a.sid.as_str());
            ops.idempotency_finish(&who.account_sid, &key, created)
                .await?;
            Ok(axum::Json(res?).into_response())
        }
    }
}

/// Creates the attempt a create request asks for (see [`create_attempt`]).
async fn launch(
    state: &AppState,
    who: &LegacyAccount,
    campaign_id: &str,
    b: CreateAttempt,
) -> Result<Attempt, LegacyError> {
    let c = campaign_of(state, who, campaign_id).await?;
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
    let dispatch = AgentDispatch::prepare(&state.ops(), &account, &c.sid).await?;
    let redial = b.redial.unwrap_or(RedialMode::None);
    let contacts = state
        .store
        .legacy_contacts_to_dial(&who.account_sid, &c.sid, redial.into())
        .await?;
    if contacts.is_empty() {
        return Err(LegacyError::failed_precondition(match redial {
            RedialMode::None => {
                "no contact to dial: every contact was dialled by an earlier attempt (add contacts, or redial with \"redial\": \"failed\" or \"all\")"
            }
            RedialMode::Failed => {
                "no contact to dial: none is new and no contact's latest call ended unanswered"
            }
            RedialMode::All => {
                "no contact to dial: none is new and every dialled contact's latest call is still under way"
            }
        }));
    }
    let batch_sid = new_sid(prefix::BATCH);
    let calls = contacts
        .iter()
        .map(|k| {
            let data: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&k.variables).map_err(|e| {
                    tracing::error!(contact = %k.sid, error = %e, "stored contact variables unreadable");
                    LegacyError::internal()
                })?;
            let new =
                dispatch.communication(k.phone.clone(), &data, b.scheduled_at, None, &batch_sid)?;
            Ok(NewAttemptCall {
                contact_sid: k.sid.clone(),
                dial: k.dial_count + 1,
                communication: new,
            })
        })
        .collect::<Result<Vec<_>, LegacyError>>()?;
    let attempt = NewAttempt {
        sid: new_sid(prefix::LEGACY_ATTEMPT),
        tenant_sid: who.tenant_sid.clone(),
        account_sid: who.account_sid.clone(),
        campaign_sid: c.sid.clone(),
        scheduled_at: b.scheduled_at.unwrap_or(now),
        delayed: b.scheduled_at.is_some(),
        batch_sid,
    };
    state
        .store
        .legacy_attempt_create(&attempt, &calls)
        .await
        .map_err(|e| match e {
            StoreError::Unique => LegacyError::aborted(
                "a concurrent attempt took (or redialled) some of these contacts; create the attempt again to dial the rest",
            ),
            other => other.into(),
        })?;
    let a = state
        .store
        .legacy_attempt_get(&who.account_sid, &c.sid, &attempt.sid)
        .await?
        .ok_or_else(LegacyError::internal)?;
    Ok(Attempt::of(&a))
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
