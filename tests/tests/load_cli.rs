//! `callsmith load` against a SIPp UAS: the calls it reports are the calls SIPp answered,
//! its cpl holds, and a bad scenario or target stops it with a clear message before any
//! call.

use std::{process::Stdio, time::Duration};

use callsmith_e2e::{Sipp, binary};
use serde_json::{Value, json};

fn hello() -> Value {
    json!({"name": "hello", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "properties": {"tts_general": {"engine": "espeak-ng", "language": "en-US"}},
            "outputs": [{"type": "next", "next": "hi"}]}]},
        "audio_tts": {"v1": [{"id": "hi", "properties": {"text": "Hello from callsmith. Goodbye."},
            "outputs": [{"type": "next", "next": "g"}]}]},
        "goal": {"v1": [{"id": "g", "properties": {"goal": "greeted"}, "outputs": [{"type": "next", "next": "bye"}]}]},
        "end_call": {"v1": [{"id": "bye", "properties": {"signal": ""}, "outputs": []}]}}}})
}

async fn load(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let child = tokio::process::Command::new(binary())
        .arg("load")
        .args(args)
        .current_dir(dir)
        .env_remove("CALLSMITH_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn callsmith load");
    tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("callsmith load ended within 2 minutes")
        .expect("callsmith load output")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_reports_what_the_callee_answered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("hello.json");
    std::fs::write(&scenario, hello().to_string()).expect("scenario file");
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "8", "-rtp_echo"]);
    let target = format!("sip:100@{}", callee.addr);
    let out = load(
        dir.path(),
        &[
            "--target",
            &target,
            "--scenario",
            "hello.json",
            "--calls",
            "8",
            "--cps",
            "4",
            "--cpl",
            "3",
            "--out",
            "report",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "load failed: {stderr}");
    assert!(
        stderr.contains("8/8 done"),
        "the progress line counts the calls: {stderr}"
    );
    assert!(
        callee.success(Duration::from_secs(30)).await,
        "SIPp: {}",
        callee.dump()
    );
    let sipp_calls = callee.invites();
    assert_eq!(sipp_calls.len(), 8, "SIPp answered 8 INVITEs");

    let report: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("report/report.json")).expect("report.json"),
    )
    .expect("report json");
    let st = &report["statistics"];
    assert_eq!(st["total"], 8);
    assert_eq!(st["dialled"], 8);
    assert_eq!(st["answered"].as_u64(), Some(sipp_calls.len() as u64));
    assert_eq!(st["call_status"], json!({"answered": 8}));
    assert_eq!(st["communication_status"]["completed"], 8);
    assert_eq!(st["setup_time_ms"]["count"], 8);
    assert_eq!(report["timed_out"], false);
    assert_eq!(st["goals"], json!({"greeted": 8}));
    // Audio quality from the 8 saved histories: SIPp echoed the engine's RTP on loopback.
    let q = &st["quality"];
    assert_eq!(q["calls"], 8, "{q}");
    assert!(q["packets_expected"].as_i64().unwrap_or(0) > 8 * 50, "{q}");
    assert_eq!(q["packets_lost"], 0, "{q}");
    assert!(q["mos_x100"]["p50"].as_i64().unwrap_or(0) >= 400, "{q}");
    // Never more than cpl calls at once, by the engine's own timestamps.
    let calls = report["communications"].as_array().expect("communications");
    assert_eq!(calls.len(), 8);
    let spans: Vec<(String, String)> = calls
        .iter()
        .map(|c| {
            (
                c["started_at"].as_str().expect("started").to_string(),
                c["ended_at"].as_str().expect("ended").to_string(),
            )
        })
        .collect();
    for (start, _) in &spans {
        let live = spans
            .iter()
            .filter(|(a, b)| a <= start && start < b)
            .count();
        assert!(live <= 3, "{live} calls live at {start}");
    }
    assert!(
        calls.iter().all(|c| c["goals"] == json!(["greeted"])),
        "every call ran the scenario to its goal: {calls:?}"
    );
    let html = std::fs::read_to_string(dir.path().join("report/report.html")).expect("html");
    assert!(html.contains("<svg") && html.contains("answer rate") && html.contains("100.0 %"));
    assert!(
        html.contains("RTP loss") && html.contains("estimated MOS"),
        "{html}"
    );
    // One dispatch batch; the page draws the cpl, setup time and turn latency over time
    // and the outcomes.
    let batch = report["batch_sid"].as_str().expect("batch_sid");
    assert!(calls.iter().all(|c| c["batch_sid"] == batch), "{calls:?}");
    for shown in [
        "(cpl dashed)",
        "dashed: 3",
        "Setup time over time",
        "Turn latency over time",
        "By call status",
        "By goal reached",
    ] {
        assert!(html.contains(shown), "{shown}: {html}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_refuses_a_bad_scenario_or_target_before_calling() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A scenario with no start brick: the API's SCN errors, no call.
    std::fs::write(
        dir.path().join("bad.json"),
        json!({"bricks": {"end_call": {"v1": [{"id": "bye", "properties": {"signal": ""}, "outputs": []}]}}})
            .to_string(),
    )
    .expect("write");
    let out = load(
        dir.path(),
        &[
            "--target",
            "sip:100@127.0.0.1:9",
            "--scenario",
            "bad.json",
            "--calls",
            "1",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("SCN108"),
        "names the validation code: {stderr}"
    );
    for (args, says) in [
        (
            vec!["--target", "100@127.0.0.1", "--scenario", "bad.json"],
            "sip:USER@HOST:PORT",
        ),
        (
            vec![
                "--target",
                "sip:bob@127.0.0.1:5070",
                "--scenario",
                "bad.json",
            ],
            "not a number",
        ),
        (
            vec![
                "--target",
                "sip:100@127.0.0.1:5070",
                "--scenario",
                "missing.json",
            ],
            "reading missing.json",
        ),
        (
            vec![
                "--target",
                "sip:100@127.0.0.1:5070",
                "--scenario",
                "bad.json",
                "--cps",
                "0",
            ],
            "at least 1",
        ),
    ] {
        let out = load(dir.path(), &args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
