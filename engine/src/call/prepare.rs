//! What a call runs, resolved before it is placed: the scenario version, the agent, the
//! from-number, the trunk and the time zone.

use super::*;

/// What a call runs, resolved before dialling.
pub struct Prepared {
    /// Shared with every call running the same scenario text (see `Runtime::program`).
    pub program: Arc<Program>,
    pub agent: Option<AgentRecord>,
    pub from_number: String,
    pub trunk: Option<String>,
    pub tz: Tz,
    pub data: BTreeMap<String, String>,
    /// Cancelled when `POST /v1/communication/{id}/hangup` asks the call to end (the
    /// token of its [`callsmith_control::hangups`] registration).
    pub hangup: CancellationToken,
}

/// Loads the scenario version, the agent, the from-number and the trunk of a claimed row.
pub async fn prepare(rt: &Runtime, comm: &CommunicationRecord) -> Result<Prepared, String> {
    let store = &rt.store;
    let agent = match &comm.agent_sid {
        Some(a) => Some(
            store
                .agent_get(a)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("the agent no longer exists")?,
        ),
        None => None,
    };
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
        (None, None) => return Err("no scenario version recorded".into()),
    }
    .map_err(|e| e.to_string())?
    .ok_or("the scenario version no longer exists")?;
    let program = rt.program(&record)?;
    let mut from_number = comm.from_number.clone();
    let mut trunk = comm.trunk.clone();
    if from_number.is_empty()
        && let Some(a) = &agent
    {
        if let Some(n) = &a.number_sid {
            let num = store
                .number_get(n)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("the agent's number no longer exists")?;
            from_number = num.identifier;
            trunk = num.trunk;
        } else if let Some(p) = &a.number_pool_sid {
            let nums = store
                .pool_active_numbers(p)
                .await
                .map_err(|e| e.to_string())?;
            if nums.is_empty() {
                return Err("the agent's number pool has no active number".into());
            }
            let num = &nums[rt.next_in_pool(p, nums.len())];
            from_number = num.identifier.clone();
            trunk = num.trunk.clone();
        }
    }
    if from_number.is_empty() {
        return Err("no from-number".into());
    }
    let known = |t: &str| rt.sip.trunks().iter().any(|c| c.name == t);
    let trunk = match trunk.filter(|t| !t.is_empty() && known(t)) {
        Some(t) => Some(t),
        None => {
            // The tenant's trunks, oldest first, that this engine has a gateway for.
            let (trunks, _) = store
                .trunk_list(&comm.tenant_sid, false, 100, 0)
                .await
                .map_err(|e| e.to_string())?;
            trunks.into_iter().map(|t| t.name).find(|n| known(n))
        }
    };
    let tz: Tz = comm.timezone.parse().unwrap_or(Tz::UTC);
    let data: serde_json::Map<String, Value> = serde_json::from_str(&comm.data).unwrap_or_default();
    Ok(Prepared {
        program,
        agent,
        from_number,
        trunk,
        tz,
        data: callsmith_scenarios::interpreter::data_to_vars(&data),
        hangup: CancellationToken::new(),
    })
}
