//! Tenants (soft/hard delete, restore, purgers), accounts, trunks, feature flags and
//! paging over real HTTP, on SQLite and PostgreSQL.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use callsmith_control::{both_backends, testing::TestServer};
use callsmith_domain::store::TenantPurger;
use reqwest::Method;
use serde_json::json;

async fn tenant_create_get_list(s: TestServer) {
    let r = s
        .su(Method::POST, "/v1/internal/tenant")
        .json(&json!({"name": "Acme"}))
        .send()
        .await;
    r.expect(201);
    let sid = r.str("sid");
    assert!(sid.starts_with("ten_"));
    assert_eq!(r.body["name"], "Acme");
    assert!(
        r.body["deleted_at"].is_null(),
        "nullable fields are present as null: {}",
        r.text
    );
    assert!(r.body["created_at"].as_str().unwrap().ends_with('Z'));
    let g = s
        .su(Method::GET, &format!("/v1/internal/tenant/{sid}"))
        .send()
        .await;
    g.expect(200);
    assert_eq!(g.body, r.body);
    s.su(Method::GET, "/v1/internal/tenant/ten_doesnotexist")
        .send()
        .await
        .expect_error(404, "tenant_not_found");
    s.su(Method::POST, "/v1/internal/tenant")
        .json(&json!({"name": "  "}))
        .send()
        .await
        .expect_error(422, "invalid_field");
    s.su(Method::POST, "/v1/internal/tenant")
        .json(&json!({}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    s.su(Method::POST, "/v1/internal/tenant")
        .raw_json("{\"name\": ")
        .send()
        .await
        .expect_error(400, "invalid_body");
    let l = s.su(Method::GET, "/v1/internal/tenant").send().await;
    l.expect(200);
    assert_eq!(l.body["total"], 1);
    assert_eq!(l.body["limit"], 100);
    assert_eq!(l.body["offset"], 0);
    assert_eq!(l.body["has_more"], false);
    assert!(l.body.get("included").is_none());
}

async fn tenant_soft_delete_cascades_and_restores(s: TestServer) {
    let f = s.fixture().await;
    let tenant = format!("/v1/internal/tenant/{}", f.tenant_sid);
    s.delete(&tenant)
        .bearer(&s.superuser_token)
        .send()
        .await
        .expect(204);

    let g = s.su(Method::GET, &tenant).send().await;
    g.expect(200);
    assert!(g.body["deleted_at"].is_string());
    let acc = s
        .su(
            Method::GET,
            &format!("/v1/internal/account/{}", f.account_sid),
        )
        .send()
        .await;
    acc.expect(200);
    assert!(
        acc.body["deleted_at"].is_string(),
        "the account is soft-deleted too: {}",
        acc.text
    );
    let users = s.su(Method::GET, "/v1/internal/tenant").send().await;
    assert_eq!(users.body["total"], 0);
    let all = s
        .su(Method::GET, "/v1/internal/tenant?show_deleted=true")
        .send()
        .await;
    assert_eq!(all.sids(), vec![f.tenant_sid.clone()]);
    // Nobody of the tenant can authenticate any more.
    s.get("/v1/profile")
        .bearer(&f.admin_session)
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.get("/v1/internal/trunk")
        .bearer(&f.tenant_key)
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.get("/v1/user")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.post("/v1/auth/login")
        .json(&json!({"email": f.admin_email, "password": f.admin_password}))
        .send()
        .await
        .expect_error(401, "invalid_credentials");
    // Soft-deleting again finds no live tenant.
    s.su(Method::DELETE, &tenant)
        .send()
        .await
        .expect_error(404, "tenant_not_found");

    let r = s
        .su(Method::POST, &format!("{tenant}/restore"))
        .send()
        .await;
    r.expect(200);
    assert!(r.body["deleted_at"].is_null());
    let acc = s
        .su(
            Method::GET,
            &format!("/v1/internal/account/{}", f.account_sid),
        )
        .send()
        .await;
    assert!(acc.body["deleted_at"].is_null());
    s.get("/v1/profile")
        .bearer(&f.admin_session)
        .send()
        .await
        .expect(200);
    s.login(&f.admin_email, &f.admin_password).await;
    s.get("/v1/internal/trunk")
        .bearer(&f.tenant_key)
        .send()
        .await
        .expect(200);
    s.su(Method::DELETE, "/v1/internal/tenant/ten_doesnotexist")
        .send()
        .await
        .expect_error(404, "tenant_not_found");
    s.su(Method::POST, "/v1/internal/tenant/ten_doesnotexist/restore")
        .send()
        .await
        .expect_error(404, "tenant_not_found");
}

async fn restore_keeps_individually_deleted_users_deleted(s: TestServer) {
    let f = s.fixture().await;
    let gone = s
        .create_user(
            &f.account_sid,
            "gone@example.test",
            "password-1",
            &["member"],
        )
        .await;
    s.su(Method::DELETE, &format!("/v1/user/{gone}"))
        .send()
        .await
        .expect(204);
    let tenant = format!("/v1/internal/tenant/{}", f.tenant_sid);
    s.su(Method::DELETE, &tenant).send().await.expect(204);
    s.su(Method::POST, &format!("{tenant}/restore"))
        .send()
        .await
        .expect(200);
    let l = s
        .get("/v1/user?show_deleted=true")
        .bearer(&f.admin_session)
        .send()
        .await;
    l.expect(200);
    let gone_row = l.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["sid"] == gone.as_str())
        .unwrap()
        .clone();
    assert!(
        gone_row["deleted_at"].is_string(),
        "a user deleted before the tenant stays deleted"
    );
    let live = s.get("/v1/user").bearer(&f.admin_session).send().await;
    assert_eq!(live.sids(), vec![f.admin_user_sid.clone()]);
}

/// A purger that fails while `fail` is set and records the accounts it purged.
#[derive(Debug, Default)]
struct SwitchablePurger {
    fail: AtomicBool,
    purged: parking_lot::Mutex<Vec<(String, String)>>,
}

#[async_trait::async_trait]
impl TenantPurger for SwitchablePurger {
    fn name(&self) -> &str {
        "test-classifiers"
    }
    async fn purge_account(&self, tenant_sid: &str, account_sid: &str) -> anyhow::Result<()> {
        if self.fail.load(Ordering::SeqCst) {
            anyhow::bail!("classifier service unreachable");
        }
        self.purged
            .lock()
            .push((tenant_sid.to_string(), account_sid.to_string()));
        Ok(())
    }
}

async fn hard_delete_aborts_on_failed_purge_then_purges(s: TestServer) {
    let purger = Arc::new(SwitchablePurger {
        fail: AtomicBool::new(true),
        ..Default::default()
    });
    s.register_purger(purger.clone());
    let f = s.fixture().await;
    let other = s.fixture_named("other").await;
    let trunk = s
        .su(Method::POST, "/v1/internal/trunk")
        .header("X-Tenant-Sid", &f.tenant_sid)
        .json(&json!({"name": "edge"}))
        .send()
        .await;
    trunk.expect(201);
    let trunk = trunk.str("sid");
    let tenant = format!("/v1/internal/tenant/{}", f.tenant_sid);

    s.su(Method::DELETE, &format!("{tenant}?hard=true"))
        .send()
        .await
        .expect_error(500, "purge_failed");
    // Nothing was removed.
    let t = s.su(Method::GET, &tenant).send().await;
    t.expect(200);
    assert!(t.body["deleted_at"].is_null());
    s.su(
        Method::GET,
        &format!("/v1/internal/account/{}", f.account_sid),
    )
    .send()
    .await
    .expect(200);
    s.su(Method::GET, &format!("/v1/internal/trunk/{trunk}"))
        .send()
        .await
        .expect(200);
    s.get("/v1/profile")
        .bearer(&f.admin_session)
        .send()
        .await
        .expect(200);
    s.get("/v1/user")
        .bearer(&f.account_key)
        .send()
        .await
        .expect(200);
    s.login(&f.admin_email, &f.admin_password).await;

    // Retry once the purge can succeed: the subtree is gone, other tenants are not.
    purger.fail.store(false, Ordering::SeqCst);
    s.su(Method::DELETE, &format!("{tenant}?hard=true"))
        .send()
        .await
        .expect(204);
    assert_eq!(
        purger.purged.lock().clone(),
        vec![(f.tenant_sid.clone(), f.account_sid.clone())]
    );
    s.su(Method::GET, &tenant)
        .send()
        .await
        .expect_error(404, "tenant_not_found");
    s.su(
        Method::GET,
        &format!("/v1/internal/account/{}", f.account_sid),
    )
    .send()
    .await
    .expect_error(404, "account_not_found");
    s.su(Method::GET, &format!("/v1/internal/trunk/{trunk}"))
        .send()
        .await
        .expect_error(404, "trunk_not_found");
    s.su(Method::GET, &format!("/v1/user/{}", f.admin_user_sid))
        .send()
        .await
        .expect_error(404, "user_not_found");
    s.get("/v1/user")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.su(Method::DELETE, &format!("{tenant}?hard=true"))
        .send()
        .await
        .expect_error(404, "tenant_not_found");
    // The purged user's email is free again.
    s.create_user(
        &other.account_sid,
        &f.admin_email,
        "password-2",
        &["member"],
    )
    .await;
    s.get("/v1/profile")
        .bearer(&other.admin_session)
        .send()
        .await
        .expect(200);
}

async fn hard_delete_of_soft_deleted_tenant(s: TestServer) {
    let f = s.fixture().await;
    let tenant = format!("/v1/internal/tenant/{}", f.tenant_sid);
    s.su(Method::DELETE, &tenant).send().await.expect(204);
    s.su(Method::DELETE, &format!("{tenant}?hard=true"))
        .send()
        .await
        .expect(204);
    s.su(Method::GET, &tenant)
        .send()
        .await
        .expect_error(404, "tenant_not_found");
    s.su(Method::DELETE, &format!("{tenant}?hard=maybe"))
        .send()
        .await
        .expect_error(400, "invalid_query");
}

async fn accounts_admin_view(s: TestServer) {
    let f = s.fixture().await;
    let r = s
        .post("/v1/internal/account")
        .bearer(&f.tenant_key)
        .json(&json!({"name": "Second", "email": "Second@Example.test", "country": "FR", "region": "eu", "timezone": "Europe/Paris", "phone": "+331"}))
        .send()
        .await;
    r.expect(201);
    let sid = r.str("sid");
    assert!(sid.starts_with("acc_"));
    assert_eq!(r.body["tenant_sid"], f.tenant_sid.as_str());
    assert_eq!(r.body["country"], "fr");
    assert_eq!(r.body["email"], "second@example.test");
    assert_eq!(r.body["status"], "active");
    assert_eq!(r.body["external_id"], "");
    assert!(r.body["deleted_at"].is_null());

    let base = json!({"name": "n", "email": "e@example.test"});
    let with = |k: &str, v: serde_json::Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    let post = |b: serde_json::Value| {
        s.post("/v1/internal/account")
            .bearer(&f.tenant_key)
            .json(&b)
    };
    post(with("country", json!("xx")))
        .send()
        .await
        .expect_error(400, "unknown_country");
    post(with("region", json!("mars")))
        .send()
        .await
        .expect_error(400, "unknown_region");
    post(with("timezone", json!("Mars/Base")))
        .send()
        .await
        .expect_error(422, "invalid_timezone");
    post(with("status", json!("sleeping")))
        .send()
        .await
        .expect_error(400, "invalid_body");
    post(with("surprise", json!(1)))
        .send()
        .await
        .expect_error(400, "invalid_body");
    post(json!({"email": "e@example.test"}))
        .send()
        .await
        .expect_error(400, "invalid_body");

    let p = s
        .patch(&format!("/v1/internal/account/{sid}"))
        .bearer(&f.tenant_key)
        .json(&json!({"name": "Renamed", "status": "inactive"}))
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["name"], "Renamed");
    assert_eq!(p.body["status"], "inactive");
    assert_eq!(p.body["country"], "fr", "omitted fields keep their value");
    s.patch("/v1/internal/account/acc_doesnotexist")
        .bearer(&f.tenant_key)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .expect_error(404, "account_not_found");
    s.get("/v1/internal/account/acc_doesnotexist")
        .bearer(&f.tenant_key)
        .send()
        .await
        .expect_error(404, "account_not_found");

    // An inactive account's users and keys cannot authenticate.
    s.patch(&format!("/v1/internal/account/{}", f.account_sid))
        .bearer(&f.tenant_key)
        .json(&json!({"status": "inactive"}))
        .send()
        .await
        .expect(200);
    s.get("/v1/profile")
        .bearer(&f.admin_session)
        .send()
        .await
        .expect_error(401, "unauthenticated");
    s.get("/v1/user")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(401, "unauthenticated");
}

async fn paging_bounds_and_order(s: TestServer) {
    let f = s.fixture().await;
    let mut sids = vec![f.account_sid.clone()];
    for i in 0..4 {
        sids.push(
            s.create_account(
                &f.tenant_sid,
                json!({"name": format!("acc {i}"), "email": format!("a{i}@example.test")}),
            )
            .await,
        );
    }
    let list = |q: &str| {
        s.get(&format!("/v1/internal/account{q}"))
            .bearer(&f.tenant_key)
            .send()
    };
    let all = list("").await;
    all.expect(200);
    assert_eq!(all.sids(), sids, "oldest first");
    assert_eq!(all.body["total"], 5);
    let page = list("?limit=2&offset=2").await;
    page.expect(200);
    assert_eq!(page.sids(), sids[2..4].to_vec());
    assert_eq!(page.body["limit"], 2);
    assert_eq!(page.body["offset"], 2);
    assert_eq!(page.body["has_more"], true);
    let last = list("?limit=2&offset=4").await;
    assert_eq!(last.sids(), sids[4..].to_vec());
    assert_eq!(last.body["has_more"], false);
    let beyond = list("?offset=10").await;
    beyond.expect(200);
    assert_eq!(beyond.body["items"], json!([]));
    assert_eq!(beyond.body["total"], 5);
    let max = list("?limit=500").await;
    max.expect(200);
    assert_eq!(max.body["limit"], 500);
    list("?limit=501").await.expect_error(400, "invalid_query");
    list("?limit=-1").await.expect_error(400, "invalid_query");
    list("?offset=-1").await.expect_error(400, "invalid_query");
    list("?limit=ten").await.expect_error(400, "invalid_query");
    let unknown = list("?colour=red").await;
    unknown.expect_error(400, "invalid_query");
    assert!(
        unknown.body["message"].as_str().unwrap().contains("colour"),
        "the message names the parameter: {}",
        unknown.text
    );
    // The same bounds hold on the other lists.
    s.get("/v1/user?limit=501")
        .bearer(&f.admin_session)
        .send()
        .await
        .expect_error(400, "invalid_query");
    s.get("/v1/internal/trunk?limit=501")
        .bearer(&f.tenant_key)
        .send()
        .await
        .expect_error(400, "invalid_query");
    s.su(Method::GET, "/v1/internal/tenant?limit=-5")
        .send()
        .await
        .expect_error(400, "invalid_query");
    s.su(
        Method::GET,
        &format!("/v1/internal/tenant/{}/api-key?limit=501", f.tenant_sid),
    )
    .send()
    .await
    .expect_error(400, "invalid_query");
}

async fn trunks(s: TestServer) {
    let f = s.fixture().await;
    let other = s.fixture_named("other").await;
    let create = |tk: &str, name: &str| {
        s.post("/v1/internal/trunk")
            .bearer(tk)
            .json(&json!({"name": name}))
            .send()
    };
    let t1 = create(&f.tenant_key, "edge-1").await;
    t1.expect(201);
    assert!(t1.str("sid").starts_with("trk_"));
    assert_eq!(t1.body["tenant_sid"], f.tenant_sid.as_str());
    assert!(t1.body["deleted_at"].is_null());
    create(&f.tenant_key, "edge-1")
        .await
        .expect_error(422, "name_taken");
    create(&other.tenant_key, "edge-1").await.expect(201);
    create(&f.tenant_key, "bad name!")
        .await
        .expect_error(422, "invalid_name");
    create(&f.tenant_key, "")
        .await
        .expect_error(422, "invalid_name");
    let t2 = create(&f.tenant_key, "edge-2").await;
    let t0 = s
        .su(Method::POST, "/v1/internal/trunk")
        .header("X-Tenant-Sid", &f.tenant_sid)
        .json(&json!({"name": "edge-0"}))
        .send()
        .await;
    t0.expect(201);
    let l = s
        .get("/v1/internal/trunk")
        .bearer(&f.tenant_key)
        .send()
        .await;
    assert_eq!(
        l.sids(),
        vec![t1.str("sid"), t2.str("sid"), t0.str("sid")],
        "sorted by created_at ascending"
    );

    let one = s
        .get(&format!("/v1/internal/trunk/{}", t1.str("sid")))
        .bearer(&f.tenant_key)
        .send()
        .await;
    one.expect(200);
    assert_eq!(one.body, t1.body);
    s.get("/v1/internal/trunk/trk_doesnotexist")
        .bearer(&f.tenant_key)
        .send()
        .await
        .expect_error(404, "trunk_not_found");

    s.delete(&format!("/v1/internal/trunk/{}", t1.str("sid")))
        .bearer(&f.tenant_key)
        .send()
        .await
        .expect(204);
    let l = s
        .get("/v1/internal/trunk")
        .bearer(&f.tenant_key)
        .send()
        .await;
    assert_eq!(l.sids(), vec![t2.str("sid"), t0.str("sid")]);
    let l = s
        .get("/v1/internal/trunk?show_deleted=true")
        .bearer(&f.tenant_key)
        .send()
        .await;
    assert_eq!(l.body["total"], 3);
    assert!(l.body["items"][0]["deleted_at"].is_string());
    // The name of a deleted trunk is free again.
    create(&f.tenant_key, "edge-1").await.expect(201);
}

async fn feature_flag_rules_and_evaluation(s: TestServer) {
    let f = s.fixture().await; // account a: country de, region eu
    let b_acc = s
        .create_account(
            &f.tenant_sid,
            json!({"name": "B", "email": "b@example.test", "country": "us", "region": "na"}),
        )
        .await;
    s.create_user(&b_acc, "buser@example.test", "password-b", &["member"])
        .await;
    let b_session = s.login("buser@example.test", "password-b").await;
    let flags = |token: &str| {
        let token = token.to_string();
        let s = &s;
        async move {
            let r = s.get("/v1/profile").bearer(&token).send().await;
            r.expect(200);
            r.body["feature_flags"].clone()
        }
    };
    assert_eq!(
        flags(&f.admin_session).await,
        json!({"global_llm": false, "global_stt": false, "global_tts": false})
    );

    let rule = format!(
        "/v1/internal/tenant/{}/feature-flag/global_llm",
        f.tenant_sid
    );
    let patch = |body: serde_json::Value| s.su(Method::PATCH, &rule).json(&body).send();
    let r = patch(json!({"enabled": true})).await;
    r.expect(200);
    assert_eq!(
        r.body,
        json!({"name": "global_llm", "account_sids": [], "countries": [], "regions": [], "enabled": true, "invert": false})
    );
    assert_eq!(
        flags(&f.admin_session).await["global_llm"],
        true,
        "no scope: on wherever enabled"
    );
    assert_eq!(flags(&b_session).await["global_llm"], true);

    patch(json!({"countries": ["us"]})).await.expect(200);
    assert_eq!(flags(&f.admin_session).await["global_llm"], false);
    assert_eq!(flags(&b_session).await["global_llm"], true);
    let r = patch(json!({"invert": true})).await;
    assert_eq!(
        r.body["countries"],
        json!(["us"]),
        "omitted fields keep their value"
    );
    assert_eq!(
        flags(&f.admin_session).await["global_llm"],
        true,
        "blacklist: no match enables"
    );
    assert_eq!(
        flags(&b_session).await["global_llm"],
        false,
        "blacklist: a match disables"
    );

    patch(json!({"countries": [], "regions": ["eu"], "invert": false}))
        .await
        .expect(200);
    assert_eq!(flags(&f.admin_session).await["global_llm"], true);
    assert_eq!(flags(&b_session).await["global_llm"], false);

    for bad in ["", " ", "acc_", "ten_01a2", "usr_01a2"] {
        let r = patch(json!({"account_sids": [b_acc, bad]})).await;
        r.expect_error(400, "invalid_body");
        assert!(
            r.body["message"]
                .as_str()
                .is_some_and(|m| m.contains("not an account sid")),
            "{bad:?}: {}",
            r.body
        );
    }
    let r = patch(json!({"regions": [], "account_sids": [b_acc]})).await;
    assert_eq!(
        r.body["regions"],
        json!([]),
        "an empty array clears the axis"
    );
    assert_eq!(flags(&f.admin_session).await["global_llm"], false);
    assert_eq!(flags(&b_session).await["global_llm"], true);

    patch(json!({"enabled": false})).await.expect(200);
    assert_eq!(
        flags(&b_session).await["global_llm"],
        false,
        "the master switch wins"
    );
    assert_eq!(flags(&b_session).await["global_stt"], false);

    // Reading rules: every declared flag, defaults for unconfigured ones.
    let all = s
        .get(&format!(
            "/v1/internal/tenant/{}/feature-flag",
            f.tenant_sid
        ))
        .bearer(&f.tenant_key)
        .send()
        .await;
    all.expect(200);
    assert_eq!(all.body["total"], 3);
    let names: Vec<_> = all.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["global_llm", "global_stt", "global_tts"]);
    assert_eq!(all.body["items"][0]["account_sids"], json!([b_acc]));
    let one = s
        .get(&format!(
            "/v1/internal/tenant/{}/feature-flag/global_tts",
            f.tenant_sid
        ))
        .bearer(&f.tenant_key)
        .send()
        .await;
    one.expect(200);
    assert_eq!(one.body["enabled"], false);

    // Validation.
    s.su(
        Method::PATCH,
        &format!(
            "/v1/internal/tenant/{}/feature-flag/global_magic",
            f.tenant_sid
        ),
    )
    .json(&json!({"enabled": true}))
    .send()
    .await
    .expect_error(400, "unknown_flag");
    s.get(&format!(
        "/v1/internal/tenant/{}/feature-flag/global_magic",
        f.tenant_sid
    ))
    .bearer(&f.tenant_key)
    .send()
    .await
    .expect_error(400, "unknown_flag");
    patch(json!({"countries": ["xx"]}))
        .await
        .expect_error(400, "unknown_country");
    patch(json!({"countries": ["DE"]}))
        .await
        .expect_error(400, "unknown_country");
    patch(json!({"regions": ["mars"]}))
        .await
        .expect_error(400, "unknown_region");
    patch(json!({"enabled": "yes"}))
        .await
        .expect_error(400, "invalid_body");
    patch(json!({"scope": []}))
        .await
        .expect_error(400, "invalid_body");
    s.su(
        Method::PATCH,
        "/v1/internal/tenant/ten_doesnotexist/feature-flag/global_llm",
    )
    .json(&json!({}))
    .send()
    .await
    .expect_error(404, "tenant_not_found");
    // Rules of one tenant do not leak into another.
    let other = s.fixture_named("other").await;
    s.su(
        Method::PATCH,
        &format!(
            "/v1/internal/tenant/{}/feature-flag/global_stt",
            other.tenant_sid
        ),
    )
    .json(&json!({"enabled": true}))
    .send()
    .await
    .expect(200);
    assert_eq!(flags(&other.admin_session).await["global_stt"], true);
    assert_eq!(flags(&f.admin_session).await["global_stt"], false);
}

/// The rule list pages like every list: the same envelope, bounds and errors.
async fn feature_flag_list_pages(s: TestServer) {
    let f = s.fixture().await;
    let list = |q: &str| {
        s.get(&format!(
            "/v1/internal/tenant/{}/feature-flag{q}",
            f.tenant_sid
        ))
        .bearer(&f.tenant_key)
        .send()
    };
    let names = |r: &callsmith_control::testing::TestResponse| -> Vec<String> {
        r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap().to_string())
            .collect()
    };
    let all = list("").await;
    all.expect(200);
    assert_eq!(names(&all), ["global_llm", "global_stt", "global_tts"]);
    assert_eq!(
        (
            &all.body["total"],
            &all.body["limit"],
            &all.body["offset"],
            &all.body["has_more"]
        ),
        (&json!(3), &json!(100), &json!(0), &json!(false))
    );
    let page = list("?limit=1&offset=1").await;
    page.expect(200);
    assert_eq!(names(&page), ["global_stt"]);
    assert_eq!(
        (
            &page.body["total"],
            &page.body["limit"],
            &page.body["offset"],
            &page.body["has_more"]
        ),
        (&json!(3), &json!(1), &json!(1), &json!(true))
    );
    let last = list("?limit=2&offset=2").await;
    assert_eq!(names(&last), ["global_tts"]);
    assert_eq!(last.body["has_more"], false);
    let count_only = list("?limit=0").await;
    count_only.expect(200);
    assert_eq!(count_only.body["items"], json!([]));
    assert_eq!(count_only.body["total"], 3);
    assert_eq!(count_only.body["has_more"], true);
    let beyond = list("?offset=10").await;
    beyond.expect(200);
    assert_eq!(beyond.body["items"], json!([]));
    assert_eq!(beyond.body["total"], 3);
    assert_eq!(list("?limit=500").await.body["limit"], 500);
    for q in [
        "?limit=501",
        "?limit=-1",
        "?offset=-1",
        "?limit=ten",
        "?colour=red",
    ] {
        list(q).await.expect_error(400, "invalid_query");
    }
}

both_backends!(
    tenant_create_get_list,
    tenant_soft_delete_cascades_and_restores,
    restore_keeps_individually_deleted_users_deleted,
    hard_delete_aborts_on_failed_purge_then_purges,
    hard_delete_of_soft_deleted_tenant,
    accounts_admin_view,
    paging_bounds_and_order,
    trunks,
    feature_flag_rules_and_evaluation,
    feature_flag_list_pages,
);
