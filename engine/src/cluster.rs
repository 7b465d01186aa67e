//! This node among its peers on one database: its heartbeat, the hang-ups asked of its
//! calls on other nodes, and the takeover of a peer that stopped writing its heartbeat
//! (see `callsmith_domain::store::nodes`).
//!
//! Every heartbeat the node also hangs up its calls whose hang-up was asked on another
//! node (`POST /v1/communication/{id}/hangup` there marks the row).
//!
//! Every `dialer.heartbeat_interval_ms` the node writes its heartbeat (keyed by its claim
//! token) and looks for nodes whose heartbeat is older than `dialer.node_timeout_ms`. The
//! first live peer to see a lost node takes it over in one transaction, then ends each of
//! the lost node's answered calls: a BYE built from the SIP dialog the lost node stored
//! when the call was answered ([`callsmith_sip::DialogRecord`]), sent from this node's
//! own SIP transport, and, once the BYE is sent (the session ends then, whatever the far
//! end answers), the final record: `interrupted`, `call_status` `answered`,
//! `end_reason` [`NODE_LOST`], the result deliveries queued as for any ended call. Its other
//! live calls are interrupted as an expired lease would be (never redialled), so no call
//! waits the lease out.
//!
//! From SIGKILL to the BYE at the far end: the node timeout counted from the lost node's
//! last heartbeat (up to one interval before the kill), plus up to one interval until a
//! peer looks: 2 to 4 s with the defaults (`tests/tests/cluster.rs` measures it).

use std::time::Duration;

use callsmith_domain::communication::CommunicationStatus;
use callsmith_domain::store::communications::{CallFinish, CallWrite, Claim};
use callsmith_domain::store::nodes::LostCall;
use callsmith_sip::{CallStatus, DialogRecord};
use chrono::Utc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::runtime::Runtime;

/// The end reason of an answered call whose node was lost and that a peer ended.
pub use callsmith_domain::store::communications::NODE_LOST;

/// Writes this node's heartbeat and takes over lost peers until `stop`.
pub async fn run(rt: Runtime, stop: CancellationToken) {
    let cfg = &rt.settings.dialer;
    let every = Duration::from_millis(cfg.heartbeat_interval_ms.max(50));
    let timeout = chrono::Duration::milliseconds(cfg.node_timeout_ms.max(1) as i64);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let now = Utc::now();
        let s = &rt.settings;
        if let Err(e) = rt
            .store
            .node_heartbeat(&s.claim_token, &s.instance, s.internal_url.as_deref(), now)
            .await
        {
            warn!(error = %e, "writing the node heartbeat failed");
            continue;
        }
        match rt.store.communications_hangups_asked(&s.claim_token).await {
            Ok(sids) => {
                for sid in sids {
                    rt.services.hangups.request(&sid);
                }
            }
            Err(e) => warn!(error = %e, "looking for hang-ups asked elsewhere failed"),
        }
        let seen_before = now - timeout;
        match rt.store.nodes_lost(seen_before).await {
            Ok(lost) => {
                for token in lost {
                    take_over(&rt, &token, seen_before).await;
                }
            }
            Err(e) => warn!(error = %e, "looking for lost nodes failed"),
        }
    }
}

async fn take_over(rt: &Runtime, lost: &str, seen_before: chrono::DateTime<Utc>) {
    let s = &rt.settings;
    let claim = Claim {
        token: s.claim_token.clone(),
        by: s.instance.clone(),
        until: Utc::now() + chrono::Duration::from_std(s.lease).unwrap_or_default(),
    };
    match rt.store.node_take_over(lost, seen_before, &claim).await {
        Ok(Some(t)) => {
            info!(
                node = %lost,
                calls = t.calls.len(),
                interrupted = t.interrupted,
                deliveries = t.deliveries,
                "lost node taken over"
            );
            for call in t.calls {
                tokio::spawn(end_lost_call(rt.clone(), call));
            }
        }
        Ok(None) => {}
        Err(e) => warn!(node = %lost, error = %e, "taking over a lost node failed"),
    }
}

/// Ends one answered call of a lost node: the BYE, then the final record.
async fn end_lost_call(rt: Runtime, call: LostCall) {
    let _live = rt.live.enter();
    let bye = match serde_json::from_str::<DialogRecord>(&call.dialog) {
        Ok(d) => rt.sip.end_dialog(&d).await.map_err(|e| e.to_string()),
        Err(e) => Err(format!("its stored dialog does not read: {e}")),
    };
    let comm = match rt.store.communication_get(&call.sid).await {
        Ok(Some(c)) => c,
        Ok(None) => return,
        Err(e) => {
            warn!(communication = %call.sid, error = %e, "reading a lost node's call failed; its lease runs out instead");
            return;
        }
    };
    let at = Utc::now();
    let instance = &rt.settings.instance;
    match &bye {
        Ok(()) => {
            info!(communication = %call.sid, call_id = %comm.call_id.as_deref().unwrap_or(""), "lost node's call ended with a BYE")
        }
        Err(e) => {
            warn!(communication = %call.sid, error = %e, "lost node's call: the BYE could not be sent")
        }
    }
    let f = CallFinish {
        call_status: Some(CallStatus::Answered.as_str().into()),
        duration: comm
            .answered_at
            .map_or(0, |a| (at - a).num_seconds().max(0)),
        answered_at: comm.answered_at,
        end_reason: Some(NODE_LOST.into()),
        error: Some(match bye {
            Ok(()) => {
                format!("the engine running the call stopped; {instance} ended the call with a BYE")
            }
            Err(e) => format!(
                "the engine running the call stopped; the BYE from {instance} could not be sent: {e}"
            ),
        }),
        ..CallFinish::new(CommunicationStatus::Interrupted)
    };
    let agent = match &comm.agent_sid {
        Some(a) => rt.store.agent_get(a).await.ok().flatten(),
        None => None,
    };
    let deliveries = crate::delivery::deliveries(&comm, agent.as_ref());
    if let Err(e) = rt
        .journal
        .commit(CallWrite::Finish {
            sid: comm.sid.clone(),
            token: rt.settings.claim_token.clone(),
            finish: Box::new(f),
            deliveries,
            at,
        })
        .await
    {
        warn!(communication = %comm.sid, error = %e, "storing a lost node's call end failed");
    }
}
