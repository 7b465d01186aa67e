//! Agent calling schedules: when an agent may start calls, in the agent's IANA time zone.
//!
//! Wire form (the agent's `calling_schedule`): `{"strategy": "...", "args": {...}}`.
//! * `always`: any time. args: `{"excluded_dates": ["YYYY-MM-DD", ...]}` (optional).
//! * `weekly`: only inside windows per weekday in local time. args:
//!   `{"mon": [["09:00", "18:00"]], "tue": [...], ..., "sun": [...], "excluded_dates": [...]}`.
//!   Day keys are `mon tue wed thu fri sat sun`; a missing day has no window. A window is
//!   `[start, end)` as `"HH:MM"`, start < end, end may be `"24:00"`; windows of a day may
//!   not overlap; at most 12 per day; at least one window in the week.
//!
//! Excluded dates are local calendar dates on which no call starts (holidays). DST: a
//! window start that falls into a spring-forward gap begins at the first instant after
//! the gap; in a fall-back fold a window starts at the earlier and ends at the later
//! occurrence of its local time. [`next_allowed`] is pure: the dialer feeds it `now`.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::Value;

/// How far [`next_allowed`] looks ahead (days); excluded dates are capped well below.
pub const HORIZON_DAYS: i64 = 1200;
const MAX_WINDOWS_PER_DAY: usize = 12;
const MAX_EXCLUDED_DATES: usize = 1000;
/// Day keys of `weekly`, Monday first (index = `Weekday::num_days_from_monday`).
pub const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// A checked calling schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallingSchedule {
    /// Per weekday (Monday first), sorted non-overlapping `[start, end)` in minutes of the
    /// local day (end ≤ 1440). `always` is every day `[0, 1440)`.
    windows: [Vec<(u32, u32)>; 7],
    excluded: BTreeSet<NaiveDate>,
}

/// Why a schedule was rejected (the message names the offending part of `args`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub String);

fn err<T>(m: impl Into<String>) -> Result<T, ScheduleError> {
    Err(ScheduleError(m.into()))
}

/// Parses an IANA time zone name (`Europe/Berlin`, `UTC`).
pub fn parse_timezone(name: &str) -> Option<Tz> {
    name.parse::<Tz>().ok()
}

fn minutes(s: &Value, at: &str) -> Result<u32, ScheduleError> {
    let Some(t) = s.as_str() else {
        return err(format!("{at}: expected \"HH:MM\""));
    };
    let b = t.as_bytes();
    if b.len() != 5
        || b[2] != b':'
        || !b
            .iter()
            .enumerate()
            .all(|(i, c)| i == 2 || c.is_ascii_digit())
    {
        return err(format!("{at}: expected \"HH:MM\", got {t:?}"));
    }
    let h = u32::from(b[0] - b'0') * 10 + u32::from(b[1] - b'0');
    let m = u32::from(b[3] - b'0') * 10 + u32::from(b[4] - b'0');
    if m > 59 || h > 24 || (h == 24 && m != 0) {
        return err(format!("{at}: not a time of day: {t:?}"));
    }
    Ok(h * 60 + m)
}

fn excluded_dates(v: Option<&Value>) -> Result<BTreeSet<NaiveDate>, ScheduleError> {
    let mut out = BTreeSet::new();
    let Some(v) = v else { return Ok(out) };
    let Some(items) = v.as_array() else {
        return err("args.excluded_dates: expected an array of \"YYYY-MM-DD\"");
    };
    if items.len() > MAX_EXCLUDED_DATES {
        return err(format!(
            "args.excluded_dates: at most {MAX_EXCLUDED_DATES} dates"
        ));
    }
    for (i, d) in items.iter().enumerate() {
        match d
            .as_str()
            .and_then(|s| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok())
        {
            Some(d) => {
                out.insert(d);
            }
            None => {
                return err(format!(
                    "args.excluded_dates[{i}]: expected \"YYYY-MM-DD\", got {d}"
                ));
            }
        }
    }
    Ok(out)
}

impl CallingSchedule {
    /// Checks a `strategy` and its `args` (null args = `{}`).
    pub fn parse(strategy: &str, args: &Value) -> Result<CallingSchedule, ScheduleError> {
        let empty = serde_json::Map::new();
        let args = match args {
            Value::Null => &empty,
            Value::Object(m) => m,
            _ => return err("args: expected an object"),
        };
        match strategy {
            "always" => {
                if let Some(k) = args.keys().find(|k| *k != "excluded_dates") {
                    return err(format!(
                        "args.{k}: unknown for strategy always (accepted: excluded_dates)"
                    ));
                }
                Ok(CallingSchedule {
                    windows: std::array::from_fn(|_| vec![(0, 1440)]),
                    excluded: excluded_dates(args.get("excluded_dates"))?,
                })
            }
            "weekly" => {
                if let Some(k) = args
                    .keys()
                    .find(|k| *k != "excluded_dates" && !DAYS.contains(&k.as_str()))
                {
                    return err(format!(
                        "args.{k}: unknown for strategy weekly (accepted: mon, tue, wed, thu, fri, sat, sun, excluded_dates)"
                    ));
                }
                let mut windows: [Vec<(u32, u32)>; 7] = Default::default();
                for (d, day) in DAYS.iter().enumerate() {
                    let Some(v) = args.get(*day) else { continue };
                    let Some(list) = v.as_array() else {
                        return err(format!(
                            "args.{day}: expected an array of [\"HH:MM\", \"HH:MM\"] windows"
                        ));
                    };
                    if list.len() > MAX_WINDOWS_PER_DAY {
                        return err(format!("args.{day}: at most {MAX_WINDOWS_PER_DAY} windows"));
                    }
                    for (i, w) in list.iter().enumerate() {
                        let at = format!("args.{day}[{i}]");
                        let Some([s, e]) = w.as_array().map(Vec::as_slice) else {
                            return err(format!("{at}: expected [\"HH:MM\", \"HH:MM\"]"));
                        };
                        let (s, e) = (
                            minutes(s, &format!("{at}[0]"))?,
                            minutes(e, &format!("{at}[1]"))?,
                        );
                        if s >= e {
                            return err(format!(
                                "{at}: the start must be before the end (split windows that pass midnight)"
                            ));
                        }
                        windows[d].push((s, e));
                    }
                    windows[d].sort_unstable();
                    if let Some(pair) = windows[d].windows(2).find(|p| p[1].0 < p[0].1) {
                        return err(format!(
                            "args.{day}: windows overlap ({:02}:{:02} starts before {:02}:{:02} ends)",
                            pair[1].0 / 60,
                            pair[1].0 % 60,
                            pair[0].1 / 60,
                            pair[0].1 % 60
                        ));
                    }
                }
                if windows.iter().all(Vec::is_empty) {
                    return err("args: strategy weekly needs at least one window");
                }
                Ok(CallingSchedule {
                    windows,
                    excluded: excluded_dates(args.get("excluded_dates"))?,
                })
            }
            other => err(format!(
                "strategy: unknown {other:?} (accepted: always, weekly)"
            )),
        }
    }

    /// Parses the stored wire form `{"strategy", "args"}`.
    pub fn from_value(v: &Value) -> Result<CallingSchedule, ScheduleError> {
        let Some(strategy) = v.get("strategy").and_then(Value::as_str) else {
            return err("strategy: required string");
        };
        CallingSchedule::parse(strategy, v.get("args").unwrap_or(&Value::Null))
    }
}

/// The instant a local date + minute-of-day names in `tz`: in a gap, the first instant
/// after it; in a fold, the earlier (`late = false`) or later occurrence.
fn resolve(tz: Tz, date: NaiveDate, minute: u32, late: bool) -> DateTime<Utc> {
    let (date, minute) = if minute >= 1440 {
        (date.succ_opt().unwrap_or(date), 0)
    } else {
        (date, minute)
    };
    let naive: NaiveDateTime = date
        .and_hms_opt(minute / 60, minute % 60, 0)
        .unwrap_or_default();
    let pick = |n: NaiveDateTime| {
        let r = tz.from_local_datetime(&n);
        if late { r.latest() } else { r.earliest() }
    };
    if let Some(t) = pick(naive) {
        return t.with_timezone(&Utc);
    }
    // A gap (at most a few hours in any zone): the first local minute that exists.
    for k in 1..=24 * 60 {
        if let Some(t) = pick(naive + Duration::minutes(k)) {
            return t.with_timezone(&Utc);
        }
    }
    naive.and_utc()
}

/// When the agent may next start a call: `now` if `now` lies inside an allowed window,
/// else the start of the next window; None when no window opens within ~3 years (every
/// remaining window falls on excluded dates).
pub fn next_allowed(
    schedule: &CallingSchedule,
    tz: Tz,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    use chrono::Datelike;
    let today = now.with_timezone(&tz).date_naive();
    let mut day = today.pred_opt()?;
    for _ in 0..HORIZON_DAYS {
        if !schedule.excluded.contains(&day) {
            let wd = day.weekday().num_days_from_monday() as usize;
            for &(s, e) in &schedule.windows[wd] {
                let start = resolve(tz, day, s, false);
                let end = resolve(tz, day, e, true);
                if start <= now && now < end {
                    return Some(now);
                }
                if start > now {
                    return Some(start);
                }
            }
        }
        day = day.succ_opt()?;
    }
    None
}

/// When a call may start with every zone in `zones` inside the schedule: `now` when it
/// already is, else the earliest instant at which all of them are; None when no such
/// instant comes within the horizon (the windows never overlap across the zones, or every
/// common window falls on excluded dates). The recipient's calling hours use it with the
/// zones of the recipient's number ([`crate::recipient_zones`]): a number whose area
/// spans zones is called only when it is inside the window in each of them.
///
/// Each zone's [`next_allowed`] is a lower bound on the common instant; taking the latest
/// of them and asking again converges on the first instant all agree on, or runs past the
/// horizon.
pub fn next_allowed_everywhere(
    schedule: &CallingSchedule,
    zones: &[Tz],
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let (&first, rest) = zones.split_first()?;
    let horizon = now + Duration::days(HORIZON_DAYS);
    let mut t = next_allowed(schedule, first, now)?;
    loop {
        let mut latest = t;
        for &tz in rest {
            latest = latest.max(next_allowed(schedule, tz, t)?);
        }
        // Re-check the first zone at the candidate too: its window may have closed.
        latest = latest.max(next_allowed(schedule, first, latest)?);
        if latest == t {
            return Some(t);
        }
        if latest > horizon {
            return None;
        }
        t = latest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }
    fn berlin() -> Tz {
        parse_timezone("Europe/Berlin").unwrap()
    }
    fn weekdays_9_to_18() -> CallingSchedule {
        let w = json!([["09:00", "18:00"]]);
        CallingSchedule::parse(
            "weekly",
            &json!({"mon": w, "tue": w, "wed": w, "thu": w, "fri": w}),
        )
        .unwrap()
    }

    #[test]
    fn always_is_now_unless_the_day_is_excluded() {
        let s = CallingSchedule::parse("always", &json!({})).unwrap();
        let now = utc("2026-11-20T12:34:56Z");
        assert_eq!(next_allowed(&s, berlin(), now), Some(now));
        // 2026-11-20 local is excluded: the next local midnight (CET = UTC+1).
        let s = CallingSchedule::parse(
            "always",
            &json!({"excluded_dates": ["2026-11-20", "2026-11-21"]}),
        )
        .unwrap();
        assert_eq!(
            next_allowed(&s, berlin(), now),
            Some(utc("2026-11-21T23:00:00Z"))
        );
    }

    #[test]
    fn weekly_inside_before_after_and_weekend() {
        let s = weekdays_9_to_18();
        let tz = berlin();
        // Friday 2026-11-20, 10:00 CET = 09:00Z: inside.
        let now = utc("2026-11-20T09:00:00Z");
        assert_eq!(next_allowed(&s, tz, now), Some(now));
        // 07:00 CET: today's 09:00 CET = 08:00Z.
        assert_eq!(
            next_allowed(&s, tz, utc("2026-11-20T06:00:00Z")),
            Some(utc("2026-11-20T08:00:00Z"))
        );
        // Window start itself is inside; the end is not.
        assert_eq!(
            next_allowed(&s, tz, utc("2026-11-20T08:00:00Z")),
            Some(utc("2026-11-20T08:00:00Z"))
        );
        // Friday 18:00 CET (end, exclusive) → Monday 09:00 CET.
        assert_eq!(
            next_allowed(&s, tz, utc("2026-11-20T17:00:00Z")),
            Some(utc("2026-11-23T08:00:00Z"))
        );
        // Saturday → Monday.
        assert_eq!(
            next_allowed(&s, tz, utc("2026-11-21T12:00:00Z")),
            Some(utc("2026-11-23T08:00:00Z"))
        );
    }

    #[test]
    fn several_windows_and_24_00() {
        let s = CallingSchedule::parse(
            "weekly",
            &json!({"sat": [["20:00", "24:00"], ["08:00", "12:00"]]}),
        )
        .unwrap();
        let tz = parse_timezone("UTC").unwrap();
        assert_eq!(
            next_allowed(&s, tz, utc("2026-11-21T13:00:00Z")),
            Some(utc("2026-11-21T20:00:00Z"))
        );
        let late = utc("2026-11-21T23:59:00Z");
        assert_eq!(next_allowed(&s, tz, late), Some(late));
        // Sunday 00:00 is outside (24:00 is exclusive) → next Saturday 08:00.
        assert_eq!(
            next_allowed(&s, tz, utc("2026-11-22T00:00:00Z")),
            Some(utc("2026-11-28T08:00:00Z"))
        );
    }

    #[test]
    fn excluded_dates_skip_days_in_local_time() {
        let w = json!([["09:00", "18:00"]]);
        let s = CallingSchedule::parse(
            "weekly",
            &json!({"mon": w, "tue": w, "wed": w, "thu": w, "fri": w, "excluded_dates": ["2026-12-24", "2026-12-25"]}),
        )
        .unwrap();
        // Wednesday 23 Dec after hours → Monday 28 Dec (24 Thu, 25 Fri excluded).
        assert_eq!(
            next_allowed(&s, berlin(), utc("2026-12-23T18:00:00Z")),
            Some(utc("2026-12-28T08:00:00Z"))
        );
        // Every day excluded for ever is impossible (capped), but a schedule whose only day is excluded for the horizon...
        let only = CallingSchedule::parse(
            "weekly",
            &json!({"mon": w, "excluded_dates": ["2026-11-23"]}),
        )
        .unwrap();
        assert_eq!(
            next_allowed(&only, berlin(), utc("2026-11-21T00:00:00Z")),
            Some(utc("2026-11-30T08:00:00Z"))
        );
    }

    #[test]
    fn dst_spring_forward_moves_the_utc_start_and_skips_the_gap() {
        let tz = berlin();
        let every = json!([["09:00", "18:00"]]);
        let s = CallingSchedule::parse("weekly", &json!({"sat": every, "sun": every})).unwrap();
        // Saturday 2026-03-28 09:00 CET = 08:00Z; Sunday 2026-03-29 09:00 CEST = 07:00Z.
        assert_eq!(
            next_allowed(&s, tz, utc("2026-03-28T07:00:00Z")),
            Some(utc("2026-03-28T08:00:00Z"))
        );
        assert_eq!(
            next_allowed(&s, tz, utc("2026-03-28T18:00:00Z")),
            Some(utc("2026-03-29T07:00:00Z"))
        );
        // A window starting inside the gap (02:00–03:00 does not exist) opens at 03:00 CEST = 01:00Z.
        let g = CallingSchedule::parse("weekly", &json!({"sun": [["02:30", "04:00"]]})).unwrap();
        assert_eq!(
            next_allowed(&g, tz, utc("2026-03-28T22:00:00Z")),
            Some(utc("2026-03-29T01:00:00Z"))
        );
        // 03:30 CEST = 01:30Z is inside.
        let inside = utc("2026-03-29T01:30:00Z");
        assert_eq!(next_allowed(&g, tz, inside), Some(inside));
    }

    #[test]
    fn dst_fall_back_covers_both_passes_of_the_fold() {
        let tz = berlin();
        // 2026-10-25: 03:00 CEST → 02:00 CET; 02:00–03:00 happens twice.
        let s = CallingSchedule::parse("weekly", &json!({"sun": [["02:00", "03:00"]]})).unwrap();
        // Starts at the first 02:00 (CEST) = 00:00Z.
        assert_eq!(
            next_allowed(&s, tz, utc("2026-10-24T20:00:00Z")),
            Some(utc("2026-10-25T00:00:00Z"))
        );
        // 02:30 CET (second pass) = 01:30Z is still inside: ends at the later 03:00 CET = 02:00Z.
        let second = utc("2026-10-25T01:30:00Z");
        assert_eq!(next_allowed(&s, tz, second), Some(second));
        assert_eq!(
            next_allowed(&s, tz, utc("2026-10-25T02:00:00Z")),
            Some(utc("2026-11-01T01:00:00Z"))
        );
    }

    #[test]
    fn invalid_schedules_are_rejected() {
        for (strategy, args) in [
            ("sometimes", json!({})),
            ("always", json!({"mon": []})),
            ("always", json!([])),
            ("weekly", json!({})),
            ("weekly", json!({"monday": [["09:00", "10:00"]]})),
            ("weekly", json!({"mon": [["9:00", "10:00"]]})),
            ("weekly", json!({"mon": [["09:00", "25:00"]]})),
            ("weekly", json!({"mon": [["09:60", "10:00"]]})),
            ("weekly", json!({"mon": [["10:00", "09:00"]]})),
            ("weekly", json!({"mon": [["22:00", "02:00"]]})),
            (
                "weekly",
                json!({"mon": [["09:00", "12:00"], ["11:00", "13:00"]]}),
            ),
            ("weekly", json!({"mon": [["09:00"]]})),
            ("weekly", json!({"mon": "09:00-18:00"})),
            (
                "weekly",
                json!({"mon": [["09:00", "18:00"]], "excluded_dates": ["2026-02-30"]}),
            ),
            (
                "weekly",
                json!({"mon": [["09:00", "18:00"]], "excluded_dates": "2026-02-01"}),
            ),
        ] {
            assert!(
                CallingSchedule::parse(strategy, &args).is_err(),
                "{strategy} {args} should be rejected"
            );
        }
        assert!(parse_timezone("Mars/Olympus").is_none());
        assert!(parse_timezone("America/New_York").is_some());
    }

    #[test]
    fn every_zone_of_a_recipient_must_be_inside_the_window() {
        let s = weekdays_9_to_18();
        let ny: Tz = "America/New_York".parse().unwrap();
        let la: Tz = "America/Los_Angeles".parse().unwrap();
        // Friday 2026-11-20 14:00Z = 09:00 New York, 06:00 Los Angeles: New York alone
        // may be called now; with Los Angeles too, the first common instant is 09:00 LA.
        let now = utc("2026-11-20T14:00:00Z");
        assert_eq!(next_allowed_everywhere(&s, &[ny], now), Some(now));
        assert_eq!(
            next_allowed_everywhere(&s, &[ny, la], now),
            Some(utc("2026-11-20T17:00:00Z"))
        );
        assert_eq!(
            next_allowed_everywhere(&s, &[la, ny], now),
            Some(utc("2026-11-20T17:00:00Z"))
        );
        // 23:00Z is 18:00 in New York, its window's end: the next common instant is
        // Monday 09:00 Los Angeles (17:00Z, noon in New York).
        assert_eq!(
            next_allowed_everywhere(&s, &[ny, la], utc("2026-11-20T23:00:00Z")),
            Some(utc("2026-11-23T17:00:00Z"))
        );
        assert_eq!(next_allowed_everywhere(&s, &[], now), None);
    }

    #[test]
    fn zones_whose_windows_never_meet_have_no_common_instant() {
        // 09:00-10:00 in New York and Tokyo never overlap.
        let w = json!([["09:00", "10:00"]]);
        let s = CallingSchedule::parse(
            "weekly",
            &json!({"mon": w, "tue": w, "wed": w, "thu": w, "fri": w, "sat": w, "sun": w}),
        )
        .unwrap();
        let ny: Tz = "America/New_York".parse().unwrap();
        let tokyo: Tz = "Asia/Tokyo".parse().unwrap();
        assert_eq!(
            next_allowed_everywhere(&s, &[ny, tokyo], utc("2026-11-20T00:00:00Z")),
            None
        );
    }

    #[test]
    fn the_common_window_follows_each_zone_across_its_own_dst_change() {
        // Weekdays 09:00-18:00 in New York and London. London leaves summer time on
        // Sunday 2026-10-25, New York on Sunday 2026-11-01: in the week between, they
        // are 4 hours apart instead of 5. The common window opens at 09:00 New York,
        // which is 13:00Z that week and 14:00Z the weeks around it, and closes at 18:00
        // London.
        let s = weekdays_9_to_18();
        let ny: Tz = "America/New_York".parse().unwrap();
        let london: Tz = "Europe/London".parse().unwrap();
        let both = [london, ny];
        // Friday before both changes: 09:00 EDT = 13:00Z.
        assert_eq!(
            next_allowed_everywhere(&s, &both, utc("2026-10-23T05:00:00Z")),
            Some(utc("2026-10-23T13:00:00Z"))
        );
        // Monday of the gap week: New York still on EDT (13:00Z), London on GMT.
        assert_eq!(
            next_allowed_everywhere(&s, &both, utc("2026-10-26T05:00:00Z")),
            Some(utc("2026-10-26T13:00:00Z"))
        );
        // Monday after New York's change: 09:00 EST = 14:00Z.
        assert_eq!(
            next_allowed_everywhere(&s, &both, utc("2026-11-02T05:00:00Z")),
            Some(utc("2026-11-02T14:00:00Z"))
        );
        // 18:00 GMT in London closes the common window on the gap week's Monday.
        assert_eq!(
            next_allowed_everywhere(&s, &both, utc("2026-10-26T18:00:00Z")),
            Some(utc("2026-10-27T13:00:00Z"))
        );
    }
}
