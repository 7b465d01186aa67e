//! Agents over real HTTP, on SQLite and PostgreSQL: every field, one test per 422 rule
//! (gateway, SMS, schedule, timezone, limits, targets), archive, isolation, and the
//! delete conflicts of numbers, pools, SMS providers and scenarios (>20 agents).

use callsmith_control::{
    both_backends,
    testing::{Fixture, TestServer},
};
use callsmith_domain::store;
use serde_json::{Value, json};

struct Setup {
    number: String,
    /// The number's identifier.
    identifier: String,
    pool: String,
    scenario: String,
    provider: String,
}

async fn made(s: &TestServer, tok: &str, path: &str, body: Value) -> String {
    let r = s.post(path).bearer(tok).json(&body).send().await;
    r.expect(201);
    r.str("id")
}

async fn setup(s: &TestServer, f: &Fixture) -> Setup {
    // A phone number of its own per setup: a number is active in one account at a time.
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let identifier = format!(
        "+4911{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let tok = &f.admin_session;
    let pool = made(s, tok, "/v1/number-pool", json!({"name": "P"})).await;
    let number = made(
        s,
        tok,
        "/v1/number",
        json!({"identifier": &identifier, "pool_sid": pool}),
    )
    .await;
    let scenario = made(s, tok, "/v1/scenario", json!({"name": "S"})).await;
    let provider = made(
        s,
        tok,
        "/v1/sms/provider",
        json!({"name": "SMS", "type": "http", "url": "https://sms.example.test/send?to={{to}}", "alphas": ["ACME"], "numbers": ["+4922"]}),
    )
    .await;
    Setup {
        number,
        identifier,
        pool,
        scenario,
        provider,
    }
}

/// The `sms` of an agent that sends no SMS: the empty settings, never null.
fn no_sms() -> Value {
    json!({"provider_sid": "", "use_alpha": false, "alpha": "", "number": ""})
}

fn agent(x: &Setup) -> Value {
    json!({
        "gateway_type": "number", "number_sid": x.number, "number_pool_sid": null, "scenario_sid": x.scenario,
        "voicemail_enabled": true, "call_recording": true,
        "calling_schedule": {"strategy": "weekly", "args": {"mon": [["09:00", "18:00"]], "excluded_dates": ["2026-12-25"]}},
        "timezone": "Europe/Berlin", "limits": {"cps": 5, "cpl": 50}, "is_test": true,
        "communication_result": {"targets": [{"url": "https://hooks.example.test/result"}]},
        "sms": {"provider_sid": x.provider, "use_alpha": true, "alpha": "ACME", "number": ""},
        "status": "active"
    })
}

async fn agent_crud_every_field(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let x = setup(&s, &f).await;
    let body = agent(&x);
    let r = s.post("/v1/agent").bearer(tok).json(&body).send().await;
    r.expect(201);
    let id = r.str("id");
    assert!(id.starts_with("agt_"));
    for (k, v) in body.as_object().unwrap() {
        assert_eq!(&r.body[k], v, "field {k}");
    }
    for k in ["account_sid", "archive_time", "created_at", "updated_at"] {
        assert!(r.body.get(k).is_some(), "{k} missing");
    }
    assert!(r.body["archive_time"].is_null());
    assert_eq!(
        s.get(&format!("/v1/agent/{id}"))
            .bearer(tok)
            .send()
            .await
            .body,
        r.body
    );

    // Defaults: schedule always, account timezone, limits 1/10, no SMS.
    let d = s
        .post("/v1/agent")
        .bearer(tok)
        .json(&json!({"gateway_type": "number_pool", "number_pool_sid": x.pool, "scenario_sid": x.scenario}))
        .send()
        .await;
    d.expect(201);
    assert_eq!(
        d.body["calling_schedule"],
        json!({"strategy": "always", "args": {}})
    );
    assert_eq!(d.body["limits"], json!({"cps": 1, "cpl": 10}));
    assert_eq!(d.body["sms"], no_sms());
    assert!(d.body["number_sid"].is_null());
    assert!(d.body["timezone"].as_str().is_some_and(|t| !t.is_empty()));

    // Patch: switch gateway (clear the other sid with null), drop SMS; merged agent re-checked.
    let p = s
        .patch(&format!("/v1/agent/{id}"))
        .bearer(tok)
        .json(&json!({"gateway_type": "number_pool", "number_pool_sid": x.pool, "number_sid": null, "sms": null, "limits": {"cps": 2, "cpl": 3}}))
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["gateway_type"], "number_pool");
    assert!(p.body["number_sid"].is_null());
    assert_eq!(p.body["sms"], no_sms());
    assert_eq!(p.body["timezone"], "Europe/Berlin");
    s.patch(&format!("/v1/agent/{id}"))
        .bearer(tok)
        .json(&json!({"gateway_type": "number"}))
        .send()
        .await
        .expect_error(422, "invalid_gateway");

    // List filters; archive hides from the default list.
    let l = s
        .get("/v1/agent?gateway_type=number_pool")
        .bearer(tok)
        .send()
        .await;
    assert_eq!(l.body["total"], 2);
    let a = s
        .post(&format!("/v1/agent/{id}/archive"))
        .bearer(tok)
        .send()
        .await;
    a.expect(200);
    assert!(a.body["archive_time"].is_string());
    assert_eq!(s.get("/v1/agent").bearer(tok).send().await.body["total"], 1);
    assert_eq!(
        s.get("/v1/agent?archived=true")
            .bearer(tok)
            .send()
            .await
            .body["items"][0]["id"],
        id.as_str()
    );
    assert_eq!(
        s.get("/v1/agent?archived=false")
            .bearer(tok)
            .send()
            .await
            .body["total"],
        2
    );
    let u = s
        .post(&format!("/v1/agent/{id}/unarchive"))
        .bearer(tok)
        .send()
        .await;
    assert!(u.body["archive_time"].is_null());
    assert_eq!(
        s.get(&format!(
            "/v1/agent?scenario_sid={}&status=active",
            x.scenario
        ))
        .bearer(tok)
        .send()
        .await
        .body["total"],
        2
    );
    s.get("/v1/agent?gateway_type=trunk")
        .bearer(tok)
        .send()
        .await
        .expect_error(400, "invalid_query");
    s.get("/v1/agent?limit=501")
        .bearer(tok)
        .send()
        .await
        .expect_error(400, "invalid_query");
    s.post("/v1/agent")
        .bearer(tok)
        .json(&json!({"scenario_sid": x.scenario}))
        .send()
        .await
        .expect_error(400, "invalid_body");

    // Dialer lookups.
    let rec = s.store.agent_get(&id).await.unwrap().unwrap();
    assert!(rec.is_dialable());
    assert_eq!(
        callsmith_domain::communication::caller::pool_caller(&s.store, &x.pool, |_| 0)
            .await
            .unwrap()
            .number,
        x.identifier
    );
    assert_eq!(
        s.store
            .number_pick_for_account(&f.account_sid)
            .await
            .unwrap()
            .unwrap()
            .sid,
        x.number
    );

    s.delete(&format!("/v1/agent/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect(204);
    s.get(&format!("/v1/agent/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect_error(404, "agent_not_found");
}

async fn agent_gateway_rules(s: TestServer) {
    let f = s.fixture().await;
    let g = s.fixture_named("g").await;
    let tok = &f.admin_session;
    let x = setup(&s, &f).await;
    let other = setup(&s, &g).await;
    let inactive_number = made(
        &s,
        tok,
        "/v1/number",
        json!({"identifier": "+4999", "status": "inactive"}),
    )
    .await;
    let inactive_pool = made(
        &s,
        tok,
        "/v1/number-pool",
        json!({"name": "off", "status": "inactive"}),
    )
    .await;
    let base = json!({"scenario_sid": x.scenario});
    let with = |extra: Value| {
        let mut b = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    for (body, err) in [
        (with(json!({"gateway_type": "number"})), "invalid_gateway"),
        (
            with(json!({"gateway_type": "number", "number_sid": ""})),
            "invalid_gateway",
        ),
        (
            with(
                json!({"gateway_type": "number", "number_sid": x.number, "number_pool_sid": x.pool}),
            ),
            "invalid_gateway",
        ),
        (
            with(json!({"gateway_type": "number_pool"})),
            "invalid_gateway",
        ),
        (
            with(
                json!({"gateway_type": "number_pool", "number_pool_sid": x.pool, "number_sid": x.number}),
            ),
            "invalid_gateway",
        ),
        (
            with(json!({"gateway_type": "number", "number_sid": "num_missing"})),
            "invalid_gateway",
        ),
        (
            with(json!({"gateway_type": "number", "number_sid": other.number})),
            "invalid_gateway",
        ),
        (
            with(json!({"gateway_type": "number_pool", "number_pool_sid": other.pool})),
            "invalid_gateway",
        ),
        (
            with(json!({"gateway_type": "number", "number_sid": inactive_number})),
            "invalid_gateway",
        ),
        (
            with(json!({"gateway_type": "number_pool", "number_pool_sid": inactive_pool})),
            "invalid_gateway",
        ),
        (
            json!({"gateway_type": "number", "number_sid": x.number, "scenario_sid": other.scenario}),
            "unknown_scenario",
        ),
    ] {
        let r = s.post("/v1/agent").bearer(tok).json(&body).send().await;
        r.expect_error(422, err);
        assert_eq!(r.body["data"]["topic"], "validation");
    }
}

async fn agent_sms_rules(s: TestServer) {
    let f = s.fixture().await;
    let g = s.fixture_named("g").await;
    let tok = &f.admin_session;
    let x = setup(&s, &f).await;
    let other = setup(&s, &g).await;
    let sms = |v: Value| {
        let mut b = agent(&x);
        b["sms"] = v;
        b
    };
    for body in [
        sms(json!({"provider_sid": "smp_missing", "use_alpha": true, "alpha": "ACME"})),
        sms(json!({"provider_sid": other.provider, "use_alpha": true, "alpha": "ACME"})),
        sms(json!({"provider_sid": x.provider, "use_alpha": true})),
        sms(json!({"provider_sid": x.provider, "use_alpha": true, "alpha": "OTHER"})),
        sms(json!({"provider_sid": x.provider, "use_alpha": false})),
        sms(json!({"provider_sid": x.provider, "use_alpha": false, "number": "+4999"})),
        sms(json!({"provider_sid": x.provider, "use_alpha": false, "alpha": "ACME"})),
    ] {
        s.post("/v1/agent")
            .bearer(tok)
            .json(&body)
            .send()
            .await
            .expect_error(422, "invalid_sms");
    }
    s.post("/v1/agent")
        .bearer(tok)
        .json(&sms(json!({"use_alpha": true})))
        .send()
        .await
        .expect_error(400, "invalid_body");
    let ok = s
        .post("/v1/agent")
        .bearer(tok)
        .json(&sms(
            json!({"provider_sid": x.provider, "use_alpha": false, "number": "+4922"}),
        ))
        .send()
        .await;
    ok.expect(201);
    assert_eq!(ok.body["sms"]["number"], "+4922");
}

async fn agent_schedule_timezone_limits_targets(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let x = setup(&s, &f).await;
    let set = |k: &str, v: Value| {
        let mut b = agent(&x);
        b[k] = v;
        b
    };
    for (body, err) in [
        (
            set(
                "calling_schedule",
                json!({"strategy": "sometimes", "args": {}}),
            ),
            "invalid_schedule",
        ),
        (
            set(
                "calling_schedule",
                json!({"strategy": "weekly", "args": {}}),
            ),
            "invalid_schedule",
        ),
        (
            set(
                "calling_schedule",
                json!({"strategy": "weekly", "args": {"mon": [["18:00", "09:00"]]}}),
            ),
            "invalid_schedule",
        ),
        (
            set(
                "calling_schedule",
                json!({"strategy": "weekly", "args": {"funday": [["09:00", "10:00"]]}}),
            ),
            "invalid_schedule",
        ),
        (
            set(
                "calling_schedule",
                json!({"strategy": "always", "args": {"excluded_dates": ["25.12.2026"]}}),
            ),
            "invalid_schedule",
        ),
        (set("timezone", json!("Mars/Olympus")), "invalid_timezone"),
        (set("timezone", json!("")), "invalid_timezone"),
        (set("limits", json!({"cps": 0, "cpl": 1})), "invalid_limits"),
        (set("limits", json!({"cps": 1, "cpl": 0})), "invalid_limits"),
        (
            set("limits", json!({"cps": -1, "cpl": 5})),
            "invalid_limits",
        ),
        (
            set("limits", json!({"cps": 1001, "cpl": 5})),
            "invalid_limits",
        ),
        (
            set(
                "communication_result",
                json!({"targets": [{"url": "/relative"}]}),
            ),
            "invalid_targets",
        ),
        (
            set(
                "communication_result",
                json!({"targets": [{"url": "ftp://x.test/r"}]}),
            ),
            "invalid_targets",
        ),
        (
            set(
                "communication_result",
                json!({"targets": [{"url": "not a url"}]}),
            ),
            "invalid_targets",
        ),
    ] {
        s.post("/v1/agent")
            .bearer(tok)
            .json(&body)
            .send()
            .await
            .expect_error(422, err);
    }
    s.post("/v1/agent")
        .bearer(tok)
        .json(&set("limits", json!({"cps": 1.5, "cpl": 1})))
        .send()
        .await
        .expect_error(400, "invalid_body");
}

async fn agent_isolation(s: TestServer) {
    let fa = s.fixture_named("a").await;
    let fb = s.fixture_named("b").await;
    let xb = setup(&s, &fb).await;
    let id = made(&s, &fb.admin_session, "/v1/agent", agent(&xb)).await;
    for tok in [&fa.admin_session, &fa.account_key] {
        s.get(&format!("/v1/agent/{id}"))
            .bearer(tok)
            .send()
            .await
            .expect_error(404, "agent_not_found");
        s.patch(&format!("/v1/agent/{id}"))
            .bearer(tok)
            .json(&json!({"status": "inactive"}))
            .send()
            .await
            .expect(404);
        s.post(&format!("/v1/agent/{id}/archive"))
            .bearer(tok)
            .send()
            .await
            .expect(404);
        s.delete(&format!("/v1/agent/{id}"))
            .bearer(tok)
            .send()
            .await
            .expect(404);
        assert_eq!(s.get("/v1/agent").bearer(tok).send().await.body["total"], 0);
    }
    s.get("/v1/agent")
        .bearer(&fa.tenant_key)
        .header("X-Account-Sid", &fb.account_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");
    s.get(&format!("/v1/agent/{id}"))
        .bearer(&fb.tenant_key)
        .header("X-Account-Sid", &fb.account_sid)
        .send()
        .await
        .expect(200);
}

async fn delete_conflicts_list_20_agents_and_the_total(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let x = setup(&s, &f).await;
    let mut ids = Vec::new();
    for _ in 0..23 {
        ids.push(made(&s, tok, "/v1/agent", agent(&x)).await);
    }
    let pool_agent = made(
        &s,
        tok,
        "/v1/agent",
        json!({"gateway_type": "number_pool", "number_pool_sid": x.pool, "scenario_sid": x.scenario}),
    )
    .await;
    for (path, err, total) in [
        (format!("/v1/number/{}", x.number), "number_in_use", 23),
        (
            format!("/v1/sms/provider/{}", x.provider),
            "sms_provider_in_use",
            23,
        ),
        (
            format!("/v1/scenario/{}", x.scenario),
            "scenario_in_use",
            24,
        ),
        (
            format!("/v1/number-pool/{}", x.pool),
            "number_pool_in_use",
            1,
        ),
    ] {
        let r = s.delete(&path).bearer(tok).send().await;
        r.expect_error(409, err);
        assert_eq!(r.body["data"]["topic"], "conflict");
        let listed: Vec<String> = r.body["data"]["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(listed.len(), total.min(20), "{path}");
        if err == "number_pool_in_use" {
            assert_eq!(listed, vec![pool_agent.clone()]);
        } else {
            assert_eq!(listed[..], ids[..20], "first 20 by creation");
        }
        assert!(
            r.body["message"]
                .as_str()
                .unwrap()
                .contains(&format!("{total} agent")),
            "{}",
            r.text
        );
    }
    // Archived agents still count; once the agents are gone the deletes go through.
    s.post(&format!("/v1/agent/{}/archive", ids[0]))
        .bearer(tok)
        .send()
        .await
        .expect(200);
    s.delete(&format!("/v1/number/{}", x.number))
        .bearer(tok)
        .send()
        .await
        .expect(409);
    for id in ids.iter().chain([&pool_agent]) {
        s.delete(&format!("/v1/agent/{id}"))
            .bearer(tok)
            .send()
            .await
            .expect(204);
    }
    s.delete(&format!("/v1/number/{}", x.number))
        .bearer(tok)
        .send()
        .await
        .expect(204);
    s.delete(&format!("/v1/number-pool/{}", x.pool))
        .bearer(tok)
        .send()
        .await
        .expect(204);
    s.delete(&format!("/v1/sms/provider/{}", x.provider))
        .bearer(tok)
        .send()
        .await
        .expect(204);
    s.delete(&format!("/v1/scenario/{}", x.scenario))
        .bearer(tok)
        .send()
        .await
        .expect(204);
}

/// `sms` and `calling_schedule.args` are objects on every read, as documented: the
/// empty settings mean no SMS (and clear it when sent back), a schedule without args reads
/// `{}`.
async fn agent_sms_and_schedule_args_are_objects(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let x = setup(&s, &f).await;
    let create = |sms: Value, schedule: Value| {
        let mut b = agent(&x);
        b["sms"] = sms;
        b["calling_schedule"] = schedule;
        s.post("/v1/agent").bearer(tok).json(&b).send()
    };
    for (sms, schedule) in [
        (Value::Null, json!({"strategy": "always"})),
        (no_sms(), json!({"strategy": "always", "args": null})),
        (
            json!({"provider_sid": " "}),
            json!({"strategy": "always", "args": {}}),
        ),
    ] {
        let r = create(sms.clone(), schedule.clone()).await;
        r.expect(201);
        assert_eq!(r.body["sms"], no_sms(), "{sms}");
        assert_eq!(
            r.body["calling_schedule"],
            json!({"strategy": "always", "args": {}}),
            "{schedule}"
        );
        let g = s
            .get(&format!("/v1/agent/{}", r.str("id")))
            .bearer(tok)
            .send()
            .await;
        assert_eq!(g.body, r.body);
    }
    // Settings without a provider are refused, not read as no SMS.
    create(
        json!({"provider_sid": "", "use_alpha": true, "alpha": "ACME"}),
        json!({"strategy": "always"}),
    )
    .await
    .expect_error(422, "invalid_sms");
    create(
        json!({"provider_sid": "", "number": "+4922"}),
        json!({"strategy": "always"}),
    )
    .await
    .expect_error(422, "invalid_sms");
    // A schedule's args must still be an object when given.
    create(Value::Null, json!({"strategy": "always", "args": []}))
        .await
        .expect_error(422, "invalid_schedule");

    // An agent with SMS: sending back the empty settings clears it; sending back what was
    // read keeps it.
    let with = create(agent(&x)["sms"].clone(), json!({"strategy": "always"})).await;
    with.expect(201);
    let id = with.str("id");
    assert_eq!(with.body["sms"]["provider_sid"], x.provider.as_str());
    let same = s
        .patch(&format!("/v1/agent/{id}"))
        .bearer(tok)
        .json(&json!({"sms": with.body["sms"], "calling_schedule": with.body["calling_schedule"]}))
        .send()
        .await;
    same.expect(200);
    assert_eq!(same.body["sms"], with.body["sms"]);
    let cleared = s
        .patch(&format!("/v1/agent/{id}"))
        .bearer(tok)
        .json(&json!({"sms": no_sms()}))
        .send()
        .await;
    cleared.expect(200);
    assert_eq!(cleared.body["sms"], no_sms());
    let listed = s.get("/v1/agent").bearer(tok).send().await;
    listed.expect(200);
    for a in listed.body["items"].as_array().unwrap() {
        assert!(
            a["sms"].is_object() && a["calling_schedule"]["args"].is_object(),
            "{a}"
        );
    }

    // The document says the same: sms required, an AgentSms, not nullable.
    let doc = s.get("/openapi.json").send().await;
    let schema = &doc.body["components"]["schemas"]["Agent"];
    assert!(
        schema["required"]
            .as_array()
            .unwrap()
            .contains(&json!("sms")),
        "{schema}"
    );
    let sms = &schema["properties"]["sms"];
    assert_eq!(sms["$ref"], "#/components/schemas/AgentSms", "{sms}");
    assert!(
        sms.get("oneOf").is_none() && sms.get("type").is_none(),
        "not nullable: {sms}"
    );
    assert_eq!(
        doc.body["components"]["schemas"]["Schedule"]["properties"]["args"]["type"],
        "object"
    );
}

/// The stored settings are decoded once, when the agent is read: a stored value that does
/// not decode is a store error naming the column and the agent (the API answers 500, no
/// panic), never read as a default.
async fn a_stored_setting_that_does_not_decode_is_a_store_error(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let x = setup(&s, &f).await;
    let id = made(&s, tok, "/v1/agent", agent(&x)).await;
    let a = s.store.agent_get(&id).await.unwrap().unwrap();
    assert_eq!(
        a.sms.as_ref().map(|s| s.provider_sid.as_str()),
        Some(x.provider.as_str())
    );
    assert_eq!(a.schedule.strategy, "weekly");
    for (column, bad) in [
        ("calling_schedule", "'{\"strategy\": 3}'"),
        ("communication_result", "'not json'"),
        ("sms", "'[]'"),
    ] {
        let sql = sqlx::AssertSqlSafe(format!(
            "UPDATE agents SET {column} = {bad} WHERE sid = '{id}'"
        ));
        match s.store.pool() {
            store::Pool::Sqlite(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
            store::Pool::Postgres(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
        }
        .unwrap();
        let e = s.store.agent_get(&id).await.unwrap_err();
        assert!(matches!(e, store::StoreError::Db(_)), "{e:?}");
        let says = e.to_string();
        assert!(says.contains(column) && says.contains(&id), "{says}");
        s.get(&format!("/v1/agent/{id}"))
            .bearer(tok)
            .send()
            .await
            .expect(500);
        // Put it back for the next column.
        let good = made(&s, tok, "/v1/agent", agent(&x)).await;
        let sql = sqlx::AssertSqlSafe(format!(
            "UPDATE agents SET {column} = (SELECT {column} FROM agents WHERE sid = '{good}') WHERE sid = '{id}'"
        ));
        match s.store.pool() {
            store::Pool::Sqlite(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
            store::Pool::Postgres(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
        }
        .unwrap();
        assert!(s.store.agent_get(&id).await.is_ok(), "{column} restored");
    }
}

both_backends!(
    a_stored_setting_that_does_not_decode_is_a_store_error,
    agent_sms_and_schedule_args_are_objects,
    agent_crud_every_field,
    agent_gateway_rules,
    agent_sms_rules,
    agent_schedule_timezone_limits_targets,
    agent_isolation,
    delete_conflicts_list_20_agents_and_the_total
);
