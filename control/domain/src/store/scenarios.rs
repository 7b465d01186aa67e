//! Scenarios and their version records.
//!
//! A scenario owns records on two axes (spec, "Scenario version record"):
//! * `draft_version` 0: the one mutable work-in-progress draft, rewritten by every save;
//! * `draft_version` ≥ 1: drafts frozen when a test call first runs them
//!   ([`Store::freeze_draft`]); identical content resolves to the existing frozen record;
//! * `version` ≥ 1: published versions, immutable, numbered in publishing order.
//!
//! Snapshots are stored as JSON text; `content_hash` is the scenarios crate's hash of
//! the canonical JSON, so equal content has equal hashes whatever the key order.

use super::BeginWrite;
use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, now, on_db, store_row};

store_row! {
    #[derive(Debug, Clone)]
    pub struct ScenarioRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub account_sid: String,
        pub name: String,
        pub description: String,
        pub latest_version: Option<i64>,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
    }
}

store_row! {
    #[derive(Debug, Clone)]
    pub struct ScenarioVersionRecord {
        pub sid: String,
        pub scenario_sid: String,
        pub account_sid: String,
        pub version: Option<i64>,
        pub draft_version: Option<i64>,
        pub content_hash: String,
        pub snapshot: String,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
    }
}

impl ScenarioVersionRecord {
    /// The stored snapshot as JSON (an empty object if the text is somehow unreadable).
    pub fn snapshot_value(&self) -> serde_json::Value {
        serde_json::from_str(&self.snapshot).unwrap_or_else(|_| serde_json::json!({}))
    }
}

/// Which records a version list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionAxis {
    All,
    Published,
    /// Draft records (0 and frozen).
    Draft,
}

const COLS: &str = "sid, tenant_sid, account_sid, name, description, \
    (SELECT MAX(v.version) FROM scenario_versions v WHERE v.scenario_sid = scenarios.sid) AS latest_version, \
    created_at, updated_at";
const VCOLS: &str = "sid, scenario_sid, account_sid, version, draft_version, content_hash, snapshot, created_at, updated_at";

/// Attempts at taking the next version number when concurrent writers race for it.
const NUMBERING_ATTEMPTS: usize = 8;

impl Store {
    /// Creates a scenario with its draft 0 holding `draft_snapshot`, in one transaction.
    #[allow(clippy::too_many_arguments)]
    pub async fn scenario_create(
        &self,
        sid: &str,
        tenant_sid: &str,
        account_sid: &str,
        name: &str,
        description: &str,
        draft_sid: &str,
        draft_snapshot: &str,
        draft_hash: &str,
    ) -> StoreResult<ScenarioRecord> {
        let t = now();
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            sqlx::query("INSERT INTO scenarios (sid, tenant_sid, account_sid, name, description, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)")
                .bind(sid).bind(tenant_sid).bind(account_sid).bind(name).bind(description).bind(t)
                .execute(&mut *tx).await?;
            sqlx::query("INSERT INTO scenario_versions (sid, scenario_sid, account_sid, version, draft_version, content_hash, snapshot, created_at, updated_at) \
                 VALUES ($1, $2, $3, NULL, 0, $4, $5, $6, $6)")
                .bind(draft_sid).bind(sid).bind(account_sid).bind(draft_hash).bind(draft_snapshot).bind(t)
                .execute(&mut *tx).await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(())
        }.await)
        .map_err(StoreError::from_write)?;
        self.scenario_get(sid).await?.ok_or(StoreError::NotFound)
    }

    pub async fn scenario_get(&self, sid: &str) -> StoreResult<Option<ScenarioRecord>> {
        let sql = format!("SELECT {COLS} FROM scenarios WHERE sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, ScenarioRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// A page of an account's scenarios; `query` is a substring of the name,
    /// case-insensitive for every script (`search_fold`, see `store::fold`); `order_by` is
    /// `created_at` or `name`.
    pub async fn scenario_list(
        &self,
        account_sid: &str,
        query: Option<&str>,
        order_by: &str,
        descending: bool,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<ScenarioRecord>, i64)> {
        let pattern = query
            .filter(|q| !q.is_empty())
            .map(super::filter::like_pattern);
        let filter = "account_sid = $1 AND ($2 IS NULL OR search_fold(name) LIKE $2 ESCAPE '\\')";
        let column = if order_by == "name" {
            "name"
        } else {
            "created_at"
        };
        let dir = if descending { "DESC" } else { "ASC" };
        let sql = format!(
            "SELECT {COLS} FROM scenarios WHERE {filter} ORDER BY {column} {dir}, sid {dir} LIMIT $3 OFFSET $4"
        );
        let count = format!("SELECT COUNT(*) FROM scenarios WHERE {filter}");
        let rows = on_db!(self, p => sqlx::query_as::<_, ScenarioRecord>(sqlx::AssertSqlSafe(sql)).bind(account_sid).bind(&pattern).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(count)).bind(account_sid).bind(&pattern).fetch_one(p).await)?;
        Ok((rows, total))
    }

    /// Partial update of name/description (`None` keeps the value).
    pub async fn scenario_update(
        &self,
        sid: &str,
        name: Option<&str>,
        description: Option<&str>,
    ) -> StoreResult<ScenarioRecord> {
        let n = on_db!(self, p => sqlx::query("UPDATE scenarios SET name = COALESCE($2, name), description = COALESCE($3, description), updated_at = $4 WHERE sid = $1")
            .bind(sid).bind(name).bind(description).bind(now()).execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        self.scenario_get(sid).await?.ok_or(StoreError::NotFound)
    }

    /// Deletes a scenario and all its version records unless an agent runs it (`Conflict`).
    pub async fn scenario_delete(&self, sid: &str) -> StoreResult<()> {
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let refs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM agents WHERE scenario_sid = $1")
                .bind(sid).fetch_one(&mut *tx).await?;
            if refs > 0 {
                return Err(StoreError::Conflict("referenced by agents".into()));
            }
            sqlx::query("DELETE FROM scenario_versions WHERE scenario_sid = $1").bind(sid).execute(&mut *tx).await?;
            let n = sqlx::query("DELETE FROM scenarios WHERE sid = $1").bind(sid).execute(&mut *tx).await?.rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            tx.commit().await?;
            Ok(())
        }.await)
    }

    /// Overwrites the work-in-progress draft (draft_version 0) of a scenario.
    pub async fn scenario_draft_save(
        &self,
        scenario_sid: &str,
        snapshot: &str,
        content_hash: &str,
    ) -> StoreResult<ScenarioVersionRecord> {
        let t = now();
        let n = on_db!(self, p => sqlx::query("UPDATE scenario_versions SET snapshot = $2, content_hash = $3, updated_at = $4 WHERE scenario_sid = $1 AND draft_version = 0")
            .bind(scenario_sid).bind(snapshot).bind(content_hash).bind(t).execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        on_db!(self, p => sqlx::query("UPDATE scenarios SET updated_at = $2 WHERE sid = $1").bind(scenario_sid).bind(t).execute(p).await.map(|_| ()))?;
        self.scenario_version_by_axis(scenario_sid, 0, true)
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn scenario_version_get(
        &self,
        sid: &str,
    ) -> StoreResult<Option<ScenarioVersionRecord>> {
        let sql = format!("SELECT {VCOLS} FROM scenario_versions WHERE sid = $1");
        Ok(
            on_db!(self, p => sqlx::query_as::<_, ScenarioVersionRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
        )
    }

    /// The record of a scenario on one axis: published `version` (draft=false) or
    /// `draft_version` (draft=true; 0 = the work-in-progress draft).
    pub async fn scenario_version_by_axis(
        &self,
        scenario_sid: &str,
        number: i64,
        draft: bool,
    ) -> StoreResult<Option<ScenarioVersionRecord>> {
        let column = if draft { "draft_version" } else { "version" };
        let sql = format!(
            "SELECT {VCOLS} FROM scenario_versions WHERE scenario_sid = $1 AND {column} = $2"
        );
        Ok(
            on_db!(self, p => sqlx::query_as::<_, ScenarioVersionRecord>(sqlx::AssertSqlSafe(sql)).bind(scenario_sid).bind(number).fetch_optional(p).await)?,
        )
    }

    /// Dialer helper: the newest published version of a scenario (what an agent runs and
    /// what a test call without draft=true runs); None when nothing is published.
    pub async fn scenario_latest_published(
        &self,
        scenario_sid: &str,
    ) -> StoreResult<Option<ScenarioVersionRecord>> {
        let sql = format!(
            "SELECT {VCOLS} FROM scenario_versions WHERE scenario_sid = $1 AND version IS NOT NULL ORDER BY version DESC LIMIT 1"
        );
        Ok(
            on_db!(self, p => sqlx::query_as::<_, ScenarioVersionRecord>(sqlx::AssertSqlSafe(sql)).bind(scenario_sid).fetch_optional(p).await)?,
        )
    }

    /// A page of a scenario's records: published ones newest first, then drafts newest
    /// first (draft 0 last).
    pub async fn scenario_version_list(
        &self,
        scenario_sid: &str,
        axis: VersionAxis,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<ScenarioVersionRecord>, i64)> {
        let filter = match axis {
            VersionAxis::All => "",
            VersionAxis::Published => " AND version IS NOT NULL",
            VersionAxis::Draft => " AND draft_version IS NOT NULL",
        };
        let sql = format!(
            "SELECT {VCOLS} FROM scenario_versions WHERE scenario_sid = $1{filter} \
             ORDER BY CASE WHEN version IS NULL THEN 1 ELSE 0 END, version DESC, \
             CASE WHEN draft_version = 0 THEN 1 ELSE 0 END, draft_version DESC LIMIT $2 OFFSET $3"
        );
        let count =
            format!("SELECT COUNT(*) FROM scenario_versions WHERE scenario_sid = $1{filter}");
        let rows = on_db!(self, p => sqlx::query_as::<_, ScenarioVersionRecord>(sqlx::AssertSqlSafe(sql)).bind(scenario_sid).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(count)).bind(scenario_sid).fetch_one(p).await)?;
        Ok((rows, total))
    }

    /// Records `snapshot` as the next published version. When the newest published
    /// version already has `content_hash`, that record is returned instead and the flag
    /// is false (publishing unchanged content records nothing).
    ///
    /// The comparison with the newest version and the insert are one statement, so
    /// concurrent publishers of the same content record it once: a publisher whose
    /// statement sees the other's version inserts nothing and returns it; one whose
    /// statement does not see it takes the same next number and fails on the unique
    /// (scenario, version) index, then looks again.
    pub async fn scenario_publish(
        &self,
        scenario_sid: &str,
        account_sid: &str,
        snapshot: &str,
        content_hash: &str,
    ) -> StoreResult<(ScenarioVersionRecord, bool)> {
        for _ in 0..NUMBERING_ATTEMPTS {
            let sid = crate::ids::new_sid(crate::ids::prefix::SCENARIO_VERSION);
            let t = now();
            let r = on_db!(self, p => sqlx::query("INSERT INTO scenario_versions (sid, scenario_sid, account_sid, version, draft_version, content_hash, snapshot, created_at, updated_at) \
                 SELECT $1, $2, $3, newest.version + 1, NULL, $4, $5, $6, $6 \
                 FROM (SELECT COALESCE(MAX(version), 0) AS version FROM scenario_versions WHERE scenario_sid = $2) AS newest \
                 WHERE NOT EXISTS (SELECT 1 FROM scenario_versions v WHERE v.scenario_sid = $2 AND v.version = newest.version AND v.content_hash = $4)")
                .bind(&sid).bind(scenario_sid).bind(account_sid).bind(content_hash).bind(snapshot).bind(t)
                .execute(p).await.map(|r| r.rows_affected()));
            match r.map_err(StoreError::from_write) {
                Ok(0) => {
                    // The newest version had this content when the statement ran; it is
                    // returned unless a newer one was published since.
                    if let Some(latest) = self.scenario_latest_published(scenario_sid).await?
                        && latest.content_hash == content_hash
                    {
                        return Ok((latest, false));
                    }
                }
                Ok(_) => {
                    let rec = self
                        .scenario_version_get(&sid)
                        .await?
                        .ok_or(StoreError::NotFound)?;
                    return Ok((rec, true));
                }
                Err(StoreError::Unique) => {}
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Conflict(
            "concurrent publishers kept taking the next version number".into(),
        ))
    }

    /// Freezes the current work-in-progress draft of a scenario into a draft record
    /// (`draft_version` ≥ 1) for a test call: a frozen record with identical content is
    /// returned as is; otherwise the content becomes the next draft_version. Safe against
    /// concurrent callers (they all end up with the same record). NotFound when the
    /// scenario has no draft (it does not exist).
    pub async fn freeze_draft(&self, scenario_sid: &str) -> StoreResult<ScenarioVersionRecord> {
        let Some(draft) = self.scenario_version_by_axis(scenario_sid, 0, true).await? else {
            return Err(StoreError::NotFound);
        };
        let by_hash = format!(
            "SELECT {VCOLS} FROM scenario_versions WHERE scenario_sid = $1 AND draft_version >= 1 AND content_hash = $2"
        );
        for _ in 0..NUMBERING_ATTEMPTS {
            let found = on_db!(self, p => sqlx::query_as::<_, ScenarioVersionRecord>(sqlx::AssertSqlSafe(by_hash.clone()))
                .bind(scenario_sid).bind(&draft.content_hash).fetch_optional(p).await)?;
            if let Some(rec) = found {
                return Ok(rec);
            }
            let sid = crate::ids::new_sid(crate::ids::prefix::SCENARIO_VERSION);
            let t = now();
            let r = on_db!(self, p => sqlx::query("INSERT INTO scenario_versions (sid, scenario_sid, account_sid, version, draft_version, content_hash, snapshot, created_at, updated_at) \
                 SELECT $1, $2, $3, NULL, COALESCE(MAX(draft_version), 0) + 1, $4, $5, $6, $6 FROM scenario_versions WHERE scenario_sid = $2")
                .bind(&sid).bind(scenario_sid).bind(&draft.account_sid).bind(&draft.content_hash).bind(&draft.snapshot).bind(t)
                .execute(p).await.map(|_| ()));
            match r.map_err(StoreError::from_write) {
                Ok(()) => {
                    return self
                        .scenario_version_get(&sid)
                        .await?
                        .ok_or(StoreError::NotFound);
                }
                Err(StoreError::Unique) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Conflict(
            "concurrent freezes kept taking the next draft version".into(),
        ))
    }
}

impl Store {
    /// Whether a question brick's classifier reference resolves for the account:
    /// version 0 (the classifier as the unversioned surface serves it) needs any version
    /// of the classifier; another number needs exactly that version.
    pub async fn scenario_classifier_exists(
        &self,
        account_sid: &str,
        classifier_id: &str,
        version: i64,
    ) -> StoreResult<bool> {
        Ok(if version == 0 {
            self.classifier_latest(account_sid, classifier_id)
                .await?
                .is_some()
        } else {
            self.classifier_version(account_sid, classifier_id, version)
                .await?
                .is_some()
        })
    }
}
