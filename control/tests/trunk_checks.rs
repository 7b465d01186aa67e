//! A node that places calls knows its SIP trunks (`Settings::sip_trunks`, from `[sip]`),
//! and the API refuses at once what they could not carry: a dispatch that no trunk can
//! place is 422 `no_trunk` (nothing stored), and a number naming a tenant trunk that no
//! `[[sip.trunks]]` has is 422 `trunk_not_configured`. A default trunk places what the
//! tenant's trunks do not. On SQLite and PostgreSQL.

use callsmith_control::testing::{Fixture, TestDb, TestServer, minimal_snapshot};
use callsmith_domain::communication::caller::NodeTrunks;
use reqwest::Method;
use serde_json::{Value, json};

async fn node(db: TestDb, names: &[&str], default: Option<&str>) -> TestServer {
    let trunks = NodeTrunks {
        names: names.iter().map(|n| n.to_string()).collect(),
        default: default.map(str::to_string),
    };
    TestServer::start_with(db, |s| s.sip_trunks = Some(trunks)).await
}

async fn tenant_trunk(s: &TestServer, f: &Fixture, name: &str) {
    s.su(Method::POST, "/v1/internal/trunk")
        .header("X-Tenant-Sid", &f.tenant_sid)
        .json(&json!({"name": name}))
        .send()
        .await
        .expect(201);
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

async fn dispatch(
    s: &TestServer,
    f: &Fixture,
    body: Value,
) -> callsmith_control::testing::TestResponse {
    s.post("/v1/communication/-/dispatch")
        .bearer(&f.account_key)
        .json(&body)
        .send()
        .await
}

async fn stored(s: &TestServer, f: &Fixture) -> usize {
    let r = s
        .get("/v1/communication")
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    r.body["items"].as_array().expect("a page").len()
}

async fn refused_until_a_trunk_can_place(db: TestDb) {
    let s = node(db, &["carrier"], None).await;
    let f = s.fixture().await;
    // The tenant's only trunk is not one the node has.
    tenant_trunk(&s, &f, "edge").await;
    let scenario = s.published_scenario(&f, &minimal_snapshot("t")).await;

    // A number on a tenant trunk the node has no gateway for: refused on save.
    let r = s
        .post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": "+4911", "trunk": "edge"}))
        .send()
        .await;
    r.expect_error(422, "trunk_not_configured");
    assert!(
        r.body["message"].as_str().unwrap().contains("\"edge\""),
        "{}",
        r.body
    );
    s.post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": "+4911", "trunk": "nope"}))
        .send()
        .await
        .expect_error(422, "unknown_trunk");

    let n1 = made(&s, &f, "/v1/number", json!({"identifier": "+4911"})).await;
    s.patch(&format!("/v1/number/{n1}"))
        .bearer(&f.admin_session)
        .json(&json!({"trunk": "edge"}))
        .send()
        .await
        .expect_error(422, "trunk_not_configured");
    let pool = made(&s, &f, "/v1/number-pool", json!({"name": "P"})).await;
    made(
        &s,
        &f,
        "/v1/number",
        json!({"identifier": "+4912", "pool_sid": pool}),
    )
    .await;
    let fixed = made(
        &s,
        &f,
        "/v1/agent",
        json!({"gateway_type": "number", "number_sid": n1, "scenario_sid": scenario}),
    )
    .await;
    let pooled = made(
        &s,
        &f,
        "/v1/agent",
        json!({"gateway_type": "number_pool", "number_pool_sid": pool, "scenario_sid": scenario}),
    )
    .await;

    // No trunk of the node can place them: 422 at once, nothing stored.
    let bodies = [
        json!({"recipient": "+15550001", "scenario_sid": scenario}),
        json!({"recipient": "+15550001", "agent_sid": fixed}),
        json!({"recipient": "+15550001", "agent_sid": pooled}),
    ];
    for body in &bodies {
        let r = dispatch(&s, &f, body.clone()).await;
        r.expect_error(422, "no_trunk");
        let msg = r.body["message"].as_str().unwrap();
        assert!(
            msg.contains("no trunk can place the call") && msg.contains("default_trunk"),
            "{msg}"
        );
    }
    assert_eq!(stored(&s, &f).await, 0, "a refused dispatch stores nothing");

    // The tenant gets a trunk the node has: every call can be placed, and a number may
    // name it.
    tenant_trunk(&s, &f, "carrier").await;
    for body in &bodies {
        dispatch(&s, &f, body.clone()).await.expect(201);
    }
    assert_eq!(stored(&s, &f).await, 3);
    s.patch(&format!("/v1/number/{n1}"))
        .bearer(&f.admin_session)
        .json(&json!({"trunk": "carrier"}))
        .send()
        .await
        .expect(200);
}

async fn the_default_trunk_places_what_tenant_trunks_do_not(db: TestDb) {
    let s = node(db, &["carrier"], Some("carrier")).await;
    let f = s.fixture().await;
    let scenario = s.published_scenario(&f, &minimal_snapshot("t")).await;
    made(&s, &f, "/v1/number", json!({"identifier": "+4911"})).await;
    dispatch(
        &s,
        &f,
        json!({"recipient": "+15550001", "scenario_sid": scenario}),
    )
    .await
    .expect(201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_until_a_trunk_can_place_sqlite() {
    refused_until_a_trunk_can_place(TestDb::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_until_a_trunk_can_place_postgres() {
    refused_until_a_trunk_can_place(TestDb::Postgres).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_trunk_places_what_tenant_trunks_do_not_sqlite() {
    the_default_trunk_places_what_tenant_trunks_do_not(TestDb::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_trunk_places_what_tenant_trunks_do_not_postgres() {
    the_default_trunk_places_what_tenant_trunks_do_not(TestDb::Postgres).await
}
