//! GET /v1/adapters/tts/normalize/{path} over real HTTP on SQLite and PostgreSQL.

use base64::Engine as _;
use callsmith_control::{both_backends, testing::TestServer};

fn params(url: &str) -> Vec<(String, String)> {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect()
}

async fn normalizes_synthesis_urls(s: TestServer) {
    let f = s.fixture().await;
    let r = s
        .get("/v1/adapters/tts/normalize/tts.example.com/v1/synth?text=hello%20world&voice=anna&sampleRate=8000&format=mp3&fsFix=1&f=mp3")
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    let url = r.str("url");
    assert!(
        url.starts_with("https://tts.example.com/v1/synth?"),
        "{url}"
    );
    let p = params(&url);
    assert!(p.contains(&("voice".into(), "anna".into())));
    assert!(p.contains(&("text".into(), "hello world".into())));
    assert!(
        p.contains(&("f".into(), "wav".into())),
        "f forced to wav: {url}"
    );
    assert_eq!(p.iter().filter(|(k, _)| k == "f").count(), 1);
    assert!(
        p.contains(&("sr".into(), "16000".into())),
        "sr defaults to 16000: {url}"
    );
    for gone in ["sampleRate", "format", "fsFix"] {
        assert!(!p.iter().any(|(k, _)| k == gone), "{gone} kept in {url}");
    }

    // text_b64, an explicit sr, and an engine URL with a scheme and its own query.
    let b64 = base64::engine::general_purpose::STANDARD.encode("Grüße, wie geht's?");
    let r = s
        .get(&format!(
            "/v1/adapters/tts/normalize/http://127.0.0.1:9/speak?text_b64={}&sr=8000",
            url::form_urlencoded::byte_serialize(b64.as_bytes()).collect::<String>()
        ))
        .bearer(&f.admin_session)
        .send()
        .await;
    r.expect(200);
    let url = r.str("url");
    assert!(url.starts_with("http://127.0.0.1:9/speak?"), "{url}");
    let p = params(&url);
    assert!(p.contains(&("text".into(), "Grüße, wie geht's?".into())));
    assert!(p.contains(&("sr".into(), "8000".into())));
    assert!(!p.iter().any(|(k, _)| k == "text_b64"));
}

async fn normalize_errors(s: TestServer) {
    let f = s.fixture().await;
    // Missing text: the {"error": "..."} body with 400.
    let r = s
        .get("/v1/adapters/tts/normalize/tts.example.com/synth?voice=anna")
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(400);
    let obj = r.body.as_object().expect("a JSON object");
    assert_eq!(obj.len(), 1, "only error: {}", r.text);
    assert!(r.body["error"].as_str().unwrap().contains("text"));
    let r = s
        .get("/v1/adapters/tts/normalize/tts.example.com/synth?text_b64=%25%25%25")
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(400);
    assert!(r.body["error"].is_string());
    // An engine path naming no usable synthesis endpoint: 502.
    s.get("/v1/adapters/tts/normalize/ftp:%2F%2Fh%2Fs?text=hi")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(502, "invalid_engine_path");
    // 401 and 403.
    s.get("/v1/adapters/tts/normalize/tts.example.com/synth?text=hi")
        .send()
        .await
        .expect_error(401, "unauthenticated");
    let other = s.fixture_named("b").await;
    s.get("/v1/adapters/tts/normalize/tts.example.com/synth?text=hi")
        .bearer(&f.account_key)
        .header("X-Account-Sid", &other.account_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");
}

both_backends!(normalizes_synthesis_urls, normalize_errors);
