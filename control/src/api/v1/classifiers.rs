//! Intent classifiers: PUT a version, read the classifier, its versions and one version,
//! predict. Error bodies are the adapter envelope `{name, message, code, status}`
//! (see `api::v1::adapter_error`). Field names are documented in docs/adapters.md.

use axum::{extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::adapter_error::{Adapted, AdaptedBody, AdapterError, AdapterErrorBody, AdapterResult};
use crate::api::caller::Authz;
use crate::{
    adapters::classifier::{ClassifierContent, Intent, IntentSet, Saved},
    api::{AppState, Json, Page, PageParams, Path, Query},
    auth::cap,
    store::ClassifierVersionRecord,
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_classifier, get_classifier))
        .routes(routes!(list_versions))
        .routes(routes!(get_version))
        .routes(routes!(predict))
}

/// One immutable classifier version (PUT responses and single-version reads).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClassifierVersion {
    pub classifier_id: String,
    pub account_sid: String,
    /// Version number, from 0.
    pub version: i64,
    pub model_id: String,
    pub description: String,
    pub intent: IntentSet,
    /// Content identity: sha256 of the content, classifier id and version (two versions
    /// never share it).
    pub content_identity: String,
    /// new, queued, training, ready or failed.
    pub training_state: String,
    /// How the last training run ended (null until one ended).
    pub training_reason: Option<String>,
    /// Why training failed; present only when training_state is failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// When training was queued; absent if never queued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<DateTime<Utc>>,
    /// When the training state last changed; absent if never queued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_changed_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// A version list entry: the version without the training reasons.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClassifierVersionEntry {
    pub classifier_id: String,
    pub account_sid: String,
    pub version: i64,
    pub model_id: String,
    pub description: String,
    pub intent: IntentSet,
    pub content_identity: String,
    pub training_state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_changed_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// The classifier as a whole: its newest version and the version served when a brick
/// names version 0.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClassifierInfo {
    pub classifier_id: String,
    pub account_sid: String,
    /// Highest version number recorded.
    pub latest_version: i64,
    /// Number of versions recorded.
    pub version_count: i64,
    /// The newest ready version (what version 0 in a brick and in predict resolves
    /// to); null while none is ready.
    pub serving_version: Option<i64>,
    /// The newest version.
    pub latest: ClassifierVersion,
}

fn intents_of(r: &ClassifierVersionRecord) -> IntentSet {
    IntentSet {
        intents: serde_json::from_str::<Vec<Intent>>(&r.intents).unwrap_or_default(),
    }
}

impl From<&ClassifierVersionRecord> for ClassifierVersion {
    fn from(r: &ClassifierVersionRecord) -> Self {
        ClassifierVersion {
            classifier_id: r.classifier_id.clone(),
            account_sid: r.account_sid.clone(),
            version: r.version,
            model_id: r.model_id.clone(),
            description: r.description.clone(),
            intent: intents_of(r),
            content_identity: r.content_identity.clone(),
            training_state: r.training_state.clone(),
            training_reason: r.training_reason.clone(),
            failure_reason: if r.training_state == "failed" {
                r.failure_reason.clone()
            } else {
                None
            },
            queued_at: r.queued_at,
            state_changed_at: r.queued_at.and(r.state_changed_at),
            created_at: r.created_at,
        }
    }
}

impl From<&ClassifierVersionRecord> for ClassifierVersionEntry {
    fn from(r: &ClassifierVersionRecord) -> Self {
        ClassifierVersionEntry {
            classifier_id: r.classifier_id.clone(),
            account_sid: r.account_sid.clone(),
            version: r.version,
            model_id: r.model_id.clone(),
            description: r.description.clone(),
            intent: intents_of(r),
            content_identity: r.content_identity.clone(),
            training_state: r.training_state.clone(),
            queued_at: r.queued_at,
            state_changed_at: r.queued_at.and(r.state_changed_at),
            created_at: r.created_at,
        }
    }
}

/// 400 unless the path id is a UUID; returns its canonical (lowercase hyphenated) form.
fn classifier_uuid(id: &str) -> AdapterResult<Uuid> {
    Uuid::parse_str(id).map_err(|_| {
        AdapterError::bad_request("invalid_path", "id: the classifier id must be a UUID")
    })
}

/// Record training content as the next version of a classifier (201, training queued),
/// or resolve content identical to a held version (200, nothing trained).
#[utoipa::path(put, path = "/v1/adapters/ids/classifier/{id}", tag = "classifiers", request_body = ClassifierContent,
    params(("id" = uuid::Uuid, Path, description = "Classifier id (UUID)"),
        ("X-Account-Sid" = Option<String>, Header, description = "Target account; required for principals broader than one account")),
    security(("bearer" = [])),
    responses((status = 200, body = ClassifierVersion, description = "Identical content: the held version"),
        (status = 201, body = ClassifierVersion, description = "New version recorded; training queued"),
        (status = 400, body = AdapterErrorBody), (status = 401, body = AdapterErrorBody), (status = 403, body = AdapterErrorBody),
        (status = 404, body = AdapterErrorBody, description = "Unknown account or model_id"),
        (status = 409, body = AdapterErrorBody, description = "Concurrent writers kept taking the version; safe to repeat"),
        (status = 500, body = AdapterErrorBody), (status = 502, body = AdapterErrorBody, description = "Remote classifier service failed")))]
async fn put_classifier(
    State(state): State<AppState>,
    Adapted(auth): Adapted<Authz<cap::ResourcesWrite>>,
    Adapted(Path(id)): Adapted<Path<String>>,
    AdaptedBody(Json(body)): AdaptedBody<Json<ClassifierContent>>,
) -> AdapterResult<(StatusCode, Json<ClassifierVersion>)> {
    let cid = classifier_uuid(&id)?;
    let account = auth.account_scope(&state).await?;
    match state
        .adapters
        .classifiers
        .save(&account.sid, &cid, &body)
        .await?
    {
        Saved::Created(r) => Ok((StatusCode::CREATED, Json(ClassifierVersion::from(&r)))),
        Saved::Existing(r) => Ok((StatusCode::OK, Json(ClassifierVersion::from(&r)))),
    }
}

/// The classifier: newest version and the version served for version 0.
#[utoipa::path(get, path = "/v1/adapters/ids/classifier/{id}", tag = "classifiers",
    params(("id" = uuid::Uuid, Path, description = "Classifier id (UUID)"), ("X-Account-Sid" = Option<String>, Header, description = "Target account")),
    security(("bearer" = [])),
    responses((status = 200, body = ClassifierInfo), (status = 400, body = AdapterErrorBody), (status = 401, body = AdapterErrorBody),
        (status = 403, body = AdapterErrorBody), (status = 404, body = AdapterErrorBody), (status = 500, body = AdapterErrorBody)))]
async fn get_classifier(
    State(state): State<AppState>,
    Adapted(auth): Adapted<Authz<cap::ResourcesRead>>,
    Adapted(Path(id)): Adapted<Path<String>>,
) -> AdapterResult<Json<ClassifierInfo>> {
    let cid = classifier_uuid(&id)?.to_string();
    let account = auth.account_scope(&state).await?;
    state.adapters.classifiers.start();
    let store = &state.store;
    let latest = store
        .classifier_latest(&account.sid, &cid)
        .await?
        .ok_or_else(|| AdapterError::not_found("classifier"))?;
    let serving = store.classifier_serving(&account.sid, &cid).await?;
    Ok(Json(ClassifierInfo {
        classifier_id: cid,
        account_sid: account.sid,
        latest_version: latest.version,
        version_count: latest.version + 1,
        serving_version: serving.map(|s| s.version),
        latest: ClassifierVersion::from(&latest),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct VersionListQuery {
    /// Page size, at most 500 (default 100).
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// The versions of a classifier, version 0 first (entries without training reasons).
#[utoipa::path(get, path = "/v1/adapters/ids/classifier/{id}/version", tag = "classifiers",
    params(("id" = uuid::Uuid, Path, description = "Classifier id (UUID)"), VersionListQuery, ("X-Account-Sid" = Option<String>, Header, description = "Target account")),
    security(("bearer" = [])),
    responses((status = 200, body = Page<ClassifierVersionEntry>), (status = 400, body = AdapterErrorBody), (status = 401, body = AdapterErrorBody),
        (status = 403, body = AdapterErrorBody), (status = 404, body = AdapterErrorBody), (status = 500, body = AdapterErrorBody)))]
async fn list_versions(
    State(state): State<AppState>,
    Adapted(auth): Adapted<Authz<cap::ResourcesRead>>,
    Adapted(Path(id)): Adapted<Path<String>>,
    Adapted(Query(q)): Adapted<Query<VersionListQuery>>,
) -> AdapterResult<Json<Page<ClassifierVersionEntry>>> {
    let cid = classifier_uuid(&id)?.to_string();
    let page = PageParams::new(q.limit, q.offset)?;
    let account = auth.account_scope(&state).await?;
    let (rows, total) = state
        .store
        .classifier_versions(&account.sid, &cid, page.limit, page.offset)
        .await?;
    if total == 0 {
        return Err(AdapterError::not_found("classifier"));
    }
    Ok(Json(Page::new(
        rows.iter().map(ClassifierVersionEntry::from).collect(),
        total,
        page,
    )))
}

/// One version, with how its last training run ended.
#[utoipa::path(get, path = "/v1/adapters/ids/classifier/{id}/version/{version}", tag = "classifiers",
    params(("id" = uuid::Uuid, Path, description = "Classifier id (UUID)"), ("version" = i64, Path, description = "Version number"),
        ("X-Account-Sid" = Option<String>, Header, description = "Target account")),
    security(("bearer" = [])),
    responses((status = 200, body = ClassifierVersion), (status = 400, body = AdapterErrorBody), (status = 401, body = AdapterErrorBody),
        (status = 403, body = AdapterErrorBody), (status = 404, body = AdapterErrorBody), (status = 500, body = AdapterErrorBody)))]
async fn get_version(
    State(state): State<AppState>,
    Adapted(auth): Adapted<Authz<cap::ResourcesRead>>,
    Adapted(Path((id, version))): Adapted<Path<(String, i64)>>,
) -> AdapterResult<Json<ClassifierVersion>> {
    let cid = classifier_uuid(&id)?.to_string();
    let account = auth.account_scope(&state).await?;
    state.adapters.classifiers.start();
    let r = state
        .store
        .classifier_version(&account.sid, &cid, version)
        .await?
        .ok_or_else(|| AdapterError::not_found("classifier_version"))?;
    Ok(Json(ClassifierVersion::from(&r)))
}

/// Body of POST …/predict.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    /// The utterance to classify.
    pub text: String,
    /// As in a question brick: 0 (the default) means the newest ready version; any
    /// other number pins that version.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub version: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PredictedIntent {
    pub id: String,
    /// In [0, 1]; the confidences of one prediction sum to 1.
    pub confidence: f32,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PredictResponse {
    pub classifier_id: String,
    /// The version that answered.
    pub version: i64,
    /// Every intent, most likely first.
    pub intents: Vec<PredictedIntent>,
}

/// Classify an utterance. 409 `classifier_not_ready` while the requested version (or,
/// for version 0, every version) has not finished training.
#[utoipa::path(post, path = "/v1/adapters/ids/classifier/{id}/predict", tag = "classifiers", request_body = PredictRequest,
    params(("id" = uuid::Uuid, Path, description = "Classifier id (UUID)"), ("X-Account-Sid" = Option<String>, Header, description = "Target account")),
    security(("bearer" = [])),
    responses((status = 200, body = PredictResponse), (status = 400, body = AdapterErrorBody), (status = 401, body = AdapterErrorBody),
        (status = 403, body = AdapterErrorBody), (status = 404, body = AdapterErrorBody), (status = 409, body = AdapterErrorBody),
        (status = 500, body = AdapterErrorBody), (status = 502, body = AdapterErrorBody)))]
async fn predict(
    State(state): State<AppState>,
    Adapted(auth): Adapted<Authz<cap::ResourcesRead>>,
    Adapted(Path(id)): Adapted<Path<String>>,
    AdaptedBody(Json(body)): AdaptedBody<Json<PredictRequest>>,
) -> AdapterResult<Json<PredictResponse>> {
    let cid = classifier_uuid(&id)?.to_string();
    if body.version < 0 {
        return Err(AdapterError::bad_request(
            "invalid_body",
            "version: must be 0 or more",
        ));
    }
    let account = auth.account_scope(&state).await?;
    state.adapters.classifiers.start();
    let p = state
        .adapters
        .classifiers
        .predict(&account.sid, &cid, body.version, &body.text)
        .await?;
    Ok(Json(PredictResponse {
        classifier_id: cid,
        version: p.version,
        intents: p
            .intents
            .into_iter()
            .map(|(id, confidence)| PredictedIntent { id, confidence })
            .collect(),
    }))
}
