//! Webhook sans-IO parts: compile, curl, response mapping, outcome shape, configuration checks.

use std::collections::BTreeMap;

use callsmith_scenarios::model::{MappingEntry, WebhookProps};
use callsmith_scenarios::webhook::{
    CallMetadata, CompiledRequest, WebhookOutcome, WebhookResponse, WebhookStatus, compile,
    map_response, parse_properties, to_curl,
};
use serde_json::{Value, json};

fn props(v: Value) -> WebhookProps {
    serde_json::from_value(v).expect("webhook properties")
}

fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

fn mapping(v: Value) -> Vec<MappingEntry> {
    serde_json::from_value(v).expect("mapping")
}

#[test]
fn compiles_json_body_bearer_headers_and_metadata() {
    let p = props(json!({
        "request": {
            "method": "post", "url": "http://127.0.0.1:8080/orders/{{order}}?who={{who}}",
            "body": {"type": "json", "data": "{\"order\": \"{{order}}\", \"missing\": \"{{nope}}\"}"},
            "authentication": {"type": "bearer", "bearer": {"token": "{{token}}"}},
            "header": {"headers": [{"name": "X-One", "value": "v-{{order}}"}, {"name": "", "value": "skipped"}]},
            "attach_call_metadata": true, "timeout": 2.5, "insecure_skip_verify": true
        },
        "options": {"async": true, "timeout": 9}
    }));
    let meta = CallMetadata {
        communication_id: "c-1".into(),
        recipient: "+1555".into(),
        from: "+1666".into(),
    };
    let req = compile(
        &p,
        &vars(&[("order", "42"), ("who", "ann"), ("token", "s3cret")]),
        Some(&meta),
    )
    .expect("compiles");
    assert_eq!(req.method, "POST");
    assert_eq!(req.url, "http://127.0.0.1:8080/orders/42?who=ann");
    assert_eq!(
        req.body.as_deref(),
        Some(r#"{"order": "42", "missing": ""}"#)
    );
    let h: Vec<(&str, &str)> = req
        .headers
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(
        h,
        vec![
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer s3cret"),
            ("X-One", "v-42"),
            ("X-Callsmith-Communication-Id", "c-1"),
            ("X-Callsmith-Recipient", "+1555"),
            ("X-Callsmith-From", "+1666"),
        ]
    );
    assert_eq!(req.timeout_secs, 2.5);
    assert!(req.insecure_skip_verify && req.is_async);
}

#[test]
fn compiles_form_body_and_basic_auth() {
    let p = props(json!({"request": {
        "method": "PUT", "url": "https://127.0.0.1/f",
        "body": {"type": "form", "form_values": [{"name": "a b", "value": "{{x}}&y=1"}, {"name": "n", "value": "é"}]},
        "authentication": {"type": "basic", "basic": {"username": "u", "password": "{{pw}}"}}
    }}));
    let req = compile(&p, &vars(&[("x", "1+1"), ("pw", "p:w")]), None).expect("compiles");
    assert_eq!(req.body.as_deref(), Some("a+b=1%2B1%26y%3D1&n=%C3%A9"));
    assert!(req.headers.contains(&(
        "Content-Type".into(),
        "application/x-www-form-urlencoded".into()
    )));
    // base64("u:p:w")
    assert!(
        req.headers
            .contains(&("Authorization".into(), "Basic dTpwOnc=".into()))
    );
    assert_eq!(req.timeout_secs, 10.0, "default timeout");
}

#[test]
fn a_placeholder_url_that_renders_badly_does_not_compile() {
    let p = props(json!({"request": {"method": "GET", "url": "{{target}}"}}));
    assert!(compile(&p, &vars(&[]), None).is_err());
    assert!(compile(&p, &vars(&[("target", "ftp://127.0.0.1/")]), None).is_err());
    let ok = compile(&p, &vars(&[("target", "http://127.0.0.1:1/x")]), None).expect("compiles");
    assert_eq!(ok.url, "http://127.0.0.1:1/x");
    let p = props(json!({"request": {"method": "FETCH", "url": "http://127.0.0.1/"}}));
    assert!(compile(&p, &vars(&[]), None).is_err());
}

#[test]
fn curl_command_quotes_for_the_shell() {
    let req = CompiledRequest {
        method: "POST".into(),
        url: "http://127.0.0.1:9/a?x=1&y=2".into(),
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("X-Q".into(), "it's".into()),
        ],
        body: Some(r#"{"a":"it's"}"#.into()),
        timeout_secs: 2.5,
        insecure_skip_verify: true,
        proxy_url: Some("http://127.0.0.1:3128".into()),
        is_async: false,
    };
    assert_eq!(
        to_curl(&req),
        r#"curl -X POST 'http://127.0.0.1:9/a?x=1&y=2' -H 'Content-Type: application/json' -H 'X-Q: it'\''s' --data-raw '{"a":"it'\''s"}' -k --proxy 'http://127.0.0.1:3128' --max-time 2.5"#
    );
    let get = CompiledRequest {
        body: None,
        headers: vec![],
        insecure_skip_verify: false,
        proxy_url: None,
        timeout_secs: 10.0,
        method: "GET".into(),
        ..req
    };
    assert_eq!(
        to_curl(&get),
        "curl -X GET 'http://127.0.0.1:9/a?x=1&y=2' --max-time 10"
    );
}

fn response(status: i64, body: &str) -> WebhookResponse {
    let mut headers = BTreeMap::new();
    headers.insert(
        "X-Request-Id".to_string(),
        vec!["r-1".to_string(), "r-2".to_string()],
    );
    WebhookResponse {
        http_status_code: status,
        http_status_text: "OK".into(),
        headers,
        body: body.into(),
        duration: 12,
    }
}

#[test]
fn response_mapping_reads_body_paths_and_headers() {
    let m = mapping(json!([
        {"name": "{{name}}", "source": "body", "path": "$.user.name", "set_if_not_found": ""},
        {"name": "{{age}}", "source": "body", "path": "$.user.age", "set_if_not_found": ""},
        {"name": "tags", "source": "body", "path": "$.user.tags", "set_if_not_found": ""},
        {"name": "{{first_tag}}", "source": "body", "path": "$.user.tags[0]", "set_if_not_found": ""},
        {"name": "{{missing}}", "source": "body", "path": "$.nope", "set_if_not_found": "n/a"},
        {"name": "{{rid}}", "source": "header", "path": "x-request-id", "set_if_not_found": ""},
        {"name": "{{bad name}}", "source": "body", "path": "$.user", "set_if_not_found": ""}
    ]));
    let got = map_response(
        &m,
        &response(
            200,
            r#"{"user": {"name": "Ann", "age": 41, "tags": ["a", "b"]}}"#,
        ),
    );
    let want = vars(&[
        ("name", "Ann"),
        ("age", "41"),
        ("tags", r#"["a","b"]"#),
        ("first_tag", "a"),
        ("missing", "n/a"),
        ("rid", "r-1"),
    ]);
    assert_eq!(got, want);
    let not_json = map_response(&m[..1], &response(200, "<html>"));
    assert_eq!(not_json, vars(&[("name", "")]));
}

#[test]
fn outcome_status_follows_the_response() {
    let m = mapping(
        json!([{"name": "{{v}}", "source": "body", "path": "$.v", "set_if_not_found": "d"}]),
    );
    let ok = WebhookOutcome::finish(
        "curl x".into(),
        None,
        Ok(response(201, r#"{"v": true}"#)),
        &m,
    );
    assert_eq!(ok.status, WebhookStatus::Processed);
    assert_eq!(ok.error, "");
    assert_eq!(ok.variables, vars(&[("v", "true")]));
    let mut nf = response(404, "{}");
    nf.http_status_text = "Not Found".into();
    let fail = WebhookOutcome::finish("curl x".into(), None, Ok(nf), &m);
    assert_eq!(fail.status, WebhookStatus::Fail);
    assert_eq!(fail.error, "status 404 Not Found");
    assert!(fail.variables.is_empty());
    assert_eq!(
        fail.response.as_ref().map(|r| r.http_status_code),
        Some(404)
    );
    let redirect = WebhookOutcome::finish("c".into(), None, Ok(response(302, "")), &m);
    assert_eq!(redirect.status, WebhookStatus::Fail);
    let down = WebhookOutcome::finish("c".into(), None, Err("connection refused".into()), &m);
    assert_eq!(
        (down.status, down.error.as_str(), down.response.is_none()),
        (WebhookStatus::Fail, "connection refused", true)
    );
}

#[test]
fn outcome_serialises_as_the_spec_shape() {
    let down = WebhookOutcome::finish(
        "curl -X GET 'http://127.0.0.1:1/'".into(),
        None,
        Err("refused".into()),
        &[],
    );
    assert_eq!(
        serde_json::to_value(&down).expect("ser"),
        json!({"status": "fail", "error": "refused", "variables": {}, "curl": "curl -X GET 'http://127.0.0.1:1/'", "redirects": null, "response": null})
    );
    let ok = WebhookOutcome::finish("c".into(), Some(vec![]), Ok(response(200, "{}")), &[]);
    assert_eq!(
        serde_json::to_value(&ok).expect("ser"),
        json!({"status": "processed", "error": "", "variables": {}, "curl": "c", "redirects": [],
               "response": {"http_status_code": 200, "http_status_text": "OK", "headers": {"X-Request-Id": ["r-1", "r-2"]}, "body": "{}", "duration": 12}})
    );
}

#[test]
fn run_route_configuration_checks() {
    let good = json!({"request": {"method": "GET", "url": "http://127.0.0.1:8/x/{{id}}"},
        "response_mapping": {"variables": [{"name": "{{a}}", "source": "header", "path": "X-A", "set_if_not_found": ""}]}});
    assert!(parse_properties(&good).is_ok());
    let bad = json!({
        "request": {"method": "GRAB", "url": "", "body": {"type": "xml", "data": "{{oops"}, "timeout": "soon",
                    "authentication": {"type": "bearer", "bearer": {"token": ""}}},
        "response_mapping": {"variables": [
            {"name": "{{two words}}", "source": "body", "path": "$[", "set_if_not_found": ""},
            {"name": "ok", "source": "cookie", "path": "c", "set_if_not_found": ""},
            {"name": "a/b", "source": "header", "path": "X-B", "set_if_not_found": ""}
        ]}
    });
    let errs = parse_properties(&bad).expect_err("invalid");
    let mut got: Vec<(&str, &str)> = errs
        .iter()
        .map(|e| (e.code.as_str(), e.property.as_str()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("SCN111", "request.authentication.bearer.token"),
            ("SCN111", "request.url"),
            ("SCN112", "request.timeout"),
            ("SCN114", "request.body.type"),
            ("SCN114", "request.method"),
            ("SCN114", "response_mapping.variables[1].source"),
            ("SCN115", "request.body.data"),
            ("SCN115", "response_mapping.variables[0].name"),
            ("SCN116", "response_mapping.variables[2].name"),
            ("SCN120", "response_mapping.variables[0].path"),
        ]
    );
    assert!(parse_properties(&json!("nope")).is_err());
    assert_eq!(
        parse_properties(&json!({}))
            .expect_err("no request")
            .first()
            .map(|e| e.code.as_str()),
        Some("SCN111")
    );
}
