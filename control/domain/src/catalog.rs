//! Speech recognition engines: the model catalog (data, loaded at start from
//! `control/domain/catalog/stt-models.json` or `stt.catalog_path`), which engines a caller's
//! feature flags let it see, the spec's language matching, and the recognition node
//! pools of the configured engines (`[stt] engines`).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::PathBuf,
};

use callsmith_media::stt::{SttNodeConfig, SttPool};
use serde::{Deserialize, Serialize};

/// The catalog shipped with the crate (used when `stt.catalog_path` is unset).
pub const SHIPPED_CATALOG: &str = include_str!("../catalog/stt-models.json");

/// `[stt]` configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SttConfig {
    /// A catalog file replacing the shipped one.
    pub catalog_path: Option<PathBuf>,
    /// Recognition nodes per engine name (the engine must be in the catalog).
    pub engines: BTreeMap<String, Vec<SttNodeConfig>>,
}

/// metadata of a Recognition model option.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ModelMetadata {
    pub auto_punctuation: bool,
    pub diarization: bool,
    pub model_adaptation: bool,
    pub word_level_confidence: bool,
    pub profanity_filter: bool,
    pub spoken_punctuation: bool,
    pub spoken_emojis: bool,
    /// GA or Preview; empty when the engine publishes none.
    pub launch_readiness: String,
}

/// One Recognition model option (the wire form).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelOption {
    pub engine: String,
    pub language: String,
    /// English name of the language.
    pub language_name: String,
    /// Name of the language in its own script.
    pub language_local_name: String,
    pub model: String,
    /// Empty when the engine has none.
    pub model_name: String,
    /// Default for its engine and language.
    pub is_default_model: bool,
    pub metadata: ModelMetadata,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileModel {
    language: String,
    language_name: String,
    language_local_name: String,
    model: String,
    model_name: String,
    is_default_model: bool,
    metadata: ModelMetadata,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEngine {
    engine: String,
    flag: Option<String>,
    models: Vec<FileModel>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    #[serde(rename = "_comment", default)]
    _comment: Option<String>,
    engines: Vec<FileEngine>,
}

/// The recognition model catalog.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    options: Vec<ModelOption>,
    /// engine → the feature flag gating it (absent: ungated).
    flags: HashMap<String, String>,
    engines: Vec<String>,
}

/// Splits a language tag into (lower-case language, region if any).
fn split_tag(tag: &str) -> (String, Option<String>) {
    let mut it = tag.split(['-', '_']);
    let lang = it.next().unwrap_or("").to_ascii_lowercase();
    let region = it.next().map(|r| r.to_ascii_lowercase());
    (lang, region)
}

/// The spec's language matching: a bare language selects its whole family; a locale
/// selects that locale, and an engine option listing the bare language.
pub fn language_matches(query: &str, option: &str) -> bool {
    let (ql, qr) = split_tag(query);
    let (ol, or) = split_tag(option);
    if ql.is_empty() || ql != ol {
        return false;
    }
    match (qr, or) {
        (None, _) => true,
        (Some(_), None) => true,
        (Some(a), Some(b)) => a == b,
    }
}

impl Catalog {
    /// Parses and checks a catalog document: engines unique, flags declared, every
    /// language a plausible tag.
    pub fn parse(json: &str) -> Result<Catalog, String> {
        let file: CatalogFile =
            serde_json::from_str(json).map_err(|e| format!("stt catalog: {e}"))?;
        let mut cat = Catalog::default();
        for e in file.engines {
            if e.engine.is_empty() || cat.engines.contains(&e.engine) {
                return Err(format!(
                    "stt catalog: engine {:?} empty or repeated",
                    e.engine
                ));
            }
            if let Some(f) = &e.flag {
                if !crate::flags::is_declared(f) {
                    return Err(format!(
                        "stt catalog: engine {} names undeclared flag {f:?}",
                        e.engine
                    ));
                }
                cat.flags.insert(e.engine.clone(), f.clone());
            }
            for m in e.models {
                let (l, _) = split_tag(&m.language);
                if l.len() < 2 || !l.chars().all(|c| c.is_ascii_alphabetic()) {
                    return Err(format!(
                        "stt catalog: engine {} has invalid language {:?}",
                        e.engine, m.language
                    ));
                }
                cat.options.push(ModelOption {
                    engine: e.engine.clone(),
                    language: m.language,
                    language_name: m.language_name,
                    language_local_name: m.language_local_name,
                    model: m.model,
                    model_name: m.model_name,
                    is_default_model: m.is_default_model,
                    metadata: m.metadata,
                });
            }
            cat.engines.push(e.engine);
        }
        Ok(cat)
    }

    /// The catalog configured by `cfg` (the shipped one by default).
    pub fn load(cfg: &SttConfig) -> Result<Catalog, String> {
        match &cfg.catalog_path {
            Some(p) => Catalog::parse(
                &std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?,
            ),
            None => Catalog::parse(SHIPPED_CATALOG),
        }
    }

    /// Every engine, in catalog order.
    pub fn engines(&self) -> &[String] {
        &self.engines
    }

    /// The flag gating `engine`, if any.
    pub fn flag_of(&self, engine: &str) -> Option<&str> {
        self.flags.get(engine).map(String::as_str)
    }

    /// Engines visible to a caller whose flags evaluate by `flag_on`.
    pub fn visible_engines(&self, flag_on: impl Fn(&str) -> bool) -> BTreeSet<String> {
        self.engines
            .iter()
            .filter(|e| self.flag_of(e).is_none_or(&flag_on))
            .cloned()
            .collect()
    }

    /// Engines visible to `account`: its tenant's feature-flag rules evaluated for it.
    pub async fn visible_to_account(
        &self,
        store: &crate::store::Store,
        account: &crate::store::AccountRecord,
    ) -> crate::store::StoreResult<BTreeSet<String>> {
        let rules = store.flag_rules(&account.tenant_sid).await?;
        let on = crate::flags::evaluate_all(
            &rules,
            crate::flags::Subject {
                account_sid: &account.sid,
                country: &account.country,
                region: &account.region,
            },
        );
        Ok(self.visible_engines(|f| on.iter().any(|(n, v)| *n == f && *v)))
    }

    /// Options of `visible` engines matching every given filter, in catalog order.
    pub fn filter<'a>(
        &'a self,
        visible: &'a BTreeSet<String>,
        engine: Option<&'a str>,
        language: Option<&'a str>,
        model: Option<&'a str>,
    ) -> impl Iterator<Item = &'a ModelOption> + 'a {
        self.options.iter().filter(move |o| {
            visible.contains(&o.engine)
                && engine.is_none_or(|e| o.engine == e)
                && model.is_none_or(|m| o.model == m)
                && language.is_none_or(|l| language_matches(l, &o.language))
        })
    }

    /// Engines among `visible` whose catalog lists `language` (dictionary `engines`).
    pub fn engines_for_language(&self, visible: &BTreeSet<String>, language: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for o in self.filter(visible, None, Some(language), None) {
            if !out.contains(&o.engine) {
                out.push(o.engine.clone());
            }
        }
        out
    }

    /// Whether any engine (visible or not) lists `language`.
    pub fn knows_language(&self, language: &str) -> bool {
        self.options
            .iter()
            .any(|o| language_matches(language, &o.language))
    }

    /// The option an engine run uses for `language` and `model` (empty model: the
    /// engine's default for the language). None: the engine does not serve it.
    pub fn option_for(&self, engine: &str, language: &str, model: &str) -> Option<&ModelOption> {
        let mut candidates = self
            .options
            .iter()
            .filter(|o| o.engine == engine && language_matches(language, &o.language));
        if model.is_empty() {
            let all: Vec<&ModelOption> = candidates.collect();
            all.iter()
                .find(|o| o.is_default_model)
                .or(all.first())
                .copied()
        } else {
            candidates.find(|o| o.model == model)
        }
    }

    /// The default option of an engine (the first default in catalog order).
    pub fn default_option(&self, engine: &str) -> Option<&ModelOption> {
        let mut it = self.options.iter().filter(|o| o.engine == engine);
        let all: Vec<&ModelOption> = it.by_ref().collect();
        all.iter()
            .find(|o| o.is_default_model)
            .or(all.first())
            .copied()
    }
}

/// The catalog plus a node pool per configured engine (shared by the STT routes).
#[derive(Clone)]
pub struct SttEngines {
    pub catalog: Catalog,
    pools: HashMap<String, SttPool>,
}

impl std::fmt::Debug for SttEngines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SttEngines")
            .field("catalog", &self.catalog)
            .field("pools", &self.pools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SttEngines {
    /// Loads the catalog and builds the pools; an engine configured with nodes but absent
    /// from the catalog is a configuration error.
    pub fn new(cfg: &SttConfig) -> Result<SttEngines, String> {
        let catalog = Catalog::load(cfg)?;
        let mut pools = HashMap::new();
        for (engine, nodes) in &cfg.engines {
            if !catalog.engines().contains(engine) {
                return Err(format!(
                    "stt.engines.{engine}: no such engine in the recognition catalog"
                ));
            }
            pools.insert(engine.clone(), SttPool::new(nodes.clone()));
        }
        Ok(SttEngines { catalog, pools })
    }

    /// The node pool of an engine (None: no node configured for it).
    pub fn pool(&self, engine: &str) -> Option<&SttPool> {
        self.pools.get(engine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_catalog_parses_and_matches_languages() {
        let c = Catalog::parse(SHIPPED_CATALOG).unwrap();
        assert!(c.engines().iter().any(|e| e == "whisper"));
        assert_eq!(c.flag_of("deepgram"), Some("global_stt"));
        assert!(language_matches("en", "en-US"));
        assert!(language_matches("en-US", "en"));
        assert!(language_matches("en-us", "en-US"));
        assert!(!language_matches("en-GB", "en-US"));
        assert!(!language_matches("de", "en"));
        assert!(c.knows_language("de-DE") && !c.knows_language("xx-YY"));
    }

    #[test]
    fn bad_catalogs_are_refused() {
        assert!(Catalog::parse("{}").is_err());
        assert!(
            Catalog::parse(r#"{"engines":[{"engine":"a","flag":"nope","models":[]}]}"#)
                .unwrap_err()
                .contains("undeclared flag")
        );
        assert!(
            Catalog::parse(r#"{"engines":[{"engine":"a","flag":null,"models":[]},{"engine":"a","flag":null,"models":[]}]}"#)
                .is_err()
        );
        let cfg = SttConfig {
            engines: [("nope".to_string(), vec![])].into(),
            ..Default::default()
        };
        assert!(SttEngines::new(&cfg).is_err());
    }
}
