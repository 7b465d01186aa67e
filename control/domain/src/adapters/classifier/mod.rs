//! Versioned intent classifiers: content validation and identity, the save rules
//! (identical content → held version, new content → next version with training queued),
//! the background trainer and the predictor.
//!
//! * [`catalog`]: which algorithm a `model_id` selects.
//! * [`model`]: the TF-IDF features and learners (pure).
//! * [`queue`]: the round-robin training queue (pure).
//! * [`Classifiers`]: the service the HTTP routes call; [`classify`] is the library entry
//!   the call runtime uses.

pub mod catalog;
pub mod model;
pub mod queue;

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::{Notify, Semaphore};
use uuid::Uuid;

use self::{
    catalog::Backend,
    model::{Example, Model},
    queue::FairQueue,
};
use crate::store::{
    ClassifierVersionRecord, NewClassifierVersion, Store, StoreError, TrainingOutcome,
};

/// Body of PUT /v1/adapters/ids/classifier/{id}: the training-relevant content.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClassifierContent {
    /// Algorithm from the catalog (docs/adapters.md).
    pub model_id: Uuid,
    #[serde(default)]
    pub description: String,
    pub intent: IntentSet,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IntentSet {
    pub intents: Vec<Intent>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// Intent id a question brick's answers name (speech_input.intent.id).
    pub id: String,
    #[serde(default)]
    pub description: String,
    pub phrase: PhraseSet,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PhraseSet {
    pub phrases: Vec<String>,
}

/// Bounds on one version's content.
pub const MAX_INTENTS: usize = 500;
pub const MAX_PHRASES: usize = 20_000;
pub const MAX_PHRASE_CHARS: usize = 1_000;
pub const MAX_ID_CHARS: usize = 200;
/// Attempts at recording the next version before a save gives up with 409.
pub const MAX_SAVE_ATTEMPTS: usize = 8;

/// What can go wrong with a classifier operation (mapped to HTTP by the API layer).
#[derive(Debug, thiserror::Error)]
pub enum ClassifierError {
    #[error("{0}")]
    Invalid(String),
    #[error("model_id {0} is not in the classifier catalog")]
    UnknownModel(Uuid),
    #[error("classifier not found")]
    NotFound,
    #[error("classifier version {0} not found")]
    VersionNotFound(i64),
    #[error("{0}")]
    NotReady(String),
    #[error(
        "concurrent writers kept taking the version this save was going to record; the save is safe to repeat"
    )]
    Conflict,
    #[error("upstream classifier service: {0}")]
    Upstream(String),
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

/// Checks the content; the message names the offending field.
pub fn validate(c: &ClassifierContent) -> Result<(), ClassifierError> {
    let bad = |m: String| Err(ClassifierError::Invalid(m));
    let intents = &c.intent.intents;
    if intents.is_empty() {
        return bad("intent.intents: at least one intent is required".into());
    }
    if intents.len() > MAX_INTENTS {
        return bad(format!("intent.intents: at most {MAX_INTENTS} intents"));
    }
    let mut total = 0;
    for (i, it) in intents.iter().enumerate() {
        if it.id.trim().is_empty() || it.id.chars().count() > MAX_ID_CHARS {
            return bad(format!(
                "intent.intents[{i}].id: 1 to {MAX_ID_CHARS} characters"
            ));
        }
        if intents[..i].iter().any(|o| o.id == it.id) {
            return bad(format!(
                "intent.intents[{i}].id: duplicate intent id {:?}",
                it.id
            ));
        }
        if it.phrase.phrases.is_empty() {
            return bad(format!(
                "intent.intents[{i}].phrase.phrases: at least one phrase is required"
            ));
        }
        for (j, p) in it.phrase.phrases.iter().enumerate() {
            if !p.chars().any(char::is_alphanumeric) || p.chars().count() > MAX_PHRASE_CHARS {
                return bad(format!(
                    "intent.intents[{i}].phrase.phrases[{j}]: 1 to {MAX_PHRASE_CHARS} characters including a letter or digit"
                ));
            }
        }
        total += it.phrase.phrases.len();
    }
    if total > MAX_PHRASES {
        return bad(format!(
            "intent.intents: at most {MAX_PHRASES} phrases in all"
        ));
    }
    Ok(())
}

/// sha256 (hex) of the canonical JSON of the content (field order fixed by the types,
/// intents and phrases in the order given: order is part of the content).
pub fn content_hash(c: &ClassifierContent) -> String {
    let canonical = serde_json::to_string(c).unwrap_or_default();
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

/// The content identity value of one version: sha256 of the content hash, classifier id
/// and version number, so two versions never share it.
pub fn content_identity(classifier_id: &str, version: i64, content_hash: &str) -> String {
    hex::encode(Sha256::digest(
        format!("{content_hash}\n{classifier_id}\n{version}").as_bytes(),
    ))
}

/// Result of a save.
#[derive(Debug)]
pub enum Saved {
    /// New content: recorded as the next version, training queued (201).
    Created(ClassifierVersionRecord),
    /// Content identical to a held version: that version, nothing trained (200).
    Existing(ClassifierVersionRecord),
}

/// A prediction: the version that answered and every intent with its confidence.
#[derive(Debug, Clone)]
pub struct Prediction {
    pub version: i64,
    pub intents: Vec<(String, f32)>,
}

/// One job of the training queue.
#[derive(Debug, Clone)]
struct Job {
    classifier_id: String,
    version: i64,
}

/// Trained models by (account, classifier, version). Versions are immutable, so an entry
/// never goes stale; every lookup checks the version row first, so purged data is never
/// served from here. Bounded: cleared when full.
type ModelKey = (String, String, i64);
const MODEL_CACHE_ENTRIES: usize = 256;

fn model_cache() -> &'static Mutex<HashMap<ModelKey, Arc<Model>>> {
    static CACHE: OnceLock<Mutex<HashMap<ModelKey, Arc<Model>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Drops cached models of an account (tenant purge).
pub(crate) fn evict_account(account_sid: &str) {
    model_cache().lock().retain(|k, _| k.0 != account_sid);
}

/// The row answering `version` for a brick: 0 means the version the unversioned surface
/// serves (the newest `ready` one); any other number pins that version.
async fn resolve(
    store: &Store,
    account_sid: &str,
    classifier_id: &str,
    version: i64,
) -> Result<ClassifierVersionRecord, ClassifierError> {
    if version == 0 {
        return match store.classifier_serving(account_sid, classifier_id).await? {
            Some(r) => Ok(r),
            None if store
                .classifier_latest(account_sid, classifier_id)
                .await?
                .is_some() =>
            {
                Err(ClassifierError::NotReady(
                    "no version of this classifier is ready yet".into(),
                ))
            }
            None => Err(ClassifierError::NotFound),
        };
    }
    let r = store
        .classifier_version(account_sid, classifier_id, version)
        .await?
        .ok_or(ClassifierError::VersionNotFound(version))?;
    if r.training_state != "ready" {
        return Err(ClassifierError::NotReady(format!(
            "version {version} is {}, not ready",
            r.training_state
        )));
    }
    Ok(r)
}

async fn local_model(
    store: &Store,
    r: &ClassifierVersionRecord,
) -> Result<Arc<Model>, ClassifierError> {
    let key = (r.account_sid.clone(), r.classifier_id.clone(), r.version);
    if let Some(m) = model_cache().lock().get(&key) {
        return Ok(m.clone());
    }
    let json = store
        .classifier_model(&r.account_sid, &r.classifier_id, r.version)
        .await?
        .ok_or_else(|| ClassifierError::NotReady("the model of this version is missing".into()))?;
    let m = tokio::task::spawn_blocking(move || Model::from_json(&json))
        .await
        .map_err(|e| ClassifierError::NotReady(format!("loading the model: {e}")))?
        .map_err(ClassifierError::NotReady)?;
    let m = Arc::new(m);
    let mut cache = model_cache().lock();
    if cache.len() >= MODEL_CACHE_ENTRIES {
        cache.clear();
    }
    cache.insert(key, m.clone());
    Ok(m)
}

/// The classifier service: save, train, predict. One per process (held by `Adapters`).
#[derive(Debug)]
pub struct Classifiers {
    store: Store,
    http: reqwest::Client,
    remote_url: parking_lot::RwLock<Option<String>>,
    workers: usize,
    queue: Mutex<FairQueue<Job>>,
    notify: Notify,
    started: OnceLock<()>,
}

impl Classifiers {
    pub fn new(
        store: Store,
        http: reqwest::Client,
        remote_url: Option<String>,
        workers: usize,
    ) -> Self {
        Classifiers {
            store,
            http,
            remote_url: parking_lot::RwLock::new(
                remote_url.map(|u| u.trim_end_matches('/').to_string()),
            ),
            workers: workers.max(1),
            queue: Mutex::new(FairQueue::default()),
            notify: Notify::new(),
            started: OnceLock::new(),
        }
    }

    /// Starts the dispatcher (once; needs a tokio runtime) and re-queues versions a
    /// previous process left queued or training.
    pub fn start(self: &Arc<Self>) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        self.started.get_or_init(|| {
            let me = self.clone();
            tokio::spawn(async move { me.dispatch().await });
            let me = self.clone();
            tokio::spawn(async move {
                match me.store.classifier_requeue_interrupted().await {
                    Ok(jobs) => {
                        for (account, classifier_id, version) in jobs {
                            me.enqueue(
                                &account,
                                Job {
                                    classifier_id,
                                    version,
                                },
                            );
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "re-queueing interrupted trainings failed")
                    }
                }
            });
        });
    }

    fn enqueue(&self, account_sid: &str, job: Job) {
        self.queue.lock().push(account_sid, job);
        self.notify.notify_one();
    }

    /// Jobs waiting for a worker.
    pub fn queued(&self) -> usize {
        self.queue.lock().len()
    }

    async fn dispatch(self: Arc<Self>) {
        let slots = Arc::new(Semaphore::new(self.workers));
        loop {
            let Ok(permit) = slots.clone().acquire_owned().await else {
                return;
            };
            let (account, job) = loop {
                if let Some(j) = self.queue.lock().pop() {
                    break j;
                }
                self.notify.notified().await;
            };
            let me = self.clone();
            tokio::spawn(async move {
                me.run(&account, &job).await;
                drop(permit);
            });
        }
    }

    /// One training run: claim, train off the async runtime, record the outcome.
    async fn run(&self, account_sid: &str, job: &Job) {
        let result: Result<(), ClassifierError> = async {
            if !self
                .store
                .classifier_claim(account_sid, &job.classifier_id, job.version)
                .await?
            {
                return Ok(());
            }
            let Some(r) = self
                .store
                .classifier_version(account_sid, &job.classifier_id, job.version)
                .await?
            else {
                return Ok(());
            };
            let outcome = train_version(&r).await;
            self.store
                .classifier_finish(account_sid, &job.classifier_id, job.version, &outcome)
                .await?;
            Ok(())
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(account = %account_sid, classifier = %job.classifier_id, version = job.version, error = %e, "training run failed to record");
        }
    }

    /// Records `content` for `classifier_id` of an account by the versioning rules.
    pub async fn save(
        self: &Arc<Self>,
        account_sid: &str,
        classifier_id: &Uuid,
        content: &ClassifierContent,
    ) -> Result<Saved, ClassifierError> {
        validate(content)?;
        let entry = catalog::lookup(&content.model_id)
            .ok_or(ClassifierError::UnknownModel(content.model_id))?;
        let cid = classifier_id.to_string();
        let hash = content_hash(content);
        if let Some(held) = self
            .store
            .classifier_by_content(account_sid, &cid, &hash)
            .await?
        {
            return Ok(Saved::Existing(held));
        }
        if entry.backend == Backend::Remote {
            self.remote_train(account_sid, &cid, &hash, content).await?;
        }
        let intents = serde_json::to_string(&content.intent.intents).unwrap_or_default();
        let model_id = content.model_id.to_string();
        for _ in 0..MAX_SAVE_ATTEMPTS {
            let version = self
                .store
                .classifier_next_version(account_sid, &cid)
                .await?;
            let identity = content_identity(&cid, version, &hash);
            let new = NewClassifierVersion {
                account_sid,
                classifier_id: &cid,
                version,
                model_id: &model_id,
                description: &content.description,
                intents: &intents,
                content_hash: &hash,
                content_identity: &identity,
            };
            match self.store.classifier_insert(&new).await {
                Ok(r) => {
                    self.start();
                    self.enqueue(
                        account_sid,
                        Job {
                            classifier_id: cid.clone(),
                            version,
                        },
                    );
                    return Ok(Saved::Created(r));
                }
                Err(StoreError::Unique) => {
                    // Either the number was taken, or the same content was recorded by a
                    // concurrent writer (then it resolves to that version).
                    if let Some(held) = self
                        .store
                        .classifier_by_content(account_sid, &cid, &hash)
                        .await?
                    {
                        return Ok(Saved::Existing(held));
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(ClassifierError::Conflict)
    }

    /// Predicts with any catalog backend (the remote one through the upstream service).
    pub async fn predict(
        &self,
        account_sid: &str,
        classifier_id: &str,
        version: i64,
        text: &str,
    ) -> Result<Prediction, ClassifierError> {
        let r = resolve(&self.store, account_sid, classifier_id, version).await?;
        let intents = match Uuid::parse_str(&r.model_id)
            .ok()
            .and_then(|u| catalog::lookup(&u))
        {
            Some(e) if e.backend == Backend::Remote => self.remote_predict(&r, text).await?,
            _ => local_model(&self.store, &r).await?.predict(text),
        };
        Ok(Prediction {
            version: r.version,
            intents,
        })
    }

    /// Points the remote catalog entry at another classifier service (None: none).
    pub fn set_remote_url(&self, url: Option<String>) {
        *self.remote_url.write() = url.map(|u| u.trim_end_matches('/').to_string());
    }

    fn remote(&self) -> Result<String, ClassifierError> {
        self.remote_url.read().clone().ok_or_else(|| {
            ClassifierError::Upstream("no remote classifier service is configured".into())
        })
    }

    async fn remote_post(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> Result<serde_json::Value, ClassifierError> {
        let url = format!("{}{path}", self.remote()?);
        let resp = self
            .http
            .post(&url)
            .timeout(Duration::from_secs(30))
            .json(&body)
            .send()
            .await
            .map_err(|e| ClassifierError::Upstream(format!("POST {path}: {e}")))?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            let snippet: String = text.chars().take(200).collect();
            return Err(ClassifierError::Upstream(format!(
                "POST {path}: HTTP {status}: {snippet}"
            )));
        }
        if text.trim().is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_str(&text)
            .map_err(|e| ClassifierError::Upstream(format!("POST {path}: bad JSON: {e}")))
    }

    async fn remote_train(
        &self,
        account_sid: &str,
        classifier_id: &str,
        hash: &str,
        content: &ClassifierContent,
    ) -> Result<(), ClassifierError> {
        self.remote_post(
            "/train",
            serde_json::json!({"account_sid": account_sid, "classifier_id": classifier_id, "content_hash": hash,
                "description": content.description, "intents": content.intent.intents}),
        )
        .await
        .map(|_| ())
    }

    async fn remote_predict(
        &self,
        r: &ClassifierVersionRecord,
        text: &str,
    ) -> Result<Vec<(String, f32)>, ClassifierError> {
        let v = self
            .remote_post(
                "/predict",
                serde_json::json!({"account_sid": r.account_sid, "classifier_id": r.classifier_id,
                    "content_hash": r.content_hash, "text": text}),
            )
            .await?;
        let mut out: Vec<(String, f32)> = v["intents"]
            .as_array()
            .ok_or_else(|| ClassifierError::Upstream("POST /predict: no intents array".into()))?
            .iter()
            .filter_map(|i| {
                Some((
                    i["id"].as_str()?.to_string(),
                    i["confidence"].as_f64()? as f32,
                ))
            })
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(out)
    }

    /// Tenant purge of data the remote classifier service holds for an account
    /// (`DELETE {remote}/accounts/{account_sid}`; 404 counts as purged). Without a
    /// remote service there is nothing outside this database to purge.
    pub(crate) async fn purge_remote(&self, account_sid: &str) -> anyhow::Result<()> {
        evict_account(account_sid);
        self.queue.lock().forget(account_sid);
        let Some(base) = self.remote_url.read().clone() else {
            return Ok(());
        };
        let resp = self
            .http
            .delete(format!("{base}/accounts/{account_sid}"))
            .timeout(Duration::from_secs(30))
            .send()
            .await?;
        if resp.status().is_success() || resp.status() == reqwest::StatusCode::NOT_FOUND {
            Ok(())
        } else {
            anyhow::bail!("remote classifier service answered HTTP {}", resp.status())
        }
    }
}

/// Trains one version (local algorithms off the async runtime) and says how it ended.
async fn train_version(r: &ClassifierVersionRecord) -> TrainingOutcome {
    let entry = Uuid::parse_str(&r.model_id)
        .ok()
        .and_then(|u| catalog::lookup(&u));
    let Some(entry) = entry else {
        return TrainingOutcome::Failed {
            reason: format!("model_id {} is not in the catalog", r.model_id),
        };
    };
    let algorithm = match entry.backend {
        Backend::Remote => {
            return TrainingOutcome::Ready {
                model: String::new(),
                reason: "trained by the remote classifier service".into(),
            };
        }
        Backend::Local(a) => a,
    };
    let intents: Vec<Intent> = match serde_json::from_str(&r.intents) {
        Ok(i) => i,
        Err(e) => {
            return TrainingOutcome::Failed {
                reason: format!("stored intents unreadable: {e}"),
            };
        }
    };
    let name = entry.name;
    let joined = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let ids: Vec<String> = intents.iter().map(|i| i.id.clone()).collect();
        let examples: Vec<Example> = intents
            .iter()
            .enumerate()
            .flat_map(|(c, i)| {
                i.phrase
                    .phrases
                    .iter()
                    .map(move |p| Example { text: p, intent: c })
            })
            .collect();
        let n = examples.len();
        Model::train(algorithm, ids, &examples).map(|m| {
            let reason = format!(
                "trained {name} on {n} phrases of {} intents ({} features) in {} ms",
                m.intents.len(),
                m.feature_count(),
                started.elapsed().as_millis()
            );
            TrainingOutcome::Ready {
                model: m.to_json(),
                reason,
            }
        })
    })
    .await;
    match joined {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => TrainingOutcome::Failed {
            reason: e.to_string(),
        },
        Err(e) => TrainingOutcome::Failed {
            reason: format!("training worker crashed: {e}"),
        },
    }
}
