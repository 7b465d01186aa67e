//! Sentence splitting for synthesis: the one place where text is cut into the pieces that
//! are synthesised one at a time (a long prompt, a language model's reply as it streams).
//!
//! A sentence ends at `.`, `!`, `?`, `…` (or `。！？`), with any closing quotes or brackets
//! after it, followed by white space and more text. A full stop does not end a sentence
//! after a known abbreviation ("Mr.", "e.g.", "etc.") or a single letter (an initial:
//! "J. Smith"), and no sentence ends where the next word starts in lower case ("\"Stop!\"
//! she said"); "3.5" has no space after the point and never splits.

/// Abbreviations (lower case, without their final point) after which a full stop does not
/// end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "eg", "ie", "no",
    "nr", "approx", "inc", "ltd", "co", "corp", "mt", "fig", "cf", "ca", "dept", "est", "al",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "tel",
    "ext", "min", "max", "z.b", "bzw", "usw", "ggf", "u.a", "d.h", "hr", "fr",
];

fn is_terminator(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…' | '。' | '！' | '？')
}

fn is_closer(c: char) -> bool {
    matches!(c, '"' | '\'' | '”' | '’' | ')' | ']' | '»' | '」')
}

/// Where a sentence ends in `text`: the byte index just after its terminator (and closers),
/// and where the next one starts. `None` when no boundary is certain yet: a boundary needs
/// the next sentence's first character (text that may still grow, a stream, waits for it).
fn next_boundary(text: &str, from: usize) -> Option<(usize, usize)> {
    let chars: Vec<(usize, char)> = text[from..]
        .char_indices()
        .map(|(i, c)| (i + from, c))
        .collect();
    let mut i = 0;
    while i < chars.len() {
        let (_, c) = chars[i];
        if !is_terminator(c) {
            i += 1;
            continue;
        }
        let term_at = i;
        let mut j = i + 1;
        while j < chars.len() && (is_terminator(chars[j].1) || is_closer(chars[j].1)) {
            j += 1;
        }
        // White space, then the next sentence's first character.
        let mut k = j;
        while k < chars.len() && chars[k].1.is_whitespace() {
            k += 1;
        }
        if k == j || k >= chars.len() {
            // No space after it ("3.5", "e.g"), or nothing known after it yet.
            i = j.max(i + 1);
            continue;
        }
        // The next word in lower case goes on the same sentence ("\"Stop!\" she said").
        let single_point = chars[term_at..j]
            .iter()
            .all(|(_, c)| *c == '.' || is_closer(*c))
            && chars[term_at..j].iter().filter(|(_, c)| *c == '.').count() == 1;
        if chars[k].1.is_lowercase()
            || (single_point && abbreviation_before(text, chars[term_at].0))
        {
            i = j;
            continue;
        }
        let end = chars.get(j).map_or(text.len(), |(b, _)| *b);
        return Some((end, chars[k].0));
    }
    None
}

/// Whether the word ending at byte `dot` (the index of its full stop) is an abbreviation
/// or an initial.
fn abbreviation_before(text: &str, dot: usize) -> bool {
    let before = &text[..dot];
    let word_start = before
        .rfind(|c: char| c.is_whitespace() || matches!(c, '(' | '"' | '\'' | '“' | '‘'))
        .map_or(0, |i| {
            i + before[i..].chars().next().map_or(1, char::len_utf8)
        });
    let word = before[word_start..].to_lowercase();
    if word.is_empty() {
        return false;
    }
    let letters = word.chars().filter(|c| c.is_alphabetic()).count();
    if letters == 1 && word.chars().all(|c| c.is_alphabetic()) {
        return true; // an initial
    }
    ABBREVIATIONS.contains(&word.as_str())
}

/// The sentences of a whole text, trimmed, empty ones left out.
pub fn split_sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while let Some((end, next)) = next_boundary(text, start) {
        let s = text[start..end].trim();
        if !s.is_empty() {
            out.push(s);
        }
        start = next;
    }
    let rest = text[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// Text arriving in pieces (a streamed reply), handed back one complete sentence at a time.
#[derive(Debug, Default)]
pub struct SentenceBuffer {
    pending: String,
}

impl SentenceBuffer {
    /// Adds a piece; returns the sentences it completed.
    pub fn push(&mut self, piece: &str) -> Vec<String> {
        self.pending.push_str(piece);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some((end, next)) = next_boundary(&self.pending, start) {
            let s = self.pending[start..end].trim();
            if !s.is_empty() {
                out.push(s.to_string());
            }
            start = next;
        }
        self.pending.drain(..start);
        out
    }

    /// The text after the last complete sentence (the end of the text: its last sentence).
    pub fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.pending);
        let rest = rest.trim();
        (!rest.is_empty()).then(|| rest.to_string())
    }

    /// The text received so far as a sentence, when it ends like one (a terminator not
    /// after an abbreviation or an initial) although the next sentence's first character,
    /// which would make it certain, has not arrived: for a stream that pauses there.
    pub fn take_ended(&mut self) -> Option<String> {
        let text = self.pending.trim();
        if text.is_empty() {
            return None;
        }
        let probe = format!("{text} A");
        let (end, _) = next_boundary(&probe, 0)?;
        if end != text.len() {
            return None;
        }
        let s = text.to_string();
        self.pending.clear();
        Some(s)
    }

    /// The text received after the last complete sentence.
    pub fn pending(&self) -> &str {
        &self.pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_sentence_ends() {
        assert_eq!(
            split_sentences("Hello there. How are you? Fine!  Good…  Bye"),
            vec!["Hello there.", "How are you?", "Fine!", "Good…", "Bye"]
        );
        assert_eq!(split_sentences("One sentence."), vec!["One sentence."]);
        assert_eq!(split_sentences("  "), Vec::<&str>::new());
        assert_eq!(
            split_sentences("\"Stop!\" she said. Then she left."),
            vec!["\"Stop!\" she said.", "Then she left."]
        );
        assert_eq!(
            split_sentences("Really?! Yes... Indeed."),
            vec!["Really?!", "Yes...", "Indeed."]
        );
    }

    #[test]
    fn abbreviations_initials_and_numbers_do_not_split() {
        assert_eq!(
            split_sentences("Mr. Smith paid 3.5 euros, e.g. for tea. Dr. Who came."),
            vec!["Mr. Smith paid 3.5 euros, e.g. for tea.", "Dr. Who came."]
        );
        assert_eq!(
            split_sentences("J. R. R. Tolkien wrote it. It is long."),
            vec!["J. R. R. Tolkien wrote it.", "It is long."]
        );
        assert_eq!(
            split_sentences("Fruit, vegetables, etc. are sold. Version 2.0.1 is out."),
            vec!["Fruit, vegetables, etc. are sold.", "Version 2.0.1 is out."]
        );
        assert_eq!(
            split_sentences("It costs 10 p.m. sharp. ok"),
            vec!["It costs 10 p.m. sharp. ok"]
        );
        assert_eq!(
            split_sentences("Call 030.123.45 now. Thanks."),
            vec!["Call 030.123.45 now.", "Thanks."]
        );
    }

    #[test]
    fn a_stream_yields_each_sentence_once_it_is_complete() {
        let mut b = SentenceBuffer::default();
        assert!(b.push("Hello Mr").is_empty());
        assert!(
            b.push(". Smith. ").is_empty(),
            "the next sentence is not known yet"
        );
        assert_eq!(b.push("Your balance is 3"), vec!["Hello Mr. Smith."]);
        assert!(b.push(".5 euros").is_empty());
        assert!(b.push(". ").is_empty());
        assert_eq!(b.push("Anything else?"), vec!["Your balance is 3.5 euros."]);
        assert_eq!(b.pending(), "Anything else?");
        assert_eq!(b.finish().as_deref(), Some("Anything else?"));
        assert_eq!(b.finish(), None);
    }

    #[test]
    fn a_paused_stream_gives_the_sentence_it_ends_with() {
        let mut b = SentenceBuffer::default();
        assert!(b.push("Sorry, that key is not on the menu. ").is_empty());
        assert_eq!(
            b.take_ended().as_deref(),
            Some("Sorry, that key is not on the menu.")
        );
        assert_eq!(b.pending(), "");
        for unfinished in ["Please press", "Ask Mr.", "Call J.", "It is 3.", "Why"] {
            let mut b = SentenceBuffer::default();
            b.push(unfinished);
            let expect = unfinished.ends_with("3.").then(|| unfinished.to_string());
            assert_eq!(b.take_ended(), expect, "{unfinished:?}");
        }
        let mut b = SentenceBuffer::default();
        b.push("Done? ");
        assert_eq!(b.take_ended().as_deref(), Some("Done?"));
        assert_eq!(b.take_ended(), None);
    }

    #[test]
    fn a_stream_splits_like_the_whole_text() {
        let text = "Mr. Jones, e.g. the owner, said: \"It is 3.5 m long!\" Then? \
                    We left at 5 p.m. and went home. The end.";
        for step in 1..7 {
            let mut b = SentenceBuffer::default();
            let chars: Vec<char> = text.chars().collect();
            let mut got = Vec::new();
            for piece in chars.chunks(step) {
                got.extend(b.push(&piece.iter().collect::<String>()));
            }
            got.extend(b.finish());
            assert_eq!(got, split_sentences(text), "pieces of {step}");
        }
    }
}
