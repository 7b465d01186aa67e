//! The row of a new communication, built in one place for every kind of call: an agent
//! call and a scenario test call of a dispatch (v1 and legacy), a browser call and an
//! inbound call. [`new_communication`] writes what every row shares (a fresh sid, the
//! scenario version, due now); the builder methods add what only some calls have.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::error::{UseCaseError, UseCaseResult};
use crate::{
    agent_settings::Schedule,
    ids::new_sid,
    store::{
        AgentRecord, NewCommunication, ScenarioVersionRecord, communications::COMMUNICATION_PREFIX,
    },
};

/// Which way a call goes (the communication's `direction`, the saved history's and the
/// scenario's entry brick): the scenario language's vocabulary, stored as its text.
pub use callsmith_scenarios::CallDirection as Direction;

/// The scenario version a call runs: a published `version`, or a frozen `draft_version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioRun {
    pub scenario_sid: String,
    pub version: Option<i64>,
    pub draft_version: Option<i64>,
}

impl ScenarioRun {
    /// The run of a stored version record.
    pub fn of(record: &ScenarioVersionRecord) -> ScenarioRun {
        ScenarioRun {
            scenario_sid: record.scenario_sid.clone(),
            version: record.version,
            draft_version: record.draft_version,
        }
    }
}

/// Who a call belongs to, the number it is from and the party it reaches.
#[derive(Debug, Clone)]
pub struct Parties {
    pub tenant_sid: String,
    pub account_sid: String,
    /// The other party: the number called (outbound) or calling (inbound).
    pub recipient: String,
    /// Our number (empty until the dialer picks a pool number).
    pub from_number: String,
    pub trunk: Option<String>,
    /// The IANA zone the call's times and schedule are read in.
    pub timezone: String,
}

/// The row every new communication starts from: a test call of `run` (no agent, no
/// data, no batch), due now. The builder methods below make it an agent's call, give it
/// data, a batch, a strategy or a schedule.
pub fn new_communication(
    parties: Parties,
    run: ScenarioRun,
    direction: Direction,
) -> NewCommunication {
    NewCommunication {
        sid: new_sid(COMMUNICATION_PREFIX),
        tenant_sid: parties.tenant_sid,
        account_sid: parties.account_sid,
        agent_sid: None,
        scenario_sid: run.scenario_sid,
        version: run.version,
        draft_version: run.draft_version,
        recipient: parties.recipient,
        from_number: parties.from_number,
        trunk: parties.trunk,
        direction: direction.as_str().into(),
        is_test: true,
        data: "{}".into(),
        strategy_sid: None,
        batch_sid: None,
        timezone: parties.timezone,
        scheduled_at: None,
        schedule: None,
        due_at: crate::store::now(),
    }
}

impl NewCommunication {
    /// A call of `agent` (its sid, and test only when the agent is a test agent).
    pub fn of_agent(mut self, agent: &AgentRecord) -> Self {
        self.agent_sid = Some(agent.sid.clone());
        self.is_test = agent.is_test;
        self
    }

    /// The call's initial variables (checked with [`super::flat_data`]).
    pub fn with_data(mut self, data: &Map<String, Value>) -> UseCaseResult<Self> {
        self.data = serde_json::to_string(data).map_err(UseCaseError::internal)?;
        Ok(self)
    }

    /// The dispatch batch the call belongs to.
    pub fn in_batch(mut self, batch_sid: &str) -> Self {
        self.batch_sid = Some(batch_sid.to_string());
        self
    }

    /// The communication strategy (the caller has checked it is the account's); empty is
    /// none.
    pub fn with_strategy(mut self, strategy_sid: Option<String>) -> Self {
        self.strategy_sid = strategy_sid.filter(|s| !s.is_empty());
        self
    }

    /// Its own calling schedule (checked with [`super::check_schedule`]), followed instead
    /// of the agent's `calling_schedule`; None: the agent's.
    pub fn with_schedule(mut self, schedule: Option<&Schedule>) -> UseCaseResult<Self> {
        self.schedule = schedule
            .map(serde_json::to_string)
            .transpose()
            .map_err(UseCaseError::internal)?;
        Ok(self)
    }

    /// Due at `scheduled_at` (never in the past), or now when None.
    pub fn scheduled(mut self, scheduled_at: Option<DateTime<Utc>>) -> Self {
        self.scheduled_at = scheduled_at;
        self.due_at = scheduled_at.map_or(self.due_at, |s| s.max(self.due_at));
        self
    }
}

/// A number to call, as `field` of a request: `+` and digits (spaces, dashes, dots and
/// parentheses allowed and dropped), 3..=32 digits; `invalid_recipient` naming `field`
/// otherwise. Returns the number without the separators. Dispatch recipients and legacy
/// contact phones are checked with it.
pub fn check_recipient(field: &str, r: &str) -> UseCaseResult<String> {
    let trimmed: String = r
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '(' | ')'))
        .collect();
    let digits = trimmed.strip_prefix('+').unwrap_or(&trimmed);
    if (3..=32).contains(&digits.len()) && digits.chars().all(|c| c.is_ascii_digit()) {
        Ok(trimmed)
    } else {
        Err(UseCaseError::invalid(
            "invalid_recipient",
            format!("{field}: a phone number (digits, optional leading +)"),
        ))
    }
}

/// The initial variables of a call, as `field` of a request: absent, null or a flat
/// object of strings, numbers and booleans (rule 6); `data_not_flat` naming the key
/// otherwise. Dispatch `data`, browser-call `data` and legacy contact variables are
/// checked with it.
pub fn flat_data(field: &str, v: Option<&Value>) -> UseCaseResult<Map<String, Value>> {
    match v {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => {
            if let Some((k, _)) = m.iter().find(|(_, v)| v.is_object() || v.is_array()) {
                return Err(UseCaseError::invalid(
                    "data_not_flat",
                    format!("{field}.{k}: values must be strings, numbers or booleans"),
                ));
            }
            Ok(m.clone())
        }
        Some(_) => Err(UseCaseError::invalid(
            "data_not_flat",
            format!("{field}: must be a flat object of scalars"),
        )),
    }
}

/// The row of an inbound call from `caller` to our number `identifier` (arrived on
/// `trunk`), answered by `agent` with its scenario's published `version`.
pub fn inbound_communication(
    agent: &AgentRecord,
    version: i64,
    caller: String,
    identifier: String,
    trunk: String,
    timezone: String,
) -> NewCommunication {
    let parties = Parties {
        tenant_sid: agent.tenant_sid.clone(),
        account_sid: agent.account_sid.clone(),
        recipient: caller,
        from_number: identifier,
        trunk: Some(trunk),
        timezone,
    };
    let run = ScenarioRun {
        scenario_sid: agent.scenario_sid.clone(),
        version: Some(version),
        draft_version: None,
    };
    new_communication(parties, run, Direction::Inbound).of_agent(agent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parties() -> Parties {
        Parties {
            tenant_sid: "ten_1".into(),
            account_sid: "acc_1".into(),
            recipient: "+15550100".into(),
            from_number: "+15550199".into(),
            trunk: Some("main".into()),
            timezone: "Europe/Paris".into(),
        }
    }

    fn run() -> ScenarioRun {
        ScenarioRun {
            scenario_sid: "scn_1".into(),
            version: Some(3),
            draft_version: None,
        }
    }

    #[test]
    fn a_new_row_is_a_test_call_due_now_with_no_data_or_batch() {
        let before = crate::store::now();
        let c = new_communication(parties(), run(), Direction::Outbound);
        assert!(c.sid.starts_with(COMMUNICATION_PREFIX));
        assert_eq!((c.agent_sid, c.is_test), (None, true));
        assert_eq!((c.version, c.draft_version), (Some(3), None));
        assert_eq!(c.direction, "outbound");
        assert_eq!(c.data, "{}");
        assert_eq!(
            (c.batch_sid, c.strategy_sid, c.scheduled_at, c.schedule),
            (None, None, None, None)
        );
        assert!(c.due_at >= before && c.due_at <= crate::store::now());
    }

    #[test]
    fn a_schedule_in_the_past_is_due_now_and_one_ahead_is_due_then() {
        let now = crate::store::now();
        let past = new_communication(parties(), run(), Direction::Outbound)
            .scheduled(Some(now - chrono::Duration::hours(1)));
        assert!(past.due_at >= now, "never due in the past");
        let later = now + chrono::Duration::hours(1);
        let ahead = new_communication(parties(), run(), Direction::Outbound).scheduled(Some(later));
        assert_eq!((ahead.scheduled_at, ahead.due_at), (Some(later), later));
    }

    #[test]
    fn data_strategy_and_batch_are_kept_and_an_empty_strategy_is_none() {
        let mut data = Map::new();
        data.insert("first_name".into(), "Ada".into());
        let c = new_communication(parties(), run(), Direction::Outbound)
            .with_data(&data)
            .expect("serializable")
            .with_strategy(Some(String::new()))
            .with_schedule(Some(&Schedule::always()))
            .expect("serializable")
            .in_batch("bat_1");
        assert_eq!(c.data, r#"{"first_name":"Ada"}"#);
        assert_eq!(c.strategy_sid, None);
        assert_eq!(
            c.schedule.as_deref(),
            Some(r#"{"strategy":"always","args":{}}"#)
        );
        assert_eq!(c.batch_sid.as_deref(), Some("bat_1"));
    }

    #[test]
    fn recipients_and_data_are_checked_naming_the_field() {
        assert_eq!(
            check_recipient("phone", "+1 (555) 010-0").unwrap(),
            "+15550100"
        );
        let e = check_recipient("contacts[2].phone", "12ab").unwrap_err();
        assert!(
            matches!(&e, UseCaseError::Invalid { reason, message, .. }
                if reason == "invalid_recipient" && message.starts_with("contacts[2].phone:")),
            "{e}"
        );
        let nested = serde_json::json!({"a": {"b": 1}});
        let e = flat_data("data", Some(&nested)).unwrap_err();
        assert!(
            matches!(&e, UseCaseError::Invalid { reason, message, .. }
                if reason == "data_not_flat" && message.starts_with("data.a:")),
            "{e}"
        );
    }
}
