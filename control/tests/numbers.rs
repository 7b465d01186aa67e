//! Numbers and number pools over real HTTP, on SQLite and PostgreSQL: CRUD, every
//! filter/search/order/include of GET /v1/number, validation, account isolation.

use callsmith_control::{
    both_backends,
    testing::{TestResponse, TestServer},
};
use reqwest::Method;
use serde_json::{Value, json};

fn ids(r: &TestResponse) -> Vec<String> {
    r.body["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

async fn create(s: &TestServer, token: &str, path: &str, body: Value) -> Value {
    let r = s.post(path).bearer(token).json(&body).send().await;
    r.expect(201);
    r.body.clone()
}

async fn number_crud_and_validation(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let pool = create(&s, tok, "/v1/number-pool", json!({"name": "Sales"})).await;
    let pool_id = pool["id"].as_str().unwrap().to_string();
    assert!(pool_id.starts_with("npl_"));
    assert_eq!(pool["status"], "active");
    assert_eq!(pool["account_sid"], f.account_sid.as_str());

    // A trunk of the tenant, referenced by name.
    let t = s
        .su(Method::POST, "/v1/internal/trunk")
        .header("X-Tenant-Sid", &f.tenant_sid)
        .json(&json!({"name": "edge-1"}))
        .send()
        .await;
    t.expect(201);

    let n = create(
        &s,
        tok,
        "/v1/number",
        json!({"identifier": "+4930123456", "name": "Berlin", "pool_sid": pool_id, "trunk": "edge-1"}),
    )
    .await;
    let id = n["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("num_"));
    for k in [
        "id",
        "account_sid",
        "identifier",
        "name",
        "pool_sid",
        "trunk",
        "status",
        "created_at",
        "updated_at",
    ] {
        assert!(n.get(k).is_some(), "number lacks {k}: {n}");
    }
    assert_eq!(n["identifier"], "+4930123456");
    assert_eq!(n["pool_sid"], pool_id.as_str());
    assert_eq!(n["trunk"], "edge-1");
    assert_eq!(n["status"], "active");

    let g = s.get(&format!("/v1/number/{id}")).bearer(tok).send().await;
    g.expect(200);
    assert_eq!(g.body, n);

    // Nullable fields present as null.
    let bare = create(&s, tok, "/v1/number", json!({"identifier": "100"})).await;
    assert!(
        bare["pool_sid"].is_null() && bare["trunk"].is_null(),
        "{bare}"
    );
    assert_eq!(bare["name"], "");

    // Validation.
    for (body, err) in [
        (json!({"identifier": "12a"}), "invalid_identifier"),
        (json!({"identifier": ""}), "invalid_identifier"),
        (json!({"identifier": "+"}), "invalid_identifier"),
        (json!({"identifier": "+4930123456"}), "identifier_taken"),
        (
            json!({"identifier": "200", "pool_sid": "npl_nope"}),
            "unknown_pool",
        ),
        (
            json!({"identifier": "201", "trunk": "no-such-trunk"}),
            "unknown_trunk",
        ),
    ] {
        s.post("/v1/number")
            .bearer(tok)
            .json(&body)
            .send()
            .await
            .expect_error(422, err);
    }
    s.post("/v1/number")
        .bearer(tok)
        .json(&json!({"identifier": "1", "color": "red"}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    s.post("/v1/number")
        .bearer(tok)
        .json(&json!({"identifier": "1", "status": "paused"}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    s.post("/v1/number")
        .json(&json!({"identifier": "1"}))
        .send()
        .await
        .expect_error(401, "unauthenticated");

    // Patch: change fields, clear pool and trunk with null, keep omitted ones.
    let p = s
        .patch(&format!("/v1/number/{id}"))
        .bearer(tok)
        .json(
            &json!({"name": "Berlin main", "status": "inactive", "pool_sid": null, "trunk": null}),
        )
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["name"], "Berlin main");
    assert_eq!(p.body["status"], "inactive");
    assert!(p.body["pool_sid"].is_null() && p.body["trunk"].is_null());
    assert_eq!(p.body["identifier"], "+4930123456");
    s.patch(&format!("/v1/number/{id}"))
        .bearer(tok)
        .json(&json!({"identifier": "100"}))
        .send()
        .await
        .expect_error(422, "identifier_taken");
    s.patch(&format!("/v1/number/{id}"))
        .bearer(tok)
        .json(&json!({"pool_sid": "npl_x"}))
        .send()
        .await
        .expect_error(422, "unknown_pool");
    s.patch("/v1/number/num_missing")
        .bearer(tok)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .expect_error(404, "number_not_found");

    // A viewer may read but not write.
    s.create_user(
        &f.account_sid,
        "viewer@example.test",
        "viewer-password",
        &["viewer"],
    )
    .await;
    let viewer = s.login("viewer@example.test", "viewer-password").await;
    s.get(&format!("/v1/number/{id}"))
        .bearer(&viewer)
        .send()
        .await
        .expect(200);
    s.post("/v1/number")
        .bearer(&viewer)
        .json(&json!({"identifier": "300"}))
        .send()
        .await
        .expect_error(403, "forbidden");

    s.delete(&format!("/v1/number/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect(204);
    s.get(&format!("/v1/number/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect_error(404, "number_not_found");
    s.delete(&format!("/v1/number/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect_error(404, "number_not_found");
}

async fn number_list_filters_search_order_include(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let sales = create(&s, tok, "/v1/number-pool", json!({"name": "Sales"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let support = create(&s, tok, "/v1/number-pool", json!({"name": "Support"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let a = create(
        &s,
        tok,
        "/v1/number",
        json!({"identifier": "+491111", "name": "Alpha Line", "pool_sid": sales}),
    )
    .await;
    let b = create(&s, tok, "/v1/number", json!({"identifier": "+492222", "name": "bravo", "pool_sid": support, "status": "inactive"})).await;
    let c = create(
        &s,
        tok,
        "/v1/number",
        json!({"identifier": "+333111", "name": "Charlie"}),
    )
    .await;
    let (a, b, c) = (
        a["id"].as_str().unwrap().to_string(),
        b["id"].as_str().unwrap().to_string(),
        c["id"].as_str().unwrap().to_string(),
    );

    let list = |q: &str| s.get(&format!("/v1/number{q}")).bearer(tok).send();
    // Default order: created_at desc.
    let r = list("").await;
    r.expect(200);
    assert_eq!(ids(&r), vec![c.clone(), b.clone(), a.clone()]);
    assert_eq!(r.body["total"], 3);
    assert_eq!(r.body["limit"], 100);
    assert!(
        r.body.get("included").is_none(),
        "no include, no included: {}",
        r.text
    );
    assert_eq!(
        ids(&list("?order=asc").await),
        vec![a.clone(), b.clone(), c.clone()]
    );
    // order_by name: "Alpha Line" < "Charlie" < "bravo" (byte order, both backends use C collation for these).
    let by_name = ids(&list("?order_by=name&order=asc").await);
    assert_eq!(by_name.len(), 3);
    assert_eq!(by_name[0], a);
    assert_eq!(
        ids(&list("?order_by=identifier&order=asc").await),
        vec![c.clone(), a.clone(), b.clone()]
    );
    assert_eq!(
        ids(&list("?order_by=identifier&order=desc").await),
        vec![b.clone(), a.clone(), c.clone()]
    );

    // Filters.
    assert_eq!(ids(&list("?status=inactive").await), vec![b.clone()]);
    assert_eq!(
        ids(&list("?status=active&order=asc").await),
        vec![a.clone(), c.clone()]
    );
    assert_eq!(ids(&list("?identifier=%2B492222").await), vec![b.clone()]);
    assert_eq!(
        ids(&list(&format!("?pool_sid={sales}")).await),
        vec![a.clone()]
    );
    assert_eq!(
        ids(&list(&format!("?account_sid={}&order=asc", f.account_sid)).await),
        vec![a.clone(), b.clone(), c.clone()]
    );

    // OR search, substring, case-insensitive.
    assert_eq!(
        ids(&list("?filter_or=name&filter_query=ALPHA").await),
        vec![a.clone()]
    );
    assert_eq!(
        ids(&list("?filter_or=identifier&filter_query=111&order=asc").await),
        vec![a.clone(), c.clone()]
    );
    assert_eq!(
        ids(&list("?filter_or=identifier,name&filter_query=bra").await),
        vec![b.clone()]
    );
    assert_eq!(
        ids(&list("?filter_or=name,identifier&filter_query=333").await),
        vec![c.clone()]
    );
    assert_eq!(
        ids(&list("?filter_or=name&filter_query=333").await),
        Vec::<String>::new()
    );
    // LIKE wildcards in the term are literal.
    assert_eq!(
        ids(&list("?filter_or=name&filter_query=%25").await),
        Vec::<String>::new()
    );
    // Search combines with filters (AND).
    assert_eq!(
        ids(&list(&format!(
            "?filter_or=identifier&filter_query=111&status=active&pool_sid={sales}"
        ))
        .await),
        vec![a.clone()]
    );

    // Paging.
    let p = list("?limit=2&offset=0").await;
    assert_eq!(ids(&p).len(), 2);
    assert_eq!(p.body["has_more"], true);
    assert_eq!(p.body["total"], 3);
    let p = list("?limit=2&offset=2").await;
    assert_eq!(ids(&p), vec![a.clone()]);
    assert_eq!(p.body["has_more"], false);

    // include=pool.
    let r = list("?include=pool&order=asc").await;
    r.expect(200);
    let pools = r.body["included"]["pools"]
        .as_object()
        .expect("included.pools");
    assert_eq!(pools.len(), 2);
    assert_eq!(pools[&sales]["name"], "Sales");
    assert_eq!(pools[&sales]["id"], sales.as_str());
    assert_eq!(pools[&support]["status"], "active");
    for k in [
        "id",
        "account_sid",
        "name",
        "status",
        "created_at",
        "updated_at",
    ] {
        assert!(pools[&sales].get(k).is_some(), "pool lacks {k}");
    }
    // Requested but nothing resolves: present and empty.
    let r = list("?include=pool&pool_sid=npl_none").await;
    assert_eq!(r.body["included"]["pools"], json!({}));
    let r = list("?include=pool&filter_or=name&filter_query=charlie").await;
    assert_eq!(ids(&r), vec![c.clone()]);
    assert_eq!(r.body["included"]["pools"], json!({}));

    // Errors.
    list("?include=pools")
        .await
        .expect_error(400, "invalid_include");
    list("?include=pool,agent")
        .await
        .expect_error(400, "invalid_include");
    list("?filter_or=status&filter_query=x")
        .await
        .expect_error(400, "invalid_query");
    list("?order_by=status")
        .await
        .expect_error(400, "invalid_query");
    list("?order=up").await.expect_error(400, "invalid_query");
    list("?status=paused")
        .await
        .expect_error(400, "invalid_query");
    list("?limit=501").await.expect_error(400, "invalid_query");
    list("?colour=red").await.expect_error(400, "invalid_query");
    s.get("/v1/number")
        .send()
        .await
        .expect_error(401, "unauthenticated");
}

async fn number_account_isolation(s: TestServer) {
    let fa = s.fixture_named("a").await;
    let fb = s.fixture_named("b").await;
    let pool_b = create(
        &s,
        &fb.admin_session,
        "/v1/number-pool",
        json!({"name": "B pool"}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let nb = create(
        &s,
        &fb.admin_session,
        "/v1/number",
        json!({"identifier": "555", "pool_sid": pool_b}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The identifier is unique per account: A may hold B's identifier too (inactive, as
    // B's is active: a number is active in one account at a time).
    let na = create(
        &s,
        &fa.admin_session,
        "/v1/number",
        json!({"identifier": "555", "status": "inactive"}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Another account's sids read as absent.
    for path in [
        format!("/v1/number/{nb}"),
        format!("/v1/number-pool/{pool_b}"),
    ] {
        let r = s.get(&path).bearer(&fa.admin_session).send().await;
        r.expect(404);
        let r = s.get(&path).bearer(&fa.account_key).send().await;
        r.expect(404);
        s.delete(&path)
            .bearer(&fa.admin_session)
            .send()
            .await
            .expect(404);
    }
    s.patch(&format!("/v1/number/{nb}"))
        .bearer(&fa.admin_session)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .expect_error(404, "number_not_found");
    // A's number can't join B's pool.
    s.patch(&format!("/v1/number/{na}"))
        .bearer(&fa.admin_session)
        .json(&json!({"pool_sid": pool_b}))
        .send()
        .await
        .expect_error(422, "unknown_pool");

    // Lists never show the other account's rows.
    let r = s.get("/v1/number").bearer(&fa.admin_session).send().await;
    assert_eq!(ids(&r), vec![na.clone()]);
    let r = s
        .get(&format!("/v1/number?account_sid={}", fb.account_sid))
        .bearer(&fa.admin_session)
        .send()
        .await;
    r.expect(200);
    assert_eq!(ids(&r), Vec::<String>::new());
    let r = s
        .get("/v1/number-pool")
        .bearer(&fa.account_key)
        .send()
        .await;
    assert_eq!(r.body["total"], 0);

    // Tenant key: declares the account with the header or the account_sid filter; never another tenant's.
    let r = s
        .get("/v1/number")
        .bearer(&fa.tenant_key)
        .header("X-Account-Sid", &fa.account_sid)
        .send()
        .await;
    assert_eq!(ids(&r), vec![na.clone()]);
    let r = s
        .get(&format!("/v1/number?account_sid={}", fa.account_sid))
        .bearer(&fa.tenant_key)
        .send()
        .await;
    assert_eq!(ids(&r), vec![na.clone()]);
    s.get("/v1/number")
        .bearer(&fa.tenant_key)
        .send()
        .await
        .expect_error(400, "account_required");
    s.get(&format!("/v1/number?account_sid={}", fb.account_sid))
        .bearer(&fa.tenant_key)
        .send()
        .await
        .expect_error(403, "scope_conflict");
    s.get("/v1/number")
        .bearer(&fa.tenant_key)
        .header("X-Account-Sid", &fb.account_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");
    s.get(&format!("/v1/number/{nb}"))
        .bearer(&fa.tenant_key)
        .send()
        .await
        .expect(404);
    // Superuser sees both, by declaring the account.
    let r = s
        .su(Method::GET, "/v1/number")
        .header("X-Account-Sid", &fb.account_sid)
        .send()
        .await;
    assert_eq!(ids(&r), vec![nb.clone()]);
    // X-Account-Sid of an account user must be its own.
    s.get("/v1/number")
        .bearer(&fa.admin_session)
        .header("X-Account-Sid", &fb.account_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");
    // The superuser declaring account A does not see B's number by id.
    s.su(Method::GET, &format!("/v1/number/{nb}"))
        .header("X-Account-Sid", &fa.account_sid)
        .send()
        .await
        .expect(404);
}

async fn pool_crud(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let p = create(
        &s,
        tok,
        "/v1/number-pool",
        json!({"name": "Outbound", "status": "inactive"}),
    )
    .await;
    let id = p["id"].as_str().unwrap().to_string();
    assert_eq!(p["status"], "inactive");
    s.post("/v1/number-pool")
        .bearer(tok)
        .json(&json!({"name": "Outbound"}))
        .send()
        .await
        .expect_error(422, "name_taken");
    s.post("/v1/number-pool")
        .bearer(tok)
        .json(&json!({"name": "  "}))
        .send()
        .await
        .expect_error(422, "invalid_name");
    s.post("/v1/number-pool")
        .bearer(tok)
        .json(&json!({}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    let other = create(&s, tok, "/v1/number-pool", json!({"name": "Other"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    s.patch(&format!("/v1/number-pool/{other}"))
        .bearer(tok)
        .json(&json!({"name": "Outbound"}))
        .send()
        .await
        .expect_error(422, "name_taken");
    let r = s
        .patch(&format!("/v1/number-pool/{id}"))
        .bearer(tok)
        .json(&json!({"status": "active"}))
        .send()
        .await;
    r.expect(200);
    assert_eq!(r.body["status"], "active");
    assert_eq!(r.body["name"], "Outbound");
    let r = s
        .get("/v1/number-pool?status=active")
        .bearer(tok)
        .send()
        .await;
    assert_eq!(ids(&r), vec![other.clone(), id.clone()]);
    s.get("/v1/number-pool?limit=501")
        .bearer(tok)
        .send()
        .await
        .expect_error(400, "invalid_query");

    // Deleting a pool keeps its numbers, out of the pool.
    let n = create(
        &s,
        tok,
        "/v1/number",
        json!({"identifier": "42", "pool_sid": id}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    s.delete(&format!("/v1/number-pool/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect(204);
    s.get(&format!("/v1/number-pool/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect_error(404, "number_pool_not_found");
    let r = s.get(&format!("/v1/number/{n}")).bearer(tok).send().await;
    r.expect(200);
    assert!(r.body["pool_sid"].is_null(), "{}", r.text);
}

/// POST /v1/number as the superuser in `account`.
async fn su_create(s: &TestServer, account: &str, body: Value) -> TestResponse {
    s.su(Method::POST, "/v1/number")
        .header("X-Account-Sid", account)
        .json(&body)
        .send()
        .await
}

/// A 409 `identifier_active` that names none of `secrets` (whose the number is).
fn refused_as_active(r: &TestResponse, secrets: &[&str]) {
    r.expect_error(409, "identifier_active");
    assert_eq!(r.body["data"]["topic"], "conflict", "{}", r.text);
    for secret in secrets {
        assert!(
            !r.text.contains(secret),
            "the refusal names {secret}: {}",
            r.text
        );
    }
}

async fn an_active_number_belongs_to_one_account(s: TestServer) {
    let fa = s.fixture_named("a").await;
    let fb = s.fixture_named("b").await;
    let a2 = s
        .create_account(&fa.tenant_sid, json!({"name": "account a2", "email": "owner-a2@example.test", "country": "de", "region": "eu"}))
        .await;
    let na = create(
        &s,
        &fa.admin_session,
        "/v1/number",
        json!({"identifier": "+4930777001"}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let secrets = [fa.account_sid.as_str(), fa.tenant_sid.as_str(), na.as_str()];

    // Another tenant, in every spelling of the number, and another account of A's tenant:
    // refused while A's is active, and the refusal does not say whose it is.
    for identifier in ["+4930777001", "4930777001", "004930777001", " +4930777001 "] {
        let r = s
            .post("/v1/number")
            .bearer(&fb.admin_session)
            .json(&json!({"identifier": identifier}))
            .send()
            .await;
        refused_as_active(&r, &secrets);
    }
    refused_as_active(
        &su_create(&s, &a2, json!({"identifier": "+4930777001"})).await,
        &secrets,
    );
    // The same account: the same spelling is the per-account rule (422), another
    // spelling the one-active-number rule.
    s.post("/v1/number")
        .bearer(&fa.admin_session)
        .json(&json!({"identifier": "+4930777001"}))
        .send()
        .await
        .expect_error(422, "identifier_taken");
    refused_as_active(
        &s.post("/v1/number")
            .bearer(&fa.admin_session)
            .json(&json!({"identifier": "004930777001"}))
            .send()
            .await,
        &[],
    );

    // B may hold the number inactive, but not activate it, nor rename another active
    // number to it.
    let nb = create(
        &s,
        &fb.admin_session,
        "/v1/number",
        json!({"identifier": "+4930777001", "status": "inactive"}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s
        .patch(&format!("/v1/number/{nb}"))
        .bearer(&fb.admin_session)
        .json(&json!({"status": "active"}))
        .send()
        .await;
    refused_as_active(&r, &secrets);
    let other = create(
        &s,
        &fb.admin_session,
        "/v1/number",
        json!({"identifier": "+4930777002"}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s
        .patch(&format!("/v1/number/{other}"))
        .bearer(&fb.admin_session)
        .json(&json!({"identifier": "004930777001"}))
        .send()
        .await;
    refused_as_active(&r, &secrets);
    let r = s
        .get(&format!("/v1/number/{nb}"))
        .bearer(&fb.admin_session)
        .send()
        .await;
    assert_eq!(r.body["status"], "inactive", "{}", r.text);

    // Once A deactivates its number, B may take it; then A cannot take it back.
    s.patch(&format!("/v1/number/{na}"))
        .bearer(&fa.admin_session)
        .json(&json!({"status": "inactive"}))
        .send()
        .await
        .expect(200);
    let r = s
        .patch(&format!("/v1/number/{nb}"))
        .bearer(&fb.admin_session)
        .json(&json!({"status": "active"}))
        .send()
        .await;
    r.expect(200);
    assert_eq!(r.body["status"], "active");
    let r = s
        .patch(&format!("/v1/number/{na}"))
        .bearer(&fa.admin_session)
        .json(&json!({"status": "active"}))
        .send()
        .await;
    refused_as_active(
        &r,
        &[fb.account_sid.as_str(), fb.tenant_sid.as_str(), nb.as_str()],
    );
    // Other changes of the inactive number stay possible.
    s.patch(&format!("/v1/number/{na}"))
        .bearer(&fa.admin_session)
        .json(&json!({"name": "retired"}))
        .send()
        .await
        .expect(200);
}

async fn racing_creates_leave_one_active_number(s: TestServer) {
    let mut accounts = Vec::new();
    for t in 0..3 {
        let tenant = s.create_tenant(&format!("racer {t}")).await;
        for a in 0..3 {
            accounts.push(
                s.create_account(&tenant, json!({"name": format!("racer {t}.{a}"), "email": format!("racer-{t}-{a}@example.test"), "country": "de", "region": "eu"}))
                    .await,
            );
        }
    }
    let spellings = ["+4930888001", "4930888001", "004930888001"];
    let results = futures::future::join_all(
        accounts
            .iter()
            .enumerate()
            .map(|(i, a)| su_create(&s, a, json!({"identifier": spellings[i % spellings.len()]}))),
    )
    .await;
    let created: Vec<&TestResponse> = results.iter().filter(|r| r.status == 201).collect();
    assert_eq!(
        created.len(),
        1,
        "{:?}",
        results.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    for r in results.iter().filter(|r| r.status != 201) {
        refused_as_active(r, &[]);
    }
    let mut active = 0;
    for a in &accounts {
        let r = s
            .su(Method::GET, "/v1/number?status=active")
            .header("X-Account-Sid", a)
            .send()
            .await;
        r.expect(200);
        active += r.body["total"].as_i64().unwrap();
    }
    assert_eq!(active, 1);
}

both_backends!(
    number_crud_and_validation,
    number_list_filters_search_order_include,
    number_account_isolation,
    pool_crud,
    an_active_number_belongs_to_one_account,
    racing_creates_leave_one_active_number
);

#[test]
fn openapi_documents_the_409_of_an_active_number() {
    let doc = serde_json::to_value(callsmith_control::openapi()).unwrap();
    for (path, method) in [("/v1/number", "post"), ("/v1/number/{id}", "patch")] {
        let r = &doc["paths"][path][method]["responses"]["409"];
        assert_eq!(
            r["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody",
            "{method} {path}"
        );
        assert!(
            r["description"]
                .as_str()
                .is_some_and(|d| d.contains("identifier_active")),
            "{method} {path}: {r}"
        );
    }
}
