//! The time zones a recipient's phone number may ring in, from its E.164 prefix.
//!
//! The table is libphonenumber's prefix → time zone map (`control/domain/data/`, Apache-2.0,
//! embedded unchanged; nothing is fetched at run time). A number maps to the zones of its
//! longest listed prefix: `+1 212 …` is `America/New_York` only, while `+1 208 2…` spans
//! `America/Boise` and `America/Los_Angeles`, and a bare country prefix such as `+7` lists
//! every zone of the country. Calling hours in the recipient's time
//! ([`crate::schedule::next_allowed_everywhere`]) hold only where every one of those zones
//! is inside the window, so a number whose area spans zones is never called early or late
//! in any of them.

use std::collections::HashMap;
use std::sync::LazyLock;

use chrono_tz::Tz;

const MAP: &str = include_str!("../data/phone_prefix_time_zones.txt");

/// The longest prefix in the table (E.164 numbers have at most 15 digits).
const MAX_PREFIX_DIGITS: usize = 15;

/// Prefix digits → zones, parsed once. Names the time zone database lacks are dropped
/// (a test checks that none are).
static TABLE: LazyLock<HashMap<&'static str, Box<[Tz]>>> = LazyLock::new(|| {
    MAP.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let (prefix, zones) = l.split_once('|')?;
            let zones: Box<[Tz]> = zones
                .split('&')
                .filter_map(|z| z.parse::<Tz>().ok())
                .collect();
            (!zones.is_empty()).then_some((prefix, zones))
        })
        .collect()
});

/// Why a number has no zones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZoneLookupError {
    /// Not `+` followed by 1 to 15 digits.
    #[error("{0:?} is not an E.164 number (`+` and 1 to 15 digits)")]
    NotE164(String),
    /// A well-formed number under no listed prefix (an unassigned country code).
    #[error("no time zone is known for numbers starting {0}")]
    Unknown(String),
}

/// The zones `number` (E.164, `+` and digits) may ring in, from its longest listed
/// prefix; never empty on success.
pub fn zones_for_number(number: &str) -> Result<&'static [Tz], ZoneLookupError> {
    let digits = number
        .strip_prefix('+')
        .filter(|d| !d.is_empty() && d.len() <= MAX_PREFIX_DIGITS)
        .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| ZoneLookupError::NotE164(number.to_string()))?;
    (1..=digits.len())
        .rev()
        .find_map(|n| TABLE.get(&digits[..n]))
        .map(|zones| &zones[..])
        .ok_or_else(|| ZoneLookupError::Unknown(format!("+{}", &digits[..digits.len().min(4)])))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(number: &str) -> Vec<&'static str> {
        zones_for_number(number)
            .unwrap()
            .iter()
            .map(|z| z.name())
            .collect()
    }

    #[test]
    fn every_zone_of_the_table_is_in_the_time_zone_database() {
        let mut missing = Vec::new();
        let mut rows = 0;
        for line in MAP.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let (prefix, zones) = line.split_once('|').expect("prefix|zones");
            assert!(prefix.bytes().all(|b| b.is_ascii_digit()), "{line}");
            assert!(prefix.len() <= MAX_PREFIX_DIGITS, "{line}");
            for z in zones.split('&') {
                if z.parse::<Tz>().is_err() {
                    missing.push(z.to_string());
                }
            }
            rows += 1;
        }
        assert!(missing.is_empty(), "unknown zones: {missing:?}");
        assert_eq!(TABLE.len(), rows, "one entry per row, none dropped");
        assert!(rows > 3000);
    }

    #[test]
    fn the_longest_prefix_wins() {
        assert_eq!(names("+12125550100"), ["America/New_York"]);
        assert_eq!(names("+13105550100"), ["America/Los_Angeles"]);
        assert_eq!(names("+4930123456"), ["Europe/Berlin"]);
        assert_eq!(names("+81312345678"), ["Asia/Tokyo"]);
        // A prefix of an area that spans two zones, and a longer one inside it that
        // names one of them.
        assert_eq!(
            names("+12082025555"),
            ["America/Boise", "America/Los_Angeles"]
        );
        assert_eq!(names("+12082015555"), ["America/Denver"]);
    }

    #[test]
    fn a_country_prefix_alone_lists_every_zone_of_the_country() {
        let ru = names("+7");
        assert!(ru.contains(&"Europe/Moscow") && ru.contains(&"Asia/Vladivostok"));
        let uk = names("+44");
        assert!(uk.contains(&"Europe/London"));
    }

    #[test]
    fn malformed_and_unassigned_numbers_are_errors() {
        for bad in [
            "",
            "+",
            "12125550100",
            "+1 212 555",
            "+1212555010012345",
            "+1a",
        ] {
            assert_eq!(
                zones_for_number(bad),
                Err(ZoneLookupError::NotE164(bad.to_string())),
                "{bad:?}"
            );
        }
        // Country code 999 is unassigned.
        assert!(matches!(
            zones_for_number("+9990000000"),
            Err(ZoneLookupError::Unknown(p)) if p == "+9990"
        ));
    }
}
