//! Communication strategies: how one communication becomes several attempts over days.
//!
//! A strategy holds retry rules per outcome, calling hours in the recipient's local time
//! and a per-recipient frequency cap. [`Strategy::parse`] checks its wire form and names
//! the offending field on error; [`policy::next_attempt`] is the pure rule the dialer
//! applies after every attempt (fed the attempts so far and `now`).
//!
//! Wire form (`definition` of a strategy):
//!
//! ```json
//! {
//!   "retry": {
//!     "busy":      {"attempts": 3, "delay_s": 600, "backoff": 2.0},
//!     "no_answer": {"attempts": 2, "delay_s": 3600},
//!     "failed":    {"attempts": 2, "delay_s": 300},
//!     "voicemail": {"attempts": 1, "delay_s": 14400},
//!     "dropped":   {"attempts": 1, "delay_s": 600}
//!   },
//!   "max_age_s": 259200,
//!   "dropped_early_s": 5,
//!   "calling_hours": {"strategy": "weekly", "args": {"mon": [["09:00", "18:00"]]}},
//!   "fallback_timezone": "Europe/Berlin",
//!   "frequency_cap": {"calls": 3, "period_s": 86400}
//! }
//! ```
//!
//! Every member is optional: an outcome without a rule is not retried, no `calling_hours`
//! means any time, no `frequency_cap` means none. `fallback_timezone` (an IANA name) is
//! the zone the calling hours are read in when the recipient's number maps to no zone;
//! without it the agent's time zone is. `attempts` counts the retries of that
//! outcome after the first dial (so `busy.attempts = 3` dials a busy recipient at most four
//! times); the delay before the n-th retry of an outcome is `delay_s × backoffⁿ⁻¹`
//! (backoff defaults to 1, at most 10), capped at `max_delay_s` when given.

pub mod apply;
pub mod policy;

use serde_json::Value;

use crate::schedule::CallingSchedule;

/// Most retries one outcome may ask for.
pub const MAX_RETRIES: u32 = 20;
/// Longest delay and age a strategy may name (30 days).
pub const MAX_SECONDS: u64 = 30 * 24 * 3600;
const MAX_BACKOFF: f64 = 10.0;

/// How an attempt ended, as a strategy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The callee's line was busy (SIP 486 Busy Here, 600 Busy Everywhere).
    Busy,
    /// It rang out or was not answered in time (SIP 408, 480, the ring timeout).
    NoAnswer,
    /// The call did not connect for another reason (any other 4xx-6xx but a decline,
    /// no trunk response, a transport error).
    Failed,
    /// An answering machine answered.
    Voicemail,
    /// A person answered and the call ended before `dropped_early_s`.
    Dropped,
    /// The callee declined (SIP 603 Decline) or the conversation's outcome was a "no":
    /// never retried.
    Declined,
    /// The recipient asked not to be called again: never retried, and the number is
    /// added to the account's do-not-call list.
    OptedOut,
    /// A conversation took place: the communication is done.
    Completed,
    /// This side ended the attempt before an answer (a hang-up request): never retried.
    Canceled,
}

/// What is known about one finished dial, as the call's record has it.
#[derive(Debug, Clone, Copy, Default)]
pub struct AttemptFacts<'a> {
    /// The `call_status` vocabulary (answered, busy, no_answer, rejected, failed,
    /// canceled); None when nothing was dialled (no trunk, an error before the INVITE).
    pub call_status: Option<&'a str>,
    /// The final SIP status of the INVITE, when there was one.
    pub sip_code: Option<u16>,
    /// The answering-machine detector's verdict was "machine".
    pub machine: bool,
    /// Seconds from the answer to the end.
    pub talk_secs: u64,
    /// The other side hung up (`end_reason` `hung_up`).
    pub remote_hangup: bool,
    /// The recipient asked not to be called again during the call.
    pub opted_out: bool,
    /// The conversation ended on an explicit "no".
    pub declined: bool,
}

impl Outcome {
    /// How a dial ended, for the retry rules. A 603 Decline (and 607 Unwanted, 608
    /// Rejected) is the callee's deliberate "no"; 486 and 600 are a busy line and are
    /// retried by the `busy` rule. An answered call that the callee left within
    /// `dropped_early_s` seconds is `Dropped`.
    pub fn of(f: &AttemptFacts<'_>, dropped_early_s: u64) -> Outcome {
        if f.opted_out {
            return Outcome::OptedOut;
        }
        if f.declined {
            return Outcome::Declined;
        }
        match f.call_status {
            Some("answered") if f.machine => Outcome::Voicemail,
            Some("answered") if f.remote_hangup && f.talk_secs < dropped_early_s => {
                Outcome::Dropped
            }
            Some("answered") => Outcome::Completed,
            Some("busy") => Outcome::Busy,
            Some("no_answer") => Outcome::NoAnswer,
            Some("canceled") => Outcome::Canceled,
            Some("rejected") if matches!(f.sip_code, Some(603 | 607 | 608)) => Outcome::Declined,
            _ => Outcome::Failed,
        }
    }
}

impl Outcome {
    /// The outcome's name in an attempt record (`outcome`) and the retry rules.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Busy => "busy",
            Outcome::NoAnswer => "no_answer",
            Outcome::Failed => "failed",
            Outcome::Voicemail => "voicemail",
            Outcome::Dropped => "dropped",
            Outcome::Declined => "declined",
            Outcome::OptedOut => "opted_out",
            Outcome::Completed => "completed",
            Outcome::Canceled => "canceled",
        }
    }

    /// The outcome of a stored name (None for an unknown one).
    pub fn from_name(name: &str) -> Option<Outcome> {
        [
            Outcome::Busy,
            Outcome::NoAnswer,
            Outcome::Failed,
            Outcome::Voicemail,
            Outcome::Dropped,
            Outcome::Declined,
            Outcome::OptedOut,
            Outcome::Completed,
            Outcome::Canceled,
        ]
        .into_iter()
        .find(|o| o.name() == name)
    }
}

/// The outcomes a strategy can retry, with their wire names.
pub const RETRYABLE: [(Outcome, &str); 5] = [
    (Outcome::Busy, "busy"),
    (Outcome::NoAnswer, "no_answer"),
    (Outcome::Failed, "failed"),
    (Outcome::Voicemail, "voicemail"),
    (Outcome::Dropped, "dropped"),
];

/// Retries of one outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryRule {
    pub attempts: u32,
    pub delay_s: u64,
    pub backoff: f64,
    pub max_delay_s: Option<u64>,
}

impl RetryRule {
    /// The wait before the `n`-th retry of this outcome (1-based).
    pub fn delay(&self, n: u32) -> std::time::Duration {
        let factor = self.backoff.powi(n.saturating_sub(1).min(64) as i32);
        let mut secs = (self.delay_s as f64 * factor).min(MAX_SECONDS as f64);
        if let Some(cap) = self.max_delay_s {
            secs = secs.min(cap as f64);
        }
        std::time::Duration::from_secs(secs.round() as u64)
    }
}

/// At most `calls` dials to one number per rolling `period_s`, across the account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrequencyCap {
    pub calls: u32,
    pub period_s: u64,
}

/// A checked strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct Strategy {
    retry: Vec<(Outcome, RetryRule)>,
    pub max_age_s: Option<u64>,
    pub dropped_early_s: u64,
    pub calling_hours: Option<CallingSchedule>,
    /// Where the calling hours are read when the number maps to no zone.
    pub fallback_timezone: Option<chrono_tz::Tz>,
    pub frequency_cap: Option<FrequencyCap>,
}

/// Why a strategy was rejected: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct StrategyError {
    pub field: String,
    pub message: String,
}

fn bad<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, StrategyError> {
    Err(StrategyError {
        field: field.into(),
        message: message.into(),
    })
}

fn object<'a>(
    v: &'a Value,
    field: &str,
    known: &[&str],
) -> Result<&'a serde_json::Map<String, Value>, StrategyError> {
    let Some(o) = v.as_object() else {
        return bad(field, "expected an object");
    };
    if let Some(k) = o.keys().find(|k| !known.contains(&k.as_str())) {
        let at = if field.is_empty() {
            k.clone()
        } else {
            format!("{field}.{k}")
        };
        return bad(at, format!("unknown member (known: {})", known.join(", ")));
    }
    Ok(o)
}

fn seconds(v: Option<&Value>, field: &str, min: u64) -> Result<Option<u64>, StrategyError> {
    let Some(v) = v else { return Ok(None) };
    match v.as_u64() {
        Some(n) if (min..=MAX_SECONDS).contains(&n) => Ok(Some(n)),
        _ => bad(
            field,
            format!("expected whole seconds from {min} to {MAX_SECONDS}"),
        ),
    }
}

impl Strategy {
    /// Checks a strategy's wire form.
    pub fn parse(v: &Value) -> Result<Strategy, StrategyError> {
        let o = object(
            v,
            "",
            &[
                "retry",
                "max_age_s",
                "dropped_early_s",
                "calling_hours",
                "fallback_timezone",
                "frequency_cap",
            ],
        )?;
        let mut retry = Vec::new();
        if let Some(r) = o.get("retry") {
            let names: Vec<&str> = RETRYABLE.iter().map(|(_, n)| *n).collect();
            let r = object(r, "retry", &names)?;
            for (outcome, name) in RETRYABLE {
                if let Some(rule) = r.get(name) {
                    retry.push((outcome, parse_rule(rule, &format!("retry.{name}"))?));
                }
            }
        }
        let max_age_s = seconds(o.get("max_age_s"), "max_age_s", 60)?;
        let dropped_early_s = seconds(o.get("dropped_early_s"), "dropped_early_s", 0)?
            .unwrap_or(0)
            .min(600);
        let calling_hours = match o.get("calling_hours") {
            None | Some(Value::Null) => None,
            Some(h) => Some(CallingSchedule::from_value(h).map_err(|e| StrategyError {
                field: "calling_hours".into(),
                message: e.0,
            })?),
        };
        let fallback_timezone = match o.get("fallback_timezone") {
            None | Some(Value::Null) => None,
            Some(z) => match z.as_str().and_then(crate::schedule::parse_timezone) {
                Some(tz) => Some(tz),
                None => {
                    return bad("fallback_timezone", format!("not an IANA time zone: {z}"));
                }
            },
        };
        let frequency_cap = match o.get("frequency_cap") {
            None | Some(Value::Null) => None,
            Some(c) => {
                let c = object(c, "frequency_cap", &["calls", "period_s"])?;
                let calls = match c.get("calls").and_then(Value::as_u64) {
                    Some(n @ 1..=1000) => n as u32,
                    _ => {
                        return bad(
                            "frequency_cap.calls",
                            "expected a whole number from 1 to 1000",
                        );
                    }
                };
                let Some(period_s) = seconds(c.get("period_s"), "frequency_cap.period_s", 60)?
                else {
                    return bad("frequency_cap.period_s", "required");
                };
                Some(FrequencyCap { calls, period_s })
            }
        };
        Ok(Strategy {
            retry,
            max_age_s,
            dropped_early_s,
            calling_hours,
            fallback_timezone,
            frequency_cap,
        })
    }

    /// The retry rule of an outcome; None for outcomes that are never retried.
    pub fn rule(&self, outcome: Outcome) -> Option<&RetryRule> {
        self.retry
            .iter()
            .find(|(o, _)| *o == outcome)
            .map(|(_, r)| r)
    }
}

fn parse_rule(v: &Value, field: &str) -> Result<RetryRule, StrategyError> {
    let o = object(v, field, &["attempts", "delay_s", "backoff", "max_delay_s"])?;
    let attempts = match o.get("attempts").and_then(Value::as_u64) {
        Some(n) if n <= MAX_RETRIES as u64 => n as u32,
        _ => {
            return bad(
                format!("{field}.attempts"),
                format!("expected a whole number from 0 to {MAX_RETRIES}"),
            );
        }
    };
    let Some(delay_s) = seconds(o.get("delay_s"), &format!("{field}.delay_s"), 0)? else {
        return bad(format!("{field}.delay_s"), "required");
    };
    let backoff = match o.get("backoff") {
        None => 1.0,
        Some(b) => match b.as_f64() {
            Some(x) if (1.0..=MAX_BACKOFF).contains(&x) => x,
            _ => {
                return bad(
                    format!("{field}.backoff"),
                    format!("expected a number from 1 to {MAX_BACKOFF}"),
                );
            }
        },
    };
    let max_delay_s = seconds(o.get("max_delay_s"), &format!("{field}.max_delay_s"), 0)?;
    if let Some(cap) = max_delay_s
        && cap < delay_s
    {
        return bad(
            format!("{field}.max_delay_s"),
            "must not be shorter than delay_s",
        );
    }
    Ok(RetryRule {
        attempts,
        delay_s,
        backoff,
        max_delay_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Value) -> StrategyError {
        Strategy::parse(&v).unwrap_err()
    }

    #[test]
    fn a_full_strategy_parses_and_an_empty_one_retries_nothing() {
        let s = Strategy::parse(&json!({
            "retry": {"busy": {"attempts": 3, "delay_s": 600, "backoff": 2.0, "max_delay_s": 1800},
                      "no_answer": {"attempts": 2, "delay_s": 3600}},
            "max_age_s": 259200,
            "dropped_early_s": 5,
            "calling_hours": {"strategy": "weekly", "args": {"mon": [["09:00", "18:00"]]}},
            "frequency_cap": {"calls": 3, "period_s": 86400}
        }))
        .unwrap();
        let busy = s.rule(Outcome::Busy).unwrap();
        assert_eq!(busy.attempts, 3);
        assert_eq!(busy.delay(1).as_secs(), 600);
        assert_eq!(busy.delay(2).as_secs(), 1200);
        assert_eq!(busy.delay(3).as_secs(), 1800, "capped at max_delay_s");
        assert_eq!(s.rule(Outcome::NoAnswer).unwrap().delay(2).as_secs(), 3600);
        assert!(s.rule(Outcome::Voicemail).is_none());
        assert_eq!(
            s.frequency_cap,
            Some(FrequencyCap {
                calls: 3,
                period_s: 86400
            })
        );
        let empty = Strategy::parse(&json!({})).unwrap();
        assert!(RETRYABLE.iter().all(|(o, _)| empty.rule(*o).is_none()));
        assert!(empty.calling_hours.is_none() && empty.frequency_cap.is_none());
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases = [
            (json!([]), ""),
            (json!({"retries": {}}), "retries"),
            (
                json!({"retry": {"declined": {"attempts": 1, "delay_s": 1}}}),
                "retry.declined",
            ),
            (
                json!({"retry": {"busy": {"attempts": 21, "delay_s": 1}}}),
                "retry.busy.attempts",
            ),
            (
                json!({"retry": {"busy": {"attempts": -1, "delay_s": 1}}}),
                "retry.busy.attempts",
            ),
            (
                json!({"retry": {"busy": {"attempts": 1}}}),
                "retry.busy.delay_s",
            ),
            (
                json!({"retry": {"busy": {"attempts": 1, "delay_s": 1, "backoff": 0.5}}}),
                "retry.busy.backoff",
            ),
            (
                json!({"retry": {"busy": {"attempts": 1, "delay_s": 60, "max_delay_s": 30}}}),
                "retry.busy.max_delay_s",
            ),
            (
                json!({"retry": {"busy": {"attempts": 1, "delay_s": 1, "jitter": 1}}}),
                "retry.busy.jitter",
            ),
            (json!({"max_age_s": 10}), "max_age_s"),
            (
                json!({"fallback_timezone": "Mars/Olympus"}),
                "fallback_timezone",
            ),
            (json!({"fallback_timezone": 3}), "fallback_timezone"),
            (json!({"max_age_s": 99999999}), "max_age_s"),
            (
                json!({"frequency_cap": {"calls": 0, "period_s": 3600}}),
                "frequency_cap.calls",
            ),
            (
                json!({"frequency_cap": {"calls": 2}}),
                "frequency_cap.period_s",
            ),
            (
                json!({"calling_hours": {"strategy": "weekly", "args": {"mon": [["09:00", "12:00"], ["11:00", "13:00"]]}}}),
                "calling_hours",
            ),
        ];
        for (v, field) in cases {
            assert_eq!(err(v.clone()).field, field, "{v}");
        }
    }

    #[test]
    fn how_a_dial_ended_decides_its_outcome() {
        let f = |call_status, sip_code| AttemptFacts {
            call_status,
            sip_code,
            ..Default::default()
        };
        let cases = [
            (f(Some("busy"), Some(486)), Outcome::Busy),
            (f(Some("busy"), Some(600)), Outcome::Busy),
            (f(Some("no_answer"), Some(480)), Outcome::NoAnswer),
            (f(Some("rejected"), Some(603)), Outcome::Declined),
            (f(Some("rejected"), Some(404)), Outcome::Failed),
            (f(Some("failed"), Some(503)), Outcome::Failed),
            (f(None, None), Outcome::Failed),
            (f(Some("canceled"), Some(487)), Outcome::Canceled),
            (f(Some("answered"), Some(200)), Outcome::Completed),
        ];
        for (facts, want) in cases {
            assert_eq!(Outcome::of(&facts, 5), want, "{facts:?}");
        }
        let answered = AttemptFacts {
            call_status: Some("answered"),
            sip_code: Some(200),
            ..Default::default()
        };
        let machine = AttemptFacts {
            machine: true,
            ..answered
        };
        assert_eq!(Outcome::of(&machine, 5), Outcome::Voicemail);
        let left = AttemptFacts {
            remote_hangup: true,
            talk_secs: 3,
            ..answered
        };
        assert_eq!(Outcome::of(&left, 5), Outcome::Dropped);
        assert_eq!(Outcome::of(&left, 0), Outcome::Completed);
        let hung_up_by_bot = AttemptFacts {
            talk_secs: 3,
            ..answered
        };
        assert_eq!(Outcome::of(&hung_up_by_bot, 5), Outcome::Completed);
        let opt_out = AttemptFacts {
            opted_out: true,
            remote_hangup: true,
            ..answered
        };
        assert_eq!(Outcome::of(&opt_out, 5), Outcome::OptedOut);
        let no = AttemptFacts {
            declined: true,
            ..answered
        };
        assert_eq!(Outcome::of(&no, 5), Outcome::Declined);
    }
}
