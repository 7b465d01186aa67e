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
//! line feed and carriage return and the two separators, and refuses the rest. Every v1 and
//! legacy route checks such fields through [`refusal`] (the v1 name rule,
//! `api::v1::NameRule`, calls it), so the rule lives here alone.

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
