//! Condition operators of `condition_group`.
//!
//! Element operators compare the variable's value (left) with the rendered `value` (right).
//! Ordering operators and `equal`/`not_equal` compare numerically when both sides parse as
//! numbers (after trimming), otherwise as strings (ordering by Unicode code points).
//! `contains`/`not_contains` are case-sensitive substring tests; `regex` matches `value` as a
//! regular expression anywhere in the left side; `empty`/`not_empty` ignore `value` and test
//! the trimmed left side. An invalid regex never matches (validation reports it as SCN119).

use std::cmp::Ordering;

/// An element operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementOp {
    Equal,
    NotEqual,
    Greater,
    Less,
    GreaterOrEqual,
    LessOrEqual,
    Contains,
    NotContains,
    Regex,
    Empty,
    NotEmpty,
}

impl ElementOp {
    /// Every operator name accepted in `element_operator`.
    pub const NAMES: &'static [&'static str] = &[
        "equal",
        "not_equal",
        "greater",
        "less",
        "greater_or_equal",
        "less_or_equal",
        "contains",
        "not_contains",
        "regex",
        "empty",
        "not_empty",
    ];

    /// Parses an operator name.
    pub fn parse(s: &str) -> Option<ElementOp> {
        Some(match s {
            "equal" => ElementOp::Equal,
            "not_equal" => ElementOp::NotEqual,
            "greater" => ElementOp::Greater,
            "less" => ElementOp::Less,
            "greater_or_equal" => ElementOp::GreaterOrEqual,
            "less_or_equal" => ElementOp::LessOrEqual,
            "contains" => ElementOp::Contains,
            "not_contains" => ElementOp::NotContains,
            "regex" => ElementOp::Regex,
            "empty" => ElementOp::Empty,
            "not_empty" => ElementOp::NotEmpty,
            _ => return None,
        })
    }
}

/// How the elements of a condition combine: `and` (default when empty) or `or`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    And,
    Or,
}

impl Combine {
    /// Parses `condition_operator` ("" means `and`).
    pub fn parse(s: &str) -> Option<Combine> {
        match s {
            "" | "and" => Some(Combine::And),
            "or" => Some(Combine::Or),
            _ => None,
        }
    }
}

fn compare(left: &str, right: &str) -> Ordering {
    match (left.trim().parse::<f64>(), right.trim().parse::<f64>()) {
        (Ok(a), Ok(b)) if !a.is_nan() && !b.is_nan() => {
            a.partial_cmp(&b).unwrap_or(Ordering::Equal)
        }
        _ => left.cmp(right),
    }
}

/// Evaluates one element.
pub fn evaluate(op: ElementOp, left: &str, right: &str) -> bool {
    match op {
        ElementOp::Equal => compare(left, right) == Ordering::Equal,
        ElementOp::NotEqual => compare(left, right) != Ordering::Equal,
        ElementOp::Greater => compare(left, right) == Ordering::Greater,
        ElementOp::Less => compare(left, right) == Ordering::Less,
        ElementOp::GreaterOrEqual => compare(left, right) != Ordering::Less,
        ElementOp::LessOrEqual => compare(left, right) != Ordering::Greater,
        ElementOp::Contains => left.contains(right),
        ElementOp::NotContains => !left.contains(right),
        ElementOp::Regex => regex::Regex::new(right)
            .map(|r| r.is_match(left))
            .unwrap_or(false),
        ElementOp::Empty => left.trim().is_empty(),
        ElementOp::NotEmpty => !left.trim().is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ElementOp::*;

    #[test]
    fn numeric_when_both_sides_are_numbers() {
        assert!(evaluate(Equal, "10", "10.0"));
        assert!(evaluate(Greater, "10", "9"));
        assert!(!evaluate(Greater, "10", "9a"), "string compare: '1' < '9'");
        assert!(evaluate(Less, " 2 ", "10"));
        assert!(evaluate(GreaterOrEqual, "3", "3"));
        assert!(evaluate(LessOrEqual, "-1.5", "-1"));
        assert!(evaluate(NotEqual, "abc", "abd"));
        assert!(evaluate(Less, "abc", "abd"));
        assert!(!evaluate(Equal, "Yes", "yes"));
    }

    #[test]
    fn text_operators() {
        assert!(evaluate(Contains, "hello world", "lo w"));
        assert!(evaluate(NotContains, "hello", "bye"));
        assert!(evaluate(Regex, "order 1234", r"^order \d{4}$"));
        assert!(!evaluate(Regex, "order 12", r"^order \d{4}$"));
        assert!(
            !evaluate(Regex, "anything", "("),
            "invalid regex never matches"
        );
        assert!(evaluate(Empty, "  ", "ignored"));
        assert!(evaluate(NotEmpty, "x", ""));
    }

    #[test]
    fn names_parse() {
        for n in ElementOp::NAMES {
            assert!(ElementOp::parse(n).is_some(), "{n}");
        }
        assert_eq!(ElementOp::parse("bigger"), None);
        assert_eq!(Combine::parse(""), Some(Combine::And));
        assert_eq!(Combine::parse("or"), Some(Combine::Or));
        assert_eq!(Combine::parse("xor"), None);
    }
}
