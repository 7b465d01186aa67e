//! Authentication, capabilities, scope headers and tenant isolation over real HTTP, on
//! SQLite and PostgreSQL.

use callsmith_control::{both_backends, testing::TestServer};
use reqwest::Method;
use serde_json::json;

async fn missing_or_invalid_credentials_are_401(s: TestServer) {
    s.get("/v1/user")
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.get("/v1/user")
        .bearer("cs_su_not-a-real-token-aaaaaaaaaaaaaaaaaaaaaaaa")
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.get("/v1/user")
        .bearer("garbage")
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.get("/v1/internal/tenant")
        .header("authorization", "Basic dXNlcjpwYXNz")
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.get("/v1/profile")
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.post("/v1/auth/logout")
        .send()
        .await
        .expect_error(401, "unauthenticated");
    // The superuser token works.
    s.su(Method::GET, "/v1/internal/tenant")
        .send()
        .await
        .expect(200);
}

async fn missing_capabilities_are_403(s: TestServer) {
    let f = s.fixture().await;
    s.post("/v1/internal/tenant")
        .bearer(&f.tenant_key)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .expect_error(403, "forbidden");
    s.delete(&format!("/v1/internal/tenant/{}", f.tenant_sid))
        .bearer(&f.tenant_key)
        .send()
        .await
        .expect_error(403, "forbidden");
    s.post(&format!("/v1/internal/tenant/{}/api-key", f.tenant_sid))
        .bearer(&f.tenant_key)
        .json(&json!({}))
        .send()
        .await
        .expect_error(403, "forbidden");
    s.get("/v1/internal/trunk")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(403, "forbidden");
    s.get(&format!("/v1/internal/account/{}", f.account_sid))
        .bearer(&f.admin_session)
        .send()
        .await
        .expect_error(403, "forbidden");
    s.patch(&format!(
        "/v1/internal/tenant/{}/feature-flag/global_llm",
        f.tenant_sid
    ))
    .bearer(&f.tenant_key)
    .json(&json!({"enabled": true}))
    .send()
    .await
    .expect_error(403, "forbidden");

    s.create_user(
        &f.account_sid,
        "viewer@example.test",
        "viewer-password",
        &["viewer"],
    )
    .await;
    let viewer = s.login("viewer@example.test", "viewer-password").await;
    s.get("/v1/user").bearer(&viewer).send().await.expect(200);
    s.post("/v1/user")
        .bearer(&viewer)
        .json(&json!({"email": "x@example.test"}))
        .send()
        .await
        .expect_error(403, "forbidden");
    s.patch(&format!("/v1/user/{}", f.admin_user_sid))
        .bearer(&viewer)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .expect_error(403, "forbidden");
    s.delete(&format!("/v1/user/{}", f.admin_user_sid))
        .bearer(&viewer)
        .send()
        .await
        .expect_error(403, "forbidden");

    // Principals without a user have no profile.
    s.su(Method::GET, "/v1/profile")
        .send()
        .await
        .expect_error(403, "forbidden");
    s.get("/v1/profile")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(403, "forbidden");
    s.get("/v1/profile")
        .bearer(&f.tenant_key)
        .send()
        .await
        .expect_error(403, "forbidden");
}

async fn account_and_tenant_header_rules(s: TestServer) {
    let a = s.fixture_named("a").await;
    let b = s.fixture_named("b").await;
    let users = "/v1/user";

    // Superuser: must declare the account.
    s.su(Method::GET, users)
        .send()
        .await
        .expect_error(400, "account_required");
    s.su(Method::GET, users)
        .header("X-Account-Sid", &a.account_sid)
        .send()
        .await
        .expect(200);
    s.su(Method::GET, users)
        .header("X-Account-Sid", "acc_doesnotexist")
        .send()
        .await
        .expect_error(404, "account_not_found");
    // X-Tenant-Sid beside X-Account-Sid must be the account's tenant.
    s.su(Method::GET, users)
        .header("X-Account-Sid", &a.account_sid)
        .header("X-Tenant-Sid", &a.tenant_sid)
        .send()
        .await
        .expect(200);
    s.su(Method::GET, users)
        .header("X-Account-Sid", &a.account_sid)
        .header("X-Tenant-Sid", &b.tenant_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");

    // Tenant key: must declare an account of its own tenant.
    s.get(users)
        .bearer(&a.tenant_key)
        .send()
        .await
        .expect_error(400, "account_required");
    s.get(users)
        .bearer(&a.tenant_key)
        .header("X-Account-Sid", &a.account_sid)
        .send()
        .await
        .expect(200);
    s.get(users)
        .bearer(&a.tenant_key)
        .header("X-Account-Sid", &b.account_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");
    s.get(users)
        .bearer(&a.tenant_key)
        .header("X-Account-Sid", "acc_doesnotexist")
        .send()
        .await
        .expect_error(403, "scope_conflict");
    s.get(users)
        .bearer(&a.tenant_key)
        .header("X-Account-Sid", &a.account_sid)
        .header("X-Tenant-Sid", &b.tenant_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");

    // Account key and user: may omit; if sent must be their own.
    for token in [&a.account_key, &a.admin_session] {
        s.get(users).bearer(token).send().await.expect(200);
        s.get(users)
            .bearer(token)
            .header("X-Account-Sid", &a.account_sid)
            .send()
            .await
            .expect(200);
        s.get(users)
            .bearer(token)
            .header("X-Account-Sid", &b.account_sid)
            .send()
            .await
            .expect_error(403, "scope_conflict");
        s.get(users)
            .bearer(token)
            .header("X-Account-Sid", "acc_doesnotexist")
            .send()
            .await
            .expect_error(403, "scope_conflict");
        s.get(users)
            .bearer(token)
            .header("X-Tenant-Sid", &b.tenant_sid)
            .send()
            .await
            .expect_error(403, "scope_conflict");
        s.get(&format!("/v1/user/{}", a.admin_user_sid))
            .bearer(token)
            .header("X-Account-Sid", &b.account_sid)
            .send()
            .await
            .expect_error(403, "scope_conflict");
    }
    s.get("/v1/profile")
        .bearer(&a.admin_session)
        .header("X-Account-Sid", &b.account_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");

    // Tenant-scoped administrative endpoints.
    let trunks = "/v1/internal/trunk";
    s.su(Method::GET, trunks)
        .send()
        .await
        .expect_error(400, "tenant_required");
    s.su(Method::GET, trunks)
        .header("X-Tenant-Sid", &a.tenant_sid)
        .send()
        .await
        .expect(200);
    s.su(Method::GET, trunks)
        .header("X-Tenant-Sid", "ten_doesnotexist")
        .send()
        .await
        .expect_error(404, "tenant_not_found");
    s.get(trunks).bearer(&a.tenant_key).send().await.expect(200);
    s.get(trunks)
        .bearer(&a.tenant_key)
        .header("X-Tenant-Sid", &a.tenant_sid)
        .send()
        .await
        .expect(200);
    s.get(trunks)
        .bearer(&a.tenant_key)
        .header("X-Tenant-Sid", &b.tenant_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");
    s.post(trunks)
        .bearer(&a.tenant_key)
        .header("X-Tenant-Sid", &b.tenant_sid)
        .json(&json!({"name": "edge1"}))
        .send()
        .await
        .expect_error(403, "scope_conflict");
    s.post("/v1/internal/account")
        .bearer(&a.tenant_key)
        .header("X-Tenant-Sid", &b.tenant_sid)
        .json(&json!({"name": "n", "email": "e@example.test"}))
        .send()
        .await
        .expect_error(403, "scope_conflict");
    s.su(Method::POST, "/v1/internal/account")
        .json(&json!({"name": "n", "email": "e@example.test"}))
        .send()
        .await
        .expect_error(400, "tenant_required");
}

async fn tenant_isolation(s: TestServer) {
    let a = s.fixture_named("a").await;
    let b = s.fixture_named("b").await;
    let b_trunk = s
        .su(Method::POST, "/v1/internal/trunk")
        .header("X-Tenant-Sid", &b.tenant_sid)
        .json(&json!({"name": "b-edge"}))
        .send()
        .await;
    b_trunk.expect(201);
    let b_trunk = b_trunk.str("sid");
    s.su(Method::POST, "/v1/internal/trunk")
        .header("X-Tenant-Sid", &a.tenant_sid)
        .json(&json!({"name": "a-edge"}))
        .send()
        .await
        .expect(201);

    // Account principals of A: every user sid of B reads as absent.
    for token in [&a.account_key, &a.admin_session, &a.tenant_key] {
        let user = format!("/v1/user/{}", b.admin_user_sid);
        s.get(&user)
            .bearer(token)
            .send()
            .await
            .expect_error(404, "user_not_found");
        s.patch(&user)
            .bearer(token)
            .json(&json!({"name": "x"}))
            .send()
            .await
            .expect_error(404, "user_not_found");
        s.delete(&user)
            .bearer(token)
            .send()
            .await
            .expect_error(404, "user_not_found");
        s.post(&format!("{user}/magic-link/request"))
            .bearer(token)
            .send()
            .await
            .expect_error(404, "user_not_found");
        s.post(&format!("{user}/password-reset/request"))
            .bearer(token)
            .send()
            .await
            .expect_error(404, "user_not_found");
    }
    // Lists never show B's rows.
    let mine = s.get("/v1/user").bearer(&a.admin_session).send().await;
    mine.expect(200);
    assert_eq!(mine.sids(), vec![a.admin_user_sid.clone()]);
    assert_eq!(mine.body["total"], 1);

    // Tenant principal of A: every tenant-level sid of B reads as absent.
    let tk = &a.tenant_key;
    s.get(&format!("/v1/internal/trunk/{b_trunk}"))
        .bearer(tk)
        .send()
        .await
        .expect_error(404, "trunk_not_found");
    s.delete(&format!("/v1/internal/trunk/{b_trunk}"))
        .bearer(tk)
        .send()
        .await
        .expect_error(404, "trunk_not_found");
    s.get(&format!("/v1/internal/account/{}", b.account_sid))
        .bearer(tk)
        .send()
        .await
        .expect_error(404, "account_not_found");
    s.patch(&format!("/v1/internal/account/{}", b.account_sid))
        .bearer(tk)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .expect_error(404, "account_not_found");
    s.post(&format!("/v1/internal/account/{}/api-key", b.account_sid))
        .bearer(tk)
        .json(&json!({}))
        .send()
        .await
        .expect_error(404, "account_not_found");
    s.get(&format!("/v1/internal/account/{}/api-key", b.account_sid))
        .bearer(tk)
        .send()
        .await
        .expect_error(404, "account_not_found");
    s.delete(&format!(
        "/v1/internal/account/{}/api-key/{}",
        a.account_sid, b.account_key_sid
    ))
    .bearer(tk)
    .send()
    .await
    .expect_error(404, "api_key_not_found");
    s.get(&format!("/v1/internal/tenant/{}", b.tenant_sid))
        .bearer(tk)
        .send()
        .await
        .expect_error(404, "tenant_not_found");
    s.get(&format!(
        "/v1/internal/tenant/{}/feature-flag",
        b.tenant_sid
    ))
    .bearer(tk)
    .send()
    .await
    .expect_error(404, "tenant_not_found");
    s.get(&format!(
        "/v1/internal/tenant/{}/feature-flag/global_llm",
        b.tenant_sid
    ))
    .bearer(tk)
    .send()
    .await
    .expect_error(404, "tenant_not_found");

    let trunks = s.get("/v1/internal/trunk").bearer(tk).send().await;
    trunks.expect(200);
    assert_eq!(trunks.body["total"], 1);
    assert_eq!(trunks.body["items"][0]["name"], "a-edge");
    let accounts = s.get("/v1/internal/account").bearer(tk).send().await;
    accounts.expect(200);
    assert_eq!(accounts.sids(), vec![a.account_sid.clone()]);
    let tenants = s.get("/v1/internal/tenant").bearer(tk).send().await;
    tenants.expect(200);
    assert_eq!(tenants.sids(), vec![a.tenant_sid.clone()]);
    // B's rows are untouched by all of the above.
    s.su(Method::GET, &format!("/v1/user/{}", b.admin_user_sid))
        .send()
        .await
        .expect(200);
    s.get(&format!("/v1/internal/trunk/{b_trunk}"))
        .bearer(&b.tenant_key)
        .send()
        .await
        .expect(200);
}

async fn api_keys_expire_and_revoke(s: TestServer) {
    let f = s.fixture().await;
    let keys = format!("/v1/internal/account/{}/api-key", f.account_sid);
    s.su(Method::POST, &keys)
        .json(&json!({"expires_at": "2000-01-01T00:00:00Z"}))
        .send()
        .await
        .expect_error(422, "invalid_expiry");
    s.su(Method::POST, &keys)
        .json(&json!({"expires_at": "not a date"}))
        .send()
        .await
        .expect_error(400, "invalid_body");

    let soon = (chrono::Utc::now() + chrono::Duration::seconds(2)).to_rfc3339();
    let r = s
        .su(Method::POST, &keys)
        .json(&json!({"label": "short", "expires_at": soon}))
        .send()
        .await;
    r.expect(201);
    let short = r.str("secret");
    assert!(short.starts_with("cs_ak_"));
    assert!(r.str("sid").starts_with("key_"));
    s.get("/v1/user").bearer(&short).send().await.expect(200);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    s.get("/v1/user")
        .bearer(&short)
        .send()
        .await
        .expect_error(401, "unauthenticated");

    // Revocation takes effect at once; listings never show secrets.
    s.get("/v1/user")
        .bearer(&f.account_key)
        .send()
        .await
        .expect(200);
    s.su(Method::DELETE, &format!("{keys}/{}", f.account_key_sid))
        .send()
        .await
        .expect(204);
    s.get("/v1/user")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(401, "unauthenticated");
    let list = s.su(Method::GET, &keys).send().await;
    list.expect(200);
    assert_eq!(list.body["total"], 2);
    assert!(
        !list.text.contains(&f.account_key),
        "a listing must not contain secrets"
    );
    let revoked = list.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["sid"] == f.account_key_sid.as_str())
        .unwrap()
        .clone();
    assert!(revoked["revoked_at"].is_string());
    assert_eq!(revoked["account_sid"], f.account_sid.as_str());
    s.su(Method::DELETE, &format!("{keys}/key_doesnotexist"))
        .send()
        .await
        .expect_error(404, "api_key_not_found");

    // Tenant keys likewise.
    let tkeys = format!("/v1/internal/tenant/{}/api-key", f.tenant_sid);
    let list = s.su(Method::GET, &tkeys).send().await;
    list.expect(200);
    assert_eq!(list.body["total"], 1);
    assert!(list.body["items"][0]["account_sid"].is_null());
    let tk_sid = list.body["items"][0]["sid"].as_str().unwrap().to_string();
    s.get("/v1/internal/trunk")
        .bearer(&f.tenant_key)
        .send()
        .await
        .expect(200);
    s.su(Method::DELETE, &format!("{tkeys}/{tk_sid}"))
        .send()
        .await
        .expect(204);
    s.get("/v1/internal/trunk")
        .bearer(&f.tenant_key)
        .send()
        .await
        .expect_error(401, "unauthenticated");
}

both_backends!(
    missing_or_invalid_credentials_are_401,
    missing_capabilities_are_403,
    account_and_tenant_header_rules,
    tenant_isolation,
    api_keys_expire_and_revoke,
);
