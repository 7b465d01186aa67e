//! How the dialer applies a strategy at the end of an attempt: the attempt's outcome from
//! the call's end, then [`policy::next_attempt`] over the communication's earlier
//! attempts, the recipient's zones and the account's recent dials to the number. Pure: the
//! engine reads the records and writes the decision with the attempt
//! ([`crate::store::communications::CallFinish::retry_at`]).

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;

use super::policy::{self, Attempt, Next, Situation};
use super::{AttemptFacts, Outcome, Strategy};
use crate::schedule::CallingSchedule;
use crate::store::communications::{CallFinish, CommunicationAttempt};

/// The facts of an attempt as its end is written.
pub fn facts(f: &CallFinish) -> AttemptFacts<'_> {
    let talk_secs = f.duration.max(0) as u64;
    AttemptFacts {
        call_status: f.call_status.as_deref(),
        sip_code: f.sip_code.and_then(|c| u16::try_from(c).ok()),
        machine: f.amd.as_deref() == Some("machine"),
        talk_secs,
        remote_hangup: f.end_reason.as_deref() == Some("hung_up"),
        opted_out: f.opted_out,
        declined: f.declined,
    }
}

/// The zones the calling hours are read in for `recipient`: the number's, else the
/// strategy's `fallback_timezone`, else `agent_tz`.
pub fn zones(strategy: &Strategy, recipient: &str, agent_tz: Tz) -> Vec<Tz> {
    match crate::recipient_zones::zones_for_number(recipient) {
        Ok(z) if !z.is_empty() => z.to_vec(),
        _ => vec![strategy.fallback_timezone.unwrap_or(agent_tz)],
    }
}

/// What one communication looks like to the policy.
pub struct Communication<'a> {
    pub created_at: DateTime<Utc>,
    pub scheduled_at: Option<DateTime<Utc>>,
    /// The attempts stored before this one, oldest first.
    pub earlier: &'a [CommunicationAttempt],
    pub zones: &'a [Tz],
    /// The account's dials to the number within the cap's period (this attempt's
    /// included: it is not stored yet, so the caller adds it).
    pub recent_dials: &'a [DateTime<Utc>],
}

/// The earliest dial a strategy's frequency cap looks back to from `now`.
pub fn cap_since(strategy: &Strategy, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    strategy
        .frequency_cap
        .map(|c| now - Duration::seconds(c.period_s as i64))
}

/// The outcome of the attempt that ended with `f` at `now` and when to dial again (None:
/// the communication is done, the result is delivered).
pub fn after_attempt(
    strategy: &Strategy,
    c: &Communication<'_>,
    f: &CallFinish,
    now: DateTime<Utc>,
) -> (Outcome, Option<DateTime<Utc>>) {
    let outcome = Outcome::of(&facts(f), strategy.dropped_early_s);
    let mut attempts: Vec<Attempt> = c
        .earlier
        .iter()
        .filter_map(|a| {
            Some(Attempt {
                ended_at: a.ended_at,
                outcome: Outcome::from_name(a.outcome.as_deref()?)?,
            })
        })
        .collect();
    attempts.push(Attempt {
        ended_at: now,
        outcome,
    });
    let s = Situation {
        created_at: c.created_at,
        not_before: c.scheduled_at.unwrap_or(c.created_at),
        attempts: &attempts,
        zones: c.zones,
        recent_dials: c.recent_dials,
        suppressed: false,
        now,
    };
    match policy::next_attempt(strategy, &s) {
        Next::DialAt(t) => (outcome, Some(t)),
        Next::Finish(_) => (outcome, None),
    }
}

/// Right before a claimed communication is dialled: [`Next::DialAt`] `now` when it may be
/// dialled now; a later time when the recipient's calling hours are closed or the
/// account's dials to the number fill the frequency cap (the row is released, due then,
/// with no dial); [`Next::Finish`] when the hours never open again or the communication
/// is older than `max_age_s`. The same rule [`after_attempt`] applies to a retry's time.
pub fn before_dial(strategy: &Strategy, c: &Communication<'_>, now: DateTime<Utc>) -> Next {
    let s = Situation {
        created_at: c.created_at,
        not_before: now,
        attempts: &[],
        zones: c.zones,
        recent_dials: c.recent_dials,
        suppressed: false,
        now,
    };
    policy::next_attempt(strategy, &s)
}

/// When a communication's dispatch `schedule` (read in `tz`, the communication's zone)
/// next lets a dial start, at or after `now`; a schedule with no window within its
/// horizon is looked at again a day later, as an agent's is.
pub fn dispatch_schedule_opens(
    schedule: &CallingSchedule,
    tz: Tz,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    crate::schedule::next_allowed(schedule, tz, now).unwrap_or(now + Duration::days(1))
}

/// Right before a dial of a communication with a dispatch `schedule` (and its zone), a
/// `strategy` (and what the policy reads), or both: [`Next::DialAt`] the first instant at
/// or after `now` when the dispatch schedule is open and the strategy lets it dial (its
/// calling hours in every recipient zone, its frequency cap; [`before_dial`]), or the
/// strategy's [`Next::Finish`] (also `NoCallingHours` when the two never overlap).
/// Neither: `now`.
pub fn when_to_dial(
    schedule: Option<(&CallingSchedule, Tz)>,
    strategy: Option<(&Strategy, &Communication<'_>)>,
    now: DateTime<Utc>,
) -> Next {
    let mut t = now;
    // Each round moves `t` forward to where one of the two opens; two that never overlap
    // (within the schedules' horizon) never let it dial.
    let horizon = now + Duration::days(crate::schedule::HORIZON_DAYS);
    while t <= horizon {
        let open = match schedule {
            Some((s, tz)) => dispatch_schedule_opens(s, tz, t),
            None => t,
        };
        let allowed = match strategy {
            Some((st, c)) => match before_dial(st, c, open) {
                Next::DialAt(at) => at,
                finish => return finish,
            },
            None => open,
        };
        if allowed == t {
            return Next::DialAt(t);
        }
        t = allowed;
    }
    Next::Finish(super::policy::Finish::NoCallingHours)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::communications::CommunicationStatus;
    use crate::strategy::policy::Finish;
    use serde_json::json;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn ended(call_status: &str, sip: i64) -> CallFinish {
        CallFinish {
            call_status: Some(call_status.into()),
            sip_code: Some(sip),
            ..CallFinish::new(CommunicationStatus::Completed)
        }
    }

    fn attempt(n: i64, at: &str, outcome: &str) -> CommunicationAttempt {
        CommunicationAttempt {
            n,
            started_at: Some(utc(at)),
            ended_at: utc(at),
            from_number: "+15550100".into(),
            trunk: None,
            sip_code: None,
            call_status: None,
            end_reason: None,
            amd: None,
            outcome: Some(outcome.into()),
        }
    }

    fn comm<'a>(earlier: &'a [CommunicationAttempt], zones: &'a [Tz]) -> Communication<'a> {
        Communication {
            created_at: utc("2026-11-20T10:00:00Z"),
            scheduled_at: None,
            earlier,
            zones,
            recent_dials: &[],
        }
    }

    #[test]
    fn a_busy_line_is_retried_after_the_delay_then_finishes_when_the_rule_is_used_up() {
        let st =
            Strategy::parse(&json!({"retry": {"busy": {"attempts": 1, "delay_s": 2}}})).unwrap();
        let now = utc("2026-11-20T10:00:10Z");
        let (o, at) = after_attempt(&st, &comm(&[], &[]), &ended("busy", 486), now);
        assert_eq!(o, Outcome::Busy);
        assert_eq!(at, Some(utc("2026-11-20T10:00:12Z")));
        let one = [attempt(1, "2026-11-20T10:00:10Z", "busy")];
        let (o, at) = after_attempt(&st, &comm(&one, &[]), &ended("busy", 486), now);
        assert_eq!((o, at), (Outcome::Busy, None), "one retry of busy only");
        let (o, at) = after_attempt(&st, &comm(&one, &[]), &ended("answered", 200), now);
        assert_eq!((o, at), (Outcome::Completed, None));
    }

    #[test]
    fn a_decline_is_never_retried_even_with_rules_for_everything() {
        let st = Strategy::parse(&json!({"retry": {
            "busy": {"attempts": 5, "delay_s": 1}, "failed": {"attempts": 5, "delay_s": 1},
            "no_answer": {"attempts": 5, "delay_s": 1}}}))
        .unwrap();
        let now = utc("2026-11-20T10:00:10Z");
        let (o, at) = after_attempt(&st, &comm(&[], &[]), &ended("rejected", 603), now);
        assert_eq!((o, at), (Outcome::Declined, None));
        let (o, at) = after_attempt(&st, &comm(&[], &[]), &ended("failed", 503), now);
        assert_eq!(o, Outcome::Failed);
        assert!(at.is_some());
    }

    #[test]
    fn an_in_call_opt_out_or_no_is_never_retried_even_when_the_line_is_a_voicemail() {
        let st = Strategy::parse(&json!({"retry": {
            "voicemail": {"attempts": 5, "delay_s": 1}, "dropped": {"attempts": 5, "delay_s": 1}}}))
        .unwrap();
        let now = utc("2026-11-20T10:00:10Z");
        let mut f = ended("answered", 200);
        f.amd = Some("machine".into());
        let (o, at) = after_attempt(&st, &comm(&[], &[]), &f, now);
        assert_eq!(o, Outcome::Voicemail);
        assert!(at.is_some(), "a voicemail is retried by its rule");
        f.opted_out = true;
        let (o, at) = after_attempt(&st, &comm(&[], &[]), &f, now);
        assert_eq!((o, at), (Outcome::OptedOut, None));
        f.opted_out = false;
        f.declined = true;
        let (o, at) = after_attempt(&st, &comm(&[], &[]), &f, now);
        assert_eq!((o, at), (Outcome::Declined, None));
        assert_eq!(Outcome::OptedOut.name(), "opted_out");
    }

    #[test]
    fn a_machine_verdict_is_voicemail_and_an_early_hangup_is_dropped() {
        let st = Strategy::parse(&json!({"dropped_early_s": 5})).unwrap();
        let mut f = ended("answered", 200);
        f.amd = Some("machine".into());
        f.duration = 30;
        assert_eq!(
            Outcome::of(&facts(&f), st.dropped_early_s),
            Outcome::Voicemail
        );
        f.amd = Some("human".into());
        f.duration = 2;
        f.end_reason = Some("hung_up".into());
        assert_eq!(
            Outcome::of(&facts(&f), st.dropped_early_s),
            Outcome::Dropped
        );
    }

    #[test]
    fn a_dispatch_schedule_and_the_strategys_hours_must_both_be_open() {
        let weekly = |args: serde_json::Value| CallingSchedule::parse("weekly", &args).unwrap();
        let berlin = chrono_tz::Europe::Berlin;
        // The dispatch's schedule: Saturdays 10:00-14:00 in the communication's zone.
        let saturday = weekly(json!({"sat": [["10:00", "14:00"]]}));
        // Friday 2026-11-20 10:00Z: closed until Saturday 10:00 Berlin (09:00Z).
        let fri = utc("2026-11-20T10:00:00Z");
        let sat_open = utc("2026-11-21T09:00:00Z");
        assert_eq!(dispatch_schedule_opens(&saturday, berlin, fri), sat_open);
        assert_eq!(
            when_to_dial(Some((&saturday, berlin)), None, fri),
            Next::DialAt(sat_open)
        );
        let inside = utc("2026-11-21T12:00:00Z");
        assert_eq!(
            when_to_dial(Some((&saturday, berlin)), None, inside),
            Next::DialAt(inside)
        );
        // A strategy whose hours in the recipient's zone (New York) open at 09:00 local,
        // 14:00Z: with a schedule until 20:00 Berlin (19:00Z) both are open from 14:00Z.
        let st = Strategy::parse(&json!({"calling_hours": {"strategy": "weekly", "args": {
            "sat": [["09:00", "18:00"]], "sun": [["09:00", "18:00"]]}}}))
        .unwrap();
        let ny = [chrono_tz::America::New_York];
        let c = comm(&[], &ny);
        let long_saturday = weekly(json!({"sat": [["10:00", "20:00"]]}));
        assert_eq!(
            when_to_dial(Some((&long_saturday, berlin)), Some((&st, &c)), fri),
            Next::DialAt(utc("2026-11-21T14:00:00Z"))
        );
        // Until 14:00 Berlin (13:00Z) they never overlap: no dial, ever.
        assert_eq!(
            when_to_dial(Some((&saturday, berlin)), Some((&st, &c)), fri),
            Next::Finish(Finish::NoCallingHours)
        );
        // Neither: now.
        assert_eq!(when_to_dial(None, None, fri), Next::DialAt(fri));
    }

    #[test]
    fn calling_hours_are_read_in_the_recipients_zone() {
        let st = Strategy::parse(&json!({
            "calling_hours": {"strategy": "weekly", "args": {
                "mon": [["09:00", "18:00"]], "tue": [["09:00", "18:00"]], "wed": [["09:00", "18:00"]],
                "thu": [["09:00", "18:00"]], "fri": [["09:00", "18:00"]]}}}))
        .unwrap();
        let berlin = [chrono_tz::Europe::Berlin];
        let c = comm(&[], &berlin);
        // Friday 2026-11-20 07:00 UTC is 08:00 in Berlin: closed until 09:00 local.
        assert_eq!(
            before_dial(&st, &c, utc("2026-11-20T07:00:00Z")),
            Next::DialAt(utc("2026-11-20T08:00:00Z"))
        );
        let open = utc("2026-11-20T09:00:00Z");
        assert_eq!(before_dial(&st, &c, open), Next::DialAt(open));
        let always = Strategy::parse(&json!({})).unwrap();
        let night = utc("2026-11-20T03:00:00Z");
        assert_eq!(before_dial(&always, &c, night), Next::DialAt(night));
        // Two dials in the last hour fill a cap of two an hour: the next waits for the
        // older one to leave the period.
        let capped =
            Strategy::parse(&json!({"frequency_cap": {"calls": 2, "period_s": 3600}})).unwrap();
        let dials = [utc("2026-11-20T08:30:00Z"), utc("2026-11-20T08:50:00Z")];
        let c = Communication {
            recent_dials: &dials,
            ..comm(&[], &berlin)
        };
        assert_eq!(
            before_dial(&capped, &c, open),
            Next::DialAt(utc("2026-11-20T09:30:00Z"))
        );
        // A number without a zone falls back to the strategy's zone, then the agent's.
        assert_eq!(zones(&always, "+", chrono_tz::UTC), vec![chrono_tz::UTC]);
    }
}
