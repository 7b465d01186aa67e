//! The rule applied after every attempt of a communication: dial again when, or finish
//! why. Pure: the dialer feeds it the attempts so far, the recipient's zones, the account's
//! recent dials to the same number and `now`.

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;

use super::{Outcome, Strategy};
use crate::schedule::next_allowed_everywhere;

/// One finished dial of a communication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    pub ended_at: DateTime<Utc>,
    pub outcome: Outcome,
}

/// What the policy knows when it decides.
#[derive(Debug, Clone, Copy)]
pub struct Situation<'a> {
    /// When the communication was created (its age counts from here).
    pub created_at: DateTime<Utc>,
    /// The earliest the first dial may happen (`scheduled_at`, else `created_at`).
    pub not_before: DateTime<Utc>,
    /// This communication's attempts, oldest first.
    pub attempts: &'a [Attempt],
    /// The zones whose local time the calling hours are read in (the recipient's, from
    /// the number; the caller supplies a fallback when the number maps to none).
    pub zones: &'a [Tz],
    /// When the account dialled this number (every communication and agent), for the
    /// frequency cap; any order.
    pub recent_dials: &'a [DateTime<Utc>],
    /// The number is on the account's do-not-call list.
    pub suppressed: bool,
    pub now: DateTime<Utc>,
}

/// Why a communication gets no further attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// A conversation took place.
    Completed,
    /// The callee declined (603, a "no" outcome): never retried.
    Declined,
    /// The recipient opted out during the call.
    OptedOut,
    /// This side canceled the attempt (a hang-up request).
    Canceled,
    /// The number is on the do-not-call list.
    Suppressed,
    /// The last outcome has no retry rule, or its retries are used up.
    RetriesExhausted(Outcome),
    /// The next attempt would fall after `max_age_s`.
    TooOld,
    /// The calling hours never open again within the horizon in every recipient zone.
    NoCallingHours,
}

/// The decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    DialAt(DateTime<Utc>),
    Finish(Finish),
}

/// How many times the calling hours and the frequency cap may push the dial time before
/// the policy gives up (each push moves it forward; this only bounds a pathological case).
const MAX_PUSHES: usize = 1000;

/// When to dial next, or why not to.
pub fn next_attempt(strategy: &Strategy, s: &Situation<'_>) -> Next {
    if s.suppressed {
        return Next::Finish(Finish::Suppressed);
    }
    let earliest = match s.attempts.last() {
        None => s.not_before,
        Some(last) => {
            let rule = match last.outcome {
                Outcome::Completed => return Next::Finish(Finish::Completed),
                Outcome::Declined => return Next::Finish(Finish::Declined),
                Outcome::OptedOut => return Next::Finish(Finish::OptedOut),
                Outcome::Canceled => return Next::Finish(Finish::Canceled),
                o => match strategy.rule(o) {
                    Some(rule) => rule,
                    None => return Next::Finish(Finish::RetriesExhausted(o)),
                },
            };
            // The n-th attempt that ended this way asks for the n-th retry.
            let n = s
                .attempts
                .iter()
                .filter(|a| a.outcome == last.outcome)
                .count() as u32;
            if n > rule.attempts {
                return Next::Finish(Finish::RetriesExhausted(last.outcome));
            }
            last.ended_at + Duration::from_std(rule.delay(n)).unwrap_or(Duration::MAX)
        }
    };
    let mut t = earliest.max(s.now);
    for _ in 0..MAX_PUSHES {
        let mut moved = t;
        if let Some(cap) = strategy.frequency_cap {
            moved = after_cap(moved, cap.calls, Duration::seconds(cap.period_s as i64), s);
        }
        if let Some(hours) = &strategy.calling_hours {
            match next_allowed_everywhere(hours, s.zones, moved) {
                Some(open) => moved = open,
                None => return Next::Finish(Finish::NoCallingHours),
            }
        }
        if let Some(max_age) = strategy.max_age_s
            && moved > s.created_at + Duration::seconds(max_age as i64)
        {
            return Next::Finish(Finish::TooOld);
        }
        if moved == t {
            return Next::DialAt(t);
        }
        t = moved;
    }
    Next::Finish(Finish::NoCallingHours)
}

/// The first instant at or after `t` when fewer than `calls` dials fall in the period
/// before it.
fn after_cap(
    mut t: DateTime<Utc>,
    calls: u32,
    period: Duration,
    s: &Situation<'_>,
) -> DateTime<Utc> {
    let mut dials: Vec<DateTime<Utc>> = s.recent_dials.to_vec();
    dials.sort_unstable();
    loop {
        let window: Vec<&DateTime<Utc>> = dials
            .iter()
            .filter(|d| **d > t - period && **d <= t)
            .collect();
        if window.len() < calls as usize {
            return t;
        }
        // The oldest dial in the window leaves it one period after it was made.
        t = *window[window.len() - calls as usize] + period;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn strategy(v: serde_json::Value) -> Strategy {
        Strategy::parse(&v).unwrap()
    }

    fn situation<'a>(
        attempts: &'a [Attempt],
        zones: &'a [Tz],
        dials: &'a [DateTime<Utc>],
        now: &str,
    ) -> Situation<'a> {
        Situation {
            created_at: utc("2026-11-20T10:00:00Z"),
            not_before: utc("2026-11-20T10:00:00Z"),
            attempts,
            zones,
            recent_dials: dials,
            suppressed: false,
            now: utc(now),
        }
    }

    fn busy_at(s: &str) -> Attempt {
        Attempt {
            ended_at: utc(s),
            outcome: Outcome::Busy,
        }
    }

    #[test]
    fn a_busy_recipient_is_redialled_with_backoff_until_the_rule_is_used_up() {
        let st =
            strategy(json!({"retry": {"busy": {"attempts": 2, "delay_s": 600, "backoff": 2}}}));
        let one = [busy_at("2026-11-20T10:00:30Z")];
        assert_eq!(
            next_attempt(&st, &situation(&one, &[], &[], "2026-11-20T10:00:31Z")),
            Next::DialAt(utc("2026-11-20T10:10:30Z"))
        );
        let two = [one[0], busy_at("2026-11-20T10:11:00Z")];
        assert_eq!(
            next_attempt(&st, &situation(&two, &[], &[], "2026-11-20T10:11:01Z")),
            Next::DialAt(utc("2026-11-20T10:31:00Z"))
        );
        let three = [two[0], two[1], busy_at("2026-11-20T10:31:30Z")];
        assert_eq!(
            next_attempt(&st, &situation(&three, &[], &[], "2026-11-20T10:32:00Z")),
            Next::Finish(Finish::RetriesExhausted(Outcome::Busy))
        );
    }

    #[test]
    fn declines_opt_outs_completions_and_unruled_outcomes_are_never_retried() {
        let st = strategy(json!({"retry": {"busy": {"attempts": 5, "delay_s": 1}}}));
        for (outcome, finish) in [
            (Outcome::Declined, Finish::Declined),
            (Outcome::OptedOut, Finish::OptedOut),
            (Outcome::Completed, Finish::Completed),
            (
                Outcome::NoAnswer,
                Finish::RetriesExhausted(Outcome::NoAnswer),
            ),
        ] {
            let a = [Attempt {
                ended_at: utc("2026-11-20T10:01:00Z"),
                outcome,
            }];
            assert_eq!(
                next_attempt(&st, &situation(&a, &[], &[], "2026-11-20T10:02:00Z")),
                Next::Finish(finish)
            );
        }
        let mut s = situation(&[], &[], &[], "2026-11-20T10:00:00Z");
        s.suppressed = true;
        assert_eq!(next_attempt(&st, &s), Next::Finish(Finish::Suppressed));
    }

    #[test]
    fn calling_hours_are_read_in_every_zone_of_the_recipient() {
        let st = strategy(json!({
            "retry": {"no_answer": {"attempts": 3, "delay_s": 3600}},
            "calling_hours": {"strategy": "weekly", "args": {
                "mon": [["09:00", "20:00"]], "tue": [["09:00", "20:00"]], "wed": [["09:00", "20:00"]],
                "thu": [["09:00", "20:00"]], "fri": [["09:00", "20:00"]]}}
        }));
        let ny: Tz = "America/New_York".parse().unwrap();
        let la: Tz = "America/Los_Angeles".parse().unwrap();
        // Friday 13:00Z: 08:00 in New York, before the window.
        assert_eq!(
            next_attempt(&st, &situation(&[], &[ny], &[], "2026-11-20T13:00:00Z")),
            Next::DialAt(utc("2026-11-20T14:00:00Z"))
        );
        // A number spanning both coasts waits for 09:00 in Los Angeles.
        let both = [ny, la];
        assert_eq!(
            next_attempt(&st, &situation(&[], &both, &[], "2026-11-20T13:00:00Z")),
            Next::DialAt(utc("2026-11-20T17:00:00Z"))
        );
        // Unanswered at 00:30Z Saturday (19:30 New York, Friday): an hour later New York is
        // closed for the weekend; Monday 09:00 New York is the retry.
        let a = [Attempt {
            ended_at: utc("2026-11-21T00:30:00Z"),
            outcome: Outcome::NoAnswer,
        }];
        assert_eq!(
            next_attempt(&st, &situation(&a, &[ny], &[], "2026-11-21T00:31:00Z")),
            Next::DialAt(utc("2026-11-23T14:00:00Z"))
        );
    }

    #[test]
    fn the_frequency_cap_counts_every_dial_to_the_number_in_the_rolling_period() {
        let st = strategy(json!({
            "retry": {"busy": {"attempts": 5, "delay_s": 60}},
            "frequency_cap": {"calls": 2, "period_s": 3600}
        }));
        // Dialled at 10:00 by another agent and at 10:20 by this communication: the retry
        // due at 10:21 waits until the 10:00 dial leaves the hour.
        let dials = [utc("2026-11-20T10:00:00Z"), utc("2026-11-20T10:20:00Z")];
        let a = [busy_at("2026-11-20T10:20:00Z")];
        assert_eq!(
            next_attempt(&st, &situation(&a, &[], &dials, "2026-11-20T10:20:01Z")),
            Next::DialAt(utc("2026-11-20T11:00:00Z"))
        );
        // Under the cap nothing waits.
        assert_eq!(
            next_attempt(
                &st,
                &situation(&a, &[], &dials[1..], "2026-11-20T10:20:01Z")
            ),
            Next::DialAt(utc("2026-11-20T10:21:00Z"))
        );
    }

    #[test]
    fn an_attempt_past_the_maximum_age_abandons_the_communication() {
        let st = strategy(json!({
            "retry": {"busy": {"attempts": 5, "delay_s": 7200}},
            "max_age_s": 3600
        }));
        let a = [busy_at("2026-11-20T10:05:00Z")];
        assert_eq!(
            next_attempt(&st, &situation(&a, &[], &[], "2026-11-20T10:05:01Z")),
            Next::Finish(Finish::TooOld)
        );
    }

    #[test]
    fn hours_that_never_open_for_the_recipient_finish_the_communication() {
        let w = json!([["09:00", "10:00"]]);
        let st = strategy(
            json!({"calling_hours": {"strategy": "weekly", "args": {"mon": w, "tue": w}}}),
        );
        let ny: Tz = "America/New_York".parse().unwrap();
        let tokyo: Tz = "Asia/Tokyo".parse().unwrap();
        assert_eq!(
            next_attempt(
                &st,
                &situation(&[], &[ny, tokyo], &[], "2026-11-20T10:00:00Z")
            ),
            Next::Finish(Finish::NoCallingHours)
        );
    }
}
