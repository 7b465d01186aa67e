//! Names and labels refuse control characters (Unicode Cc, NUL included) on every resource
//! kind that has one, on SQLite and PostgreSQL.

use callsmith_control::{both_backends, testing::TestServer};
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

both_backends!(names_refuse_control_characters);
