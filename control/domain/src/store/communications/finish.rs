//! How a call ended, as its owner writes it: [`CallFinish`] and its constructors for the
//! ways a call ends, and what a scenario records in its reserved variables: consent, an
//! opt-out, an explicit "no".

use callsmith_sip::CallStatus;
use chrono::{DateTime, Utc};

use super::CommunicationStatus;

/// The scenario variable that records the callee's personal-data recording consent: when
/// it holds a yes-value at the end of the call (`true`, `yes`, `1`, any case; see
/// [`consent_granted`]), the communication's `consent_granted` is set. A scenario asks for
/// consent (a question) and sets it with an `assignment` brick; nothing else sets it.
pub const CONSENT_VARIABLE: &str = "consent_granted";

/// Whether a value of [`CONSENT_VARIABLE`] grants consent.
pub fn consent_granted(value: Option<&str>) -> bool {
    is_yes(value)
}

/// A reserved variable's yes-value: `true`, `yes` or `1`, any case, spaces around ignored.
fn is_yes(value: Option<&str>) -> bool {
    value.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "yes" | "1"))
}

/// The in-call opt-out (docs/strategies.md, "In-call opt-out and an explicit no"): the
/// scenario variable that, holding a yes-value at the end of the call, or the `signal` of
/// the `end_call` brick that ended it, says the recipient asked not to be called again.
/// The number is then added to the account's do-not-call list (source `opt_out`) and the
/// attempt is `opted_out`, never retried.
pub const OPT_OUT: &str = "opt_out";

/// The explicit "no": the scenario variable (a yes-value) or `end_call` signal that says
/// the recipient declined; the attempt is `declined`, never retried, and the number is
/// not listed.
pub const DECLINED: &str = "declined";

/// What the scenario said about calling the recipient again, read when the call ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScenarioVerdict {
    /// The recipient opted out ([`OPT_OUT`]).
    pub opted_out: bool,
    /// The recipient said an explicit "no" ([`DECLINED`]).
    pub declined: bool,
}

impl ScenarioVerdict {
    /// The verdict of a call that ended with `variable` (the scenario variables' values by
    /// name) and, when an `end_call` brick ended it, its rendered `end_signal`. The signal
    /// is compared without case and surrounding spaces.
    pub fn of<'a>(
        variable: impl Fn(&str) -> Option<&'a str>,
        end_signal: Option<&str>,
    ) -> ScenarioVerdict {
        let signal = end_signal.map(|s| s.trim().to_ascii_lowercase());
        let said = |name: &str| is_yes(variable(name)) || signal.as_deref() == Some(name);
        ScenarioVerdict {
            opted_out: said(OPT_OUT),
            declined: said(DECLINED),
        }
    }
}

/// How a call ended, written by its owner.
#[derive(Debug, Clone)]
pub struct CallFinish {
    pub communication_status: CommunicationStatus,
    /// How the leg ended (`callsmith_sip::CallStatus` names); none when no call was placed.
    pub call_status: Option<String>,
    pub sip_code: Option<i64>,
    pub duration: i64,
    pub goals: Vec<String>,
    /// JSON object text of the variables at the end of the call.
    pub variables: String,
    pub history_path: Option<String>,
    pub recording_path: Option<String>,
    pub end_reason: Option<String>,
    pub error: Option<String>,
    pub answered_at: Option<DateTime<Utc>>,
    /// The callee granted personal-data recording consent ([`CONSENT_VARIABLE`]).
    pub consent_granted: bool,
    /// The recipient opted out during the call ([`OPT_OUT`]).
    pub opted_out: bool,
    /// The recipient said an explicit "no" during the call ([`DECLINED`]).
    pub declined: bool,
    /// The answering-machine detector's verdict (`human`, `machine`), when it ran.
    pub amd: Option<String>,
    /// The attempt's outcome as the communication's strategy sees it
    /// ([`crate::strategy::Outcome::name`]).
    pub outcome: Option<String>,
    /// The strategy dials again at this time: the same write that stores the attempt
    /// puts the row back to `queued`, due then, unclaimed, and queues no result delivery.
    pub retry_at: Option<DateTime<Utc>>,
}

impl CallFinish {
    /// An end with this status and nothing else known yet (no call status, no variables,
    /// no goals); the caller fills in what it knows.
    pub fn new(communication_status: CommunicationStatus) -> CallFinish {
        CallFinish {
            communication_status,
            call_status: None,
            sip_code: None,
            duration: 0,
            goals: Vec::new(),
            variables: "{}".into(),
            history_path: None,
            recording_path: None,
            end_reason: None,
            error: None,
            answered_at: None,
            consent_granted: false,
            opted_out: false,
            declined: false,
            amd: None,
            outcome: None,
            retry_at: None,
        }
    }

    /// A call that could not be placed (the INVITE could not go out): `failed`, call
    /// status `failed`, `error` says why.
    pub fn not_placed(error: String) -> CallFinish {
        CallFinish {
            call_status: Some(CallStatus::Failed.as_str().into()),
            error: Some(error),
            ..CallFinish::new(CommunicationStatus::Failed)
        }
    }

    /// A call whose leg ended before an answer: `completed` with how the leg ended
    /// (`call_status`, `sip_code`) and `end_reason` (`not_answered`, or why the engine
    /// gave up on it).
    pub fn not_answered(
        call_status: CallStatus,
        sip_code: Option<u16>,
        end_reason: &str,
    ) -> CallFinish {
        CallFinish {
            call_status: Some(call_status.as_str().into()),
            sip_code: sip_code.map(i64::from),
            end_reason: Some(end_reason.into()),
            ..CallFinish::new(CommunicationStatus::Completed)
        }
    }

    /// An answered call at its end: `completed`, call status `answered`, SIP 200, answered
    /// at `answered_at`; the caller adds what the call did (duration, goals, variables,
    /// the saved objects, the end reason).
    pub fn answered(answered_at: DateTime<Utc>) -> CallFinish {
        CallFinish {
            call_status: Some(CallStatus::Answered.as_str().into()),
            sip_code: Some(200),
            answered_at: Some(answered_at),
            ..CallFinish::new(CommunicationStatus::Completed)
        }
    }
}

/// The end reason of a call whose leg ended before an answer.
pub const NOT_ANSWERED: &str = "not_answered";

/// The end reason of an answered call whose engine was lost (its heartbeat stopped) and
/// that a peer ended with a BYE from the dialog stored at the answer (`interrupted`).
pub const NODE_LOST: &str = "node_lost";

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(vars: &[(&str, &str)], signal: Option<&str>) -> ScenarioVerdict {
        ScenarioVerdict::of(
            |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| *v),
            signal,
        )
    }

    #[test]
    fn an_opt_out_or_a_no_is_a_yes_valued_variable_or_the_end_call_signal() {
        let opted = ScenarioVerdict {
            opted_out: true,
            declined: false,
        };
        let declined = ScenarioVerdict {
            opted_out: false,
            declined: true,
        };
        assert_eq!(verdict(&[("opt_out", "true")], None), opted);
        assert_eq!(verdict(&[("opt_out", " YES ")], None), opted);
        assert_eq!(verdict(&[("opt_out", "1")], Some("done")), opted);
        assert_eq!(verdict(&[], Some("opt_out")), opted);
        assert_eq!(verdict(&[], Some(" Opt_Out ")), opted);
        assert_eq!(verdict(&[("declined", "true")], None), declined);
        assert_eq!(verdict(&[], Some("declined")), declined);
        // Anything else says nothing.
        for (vars, signal) in [
            (&[("opt_out", "false")][..], None),
            (&[("opt_out", "no")], Some("done")),
            (&[("optout", "true")], Some("opt-out")),
            (&[("declined", "")], Some("")),
        ] {
            assert_eq!(
                verdict(vars, signal),
                ScenarioVerdict::default(),
                "{vars:?} {signal:?}"
            );
        }
    }
}
