//! Communication strategies, the do-not-call list and idempotent dispatch over real HTTP,
//! on SQLite and PostgreSQL: CRUD, every bad input refused in the envelope with nothing
//! changed, an agent's default strategy, the strategy a dispatch records, suppression at
//! dispatch, and a repeated `Idempotency-Key` creating one communication (v1 dispatch and
//! legacy attempts).

use base64::Engine;
use callsmith_control::{
    both_backends,
    testing::{Fixture, TestResponse, TestServer, minimal_snapshot},
};
use reqwest::Method;
use serde_json::{Value, json};

const DISPATCH: &str = "/v1/communication/-/dispatch";

fn definition() -> Value {
    json!({
        "retry": {"busy": {"attempts": 3, "delay_s": 600, "backoff": 2.0},
                  "no_answer": {"attempts": 2, "delay_s": 3600}},
        "max_age_s": 259200,
        "calling_hours": {"strategy": "weekly", "args": {"mon": [["09:00", "18:00"]]}},
        "fallback_timezone": "Europe/Berlin",
        "frequency_cap": {"calls": 3, "period_s": 86400}
    })
}

async fn create_strategy(s: &TestServer, token: &str, name: &str) -> String {
    let r = s
        .post("/v1/strategy")
        .bearer(token)
        .json(&json!({"name": name, "definition": definition()}))
        .send()
        .await;
    r.expect(201);
    r.str("id")
}

async fn total(s: &TestServer, token: &str, path: &str) -> i64 {
    let r = s.get(path).bearer(token).send().await;
    r.expect(200);
    r.body["total"].as_i64().unwrap()
}

/// A published scenario, a number and an agent dialling from it; returns the agent id.
async fn make_agent(s: &TestServer, f: &Fixture, number: &str, extra: Value) -> String {
    let scenario = s.published_scenario(f, &minimal_snapshot("bot")).await;
    let n = s
        .post("/v1/number")
        .bearer(&f.account_key)
        .json(&json!({"identifier": number, "name": "main"}))
        .send()
        .await;
    n.expect(201);
    let mut body =
        json!({"gateway_type": "number", "number_sid": n.str("id"), "scenario_sid": scenario});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let r = s
        .post("/v1/agent")
        .bearer(&f.account_key)
        .json(&body)
        .send()
        .await;
    r.expect(201);
    r.str("id")
}

async fn strategy_crud_and_every_bad_definition(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.account_key;
    let id = create_strategy(&s, tok, "Campaign").await;
    assert!(id.starts_with("stg_"), "{id}");
    let g = s
        .get(&format!("/v1/strategy/{id}"))
        .bearer(tok)
        .send()
        .await;
    g.expect(200);
    for k in [
        "id",
        "account_sid",
        "name",
        "definition",
        "created_at",
        "updated_at",
    ] {
        assert!(g.body.get(k).is_some(), "{k} missing: {}", g.text);
    }
    assert_eq!(g.body["account_sid"], f.account_sid.as_str());
    assert_eq!(g.body["definition"], definition());

    // Every bad definition: 422 invalid_strategy naming the member, nothing stored.
    let bad = [
        (
            json!({"calling_hours": {"strategy": "weekly", "args": {"mon": [["09:00", "12:00"], ["11:00", "13:00"]]}}}),
            "definition.calling_hours",
        ),
        (
            json!({"frequency_cap": {"calls": 0, "period_s": 3600}}),
            "definition.frequency_cap.calls",
        ),
        (
            json!({"fallback_timezone": "Mars/Olympus_Mons"}),
            "definition.fallback_timezone",
        ),
        (
            json!({"calling_hours": {"strategy": "lunar", "args": {}}}),
            "definition.calling_hours",
        ),
        (
            json!({"retry": {"declined": {"attempts": 1, "delay_s": 60}}}),
            "definition.retry.declined",
        ),
        (
            json!({"retry": {"busy": {"attempts": 21, "delay_s": 60}}}),
            "definition.retry.busy.attempts",
        ),
        (json!({"max_age_s": 5}), "definition.max_age_s"),
        (json!([1]), "definition"),
    ];
    for (def, field) in &bad {
        let r = s
            .post("/v1/strategy")
            .bearer(tok)
            .json(&json!({"name": "Bad", "definition": def}))
            .send()
            .await;
        r.expect_error(422, "invalid_strategy");
        assert_eq!(r.body["data"]["field"], *field, "{}", r.text);
        assert_eq!(r.body["data"]["topic"], "validation");
        assert!(
            r.body["message"].as_str().unwrap().starts_with(field),
            "{}",
            r.text
        );
        // And on PATCH: the stored definition stays.
        s.patch(&format!("/v1/strategy/{id}"))
            .bearer(tok)
            .json(&json!({"definition": def}))
            .send()
            .await
            .expect_error(422, "invalid_strategy");
    }
    assert_eq!(total(&s, tok, "/v1/strategy").await, 1);
    let g = s
        .get(&format!("/v1/strategy/{id}"))
        .bearer(tok)
        .send()
        .await;
    assert_eq!(g.body["definition"], definition());

    // Names: unique per account, checked like every name.
    s.post("/v1/strategy")
        .bearer(tok)
        .json(&json!({"name": "Campaign"}))
        .send()
        .await
        .expect_error(422, "name_taken");
    s.post("/v1/strategy")
        .bearer(tok)
        .json(&json!({"name": " "}))
        .send()
        .await
        .expect_error(422, "invalid_name");
    s.post("/v1/strategy")
        .bearer(tok)
        .json(&json!({"name": "x", "retries": {}}))
        .send()
        .await
        .expect_error(400, "invalid_body");

    // Patch, paging, other accounts.
    let p = s
        .patch(&format!("/v1/strategy/{id}"))
        .bearer(tok)
        .json(&json!({"name": "Renamed", "definition": {"retry": {"failed": {"attempts": 1, "delay_s": 60}}}}))
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["name"], "Renamed");
    assert_eq!(p.body["definition"]["retry"]["failed"]["attempts"], 1);
    let second = create_strategy(&s, tok, "Second").await;
    let page = s.get("/v1/strategy?limit=1").bearer(tok).send().await;
    page.expect(200);
    assert_eq!(page.body["total"], 2);
    assert_eq!(page.body["has_more"], true);
    assert_eq!(page.body["items"][0]["id"], second.as_str());
    s.get("/v1/strategy?limit=501")
        .bearer(tok)
        .send()
        .await
        .expect_error(400, "invalid_query");
    let other = s.fixture_named("b").await;
    s.get(&format!("/v1/strategy/{id}"))
        .bearer(&other.account_key)
        .send()
        .await
        .expect_error(404, "strategy_not_found");
    assert_eq!(total(&s, &other.account_key, "/v1/strategy").await, 0);
    s.delete(&format!("/v1/strategy/{second}"))
        .bearer(tok)
        .send()
        .await
        .expect(204);
    s.delete(&format!("/v1/strategy/{second}"))
        .bearer(tok)
        .send()
        .await
        .expect_error(404, "strategy_not_found");
    s.get("/v1/strategy").send().await.expect(401);
}
both_backends!(strategy_crud_and_every_bad_definition);

async fn agents_default_and_dispatches_record_a_strategy(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.account_key;
    let stg = create_strategy(&s, tok, "Default").await;
    let other = s.fixture_named("b").await;
    let foreign = create_strategy(&s, &other.account_key, "Theirs").await;

    // An agent naming an unknown or another account's strategy is refused.
    let scenario = s.published_scenario(&f, &minimal_snapshot("bot")).await;
    let n = s
        .post("/v1/number")
        .bearer(tok)
        .json(&json!({"identifier": "+4930111222", "name": "main"}))
        .send()
        .await;
    n.expect(201);
    let base =
        json!({"gateway_type": "number", "number_sid": n.str("id"), "scenario_sid": scenario});
    for bad in ["stg_missing", foreign.as_str()] {
        let mut b = base.clone();
        b["strategy_sid"] = json!(bad);
        let r = s.post("/v1/agent").bearer(tok).json(&b).send().await;
        r.expect_error(422, "unknown_strategy");
        assert!(
            r.body["message"]
                .as_str()
                .unwrap()
                .starts_with("strategy_sid:")
        );
    }
    assert_eq!(total(&s, tok, "/v1/agent").await, 0);
    let mut b = base.clone();
    b["strategy_sid"] = json!(stg);
    let a = s.post("/v1/agent").bearer(tok).json(&b).send().await;
    a.expect(201);
    assert_eq!(a.body["strategy_sid"], stg.as_str());
    let agent = a.str("id");

    // The agent's default applies when a dispatch names none.
    let d = s
        .post(DISPATCH)
        .bearer(tok)
        .json(&json!({"recipient": "+4915100000001", "agent_sid": agent}))
        .send()
        .await;
    d.expect(201);
    assert_eq!(d.body["strategy_sid"], stg.as_str());
    // A dispatch's own strategy wins; an unknown or foreign one is refused, nothing stored.
    let own = create_strategy(&s, tok, "Own").await;
    let d = s
        .post(DISPATCH)
        .bearer(tok)
        .json(&json!({"recipient": "+4915100000002", "agent_sid": agent, "strategy_sid": own}))
        .send()
        .await;
    d.expect(201);
    assert_eq!(d.body["strategy_sid"], own.as_str());
    for bad in ["stg_missing", foreign.as_str()] {
        s.post(DISPATCH)
            .bearer(tok)
            .json(&json!({"recipient": "+4915100000003", "agent_sid": agent, "strategy_sid": bad}))
            .send()
            .await
            .expect_error(422, "unknown_strategy");
    }
    assert_eq!(total(&s, tok, "/v1/communication").await, 2);

    // A strategy an agent names cannot be deleted; clearing the default frees it.
    let r = s
        .delete(&format!("/v1/strategy/{stg}"))
        .bearer(tok)
        .send()
        .await;
    r.expect_error(409, "strategy_in_use");
    assert_eq!(r.body["data"]["agents"], json!([agent]));
    let p = s
        .patch(&format!("/v1/agent/{agent}"))
        .bearer(tok)
        .json(&json!({"strategy_sid": null}))
        .send()
        .await;
    p.expect(200);
    assert!(p.body["strategy_sid"].is_null());
    s.delete(&format!("/v1/strategy/{stg}"))
        .bearer(tok)
        .send()
        .await
        .expect(204);
}
both_backends!(agents_default_and_dispatches_record_a_strategy);

async fn do_not_call_list_and_csv_import(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.account_key;
    let r = s
        .post("/v1/do-not-call")
        .bearer(tok)
        .json(&json!({"number": "+1 (212) 555-0100"}))
        .send()
        .await;
    r.expect(201);
    assert_eq!(r.body["number"], "+12125550100");
    assert_eq!(r.body["source"], "api");
    // Listed already: 200, one entry.
    s.post("/v1/do-not-call")
        .bearer(tok)
        .json(&json!({"number": "0012125550100"}))
        .send()
        .await
        .expect(200);
    for bad in ["2125550100", "+12", "call me", "+1212555010x"] {
        s.post("/v1/do-not-call")
            .bearer(tok)
            .json(&json!({"number": bad}))
            .send()
            .await
            .expect_error(422, "invalid_number");
    }
    assert_eq!(total(&s, tok, "/v1/do-not-call").await, 1);
    s.get("/v1/do-not-call/%2B12125550100")
        .bearer(tok)
        .send()
        .await
        .expect(200);

    let import = |csv: &'static str, ct: &'static str| {
        s.post("/v1/do-not-call/-/import")
            .bearer(tok)
            .header("content-type", ct)
            .map(move |r| r.body(csv))
    };
    // A malformed line: 422 naming it, nothing imported (the good lines before it neither).
    let r = import(
        "number,name\n+4930111\n+49 30 1234567,Ann\nnot-a-number,Bob\n+4930999999\n",
        "text/csv",
    )
    .send()
    .await;
    r.expect_error(422, "invalid_csv");
    assert_eq!(r.body["data"]["line"], 4, "{}", r.text);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .starts_with("line 4: \"not-a-number,Bob\""),
        "{}",
        r.text
    );
    // "+49301" has too few digits: line 2.
    let r = import("number\n+49301\n", "text/csv").send().await;
    r.expect_error(422, "invalid_csv");
    assert_eq!(r.body["data"]["line"], 2);
    assert_eq!(total(&s, tok, "/v1/do-not-call").await, 1);
    import("+4930123456", "application/json")
        .send()
        .await
        .expect_error(415, "unsupported_content_type");
    let r = import(
        "number,name\n+49 30 1234567,Ann\n\n0049301234567;dup\n+1 212 555 0100\n+33 1 23 45 67 89\n",
        "text/csv",
    )
    .send()
    .await;
    r.expect(200);
    assert_eq!(r.body["numbers"], 3, "{}", r.text);
    assert_eq!(r.body["added"], 2, "{}", r.text);
    let page = s.get("/v1/do-not-call?limit=2").bearer(tok).send().await;
    page.expect(200);
    assert_eq!(page.body["total"], 3);
    assert_eq!(page.body["has_more"], true);
    assert_eq!(page.body["items"].as_array().unwrap().len(), 2);

    // Remove; another account has its own list.
    s.delete("/v1/do-not-call/+33123456789")
        .bearer(tok)
        .send()
        .await
        .expect(204);
    s.delete("/v1/do-not-call/+33123456789")
        .bearer(tok)
        .send()
        .await
        .expect_error(404, "do_not_call_entry_not_found");
    let other = s.fixture_named("b").await;
    assert_eq!(total(&s, &other.account_key, "/v1/do-not-call").await, 0);
}
both_backends!(do_not_call_list_and_csv_import);

async fn a_suppressed_recipient_is_refused_at_dispatch(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.account_key;
    let agent = make_agent(&s, &f, "+4930222333", json!({})).await;
    s.post("/v1/do-not-call")
        .bearer(tok)
        .json(&json!({"number": "+49 151 0000 0009"}))
        .send()
        .await
        .expect(201);
    // Written in any form, the number is the listed one.
    for recipient in ["+4915100000009", "+49 151 0000-0009", "004915100000009"] {
        let r = s
            .post(DISPATCH)
            .bearer(tok)
            .json(&json!({"recipient": recipient, "agent_sid": agent}))
            .send()
            .await;
        r.expect_error(422, "recipient_suppressed");
        assert!(
            r.body["message"]
                .as_str()
                .unwrap()
                .contains("+4915100000009")
        );
    }
    assert_eq!(total(&s, tok, "/v1/communication").await, 0);
    // Another account's list does not apply; removing the number allows the call again.
    s.delete("/v1/do-not-call/+4915100000009")
        .bearer(tok)
        .send()
        .await
        .expect(204);
    s.post(DISPATCH)
        .bearer(tok)
        .json(&json!({"recipient": "+4915100000009", "agent_sid": agent}))
        .send()
        .await
        .expect(201);
}
both_backends!(a_suppressed_recipient_is_refused_at_dispatch);

async fn a_repeated_idempotency_key_creates_one_communication(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.account_key;
    let agent = make_agent(&s, &f, "+4930444555", json!({})).await;
    let body =
        json!({"recipient": "+4915100000001", "agent_sid": agent, "data": {"a": 1, "b": "x"}});
    let send = |key: &str, body: &Value| {
        s.post(DISPATCH)
            .bearer(tok)
            .header("Idempotency-Key", key)
            .json(body)
    };
    let first = send("order-42", &body).send().await;
    first.expect(201);
    assert!(first.headers.get("idempotent-replayed").is_none());
    // The same body (keys in another order) with the same key: the first communication.
    let reordered =
        json!({"data": {"b": "x", "a": 1}, "agent_sid": agent, "recipient": "+4915100000001"});
    let again = send("order-42", &reordered).send().await;
    again.expect(201);
    assert_eq!(again.str("id"), first.str("id"));
    assert_eq!(again.headers["idempotent-replayed"], "true");
    // The same key with another body: refused, nothing created.
    let other = json!({"recipient": "+4915100000002", "agent_sid": agent});
    send("order-42", &other)
        .send()
        .await
        .expect_error(422, "idempotency_key_reused");
    assert_eq!(total(&s, tok, "/v1/communication").await, 1);
    // Another key, no key: new communications. A bad key: 400, nothing created.
    send("order-43", &body).send().await.expect(201);
    s.post(DISPATCH)
        .bearer(tok)
        .json(&body)
        .send()
        .await
        .expect(201);
    send(&"k".repeat(256), &body)
        .send()
        .await
        .expect_error(400, "invalid_idempotency_key");
    assert_eq!(total(&s, tok, "/v1/communication").await, 3);
    // A refused request frees its key: fixing the request under the same key creates it.
    let suppressed = json!({"recipient": "+4915100000077", "agent_sid": agent});
    s.post("/v1/do-not-call")
        .bearer(tok)
        .json(&json!({"number": "+4915100000077"}))
        .send()
        .await
        .expect(201);
    send("order-44", &suppressed)
        .send()
        .await
        .expect_error(422, "recipient_suppressed");
    s.delete("/v1/do-not-call/+4915100000077")
        .bearer(tok)
        .send()
        .await
        .expect(204);
    let made = send("order-44", &suppressed).send().await;
    made.expect(201);
    assert!(made.headers.get("idempotent-replayed").is_none());
    // Keys are per account: another account's same key is its own.
    let b = s.fixture_named("b").await;
    let agent_b = make_agent(&s, &b, "+4930444556", json!({})).await;
    let r = s
        .post(DISPATCH)
        .bearer(&b.account_key)
        .header("Idempotency-Key", "order-42")
        .json(&json!({"recipient": "+4915100000001", "agent_sid": agent_b}))
        .send()
        .await;
    r.expect(201);
    assert_ne!(r.str("id"), first.str("id"));
    assert_eq!(total(&s, tok, "/v1/communication").await, 4);
}
both_backends!(a_repeated_idempotency_key_creates_one_communication);

fn basic(user: &str, pass: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    )
}

async fn a_repeated_idempotency_key_creates_one_legacy_attempt(s: TestServer) {
    let f = s.fixture().await;
    let r = s
        .su(
            Method::POST,
            &format!("/v1/internal/account/{}/legacy-token", f.account_sid),
        )
        .send()
        .await;
    r.expect(201);
    let auth = basic(&f.account_sid, &r.str("account_token"));
    let post = |path: String, body: Value| s.post(&path).header("authorization", &auth).json(&body);
    let snapshot: Value = serde_json::from_str(&minimal_snapshot("x")).unwrap();
    let r = post(
        "/v1/scenarios".into(),
        json!({"name": "Bot", "constructor": snapshot["constructor"]}),
    )
    .send()
    .await;
    r.expect(200);
    let scenario = r.str("sid");
    s.post("/v1/number")
        .bearer(&f.account_key)
        .json(&json!({"identifier": "+4930777888"}))
        .send()
        .await
        .expect(201);
    let c = post(
        "/v1/campaign".into(),
        json!({"scenario_sid": scenario, "number": "+4930777888"}),
    )
    .send()
    .await;
    c.expect(200);
    let campaign = c.str("sid");
    post(
        format!("/v1/campaign/{campaign}/contact"),
        json!({"phone": "+4915100000001"}),
    )
    .send()
    .await
    .expect(200);
    let attempt = format!("/v1/campaign/{campaign}/attempt");
    let first: TestResponse = post(attempt.clone(), json!({}))
        .header("Idempotency-Key", "launch-1")
        .send()
        .await;
    first.expect(200);
    let again = post(attempt.clone(), json!({}))
        .header("Idempotency-Key", "launch-1")
        .send()
        .await;
    again.expect(200);
    assert_eq!(again.str("sid"), first.str("sid"));
    assert_eq!(again.headers["idempotent-replayed"], "true");
    // Another body under the key: INVALID_ARGUMENT with the v1 reason.
    let r = post(attempt.clone(), json!({"redial": "all"}))
        .header("Idempotency-Key", "launch-1")
        .send()
        .await;
    r.expect(400);
    assert_eq!(r.body["code"], 3);
    assert_eq!(r.body["details"][0]["reason"], "idempotency_key_reused");
    let list = s.get(&attempt).header("authorization", &auth).send().await;
    list.expect(200);
    assert_eq!(list.body.as_array().unwrap().len(), 1, "{}", list.text);
    assert_eq!(total(&s, &f.account_key, "/v1/communication").await, 1);
}
both_backends!(a_repeated_idempotency_key_creates_one_legacy_attempt);
