//! Calls never hang: each way a call used to sit until `max_call_secs` (or 32 s of SIP
//! timers) ends promptly with an end that says why.
//! * a peer that stops sending RTP: `end_reason` `rtp_timeout`;
//! * `POST /v1/communication/{id}/hangup` on an answered call and on a ringing one;
//! * a gateway that never answers the INVITE: `failed` within the ring timeout.
//!
//! A caller who hangs up in the middle of a prompt is tested in process
//! (engine/src/call/behaviour.rs); a caller's BYE over SIP stays in tests/tests/capacity.rs.

use std::time::{Duration, Instant};

use callsmith_e2e::*;
use serde_json::{Value, json};

/// start_call → audio_file (`audio_id`, a long tone) → end_call.
fn long_prompt(audio_id: &str) -> Value {
    json!({"name": "long prompt", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {}, "outputs": [{"type": "next", "description": "", "next": "play"}]}]},
        "audio_file": {"v1": [{"id": "play", "description": "", "properties": {"url": audio_id},
                                "outputs": [{"type": "next", "description": "", "next": "bye"}]}]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

/// Dispatches a draft test call of `snap`; returns the communication id.
async fn test_call(e: &Engine, t: &Tenancy, snap: &Value) -> String {
    let store = store_of(e, None).await;
    let scn = create_scenario(&store, t, snap, false).await;
    let c = e
        .dispatch(
            t,
            json!({"recipient": "+4915550777", "scenario_sid": scn, "draft": true}),
        )
        .await;
    c["id"].as_str().expect("id").to_string()
}

/// Waits until the communication has `status`.
async fn wait_status(e: &Engine, t: &Tenancy, id: &str, status: &str) {
    let got = eventually(Duration::from_secs(30), || async {
        let (_, c) = e
            .get(&format!("/v1/communication/{id}"), Some(&t.account))
            .await;
        (c["communication_status"] == status).then_some(())
    })
    .await;
    assert!(got.is_some(), "{id} never reached {status}\n{}", e.log());
}

/// A test call to a SIPp callee running `script` whose scenario plays a 30 s prompt, until
/// it ends; each use asserts that it ended well before the prompt would have.
struct PromptCall {
    callee: Sipp,
    e: Engine,
    t: Tenancy,
    id: String,
    /// The communication as it ended.
    done: Value,
}

async fn prompt_call(script: &str, media_toml: &str, name: &str, number: &str) -> PromptCall {
    let callee = Sipp::spawn(script, None, None, &["-m", "1"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        media_toml: media_toml.into(),
        ..Default::default()
    })
    .await;
    let t = provision(&e, name, "carrier", number).await;
    let audio = upload_audio(&e, &t.account, tone_wav(30.0)).await;
    let started = Instant::now();
    let id = test_call(&e, &t, &long_prompt(audio["id"].as_str().expect("id"))).await;
    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(30))
        .await;
    assert_eq!(done["communication_status"], "completed", "{done}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "ended after {:?} (the prompt lasts 30 s)",
        started.elapsed()
    );
    PromptCall {
        callee,
        e,
        t,
        id,
        done,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_sending_rtp_ends_the_call() {
    // The callee answers and never sends RTP.
    let PromptCall {
        mut callee,
        e,
        t,
        id,
        done,
    } = prompt_call(
        "dialer_uas_echo.xml",
        "rtp_timeout_ms = 1500\n",
        "rtp",
        "+4930100951",
    )
    .await;
    assert_eq!(done["end_reason"], "rtp_timeout", "{done}\n{}", e.log());
    let h = e.history(&t.account, &id);
    assert_eq!(h["forced_end"], "rtp_timeout");
    assert!(
        h["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .any(|x| x.as_str().is_some_and(|s| s.contains("no RTP"))),
        "{}",
        h["errors"]
    );
    assert!(
        callee.success(Duration::from_secs(20)).await,
        "{}",
        callee.dump()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_hangs_up_an_answered_call_and_a_ringing_one() {
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1", "-rtp_echo"]);
    let mut ringing = Sipp::spawn("uas_ring_forever.xml", None, None, &["-m", "1"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![
            ("carrier".into(), callee.addr),
            ("ringer".into(), ringing.addr),
        ],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "hup", "carrier", "+4930100952").await;
    let audio = upload_audio(&e, &t.account, tone_wav(30.0)).await;
    let id = test_call(&e, &t, &long_prompt(audio["id"].as_str().expect("id"))).await;
    wait_status(&e, &t, &id, "in_progress").await;
    let asked = Instant::now();
    let (s, c) = e
        .post(
            &format!("/v1/communication/{id}/hangup"),
            Some(&t.account),
            json!({}),
        )
        .await;
    assert_eq!(s, 202, "{c}");
    assert_eq!(c["id"], id.as_str());
    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(20))
        .await;
    assert_eq!(done["end_reason"], "hangup_requested", "{done}");
    assert_eq!(done["call_status"], "answered", "{done}");
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    assert!(
        callee.success(Duration::from_secs(20)).await,
        "the callee got the BYE"
    );
    // Ended: nothing to hang up any more; unknown and foreign ids read as absent.
    let (s, v) = e
        .post(
            &format!("/v1/communication/{id}/hangup"),
            Some(&t.account),
            json!({}),
        )
        .await;
    assert_eq!((s, v["error"].as_str()), (409, Some("not_live")), "{v}");
    let (s, _) = e
        .post(
            "/v1/communication/com_missing/hangup",
            Some(&t.account),
            json!({}),
        )
        .await;
    assert_eq!(s, 404);
    let other = provision(&e, "other", "carrier", "+4930100953").await;
    let (s, _) = e
        .post(
            &format!("/v1/communication/{id}/hangup"),
            Some(&other.account),
            json!({}),
        )
        .await;
    assert_eq!(s, 404);

    // A ringing call is canceled.
    let r = provision(&e, "ring", "ringer", "+4930100954").await;
    let audio = upload_audio(&e, &r.account, tone_wav(1.0)).await;
    let id = test_call(&e, &r, &long_prompt(audio["id"].as_str().expect("id"))).await;
    wait_status(&e, &r, &id, "dialing").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (s, c) = e
        .post(
            &format!("/v1/communication/{id}/hangup"),
            Some(&r.account),
            json!({}),
        )
        .await;
    assert_eq!(s, 202, "{c}");
    let done = e
        .wait_communication(&r.account, &id, Duration::from_secs(20))
        .await;
    assert_eq!(done["call_status"], "canceled", "{done}");
    assert_eq!(done["end_reason"], "hangup_requested", "{done}");
    assert!(
        ringing.success(Duration::from_secs(20)).await,
        "{}",
        ringing.dump()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_never_answers_fails_within_the_ring_timeout() {
    // A UDP socket that takes every INVITE and answers nothing.
    let hole = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let gateway = hole.local_addr().expect("addr");
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), gateway)],
        sip_toml: "ring_timeout_secs = 2\n".into(),
        ..Default::default()
    })
    .await;
    let t = provision(&e, "dead", "carrier", "+4930100955").await;
    let started = Instant::now();
    let id = test_call(
        &e,
        &t,
        &json!({"name": "x", "constructor": {"bricks": {
            "start_call": {"v1": [{"id": "s", "description": "", "properties": {}, "outputs": [{"type": "next", "description": "", "next": "e"}]}]},
            "end": {"v1": [{"id": "e", "description": "", "properties": {}, "outputs": []}]}
        }}}),
    )
    .await;
    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(30))
        .await;
    assert_eq!(done["communication_status"], "completed", "{done}");
    assert_eq!(done["call_status"], "failed", "{done}");
    assert!(
        done["error"]
            .as_str()
            .is_some_and(|s| s.contains("no response")),
        "{done}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "failed after {:?} with a 2 s ring timeout",
        started.elapsed()
    );
    drop(hole);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recognition_node_that_is_down_is_an_error_not_a_silent_caller() {
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1", "-rtp_echo"]);
    // The only whisper node listens nowhere (the port is held, bound but not listening).
    let (_held, dead) = refused_tcp_addr();
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        stt_url: Some(format!("ws://{dead}")),
        ..Default::default()
    })
    .await;
    let t = provision(&e, "stt", "carrier", "+4930100956").await;
    let mut snap = question_scenario();
    snap["constructor"]["bricks"]["question"]["v1"][0]["properties"]["stt_properties"]["no_input_timeout"] =
        json!(1);
    let id = test_call(&e, &t, &snap).await;
    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(60))
        .await;
    // The documented fallback: the turn ends as no input and the question's `empty`
    // output is taken.
    assert_eq!(done["goals"], json!(["silent"]), "{done}");
    let h = e.history(&t.account, &id);
    let turn = &h["turns"][0];
    assert!(turn["stt_error"].is_string(), "{turn}");
    assert_eq!(turn["heard"], "no_input");
    assert!(
        h["errors"].as_array().expect("errors").iter().any(|x| x
            .as_str()
            .is_some_and(|s| s.starts_with("recognition (turn 1)"))),
        "{}",
        h["errors"]
    );
    assert!(
        e.log().contains("speech recognition failed"),
        "a log line names the failure"
    );
    let (_, metrics) = e.get("/metrics", None).await;
    let text = metrics
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| metrics.to_string());
    assert!(
        text.contains("callsmith_recognition_failures_total{engine=\"whisper\"} 1"),
        "{text}"
    );
    assert!(
        callee.success(Duration::from_secs(20)).await,
        "{}",
        callee.dump()
    );
}
