//! The call_transfer brick in live calls, end to end: the real `callsmith` binary and SIPp
//! peers on loopback. Blind transfers go out as REFER on the answered call and are decided by
//! the NOTIFY sipfrag; bridged transfers dial the target through the call's trunk, play the
//! two messages, and relay audio between the legs (proved with tones each side sends).

use std::net::SocketAddr;
use std::time::Duration;

use callsmith_e2e::*;
use serde_json::{Value, json};

/// A scenario: (outbound or inbound) → call_transfer → goal `transferred` / `transfer_failed`
/// / `transfer_timeout` → end_call. The transfer carries `X-Transfer-Id: <header>`.
fn transfer_scenario(mode: &str, number: &str, header: &str, timeout: u32) -> Value {
    let goal = |id: &str, g: &str| {
        json!({"id": id, "description": "", "properties": {"goal": g},
        "outputs": [{"type": "next", "description": "", "next": "bye"}]})
    };
    let tts = |text: &str| json!({"mode": "tts", "tts": {"text": text}, "file": {"url": ""}});
    json!({"name": "transfer", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {
            "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""}},
            "outputs": [{"type": "next", "description": "", "next": "xfer"}]}]},
        "inbound_call": {"v1": [{"id": "in", "description": "", "properties": {},
            "outputs": [{"type": "next", "description": "", "next": "xfer"}]}]},
        "call_transfer": {"v1": [{"id": "xfer", "description": "", "properties": {
            "from": "", "number": number, "transfer_mode": mode, "timeout": timeout,
            "message_to_client": tts("Connecting you."),
            "message_to_manager": tts("A caller for you."),
            "tts_properties": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""},
            "sip_header": {"sip_headers": [{"name": "X-Transfer-Id", "value": header}]}},
            "outputs": [
                {"type": "success", "description": "", "next": "g_ok"},
                {"type": "failure", "description": "", "next": "g_fail"},
                {"type": "timeout", "description": "", "next": "g_timeout"}
            ]}]},
        "goal": {"v1": [goal("g_ok", "transferred"), goal("g_fail", "transfer_failed"), goal("g_timeout", "transfer_timeout")]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

/// The `transferred` event of a history's trace.
fn transferred_event(h: &Value) -> Value {
    h["trace"]
        .as_array()
        .expect("trace")
        .iter()
        .find(|ev| ev["event"] == "transferred")
        .cloned()
        .unwrap_or_else(|| panic!("no transferred event: {}", h["trace"]))
}

/// Dispatches a draft test call of `scn` and waits for its end.
async fn blind_call(e: &Engine, t: &Tenancy, scn: &str, recipient: &str) -> (Value, Value) {
    let c = e
        .dispatch(
            t,
            json!({"recipient": recipient, "scenario_sid": scn, "draft": true}),
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

/// Blind transfer accepted: the engine sends REFER (target and the brick's rendered header
/// checked by SIPp), the NOTIFY sipfrag says 200, the brick takes `success`, and the engine
/// hangs up the transferred call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blind_transfer_accepted_takes_success() {
    let mut callee = Sipp::spawn("uas_refer.xml", None, None, &["-m", "1"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "blind", "carrier", "+4930100700").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(
        &store,
        &t,
        &transfer_scenario("blind", "+15550999", "blind-1", 10),
        false,
    )
    .await;
    let (done, h) = blind_call(&e, &t, &scn, "+15550100").await;
    assert_eq!(done["goals"], json!(["transferred"]), "{}", h["transfers"]);
    let ev = transferred_event(&h);
    assert_eq!(ev["outcome"]["result"], "success", "{ev}");
    assert_eq!(ev["spec"]["mode"], "blind");
    assert_eq!(
        ev["spec"]["sip_headers"],
        json!([["X-Transfer-Id", "blind-1"]])
    );
    let x = &h["transfers"][0];
    assert_eq!(x["mode"], "blind", "{x}");
    assert_eq!(x["outcome"], "success", "{x}");
    assert_eq!(x["sip_code"], 200, "{x}");
    // message_to_client was played to the caller before the REFER.
    assert_eq!(h["prompts"][0]["outcome"], "completed", "{}", h["prompts"]);
    assert!(
        callee.success(Duration::from_secs(20)).await,
        "the callee saw REFER with its header, both NOTIFYs answered, then BYE: {}",
        callee.dump()
    );
    let msgs = callee.messages();
    assert!(
        msgs.contains("REFER sip:"),
        "REFER was sent on the dialog: {msgs}"
    );
}

/// Blind transfer refused: a 603 to the REFER, then (second call) a NOTIFY sipfrag 486 —
/// both take the `failure` output, with the SIP code kept in the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blind_transfer_refused_or_failed_takes_failure() {
    let gw_port = free_udp_port();
    let gw = SocketAddr::from(([127, 0, 0, 1], gw_port));
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), gw)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "blindfail", "carrier", "+4930100710").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(
        &store,
        &t,
        &transfer_scenario("blind", "+15550999", "blind-1", 10),
        false,
    )
    .await;

    for (sipp, code) in [
        ("uas_refer_reject.xml", 603),
        ("uas_refer_notify_486.xml", 486),
    ] {
        let mut callee = Sipp::spawn(sipp, Some(gw_port), None, &["-m", "1"]);
        let (done, h) = blind_call(&e, &t, &scn, "+15550101").await;
        assert_eq!(
            done["goals"],
            json!(["transfer_failed"]),
            "{sipp}: {}",
            h["transfers"]
        );
        let ev = transferred_event(&h);
        assert_eq!(ev["outcome"]["result"], "failure", "{sipp}: {ev}");
        let x = &h["transfers"][0];
        assert_eq!(x["outcome"], "failure", "{sipp}: {x}");
        assert_eq!(x["sip_code"], code, "{sipp}: {x}");
        assert!(
            callee.success(Duration::from_secs(20)).await,
            "{sipp}: {}",
            callee.dump()
        );
    }
}

/// Creates an inbound agent on the tenancy's number running `scn`; records calls when asked.
async fn inbound_agent(store: &callsmith_domain::Store, t: &Tenancy, scn: &str, rec: bool) {
    create_agent(
        store,
        t,
        &AgentSpec {
            call_recording: rec,
            ..AgentSpec::new(scn.to_string(), t.number_id.clone())
        },
    )
    .await;
}

/// Waits for a completed inbound communication other than those in `seen`.
async fn next_inbound(e: &Engine, t: &Tenancy, seen: &[String]) -> Value {
    eventually(Duration::from_secs(30), || async {
        let (_, v) = e
            .get("/v1/communication?direction=inbound", Some(&t.account))
            .await;
        v["items"]
            .as_array()?
            .iter()
            .find(|r| {
                r["communication_status"] == "completed"
                    && !seen.iter().any(|s| r["id"] == s.as_str())
            })
            .cloned()
    })
    .await
    .unwrap_or_else(|| panic!("no new completed inbound communication\n{}", e.log()))
}

/// Bridged transfer: a caller (SIPp, streaming a 1 kHz tone) calls in; the engine dials the
/// target (a second SIPp, which checks the brick's header on the INVITE) through the call's
/// trunk, plays message_to_manager to it, then bridges. The target's media is the test's own
/// RTP peer, which hears the caller's 1 kHz tone through the bridge and sends a 500 Hz tone
/// back, which the caller's leg sends on (seen in the call recording). The caller hangs up,
/// the engine hangs up the target, and the brick took `success`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridged_transfer_relays_audio_between_caller_and_target() {
    let peer = TonePeer::start(500.0).await;
    let port = peer.port.to_string();
    let mut target = Sipp::spawn(
        "uas_transfer_target.xml",
        None,
        None,
        &["-m", "1", "-set", "rtp_port", &port],
    );
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), target.addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "bridge", "carrier", "+4930100720").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(
        &store,
        &t,
        &transfer_scenario("bridged", "+15550777", "bridge-7", 10),
        true,
    )
    .await;
    inbound_agent(&store, &t, &scn, true).await;

    let dir = tempfile::tempdir().expect("tempdir");
    ulaw_tone(dir.path(), "tone.ulaw", 1000.0, 2.0);
    let mut caller = Sipp::spawn_in(
        dir,
        "uac_transfer_caller.xml",
        None,
        Some(e.sip_addr),
        &["-m", "1", "-s", "+4930100720"],
    );
    assert!(
        caller.success(Duration::from_secs(40)).await,
        "caller: {}\nengine: {}",
        caller.dump(),
        e.log()
    );
    assert!(
        target.success(Duration::from_secs(20)).await,
        "the target saw an INVITE to +15550777 with X-Transfer-Id: bridge-7, answered, got BYE: {}\nengine: {}",
        target.dump(),
        e.log()
    );

    let row = next_inbound(&e, &t, &[]).await;
    let id = row["id"].as_str().expect("id").to_string();
    assert_eq!(row["goals"], json!(["transferred"]), "{row}");
    let h = e.history(&t.account, &id);
    let ev = transferred_event(&h);
    assert_eq!(ev["outcome"]["result"], "success", "{ev}");
    assert_eq!(ev["spec"]["mode"], "bridged");
    let x = &h["transfers"][0];
    assert_eq!(x["outcome"], "success", "{x}");
    assert_eq!(x["call_status"], "answered", "{x}");
    assert_eq!(x["ended_by"], "caller", "{x}");
    assert!(x["answered_ms"].as_u64().is_some() && x["bridged_ms"].as_u64().is_some());
    assert!(
        x["manager_prompt_played_ms"].as_u64().unwrap_or(0) > 300,
        "the target heard message_to_manager: {x}"
    );
    assert!(
        x["target_media"]["packets_received"].as_u64().unwrap_or(0) > 50,
        "{x}"
    );
    assert!(
        h["prompts"]
            .as_array()
            .expect("prompts")
            .iter()
            .any(|p| p["prompt"]["text"] == "Connecting you." && p["outcome"] == "completed"),
        "message_to_client played to the caller: {}",
        h["prompts"]
    );

    // Caller → target: the caller's 1 kHz tone reached the target's media through the bridge
    // (SIPp streams it from the answer on; at least 2 s of it after the bridge).
    let heard = peer.received();
    let caller_tone = tone_frames(&heard, 1000.0);
    assert!(
        caller_tone >= 100,
        "the target heard {caller_tone} frames of the caller's tone ({} frames received)",
        heard.len() / 160
    );
    // Before the bridge the target heard the manager message (speech, not the tone).
    let voiced = heard
        .chunks_exact(160)
        .filter(|f| f.iter().map(|&s| i32::from(s).abs()).max().unwrap_or(0) > 1000)
        .count();
    assert!(
        voiced > caller_tone + 10,
        "speech before the bridge: {voiced} voiced frames, {caller_tone} tone frames"
    );
    // Target → caller: the target's 500 Hz tone went out on the caller's leg.
    let wav = e
        .data_dir
        .join("objects")
        .join(format!("calls/{}/{id}/recording.wav", t.account));
    let (left, right) = wav_channels(&wav);
    assert!(
        tone_frames(&left, 1000.0) >= 100,
        "the caller's tone is on the recording's caller channel"
    );
    let back = tone_frames(&right, 500.0);
    assert!(
        back >= 100,
        "the caller was sent {back} frames of the target's tone"
    );
}

/// Bridged transfer not answered within the brick's timeout (the target rings; the engine
/// CANCELs) takes `timeout`; a busy target (486) takes `failure`. The caller stays with the
/// scenario in both cases and is hung up by the engine at its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridged_transfer_unanswered_or_busy() {
    let gw_port = free_udp_port();
    let e = Engine::start(EngineOptions {
        trunks: vec![(
            "carrier".into(),
            SocketAddr::from(([127, 0, 0, 1], gw_port)),
        )],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "bridgefail", "carrier", "+4930100730").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(
        &store,
        &t,
        &transfer_scenario("bridged", "+15550777", "bridge-8", 2),
        true,
    )
    .await;
    inbound_agent(&store, &t, &scn, false).await;

    let mut seen = Vec::new();
    for (sipp, goal, outcome, status, code) in [
        (
            "uas_ring_forever.xml",
            "transfer_timeout",
            "timeout",
            "no_answer",
            487,
        ),
        (
            "uas_reject_486.xml",
            "transfer_failed",
            "failure",
            "busy",
            486,
        ),
    ] {
        let mut target = Sipp::spawn(sipp, Some(gw_port), None, &["-m", "1"]);
        let mut caller = Sipp::spawn(
            "uac_answered_engine_bye.xml",
            None,
            Some(e.sip_addr),
            &["-m", "1", "-s", "+4930100730"],
        );
        assert!(
            caller.success(Duration::from_secs(30)).await,
            "{sipp} caller: {}\nengine: {}",
            caller.dump(),
            e.log()
        );
        assert!(
            target.success(Duration::from_secs(20)).await,
            "{sipp} target: {}",
            target.dump()
        );
        let row = next_inbound(&e, &t, &seen).await;
        let id = row["id"].as_str().expect("id").to_string();
        assert_eq!(row["goals"], json!([goal]), "{sipp}: {row}");
        let h = e.history(&t.account, &id);
        assert_eq!(transferred_event(&h)["outcome"]["result"], outcome);
        let x = &h["transfers"][0];
        assert_eq!(x["outcome"], outcome, "{sipp}: {x}");
        assert_eq!(x["call_status"], status, "{sipp}: {x}");
        assert_eq!(x["sip_code"], code, "{sipp}: {x}");
        assert!(x["bridged_ms"].is_null(), "{x}");
        seen.push(id);
    }
}
