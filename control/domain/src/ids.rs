//! Identifiers: strings with a type prefix and a time-ordered random body
//! (`ten_0193…`), so a sid says what it names and sorts by creation.

/// Prefixes in use. Later resource work adds its own here (spec-mandated: `aud_`, `dic_`).
pub mod prefix {
    pub const TENANT: &str = "ten";
    pub const ACCOUNT: &str = "acc";
    pub const USER: &str = "usr";
    pub const API_KEY: &str = "key";
    pub const SUPERUSER_TOKEN: &str = "sut";
    pub const TRUNK: &str = "trk";
    pub const AUDIO: &str = "aud";
    pub const DICTIONARY: &str = "dic";
    pub const NUMBER: &str = "num";
    pub const NUMBER_POOL: &str = "npl";
    pub const SMS_PROVIDER: &str = "smp";
    pub const AGENT: &str = "agt";
    pub const SCENARIO: &str = "scn";
    pub const SCENARIO_VERSION: &str = "scv";
    pub const LEGACY_CONTACT: &str = "cnt";
    pub const LEGACY_ATTEMPT: &str = "att";
    /// A dispatch batch: the communications dispatched together (docs/communications.md).
    pub const BATCH: &str = "bat";
    /// A communication strategy (docs/strategies.md).
    pub const STRATEGY: &str = "stg";
}

/// A new sid `<prefix>_<32 hex digits of a UUIDv7>`.
pub fn new_sid(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

/// Whether `sid` carries `prefix` (cheap plausibility check before a lookup).
pub fn has_prefix(sid: &str, prefix: &str) -> bool {
    sid.len() > prefix.len() + 1 && sid.starts_with(prefix) && sid.as_bytes()[prefix.len()] == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sids_carry_prefix_and_sort_by_creation() {
        let a = new_sid(prefix::TENANT);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_sid(prefix::TENANT);
        assert!(has_prefix(&a, "ten"));
        assert!(!has_prefix(&a, "acc"));
        assert_eq!(a.len(), 4 + 32);
        assert!(a < b);
    }
}
