//! From-number, trunk and time zone: the dispatch API and the dialer read one rule
//! (`callsmith_domain::communication::caller`), so what a dispatch shows is what the call
//! uses. On SQLite and PostgreSQL.

use callsmith_control::{
    both_backends,
    testing::{Fixture, TestServer, minimal_snapshot},
};
use callsmith_domain::communication::caller::{self, CallerId};
use reqwest::Method;
use serde_json::{Value, json};

async fn published_scenario(s: &TestServer, f: &Fixture) -> String {
    s.published_scenario(f, &minimal_snapshot("t")).await
}

async fn made(s: &TestServer, f: &Fixture, path: &str, body: Value) -> String {
    let r = s
        .post(path)
        .bearer(&f.admin_session)
        .json(&body)
        .send()
        .await;
    r.expect(201);
    r.str("id")
}

async fn trunk(s: &TestServer, f: &Fixture, name: &str) {
    s.su(Method::POST, "/v1/internal/trunk")
        .header("X-Tenant-Sid", &f.tenant_sid)
        .json(&json!({"name": name}))
        .send()
        .await
        .expect(201);
}

async fn dispatch(s: &TestServer, f: &Fixture, body: Value) -> Value {
    let r = s
        .post("/v1/communication/-/dispatch")
        .bearer(&f.account_key)
        .json(&body)
        .send()
        .await;
    r.expect(201);
    r.body.clone()
}

async fn caller_rules(s: TestServer) {
    let f = s.fixture().await;
    trunk(&s, &f, "edge-a").await;
    trunk(&s, &f, "edge-b").await;
    let scenario = published_scenario(&s, &f).await;

    // A scenario test call with no number in the account: 422, from the one rule.
    s.post("/v1/communication/-/dispatch")
        .bearer(&f.account_key)
        .json(&json!({"recipient": "+15550001", "scenario_sid": scenario}))
        .send()
        .await
        .expect_error(422, "no_from_number");

    let pool = made(&s, &f, "/v1/number-pool", json!({"name": "P"})).await;
    // An agent on a pool with no number yet: refused at dispatch, nothing stored.
    let on_empty = made(
        &s,
        &f,
        "/v1/agent",
        json!({"gateway_type": "number_pool", "number_pool_sid": pool, "scenario_sid": scenario}),
    )
    .await;
    let r = s
        .post("/v1/communication/-/dispatch")
        .bearer(&f.account_key)
        .json(&json!({"recipient": "+15550003", "agent_sid": on_empty}))
        .send()
        .await;
    r.expect_error(422, "no_from_number");
    assert!(
        r.body["message"]
            .as_str()
            .unwrap_or("")
            .contains("no active number"),
        "{}",
        r.body
    );
    let (stored, total) = s
        .store
        .communication_list(&f.account_sid, &Default::default(), 10, 0)
        .await
        .unwrap();
    assert_eq!((stored.len(), total), (0, 0), "nothing stored");
    let n1 = made(
        &s,
        &f,
        "/v1/number",
        json!({"identifier": "+4911", "pool_sid": pool, "trunk": "edge-b"}),
    )
    .await;
    made(
        &s,
        &f,
        "/v1/number",
        json!({"identifier": "+4912", "pool_sid": pool}),
    )
    .await;

    // An agent with its own number: the dispatch shows the number and its trunk, and the
    // dialer's rule gives the same.
    let fixed = made(
        &s,
        &f,
        "/v1/agent",
        json!({"gateway_type": "number", "number_sid": n1, "scenario_sid": scenario, "timezone": "Europe/Berlin"}),
    )
    .await;
    let c = dispatch(
        &s,
        &f,
        json!({"recipient": "+15550001", "agent_sid": fixed}),
    )
    .await;
    assert_eq!(c["from_number"], "+4911", "{c}");
    assert_eq!(c["timezone"], "Europe/Berlin", "the agent's zone: {c}");
    let agent = s.store.agent_get(&fixed).await.unwrap().unwrap();
    let at_dial = caller::agent_call_caller(&s.store, &agent, |_, _| unreachable!())
        .await
        .unwrap();
    assert_eq!(
        at_dial,
        CallerId {
            number: "+4911".into(),
            trunk: Some("edge-b".into())
        }
    );
    let row = s
        .store
        .communication_get(c["id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.trunk.as_deref(), Some("edge-b"));

    // An agent with a pool: no number at dispatch; the dialer rotates over the pool's
    // active numbers, oldest first.
    let pooled = made(
        &s,
        &f,
        "/v1/agent",
        json!({"gateway_type": "number_pool", "number_pool_sid": pool, "scenario_sid": scenario}),
    )
    .await;
    let c = dispatch(
        &s,
        &f,
        json!({"recipient": "+15550002", "agent_sid": pooled}),
    )
    .await;
    assert_eq!(c["from_number"], "", "{c}");
    let account_zone = s
        .store
        .account_get(&f.account_sid)
        .await
        .unwrap()
        .unwrap()
        .timezone;
    let expected_zone = if account_zone.is_empty() {
        "UTC".to_string()
    } else {
        account_zone
    };
    assert_eq!(
        c["timezone"],
        expected_zone.as_str(),
        "the account's zone: {c}"
    );
    let agent = s.store.agent_get(&pooled).await.unwrap().unwrap();
    let mut turn = 0;
    let mut picked = Vec::new();
    for _ in 0..3 {
        let c = caller::agent_call_caller(&s.store, &agent, |p, len| {
            assert_eq!(p, pool);
            let i = turn % len;
            turn += 1;
            i
        })
        .await
        .unwrap();
        picked.push(c.number);
    }
    assert_eq!(picked, ["+4911", "+4912", "+4911"]);

    // Sticky caller ID: once the account dialled +15550002 from +4912, every later call to
    // it from the pool is from +4912, whatever the rotation says; another recipient
    // rotates.
    use callsmith_domain::store::communications::{
        CallFinish, CallWrite, Claim, ClaimScope, CommunicationStatus,
    };
    let claim = Claim {
        token: "tok".into(),
        by: "test".into(),
        until: chrono::Utc::now() + chrono::Duration::seconds(60),
    };
    let rows = s
        .store
        .communication_claim_due(&claim, &ClaimScope::Agent(pooled.clone()), 10)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let sid = c["id"].as_str().unwrap().to_string();
    let first_dial = [
        CallWrite::Started {
            sid: sid.clone(),
            token: "tok".into(),
            from_number: "+4912".into(),
            trunk: None,
            at: chrono::Utc::now(),
        },
        CallWrite::Finish {
            sid: sid.clone(),
            token: "tok".into(),
            finish: Box::new(CallFinish {
                call_status: Some("busy".into()),
                sip_code: Some(486),
                ..CallFinish::new(CommunicationStatus::Completed)
            }),
            deliveries: None,
            at: chrono::Utc::now(),
        },
    ];
    s.store.communications_apply(&first_dial).await.unwrap();
    for rotation in 0..3 {
        let c =
            caller::recipient_call_caller(&s.store, &agent, &f.account_sid, "+15550002", |_, _| {
                rotation
            })
            .await
            .unwrap();
        assert_eq!(c.number, "+4912", "attempt {rotation}");
    }
    let other =
        caller::recipient_call_caller(&s.store, &agent, &f.account_sid, "+15550009", |_, _| 0)
            .await
            .unwrap();
    assert_eq!(other.number, "+4911");

    // The trunk: the number's when this engine has it, else the tenant's oldest usable.
    let usable_b = |t: &str| t == "edge-b";
    assert_eq!(
        caller::call_trunk(&s.store, &f.tenant_sid, Some("edge-b"), usable_b)
            .await
            .unwrap()
            .as_deref(),
        Some("edge-b")
    );
    assert_eq!(
        caller::call_trunk(&s.store, &f.tenant_sid, None, |_| true)
            .await
            .unwrap()
            .as_deref(),
        Some("edge-a"),
        "the tenant's oldest trunk"
    );
    assert_eq!(
        caller::call_trunk(&s.store, &f.tenant_sid, Some("gone"), usable_b)
            .await
            .unwrap()
            .as_deref(),
        Some("edge-b")
    );
    assert_eq!(
        caller::call_trunk(&s.store, &f.tenant_sid, Some("edge-a"), |_| false)
            .await
            .unwrap(),
        None
    );

    // A test call is from an active number of the account, and runs in the account's zone.
    let c = dispatch(
        &s,
        &f,
        json!({"recipient": "+15550003", "scenario_sid": scenario}),
    )
    .await;
    assert!(
        ["+4911", "+4912"].contains(&c["from_number"].as_str().unwrap()),
        "{c}"
    );
    assert_eq!(c["timezone"], expected_zone.as_str());
}

both_backends!(caller_rules);
