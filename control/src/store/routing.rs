//! Inbound routing: which agent answers a call to one of our numbers, and what it runs.
//!
//! Read on every inbound call, changed rarely: on SQLite the whole route is kept in memory
//! until a table it reads changes (`read_cache`), so answering a call costs no query; on
//! PostgreSQL, which several engines share, it is read each time.

use std::sync::Arc;

use super::{AccountRecord, AgentRecord, ScenarioVersionRecord, Store, StoreResult, on_db};

/// What a call to a served number runs, as stored when it was read.
#[derive(Debug, Clone)]
pub struct InboundRoute {
    /// The active agent whose gateway is the number (or the number's pool).
    pub agent: AgentRecord,
    /// The number called, as stored.
    pub identifier: String,
    /// The agent's scenario's newest published version; None when none is published.
    pub published: Option<ScenarioVersionRecord>,
    /// The agent's account; None when it no longer exists.
    pub account: Option<AccountRecord>,
}

impl Store {
    /// The route of a call to `called` (normalised as the SIP layer gives it; `+1555…` and
    /// `1555…` alike); None when no active agent serves the number.
    pub async fn inbound_route(&self, called: &str) -> StoreResult<Option<Arc<InboundRoute>>> {
        let digits = called.trim_start_matches('+').to_string();
        match &self.caches {
            Some(caches) => {
                caches
                    .inbound_routes
                    .read_through(
                        digits.clone(),
                        Option::is_some,
                        self.read_inbound_route(&digits),
                    )
                    .await
            }
            None => self.read_inbound_route(&digits).await,
        }
    }

    async fn read_inbound_route(&self, called: &str) -> StoreResult<Option<Arc<InboundRoute>>> {
        let Some((agent_sid, identifier)) = self.inbound_agent_for_number(called).await? else {
            return Ok(None);
        };
        let Some(agent) = self.agent_get(&agent_sid).await? else {
            return Ok(None);
        };
        let published = self.scenario_latest_published(&agent.scenario_sid).await?;
        let account = self.account_get(&agent.account_sid).await?;
        Ok(Some(Arc::new(InboundRoute {
            agent,
            identifier,
            published,
            account,
        })))
    }

    /// Inbound routing: the active agent whose gateway is the called number (by its
    /// identifier, normalised as the SIP layer gives it) or the number's pool. Returns
    /// (agent sid, number identifier as stored). Matches `+1555…` and `1555…` alike.
    async fn inbound_agent_for_number(
        &self,
        called: &str,
    ) -> StoreResult<Option<(String, String)>> {
        let digits = called.trim_start_matches('+').to_string();
        let plus = format!("+{digits}");
        let row: Option<(String, String, Option<String>, String)> = on_db!(self, p => sqlx::query_as(
            "SELECT sid, account_sid, pool_sid, identifier FROM numbers WHERE status = 'active' AND identifier IN ($1, $2) ORDER BY created_at ASC LIMIT 1")
            .bind(&digits).bind(&plus).fetch_optional(p).await)?;
        let Some((number_sid, account_sid, pool_sid, identifier)) = row else {
            return Ok(None);
        };
        let pool = pool_sid.unwrap_or_default();
        let agent: Option<String> = on_db!(self, p => sqlx::query_scalar(
            "SELECT sid FROM agents WHERE account_sid = $1 AND status = 'active' AND archive_time IS NULL \
             AND (number_sid = $2 OR (number_pool_sid IS NOT NULL AND number_pool_sid = $3)) ORDER BY created_at ASC LIMIT 1")
            .bind(&account_sid).bind(&number_sid).bind(&pool).fetch_optional(p).await)?;
        Ok(agent.map(|a| (a, identifier)))
    }
}
