//! Who a call is from, through which trunk, and in which time zone its scenario runs: one
//! rule for the dispatch API, the dialer and inbound calls (docs/communications.md,
//! "from-number").
//!
//! - An agent's call is from the agent's number, or, with a number pool, from a pool
//!   number picked when the call is placed (rotating over the pool's active numbers).
//! - A scenario test call is from an active number of the account.
//! - The trunk is the number's trunk when this engine has a gateway for it, else the
//!   tenant's oldest trunk this engine has one for, else the engine's default trunk
//!   ([`NodeTrunks::place`]); a dispatch that none of them could place is refused at once
//!   (docs/trunks.md).
//! - The time zone is the agent's, else the account's, else UTC.

use chrono_tz::Tz;

use crate::store::{AccountRecord, AgentRecord, NumberRecord, Store, StoreError};

/// The number a call is from and the trunk that number names, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerId {
    pub number: String,
    pub trunk: Option<String>,
}

impl From<&NumberRecord> for CallerId {
    fn from(n: &NumberRecord) -> Self {
        CallerId {
            number: n.identifier.clone(),
            trunk: n.trunk.clone(),
        }
    }
}

/// Where an agent's calls come from, as known when a call is dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentCaller {
    /// The agent's own number.
    Number(CallerId),
    /// A number of this pool, picked when the call is placed.
    Pool(String),
}

/// Why a call has no from-number.
#[derive(Debug, thiserror::Error)]
pub enum CallerIdError {
    #[error("the agent's number no longer exists")]
    NumberGone,
    #[error("the agent's number pool has no active number")]
    PoolEmpty,
    #[error("the agent has neither a number nor a number pool")]
    AgentHasNone,
    #[error("the account has no active number to call from")]
    NoAccountNumber,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where an agent's calls come from: its number (resolved now) or its pool (picked per
/// call by [`pool_caller`]).
pub async fn agent_caller(
    store: &Store,
    agent: &AgentRecord,
) -> Result<AgentCaller, CallerIdError> {
    if let Some(n) = &agent.number_sid {
        let num = store
            .number_get(n)
            .await?
            .ok_or(CallerIdError::NumberGone)?;
        return Ok(AgentCaller::Number(CallerId::from(&num)));
    }
    match &agent.number_pool_sid {
        Some(p) => Ok(AgentCaller::Pool(p.clone())),
        None => Err(CallerIdError::AgentHasNone),
    }
}

/// A number of the pool for one call: `pick(len)` chooses among the pool's active numbers
/// (oldest first); the dialer rotates.
pub async fn pool_caller(
    store: &Store,
    pool_sid: &str,
    pick: impl FnOnce(usize) -> usize,
) -> Result<CallerId, CallerIdError> {
    let nums = store.pool_active_numbers(pool_sid).await?;
    if nums.is_empty() {
        return Err(CallerIdError::PoolEmpty);
    }
    let i = pick(nums.len()).min(nums.len() - 1);
    Ok(CallerId::from(&nums[i]))
}

/// The pool number a call to a recipient goes out from: the number its account last
/// dialled that recipient from (`last`) while it is still among the pool's active
/// `numbers`, so one recipient sees one caller ID (docs/strategies.md, "Sticky caller
/// ID"); else the one `pick(len)` chooses. None for an empty pool.
pub fn sticky_pick<'a>(
    numbers: &'a [NumberRecord],
    last: Option<&str>,
    pick: impl FnOnce(usize) -> usize,
) -> Option<&'a NumberRecord> {
    if numbers.is_empty() {
        return None;
    }
    if let Some(n) = last.and_then(|l| numbers.iter().find(|n| n.identifier == l)) {
        return Some(n);
    }
    Some(&numbers[pick(numbers.len()).min(numbers.len() - 1)])
}

/// The from-number of an agent's call to `recipient` of `account_sid` when it is placed:
/// the agent's number, or, with a pool, the pool number the account last dialled the
/// recipient from while it is still in the pool ([`sticky_pick`]), else one picked by
/// `pick` (the dialer rotates).
pub async fn recipient_call_caller(
    store: &Store,
    agent: &AgentRecord,
    account_sid: &str,
    recipient: &str,
    pick: impl FnOnce(&str, usize) -> usize,
) -> Result<CallerId, CallerIdError> {
    let pool = match agent_caller(store, agent).await? {
        AgentCaller::Number(c) => return Ok(c),
        AgentCaller::Pool(p) => p,
    };
    let nums = store.pool_active_numbers(&pool).await?;
    let last = store
        .recipient_last_from_number(account_sid, recipient)
        .await?;
    sticky_pick(&nums, last.as_deref(), |len| pick(&pool, len))
        .map(CallerId::from)
        .ok_or(CallerIdError::PoolEmpty)
}

/// The from-number of an agent's call when it is placed: the agent's number, or a pool
/// number picked by `pick`.
pub async fn agent_call_caller(
    store: &Store,
    agent: &AgentRecord,
    pick: impl FnOnce(&str, usize) -> usize,
) -> Result<CallerId, CallerIdError> {
    match agent_caller(store, agent).await? {
        AgentCaller::Number(c) => Ok(c),
        AgentCaller::Pool(p) => pool_caller(store, &p, |len| pick(&p, len)).await,
    }
}

/// The from-number of a scenario test call: an active number of the account.
pub async fn test_call_caller(store: &Store, account_sid: &str) -> Result<CallerId, CallerIdError> {
    let num = store
        .number_pick_for_account(account_sid)
        .await?
        .ok_or(CallerIdError::NoAccountNumber)?;
    Ok(CallerId::from(&num))
}

/// The trunk a call goes out on: `preferred` (the number's) when `usable` here, else the
/// first usable of the tenant's trunks, oldest first.
pub async fn call_trunk(
    store: &Store,
    tenant_sid: &str,
    preferred: Option<&str>,
    usable: impl Fn(&str) -> bool,
) -> Result<Option<String>, StoreError> {
    if let Some(t) = preferred.filter(|t| !t.is_empty() && usable(t)) {
        return Ok(Some(t.to_string()));
    }
    let (trunks, _) = store.trunk_list(tenant_sid, false, 100, 0).await?;
    Ok(trunks.into_iter().map(|t| t.name).find(|n| usable(n)))
}

/// The SIP trunks a node places calls through: the names of its `[[sip.trunks]]` and its
/// `sip.default_trunk` (which names one of them: the engine checks it at start).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTrunks {
    pub names: Vec<String>,
    pub default: Option<String>,
}

impl NodeTrunks {
    /// Whether the node has a trunk named `name`.
    pub fn has(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// The trunk a call of `tenant_sid` from a number on `preferred` leaves through:
    /// [`call_trunk`] over this node's trunks, else the default trunk. `None`: no trunk of
    /// this node can place it.
    pub async fn place(
        &self,
        store: &Store,
        tenant_sid: &str,
        preferred: Option<&str>,
    ) -> Result<Option<String>, StoreError> {
        let chosen = call_trunk(store, tenant_sid, preferred, |t| self.has(t)).await?;
        Ok(chosen.or_else(|| self.default.clone()))
    }

    /// Whether a call of `tenant_sid` from a number on any of `preferred` (the trunks of
    /// the numbers it may be from; none known yet is `[None]`) can be placed.
    pub async fn can_place(
        &self,
        store: &Store,
        tenant_sid: &str,
        preferred: &[Option<String>],
    ) -> Result<bool, StoreError> {
        if preferred.iter().flatten().any(|t| self.has(t)) {
            return Ok(true);
        }
        Ok(self.place(store, tenant_sid, None).await?.is_some())
    }
}

/// Why a call cannot be placed when no trunk of the node can place it (422 `no_trunk` at
/// dispatch; the call's `error` if it comes to dialling all the same).
pub const NO_TRUNK: &str = "no trunk can place the call: the number's trunk and the tenant's \
     trunks (POST /v1/internal/trunk) name none of the node's [[sip.trunks]], and the node \
     has no sip.default_trunk (docs/trunks.md)";

/// The time zone a call's scenario runs in: the agent's, else the account's, else UTC.
pub fn call_timezone(agent: Option<&AgentRecord>, account: &AccountRecord) -> String {
    agent
        .map(|a| a.timezone.as_str())
        .filter(|t| !t.is_empty())
        .or(Some(account.timezone.as_str()).filter(|t| !t.is_empty()))
        .unwrap_or("UTC")
        .to_string()
}

/// A stored time-zone name as a zone; UTC for one that does not parse (names are checked
/// when agents and accounts are written).
pub fn zone(name: &str) -> Tz {
    name.parse().unwrap_or(Tz::UTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones() {
        assert_eq!(zone("Europe/Berlin"), Tz::Europe__Berlin);
        assert_eq!(zone(""), Tz::UTC);
        assert_eq!(zone("Mars/Olympus"), Tz::UTC);
    }

    fn number(identifier: &str) -> NumberRecord {
        NumberRecord {
            sid: format!("num_{identifier}"),
            tenant_sid: "ten".into(),
            account_sid: "acc".into(),
            identifier: identifier.into(),
            name: String::new(),
            pool_sid: Some("pool".into()),
            trunk: None,
            status: "active".into(),
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn a_recipient_keeps_its_caller_id_while_the_number_is_in_the_pool() {
        let pool = [number("+100"), number("+200"), number("+300")];
        // Three attempts to one recipient: the first rotates, the next ones stick to it
        // whatever the rotation would pick.
        let first = sticky_pick(&pool, None, |_| 1).unwrap();
        assert_eq!(first.identifier, "+200");
        for rotation in [0, 2] {
            let next = sticky_pick(&pool, Some(&first.identifier), |_| rotation).unwrap();
            assert_eq!(next.identifier, "+200");
        }
        // The number left the pool: the rotation picks again.
        let shrunk = [number("+100"), number("+300")];
        assert_eq!(
            sticky_pick(&shrunk, Some("+200"), |_| 1)
                .unwrap()
                .identifier,
            "+300"
        );
        assert!(sticky_pick(&[], Some("+200"), |_| 0).is_none());
    }
}
