//! POST /v1/scenario/webhook/run over real HTTP against a real local axum target. The route
//! touches no store, so SQLite is enough.

use std::net::SocketAddr;

use axum::{
    Router,
    body::Bytes,
    http::{HeaderMap, Method, StatusCode, Uri, header},
    response::IntoResponse,
    routing::{any, get},
};
use callsmith_control::testing::{TestDb, TestServer};
use serde_json::{Value, json};

/// Echoes what it received: method, path, query, Authorization, Content-Type and body.
async fn echo(method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let h = |n: header::HeaderName| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    axum::Json(json!({
        "method": method.as_str(),
        "path": uri.path(),
        "query": uri.query().unwrap_or(""),
        "authorization": h(header::AUTHORIZATION),
        "content_type": h(header::CONTENT_TYPE),
        "body": String::from_utf8_lossy(&body),
    }))
}

/// A real HTTP target on 127.0.0.1 with an ephemeral port.
async fn target() -> SocketAddr {
    let app = Router::new()
        .route(
            "/data",
            get(|| async {
                (
                    [("x-request-id", "req-42")],
                    axum::Json(json!({"user": {"name": "Ann", "id": 7}, "items": [1, 2]})),
                )
            }),
        )
        .route(
            "/fail",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
        )
        .route(
            "/r1",
            any(|| async { (StatusCode::FOUND, [(header::LOCATION, "/r2")]) }),
        )
        .route(
            "/r2",
            any(|| async {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(header::LOCATION, "/echo?hop=2")],
                )
            }),
        )
        .route("/echo", any(echo));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

async fn server(allow_private: bool) -> TestServer {
    TestServer::start_with(TestDb::Sqlite, |s| s.webhook_allow_private = allow_private).await
}

async fn run(s: &TestServer, token: &str, body: Value) -> Value {
    let r = s
        .post("/v1/scenario/webhook/run")
        .bearer(token)
        .json(&body)
        .send()
        .await;
    r.expect(200);
    r.body.clone()
}

fn body_json(outcome: &Value) -> Value {
    serde_json::from_str(outcome["response"]["body"].as_str().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maps_body_and_headers_and_fails_on_bad_targets() {
    let s = server(true).await;
    let f = s.fixture().await;
    let addr = target().await;

    // Processed: JSONPath body mapping, header mapping, set_if_not_found; the URL is
    // compiled against storage.
    let o = run(
        &s,
        &f.account_key,
        json!({
            "properties": {
                "request": {"method": "GET", "url": format!("http://{addr}/{{{{page}}}}")},
                "response_mapping": {"variables": [
                    {"name": "{{user_name}}", "source": "body", "path": "$.user.name", "set_if_not_found": ""},
                    {"name": "{{request_id}}", "source": "header", "path": "X-Request-Id", "set_if_not_found": ""},
                    {"name": "{{missing}}", "source": "body", "path": "$.nope", "set_if_not_found": "fallback"}
                ]}
            },
            "storage": {"page": "data"}
        }),
    )
    .await;
    assert_eq!(o["status"], "processed", "{o}");
    assert_eq!(o["error"], "");
    assert_eq!(o["variables"]["user_name"], "Ann");
    assert_eq!(o["variables"]["request_id"], "req-42");
    assert_eq!(o["variables"]["missing"], "fallback");
    assert_eq!(o["response"]["http_status_code"], 200);
    assert_eq!(o["response"]["http_status_text"], "OK");
    assert_eq!(o["response"]["headers"]["x-request-id"], json!(["req-42"]));
    assert!(o["response"]["duration"].as_i64().unwrap() >= 0);
    assert!(o["redirects"].is_null());
    let curl = o["curl"].as_str().unwrap();
    assert!(curl.contains(&format!("http://{addr}/data")), "{curl}");

    // A 500 from the target: 200 with status fail, the response filled, no variables.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {
            "request": {"method": "GET", "url": format!("http://{addr}/fail")},
            "response_mapping": {"variables": [
                {"name": "{{x}}", "source": "body", "path": "$.x", "set_if_not_found": "nf"}
            ]}
        }, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail");
    assert!(o["error"].as_str().unwrap().contains("500"), "{o}");
    assert_eq!(o["response"]["http_status_code"], 500);
    assert_eq!(o["response"]["body"], "boom");
    assert_eq!(o["variables"], json!({}));

    // Nothing listens on the port: fail with a null response.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": format!("http://{dead}/x"), "timeout": 5}}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail");
    assert!(!o["error"].as_str().unwrap().is_empty());
    assert!(o["response"].is_null(), "{o}");
    assert!(o["curl"].as_str().unwrap().contains(&dead.to_string()));

    // A placeholder that renders to an unusable URL: a compile failure, 200 fail.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": "{{target}}"}}, "storage": {"target": "not a url"}}),
    )
    .await;
    assert_eq!(o["status"], "fail");
    assert!(o["response"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_auth_and_bodies() {
    let s = server(true).await;
    let f = s.fixture().await;
    let addr = target().await;

    // 302 turns the POST into a GET; 307 keeps the method; both hops are recorded.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {
            "method": "POST", "url": format!("http://{addr}/r1"),
            "body": {"type": "json", "data": "{\"a\":1}"}
        }}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "processed", "{o}");
    assert_eq!(
        o["redirects"],
        json!([
            {"code": 302, "url": format!("http://{addr}/r2"), "method": "GET"},
            {"code": 307, "url": format!("http://{addr}/echo?hop=2"), "method": "GET"}
        ])
    );
    let seen = body_json(&o);
    assert_eq!(seen["path"], "/echo");
    assert_eq!(seen["query"], "hop=2");
    assert_eq!(seen["method"], "GET");

    // Basic authentication with a placeholder password, seen by the target.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {
            "method": "GET", "url": format!("http://{addr}/echo"),
            "authentication": {"type": "basic", "basic": {"username": "ann", "password": "{{pw}}"}}
        }}, "storage": {"pw": "s3cret"}}),
    )
    .await;
    assert_eq!(o["status"], "processed", "{o}");
    use base64::Engine as _;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("ann:s3cret")
    );
    assert_eq!(body_json(&o)["authorization"], expected);

    // Bearer authentication and a JSON body compiled against storage.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {
            "method": "PUT", "url": format!("http://{addr}/echo"),
            "authentication": {"type": "bearer", "bearer": {"token": "tok-{{n}}"}},
            "body": {"type": "json", "data": "{\"n\": \"{{n}}\"}"}
        }}, "storage": {"n": "9"}}),
    )
    .await;
    let seen = body_json(&o);
    assert_eq!(seen["authorization"], "Bearer tok-9");
    assert_eq!(seen["method"], "PUT");
    assert_eq!(seen["content_type"], "application/json");
    assert_eq!(seen["body"], "{\"n\": \"9\"}");

    // Form body, url-encoded, with custom headers.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {
            "method": "POST", "url": format!("http://{addr}/echo"),
            "body": {"type": "form", "form_values": [
                {"name": "who", "value": "{{who}}"}, {"name": "q", "value": "a&b c"}
            ]},
            "header": {"headers": [{"name": "X-Extra", "value": "1"}]}
        }}, "storage": {"who": "Zoë"}}),
    )
    .await;
    let seen = body_json(&o);
    assert_eq!(seen["content_type"], "application/x-www-form-urlencoded");
    assert_eq!(seen["body"], "who=Zo%C3%AB&q=a%26b+c");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_configuration_private_targets_and_auth() {
    let s = server(false).await;
    let f = s.fixture().await;
    let addr = target().await;

    // Missing url: 422 with SCN111 on request.url.
    let r = s
        .post("/v1/scenario/webhook/run")
        .bearer(&f.account_key)
        .json(&json!({"properties": {"request": {"method": "GET"}}, "storage": {}}))
        .send()
        .await;
    r.expect_error(422, "scenario_invalid");
    assert_eq!(r.body["data"]["topic"], "validation");
    let errs = r.body["data"]["errors"]["scenario"].as_array().unwrap();
    assert!(errs.iter().any(|e| e["code"] == "SCN111"), "{}", r.text);

    // A bad JSONPath in the mapping: SCN120.
    let r = s
        .post("/v1/scenario/webhook/run")
        .bearer(&f.account_key)
        .json(&json!({"properties": {
            "request": {"method": "GET", "url": format!("http://{addr}/data")},
            "response_mapping": {"variables": [
                {"name": "{{x}}", "source": "body", "path": "$[[", "set_if_not_found": ""}
            ]}
        }, "storage": {}}))
        .send()
        .await;
    r.expect_error(422, "scenario_invalid");
    let errs = r.body["data"]["errors"]["scenario"].as_array().unwrap();
    assert!(errs.iter().any(|e| e["code"] == "SCN120"), "{}", r.text);

    // Unknown top-level field: 400.
    s.post("/v1/scenario/webhook/run")
        .bearer(&f.account_key)
        .json(&json!({"properties": {}, "storage": {}, "extra": 1}))
        .send()
        .await
        .expect_error(400, "invalid_body");

    // A loopback target is refused while private targets are not allowed.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": format!("http://{addr}/data")}}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail");
    assert!(o["error"].as_str().unwrap().contains("refused"), "{o}");
    assert!(o["response"].is_null());
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": format!("http://localhost:{}/data", addr.port())}}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail");
    assert!(o["error"].as_str().unwrap().contains("refused"), "{o}");

    // No token: 401.
    s.post("/v1/scenario/webhook/run")
        .json(&json!({"properties": {}, "storage": {}}))
        .send()
        .await
        .expect(401);

    // Documented in /openapi.json with its error responses.
    let doc = s.get("/openapi.json").send().await;
    doc.expect(200);
    let op = &doc.body["paths"]["/v1/scenario/webhook/run"]["post"];
    for code in ["200", "400", "401", "403", "422", "500"] {
        assert!(op["responses"][code].is_object(), "missing {code}");
    }
    assert!(doc.body["components"]["schemas"]["WebhookRunOutcome"].is_object());
}
