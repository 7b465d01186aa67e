//! Dispatch: the calls `POST /v1/communication/-/dispatch` creates (an agent call or a
//! scenario test call), the agent calls of a legacy attempt ([`AgentDispatch`]), and what
//! test and browser calls share (their admission under the account's share, the version
//! they run).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use tokio::sync::MutexGuard;

use super::{
    Ops,
    agents::check_schedule,
    error::{UseCaseError, UseCaseResult},
    rows::{Direction, Parties, ScenarioRun, check_recipient, flat_data, new_communication},
};
use crate::{
    agent_settings::Schedule,
    communication::caller::{self, AgentCaller, CallerIdError},
    ids::{new_sid, prefix},
    store::{
        AccountRecord, AgentRecord, CommunicationRecord, NewCommunication, ScenarioRecord,
        ScenarioVersionRecord, StoreError,
    },
};

/// What a dispatch asks for (the v1 dispatch body, decoded).
#[derive(Debug, Clone, Default)]
pub struct DispatchInput {
    /// The number to call.
    pub recipient: String,
    /// Dial through this agent (exactly one of `agent_sid` and `scenario_sid`; blank is
    /// absent).
    pub agent_sid: Option<String>,
    /// Communication strategy of the account (agent path; blank is absent: the agent's
    /// default strategy, if it names one).
    pub strategy_sid: Option<String>,
    /// Defer dispatch until this time.
    pub scheduled_at: Option<DateTime<Utc>>,
    /// The agent call's initial variables (checked with [`flat_data`]).
    pub data: Option<Value>,
    /// The agent call's own calling schedule (checked with [`check_schedule`]), followed
    /// instead of the agent's `calling_schedule`.
    pub schedule: Option<Schedule>,
    /// Scenario test call.
    pub scenario_sid: Option<String>,
    /// Test call: run the current draft (frozen on first use).
    pub draft: bool,
    /// Join this earlier dispatch batch of the account.
    pub batch_sid: Option<String>,
}

/// The pattern of a batch id (`bat_` and 32 lowercase hex digits).
pub fn is_batch_sid(s: &str) -> bool {
    s.strip_prefix("bat_")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.trim().is_empty())
}

/// What a dispatch calls through (rule 1: exactly one of them).
enum Target<'a> {
    Agent(&'a str),
    Scenario(&'a str),
}

/// An agent of an account made ready to dial: its scenario's newest published version and
/// its caller id (rule 7: the agent's number; a pool number is picked, rotating, at dial
/// time), looked up once. A dispatch creates its agent call with
/// [`AgentDispatch::communication`], and so does a legacy attempt for each contact.
pub struct AgentDispatch {
    pub agent: AgentRecord,
    parties: Parties,
    run: ScenarioRun,
}

impl AgentDispatch {
    /// `unknown_agent` unless `agent_sid` is an agent of `account`,
    /// `scenario_not_published` when its scenario has no published version,
    /// `no_from_number` when it has no number to call from, `no_trunk` when no trunk of
    /// this node could place its calls ([`Ops::check_placeable`]).
    pub async fn prepare(
        ops: &Ops<'_>,
        account: &AccountRecord,
        agent_sid: &str,
    ) -> UseCaseResult<AgentDispatch> {
        let store = &ops.services.store;
        let agent = store
            .agent_get(agent_sid)
            .await?
            .filter(|a| a.account_sid == account.sid)
            .ok_or_else(|| {
                UseCaseError::invalid("unknown_agent", "agent_sid: no such agent in this account")
            })?;
        let published = store
            .scenario_latest_published(&agent.scenario_sid)
            .await?
            .ok_or_else(|| {
                UseCaseError::invalid(
                    "scenario_not_published",
                    "the agent's scenario has no published version",
                )
            })?;
        let (from_number, trunk, trunks) = match caller::agent_caller(store, &agent).await? {
            AgentCaller::Number(c) => (c.number, c.trunk.clone(), vec![c.trunk]),
            AgentCaller::Pool(p) => {
                // The number is picked when the call is placed: any of the pool's, so a
                // pool with none could never place it.
                let numbers = store.pool_active_numbers(&p).await?;
                if numbers.is_empty() {
                    return Err(CallerIdError::PoolEmpty.into());
                }
                let trunks = numbers.into_iter().map(|n| n.trunk).collect();
                (String::new(), None, trunks)
            }
        };
        ops.check_placeable(&account.tenant_sid, &trunks).await?;
        Ok(AgentDispatch {
            parties: Parties {
                tenant_sid: account.tenant_sid.clone(),
                account_sid: account.sid.clone(),
                recipient: String::new(),
                from_number,
                trunk,
                timezone: caller::call_timezone(Some(&agent), account),
            },
            run: ScenarioRun {
                scenario_sid: agent.scenario_sid.clone(),
                version: published.version,
                draft_version: None,
            },
            agent,
        })
    }

    /// The row of one call to `recipient` (checked with [`check_recipient`]) with `data`
    /// (checked with [`flat_data`]) as its initial variables, due at `scheduled_at` or now,
    /// in the dispatch batch `batch_sid`, following `strategy_sid` (checked to be the
    /// account's) or else the agent's default strategy.
    pub fn communication(
        &self,
        recipient: String,
        data: &Map<String, Value>,
        scheduled_at: Option<DateTime<Utc>>,
        strategy_sid: Option<String>,
        batch_sid: &str,
    ) -> UseCaseResult<NewCommunication> {
        let parties = Parties {
            recipient,
            ..self.parties.clone()
        };
        Ok(
            new_communication(parties, self.run.clone(), Direction::Outbound)
                .of_agent(&self.agent)
                .with_data(data)?
                .with_strategy(strategy_sid.or_else(|| self.agent.strategy_sid.clone()))
                .in_batch(batch_sid)
                .scheduled(scheduled_at),
        )
    }
}

impl Ops<'_> {
    /// Creates a communication: an agent call (`agent_sid`) or a scenario test call
    /// (`scenario_sid`), in a new dispatch batch or the `batch_sid` of an earlier
    /// dispatch. Refusals: `exactly_one_of`, `invalid_recipient`, `recipient_suppressed`
    /// (the number is on the account's do-not-call list), `unknown_batch`,
    /// `too_many_test_calls`, `data_not_flat`, `invalid_schedule`, then those of [`AgentDispatch::prepare`]
    /// or [`Ops::test_version`], `unknown_strategy`, `no_from_number` and
    /// `no_trunk`; nothing is stored on a refusal.
    pub async fn dispatch(
        &self,
        account: &AccountRecord,
        input: &DispatchInput,
    ) -> UseCaseResult<CommunicationRecord> {
        let target = match (non_empty(&input.agent_sid), non_empty(&input.scenario_sid)) {
            (Some(a), None) => Target::Agent(a),
            (None, Some(s)) => Target::Scenario(s),
            _ => {
                return Err(UseCaseError::invalid(
                    "exactly_one_of",
                    "exactly one of agent_sid and scenario_sid is required",
                ));
            }
        };
        let recipient = check_recipient("recipient", &input.recipient)?;
        self.check_not_suppressed(&account.sid, &recipient).await?;
        let batch = self
            .dispatch_batch(account, input.batch_sid.as_deref())
            .await?;
        // A test call holds its account's admission until its row is stored.
        let _admitted = match target {
            Target::Scenario(_) => self.admit_test_call(account).await?,
            Target::Agent(_) => None,
        };
        let new = match target {
            Target::Agent(agent_sid) => {
                let data = flat_data("data", input.data.as_ref())?;
                if let Some(s) = &input.schedule {
                    check_schedule("schedule", s)?;
                }
                let dispatch = AgentDispatch::prepare(self, account, agent_sid).await?;
                let strategy = match non_empty(&input.strategy_sid) {
                    Some(sid) => Some(
                        self.account_strategy(account, "strategy_sid", sid)
                            .await?
                            .sid,
                    ),
                    None => None,
                };
                dispatch
                    .communication(recipient, &data, input.scheduled_at, strategy, &batch)?
                    .with_schedule(input.schedule.as_ref())?
            }
            Target::Scenario(scenario_sid) => {
                self.test_call(account, scenario_sid, input, recipient, &batch)
                    .await?
            }
        };
        Ok(self.services.store.communication_create(&new).await?)
    }

    /// The batch a dispatch joins: `batch_sid` when the account has communications in it,
    /// else a new one; `unknown_batch` for a batch the account does not have (another
    /// account's batch answers the same).
    async fn dispatch_batch(
        &self,
        account: &AccountRecord,
        batch_sid: Option<&str>,
    ) -> UseCaseResult<String> {
        let Some(b) = batch_sid else {
            return Ok(new_sid(prefix::BATCH));
        };
        if is_batch_sid(b)
            && self
                .services
                .store
                .communication_batch_exists(&account.sid, b)
                .await?
        {
            return Ok(b.to_string());
        }
        Err(UseCaseError::invalid(
            "unknown_batch",
            "batch_sid: no such dispatch batch in this account (omit it to start a new batch)",
        ))
    }

    /// A scenario test call (rules 3 and 5): dispatched at once; strategy, schedule and
    /// data ignored (not even checked).
    async fn test_call(
        &self,
        account: &AccountRecord,
        scenario_sid: &str,
        input: &DispatchInput,
        recipient: String,
        batch_sid: &str,
    ) -> UseCaseResult<NewCommunication> {
        let (_, record) = self
            .test_version(account, scenario_sid, input.draft)
            .await?;
        // Rule 7: a free account number.
        let number = caller::test_call_caller(&self.services.store, &account.sid).await?;
        self.check_placeable(&account.tenant_sid, std::slice::from_ref(&number.trunk))
            .await?;
        let parties = Parties {
            tenant_sid: account.tenant_sid.clone(),
            account_sid: account.sid.clone(),
            recipient,
            from_number: number.number,
            trunk: number.trunk,
            timezone: caller::call_timezone(None, account),
        };
        Ok(
            new_communication(parties, ScenarioRun::of(&record), Direction::Outbound)
                .in_batch(batch_sid)
                .scheduled(input.scheduled_at),
        )
    }

    /// `no_trunk` when no trunk of this node could place a call of `tenant_sid` from a
    /// number on one of `trunks` (the trunks of the numbers the call may be from; `[]`
    /// when none is known yet), by the rule the dialer places it by
    /// ([`caller::NodeTrunks::can_place`]). A process that places no calls checks nothing.
    pub async fn check_placeable(
        &self,
        tenant_sid: &str,
        trunks: &[Option<String>],
    ) -> UseCaseResult<()> {
        let Some(node) = &self.settings.sip_trunks else {
            return Ok(());
        };
        if node
            .can_place(&self.services.store, tenant_sid, trunks)
            .await?
        {
            Ok(())
        } else {
            Err(UseCaseError::invalid("no_trunk", caller::NO_TRUNK))
        }
    }

    /// Admits one more test or browser call of `account` under its share
    /// (`dialer.max_test_calls_per_account`, see [`crate::test_calls`]):
    /// `too_many_test_calls` when the account has that many open already. The guard
    /// returned must be held until the new call is stored; `None` when no share is set.
    pub async fn admit_test_call(
        &self,
        account: &AccountRecord,
    ) -> UseCaseResult<Option<MutexGuard<'_, ()>>> {
        let limit = self.settings.max_test_calls_per_account;
        if limit == 0 {
            return Ok(None);
        }
        let guard = self.test_calls.lock(&account.sid).await;
        let open = self
            .services
            .store
            .communication_open_test_calls(&account.sid)
            .await?;
        if open >= i64::from(limit) {
            return Err(UseCaseError::TooMany {
                reason: "too_many_test_calls".into(),
                message: format!(
                    "the account has {open} test or browser calls open, its share is {limit}: \
                     place another when one has ended"
                ),
                retry_after_secs: crate::test_calls::RETRY_AFTER_SECS,
            });
        }
        Ok(Some(guard))
    }

    /// The version a test call of `scenario_sid` runs (rule 3): the draft, validated and
    /// frozen on first use, when `draft`; else the latest published version.
    pub async fn test_version(
        &self,
        account: &AccountRecord,
        scenario_sid: &str,
        draft: bool,
    ) -> UseCaseResult<(ScenarioRecord, ScenarioVersionRecord)> {
        let store = &self.services.store;
        let scenario = store
            .scenario_get(scenario_sid)
            .await?
            .filter(|s| s.account_sid == account.sid)
            .ok_or_else(|| {
                UseCaseError::invalid(
                    "unknown_scenario",
                    "scenario_sid: no such scenario in this account",
                )
            })?;
        let no_draft = || UseCaseError::invalid("no_draft", "the scenario has no draft");
        let record = if draft {
            // A draft was never validated by a publish: it is validated here, with the
            // same checks, before it is frozen and called.
            let draft = store
                .scenario_version_by_axis(&scenario.sid, 0, true)
                .await?
                .ok_or_else(no_draft)?;
            let errors = self
                .check_snapshot(&account.sid, &draft.snapshot_value())
                .await?
                .errors;
            if !errors.is_empty() {
                return Err(UseCaseError::invalid_scenario(errors));
            }
            match store.freeze_draft(&scenario.sid).await {
                Ok(r) => r,
                Err(StoreError::NotFound) => return Err(no_draft()),
                Err(e) => return Err(e.into()),
            }
        } else {
            store
                .scenario_latest_published(&scenario.sid)
                .await?
                .ok_or_else(|| {
                    UseCaseError::invalid(
                        "scenario_not_published",
                        "the scenario has no published version (dispatch with draft=true to test the draft)",
                    )
                })?
        };
        Ok((scenario, record))
    }

    /// Validates a snapshot for an account with the references answered as a call would
    /// resolve them (see [`crate::scenario_check`]).
    pub async fn check_snapshot(
        &self,
        account_sid: &str,
        snapshot: &Value,
    ) -> UseCaseResult<callsmith_scenarios::Validation> {
        Ok(crate::scenario_check::validate_scenario(self.services, account_sid, snapshot).await?)
    }
}
