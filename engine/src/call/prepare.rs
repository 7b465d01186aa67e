//! What a call runs, resolved before it is placed: the scenario version, the agent, the
//! from-number, the trunk and the time zone.

use callsmith_domain::communication::caller::{self, CallerId};

use std::collections::BTreeMap;
use std::sync::Arc;

use callsmith_domain::store::{AgentRecord, CommunicationRecord};
use callsmith_scenarios::interpreter::{Program, Tz};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::error::CallError;
use crate::runtime::Runtime;

/// What a call runs, resolved before dialling.
pub struct Prepared {
    /// Shared with every call running the same scenario text (see `Runtime::program`).
    pub program: Arc<Program>,
    pub agent: Option<Arc<AgentRecord>>,
    pub from_number: String,
    pub trunk: Option<String>,
    pub tz: Tz,
    pub data: BTreeMap<String, String>,
    /// Cancelled when `POST /v1/communication/{id}/hangup` asks the call to end (the
    /// token of its [`callsmith_domain::hangups`] registration).
    pub hangup: CancellationToken,
    /// A test call's live feed (set by the lifecycle; see [`super::live_feed`]).
    pub live: Option<callsmith_domain::live_feed::LiveFeed>,
    /// Whether the call is recorded: the agent's `call_recording`, or a browser test call
    /// that asks for it (`record` of `POST /v1/communication/-/browser-call`).
    pub record: bool,
}

/// The trunks of this node's SIP stack, as [`caller::NodeTrunks`] reads them.
pub fn node_trunks(sip: &callsmith_sip::SipStack) -> caller::NodeTrunks {
    caller::NodeTrunks {
        names: sip.trunks().iter().map(|t| t.name.clone()).collect(),
        default: sip.default_trunk().map(str::to_string),
    }
}

/// Loads the scenario version, the agent, the from-number and the trunk of a claimed row.
/// `agent` is the row's agent when the caller has just read it (the dialer has); a
/// published version a call ran before is not read again (its text never changes).
pub async fn prepare(
    rt: &Runtime,
    comm: &CommunicationRecord,
    agent: Option<Arc<AgentRecord>>,
) -> Result<Prepared, CallError> {
    let store = &rt.store;
    let agent = match (&comm.agent_sid, agent) {
        (Some(a), Some(known)) if known.sid == *a => Some(known),
        (Some(a), _) => Some(
            store
                .agent_get(a)
                .await?
                .map(Arc::new)
                .ok_or(CallError::permanent("the agent no longer exists"))?,
        ),
        (None, _) => None,
    };
    let known = comm
        .version
        .and_then(|v| rt.published_program(&comm.scenario_sid, v));
    let program = match known {
        Some(p) => p,
        None => {
            let record = match (comm.version, comm.draft_version) {
                (Some(v), _) => {
                    store
                        .scenario_version_by_axis(&comm.scenario_sid, v, false)
                        .await
                }
                (None, Some(d)) => {
                    store
                        .scenario_version_by_axis(&comm.scenario_sid, d, true)
                        .await
                }
                (None, None) => return Err(CallError::permanent("no scenario version recorded")),
            }?
            .ok_or(CallError::permanent(
                "the scenario version no longer exists",
            ))?;
            rt.program(&record).map_err(CallError::Permanent)?
        }
    };
    // The row carries the agent's own number (or the test call's); a pool number is
    // picked now: the one the recipient was last dialled from while it is in the pool
    // (sticky caller ID), else rotating over the pool. A redial of a pool agent's row
    // picks again, so a number taken out of the pool since is not used.
    let pooled = agent
        .as_ref()
        .is_some_and(|a| a.number_sid.is_none() && a.number_pool_sid.is_some());
    let from = if comm.from_number.is_empty() || pooled {
        let agent = agent
            .as_ref()
            .ok_or(CallError::permanent("no from-number"))?;
        caller::recipient_call_caller(
            store,
            agent,
            &comm.account_sid,
            &comm.recipient,
            |pool, len| rt.next_in_pool(pool, len),
        )
        .await?
    } else {
        CallerId {
            number: comm.from_number.clone(),
            trunk: comm.trunk.clone(),
        }
    };
    // The rule the dispatch API checked the call against (`no_trunk`); `None` only when
    // the node's trunks changed since (the SIP stack then refuses to place it).
    let trunk = node_trunks(&rt.sip)
        .place(store, &comm.tenant_sid, from.trunk.as_deref())
        .await?;
    let tz = caller::zone(&comm.timezone);
    let data: serde_json::Map<String, Value> = serde_json::from_str(&comm.data).unwrap_or_default();
    Ok(Prepared {
        program,
        from_number: from.number,
        trunk,
        tz,
        data: callsmith_scenarios::interpreter::data_to_vars(&data),
        hangup: CancellationToken::new(),
        live: None,
        record: agent.as_ref().is_some_and(|a| a.call_recording),
        agent,
    })
}
