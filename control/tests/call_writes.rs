//! A call's row writes applied in batches (the engine's write-behind journal) on SQLite
//! and PostgreSQL: in order, all or none, each telling whether its claim still held; and
//! the reconcile of a claim whose owner died before recording its INVITE.

use callsmith_control::{
    both_backends,
    communication::CommunicationStatus,
    store::{
        NewCommunication,
        communications::{CallFinish, CallWrite, Claim, ClaimScope, Deliveries, claimed_record},
    },
    testing::{TestServer, minimal_snapshot},
};
use chrono::{Duration, DurationRound, Utc};
use serde_json::json;

/// A published scenario of the fixture's account; returns its sid.
async fn scenario(s: &TestServer, f: &callsmith_control::testing::Fixture) -> String {
    s.published_scenario(f, &minimal_snapshot("t")).await
}

fn inbound(f: &callsmith_control::testing::Fixture, scenario: &str) -> NewCommunication {
    NewCommunication {
        sid: callsmith_control::ids::new_sid("com"),
        tenant_sid: f.tenant_sid.clone(),
        account_sid: f.account_sid.clone(),
        agent_sid: None,
        scenario_sid: scenario.into(),
        version: Some(1),
        draft_version: None,
        recipient: "+15550001".into(),
        from_number: "+4911".into(),
        trunk: Some("edge".into()),
        direction: "inbound".into(),
        is_test: false,
        data: "{}".into(),
        strategy_sid: None,
        timezone: "UTC".into(),
        scheduled_at: None,
        due_at: Utc::now(),
    }
}

fn claim(token: &str, secs: i64) -> Claim {
    Claim {
        token: token.into(),
        by: "test".into(),
        until: Utc::now() + Duration::seconds(secs),
    }
}

/// Milliseconds are what both databases keep exactly enough to compare.
fn ms(t: chrono::DateTime<Utc>) -> chrono::DateTime<Utc> {
    t.duration_trunc(Duration::milliseconds(1)).unwrap()
}

async fn an_inbound_call_stored_in_one_batch(s: TestServer) {
    let f = s.fixture().await;
    let scn = scenario(&s, &f).await;
    let new = inbound(&f, &scn);
    let sid = new.sid.clone();
    let c = claim("tok", 60);
    let created = Utc::now() - Duration::seconds(3);
    let answered = created + Duration::milliseconds(250);
    let ended = answered + Duration::seconds(2);
    // What the call sees before anything is stored is what gets stored.
    let seen = claimed_record(&new, &c, created);
    let mut end = CallFinish::new(CommunicationStatus::Completed);
    end.call_status = Some("answered".into());
    end.duration = 2;
    end.goals = vec!["greeted".into()];
    let writes = vec![
        CallWrite::CreateClaimed {
            new: Box::new(new),
            claim: c,
            at: created,
        },
        CallWrite::Answered {
            sid: sid.clone(),
            token: "tok".into(),
            call_id: "abc@127.0.0.1".into(),
            at: answered,
        },
        CallWrite::Finish {
            sid: sid.clone(),
            token: "tok".into(),
            finish: Box::new(end),
            deliveries: Some(Box::new(Deliveries {
                tenant_sid: f.tenant_sid.clone(),
                account_sid: f.account_sid.clone(),
                agent_sid: "agt_x".into(),
                urls: vec!["https://a.example/r".into(), "https://b.example/r".into()],
            })),
            at: ended,
        },
    ];
    assert_eq!(
        s.store.communications_apply(&writes).await.unwrap(),
        vec![true, true, true]
    );
    let row = s.store.communication_get(&sid).await.unwrap().unwrap();
    assert_eq!(row.communication_status, CommunicationStatus::Completed);
    assert_eq!(row.direction, "inbound");
    assert_eq!(row.recipient, seen.recipient);
    assert_eq!(row.call_id.as_deref(), Some("abc@127.0.0.1"));
    assert_eq!(row.goal_list(), vec!["greeted".to_string()]);
    // Each write records the moment it describes, not the moment the batch ran.
    assert_eq!(ms(row.created_at), ms(created));
    assert_eq!(row.started_at.map(ms), Some(ms(created)));
    assert_eq!(row.answered_at.map(ms), Some(ms(answered)));
    assert_eq!(row.ended_at.map(ms), Some(ms(ended)));
    assert_eq!(row.claim_token, None, "the end clears the claim");
    // The end's result deliveries were queued with it.
    let (queued, total) = s
        .store
        .result_delivery_list(&f.account_sid, None, 10, 0)
        .await
        .unwrap();
    assert_eq!(total, 2);
    let mut urls: Vec<&str> = queued.iter().map(|d| d.url.as_str()).collect();
    urls.sort();
    assert_eq!(urls, ["https://a.example/r", "https://b.example/r"]);
    assert!(queued.iter().all(|d| d.communication_sid == sid));

    // A write under a claim this process no longer holds changes nothing and says so.
    let late = CallWrite::Answered {
        sid: sid.clone(),
        token: "tok".into(),
        call_id: "other".into(),
        at: Utc::now(),
    };
    assert!(!s.store.communication_apply(late).await.unwrap());
    let row = s.store.communication_get(&sid).await.unwrap().unwrap();
    assert_eq!(row.call_id.as_deref(), Some("abc@127.0.0.1"));
}

async fn a_refused_batch_applies_nothing(s: TestServer) {
    let f = s.fixture().await;
    let scn = scenario(&s, &f).await;
    let first = inbound(&f, &scn);
    let c = claim("tok", 60);
    let create = |n: &NewCommunication| CallWrite::CreateClaimed {
        new: Box::new(n.clone()),
        claim: c.clone(),
        at: Utc::now(),
    };
    s.store.communication_apply(create(&first)).await.unwrap();
    // A second call's row, then the first one's again (a duplicate sid): all or none.
    let second = inbound(&f, &scn);
    let batch = vec![create(&second), create(&first)];
    assert!(s.store.communications_apply(&batch).await.is_err());
    assert!(
        s.store
            .communication_get(&second.sid)
            .await
            .unwrap()
            .is_none(),
        "the batch was one transaction"
    );
    // The same writes one by one: the good one lands.
    assert!(s.store.communication_apply(create(&second)).await.unwrap());
    assert!(
        s.store
            .communication_get(&second.sid)
            .await
            .unwrap()
            .is_some()
    );
}

async fn a_claim_whose_owner_died_is_never_redialled(s: TestServer) {
    let f = s.fixture().await;
    let scn = scenario(&s, &f).await;
    s.post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": "+4911"}))
        .send()
        .await
        .expect(201);
    let dispatch = |recipient: &'static str| {
        s.post("/v1/communication/-/dispatch")
            .bearer(&f.account_key)
            .json(&json!({"recipient": recipient, "scenario_sid": scn}))
    };
    let placed = dispatch("+15550001").send().await;
    placed.expect(201);
    let placed = placed.str("id");
    let unrecorded = dispatch("+15550002").send().await;
    unrecorded.expect(201);
    let unrecorded = unrecorded.str("id");
    let released = dispatch("+15550003").send().await;
    released.expect(201);
    let released = released.str("id");
    // A claim that has already run out, as a process that died leaves it.
    let dead = claim("dead", -1);
    let rows = s
        .store
        .communication_claim_due(&dead, &ClaimScope::TestCalls, 10)
        .await
        .unwrap();
    assert_eq!(rows.len(), 3);
    let started = CallWrite::Started {
        sid: placed.clone(),
        token: "dead".into(),
        from_number: "+4911".into(),
        trunk: None,
        at: Utc::now(),
    };
    let release = CallWrite::Release {
        sid: released.clone(),
        token: "dead".into(),
        at: Utc::now(),
    };
    assert_eq!(
        s.store
            .communications_apply(&[started, release])
            .await
            .unwrap(),
        vec![true, true]
    );
    let r = s.store.communications_reconcile().await.unwrap();
    assert_eq!((r.interrupted, r.maybe_placed), (1, 1), "{r:?}");
    for id in [&placed, &unrecorded] {
        let row = s.store.communication_get(id).await.unwrap().unwrap();
        assert_eq!(
            row.communication_status,
            CommunicationStatus::Interrupted,
            "{id}: it may have been dialled, so it is never dialled again"
        );
        assert_eq!(row.claim_token, None);
    }
    let row = s
        .store
        .communication_get(&unrecorded)
        .await
        .unwrap()
        .unwrap();
    assert!(
        row.error
            .as_deref()
            .unwrap_or("")
            .contains("may not have been placed"),
        "{:?}",
        row.error
    );
    // Only an explicit release before the INVITE gives a row back.
    let row = s.store.communication_get(&released).await.unwrap().unwrap();
    assert_eq!(row.communication_status, CommunicationStatus::New);
}

both_backends!(
    an_inbound_call_stored_in_one_batch,
    a_refused_batch_applies_nothing,
    a_claim_whose_owner_died_is_never_redialled
);
