//! Inbound routing: which agent answers a call to one of our numbers, and what it runs.
//!
//! Read on every inbound call, changed rarely, so the whole route is kept in memory until a
//! table it reads changes, and answering a call costs no query:
//! - on SQLite the store's commit hooks see every change (`caches`);
//! - on PostgreSQL, which several engines share, a trigger on each of those tables sends a
//!   notification on the channel [`ROUTES_CHANNEL`] at commit (migration 0340), and a
//!   listener of each store drops what it kept when one arrives. A change made by any
//!   engine therefore reaches every engine's routes within the notification's delivery
//!   (milliseconds). While the listener is not connected (at start, after a lost
//!   connection) nothing is kept and every route is read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};

use super::read_cache::ReadCache;
use super::{
    AccountRecord, AgentRecord, ScenarioVersionRecord, Store, StoreResult, on_db, routing_key,
};

/// The PostgreSQL notification channel of route changes.
pub const ROUTES_CHANNEL: &str = "callsmith_routes";

/// Inbound routes kept on PostgreSQL (see the module doc).
#[derive(Default)]
pub(crate) struct PgRouteCache {
    routes: ReadCache<String, Option<Arc<InboundRoute>>>,
    /// The listener is connected and listening: what is kept can be trusted.
    listening: AtomicBool,
}

impl std::fmt::Debug for PgRouteCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgRouteCache")
            .field("listening", &self.listening.load(Ordering::SeqCst))
            .finish()
    }
}

impl PgRouteCache {
    /// A cache and its listener task (which ends when the last store handle is dropped).
    pub(crate) fn start(pool: PgPool) -> Arc<PgRouteCache> {
        let cache = Arc::new(PgRouteCache::default());
        tokio::spawn(listen(pool, Arc::downgrade(&cache)));
        cache
    }

    fn routes(&self) -> Option<&ReadCache<String, Option<Arc<InboundRoute>>>> {
        self.listening
            .load(Ordering::SeqCst)
            .then_some(&self.routes)
    }

    fn stop_trusting(&self) {
        self.listening.store(false, Ordering::SeqCst);
        self.routes.invalidate();
    }
}

/// Listens on [`ROUTES_CHANNEL`], dropping the kept routes on every notification and on
/// every lost connection (notifications may have been missed); reconnects after a pause.
async fn listen(pool: PgPool, cache: Weak<PgRouteCache>) {
    const RETRY: Duration = Duration::from_secs(1);
    const CHECK: Duration = Duration::from_secs(5);
    loop {
        let Some(c) = cache.upgrade() else { return };
        c.stop_trusting();
        drop(c);
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(error = %e, "route change listener: no connection; retrying");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        if let Err(e) = listener.listen(ROUTES_CHANNEL).await {
            tracing::debug!(error = %e, "route change listener: LISTEN failed; retrying");
            tokio::time::sleep(RETRY).await;
            continue;
        }
        match cache.upgrade() {
            Some(c) => {
                c.routes.invalidate();
                c.listening.store(true, Ordering::SeqCst);
            }
            None => return,
        }
        loop {
            let next = tokio::time::timeout(CHECK, listener.try_recv()).await;
            let Some(c) = cache.upgrade() else { return };
            match next {
                // Nothing for a while: the store is still in use, keep listening.
                Err(_) => {}
                Ok(Ok(Some(_))) => c.routes.invalidate(),
                // The connection was lost: start over.
                Ok(Ok(None)) | Ok(Err(_)) => break,
            }
        }
    }
}

/// What a call to a served number runs, as stored when it was read.
#[derive(Debug, Clone)]
pub struct InboundRoute {
    /// The active agent whose gateway is the number (or the number's pool), shared with
    /// the calls that run it.
    pub agent: Arc<AgentRecord>,
    /// The number called, as stored.
    pub identifier: String,
    /// The agent's scenario's newest published version; None when none is published.
    pub published: Option<ScenarioVersionRecord>,
    /// The agent's account; None when it no longer exists.
    pub account: Option<AccountRecord>,
}

impl Store {
    /// The route of a call to `called` that arrived on a trunk bound to `trunk_tenant`
    /// (`[[sip.trunks]] inbound_tenant`; None for a trunk whose calls reach every
    /// tenant); None when no active agent serves the number for that trunk.
    ///
    /// The rule: the called number and the stored identifiers are compared by
    /// [`routing_key`] (`+4930…`, `4930…` and `004930…` alike), which at most one active
    /// number holds (migration 0372); that number's account answers through its oldest
    /// active agent on the number or its pool. A trunk bound to a tenant reaches that
    /// tenant's numbers only: a number of another tenant is not served on it.
    pub async fn inbound_route(
        &self,
        called: &str,
        trunk_tenant: Option<&str>,
    ) -> StoreResult<Option<Arc<InboundRoute>>> {
        let key = routing_key(called);
        let kept = match (&self.caches, &self.pg_routes) {
            (Some(caches), _) => Some(&caches.inbound_routes),
            (None, Some(pg)) => pg.routes(),
            (None, None) => None,
        };
        let route = match kept {
            Some(routes) => {
                routes
                    .read_through(key.clone(), Option::is_some, self.read_inbound_route(&key))
                    .await?
            }
            None => self.read_inbound_route(&key).await?,
        };
        Ok(route.filter(|r| trunk_tenant.is_none_or(|t| r.agent.tenant_sid == t)))
    }

    async fn read_inbound_route(&self, key: &str) -> StoreResult<Option<Arc<InboundRoute>>> {
        let Some((agent_sid, identifier)) = self.inbound_agent_for_number(key).await? else {
            return Ok(None);
        };
        let Some(agent) = self.agent_get(&agent_sid).await? else {
            return Ok(None);
        };
        let published = self.scenario_latest_published(&agent.scenario_sid).await?;
        let account = self.account_get(&agent.account_sid).await?;
        Ok(Some(Arc::new(InboundRoute {
            agent: Arc::new(agent),
            identifier,
            published,
            account,
        })))
    }

    /// Inbound routing: the active agent whose gateway is the active number holding
    /// `key` (a [`routing_key`]) or that number's pool, in the number's account. Returns
    /// (agent sid, number identifier as stored).
    async fn inbound_agent_for_number(&self, key: &str) -> StoreResult<Option<(String, String)>> {
        let row: Option<(String, String, Option<String>, String)> = on_db!(self, p => sqlx::query_as(
            "SELECT sid, account_sid, pool_sid, identifier FROM numbers WHERE status = 'active' AND routing_key = $1")
            .bind(key).fetch_optional(p).await)?;
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
