//! The recognition model catalog and POST /v1/adapters/stt/{engine}/run over real HTTP
//! on SQLite and PostgreSQL. Runs go to the real local recognition node
//! (media/speech-node/server.py) with speech synthesised by flite.

use std::{
    process::{Child, Command},
    time::{Duration, Instant},
};

use callsmith_control::testing::{TestDb, TestServer};
use callsmith_domain::catalog::SttConfig;
use callsmith_media::stt::{SttNodeConfig, SttProtocol};
use reqwest::{
    Method,
    multipart::{Form, Part},
};
use serde_json::{Value, json};

/// Generates `mod $name { sqlite, postgres }` running `async fn $name(TestDb)`.
macro_rules! both {
    ($($name:ident),*) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() { super::$name(callsmith_control::testing::TestDb::Sqlite).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() { super::$name(callsmith_control::testing::TestDb::Postgres).await }
        }
    )*};
}

async fn server(db: TestDb, engines: Vec<(&str, Vec<SttNodeConfig>)>) -> TestServer {
    let engines = engines
        .into_iter()
        .map(|(e, n)| (e.to_string(), n))
        .collect();
    TestServer::start_with(db, move |s| {
        s.stt = SttConfig {
            catalog_path: None,
            engines,
        }
    })
    .await
}

fn options(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}:{}",
                i["engine"].as_str().unwrap(),
                i["language"].as_str().unwrap()
            )
        })
        .collect()
}

async fn catalog_filters(db: TestDb) {
    let s = server(db, vec![]).await;
    let f = s.fixture().await;
    let get = |q: &str, token: &str| {
        s.get(&format!("/v1/adapters/stt/info/model{q}"))
            .bearer(token)
            .send()
    };
    // Ungated engines only while global_stt is off for the account.
    let all = get("", &f.account_key).await;
    all.expect(200);
    assert_eq!(
        options(&all.body),
        vec!["whisper:en-US", "whisper:en", "vosk:en-US", "vosk:de-DE"]
    );
    assert_eq!(all.body["total"], 4);
    let first = &all.body["items"][0];
    for field in [
        "engine",
        "language",
        "language_name",
        "language_local_name",
        "model",
        "model_name",
        "is_default_model",
        "metadata",
    ] {
        assert!(first.get(field).is_some(), "{field} missing: {first}");
    }
    for field in [
        "auto_punctuation",
        "diarization",
        "model_adaptation",
        "word_level_confidence",
        "profanity_filter",
        "spoken_punctuation",
        "spoken_emojis",
    ] {
        assert!(
            first["metadata"][field].is_boolean(),
            "metadata.{field}: {first}"
        );
    }
    assert_eq!(first["metadata"]["launch_readiness"], "GA");
    assert_eq!(
        all.body["items"][2]["model_name"], "",
        "vosk has no model names"
    );
    assert_eq!(
        get("?engine=deepgram", &f.account_key).await.body["total"],
        0,
        "gated engine is invisible"
    );
    // The superuser without an account sees everything.
    let su = s
        .su(Method::GET, "/v1/adapters/stt/info/model")
        .send()
        .await;
    assert_eq!(su.body["total"], 8);
    // Bare language: the whole family; locale: that locale plus engines listing the bare language.
    assert_eq!(
        options(&get("?language=en", &f.account_key).await.body),
        vec!["whisper:en-US", "whisper:en", "vosk:en-US"]
    );
    assert_eq!(
        options(&get("?language=en-GB", &f.account_key).await.body),
        vec!["whisper:en"]
    );
    assert_eq!(
        options(&get("?language=en-us", &f.account_key).await.body),
        vec!["whisper:en-US", "whisper:en", "vosk:en-US"]
    );
    assert_eq!(
        options(&get("?language=de", &f.account_key).await.body),
        vec!["vosk:de-DE"]
    );
    // Filters combine with AND; unmatched yields an empty page.
    assert_eq!(
        options(&get("?engine=vosk&language=en", &f.account_key).await.body),
        vec!["vosk:en-US"]
    );
    assert_eq!(
        options(
            &get("?model=tiny.en&language=en-US", &f.account_key)
                .await
                .body
        ),
        vec!["whisper:en-US", "whisper:en"]
    );
    let none = get("?language=fr", &f.account_key).await;
    none.expect(200);
    assert_eq!(none.body["total"], 0);
    assert_eq!(none.body["items"], json!([]));
    assert_eq!(
        get("?engine=vosk&model=tiny.en", &f.account_key).await.body["total"],
        0
    );
    // Paging.
    let p = get("?limit=2&offset=1", &f.account_key).await;
    assert_eq!(options(&p.body), vec!["whisper:en", "vosk:en-US"]);
    assert_eq!(
        (p.body["total"].clone(), p.body["has_more"].clone()),
        (json!(4), json!(true))
    );
    get("?limit=501", &f.account_key)
        .await
        .expect_error(400, "invalid_query");
    get("?colour=blue", &f.account_key)
        .await
        .expect_error(400, "invalid_query");
    // The tenant's global_stt rule reveals deepgram, its es entry matches the es family.
    s.su(
        Method::PATCH,
        &format!(
            "/v1/internal/tenant/{}/feature-flag/global_stt",
            f.tenant_sid
        ),
    )
    .json(&json!({"enabled": true}))
    .send()
    .await
    .expect(200);
    assert_eq!(
        options(&get("?language=en-GB", &f.admin_session).await.body),
        vec!["whisper:en", "deepgram:en-GB"]
    );
    assert_eq!(
        options(&get("?language=es-MX", &f.account_key).await.body),
        vec!["deepgram:es"]
    );
    // 401, 403.
    s.get("/v1/adapters/stt/info/model")
        .send()
        .await
        .expect_error(401, "unauthenticated");
    let other = s.fixture_named("b").await;
    get("", &f.account_key).await.expect(200);
    s.get("/v1/adapters/stt/info/model")
        .bearer(&f.account_key)
        .header("X-Account-Sid", &other.account_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");
}

fn run_body(items: Value) -> Value {
    json!({"requests": items, "is_test": true})
}

async fn run_errors_without_node(db: TestDb) {
    // whisper points at a port nothing listens on; vosk has no node configured.
    let port = free_port();
    let s = server(db, vec![("whisper", vec![vosk_node("down", port)])]).await;
    let f = s.fixture().await;
    let run = |engine: &str, body: Value| {
        s.post(&format!("/v1/adapters/stt/{engine}/run"))
            .bearer(&f.account_key)
            .json(&body)
            .send()
    };
    let item = json!([{"type": "source", "params": {"language": "en-US"}, "source": {"url": "audio/x/y.wav"}}]);
    run("whisper", run_body(item.clone()))
        .await
        .expect_error(503, "no_ready_node");
    run("vosk", run_body(item.clone()))
        .await
        .expect_error(503, "no_ready_node");
    run("nosuch", run_body(item.clone()))
        .await
        .expect_error(404, "engine_not_found");
    // Gated engines read as absent for callers whose flags withhold them.
    run("deepgram", run_body(item.clone()))
        .await
        .expect_error(404, "engine_not_found");
    // Validation failures in the gateway envelope.
    for (body, field) in [
        (
            json!([{"type": "stream", "source": {"url": "a"}}]),
            "requests[0].type",
        ),
        (
            json!([{"type": "source", "params": {"language": "en-US"}}]),
            "requests[0].source.url",
        ),
        (
            json!([{"type": "source", "params": {"language": "fr-FR"}, "source": {"url": "a"}}]),
            "requests[0].params.language",
        ),
        (
            json!([{"type": "source", "params": {"language": "en-US", "model": "large"}, "source": {"url": "a"}}]),
            "requests[0].params.model",
        ),
        (json!([]), "requests"),
    ] {
        let r = run("whisper", run_body(body)).await;
        r.expect(400);
        assert_eq!(r.body["code"], 3, "{}", r.text);
        assert!(
            r.body["message"].as_str().unwrap().starts_with(field),
            "{}",
            r.text
        );
        assert_eq!(r.body["details"][0]["field_violations"][0]["field"], field);
    }
    // A body that does not parse is a validation failure in the same envelope, as the
    // OpenAPI entry documents for 400.
    for raw in [
        "{not json",
        r#"{"requests": "x"}"#,
        r#"{"requests": [], "colour": "blue"}"#,
        r#"{"requests": [{"type": "source", "size": 1}]}"#,
    ] {
        let r = s
            .post("/v1/adapters/stt/whisper/run")
            .bearer(&f.account_key)
            .raw_json(raw)
            .send()
            .await;
        r.expect(400);
        let mut keys: Vec<_> = r.body.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["code", "details", "message"], "{raw}: {}", r.text);
        assert_eq!(r.body["code"], 3, "{raw}: {}", r.text);
        assert!(!r.body["message"].as_str().unwrap().is_empty());
        assert_eq!(
            r.body["details"],
            json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "invalid_body", "domain": "callsmith"}]),
            "{raw}"
        );
    }
    let doc = s.get("/openapi.json").send().await;
    assert_eq!(
        doc.body["paths"]["/v1/adapters/stt/{engine}/run"]["post"]["responses"]["400"]["content"]["application/json"]
            ["schema"]["$ref"],
        "#/components/schemas/GatewayError"
    );
    let gateway = &doc.body["components"]["schemas"]["GatewayError"];
    let mut documented: Vec<_> = gateway["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    documented.sort();
    assert_eq!(documented, ["code", "details", "message"]);
    s.post("/v1/adapters/stt/whisper/run")
        .json(&run_body(item.clone()))
        .send()
        .await
        .expect_error(401, "unauthenticated");
    let other = s.fixture_named("b").await;
    s.post("/v1/adapters/stt/whisper/run")
        .bearer(&f.account_key)
        .header("X-Account-Sid", &other.account_sid)
        .json(&run_body(item))
        .send()
        .await
        .expect_error(403, "scope_conflict");
}

/// A "node" whose readiness probe answers 200 but which drops every stream: the
/// selected node fails to serve the recognition.
async fn broken_node() -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                if String::from_utf8_lossy(&buf[..n]).starts_with("GET /ready") {
                    let _ = sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nready\n").await;
                }
            });
        }
    });
    port
}

async fn run_node_failure_is_502(db: TestDb) {
    let port = broken_node().await;
    let s = server(db, vec![("whisper", vec![vosk_node("broken", port)])]).await;
    let f = s.fixture().await;
    let a = upload_speech(&s, &f.account_key, "hello").await;
    let r = s
        .post("/v1/adapters/stt/whisper/run")
        .bearer(&f.account_key)
        .json(&run_body(
            json!([{"type": "source", "params": {"language": "en-US"}, "source": {"url": a}}]),
        ))
        .send()
        .await;
    r.expect_error(502, "stt_node_failed");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn vosk_node(name: &str, port: u16) -> SttNodeConfig {
    SttNodeConfig {
        name: name.into(),
        url: format!("ws://127.0.0.1:{port}"),
        protocol: SttProtocol::Vosk,
        ready_url: Some(format!("http://127.0.0.1:{port}/ready")),
        api_key: None,
        api_key_env: None,
        ca_file: None,
        utterance_end_ms: None,
        turn_patience: false,
    }
}

/// The real recognition node on a free loopback port (stopped on drop).
struct SttNode {
    port: u16,
    child: Child,
}

impl Drop for SttNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl SttNode {
    async fn start() -> SttNode {
        let python = std::env::var("CALLSMITH_STT_PYTHON")
            .ok()
            .filter(|p| !p.is_empty())
            .expect("CALLSMITH_STT_PYTHON is not set: run `eval \"$(bash scripts/test-deps.sh)\"`");
        let port = free_port();
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../media/speech-node/server.py"
        );
        let child = Command::new(python)
            .args([
                script,
                "--port",
                &port.to_string(),
                "--exit-with-parent",
                "--partial-interval",
                "0.5",
                // One Whisper thread: as fast as two on a loaded 2-core machine, and the
                // test's other processes keep a core.
                "--threads",
                "1",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("start the STT node");
        let mut node = SttNode { port, child };
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let ok = client
                .get(format!("http://127.0.0.1:{port}/ready"))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            if ok {
                break;
            }
            // A node that died (bad path, missing model) fails the test now, not in 120 s.
            if let Ok(Some(status)) = node.child.try_wait() {
                panic!("the STT node exited before it was ready: {status}");
            }
            assert!(Instant::now() < deadline, "STT node not ready within 120 s");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        node
    }
}

/// Speech by flite (8 kHz), padded with silence by sox, uploaded as an audio file.
async fn upload_speech(s: &TestServer, token: &str, text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.wav");
    let padded = dir.path().join("padded.wav");
    let out = Command::new("flite")
        .args(["-t", text, "-o"])
        .arg(&raw)
        .output()
        .expect("flite is installed");
    assert!(
        out.status.success(),
        "flite: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new("sox")
        .arg(&raw)
        .arg(&padded)
        .args(["pad", "0.3", "1.0"])
        .output()
        .expect("sox is installed");
    assert!(
        out.status.success(),
        "sox: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let form = Form::new().part(
        "file",
        Part::bytes(std::fs::read(&padded).unwrap()).file_name("speech.wav"),
    );
    let r = s
        .post("/v1/audio")
        .bearer(token)
        .map(|b| b.multipart(form))
        .send()
        .await;
    r.expect(201);
    r.str("id")
}

fn recall(expected: &str, got: &str) -> f64 {
    let norm = callsmith_media::stt::normalize_transcript;
    let got = norm(got);
    let got: Vec<&str> = got.split(' ').collect();
    let exp = norm(expected);
    let words: Vec<&str> = exp.split(' ').collect();
    words.iter().filter(|w| got.contains(w)).count() as f64 / words.len() as f64
}

const SENTENCE: &str = "I would like to check the balance of my account";

/// Serialises the tests that run the recognition node across test processes: two
/// whisper nodes transcribing at once on a 2-core machine miss the client's deadlines.
async fn node_lock() -> std::fs::File {
    tokio::task::spawn_blocking(|| {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(std::env::temp_dir().join("callsmith-control-stt-node.lock"))
            .expect("lock file");
        f.lock().expect("lock");
        f
    })
    .await
    .expect("lock task")
}

async fn run_on_real_node(db: TestDb) {
    let _serial = node_lock().await;
    let node = SttNode::start().await;
    let s = server(
        db,
        vec![("whisper", vec![vosk_node("whisper-1", node.port)])],
    )
    .await;
    let f = s.fixture().await;
    let audio = upload_speech(&s, &f.account_key, SENTENCE).await;
    let link = s
        .get(&format!("/v1/audio/{audio}/signed-link?ttl=600"))
        .bearer(&f.account_key)
        .send()
        .await;
    link.expect(200);
    let signed = link.str("signed_url");
    let short = upload_speech(&s, &f.account_key, "hello").await;
    let stored_uri = s
        .get(&format!("/v1/audio/{short}"))
        .bearer(&f.account_key)
        .send()
        .await
        .str("url");
    let other = s.fixture_named("b").await;
    let foreign = upload_speech(&s, &other.account_key, "hello").await;
    let r = s
        .post("/v1/adapters/stt/whisper/run")
        .bearer(&f.account_key)
        .json(&run_body(json!([
            {"type": "source", "params": {"language": "en-US"}, "source": {"url": audio}},
            {"type": "source", "params": {"language": "en-US", "is_realtime_processing": true}, "source": {"url": signed}},
            {"type": "source", "params": {"language": "en"}, "source": {"url": stored_uri}},
            {"type": "source", "params": {}, "source": {"url": foreign}},
            {"type": "source", "params": {}, "source": {"url": "https://example.com/a.wav"}},
        ])))
        // Three recognitions on a shared 2-core machine: more than the harness's 30 s.
        .map(|b| b.timeout(Duration::from_secs(300)))
        .send()
        .await;
    r.expect(200);
    let items = r.body["responses"].as_array().unwrap();
    assert_eq!(items.len(), 5, "one response item per request item");
    for (i, item) in items.iter().take(3).enumerate() {
        assert_eq!(item["type"], "source");
        let src = &item["source"];
        assert_eq!(src["error"], "", "item {i}: {src}");
        assert_eq!(src["model"], "tiny.en");
        let t = src["transcript"].as_str().unwrap();
        let said = if i == 2 { "hello" } else { SENTENCE };
        assert!(
            recall(said, t) >= 0.75,
            "item {i} recognised {t:?} for {said:?}"
        );
    }
    assert_eq!(items[0]["source"]["id"], audio.as_str());
    assert_eq!(
        items[0]["source"]["interim_results"],
        json!([]),
        "batch mode collects no interim results"
    );
    // Real-time mode: interim results with int64 decimal strings, ending in a final one.
    let interim = items[1]["source"]["interim_results"].as_array().unwrap();
    assert!(!interim.is_empty(), "real-time mode collects results");
    assert!(interim.iter().any(|r| r["is_final"] == true), "{interim:?}");
    let mut last_sent = 0i64;
    for r in interim {
        let n = |k: &str| {
            r[k].as_str()
                .unwrap_or_else(|| panic!("{k} is a string: {r}"))
                .parse::<i64>()
                .unwrap()
        };
        let (end, sent, latency) = (n("end_offset"), n("sent_traffic_offset"), n("latency"));
        assert!(end >= 0 && end <= sent, "{r}");
        assert!(sent >= last_sent, "sent traffic grows: {r}");
        assert!(latency >= 0);
        last_sent = sent;
        assert!(r["timestamp"].as_str().unwrap().ends_with('Z'));
    }
    // Another account's audio and foreign URLs fail per item, not as an HTTP error.
    assert!(
        items[3]["source"]["error"]
            .as_str()
            .unwrap()
            .contains("not found"),
        "{}",
        items[3]
    );
    assert_eq!(items[3]["source"]["transcript"], "");
    assert!(
        items[4]["source"]["error"]
            .as_str()
            .unwrap()
            .contains("signed link"),
        "{}",
        items[4]
    );
    drop(node);
}

both!(
    catalog_filters,
    run_errors_without_node,
    run_node_failure_is_502,
    run_on_real_node
);

/// Every route of this group is in /openapi.json with the statuses it answers.
async fn openapi_documents_asset_routes(db: TestDb) {
    let s = server(db, vec![]).await;
    let doc = s.get("/openapi.json").send().await;
    doc.expect(200);
    let expect = [
        (
            "/v1/audio",
            "post",
            &["201", "400", "401", "403", "413", "415", "500"][..],
        ),
        ("/v1/audio", "get", &["200", "400", "401", "403"][..]),
        (
            "/v1/audio/{id}",
            "delete",
            &["204", "401", "403", "404"][..],
        ),
        ("/v1/audio/{id}/content", "get", &["200", "404"][..]),
        (
            "/v1/audio/{id}/signed-link",
            "get",
            &["200", "400", "401", "403", "404"][..],
        ),
        ("/v1/storage/signed", "get", &["200", "403", "404"][..]),
        (
            "/v1/adapters/stt/info/model",
            "get",
            &["200", "400", "401", "403", "500"][..],
        ),
        (
            "/v1/adapters/stt/{engine}/run",
            "post",
            &["200", "400", "401", "403", "404", "500", "502", "503"][..],
        ),
        (
            "/v1/internal/stt-dictionary",
            "post",
            &["201", "400", "401", "403", "409", "422", "500"][..],
        ),
        (
            "/v1/adapters/stt/data/dictionary",
            "post",
            &["201", "400", "401", "403", "409", "422", "500"][..],
        ),
        (
            "/v1/adapters/stt/data/dictionary/{id}",
            "patch",
            &["200", "403", "404", "409", "422"][..],
        ),
        (
            "/v1/adapters/tts/normalize/{path}",
            "get",
            &["200", "400", "401", "403", "502"][..],
        ),
    ];
    for (path, method, statuses) in expect {
        let op = &doc.body["paths"][path][method];
        assert!(op.is_object(), "{method} {path} is not documented");
        for st in statuses {
            assert!(
                op["responses"][st].is_object(),
                "{method} {path} does not document {st}"
            );
        }
    }
}

both!(openapi_documents_asset_routes);
