//! The Communication resource as the API shows it and result deliveries POST it (one
//! shape for both, built from the stored record).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::CommunicationRecord;

pub mod caller;
pub mod history;
pub mod report;
pub mod service;
pub mod statistics;
mod status;
pub use status::{CommunicationStatus, SqlList};

/// A communication (one call, outbound or inbound).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Communication {
    pub id: String,
    pub account_sid: String,
    /// The agent that dialled (or answered) it; null for a scenario test call.
    pub agent_sid: Option<String>,
    pub scenario_sid: String,
    /// Published scenario version run; null when a draft ran.
    pub version: Option<i64>,
    /// Frozen draft version run; null when a published version ran.
    pub draft_version: Option<i64>,
    pub recipient: String,
    /// Caller id of the call ("" until the dialer picked a pool number).
    pub from_number: String,
    /// `outbound` or `inbound`.
    pub direction: String,
    pub communication_status: CommunicationStatus,
    /// How the call leg ended: answered, busy, no_answer, rejected, failed, canceled; null before.
    pub call_status: Option<String>,
    /// Final SIP response code behind call_status, when there was one.
    pub sip_code: Option<i64>,
    /// Seconds from answer to hang-up; 0 until the call completes.
    pub duration: i64,
    /// Goals reached, in order.
    pub goals: Vec<String>,
    /// The last goal reached, null when none.
    pub goal: Option<String>,
    /// Scenario variables at the end of the call.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub variables: Value,
    /// The dispatch data (agent path).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: Value,
    pub timezone: String,
    pub is_test: bool,
    /// The dispatch batch (`bat_…`) the communication was dispatched in (a legacy
    /// attempt's calls carry the attempt's); null for inbound and browser calls.
    pub batch_sid: Option<String>,
    /// The communication strategy it follows (the dispatch's `strategy_sid`, else its
    /// agent's default at dispatch); null: none (docs/strategies.md).
    pub strategy_sid: Option<String>,
    /// The callee granted personal-data recording consent during the call: the scenario
    /// variable `consent_granted` held `true`/`yes`/`1` at the end (docs/communications.md).
    pub consent_granted: bool,
    pub has_recording: bool,
    pub has_history: bool,
    /// Why the scenario stopped (end, end_call, hung_up, …); null before the end.
    pub end_reason: Option<String>,
    /// Why the communication failed or was interrupted; null otherwise.
    pub error: Option<String>,
    pub scheduled_at: Option<DateTime<Utc>>,
    /// The dispatch's own calling schedule (agent path), followed instead of the agent's
    /// `calling_schedule`, read in `timezone`; null: the agent's applies
    /// (docs/strategies.md, "The dispatch's schedule").
    pub schedule: Option<crate::agent_settings::Schedule>,
    /// When the dialer looks at it next (scheduled_at, the next window of its calling
    /// schedule (the dispatch's `schedule`, else the agent's), or
    /// its strategy's next attempt or next allowed time; docs/strategies.md).
    pub due_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub answered_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&CommunicationRecord> for Communication {
    fn from(c: &CommunicationRecord) -> Self {
        let goals = c.goal_list();
        Communication {
            id: c.sid.clone(),
            account_sid: c.account_sid.clone(),
            agent_sid: c.agent_sid.clone(),
            scenario_sid: c.scenario_sid.clone(),
            version: c.version,
            draft_version: c.draft_version,
            recipient: c.recipient.clone(),
            from_number: c.from_number.clone(),
            direction: c.direction.clone(),
            communication_status: c.communication_status,
            call_status: c.call_status.clone(),
            sip_code: c.sip_code,
            duration: c.duration,
            goal: goals.last().cloned(),
            goals,
            variables: serde_json::from_str(&c.variables)
                .unwrap_or_else(|_| Value::Object(Default::default())),
            data: serde_json::from_str(&c.data)
                .unwrap_or_else(|_| Value::Object(Default::default())),
            timezone: c.timezone.clone(),
            is_test: c.is_test,
            batch_sid: c.batch_sid.clone(),
            strategy_sid: c.strategy_sid.clone(),
            consent_granted: c.consent_granted,
            has_recording: c.has_recording,
            has_history: c.has_history,
            end_reason: c.end_reason.clone(),
            error: c.error.clone(),
            scheduled_at: c.scheduled_at,
            schedule: c
                .schedule
                .as_deref()
                .and_then(|s| serde_json::from_str(s).ok()),
            due_at: c.due_at,
            started_at: c.started_at,
            answered_at: c.answered_at,
            ended_at: c.ended_at,
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}
