//! The trust boundary in a real call: tenant B's scenario names tenant A's audio file and
//! call recording by every form a reference can take (and URLs into non-public addresses);
//! B's call, answered by a SIPp callee whose RTP the test receives, plays none of it, and
//! its history says why for each. B's own audio, played last, reaches the callee (so the
//! callee's ear is known to work).

use std::time::Duration;

use callsmith_e2e::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An HTTP server on `ip` answering every request with `status`, `headers` and `body`.
async fn serve(ip: &str, status: u16, headers: String, body: Vec<u8>) -> u16 {
    let l = tokio::net::TcpListener::bind((ip, 0)).await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            let (headers, body) = (headers.clone(), body.clone());
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                let _ = c.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 {status} X\r\nconnection: close\r\ncontent-length: {}\r\n{headers}\r\n",
                    body.len()
                );
                let _ = c.write_all(head.as_bytes()).await;
                let _ = c.write_all(&body).await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_plays_nothing_of_another_tenants_audio_sqlite() {
    a_call_plays_nothing_of_another_tenants_audio(None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_plays_nothing_of_another_tenants_audio_postgres() {
    let admin = std::env::var("CALLSMITH_TEST_PG_ADMIN_URL").expect(
        "CALLSMITH_TEST_PG_ADMIN_URL is not set: run `eval \"$(bash scripts/test-deps.sh)\"`",
    );
    let db = callsmith_domain::store::create_postgres_database(&admin, "cse2e_")
        .await
        .expect("a fresh database");
    a_call_plays_nothing_of_another_tenants_audio(Some(db)).await
}

async fn a_call_plays_nothing_of_another_tenants_audio(database_url: Option<String>) {
    let rtp = RtpPeer::start(vec![]).await;
    let port = rtp.port.to_string();
    let mut callee = Sipp::spawn(
        "dialer_uas_rtp_peer.xml",
        None,
        None,
        &["-m", "1", "-key", "rtpport", &port],
    );
    // The harness lets the engine reach 127.0.0.1 (its HTTP peers stand in for public
    // hosts); 127.0.0.2 stays a refused, non-public address.
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        database_url: database_url.clone(),
        ..Default::default()
    })
    .await;
    let a = provision(&e, "a", "carrier", "+4930100901").await;
    let b = provision(&e, "b", "carrier", "+4930100902").await;

    // Tenant A's audio: an uploaded file and a call recording, each 3 s of a loud tone.
    let audio = upload_audio(&e, &a.account, tone_wav(3.0)).await;
    let a_id = audio["id"].as_str().expect("id").to_string();
    let (s, link) = e
        .get(
            &format!("/v1/audio/{a_id}/signed-link?ttl=600"),
            Some(&a.account),
        )
        .await;
    assert_eq!(s, 200, "{link}");
    let a_url = audio["url"].as_str().expect("url").to_string();
    let objects_root = a_url
        .strip_prefix("file://")
        .and_then(|p| p.split(&format!("/audio/{}/", a.account)).next())
        .expect("objects root")
        .to_string();
    let recording = format!(
        "calls/{}/com_0193aabbccddeeff0011223344556677/recording.wav",
        a.account
    );
    let recording_file = std::path::Path::new(&objects_root).join(&recording);
    std::fs::create_dir_all(recording_file.parent().expect("parent")).expect("dir");
    std::fs::write(&recording_file, tone_wav(3.0)).expect("recording");
    // The same tone on a non-public address, and a redirect into it from an allowed host.
    let private_port = serve("127.0.0.2", 200, String::new(), tone_wav(3.0)).await;
    let private = format!("http://127.0.0.2:{private_port}/a.wav");
    let hop_port = serve("127.0.0.1", 302, format!("location: {private}\r\n"), vec![]).await;

    let refs: Vec<String> = vec![
        a_id.clone(),
        audio["location"].as_str().expect("location").to_string(),
        a_url.clone(),
        link["signed_url"].as_str().expect("signed").to_string(),
        format!("file://{}", recording_file.display()),
        recording.clone(),
        format!("callsmith/{recording}"),
        recording_file.display().to_string(),
        "file:///etc/passwd".into(),
        private.clone(),
        format!("http://127.0.0.1:{hop_port}/a.wav"),
    ];
    // B's own short clip, played last.
    let own = upload_audio(&e, &b.account, tone_wav(0.6)).await;
    let own_id = own["id"].as_str().expect("id").to_string();

    // The references are set as variables and rendered at play time, so the scenario
    // passes validation (which refuses them written out) and each reaches the resolver.
    let n = refs.len();
    let variables: Vec<Value> = refs
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"name": format!("r{i}"), "value": r}))
        .collect();
    let mut files: Vec<Value> = (0..n)
        .map(|i| {
            json!({"id": format!("f{i}"), "description": "", "properties": {"url": format!("{{{{r{i}}}}}")},
                   "outputs": [{"type": "next", "description": "", "next": format!("f{}", i + 1)}]})
        })
        .collect();
    files.push(
        json!({"id": format!("f{n}"), "description": "", "properties": {"url": own_id},
                      "outputs": [{"type": "next", "description": "", "next": "bye"}]}),
    );
    let snap = json!({"name": "borrowed audio", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {}, "outputs": [{"type": "next", "description": "", "next": "vars"}]}]},
        "assignment": {"v1": [{"id": "vars", "description": "", "properties": {"variables": variables},
                                "outputs": [{"type": "next", "description": "", "next": "f0"}]}]},
        "audio_file": {"v1": files},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}});
    let store = store_of(&e, database_url.as_deref()).await;
    let scn = create_scenario(&store, &b, &snap, false).await;
    let c = e
        .dispatch(
            &b,
            json!({"recipient": "+4915550777", "scenario_sid": scn, "draft": true}),
        )
        .await;
    let id = c["id"].as_str().expect("id").to_string();
    let done = e
        .wait_communication(&b.account, &id, Duration::from_secs(60))
        .await;
    assert_eq!(
        done["communication_status"],
        "completed",
        "{done}\n{}",
        e.log()
    );
    assert!(
        callee.success(Duration::from_secs(20)).await,
        "{}",
        callee.dump()
    );

    // The history says, prompt by prompt, why nothing of A's was played.
    let h = e.history(&b.account, &id);
    let prompts = h["prompts"].as_array().expect("prompts");
    assert_eq!(prompts.len(), n + 1, "{h:#}");
    for (i, r) in refs.iter().enumerate() {
        let p = &prompts[i];
        assert_eq!(p["outcome"], "failed", "{r:?}: {p}");
        assert_eq!(p["played_ms"], 0, "{r:?}: {p}");
        let why = p["error"].as_str().unwrap_or_default();
        assert!(
            why.contains("not found") || why.contains("refused"),
            "{r:?}: {why}"
        );
    }
    for r in [&private, &refs[10]] {
        let i = refs.iter().position(|x| x == r).expect("ref");
        let why = prompts[i]["error"].as_str().unwrap_or_default();
        assert!(
            why.contains("127.0.0.2") && why.contains("refused"),
            "{r}: {why}"
        );
    }
    assert_eq!(prompts[n]["outcome"], "completed", "{}", prompts[n]);
    let errors = h["errors"].as_array().expect("errors");
    assert_eq!(
        errors
            .iter()
            .filter(|e| e.as_str().is_some_and(|s| s.starts_with("prompt: ")))
            .count(),
        n,
        "{errors:?}"
    );

    // What the callee heard: B's 0.6 s clip (30 packets) and none of A's 3 s tones (150
    // packets each).
    let (voiced, _) = rtp.voiced();
    assert!(rtp.received() > 0);
    assert!(
        (20..=45).contains(&voiced),
        "voiced packets {voiced}: only B's own clip may be heard"
    );
}
