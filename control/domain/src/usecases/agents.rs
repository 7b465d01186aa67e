//! Agents: creating one ([`Ops::create_agent`], the v1 `POST /v1/agent` and the legacy
//! `POST /v1/campaign`) and changing one ([`Ops::update_agent`]), both checked whole by
//! the rules of docs/agents.md ([`Ops::check_agent`]).

use serde::Serialize;

use super::{
    Ops,
    error::{UseCaseError, UseCaseResult},
};
use crate::{
    agent_settings::{AgentSms, CommunicationResult, GatewayType, Limits, Schedule, Status},
    ids::{new_sid, prefix},
    schedule::{CallingSchedule, parse_timezone},
    store::{AccountRecord, AgentConfig, AgentRecord},
};

/// A new agent as asked for (the v1 create body, decoded): `None` takes the default.
#[derive(Debug, Clone)]
pub struct NewAgent {
    pub gateway_type: GatewayType,
    pub number_sid: Option<String>,
    pub number_pool_sid: Option<String>,
    pub scenario_sid: String,
    /// Default false.
    pub voicemail_enabled: Option<bool>,
    /// Default false.
    pub call_recording: Option<bool>,
    /// Default `always` with no arguments.
    pub calling_schedule: Option<Schedule>,
    /// Default: the account's timezone (UTC when it has none).
    pub timezone: Option<String>,
    /// Default cps 1, cpl 10.
    pub limits: Option<Limits>,
    /// Default false.
    pub is_test: Option<bool>,
    /// Default: no targets.
    pub communication_result: Option<CommunicationResult>,
    /// `None` or the empty settings: the agent sends no SMS.
    pub sms: Option<AgentSms>,
    /// Default communication strategy of the account (a `stg_` id); `None`: none.
    pub strategy_sid: Option<String>,
    /// Default active.
    pub status: Option<Status>,
}

impl NewAgent {
    /// An agent of `gateway_type` through `number_sid` or `number_pool_sid` running
    /// `scenario_sid`, everything else default.
    pub fn new(
        gateway_type: GatewayType,
        number_sid: Option<String>,
        number_pool_sid: Option<String>,
        scenario_sid: String,
    ) -> NewAgent {
        NewAgent {
            gateway_type,
            number_sid,
            number_pool_sid,
            scenario_sid,
            voicemail_enabled: None,
            call_recording: None,
            calling_schedule: None,
            timezone: None,
            limits: None,
            is_test: None,
            communication_result: None,
            sms: None,
            strategy_sid: None,
            status: None,
        }
    }
}

/// Every setting of an agent, not yet checked: a new agent with its defaults applied, or
/// a stored agent with a change merged in ([`AgentDraft::of`]).
#[derive(Debug, Clone)]
pub struct AgentDraft {
    pub gateway_type: GatewayType,
    pub number_sid: Option<String>,
    pub number_pool_sid: Option<String>,
    pub scenario_sid: String,
    pub voicemail_enabled: bool,
    pub call_recording: bool,
    pub calling_schedule: Schedule,
    pub timezone: String,
    pub limits: Limits,
    pub is_test: bool,
    pub communication_result: CommunicationResult,
    /// `None` or the empty settings: no SMS.
    pub sms: Option<AgentSms>,
    /// The default strategy (docs/strategies.md); `None` or empty: none.
    pub strategy_sid: Option<String>,
    pub status: Status,
}

impl AgentDraft {
    /// The settings of a stored agent, as the API shows them.
    pub fn of(a: &AgentRecord) -> AgentDraft {
        AgentDraft {
            gateway_type: GatewayType::parse(&a.gateway_type),
            number_sid: a.number_sid.clone(),
            number_pool_sid: a.number_pool_sid.clone(),
            scenario_sid: a.scenario_sid.clone(),
            voicemail_enabled: a.voicemail_enabled,
            call_recording: a.call_recording,
            calling_schedule: a.schedule.clone(),
            timezone: a.timezone.clone(),
            limits: Limits {
                cps: a.cps,
                cpl: a.cpl,
            },
            is_test: a.is_test,
            communication_result: a.result.clone(),
            sms: Some(a.sms.clone().unwrap_or_default()),
            strategy_sid: a.strategy_sid.clone(),
            status: Status::parse(&a.status),
        }
    }

    /// `b` with the defaults of an agent of `account` filled in.
    fn new(account: &AccountRecord, b: NewAgent) -> AgentDraft {
        let default_tz = if account.timezone.is_empty() {
            "UTC".to_string()
        } else {
            account.timezone.clone()
        };
        AgentDraft {
            gateway_type: b.gateway_type,
            number_sid: b.number_sid,
            number_pool_sid: b.number_pool_sid,
            scenario_sid: b.scenario_sid,
            voicemail_enabled: b.voicemail_enabled.unwrap_or(false),
            call_recording: b.call_recording.unwrap_or(false),
            calling_schedule: b.calling_schedule.unwrap_or_else(Schedule::always),
            timezone: b
                .timezone
                .map(|t| t.trim().to_string())
                .unwrap_or(default_tz),
            limits: b.limits.unwrap_or(Limits { cps: 1, cpl: 10 }),
            is_test: b.is_test.unwrap_or(false),
            communication_result: b.communication_result.unwrap_or_default(),
            sms: b.sms,
            strategy_sid: b.strategy_sid,
            status: b.status.unwrap_or(Status::Active),
        }
    }
}

const MAX_CPS: i64 = 1000;
const MAX_CPL: i64 = 100_000;
const MAX_TARGETS: usize = 10;

/// A calling schedule as `field` of a request (an agent's `calling_schedule`, a dispatch's
/// `schedule`): `invalid_schedule` naming the offending part when it does not check.
pub fn check_schedule(field: &str, s: &Schedule) -> UseCaseResult<CallingSchedule> {
    CallingSchedule::parse(&s.strategy, &s.args)
        .map_err(|e| bad("invalid_schedule", format!("{field}: {e}")))
}

fn bad(reason: &'static str, message: impl Into<String>) -> UseCaseError {
    UseCaseError::invalid(reason, message)
}

fn blank(v: &Option<String>) -> bool {
    v.as_deref().is_none_or(|s| s.trim().is_empty())
}

/// JSON text of a stored shape (these plain structs always serialize).
fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "{}".into())
}

impl Ops<'_> {
    /// Creates an agent in `account`: defaults applied, every rule checked.
    pub async fn create_agent(
        &self,
        account: &AccountRecord,
        b: NewAgent,
    ) -> UseCaseResult<AgentRecord> {
        let c = self
            .check_agent(account, AgentDraft::new(account, b))
            .await?;
        Ok(self
            .services
            .store
            .agent_create(
                &new_sid(prefix::AGENT),
                &account.tenant_sid,
                &account.sid,
                &c,
            )
            .await?)
    }

    /// Replaces the settings of agent `sid` of `account` by `d`, checked by the same rules
    /// as a new agent's.
    pub async fn update_agent(
        &self,
        account: &AccountRecord,
        sid: &str,
        d: AgentDraft,
    ) -> UseCaseResult<AgentRecord> {
        let c = self.check_agent(account, d).await?;
        Ok(self.services.store.agent_update(sid, &c).await?)
    }

    /// Checks every rule of docs/agents.md against the account's resources; the stored
    /// form of the settings when they hold.
    pub async fn check_agent(
        &self,
        account: &AccountRecord,
        d: AgentDraft,
    ) -> UseCaseResult<AgentConfig> {
        let store = &self.services.store;
        // Gateway: the sid matching gateway_type is set, the other empty.
        let (number_sid, number_pool_sid) = match d.gateway_type {
            GatewayType::Number => {
                if blank(&d.number_sid) || !blank(&d.number_pool_sid) {
                    return Err(bad(
                        "invalid_gateway",
                        "gateway_type number: number_sid is required and number_pool_sid must be empty",
                    ));
                }
                let sid = d.number_sid.unwrap_or_default().trim().to_string();
                match store.number_get(&sid).await? {
                    Some(n) if n.account_sid == account.sid && n.is_active() => {}
                    Some(n) if n.account_sid == account.sid => {
                        return Err(bad(
                            "invalid_gateway",
                            format!("number_sid: number {sid:?} is not active"),
                        ));
                    }
                    _ => {
                        return Err(bad(
                            "invalid_gateway",
                            format!("number_sid: no number {sid:?} in this account"),
                        ));
                    }
                }
                (Some(sid), None)
            }
            GatewayType::NumberPool => {
                if blank(&d.number_pool_sid) || !blank(&d.number_sid) {
                    return Err(bad(
                        "invalid_gateway",
                        "gateway_type number_pool: number_pool_sid is required and number_sid must be empty",
                    ));
                }
                let sid = d.number_pool_sid.unwrap_or_default().trim().to_string();
                match store.pool_get(&sid).await? {
                    Some(p) if p.account_sid == account.sid && p.is_active() => {}
                    Some(p) if p.account_sid == account.sid => {
                        return Err(bad(
                            "invalid_gateway",
                            format!("number_pool_sid: pool {sid:?} is not active"),
                        ));
                    }
                    _ => {
                        return Err(bad(
                            "invalid_gateway",
                            format!("number_pool_sid: no number pool {sid:?} in this account"),
                        ));
                    }
                }
                (None, Some(sid))
            }
        };
        match store.scenario_get(d.scenario_sid.trim()).await? {
            Some(s) if s.account_sid == account.sid => {}
            _ => {
                return Err(bad(
                    "unknown_scenario",
                    format!(
                        "scenario_sid: no scenario {:?} in this account",
                        d.scenario_sid
                    ),
                ));
            }
        }
        if parse_timezone(&d.timezone).is_none() {
            return Err(bad(
                "invalid_timezone",
                format!("timezone: not an IANA time zone: {:?}", d.timezone),
            ));
        }
        check_schedule("calling_schedule", &d.calling_schedule)?;
        if !(1..=MAX_CPS).contains(&d.limits.cps) {
            return Err(bad(
                "invalid_limits",
                format!("limits.cps: 1 to {MAX_CPS} new calls per second"),
            ));
        }
        if !(1..=MAX_CPL).contains(&d.limits.cpl) {
            return Err(bad(
                "invalid_limits",
                format!("limits.cpl: 1 to {MAX_CPL} live calls"),
            ));
        }
        self.check_targets(&d.communication_result)?;
        let sms = match d.sms.filter(|s| !s.is_unset()) {
            None => None,
            Some(sms) => Some(self.check_sms(account, sms).await?),
        };
        let strategy_sid = match d.strategy_sid.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(sid) => Some(
                self.account_strategy(account, "strategy_sid", sid)
                    .await?
                    .sid,
            ),
        };
        Ok(AgentConfig {
            gateway_type: d.gateway_type.as_str().to_string(),
            number_sid,
            number_pool_sid,
            scenario_sid: d.scenario_sid.trim().to_string(),
            voicemail_enabled: d.voicemail_enabled,
            call_recording: d.call_recording,
            calling_schedule: json(&d.calling_schedule),
            timezone: d.timezone,
            cps: d.limits.cps,
            cpl: d.limits.cpl,
            is_test: d.is_test,
            communication_result: json(&d.communication_result),
            sms_provider_sid: sms.as_ref().map(|s| s.provider_sid.clone()),
            sms: sms.as_ref().map(json),
            strategy_sid,
            status: d.status.as_str().to_string(),
        })
    }

    /// At most ten absolute http(s) result targets, each one the guarded client may reach.
    fn check_targets(&self, r: &CommunicationResult) -> UseCaseResult<()> {
        if r.targets.len() > MAX_TARGETS {
            return Err(bad(
                "invalid_targets",
                format!("communication_result.targets: at most {MAX_TARGETS}"),
            ));
        }
        for (i, t) in r.targets.iter().enumerate() {
            match url::Url::parse(t.url.trim()) {
                Ok(u)
                    if matches!(u.scheme(), "http" | "https")
                        && u.host_str().is_some_and(|h| !h.is_empty()) => {}
                _ => {
                    return Err(bad(
                        "invalid_targets",
                        format!(
                            "communication_result.targets[{i}].url: not an absolute http(s) URL: {:?}",
                            t.url
                        ),
                    ));
                }
            }
            if let Some(why) = self.services.outbound.refusal(t.url.trim()) {
                return Err(bad(
                    "target_not_allowed",
                    format!("communication_result.targets[{i}].url: {why}"),
                ));
            }
        }
        Ok(())
    }

    /// SMS settings that are set: a provider of the account and one of its senders.
    async fn check_sms(
        &self,
        account: &AccountRecord,
        mut sms: AgentSms,
    ) -> UseCaseResult<AgentSms> {
        sms.provider_sid = sms.provider_sid.trim().to_string();
        if sms.provider_sid.is_empty() {
            return Err(bad(
                "invalid_sms",
                "sms.provider_sid: required when another SMS setting is set",
            ));
        }
        let provider = match self
            .services
            .store
            .sms_provider_get(&sms.provider_sid)
            .await?
        {
            Some(p) if p.account_sid == account.sid => p,
            _ => {
                return Err(bad(
                    "invalid_sms",
                    format!(
                        "sms.provider_sid: no SMS provider {:?} in this account",
                        sms.provider_sid
                    ),
                ));
            }
        };
        if sms.use_alpha {
            sms.alpha = sms.alpha.trim().to_string();
            if sms.alpha.is_empty() {
                return Err(bad(
                    "invalid_sms",
                    "sms.alpha: required when use_alpha is true",
                ));
            }
            if !provider.alpha_list().contains(&sms.alpha) {
                return Err(bad(
                    "invalid_sms",
                    format!(
                        "sms.alpha: {:?} is not one of the provider's alphas",
                        sms.alpha
                    ),
                ));
            }
        } else {
            sms.number = sms.number.trim().to_string();
            if sms.number.is_empty() {
                return Err(bad(
                    "invalid_sms",
                    "sms.number: required when use_alpha is false",
                ));
            }
            if !provider.number_list().contains(&sms.number) {
                return Err(bad(
                    "invalid_sms",
                    format!(
                        "sms.number: {:?} is not one of the provider's numbers",
                        sms.number
                    ),
                ));
            }
        }
        Ok(sms)
    }
}
