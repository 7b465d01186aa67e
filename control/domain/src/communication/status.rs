//! The `communication_status` vocabulary: where a communication is in its life. Stored as
//! its snake_case name (the same text the API shows and filters on).

use crate::text_enum::text_enum;

text_enum!(
    "communication status",
    /// Where a communication is in its life (documented in docs/communications.md).
    ///
    /// `new` → (`queued` ⇄ `new`) → `dialing` → `in_progress` → `completed`; a call that
    /// could not be attempted ends `failed`, one canceled before it was dialled ends
    /// `canceled`, and one whose engine stopped while it was live ends `interrupted`.
    pub enum CommunicationStatus {
        /// Created, waiting for its due time and a dialer.
        New = "new",
        /// Deferred by the agent's calling schedule (or an inactive agent) to `due_at`.
        Queued = "queued",
        /// Claimed by a dialer; the INVITE is (about to be) sent.
        Dialing = "dialing",
        /// Answered; the scenario runs.
        InProgress = "in_progress",
        /// The call attempt ended (see `call_status` for how: answered, busy, no_answer…).
        Completed = "completed",
        /// The call could not be attempted (no trunk, no number, no scenario version…);
        /// `error` says why.
        Failed = "failed",
        /// Canceled before it was dialled.
        Canceled = "canceled",
        /// The engine owning the live call stopped (crash); the call is not redialled.
        Interrupted = "interrupted",
    }
);

impl CommunicationStatus {
    /// No further change: the communication has ended one way or another.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Canceled | Self::Interrupted
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_json() {
        for &s in CommunicationStatus::ALL {
            assert_eq!(s.as_str().parse::<CommunicationStatus>(), Ok(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        let err = "done".parse::<CommunicationStatus>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown communication status \"done\": one of new, queued, dialing, in_progress, completed, failed, canceled, interrupted"
        );
    }

    #[test]
    fn final_statuses() {
        let finals: Vec<_> = CommunicationStatus::ALL
            .iter()
            .filter(|s| s.is_final())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(finals, ["completed", "failed", "canceled", "interrupted"]);
    }
}
