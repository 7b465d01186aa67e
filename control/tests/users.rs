//! Users, login/logout, password change and reset, magic links and the profile over
//! real HTTP, on SQLite and PostgreSQL.

use callsmith_control::{both_backends, testing::TestServer};
use serde_json::json;

async fn user_create_rules(s: TestServer) {
    let f = s.fixture().await;
    let other = s.fixture_named("other").await;
    let post = |body: serde_json::Value| {
        s.post("/v1/user")
            .bearer(&f.admin_session)
            .json(&body)
            .send()
    };

    let r = post(
        json!({"email": "New.User@Example.test", "name": "New", "roles": ["member", "viewer"]}),
    )
    .await;
    r.expect(201);
    assert!(r.str("sid").starts_with("usr_"));
    assert_eq!(r.body["account_sid"], f.account_sid.as_str());
    assert_eq!(r.body["email"], "new.user@example.test");
    assert_eq!(r.body["roles"], json!(["member", "viewer"]));
    assert_eq!(r.body["status"], "active");
    assert_eq!(r.body["has_password"], false);
    assert!(r.body["last_login_at"].is_null());
    assert!(r.body["deleted_at"].is_null());

    post(json!({"email": "short@example.test", "password": "1234567"}))
        .await
        .expect_error(422, "password_too_short");
    post(json!({"email": "okpw@example.test", "password": "12345678"}))
        .await
        .expect(201);
    post(json!({"email": "not-an-email"}))
        .await
        .expect_error(422, "invalid_email");
    post(json!({"email": "r@example.test", "roles": ["root"]}))
        .await
        .expect_error(422, "invalid_roles");
    post(json!({"email": "r@example.test", "roles": []}))
        .await
        .expect_error(422, "invalid_roles");
    post(json!({"email": "r@example.test", "admin": true}))
        .await
        .expect_error(400, "invalid_body");
    post(json!({"email": 5}))
        .await
        .expect_error(400, "invalid_body");
    // Email collision, also across tenants and case-insensitively.
    post(json!({"email": "NEW.user@example.test"}))
        .await
        .expect_error(409, "email_taken");
    s.post("/v1/user")
        .bearer(&other.admin_session)
        .json(&json!({"email": f.admin_email.to_uppercase()}))
        .send()
        .await
        .expect_error(409, "email_taken");
}

async fn user_list_order_patch_delete(s: TestServer) {
    let f = s.fixture().await;
    let mut made = Vec::new();
    for (email, name) in [
        ("c@example.test", "Carol"),
        ("a@example.test", "Bob"),
        ("b@example.test", "Alice"),
    ] {
        let r = s
            .post("/v1/user")
            .bearer(&f.account_key)
            .json(&json!({"email": email, "name": name}))
            .send()
            .await;
        r.expect(201);
        made.push(r.str("sid"));
    }
    let list = |q: &str| {
        s.get(&format!("/v1/user{q}"))
            .bearer(&f.admin_session)
            .send()
    };
    let d = list("").await;
    d.expect(200);
    assert_eq!(
        d.sids(),
        vec![
            made[2].clone(),
            made[1].clone(),
            made[0].clone(),
            f.admin_user_sid.clone()
        ],
        "default: created_at desc"
    );
    let by_name = list("?order_by=name&order=asc").await;
    let names: Vec<_> = by_name.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["Alice", "Bob", "Carol", f.admin_email.as_str()]);
    let by_email = list("?order_by=email&order=desc&limit=2").await;
    let emails: Vec<_> = by_email.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["email"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(emails, ["c@example.test", "b@example.test"]);
    assert_eq!(by_email.body["has_more"], true);
    assert_eq!(by_email.body["total"], 4);
    list("?order_by=age")
        .await
        .expect_error(400, "invalid_query");
    list("?order=up").await.expect_error(400, "invalid_query");
    list("?show_deleted=perhaps")
        .await
        .expect_error(400, "invalid_query");

    let user = format!("/v1/user/{}", made[0]);
    let p = s
        .patch(&user)
        .bearer(&f.admin_session)
        .json(&json!({"name": "Caroline", "roles": ["admin"], "status": "inactive"}))
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["name"], "Caroline");
    assert_eq!(p.body["roles"], json!(["admin"]));
    assert_eq!(p.body["status"], "inactive");
    assert_eq!(p.body["email"], "c@example.test");
    let p = s
        .patch(&user)
        .bearer(&f.admin_session)
        .json(&json!({"password": "long-enough"}))
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["has_password"], true);
    s.patch(&user)
        .bearer(&f.admin_session)
        .json(&json!({"password": "short"}))
        .send()
        .await
        .expect_error(422, "password_too_short");
    s.patch(&user)
        .bearer(&f.admin_session)
        .json(&json!({"status": "paused"}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    s.patch(&user)
        .bearer(&f.admin_session)
        .json(&json!({"email": "x@example.test"}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    s.patch("/v1/user/usr_doesnotexist")
        .bearer(&f.admin_session)
        .json(&json!({}))
        .send()
        .await
        .expect_error(404, "user_not_found");

    s.delete(&user)
        .bearer(&f.admin_session)
        .send()
        .await
        .expect(204);
    s.delete(&user)
        .bearer(&f.admin_session)
        .send()
        .await
        .expect_error(404, "user_not_found");
    s.patch(&user)
        .bearer(&f.admin_session)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .expect_error(404, "user_not_found");
    s.get(&user)
        .bearer(&f.admin_session)
        .send()
        .await
        .expect_error(404, "user_not_found");
    let live = list("").await;
    assert!(!live.sids().contains(&made[0]));
    assert_eq!(live.body["total"], 3);
    let all = list("?show_deleted=true").await;
    assert_eq!(all.body["total"], 4);
    let row = all.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["sid"] == made[0].as_str())
        .unwrap()
        .clone();
    assert!(row["deleted_at"].is_string());
    // A deleted user's email can be used again.
    s.post("/v1/user")
        .bearer(&f.admin_session)
        .json(&json!({"email": "c@example.test"}))
        .send()
        .await
        .expect(201);
}

async fn login_logout_and_password_change(s: TestServer) {
    let f = s.fixture().await;
    let login = |email: &str, pw: &str| {
        s.post("/v1/auth/login")
            .json(&json!({"email": email, "password": pw}))
            .send()
    };
    login(&f.admin_email, "wrong-password")
        .await
        .expect_error(401, "invalid_credentials");
    login("nobody@example.test", "whatever-password")
        .await
        .expect_error(401, "invalid_credentials");
    s.post("/v1/auth/login")
        .json(&json!({"email": f.admin_email}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    let r = login(&f.admin_email.to_uppercase(), &f.admin_password).await;
    r.expect(200);
    for k in [
        "session_token",
        "user_sid",
        "account_sid",
        "tenant_sid",
        "email",
    ] {
        assert!(r.body[k].is_string(), "Session lacks {k}: {}", r.text);
    }
    assert_eq!(r.body["user_sid"], f.admin_user_sid.as_str());
    assert_eq!(r.body["tenant_sid"], f.tenant_sid.as_str());
    let session = r.str("session_token");
    let profile = s.get("/v1/profile").bearer(&session).send().await;
    profile.expect(200);
    assert!(profile.body["user"]["last_login_at"].is_string());

    let change = |current: &str, new: &str| {
        s.post("/v1/auth/password/change")
            .bearer(&session)
            .json(&json!({"current_password": current, "new_password": new}))
            .send()
    };
    change("wrong-password", "brand-new-password")
        .await
        .expect_error(401, "invalid_current_password");
    change(&f.admin_password, "short")
        .await
        .expect_error(422, "password_too_short");
    s.post("/v1/auth/password/change")
        .bearer(&session)
        .json(&json!({"new_password": "x"}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    change(&f.admin_password, "brand-new-password")
        .await
        .expect(204);
    // The change ends the user's other sessions; the one that made it goes on.
    s.get("/v1/profile")
        .bearer(&f.admin_session)
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.get("/v1/profile")
        .bearer(&session)
        .send()
        .await
        .expect(200);
    login(&f.admin_email, &f.admin_password)
        .await
        .expect_error(401, "invalid_credentials");
    login(&f.admin_email, "brand-new-password")
        .await
        .expect(200);
    s.post("/v1/auth/password/change")
        .bearer(&f.account_key)
        .json(&json!({"current_password": "a", "new_password": "bbbbbbbb"}))
        .send()
        .await
        .expect_error(403, "forbidden");

    s.post("/v1/auth/logout")
        .bearer(&session)
        .send()
        .await
        .expect(204);
    s.get("/v1/profile")
        .bearer(&session)
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.post("/v1/auth/logout")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(403, "forbidden");

    // An inactive user can neither log in nor use an existing session.
    let live = login(&f.admin_email, "brand-new-password").await;
    live.expect(200);
    let live = live.str("session_token");
    s.get("/v1/profile").bearer(&live).send().await.expect(200);
    s.patch(&format!("/v1/user/{}", f.admin_user_sid))
        .bearer(&f.account_key)
        .json(&json!({"status": "inactive"}))
        .send()
        .await
        .expect(200);
    login(&f.admin_email, "brand-new-password")
        .await
        .expect_error(401, "invalid_credentials");
    s.get("/v1/profile")
        .bearer(&live)
        .send()
        .await
        .expect_error(401, "unauthenticated");
}

/// Every path that sets a password ends the user's sessions: an admin's PATCH, the
/// superuser's PATCH, a user patching its own password (its current session survives).
async fn password_set_by_admin_ends_sessions(s: TestServer) {
    let f = s.fixture().await;
    let member = s
        .create_user(
            &f.account_sid,
            "member@example.test",
            "first-password",
            &["member"],
        )
        .await;
    let profile = |token: &str| s.get("/v1/profile").bearer(token).send();
    let set_password = |token: &str, user: &str, pw: &str| {
        s.patch(&format!("/v1/user/{user}"))
            .bearer(token)
            .json(&json!({"password": pw}))
            .send()
    };

    let one = s.login("member@example.test", "first-password").await;
    let two = s.login("member@example.test", "first-password").await;
    profile(&one).await.expect(200);
    profile(&two).await.expect(200);
    // A patch without a password leaves the sessions alone.
    s.patch(&format!("/v1/user/{member}"))
        .bearer(&f.admin_session)
        .json(&json!({"name": "Member"}))
        .send()
        .await
        .expect(200);
    profile(&one).await.expect(200);

    set_password(&f.admin_session, &member, "second-password")
        .await
        .expect(200);
    profile(&one).await.expect_error(401, "unauthenticated");
    profile(&two).await.expect_error(401, "unauthenticated");
    // The admin's own session is not the member's: it goes on.
    profile(&f.admin_session).await.expect(200);
    let three = s.login("member@example.test", "second-password").await;
    profile(&three).await.expect(200);

    // The superuser's patch (X-Account-Sid) ends them too.
    s.su(reqwest::Method::PATCH, &format!("/v1/user/{member}"))
        .header("X-Account-Sid", &f.account_sid)
        .json(&json!({"password": "third-password"}))
        .send()
        .await
        .expect(200);
    profile(&three).await.expect_error(401, "unauthenticated");
    s.login("member@example.test", "third-password").await;

    // An admin setting its own password keeps the session it does it with.
    let other = s.login(&f.admin_email, &f.admin_password).await;
    set_password(&f.admin_session, &f.admin_user_sid, "admin-password-2")
        .await
        .expect(200);
    profile(&f.admin_session).await.expect(200);
    profile(&other).await.expect_error(401, "unauthenticated");
}

async fn password_reset_handoff(s: TestServer) {
    let f = s.fixture().await;
    let request = format!("/v1/user/{}/password-reset/request", f.admin_user_sid);
    let r = s
        .post(&request)
        .bearer(&f.tenant_key)
        .header("X-Account-Sid", &f.account_sid)
        .send()
        .await;
    r.expect(201);
    let token = r.str("token");
    assert!(r.body["expires_at"].is_string());
    let consume = |token: &str, pw: &str| {
        s.post("/v1/auth/password-reset/consume")
            .json(&json!({"token": token, "new_password": pw}))
            .send()
    };

    consume(&token, "short")
        .await
        .expect_error(422, "password_too_short");
    s.post("/v1/auth/password-reset/consume")
        .json(&json!({"token": token}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    consume("cs_pr_unknown", "long-enough-1")
        .await
        .expect_error(401, "invalid_token");
    let sess = consume(&token, "long-enough-1").await;
    sess.expect(200);
    assert_eq!(sess.body["user_sid"], f.admin_user_sid.as_str());
    assert_eq!(sess.body["account_sid"], f.account_sid.as_str());
    assert_eq!(sess.body["email"], f.admin_email.as_str());
    s.get("/v1/profile")
        .bearer(&sess.str("session_token"))
        .send()
        .await
        .expect(200);
    // Single use; earlier sessions ended; the new password works.
    consume(&token, "long-enough-2")
        .await
        .expect_error(401, "invalid_token");
    s.get("/v1/profile")
        .bearer(&f.admin_session)
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.login(&f.admin_email, "long-enough-1").await;

    // A new token supersedes the earlier one.
    let t1 = s
        .post(&request)
        .bearer(&f.account_key)
        .send()
        .await
        .str("token");
    let t2 = s
        .post(&request)
        .bearer(&f.account_key)
        .send()
        .await
        .str("token");
    consume(&t1, "long-enough-3")
        .await
        .expect_error(401, "invalid_token");
    consume(&t2, "long-enough-3").await.expect(200);
    s.post("/v1/user/usr_doesnotexist/password-reset/request")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(404, "user_not_found");
}

async fn magic_links(s: TestServer) {
    let f = s.fixture().await;
    let user = s
        .create_user(
            &f.account_sid,
            "magic@example.test",
            "password-m",
            &["member"],
        )
        .await;
    let request = format!("/v1/user/{user}/magic-link/request");
    let r = s.post(&request).bearer(&f.admin_session).send().await;
    r.expect(201);
    assert_eq!(
        r.str("consume_url"),
        format!("{}/v1/auth/magic-link/consume", s.base_url)
    );
    assert!(r.body["expires_at"].is_string());
    let consume = |token: &str| {
        s.post("/v1/auth/magic-link/consume")
            .json(&json!({"token": token}))
            .send()
    };
    let sess = consume(&r.str("token")).await;
    sess.expect(200);
    assert_eq!(sess.body["user_sid"], user.as_str());
    s.get("/v1/profile")
        .bearer(&sess.str("session_token"))
        .send()
        .await
        .expect(200);
    consume(&r.str("token"))
        .await
        .expect_error(401, "invalid_token");

    let t1 = s
        .post(&request)
        .bearer(&f.admin_session)
        .send()
        .await
        .str("token");
    let t2 = s
        .post(&request)
        .bearer(&f.admin_session)
        .send()
        .await
        .str("token");
    consume(&t1).await.expect_error(401, "invalid_token");
    consume(&t2).await.expect(200);
    consume("cs_ml_whatever")
        .await
        .expect_error(401, "invalid_token");
    s.post("/v1/auth/magic-link/consume")
        .json(&json!({}))
        .send()
        .await
        .expect_error(400, "invalid_body");

    s.patch(&format!("/v1/user/{user}"))
        .bearer(&f.admin_session)
        .json(&json!({"status": "inactive"}))
        .send()
        .await
        .expect(200);
    s.post(&request)
        .bearer(&f.admin_session)
        .send()
        .await
        .expect_error(409, "user_inactive");
    s.post("/v1/user/usr_doesnotexist/magic-link/request")
        .bearer(&f.admin_session)
        .send()
        .await
        .expect_error(404, "user_not_found");
}

async fn profile_views(s: TestServer) {
    let f = s.fixture().await;
    let p = s.get("/v1/profile").bearer(&f.admin_session).send().await;
    p.expect(200);
    let user = p.body["user"].as_object().unwrap();
    assert!(
        !user.contains_key("deleted_at"),
        "the profile's user has no deleted_at"
    );
    assert_eq!(user["sid"], f.admin_user_sid.as_str());
    assert_eq!(user["roles"], json!(["admin"]));
    let account = &p.body["account"];
    assert_eq!(account["sid"], f.account_sid.as_str());
    assert_eq!(account["tenant_sid"], f.tenant_sid.as_str());
    assert_eq!(account["tenant_name"], "tenant a");
    assert_eq!(account["country"], "de");
    assert_eq!(account["status"], "active");
    assert_eq!(account["limits"], json!({}), "admins hold limits:account");
    assert_eq!(
        p.body["feature_flags"],
        json!({"global_llm": false, "global_stt": false, "global_tts": false})
    );

    s.create_user(
        &f.account_sid,
        "member@example.test",
        "password-x",
        &["member"],
    )
    .await;
    let member = s.login("member@example.test", "password-x").await;
    let p = s.get("/v1/profile").bearer(&member).send().await;
    p.expect(200);
    assert!(
        p.body["account"].get("limits").is_none(),
        "members lack limits:account: {}",
        p.text
    );
}

both_backends!(
    user_create_rules,
    user_list_order_patch_delete,
    login_logout_and_password_change,
    password_set_by_admin_ends_sessions,
    password_reset_handoff,
    magic_links,
    profile_views
);
