//! Scenarios over real HTTP, on SQLite and PostgreSQL: draft, publish (validation
//! errors in the envelope), version records, freeze_draft reuse, isolation.

use callsmith_control::{both_backends, testing::TestServer};
use callsmith_scenarios::{AcceptAll, testing::realistic_scenario, validate_value};
use serde_json::{Value, json};

async fn new_scenario(s: &TestServer, tok: &str, name: &str) -> String {
    let r = s
        .post("/v1/scenario")
        .bearer(tok)
        .json(&json!({"name": name, "description": "d"}))
        .send()
        .await;
    r.expect(201);
    r.str("id")
}

async fn put_draft(s: &TestServer, tok: &str, id: &str, snapshot: &Value) -> Value {
    let r = s
        .request(reqwest::Method::PUT, &format!("/v1/scenario/{id}/draft"))
        .bearer(tok)
        .json(snapshot)
        .send()
        .await;
    r.expect(200);
    r.body.clone()
}

async fn scenario_draft_publish_versions(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let id = new_scenario(&s, tok, "Survey").await;
    assert!(id.starts_with("scn_"));
    let g = s
        .get(&format!("/v1/scenario/{id}"))
        .bearer(tok)
        .send()
        .await;
    g.expect(200);
    assert!(g.body["latest_version"].is_null());
    assert_eq!(g.body["name"], "Survey");

    // The draft exists from the start and is mutable.
    let d0 = s
        .get(&format!(
            "/v1/scenario-version/by-scenario?scenario_sid={id}&version=0&draft=true"
        ))
        .bearer(tok)
        .send()
        .await;
    d0.expect(200);
    assert_eq!(d0.body["draft_version"], 0);
    assert!(d0.body["version"].is_null());
    let snap = realistic_scenario(20);
    let d = put_draft(&s, tok, &id, &snap).await;
    assert_eq!(d["draft_version"], 0);
    assert_eq!(d["snapshot"], snap);
    assert_eq!(
        d["content_hash"],
        callsmith_scenarios::canonical::content_hash_value(&snap)
    );
    assert_eq!(d["id"], d0.body["id"], "draft 0 is one record, rewritten");

    // Publish: version 1 (201); again unchanged: the same record (200).
    let p1 = s
        .post(&format!("/v1/scenario/{id}/publish"))
        .bearer(tok)
        .send()
        .await;
    p1.expect(201);
    assert_eq!(p1.body["version"], 1);
    assert!(p1.body["draft_version"].is_null());
    assert_eq!(p1.body["content_hash"], d["content_hash"]);
    let again = s
        .post(&format!("/v1/scenario/{id}/publish"))
        .bearer(tok)
        .send()
        .await;
    again.expect(200);
    assert_eq!(again.body["id"], p1.body["id"]);

    // Change the draft, publish version 2; version 1 is untouched.
    let mut snap2 = snap.clone();
    snap2["name"] = json!("realistic v2");
    put_draft(&s, tok, &id, &snap2).await;
    let p2 = s
        .post(&format!("/v1/scenario/{id}/publish"))
        .bearer(tok)
        .send()
        .await;
    p2.expect(201);
    assert_eq!(p2.body["version"], 2);
    let v1 = s
        .get(&format!(
            "/v1/scenario-version/by-scenario?scenario_sid={id}&version=1"
        ))
        .bearer(tok)
        .send()
        .await;
    v1.expect(200);
    assert_eq!(v1.body["snapshot"], snap);
    assert_eq!(v1.body, p1.body);
    let byid = s
        .get(&format!("/v1/scenario-version/{}", p2.str("id")))
        .bearer(tok)
        .send()
        .await;
    assert_eq!(byid.body, p2.body);
    s.get(&format!(
        "/v1/scenario-version/by-scenario?scenario_sid={id}&version=9"
    ))
    .bearer(tok)
    .send()
    .await
    .expect_error(404, "scenario_version_not_found");
    s.get(&format!(
        "/v1/scenario-version/by-scenario?scenario_sid={id}"
    ))
    .bearer(tok)
    .send()
    .await
    .expect_error(400, "invalid_query");
    assert_eq!(
        s.get(&format!("/v1/scenario/{id}"))
            .bearer(tok)
            .send()
            .await
            .body["latest_version"],
        2
    );

    // Version list.
    let l = s
        .get(&format!("/v1/scenario-version?scenario_sid={id}"))
        .bearer(tok)
        .send()
        .await;
    l.expect(200);
    assert_eq!(l.body["total"], 3);
    assert_eq!(l.body["items"][0]["version"], 2);
    assert_eq!(l.body["items"][2]["draft_version"], 0);
    let l = s
        .get(&format!(
            "/v1/scenario-version?scenario_sid={id}&axis=published"
        ))
        .bearer(tok)
        .send()
        .await;
    assert_eq!(l.body["total"], 2);
    s.get("/v1/scenario-version?scenario_sid=scn_nope")
        .bearer(tok)
        .send()
        .await
        .expect_error(404, "scenario_not_found");
    s.get(&format!("/v1/scenario-version?scenario_sid={id}&limit=501"))
        .bearer(tok)
        .send()
        .await
        .expect_error(400, "invalid_query");

    // Validate without publishing; patch; list; delete.
    let v = s
        .post(&format!("/v1/scenario/{id}/validate"))
        .bearer(tok)
        .send()
        .await;
    v.expect(200);
    assert_eq!(v.body["valid"], true);
    let p = s
        .patch(&format!("/v1/scenario/{id}"))
        .bearer(tok)
        .json(&json!({"name": "Survey 2"}))
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["description"], "d");
    new_scenario(&s, tok, "Other").await;
    let l = s
        .get("/v1/scenario?filter_query=SURV")
        .bearer(tok)
        .send()
        .await;
    assert_eq!(l.body["total"], 1);
    let l = s
        .get("/v1/scenario?order_by=name&order=asc")
        .bearer(tok)
        .send()
        .await;
    assert_eq!(l.body["items"][0]["name"], "Other");
    s.post("/v1/scenario")
        .bearer(tok)
        .json(&json!({"name": ""}))
        .send()
        .await
        .expect_error(422, "invalid_name");
    s.request(reqwest::Method::PUT, &format!("/v1/scenario/{id}/draft"))
        .bearer(tok)
        .json(&json!({"name": "x", "constructor": []}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    s.delete(&format!("/v1/scenario/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect(204);
    s.get(&format!("/v1/scenario/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect_error(404, "scenario_not_found");
    s.get(&format!("/v1/scenario-version/{}", p2.str("id")))
        .bearer(tok)
        .send()
        .await
        .expect_error(404, "scenario_version_not_found");
}

async fn publish_invalid_draft_returns_every_error(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let id = new_scenario(&s, tok, "Broken").await;
    let snap = json!({"name": "broken", "constructor": {"bricks": {
        "hologram": {"v1": []},
        "audio_tts": {"v1": [
            {"id": "a", "description": "", "properties": {"text": ""}, "outputs": [{"type": "next", "description": "", "next": "nowhere"}]},
            {"id": "a", "description": "", "properties": {"text": "hi {{ bad"}, "outputs": []}
        ]},
        "end": {"v1": [{"id": "", "description": "", "properties": {}, "outputs": [{"type": "next", "description": "", "next": "a"}]}]}
    }}});
    put_draft(&s, tok, &id, &snap).await;
    let r = s
        .post(&format!("/v1/scenario/{id}/publish"))
        .bearer(tok)
        .send()
        .await;
    r.expect_error(422, "scenario_invalid");
    assert_eq!(r.body["data"]["topic"], "validation");
    let got = r.body["data"]["errors"]["scenario"]
        .as_array()
        .expect("data.errors.scenario")
        .clone();
    let want = serde_json::to_value(validate_value(&snap, &AcceptAll)).unwrap();
    assert_eq!(
        Value::Array(got.clone()),
        want,
        "every problem the validator finds, as it finds them"
    );
    let codes: Vec<&str> = got.iter().filter_map(|e| e["code"].as_str()).collect();
    for c in [
        "SCN101", "SCN103", "SCN104", "SCN105", "SCN108", "SCN111", "SCN115",
    ] {
        assert!(codes.contains(&c), "{c} missing from {codes:?}");
    }
    for e in &got {
        for k in [
            "code",
            "message",
            "summary",
            "tree_id",
            "node_id",
            "output_type",
            "duplicate_tree_index",
            "duplicate_node_index",
            "property",
            "invalid_value",
        ] {
            assert!(e[k].is_string(), "entry field {k} is not a string: {e}");
        }
    }
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains(&got.len().to_string())
    );
    // Nothing was published; validate reports the same entries.
    let l = s
        .get(&format!(
            "/v1/scenario-version?scenario_sid={id}&axis=published"
        ))
        .bearer(tok)
        .send()
        .await;
    assert_eq!(l.body["total"], 0);
    let v = s
        .post(&format!("/v1/scenario/{id}/validate"))
        .bearer(tok)
        .send()
        .await;
    assert_eq!(v.body["valid"], false);
    assert_eq!(v.body["errors"], want);
}

async fn freeze_draft_reuses_identical_content(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let id = new_scenario(&s, tok, "Test calls").await;
    let snap = realistic_scenario(10);
    put_draft(&s, tok, &id, &snap).await;
    let a = s.store.freeze_draft(&id).await.expect("freeze");
    assert_eq!(a.draft_version, Some(1));
    assert_eq!(a.version, None);
    let again = s.store.freeze_draft(&id).await.expect("freeze again");
    assert_eq!(
        again.sid, a.sid,
        "identical content resolves to the frozen record"
    );
    // Key order does not matter: canonical hash.
    let reordered: Value = serde_json::from_str(&format!(
        "{{\"constructor\": {}, \"name\": {}}}",
        snap["constructor"], snap["name"]
    ))
    .unwrap();
    put_draft(&s, tok, &id, &reordered).await;
    assert_eq!(s.store.freeze_draft(&id).await.unwrap().sid, a.sid);
    let mut changed = snap.clone();
    changed["name"] = json!("changed");
    put_draft(&s, tok, &id, &changed).await;
    let b = s.store.freeze_draft(&id).await.unwrap();
    assert_eq!(b.draft_version, Some(2));
    // Back to the first content: the first frozen record again.
    put_draft(&s, tok, &id, &snap).await;
    assert_eq!(s.store.freeze_draft(&id).await.unwrap().sid, a.sid);
    // Frozen records are addressable and unchanged by later draft saves.
    let r = s
        .get(&format!(
            "/v1/scenario-version/by-scenario?scenario_sid={id}&version=2&draft=true"
        ))
        .bearer(tok)
        .send()
        .await;
    r.expect(200);
    assert_eq!(r.body["snapshot"], changed);
    // Concurrent freezes of new content agree on one record.
    let mut third = snap.clone();
    third["name"] = json!("third");
    put_draft(&s, tok, &id, &third).await;
    let (x, y) = tokio::join!(s.store.freeze_draft(&id), s.store.freeze_draft(&id));
    assert_eq!(x.unwrap().sid, y.unwrap().sid);
    assert!(s.store.freeze_draft("scn_missing").await.is_err());
    // The dialer's published lookup.
    assert!(
        s.store
            .scenario_latest_published(&id)
            .await
            .unwrap()
            .is_none()
    );
}

async fn scenario_isolation(s: TestServer) {
    let fa = s.fixture_named("a").await;
    let fb = s.fixture_named("b").await;
    let id = new_scenario(&s, &fb.admin_session, "B's").await;
    put_draft(&s, &fb.admin_session, &id, &realistic_scenario(10)).await;
    let p = s
        .post(&format!("/v1/scenario/{id}/publish"))
        .bearer(&fb.admin_session)
        .send()
        .await;
    p.expect(201);
    let tok = &fa.admin_session;
    s.get(&format!("/v1/scenario/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect_error(404, "scenario_not_found");
    s.post(&format!("/v1/scenario/{id}/publish"))
        .bearer(tok)
        .send()
        .await
        .expect(404);
    s.request(reqwest::Method::PUT, &format!("/v1/scenario/{id}/draft"))
        .bearer(tok)
        .json(&json!({"name": "x", "constructor": {}}))
        .send()
        .await
        .expect(404);
    s.delete(&format!("/v1/scenario/{id}"))
        .bearer(tok)
        .send()
        .await
        .expect(404);
    s.get(&format!("/v1/scenario-version/{}", p.str("id")))
        .bearer(tok)
        .send()
        .await
        .expect(404);
    s.get(&format!(
        "/v1/scenario-version/by-scenario?scenario_sid={id}&version=1"
    ))
    .bearer(tok)
    .send()
    .await
    .expect(404);
    s.get(&format!("/v1/scenario-version?scenario_sid={id}"))
        .bearer(tok)
        .send()
        .await
        .expect(404);
    assert_eq!(
        s.get("/v1/scenario").bearer(tok).send().await.body["total"],
        0
    );
    s.get("/v1/scenario")
        .bearer(&fa.tenant_key)
        .header("X-Account-Sid", &fb.account_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");
    s.get(&format!("/v1/scenario/{id}"))
        .bearer(&fb.account_key)
        .send()
        .await
        .expect(200);
}

async fn published(s: &TestServer, tok: &str, id: &str) -> i64 {
    let l = s
        .get(&format!(
            "/v1/scenario-version?scenario_sid={id}&axis=published"
        ))
        .bearer(tok)
        .send()
        .await;
    l.expect(200);
    l.body["total"].as_i64().unwrap()
}

/// Publishing one unchanged draft from many callers at once records exactly one version;
/// the callers all get that record (one 201, the rest 200).
async fn concurrent_publishes_record_one_version(s: TestServer) {
    const CALLERS: usize = 16;
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let id = new_scenario(&s, tok, "Race").await;
    let mut snap = realistic_scenario(5);
    for round in 1..=3i64 {
        snap["name"] = json!(format!("race {round}"));
        put_draft(&s, tok, &id, &snap).await;
        let answers = futures::future::join_all((0..CALLERS).map(|_| {
            s.post(&format!("/v1/scenario/{id}/publish"))
                .bearer(tok)
                .send()
        }))
        .await;
        let created = answers.iter().filter(|r| r.status == 201).count();
        assert_eq!(created, 1, "round {round}: one publish records the version");
        for r in &answers {
            assert!(r.status == 201 || r.status == 200, "{}", r.text);
            assert_eq!(r.body["version"], round, "{}", r.text);
            assert_eq!(r.body["id"], answers[0].body["id"]);
        }
        assert_eq!(published(&s, tok, &id).await, round);
    }
    // The same through the store, without HTTP between the callers.
    let draft = s
        .store
        .scenario_version_by_axis(&id, 0, true)
        .await
        .unwrap()
        .unwrap();
    let mut snapshot = draft.snapshot_value();
    snapshot["name"] = json!("race store");
    let text = snapshot.to_string();
    let hash = callsmith_scenarios::canonical::content_hash_value(&snapshot);
    let outcomes = futures::future::join_all(
        (0..CALLERS).map(|_| s.store.scenario_publish(&id, &f.account_sid, &text, &hash)),
    )
    .await;
    let outcomes: Vec<_> = outcomes.into_iter().map(Result::unwrap).collect();
    assert_eq!(outcomes.iter().filter(|(_, created)| *created).count(), 1);
    assert!(
        outcomes
            .iter()
            .all(|(v, _)| v.version == Some(4) && v.sid == outcomes[0].0.sid)
    );
    assert_eq!(published(&s, tok, &id).await, 4);

    // Unchanged means equal to the newest version: content published before and replaced
    // since is published again as a new version.
    snap["name"] = json!("race 1");
    put_draft(&s, tok, &id, &snap).await;
    let again = s
        .post(&format!("/v1/scenario/{id}/publish"))
        .bearer(tok)
        .send()
        .await;
    again.expect(201);
    assert_eq!(again.body["version"], 5);
    assert_eq!(published(&s, tok, &id).await, 5);
}

both_backends!(
    concurrent_publishes_record_one_version,
    scenario_draft_publish_versions,
    publish_invalid_draft_returns_every_error,
    freeze_draft_reuses_identical_content,
    scenario_isolation
);

/// Classifier and audio references resolve against the account's own tables.
async fn publish_checks_classifiers_and_audio(s: TestServer) {
    use callsmith_domain::store::{NewAudio, NewClassifierVersion};
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let id = new_scenario(&s, tok, "Refs").await;
    let audio_id = "aud_0193aabbccddeeff0011223344556677";
    let missing_audio = "aud_0193aabbccddeeff00112233445566ff";
    let classifier = "4c3a7b1e-0000-4000-8000-000000000001";
    let mut snap = realistic_scenario(10);
    // Point the generated file prompt and question classifier at real references.
    let text = snap
        .to_string()
        .replace("https://cdn.example.test/chime.wav", audio_id)
        .replace(
            "\"classifier\":{\"id\":\"\",\"version\":0}",
            &format!("\"classifier\":{{\"id\":\"{classifier}\",\"version\":2}}"),
        );
    snap = serde_json::from_str(&text).unwrap();
    put_draft(&s, tok, &id, &snap).await;
    let r = s
        .post(&format!("/v1/scenario/{id}/publish"))
        .bearer(tok)
        .send()
        .await;
    r.expect_error(422, "scenario_invalid");
    let codes: Vec<String> = r.body["data"]["errors"]["scenario"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap().to_string())
        .collect();
    assert!(
        codes.contains(&"SCN117".to_string()) && codes.contains(&"SCN118".to_string()),
        "{codes:?}"
    );

    s.store
        .audio_create(&NewAudio {
            sid: audio_id,
            tenant_sid: &f.tenant_sid,
            account_sid: &f.account_sid,
            object_path: "audio/x.wav",
            provider: "local",
            url: "local://audio/x.wav",
            content_type: "audio/wav",
            original_filename: "x.wav",
            size_bytes: 4,
        })
        .await
        .unwrap();
    for version in [0, 1, 2] {
        s.store
            .classifier_insert(&NewClassifierVersion {
                account_sid: &f.account_sid,
                classifier_id: classifier,
                version,
                model_id: "m",
                description: "",
                intents: "[]",
                content_hash: &format!("h{version}"),
                content_identity: &format!("i{version}"),
            })
            .await
            .unwrap();
    }
    s.post(&format!("/v1/scenario/{id}/publish"))
        .bearer(tok)
        .send()
        .await
        .expect(201);
    // A reference to an audio id the account does not hold is SCN118.
    let text = snap.to_string().replace(audio_id, missing_audio);
    put_draft(&s, tok, &id, &serde_json::from_str(&text).unwrap()).await;
    let v = s
        .post(&format!("/v1/scenario/{id}/validate"))
        .bearer(tok)
        .send()
        .await;
    let codes: Vec<String> = v.body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !codes.is_empty() && codes.iter().all(|c| c == "SCN118"),
        "{codes:?}"
    );
}

both_backends!(publish_checks_classifiers_and_audio);

/// start_call → audio_tts → end, with the given start_call properties and audio_tts
/// properties.
fn speech_snapshot(start: Value, say: Value) -> Value {
    json!({"name": "speech", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": start, "outputs": [{"type": "next", "description": "", "next": "t"}]}]},
        "audio_tts": {"v1": [{"id": "t", "description": "", "properties": say, "outputs": [{"type": "next", "description": "", "next": "e"}]}]},
        "end": {"v1": [{"id": "e", "description": "", "properties": {}, "outputs": []}]}
    }}})
}

fn entries(v: &Value) -> Vec<(String, String, String)> {
    v.as_array()
        .expect("an array of entries")
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().expect("string field").to_string();
            (s("code"), s("property"), s("invalid_value"))
        })
        .collect()
}

/// Typos in property names, synthesizer and recognizer names refuse a publish; a variable
/// no brick sets is a warning of the validate route only. Synthesizers are the node's
/// configured names; recognizers the catalog engines the account's flags let it use.
async fn publish_refuses_unknown_properties_and_engines(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let id = new_scenario(&s, tok, "Typos").await;
    let typo = speech_snapshot(
        json!({"stt_general": {"engine": "deepgram", "langauge": "de-DE"}, "tts_general": {"engine": "piper"}}),
        json!({"text": "Hello {{guest}}", "engine": "piperr"}),
    );
    put_draft(&s, tok, &id, &typo).await;
    let v = s
        .post(&format!("/v1/scenario/{id}/validate"))
        .bearer(tok)
        .send()
        .await;
    v.expect(200);
    assert_eq!(v.body["valid"], false);
    // Bricks in kind order: audio_tts before start_call.
    let want_errors = vec![
        (
            "SCN125".to_string(),
            "properties.engine".to_string(),
            "piperr".to_string(),
        ),
        (
            "SCN124".to_string(),
            "properties.stt_general.langauge".to_string(),
            "langauge".to_string(),
        ),
        (
            "SCN126".to_string(),
            "properties.stt_general.engine".to_string(),
            "deepgram".to_string(),
        ),
    ];
    let want_warnings = vec![(
        "SCN127".to_string(),
        "properties.text".to_string(),
        "guest".to_string(),
    )];
    assert_eq!(entries(&v.body["errors"]), want_errors, "{}", v.body);
    assert_eq!(entries(&v.body["warnings"]), want_warnings, "{}", v.body);
    let p = s
        .post(&format!("/v1/scenario/{id}/publish"))
        .bearer(tok)
        .send()
        .await;
    p.expect_error(422, "scenario_invalid");
    assert_eq!(
        entries(&p.body["data"]["errors"]["scenario"]),
        want_errors,
        "warnings are not errors: {}",
        p.body
    );

    // The tenant's global_stt rule lets the account use deepgram; with the names fixed
    // the draft publishes, its warning left.
    s.su(
        reqwest::Method::PATCH,
        &format!(
            "/v1/internal/tenant/{}/feature-flag/global_stt",
            f.tenant_sid
        ),
    )
    .json(&json!({"enabled": true}))
    .send()
    .await
    .expect(200);
    let fixed = speech_snapshot(
        json!({"stt_general": {"engine": "deepgram", "language": "de-DE"}, "tts_general": {"engine": "piper"}}),
        json!({"text": "Hello {{guest}}", "engine": "flite"}),
    );
    put_draft(&s, tok, &id, &fixed).await;
    let v = s
        .post(&format!("/v1/scenario/{id}/validate"))
        .bearer(tok)
        .send()
        .await;
    assert_eq!(
        (v.body["valid"].clone(), v.body["errors"].clone()),
        (json!(true), json!([]))
    );
    assert_eq!(entries(&v.body["warnings"]), want_warnings);
    s.post(&format!("/v1/scenario/{id}/publish"))
        .bearer(tok)
        .send()
        .await
        .expect(201);
}

mod publish_refuses_unknown_properties_and_engines {
    use callsmith_control::testing::{TestDb, TestServer};

    async fn server(db: TestDb) -> TestServer {
        TestServer::start_with(db, |s| s.tts_engines.push("piper".into())).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        super::publish_refuses_unknown_properties_and_engines(server(TestDb::Sqlite).await).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        super::publish_refuses_unknown_properties_and_engines(server(TestDb::Postgres).await).await
    }
}
