//! LLM chat streams: start a chat against a configured OpenAI-compatible provider and
//! poll its result. Gated by the global_llm feature flag of the account (403
//! `llm_disabled` when withheld). Error bodies are the adapter envelope.

use axum::{extract::State, http::StatusCode};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::adapter_error::{Adapted, AdaptedBody, AdapterError, AdapterErrorBody, AdapterResult};
use crate::api::caller::Authz;
use crate::{
    adapters::llm::{
        ChatMessage, ChatRequest, ChatStatus, FunctionCall, PartsBehavior, ToolCall, llm_enabled,
    },
    api::{AppState, Json, Path, Query},
    auth::cap,
    store::AccountRecord,
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_chat))
        .routes(routes!(poll_chat))
}

/// Body of POST /v1/adapters/llm/chat/stream.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartChat {
    /// The conversation so far (OpenAI chat format).
    pub messages: Vec<ChatMessage>,
    pub model: String,
    /// Provider name; omitted: the first provider serving the model.
    #[serde(default)]
    pub provider: Option<String>,
    /// 0 to 2.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Tools in the OpenAI function tool format:
    /// `{"type": "function", "function": {"name", "description", "parameters"}}`.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<serde_json::Value>,
    /// Only GDPR-flagged providers may serve this chat.
    #[serde(default)]
    pub gdpr_required: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChatStarted {
    /// Chat stream id to poll.
    pub id: String,
    /// in_progress.
    pub status: ChatStatus,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct PollQuery {
    /// on_finish_get_all (default) or incremental.
    pub parts_behavior: Option<PartsBehavior>,
}

/// The Chat stream result.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChatStreamResult {
    pub id: String,
    /// in_progress or completed (a failed stream answers 502).
    pub status: ChatStatus,
    pub provider: String,
    pub model: String,
    /// Generated assistant messages of this poll (empty when there is nothing to return).
    pub messages: Vec<ChatMessage>,
    /// Tool calls of the answer (complete, arguments a JSON-encoded string).
    pub tool_calls: Vec<ToolCall>,
    /// Deprecated: the first tool call's function, for clients predating tool_calls.
    #[deprecated]
    pub function_call: Option<FunctionCall>,
    /// Why the upstream stopped (stop, tool_calls, length…); null until completed.
    pub finish_reason: Option<String>,
}

/// 403 `llm_disabled` unless the account's global_llm flag is on.
async fn check_llm_flag(state: &AppState, account: &AccountRecord) -> AdapterResult<()> {
    if llm_enabled(&state.store, account).await? {
        Ok(())
    } else {
        Err(AdapterError::new(
            StatusCode::FORBIDDEN,
            "llm_disabled",
            "the global_llm feature flag is off for this account",
        ))
    }
}

/// Start a chat stream.
#[utoipa::path(post, path = "/v1/adapters/llm/chat/stream", tag = "llm", request_body = StartChat,
    params(("X-Account-Sid" = Option<String>, Header, description = "Target account; required for principals broader than one account")),
    security(("bearer" = [])),
    responses((status = 201, body = ChatStarted), (status = 400, body = AdapterErrorBody, description = "Invalid body, unknown provider or model, no GDPR-compliant provider"),
        (status = 401, body = AdapterErrorBody), (status = 403, body = AdapterErrorBody, description = "global_llm withheld"),
        (status = 404, body = AdapterErrorBody), (status = 500, body = AdapterErrorBody)))]
async fn start_chat(
    State(state): State<AppState>,
    Adapted(auth): Adapted<Authz<cap::ResourcesWrite>>,
    AdaptedBody(Json(b)): AdaptedBody<Json<StartChat>>,
) -> AdapterResult<(StatusCode, Json<ChatStarted>)> {
    let account = auth.account_scope(&state).await?;
    check_llm_flag(&state, &account).await?;
    let id = state.adapters.llm.start(
        &account.sid,
        ChatRequest {
            messages: b.messages,
            model: b.model,
            provider: b.provider,
            temperature: b.temperature,
            tools: b.tools,
            gdpr_required: b.gdpr_required,
        },
    )?;
    Ok((
        StatusCode::CREATED,
        Json(ChatStarted {
            id,
            status: ChatStatus::InProgress,
        }),
    ))
}

/// Poll a chat stream. in_progress while the stream is not finished or not fully read;
/// the fully read stream returns completed. 502 when the upstream failed.
#[utoipa::path(get, path = "/v1/adapters/llm/chat/stream/{id}", tag = "llm",
    params(("id" = String, Path, description = "Chat stream id"), PollQuery),
    security(("bearer" = [])),
    responses((status = 200, body = ChatStreamResult), (status = 400, body = AdapterErrorBody), (status = 401, body = AdapterErrorBody),
        (status = 403, body = AdapterErrorBody), (status = 404, body = AdapterErrorBody), (status = 500, body = AdapterErrorBody),
        (status = 502, body = AdapterErrorBody)))]
#[allow(deprecated)]
async fn poll_chat(
    State(state): State<AppState>,
    Adapted(auth): Adapted<Authz<cap::ResourcesRead>>,
    Adapted(Path(id)): Adapted<Path<String>>,
    Adapted(Query(q)): Adapted<Query<PollQuery>>,
) -> AdapterResult<Json<ChatStreamResult>> {
    let llm = &state.adapters.llm;
    let owner = llm
        .owner(&id)
        .ok_or_else(|| AdapterError::not_found("chat_stream"))?;
    let account = state
        .store
        .account_get(&owner)
        .await?
        .filter(|a| a.deleted_at.is_none() && auth.sees_account(&a.sid, &a.tenant_sid))
        .filter(|a| auth.header_account.as_deref().is_none_or(|h| h == a.sid))
        .ok_or_else(|| AdapterError::not_found("chat_stream"))?;
    check_llm_flag(&state, &account).await?;
    let r = llm.poll(&id, q.parts_behavior.unwrap_or_default())?;
    let function_call = r.tool_calls.first().map(|t| t.function.clone());
    Ok(Json(ChatStreamResult {
        id: r.id,
        status: r.status,
        provider: r.provider,
        model: r.model,
        messages: if r.content.is_empty() {
            vec![]
        } else {
            vec![ChatMessage {
                role: "assistant".into(),
                content: Some(r.content),
                tool_calls: None,
                tool_call_id: None,
                name: None,
            }]
        },
        tool_calls: r.tool_calls,
        function_call,
        finish_reason: r.finish_reason,
    }))
}
