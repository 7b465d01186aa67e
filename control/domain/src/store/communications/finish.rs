//! How a call ended, as its owner writes it: [`CallFinish`] and its constructors for the
//! ways a call ends, and the consent a scenario records.

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
    value.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "yes" | "1"))
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
