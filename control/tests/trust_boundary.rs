//! The trust boundary on SQLite and PostgreSQL: what a tenant names (an audio reference,
//! a webhook, result-delivery or SMS URL) reaches only what the API would give it.
//! * Audio references resolve inside the account, by every form another account's audio
//!   or recording could be named; validation (publish and draft test call) refuses the same.
//! * URLs naming non-public addresses are refused when a resource is saved, and at send
//!   time (every redirect hop) by the guarded client.

use std::net::SocketAddr;

use callsmith_control::{
    both_backends,
    testing::{Fixture, TestDb, TestServer},
};
use callsmith_domain::audio_ref::{AudioRefError, Located};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

/// A WAV of `secs` of a 440 Hz tone at 8 kHz, 16-bit mono.
fn wav(secs: f32) -> Vec<u8> {
    let n = (8000.0 * secs) as usize;
    let data: Vec<u8> = (0..n)
        .flat_map(|i| {
            let v =
                ((i as f32 * 2.0 * std::f32::consts::PI * 440.0 / 8000.0).sin() * 8000.0) as i16;
            v.to_le_bytes()
        })
        .collect();
    let mut out = Vec::with_capacity(44 + data.len());
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&8000u32.to_le_bytes());
    out.extend_from_slice(&16000u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(&data);
    out
}

async fn upload(s: &TestServer, token: &str, bytes: Vec<u8>) -> Value {
    let part = reqwest::multipart::Part::bytes(bytes)
        .file_name("tone.wav")
        .mime_str("audio/wav")
        .unwrap();
    let r = s
        .post("/v1/audio")
        .bearer(token)
        .map(|b| b.multipart(reqwest::multipart::Form::new().part("file", part)))
        .send()
        .await;
    r.expect(201);
    r.body.clone()
}

/// Every form a reference to account A's audio and recording can take, with whether the
/// resolver sees a form it refuses outright (true) or an object that is not B's (false).
struct Forms {
    /// (reference, refused form)
    all: Vec<(String, bool)>,
}

async fn a_references(s: &TestServer, a: &Fixture) -> (Value, String, Forms) {
    let audio = upload(s, &a.admin_session, wav(0.5)).await;
    let id = audio["id"].as_str().unwrap().to_string();
    // A call recording of account A, where the engine stores it.
    let recording = format!(
        "calls/{}/com_0193aabbccddeeff0011223344556677/recording.wav",
        a.account_sid
    );
    s.state
        .objects
        .put(&recording, wav(0.5).into(), Some("audio/wav"))
        .await
        .unwrap();
    let link = s
        .get(&format!("/v1/audio/{id}/signed-link?ttl=600"))
        .bearer(&a.admin_session)
        .send()
        .await;
    link.expect(200);
    let local_dir = std::fs::canonicalize(&s.state.settings.objects.local_dir).unwrap();
    let all = vec![
        (id.clone(), false),
        (audio["location"].as_str().unwrap().to_string(), false),
        (audio["url"].as_str().unwrap().to_string(), false),
        (link.str("signed_url"), false),
        (s.state.objects.uri(&recording), false),
        // Forms refused whoever owns the object.
        (recording.clone(), true),
        (format!("/{recording}"), true),
        (local_dir.join(&recording).display().to_string(), true),
        (
            format!("file://{}", local_dir.join(&recording).display()),
            false,
        ),
        ("file:///etc/passwd".into(), true),
        ("/etc/passwd".into(), true),
        ("s3://another-bucket/calls/x/recording.wav".into(), true),
        ("ftp://example.test/a.wav".into(), true),
        ("http://127.0.0.1:8080/v1/storage/x.wav".into(), true),
        ("http://localhost/a.wav".into(), true),
        ("http://[::1]/a.wav".into(), true),
        ("http://169.254.169.254/latest/meta-data".into(), true),
        ("http://10.0.0.7/a.wav".into(), true),
    ];
    (audio, recording, Forms { all })
}

async fn audio_references_stay_inside_the_account(s: TestServer) {
    let a = s.fixture_named("a").await;
    let b = s.fixture_named("b").await;
    let (_, _, forms) = a_references(&s, &a).await;
    let resolver = &s.state.audio;
    for (r, refused) in &forms.all {
        // Account B gets nothing of A's audio by any form.
        match resolver.fetch(&b.account_sid, r).await {
            Ok(bytes) => panic!("B fetched {} bytes through {r:?}", bytes.len()),
            Err(AudioRefError::Refused(m)) => assert!(*refused, "{r:?} refused: {m}"),
            Err(AudioRefError::NotFound(m)) => {
                assert!(!*refused, "{r:?} should be refused, was not found: {m}");
                assert!(m.contains("not found"), "{m}");
            }
            Err(e) => panic!("{r:?}: {e:?}"),
        }
        assert!(resolver.check(&b.account_sid, r).await.is_err(), "{r:?}");
    }
    // Account A plays its own audio by every form that is not refused.
    for (r, refused) in &forms.all {
        if *refused {
            assert!(matches!(
                resolver.fetch(&a.account_sid, r).await,
                Err(AudioRefError::Refused(_))
            ));
            continue;
        }
        let bytes = resolver
            .fetch(&a.account_sid, r)
            .await
            .unwrap_or_else(|e| panic!("A's own {r:?}: {e}"));
        assert_eq!(bytes.len(), wav(0.5).len(), "{r:?}");
        resolver.check(&a.account_sid, r).await.unwrap();
    }
}

/// start_call → one audio_file brick per reference → end.
fn audio_scenario(refs: &[String]) -> Value {
    let mut files = vec![];
    for (i, r) in refs.iter().enumerate() {
        let next = if i + 1 == refs.len() {
            "e".to_string()
        } else {
            format!("f{}", i + 1)
        };
        files.push(
            json!({"id": format!("f{i}"), "description": "", "properties": {"url": r},
            "outputs": [{"type": "next", "description": "", "next": next}]}),
        );
    }
    json!({"name": "refs", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {}, "outputs": [{"type": "next", "description": "", "next": "f0"}]}]},
        "audio_file": {"v1": files},
        "end": {"v1": [{"id": "e", "description": "", "properties": {}, "outputs": []}]}
    }}})
}

async fn new_scenario(s: &TestServer, tok: &str, snap: &Value) -> String {
    let r = s
        .post("/v1/scenario")
        .bearer(tok)
        .json(&json!({"name": "refs"}))
        .send()
        .await;
    r.expect(201);
    let id = r.str("id");
    s.request(reqwest::Method::PUT, &format!("/v1/scenario/{id}/draft"))
        .bearer(tok)
        .json(snap)
        .send()
        .await
        .expect(200);
    id
}

async fn validation_refuses_what_the_resolver_refuses(s: TestServer) {
    let a = s.fixture_named("a").await;
    let b = s.fixture_named("b").await;
    let (_, _, forms) = a_references(&s, &a).await;
    let refs: Vec<String> = forms.all.iter().map(|(r, _)| r.clone()).collect();

    // B's scenario naming A's audio by every form: publish says why, brick by brick.
    let id = new_scenario(&s, &b.admin_session, &audio_scenario(&refs)).await;
    let r = s
        .post(&format!("/v1/scenario/{id}/publish"))
        .bearer(&b.admin_session)
        .send()
        .await;
    r.expect_error(422, "scenario_invalid");
    let errors = r.body["data"]["errors"]["scenario"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        errors.len(),
        refs.len(),
        "one error per reference: {errors:#?}"
    );
    for (i, (reference, refused)) in forms.all.iter().enumerate() {
        let e = errors
            .iter()
            .find(|e| e["node_id"] == format!("f{i}"))
            .unwrap_or_else(|| panic!("no error for {reference:?}"));
        assert_eq!(
            e["code"],
            if *refused { "SCN123" } else { "SCN118" },
            "{reference:?}: {e}"
        );
        assert_eq!(e["property"], "properties.url");
        assert_eq!(e["invalid_value"], reference.as_str());
    }
    // A draft test call validates the same way before anything is dialled.
    let d = s
        .post("/v1/communication/-/dispatch")
        .bearer(&b.admin_session)
        .json(&json!({"scenario_sid": id, "draft": true, "recipient": "+4930123456"}))
        .send()
        .await;
    d.expect_error(422, "scenario_invalid");
    assert_eq!(
        d.body["data"]["errors"]["scenario"]
            .as_array()
            .unwrap()
            .len(),
        refs.len()
    );
    let listed = s
        .get("/v1/communication")
        .bearer(&b.admin_session)
        .send()
        .await;
    listed.expect(200);
    assert_eq!(listed.body["total"], 0, "nothing was dispatched");

    // A templated reference is judged when the call renders it.
    let templated = new_scenario(
        &s,
        &b.admin_session,
        &audio_scenario(&["{{prompt_url}}".into()]),
    )
    .await;
    s.post(&format!("/v1/scenario/{templated}/publish"))
        .bearer(&b.admin_session)
        .send()
        .await
        .expect(201);

    // A's scenario naming its own audio by every allowed form publishes.
    let own: Vec<String> = forms
        .all
        .iter()
        .filter(|(_, r)| !r)
        .map(|(r, _)| r.clone())
        .collect();
    let id = new_scenario(&s, &a.admin_session, &audio_scenario(&own)).await;
    s.post(&format!("/v1/scenario/{id}/publish"))
        .bearer(&a.admin_session)
        .send()
        .await
        .expect(201);
}

async fn urls_naming_private_addresses_are_refused_on_save(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let private = [
        "http://127.0.0.1:9000/x",
        "http://localhost/x",
        "http://[::1]/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://192.168.1.10/x",
        "http://0x7f.1/x",
    ];
    // SMS providers: create and update.
    for url in private {
        let r = s
            .post("/v1/sms/provider")
            .bearer(tok)
            .json(&json!({"name": format!("p {url}"), "type": "http", "url": url}))
            .send()
            .await;
        r.expect_error(422, "target_not_allowed");
        assert!(
            r.body["message"].as_str().unwrap().starts_with("url: "),
            "{}",
            r.body
        );
    }
    let p = s
        .post("/v1/sms/provider")
        .bearer(tok)
        .json(&json!({"name": "public", "type": "http", "url": "https://sms.example.test/send?to={{to}}"}))
        .send()
        .await;
    p.expect(201);
    let pid = p.str("id");
    s.patch(&format!("/v1/sms/provider/{pid}"))
        .bearer(tok)
        .json(&json!({"url": "http://10.1.2.3/send"}))
        .send()
        .await
        .expect_error(422, "target_not_allowed");

    // Agents: result-delivery targets.
    let pool = s
        .post("/v1/number-pool")
        .bearer(tok)
        .json(&json!({"name": "P"}))
        .send()
        .await
        .str("id");
    let number = s
        .post("/v1/number")
        .bearer(tok)
        .json(&json!({"identifier": "+4911", "pool_sid": pool}))
        .send()
        .await
        .str("id");
    let scenario = s
        .post("/v1/scenario")
        .bearer(tok)
        .json(&json!({"name": "S"}))
        .send()
        .await
        .str("id");
    let agent = |url: &str| {
        json!({
            "gateway_type": "number", "number_sid": number, "scenario_sid": scenario,
            "calling_schedule": {"strategy": "always", "args": {}}, "timezone": "Europe/Berlin",
            "limits": {"cps": 1, "cpl": 1},
            "communication_result": {"targets": [{"url": "https://hooks.example.test/ok"}, {"url": url}]}
        })
    };
    for url in private {
        let r = s
            .post("/v1/agent")
            .bearer(tok)
            .json(&agent(url))
            .send()
            .await;
        r.expect_error(422, "target_not_allowed");
        assert!(
            r.body["message"]
                .as_str()
                .unwrap()
                .starts_with("communication_result.targets[1].url"),
            "{}",
            r.body
        );
    }
    let ok = s
        .post("/v1/agent")
        .bearer(tok)
        .json(&agent("https://hooks.example.test/2"))
        .send()
        .await;
    ok.expect(201);
    let aid = ok.str("id");
    s.patch(&format!("/v1/agent/{aid}"))
        .bearer(tok)
        .json(&json!({"communication_result": {"targets": [{"url": "http://127.0.0.1/x"}]}}))
        .send()
        .await
        .expect_error(422, "target_not_allowed");

    // Scenario webhooks: url and proxy url.
    let hook = |url: &str, proxy: &str| {
        json!({"name": "hook", "constructor": {"bricks": {
            "start_call": {"v1": [{"id": "s", "description": "", "properties": {}, "outputs": [{"type": "next", "description": "", "next": "w"}]}]},
            "webhook": {"v1": [{"id": "w", "description": "", "properties": {"request": {"method": "GET", "url": url, "proxy": {"url": proxy}}},
                "outputs": [{"type": "next", "description": "", "next": "e"}]}]},
            "end": {"v1": [{"id": "e", "description": "", "properties": {}, "outputs": []}]}
        }}})
    };
    for (url, proxy, property) in [
        (
            "http://169.254.169.254/latest",
            "",
            "properties.request.url",
        ),
        (
            "https://api.example.test/x",
            "http://127.0.0.1:3128",
            "properties.request.proxy.url",
        ),
    ] {
        let id = new_scenario(&s, tok, &hook(url, proxy)).await;
        let r = s
            .post(&format!("/v1/scenario/{id}/publish"))
            .bearer(tok)
            .send()
            .await;
        r.expect_error(422, "scenario_invalid");
        let e = &r.body["data"]["errors"]["scenario"][0];
        assert_eq!(
            (e["code"].as_str(), e["property"].as_str()),
            (Some("SCN123"), Some(property)),
            "{e}"
        );
    }
}

/// A loopback HTTP server on `ip` answering each path with what `route` gives:
/// (status, extra headers, body).
async fn http_server(
    ip: &str,
    route: impl Fn(&str) -> (u16, Vec<(String, String)>, Vec<u8>) + Send + Sync + 'static,
) -> SocketAddr {
    let l = TcpListener::bind((ip, 0)).await.unwrap();
    let addr = l.local_addr().unwrap();
    let route = std::sync::Arc::new(route);
    tokio::spawn(async move {
        loop {
            let Ok((mut c, _)) = l.accept().await else {
                return;
            };
            let route = route.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head);
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                let (status, headers, body) = route(&path);
                let mut resp = format!(
                    "HTTP/1.1 {status} X\r\nconnection: close\r\ncontent-length: {}\r\n",
                    body.len()
                );
                for (k, v) in headers {
                    resp.push_str(&format!("{k}: {v}\r\n"));
                }
                resp.push_str("\r\n");
                let _ = c.write_all(resp.as_bytes()).await;
                let _ = c.write_all(&body).await;
            });
        }
    });
    addr
}

async fn remote_audio_goes_through_the_guarded_client(db: TestDb) {
    // 127.0.0.1 stands in for a public host: the operator allows it by name, so what is
    // refused below is refused by the guard on its own.
    let s =
        TestServer::start_with(db, |st| st.webhook_allow_hosts = vec!["127.0.0.1".into()]).await;
    let f = s.fixture().await;
    let inner = http_server("127.0.0.2", |_| (200, vec![], wav(0.2))).await;
    let outer = http_server("127.0.0.1", move |path| match path {
        "/a.wav" => (200, vec![], wav(0.2)),
        "/hop.wav" => (
            302,
            vec![(
                "location".into(),
                format!("http://127.0.0.2:{}/a.wav", inner.port()),
            )],
            vec![],
        ),
        "/big.wav" => (200, vec![], vec![0u8; 32 * 1024 * 1024 + 1]),
        _ => (404, vec![], b"no".to_vec()),
    })
    .await;
    let url = |p: &str| format!("http://127.0.0.1:{}{p}", outer.port());
    let audio = &s.state.audio;
    let got = audio.fetch(&f.account_sid, &url("/a.wav")).await.unwrap();
    assert_eq!(got.len(), wav(0.2).len());
    // A redirect into a non-public address is refused at that hop.
    match audio.fetch(&f.account_sid, &url("/hop.wav")).await {
        Err(AudioRefError::Refused(m)) => assert!(m.contains("127.0.0.2"), "{m}"),
        other => panic!("{other:?}"),
    }
    // The body is capped at the upload limit, and a failed answer says so.
    match audio.fetch(&f.account_sid, &url("/big.wav")).await {
        Err(AudioRefError::Unavailable(m)) => assert!(m.contains("larger than"), "{m}"),
        other => panic!("{other:?}"),
    }
    match audio.fetch(&f.account_sid, &url("/missing.wav")).await {
        Err(AudioRefError::Unavailable(m)) => assert!(m.contains("404"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Saved targets follow the same policy: the allowed host is accepted, others are not.
    let tok = &f.admin_session;
    s.post("/v1/sms/provider")
        .bearer(tok)
        .json(&json!({"name": "gw", "type": "http", "url": url("/send?to={{to}}")}))
        .send()
        .await
        .expect(201);
    s.post("/v1/sms/provider")
        .bearer(tok)
        .json(&json!({"name": "gw2", "type": "http", "url": format!("http://127.0.0.2:{}/send", inner.port())}))
        .send()
        .await
        .expect_error(422, "target_not_allowed");
}

mod remote_audio {
    use super::*;
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        remote_audio_goes_through_the_guarded_client(TestDb::Sqlite).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        remote_audio_goes_through_the_guarded_client(TestDb::Postgres).await
    }
}

async fn every_form_of_one_audio_locates_one_identity_and_a_new_version_another(s: TestServer) {
    let a = s.fixture_named("a").await;
    let b = s.fixture_named("b").await;
    let (audio, recording, forms) = a_references(&s, &a).await;
    let resolver = &s.state.audio;
    let mut identities = std::collections::BTreeSet::new();
    for (r, refused) in &forms.all {
        // The same refusals as a fetch: B locates nothing of A's.
        assert!(resolver.locate(&b.account_sid, r).await.is_err(), "{r:?}");
        if *refused {
            continue;
        }
        match resolver.locate(&a.account_sid, r).await {
            Ok(Located::Stored(stored)) => {
                let bytes = resolver.read(&stored).await.unwrap();
                assert_eq!(bytes.len(), wav(0.5).len(), "{r:?}");
                identities.insert((stored.path.clone(), stored.identity()));
            }
            other => panic!("A's own {r:?}: {other:?}"),
        }
    }
    // Four forms name the audio file, one the recording: two identities, each the object
    // path followed by its version.
    let paths: Vec<&str> = identities.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(identities.len(), 2, "{identities:?}");
    assert!(paths.contains(&recording.as_str()), "{paths:?}");
    for (path, identity) in &identities {
        let version = identity.strip_prefix(&format!("{path}#")).unwrap();
        assert!(!version.is_empty(), "{identity}");
    }
    // The recording written again (longer) is a new version: a prompt decoded from it
    // would be read again.
    let before = match resolver
        .locate(&a.account_sid, &recording_uri(&s, &recording))
        .await
    {
        Ok(Located::Stored(st)) => st,
        other => panic!("{other:?}"),
    };
    s.state
        .objects
        .put(&recording, wav(0.7).into(), Some("audio/wav"))
        .await
        .unwrap();
    let after = match resolver
        .locate(&a.account_sid, &recording_uri(&s, &recording))
        .await
    {
        Ok(Located::Stored(st)) => st,
        other => panic!("{other:?}"),
    };
    assert_eq!(before.path, after.path);
    assert_ne!(before.identity(), after.identity());
    assert_eq!(resolver.read(&after).await.unwrap().len(), wav(0.7).len());
    // A public URL is located as such, unread.
    let remote = "https://audio.example.com/hello.wav";
    assert_eq!(
        resolver.locate(&a.account_sid, remote).await,
        Ok(Located::Remote(remote.into()))
    );
    let _ = audio;
}

fn recording_uri(s: &TestServer, path: &str) -> String {
    s.state.objects.uri(path)
}

both_backends!(
    audio_references_stay_inside_the_account,
    every_form_of_one_audio_locates_one_identity_and_a_new_version_another,
    validation_refuses_what_the_resolver_refuses,
    urls_naming_private_addresses_are_refused_on_save,
);
