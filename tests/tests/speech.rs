//! The local speech node under `callsmith serve` (`[speech]`, engine/src/speech/): started
//! and reported on `/readyz`, registered as the default synthesizer (`piper`) and as the
//! `whisper` recognition node, replaced by espeak-ng while not ready, restarted when it dies
//! or hangs, gone when callsmith is killed, and reported `down` (not a crash) when its
//! python is missing.
//!
//! The node comes from `$CALLSMITH_STT_PYTHON` (`eval "$(bash scripts/test-deps.sh)"`).

use std::time::Duration;

use callsmith_e2e::*;
use serde_json::{Value, json};

/// `[speech]` with the test venv's python and one thread.
fn speech_toml() -> String {
    let python = std::env::var("CALLSMITH_STT_PYTHON").unwrap_or_else(|_| {
        panic!("CALLSMITH_STT_PYTHON is not set: run `eval \"$(bash scripts/test-deps.sh)\"`")
    });
    format!(
        "[speech]\nlocal = true\npython = {python:?}\nthreads = 1\nrestart_backoff_min_ms = 200\n"
    )
}

/// `/readyz`'s `speech` component and the overall status.
async fn speech_status(e: &Engine) -> (String, String) {
    let (s, body) = e.get("/readyz", None).await;
    assert_eq!(s, 200, "{body}");
    (
        body["components"]["speech"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        body["status"].as_str().unwrap_or_default().to_string(),
    )
}

/// Waits until `/readyz` reports the speech node `want`.
async fn wait_speech(e: &Engine, want: &str, within: Duration) {
    let seen = eventually(within, || async {
        (speech_status(e).await.0 == want).then_some(())
    })
    .await;
    assert!(
        seen.is_some(),
        "speech never {want} (now {:?}); log:\n{}",
        speech_status(e).await,
        e.log()
    );
}

/// The pid of the node callsmith started last, from its log.
fn node_pid(e: &Engine) -> u32 {
    let log = e.log();
    let line = log
        .lines()
        .rfind(|l| l.contains("speech node started"))
        .unwrap_or_else(|| panic!("no start in the log:\n{log}"));
    let rest = &line[line.find("pid=").expect("pid field") + 4..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("pid in {line}"))
}

fn alive(pid: u32) -> bool {
    // A zombie (dead, not reaped yet) counts as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'))
        .unwrap_or(false)
}

/// The question scenario with no synthesizer named: prompts go to the default one.
fn default_voice_question() -> Value {
    let mut snap = question_scenario();
    snap["constructor"]["bricks"]["start_call"]["v1"][0]["properties"]["tts_general"]["engine"] =
        json!("");
    snap
}

/// `serve` with `[speech] local = true`: `/readyz` goes from `starting` to `ok`; a call's
/// prompt is synthesised by the node's Piper voice through the auto-registered `piper`
/// engine (the default, since the configuration names none), and the callee's spoken "yes"
/// (flite, a voice other than the bot's) is recognised by the auto-registered node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_starts_the_node_and_a_call_speaks_and_listens_through_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The prompt ("Do you want a call back?") lasts about 1.5 s; speak after 4 s.
    ulaw_speech(dir.path(), "answer.ulaw", "yes", 4000);
    let mut callee = Sipp::spawn_in(dir, "dialer_uas_speak.xml", None, None, &["-m", "1"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        extra_toml: speech_toml(),
        ..Default::default()
    })
    .await;
    // Ready as soon as the database answers, whatever the node is doing.
    let (first, _) = speech_status(&e).await;
    assert!(
        ["starting", "ok"].contains(&first.as_str()),
        "{first}\n{}",
        e.log()
    );
    wait_speech(&e, "ok", Duration::from_secs(180)).await;
    assert_eq!(speech_status(&e).await.1, "ok");

    let t = provision(&e, "speech", "carrier", "+4930100900").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &default_voice_question(), false).await;
    let c = e
        .dispatch(
            &t,
            json!({"recipient": "+4915550900", "scenario_sid": scn, "draft": true}),
        )
        .await;
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
    let h = e.history(&t.account, &id);
    assert_eq!(done["goals"], json!(["agreed"]), "history: {h}");
    assert_eq!(h["errors"], json!([]), "{h}");
    let prompt = &h["prompts"][0];
    assert_eq!(prompt["outcome"], "completed", "{prompt}");
    assert!(prompt["played_ms"].as_u64().unwrap_or(0) > 500, "{prompt}");
    let turn = &h["turns"][0];
    assert_eq!(turn["stt_node"], "speech-node", "{turn}");
    assert!(
        turn["transcript"]
            .as_str()
            .unwrap_or("")
            .to_lowercase()
            .contains("yes"),
        "{turn}"
    );
    // The node's own request log (forwarded into callsmith's): the prompt was synthesised
    // by the Piper voice, and the answer streamed over the Deepgram-style protocol.
    let log = e.log();
    assert!(
        log.lines()
            .any(|l| l.contains("POST /v1/audio/speech 200") && l.contains("voice=joe")),
        "{log}"
    );
    assert!(log.contains("GET /v1/listen"), "{log}");
    let _ = callee.success(Duration::from_secs(20)).await;

    // SIGTERM: the node is stopped before callsmith exits.
    let pid = node_pid(&e);
    let mut e = e;
    let status = e.terminate(Duration::from_secs(60)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(!alive(pid), "the node outlived callsmith's shutdown");
    let log = std::fs::read_to_string(&e.log_path).unwrap_or_default();
    assert!(log.contains("stopping the speech node"), "{log}");
}

/// The node is killed: callsmith logs the exit, `/readyz` leaves `ok` and comes back to it
/// with a new process, and `/metrics` counts two starts. The new node is stopped (SIGSTOP,
/// a hang): it no longer answers `/ready`, is killed and replaced. Then callsmith itself is
/// killed (SIGKILL): the node goes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_dies_or_hangs_is_restarted_and_dies_with_callsmith() {
    let mut e = Engine::start(EngineOptions {
        extra_toml: format!("{}unresponsive_after_secs = 4\n", speech_toml()),
        ..Default::default()
    })
    .await;
    wait_speech(&e, "ok", Duration::from_secs(180)).await;
    let first = node_pid(&e);
    assert!(alive(first));
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &first.to_string()])
        .status();
    let left = eventually(Duration::from_secs(10), || async {
        let (s, status) = speech_status(&e).await;
        (s != "ok").then_some((s, status))
    })
    .await
    .unwrap_or_else(|| panic!("/readyz still says ok; log:\n{}", e.log()));
    assert!(["down", "starting"].contains(&left.0.as_str()), "{left:?}");
    assert_eq!(left.1, "degraded");
    wait_speech(&e, "ok", Duration::from_secs(180)).await;
    let second = node_pid(&e);
    assert_ne!(first, second, "a new process");
    let log = e.log();
    assert!(
        log.contains("speech node exited") && log.contains("signal 9"),
        "{log}"
    );
    assert!(log.contains("restarting the speech node"), "{log}");
    let metrics = e
        .client
        .get(format!("{}/metrics", e.base_url))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text");
    assert!(
        metrics.contains("callsmith_speech_node_starts_total 2")
            && metrics.contains("callsmith_speech_node_ready 1"),
        "{metrics}"
    );

    let _ = std::process::Command::new("kill")
        .args(["-STOP", &second.to_string()])
        .status();
    let left = eventually(Duration::from_secs(30), || async {
        (speech_status(&e).await.0 != "ok").then_some(())
    })
    .await;
    assert!(left.is_some(), "a hung node still ok; log:\n{}", e.log());
    wait_speech(&e, "ok", Duration::from_secs(180)).await;
    let third = node_pid(&e);
    assert!(
        third != second && !alive(second),
        "the hung node was replaced"
    );
    let log = e.log();
    assert!(log.contains("stopped answering /ready"), "{log}");
    assert!(!log.contains("not ready within"), "{log}");

    e.kill().await;
    let gone = eventually(Duration::from_secs(10), || async {
        (!alive(third)).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the node outlived a killed callsmith");
}

/// A node that fails while loading (a model directory that does not exist) exits, is
/// logged and started again, and never reports `ok`; meanwhile a prompt for the default
/// synthesizer (`piper`, registered for it) is spoken with espeak-ng and the history says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_fall_back_to_espeak_while_the_node_is_not_ready() {
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1", "-rtp_echo"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        extra_toml: format!(
            "{}restart_backoff_max_ms = 5000\nargs = [\"--model\", \"/nonexistent/whisper\"]\n",
            speech_toml()
        ),
        ..Default::default()
    })
    .await;
    let exited = eventually(Duration::from_secs(90), || async {
        e.log().contains("speech node exited").then_some(())
    })
    .await;
    assert!(exited.is_some(), "{}", e.log());
    assert!(e.log().contains("exit code 1"), "{}", e.log());
    assert_ne!(speech_status(&e).await.0, "ok");

    let t = provision(&e, "fallback", "carrier", "+4930100901").await;
    let store = store_of(&e, None).await;
    let mut snap = greeting_scenario("Hello from the fallback voice. Goodbye.");
    snap["constructor"]["bricks"]["start_call"]["v1"][0]["properties"]["tts_general"]["engine"] =
        json!("");
    let scn = create_scenario(&store, &t, &snap, false).await;
    let c = e
        .dispatch(
            &t,
            json!({"recipient": "+4915550901", "scenario_sid": scn, "draft": true}),
        )
        .await;
    let id = c["id"].as_str().expect("id").to_string();
    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(90))
        .await;
    assert_eq!(done["goals"], json!(["greeted"]), "{done}\n{}", e.log());
    let h = e.history(&t.account, &id);
    assert_eq!(h["prompts"][0]["outcome"], "completed", "{h}");
    assert!(
        h["errors"].as_array().is_some_and(|a| a.iter().any(|m| m
            .as_str()
            .unwrap_or("")
            .contains("spoken with espeak-ng instead of piper"))),
        "{h}"
    );
    assert_ne!(speech_status(&e).await.0, "ok", "{}", e.log());
    let _ = callee.success(Duration::from_secs(20)).await;
}

/// `local = true` with a python that does not exist: callsmith serves, says why at start,
/// reports `speech` `down` (status `degraded`, still 200), and prompts fall back to
/// espeak-ng (the default synthesizer, since no node is registered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_node_is_reported_not_a_crash() {
    let mut e = Engine::start(EngineOptions {
        extra_toml: "[speech]\nlocal = true\npython = \"/nonexistent/speech-venv/bin/python\"\n"
            .into(),
        ..Default::default()
    })
    .await;
    assert_eq!(
        speech_status(&e).await,
        ("down".to_string(), "degraded".to_string())
    );
    let log = e.log();
    assert!(
        log.contains("local speech node not started")
            && log.contains("/nonexistent/speech-venv/bin/python"),
        "{log}"
    );
    assert!(!log.contains("speech node started"), "{log}");
    let status = e.terminate(Duration::from_secs(30)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}
