//! Legacy Profile group over HTTP Basic (account_sid:account_token), on SQLite and PostgreSQL.

use base64::Engine;
use callsmith_control::{both_backends, testing::TestServer};
use reqwest::Method;
use serde_json::json;

fn basic(user: &str, pass: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    )
}

async fn legacy_profiles_with_account_token(s: TestServer) {
    let a = s.fixture_named("a").await;
    let b = s.fixture_named("b").await;
    let issue = |acc: &str| {
        s.su(
            Method::POST,
            &format!("/v1/internal/account/{acc}/legacy-token"),
        )
        .send()
    };
    let ta = issue(&a.account_sid).await;
    ta.expect(201);
    assert_eq!(ta.body["account_sid"], a.account_sid.as_str());
    let token_a = ta.str("account_token");
    let token_b = issue(&b.account_sid).await.str("account_token");
    let auth_a = basic(&a.account_sid, &token_a);
    // A tenant key of another tenant cannot issue one.
    s.post(&format!(
        "/v1/internal/account/{}/legacy-token",
        a.account_sid
    ))
    .bearer(&b.tenant_key)
    .send()
    .await
    .expect_error(404, "account_not_found");

    let created = s
        .post("/profile")
        .header("authorization", &auth_a)
        .json(&json!({"email": "p@example.test", "timezone": "Europe/Berlin"}))
        .send()
        .await;
    created.expect(200);
    let id = created.str("id");
    assert_eq!(created.body["email"], "p@example.test");
    assert_eq!(created.body["timezone"], "Europe/Berlin");
    assert!(created.body["creation_time"].is_string() && created.body["update_time"].is_string());

    let got = s
        .get(&format!("/profile/{id}"))
        .header("authorization", &auth_a)
        .send()
        .await;
    got.expect(200);
    assert_eq!(got.body, created.body);
    let patched = s
        .patch(&format!("/profile/{id}"))
        .header("authorization", &auth_a)
        .json(&json!({"timezone": "UTC"}))
        .send()
        .await;
    patched.expect(200);
    assert_eq!(patched.body["timezone"], "UTC");
    assert_eq!(patched.body["email"], "p@example.test");

    // Errors use the RPC-style status object.
    let bad = s
        .post("/profile")
        .header("authorization", &auth_a)
        .json(&json!({"timezone": "Mars/Base"}))
        .send()
        .await;
    bad.expect(400);
    assert_eq!(bad.body["code"], 3);
    assert!(bad.body["details"].is_array());
    let unauth = s
        .get(&format!("/profile/{id}"))
        .header("authorization", &basic(&a.account_sid, "cs_lt_wrong"))
        .send()
        .await;
    unauth.expect(401);
    assert_eq!(unauth.body["code"], 16);
    s.get(&format!("/profile/{id}")).send().await.expect(401);
    s.get(&format!("/profile/{id}"))
        .bearer(&s.superuser_token)
        .send()
        .await
        .expect(401);
    // Another account's profile reads as absent.
    let other = s
        .get(&format!("/profile/{id}"))
        .header("authorization", &basic(&b.account_sid, &token_b))
        .send()
        .await;
    other.expect(404);
    assert_eq!(other.body["code"], 5);

    let del = s
        .delete(&format!("/profile/{id}"))
        .header("authorization", &auth_a)
        .send()
        .await;
    del.expect(200);
    assert_eq!(del.body, json!({}));
    s.get(&format!("/profile/{id}"))
        .header("authorization", &auth_a)
        .send()
        .await
        .expect(404);

    // Rotating the token retires the old one.
    let rotated = issue(&a.account_sid).await.str("account_token");
    s.post("/profile")
        .header("authorization", &auth_a)
        .json(&json!({}))
        .send()
        .await
        .expect(401);
    s.post("/profile")
        .header("authorization", &basic(&a.account_sid, &rotated))
        .json(&json!({}))
        .send()
        .await
        .expect(200);
}

both_backends!(legacy_profiles_with_account_token);
