//! Brick kinds in real calls: the real `callsmith` binary dials a SIPp callee on loopback
//! whose media is either SIPp's RTP echo or the test's own RTP peer ([`RtpPeer`]: PCMU from
//! flite/sox files and RFC 4733 telephone-events). Each test asserts the route the scenario
//! took (goals, the history trace) and what the far side received (RTP, HTTP requests).
//!
//! Which test runs which brick kind:
//! - `question_dtmf_branch`: start_call, question (DTMF), audio_tts, goal, end_call
//! - `webhook_maps_into_a_condition`: webhook, condition_group, audio_tts, goal, end_call
//! - `sms_reaches_the_gateway_and_an_inactive_provider_fails`: sms (agent calls), goal
//! - `question_routes_speech_by_trained_intent`: question (speech + classifier)
//! - `question_routes_speech_by_llm_reply`: question (speech + llm_properties)
//! - `llm_reprompt_on_silence_honours_global_llm`: question fallback_empty with
//!   llm_properties, the global_llm flag
//! - `voicemail_greeting_with_beep_takes_voicemail` / `short_hello_takes_human` /
//!   `voicemail_disabled_agent_skips_detection`: outbound_call (is_voicemail, the agent's
//!   voicemail_enabled), audio_tts, goal, end_call, end
//! - `every_remaining_kind_in_one_call`: assignment, increment, data_mapping, audio
//!   (play_mode, tts + file entries), audio_file (uploaded file), start_tree, audio_tts,
//!   goal, end_call with a signal
//!
//! Elsewhere: inbound_call (tests/dialer.rs), question by speech tokens (tests/calls.rs),
//! call_transfer (the transfer tests).

use std::time::Duration;

use callsmith_e2e::scenario::{brick, next, outs};
use callsmith_e2e::*;
use serde_json::{Value, json};

fn snapshot(bricks: Value) -> Value {
    callsmith_e2e::scenario::snapshot("bricks e2e", bricks)
}

/// start_call with espeak-ng prompts and whisper recognition, leading to `to`.
fn start_call(to: &str) -> Value {
    json!({"v1": [brick("s", json!({
        "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""},
        "stt_general": {"language": "en-US", "engine": "whisper", "model": "", "primary_language": "", "fallback_languages": []}
    }), next(to))]})
}

fn goal(id: &str, g: &str, to: &str) -> Value {
    brick(id, json!({"goal": g}), next(to))
}

fn end_call(id: &str, signal: &str) -> Value {
    brick(id, json!({"signal": signal}), json!([]))
}

fn tts(id: &str, text: &str, to: &str) -> Value {
    brick(
        id,
        json!({"text": text, "language": "", "voice": "", "engine": "", "model": ""}),
        next(to),
    )
}

/// The trace events of one kind.
fn events<'a>(h: &'a Value, kind: &str) -> Vec<&'a Value> {
    h["trace"]
        .as_array()
        .map(|t| t.iter().filter(|e| e["event"] == kind).collect())
        .unwrap_or_default()
}

/// The output a brick took.
fn taken(h: &Value, brick_id: &str) -> String {
    events(h, "output_taken")
        .iter()
        .find(|e| e["brick_id"] == brick_id)
        .and_then(|e| e["output"].as_str())
        .unwrap_or_else(|| panic!("{brick_id} took no output: {}", h["trace"]))
        .to_string()
}

/// Ids of the bricks entered, in order.
fn entered(h: &Value) -> Vec<String> {
    events(h, "brick_entered")
        .iter()
        .map(|e| e["brick_id"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// One engine, one SIPp callee whose media is an [`RtpPeer`] running `script`.
struct Rig {
    e: Engine,
    t: Tenancy,
    store: callsmith_domain::Store,
    callee: Sipp,
    rtp: RtpPeer,
}

async fn rig(tag: &str, script: Vec<RtpStep>, stt_url: Option<String>, extra_toml: &str) -> Rig {
    let rtp = RtpPeer::start(script).await;
    let port = rtp.port.to_string();
    let callee = Sipp::spawn(
        "dialer_uas_rtp_peer.xml",
        None,
        None,
        &["-m", "1", "-key", "rtpport", &port],
    );
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        stt_url,
        extra_toml: extra_toml.to_string(),
        ..Default::default()
    })
    .await;
    let t = provision(&e, tag, "carrier", &format!("+49301007{:02}", tag.len())).await;
    let store = store_of(&e, None).await;
    Rig {
        e,
        t,
        store,
        callee,
        rtp,
    }
}

impl Rig {
    /// A scenario test call of `snap` (as a draft); returns the communication id, the
    /// finished communication and its history.
    /// (A test call ignores dispatch data.)
    async fn test_call(&self, snap: &Value) -> (String, Value, Value) {
        let scn = create_scenario(&self.store, &self.t, snap, false).await;
        self.dispatch(json!({"recipient": "+4915550777", "scenario_sid": scn, "draft": true}))
            .await
    }

    /// A call of an agent (created through the API, `voicemail_enabled` as given) running
    /// `snap` published, with dispatch `data`.
    async fn agent_call(
        &self,
        snap: &Value,
        data: Value,
        voicemail_enabled: bool,
    ) -> (String, Value, Value) {
        let scn = create_scenario(&self.store, &self.t, snap, true).await;
        let agent = self
            .e
            .post_ok(
                "/v1/agent",
                Some(&self.t.account),
                json!({"gateway_type": "number", "number_sid": self.t.number_id, "scenario_sid": scn,
                       "voicemail_enabled": voicemail_enabled}),
                201,
            )
            .await;
        self.dispatch(json!({"recipient": "+4915550777", "agent_sid": agent["id"], "data": data}))
            .await
    }

    /// Whether the newest version of classifier `id` reaches `ready` within 30 s.
    async fn classifier_ready(&self, id: &str) -> bool {
        eventually(Duration::from_secs(30), || async {
            let (_, v) = self
                .e
                .get(
                    &format!("/v1/adapters/ids/classifier/{id}"),
                    Some(&self.t.account),
                )
                .await;
            (v["latest"]["training_state"] == "ready").then_some(())
        })
        .await
        .is_some()
    }

    async fn dispatch(&self, body: Value) -> (String, Value, Value) {
        let c = self.e.dispatch(&self.t, body).await;
        let id = c["id"].as_str().expect("id").to_string();
        let done = self
            .e
            .wait_communication(&self.t.account, &id, Duration::from_secs(60))
            .await;
        assert_eq!(
            done["communication_status"],
            "completed",
            "{done}\n{}",
            self.e.log()
        );
        assert_eq!(done["has_history"], true, "{done}\n{}", self.e.log());
        let h = self.e.history(&self.t.account, &id);
        (id, done, h)
    }
}

/// (a) The callee types 4 2 # as RFC 4733 telephone-events; the question's DTMF answer
/// `code42` is taken and its confirmation prompt reaches the callee.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn question_dtmf_branch() {
    let mut r = rig(
        "dtmf",
        vec![
            RtpStep::Wait(Duration::from_millis(1500)),
            RtpStep::Digits("42#".into()),
        ],
        None,
        "",
    )
    .await;
    let snap = snapshot(json!({
        "start_call": start_call("ask"),
        "question": {"v1": [brick("ask", json!({
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Enter your code, then hash."}}, "is_interruptible": false},
            "type": "standard", "input_mode": "dtmf",
            "dtmf_properties": {"dtmf_timeout": 3, "no_input_timeout": 8, "min_symbols": 1, "max_symbols": 4, "finish_on_key": "#"},
            "answer": {"answers": [
                {"answer_id": "code7", "description": "", "dtmf_input": {"value": "7"}},
                {"answer_id": "code42", "description": "", "dtmf_input": {"value": "42"}}
            ]}
        }), outs(&[("code7", "g_wrong"), ("code42", "ok"), ("invalid", "g_invalid"), ("empty", "g_empty")]))]},
        "audio_tts": {"v1": [tts("ok", "Code accepted. Thank you.", "g_ok")]},
        "goal": {"v1": [goal("g_ok", "code_ok", "bye"), goal("g_wrong", "wrong_code", "bye"),
                        goal("g_invalid", "invalid", "bye"), goal("g_empty", "empty", "bye")]},
        "end_call": {"v1": [end_call("bye", "done")]}
    }));
    let (_, done, h) = r.test_call(&snap).await;
    assert_eq!(done["goals"], json!(["code_ok"]), "{}", h["trace"]);
    assert_eq!(taken(&h, "ask"), "code42");
    let heard = events(&h, "input_heard");
    assert_eq!(heard[0]["heard"], json!({"input": "dtmf", "digits": "42"}));
    assert_eq!(events(&h, "answer_matched")[0]["answer_id"], "code42");
    assert_eq!(h["turns"][0]["dtmf"], "42", "{}", h["turns"]);
    assert_eq!(
        h["end"],
        json!({"reason": "end_call", "brick_id": "bye", "signal": "done"})
    );
    let confirm = h["prompts"]
        .as_array()
        .and_then(|p| {
            p.iter()
                .find(|p| p["prompt"]["text"] == "Code accepted. Thank you.")
        })
        .unwrap_or_else(|| panic!("no confirmation prompt: {}", h["prompts"]));
    assert_eq!(confirm["outcome"], "completed");
    // The callee heard the statement and, after its digits, the confirmation.
    let (voiced, after) = r.rtp.voiced();
    assert!(r.rtp.received() > 100, "{}", r.rtp.received());
    assert!(
        voiced > 40 && after > 20,
        "voiced {voiced}, after the digits {after}"
    );
    assert!(
        r.callee.success(Duration::from_secs(10)).await,
        "{}",
        r.callee.dump()
    );
}

/// (b) A webhook to a local HTTP server; its JSON answer is mapped into variables that a
/// condition_group routes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_maps_into_a_condition() {
    let api = HttpPeer::start(|req| {
        if req.method == "POST" && req.target == "/orders/A17" {
            Reply::json(
                200,
                &json!({"order": {"id": "A17", "status": "shipped", "eta_days": 2}}),
            )
        } else {
            Reply::json(404, &json!({"error": "no such order"}))
        }
    })
    .await;
    let mut r = rig("hook", vec![], None, "[webhook]\nallow_private = true\n").await;
    let snap = snapshot(json!({
        "start_call": start_call("hook"),
        "webhook": {"v1": [brick("hook", json!({
            "request": {
                "method": "POST", "url": format!("{}/orders/{{{{order}}}}", api.url),
                "body": {"data": "{\"customer\": \"{{name}}\"}", "type": "json", "form_values": []},
                "authentication": {"type": "bearer", "bearer": {"token": "tok-{{order}}"}},
                "header": {"headers": [{"name": "X-Trace", "value": "{{call.communication_id}}"}]},
                "insecure_skip_verify": false, "proxy": {"url": ""}, "attach_call_metadata": true, "timeout": 5
            },
            "options": {"async": false, "timeout": 5},
            "response_mapping": {"variables": [
                {"name": "order_status", "source": "body", "path": "$.order.status", "set_if_not_found": ""},
                {"name": "{{eta}}", "source": "body", "path": "$.order.eta_days", "set_if_not_found": ""},
                {"name": "carrier", "source": "body", "path": "$.order.carrier", "set_if_not_found": "n/a"}
            ]}
        }), outs(&[("processed", "branch"), ("fail", "g_fail")]))]},
        "condition_group": {"v1": [brick("branch", json!({"condition": {"conditions": [
            {"condition_id": "pending", "description": "", "condition_operator": "and", "elements": [
                {"variable": "order_status", "element_operator": "equal", "value": "pending"}]},
            {"condition_id": "shipped", "description": "", "condition_operator": "and", "elements": [
                {"variable": "order_status", "element_operator": "equal", "value": "shipped"},
                {"variable": "eta", "element_operator": "less", "value": "5"}]}
        ]}}), outs(&[("pending", "g_pending"), ("shipped", "say"), ("else", "g_else")]))]},
        "audio_tts": {"v1": [tts("say", "Order {{order}} arrives in {{eta}} days.", "g_shipped")]},
        "goal": {"v1": [goal("g_shipped", "shipped", "bye"), goal("g_pending", "pending", "bye"),
                        goal("g_else", "other", "bye"), goal("g_fail", "webhook_failed", "bye")]},
        "end_call": {"v1": [end_call("bye", "")]}
    }));
    let (id, done, h) = r
        .agent_call(&snap, json!({"order": "A17", "name": "Ann"}), false)
        .await;
    assert_eq!(done["goals"], json!(["shipped"]), "{}", h["trace"]);
    assert_eq!(taken(&h, "hook"), "processed");
    assert_eq!(taken(&h, "branch"), "shipped");
    let v = &done["variables"];
    assert_eq!(v["order_status"], "shipped", "{v}");
    assert_eq!(v["eta"], "2");
    assert_eq!(v["carrier"], "n/a", "set_if_not_found");
    let called = events(&h, "webhook_called");
    assert_eq!(called[0]["outcome"]["status"], "processed");
    assert_eq!(called[0]["outcome"]["response"]["http_status_code"], 200);
    assert_eq!(
        h["prompts"][0]["prompt"]["text"],
        "Order A17 arrives in 2 days."
    );
    // What the server received.
    let reqs = api.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0].json(), json!({"customer": "Ann"}));
    assert_eq!(reqs[0].header("authorization"), Some("Bearer tok-A17"));
    assert_eq!(reqs[0].header("x-trace"), Some(id.as_str()));
    assert_eq!(
        reqs[0].header("x-callsmith-communication-id"),
        Some(id.as_str())
    );
    assert!(
        r.callee.success(Duration::from_secs(10)).await,
        "{}",
        r.callee.dump()
    );
}

/// (c) An sms brick in agent calls: the agent's HTTP gateway receives from/to/text; after
/// the provider is set inactive the send is recorded as failed and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sms_reaches_the_gateway_and_an_inactive_provider_fails() {
    let gateway = HttpPeer::start(|_| Reply::json(200, &json!({"queued": true}))).await;
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "2", "-rtp_echo"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "sms", "carrier", "+4930100800").await;
    let store = store_of(&e, None).await;
    let snap = snapshot(json!({
        "start_call": start_call("text"),
        "sms": {"v1": [brick("text", json!({"to": "", "text": "Your code is {{code}}."}),
            outs(&[("success", "g_sent"), ("failure", "g_failed")]))]},
        "goal": {"v1": [goal("g_sent", "sms_sent", "bye"), goal("g_failed", "sms_failed", "bye")]},
        "end_call": {"v1": [end_call("bye", "")]}
    }));
    let scn = create_scenario(&store, &t, &snap, true).await;
    let provider = e
        .post_ok(
            "/v1/sms/provider",
            Some(&t.account),
            json!({"name": "gateway", "type": "http", "url": format!("{}/send?to={{{{to}}}}", gateway.url),
                   "method": "POST",
                   "headers": [{"name": "Content-Type", "value": "application/json"}, {"name": "X-From", "value": "{{from}}"}],
                   "body_template": "{\"from\": \"{{from}}\", \"to\": \"{{to}}\", \"text\": \"{{text}}\"}",
                   "numbers": ["+4930100899"], "status": "active"}),
            201,
        )
        .await;
    let provider_id = provider["id"].as_str().expect("provider id").to_string();
    let agent = e
        .post_ok(
            "/v1/agent",
            Some(&t.account),
            json!({"gateway_type": "number", "number_sid": t.number_id, "scenario_sid": scn,
                   "sms": {"provider_sid": provider_id, "use_alpha": false, "alpha": "", "number": "+4930100899"}}),
            201,
        )
        .await;
    let agent = agent["id"].as_str().expect("agent id").to_string();
    let dispatch = |code: &'static str| {
        let e = &e;
        let t = &t;
        let agent = agent.clone();
        async move {
            let c = e
                .dispatch(
                    t,
                    json!({"recipient": "+4915550123", "agent_sid": agent, "data": {"code": code}}),
                )
                .await;
            let id = c["id"].as_str().expect("id").to_string();
            let done = e
                .wait_communication(&t.account, &id, Duration::from_secs(60))
                .await;
            assert_eq!(
                done["communication_status"],
                "completed",
                "{done}\n{}",
                e.log()
            );
            let h = e.history(&t.account, &id);
            (done, h)
        }
    };

    let (done, h) = dispatch("7391").await;
    assert_eq!(done["goals"], json!(["sms_sent"]), "{}", h["trace"]);
    let sent = events(&h, "sms_sent");
    assert_eq!(sent[0]["to"], "+4915550123");
    assert_eq!(sent[0]["text"], "Your code is 7391.");
    assert_eq!(sent[0]["outcome"], json!({"result": "sent"}));
    let reqs = gateway.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(
        reqs[0].json(),
        json!({"from": "+4930100899", "to": "+4915550123", "text": "Your code is 7391."})
    );
    // Values are percent-encoded in the url, as the API renders a provider's url when it
    // checks it (a bare `+` would read as a space in a query).
    assert_eq!(reqs[0].target, "/send?to=%2B4915550123");
    assert_eq!(reqs[0].header("x-from"), Some("+4930100899"));

    // The provider goes inactive: the send is recorded as failed, nothing reaches the gateway.
    let (s, v) = e
        .call(
            reqwest::Method::PATCH,
            &format!("/v1/sms/provider/{provider_id}"),
            Some(&t.account),
            Some(json!({"status": "inactive"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (done, h) = dispatch("1111").await;
    assert_eq!(done["goals"], json!(["sms_failed"]), "{}", h["trace"]);
    let sent = events(&h, "sms_sent");
    assert_eq!(sent[0]["outcome"]["result"], "failed");
    assert!(
        sent[0]["outcome"]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("inactive"),
        "{}",
        sent[0]
    );
    assert_eq!(
        gateway.requests().len(),
        1,
        "no request for the inactive provider"
    );
    assert!(
        callee.success(Duration::from_secs(10)).await,
        "{}",
        callee.dump()
    );
}

/// A question whose answers are chosen by intent (classifier or LLM), no tokens.
fn intent_question(intent_properties: Value, statement: &str) -> Value {
    snapshot(json!({
        "start_call": start_call("ask"),
        "question": {"v1": [brick("ask", json!({
            "statement": {"audio": {"mode": "tts", "tts": {"text": statement}}, "is_interruptible": false},
            "type": "standard", "input_mode": "speech",
            "stt_properties": {"no_input_timeout": 10, "speech_timeout": 1, "intent_properties": intent_properties},
            "answer": {"answers": [
                {"answer_id": "cancel", "description": "the caller wants to cancel", "speech_input": {"intent": {"id": "cancel"}}},
                {"answer_id": "upgrade", "description": "the caller wants a bigger plan", "speech_input": {"intent": {"id": "upgrade"}}}
            ]}
        }), outs(&[("cancel", "g_cancel"), ("upgrade", "g_upgrade"), ("invalid", "g_invalid"), ("empty", "g_empty")]))]},
        "goal": {"v1": [goal("g_cancel", "cancelling", "bye"), goal("g_upgrade", "upgrading", "bye"),
                        goal("g_invalid", "unclear", "bye"), goal("g_empty", "silent", "bye")]},
        "end_call": {"v1": [end_call("bye", "")]}
    }))
}

/// The callee's words as µ-law: `lead_ms` of silence, flite speech, one second of silence.
fn spoken(text: &str, lead_ms: u32) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = ulaw_speech(dir.path(), "said.ul", text, lead_ms);
    std::fs::read(p).expect("speech")
}

/// (d) A classifier trained through the API routes the callee's flite speech by intent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn question_routes_speech_by_trained_intent() {
    let node = SttNode::start().await;
    let mut r = rig(
        "intent",
        vec![RtpStep::Audio(spoken(
            "I want to cancel my subscription.",
            2500,
        ))],
        Some(node.url.clone()),
        "",
    )
    .await;
    let classifier = "6f0c2a52-7a1e-4c1e-9a55-0e2d3c4b5a01";
    let (s, v) = r
        .e
        .call(
            reqwest::Method::PUT,
            &format!("/v1/adapters/ids/classifier/{classifier}"),
            Some(&r.t.account),
            Some(json!({"model_id": "c1a551f1-0000-4000-8000-000000000001", "description": "billing", "intent": {"intents": [
                {"id": "cancel", "description": "end the contract", "phrase": {"phrases": [
                    "cancel my subscription", "I want to cancel", "please cancel my contract",
                    "stop my subscription", "terminate my account", "I would like to quit the service"]}},
                {"id": "upgrade", "description": "a bigger plan", "phrase": {"phrases": [
                    "upgrade my plan", "I want more data", "a bigger package please",
                    "increase my plan", "switch me to premium", "I need a larger plan"]}}
            ]}})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert!(
        r.classifier_ready(classifier).await,
        "the classifier did not become ready"
    );
    let snap = intent_question(
        json!({"classifier": {"id": classifier, "version": 0}, "threshold": 0.4}),
        "How can I help?",
    );
    let (_, done, h) = r.test_call(&snap).await;
    let transcript = h["turns"][0]["transcript"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(transcript.contains("cancel"), "heard: {}", h["turns"]);
    assert_eq!(done["goals"], json!(["cancelling"]), "{}", h["trace"]);
    let classified = events(&h, "intents_classified");
    assert_eq!(
        classified[0]["intents"][0]["intent"], "cancel",
        "{}",
        classified[0]
    );
    assert!(
        classified[0]["intents"][0]["confidence"]
            .as_f64()
            .unwrap_or(0.0)
            >= 0.4
    );
    assert_eq!(events(&h, "answer_matched")[0]["answer_id"], "cancel");
    assert_eq!(taken(&h, "ask"), "cancel");
    assert!(r.rtp.voiced().0 > 20, "the callee heard the statement");
    assert!(
        r.callee.success(Duration::from_secs(10)).await,
        "{}",
        r.callee.dump()
    );
}

/// (d2) The same question with a classifier trained by the remote classifier service: a
/// live call predicts through the service the API predicts with, so a remote-trained
/// version routes the call as it answers `POST …/predict`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn question_routes_speech_by_a_remote_classifier() {
    let node = SttNode::start().await;
    let remote = HttpPeer::start(|req| match req.target.as_str() {
        "/train" => Reply::json(200, &json!({"accepted": true})),
        "/predict" => {
            let text = req.json()["text"].as_str().unwrap_or("").to_lowercase();
            let (cancel, upgrade) = if text.contains("cancel") { (0.93, 0.07) } else { (0.1, 0.9) };
            Reply::json(200, &json!({"intents": [{"id": "upgrade", "confidence": upgrade}, {"id": "cancel", "confidence": cancel}]}))
        }
        _ => Reply::empty(404),
    })
    .await;
    let mut r = rig(
        "remote",
        vec![RtpStep::Audio(spoken(
            "I want to cancel my subscription.",
            2500,
        ))],
        Some(node.url.clone()),
        &format!("[adapters]\nremote_classifier_url = {:?}\n", remote.url),
    )
    .await;
    let classifier = "6f0c2a52-7a1e-4c1e-9a55-0e2d3c4b5a02";
    let (s, v) = r
        .e
        .call(
            reqwest::Method::PUT,
            &format!("/v1/adapters/ids/classifier/{classifier}"),
            Some(&r.t.account),
            Some(json!({"model_id": "c1a551f1-0000-4000-8000-0000000000ff", "description": "billing", "intent": {"intents": [
                {"id": "cancel", "description": "end the contract", "phrase": {"phrases": ["cancel my subscription", "I want to cancel"]}},
                {"id": "upgrade", "description": "a bigger plan", "phrase": {"phrases": ["upgrade my plan", "I want more data"]}}
            ]}})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert!(
        r.classifier_ready(classifier).await,
        "the remote training did not complete"
    );
    let snap = intent_question(
        json!({"classifier": {"id": classifier, "version": 0}, "threshold": 0.4}),
        "How can I help?",
    );
    let (_, done, h) = r.test_call(&snap).await;
    assert_eq!(done["goals"], json!(["cancelling"]), "{}", h["trace"]);
    let classified = events(&h, "intents_classified");
    assert_eq!(
        classified[0]["intents"][0]["intent"], "cancel",
        "{}",
        classified[0]
    );
    assert!(
        remote.requests().iter().any(|q| q.target == "/predict"),
        "the call asked the remote service"
    );
    assert!(
        r.callee.success(Duration::from_secs(10)).await,
        "{}",
        r.callee.dump()
    );
}

/// (e) llm_properties: a local OpenAI-compatible server streams the answer id as SSE chunks;
/// the reply picks the answer. The account's global_llm flag is on; the provider is
/// GDPR-flagged and the brick requires it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn question_routes_speech_by_llm_reply() {
    let node = SttNode::start().await;
    let llm = HttpPeer::start(|req| {
        if req.method == "POST" && req.target == "/v1/chat/completions" {
            Reply::chat_stream("gpt-e2e", "upgrade", Duration::from_millis(20))
        } else {
            Reply::json(404, &json!({"error": {"message": "not found"}}))
        }
    })
    .await;
    let providers = format!(
        "[[adapters.llm_providers]]\nname = \"local\"\nbase_url = \"{}/v1\"\napi_key = \"sk-e2e\"\ngdpr = true\nmodels = [\"gpt-e2e\"]\n",
        llm.url
    );
    let mut r = rig(
        "llm",
        vec![RtpStep::Audio(spoken(
            "I would like a bigger plan with more data.",
            2500,
        ))],
        Some(node.url.clone()),
        &providers,
    )
    .await;
    let (s, v) =
        r.e.call(
            reqwest::Method::PATCH,
            &format!("/v1/internal/tenant/{}/feature-flag/global_llm", r.t.tenant),
            None,
            Some(json!({"enabled": true, "account_sids": [r.t.account]})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let snap = intent_question(
        json!({"llm_properties": {"engine": "", "model": "gpt-e2e", "provider": "local", "gdpr_required": true, "temperature": 0,
            "messages": [{"role": "system", "content": "You route calls of {{company}} customers."}]}}),
        "What can I do for you?",
    );
    let (_, done, h) = r.agent_call(&snap, json!({"company": "Acme"}), false).await;
    assert_eq!(
        done["goals"],
        json!(["upgrading"]),
        "{}\n{}",
        h["trace"],
        h["turns"]
    );
    assert_eq!(events(&h, "llm_replied")[0]["reply"], "upgrade");
    assert_eq!(taken(&h, "ask"), "upgrade");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-e2e"));
    let body = reqs[0].json();
    assert_eq!(body["model"], "gpt-e2e");
    assert_eq!(body["stream"], true);
    assert_eq!(body["temperature"], 0.0);
    let msgs = body["messages"].as_array().expect("messages");
    assert_eq!(
        msgs[0],
        json!({"role": "system", "content": "You route calls of Acme customers."})
    );
    assert!(
        msgs.iter().any(|m| m["role"] == "system"
            && m["content"]
                .as_str()
                .unwrap_or("")
                .contains("upgrade: the caller wants a bigger plan")),
        "the answers are listed: {body}"
    );
    let last = msgs.last().expect("a message");
    assert_eq!(last["role"], "user");
    assert_eq!(
        last["content"].as_str(),
        h["turns"][0]["transcript"].as_str(),
        "the transcript is the user message"
    );
    assert!(
        r.callee.success(Duration::from_secs(10)).await,
        "{}",
        r.callee.dump()
    );
}

/// (e) A fallback_empty entry with llm_properties speaks the model's reprompt; with the
/// account's global_llm flag off the model is not asked (a `port_error` in the trace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_reprompt_on_silence_honours_global_llm() {
    let llm = HttpPeer::start(|req| {
        if req.target == "/v1/chat/completions" {
            Reply::chat_stream("gpt-e2e", "Are you still there?", Duration::from_millis(10))
        } else {
            Reply::json(404, &json!({}))
        }
    })
    .await;
    let providers = format!(
        "[[adapters.llm_providers]]\nname = \"local\"\nbase_url = \"{}/v1\"\nmodels = [\"gpt-e2e\"]\n",
        llm.url
    );
    let snap = snapshot(json!({
        "start_call": start_call("ask"),
        "question": {"v1": [brick("ask", json!({
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Hello?"}}, "is_interruptible": false},
            "type": "standard", "input_mode": "speech",
            "stt_properties": {"no_input_timeout": 1.5},
            "answer": {"answers": [{"answer_id": "yes", "description": "", "speech_input": {"tokens": ["yes"]}}]},
            "fallback_empty": {"fallbacks": [{"is_repeat_statement": false, "is_interruptible": false, "type": "llm",
                "llm_properties": {"engine": "", "model": "gpt-e2e", "provider": "", "gdpr_required": false,
                    "messages": [{"role": "system", "content": "Ask {{name}} whether they are still there."}]}}]}
        }), outs(&[("yes", "g_yes"), ("empty", "g_silent")]))]},
        "goal": {"v1": [goal("g_yes", "agreed", "bye"), goal("g_silent", "silent", "bye")]},
        "end_call": {"v1": [end_call("bye", "")]}
    }));
    let data = json!({"name": "Ann"});

    // The flag is off (no rule): the model is not asked, the fallback has nothing to say.
    let off = rig("llm-off", vec![], None, &providers).await;
    let (_, done, h) = off.agent_call(&snap, data.clone(), false).await;
    assert_eq!(done["goals"], json!(["silent"]), "{}", h["trace"]);
    let err = events(&h, "port_error");
    assert_eq!(err[0]["operation"], "llm", "{}", h["trace"]);
    assert!(
        err[0]["error"]
            .as_str()
            .unwrap_or("")
            .contains("llm_disabled"),
        "{}",
        err[0]
    );
    assert!(events(&h, "llm_replied").is_empty());
    assert!(llm.requests().is_empty(), "the provider was not called");
    drop(off);

    // The flag on for the account: the reprompt is generated and spoken to the callee.
    let mut on = rig("llm-on", vec![], None, &providers).await;
    let (s, v) =
        on.e.call(
            reqwest::Method::PATCH,
            &format!(
                "/v1/internal/tenant/{}/feature-flag/global_llm",
                on.t.tenant
            ),
            None,
            Some(json!({"enabled": true, "account_sids": [on.t.account]})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (_, done, h) = on.agent_call(&snap, data, false).await;
    assert_eq!(done["goals"], json!(["silent"]), "{}", h["trace"]);
    assert_eq!(
        events(&h, "llm_replied")[0]["reply"],
        "Are you still there?"
    );
    assert_eq!(events(&h, "fallback")[0]["kind"], "empty");
    let reprompt = h["prompts"]
        .as_array()
        .and_then(|p| {
            p.iter()
                .find(|p| p["prompt"]["text"] == "Are you still there?")
        })
        .unwrap_or_else(|| panic!("the reprompt was not played: {}", h["prompts"]));
    assert_eq!(reprompt["outcome"], "completed");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].json()["messages"],
        json!([{"role": "system", "content": "Ask Ann whether they are still there."}])
    );
    let played: u64 = h["prompts"].as_array().map_or(0, |p| {
        p.iter().map(|p| p["played_ms"].as_u64().unwrap_or(0)).sum()
    });
    assert!(
        on.rtp.voiced().0 * 20 * 3 >= played,
        "the callee heard the prompts: {:?} voiced packets, {played} ms played, {} received, {}",
        on.rtp.voiced(),
        on.rtp.received(),
        h["media"]
    );
    assert!(
        on.callee.success(Duration::from_secs(10)).await,
        "{}",
        on.callee.dump()
    );
}

/// (f) A long greeting ending in a beep is a machine: the voicemail output is taken and
/// its message starts after the beep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voicemail_greeting_with_beep_takes_voicemail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let greeting = ulaw_greeting_with_beep(
        dir.path(),
        "greeting.ul",
        "Hello, you have reached the voicemail of John Smith. Please leave a message after the tone.",
        500,
    );
    let beep_at_ms = std::fs::metadata(dir.path().join("greeting.ul.speech.ul"))
        .expect("speech part")
        .len()
        / 8;
    let mut r = rig(
        "vm",
        vec![RtpStep::Audio(std::fs::read(&greeting).expect("greeting"))],
        None,
        "",
    )
    .await;
    let (_, done, h) = r.agent_call(&voicemail_scenario(), json!({}), true).await;
    assert_eq!(done["goals"], json!(["voicemail_left"]), "{}", h["trace"]);
    assert_eq!(events(&h, "answering_machine")[0]["verdict"], "machine");
    assert_eq!(taken(&h, "oc"), "voicemail");
    assert_eq!(h["end"]["signal"], "voicemail");
    let msg = &h["prompts"][0];
    assert_eq!(msg["prompt"]["text"], "Please call us back.");
    assert_eq!(msg["outcome"], "completed");
    let at = msg["at_ms"].as_u64().unwrap_or(0);
    assert!(
        at + 300 >= beep_at_ms,
        "the message starts after the beep ({at} ms, beep at {beep_at_ms} ms)"
    );
    assert!(r.rtp.voiced().0 > 20, "the machine recorded the message");
    assert!(
        r.callee.success(Duration::from_secs(10)).await,
        "{}",
        r.callee.dump()
    );
}

/// (f) An agent without `voicemail_enabled` does not listen for a machine: the verdict is
/// unknown and the human output is taken at once, even on a voicemail greeting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voicemail_disabled_agent_skips_detection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let greeting = ulaw_greeting_with_beep(
        dir.path(),
        "greeting.ul",
        "Hello, you have reached the voicemail of John Smith. Please leave a message after the tone.",
        500,
    );
    let mut r = rig(
        "novm",
        vec![RtpStep::Audio(std::fs::read(&greeting).expect("greeting"))],
        None,
        "",
    )
    .await;
    let (_, done, h) = r.agent_call(&voicemail_scenario(), json!({}), false).await;
    assert_eq!(done["goals"], json!(["human"]), "{}", h["trace"]);
    assert_eq!(events(&h, "answering_machine")[0]["verdict"], "unknown");
    assert_eq!(taken(&h, "oc"), "human");
    assert!(
        h["prompts"][0]["at_ms"].as_u64().unwrap_or(u64::MAX) < 1000,
        "no listening before the greeting: {}",
        h["prompts"][0]
    );
    assert!(
        r.callee.success(Duration::from_secs(10)).await,
        "{}",
        r.callee.dump()
    );
}

/// (f) A short "hello?" then silence is a person: the human output is taken, the call ends
/// at an `end` brick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_hello_takes_human() {
    let mut r = rig(
        "human",
        vec![RtpStep::Audio(spoken("Hello?", 300))],
        None,
        "",
    )
    .await;
    let (_, done, h) = r.agent_call(&voicemail_scenario(), json!({}), true).await;
    assert_eq!(done["goals"], json!(["human"]), "{}", h["trace"]);
    assert_eq!(events(&h, "answering_machine")[0]["verdict"], "human");
    assert_eq!(taken(&h, "oc"), "human");
    assert_eq!(h["end"], json!({"reason": "end", "brick_id": "fin"}));
    assert_eq!(
        h["prompts"][0]["prompt"]["text"],
        "Hi, this is callsmith calling."
    );
    assert!(
        h["prompts"][0]["at_ms"].as_u64().unwrap_or(u64::MAX) < 4000,
        "a person is greeted promptly: {}",
        h["prompts"][0]
    );
    assert!(r.rtp.voiced().0 > 20, "the callee heard the greeting");
    assert!(
        r.callee.success(Duration::from_secs(10)).await,
        "{}",
        r.callee.dump()
    );
}

/// (g) One call through assignment, increment, data_mapping, audio (sequential: a TTS and
/// an uploaded file), audio_file, start_tree, audio_tts, goal and end_call with a signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_remaining_kind_in_one_call() {
    let mut r = rig("every", vec![], None, "").await;
    // Upload a short file prompt.
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("jingle.wav");
    let st = std::process::Command::new("flite")
        .args(["-t", "Thanks for waiting.", "-o"])
        .arg(&wav)
        .status()
        .expect("flite");
    assert!(st.success());
    let part = reqwest::multipart::Part::bytes(std::fs::read(&wav).expect("wav"))
        .file_name("jingle.wav")
        .mime_str("audio/wav")
        .expect("mime");
    let resp =
        r.e.client
            .post(format!("{}/v1/audio", r.e.base_url))
            .bearer_auth(SU_TOKEN)
            .header("X-Account-Sid", &r.t.account)
            .multipart(reqwest::multipart::Form::new().part("file", part))
            .send()
            .await
            .expect("upload");
    assert_eq!(resp.status().as_u16(), 201);
    let audio: Value = resp.json().await.expect("audio json");
    let aud = audio["id"].as_str().expect("audio id").to_string();

    let snap = snapshot(json!({
        "start_call": start_call("assign"),
        "assignment": {"v1": [brick("assign", json!({"variables": [
            {"name": "greeting", "value": "Hello {{name}}"}, {"name": "{{points}}", "value": "5"}]}), next("inc"))]},
        "increment": {"v1": [brick("inc", json!({"variables": [{"variable": "points"}]}), next("map"))]},
        "data_mapping": {"v1": [brick("map", json!({"input": "{{profile}}", "variables": [
            {"name": "city", "path": "$.city", "set_if_not_found": ""},
            {"name": "tier", "path": "$.tier", "set_if_not_found": ""},
            {"name": "zip", "path": "$.zip", "set_if_not_found": "none"}]}), next("play"))]},
        "audio": {"v1": [brick("play", json!({"play_mode": "sequential", "audios": [
            {"mode": "tts", "tts_properties": {"text": "{{greeting}} from {{city}}."}, "file_properties": {"url": ""}},
            {"mode": "file", "tts_properties": {"text": ""}, "file_properties": {"url": aud}}],
            "tts_general": {"language": "", "voice": "", "engine": "flite", "speed": 1, "model": ""}}), next("jingle"))]},
        "audio_file": {"v1": [brick("jingle", json!({"url": aud}), next("sub"))]},
        "start_tree": {"v1": [brick("sub", json!({}), next("say"))]},
        "audio_tts": {"v1": [tts("say", "You have {{points}} points, {{tier}} member.", "g")]},
        "goal": {"v1": [goal("g", "points_{{points}}", "bye")]},
        "end_call": {"v1": [end_call("bye", "done_{{tier}}")]}
    }));
    let (_, done, h) = r
        .agent_call(
            &snap,
            json!({"name": "Ann", "profile": "{\"city\": \"Berlin\", \"tier\": \"gold\"}"}),
            false,
        )
        .await;
    assert_eq!(
        entered(&h),
        [
            "s", "assign", "inc", "map", "play", "jingle", "sub", "say", "g", "bye"
        ],
        "{}",
        h["trace"]
    );
    assert_eq!(done["goals"], json!(["points_6"]));
    let v = &done["variables"];
    for (k, want) in [
        ("greeting", "Hello Ann"),
        ("points", "6"),
        ("city", "Berlin"),
        ("tier", "gold"),
        ("zip", "none"),
    ] {
        assert_eq!(v[k], want, "{k}: {v}");
    }
    assert!(
        events(&h, "variable_changed")
            .iter()
            .any(|e| e["name"] == "points" && e["old"] == "5" && e["new"] == "6"),
        "{}",
        h["trace"]
    );
    assert_eq!(
        h["end"],
        json!({"reason": "end_call", "brick_id": "bye", "signal": "done_gold"})
    );
    let prompts = h["prompts"].as_array().expect("prompts");
    let shown: Vec<String> = prompts
        .iter()
        .map(|p| {
            p["prompt"]["text"]
                .as_str()
                .or(p["prompt"]["url"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        shown,
        [
            "Hello Ann from Berlin.",
            aud.as_str(),
            aud.as_str(),
            "You have 6 points, gold member."
        ]
    );
    assert_eq!(prompts[0]["prompt"]["voice"]["engine"], "flite");
    let mut played_ms = 0;
    for p in prompts {
        assert_eq!(p["outcome"], "completed", "{p}");
        played_ms += p["played_ms"].as_u64().unwrap_or(0);
    }
    assert!(played_ms > 3000, "{played_ms}");
    // The callee received the prompts as voice (at least a third of their length: pauses are silent).
    let (voiced, _) = r.rtp.voiced();
    assert!(
        voiced * 20 * 3 >= played_ms,
        "voiced packets {voiced}, played {played_ms} ms"
    );
    assert!(
        r.callee.success(Duration::from_secs(10)).await,
        "{}",
        r.callee.dump()
    );
}
