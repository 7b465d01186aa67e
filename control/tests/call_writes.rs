//! A call's row writes applied in batches (the engine's write-behind journal) on SQLite
//! and PostgreSQL: in order, all or none, each telling whether its claim still held; and
//! the reconcile of a claim whose owner died before recording its INVITE.

use callsmith_control::{
    both_backends,
    testing::{TestServer, minimal_snapshot},
};
use callsmith_domain::{
    communication::CommunicationStatus,
    store::{
        NewCommunication,
        communications::{CallFinish, CallWrite, Claim, ClaimScope, Deliveries, claimed_record},
    },
};
use chrono::{Duration, DurationRound, Utc};
use serde_json::json;

/// A published scenario of the fixture's account; returns its sid.
async fn scenario(s: &TestServer, f: &callsmith_control::testing::Fixture) -> String {
    s.published_scenario(f, &minimal_snapshot("t")).await
}

fn inbound(f: &callsmith_control::testing::Fixture, scenario: &str) -> NewCommunication {
    NewCommunication {
        sid: callsmith_domain::ids::new_sid("com"),
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
        batch_sid: None,
        timezone: "UTC".into(),
        scheduled_at: None,
        schedule: None,
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
            dialog: None,
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
        dialog: None,
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
        due_at: None,
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

/// The writes a few calls make, interleaved as the journal queues them: one outbound call
/// answered and ended (with result deliveries), one that fails after its INVITE, one
/// released before it, one whose claim was lost, and an inbound call created, answered and
/// ended. `rows` are four dialling rows claimed with token `tok`; the writes happen at
/// `t0` plus a few milliseconds.
fn mixed_batch(
    f: &callsmith_control::testing::Fixture,
    scn: &str,
    rows: &[String],
    t0: chrono::DateTime<Utc>,
) -> Vec<CallWrite> {
    let at = |ms: i64| t0 + Duration::milliseconds(ms);
    let started = |sid: &String, ms| CallWrite::Started {
        sid: sid.clone(),
        token: "tok".into(),
        from_number: "+4911".into(),
        trunk: Some("edge".into()),
        at: at(ms),
    };
    let deliveries = || {
        Some(Box::new(Deliveries {
            tenant_sid: f.tenant_sid.clone(),
            account_sid: f.account_sid.clone(),
            agent_sid: "agt_x".into(),
            urls: vec!["https://a.example/r".into(), "https://b.example/r".into()],
        }))
    };
    let mut end = CallFinish::new(CommunicationStatus::Completed);
    end.call_status = Some("answered".into());
    end.sip_code = Some(200);
    end.duration = 3;
    end.goals = vec!["greeted".into(), "said_yes".into()];
    end.variables = r#"{"name":"Ada"}"#.into();
    end.history_path = Some("callsmith/calls/x.history.json".into());
    end.end_reason = Some("caller_hung_up".into());
    end.consent_granted = true;
    let new = inbound(f, scn);
    let inbound_sid = new.sid.clone();
    vec![
        started(&rows[0], 1),
        started(&rows[1], 2),
        CallWrite::CreateClaimed {
            new: Box::new(new),
            claim: claim("tok", 60),
            at: at(3),
        },
        CallWrite::Release {
            sid: rows[2].clone(),
            token: "tok".into(),
            due_at: None,
            at: at(4),
        },
        CallWrite::Answered {
            sid: rows[0].clone(),
            token: "tok".into(),
            call_id: "a@127.0.0.1".into(),
            dialog: Some(r#"{"call_id":"a@127.0.0.1"}"#.into()),
            at: at(5),
        },
        CallWrite::Answered {
            sid: inbound_sid.clone(),
            token: "tok".into(),
            call_id: "in@127.0.0.1".into(),
            dialog: None,
            at: at(6),
        },
        CallWrite::Answered {
            sid: rows[3].clone(),
            token: "someone-else".into(),
            call_id: "lost".into(),
            dialog: None,
            at: at(7),
        },
        CallWrite::Fail {
            sid: rows[1].clone(),
            token: "tok".into(),
            error: "the trunk refused the call".into(),
            deliveries: deliveries(),
            at: at(8),
        },
        CallWrite::Finish {
            sid: rows[0].clone(),
            token: "tok".into(),
            finish: Box::new(end.clone()),
            deliveries: deliveries(),
            at: at(9),
        },
        CallWrite::Finish {
            sid: inbound_sid,
            token: "tok".into(),
            finish: Box::new(CallFinish::new(CommunicationStatus::Completed)),
            deliveries: None,
            at: at(10),
        },
    ]
}

/// What a test compares of a row after its writes (everything but its sid and creation).
fn stored(row: &callsmith_domain::store::communications::CommunicationRecord) -> serde_json::Value {
    json!({
        "status": row.communication_status.as_str(),
        "call_status": row.call_status,
        "sip_code": row.sip_code,
        "duration": row.duration,
        "goals": row.goal_list(),
        "variables": row.variables,
        "has_history": row.has_history,
        "history_path": row.history_path,
        "end_reason": row.end_reason,
        "error": row.error,
        "call_id": row.call_id,
        "from_number": row.from_number,
        "trunk": row.trunk,
        "claim_token": row.claim_token,
        "consent": row.consent_granted,
        "started_at": row.started_at.map(ms),
        "answered_at": row.answered_at.map(ms),
        "ended_at": row.ended_at.map(ms),
    })
}

/// The columns a batch writes, as the database holds them: the text of each value (so
/// times compare as stored, not as decoded) and, on SQLite, its storage class.
async fn raw(s: &TestServer, sid: &str) -> Vec<Option<String>> {
    use callsmith_domain::store::{Pool, sqlx};
    const COLUMNS: &[&str] = &[
        "communication_status",
        "call_status",
        "sip_code",
        "duration",
        "goals",
        "variables",
        "is_test",
        "consent_granted",
        "has_recording",
        "has_history",
        "history_path",
        "recording_path",
        "from_number",
        "trunk",
        "end_reason",
        "error",
        "call_id",
        "sip_dialog",
        "claim_token",
        "started_at",
        "answered_at",
        "ended_at",
        "updated_at",
        "version",
        "data",
        "timezone",
        "direction",
    ];
    let mut select: Vec<String> = COLUMNS
        .iter()
        .map(|c| format!("CAST({c} AS TEXT)"))
        .collect();
    if matches!(s.store.pool(), Pool::Sqlite(_)) {
        select.extend(COLUMNS.iter().map(|c| format!("typeof({c})")));
    }
    let sql = format!(
        "SELECT {} FROM communications WHERE sid = $1",
        select.join(", ")
    );
    macro_rules! fetch {
        ($p:expr) => {{
            let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(sid)
                .fetch_one($p)
                .await
                .unwrap();
            (0..select.len())
                .map(|i| sqlx::Row::get::<Option<String>, _>(&row, i))
                .collect()
        }};
    }
    match s.store.pool() {
        Pool::Sqlite(p) => fetch!(p),
        Pool::Postgres(p) => fetch!(p),
    }
}

/// The result deliveries queued for communication `sid`, as the database holds them (all
/// but their own sid), by URL.
async fn queued_raw(s: &TestServer, sid: &str) -> Vec<Vec<String>> {
    use callsmith_domain::store::{Pool, sqlx};
    let sql = "SELECT tenant_sid, account_sid, agent_sid, url, status, CAST(attempts AS TEXT), \
               CAST(next_attempt_at AS TEXT), CAST(created_at AS TEXT), CAST(updated_at AS TEXT) \
               FROM result_deliveries WHERE communication_sid = $1 ORDER BY url";
    macro_rules! fetch {
        ($p:expr) => {
            sqlx::query(sql)
                .bind(sid)
                .fetch_all($p)
                .await
                .unwrap()
                .iter()
                .map(|r| (0..9).map(|i| sqlx::Row::get::<String, _>(r, i)).collect())
                .collect()
        };
    }
    match s.store.pool() {
        Pool::Sqlite(p) => fetch!(p),
        Pool::Postgres(p) => fetch!(p),
    }
}

async fn a_mixed_batch_stores_what_its_writes_store_one_by_one(s: TestServer) {
    let f = s.fixture().await;
    let scn = scenario(&s, &f).await;
    s.post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": "+4911"}))
        .send()
        .await
        .expect(201);
    // Two sets of four dialling rows: one gets its writes as one batch, the other one by one.
    let mut sets = Vec::new();
    for _ in 0..2 {
        for k in 0..4 {
            let r = s
                .post("/v1/communication/-/dispatch")
                .bearer(&f.account_key)
                .json(&json!({"recipient": format!("+1555000{k}"), "scenario_sid": scn}))
                .send()
                .await;
            r.expect(201);
        }
        let mut rows: Vec<String> = s
            .store
            .communication_claim_due(&claim("tok", 60), &ClaimScope::TestCalls, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.sid)
            .collect();
        assert_eq!(rows.len(), 4);
        rows.sort();
        sets.push(rows);
    }
    // Both sets' writes describe the same moments.
    let t0 = Utc::now() - Duration::seconds(10);
    let batched = mixed_batch(&f, &scn, &sets[0], t0);
    let single = mixed_batch(&f, &scn, &sets[1], t0);
    let changed = s.store.communications_apply(&batched).await.unwrap();
    let mut one_by_one = Vec::new();
    for w in single.clone() {
        one_by_one.push(s.store.communication_apply(w).await.unwrap());
    }
    assert_eq!(changed, one_by_one);
    assert_eq!(
        changed,
        vec![true, true, true, true, true, true, false, true, true, true],
        "only the write under a lost claim changed nothing"
    );
    // Row by row, the batch stored what the writes one by one stored.
    let sids = |w: &[CallWrite]| {
        let mut v: Vec<String> = w.iter().map(|w| w.sid().to_string()).collect();
        v.dedup();
        let mut seen = std::collections::HashSet::new();
        v.retain(|s| seen.insert(s.clone()));
        v
    };
    let (a, b) = (sids(&batched), sids(&single));
    assert_eq!(a.len(), 5);
    for (x, y) in a.iter().zip(&b) {
        let rx = s.store.communication_get(x).await.unwrap().unwrap();
        let ry = s.store.communication_get(y).await.unwrap().unwrap();
        assert_eq!(stored(&rx), stored(&ry), "{x} vs {y}");
        // The row under a lost claim keeps what its claim wrote, at different times.
        if *x != sets[0][3] {
            assert_eq!(raw(&s, x).await, raw(&s, y).await, "{x} vs {y}, as stored");
        }
    }
    // The result deliveries the batch queued are the rows the writes one by one queued.
    for (x, y) in sets[0].iter().zip(&sets[1]).take(2) {
        let queued = queued_raw(&s, x).await;
        assert_eq!(queued.len(), 2);
        assert_eq!(queued, queued_raw(&s, y).await);
    }
    let answered = s
        .store
        .communication_get(&sets[0][0])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        answered.communication_status,
        CommunicationStatus::Completed
    );
    assert_eq!(
        answered.goal_list(),
        vec!["greeted".to_string(), "said_yes".to_string()]
    );
    assert!(answered.consent_granted && answered.has_history);
    let released = s
        .store
        .communication_get(&sets[0][2])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(released.communication_status, CommunicationStatus::New);
    let lost = s
        .store
        .communication_get(&sets[0][3])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lost.call_id, None, "a lost claim's write changes nothing");
    // Deliveries: two per end and failure, in both sets.
    let (queued, total) = s
        .store
        .result_delivery_list(&f.account_sid, None, 50, 0)
        .await
        .unwrap();
    assert_eq!(total, 8);
    for sid in [&sets[0][0], &sets[0][1], &sets[1][0], &sets[1][1]] {
        assert_eq!(
            queued
                .iter()
                .filter(|d| &d.communication_sid == sid)
                .count(),
            2
        );
    }
}

both_backends!(
    an_inbound_call_stored_in_one_batch,
    a_refused_batch_applies_nothing,
    a_claim_whose_owner_died_is_never_redialled,
    a_mixed_batch_stores_what_its_writes_store_one_by_one
);
