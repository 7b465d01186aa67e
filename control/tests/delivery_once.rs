//! Result deliveries exactly once across engines (SQLite and PostgreSQL): one delivery row
//! per communication and target however often an end is written, a delivery left
//! `delivering` by a lost node goes back to the queue under the same sid (its
//! `delivery_id`), and a delivered one is never claimed again, a takeover included.

use callsmith_control::{
    both_backends,
    testing::{TestServer, minimal_snapshot},
};
use callsmith_domain::{
    communication::CommunicationStatus,
    store::{
        communications::{CallFinish, CallWrite, Claim, ClaimScope, Deliveries},
        results::{AttemptOutcome, DeliveryStatus},
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

async fn a_delivery_is_sent_once_across_a_takeover(s: TestServer) {
    let f = s.fixture().await;
    let scn = s.published_scenario(&f, &minimal_snapshot("t")).await;
    s.post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": "+4912"}))
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
    let rows = s
        .store
        .communication_claim_due(&claim("lost"), &ClaimScope::TestCalls, 10)
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let deliveries = || {
        Some(Box::new(Deliveries {
            tenant_sid: f.tenant_sid.clone(),
            account_sid: f.account_sid.clone(),
            agent_sid: "agt_1".into(),
            urls: vec!["https://a.example/r".into(), "https://b.example/r".into()],
        }))
    };
    let finish = |sid: &str, token: &str| CallWrite::Finish {
        sid: sid.into(),
        token: token.into(),
        finish: Box::new(CallFinish::new(CommunicationStatus::Completed)),
        deliveries: deliveries(),
        at: Utc::now(),
    };
    for id in &ids {
        assert!(
            s.store
                .communication_apply(finish(id, "lost"))
                .await
                .unwrap()
        );
    }
    // An end written again (by the node, or by a peer that took it over) queues nothing.
    for token in ["lost", "peer"] {
        assert!(
            !s.store
                .communication_apply(finish(&ids[0], token))
                .await
                .unwrap()
        );
    }
    let list = |status| {
        let store = s.store.clone();
        let account = f.account_sid.clone();
        async move {
            let mut rows = store
                .result_delivery_list(&account, status, 50, 0)
                .await
                .unwrap()
                .0;
            rows.sort_by(|a, b| a.sid.cmp(&b.sid));
            rows
        }
    };
    let queued = list(None).await;
    assert_eq!(
        queued.len(),
        4,
        "one per communication and target: {queued:?}"
    );

    // The lost node claims all four, records one as delivered, and dies with the others
    // `delivering` (POSTed or not, never recorded).
    let until = Utc::now() + Duration::seconds(60);
    let claimed = s
        .store
        .result_delivery_claim_due("lost", until, 16)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 4);
    let delivered = &claimed[0].sid;
    assert!(
        s.store
            .result_delivery_record(
                delivered,
                "lost",
                &AttemptOutcome::Delivered { status_code: 200 }
            )
            .await
            .unwrap()
    );
    let now = Utc::now();
    s.store
        .node_heartbeat("lost", "lost-host:1", None, now - Duration::seconds(10))
        .await
        .unwrap();
    s.store
        .node_heartbeat("peer", "peer-host:2", None, now)
        .await
        .unwrap();
    let t = s
        .store
        .node_take_over("lost", now - Duration::seconds(3), &claim("peer"))
        .await
        .unwrap()
        .expect("taken over");
    assert_eq!(
        t.deliveries, 3,
        "the three it was sending go back to the queue"
    );

    // The peer claims exactly those three, under their sids; the delivered one stays.
    let again = s
        .store
        .result_delivery_claim_due("peer", until, 16)
        .await
        .unwrap();
    let mut again_sids: Vec<&str> = again.iter().map(|d| d.sid.as_str()).collect();
    again_sids.sort();
    let mut expected: Vec<&str> = claimed
        .iter()
        .map(|d| d.sid.as_str())
        .filter(|sid| sid != delivered)
        .collect();
    expected.sort();
    assert_eq!(again_sids, expected);
    for d in &again {
        assert_eq!(d.attempts, 0, "the unrecorded try does not count: {d:?}");
        assert!(
            s.store
                .result_delivery_record(
                    &d.sid,
                    "peer",
                    &AttemptOutcome::Delivered { status_code: 200 }
                )
                .await
                .unwrap()
        );
        // The lost node, if it was only slow, can no longer record it.
        assert!(
            !s.store
                .result_delivery_record(
                    &d.sid,
                    "lost",
                    &AttemptOutcome::Delivered { status_code: 200 }
                )
                .await
                .unwrap()
        );
    }
    // Nothing delivered is claimed again, nor put back by another takeover.
    assert!(
        s.store
            .result_delivery_claim_due("peer", until, 16)
            .await
            .unwrap()
            .is_empty()
    );
    s.store
        .node_heartbeat("peer", "peer-host:2", None, now - Duration::seconds(10))
        .await
        .unwrap();
    let t = s
        .store
        .node_take_over("peer", now - Duration::seconds(3), &claim("third"))
        .await
        .unwrap()
        .expect("taken over");
    assert_eq!(t.deliveries, 0);
    let all = list(Some(DeliveryStatus::Delivered)).await;
    assert_eq!(all.len(), 4);
    assert_eq!(
        all.iter().map(|d| d.sid.clone()).collect::<Vec<_>>(),
        queued.iter().map(|d| d.sid.clone()).collect::<Vec<_>>(),
        "the same four deliveries, no new one"
    );
    assert!(all.iter().all(|d| d.attempts == 1), "{all:?}");
}

both_backends!(a_delivery_is_sent_once_across_a_takeover);
