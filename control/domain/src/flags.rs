//! Feature flags: the closed set of declared flags, the country and region code sets
//! rules may name, and the evaluation of a tenant's rules for one account.

use crate::store::FlagRuleRecord;

/// The declared flags. The set is closed: adding one is an interface change (the
/// profile's `feature_flags` object always carries every one of them).
pub const DECLARED_FLAGS: &[&str] = &["global_llm", "global_stt", "global_tts"];

pub fn is_declared(name: &str) -> bool {
    DECLARED_FLAGS.contains(&name)
}

/// Region codes an account can be placed in and a rule can name.
pub const REGIONS: &[(&str, &str)] = &[
    ("af", "Africa"),
    ("ap", "Asia-Pacific"),
    ("eu", "Europe"),
    ("me", "Middle East"),
    ("na", "North America"),
    ("sa", "South and Central America, Caribbean"),
];

pub fn is_region(code: &str) -> bool {
    REGIONS.iter().any(|(c, _)| *c == code)
}

/// ISO 3166-1 alpha-2 codes (all 249 officially assigned), lowercase.
pub const COUNTRIES: &[&str] = &[
    "ad", "ae", "af", "ag", "ai", "al", "am", "ao", "aq", "ar", "as", "at", "au", "aw", "ax", "az",
    "ba", "bb", "bd", "be", "bf", "bg", "bh", "bi", "bj", "bl", "bm", "bn", "bo", "bq", "br", "bs",
    "bt", "bv", "bw", "by", "bz", "ca", "cc", "cd", "cf", "cg", "ch", "ci", "ck", "cl", "cm", "cn",
    "co", "cr", "cu", "cv", "cw", "cx", "cy", "cz", "de", "dj", "dk", "dm", "do", "dz", "ec", "ee",
    "eg", "eh", "er", "es", "et", "fi", "fj", "fk", "fm", "fo", "fr", "ga", "gb", "gd", "ge", "gf",
    "gg", "gh", "gi", "gl", "gm", "gn", "gp", "gq", "gr", "gs", "gt", "gu", "gw", "gy", "hk", "hm",
    "hn", "hr", "ht", "hu", "id", "ie", "il", "im", "in", "io", "iq", "ir", "is", "it", "je", "jm",
    "jo", "jp", "ke", "kg", "kh", "ki", "km", "kn", "kp", "kr", "kw", "ky", "kz", "la", "lb", "lc",
    "li", "lk", "lr", "ls", "lt", "lu", "lv", "ly", "ma", "mc", "md", "me", "mf", "mg", "mh", "mk",
    "ml", "mm", "mn", "mo", "mp", "mq", "mr", "ms", "mt", "mu", "mv", "mw", "mx", "my", "mz", "na",
    "nc", "ne", "nf", "ng", "ni", "nl", "no", "np", "nr", "nu", "nz", "om", "pa", "pe", "pf", "pg",
    "ph", "pk", "pl", "pm", "pn", "pr", "ps", "pt", "pw", "py", "qa", "re", "ro", "rs", "ru", "rw",
    "sa", "sb", "sc", "sd", "se", "sg", "sh", "si", "sj", "sk", "sl", "sm", "sn", "so", "sr", "ss",
    "st", "sv", "sx", "sy", "sz", "tc", "td", "tf", "tg", "th", "tj", "tk", "tl", "tm", "tn", "to",
    "tr", "tt", "tv", "tw", "tz", "ua", "ug", "um", "us", "uy", "uz", "va", "vc", "ve", "vg", "vi",
    "vn", "vu", "wf", "ws", "ye", "yt", "za", "zm", "zw",
];

/// Whether `code` is an assigned ISO 3166-1 alpha-2 code in lowercase.
pub fn is_country(code: &str) -> bool {
    COUNTRIES.binary_search(&code).is_ok()
}

/// The default rule of a declared flag no one has configured: disabled, no scope.
pub fn default_rule(tenant_sid: &str, name: &str) -> FlagRuleRecord {
    FlagRuleRecord {
        tenant_sid: tenant_sid.to_string(),
        name: name.to_string(),
        account_sids: vec![],
        countries: vec![],
        regions: vec![],
        enabled: false,
        invert: false,
    }
}

/// The facts about a caller a rule can match.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub account_sid: &'a str,
    pub country: &'a str,
    pub region: &'a str,
}

/// Evaluates one rule: off when disabled; on when it names no scope; otherwise a match
/// on any axis (account, country, region) enables (whitelist) or, with `invert`,
/// disables (blacklist).
pub fn evaluate(rule: &FlagRuleRecord, who: Subject<'_>) -> bool {
    if !rule.enabled {
        return false;
    }
    if rule.account_sids.is_empty() && rule.countries.is_empty() && rule.regions.is_empty() {
        return true;
    }
    let matched = rule.account_sids.iter().any(|a| a == who.account_sid)
        || (!who.country.is_empty() && rule.countries.iter().any(|c| c == who.country))
        || (!who.region.is_empty() && rule.regions.iter().any(|r| r == who.region));
    matched != rule.invert
}

/// Every declared flag evaluated for `who` against a tenant's stored rules.
pub fn evaluate_all(rules: &[FlagRuleRecord], who: Subject<'_>) -> Vec<(&'static str, bool)> {
    DECLARED_FLAGS
        .iter()
        .map(|name| {
            (
                *name,
                rules
                    .iter()
                    .find(|r| r.name == *name)
                    .is_some_and(|r| evaluate(r, who)),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(
        enabled: bool,
        invert: bool,
        accounts: &[&str],
        countries: &[&str],
        regions: &[&str],
    ) -> FlagRuleRecord {
        FlagRuleRecord {
            tenant_sid: "ten_x".into(),
            name: "global_llm".into(),
            account_sids: accounts.iter().map(|s| s.to_string()).collect(),
            countries: countries.iter().map(|s| s.to_string()).collect(),
            regions: regions.iter().map(|s| s.to_string()).collect(),
            enabled,
            invert,
        }
    }

    const A: Subject<'static> = Subject {
        account_sid: "acc_a",
        country: "de",
        region: "eu",
    };
    const B: Subject<'static> = Subject {
        account_sid: "acc_b",
        country: "us",
        region: "na",
    };

    #[test]
    fn master_switch_scope_and_invert() {
        assert!(!evaluate(&rule(false, false, &[], &[], &[]), A));
        assert!(!evaluate(&rule(false, true, &["acc_b"], &[], &[]), A));
        assert!(evaluate(&rule(true, false, &[], &[], &[]), A));
        assert!(
            evaluate(&rule(true, true, &[], &[], &[]), A),
            "no scope: on wherever enabled"
        );
        let wl = rule(true, false, &["acc_a"], &[], &[]);
        assert!(evaluate(&wl, A) && !evaluate(&wl, B));
        let bl = rule(true, true, &["acc_a"], &[], &[]);
        assert!(!evaluate(&bl, A) && evaluate(&bl, B));
        let by_country = rule(true, false, &[], &["us"], &[]);
        assert!(!evaluate(&by_country, A) && evaluate(&by_country, B));
        let by_region = rule(true, false, &[], &[], &["eu"]);
        assert!(evaluate(&by_region, A) && !evaluate(&by_region, B));
    }

    #[test]
    fn code_sets() {
        assert_eq!(COUNTRIES.len(), 249);
        assert!(
            COUNTRIES.windows(2).all(|w| w[0] < w[1]),
            "sorted for binary search"
        );
        assert!(is_country("de") && is_country("us") && !is_country("xx") && !is_country("DE"));
        assert!(is_region("eu") && !is_region("mars"));
        let all = evaluate_all(&[rule(true, false, &[], &[], &[])], A);
        assert_eq!(
            all,
            vec![
                ("global_llm", true),
                ("global_stt", false),
                ("global_tts", false)
            ]
        );
    }
}
