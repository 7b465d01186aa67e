//! The inbound route of a called number (agent, number, published version, account) on
//! SQLite, where it is kept in memory, and on PostgreSQL, where it is read each time: every
//! change made through the API shows in the next call's route.

use callsmith_control::{both_backends, testing::TestServer};
use serde_json::json;

fn snapshot(goal: &str) -> String {
    json!({"name": goal, "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {}, "outputs": [{"type": "next", "description": "", "next": "e"}]}]},
        "end": {"v1": [{"id": "e", "description": "", "properties": {}, "outputs": []}]}
    }}})
    .to_string()
}

async fn a_route_follows_every_change(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let sid = callsmith_control::ids::new_sid(callsmith_control::ids::prefix::SCENARIO);
    let draft = callsmith_control::ids::new_sid(callsmith_control::ids::prefix::SCENARIO_VERSION);
    let one = snapshot("one");
    s.store
        .scenario_create(
            &sid,
            &f.tenant_sid,
            &f.account_sid,
            "t",
            "",
            &draft,
            &one,
            "h1",
        )
        .await
        .unwrap();
    let number = s
        .post("/v1/number")
        .bearer(tok)
        .json(&json!({"identifier": "+4930555001"}))
        .send()
        .await;
    number.expect(201);
    let agent = s
        .post("/v1/agent")
        .bearer(tok)
        .json(&json!({"gateway_type": "number", "number_sid": number.str("id"), "scenario_sid": sid, "status": "active"}))
        .send()
        .await;
    agent.expect(201);
    let agent = agent.str("id");

    let route = s.store.inbound_route("4930555001").await.unwrap().unwrap();
    assert_eq!(route.agent.sid, agent);
    assert_eq!(route.identifier, "+4930555001");
    assert!(route.published.is_none(), "nothing published yet");
    assert!(route.account.is_some());
    assert!(s.store.inbound_route("4930555002").await.unwrap().is_none());

    // Published: the next read has the version, with or without the plus.
    s.store
        .scenario_publish(&sid, &f.account_sid, &one, "h1")
        .await
        .unwrap();
    let route = s.store.inbound_route("+4930555001").await.unwrap().unwrap();
    assert_eq!(route.published.as_ref().and_then(|v| v.version), Some(1));
    let two = snapshot("two");
    s.store
        .scenario_publish(&sid, &f.account_sid, &two, "h2")
        .await
        .unwrap();
    let route = s.store.inbound_route("4930555001").await.unwrap().unwrap();
    assert_eq!(route.published.as_ref().and_then(|v| v.version), Some(2));
    assert_eq!(
        route.published.as_ref().map(|v| v.snapshot.as_str()),
        Some(two.as_str())
    );

    // The agent goes inactive: the number is no longer served, at once; and back.
    for (status, served) in [("inactive", false), ("active", true)] {
        s.patch(&format!("/v1/agent/{agent}"))
            .bearer(tok)
            .json(&json!({"status": status}))
            .send()
            .await
            .expect(200);
        assert_eq!(
            s.store.inbound_route("4930555001").await.unwrap().is_some(),
            served,
            "agent {status}"
        );
    }
    // The number is retired: not served.
    s.patch(&format!("/v1/number/{}", number.str("id")))
        .bearer(tok)
        .json(&json!({"status": "inactive"}))
        .send()
        .await
        .expect(200);
    assert!(s.store.inbound_route("4930555001").await.unwrap().is_none());
}

both_backends!(a_route_follows_every_change);
