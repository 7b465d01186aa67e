//! CSV as the legacy family reads (contact import) and writes (reports) it: RFC 4180 —
//! comma-separated fields, fields quoted with `"` when they hold a comma, a quote or a
//! line break (a quote inside doubled), lines ended by CRLF or LF.

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

/// A CSV text being written, one record per line (CRLF).
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
            let f = f.as_ref();
            if f.contains([',', '"', '\r', '\n']) {
                self.out.push('"');
                self.out.push_str(&f.replace('"', "\"\""));
                self.out.push('"');
            } else {
                self.out.push_str(f);
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
}
