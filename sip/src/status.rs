//! The call_status vocabulary and how SIP outcomes map onto it. Pure, documented in the
//! crate README: the engine stores these strings in a communication's `call_status`.

use serde::{Deserialize, Serialize};

/// How a call leg ended, from the caller's point of view.
///
/// | value | meaning | typical SIP |
/// |---|---|---|
/// | `answered` | the leg was answered (then ended by either side) | 2xx |
/// | `busy` | the callee was busy | 486, 600 |
/// | `no_answer` | rang without answer: peer timeout or our ring timeout (CANCEL sent) | 408, 480, 487 after ring timeout |
/// | `rejected` | the far end refused the call | 403, 404, 410, 484, 488, 603, 604, 606, 401/407 after one answered challenge |
/// | `failed` | the call could not be set up: server errors, no response, transport error | 5xx, other 4xx, local errors |
/// | `canceled` | canceled before answer by our side (hangup) or, inbound, by the caller's CANCEL | 487 |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Answered,
    Busy,
    NoAnswer,
    Rejected,
    Failed,
    Canceled,
}

impl CallStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Answered => "answered",
            CallStatus::Busy => "busy",
            CallStatus::NoAnswer => "no_answer",
            CallStatus::Rejected => "rejected",
            CallStatus::Failed => "failed",
            CallStatus::Canceled => "canceled",
        }
    }

    /// Map a final response to an outbound INVITE. `ring_timeout_fired` tells whether
    /// a 487 is the answer to our own ring-timeout CANCEL (no_answer) or to a hangup
    /// the engine asked for (canceled).
    pub fn from_final_response(code: u16, cancel: Option<CancelCause>) -> CallStatus {
        match code {
            200..=299 => CallStatus::Answered,
            486 | 600 => CallStatus::Busy,
            408 | 480 => CallStatus::NoAnswer,
            487 => match cancel {
                Some(CancelCause::RingTimeout) => CallStatus::NoAnswer,
                _ => CallStatus::Canceled,
            },
            401 | 403 | 404 | 407 | 410 | 484 | 488 | 603 | 604 | 606 => CallStatus::Rejected,
            _ => CallStatus::Failed,
        }
    }
}

impl std::fmt::Display for CallStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why we sent a CANCEL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelCause {
    /// The ring timeout of the outbound call expired.
    RingTimeout,
    /// The engine hung up before answer.
    Hangup,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_table() {
        let cases = [
            (200, None, CallStatus::Answered),
            (486, None, CallStatus::Busy),
            (600, None, CallStatus::Busy),
            (480, None, CallStatus::NoAnswer),
            (408, None, CallStatus::NoAnswer),
            (487, Some(CancelCause::RingTimeout), CallStatus::NoAnswer),
            (487, Some(CancelCause::Hangup), CallStatus::Canceled),
            (487, None, CallStatus::Canceled),
            (403, None, CallStatus::Rejected),
            (603, None, CallStatus::Rejected),
            (488, None, CallStatus::Rejected),
            (500, None, CallStatus::Failed),
            (503, None, CallStatus::Failed),
            (420, None, CallStatus::Failed),
        ];
        for (code, cause, want) in cases {
            assert_eq!(CallStatus::from_final_response(code, cause), want, "{code}");
        }
        assert_eq!(CallStatus::NoAnswer.as_str(), "no_answer");
        assert_eq!(serde_json_like(CallStatus::NoAnswer), "no_answer");
    }

    fn serde_json_like(s: CallStatus) -> String {
        s.to_string()
    }
}
