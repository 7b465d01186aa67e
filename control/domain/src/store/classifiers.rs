//! Intent classifier versions: immutable content rows, their training state and the
//! trained model (serialized weights) so predictions survive restarts.
//!
//! Training states: `new` → `queued` → `training` → `ready` | `failed`. A row is written
//! `queued` (the PUT queues training in the same statement); `new` is the state of a
//! version whose training was never queued (not produced by the PUT path today, kept for
//! versions a later import records without training).

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, now, on_db, store_row};

store_row! {
    /// One classifier version without its model weights.
    #[derive(Debug, Clone)]
    pub struct ClassifierVersionRecord {
        pub account_sid: String,
        pub classifier_id: String,
        pub version: i64,
        pub model_id: String,
        pub description: String,
        // intents: canonical JSON array of {id, description, phrase{phrases}}.
        pub intents: String,
        pub content_hash: String,
        pub content_identity: String,
        pub training_state: String,
        pub training_reason: Option<String>,
        pub failure_reason: Option<String>,
        pub queued_at: Option<DateTime<Utc>>,
        pub state_changed_at: Option<DateTime<Utc>>,
        pub created_at: DateTime<Utc>,
    }
}

/// A version to record (state `queued`, queued now).
#[derive(Debug, Clone)]
pub struct NewClassifierVersion<'a> {
    pub account_sid: &'a str,
    pub classifier_id: &'a str,
    pub version: i64,
    pub model_id: &'a str,
    pub description: &'a str,
    pub intents: &'a str,
    pub content_hash: &'a str,
    pub content_identity: &'a str,
}

/// How a training run ended.
#[derive(Debug, Clone)]
pub enum TrainingOutcome {
    /// Weights (serialized) and a human-readable summary of the run.
    Ready { model: String, reason: String },
    /// Why it failed.
    Failed { reason: String },
}

const COLS: &str = "account_sid, classifier_id, version, model_id, description, intents, content_hash, content_identity, training_state, training_reason, failure_reason, queued_at, state_changed_at, created_at";

impl Store {
    /// The version of this classifier holding exactly this content, if any.
    pub async fn classifier_by_content(
        &self,
        account_sid: &str,
        classifier_id: &str,
        content_hash: &str,
    ) -> StoreResult<Option<ClassifierVersionRecord>> {
        let sql = format!(
            "SELECT {COLS} FROM classifier_versions WHERE account_sid = $1 AND classifier_id = $2 AND content_hash = $3"
        );
        Ok(
            on_db!(self, p => sqlx::query_as::<_, ClassifierVersionRecord>(sqlx::AssertSqlSafe(sql))
            .bind(account_sid).bind(classifier_id).bind(content_hash).fetch_optional(p).await)?,
        )
    }

    /// The number the next version of this classifier would get (0 for the first).
    pub async fn classifier_next_version(
        &self,
        account_sid: &str,
        classifier_id: &str,
    ) -> StoreResult<i64> {
        let n: Option<i64> = on_db!(self, p => sqlx::query_scalar("SELECT MAX(version) FROM classifier_versions WHERE account_sid = $1 AND classifier_id = $2")
            .bind(account_sid).bind(classifier_id).fetch_one(p).await)?;
        Ok(n.map_or(0, |v| v + 1))
    }

    /// Records a version in state `queued`. `Unique` when the version number or the
    /// content is already held (a concurrent writer got there first).
    pub async fn classifier_insert(
        &self,
        v: &NewClassifierVersion<'_>,
    ) -> StoreResult<ClassifierVersionRecord> {
        let t = now();
        on_db!(self, p => sqlx::query("INSERT INTO classifier_versions (account_sid, classifier_id, version, model_id, description, intents, content_hash, content_identity, training_state, queued_at, state_changed_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', $9, $9, $9)")
            .bind(v.account_sid).bind(v.classifier_id).bind(v.version).bind(v.model_id).bind(v.description)
            .bind(v.intents).bind(v.content_hash).bind(v.content_identity).bind(t)
            .execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.classifier_version(v.account_sid, v.classifier_id, v.version)
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn classifier_version(
        &self,
        account_sid: &str,
        classifier_id: &str,
        version: i64,
    ) -> StoreResult<Option<ClassifierVersionRecord>> {
        let sql = format!(
            "SELECT {COLS} FROM classifier_versions WHERE account_sid = $1 AND classifier_id = $2 AND version = $3"
        );
        Ok(
            on_db!(self, p => sqlx::query_as::<_, ClassifierVersionRecord>(sqlx::AssertSqlSafe(sql))
            .bind(account_sid).bind(classifier_id).bind(version).fetch_optional(p).await)?,
        )
    }

    /// The newest version (highest number), whatever its state.
    pub async fn classifier_latest(
        &self,
        account_sid: &str,
        classifier_id: &str,
    ) -> StoreResult<Option<ClassifierVersionRecord>> {
        let sql = format!(
            "SELECT {COLS} FROM classifier_versions WHERE account_sid = $1 AND classifier_id = $2 ORDER BY version DESC LIMIT 1"
        );
        Ok(
            on_db!(self, p => sqlx::query_as::<_, ClassifierVersionRecord>(sqlx::AssertSqlSafe(sql))
            .bind(account_sid).bind(classifier_id).fetch_optional(p).await)?,
        )
    }

    /// The version the unversioned surface serves: the newest `ready` one.
    pub async fn classifier_serving(
        &self,
        account_sid: &str,
        classifier_id: &str,
    ) -> StoreResult<Option<ClassifierVersionRecord>> {
        let sql = format!(
            "SELECT {COLS} FROM classifier_versions WHERE account_sid = $1 AND classifier_id = $2 AND training_state = 'ready' ORDER BY version DESC LIMIT 1"
        );
        Ok(
            on_db!(self, p => sqlx::query_as::<_, ClassifierVersionRecord>(sqlx::AssertSqlSafe(sql))
            .bind(account_sid).bind(classifier_id).fetch_optional(p).await)?,
        )
    }

    /// A page of a classifier's versions, oldest (version 0) first, with the total.
    pub async fn classifier_versions(
        &self,
        account_sid: &str,
        classifier_id: &str,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<ClassifierVersionRecord>, i64)> {
        let sql = format!(
            "SELECT {COLS} FROM classifier_versions WHERE account_sid = $1 AND classifier_id = $2 ORDER BY version ASC LIMIT $3 OFFSET $4"
        );
        let rows = on_db!(self, p => sqlx::query_as::<_, ClassifierVersionRecord>(sqlx::AssertSqlSafe(sql))
            .bind(account_sid).bind(classifier_id).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar("SELECT COUNT(*) FROM classifier_versions WHERE account_sid = $1 AND classifier_id = $2")
            .bind(account_sid).bind(classifier_id).fetch_one(p).await)?;
        Ok((rows, total))
    }

    /// Moves a version from `queued` to `training`. False when it is no longer queued
    /// (another process claimed it, or it was purged): the caller must not train it.
    pub async fn classifier_claim(
        &self,
        account_sid: &str,
        classifier_id: &str,
        version: i64,
    ) -> StoreResult<bool> {
        let n = on_db!(self, p => sqlx::query("UPDATE classifier_versions SET training_state = 'training', state_changed_at = $4 WHERE account_sid = $1 AND classifier_id = $2 AND version = $3 AND training_state = 'queued'")
            .bind(account_sid).bind(classifier_id).bind(version).bind(now()).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Records how a run of a `training` version ended.
    pub async fn classifier_finish(
        &self,
        account_sid: &str,
        classifier_id: &str,
        version: i64,
        outcome: &TrainingOutcome,
    ) -> StoreResult<()> {
        let t = now();
        let (state, model, reason, failure) = match outcome {
            TrainingOutcome::Ready { model, reason } => {
                ("ready", Some(model.as_str()), reason.as_str(), None)
            }
            TrainingOutcome::Failed { reason } => {
                ("failed", None, reason.as_str(), Some(reason.as_str()))
            }
        };
        on_db!(self, p => sqlx::query("UPDATE classifier_versions SET training_state = $4, model = $5, training_reason = $6, failure_reason = $7, state_changed_at = $8 WHERE account_sid = $1 AND classifier_id = $2 AND version = $3 AND training_state = 'training'")
            .bind(account_sid).bind(classifier_id).bind(version).bind(state).bind(model).bind(reason).bind(failure).bind(t)
            .execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// The serialized model of a `ready` version.
    pub async fn classifier_model(
        &self,
        account_sid: &str,
        classifier_id: &str,
        version: i64,
    ) -> StoreResult<Option<String>> {
        let m: Option<Option<String>> = on_db!(self, p => sqlx::query_scalar("SELECT model FROM classifier_versions WHERE account_sid = $1 AND classifier_id = $2 AND version = $3 AND training_state = 'ready'")
            .bind(account_sid).bind(classifier_id).bind(version).fetch_optional(p).await)?;
        Ok(m.flatten())
    }

    /// After a restart: versions a dead process left `training` go back to `queued`;
    /// returns every queued version, oldest queue time first, for the dispatcher.
    pub async fn classifier_requeue_interrupted(&self) -> StoreResult<Vec<(String, String, i64)>> {
        on_db!(self, p => sqlx::query("UPDATE classifier_versions SET training_state = 'queued', state_changed_at = $1 WHERE training_state = 'training'")
            .bind(now()).execute(p).await.map(|_| ()))?;
        let rows: Vec<(String, String, i64)> = on_db!(self, p => sqlx::query_as("SELECT account_sid, classifier_id, version FROM classifier_versions WHERE training_state = 'queued' ORDER BY queued_at ASC, version ASC")
            .fetch_all(p).await)?;
        Ok(rows)
    }
}
