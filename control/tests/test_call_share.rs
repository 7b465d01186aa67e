//! The account's share of test calls (`dialer.max_test_calls_per_account`): scenario test
//! dispatches and browser calls of one account count together; over the share a request is
//! 429 `too_many_test_calls` and nothing is stored, while another account still places its
//! own. On SQLite and PostgreSQL. The browser-call runner here stands in for the engine's:
//! it stores the call as the engine does (created claimed, `in_progress`) and answers a
//! fixed SDP; the media side is tested end to end in the `tests` crate.

use std::sync::Arc;

use async_trait::async_trait;
use callsmith_control::testing::{Fixture, TestDb, TestResponse, TestServer, minimal_snapshot};
use callsmith_domain::{
    Store,
    browser_calls::{BrowserCallError, BrowserCallRunner, BrowserCallStarted},
    store::{
        NewCommunication,
        communications::{CallWrite, Claim, claimed_record},
    },
};
use chrono::Utc;
use serde_json::json;

const CLAIM_TOKEN: &str = "share-test-claim";

struct StoringRunner {
    store: Store,
}

#[async_trait]
impl BrowserCallRunner for StoringRunner {
    async fn start(
        &self,
        new: NewCommunication,
        _offer: &str,
        _record: bool,
    ) -> Result<BrowserCallStarted, BrowserCallError> {
        let at = Utc::now();
        let claim = Claim {
            token: CLAIM_TOKEN.into(),
            by: "share-test".into(),
            until: at + chrono::Duration::hours(1),
        };
        let communication = claimed_record(&new, &claim, at);
        self.store
            .communication_apply(CallWrite::CreateClaimed {
                new: Box::new(new),
                claim,
                at,
            })
            .await
            .map_err(|e| BrowserCallError::Unavailable(e.to_string()))?;
        Ok(BrowserCallStarted {
            communication,
            sdp: "v=0\r\n".into(),
        })
    }
}

async fn browser_call(s: &TestServer, f: &Fixture, scenario: &str) -> TestResponse {
    s.post("/v1/communication/-/browser-call")
        .bearer(&f.account_key)
        .json(&json!({"scenario_sid": scenario, "sdp": "v=0\r\n"}))
        .send()
        .await
}

async fn test_dispatch(s: &TestServer, f: &Fixture, scenario: &str) -> TestResponse {
    s.post("/v1/communication/-/dispatch")
        .bearer(&f.account_key)
        .json(&json!({"recipient": "+15550001", "scenario_sid": scenario}))
        .send()
        .await
}

async fn communications(s: &TestServer, f: &Fixture) -> i64 {
    let r = s
        .get("/v1/communication")
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    r.body["total"].as_i64().unwrap()
}

#[track_caller]
fn refused(r: &TestResponse) {
    r.expect_error(429, "too_many_test_calls");
    assert_eq!(
        r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("10"),
        "{:?}",
        r.headers
    );
    assert!(
        r.body["message"].as_str().unwrap().contains("share is 1"),
        "{}",
        r.text
    );
}

async fn one_account_cannot_take_every_test_call(db: TestDb) {
    let s = TestServer::start_with(db, |settings| settings.max_test_calls_per_account = 1).await;
    s.state.browser.install(Arc::new(StoringRunner {
        store: s.store.clone(),
    }));
    let a = s.fixture_named("a").await;
    let b = s.fixture_named("b").await;
    let mut scenarios = vec![];
    for (f, number) in [(&a, "+4930555"), (&b, "+4930666")] {
        s.post("/v1/number")
            .bearer(&f.account_key)
            .json(&json!({"identifier": number}))
            .send()
            .await
            .expect(201);
        scenarios.push(s.published_scenario(f, &minimal_snapshot("t")).await);
    }
    let (scn_a, scn_b) = (&scenarios[0], &scenarios[1]);

    // Account a takes its one place with a browser call.
    let call = browser_call(&s, &a, scn_a).await;
    call.expect(201);
    assert_eq!(
        call.body["communication"]["communication_status"],
        "in_progress"
    );
    let call_sid = call.body["communication"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // A second browser call and a test dispatch of a are refused; nothing is stored.
    refused(&browser_call(&s, &a, scn_a).await);
    refused(&test_dispatch(&s, &a, scn_a).await);
    assert_eq!(communications(&s, &a).await, 1);

    // Account b still places its own, and its test dispatch counts against its browser calls.
    test_dispatch(&s, &b, scn_b).await.expect(201);
    refused(&browser_call(&s, &b, scn_b).await);
    assert_eq!(communications(&s, &b).await, 1);

    // When a's call ends its place is free again.
    assert!(
        s.store
            .communication_apply(CallWrite::Fail {
                sid: call_sid,
                token: CLAIM_TOKEN.into(),
                error: "the browser hung up".into(),
                deliveries: None,
                at: Utc::now(),
            })
            .await
            .unwrap()
    );
    test_dispatch(&s, &a, scn_a).await.expect(201);
    refused(&browser_call(&s, &a, scn_a).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_account_cannot_take_every_test_call_sqlite() {
    one_account_cannot_take_every_test_call(TestDb::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_account_cannot_take_every_test_call_postgres() {
    one_account_cannot_take_every_test_call(TestDb::Postgres).await
}

#[test]
fn the_default_share_is_ten() {
    assert_eq!(
        callsmith_domain::Settings::default().max_test_calls_per_account,
        10
    );
}
