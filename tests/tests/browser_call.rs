//! Browser calls end to end: a WebRTC peer in the browser's place (ICE on loopback,
//! DTLS-SRTP, PCMU) calls a scenario draft through `POST /v1/communication/-/browser-call`,
//! hears the bot's prompt, answers a speech question with flite's "yes", and watches the
//! call over `GET /v1/communication/{id}/live`; the communication is a completed test call
//! that took the yes branch. The refusals (bad offers, unknown scenarios, a process that
//! runs no calls) are answered in the API's envelope.

use std::time::Duration;

use callsmith_e2e::*;
use callsmith_media::browser::testing::TestBrowser;
use serde_json::{Value, json};

/// greet → question (speech, token "yes") → goal said_yes → thanks / goal silent → end.
fn yes_no_scenario() -> Value {
    let next = |to: &str| json!([{"type": "next", "description": "", "next": to}]);
    json!({"name": "browser yes/no", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "outputs": next("hi"), "properties": {
            "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""},
            "stt_general": {"language": "en-US", "engine": "whisper", "model": "", "primary_language": "", "fallback_languages": []}}}]},
        "audio_tts": {"v1": [{"id": "hi", "description": "", "outputs": next("ask"),
            "properties": {"text": "Hello from callsmith.", "language": "", "voice": "", "engine": "", "model": ""}},
            {"id": "thanks", "description": "", "outputs": next("bye"),
            "properties": {"text": "Thank you.", "language": "", "voice": "", "engine": "", "model": ""}}]},
        "question": {"v1": [{"id": "ask", "description": "", "properties": {
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Do you agree?"}}, "is_interruptible": false},
            "type": "standard", "input_mode": "speech",
            "stt_properties": {"no_input_timeout": 8, "speech_timeout": 1},
            "answer": {"answers": [{"answer_id": "yes", "description": "", "speech_input": {"tokens": ["yes"]}}]}},
            "outputs": [{"type": "yes", "description": "", "next": "g_yes"}, {"type": "empty", "description": "", "next": "g_silent"}]}]},
        "goal": {"v1": [
            {"id": "g_yes", "description": "", "properties": {"goal": "said_yes"}, "outputs": next("thanks")},
            {"id": "g_silent", "description": "", "properties": {"goal": "silent"}, "outputs": next("bye")}]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

/// Server-Sent Events read from a streaming response: (event, data).
struct Sse {
    resp: reqwest::Response,
    buf: String,
}

impl Sse {
    async fn open(e: &Engine, account: &str, id: &str) -> Sse {
        let resp = e
            .client
            .get(format!("{}/v1/communication/{id}/live", e.base_url))
            .bearer_auth(SU_TOKEN)
            .header("X-Account-Sid", account)
            .send()
            .await
            .expect("live");
        assert_eq!(resp.status().as_u16(), 200, "live stream");
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        Sse {
            resp,
            buf: String::new(),
        }
    }

    /// The next event; None when the stream ends.
    async fn next(&mut self) -> Option<(String, Value)> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut name, mut data) = (String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if name.is_empty() {
                    continue; // a keep-alive comment
                }
                return Some((name, serde_json::from_str(&data).expect("event json")));
            }
            let chunk = self.resp.chunk().await.ok()??;
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_calls_a_draft_answers_by_voice_and_watches_it_branch() {
    let stt = SttNode::start().await;
    let e = Engine::start(EngineOptions {
        stt_url: Some(stt.url.clone()),
        trunks: idle_trunk("carrier"),
        ..Default::default()
    })
    .await;
    let t = provision(&e, "browser", "carrier", "+4930100811").await;
    let scn = e
        .post_ok("/v1/scenario", Some(&t.account), yes_no_scenario(), 201)
        .await;
    let scn = scn["id"].as_str().expect("scenario id").to_string();

    let browser = std::sync::Arc::new(TestBrowser::new().await);
    let offer = browser.offer().await;
    let (st, started) = e
        .post(
            "/v1/communication/-/browser-call",
            Some(&t.account),
            json!({"scenario_sid": scn, "draft": true, "sdp": offer}),
        )
        .await;
    assert_eq!(st, 201, "{started}\n{}", e.log());
    let c = &started["communication"];
    let id = c["id"].as_str().expect("communication id").to_string();
    assert_eq!(c["is_test"], true);
    assert_eq!(c["communication_status"], "in_progress");
    let answer = started["sdp"].as_str().expect("sdp answer");
    assert!(answer.contains("PCMU/8000") && answer.contains("a=fingerprint"));
    browser.accept(answer).await;

    // The live view, from the first brick on; the browser answers once asked.
    let said = tempfile::tempdir().unwrap();
    let yes = std::fs::read(ulaw_speech(said.path(), "yes.ul", "yes", 300)).unwrap();
    let mut live = Sse::open(&e, &t.account, &id).await;
    let (mut bricks, mut prompts, mut finals, mut turns) = (vec![], vec![], vec![], vec![]);
    let mut ended = Value::Null;
    let mut answering = None;
    let watch = tokio::time::timeout(Duration::from_secs(90), async {
        while let Some((name, data)) = live.next().await {
            match name.as_str() {
                "brick" => bricks.push(data["brick_id"].as_str().unwrap_or("").to_string()),
                "prompt" => {
                    if data["brick_id"] == "ask" && answering.is_none() {
                        let b = browser.clone();
                        let yes = yes.clone();
                        answering = Some(tokio::spawn(async move { b.speak(&yes).await }));
                    }
                    prompts.push(data);
                }
                "transcript" if data["final"] == true => finals.push(data["text"].clone()),
                "turn" => turns.push(data),
                "ended" => {
                    ended = data;
                    break;
                }
                _ => {}
            }
        }
    })
    .await;
    assert!(watch.is_ok(), "the call ended within 90 s\n{}", e.log());
    assert_eq!(
        bricks,
        ["s", "hi", "ask", "g_yes", "thanks", "bye"],
        "the yes branch, brick by brick"
    );
    let hi = prompts.iter().find(|p| p["brick_id"] == "hi").expect("hi");
    assert_eq!(hi["text"], "Hello from callsmith.");
    assert!(hi["played_ms"].as_u64().unwrap() > 500, "{hi}");
    assert_eq!(hi["interrupted"], false);
    assert!(
        finals
            .iter()
            .any(|f| f.as_str().unwrap_or("").to_lowercase().contains("yes")),
        "final transcripts: {finals:?}"
    );
    // The turn is told when it ends, then again with its reply's first RTP: the breakdown
    // end of speech → final transcript → reply requested → first RTP.
    let turn = turns.last().expect("a listen turn");
    assert_eq!(turn["heard"], "speech", "{turn}");
    assert_eq!(turn["brick_id"], "ask", "{turn}");
    let ms = |k: &str| turn[k].as_u64().unwrap_or_else(|| panic!("{k} in {turn}"));
    assert!(ms("speech_started_ms") < ms("speech_ended_ms"), "{turn}");
    // The speech node reports its end-of-turn decision apart from the final: the decision
    // comes no later than the final's arrival (at it when the node's speculative
    // transcription was done by the decision).
    assert!(ms("speech_ended_ms") <= ms("end_of_turn_ms"), "{turn}");
    assert!(ms("end_of_turn_ms") <= ms("final_ms"), "{turn}");
    assert!(ms("final_ms") <= ms("reply_ready_ms"), "{turn}");
    assert!(ms("reply_ready_ms") <= ms("reply_requested_ms"), "{turn}");
    assert!(
        ms("reply_requested_ms") <= ms("first_synthesis_ms"),
        "{turn}"
    );
    assert!(
        ms("first_synthesis_ms") <= ms("reply_first_rtp_ms"),
        "{turn}"
    );
    assert_eq!(
        ms("response_ms"),
        ms("reply_first_rtp_ms") - ms("speech_ended_ms")
    );
    let metrics = e
        .client
        .get(format!("{}/metrics", e.base_url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("callsmith_turn_response_seconds_count 1"),
        "the response time on /metrics"
    );
    for stage in ["end_of_turn", "transcript", "reply", "synthesis", "send"] {
        assert!(
            metrics.contains(&format!(
                "callsmith_turn_stage_seconds_count{{stage=\"{stage}\"}} 1"
            )),
            "stage {stage} on /metrics"
        );
    }
    assert_eq!(ended["communication_status"], "completed", "{ended}");
    assert_eq!(ended["goals"], json!(["said_yes"]));
    assert!(
        browser.voiced_packets() > 25,
        "the browser heard the bot: {} voiced packets",
        browser.voiced_packets()
    );

    // The communication, as any client sees it.
    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(20))
        .await;
    assert_eq!(done["communication_status"], "completed", "{done}");
    assert_eq!(done["is_test"], true);
    assert_eq!(done["direction"], "outbound");
    assert_eq!(done["goals"], json!(["said_yes"]));
    assert_eq!(done["call_status"], "answered");
    let h = e.history_from_api(&t.account, &id).await;
    assert_eq!(h.recipient, "browser");
    assert!(h.media.as_ref().is_some_and(|m| m.packets_received > 100));
    // A late subscriber of an ended call gets its end.
    let mut late = Sse::open(&e, &t.account, &id).await;
    let (name, data) = late.next().await.expect("an event");
    assert_eq!(name, "ended");
    assert_eq!(data["goals"], json!(["said_yes"]));
    assert!(late.next().await.is_none(), "then the stream closes");
    browser.close().await;
}

/// greet with a test variable → end: what the browser call's `data` is for.
fn greeting_scenario() -> Value {
    json!({"name": "browser greeting", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "outputs": [{"type": "next", "next": "hi"}], "properties": {
            "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""}}}]},
        "audio_tts": {"v1": [{"id": "hi", "outputs": [{"type": "next", "next": "bye"}],
            "properties": {"text": "Hello {{first_name}}, your order {{order}} is ready."}}]},
        "end_call": {"v1": [{"id": "bye", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_call_speaks_its_test_variables_and_is_recorded_on_request() {
    let e = Engine::start(EngineOptions {
        trunks: idle_trunk("carrier"),
        ..EngineOptions::default()
    })
    .await;
    let t = provision(&e, "browser-vars", "carrier", "+4930100813").await;
    let scn = e
        .post_ok("/v1/scenario", Some(&t.account), greeting_scenario(), 201)
        .await;
    let scn = scn["id"].as_str().expect("scenario id").to_string();
    let browser = TestBrowser::new().await;
    let offer = browser.offer().await;
    let (st, started) = e
        .post(
            "/v1/communication/-/browser-call",
            Some(&t.account),
            json!({"scenario_sid": scn, "draft": true, "sdp": offer, "record": true,
                "data": {"first_name": "Ada", "order": 42}}),
        )
        .await;
    assert_eq!(st, 201, "{started}\n{}", e.log());
    let id = started["communication"]["id"]
        .as_str()
        .expect("communication id")
        .to_string();
    // The variables are the communication's data, as a dispatch's are.
    assert_eq!(
        started["communication"]["data"],
        json!({"first_name": "Ada", "order": 42})
    );
    browser.accept(started["sdp"].as_str().expect("sdp")).await;
    let mut live = Sse::open(&e, &t.account, &id).await;
    let mut said = None;
    let watch = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some((name, data)) = live.next().await {
            match name.as_str() {
                "prompt" if data["brick_id"] == "hi" => said = Some(data),
                "ended" => break,
                _ => {}
            }
        }
    })
    .await;
    assert!(watch.is_ok(), "the call ended within 60 s\n{}", e.log());
    // The prompt spoke the variables' values, not empty placeholders.
    let said = said.expect("the greeting was played");
    assert_eq!(said["text"], "Hello Ada, your order 42 is ready.", "{said}");
    assert!(said["played_ms"].as_u64().unwrap_or(0) > 1000, "{said}");
    assert!(
        browser.voiced_packets() > 25,
        "the browser heard the greeting"
    );
    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(20))
        .await;
    assert_eq!(done["communication_status"], "completed", "{done}");
    assert_eq!(done["has_recording"], true, "{done}");
    // The recording is served like an agent call's: the bot's channel carries the greeting.
    let r = e
        .client
        .get(format!("{}/v1/communication/{id}/recording", e.base_url))
        .bearer_auth(SU_TOKEN)
        .header("X-Account-Sid", &t.account)
        .send()
        .await
        .expect("GET recording");
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("recording.wav");
    std::fs::write(&wav, r.bytes().await.expect("recording bytes")).unwrap();
    let (_, bot) = wav_channels(&wav);
    let loud = bot.iter().filter(|s| s.unsigned_abs() > 2000).count();
    assert!(
        loud > 800,
        "the bot's channel holds speech: {loud} loud samples"
    );

    // Test variables are a flat object, as a dispatch's data.
    let offer = TestBrowser::new().await.offer().await;
    let (st, v) = e
        .post(
            "/v1/communication/-/browser-call",
            Some(&t.account),
            json!({"scenario_sid": scn, "draft": true, "sdp": offer, "data": {"nested": {"a": 1}}}),
        )
        .await;
    assert_eq!(st, 422, "{v}");
    assert_eq!(v["error"], "data_not_flat", "{v}");
    assert!(
        v["message"].as_str().unwrap_or("").contains("data.nested"),
        "{v}"
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_calls_that_cannot_start_are_refused_in_the_envelope() {
    let e = Engine::start(EngineOptions {
        trunks: idle_trunk("carrier"),
        ..Default::default()
    })
    .await;
    let t = provision(&e, "browser-refusals", "carrier", "+4930100812").await;
    let scn = e
        .post_ok("/v1/scenario", Some(&t.account), yes_no_scenario(), 201)
        .await;
    let scn = scn["id"].as_str().unwrap().to_string();
    let offer = TestBrowser::new().await.offer().await;
    let call = |body: Value| {
        let e = &e;
        let account = t.account.clone();
        async move {
            e.post("/v1/communication/-/browser-call", Some(&account), body)
                .await
        }
    };
    let expect = |(st, v): (u16, Value), status: u16, code: &str, says: &str| {
        assert_eq!(st, status, "{v}");
        assert_eq!(v["error"], code, "{v}");
        assert!(
            v["message"].as_str().unwrap_or("").contains(says),
            "{says:?} in {v}"
        );
    };
    // Offers the engine cannot answer.
    expect(
        call(json!({"scenario_sid": scn, "draft": true, "sdp": "hello"})).await,
        422,
        "invalid_sdp",
        "not an SDP offer",
    );
    // Host candidates on a private network the loopback engine does not serve.
    let elsewhere: String = offer
        .split_inclusive('\n')
        .map(|l| {
            if l.starts_with("a=candidate:") {
                "a=candidate:1 1 udp 2130706431 10.9.8.7 50000 typ host\r\n"
            } else {
                l
            }
        })
        .collect();
    expect(
        call(json!({"scenario_sid": scn, "draft": true, "sdp": elsewhere})).await,
        422,
        "invalid_sdp",
        "10.9.8.7",
    );
    expect(
        call(json!({"scenario_sid": scn, "draft": true, "sdp": ""})).await,
        422,
        "invalid_sdp",
        "bytes",
    );
    // What it would run.
    expect(
        call(json!({"scenario_sid": "scn_nope", "draft": true, "sdp": offer})).await,
        422,
        "unknown_scenario",
        "no such scenario",
    );
    expect(
        call(json!({"scenario_sid": scn, "sdp": offer})).await,
        422,
        "scenario_not_published",
        "no published version",
    );
    let (st, v) =
        call(json!({"scenario_sid": scn, "draft": true, "sdp": offer, "direction": "sideways"}))
            .await;
    assert_eq!(st, 400, "{v}");
    let (st, v) = call(json!({"scenario_sid": scn, "draft": true, "sdp": offer, "extra": 1})).await;
    assert_eq!(st, 400, "unknown fields: {v}");
    // Nothing was stored for the refused calls.
    let (_, list) = e.get("/v1/communication", Some(&t.account)).await;
    assert_eq!(list["total"], 0, "{list}");
    // The live view of a call that is not a live test call here.
    let (st, v) = e
        .get("/v1/communication/com_nope/live", Some(&t.account))
        .await;
    assert_eq!(st, 404, "{v}");
    let queued = e
        .dispatch(
            &t,
            json!({"recipient": "+4915550999", "scenario_sid": scn, "draft": true,
                   "scheduled_at": "2099-01-01T00:00:00Z"}),
        )
        .await;
    let (st, v) = e
        .get(
            &format!("/v1/communication/{}/live", queued["id"].as_str().unwrap()),
            Some(&t.account),
        )
        .await;
    assert_eq!(st, 409, "{v}");
    assert_eq!(v["error"], "not_live");

    // A process that runs no calls.
    let api_only = Engine::start(EngineOptions {
        dialer_toml: "enabled = false\n".into(),
        ..Default::default()
    })
    .await;
    let t2 = provision(&api_only, "browser-api-only", "carrier", "+4930100813").await;
    let scn2 = api_only
        .post_ok("/v1/scenario", Some(&t2.account), yes_no_scenario(), 201)
        .await;
    let (st, v) = api_only
        .post(
            "/v1/communication/-/browser-call",
            Some(&t2.account),
            json!({"scenario_sid": scn2["id"], "draft": true, "sdp": offer}),
        )
        .await;
    assert_eq!(st, 503, "{v}");
    assert_eq!(v["error"], "browser_calls_unavailable");
}
