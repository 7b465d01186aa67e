//! Scenarios: creating one with its draft ([`Ops::create_scenario`]), validating the draft
//! ([`Ops::validate_draft`]) and publishing it ([`Ops::publish_draft`]). The v1 routes
//! and the legacy `POST /v1/scenarios` (create, then publish) call these.

use callsmith_scenarios::Validation;
use serde_json::{Map, Value};

use super::{
    Ops,
    error::{UseCaseError, UseCaseResult},
};
use crate::{
    ids::{new_sid, prefix},
    store::{AccountRecord, ScenarioRecord, ScenarioVersionRecord},
    text_field::{NameRule, TextKind, check_text},
};

/// A new scenario as asked for (the v1 create body, decoded).
#[derive(Debug, Clone, Default)]
pub struct NewScenario {
    pub name: String,
    pub description: Option<String>,
    /// Initial draft content (default `{"bricks": {}}`).
    pub constructor: Option<Map<String, Value>>,
}

/// The stored form of a snapshot: its JSON text and content hash.
pub fn snapshot_of(name: &str, constructor: Map<String, Value>) -> (String, String) {
    let v = serde_json::json!({"name": name, "constructor": constructor});
    let hash = callsmith_scenarios::canonical::content_hash_value(&v);
    (v.to_string(), hash)
}

/// A scenario description, trimmed: free text over several lines (`invalid_description`
/// for a character [`crate::text_field`] refuses there).
pub fn check_description(d: &str) -> UseCaseResult<String> {
    let d = d.trim();
    check_text("description", d, TextKind::Multiline, "invalid_description")?;
    Ok(d.to_string())
}

impl Ops<'_> {
    /// Creates a scenario with `b`'s content as its draft in `account` (the name and
    /// description checked).
    pub async fn create_scenario(
        &self,
        account: &AccountRecord,
        b: NewScenario,
    ) -> UseCaseResult<ScenarioRecord> {
        let name = NameRule::NAME.check("name", &b.name)?;
        let description = check_description(b.description.as_deref().unwrap_or(""))?;
        let constructor = b.constructor.unwrap_or_else(|| {
            let mut m = Map::new();
            m.insert("bricks".into(), serde_json::json!({}));
            m
        });
        let (text, hash) = snapshot_of(&name, constructor);
        Ok(self
            .services
            .store
            .scenario_create(
                &new_sid(prefix::SCENARIO),
                &account.tenant_sid,
                &account.sid,
                &name,
                &description,
                &new_sid(prefix::SCENARIO_VERSION),
                &text,
                &hash,
            )
            .await?)
    }

    /// The draft (draft_version 0) of `s`; `scenario` not found when it has none.
    async fn draft_of(&self, s: &ScenarioRecord) -> UseCaseResult<ScenarioVersionRecord> {
        self.services
            .store
            .scenario_version_by_axis(&s.sid, 0, true)
            .await?
            .ok_or(UseCaseError::NotFound { entity: "scenario" })
    }

    /// The SCN1xx errors and warnings of the draft of `s`, its references answered as a
    /// call would resolve them ([`Ops::check_snapshot`]).
    pub async fn validate_draft(&self, s: &ScenarioRecord) -> UseCaseResult<Validation> {
        let draft = self.draft_of(s).await?;
        self.check_snapshot(&s.account_sid, &draft.snapshot_value())
            .await
    }

    /// Validates the draft of `s` and records it as the next published version; `true`
    /// when a version was recorded, `false` when the draft equals the newest one
    /// (returned). `scenario_invalid` with the SCN1xx entries when the draft is invalid.
    pub async fn publish_draft(
        &self,
        s: &ScenarioRecord,
    ) -> UseCaseResult<(ScenarioVersionRecord, bool)> {
        let draft = self.draft_of(s).await?;
        let errors = self
            .check_snapshot(&s.account_sid, &draft.snapshot_value())
            .await?
            .errors;
        if !errors.is_empty() {
            return Err(UseCaseError::invalid_scenario(errors));
        }
        Ok(self
            .services
            .store
            .scenario_publish(&s.sid, &s.account_sid, &draft.snapshot, &draft.content_hash)
            .await?)
    }
}
