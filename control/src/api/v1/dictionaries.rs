//! STT dictionaries: global presets (administrative, `/v1/internal/stt-dictionary`) and
//! account-owned dictionaries (`/v1/adapters/stt/data/dictionary`).
//!
//! Rules (the spec leaves them open; decided here):
//! * A name is unique per language within its owner scope (an account, or the global
//!   presets). An account dictionary may not take the name of a global preset in the
//!   same language either (409 `dictionary_conflict`): a preset's name stays
//!   unambiguous for every account. A preset created later may share a name with
//!   existing account dictionaries (presets never look into accounts).
//! * The language must be served by some engine of the recognition catalog (422
//!   `unknown_language`), with the catalog's matching (a locale matches an engine that
//!   lists the bare language).
//! * Accounts read their own dictionaries plus every global preset; they cannot change
//!   or delete a preset (403 `forbidden`); another account's dictionary reads as absent
//!   (404).
//! * `engines` lists the engines, visible to the caller, whose catalog serves the
//!   dictionary's language.

use std::collections::BTreeSet;

use axum::{extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{NameRule, stt::visible_engines};
use crate::api::caller::{Authz, Caller};
use crate::text_field::TextKind;
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    ids::{has_prefix, new_sid, prefix},
    store::{AccountRecord, DictionaryPatch, DictionaryRecord, StoreError},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_preset, list_presets))
        .routes(routes!(update_preset, delete_preset))
        .routes(routes!(create_dictionary, list_dictionaries))
        .routes(routes!(
            get_dictionary,
            update_dictionary,
            delete_dictionary
        ))
}

/// An STT dictionary.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Dictionary {
    /// `dic_`-prefixed id.
    pub id: String,
    /// Null for a global preset.
    pub account_sid: Option<String>,
    pub name: String,
    pub language: String,
    /// True for a global preset (no owning account).
    pub public: bool,
    pub description: String,
    pub tokens: Vec<String>,
    /// Engines serving the language (from the recognition catalog).
    pub engines: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

fn view(state: &AppState, visible: &BTreeSet<String>, r: DictionaryRecord) -> Dictionary {
    Dictionary {
        engines: state.stt.catalog.engines_for_language(visible, &r.language),
        id: r.sid,
        public: r.account_sid.is_none(),
        account_sid: r.account_sid,
        name: r.name,
        language: r.language,
        description: r.description,
        tokens: r.tokens,
        created_at: r.created_at,
        updated_at: r.updated_at,
    }
}

/// Body creating a dictionary (global preset or account-owned).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDictionary {
    /// 1–128 characters; unique per language in the owner scope.
    pub name: String,
    /// A locale or language served by some engine of the catalog (`en-US`).
    pub language: String,
    /// The vocabulary: up to 5000 entries of 1–200 characters each.
    pub tokens: Vec<String>,
    #[serde(default)]
    pub description: String,
}

/// Changes to a dictionary (omitted fields keep their value; the language is fixed).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateDictionary {
    pub name: Option<String>,
    pub description: Option<String>,
    pub tokens: Option<Vec<String>>,
}

const MAX_TOKENS: usize = 5000;

fn check_name(n: &str) -> ApiResult<String> {
    Ok(NameRule {
        max_chars: Some(128),
        error: "invalid_name",
    }
    .check("name", n)?)
}

fn check_tokens(t: &[String]) -> ApiResult<Vec<String>> {
    if t.len() > MAX_TOKENS {
        return Err(ApiError::unprocessable(
            "invalid_tokens",
            format!("tokens: at most {MAX_TOKENS} entries"),
        ));
    }
    let out: Vec<String> = t.iter().map(|s| s.trim().to_string()).collect();
    if out.iter().any(|s| s.is_empty() || s.chars().count() > 200) {
        return Err(ApiError::unprocessable(
            "invalid_tokens",
            "tokens: every entry must have 1 to 200 characters",
        ));
    }
    for (i, t) in out.iter().enumerate() {
        super::check_text(&format!("tokens[{i}]"), t, TextKind::Line, "invalid_tokens")?;
    }
    Ok(out)
}

fn check_description(d: &str) -> ApiResult<String> {
    if d.chars().count() > 1000 {
        return Err(ApiError::unprocessable(
            "invalid_description",
            "description: at most 1000 characters",
        ));
    }
    super::check_text("description", d, TextKind::Multiline, "invalid_description")?;
    Ok(d.to_string())
}

fn check_language(state: &AppState, l: &str) -> ApiResult<String> {
    let l = l.trim();
    let plausible = !l.is_empty()
        && l.len() <= 35
        && l.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !plausible || !state.stt.catalog.knows_language(l) {
        return Err(ApiError::unprocessable(
            "unknown_language",
            format!("language: {l:?} is not served by any recognition engine"),
        ));
    }
    Ok(l.to_string())
}

fn conflict(name: &str, language: &str) -> ApiError {
    ApiError::conflict(
        "dictionary_conflict",
        format!("a dictionary named {name:?} already exists for {language}"),
    )
}

async fn create(
    state: &AppState,
    account: Option<&AccountRecord>,
    b: CreateDictionary,
) -> ApiResult<DictionaryRecord> {
    let name = check_name(&b.name)?;
    let language = check_language(state, &b.language)?;
    let tokens = check_tokens(&b.tokens)?;
    let description = check_description(&b.description)?;
    let owner = account.map(|a| a.sid.as_str());
    if owner.is_some()
        && state
            .store
            .dictionary_name_taken(None, &name, &language, "")
            .await?
    {
        return Err(conflict(&name, &language));
    }
    match state
        .store
        .dictionary_create(
            &new_sid(prefix::DICTIONARY),
            owner,
            &name,
            &language,
            &description,
            &tokens,
        )
        .await
    {
        Err(StoreError::Unique) => Err(conflict(&name, &language)),
        other => Ok(other?),
    }
}

async fn update(
    state: &AppState,
    cur: &DictionaryRecord,
    b: UpdateDictionary,
) -> ApiResult<DictionaryRecord> {
    let patch = DictionaryPatch {
        name: b.name.as_deref().map(check_name).transpose()?,
        description: b
            .description
            .as_deref()
            .map(check_description)
            .transpose()?,
        tokens: b.tokens.as_deref().map(check_tokens).transpose()?,
    };
    if let Some(n) = &patch.name
        && cur.account_sid.is_some()
        && state
            .store
            .dictionary_name_taken(None, n, &cur.language, "")
            .await?
    {
        return Err(conflict(n, &cur.language));
    }
    match state.store.dictionary_update(&cur.sid, &patch).await {
        Err(StoreError::Unique) => Err(conflict(
            patch.name.as_deref().unwrap_or(&cur.name),
            &cur.language,
        )),
        Err(StoreError::NotFound) => Err(ApiError::not_found("dictionary")),
        other => Ok(other?),
    }
}

/// Query of dictionary lists.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DictionaryListQuery {
    /// Only dictionaries of this exact language tag (case-insensitive).
    pub language: Option<String>,
    /// Page size, 0..=500, default 100.
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    /// Rows to skip, default 0.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

async fn list(
    state: &AppState,
    caller: &Caller,
    account: Option<&AccountRecord>,
    q: DictionaryListQuery,
) -> ApiResult<Page<Dictionary>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let visible = visible_engines(state, caller, account).await?;
    let lang = q
        .language
        .as_deref()
        .map(str::trim)
        .filter(|l| !l.is_empty());
    let (rows, total) = state
        .store
        .dictionary_list(
            account.map(|a| a.sid.as_str()),
            lang,
            page.limit,
            page.offset,
        )
        .await?;
    Ok(Page::new(
        rows.into_iter().map(|r| view(state, &visible, r)).collect(),
        total,
        page,
    ))
}

/// A global preset by id (404 for anything else).
async fn preset(state: &AppState, id: &str) -> ApiResult<DictionaryRecord> {
    match dictionary(state, id).await? {
        Some(d) if d.account_sid.is_none() => Ok(d),
        _ => Err(ApiError::not_found("dictionary")),
    }
}

async fn dictionary(state: &AppState, id: &str) -> ApiResult<Option<DictionaryRecord>> {
    if !has_prefix(id, prefix::DICTIONARY) {
        return Ok(None);
    }
    Ok(state.store.dictionary_get(id).await?)
}

/// A dictionary the account may read: its own or a global preset.
async fn readable(
    state: &AppState,
    account: &AccountRecord,
    id: &str,
) -> ApiResult<DictionaryRecord> {
    match dictionary(state, id).await? {
        Some(d) if d.account_sid.as_deref().is_none_or(|a| a == account.sid) => Ok(d),
        _ => Err(ApiError::not_found("dictionary")),
    }
}

/// A dictionary the account may change: its own (403 for a global preset).
async fn writable(
    state: &AppState,
    account: &AccountRecord,
    id: &str,
) -> ApiResult<DictionaryRecord> {
    let d = readable(state, account, id).await?;
    if d.account_sid.is_none() {
        return Err(ApiError::forbidden(
            "global presets are read-only for accounts",
        ));
    }
    Ok(d)
}

/// Create a global preset (administrative).
#[utoipa::path(post, path = "/v1/internal/stt-dictionary", tag = "stt-dictionaries", request_body = CreateDictionary, security(("bearer" = [])),
    responses((status = 201, body = Dictionary), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn create_preset(
    State(state): State<AppState>,
    auth: Authz<cap::SttPresetsManage>,
    Json(b): Json<CreateDictionary>,
) -> ApiResult<(StatusCode, Json<Dictionary>)> {
    let d = create(&state, None, b).await?;
    let visible = visible_engines(&state, &auth, None).await?;
    Ok((StatusCode::CREATED, Json(view(&state, &visible, d))))
}

/// List global presets (administrative).
#[utoipa::path(get, path = "/v1/internal/stt-dictionary", tag = "stt-dictionaries", params(DictionaryListQuery), security(("bearer" = [])),
    responses((status = 200, body = Page<Dictionary>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_presets(
    State(state): State<AppState>,
    auth: Authz<cap::SttPresetsManage>,
    Query(q): Query<DictionaryListQuery>,
) -> ApiResult<Json<Page<Dictionary>>> {
    Ok(Json(list(&state, &auth, None, q).await?))
}

/// Change a global preset (administrative).
#[utoipa::path(patch, path = "/v1/internal/stt-dictionary/{id}", tag = "stt-dictionaries", request_body = UpdateDictionary, params(("id" = String, Path)), security(("bearer" = [])),
    responses((status = 200, body = Dictionary), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn update_preset(
    State(state): State<AppState>,
    auth: Authz<cap::SttPresetsManage>,
    Path(id): Path<String>,
    Json(b): Json<UpdateDictionary>,
) -> ApiResult<Json<Dictionary>> {
    let cur = preset(&state, &id).await?;
    let d = update(&state, &cur, b).await?;
    let visible = visible_engines(&state, &auth, None).await?;
    Ok(Json(view(&state, &visible, d)))
}

/// Delete a global preset (administrative).
#[utoipa::path(delete, path = "/v1/internal/stt-dictionary/{id}", tag = "stt-dictionaries", params(("id" = String, Path)), security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn delete_preset(
    State(state): State<AppState>,
    _auth: Authz<cap::SttPresetsManage>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let d = preset(&state, &id).await?;
    match state.store.dictionary_delete(&d.sid).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::NotFound) => Err(ApiError::not_found("dictionary")),
        Err(e) => Err(e.into()),
    }
}

/// Create a dictionary owned by the account in scope.
#[utoipa::path(post, path = "/v1/adapters/stt/data/dictionary", tag = "stt-dictionaries", request_body = CreateDictionary,
    params(("X-Account-Sid" = Option<String>, Header, description = "Account; required for the superuser and tenant keys")), security(("bearer" = [])),
    responses((status = 201, body = Dictionary), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn create_dictionary(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Json(b): Json<CreateDictionary>,
) -> ApiResult<(StatusCode, Json<Dictionary>)> {
    let account = auth.account_scope(&state).await?;
    let d = create(&state, Some(&account), b).await?;
    let visible = visible_engines(&state, &auth, Some(&account)).await?;
    Ok((StatusCode::CREATED, Json(view(&state, &visible, d))))
}

/// List the account's dictionaries plus every global preset, oldest first.
#[utoipa::path(get, path = "/v1/adapters/stt/data/dictionary", tag = "stt-dictionaries",
    params(DictionaryListQuery, ("X-Account-Sid" = Option<String>, Header, description = "Account; required for the superuser and tenant keys")), security(("bearer" = [])),
    responses((status = 200, body = Page<Dictionary>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_dictionaries(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<DictionaryListQuery>,
) -> ApiResult<Json<Page<Dictionary>>> {
    let account = auth.account_scope(&state).await?;
    Ok(Json(list(&state, &auth, Some(&account), q).await?))
}

/// Get one of the account's dictionaries or a global preset.
#[utoipa::path(get, path = "/v1/adapters/stt/data/dictionary/{id}", tag = "stt-dictionaries", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)), security(("bearer" = [])),
    responses((status = 200, body = Dictionary), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_dictionary(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Json<Dictionary>> {
    let account = auth.account_scope(&state).await?;
    let d = readable(&state, &account, &id).await?;
    let visible = visible_engines(&state, &auth, Some(&account)).await?;
    Ok(Json(view(&state, &visible, d)))
}

/// Change name, description or tokens of an account dictionary (403 for a preset).
#[utoipa::path(patch, path = "/v1/adapters/stt/data/dictionary/{id}", tag = "stt-dictionaries", request_body = UpdateDictionary, params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)), security(("bearer" = [])),
    responses((status = 200, body = Dictionary), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn update_dictionary(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
    Json(b): Json<UpdateDictionary>,
) -> ApiResult<Json<Dictionary>> {
    let account = auth.account_scope(&state).await?;
    let cur = writable(&state, &account, &id).await?;
    let d = update(&state, &cur, b).await?;
    let visible = visible_engines(&state, &auth, Some(&account)).await?;
    Ok(Json(view(&state, &visible, d)))
}

/// Delete an account dictionary (403 for a global preset).
#[utoipa::path(delete, path = "/v1/adapters/stt/data/dictionary/{id}", tag = "stt-dictionaries", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)), security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn delete_dictionary(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let account = auth.account_scope(&state).await?;
    let d = writable(&state, &account, &id).await?;
    match state.store.dictionary_delete(&d.sid).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::NotFound) => Err(ApiError::not_found("dictionary")),
        Err(e) => Err(e.into()),
    }
}
