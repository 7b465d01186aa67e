//! LLM chat streams over real HTTP on SQLite and PostgreSQL, against a local
//! OpenAI-compatible server (axum on 127.0.0.1:0) streaming real server-sent events:
//! a tool call split across chunks, a slow stream polled mid-way, an upstream failure,
//! provider selection with gdpr_required, the global_llm gate and the error bodies.

use std::{
    convert::Infallible,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use callsmith_control::{
    both_backends,
    testing::{Fixture, TestResponse, TestServer},
};
use callsmith_domain::adapters::{AdaptersConfig, LlmProvider};
use parking_lot::Mutex;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

#[derive(Clone, Default)]
struct Upstream {
    /// Releases the second half of the `slow` model's answer.
    release: Arc<Notify>,
    /// Bodies and Authorization headers received.
    requests: Arc<Mutex<Vec<(Value, String)>>>,
}

fn sse(v: &Value) -> String {
    format!("data: {v}\n\n")
}

fn delta(d: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

async fn completions(
    State(up): State<Upstream>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    up.requests.lock().push((body.clone(), auth));
    if body["stream"] != true {
        return (StatusCode::BAD_REQUEST, "stream must be true").into_response();
    }
    let model = body["model"].as_str().unwrap_or("").to_string();
    if model == "broken" {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": {"message": "upstream exploded", "code": 1234}})),
        )
            .into_response();
    }
    let (tx, rx) = mpsc::channel::<String>(16);
    let release = up.release.clone();
    tokio::spawn(async move {
        let pause = || tokio::time::sleep(Duration::from_millis(10));
        match model.as_str() {
            "slow" => {
                let _ = tx
                    .send(sse(&delta(json!({"role": "assistant", "content": "Hel"}))))
                    .await;
                release.notified().await;
                let _ = tx.send(sse(&delta(json!({"content": "lo"})))).await;
                let _ = tx.send(sse(&finish("stop"))).await;
                let _ = tx.send("data: [DONE]\n\n".into()).await;
            }
            "midway-error" => {
                let _ = tx
                    .send(sse(&delta(json!({"role": "assistant", "content": "par"}))))
                    .await;
                let _ = tx
                    .send(sse(
                        &json!({"error": {"message": "overloaded", "code": 503}}),
                    ))
                    .await;
            }
            _ => {
                let first = sse(&delta(json!({"role": "assistant", "content": "Let me "})));
                // One event split across two network writes.
                let (a, b) = first.split_at(first.len() / 2);
                let _ = tx.send(a.to_string()).await;
                pause().await;
                let _ = tx.send(b.to_string()).await;
                let _ = tx.send(sse(&delta(json!({"content": "check."})))).await;
                pause().await;
                let _ = tx
                    .send(sse(&delta(
                        json!({"tool_calls": [{"index": 0, "id": "call_abc", "type": "function",
                        "function": {"name": "get_weather", "arguments": ""}}]}),
                    )))
                    .await;
                for part in ["{\"ci", "ty\": \"Ber", "lin\", \"unit\"", ": \"c\"}"] {
                    pause().await;
                    let _ = tx
                        .send(sse(&delta(
                            json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
                        )))
                        .await;
                }
                let _ = tx.send(sse(&finish("tool_calls"))).await;
                let _ = tx.send("data: [DONE]\n\n".into()).await;
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|s| (Ok::<_, Infallible>(Bytes::from(s)), rx))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .expect("response")
}

/// Starts the fake provider; returns its state and base URL (`…/v1`).
async fn start_upstream() -> (Upstream, String) {
    let up = Upstream::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(up.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let url = format!("http://{}/v1", l.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(l, app).await.ok() });
    (up, url)
}

/// A fixture with global_llm on and the fake provider configured as `local` (not GDPR,
/// every model) and `eu` (GDPR, model `tools` only).
async fn setup(s: &TestServer) -> (Fixture, Upstream) {
    let f = s.fixture().await;
    set_flag(s, &f, true).await;
    let (up, url) = start_upstream().await;
    s.state.adapters.configure(&AdaptersConfig {
        llm_providers: vec![
            LlmProvider {
                name: "local".into(),
                base_url: url.clone(),
                api_key: Some("sk-local".into()),
                gdpr: false,
                models: vec![
                    "tools".into(),
                    "slow".into(),
                    "broken".into(),
                    "midway-error".into(),
                ],
            },
            LlmProvider {
                name: "eu".into(),
                base_url: url,
                api_key: None,
                gdpr: true,
                models: vec!["tools".into()],
            },
        ],
        ..Default::default()
    });
    (f, up)
}

async fn set_flag(s: &TestServer, f: &Fixture, enabled: bool) {
    s.su(
        Method::PATCH,
        &format!(
            "/v1/internal/tenant/{}/feature-flag/global_llm",
            f.tenant_sid
        ),
    )
    .json(&json!({"enabled": enabled}))
    .send()
    .await
    .expect(200);
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}}})
}

async fn start(s: &TestServer, key: &str, body: Value) -> TestResponse {
    s.post("/v1/adapters/llm/chat/stream")
        .bearer(key)
        .json(&body)
        .send()
        .await
}

async fn poll(s: &TestServer, key: &str, id: &str, behavior: &str) -> TestResponse {
    s.get(&format!(
        "/v1/adapters/llm/chat/stream/{id}?parts_behavior={behavior}"
    ))
    .bearer(key)
    .send()
    .await
}

/// Polls with on_finish_get_all until the status leaves in_progress (bounded: 60 s);
/// every in_progress answer carries no parts.
async fn poll_until_done(s: &TestServer, key: &str, id: &str) -> TestResponse {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = poll(s, key, id, "on_finish_get_all").await;
        if r.status != 200 || r.body["status"] != "in_progress" {
            return r;
        }
        assert_eq!(
            r.body["messages"],
            json!([]),
            "no parts before the end: {}",
            r.text
        );
        assert_eq!(r.body["tool_calls"], json!([]));
        assert!(Instant::now() < deadline, "stream did not finish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[track_caller]
fn expect_adapter_error(r: &TestResponse, status: u16, name: &str) {
    assert_eq!(r.status, status, "body: {}", r.text);
    assert_eq!(r.body["name"], name, "body: {}", r.text);
    assert!(r.body["message"].is_string(), "{}", r.text);
    assert!(r.body["code"].is_i64(), "{}", r.text);
    assert_eq!(r.body["status"], status, "{}", r.text);
}

async fn tool_call_split_across_chunks(s: TestServer) {
    let (f, up) = setup(&s).await;
    let r = start(
        &s,
        &f.account_key,
        json!({"messages": [{"role": "system", "content": "You help."}, {"role": "user", "content": "Weather in Berlin?"}],
            "model": "tools", "provider": "local", "temperature": 0.2, "tools": [weather_tool()]}),
    )
    .await;
    r.expect(201);
    assert_eq!(r.body["status"], "in_progress");
    let id = r.str("id");
    let done = poll_until_done(&s, &f.account_key, &id).await;
    done.expect(200);
    assert_eq!(done.body["status"], "completed", "{}", done.text);
    assert_eq!(done.body["provider"], "local");
    assert_eq!(done.body["messages"][0]["role"], "assistant");
    assert_eq!(done.body["messages"][0]["content"], "Let me check.");
    let call = &done.body["tool_calls"][0];
    assert_eq!(call["id"], "call_abc");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value = serde_json::from_str(
        call["function"]["arguments"]
            .as_str()
            .expect("arguments string"),
    )
    .expect("JSON arguments");
    assert_eq!(args, json!({"city": "Berlin", "unit": "c"}));
    assert_eq!(
        done.body["function_call"], call["function"],
        "deprecated field mirrors the first tool call"
    );
    assert_eq!(done.body["finish_reason"], "tool_calls");
    // A fully read stream keeps answering completed.
    let again = poll(&s, &f.account_key, &id, "on_finish_get_all").await;
    assert_eq!(again.body["status"], "completed");
    // What the upstream received.
    let reqs = up.requests.lock().clone();
    let (body, auth) = &reqs[0];
    assert_eq!(body["stream"], true);
    assert_eq!(body["model"], "tools");
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(body["messages"][1]["content"], "Weather in Berlin?");
    assert_eq!(auth, "Bearer sk-local");
}

async fn slow_stream_polled_midway(s: TestServer) {
    let (f, up) = setup(&s).await;
    let r = start(
        &s,
        &f.account_key,
        json!({"messages": [{"role": "user", "content": "Hi"}], "model": "slow"}),
    )
    .await;
    r.expect(201);
    let id = r.str("id");
    // Incremental: the first part arrives while the stream is still running.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = String::new();
    while got.is_empty() {
        let p = poll(&s, &f.account_key, &id, "incremental").await;
        p.expect(200);
        assert_eq!(p.body["status"], "in_progress", "{}", p.text);
        if let Some(c) = p.body["messages"][0]["content"].as_str() {
            got.push_str(c);
        }
        assert!(Instant::now() < deadline, "first part never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(got, "Hel");
    // on_finish_get_all mid-way: in_progress, nothing.
    let mid = poll(&s, &f.account_key, &id, "on_finish_get_all").await;
    mid.expect(200);
    assert_eq!(mid.body["status"], "in_progress");
    assert_eq!(mid.body["messages"], json!([]));
    assert!(mid.body["function_call"].is_null());
    // Nothing new since the last incremental poll.
    let none = poll(&s, &f.account_key, &id, "incremental").await;
    assert_eq!(none.body["status"], "in_progress");
    assert_eq!(none.body["messages"], json!([]));
    up.release.notify_one();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p = poll(&s, &f.account_key, &id, "incremental").await;
        p.expect(200);
        if let Some(c) = p.body["messages"][0]["content"].as_str() {
            got.push_str(c);
        }
        if p.body["status"] == "completed" {
            assert_eq!(p.body["finish_reason"], "stop");
            break;
        }
        assert!(Instant::now() < deadline, "stream never completed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(got, "Hello", "incremental parts add up to the answer");
    let all = poll(&s, &f.account_key, &id, "on_finish_get_all").await;
    assert_eq!(all.body["status"], "completed");
    assert_eq!(all.body["messages"][0]["content"], "Hello");
    assert_eq!(all.body["tool_calls"], json!([]));
}

async fn upstream_failure_is_502(s: TestServer) {
    let (f, _up) = setup(&s).await;
    let r = start(
        &s,
        &f.account_key,
        json!({"messages": [{"role": "user", "content": "Hi"}], "model": "broken"}),
    )
    .await;
    r.expect(201);
    let done = poll_until_done(&s, &f.account_key, &r.str("id")).await;
    expect_adapter_error(&done, 502, "upstream_error");
    assert_eq!(
        done.body["code"], 1234,
        "the upstream's integer code is passed through"
    );
    assert!(
        done.body["message"]
            .as_str()
            .unwrap()
            .contains("upstream exploded"),
        "{}",
        done.text
    );
    // An error event in the middle of the stream.
    let r = start(
        &s,
        &f.account_key,
        json!({"messages": [{"role": "user", "content": "Hi"}], "model": "midway-error"}),
    )
    .await;
    let done = poll_until_done(&s, &f.account_key, &r.str("id")).await;
    expect_adapter_error(&done, 502, "upstream_error");
    assert_eq!(done.body["code"], 503);
    // An unreachable provider: code unset (0).
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    s.state.adapters.configure(&AdaptersConfig {
        llm_providers: vec![LlmProvider {
            name: "gone".into(),
            base_url: url,
            api_key: None,
            gdpr: true,
            models: vec!["m".into()],
        }],
        ..Default::default()
    });
    let r = start(
        &s,
        &f.account_key,
        json!({"messages": [{"role": "user", "content": "Hi"}], "model": "m"}),
    )
    .await;
    let done = poll_until_done(&s, &f.account_key, &r.str("id")).await;
    expect_adapter_error(&done, 502, "upstream_error");
    assert_eq!(done.body["code"], 0);
}

async fn gdpr_gate_and_errors(s: TestServer) {
    let (f, _up) = setup(&s).await;
    let key = &f.account_key;
    let hi = json!([{"role": "user", "content": "Hi"}]);
    // gdpr_required routes to the GDPR-flagged provider serving the model.
    let r = start(
        &s,
        key,
        json!({"messages": hi, "model": "tools", "gdpr_required": true}),
    )
    .await;
    r.expect(201);
    let done = poll_until_done(&s, key, &r.str("id")).await;
    assert_eq!(done.body["provider"], "eu", "{}", done.text);
    // …and is 400 when no GDPR-flagged provider serves it, or the named one is not flagged.
    let r = start(
        &s,
        key,
        json!({"messages": hi, "model": "slow", "gdpr_required": true}),
    )
    .await;
    expect_adapter_error(&r, 400, "invalid_request");
    let r = start(
        &s,
        key,
        json!({"messages": hi, "model": "tools", "provider": "local", "gdpr_required": true}),
    )
    .await;
    expect_adapter_error(&r, 400, "invalid_request");
    // Other 400s.
    expect_adapter_error(
        &start(&s, key, json!({"messages": [], "model": "tools"})).await,
        400,
        "invalid_request",
    );
    expect_adapter_error(
        &start(&s, key, json!({"messages": hi, "model": "nope"})).await,
        400,
        "invalid_request",
    );
    expect_adapter_error(
        &start(
            &s,
            key,
            json!({"messages": hi, "model": "tools", "provider": "nope"}),
        )
        .await,
        400,
        "invalid_request",
    );
    expect_adapter_error(
        &start(
            &s,
            key,
            json!({"messages": hi, "model": "tools", "temperature": 7}),
        )
        .await,
        400,
        "invalid_request",
    );
    expect_adapter_error(
        &start(
            &s,
            key,
            json!({"messages": hi, "model": "tools", "tools": [{"type": "x"}]}),
        )
        .await,
        400,
        "invalid_request",
    );
    expect_adapter_error(
        &start(&s, key, json!({"messages": hi})).await,
        400,
        "invalid_body",
    );
    let r = start(&s, key, json!({"messages": hi, "model": "tools"})).await;
    r.expect(201);
    let id = r.str("id");
    expect_adapter_error(&poll(&s, key, &id, "sometimes").await, 400, "invalid_query");
    // 401.
    let r = s
        .get(&format!("/v1/adapters/llm/chat/stream/{id}"))
        .send()
        .await;
    expect_adapter_error(&r, 401, "unauthenticated");
    let r = s
        .post("/v1/adapters/llm/chat/stream")
        .json(&json!({"messages": hi, "model": "tools"}))
        .send()
        .await;
    expect_adapter_error(&r, 401, "unauthenticated");
    // 404: unknown id; another tenant's stream reads as absent.
    expect_adapter_error(
        &poll(&s, key, "chat_doesnotexist", "on_finish_get_all").await,
        404,
        "chat_stream_not_found",
    );
    let other = s.fixture_named("b").await;
    set_flag(&s, &other, true).await;
    expect_adapter_error(
        &poll(&s, &other.account_key, &id, "on_finish_get_all").await,
        404,
        "chat_stream_not_found",
    );
    // The default parts_behavior is on_finish_get_all.
    let done = poll_until_done(&s, key, &id).await;
    let plain = s
        .get(&format!("/v1/adapters/llm/chat/stream/{id}"))
        .bearer(key)
        .send()
        .await;
    plain.expect(200);
    assert_eq!(plain.body["messages"], done.body["messages"]);
    // 403: global_llm withheld.
    set_flag(&s, &f, false).await;
    expect_adapter_error(
        &start(&s, key, json!({"messages": hi, "model": "tools"})).await,
        403,
        "llm_disabled",
    );
    expect_adapter_error(
        &poll(&s, key, &id, "on_finish_get_all").await,
        403,
        "llm_disabled",
    );
    // The superuser declares the account like everywhere else.
    set_flag(&s, &f, true).await;
    let r = s
        .post("/v1/adapters/llm/chat/stream")
        .bearer(&s.superuser_token)
        .header("X-Account-Sid", &f.account_sid)
        .json(&json!({"messages": hi, "model": "tools"}))
        .send()
        .await;
    r.expect(201);
}

async fn llm_routes_in_openapi(s: TestServer) {
    let r = s.get("/openapi.json").send().await;
    r.expect(200);
    let poll = &r.body["paths"]["/v1/adapters/llm/chat/stream/{id}"]["get"];
    for code in ["200", "400", "401", "403", "404", "500", "502"] {
        assert!(poll["responses"][code].is_object(), "poll lacks {code}");
    }
    assert!(r.body["paths"]["/v1/adapters/llm/chat/stream"]["post"].is_object());
}

/// A store failure is 500 in the adapter body (the database is closed under the server).
async fn internal_error_uses_the_adapter_body(s: TestServer) {
    let (f, _up) = setup(&s).await;
    let r = start(
        &s,
        &f.account_key,
        json!({"messages": [{"role": "user", "content": "Hi"}], "model": "tools"}),
    )
    .await;
    r.expect(201);
    s.store.close().await;
    let p = poll(&s, &f.account_key, &r.str("id"), "on_finish_get_all").await;
    expect_adapter_error(&p, 500, "internal_error");
}

/// The one-shot completion live calls use: same provider choice and SSE client, awaited to
/// the end; errors as values; and the global_llm check shared with the routes.
async fn one_shot_completion_for_calls(s: TestServer) {
    use callsmith_domain::adapters::llm::{ChatMessage, ChatRequest, LlmError, llm_enabled};
    let (f, up) = setup(&s).await;
    let llm = s.state.adapters.llm.clone();
    let req = |model: &str, provider: Option<&str>, gdpr_required: bool| ChatRequest {
        messages: vec![ChatMessage {
            role: "user".into(),
            content: Some("Weather?".into()),
            tool_calls: None,
            tool_call_id: None,
            name: None,
        }],
        model: model.into(),
        provider: provider.map(String::from),
        temperature: Some(0.0),
        tools: vec![],
        gdpr_required,
    };
    let within = Duration::from_secs(5);
    let a = llm
        .complete(&f.account_sid, req("tools", None, true), within)
        .await
        .expect("completion");
    assert_eq!(a.content, "Let me check.");
    assert_eq!(a.tool_calls[0].function.name, "get_weather");
    assert_eq!(a.finish_reason.as_deref(), Some("tool_calls"));
    let (body, auth) = up.requests.lock().last().cloned().expect("a request");
    assert_eq!(body["stream"], true);
    assert_eq!(
        auth, "",
        "gdpr_required picked the GDPR provider `eu` (no key)"
    );
    // Named non-GDPR provider with gdpr_required; an upstream error; a stream too slow.
    assert!(matches!(
        llm.complete(&f.account_sid, req("tools", Some("local"), true), within)
            .await,
        Err(LlmError::Invalid(_))
    ));
    match llm
        .complete(&f.account_sid, req("broken", None, false), within)
        .await
    {
        Err(LlmError::Upstream(m, 1234)) => assert!(m.contains("upstream exploded"), "{m}"),
        other => panic!("{other:?}"),
    }
    let t0 = Instant::now();
    match llm
        .complete(
            &f.account_sid,
            req("slow", None, false),
            Duration::from_millis(300),
        )
        .await
    {
        Err(LlmError::Upstream(m, 0)) => assert!(m.contains("within 300 ms"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(3));
    up.release.notify_waiters();
    let account = s
        .store
        .account_get(&f.account_sid)
        .await
        .unwrap()
        .expect("account");
    assert!(llm_enabled(&s.store, &account).await.unwrap());
    set_flag(&s, &f, false).await;
    assert!(!llm_enabled(&s.store, &account).await.unwrap());
}

both_backends!(
    internal_error_uses_the_adapter_body,
    tool_call_split_across_chunks,
    slow_stream_polled_midway,
    upstream_failure_is_502,
    gdpr_gate_and_errors,
    llm_routes_in_openapi,
    one_shot_completion_for_calls
);
