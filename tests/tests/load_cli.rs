//! `callsmith load` against a SIPp UAS: the calls it reports are the calls SIPp answered,
//! its cpl holds, a target that answers 408 fails the run with the codes in its report and
//! summary, thresholds fail it for CI, a speech bot's report shows the caller's wait (the
//! local speech node started as `serve` starts it), and a bad scenario or target, or a
//! speech question with no recogniser, stops it with a clear message before any call.

use std::{path::Path, process::Stdio, time::Duration};

use callsmith_e2e::{Sipp, binary, reply_scenario, ulaw_speech};
use serde_json::{Value, json};

/// `callsmith.toml` in `dir` (read by `callsmith load` run there): no local speech node.
fn no_speech_node(dir: &Path) {
    std::fs::write(dir.join("callsmith.toml"), "[speech]\nlocal = false\n").expect("config");
}

fn hello() -> Value {
    json!({"name": "hello", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "properties": {"tts_general": {"engine": "espeak-ng", "language": "en-US"}},
            "outputs": [{"type": "next", "next": "hi"}]}]},
        "audio_tts": {"v1": [{"id": "hi", "properties": {"text": "Hello from callsmith. Goodbye."},
            "outputs": [{"type": "next", "next": "g"}]}]},
        "goal": {"v1": [{"id": "g", "properties": {"goal": "greeted"}, "outputs": [{"type": "next", "next": "bye"}]}]},
        "end_call": {"v1": [{"id": "bye", "properties": {"signal": ""}, "outputs": []}]}}}})
}

async fn load(dir: &Path, args: &[&str]) -> std::process::Output {
    load_within(dir, args, Duration::from_secs(120)).await
}

async fn load_within(dir: &Path, args: &[&str], within: Duration) -> std::process::Output {
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
    tokio::time::timeout(within, child.wait_with_output())
        .await
        .expect("callsmith load ended in time")
        .expect("callsmith load output")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_reports_what_the_callee_answered() {
    let dir = tempfile::tempdir().expect("tempdir");
    no_speech_node(dir.path());
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "load failed: {stderr}\n{stdout}");
    assert!(
        stderr.contains("8/8 done, 0 live, 8 answered, 0 failed"),
        "the progress line counts the calls: {stderr}"
    );
    // The summary at the end, like SIPp's.
    for shown in [
        "8 total, 8 dialled, 8 answered, 0 failed",
        "SIP final codes 200: 8",
        "threshold       --max-failed 0: passed (0 failed)",
        "result          PASSED",
    ] {
        assert!(stdout.contains(shown), "{shown}: {stdout}");
    }
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
    let o = &report["outcome"];
    assert_eq!(o["sip_codes"], json!({"200": 8}), "{o}");
    assert_eq!(
        (o["answered"].as_u64(), o["failed"].as_u64()),
        (Some(8), Some(0))
    );
    assert_eq!(o["failed_calls"], json!([]));
    assert_eq!(report["passed"], true);
    let per_second: Vec<u64> = report["calls_started_per_second"]
        .as_array()
        .expect("calls started per second")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(per_second.iter().sum::<u64>(), 8, "{per_second:?}");
    assert!(
        per_second.iter().all(|n| *n <= 4 + 1),
        "about --cps 4: {per_second:?}"
    );
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
        "Calls started per second (cps dashed)",
        "<tr><td>200</td><td>8</td></tr>",
        "Setup time over time",
        "Turn latency over time",
        "By call status",
        "By goal reached",
    ] {
        assert!(html.contains(shown), "{shown}: {html}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_answers_408_fails_the_run_with_its_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    no_speech_node(dir.path());
    std::fs::write(dir.path().join("hello.json"), hello().to_string()).expect("scenario");
    let mut callee = Sipp::spawn("uas_reject_408.xml", None, None, &["-m", "3"]);
    let target = format!("sip:100@{}", callee.addr);
    let out = load(
        dir.path(),
        &[
            "--target",
            &target,
            "--scenario",
            "hello.json",
            "--calls",
            "3",
            "--cps",
            "3",
            "--out",
            "report",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "every call failed: {stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("3/3 done, 0 live, 0 answered, 3 failed"),
        "{stderr}"
    );
    assert!(stderr.contains("a threshold was not kept"), "{stderr}");
    for shown in [
        "3 total, 3 dialled, 0 answered, 3 failed",
        "SIP final codes 408: 3",
        "not answered (SIP 408, no_answer)",
        "threshold       --max-failed 0: FAILED (3 failed)",
        "result          FAILED",
    ] {
        assert!(stdout.contains(shown), "{shown}: {stdout}");
    }
    assert!(!stdout.contains(" 0 failed"), "{stdout}");
    assert!(
        callee.success(Duration::from_secs(30)).await,
        "SIPp: {}",
        callee.dump()
    );
    let report: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("report/report.json")).expect("report.json"),
    )
    .expect("report json");
    let o = &report["outcome"];
    assert_eq!(o["sip_codes"], json!({"408": 3}), "{o}");
    assert_eq!(
        (o["answered"].as_u64(), o["failed"].as_u64()),
        (Some(0), Some(3))
    );
    let failed = o["failed_calls"].as_array().expect("failed calls");
    assert_eq!(failed.len(), 3, "{o}");
    assert!(
        failed
            .iter()
            .all(|f| f["sip_code"] == 408 && f["reason"] == "not answered (SIP 408, no_answer)"),
        "{o}"
    );
    assert_eq!(report["passed"], false);
    let html = std::fs::read_to_string(dir.path().join("report/report.html")).expect("html");
    for shown in [
        "<h2>SIP final codes</h2>",
        "<tr><td>408</td><td>3</td></tr>",
        "<h2>Failed calls (3)</h2>",
        "<tr><td>--max-failed 0</td><td>3 failed</td><td>FAILED</td></tr>",
    ] {
        assert!(html.contains(shown), "{shown}: {html}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thresholds_fail_the_run_and_the_summary_names_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The node's SIP address comes from `sip.udp` (its port picked by the system): another
    // loopback address than the target's.
    std::fs::write(
        dir.path().join("callsmith.toml"),
        "[speech]\nlocal = false\n[sip]\nudp = \"127.0.0.2:5060\"\n",
    )
    .expect("config");
    std::fs::write(dir.path().join("hello.json"), hello().to_string()).expect("scenario");
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "2", "-rtp_echo"]);
    let target = format!("sip:100@{}", callee.addr);
    // Two calls answered: more than none failed, fewer than 3 answered, and the greeting
    // asks nothing, so no caller's wait is measured.
    let out = load(
        dir.path(),
        &[
            "--target",
            &target,
            "--scenario",
            "hello.json",
            "--calls",
            "2",
            "--cps",
            "2",
            "--out",
            "report",
            "--min-answered",
            "3",
            "--max-turn-p95-ms",
            "2000",
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    for shown in [
        "2 total, 2 dialled, 2 answered, 0 failed",
        "threshold       --max-failed 0: passed (0 failed)",
        "threshold       --min-answered 3: FAILED (2 answered)",
        "threshold       --max-turn-p95-ms 2000: FAILED (no caller's wait measured",
        "result          FAILED",
    ] {
        assert!(stdout.contains(shown), "{shown}: {stdout}");
    }
    assert!(
        callee.success(Duration::from_secs(30)).await,
        "SIPp: {}",
        callee.dump()
    );
    let report: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("report/report.json")).expect("report.json"),
    )
    .expect("report json");
    let passed: Vec<bool> = report["thresholds"]
        .as_array()
        .expect("thresholds")
        .iter()
        .map(|c| c["passed"].as_bool().expect("passed"))
        .collect();
    assert_eq!(passed, [true, false, false], "{}", report["thresholds"]);
    let sipp = callee.messages();
    assert!(
        sipp.contains("Via: SIP/2.0/UDP 127.0.0.2:")
            && !sipp.contains("SIP/2.0/UDP 127.0.0.2:5060"),
        "the INVITEs came from sip.udp's address, on a port of their own: {sipp}"
    );
}

/// A speech bot: the callee says "yes" (flite) after the question; the run starts the local
/// speech node as `serve` does, waits for it, and its report and summary show the caller's
/// wait (end of the caller's speech → first RTP of the reply) apart from the engine's share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_speech_bot_run_reports_the_callers_wait() {
    let python = std::env::var("CALLSMITH_STT_PYTHON").unwrap_or_else(|_| {
        panic!("CALLSMITH_STT_PYTHON is not set: run `eval \"$(bash scripts/test-deps.sh)\"`")
    });
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("callsmith.toml"),
        format!("[speech]\nlocal = true\npython = {python:?}\nthreads = 1\n"),
    )
    .expect("config");
    std::fs::write(
        dir.path().join("confirm.json"),
        reply_scenario("speech").to_string(),
    )
    .expect("scenario");
    let sipp_dir = tempfile::tempdir().expect("tempdir");
    // The question ("Press one to confirm.") lasts about 1.5 s; speak after 4 s.
    ulaw_speech(sipp_dir.path(), "answer.ulaw", "yes", 4000);
    let mut callee = Sipp::spawn_in(sipp_dir, "dialer_uas_speak.xml", None, None, &["-m", "1"]);
    let target = format!("sip:100@{}", callee.addr);
    let out = load_within(
        dir.path(),
        &[
            "--target",
            &target,
            "--scenario",
            "confirm.json",
            "--calls",
            "1",
            "--out",
            "report",
            "--max-turn-p95-ms",
            "10000",
        ],
        Duration::from_secs(300),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("waiting for the local speech node"),
        "{stderr}"
    );
    assert!(
        callee.success(Duration::from_secs(30)).await,
        "SIPp: {}",
        callee.dump()
    );
    let report: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("report/report.json")).expect("report.json"),
    )
    .expect("report json");
    let st = &report["statistics"];
    assert_eq!(st["goals"], json!({"confirmed": 1}), "{st}");
    let q = &st["quality"];
    let wait = &q["caller_wait_ms"];
    let share = &q["turn_latency_ms"];
    assert_eq!(
        (wait["count"].as_u64(), share["count"].as_u64()),
        (Some(1), Some(1)),
        "{q}"
    );
    let (wait_ms, share_ms) = (
        wait["p50"].as_u64().expect("wait"),
        share["p50"].as_u64().expect("share"),
    );
    // The wait holds the end-of-turn silence and the recognition the engine's share does
    // not: it is the larger, and a human-scale figure.
    assert!(wait_ms > share_ms, "{q}");
    assert!((100..10_000).contains(&wait_ms), "{q}");
    assert!(
        stdout.contains(&format!("caller's wait   p50 {wait_ms} ms")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("engine's share  p50 {share_ms} ms")),
        "{stdout}"
    );
    assert!(
        stdout.contains("threshold       --max-turn-p95-ms 10000: passed"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(dir.path().join("report/report.html")).expect("html");
    assert!(html.contains("Caller's wait over time") && html.contains("<circle"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_speech_question_with_no_recogniser_is_refused_before_calling() {
    let dir = tempfile::tempdir().expect("tempdir");
    no_speech_node(dir.path());
    std::fs::write(
        dir.path().join("confirm.json"),
        reply_scenario("speech").to_string(),
    )
    .expect("scenario");
    let callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1"]);
    let target = format!("sip:100@{}", callee.addr);
    let out = load(
        dir.path(),
        &[
            "--target",
            &target,
            "--scenario",
            "confirm.json",
            "--calls",
            "1",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("question \"ask\" listens for speech with the recognition engine \"whisper\", and no recognition node serves it")
            && stderr.contains("speech.local = false"),
        "{stderr}"
    );
    assert!(
        callee.invites().is_empty(),
        "no call placed: {}",
        callee.dump()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_refuses_a_bad_scenario_or_target_before_calling() {
    let dir = tempfile::tempdir().expect("tempdir");
    no_speech_node(dir.path());
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
