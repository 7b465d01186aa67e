//! What a finished call left in object storage, served per communication: the saved
//! history, the recording and the caller audio of each listen turn. Paths come from
//! [`crate::objects::CallObjects`]; only the caller's own communications are visible.
//! Bytes are served through [`super::audio::serve_object`], as every stored object is:
//! an allow-listed type, `nosniff`, a sandboxing CSP and `Content-Disposition: attachment`.

use std::time::Duration;

use axum::{
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::audio::{DOWNLOAD_HEADERS, serve_object};
use super::communications::visible_communication;
use crate::api::caller::Authz;
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Path, Query},
    auth::cap,
    communication::history::CallHistory,
    objects::{CallObjects, link_ttl, media_type},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(history))
        .routes(routes!(recording))
        .routes(routes!(speech_recording))
}

/// How an audio object is handed out.
enum Delivery {
    /// Streamed through the service.
    Proxy,
    /// A signed link valid this long.
    Link(Duration),
}

fn delivery(mode: Option<&str>, expires_in: Option<u64>) -> ApiResult<Delivery> {
    let url_mode = match mode {
        None | Some("proxy") => false,
        Some("url") => true,
        Some(_) => {
            return Err(ApiError::bad_request("invalid_query", "mode: proxy or url"));
        }
    };
    let ttl = link_ttl("expires_in", expires_in)
        .map_err(|m| ApiError::bad_request("invalid_query", m))?;
    Ok(if url_mode {
        Delivery::Link(ttl)
    } else {
        Delivery::Proxy
    })
}

/// Serves an object the caller may read: its bytes, or a signed link to it.
async fn serve(
    state: &AppState,
    path: &str,
    how: Delivery,
    absent: impl Fn() -> ApiError,
) -> ApiResult<Response> {
    if state.objects.head(path).await.is_err() {
        return Err(absent());
    }
    let content_type = media_type::type_of_path(path);
    if let Delivery::Link(ttl) = how {
        let link = state
            .objects
            .signed_link(path, ttl, Some(content_type))
            .await
            .map_err(ApiError::internal)?;
        return Ok(Json(link).into_response());
    }
    serve_object(state, path, content_type, absent).await
}

/// The saved history of an answered call: every brick, prompt, listen turn (with its
/// latency breakdown), transfer and the media counters.
#[utoipa::path(get, path = "/v1/communication/{id}/history", tag = "communications",
    params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 200, body = CallHistory, description = DOWNLOAD_HEADERS),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "`communication`: no such communication; `history`: none saved (the call was not answered, or has not ended)"),
        (status = 500, body = ErrorBody)))]
async fn history(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let account = auth.account_scope(&state).await?;
    let comm = visible_communication(&state, &account, &id).await?;
    let absent = || ApiError::not_found("history");
    let path = comm
        .history_path
        .filter(|_| comm.has_history)
        .unwrap_or_else(|| CallObjects::new(&account.sid, &comm.sid).history());
    serve_object(&state, &path, media_type::JSON, absent).await
}

/// Query of the call's audio objects.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RecordingQuery {
    /// `proxy` (default): stream the audio; `url`: return a signed link.
    #[serde(default)]
    #[param(pattern = "^(proxy|url)$")]
    pub mode: Option<String>,
    /// Link lifetime in seconds (url mode): default 3600, at most 604800.
    #[serde(default)]
    #[param(minimum = 1, maximum = 604800)]
    pub expires_in: Option<u64>,
}

/// The call's recording (stereo WAV: caller left, bot right), when the agent records calls.
#[utoipa::path(get, path = "/v1/communication/{id}/recording", tag = "communications",
    params(("id" = String, Path), RecordingQuery, ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 200, description = "The audio (proxy mode, audio/wav, served as a download: `X-Content-Type-Options: nosniff`, a sandboxing `Content-Security-Policy`, `Content-Disposition: attachment`) or a Signed link (url mode)", body = crate::objects::SignedLink),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "`communication_not_found`: no such communication; `recording_not_found`: none stored, with the message saying why (the call has not ended, was not answered, has no agent or an agent with `call_recording` off, could not be recorded, or its recording was deleted)"),
        (status = 500, body = ErrorBody)))]
async fn recording(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
    Query(q): Query<RecordingQuery>,
) -> ApiResult<Response> {
    let how = delivery(q.mode.as_deref(), q.expires_in)?;
    let account = auth.account_scope(&state).await?;
    let comm = visible_communication(&state, &account, &id).await?;
    let path = match comm.recording_path.as_deref() {
        Some(p) if comm.has_recording => p.to_string(),
        _ => return Err(no_recording(&state, &comm).await?),
    };
    serve(&state, &path, how, || {
        recording_not_found(
            "the call's recording is no longer stored: it was deleted from object storage",
        )
    })
    .await
}

/// 404 `recording_not_found` with `why` as the message.
fn recording_not_found(why: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "recording_not_found", why)
}

/// Why `comm` has no recording stored, as a 404 (the store's errors stay 500).
async fn no_recording(
    state: &AppState,
    comm: &crate::store::CommunicationRecord,
) -> ApiResult<ApiError> {
    let why = if comm.ended_at.is_none() {
        "the call has not ended: its recording is stored when it ends".to_string()
    } else if comm.answered_at.is_none() {
        "the call was not answered: nothing was recorded".to_string()
    } else {
        match &comm.agent_sid {
            None => "the call has no agent (a scenario test call or a browser call): only calls \
                     of an agent with call_recording on are recorded"
                .to_string(),
            Some(agent_sid) => match state.store.agent_get(agent_sid).await? {
                Some(a) if !a.call_recording => format!(
                    "the call's agent {agent_sid} does not record calls: its call_recording is off"
                ),
                _ => "no recording was stored for this call: the recording could not start or \
                      be saved (the node's log says why), or the agent's call_recording was off \
                      when the call ran"
                    .to_string(),
            },
        }
    };
    Ok(recording_not_found(why))
}

/// Query of GET /v1/communication/{id}/speech-recording.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SpeechRecordingQuery {
    /// Bucket-qualified storage path as referenced by the saved history field
    /// `speech_recognition_recording` (`callsmith/calls/<account>/<communication>/speech/<n>.wav`).
    pub path: String,
    /// `proxy` (default): stream the audio; `url`: return a signed link.
    #[serde(default)]
    #[param(pattern = "^(proxy|url)$")]
    pub mode: Option<String>,
    /// Link lifetime in seconds (url mode): default 3600, at most 604800.
    #[serde(default)]
    #[param(minimum = 1, maximum = 604800)]
    pub expires_in: Option<u64>,
}

/// Serve a speech-recognition recording referenced from the call's saved history.
#[utoipa::path(get, path = "/v1/communication/{id}/speech-recording", tag = "communications",
    params(("id" = String, Path), SpeechRecordingQuery, ("X-Account-Sid" = Option<String>, Header, description = "Account; required for superuser and tenant keys")),
    security(("bearer" = [])),
    responses((status = 200, description = "The audio (proxy mode, served as a download: `X-Content-Type-Options: nosniff`, a sandboxing `Content-Security-Policy`, `Content-Disposition: attachment`) or a Signed link (url mode)", body = crate::objects::SignedLink),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn speech_recording(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
    Query(q): Query<SpeechRecordingQuery>,
) -> ApiResult<Response> {
    let how = delivery(q.mode.as_deref(), q.expires_in)?;
    let account = auth.account_scope(&state).await?;
    let comm = visible_communication(&state, &account, &id).await?;
    let absent = || ApiError::not_found("speech_recording");
    // Only this communication's turn recordings; anything else reads as absent.
    let objects = CallObjects::new(&account.sid, &comm.sid);
    let path = crate::objects::strip_bucket(&q.path)
        .filter(|r| objects.is_speech_turn(r))
        .ok_or_else(absent)?;
    serve(&state, path, how, absent).await
}
