//! Intent classifiers over real HTTP on SQLite and PostgreSQL: versioning rules,
//! concurrent saves, training to ready and prediction accuracy on a generated data set,
//! the remote upstream (502), error bodies, tenant purge.

use std::time::{Duration, Instant};

use callsmith_control::{
    both_backends,
    testing::{TestResponse, TestServer},
};
use callsmith_domain::adapters::{AdaptersConfig, classifier::model::Model};
use reqwest::Method;
use serde_json::{Value, json};

const LOGREG: &str = "c1a551f1-0000-4000-8000-000000000001";
const CENTROID: &str = "c1a551f1-0000-4000-8000-000000000002";
const REMOTE: &str = "c1a551f1-0000-4000-8000-0000000000ff";

fn cid() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn content(model: &str, desc: &str, intents: &[(&str, &[&str])]) -> Value {
    json!({
        "model_id": model,
        "description": desc,
        "intent": {"intents": intents.iter().map(|(id, phrases)| json!({
            "id": id, "description": format!("intent {id}"), "phrase": {"phrases": phrases}
        })).collect::<Vec<_>>()}
    })
}

fn yes_no(model: &str, desc: &str) -> Value {
    content(
        model,
        desc,
        &[
            ("yes", &["yes please", "yeah sure", "of course"]),
            ("no", &["no thanks", "nope", "not now"]),
        ],
    )
}

/// Asserts the adapter error body `{name, message, code (integer), status}`.
#[track_caller]
fn expect_adapter_error(r: &TestResponse, status: u16, name: &str) {
    assert_eq!(r.status, status, "body: {}", r.text);
    assert_eq!(r.body["name"], name, "body: {}", r.text);
    assert!(r.body["message"].is_string(), "body: {}", r.text);
    assert!(r.body["code"].is_i64(), "code is an integer: {}", r.text);
    assert_eq!(r.body["status"], status, "status mirrors HTTP: {}", r.text);
    assert!(
        r.body.get("error").is_none(),
        "not the standard envelope: {}",
        r.text
    );
}

async fn put(s: &TestServer, key: &str, id: &str, body: &Value) -> TestResponse {
    s.request(Method::PUT, &format!("/v1/adapters/ids/classifier/{id}"))
        .bearer(key)
        .json(body)
        .send()
        .await
}

/// Polls a version until training ended (bounded: 120 s).
async fn wait_trained(s: &TestServer, key: &str, id: &str, version: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let r = s
            .get(&format!(
                "/v1/adapters/ids/classifier/{id}/version/{version}"
            ))
            .bearer(key)
            .send()
            .await;
        r.expect(200);
        let st = r.body["training_state"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if st == "ready" || st == "failed" {
            return r.body.clone();
        }
        assert!(
            Instant::now() < deadline,
            "training did not end: {}",
            r.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn versioning_rules(s: TestServer) {
    let f = s.fixture().await;
    let key = &f.account_key;
    let id = cid();
    let v0 = put(&s, key, &id, &yes_no(LOGREG, "first")).await;
    v0.expect(201);
    assert_eq!(v0.body["version"], 0, "versions start at 0: {}", v0.text);
    assert_eq!(v0.body["classifier_id"], id);
    assert_eq!(v0.body["account_sid"], f.account_sid);
    assert!(v0.body["queued_at"].is_string() && v0.body["state_changed_at"].is_string());
    assert!(
        ["queued", "training", "ready"].contains(&v0.body["training_state"].as_str().unwrap()),
        "{}",
        v0.text
    );
    assert!(
        v0.body.get("failure_reason").is_none(),
        "no failure reason unless failed"
    );

    let again = put(&s, key, &id, &yes_no(LOGREG, "first")).await;
    again.expect(200);
    assert_eq!(again.body["version"], 0);
    assert_eq!(again.body["content_identity"], v0.body["content_identity"]);

    let v1 = put(&s, key, &id, &yes_no(LOGREG, "second")).await;
    v1.expect(201);
    assert_eq!(v1.body["version"], 1);
    assert_ne!(v1.body["content_identity"], v0.body["content_identity"]);
    // A different model_id is different content too.
    let v2 = put(&s, key, &id, &yes_no(CENTROID, "second")).await;
    v2.expect(201);
    assert_eq!(v2.body["version"], 2);
    // Going back to the first content resolves to version 0, nothing new recorded.
    let back = put(&s, key, &id, &yes_no(LOGREG, "first")).await;
    back.expect(200);
    assert_eq!(back.body["version"], 0);

    // Immutability: version 0 still holds its content after later saves and training.
    let ready0 = wait_trained(&s, key, &id, 0).await;
    assert_eq!(ready0["training_state"], "ready", "{ready0}");
    assert_eq!(ready0["description"], "first");
    assert_eq!(ready0["intent"], v0.body["intent"]);
    assert!(
        ready0["training_reason"]
            .as_str()
            .is_some_and(|r| r.contains("trained")),
        "{ready0}"
    );
    for v in [1, 2] {
        assert_eq!(
            wait_trained(&s, key, &id, v).await["training_state"],
            "ready"
        );
    }

    // The list: paged, version 0 first, entries without the reasons.
    let l = s
        .get(&format!("/v1/adapters/ids/classifier/{id}/version?limit=2"))
        .bearer(key)
        .send()
        .await;
    l.expect(200);
    assert_eq!(l.body["total"], 3);
    assert_eq!(l.body["has_more"], true);
    let items = l.body["items"].as_array().expect("items");
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["version"], 0);
    for i in items {
        assert!(
            i.get("training_reason").is_none() && i.get("failure_reason").is_none(),
            "{i}"
        );
        assert_eq!(i["training_state"], "ready");
    }
    let l2 = s
        .get(&format!(
            "/v1/adapters/ids/classifier/{id}/version?limit=2&offset=2"
        ))
        .bearer(key)
        .send()
        .await;
    l2.expect(200);
    assert_eq!(l2.body["items"][0]["version"], 2);

    // The classifier: newest version, serving the newest ready one.
    let g = s
        .get(&format!("/v1/adapters/ids/classifier/{id}"))
        .bearer(key)
        .send()
        .await;
    g.expect(200);
    assert_eq!(g.body["latest_version"], 2);
    assert_eq!(g.body["version_count"], 3);
    assert_eq!(g.body["serving_version"], 2);
    assert_eq!(g.body["latest"]["model_id"], CENTROID);

    // Predict: version 0 means the serving (newest ready) version; others pin.
    let p = s
        .post(&format!("/v1/adapters/ids/classifier/{id}/predict"))
        .bearer(key)
        .json(&json!({"text": "nope, not now", "version": 0}))
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["version"], 2);
    assert_eq!(p.body["intents"][0]["id"], "no");
    let sum: f64 = p.body["intents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["confidence"].as_f64().unwrap())
        .sum();
    assert!((sum - 1.0).abs() < 1e-3, "confidences sum to 1: {}", p.text);
    let p1 = s
        .post(&format!("/v1/adapters/ids/classifier/{id}/predict"))
        .bearer(key)
        .json(&json!({"text": "yeah", "version": 1}))
        .send()
        .await;
    p1.expect(200);
    assert_eq!(p1.body["version"], 1);
    assert_eq!(p1.body["intents"][0]["id"], "yes");

    // The service entry the call runtime uses gives the same answer.
    let lib = s
        .state
        .adapters
        .classifiers
        .predict(&f.account_sid, &id, 0, "nope, not now")
        .await
        .expect("predict");
    assert_eq!(lib.intents[0].0, "no");
    // The weights are in the store (survive a restart): a fresh model loads from them.
    let stored = s
        .store
        .classifier_model(&f.account_sid, &id, 1)
        .await
        .expect("store")
        .expect("model stored");
    let fresh = Model::from_json(&stored).expect("loads");
    assert_eq!(fresh.predict("yeah sure")[0].0, "yes");

    // Another account does not see this classifier.
    let other = s.fixture_named("b").await;
    let r = s
        .get(&format!("/v1/adapters/ids/classifier/{id}"))
        .bearer(&other.account_key)
        .send()
        .await;
    expect_adapter_error(&r, 404, "classifier_not_found");
}

async fn errors_use_the_adapter_body(s: TestServer) {
    let f = s.fixture().await;
    let id = cid();
    // 400: path id not a UUID; invalid bodies.
    expect_adapter_error(
        &put(&s, &f.account_key, "not-a-uuid", &yes_no(LOGREG, "x")).await,
        400,
        "invalid_path",
    );
    expect_adapter_error(
        &put(&s, &f.account_key, &id, &content(LOGREG, "x", &[])).await,
        400,
        "invalid_body",
    );
    expect_adapter_error(
        &put(
            &s,
            &f.account_key,
            &id,
            &content(LOGREG, "x", &[("a", &["hi"]), ("a", &["ho"])]),
        )
        .await,
        400,
        "invalid_body",
    );
    expect_adapter_error(
        &put(
            &s,
            &f.account_key,
            &id,
            &content(LOGREG, "x", &[("a", &[])]),
        )
        .await,
        400,
        "invalid_body",
    );
    let mut unknown_field = yes_no(LOGREG, "x");
    unknown_field["extra"] = json!(1);
    expect_adapter_error(
        &put(&s, &f.account_key, &id, &unknown_field).await,
        400,
        "invalid_body",
    );
    let mut bad_model = yes_no(LOGREG, "x");
    bad_model["model_id"] = json!("not-a-uuid");
    expect_adapter_error(
        &put(&s, &f.account_key, &id, &bad_model).await,
        400,
        "invalid_body",
    );
    // Superuser without X-Account-Sid.
    expect_adapter_error(
        &put(&s, &s.superuser_token, &id, &yes_no(LOGREG, "x")).await,
        400,
        "account_required",
    );
    // 401.
    let r = s
        .request(Method::PUT, &format!("/v1/adapters/ids/classifier/{id}"))
        .json(&yes_no(LOGREG, "x"))
        .send()
        .await;
    expect_adapter_error(&r, 401, "unauthenticated");
    expect_adapter_error(
        &put(&s, "csk_bogus", &id, &yes_no(LOGREG, "x")).await,
        401,
        "unauthenticated",
    );
    // 403: a viewer cannot write; a key of another tenant cannot name this account.
    s.create_user(
        &f.account_sid,
        "viewer@example.test",
        "viewer-password",
        &["viewer"],
    )
    .await;
    let viewer = s.login("viewer@example.test", "viewer-password").await;
    expect_adapter_error(
        &put(&s, &viewer, &id, &yes_no(LOGREG, "x")).await,
        403,
        "forbidden",
    );
    let other = s.fixture_named("b").await;
    let r = s
        .request(Method::PUT, &format!("/v1/adapters/ids/classifier/{id}"))
        .bearer(&other.tenant_key)
        .header("X-Account-Sid", &f.account_sid)
        .json(&yes_no(LOGREG, "x"))
        .send()
        .await;
    expect_adapter_error(&r, 403, "scope_conflict");
    // 404: unknown model_id; unknown account declared by the superuser; unknown classifier/version.
    let mut unknown_model = yes_no(LOGREG, "x");
    unknown_model["model_id"] = json!(uuid::Uuid::new_v4().to_string());
    expect_adapter_error(
        &put(&s, &f.account_key, &id, &unknown_model).await,
        404,
        "model_not_found",
    );
    let r = s
        .request(Method::PUT, &format!("/v1/adapters/ids/classifier/{id}"))
        .bearer(&s.superuser_token)
        .header("X-Account-Sid", "acc_doesnotexist")
        .json(&yes_no(LOGREG, "x"))
        .send()
        .await;
    expect_adapter_error(&r, 404, "account_not_found");
    let r = s
        .get(&format!("/v1/adapters/ids/classifier/{id}"))
        .bearer(&f.account_key)
        .send()
        .await;
    expect_adapter_error(&r, 404, "classifier_not_found");
    put(&s, &f.account_key, &id, &yes_no(LOGREG, "x"))
        .await
        .expect(201);
    let r = s
        .get(&format!("/v1/adapters/ids/classifier/{id}/version/7"))
        .bearer(&f.account_key)
        .send()
        .await;
    expect_adapter_error(&r, 404, "classifier_version_not_found");
    let r = s
        .post(&format!("/v1/adapters/ids/classifier/{id}/predict"))
        .bearer(&f.account_key)
        .json(&json!({"text": "yes", "version": 7}))
        .send()
        .await;
    expect_adapter_error(&r, 404, "classifier_version_not_found");
    // The superuser declaring the account reaches the same classifier.
    let r = s
        .get(&format!("/v1/adapters/ids/classifier/{id}"))
        .bearer(&s.superuser_token)
        .header("X-Account-Sid", &f.account_sid)
        .send()
        .await;
    r.expect(200);
    // Page size above 500 is 400.
    let r = s
        .get(&format!(
            "/v1/adapters/ids/classifier/{id}/version?limit=501"
        ))
        .bearer(&f.account_key)
        .send()
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.body["status"], 400);
}

/// Many parallel PUTs with distinct content: every one ends 201 or 409, recorded
/// versions are dense and unique; parallel PUTs of one content record it once.
async fn concurrent_saves(s: TestServer) {
    let f = s.fixture().await;
    let id = cid();
    let n = 24;
    let mut tasks = Vec::new();
    for i in 0..n {
        let client = s.client.clone();
        let url = format!("{}/v1/adapters/ids/classifier/{id}", s.base_url);
        let key = f.account_key.clone();
        let body = yes_no(LOGREG, &format!("content {i}"));
        tasks.push(tokio::spawn(async move {
            let r = client
                .put(url)
                .bearer_auth(key)
                .json(&body)
                .send()
                .await
                .expect("request");
            let status = r.status().as_u16();
            let v: Value = r.json().await.expect("json body");
            (status, v)
        }));
    }
    let mut created = Vec::new();
    let mut conflicts = 0;
    for t in tasks {
        let (status, v) = t.await.expect("task");
        match status {
            201 => created.push(v["version"].as_i64().expect("version")),
            409 => {
                assert_eq!(v["name"], "concurrent_save", "{v}");
                assert_eq!(v["status"], 409);
                conflicts += 1;
            }
            other => panic!("unexpected status {other}: {v}"),
        }
    }
    println!(
        "{n} parallel saves: {} recorded (201), {conflicts} answered 409",
        created.len()
    );
    created.sort();
    assert_eq!(
        created,
        (0..created.len() as i64).collect::<Vec<_>>(),
        "dense and unique"
    );
    assert_eq!(created.len() + conflicts, n);
    let l = s
        .get(&format!(
            "/v1/adapters/ids/classifier/{id}/version?limit=500"
        ))
        .bearer(&f.account_key)
        .send()
        .await;
    l.expect(200);
    assert_eq!(l.body["total"], created.len());
    let mut hashes: Vec<String> = l.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["content_identity"].as_str().unwrap().to_string())
        .collect();
    hashes.sort();
    hashes.dedup();
    assert_eq!(
        hashes.len(),
        created.len(),
        "no two versions share a content identity"
    );
    // The 409s are safe to repeat: retrying every conflicted content serially records it.
    for i in 0..n {
        let r = put(
            &s,
            &f.account_key,
            &id,
            &yes_no(LOGREG, &format!("content {i}")),
        )
        .await;
        assert!(r.status == 200 || r.status == 201, "{}", r.text);
    }
    let g = s
        .get(&format!("/v1/adapters/ids/classifier/{id}"))
        .bearer(&f.account_key)
        .send()
        .await;
    assert_eq!(g.body["version_count"], n, "{}", g.text);

    // Identical content in parallel: one version.
    let id2 = cid();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let client = s.client.clone();
        let url = format!("{}/v1/adapters/ids/classifier/{id2}", s.base_url);
        let key = f.account_key.clone();
        tasks.push(tokio::spawn(async move {
            let r = client
                .put(url)
                .bearer_auth(key)
                .json(&yes_no(CENTROID, "same"))
                .send()
                .await
                .expect("request");
            let status = r.status().as_u16();
            let v: Value = r.json().await.expect("json");
            (status, v)
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        let (status, v) = t.await.expect("task");
        assert!(status == 200 || status == 201, "{status}: {v}");
        assert_eq!(v["version"], 0, "{v}");
        statuses.push(status);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
}

/// 5 intents × 20 template-generated phrases; train on 15 per intent, test on the 5
/// held out. Reports accuracy and training time of both local algorithms.
fn generated_data() -> Vec<(&'static str, Vec<String>, Vec<String>)> {
    let openers = ["", "hello, ", "hi there, ", "excuse me, "];
    let cores: [(&str, [&str; 5]); 5] = [
        (
            "book_appointment",
            [
                "i would like to book an appointment",
                "can i schedule a visit for next week",
                "i want to make a reservation",
                "please book me in for tomorrow",
                "is there a free slot to see the doctor",
            ],
        ),
        (
            "cancel_appointment",
            [
                "i need to cancel my appointment",
                "please cancel my booking for tomorrow",
                "i cannot make it so cancel the visit",
                "drop my reservation please",
                "i want to call off my appointment",
            ],
        ),
        (
            "opening_hours",
            [
                "when are you open",
                "what are your opening hours",
                "are you open on saturday",
                "what time do you close today",
                "how late are you open",
            ],
        ),
        (
            "speak_to_human",
            [
                "let me talk to a real person",
                "connect me to an operator",
                "i want to speak with someone",
                "transfer me to a human agent",
                "can i talk to a representative",
            ],
        ),
        (
            "billing_question",
            [
                "i have a question about my bill",
                "why was i charged twice",
                "my invoice looks wrong",
                "how do i pay my bill",
                "there is an error on my payment",
            ],
        ),
    ];
    cores
        .iter()
        .map(|(intent, phrases)| {
            let mut train = Vec::new();
            let mut test = Vec::new();
            for (i, core) in phrases.iter().enumerate() {
                for (j, opener) in openers.iter().enumerate() {
                    let text = format!("{opener}{core}");
                    // Hold out one opener per core, a different one for each core.
                    if j == (i + 1) % openers.len() {
                        test.push(text);
                    } else {
                        train.push(text);
                    }
                }
            }
            (*intent, train, test)
        })
        .collect()
}

async fn training_and_prediction(s: TestServer) {
    let f = s.fixture().await;
    let data = generated_data();
    for model in [LOGREG, CENTROID] {
        let id = cid();
        let body = json!({
            "model_id": model,
            "description": "generated front-desk intents",
            "intent": {"intents": data.iter().map(|(intent, train, _)| json!({
                "id": intent, "description": "", "phrase": {"phrases": train}
            })).collect::<Vec<_>>()}
        });
        assert_eq!(data.iter().map(|d| d.1.len()).sum::<usize>(), 75);
        let started = Instant::now();
        put(&s, &f.account_key, &id, &body).await.expect(201);
        let v = wait_trained(&s, &f.account_key, &id, 0).await;
        let wall = started.elapsed();
        assert_eq!(v["training_state"], "ready", "{v}");
        let mut correct = 0;
        let mut total = 0;
        for (intent, _, test) in &data {
            for text in test {
                let p = s
                    .post(&format!("/v1/adapters/ids/classifier/{id}/predict"))
                    .bearer(&f.account_key)
                    .json(&json!({"text": text}))
                    .send()
                    .await;
                p.expect(200);
                assert_eq!(p.body["intents"].as_array().map(Vec::len), Some(5));
                total += 1;
                if p.body["intents"][0]["id"] == *intent {
                    correct += 1;
                }
            }
        }
        let accuracy = correct as f64 / total as f64;
        println!(
            "model {model}: held-out accuracy {correct}/{total} = {accuracy:.2}; {}; PUT→ready wall {} ms",
            v["training_reason"].as_str().unwrap_or(""),
            wall.as_millis()
        );
        assert_eq!(total, 25);
        assert!(accuracy >= 0.8, "held-out accuracy {accuracy} for {model}");
    }
}

/// The remote catalog entry: its upstream failing is 502 and nothing is recorded; a
/// working upstream trains and predicts; its purge runs on the tenant hard delete.
async fn remote_upstream(s: TestServer) {
    use axum::{
        Json, Router,
        http::StatusCode,
        routing::{delete, post},
    };
    let f = s.fixture().await;
    let id = cid();
    // No remote service configured: 502.
    expect_adapter_error(
        &put(&s, &f.account_key, &id, &yes_no(REMOTE, "r")).await,
        502,
        "upstream_error",
    );
    // A remote service answering 500: 502.
    let failing = Router::new().route(
        "/train",
        post(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let failing_url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, failing).await.ok() });
    s.state.adapters.configure(&AdaptersConfig {
        remote_classifier_url: Some(failing_url),
        ..Default::default()
    });
    let r = put(&s, &f.account_key, &id, &yes_no(REMOTE, "r")).await;
    expect_adapter_error(&r, 502, "upstream_error");
    assert!(
        r.body["message"].as_str().unwrap().contains("500"),
        "{}",
        r.text
    );
    let g = s
        .get(&format!("/v1/adapters/ids/classifier/{id}"))
        .bearer(&f.account_key)
        .send()
        .await;
    expect_adapter_error(&g, 404, "classifier_not_found");
    // A closed port: 502.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let closed_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    s.state.adapters.configure(&AdaptersConfig {
        remote_classifier_url: Some(closed_url),
        ..Default::default()
    });
    expect_adapter_error(
        &put(&s, &f.account_key, &id, &yes_no(REMOTE, "r")).await,
        502,
        "upstream_error",
    );

    // A working remote service.
    let purged = std::sync::Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let purged2 = purged.clone();
    let working = Router::new()
        .route("/train", post(|Json(b): Json<Value>| async move {
            assert!(b["content_hash"].is_string());
            Json(json!({"accepted": true}))
        }))
        .route("/predict", post(|Json(b): Json<Value>| async move {
            let yes = b["text"].as_str().unwrap_or("").contains("yes");
            let (a, b2) = if yes { (0.9, 0.1) } else { (0.2, 0.8) };
            Json(json!({"intents": [{"id": "no", "confidence": b2}, {"id": "yes", "confidence": a}]}))
        }))
        .route("/accounts/{sid}", delete(move |axum::extract::Path(sid): axum::extract::Path<String>| async move {
            purged2.lock().push(sid);
            StatusCode::NO_CONTENT
        }));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, working).await.ok() });
    s.state.adapters.configure(&AdaptersConfig {
        remote_classifier_url: Some(url),
        ..Default::default()
    });
    let r = put(&s, &f.account_key, &id, &yes_no(REMOTE, "r")).await;
    r.expect(201);
    assert_eq!(r.body["version"], 0, "failed saves recorded nothing");
    assert_eq!(
        wait_trained(&s, &f.account_key, &id, 0).await["training_state"],
        "ready"
    );
    let p = s
        .post(&format!("/v1/adapters/ids/classifier/{id}/predict"))
        .bearer(&f.account_key)
        .json(&json!({"text": "yes indeed"}))
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["intents"][0]["id"], "yes", "{}", p.text);

    // Tenant hard delete: the remote purge runs and the classifier rows are gone.
    s.su(
        Method::DELETE,
        &format!("/v1/internal/tenant/{}?hard=true", f.tenant_sid),
    )
    .send()
    .await
    .expect(204);
    assert_eq!(*purged.lock(), vec![f.account_sid.clone()]);
    assert!(
        s.store
            .classifier_latest(&f.account_sid, &id)
            .await
            .expect("store")
            .is_none()
    );
}

/// A failing remote purge aborts the hard delete with nothing removed.
async fn failing_remote_purge_aborts_tenant_delete(s: TestServer) {
    use axum::{Router, http::StatusCode, routing::delete};
    let f = s.fixture().await;
    let id = cid();
    put(&s, &f.account_key, &id, &yes_no(LOGREG, "local"))
        .await
        .expect(201);
    let failing = Router::new().route(
        "/accounts/{sid}",
        delete(|| async { StatusCode::SERVICE_UNAVAILABLE }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, failing).await.ok() });
    s.state.adapters.configure(&AdaptersConfig {
        remote_classifier_url: Some(url),
        ..Default::default()
    });
    let r = s
        .su(
            Method::DELETE,
            &format!("/v1/internal/tenant/{}?hard=true", f.tenant_sid),
        )
        .send()
        .await;
    assert_eq!(r.status, 500, "{}", r.text);
    assert!(
        s.store
            .classifier_latest(&f.account_sid, &id)
            .await
            .expect("store")
            .is_some(),
        "nothing removed"
    );
    // Without the remote service the purge succeeds and the cascade removes the rows.
    s.state.adapters.configure(&AdaptersConfig::default());
    s.su(
        Method::DELETE,
        &format!("/v1/internal/tenant/{}?hard=true", f.tenant_sid),
    )
    .send()
    .await
    .expect(204);
    assert!(
        s.store
            .classifier_latest(&f.account_sid, &id)
            .await
            .expect("store")
            .is_none()
    );
}

async fn classifier_routes_in_openapi(s: TestServer) {
    let r = s.get("/openapi.json").send().await;
    r.expect(200);
    let paths = &r.body["paths"];
    let put = &paths["/v1/adapters/ids/classifier/{id}"]["put"];
    for code in [
        "200", "201", "400", "401", "403", "404", "409", "500", "502",
    ] {
        assert!(put["responses"][code].is_object(), "PUT lacks {code}");
    }
    assert!(paths["/v1/adapters/ids/classifier/{id}"]["get"].is_object());
    assert!(paths["/v1/adapters/ids/classifier/{id}/version"]["get"].is_object());
    assert!(paths["/v1/adapters/ids/classifier/{id}/version/{version}"]["get"].is_object());
    assert!(paths["/v1/adapters/ids/classifier/{id}/predict"]["post"].is_object());
    assert!(r.body["components"]["schemas"]["AdapterErrorBody"].is_object());
}

/// A store failure is 500 in the adapter body (the database is closed under the server).
async fn internal_error_uses_the_adapter_body(s: TestServer) {
    let f = s.fixture().await;
    let id = cid();
    put(&s, &f.account_key, &id, &yes_no(LOGREG, "x"))
        .await
        .expect(201);
    s.store.close().await;
    let r = put(&s, &f.account_key, &id, &yes_no(LOGREG, "y")).await;
    expect_adapter_error(&r, 500, "internal_error");
}

/// A process that dies mid-training leaves its version `training`; the next process's
/// dispatcher puts it back in the queue and trains it (weights and queue live in the store).
async fn interrupted_training_resumes_after_restart(s: TestServer) {
    use callsmith_domain::{adapters::Adapters, store::NewClassifierVersion};
    let f = s.fixture().await;
    let id = cid();
    let intents = json!([
        {"id": "yes", "description": "", "phrase": {"phrases": ["yes please", "sure"]}},
        {"id": "no", "description": "", "phrase": {"phrases": ["no thanks", "nope"]}}
    ])
    .to_string();
    let new = NewClassifierVersion {
        account_sid: &f.account_sid,
        classifier_id: &id,
        version: 0,
        model_id: LOGREG,
        description: "left behind",
        intents: &intents,
        content_hash: "h0",
        content_identity: "i0",
    };
    s.store.classifier_insert(&new).await.expect("insert");
    assert!(
        s.store
            .classifier_claim(&f.account_sid, &id, 0)
            .await
            .expect("claim")
    );
    assert_eq!(
        s.store
            .classifier_version(&f.account_sid, &id, 0)
            .await
            .unwrap()
            .unwrap()
            .training_state,
        "training"
    );
    // "Restart": a fresh adapter service over the same database.
    let restarted = Adapters::new(s.store.clone(), AdaptersConfig::default());
    std::sync::Arc::new(restarted).classifiers.start();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = s
            .store
            .classifier_version(&f.account_sid, &id, 0)
            .await
            .unwrap()
            .unwrap();
        if r.training_state == "ready" {
            assert!(r.training_reason.is_some_and(|t| t.contains("trained")));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "interrupted training never resumed: {}",
            r.training_state
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let p = s
        .state
        .adapters
        .classifiers
        .predict(&f.account_sid, &id, 0, "nope")
        .await
        .expect("predict");
    assert_eq!(p.intents[0].0, "no");
}

both_backends!(
    interrupted_training_resumes_after_restart,
    internal_error_uses_the_adapter_body,
    versioning_rules,
    errors_use_the_adapter_body,
    concurrent_saves,
    training_and_prediction,
    remote_upstream,
    failing_remote_purge_aborts_tenant_delete,
    classifier_routes_in_openapi
);
