//! Login throttling over real HTTP (peer addresses from the real server), on SQLite and
//! PostgreSQL: lockout per email and per address, 429 with Retry-After, the right password
//! refused during the lockout and accepted after the window, unknown emails treated like
//! known ones, failures counted by another node on the same database.

use std::{net::IpAddr, time::Duration};

use callsmith_control::testing::{TestDb, TestResponse, TestServer};
use callsmith_domain::auth::throttle::{Limit, LoginThrottle, ThrottleSettings};
use serde_json::json;

/// Generates `mod $name { sqlite, postgres }` running `async fn $name(TestDb)`.
macro_rules! both {
    ($($name:ident),*) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() { super::$name(callsmith_control::testing::TestDb::Sqlite).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() { super::$name(callsmith_control::testing::TestDb::Postgres).await }
        }
    )*};
}

const WINDOW: Duration = Duration::from_secs(2);

/// A server whose limits are `email` failures per email and `address` per address in
/// [`WINDOW`].
async fn server(db: TestDb, email: u32, address: u32) -> TestServer {
    TestServer::start_with(db, |s| {
        s.login_throttle = ThrottleSettings {
            per_email: Limit {
                max_failures: email,
                window: WINDOW,
            },
            per_address: Limit {
                max_failures: address,
                window: WINDOW,
            },
        }
    })
    .await
}

async fn login(s: &TestServer, email: &str, password: &str) -> TestResponse {
    s.post("/v1/auth/login")
        .json(&json!({"email": email, "password": password}))
        .send()
        .await
}

/// Asserts a 429 `too_many_attempts` envelope; returns its Retry-After seconds.
#[track_caller]
fn locked(r: &TestResponse) -> u64 {
    r.expect_error(429, "too_many_attempts");
    assert_eq!(r.body["code"], "ERR012", "{}", r.text);
    let secs: u64 = r
        .headers
        .get("retry-after")
        .unwrap_or_else(|| panic!("429 without Retry-After: {:?}", r.headers))
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After in whole seconds");
    assert!(
        (1..=WINDOW.as_secs()).contains(&secs),
        "Retry-After {secs} outside 1..={}",
        WINDOW.as_secs()
    );
    secs
}

async fn an_email_is_locked_after_its_failures_until_the_window_ends(db: TestDb) {
    let s = server(db, 3, 100).await;
    let f = s.fixture().await;
    let user = "locked@example.test";
    s.create_user(&f.account_sid, user, "right-password", &["member"])
        .await;
    for _ in 0..3 {
        login(&s, user, "wrong-password")
            .await
            .expect_error(401, "invalid_credentials");
    }
    // Locked: the right password too, and the email however it is spelled.
    let wait = locked(&login(&s, user, "right-password").await);
    locked(&login(&s, "  LOCKED@Example.TEST ", "right-password").await);
    // Other users are not affected.
    login(&s, &f.admin_email, &f.admin_password)
        .await
        .expect(200);
    // After the window the right password works again.
    tokio::time::sleep(Duration::from_secs(wait)).await;
    login(&s, user, "right-password").await.expect(200);
}

async fn a_successful_login_clears_the_email_count(db: TestDb) {
    let s = server(db, 3, 100).await;
    let f = s.fixture().await;
    for _ in 0..2 {
        login(&s, &f.admin_email, "wrong-password")
            .await
            .expect_error(401, "invalid_credentials");
    }
    login(&s, &f.admin_email, &f.admin_password)
        .await
        .expect(200);
    // Counting starts over: two more failures are not a lockout.
    for _ in 0..2 {
        login(&s, &f.admin_email, "wrong-password")
            .await
            .expect_error(401, "invalid_credentials");
    }
    login(&s, &f.admin_email, &f.admin_password)
        .await
        .expect(200);
}

async fn unknown_emails_are_throttled_like_known_ones(db: TestDb) {
    let s = server(db, 2, 100).await;
    let f = s.fixture().await;
    let mut answers = Vec::new();
    for email in [f.admin_email.as_str(), "nobody@example.test"] {
        let mut seen = Vec::new();
        for _ in 0..3 {
            let r = login(&s, email, "wrong-password").await;
            seen.push((r.status, r.body["error"].clone(), r.body["message"].clone()));
        }
        locked(&login(&s, email, "wrong-password").await);
        answers.push(seen);
    }
    // Same statuses, codes and messages: nothing tells the existing email apart.
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0][0].0, 401);
    assert_eq!(answers[0][2].0, 429);
}

async fn an_address_is_locked_across_emails_and_others_are_not(db: TestDb) {
    let s = server(db, 3, 5).await;
    let f = s.fixture().await;
    // Five failures from 127.0.0.1, each on another email (none reaches the email limit).
    for i in 0..5 {
        login(&s, &format!("spray{i}@example.test"), "guess-password")
            .await
            .expect_error(401, "invalid_credentials");
    }
    // That address is locked, even for a right password of an untouched account …
    locked(&login(&s, &f.admin_email, &f.admin_password).await);
    // … while another source address logs in (the peer address is the server's).
    let other = reqwest::Client::builder()
        .local_address(IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let r = other
        .post(format!("{}/v1/auth/login", s.base_url))
        .json(&json!({"email": f.admin_email, "password": f.admin_password}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

async fn concurrent_guesses_do_not_overtake_the_limit(db: TestDb) {
    let s = server(db, 3, 100).await;
    let f = s.fixture().await;
    let guesses = (0..12).map(|_| login(&s, &f.admin_email, "wrong-password"));
    let answers = futures::future::join_all(guesses).await;
    let checked = answers.iter().filter(|r| r.status == 401).count();
    let refused = answers.iter().filter(|r| r.status == 429).count();
    assert_eq!(
        (checked, refused),
        (3, 9),
        "statuses: {:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
}

/// Another node on the same database (its own throttle over the same store) counts the
/// same failures: what it charged locks the email on this node too.
async fn failures_on_another_node_lock_this_one(db: TestDb) {
    let s = server(db, 3, 100).await;
    let f = s.fixture().await;
    let other = LoginThrottle::new(
        ThrottleSettings {
            per_email: Limit {
                max_failures: 3,
                window: WINDOW,
            },
            ..ThrottleSettings::default()
        },
        s.store.clone(),
    );
    for _ in 0..3 {
        let _ = other
            .begin(&f.admin_email, None, chrono::Utc::now())
            .await
            .unwrap()
            .expect("under the limit on the other node");
    }
    locked(&login(&s, &f.admin_email, &f.admin_password).await);
}

both!(
    failures_on_another_node_lock_this_one,
    an_email_is_locked_after_its_failures_until_the_window_ends,
    a_successful_login_clears_the_email_count,
    unknown_emails_are_throttled_like_known_ones,
    an_address_is_locked_across_emails_and_others_are_not,
    concurrent_guesses_do_not_overtake_the_limit
);

#[test]
fn defaults_allow_more_failures_per_address_than_per_email() {
    let d = ThrottleSettings::default();
    assert_eq!(d.per_email.max_failures, 5);
    assert_eq!(d.per_address.max_failures, 20);
    assert_eq!(d.per_email.window, Duration::from_secs(900));
    assert!(d.per_address.max_failures > d.per_email.max_failures);
}

#[test]
fn openapi_documents_the_429_with_retry_after() {
    let doc = serde_json::to_value(callsmith_control::openapi()).unwrap();
    let login = &doc["paths"]["/v1/auth/login"]["post"]["responses"];
    assert_eq!(
        login["429"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ErrorBody"
    );
    assert!(
        login["429"]["headers"]["Retry-After"].is_object(),
        "{}",
        login["429"]
    );
}
