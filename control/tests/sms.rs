//! SMS providers over real HTTP, on SQLite and PostgreSQL: CRUD, template and field
//! validation, inactive providers stay editable, account isolation.

use callsmith_control::{both_backends, testing::TestServer};
use serde_json::{Value, json};

fn provider() -> Value {
    json!({
        "name": "Gateway",
        "type": "http",
        "url": "https://sms.example.test/send?from={{from}}&to={{ to }}",
        "headers": [{"name": "Authorization", "value": "Bearer k"}, {"name": "X-Text", "value": "{{text}}"}],
        "body_template": "{\"from\": \"{{from}}\", \"to\": \"{{to}}\", \"text\": \"{{text}}\"}",
        "alphas": ["Callsmith", "ACME"],
        "numbers": ["+4915100000", "12345"]
    })
}

async fn sms_provider_crud(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let r = s
        .post("/v1/sms/provider")
        .bearer(tok)
        .json(&provider())
        .send()
        .await;
    r.expect(201);
    let id = r.str("id");
    assert!(id.starts_with("smp_"));
    let b = &r.body;
    for k in [
        "id",
        "account_sid",
        "name",
        "type",
        "url",
        "method",
        "headers",
        "body_template",
        "alphas",
        "numbers",
        "status",
        "created_at",
        "updated_at",
    ] {
        assert!(b.get(k).is_some(), "provider lacks {k}: {b}");
    }
    assert_eq!(b["account_sid"], f.account_sid.as_str());
    assert_eq!(b["method"], "POST", "method defaults to POST");
    assert_eq!(b["type"], "http");
    assert_eq!(b["status"], "active");
    assert_eq!(b["alphas"], json!(["Callsmith", "ACME"]));
    assert_eq!(b["numbers"], json!(["+4915100000", "12345"]));
    assert_eq!(
        b["headers"][1],
        json!({"name": "X-Text", "value": "{{text}}"})
    );

    let g = s
        .get(&format!("/v1/sms/provider/{id}"))
        .bearer(tok)
        .send()
        .await;
    g.expect(200);
    assert_eq!(g.body, r.body);

    // Inactive providers keep an editable configuration.
    let p = s
        .patch(&format!("/v1/sms/provider/{id}"))
        .bearer(tok)
        .json(&json!({"status": "inactive"}))
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["status"], "inactive");
    let p = s
        .patch(&format!("/v1/sms/provider/{id}"))
        .bearer(tok)
        .json(&json!({"method": "put", "alphas": ["NewName"], "url": "https://sms2.example.test/{{to}}"}))
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["method"], "PUT");
    assert_eq!(p.body["alphas"], json!(["NewName"]));
    assert_eq!(p.body["status"], "inactive");
    assert_eq!(
        p.body["numbers"],
        json!(["+4915100000", "12345"]),
        "omitted fields keep their value"
    );

    // List, filter by status.
    let mut second = provider();
    second["name"] = json!("Second");
    s.post("/v1/sms/provider")
        .bearer(tok)
        .json(&second)
        .send()
        .await
        .expect(201);
    let l = s.get("/v1/sms/provider").bearer(tok).send().await;
    l.expect(200);
    assert_eq!(l.body["total"], 2);
    let l = s
        .get("/v1/sms/provider?status=inactive")
        .bearer(tok)
        .send()
        .await;
    assert_eq!(l.body["total"], 1);
    assert_eq!(l.body["items"][0]["id"], id.as_str());
    s.get("/v1/sms/provider?limit=501")
        .bearer(tok)
        .send()
        .await
        .expect_error(400, "invalid_query");
    s.get("/v1/sms/provider?status=on")
        .bearer(tok)
        .send()
        .await
        .expect_error(400, "invalid_query");

    s.delete(&format!("/v1/sms/provider/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect(204);
    s.get(&format!("/v1/sms/provider/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect_error(404, "sms_provider_not_found");
    s.get("/v1/sms/provider")
        .send()
        .await
        .expect_error(401, "unauthenticated");
}

async fn sms_provider_validation(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let with = |k: &str, v: Value| {
        let mut b = provider();
        b[k] = v;
        b
    };
    for (body, err) in [
        (
            with("url", json!("https://x.test/{{token}}")),
            "invalid_template",
        ),
        (
            with("url", json!("https://x.test/{{to")),
            "invalid_template",
        ),
        (
            with("body_template", json!("{{ message }}")),
            "invalid_template",
        ),
        (
            with("headers", json!([{"name": "X-Key", "value": "{{secret}}"}])),
            "invalid_template",
        ),
        (with("url", json!("ftp://x.test/")), "invalid_url"),
        (with("url", json!("/relative/{{to}}")), "invalid_url"),
        (with("type", json!("smpp")), "invalid_field"),
        (with("method", json!("DELETE")), "invalid_field"),
        (
            with("headers", json!([{"name": "Bad Header", "value": "x"}])),
            "invalid_field",
        ),
        (
            with("headers", json!([{"name": "X", "value": "a\r\nb"}])),
            "invalid_field",
        ),
        (with("alphas", json!(["TooLongAlphaName"])), "invalid_field"),
        (with("alphas", json!(["123"])), "invalid_field"),
        (with("numbers", json!(["+49abc"])), "invalid_field"),
        (with("name", json!(" ")), "invalid_name"),
    ] {
        let r = s
            .post("/v1/sms/provider")
            .bearer(tok)
            .json(&body)
            .send()
            .await;
        r.expect_error(422, err);
        assert_eq!(r.body["data"]["topic"], "validation");
    }
    s.post("/v1/sms/provider")
        .bearer(tok)
        .json(&with("extra", json!(1)))
        .send()
        .await
        .expect_error(400, "invalid_body");
    s.post("/v1/sms/provider")
        .bearer(tok)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    let r = s
        .post("/v1/sms/provider")
        .bearer(tok)
        .json(&provider())
        .send()
        .await;
    r.expect(201);
    let id = r.str("id");
    s.post("/v1/sms/provider")
        .bearer(tok)
        .json(&provider())
        .send()
        .await
        .expect_error(422, "name_taken");
    // A patch is checked as a whole, too.
    s.patch(&format!("/v1/sms/provider/{id}"))
        .bearer(tok)
        .json(&json!({"body_template": "{{foo}}"}))
        .send()
        .await
        .expect_error(422, "invalid_template");
    s.patch(&format!("/v1/sms/provider/{id}"))
        .bearer(tok)
        .json(&json!({"type": "smtp"}))
        .send()
        .await
        .expect_error(422, "invalid_field");
    let g = s
        .get(&format!("/v1/sms/provider/{id}"))
        .bearer(tok)
        .send()
        .await;
    assert_eq!(
        g.body["body_template"],
        provider()["body_template"],
        "a rejected patch changes nothing"
    );
}

async fn sms_provider_isolation(s: TestServer) {
    let fa = s.fixture_named("a").await;
    let fb = s.fixture_named("b").await;
    let r = s
        .post("/v1/sms/provider")
        .bearer(&fb.admin_session)
        .json(&provider())
        .send()
        .await;
    r.expect(201);
    let b_id = r.str("id");
    // The same name in another account is fine.
    s.post("/v1/sms/provider")
        .bearer(&fa.account_key)
        .json(&provider())
        .send()
        .await
        .expect(201);
    for tok in [&fa.admin_session, &fa.account_key] {
        s.get(&format!("/v1/sms/provider/{b_id}"))
            .bearer(tok)
            .send()
            .await
            .expect_error(404, "sms_provider_not_found");
        s.patch(&format!("/v1/sms/provider/{b_id}"))
            .bearer(tok)
            .json(&json!({"status": "inactive"}))
            .send()
            .await
            .expect(404);
        s.delete(&format!("/v1/sms/provider/{b_id}"))
            .bearer(tok)
            .send()
            .await
            .expect(404);
        let l = s.get("/v1/sms/provider").bearer(tok).send().await;
        assert_eq!(l.body["total"], 1);
        assert_ne!(l.body["items"][0]["id"], b_id.as_str());
    }
    s.get(&format!("/v1/sms/provider/{b_id}"))
        .bearer(&fa.tenant_key)
        .header("X-Account-Sid", &fa.account_sid)
        .send()
        .await
        .expect(404);
    s.get("/v1/sms/provider")
        .bearer(&fa.tenant_key)
        .header("X-Account-Sid", &fb.account_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");
    s.get(&format!("/v1/sms/provider/{b_id}"))
        .bearer(&fb.tenant_key)
        .header("X-Account-Sid", &fb.account_sid)
        .send()
        .await
        .expect(200);
}

both_backends!(
    sms_provider_crud,
    sms_provider_validation,
    sms_provider_isolation
);
