//! The inbound route of a called number (agent, number, published version, account),
//! kept in memory: every change made through the API shows in the next call's route, at
//! once on SQLite (commit hooks) and as soon as PostgreSQL delivers the change notification
//! (milliseconds; allowed two seconds here). A number is active in one account of the
//! service at a time, and a trunk bound to a tenant reaches that tenant's numbers only.

use std::sync::Arc;
use std::time::Duration;

use callsmith_control::testing::Fixture;
use callsmith_control::{
    both_backends,
    testing::{TestServer, minimal_snapshot},
};
use callsmith_domain::store::{Backend, InboundRoute};
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
        let r = s.store.inbound_route(called, None).await.unwrap();
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

    let route = s
        .store
        .inbound_route("4930555001", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(route.agent.sid, agent);
    assert_eq!(route.identifier, "+4930555001");
    assert!(route.published.is_none(), "nothing published yet");
    assert!(route.account.is_some());
    assert!(
        s.store
            .inbound_route("4930555002", None)
            .await
            .unwrap()
            .is_none()
    );

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

/// A number of `f`'s account with an active agent on it; returns (number id, agent id).
async fn served_number(s: &TestServer, f: &Fixture, identifier: &str) -> (String, String) {
    let tok = &f.admin_session;
    let scenario = s.draft_scenario(f, &minimal_snapshot("served")).await;
    let number = s
        .post("/v1/number")
        .bearer(tok)
        .json(&json!({"identifier": identifier}))
        .send()
        .await;
    number.expect(201);
    let agent = s
        .post("/v1/agent")
        .bearer(tok)
        .json(&json!({"gateway_type": "number", "number_sid": number.str("id"), "scenario_sid": scenario, "status": "active"}))
        .send()
        .await;
    agent.expect(201);
    (number.str("id"), agent.str("id"))
}

/// The agent the store routes `called` to for a call on a trunk of `trunk_tenant`.
async fn routed_agent(s: &TestServer, called: &str, trunk_tenant: Option<&str>) -> Option<String> {
    s.store
        .inbound_route(called, trunk_tenant)
        .await
        .unwrap()
        .map(|r| r.agent.sid.clone())
}

async fn a_number_routes_to_one_tenant_and_its_trunks(s: TestServer) {
    let fa = s.fixture_named("a").await;
    let fb = s.fixture_named("b").await;
    let (na, agent_a) = served_number(&s, &fa, "+4930555100").await;
    let (_, agent_b) = served_number(&s, &fb, "+4930555200").await;

    // Every spelling of the number reaches A, on a shared trunk and on A's own.
    for called in ["+4930555100", "4930555100", "004930555100"] {
        assert_eq!(
            routed_agent(&s, called, None).await.as_deref(),
            Some(agent_a.as_str())
        );
        assert_eq!(
            routed_agent(&s, called, Some(&fa.tenant_sid))
                .await
                .as_deref(),
            Some(agent_a.as_str())
        );
    }
    // A trunk bound to a tenant reaches that tenant's numbers only.
    assert_eq!(
        routed_agent(&s, "+4930555100", Some(&fb.tenant_sid)).await,
        None
    );
    assert_eq!(
        routed_agent(&s, "+4930555200", Some(&fa.tenant_sid)).await,
        None
    );
    assert_eq!(
        routed_agent(&s, "+4930555200", Some(&fb.tenant_sid))
            .await
            .as_deref(),
        Some(agent_b.as_str())
    );

    // B cannot put the number on a second active row, so A keeps answering it.
    s.post("/v1/number")
        .bearer(&fb.admin_session)
        .json(&json!({"identifier": "004930555100"}))
        .send()
        .await
        .expect_error(409, "identifier_active");
    assert_eq!(
        routed_agent(&s, "4930555100", None).await.as_deref(),
        Some(agent_a.as_str())
    );

    // Once A retires the number, B may take it: calls on shared trunks reach B, calls on
    // A's trunk reach nobody.
    s.patch(&format!("/v1/number/{na}"))
        .bearer(&fa.admin_session)
        .json(&json!({"status": "inactive"}))
        .send()
        .await
        .expect(200);
    let (_, agent_b2) = served_number(&s, &fb, "004930555100").await;
    route_when(&s, "+4930555100", |r| {
        r.is_some_and(|r| r.agent.sid == agent_b2)
    })
    .await;
    assert_eq!(
        routed_agent(&s, "+4930555100", Some(&fa.tenant_sid)).await,
        None
    );
    assert_eq!(
        routed_agent(&s, "+4930555100", Some(&fb.tenant_sid))
            .await
            .as_deref(),
        Some(agent_b2.as_str())
    );
}

both_backends!(
    a_route_follows_every_change,
    a_number_routes_to_one_tenant_and_its_trunks
);
