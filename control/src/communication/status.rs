//! The `communication_status` vocabulary: where a communication is in its life. Stored as
//! its snake_case name (the same text the API shows and filters on).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where a communication is in its life (documented in docs/communications.md).
///
/// `new` → (`queued` ⇄ `new`) → `dialing` → `in_progress` → `completed`; a call that could
/// not be attempted ends `failed`, one canceled before it was dialled ends `canceled`, and
/// one whose engine stopped while it was live ends `interrupted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CommunicationStatus {
    /// Created, waiting for its due time and a dialer.
    New,
    /// Deferred by the agent's calling schedule (or an inactive agent) to `due_at`.
    Queued,
    /// Claimed by a dialer; the INVITE is (about to be) sent.
    Dialing,
    /// Answered; the scenario runs.
    InProgress,
    /// The call attempt ended (see `call_status` for how: answered, busy, no_answer…).
    Completed,
    /// The call could not be attempted (no trunk, no number, no scenario version…);
    /// `error` says why.
    Failed,
    /// Canceled before it was dialled.
    Canceled,
    /// The engine owning the live call stopped (crash); the call is not redialled.
    Interrupted,
}

impl CommunicationStatus {
    pub const ALL: [CommunicationStatus; 8] = [
        Self::New,
        Self::Queued,
        Self::Dialing,
        Self::InProgress,
        Self::Completed,
        Self::Failed,
        Self::Canceled,
        Self::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Queued => "queued",
            Self::Dialing => "dialing",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Canceled => "canceled",
            Self::Interrupted => "interrupted",
        }
    }

    /// No further change: the communication has ended one way or another.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Canceled | Self::Interrupted
        )
    }

    /// Every value, comma-separated (for error messages and docs).
    pub fn names() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }
}

impl fmt::Display for CommunicationStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A text that is not a communication status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownStatus(pub String);

impl fmt::Display for UnknownStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown communication status {:?}: one of {}",
            self.0,
            CommunicationStatus::names()
        )
    }
}

impl std::error::Error for UnknownStatus {}

impl FromStr for CommunicationStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_string()))
    }
}

impl<DB: sqlx::Database> sqlx::Type<DB> for CommunicationStatus
where
    String: sqlx::Type<DB>,
{
    fn type_info() -> DB::TypeInfo {
        <String as sqlx::Type<DB>>::type_info()
    }

    fn compatible(ty: &DB::TypeInfo) -> bool {
        <String as sqlx::Type<DB>>::compatible(ty)
    }
}

impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for CommunicationStatus
where
    String: sqlx::Decode<'r, DB>,
{
    fn decode(value: DB::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let text = <String as sqlx::Decode<'r, DB>>::decode(value)?;
        Ok(text.parse()?)
    }
}

impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for CommunicationStatus
where
    &'static str: sqlx::Encode<'q, DB>,
{
    fn encode_by_ref(
        &self,
        buf: &mut <DB as sqlx::Database>::ArgumentBuffer,
    ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
        <&'static str as sqlx::Encode<'q, DB>>::encode(self.as_str(), buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_json() {
        for s in CommunicationStatus::ALL {
            assert_eq!(s.as_str().parse::<CommunicationStatus>(), Ok(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        let err = "done".parse::<CommunicationStatus>().unwrap_err();
        assert!(err.to_string().contains("in_progress"), "{err}");
    }

    #[test]
    fn final_statuses() {
        let finals: Vec<_> = CommunicationStatus::ALL
            .into_iter()
            .filter(|s| s.is_final())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(finals, ["completed", "failed", "canceled", "interrupted"]);
    }
}
