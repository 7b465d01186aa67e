//! OpenAPI completeness, request ids, metrics, health and readiness.

use std::collections::BTreeSet;

use callsmith_control::{
    both_backends,
    testing::{TestDb, TestServer},
};
use reqwest::Method;
use serde_json::Value;

/// Every route the issue asks for, as (method, path template).
const EXPECTED: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
    ("post", "/v1/auth/login"),
    ("post", "/v1/auth/logout"),
    ("post", "/v1/auth/password/change"),
    ("post", "/v1/auth/password-reset/consume"),
    ("post", "/v1/auth/magic-link/consume"),
    ("get", "/v1/profile"),
    ("get", "/v1/user"),
    ("post", "/v1/user"),
    ("get", "/v1/user/{sid}"),
    ("patch", "/v1/user/{sid}"),
    ("delete", "/v1/user/{sid}"),
    ("post", "/v1/user/{sid}/password-reset/request"),
    ("post", "/v1/user/{sid}/magic-link/request"),
    ("post", "/v1/internal/tenant"),
    ("get", "/v1/internal/tenant"),
    ("get", "/v1/internal/tenant/{sid}"),
    ("delete", "/v1/internal/tenant/{sid}"),
    ("post", "/v1/internal/tenant/{sid}/restore"),
    ("post", "/v1/internal/tenant/{sid}/api-key"),
    ("get", "/v1/internal/tenant/{sid}/api-key"),
    ("delete", "/v1/internal/tenant/{sid}/api-key/{key_sid}"),
    ("get", "/v1/internal/tenant/{sid}/feature-flag"),
    ("get", "/v1/internal/tenant/{sid}/feature-flag/{name}"),
    ("patch", "/v1/internal/tenant/{sid}/feature-flag/{name}"),
    ("post", "/v1/internal/account"),
    ("get", "/v1/internal/account"),
    ("get", "/v1/internal/account/{sid}"),
    ("patch", "/v1/internal/account/{sid}"),
    ("post", "/v1/internal/account/{sid}/api-key"),
    ("get", "/v1/internal/account/{sid}/api-key"),
    ("delete", "/v1/internal/account/{sid}/api-key/{key_sid}"),
    ("post", "/v1/internal/trunk"),
    ("get", "/v1/internal/trunk"),
    ("get", "/v1/internal/trunk/{sid}"),
    ("delete", "/v1/internal/trunk/{sid}"),
    ("post", "/v1/internal/account/{sid}/legacy-token"),
    ("post", "/profile"),
    ("get", "/profile/{id}"),
    ("patch", "/profile/{id}"),
    ("delete", "/profile/{id}"),
    ("get", "/v1/accounts/{sid}"),
    ("get", "/v1/campaign"),
    ("post", "/v1/campaign"),
    ("delete", "/v1/campaign/{campaign_id}"),
    ("get", "/v1/scenarios"),
    ("post", "/v1/scenarios"),
    ("get", "/v1/scenarios/{scenario_id}"),
    ("get", "/v1/campaign/{campaign_id}/contact"),
    ("post", "/v1/campaign/{campaign_id}/contact"),
    ("post", "/v1/campaign/{campaign_id}/contact/batch"),
    ("post", "/v1/campaign/{campaign_id}/contact/import"),
    ("delete", "/v1/campaign/{campaign_id}/contact/{contact_id}"),
    ("get", "/v1/campaign/{campaign_id}/attempt"),
    ("post", "/v1/campaign/{campaign_id}/attempt"),
    ("get", "/v1/campaign/{campaign_id}/attempt/{attempt_id}"),
    (
        "post",
        "/v1/campaign/{campaign_id}/attempt/{attempt_id}/cancel",
    ),
    (
        "get",
        "/v1/campaign/{campaign_id}/attempt/{attempt_id}/statistics",
    ),
    (
        "get",
        "/v1/campaign/{campaign_id}/attempt/{attempt_id}/report/communication",
    ),
    (
        "get",
        "/v1/campaign/{campaign_id}/attempt/{attempt_id}/report/contact",
    ),
];

fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, _) in item.as_object().expect("path item") {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                out.insert((method.clone(), path.clone()));
            }
        }
    }
    out
}

/// A path template with every `{param}` replaced by a plausible value.
fn concrete_path(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('}')
            .map(|e| start + e)
            .unwrap_or(rest.len() - 1);
        out.push_str(if &rest[start..=end] == "{name}" {
            "global_llm"
        } else {
            "x_1"
        });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_documents_every_served_route() {
    let s = TestServer::start(TestDb::Sqlite).await;
    let r = s.get("/openapi.json").send().await;
    r.expect(200);
    let doc = r.body.clone();
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "OpenAPI 3.1: {}",
        doc["openapi"]
    );
    let documented = operations(&doc);
    let expected: BTreeSet<_> = EXPECTED
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    // Every foundation route is documented (resource groups add their own; the router and
    // the document come from one OpenApiRouter, so nothing is served undocumented).
    let missing: Vec<_> = expected.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "routes missing from the OpenAPI document: {missing:?}"
    );

    // Every documented operation is served (neither the router's 404 nor 405) …
    for (method, path) in &documented {
        let concrete = concrete_path(path);
        let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let resp = s.request(m, &concrete).send().await;
        assert_ne!(
            resp.body["error"], "route_not_found",
            "{method} {path} is documented but not served"
        );
        assert_ne!(
            resp.status, 405,
            "{method} {path} is documented but not served"
        );
    }
    // … and a route that is not documented is not served.
    s.get("/v1/not-a-route")
        .send()
        .await
        .expect_error(404, "route_not_found");
    s.request(Method::PUT, "/v1/user")
        .send()
        .await
        .expect_error(405, "method_not_allowed");

    // Every foundation operation documents its error responses with its envelope schema
    // (standard envelope on /v1, the RPC status object on the legacy family) and
    // declares its security unless it is public. Adapter groups document their own envelopes.
    let public = [
        "/v1/auth/login",
        "/v1/auth/password-reset/consume",
        "/v1/auth/magic-link/consume",
    ];
    for (method, path) in &expected {
        if !path.starts_with("/v1/") && !path.starts_with("/profile") {
            continue;
        }
        let op = &doc["paths"][path.as_str()][method.as_str()];
        let responses = op["responses"].as_object().unwrap();
        let errors: Vec<_> = responses
            .keys()
            .filter(|k| k.starts_with('4') || k.starts_with('5'))
            .collect();
        assert!(
            !errors.is_empty(),
            "{method} {path} documents no error response"
        );
        let legacy = path.starts_with("/profile")
            || path.starts_with("/v1/campaign")
            || path.starts_with("/v1/scenarios")
            || path.starts_with("/v1/accounts/");
        let envelope = if legacy { "RpcStatus" } else { "ErrorBody" };
        for code in errors {
            let schema = &responses[code]["content"]["application/json"]["schema"]["$ref"];
            assert_eq!(
                schema,
                &format!("#/components/schemas/{envelope}"),
                "{method} {path} {code} must use {envelope}"
            );
        }
        if !public.contains(&path.as_str()) {
            assert!(
                op["security"].is_array(),
                "{method} {path} must declare its security"
            );
        }
    }
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in [
        "ErrorBody",
        "User",
        "Tenant",
        "AccountAdmin",
        "Trunk",
        "FeatureFlagRule",
        "Session",
        "Profile",
        "ApiKeySecret",
        "MagicLink",
    ] {
        assert!(schemas.contains_key(name), "schema {name} missing");
    }
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
}

/// The schema a response of an operation references by name.
fn response_schema<'a>(doc: &'a Value, method: &str, path: &str, status: &str) -> &'a Value {
    let r = doc["paths"][path][method]["responses"][status]["content"]["application/json"]
        ["schema"]["$ref"]
        .as_str()
        .unwrap_or_else(|| panic!("{method} {path} {status} references no schema"));
    let name = r.strip_prefix("#/components/schemas/").unwrap();
    &doc["components"]["schemas"][name]
}

fn property_names(schema: &Value) -> BTreeSet<String> {
    schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn no_two_types_share_a_schema_name() {
    // Merging route groups keeps one schema per name, so two types of one name would
    // leave the routes of one documented with the other's fields.
    assert_eq!(
        callsmith_control::api::schema_name_clashes(),
        Vec::<String>::new()
    );
    let doc = serde_json::to_value(callsmith_control::api::openapi()).unwrap();
    let v1 = response_schema(&doc, "get", "/v1/profile", "200");
    assert_eq!(
        property_names(v1),
        ["account", "feature_flags", "user"]
            .map(String::from)
            .into(),
        "/v1/profile documents the v1 profile: {v1}"
    );
    for (method, path) in [
        ("post", "/profile"),
        ("get", "/profile/{id}"),
        ("patch", "/profile/{id}"),
    ] {
        let legacy = response_schema(&doc, method, path, "200");
        assert_eq!(
            doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
                ["$ref"],
            "#/components/schemas/LegacyProfile"
        );
        assert_eq!(
            property_names(legacy),
            ["creation_time", "email", "id", "timezone", "update_time"]
                .map(String::from)
                .into(),
            "{method} {path} documents the legacy profile: {legacy}"
        );
    }
}

async fn request_ids_metrics_and_probes(s: TestServer) {
    let r = s.get("/healthz").send().await;
    r.expect(200);
    assert_eq!(r.body["status"], "ok");
    let generated = r
        .headers
        .get("x-request-id")
        .expect("x-request-id generated")
        .to_str()
        .unwrap()
        .to_string();
    assert!(!generated.is_empty());
    let r = s
        .get("/v1/user")
        .header("x-request-id", "req-123")
        .send()
        .await;
    r.expect(401);
    assert_eq!(
        r.headers.get("x-request-id").unwrap(),
        "req-123",
        "a sent request id is echoed, errors included"
    );
    let r = s.get("/nowhere").send().await;
    assert!(r.headers.get("x-request-id").is_some());

    let r = s.get("/readyz").send().await;
    r.expect(200);
    assert_eq!(r.body["status"], "ok", "{}", r.text);
    // A component that is starting degrades the status, never the answer; a disabled one
    // does neither.
    use callsmith_domain::readiness::ComponentStatus;
    s.state.readiness.set("speech", ComponentStatus::Starting);
    let r = s.get("/readyz").send().await;
    r.expect(200);
    assert_eq!(r.body["status"], "degraded", "{}", r.text);
    assert_eq!(r.body["components"]["speech"], "starting", "{}", r.text);
    s.state.readiness.set("speech", ComponentStatus::Disabled);
    let r = s.get("/readyz").send().await;
    assert_eq!(r.body["status"], "ok", "{}", r.text);
    assert_eq!(r.body["components"]["speech"], "disabled", "{}", r.text);
    for _ in 0..3 {
        s.su(Method::GET, "/v1/internal/tenant")
            .send()
            .await
            .expect(200);
    }
    let m = s.get("/metrics").send().await;
    m.expect(200);
    assert!(
        m.text.contains(r#"callsmith_http_requests_total{method="GET",route="/v1/internal/tenant",status="200"} 3"#),
        "request counter by route and status: {}",
        m.text
    );
    assert!(m.text.contains(
        r#"callsmith_http_requests_total{method="GET",route="/v1/user",status="401"} 1"#
    ));
    assert!(m.text.contains(
        r#"callsmith_http_requests_total{method="GET",route="unmatched",status="404"} 1"#
    ));
    assert!(
        m.text
            .contains("callsmith_http_request_duration_seconds_bucket")
    );
    // The runtime's live tasks: at least the one serving this request.
    let tasks = m
        .text
        .lines()
        .find_map(|l| l.strip_prefix("callsmith_runtime_alive_tasks "))
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or_else(|| panic!("callsmith_runtime_alive_tasks: {}", m.text));
    assert!(tasks >= 1, "alive tasks {tasks}");

    // Readiness follows the database.
    s.store.close().await;
    s.get("/readyz")
        .send()
        .await
        .expect_error(503, "database_unavailable");
}

both_backends!(request_ids_metrics_and_probes);

/// Every `$ref` in a JSON document, with where it was found.
fn refs<'a>(v: &'a Value, at: &str, out: &mut Vec<(String, &'a str)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                if k == "$ref"
                    && let Some(r) = v.as_str()
                {
                    out.push((at.to_string(), r));
                }
                refs(v, &format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                refs(v, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_schema_reference_resolves() {
    let doc = serde_json::to_value(callsmith_control::api::openapi()).unwrap();
    let mut found = Vec::new();
    refs(&doc, "", &mut found);
    assert!(!found.is_empty());
    let dangling: Vec<_> = found
        .iter()
        .filter(|(_, r)| {
            let Some(name) = r.strip_prefix("#/components/schemas/") else {
                return true;
            };
            doc["components"]["schemas"].get(name).is_none()
        })
        .collect();
    assert!(
        dangling.is_empty(),
        "{} references resolve to nothing: {dangling:#?}",
        dangling.len()
    );
    // The communication status is one named enum, used by the resource and the list filter,
    // and it lists the names on the wire (not the Rust variants).
    let names = |schema: &str| -> Vec<String> {
        doc["components"]["schemas"][schema]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{schema} has no enum"))
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    use callsmith_domain::communication::CommunicationStatus;
    use callsmith_domain::store::results::DeliveryStatus;
    assert_eq!(
        names("CommunicationStatus"),
        CommunicationStatus::ALL
            .iter()
            .map(|s| s.as_str().to_string())
            .collect::<Vec<_>>()
    );
    assert_eq!(names("CommunicationStatus")[3], "in_progress");
    assert_eq!(
        names("DeliveryStatus"),
        DeliveryStatus::ALL
            .iter()
            .map(|s| s.as_str().to_string())
            .collect::<Vec<_>>()
    );
}

/// Every page parameter of the v1 lists documents the bounds `PageParams` enforces, so a
/// client (or a generator such as schemathesis) never sends a documented value that is
/// refused.
#[test]
fn page_parameters_document_their_bounds() {
    let doc = serde_json::to_value(callsmith_control::api::openapi()).unwrap();
    let mut seen = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !path.starts_with("/v1/") {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            for p in op["parameters"].as_array().into_iter().flatten() {
                // The legacy campaign family pages with its own text parameters.
                if p["in"] != "query" || p["schema"]["type"] == "string" {
                    continue;
                }
                let schema = &p["schema"];
                let (min, max) = (schema["minimum"].as_i64(), schema["maximum"].as_i64());
                match p["name"].as_str() {
                    Some("limit") => {
                        seen += 1;
                        assert_eq!(
                            (min, max),
                            (Some(0), Some(callsmith_control::api::page::MAX_LIMIT)),
                            "{method} {path} limit: {schema}"
                        );
                    }
                    Some("offset") => {
                        seen += 1;
                        assert_eq!(min, Some(0), "{method} {path} offset: {schema}");
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(seen >= 30, "page parameters found: {seen}");
}

/// The audio hand-out parameters document what `mode` and `expires_in` accept.
#[test]
fn audio_delivery_parameters_document_their_values() {
    let doc = serde_json::to_value(callsmith_control::api::openapi()).unwrap();
    // The schema of GET `path`'s parameter `name`.
    let schema = |path: &str, name: &str| {
        doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["schema"].clone())
            .unwrap_or_else(|| panic!("{path}: no {name}"))
    };
    for (path, mode, ttl) in [
        (
            "/v1/communication/{id}/recording",
            Some("mode"),
            "expires_in",
        ),
        (
            "/v1/communication/{id}/speech-recording",
            Some("mode"),
            "expires_in",
        ),
        ("/v1/audio/{id}/signed-link", None, "ttl"),
    ] {
        if let Some(mode) = mode {
            assert_eq!(schema(path, mode)["pattern"], "^(proxy|url)$", "{path}");
        }
        let ttl = schema(path, ttl);
        assert_eq!(ttl["minimum"], 1, "{path}: {ttl}");
        assert_eq!(
            ttl["maximum"].as_u64(),
            Some(callsmith_domain::objects::MAX_LINK_TTL_SECS),
            "{path}: {ttl}"
        );
    }
}
