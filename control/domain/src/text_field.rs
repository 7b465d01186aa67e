//! The one character rule for text a client names or describes things with: names, labels,
//! emails, external ids, filenames (single-line fields) and descriptions (free text).
//!
//! Such text ends up in logs, CSV exports, report pages, SIP and HTTP headers and the
//! console, where some characters do harm without being visible:
//!
//! - control characters (Unicode category Cc: C0 U+0000–U+001F with NUL, DEL U+007F, C1
//!   U+0080–U+009F) corrupt logs and exports and cut strings in C libraries;
//! - bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) make
//!   text read differently than it is stored (`invoice\u{202E}fdp.exe` shows as
//!   `invoiceexe.pdf`);
//! - line and paragraph separators (U+2028, U+2029) break a single line into several.
//!
//! A single-line field refuses all of them. Free text ([`TextKind::Multiline`]) keeps tab,
//! line feed and carriage return and the two separators, and refuses the rest. Every use
//! case and every v1 and legacy route checks such fields through [`refusal`] ([`NameRule`]
//! and [`check_text`] call it), so the rule lives here alone.

use crate::usecases::{UseCaseError, UseCaseResult};

/// What a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    /// One line: a name, label, email, identifier or filename.
    Line,
    /// Free text over several lines: a description.
    Multiline,
}

/// Whether `c` may not appear in a field of `kind`.
pub fn is_refused(c: char, kind: TextKind) -> bool {
    let bidi_control = matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    match kind {
        TextKind::Line => c.is_control() || bidi_control || matches!(c, '\u{2028}' | '\u{2029}'),
        TextKind::Multiline => (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || bidi_control,
    }
}

/// The message refusing `value` for `field` (`"{field}: must not contain control
/// characters (found U+XXXX)"`, naming the first refused character), or `None` when every
/// character may appear in a field of `kind`.
pub fn refusal(field: &str, value: &str, kind: TextKind) -> Option<String> {
    value.chars().find(|&c| is_refused(c, kind)).map(|c| {
        format!(
            "{field}: must not contain control characters (found U+{:04X})",
            u32::from(c)
        )
    })
}

/// `reason` naming `field` when `v` holds a character [`refusal`] refuses in a field of
/// `kind` (the APIs answer 422).
pub fn check_text(field: &str, v: &str, kind: TextKind, reason: &'static str) -> UseCaseResult<()> {
    match refusal(field, v, kind) {
        Some(message) => Err(UseCaseError::invalid(reason, message)),
        None => Ok(()),
    }
}

/// How a name or label is checked. Every name field of the APIs goes through
/// [`NameRule::check`]: the value is trimmed, bounded and checked by the single-line rule
/// (no control character, NUL, tab, line break or escape, no bidirectional override, no
/// line separator), which keeps logs, exports and the headers and messages built from
/// names intact.
#[derive(Debug, Clone, Copy)]
pub struct NameRule {
    /// `Some(max)`: 1 to `max` characters after trimming; `None`: any length, empty included.
    pub max_chars: Option<usize>,
    /// The use-case code of a refusal (the convention of the resource's module).
    pub error: &'static str,
}

impl NameRule {
    /// Names of number pools, scenarios and SMS providers: 1 to 200 characters,
    /// `invalid_name`.
    pub const NAME: NameRule = NameRule {
        max_chars: Some(200),
        error: "invalid_name",
    };

    /// Tenant and account names: 1 to 200 characters, `invalid_field`.
    pub const ADMIN_NAME: NameRule = NameRule {
        max_chars: Some(200),
        error: "invalid_field",
    };

    /// User names and number names (free labels): optional, any length, `invalid_name`.
    pub const FREE_NAME: NameRule = NameRule {
        max_chars: None,
        error: "invalid_name",
    };

    /// API key labels: optional, any length, `invalid_field`.
    pub const KEY_LABEL: NameRule = NameRule {
        max_chars: None,
        error: "invalid_field",
    };

    /// The trimmed value, or `self.error` naming `field`.
    pub fn check(self, field: &str, v: &str) -> UseCaseResult<String> {
        let v = v.trim();
        if let Some(max) = self.max_chars
            && (v.is_empty() || v.chars().count() > max)
        {
            return Err(UseCaseError::invalid(
                self.error,
                format!("{field}: 1 to {max} characters"),
            ));
        }
        check_text(field, v, TextKind::Line, self.error)?;
        Ok(v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_line_fields_refuse_controls_bidi_and_separators() {
        for bad in [
            "nul\0",
            "tab\t",
            "lf\n",
            "cr\r",
            "esc\u{1b}",
            "del\u{7f}",
            "c1\u{80}",
            "c1\u{9f}",
            "lre\u{202A}",
            "rlo\u{202E}",
            "lri\u{2066}",
            "pdi\u{2069}",
            "ls\u{2028}",
            "ps\u{2029}",
        ] {
            assert!(refusal("name", bad, TextKind::Line).is_some(), "{bad:?}");
        }
        assert_eq!(
            refusal("email", "a\u{202E}b", TextKind::Line).as_deref(),
            Some("email: must not contain control characters (found U+202E)")
        );
        for good in [
            "Zoë Müller",
            "李雷",
            "שלום עולם",
            "مرحبا",
            "emoji 📞",
            "a\u{200F}b",
            "nbsp\u{a0}",
        ] {
            assert_eq!(refusal("name", good, TextKind::Line), None, "{good:?}");
        }
    }

    #[test]
    fn free_text_keeps_line_breaks_and_tabs() {
        assert_eq!(
            refusal(
                "description",
                "one\r\ntwo\tthree\u{2028}",
                TextKind::Multiline
            ),
            None
        );
        for bad in [
            "nul\0",
            "esc\u{1b}[2J",
            "del\u{7f}",
            "c1\u{85}",
            "rlo\u{202E}",
        ] {
            assert!(
                refusal("description", bad, TextKind::Multiline).is_some(),
                "{bad:?}"
            );
        }
    }
}
