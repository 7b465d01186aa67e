//! CSV as the legacy family reads (contact import) and writes (reports) it: RFC 4180 —
//! comma-separated fields, fields quoted with `"` when they hold a comma, a quote or a
//! line break (a quote inside doubled), lines ended by CRLF or LF.
//!
//! Written cells, header cells included, are first passed through [`neutralise`]: a
//! spreadsheet opening the report must not run a cell as a formula (CSV injection).

use std::borrow::Cow;

/// A malformed CSV text: the 1-based line a record starts on and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CsvError {
    pub row: usize,
    pub message: String,
}

/// A record of a CSV text: the line it starts on (1-based) and its fields.
pub(super) type Record = (usize, Vec<String>);

/// Parses a CSV text into records; a leading UTF-8 byte-order mark is skipped and blank
/// lines are not records.
pub(super) fn parse(text: &str) -> Result<Vec<Record>, CsvError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut records = Vec::new();
    let mut fields: Vec<String> = Vec::new();
    let mut field = String::new();
    let mut line = 1;
    let mut start = 1;
    // Whether the current field was quoted (and its closing quote seen).
    let mut quoted = false;
    let mut in_quotes = false;
    let mut chars = text.chars().peekable();
    let end_record =
        |fields: &mut Vec<String>, field: &mut String, records: &mut Vec<Record>, start| {
            fields.push(std::mem::take(field));
            let blank = fields.len() == 1 && fields[0].is_empty();
            if !blank {
                records.push((start, std::mem::take(fields)));
            }
            fields.clear();
        };
    while let Some(c) = chars.next() {
        if in_quotes {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => {
                    in_quotes = false;
                    quoted = true;
                }
                '\n' => {
                    line += 1;
                    field.push('\n');
                }
                c => field.push(c),
            }
            continue;
        }
        match c {
            ',' => {
                fields.push(std::mem::take(&mut field));
                quoted = false;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' => {
                end_record(&mut fields, &mut field, &mut records, start);
                quoted = false;
                line += 1;
                start = line;
            }
            '"' if field.is_empty() && !quoted => in_quotes = true,
            c if quoted => {
                return Err(CsvError {
                    row: line,
                    message: format!("unexpected {c:?} after a closing quote"),
                });
            }
            c => field.push(c),
        }
    }
    if in_quotes {
        return Err(CsvError {
            row: start,
            message: "unterminated quoted field".into(),
        });
    }
    if !field.is_empty() || !fields.is_empty() || quoted {
        end_record(&mut fields, &mut field, &mut records, start);
    }
    Ok(records)
}

/// Whether `s` is a plain decimal number: an optional sign, digits with an optional
/// fraction (or a fraction alone), an optional exponent. Spreadsheets read such a cell as
/// that number, never as a formula.
fn is_plain_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if b.get(i) == Some(&b'.') {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// A cell as written to a report: one starting with `=`, `+`, `-`, `@`, a tab or a
/// carriage return gets a leading `'`, so a spreadsheet shows it as text instead of
/// evaluating it (OWASP's CSV injection advice). A plain number (`+4930123`, `-5`,
/// `1e3`; see [`is_plain_number`]) is left as it is: spreadsheets read it as a number,
/// and a phone number in E.164 keeps its `+`.
pub(super) fn neutralise(cell: &str) -> Cow<'_, str> {
    let risky = cell.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if risky && !is_plain_number(cell) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// A CSV text being written, one record per line (CRLF); every cell goes through
/// [`neutralise`], then is quoted when it needs to be.
#[derive(Debug, Default)]
pub(super) struct Writer {
    out: String,
}

impl Writer {
    pub fn record<I, S>(&mut self, fields: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for (i, f) in fields.into_iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            let f = neutralise(f.as_ref());
            if f.contains([',', '"', '\r', '\n']) {
                self.out.push('"');
                self.out.push_str(&f.replace('"', "\"\""));
                self.out.push('"');
            } else {
                self.out.push_str(&f);
            }
        }
        self.out.push_str("\r\n");
    }

    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(r: &[Record]) -> Vec<Vec<&str>> {
        r.iter()
            .map(|(_, f)| f.iter().map(String::as_str).collect())
            .collect()
    }

    #[test]
    fn parses_quotes_line_breaks_and_blank_lines() {
        let r =
            parse("\u{feff}phone,name\r\n+4911,\"Doe, \"\"J\"\"\"\n\n+4912,\"two\nlines\"\n+4913,")
                .unwrap();
        assert_eq!(
            fields(&r),
            [
                vec!["phone", "name"],
                vec!["+4911", "Doe, \"J\""],
                vec!["+4912", "two\nlines"],
                vec!["+4913", ""],
            ]
        );
        assert_eq!(r.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [1, 2, 4, 6]);
        assert_eq!(fields(&parse("a,\"\"").unwrap()), [vec!["a", ""]]);
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn refuses_malformed_quotes() {
        assert_eq!(
            parse("a\n\"b,c\n").unwrap_err(),
            CsvError {
                row: 2,
                message: "unterminated quoted field".into()
            }
        );
        assert_eq!(parse("a\n\"b\"x,c").unwrap_err().row, 2);
    }

    #[test]
    fn writes_what_it_reads() {
        let mut w = Writer::default();
        w.record(["a", "b,c", "say \"hi\"", "x\ny"]);
        w.record(["", "+4911"]);
        let text = w.finish();
        assert_eq!(text, "a,\"b,c\",\"say \"\"hi\"\"\",\"x\ny\"\r\n,+4911\r\n");
        assert_eq!(
            fields(&parse(&text).unwrap()),
            [vec!["a", "b,c", "say \"hi\"", "x\ny"], vec!["", "+4911"]]
        );
    }
    #[test]
    fn formula_cells_are_neutralised_and_numbers_kept() {
        for (cell, written) in [
            ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
            ("+SUM(A1)", "'+SUM(A1)"),
            ("-2+3", "'-2+3"),
            ("@cmd", "'@cmd"),
            ("\t=1", "'\t=1"),
            ("\r=1", "'\r=1"),
            ("-", "'-"),
            ("+", "'+"),
            ("+1-555-0100", "'+1-555-0100"),
            ("1e", "1e"),
            ("+4930123", "+4930123"),
            ("-5", "-5"),
            ("-0.25", "-0.25"),
            ("+1.5E+3", "+1.5E+3"),
            ("-.5", "-.5"),
            ("plain", "plain"),
            ("a=b", "a=b"),
            ("", ""),
        ] {
            assert_eq!(neutralise(cell), written, "{cell:?}");
        }
        for not_number in [
            "+.", "-e5", "+1e", "+1e+", "+1.2.3", "+0x10", "-inf", "+NaN",
        ] {
            assert!(!is_plain_number(not_number), "{not_number}");
        }
        // Header cells go through the same writer; a neutralised cell is still quoted.
        let mut w = Writer::default();
        w.record(["=cmd|' /C calc'!A0", "-1,2"]);
        assert_eq!(w.finish(), "'=cmd|' /C calc'!A0,\"'-1,2\"\r\n");
    }
}
