//! Which cpl the live-calls plot of a set of communications draws: the cpl of the one
//! agent that made every call of the set; none, with the reason, otherwise.

use std::collections::BTreeSet;

use crate::store::{CommunicationRecord, Store, StoreResult};

/// The cpl line of a report's live-calls plot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CplLine {
    /// Draw the agent's cpl (calls live at once, > 0).
    Agent { agent_sid: String, cpl: i64 },
    /// Draw none, for the reason given (shown on the page).
    None(String),
}

impl CplLine {
    /// The line for `calls` of `account_sid`: the agent's current cpl when one agent made
    /// every call; no line when the set is empty, holds calls of no agent (scenario test
    /// calls, browser calls), spans several agents (each agent's cpl bounds its own calls,
    /// not their sum), or the agent is gone or has no cpl (0).
    pub async fn of<'a>(
        store: &Store,
        account_sid: &str,
        calls: impl IntoIterator<Item = &'a CommunicationRecord>,
    ) -> StoreResult<CplLine> {
        let mut agents = BTreeSet::new();
        let mut without_agent = 0usize;
        for c in calls {
            match &c.agent_sid {
                Some(a) => {
                    agents.insert(a.clone());
                }
                None => without_agent += 1,
            }
        }
        if without_agent > 0 {
            return Ok(CplLine::None(format!(
                "no cpl line: {without_agent} of these calls were made through no agent (scenario test or browser calls), which no cpl limits"
            )));
        }
        let mut it = agents.iter();
        let (Some(agent_sid), None) = (it.next(), it.next()) else {
            return Ok(CplLine::None(if agents.is_empty() {
                "no cpl line: no calls".to_string()
            } else {
                let mut cpls = Vec::new();
                for a in &agents {
                    let cpl = store
                        .agent_get(a)
                        .await?
                        .filter(|r| r.account_sid == account_sid)
                        .map_or("gone".to_string(), |r| r.cpl.to_string());
                    cpls.push(format!("{a}: {cpl}"));
                }
                format!(
                    "no cpl line: these calls were made by {} agents, and each agent's cpl bounds its own calls, not their sum (cpl {})",
                    agents.len(),
                    cpls.join(", ")
                )
            }));
        };
        let agent = store
            .agent_get(agent_sid)
            .await?
            .filter(|r| r.account_sid == account_sid);
        Ok(match agent {
            None => CplLine::None(format!(
                "no cpl line: the agent {agent_sid} that made these calls no longer exists"
            )),
            Some(a) if a.cpl <= 0 => CplLine::None(format!(
                "no cpl line: the agent {agent_sid} has no cpl (0: unlimited)"
            )),
            Some(a) => CplLine::Agent {
                agent_sid: a.sid,
                cpl: a.cpl,
            },
        })
    }
}
