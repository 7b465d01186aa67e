//! The call's context: the runtime it runs in and what it was set up with (the
//! communication, its agent, the from-number and trunk). Read while the call runs, never
//! changed by it.

use std::sync::Arc;

use callsmith_domain::store::{AccountRecord, AgentRecord, CommunicationRecord};
use callsmith_scenarios::port::PortError;

use crate::runtime::Runtime;

/// What an answered call runs with.
pub(super) struct CallContext {
    pub(super) rt: Runtime,
    pub(super) comm: CommunicationRecord,
    pub(super) agent: Option<Arc<AgentRecord>>,
    pub(super) from_number: String,
    /// The trunk the call runs on (a bridged transfer's second leg leaves through it).
    pub(super) trunk: String,
}

impl CallContext {
    /// The call's account, when its `global_llm` feature flag lets its bricks ask a model.
    pub(super) async fn llm_account(&self) -> Result<AccountRecord, PortError> {
        let store = &self.rt.store;
        let failed = |e: callsmith_domain::store::StoreError| PortError::Failed(e.to_string());
        let account = store
            .account_get(&self.comm.account_sid)
            .await
            .map_err(failed)?
            .ok_or_else(|| PortError::NotAllowed("the account no longer exists".into()))?;
        let enabled = callsmith_domain::adapters::llm::llm_enabled(store, &account)
            .await
            .map_err(failed)?;
        if !enabled {
            return Err(PortError::NotAllowed(
                "llm_disabled: the global_llm feature flag is off for this account".into(),
            ));
        }
        Ok(account)
    }
}
