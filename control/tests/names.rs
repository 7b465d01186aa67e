//! Names and labels refuse control characters (Unicode Cc, NUL included) on every resource
//! kind that has one, and every identifier-like or free-text field goes through the one
//! character rule of `callsmith_domain::text_field`, on SQLite and PostgreSQL.

use base64::Engine;
use callsmith_control::{both_backends, testing::TestServer};
use reqwest::Method;
use serde_json::{Value, json};

async fn names_refuse_control_characters(s: TestServer) {
    let f = s.fixture().await;
    let tok = f.admin_session.as_str();
    let su = s.superuser_token.as_str();
    let bad = [
        "nul\u{0}byte",
        "line\nbreak",
        "tab\there",
        "esc\u{1b}[2J",
        "c1\u{9b}x",
    ];
    let key_path = format!("/v1/internal/account/{}/api-key", f.account_sid);
    let mut checked = 0;
    for name in bad {
        // (path, token, body, sends X-Tenant-Sid, error)
        let cases: Vec<(&str, &str, Value, bool, &str)> = vec![
            (
                "/v1/internal/tenant",
                su,
                json!({"name": name}),
                false,
                "invalid_field",
            ),
            (
                "/v1/internal/account",
                su,
                json!({"name": name, "email": "o@example.test", "country": "de", "region": "eu"}),
                true,
                "invalid_field",
            ),
            (
                "/v1/user",
                tok,
                json!({"email": "named@example.test", "name": name}),
                false,
                "invalid_name",
            ),
            (
                "/v1/number-pool",
                tok,
                json!({"name": name}),
                false,
                "invalid_name",
            ),
            (
                "/v1/scenario",
                tok,
                json!({"name": name}),
                false,
                "invalid_name",
            ),
            (
                "/v1/number",
                tok,
                json!({"identifier": "+4930123", "name": name}),
                false,
                "invalid_name",
            ),
            (
                "/v1/sms/provider",
                tok,
                json!({"name": name, "type": "http", "url": "http://127.0.0.1:9/send?to={{to}}", "alphas": ["ACME"], "numbers": ["+4922"]}),
                false,
                "invalid_name",
            ),
            (
                "/v1/internal/stt-dictionary",
                su,
                json!({"name": name, "language": "en-US", "tokens": ["x"]}),
                false,
                "invalid_name",
            ),
            (
                key_path.as_str(),
                su,
                json!({"label": name}),
                false,
                "invalid_field",
            ),
        ];
        for (path, token, body, tenant_header, error) in cases {
            let mut req = s.post(path).bearer(token).json(&body);
            if tenant_header {
                req = req.header("X-Tenant-Sid", &f.tenant_sid);
            }
            let r = req.send().await;
            r.expect_error(422, error);
            assert!(
                r.str("message")
                    .contains("must not contain control characters"),
                "{path}: {}",
                r.text
            );
            checked += 1;
        }
    }
    assert_eq!(checked, bad.len() * 9);

    // Updates go through the same rule.
    let pool = s
        .post("/v1/number-pool")
        .bearer(tok)
        .json(&json!({"name": "Pool"}))
        .send()
        .await;
    pool.expect(201);
    s.patch(&format!("/v1/number-pool/{}", pool.str("id")))
        .bearer(tok)
        .json(&json!({"name": "Po\u{0}ol"}))
        .send()
        .await
        .expect_error(422, "invalid_name");
    s.patch(&format!("/v1/user/{}", f.admin_user_sid))
        .bearer(tok)
        .json(&json!({"name": "Ad\u{7f}min"}))
        .send()
        .await
        .expect_error(422, "invalid_name");
    s.patch(&format!("/v1/internal/account/{}", f.account_sid))
        .bearer(su)
        .json(&json!({"name": "Acc\rount"}))
        .send()
        .await
        .expect_error(422, "invalid_field");

    // Surrounding whitespace is trimmed and other Unicode is kept.
    let r = s
        .post("/v1/number-pool")
        .bearer(tok)
        .json(&json!({"name": "\t Café 東京 \n"}))
        .send()
        .await;
    r.expect(201);
    assert_eq!(r.body["name"], "Café 東京");
}

/// One case of the table below: a request whose `field` carries a refused character.
struct Case {
    method: Method,
    path: String,
    /// `Authorization` header value.
    auth: String,
    body: Value,
    /// `X-Tenant-Sid` to send, if any.
    tenant: Option<String>,
    field: &'static str,
    status: u16,
    error: &'static str,
}

async fn text_fields_refuse_controls_bidi_and_separators(s: TestServer) {
    let f = s.fixture().await;
    let admin = format!("Bearer {}", f.admin_session);
    let su = format!("Bearer {}", s.superuser_token);
    let token = s
        .su(
            Method::POST,
            &format!("/v1/internal/account/{}/legacy-token", f.account_sid),
        )
        .send()
        .await
        .str("account_token");
    let legacy = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{token}", f.account_sid))
    );
    let scenario = s
        .post("/v1/scenario")
        .bearer(&f.admin_session)
        .json(&json!({"name": "Scenario"}))
        .send()
        .await;
    scenario.expect(201);
    let scenario = scenario.str("id");
    let case = |method: Method,
                path: &str,
                auth: &str,
                body: Value,
                field: &'static str,
                status: u16,
                error: &'static str| Case {
        method,
        path: path.to_string(),
        auth: auth.to_string(),
        body,
        tenant: None,
        field,
        status,
        error,
    };
    let account = format!("/v1/internal/account/{}", f.account_sid);
    #[rustfmt::skip]
    let mut cases = vec![
        case(Method::POST, "/v1/user", &admin, json!({"email": "nul\u{0}@example.test"}), "email", 422, "invalid_email"),
        case(Method::POST, "/v1/user", &admin, json!({"email": "rlo\u{202E}@example.test"}), "email", 422, "invalid_email"),
        case(Method::POST, "/v1/user", &admin, json!({"email": "esc@example.test", "name": "Zo\u{1b}[2Jë"}), "name", 422, "invalid_name"),
        case(Method::POST, "/v1/user", &admin, json!({"email": "ls@example.test", "name": "two\u{2028}lines"}), "name", 422, "invalid_name"),
        case(Method::PATCH, &format!("/v1/user/{}", f.admin_user_sid), &admin, json!({"name": "rli\u{2067}x"}), "name", 422, "invalid_name"),
        case(Method::PATCH, &account, &su, json!({"email": "o\u{0}@example.test"}), "email", 422, "invalid_field"),
        case(Method::PATCH, &account, &su, json!({"external_id": "crm\n42"}), "external_id", 422, "invalid_field"),
        case(Method::PATCH, &account, &su, json!({"phone": "+49\u{202D}30"}), "phone", 422, "invalid_field"),
        case(Method::POST, &format!("{account}/api-key"), &su, json!({"label": "ci\u{202E}yek"}), "label", 422, "invalid_field"),
        case(Method::POST, "/v1/internal/tenant", &su, json!({"name": "t\u{2066}x"}), "name", 422, "invalid_field"),
        case(Method::POST, "/v1/number-pool", &admin, json!({"name": "pool\u{2029}x"}), "name", 422, "invalid_name"),
        case(Method::POST, "/v1/scenario", &admin, json!({"name": "S", "description": "nul\u{0}"}), "description", 422, "invalid_description"),
        case(Method::PATCH, &format!("/v1/scenario/{scenario}"), &admin, json!({"description": "rlo\u{202E}"}), "description", 422, "invalid_description"),
        case(Method::POST, "/v1/internal/stt-dictionary", &su, json!({"name": "d", "language": "en-US", "tokens": ["x"], "description": "esc\u{1b}"}), "description", 422, "invalid_description"),
        case(Method::POST, "/v1/internal/stt-dictionary", &su, json!({"name": "d", "language": "en-US", "tokens": ["o\u{202E}k"]}), "tokens[0]", 422, "invalid_tokens"),
        // The legacy family: 400 INVALID_ARGUMENT with the v1 code as the reason.
        case(Method::POST, "/profile", &legacy, json!({"email": "p\u{0}@example.test"}), "email", 400, "invalid_email"),
        case(Method::POST, "/v1/campaign", &legacy, json!({"description": "c\u{9b}x", "scenario_sid": scenario, "number": "+4930"}), "description", 400, "invalid_description"),
        case(Method::POST, "/v1/scenarios", &legacy, json!({"name": "s\u{202E}x", "constructor": {"bricks": {}}}), "name", 400, "invalid_name"),
    ];
    let mut create_account = case(
        Method::POST,
        "/v1/internal/account",
        &su,
        json!({"name": "A", "email": "esc\u{1b}@example.test", "country": "de", "region": "eu"}),
        "email",
        422,
        "invalid_field",
    );
    create_account.tenant = Some(f.tenant_sid.clone());
    cases.push(create_account);

    for c in &cases {
        let mut req = s
            .request(c.method.clone(), &c.path)
            .header("authorization", &c.auth)
            .json(&c.body);
        if let Some(t) = &c.tenant {
            req = req.header("X-Tenant-Sid", t);
        }
        let r = req.send().await;
        let what = format!("{} {} {}", c.method, c.path, c.body);
        assert_eq!(r.status, c.status, "{what}: {}", r.text);
        let message = r.body["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("{}: must not contain control characters", c.field)),
            "{what}: {}",
            r.text
        );
        if c.status == 400 {
            assert_eq!(r.body["code"], 3, "{what}: {}", r.text);
            assert_eq!(
                r.body["details"][0]["reason"], c.error,
                "{what}: {}",
                r.text
            );
        } else {
            assert_eq!(r.body["error"], c.error, "{what}: {}", r.text);
        }
    }
    // Nothing refused was stored.
    let users = s.get("/v1/user").bearer(&f.admin_session).send().await;
    users.expect(200);
    assert_eq!(users.body["total"], 1, "{}", users.text);

    // An audio upload whose filename carries a bidi override: 400 `invalid_filename`.
    let body = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"invoice\u{202E}vaw.exe\"\r\nContent-Type: audio/wav\r\n\r\nRIFF\r\n--XyZ--\r\n";
    let r = s
        .post("/v1/audio")
        .bearer(&f.admin_session)
        .map(|b| {
            b.header("content-type", "multipart/form-data; boundary=XyZ")
                .body(body)
        })
        .send()
        .await;
    r.expect_error(400, "invalid_filename");
    assert_eq!(
        r.str("message"),
        "filename: must not contain control characters (found U+202E)"
    );

    // Ordinary Unicode is kept, and free text keeps its line breaks.
    for name in ["Zoë Müller", "李雷", "שלום", "O\u{2019}Brien"] {
        let r = s
            .post("/v1/user")
            .bearer(&f.admin_session)
            .json(&json!({"email": format!("{}@example.test", name.len()), "name": name}))
            .send()
            .await;
        r.expect(201);
        assert_eq!(r.body["name"], name);
    }
    let r = s
        .post("/v1/scenario")
        .bearer(&f.admin_session)
        .json(&json!({"name": "李雷", "description": "line one\nline two\twith a tab"}))
        .send()
        .await;
    r.expect(201);
    assert_eq!(r.body["description"], "line one\nline two\twith a tab");
    let r = s
        .patch(&account)
        .bearer(&s.superuser_token)
        .json(
            &json!({"email": "zoë@example.test", "external_id": "crm-42", "phone": "+49 30 1234"}),
        )
        .send()
        .await;
    r.expect(200);
    assert_eq!(r.body["external_id"], "crm-42");
}

both_backends!(
    names_refuse_control_characters,
    text_fields_refuse_controls_bidi_and_separators
);
