//! What `callsmith load` sets up on its throwaway node and reads back from it, through the
//! same use cases (`callsmith_domain::usecases::Ops`) every front end calls: a tenant, its
//! trunk and account, a caller id number, the scenario (created and published, so a bad
//! file gets the same SCN1xx errors as the API gives) and the agent; the dispatch of each
//! call, and the statistics and calls of the run's dispatch batch.

use anyhow::Context;
use callsmith_domain::{
    agent_settings::{GatewayType, Limits},
    communication::Communication,
    store::{AccountRecord, communications::CommunicationFilter},
    test_calls::TestCallGate,
    usecases::{
        DispatchInput, NewAccountInput, NewAgent, NewNumberInput, NewScenario, Ops, UseCaseError,
    },
};
use serde_json::Value;

/// The run's account and the agent its calls are dispatched through.
pub struct Provisioned {
    pub account: AccountRecord,
    pub agent_sid: String,
}

/// A use case's refusal as a line, with the scenario's validation errors (code, message
/// and brick) when there are some.
pub fn describe(e: &UseCaseError) -> String {
    let mut out = e.to_string();
    if let UseCaseError::Invalid {
        data: Some(data), ..
    } = e
    {
        for e in data["errors"]["scenario"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "\n  {} {}{}",
                e["code"].as_str().unwrap_or(""),
                e["message"].as_str().unwrap_or(""),
                e["node_id"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .map(|n| format!(" (brick {n})"))
                    .unwrap_or_default()
            ));
        }
    }
    out
}

/// `what` refused or failed: the error naming it.
fn refused(what: &str) -> impl FnOnce(UseCaseError) -> anyhow::Error + '_ {
    move |e| anyhow::anyhow!("{what}: {}", describe(&e))
}

/// The use cases of `node`; `gate` admits its test calls (a run places none).
pub fn ops<'a>(node: &'a crate::Node, gate: &'a TestCallGate) -> Ops<'a> {
    Ops {
        services: &node.services,
        settings: &node.settings,
        test_calls: gate,
    }
}

/// Creates the tenant, its trunk `load`, the account, the caller id number on that trunk,
/// the scenario named `name` with `constructor` as its draft, publishes it, and makes the
/// agent that places the calls at `cps` and `cpl`.
pub async fn provision(
    ops: &Ops<'_>,
    name: &str,
    constructor: &Value,
    cps: u32,
    cpl: u32,
) -> anyhow::Result<Provisioned> {
    let tenant = ops
        .create_tenant("load")
        .await
        .map_err(refused("creating the tenant"))?;
    ops.create_trunk(&tenant.sid, "load")
        .await
        .map_err(refused("creating the trunk"))?;
    let account = ops
        .create_account(
            &tenant.sid,
            NewAccountInput {
                name: "load".into(),
                email: "load@callsmith.invalid".into(),
                timezone: Some("UTC".into()),
                ..Default::default()
            },
        )
        .await
        .map_err(refused("creating the account"))?;
    let number = ops
        .create_number(
            &account,
            NewNumberInput {
                identifier: "+10000000000".into(),
                name: Some("load caller id".into()),
                trunk: Some("load".into()),
                ..Default::default()
            },
        )
        .await
        .map_err(refused("creating the caller id number"))?;
    let constructor = constructor
        .as_object()
        .context("the scenario's constructor is not a JSON object")?;
    let scenario = ops
        .create_scenario(
            &account,
            NewScenario {
                name: name.to_string(),
                description: None,
                constructor: Some(constructor.clone()),
            },
        )
        .await
        .map_err(refused("creating the scenario"))?;
    ops.publish_draft(&scenario)
        .await
        .map_err(refused("publishing the scenario"))?;
    let mut agent = NewAgent::new(GatewayType::Number, Some(number.sid), None, scenario.sid);
    agent.limits = Some(Limits {
        cps: i64::from(cps),
        cpl: i64::from(cpl),
    });
    let agent = ops
        .create_agent(&account, agent)
        .await
        .map_err(refused("creating the agent"))?;
    Ok(Provisioned {
        account,
        agent_sid: agent.sid,
    })
}

/// Dispatches one call to `recipient` through the agent, in `batch` (the first call starts
/// one): the batch it is in.
pub async fn dispatch(
    ops: &Ops<'_>,
    p: &Provisioned,
    recipient: &str,
    batch: Option<&str>,
) -> anyhow::Result<String> {
    let input = DispatchInput {
        recipient: recipient.to_string(),
        agent_sid: Some(p.agent_sid.clone()),
        batch_sid: batch.map(String::from),
        ..Default::default()
    };
    let c = ops
        .dispatch(&p.account, &input)
        .await
        .map_err(refused("dispatching a call"))?;
    c.batch_sid.context("the dispatched call has no batch")
}

/// The communications of `batch`.
pub fn batch_filter(batch: &str) -> CommunicationFilter {
    CommunicationFilter {
        batch_sid: Some(batch.to_string()),
        ..Default::default()
    }
}

/// The statistics of the calls of `batch`, as `GET /v1/communication/-/statistics` shows
/// them.
pub async fn statistics(ops: &Ops<'_>, account_sid: &str, batch: &str) -> anyhow::Result<Value> {
    let set = ops
        .communication_set(account_sid, &batch_filter(batch))
        .await
        .map_err(refused("reading the statistics"))?;
    Ok(serde_json::to_value(&set.statistics)?)
}

/// The calls of `batch` oldest first, as the API shows them, and the turns of their saved
/// histories (the first 2,000, as the statistics read them) for the turn latency plot.
pub async fn calls_and_turns(
    ops: &Ops<'_>,
    account_sid: &str,
    batch: &str,
) -> anyhow::Result<(
    Vec<Value>,
    Vec<callsmith_domain::communication::report::TurnPoint>,
)> {
    let set = ops
        .communication_set(account_sid, &batch_filter(batch))
        .await
        .map_err(refused("reading the calls"))?;
    let rows = set
        .communications
        .iter()
        .rev()
        .map(|c| serde_json::to_value(Communication::from(c)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((
        rows,
        callsmith_domain::communication::report::turn_points(&set.histories),
    ))
}
