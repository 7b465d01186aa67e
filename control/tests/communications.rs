//! Dispatch, communications and result-delivery routes: every status code, on SQLite and
//! PostgreSQL. (Calls themselves are tested end to end in the `tests` crate.)

use callsmith_control::{both_backends, testing::TestServer};
use serde_json::json;

/// A scenario with a draft (and a published version when `publish`).
/// start_call → end.
fn valid_snapshot() -> serde_json::Value {
    json!({"name": "t", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {}, "outputs": [{"type": "next", "description": "", "next": "e"}]}]},
        "end": {"v1": [{"id": "e", "description": "", "properties": {}, "outputs": []}]}
    }}})
}

async fn scenario(s: &TestServer, tenant: &str, account: &str, publish: bool) -> String {
    scenario_with(s, tenant, account, publish, &valid_snapshot()).await
}

async fn scenario_with(
    s: &TestServer,
    tenant: &str,
    account: &str,
    publish: bool,
    snapshot: &serde_json::Value,
) -> String {
    let sid = callsmith_domain::ids::new_sid(callsmith_domain::ids::prefix::SCENARIO);
    let draft = callsmith_domain::ids::new_sid(callsmith_domain::ids::prefix::SCENARIO_VERSION);
    let snap = snapshot.to_string();
    s.store
        .scenario_create(&sid, tenant, account, "t", "", &draft, &snap, "h0")
        .await
        .expect("scenario");
    if publish {
        s.store
            .scenario_publish(&sid, account, &snap, "h0")
            .await
            .expect("publish");
    }
    sid
}

async fn dispatch_rules(s: TestServer) {
    let f = s.fixture().await;
    let path = "/v1/communication/-/dispatch";
    let post = |body: serde_json::Value| s.post(path).bearer(&f.account_key).json(&body);
    // 401 without credentials.
    s.post(path)
        .json(&json!({"recipient": "+1555"}))
        .send()
        .await
        .expect(401);
    // 400: timezone is never accepted (unknown field), malformed body.
    post(json!({"recipient": "+15550001", "scenario_sid": "scn_x", "timezone": "UTC"}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    // 422: exactly one of agent_sid and scenario_sid.
    post(json!({"recipient": "+15550001"}))
        .send()
        .await
        .expect_error(422, "exactly_one_of");
    post(json!({"recipient": "+15550001", "agent_sid": "agt_x", "scenario_sid": "scn_x"}))
        .send()
        .await
        .expect_error(422, "exactly_one_of");
    // 422: nested data on the agent path.
    post(json!({"recipient": "+15550001", "agent_sid": "agt_x", "data": {"a": [1]}}))
        .send()
        .await
        .expect_error(422, "data_not_flat");
    post(json!({"recipient": "+15550001", "agent_sid": "agt_x", "data": {"a": 1}}))
        .send()
        .await
        .expect_error(422, "unknown_agent");
    post(json!({"recipient": "not a number", "scenario_sid": "scn_x"}))
        .send()
        .await
        .expect_error(422, "invalid_recipient");
    post(json!({"recipient": "+15550001", "scenario_sid": "scn_x"}))
        .send()
        .await
        .expect_error(422, "unknown_scenario");

    let scn = scenario(&s, &f.tenant_sid, &f.account_sid, false).await;
    post(json!({"recipient": "+15550001", "scenario_sid": scn}))
        .send()
        .await
        .expect_error(422, "scenario_not_published");
    // A draft is validated before it is frozen and called: an invalid one says why.
    let broken = json!({"name": "t", "constructor": {"bricks": {}}});
    let bad = scenario_with(&s, &f.tenant_sid, &f.account_sid, false, &broken).await;
    let r = post(json!({"recipient": "+15550001", "scenario_sid": bad, "draft": true}))
        .send()
        .await;
    r.expect_error(422, "scenario_invalid");
    assert_eq!(r.body["data"]["errors"]["scenario"][0]["code"], "SCN108");
    post(json!({"recipient": "+15550001", "scenario_sid": scn, "draft": true}))
        .send()
        .await
        .expect_error(422, "no_from_number");
    s.post("/v1/number")
        .bearer(&f.account_key)
        .json(&json!({"identifier": "+4930555", "name": "main"}))
        .send()
        .await
        .expect(201);
    let r = post(
        json!({"recipient": "+15550001", "scenario_sid": scn, "draft": true,
                        "data": {"nested": {"ignored": 1}}}),
    )
    .send()
    .await;
    r.expect(201);
    assert_eq!(r.body["draft_version"], 1);
    assert!(r.body["version"].is_null());
    assert_eq!(r.body["communication_status"], "new");
    assert_eq!(r.body["from_number"], "+4930555");
    assert_eq!(r.body["is_test"], true);
    assert_eq!(r.body["duration"], 0);
    let id = r.str("id");

    // Get, list, filters.
    let g = s
        .get(&format!("/v1/communication/{id}"))
        .bearer(&f.account_key)
        .send()
        .await;
    g.expect(200);
    assert_eq!(g.body["id"], id.as_str());
    s.get("/v1/communication/com_missing")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(404, "communication_not_found");
    let l = s
        .get("/v1/communication?communication_status=new&direction=outbound")
        .bearer(&f.account_key)
        .send()
        .await;
    l.expect(200);
    assert_eq!(l.body["total"], 1);
    s.get("/v1/communication?communication_status=bogus")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(400, "invalid_query");
    s.get("/v1/communication?limit=501")
        .bearer(&f.account_key)
        .send()
        .await
        .expect(400);
    s.get("/v1/communication").send().await.expect(401);

    // Another account never sees it.
    let other = s.fixture_named("b").await;
    s.get(&format!("/v1/communication/{id}"))
        .bearer(&other.account_key)
        .send()
        .await
        .expect(404);

    // Speech recordings: unknown, malformed or out-of-scope paths are 404; bad mode 400.
    for p in [
        "callsmith/calls/x/y/speech/1.wav",
        "nonsense",
        &format!(
            "callsmith/calls/{}/{id}/speech/../history.json",
            f.account_sid
        ),
        &format!("callsmith/calls/{}/{id}/speech/1.wav", f.account_sid),
    ] {
        s.get(&format!("/v1/communication/{id}/speech-recording?path={p}"))
            .bearer(&f.account_key)
            .send()
            .await
            .expect(404);
    }
    s.get(&format!(
        "/v1/communication/{id}/speech-recording?path=x&mode=stream"
    ))
    .bearer(&f.account_key)
    .send()
    .await
    .expect(400);
    s.get(&format!(
        "/v1/communication/{id}/speech-recording?path=x&mode=url&expires_in=604801"
    ))
    .bearer(&f.account_key)
    .send()
    .await
    .expect(400);
}

async fn result_listing(s: TestServer) {
    let f = s.fixture().await;
    let r = s
        .get("/v1/communication-result?include=communication&status=new")
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    assert_eq!(r.body["total"], 0);
    assert!(r.body["included"]["communications"].is_object());
    s.get("/v1/communication-result?include=agent")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(400, "invalid_include");
    s.get("/v1/communication-result?status=bogus")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(400, "invalid_query");
    s.get("/v1/communication-result?limit=501")
        .bearer(&f.account_key)
        .send()
        .await
        .expect(400);
    s.get("/v1/communication-result").send().await.expect(401);
}

both_backends!(dispatch_rules, result_listing);
