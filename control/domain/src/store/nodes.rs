//! Engines as peers on one database: heartbeats and the takeover of a lost node.
//!
//! Each engine writes its heartbeat (`engine_nodes`, keyed by its claim token) about every
//! second. A node whose heartbeat is older than the node timeout is lost: the first peer
//! that sees it takes it over in ONE transaction ([`Store::node_take_over`]): it deletes
//! the lost node's heartbeat (so no other peer takes it over too), moves the lost node's
//! answered calls that carry a SIP dialog to its own claim (the peer then ends each with a
//! BYE and a final record), interrupts every other live row of the lost node as an expired
//! lease would ([`Store::communications_reconcile`], never redialled), and puts the result
//! deliveries the lost node was sending back in the queue.
//!
//! A hang-up asked on a node that does not run the call is carried by the row: the API
//! marks it ([`Store::communication_request_hangup`]) and the node holding its claim finds
//! the mark at its next heartbeat ([`Store::communications_hangups_asked`]).

use super::BeginWrite;
use chrono::{DateTime, Utc};

use super::communications::{Claim, interrupt_sql};
use super::{Store, StoreError, StoreResult, on_db, store_row};
use crate::communication::{CommunicationStatus, SqlList};

const LIVE: SqlList = SqlList(CommunicationStatus::LIVE);

store_row! {
    /// A node's heartbeat row.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct NodeRecord {
        pub claim_token: String,
        /// `host:pid`.
        pub instance: String,
        /// Where peers reach the node's control API (`http.internal_url`); None: nowhere.
        pub api_url: Option<String>,
        pub seen_at: DateTime<Utc>,
    }
}

/// A lost node's answered call, now claimed by the peer that took the node over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostCall {
    pub sid: String,
    /// The SIP dialog stored with the answer (`callsmith_sip::DialogRecord` as JSON).
    pub dialog: String,
}

/// What [`Store::node_take_over`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TakeOver {
    /// Answered calls to end, claimed by the peer.
    pub calls: Vec<LostCall>,
    /// Other live rows of the lost node, interrupted.
    pub interrupted: u64,
    /// Result deliveries the lost node was sending, queued again.
    pub deliveries: u64,
}

impl Store {
    /// Writes this node's heartbeat (`token` is its claim token, `instance` its
    /// `host:pid`, `api_url` where its peers reach its control API, if anywhere).
    pub async fn node_heartbeat(
        &self,
        token: &str,
        instance: &str,
        api_url: Option<&str>,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        on_db!(self, p => sqlx::query("INSERT INTO engine_nodes (claim_token, instance, started_at, seen_at, api_url) VALUES ($1, $2, $3, $3, $4) \
            ON CONFLICT (claim_token) DO UPDATE SET seen_at = excluded.seen_at, api_url = excluded.api_url")
            .bind(token).bind(instance).bind(at).bind(api_url).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// The node holding claim `token`, as its heartbeat row has it; None when no live node
    /// holds that token (it left, or a peer took it over).
    pub async fn node_get(&self, token: &str) -> StoreResult<Option<NodeRecord>> {
        Ok(on_db!(self, p => sqlx::query_as::<_, NodeRecord>(
            "SELECT claim_token, instance, api_url, seen_at FROM engine_nodes WHERE claim_token = $1")
            .bind(token).fetch_optional(p).await)?)
    }

    /// Removes this node's heartbeat: it stops with nothing left to take over.
    pub async fn node_leave(&self, token: &str) -> StoreResult<()> {
        on_db!(self, p => sqlx::query("DELETE FROM engine_nodes WHERE claim_token = $1")
            .bind(token).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    /// The claim tokens of the nodes whose last heartbeat is older than `seen_before`.
    pub async fn nodes_lost(&self, seen_before: DateTime<Utc>) -> StoreResult<Vec<String>> {
        Ok(
            on_db!(self, p => sqlx::query_scalar::<_, String>("SELECT claim_token FROM engine_nodes WHERE seen_at < $1 ORDER BY seen_at")
            .bind(seen_before).fetch_all(p).await)?,
        )
    }

    /// Takes over the node `lost` if its heartbeat is still older than `seen_before` and
    /// no other peer took it over first (see the module doc); None otherwise. The calls
    /// returned are claimed with `claim` and stay `in_progress` until the peer writes
    /// their end.
    pub async fn node_take_over(
        &self,
        lost: &str,
        seen_before: DateTime<Utc>,
        claim: &Claim,
    ) -> StoreResult<Option<TakeOver>> {
        let t = super::now();
        let [maybe_placed, interrupted] = interrupt_sql("claim_token = $2");
        on_db!(self, p => async {
            let mut tx = p.begin_write().await?;
            let gone = sqlx::query("DELETE FROM engine_nodes WHERE claim_token = $1 AND seen_at < $2")
                .bind(lost).bind(seen_before).execute(&mut *tx).await?.rows_affected();
            if gone == 0 {
                tx.rollback().await?;
                return Ok::<_, StoreError>(None);
            }
            let rows: Vec<(String, String)> = sqlx::query_as(
                "UPDATE communications SET claim_token = $2, claimed_by = $3, claimed_until = $4, updated_at = $5 \
                 WHERE claim_token = $1 AND communication_status = 'in_progress' AND sip_dialog IS NOT NULL \
                 RETURNING sid, sip_dialog")
                .bind(lost).bind(&claim.token).bind(&claim.by).bind(claim.until).bind(t)
                .fetch_all(&mut *tx).await?;
            let mut n = 0;
            for sql in [&maybe_placed, &interrupted] {
                n += sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(t).bind(lost).execute(&mut *tx).await?.rows_affected();
            }
            let deliveries = sqlx::query("UPDATE result_deliveries SET status = 'new', claim_token = NULL, claimed_until = NULL, \
                updated_at = $2 WHERE claim_token = $1 AND status = 'delivering'")
                .bind(lost).bind(t).execute(&mut *tx).await?.rows_affected();
            tx.commit().await?;
            let mut calls: Vec<LostCall> = rows
                .into_iter()
                .map(|(sid, dialog)| LostCall { sid, dialog })
                .collect();
            calls.sort_by(|a, b| a.sid.cmp(&b.sid));
            Ok(Some(TakeOver { calls, interrupted: n, deliveries }))
        }.await)
    }

    /// Marks a live call (`dialing`, `in_progress`, claimed by a node) for hang-up by the
    /// node that runs it; false when the row is not a live call.
    pub async fn communication_request_hangup(&self, sid: &str) -> StoreResult<bool> {
        let t = super::now();
        let n = on_db!(self, p => sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE communications SET hangup_requested_at = $2 \
            WHERE sid = $1 AND claim_token IS NOT NULL AND communication_status IN ({LIVE})")))
            .bind(sid).bind(t).execute(p).await.map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// The live calls claimed by `token` whose hang-up was asked on another node.
    pub async fn communications_hangups_asked(&self, token: &str) -> StoreResult<Vec<String>> {
        Ok(
            on_db!(self, p => sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(format!("SELECT sid FROM communications \
            WHERE claim_token = $1 AND hangup_requested_at IS NOT NULL AND communication_status IN ({LIVE}) ORDER BY sid")))
            .bind(token).fetch_all(p).await)?,
        )
    }
}
