//! Scenario validation against the world outside the snapshot: the SCN1xx checks of the
//! scenarios crate, with every reference answered here — classifiers from the store, audio
//! references by the one resolver a call plays through ([`crate::audio_ref`]), webhook and
//! proxy urls by the guarded client's policy ([`crate::guarded_http`]), synthesizers by the
//! node's configured names (`Settings::tts_engines`) and recognizers by the catalog engines
//! the account's feature flags let it use ([`crate::catalog::Catalog::visible_to_account`]).
//! Publishing and a draft test call both validate through [`validate_scenario`], so what
//! they accept is what a call will do.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Mutex;

use callsmith_scenarios::{RefProblem, Validation, ValidationContext};

use crate::{
    audio_ref::AudioRefError, guarded_http::GuardedClient, services::Services, store::StoreError,
};

/// Why a snapshot could not be validated (not a problem of the snapshot).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Object storage failed while an audio reference was checked.
    #[error("checking audio references: {0}")]
    Storage(String),
}

/// A [`ValidationContext`] over answers fetched beforehand: validation is synchronous, the
/// lookups are not, so a first pass records every reference a snapshot makes (accepting
/// everything), the references are looked up, and a second pass validates against the
/// answers.
#[derive(Default)]
struct Refs<'a> {
    classifiers: Mutex<Vec<(String, i64)>>,
    audios: Mutex<Vec<String>>,
    recognizers_named: Mutex<Vec<String>>,
    missing_classifiers: HashSet<(String, i64)>,
    audio_problems: HashMap<String, RefProblem>,
    /// The recognizers the account may use; None until looked up (every name passes).
    recognizers: Option<BTreeSet<String>>,
    synthesizers: &'a [String],
    outbound: Option<&'a GuardedClient>,
}

impl ValidationContext for Refs<'_> {
    fn classifier_exists(&self, id: &str, version: i64) -> bool {
        if let Ok(mut seen) = self.classifiers.lock() {
            seen.push((id.to_string(), version));
        }
        !self
            .missing_classifiers
            .contains(&(id.to_string(), version))
    }
    fn audio_problem(&self, reference: &str) -> Option<RefProblem> {
        if let Ok(mut seen) = self.audios.lock() {
            seen.push(reference.to_string());
        }
        self.audio_problems.get(reference).cloned()
    }
    fn url_problem(&self, url: &str) -> Option<String> {
        self.outbound.and_then(|c| c.refusal(url))
    }
    fn synthesizer_known(&self, engine: &str) -> bool {
        self.synthesizers.iter().any(|e| e == engine)
    }
    fn recognizer_known(&self, engine: &str) -> bool {
        if let Ok(mut seen) = self.recognizers_named.lock() {
            seen.push(engine.to_string());
        }
        self.recognizers.as_ref().is_none_or(|r| r.contains(engine))
    }
}

/// Validates a snapshot for `account_sid`: errors (empty: it can run) and warnings.
/// * classifiers (`intent_properties.classifier` id + version): see
///   [`crate::store::Store::scenario_classifier_exists`];
/// * audio references: what [`crate::audio_ref::AudioResolver::check`] accepts for the
///   account (SCN118 when nothing of the account is there, SCN123 when the form is refused);
/// * webhook and proxy urls: refused when they name a non-public address (SCN123), unless
///   the operator allows private targets;
/// * synthesizer names: the node's (SCN125); recognizer names: the catalog engines the
///   account's feature flags let it use (SCN126).
///
/// References with placeholders are judged when the call renders them.
pub async fn validate_scenario(
    services: &Services,
    account_sid: &str,
    snapshot: &serde_json::Value,
) -> Result<Validation, CheckError> {
    let probe = Refs {
        outbound: Some(&services.outbound),
        synthesizers: &services.tts_engines,
        ..Refs::default()
    };
    let first = Validation::of_value(snapshot, &probe);
    let classifiers = probe.classifiers.into_inner().unwrap_or_default();
    let audios = probe.audios.into_inner().unwrap_or_default();
    let recognizers = probe.recognizers_named.into_inner().unwrap_or_default();
    if classifiers.is_empty() && audios.is_empty() && recognizers.is_empty() {
        return Ok(first);
    }
    let mut answers = Refs {
        outbound: Some(&services.outbound),
        synthesizers: &services.tts_engines,
        ..Refs::default()
    };
    let store = &services.store;
    for (id, version) in classifiers {
        if !store
            .scenario_classifier_exists(account_sid, &id, version)
            .await?
        {
            answers.missing_classifiers.insert((id, version));
        }
    }
    for reference in audios {
        let problem = match services.audio.check(account_sid, &reference).await {
            Ok(()) => continue,
            Err(AudioRefError::NotFound(m)) => RefProblem::Missing(m),
            Err(AudioRefError::Refused(m)) => RefProblem::Refused(m),
            Err(AudioRefError::Unavailable(m)) => return Err(CheckError::Storage(m)),
        };
        answers.audio_problems.insert(reference, problem);
    }
    if !recognizers.is_empty() {
        let catalog = &services.stt.catalog;
        let visible = match store.account_get(account_sid).await? {
            Some(account) => catalog.visible_to_account(store, &account).await?,
            None => catalog.visible_engines(|_| false),
        };
        if recognizers.iter().any(|r| !visible.contains(r)) {
            answers.recognizers = Some(visible);
        }
    }
    if answers.missing_classifiers.is_empty()
        && answers.audio_problems.is_empty()
        && answers.recognizers.is_none()
    {
        return Ok(first);
    }
    Ok(Validation::of_value(snapshot, &answers))
}
