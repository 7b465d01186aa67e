//! The inbound route of a called number (agent, number, published version, account),
//! kept in memory: every change made through the API shows in the next call's route, at
//! once on SQLite (commit hooks) and as soon as PostgreSQL delivers the change notification
//! (milliseconds; allowed two seconds here).

use std::sync::Arc;
use std::time::Duration;

use callsmith_control::store::{Backend, InboundRoute};
use callsmith_control::{
    both_backends,
    testing::{TestServer, minimal_snapshot},
};
use serde_json::json;

/// The route of `called` once it satisfies `ok`: at once on SQLite, within the delivery
/// of the change notification on PostgreSQL.
async fn route_when(
    s: &TestServer,
    called: &str,
    ok: impl Fn(Option<&Arc<InboundRoute>>) -> bool,
) -> Option<Arc<InboundRoute>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let r = s.store.inbound_route(called).await.unwrap();
        if ok(r.as_ref()) {
            return r;
        }
        assert!(
            s.store.backend() == Backend::Postgres && tokio::time::Instant::now() < deadline,
            "the route of {called} did not follow the change: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn a_route_follows_every_change(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let one = minimal_snapshot("one");
    let sid = s.draft_scenario(&f, &one).await;
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
    let route = route_when(&s, "+4930555001", |r| {
        r.is_some_and(|r| r.published.is_some())
    })
    .await
    .unwrap();
    assert_eq!(route.published.as_ref().and_then(|v| v.version), Some(1));
    let two = minimal_snapshot("two");
    s.store
        .scenario_publish(&sid, &f.account_sid, &two, "h2")
        .await
        .unwrap();
    let route = route_when(&s, "4930555001", |r| {
        r.is_some_and(|r| r.published.as_ref().and_then(|v| v.version) == Some(2))
    })
    .await
    .unwrap();
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
        route_when(&s, "4930555001", |r| r.is_some() == served).await;
    }
    // The number is retired: not served.
    s.patch(&format!("/v1/number/{}", number.str("id")))
        .bearer(tok)
        .json(&json!({"status": "inactive"}))
        .send()
        .await
        .expect(200);
    route_when(&s, "4930555001", |r| r.is_none()).await;
}

both_backends!(a_route_follows_every_change);
