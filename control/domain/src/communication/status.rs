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
    /// Waiting to be dialled: `new`, `queued`.
    pub const WAITING: &'static [Self] = &[Self::New, Self::Queued];
    /// Claimed by a dialer and not ended: `dialing`, `in_progress`.
    pub const LIVE: &'static [Self] = &[Self::Dialing, Self::InProgress];
    /// Not ended: waiting or live.
    pub const OPEN: &'static [Self] = &[Self::New, Self::Queued, Self::Dialing, Self::InProgress];
    /// Ended one way or another: no further change.
    pub const FINAL: &'static [Self] = &[
        Self::Completed,
        Self::Failed,
        Self::Canceled,
        Self::Interrupted,
    ];

    /// No further change: the communication has ended one way or another.
    pub fn is_final(self) -> bool {
        Self::FINAL.contains(&self)
    }
}

/// A group of statuses written as the items of an SQL `IN (…)` list (`'new', 'queued'`),
/// so the store's statements name the groups above instead of restating them.
#[derive(Debug, Clone, Copy)]
pub struct SqlList(pub &'static [CommunicationStatus]);

impl std::fmt::Display for SqlList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "'{}'", s.as_str())?;
        }
        Ok(())
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
    fn groups_are_written_as_sql_lists() {
        assert_eq!(
            SqlList(CommunicationStatus::WAITING).to_string(),
            "'new', 'queued'"
        );
        assert_eq!(
            SqlList(CommunicationStatus::LIVE).to_string(),
            "'dialing', 'in_progress'"
        );
        assert_eq!(
            SqlList(CommunicationStatus::OPEN).to_string(),
            "'new', 'queued', 'dialing', 'in_progress'"
        );
        assert_eq!(
            SqlList(CommunicationStatus::FINAL).to_string(),
            "'completed', 'failed', 'canceled', 'interrupted'"
        );
        // Every status is open or final, never both.
        for s in CommunicationStatus::ALL {
            assert_ne!(CommunicationStatus::OPEN.contains(s), s.is_final(), "{s}");
        }
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
