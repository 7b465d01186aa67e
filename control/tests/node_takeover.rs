//! Engines as peers on one database (SQLite and PostgreSQL): heartbeats, a lost node found
//! by its stale heartbeat, and its takeover by exactly one peer: its answered calls with a
//! SIP dialog move to the peer's claim, its other live rows are interrupted, never
//! redialled.

use callsmith_control::{
    both_backends,
    testing::{TestServer, minimal_snapshot},
};
use callsmith_domain::{
    communication::CommunicationStatus,
    store::{
        communications::{CallFinish, CallWrite, Claim, ClaimScope},
        nodes::LostCall,
    },
};
use chrono::{Duration, Utc};
use serde_json::json;

fn claim(token: &str) -> Claim {
    Claim {
        token: token.into(),
        by: format!("{token}-host:1"),
        until: Utc::now() + Duration::seconds(600),
    }
}

async fn a_lost_node_is_taken_over_once(s: TestServer) {
    let f = s.fixture().await;
    let scn = s.published_scenario(&f, &minimal_snapshot("t")).await;
    s.post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": "+4911"}))
        .send()
        .await
        .expect(201);
    let mut ids = Vec::new();
    for recipient in ["+15550001", "+15550002", "+15550003"] {
        let r = s
            .post("/v1/communication/-/dispatch")
            .bearer(&f.account_key)
            .json(&json!({"recipient": recipient, "scenario_sid": scn}))
            .send()
            .await;
        r.expect(201);
        ids.push(r.str("id"));
    }
    let (with_dialog, without_dialog, unstarted) = (&ids[0], &ids[1], &ids[2]);
    // The node "lost" claims all three (a lease far from running out), answers two.
    let rows = s
        .store
        .communication_claim_due(&claim("lost"), &ClaimScope::TestCalls, 10)
        .await
        .unwrap();
    assert_eq!(rows.len(), 3);
    let mut writes = Vec::new();
    for (sid, dialog) in [
        (with_dialog, Some(r#"{"call_id":"c1"}"#.to_string())),
        (without_dialog, None),
    ] {
        writes.push(CallWrite::Started {
            sid: sid.clone(),
            token: "lost".into(),
            from_number: "+4911".into(),
            trunk: None,
            at: Utc::now(),
        });
        writes.push(CallWrite::Answered {
            sid: sid.clone(),
            token: "lost".into(),
            call_id: format!("{sid}@127.0.0.1"),
            dialog,
            at: Utc::now(),
        });
    }
    s.store.communications_apply(&writes).await.unwrap();

    let now = Utc::now();
    let timeout = Duration::seconds(3);
    s.store
        .node_heartbeat("lost", "lost-host:1", None, now - Duration::seconds(10))
        .await
        .unwrap();
    s.store
        .node_heartbeat("peer", "peer-host:2", None, now)
        .await
        .unwrap();
    // A node whose heartbeat went stale and came back is not lost.
    s.store
        .node_heartbeat("slow", "slow-host:3", None, now - Duration::seconds(10))
        .await
        .unwrap();
    s.store
        .node_heartbeat("slow", "slow-host:3", None, now)
        .await
        .unwrap();
    assert_eq!(
        s.store.nodes_lost(now - timeout).await.unwrap(),
        vec!["lost".to_string()]
    );
    assert_eq!(
        s.store
            .node_take_over("slow", now - timeout, &claim("peer"))
            .await
            .unwrap(),
        None
    );

    let taken = s
        .store
        .node_take_over("lost", now - timeout, &claim("peer"))
        .await
        .unwrap()
        .expect("taken over");
    assert_eq!(
        taken.calls,
        vec![LostCall {
            sid: with_dialog.clone(),
            dialog: r#"{"call_id":"c1"}"#.into()
        }]
    );
    assert_eq!(taken.interrupted, 2);
    // Exactly one peer takes a node over.
    assert_eq!(
        s.store
            .node_take_over("lost", now - timeout, &claim("other"))
            .await
            .unwrap(),
        None
    );
    assert!(s.store.nodes_lost(now - timeout).await.unwrap().is_empty());

    let row = |sid: &String| {
        let store = s.store.clone();
        let sid = sid.clone();
        async move { store.communication_get(&sid).await.unwrap().unwrap() }
    };
    let moved = row(with_dialog).await;
    assert_eq!(moved.communication_status, CommunicationStatus::InProgress);
    assert_eq!(moved.claim_token.as_deref(), Some("peer"));
    assert_eq!(moved.claimed_by.as_deref(), Some("peer-host:1"));
    for (sid, error) in [
        (without_dialog, "the engine running the call stopped"),
        (
            unstarted,
            "the engine that claimed the call stopped around its start; it may not have been placed",
        ),
    ] {
        let r = row(sid).await;
        assert_eq!(
            r.communication_status,
            CommunicationStatus::Interrupted,
            "{sid}"
        );
        assert_eq!(r.error.as_deref(), Some(error));
        assert_eq!(r.claim_token, None);
    }
    // The peer writes the end under its own claim; the lost node's claim is gone.
    let mut end = CallFinish::new(CommunicationStatus::Interrupted);
    end.end_reason = Some("node_lost".into());
    let finish = |token: &str| CallWrite::Finish {
        sid: with_dialog.clone(),
        token: token.into(),
        finish: Box::new(end.clone()),
        deliveries: None,
        at: Utc::now(),
    };
    assert!(!s.store.communication_apply(finish("lost")).await.unwrap());
    assert!(s.store.communication_apply(finish("peer")).await.unwrap());
    let ended = row(with_dialog).await;
    assert_eq!(ended.communication_status, CommunicationStatus::Interrupted);
    assert_eq!(ended.end_reason.as_deref(), Some("node_lost"));

    // A node that stops cleanly leaves nothing to take over.
    s.store.node_leave("peer").await.unwrap();
    assert!(
        s.store
            .nodes_lost(Utc::now() + Duration::seconds(1))
            .await
            .unwrap()
            .iter()
            .all(|t| t != "peer")
    );
}

/// A hang-up asked on a node that does not run the call marks its live row for the node
/// holding the claim; a row that is not live is not marked; the end clears the mark.
async fn a_hangup_reaches_the_node_holding_the_claim(s: TestServer) {
    let f = s.fixture().await;
    let scn = s.published_scenario(&f, &minimal_snapshot("t")).await;
    s.post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": "+4911"}))
        .send()
        .await
        .expect(201);
    let mut ids = Vec::new();
    for recipient in ["+15550001", "+15550002"] {
        let r = s
            .post("/v1/communication/-/dispatch")
            .bearer(&f.account_key)
            .json(&json!({"recipient": recipient, "scenario_sid": scn}))
            .send()
            .await;
        r.expect(201);
        ids.push(r.str("id"));
    }
    assert!(
        !s.store.communication_request_hangup(&ids[0]).await.unwrap(),
        "not dialled yet"
    );
    let rows = s
        .store
        .communication_claim_due(&claim("owner"), &ClaimScope::TestCalls, 1)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let live = rows[0].sid.clone();
    let waiting = ids.iter().find(|i| **i != live).unwrap().clone();
    assert!(
        s.store
            .communications_hangups_asked("owner")
            .await
            .unwrap()
            .is_empty()
    );
    // Through the API of a node that does not run the call (this test server runs none).
    s.post(&format!("/v1/communication/{live}/hangup"))
        .bearer(&f.account_key)
        .send()
        .await
        .expect(202);
    let r = s
        .post(&format!("/v1/communication/{waiting}/hangup"))
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(409);
    assert_eq!(r.str("error"), "not_live");
    assert_eq!(
        s.store.communications_hangups_asked("owner").await.unwrap(),
        vec![live.clone()]
    );
    assert!(
        s.store
            .communications_hangups_asked("other")
            .await
            .unwrap()
            .is_empty()
    );
    let mut end = CallFinish::new(CommunicationStatus::Completed);
    end.end_reason = Some("hangup_requested".into());
    assert!(
        s.store
            .communication_apply(CallWrite::Finish {
                sid: live.clone(),
                token: "owner".into(),
                finish: Box::new(end),
                deliveries: None,
                at: Utc::now(),
            })
            .await
            .unwrap()
    );
    assert!(
        s.store
            .communications_hangups_asked("owner")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !s.store.communication_request_hangup(&live).await.unwrap(),
        "ended"
    );
}

both_backends!(
    a_lost_node_is_taken_over_once,
    a_hangup_reaches_the_node_holding_the_claim
);
