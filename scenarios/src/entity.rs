//! Entities read from what the caller said (docs/bricks.md, "question", step 3): `number`,
//! `digits`, `text`, `email`, and `date`/`time` relative to the call's now in the
//! question's timezone.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Days, Duration, NaiveDate, Timelike, Weekday};
use chrono_tz::Tz;
use regex::Regex;

use crate::interpreter::normalize;

/// The entity types a question's answers (and the question itself) may name.
pub const KINDS: &[&str] = &["number", "digits", "text", "email", "date", "time"];

static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"-?\d+(?:[.,]\d+)?").expect("static regex"));
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}").expect("static regex")
});
static ISO_DATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b").expect("static regex"));
/// `15:30`, `3:30 pm`, `3 pm`, `3 p.m.`, `7 o'clock`.
static CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(\d{1,2})(?::(\d{2})|\s*o'?clock)?\s*(a\.?\s?m\.?|p\.?\s?m\.?)?(?:\s|$|[^\w])",
    )
    .expect("static regex")
});

const UNITS: &[&str] = &[
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: &[&str] = &[
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];
const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const WEEKDAYS: &[(&str, Weekday)] = &[
    ("monday", Weekday::Mon),
    ("tuesday", Weekday::Tue),
    ("wednesday", Weekday::Wed),
    ("thursday", Weekday::Thu),
    ("friday", Weekday::Fri),
    ("saturday", Weekday::Sat),
    ("sunday", Weekday::Sun),
];

/// Extracts an entity of `kind` from a transcript, `now` being the call's now in the
/// question's timezone: `number` (the first number, in digits or English words: "forty
/// two" is 42), `digits` (every digit, concatenated), `text` (the whole transcript),
/// `email`, `date` (`YYYY-MM-DD`) and `time` (`HH:MM`). None when there is none.
pub fn extract(kind: &str, transcript: &str, now: DateTime<Tz>) -> Option<String> {
    match kind {
        "number" => NUMBER
            .find(transcript)
            .map(|m| m.as_str().replace(',', "."))
            .or_else(|| spoken_number(&normalize(transcript)).map(|n| n.to_string())),
        "digits" => {
            let d: String = transcript.chars().filter(char::is_ascii_digit).collect();
            (!d.is_empty()).then_some(d)
        }
        "text" => (!transcript.trim().is_empty()).then(|| transcript.trim().to_string()),
        "email" => EMAIL.find(transcript).map(|m| m.as_str().to_string()),
        "date" => date(transcript, now).map(|d| d.format("%Y-%m-%d").to_string()),
        "time" => time(transcript, now).map(|(h, m)| format!("{h:02}:{m:02}")),
        _ => None,
    }
}

/// The value of a word for a number below 100, if it is one.
fn small(w: &str) -> Option<u64> {
    UNITS
        .iter()
        .position(|u| *u == w)
        .or_else(|| {
            TENS.iter()
                .position(|t| !t.is_empty() && *t == w)
                .map(|i| i * 10)
        })
        .map(|n| n as u64)
}

/// The first number spoken in words in normalised text: "forty two" 42, "one hundred and
/// five" 105, "two thousand twenty six" 2026.
fn spoken_number(norm: &str) -> Option<u64> {
    let words: Vec<&str> = norm.split(' ').collect();
    let start = words.iter().position(|w| small(w).is_some())?;
    let (mut total, mut current) = (0u64, 0u64);
    let mut last_small: Option<u64> = None;
    for w in &words[start..] {
        match *w {
            "hundred" => current = current.max(1).saturating_mul(100),
            "thousand" | "million" => {
                let scale = if *w == "thousand" { 1_000 } else { 1_000_000 };
                total = total.saturating_add(current.max(1).saturating_mul(scale));
                current = 0;
            }
            "and" => continue,
            w => match small(w) {
                // "forty two": a unit after a tens word adds; two units in a row end it.
                Some(n) if last_small.is_none_or(|l| l >= 20 && l % 10 == 0 && n < 10) => {
                    current += n;
                }
                _ => break,
            },
        }
        last_small = small(w);
    }
    Some(total + current)
}

/// A day of the month spoken as digits ("1", "1st", "21st").
fn day_of_month(w: &str) -> Option<u32> {
    let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let rest = &w[digits.len()..];
    if digits.is_empty() || !["", "st", "nd", "rd", "th"].contains(&rest) {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

/// A date said relative to `now`'s day: an ISO date, today/tomorrow/yesterday/the day
/// after tomorrow, "in N days/weeks", a month and day with or without the year (the next
/// such day from today on when the year is not said), a weekday (the coming one, today
/// included; "next friday" excludes today).
fn date(transcript: &str, now: DateTime<Tz>) -> Option<NaiveDate> {
    let today = now.date_naive();
    if let Some(c) = ISO_DATE.captures(transcript) {
        let n = |i: usize| c[i].parse::<u32>().ok();
        return NaiveDate::from_ymd_opt(c[1].parse().ok()?, n(2)?, n(3)?);
    }
    let norm = normalize(transcript);
    let padded = format!(" {norm} ");
    let has = |p: &str| padded.contains(&format!(" {p} "));
    if has("day after tomorrow") {
        return today.checked_add_days(Days::new(2));
    }
    if has("today") {
        return Some(today);
    }
    if has("tomorrow") {
        return today.checked_add_days(Days::new(1));
    }
    if has("yesterday") {
        return today.checked_sub_days(Days::new(1));
    }
    let words: Vec<&str> = norm.split(' ').collect();
    for (i, w) in words.iter().enumerate() {
        // "in 3 days", "in three weeks"
        if *w == "in" && i + 2 < words.len() {
            let n = words[i + 1]
                .parse::<u64>()
                .ok()
                .or_else(|| spoken_number(words[i + 1]));
            let per = match words[i + 2] {
                "day" | "days" => Some(1),
                "week" | "weeks" => Some(7),
                _ => None,
            };
            if let (Some(n), Some(per)) = (n, per) {
                return today.checked_add_days(Days::new(n.saturating_mul(per)));
            }
        }
        if let Some(m) = MONTHS.iter().position(|m| m == w) {
            let month = m as u32 + 1;
            // "december 1st [2026]" or "1st [of] december [2026]"
            let after = words.get(i + 1).and_then(|w| day_of_month(w));
            let before = i.checked_sub(1).and_then(|j| {
                day_of_month(words[j]).or_else(|| {
                    (words[j] == "of")
                        .then(|| j.checked_sub(1).and_then(|k| day_of_month(words[k])))
                        .flatten()
                })
            });
            let Some(day) = after.or(before) else {
                continue;
            };
            let year_at = if after.is_some() { i + 2 } else { i + 1 };
            let year = words
                .get(year_at)
                .and_then(|y| y.parse::<i32>().ok())
                .filter(|y| (1000..=9999).contains(y));
            return match year {
                Some(y) => NaiveDate::from_ymd_opt(y, month, day),
                None => NaiveDate::from_ymd_opt(today.year(), month, day)
                    .filter(|d| *d >= today)
                    .or_else(|| NaiveDate::from_ymd_opt(today.year() + 1, month, day)),
            };
        }
        if let Some((_, wd)) = WEEKDAYS.iter().find(|(name, _)| name == w) {
            let next = i > 0 && words[i - 1] == "next";
            let ahead =
                (7 + wd.num_days_from_monday() - today.weekday().num_days_from_monday()) % 7;
            let ahead = if ahead == 0 && next { 7 } else { ahead };
            return today.checked_add_days(Days::new(u64::from(ahead)));
        }
    }
    None
}

/// A time of day: `15:30`, `3:30 pm`, `3 pm`, `7 o'clock`, noon/midday, midnight, "now",
/// "in N minutes/hours" (from `now`).
fn time(transcript: &str, now: DateTime<Tz>) -> Option<(u32, u32)> {
    for c in CLOCK.captures_iter(transcript) {
        let whole = c.get(0).map_or("", |m| m.as_str()).to_ascii_lowercase();
        let (Some(h), minute, meridiem) = (
            c[1].parse::<u32>().ok(),
            c.get(2).and_then(|m| m.as_str().parse::<u32>().ok()),
            c.get(3).map(|m| m.as_str().to_ascii_lowercase()),
        ) else {
            continue;
        };
        // A bare number is not a time: it needs minutes, am/pm or o'clock.
        if minute.is_none() && meridiem.is_none() && !whole.contains("clock") {
            continue;
        }
        let h = match meridiem.as_deref().map(|m| m.starts_with('p')) {
            Some(true) if h < 12 => h + 12,
            Some(false) if h == 12 => 0,
            _ => h,
        };
        let m = minute.unwrap_or(0);
        if h < 24 && m < 60 {
            return Some((h, m));
        }
    }
    let norm = normalize(transcript);
    let padded = format!(" {norm} ");
    let has = |p: &str| padded.contains(&format!(" {p} "));
    if has("noon") || has("midday") {
        return Some((12, 0));
    }
    if has("midnight") {
        return Some((0, 0));
    }
    let words: Vec<&str> = norm.split(' ').collect();
    for (i, w) in words.iter().enumerate() {
        if *w == "in" && i + 2 < words.len() {
            let n = words[i + 1]
                .parse::<i64>()
                .ok()
                .or_else(|| spoken_number(words[i + 1]).map(|n| n as i64));
            let unit = match words[i + 2] {
                "minute" | "minutes" => Some(Duration::minutes(1)),
                "hour" | "hours" => Some(Duration::hours(1)),
                _ => None,
            };
            if let (Some(n), Some(unit)) = (n, unit) {
                let at = now + unit * n.clamp(0, 10_000) as i32;
                return Some((at.hour(), at.minute()));
            }
        }
    }
    has("now").then(|| (now.hour(), now.minute()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// Friday 2026-11-27 23:30 UTC: already Saturday the 28th in Tokyo.
    fn now(tz: Tz) -> DateTime<Tz> {
        chrono::Utc
            .with_ymd_and_hms(2026, 11, 27, 23, 30, 0)
            .unwrap()
            .with_timezone(&tz)
    }

    #[test]
    fn numbers_in_digits_or_words() {
        let n = now(chrono_tz::UTC);
        let number = |t| extract("number", t, n);
        assert_eq!(number("it is 42 euros").as_deref(), Some("42"));
        assert_eq!(number("three comma five").as_deref(), Some("3"));
        assert_eq!(number("forty two please").as_deref(), Some("42"));
        assert_eq!(number("one hundred and five").as_deref(), Some("105"));
        assert_eq!(number("two thousand twenty six").as_deref(), Some("2026"));
        assert_eq!(number("seven").as_deref(), Some("7"));
        assert_eq!(number("no idea"), None);
        assert_eq!(extract("digits", "5 5 5-12", n).as_deref(), Some("55512"));
    }

    #[test]
    fn dates_are_read_in_the_questions_timezone() {
        let utc = now(chrono_tz::UTC);
        let tokyo = now(chrono_tz::Asia::Tokyo);
        let date = |t, n| extract("date", t, n);
        assert_eq!(date("today", utc).as_deref(), Some("2026-11-27"));
        assert_eq!(date("today", tokyo).as_deref(), Some("2026-11-28"));
        assert_eq!(date("Tomorrow please", utc).as_deref(), Some("2026-11-28"));
        assert_eq!(
            date("the day after tomorrow", tokyo).as_deref(),
            Some("2026-11-30")
        );
        assert_eq!(date("yesterday", utc).as_deref(), Some("2026-11-26"));
        assert_eq!(date("in 3 days", utc).as_deref(), Some("2026-11-30"));
        assert_eq!(date("in two weeks", utc).as_deref(), Some("2026-12-11"));
        assert_eq!(date("on December 1st", utc).as_deref(), Some("2026-12-01"));
        assert_eq!(date("the 3rd of March", utc).as_deref(), Some("2027-03-03"));
        assert_eq!(date("march 3 2025", utc).as_deref(), Some("2025-03-03"));
        assert_eq!(date("2026-02-29", utc), None);
        assert_eq!(date("2027-01-05", utc).as_deref(), Some("2027-01-05"));
        // Friday in UTC: "friday" is today, "next friday" a week on; Saturday in Tokyo.
        assert_eq!(date("friday", utc).as_deref(), Some("2026-11-27"));
        assert_eq!(date("next friday", utc).as_deref(), Some("2026-12-04"));
        assert_eq!(date("friday", tokyo).as_deref(), Some("2026-12-04"));
        assert_eq!(date("monday", utc).as_deref(), Some("2026-11-30"));
        assert_eq!(date("whenever", utc), None);
    }

    #[test]
    fn times_of_day() {
        let utc = now(chrono_tz::UTC);
        let zurich = now(chrono_tz::Europe::Zurich);
        let time = |t, n| extract("time", t, n);
        assert_eq!(time("at 15:30", utc).as_deref(), Some("15:30"));
        assert_eq!(time("3:05 pm", utc).as_deref(), Some("15:05"));
        assert_eq!(time("around 9 a.m. maybe", utc).as_deref(), Some("09:00"));
        assert_eq!(time("12 am", utc).as_deref(), Some("00:00"));
        assert_eq!(time("7 o'clock", utc).as_deref(), Some("07:00"));
        assert_eq!(time("at noon", utc).as_deref(), Some("12:00"));
        assert_eq!(time("now", zurich).as_deref(), Some("00:30"));
        assert_eq!(time("in 45 minutes", utc).as_deref(), Some("00:15"));
        assert_eq!(time("in two hours", zurich).as_deref(), Some("02:30"));
        assert_eq!(time("room 42", utc), None);
        assert_eq!(time("25:99", utc), None);
    }
}
