//! Fixtures: what a test provisions in a running engine (tenant, account, trunk and number;
//! scenarios; agents; audio files) and the scenarios the tests share.

use std::time::Duration;

use serde_json::{Value, json};

use crate::engine::{Engine, SU_TOKEN, store_of};
use crate::peers::sipp::Sipp;

/// Ids made by [`provision`].
#[derive(Debug, Clone)]
pub struct Tenancy {
    pub tenant: String,
    pub account: String,
    /// The number calls come from.
    pub number: String,
    pub number_id: String,
}

/// Creates a tenant, an account (timezone `Europe/Berlin`), a trunk named `trunk` and one
/// number `identifier` on that trunk, as the superuser through the public API.
pub async fn provision(e: &Engine, tag: &str, trunk: &str, identifier: &str) -> Tenancy {
    let t = e
        .post_ok(
            "/v1/internal/tenant",
            None,
            json!({"name": format!("tenant {tag}")}),
            201,
        )
        .await;
    let tenant = t["sid"].as_str().expect("tenant sid").to_string();
    let a = {
        let r = e
            .client
            .post(format!("{}/v1/internal/account", e.base_url))
            .bearer_auth(SU_TOKEN)
            .header("X-Tenant-Sid", &tenant)
            .json(&json!({"name": format!("account {tag}"), "email": format!("owner-{tag}@example.test"), "country": "de", "timezone": "Europe/Berlin"}))
            .send()
            .await
            .expect("create account");
        assert_eq!(r.status().as_u16(), 201, "create account");
        r.json::<Value>().await.expect("account json")
    };
    let account = a["sid"].as_str().expect("account sid").to_string();
    let r = e
        .client
        .post(format!("{}/v1/internal/trunk", e.base_url))
        .bearer_auth(SU_TOKEN)
        .header("X-Tenant-Sid", &tenant)
        .json(&json!({"name": trunk}))
        .send()
        .await
        .expect("create trunk");
    assert_eq!(r.status().as_u16(), 201, "create trunk");
    let n = e
        .post_ok(
            "/v1/number",
            Some(&account),
            json!({"identifier": identifier, "name": "main line", "trunk": trunk}),
            201,
        )
        .await;
    Tenancy {
        tenant,
        account,
        number: identifier.to_string(),
        number_id: n["id"].as_str().expect("number id").to_string(),
    }
}

/// Creates a scenario whose draft is `snapshot`; publishes it too when `publish`.
/// Returns the scenario sid.
pub async fn create_scenario(
    store: &callsmith_domain::Store,
    t: &Tenancy,
    snapshot: &Value,
    publish: bool,
) -> String {
    let sid = callsmith_domain::ids::new_sid(callsmith_domain::ids::prefix::SCENARIO);
    let draft = callsmith_domain::ids::new_sid(callsmith_domain::ids::prefix::SCENARIO_VERSION);
    let text = snapshot.to_string();
    let hash = callsmith_scenarios::canonical::content_hash_value(snapshot);
    store
        .scenario_create(&sid, &t.tenant, &t.account, "e2e", "", &draft, &text, &hash)
        .await
        .expect("create scenario");
    if publish {
        store
            .scenario_publish(&sid, &t.account, &text, &hash)
            .await
            .expect("publish scenario");
    }
    sid
}

/// Agent settings for [`create_agent`].
#[derive(Debug, Clone)]
pub struct AgentSpec {
    pub scenario_sid: String,
    pub number_sid: String,
    pub cps: i64,
    pub cpl: i64,
    pub targets: Vec<String>,
    /// `{"strategy": ..., "args": ...}`.
    pub calling_schedule: Value,
    pub timezone: String,
    pub call_recording: bool,
    /// Answering-machine detection in the scenario's outbound_call bricks.
    pub voicemail_enabled: bool,
}

impl AgentSpec {
    /// An agent on `number_sid` running `scenario_sid` with the defaults most tests want:
    /// no cps or cpl limit, no result targets, always open, UTC, no recording, no
    /// answering-machine detection. Change a
    /// field with struct update syntax.
    pub fn new(scenario_sid: impl Into<String>, number_sid: impl Into<String>) -> AgentSpec {
        AgentSpec {
            scenario_sid: scenario_sid.into(),
            number_sid: number_sid.into(),
            cps: 0,
            cpl: 0,
            targets: vec![],
            calling_schedule: always(),
            timezone: "UTC".into(),
            call_recording: false,
            voicemail_enabled: false,
        }
    }
}

/// The calling schedule that is always open.
pub fn always() -> Value {
    json!({"strategy": "always", "args": {}})
}

/// Creates an active agent dialling from one number. Returns its sid.
pub async fn create_agent(store: &callsmith_domain::Store, t: &Tenancy, a: &AgentSpec) -> String {
    let sid = callsmith_domain::ids::new_sid(callsmith_domain::ids::prefix::AGENT);
    let targets: Vec<Value> = a.targets.iter().map(|u| json!({"url": u})).collect();
    let cfg = callsmith_domain::store::AgentConfig {
        gateway_type: "number".into(),
        number_sid: Some(a.number_sid.clone()),
        number_pool_sid: None,
        scenario_sid: a.scenario_sid.clone(),
        voicemail_enabled: a.voicemail_enabled,
        call_recording: a.call_recording,
        calling_schedule: a.calling_schedule.to_string(),
        timezone: a.timezone.clone(),
        cps: a.cps,
        cpl: a.cpl,
        is_test: false,
        communication_result: json!({"targets": targets}).to_string(),
        sms: None,
        sms_provider_sid: None,
        strategy_sid: None,
        status: "active".into(),
    };
    store
        .agent_create(&sid, &t.tenant, &t.account, &cfg)
        .await
        .expect("create agent");
    sid
}

/// Creates a communication strategy of the tenancy's account through `POST /v1/strategy`
/// (docs/strategies.md); returns its id.
pub async fn create_strategy(e: &Engine, t: &Tenancy, name: &str, definition: Value) -> String {
    let body = e
        .post_ok(
            "/v1/strategy",
            Some(&t.account),
            json!({"name": name, "definition": definition}),
            201,
        )
        .await;
    body["id"].as_str().expect("strategy id").to_string()
}

/// Dispatches one communication to `recipient` under a new strategy with `rules`, through a
/// new agent (`agent` changes the defaults of [`AgentSpec::new`], e.g. its result targets)
/// running `scenario`, published; `database_url` as for [`store_of`]. Returns the
/// communication's id.
pub async fn dispatch_with_strategy(
    e: &Engine,
    t: &Tenancy,
    database_url: Option<&str>,
    scenario: &Value,
    agent: impl FnOnce(AgentSpec) -> AgentSpec,
    rules: Value,
    recipient: &str,
) -> String {
    let store = store_of(e, database_url).await;
    let scn = create_scenario(&store, t, scenario, true).await;
    let spec = agent(AgentSpec::new(scn, t.number_id.clone()));
    let agent = create_agent(&store, t, &spec).await;
    drop(store);
    let stg = create_strategy(e, t, "under test", rules).await;
    let c = e
        .dispatch(
            t,
            json!({"recipient": recipient, "agent_sid": agent, "strategy_sid": stg}),
        )
        .await;
    c["id"].as_str().expect("communication id").to_string()
}

/// Waits for strategy communication `id` to end `completed` with its last attempt answered
/// by `answers` (a callee SIPp that must finish cleanly), and returns its attempts (as
/// [`attempts_of`]), two of them: the one that failed and the one answered.
pub async fn answered_at_the_second_attempt(
    e: &Engine,
    t: &Tenancy,
    id: &str,
    answers: &mut Sipp,
) -> Value {
    let done = e
        .wait_communication(&t.account, id, Duration::from_secs(60))
        .await;
    assert_eq!(
        done["communication_status"],
        "completed",
        "{done}\n{}",
        e.log()
    );
    assert_eq!(
        done["call_status"], "answered",
        "the row shows its last attempt: {done}"
    );
    assert!(
        answers.success(Duration::from_secs(20)).await,
        "{}",
        answers.dump()
    );
    let list = attempts_of(e, t, id).await;
    assert_eq!(list["total"], 2, "{list}");
    list
}

/// A communication's attempts as `GET /v1/communication/{id}/attempt` lists them (the first
/// page, oldest first: `total` and `items`).
pub async fn attempts_of(e: &Engine, t: &Tenancy, id: &str) -> Value {
    let (status, body) = e
        .get(&format!("/v1/communication/{id}/attempt"), Some(&t.account))
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// A scenario: greet with a TTS prompt, record goal `greeted`, end the call.
pub fn greeting_scenario(text: &str) -> Value {
    json!({"name": "greeting", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {
            "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""}},
            "outputs": [{"type": "next", "description": "", "next": "hello"}]}]},
        "inbound_call": {"v1": [{"id": "in", "description": "", "properties": {},
            "outputs": [{"type": "next", "description": "", "next": "hello"}]}]},
        "audio_tts": {"v1": [{"id": "hello", "description": "", "properties": {"text": text, "language": "", "voice": "", "engine": "", "model": ""},
            "outputs": [{"type": "next", "description": "", "next": "g"}]}]},
        "goal": {"v1": [{"id": "g", "description": "", "properties": {"goal": "greeted"},
            "outputs": [{"type": "next", "description": "", "next": "bye"}]}]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

/// A scenario that listens for an answering machine first: its outbound_call brick
/// (`is_voicemail`, detection as the agent's `voicemail_enabled` allows) takes `voicemail`
/// on a machine (the message "Please call us back." after the beep, goal `voicemail_left`,
/// end_call with signal `voicemail`) and `human` otherwise ("Hi, this is callsmith
/// calling.", goal `human`, an `end` brick).
pub fn voicemail_scenario() -> Value {
    use crate::scenario::{brick, next, outs, snapshot};
    let tts = |id: &str, text: &str, to: &str| {
        brick(
            id,
            json!({"text": text, "language": "", "voice": "", "engine": "", "model": ""}),
            next(to),
        )
    };
    let goal = |id: &str, g: &str, to: &str| brick(id, json!({"goal": g}), next(to));
    snapshot(
        "voicemail",
        json!({
            "start_call": {"v1": [brick("s", json!({
                "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""},
                "stt_general": {"language": "en-US", "engine": "whisper", "model": "", "primary_language": "", "fallback_languages": []}
            }), next("oc"))]},
            "outbound_call": {"v1": [brick("oc", json!({"is_voicemail": true}),
                outs(&[("human", "hi"), ("voicemail", "vm")]))]},
            "audio_tts": {"v1": [tts("hi", "Hi, this is callsmith calling.", "g_human"),
                                 tts("vm", "Please call us back.", "g_vm")]},
            "goal": {"v1": [goal("g_human", "human", "fin"), goal("g_vm", "voicemail_left", "bye")]},
            "end_call": {"v1": [brick("bye", json!({"signal": "voicemail"}), json!([]))]},
            "end": {"v1": [brick("fin", json!({}), json!([]))]}
        }),
    )
}

/// A scenario: ask a yes/no question by speech; `yes` → goal `agreed`, `no` → goal
/// `declined`, nothing → goal `silent`; then end the call.
pub fn question_scenario() -> Value {
    let goal = |id: &str, g: &str| {
        json!({"id": id, "description": "", "properties": {"goal": g},
        "outputs": [{"type": "next", "description": "", "next": "bye"}]})
    };
    json!({"name": "question", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {
            "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""},
            "stt_general": {"language": "en-US", "engine": "whisper", "model": "", "primary_language": "", "fallback_languages": []}},
            "outputs": [{"type": "next", "description": "", "next": "ask"}]}]},
        "question": {"v1": [{"id": "ask", "description": "", "properties": {
            "stt_properties": {"no_input_timeout": 12, "speech_timeout": 1},
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Do you want a call back?"}}, "is_interruptible": false},
            "type": "standard",
            "input_mode": "speech",
            "answer": {"answers": [
                {"answer_id": "yes", "description": "", "speech_input": {"tokens": ["yes", "yeah", "sure"], "mode": "contains"}},
                {"answer_id": "no", "description": "", "speech_input": {"tokens": ["no"], "mode": "contains"}}
            ]}},
            "outputs": [
                {"type": "yes", "description": "", "next": "g_yes"},
                {"type": "no", "description": "", "next": "g_no"},
                {"type": "invalid", "description": "", "next": "g_invalid"},
                {"type": "empty", "description": "", "next": "g_empty"}
            ]}]},
        "goal": {"v1": [goal("g_yes", "agreed"), goal("g_no", "declined"), goal("g_invalid", "unclear"), goal("g_empty", "silent")]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

/// A scenario: ask "Press one to confirm." and listen by `input_mode` (`dtmf`: the key 1;
/// `speech`: "yes"/"yeah"/"sure" by the `whisper` engine); the answer is replied to with a
/// TTS prompt ("Thank you, goodbye.") — the reply whose first RTP packet ends the turn
/// latency — and goal `confirmed`; anything else → goal `unconfirmed`; then the call ends.
pub fn reply_scenario(input_mode: &str) -> Value {
    let end = |id: &str, g: &str| {
        json!({"id": id, "description": "", "properties": {"goal": g},
        "outputs": [{"type": "next", "description": "", "next": "bye"}]})
    };
    json!({"name": "confirm", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {
            "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""},
            "stt_general": {"language": "en-US", "engine": "whisper", "model": "", "primary_language": "", "fallback_languages": []}},
            "outputs": [{"type": "next", "description": "", "next": "ask"}]}]},
        "question": {"v1": [{"id": "ask", "description": "", "properties": {
            "stt_properties": {"no_input_timeout": 12, "speech_timeout": 1},
            "dtmf_properties": {"max_symbols": 1},
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Press one to confirm."}}, "is_interruptible": false},
            "type": "standard",
            "input_mode": input_mode,
            "answer": {"answers": [
                {"answer_id": "yes", "description": "", "speech_input": {"tokens": ["yes", "yeah", "sure"], "mode": "contains"}, "dtmf_input": {"value": "1"}}
            ]}},
            "outputs": [
                {"type": "yes", "description": "", "next": "thanks"},
                {"type": "invalid", "description": "", "next": "g_no"},
                {"type": "empty", "description": "", "next": "g_no"}
            ]}]},
        "audio_tts": {"v1": [{"id": "thanks", "description": "", "properties": {"text": "Thank you, goodbye.", "language": "", "voice": "", "engine": "", "model": ""},
            "outputs": [{"type": "next", "description": "", "next": "g_yes"}]}]},
        "goal": {"v1": [end("g_yes", "confirmed"), end("g_no", "unconfirmed")]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

/// Uploads a WAV as an audio file of `account` (as the superuser); returns the audio file.
pub async fn upload_audio(e: &Engine, account: &str, wav: Vec<u8>) -> Value {
    let part = reqwest::multipart::Part::bytes(wav)
        .file_name("tone.wav")
        .mime_str("audio/wav")
        .expect("mime");
    let r = e
        .client
        .post(format!("{}/v1/audio", e.base_url))
        .bearer_auth(SU_TOKEN)
        .header("X-Account-Sid", account)
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .expect("upload");
    assert_eq!(r.status().as_u16(), 201);
    r.json().await.expect("audio json")
}

/// Polls `f` every 200 ms until it returns Some or `within` passes.
pub async fn eventually<T, F, Fut>(within: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
