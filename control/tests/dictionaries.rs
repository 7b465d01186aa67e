//! STT dictionaries over real HTTP on SQLite and PostgreSQL: global presets, account
//! dictionaries, visibility, clashes, languages and isolation.

use callsmith_control::{both_backends, testing::TestServer};
use reqwest::Method;
use serde_json::{Value, json};

fn names(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect()
}

async fn global_presets(s: TestServer) {
    let f = s.fixture().await;
    let r = s
        .su(Method::POST, "/v1/internal/stt-dictionary")
        .json(&json!({"name": "banking", "language": "en-US", "tokens": ["balance", "overdraft"], "description": "money words"}))
        .send()
        .await;
    r.expect(201);
    let id = r.str("id");
    assert!(id.starts_with("dic_"));
    assert!(
        r.body["account_sid"].is_null(),
        "present and null: {}",
        r.text
    );
    assert_eq!(r.body["public"], true);
    assert_eq!(r.body["tokens"], json!(["balance", "overdraft"]));
    assert_eq!(r.body["description"], "money words");
    // The superuser sees every engine, the flag-gated deepgram included.
    assert_eq!(r.body["engines"], json!(["whisper", "vosk", "deepgram"]));
    // Duplicate name in the same language: 409; another language is fine.
    s.su(Method::POST, "/v1/internal/stt-dictionary")
        .json(&json!({"name": "banking", "language": "en-us", "tokens": []}))
        .send()
        .await
        .expect_error(409, "dictionary_conflict");
    let de = s
        .su(Method::POST, "/v1/internal/stt-dictionary")
        .json(&json!({"name": "banking", "language": "de-DE", "tokens": ["Kontostand"]}))
        .send()
        .await;
    de.expect(201);
    assert_eq!(de.body["engines"], json!(["vosk"]));
    s.su(Method::POST, "/v1/internal/stt-dictionary")
        .json(&json!({"name": "x", "language": "xx-YY", "tokens": []}))
        .send()
        .await
        .expect_error(422, "unknown_language");
    s.su(Method::POST, "/v1/internal/stt-dictionary")
        .json(&json!({"name": "x", "language": "en-US"}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    s.su(Method::POST, "/v1/internal/stt-dictionary")
        .json(&json!({"name": " ", "language": "en-US", "tokens": []}))
        .send()
        .await
        .expect_error(422, "invalid_name");
    // Administrative: tenant keys, account keys and users are refused; no credentials 401.
    for token in [&f.tenant_key, &f.account_key, &f.admin_session] {
        s.post("/v1/internal/stt-dictionary")
            .bearer(token)
            .json(&json!({"name": "y", "language": "en-US", "tokens": []}))
            .send()
            .await
            .expect_error(403, "forbidden");
    }
    s.post("/v1/internal/stt-dictionary")
        .json(&json!({"name": "y", "language": "en-US", "tokens": []}))
        .send()
        .await
        .expect_error(401, "unauthenticated");
    // List, patch and delete presets.
    let l = s
        .su(Method::GET, "/v1/internal/stt-dictionary?language=de-de")
        .send()
        .await;
    l.expect(200);
    assert_eq!(l.body["total"], 1);
    let p = s
        .su(Method::PATCH, &format!("/v1/internal/stt-dictionary/{id}"))
        .json(&json!({"tokens": ["balance", "statement"]}))
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["tokens"], json!(["balance", "statement"]));
    assert_eq!(p.body["name"], "banking");
    s.su(Method::PATCH, &format!("/v1/internal/stt-dictionary/{id}"))
        .json(&json!({"language": "de-DE"}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    s.su(
        Method::DELETE,
        &format!("/v1/internal/stt-dictionary/{}", de.str("id")),
    )
    .send()
    .await
    .expect(204);
    s.su(
        Method::DELETE,
        &format!("/v1/internal/stt-dictionary/{}", de.str("id")),
    )
    .send()
    .await
    .expect_error(404, "dictionary_not_found");
}

async fn account_dictionaries(s: TestServer) {
    let a = s.fixture().await;
    let b = s.fixture_named("b").await;
    let preset = s
        .su(Method::POST, "/v1/internal/stt-dictionary")
        .json(&json!({"name": "banking", "language": "en-US", "tokens": ["balance"]}))
        .send()
        .await;
    preset.expect(201);
    let preset_id = preset.str("id");
    let mine = s
        .post("/v1/adapters/stt/data/dictionary")
        .bearer(&a.account_key)
        .json(&json!({"name": "products", "language": "en-US", "tokens": ["callsmith"], "description": "our names"}))
        .send()
        .await;
    mine.expect(201);
    let mine_id = mine.str("id");
    assert_eq!(mine.body["account_sid"], a.account_sid.as_str());
    assert_eq!(mine.body["public"], false);
    // The account's flags withhold deepgram (global_stt is off by default).
    assert_eq!(mine.body["engines"], json!(["whisper", "vosk"]));
    // Clashes: own name again, or a global preset's name in the same language.
    for name in ["products", "banking"] {
        s.post("/v1/adapters/stt/data/dictionary")
            .bearer(&a.admin_session)
            .json(&json!({"name": name, "language": "en-US", "tokens": []}))
            .send()
            .await
            .expect_error(409, "dictionary_conflict");
    }
    // Another account may use the same name; another language too.
    s.post("/v1/adapters/stt/data/dictionary")
        .bearer(&b.account_key)
        .json(&json!({"name": "products", "language": "en-US", "tokens": []}))
        .send()
        .await
        .expect(201);
    s.post("/v1/adapters/stt/data/dictionary")
        .bearer(&a.account_key)
        .json(&json!({"name": "banking", "language": "de-DE", "tokens": []}))
        .send()
        .await
        .expect(201);
    s.post("/v1/adapters/stt/data/dictionary")
        .bearer(&a.account_key)
        .json(&json!({"name": "z", "language": "tlh", "tokens": []}))
        .send()
        .await
        .expect_error(422, "unknown_language");
    // A bare language of the catalog is accepted (whisper lists en).
    let en = s
        .post("/v1/adapters/stt/data/dictionary")
        .bearer(&a.account_key)
        .json(&json!({"name": "any english", "language": "en-GB", "tokens": []}))
        .send()
        .await;
    en.expect(201);
    assert_eq!(en.body["engines"], json!(["whisper"]));

    // Visibility: own plus presets, never another account's.
    let l = s
        .get("/v1/adapters/stt/data/dictionary")
        .bearer(&a.account_key)
        .send()
        .await;
    l.expect(200);
    assert_eq!(
        names(&l.body),
        vec!["banking", "products", "banking", "any english"]
    );
    assert_eq!(l.body["total"], 4);
    let lb = s
        .get("/v1/adapters/stt/data/dictionary")
        .bearer(&b.account_key)
        .send()
        .await;
    assert_eq!(names(&lb.body), vec!["banking", "products"]);
    let page = s
        .get("/v1/adapters/stt/data/dictionary?limit=2&offset=1")
        .bearer(&a.account_key)
        .send()
        .await;
    assert_eq!(names(&page.body), vec!["products", "banking"]);
    assert_eq!(page.body["has_more"], true);
    s.get("/v1/adapters/stt/data/dictionary?limit=501")
        .bearer(&a.account_key)
        .send()
        .await
        .expect_error(400, "invalid_query");
    s.get(&format!("/v1/adapters/stt/data/dictionary/{preset_id}"))
        .bearer(&b.admin_session)
        .send()
        .await
        .expect(200);
    s.get(&format!("/v1/adapters/stt/data/dictionary/{mine_id}"))
        .bearer(&b.account_key)
        .send()
        .await
        .expect_error(404, "dictionary_not_found");
    s.su(Method::GET, "/v1/adapters/stt/data/dictionary")
        .send()
        .await
        .expect_error(400, "account_required");
    let su = s
        .su(
            Method::GET,
            &format!("/v1/adapters/stt/data/dictionary/{mine_id}"),
        )
        .header("X-Account-Sid", &a.account_sid)
        .send()
        .await;
    su.expect(200);
    // The superuser acting for the account sees the engines the account's flags allow.
    assert_eq!(su.body["engines"], json!(["whisper", "vosk"]));

    // Changes: own yes, presets no (403), others' absent (404).
    let p = s
        .patch(&format!("/v1/adapters/stt/data/dictionary/{mine_id}"))
        .bearer(&a.account_key)
        .json(
            &json!({"tokens": ["callsmith", "sipp"], "description": "d2", "name": "product names"}),
        )
        .send()
        .await;
    p.expect(200);
    assert_eq!(p.body["tokens"], json!(["callsmith", "sipp"]));
    assert_eq!(p.body["name"], "product names");
    assert_eq!(p.body["description"], "d2");
    s.patch(&format!("/v1/adapters/stt/data/dictionary/{mine_id}"))
        .bearer(&a.account_key)
        .json(&json!({"name": "banking"}))
        .send()
        .await
        .expect_error(409, "dictionary_conflict");
    s.patch(&format!("/v1/adapters/stt/data/dictionary/{preset_id}"))
        .bearer(&a.account_key)
        .json(&json!({"tokens": []}))
        .send()
        .await
        .expect_error(403, "forbidden");
    s.delete(&format!("/v1/adapters/stt/data/dictionary/{preset_id}"))
        .bearer(&a.account_key)
        .send()
        .await
        .expect_error(403, "forbidden");
    s.delete(&format!("/v1/adapters/stt/data/dictionary/{mine_id}"))
        .bearer(&b.account_key)
        .send()
        .await
        .expect_error(404, "dictionary_not_found");
    s.create_user(
        &a.account_sid,
        "viewer-a@example.test",
        "viewer-password",
        &["viewer"],
    )
    .await;
    let viewer = s.login("viewer-a@example.test", "viewer-password").await;
    s.delete(&format!("/v1/adapters/stt/data/dictionary/{mine_id}"))
        .bearer(&viewer)
        .send()
        .await
        .expect_error(403, "forbidden");
    s.delete(&format!("/v1/adapters/stt/data/dictionary/{mine_id}"))
        .bearer(&a.account_key)
        .send()
        .await
        .expect(204);
    s.get(&format!("/v1/adapters/stt/data/dictionary/{mine_id}"))
        .bearer(&a.account_key)
        .send()
        .await
        .expect_error(404, "dictionary_not_found");
    s.get("/v1/adapters/stt/data/dictionary")
        .send()
        .await
        .expect_error(401, "unauthenticated");

    // Turning global_stt on for the tenant makes deepgram appear in engines.
    s.su(
        Method::PATCH,
        &format!(
            "/v1/internal/tenant/{}/feature-flag/global_stt",
            a.tenant_sid
        ),
    )
    .json(&json!({"enabled": true}))
    .send()
    .await
    .expect(200);
    let g = s
        .get(&format!("/v1/adapters/stt/data/dictionary/{preset_id}"))
        .bearer(&a.account_key)
        .send()
        .await;
    assert_eq!(g.body["engines"], json!(["whisper", "vosk", "deepgram"]));
}

/// What a call of an account may use as recognition hints: its own dictionaries and the
/// global presets, never another account's (as if it did not exist).
async fn dictionaries_a_call_resolves(s: TestServer) {
    let a = s.fixture().await;
    let b = s.fixture_named("b").await;
    let create = |key: Option<&str>, name: &str, token: &str| {
        let req = match key {
            Some(k) => s.post("/v1/adapters/stt/data/dictionary").bearer(k),
            None => s.su(Method::POST, "/v1/internal/stt-dictionary"),
        };
        req.json(&json!({"name": name, "language": "en-US", "tokens": [token]}))
    };
    let preset = create(None, "banking", "overdraft").send().await;
    preset.expect(201);
    let mine = create(Some(&a.account_key), "products", "callsmith")
        .send()
        .await;
    mine.expect(201);
    let theirs = create(Some(&b.account_key), "secret", "project x")
        .send()
        .await;
    theirs.expect(201);
    let resolve = |sid: String| {
        let store = s.store.clone();
        let account = a.account_sid.clone();
        async move {
            store
                .dictionary_for_account(&account, &sid)
                .await
                .unwrap()
                .map(|d| d.tokens)
        }
    };
    assert_eq!(
        resolve(mine.str("id")).await,
        Some(vec!["callsmith".to_string()])
    );
    assert_eq!(
        resolve(preset.str("id")).await,
        Some(vec!["overdraft".to_string()])
    );
    assert_eq!(resolve(theirs.str("id")).await, None, "another account's");
    assert_eq!(resolve("dic_missing".into()).await, None);
    // The owner resolves its own.
    let own = s
        .store
        .dictionary_for_account(&b.account_sid, &theirs.str("id"))
        .await
        .unwrap();
    assert_eq!(own.map(|d| d.name).as_deref(), Some("secret"));
}

both_backends!(
    global_presets,
    account_dictionaries,
    dictionaries_a_call_resolves
);
