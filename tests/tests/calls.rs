//! The first full calls, end to end: the real `callsmith` binary dials real SIPp callees on
//! loopback, plays espeak-ng prompts as RTP, recognises the callee's flite speech with the
//! real recognition node, records goals and history, and delivers results over HTTP.

use std::time::Duration;

use callsmith_e2e::*;
use serde_json::json;

/// (a) A scenario test call of the current draft: the callee (SIPp, echoing RTP) answers,
/// hears the TTS prompt (it comes back to the engine), the call ends with goal `greeted`,
/// and status, duration and the saved history are recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draft_test_call_plays_prompt_and_records_history() {
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1", "-rtp_echo"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "a", "carrier", "+4930100200").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(
        &store,
        &t,
        &greeting_scenario("Hello, this is a test call from callsmith. Goodbye."),
        false,
    )
    .await;

    let c = e
        .dispatch(
            &t,
            json!({"recipient": "+4915550001", "scenario_sid": scn, "draft": true,
                   "data": {"nested": {"ignored": true}}, "strategy_sid": "ignored"}),
        )
        .await;
    assert_eq!(
        c["draft_version"], 1,
        "the draft is frozen on first use: {c}"
    );
    assert!(c["version"].is_null());
    assert_eq!(c["is_test"], true);
    assert_eq!(c["direction"], "outbound");
    assert_eq!(c["from_number"], "+4930100200");
    assert_eq!(c["timezone"], "Europe/Berlin", "derived from the account");
    assert_eq!(c["duration"], 0);
    let id = c["id"].as_str().expect("id").to_string();

    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(90))
        .await;
    assert_eq!(
        done["communication_status"],
        "completed",
        "{done}\n{}",
        e.log()
    );
    assert_eq!(done["call_status"], "answered");
    assert_eq!(done["sip_code"], 200);
    assert_eq!(done["goals"], json!(["greeted"]));
    assert_eq!(done["goal"], "greeted");
    assert_eq!(done["has_history"], true);
    assert_eq!(done["has_recording"], false);
    assert!(
        done["duration"].as_i64().unwrap_or(0) >= 1,
        "duration: {done}"
    );
    assert!(done["ended_at"].is_string() && done["started_at"].is_string());
    assert!(
        callee.success(Duration::from_secs(20)).await,
        "the callee saw a clean call (INVITE, ACK, BYE): {}",
        callee.dump()
    );

    let h = e.history(&t.account, &id);
    // The API serves the same history, typed.
    let served = e.history_from_api(&t.account, &id).await;
    assert_eq!(served.communication_id, id);
    assert_eq!(served.goals, ["greeted"]);
    assert_eq!(
        served.prompts.len(),
        h["prompts"].as_array().map_or(0, Vec::len)
    );
    let prompt = &h["prompts"][0];
    assert_eq!(prompt["outcome"], "completed", "{h}");
    assert!(prompt["played_ms"].as_u64().unwrap_or(0) > 1000, "{prompt}");
    // The prompt went out as RTP and the echoing callee sent it back.
    assert!(
        h["media"]["packets_sent"].as_u64().unwrap_or(0) > 50,
        "{}",
        h["media"]
    );
    assert!(
        h["media"]["packets_received"].as_u64().unwrap_or(0) > 50,
        "{}",
        h["media"]
    );
    let trace = h["trace"].as_array().expect("trace");
    assert!(
        trace
            .iter()
            .any(|ev| ev["event"] == "goal_reached" && ev["goal"] == "greeted")
    );
    assert_eq!(h["end"]["reason"], "end_call");

    // A second test call of the unchanged draft reuses the frozen record.
    let c2 = e
        .dispatch(
            &t,
            json!({"recipient": "+4915550002", "scenario_sid": scn, "draft": true}),
        )
        .await;
    assert_eq!(c2["draft_version"], 1);
    let (s, list) = e
        .get(
            "/v1/communication?direction=outbound&limit=1",
            Some(&t.account),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(list["total"], 2);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(list["has_more"], true);
}

/// (b) The full flow through an agent: the callee says "yes" (flite → µ-law → SIPp
/// rtp_stream), the real recognition node transcribes it, the question routes to goal
/// `agreed`, and the result reaches a local HTTP target (after one refused attempt) and is
/// listed with its communication included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_call_recognises_yes_and_delivers_the_result() {
    let node = SttNode::start().await;
    let sink = Sink::start(1).await;
    // The prompt ("Do you want a call back?") lasts about 1.5 s; speak after 4 s.
    let dir = tempfile::tempdir().expect("tempdir");
    ulaw_speech(dir.path(), "answer.ulaw", "yes", 4000);
    let mut callee = Sipp::spawn_in(dir, "dialer_uas_speak.xml", None, None, &["-m", "1"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        stt_url: Some(node.url.clone()),
        ..Default::default()
    })
    .await;
    let t = provision(&e, "b", "carrier", "+4930100300").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &question_scenario(), true).await;
    let agent = create_agent(
        &store,
        &t,
        &AgentSpec {
            cps: 1,
            cpl: 1,
            targets: vec![sink.url.clone()],
            timezone: "America/New_York".into(),
            call_recording: true,
            ..AgentSpec::new(scn.clone(), t.number_id.clone())
        },
    )
    .await;

    // Nested data is refused; flat data is accepted.
    let (s, err) = e
        .post(
            "/v1/communication/-/dispatch",
            Some(&t.account),
            json!({"recipient": "+15550123", "agent_sid": agent, "data": {"a": {"b": 1}}}),
        )
        .await;
    assert_eq!(s, 422, "{err}");
    let c = e
        .dispatch(&t, json!({"recipient": "+15550123", "agent_sid": agent, "data": {"name": "Ann", "n": 3, "vip": true}}))
        .await;
    assert_eq!(c["version"], 1);
    assert!(c["draft_version"].is_null());
    assert_eq!(c["timezone"], "America/New_York", "derived from the agent");
    assert_eq!(c["from_number"], "+4930100300");
    let id = c["id"].as_str().expect("id").to_string();

    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(120))
        .await;
    assert_eq!(
        done["communication_status"],
        "completed",
        "{done}\n{}",
        e.log()
    );
    assert_eq!(done["has_history"], true, "{done}\n{}", e.log());
    let h = e.history(&t.account, &id);
    assert_eq!(done["goals"], json!(["agreed"]), "history: {}", h["turns"]);
    assert_eq!(done["variables"]["name"], "Ann");
    assert_eq!(done["has_recording"], true);
    let turn = &h["turns"][0];
    assert!(
        turn["transcript"]
            .as_str()
            .unwrap_or("")
            .to_lowercase()
            .contains("yes"),
        "{turn}"
    );
    assert!(turn["final_ms"].as_u64().is_some(), "{turn}");
    let rec = turn["speech_recognition_recording"]
        .as_str()
        .expect("turn audio saved")
        .to_string();
    let stored = std::fs::read(
        e.data_dir
            .join("objects")
            .join(format!("calls/{}/{id}/recording.wav", t.account)),
    )
    .expect("call recording stored");
    // The recording through the API is the stored file.
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
    assert_eq!(r.bytes().await.expect("recording bytes"), stored);
    let _ = callee.success(Duration::from_secs(20)).await;

    // The speech-recognition recording of the turn, proxied and as a signed link.
    let q = |extra: &str| format!("/v1/communication/{id}/speech-recording?path={rec}{extra}");
    let r = e
        .client
        .get(format!("{}{}", e.base_url, q("")))
        .bearer_auth(SU_TOKEN)
        .header("X-Account-Sid", &t.account)
        .send()
        .await
        .expect("speech-recording");
    assert_eq!(r.status().as_u16(), 200);
    let bytes = r.bytes().await.expect("audio");
    assert!(bytes.starts_with(b"RIFF"), "a WAV file");
    let (s, link) = e.get(&q("&mode=url&expires_in=60"), Some(&t.account)).await;
    assert_eq!(s, 200, "{link}");
    assert!(link["signed_url"].is_string() && link["expires_at"].is_string());
    let (s, _) = e
        .get(&q("&mode=url&expires_in=604801"), Some(&t.account))
        .await;
    assert_eq!(s, 400, "lifetime above the maximum");
    let (s, _) = e
        .get(
            &format!("/v1/communication/{id}/speech-recording?path=callsmith/calls/other/x.wav"),
            Some(&t.account),
        )
        .await;
    assert_eq!(s, 404, "a path outside the communication");

    // The result: first attempt refused (503), retried, delivered.
    let delivered = eventually(Duration::from_secs(30), || async {
        let (s, v) = e
            .get(
                "/v1/communication-result?status=delivered&include=communication",
                Some(&t.account),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        (v["items"].as_array().map(Vec::len) == Some(1)).then_some(v)
    })
    .await
    .unwrap_or_else(|| panic!("no delivered result; log:\n{}", e.log()));
    let item = &delivered["items"][0];
    assert_eq!(item["communication_sid"], id.as_str());
    assert_eq!(item["url"], sink.url.as_str());
    assert_eq!(
        item["attempts"], 2,
        "one refused attempt, then delivered: {item}"
    );
    assert_eq!(
        delivered["included"]["communications"][&id]["goals"],
        json!(["agreed"])
    );
    let bodies = sink.bodies();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["communication"]["id"], id.as_str());
    assert_eq!(bodies[0]["communication"]["goals"], json!(["agreed"]));
    let (s, _) = e
        .get("/v1/communication-result?include=agent", Some(&t.account))
        .await;
    assert_eq!(s, 400, "unlisted include");
}
