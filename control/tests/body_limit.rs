//! The JSON body limit: a body over `MAX_JSON_BODY_BYTES` is 413 `payload_too_large` in
//! the envelope (on SQLite and PostgreSQL), and the OpenAPI document lists that 413.

use callsmith_control::{api::MAX_JSON_BODY_BYTES, both_backends, testing::TestServer};
use reqwest::Method;

/// A JSON object `{"name": "xxx…"}` of exactly `len` bytes.
fn body_of(len: usize) -> String {
    let overhead = r#"{"name":""}"#.len();
    format!(r#"{{"name":"{}"}}"#, "x".repeat(len - overhead))
}

async fn bodies_over_the_limit_are_413(s: TestServer) {
    let f = s.fixture().await;
    // At the limit the body is read (and its 2 MiB name refused by the usual rule) …
    s.su(Method::POST, "/v1/internal/tenant")
        .raw_json(&body_of(MAX_JSON_BODY_BYTES))
        .send()
        .await
        .expect_error(422, "invalid_field");
    // … one byte more is 413 in the envelope, on every route reading JSON.
    for (path, token) in [
        ("/v1/internal/tenant", s.superuser_token.as_str()),
        ("/v1/number-pool", f.admin_session.as_str()),
        ("/v1/auth/login", ""),
    ] {
        let r = s
            .post(path)
            .bearer(token)
            .raw_json(&body_of(MAX_JSON_BODY_BYTES + 1))
            .send()
            .await;
        r.expect_error(413, "payload_too_large");
        assert_eq!(r.body["code"], "ERR010");
        assert_eq!(
            r.body["message"],
            format!("request body larger than {MAX_JSON_BODY_BYTES} bytes")
        );
    }
    // The server still answers on the same client afterwards.
    s.get("/healthz").send().await.expect(200);
}

both_backends!(bodies_over_the_limit_are_413);

#[test]
fn openapi_documents_the_413() {
    let doc = serde_json::to_value(callsmith_control::openapi()).unwrap();
    for (path, method, envelope) in [
        ("/v1/auth/login", "post", "ErrorBody"),
        ("/v1/user", "post", "ErrorBody"),
        ("/v1/user/{sid}", "patch", "ErrorBody"),
        ("/v1/adapters/llm/chat/stream", "post", "AdapterErrorBody"),
    ] {
        assert_eq!(
            doc["paths"][path][method]["responses"]["413"]["content"]["application/json"]["schema"]
                ["$ref"],
            format!("#/components/schemas/{envelope}"),
            "{method} {path}"
        );
    }
    // Routes without a JSON body, and the legacy family (an oversized body is its 400), do not.
    assert!(doc["paths"]["/v1/user"]["get"]["responses"]["413"].is_null());
    assert!(doc["paths"]["/v1/campaign"]["post"]["responses"]["413"].is_null());
    assert!(doc["paths"]["/profile"]["post"]["responses"]["413"].is_null());
}
