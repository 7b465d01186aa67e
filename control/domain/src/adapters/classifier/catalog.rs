//! The catalog of classifier algorithms a `model_id` can select. Ids are fixed UUIDs:
//! scenario content and stored versions name them, so they never change meaning.

use uuid::Uuid;

use super::model::Algorithm;

/// Where a catalog entry trains and predicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Trained by this process's worker pool; weights kept in the store.
    Local(Algorithm),
    /// Delegated to the remote classifier service configured as
    /// `AdaptersConfig::remote_classifier_url` (the "upstream" of the 502 responses).
    Remote,
}

/// One selectable algorithm.
#[derive(Debug, Clone, Copy)]
pub struct CatalogEntry {
    pub id: Uuid,
    pub name: &'static str,
    pub backend: Backend,
    pub description: &'static str,
}

/// Character n-gram TF-IDF + multinomial logistic regression (SGD). The default choice.
pub const TFIDF_LOGREG: Uuid = Uuid::from_u128(0xc1a5_51f1_0000_4000_8000_0000_0000_0001);
/// Character n-gram TF-IDF + nearest centroid (cosine similarity).
pub const TFIDF_CENTROID: Uuid = Uuid::from_u128(0xc1a5_51f1_0000_4000_8000_0000_0000_0002);
/// The remote classifier service.
pub const REMOTE: Uuid = Uuid::from_u128(0xc1a5_51f1_0000_4000_8000_0000_0000_00ff);

pub const CATALOG: &[CatalogEntry] = &[
    CatalogEntry {
        id: TFIDF_LOGREG,
        name: "char-ngram-tfidf-logreg",
        backend: Backend::Local(Algorithm::LogisticRegression),
        description: "Character 2-4-gram and word TF-IDF features, multinomial logistic regression trained by SGD",
    },
    CatalogEntry {
        id: TFIDF_CENTROID,
        name: "char-ngram-tfidf-centroid",
        backend: Backend::Local(Algorithm::NearestCentroid),
        description: "Character 2-4-gram and word TF-IDF features, nearest centroid by cosine similarity",
    },
    CatalogEntry {
        id: REMOTE,
        name: "remote",
        backend: Backend::Remote,
        description: "Trained and served by the configured remote classifier service",
    },
];

pub fn lookup(id: &Uuid) -> Option<&'static CatalogEntry> {
    CATALOG.iter().find(|e| e.id == *id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_documented() {
        let doc = include_str!("../../../../../docs/adapters.md");
        for (i, e) in CATALOG.iter().enumerate() {
            assert!(CATALOG[i + 1..].iter().all(|o| o.id != e.id));
            assert!(
                doc.contains(&e.id.to_string()),
                "docs/adapters.md lacks {}",
                e.id
            );
        }
        assert_eq!(
            TFIDF_LOGREG.to_string(),
            "c1a551f1-0000-4000-8000-000000000001"
        );
    }
}
