//! The web console in a real browser: Debian's chromium, headless, driven by
//! `tests/browser/console.mjs` through playwright-core, against the real binary.
//! * A user logs in, creates the quickstart scenario, sees its graph, breaks the draft and
//!   sees the SCN entry beside the brick, fixes and publishes it, compares versions, opens
//!   the lists; the superuser logs in with its token and picks the account.
//! * A user calls the quickstart's draft from the browser: chromium's fake microphone
//!   plays flite saying "yes", the local speech node recognises it, the live view shows
//!   the transcript and the yes branch, and the communication is a completed test call;
//!   then publishes it and calls version 1 the same way; a third call is hung up from the
//!   console. Each call speaks Opus, the codec chromium offers first, relayed to the media
//!   session as G.722, and the browser hears the bot in wideband (speech above 4.5 kHz).
//! * Chromium runs as a stock browser, with no flag that changes what its WebRTC may
//!   reach: it offers no loopback candidate, so the call tests give it a machine with a LAN
//!   address: a network namespace of their own ([`Lan`]). On one machine the browser checks
//!   the loopback engine from that address; from another machine (the second namespace) it
//!   opens the console through a tunnel to its own loopback and calls an engine bound to
//!   every interface over the LAN.
//!
//! Screenshots go to `<target dir>/e2e-artifacts/console/<test>/` and are checked to be
//! real pages.
//!
//! `scripts/test-deps.sh` installs chromium and playwright-core and exports
//! `CALLSMITH_CHROMIUM` and `CALLSMITH_PLAYWRIGHT_DIR`.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use callsmith_e2e::netns::{Forward, Lan};
use callsmith_e2e::{
    Engine, EngineOptions, SU_TOKEN, SttNode, Tenancy, idle_trunk, provision, sox, ulaw_speech,
    workspace,
};
use serde_json::{Value, json};
use tokio::process::Command;

/// Where a test leaves its screenshots (kept after the run, for people and CI).
fn artifacts(test: &str) -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace().join("target"));
    let dir = target.join("e2e-artifacts").join("console").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("artifact dir");
    dir
}

fn required(var: &str) -> String {
    std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} is not set: run `eval \"$(bash scripts/test-deps.sh)\"`"))
}

/// Width and height of a PNG file, after checking its signature.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(
        bytes.len() > 24 && bytes.starts_with(b"\x89PNG\r\n\x1a\n") && &bytes[12..16] == b"IHDR",
        "not a PNG"
    );
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

/// Runs the browser script with `env`; returns the JSON of its `RESULT` line.
async fn run_browser(env: &[(&str, String)]) -> Value {
    run_browser_in(None, env).await
}

/// Runs the browser script with `env`, in the network namespace `netns` when given (else
/// in the caller's); returns the JSON of its `RESULT` line.
async fn run_browser_in(netns: Option<&str>, env: &[(&str, String)]) -> Value {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "node"]);
            c
        }
        None => Command::new("node"),
    };
    cmd.arg(workspace().join("tests/browser/console.mjs"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("CALLSMITH_CHROMIUM", required("CALLSMITH_CHROMIUM"))
        .env(
            "CALLSMITH_PLAYWRIGHT_DIR",
            required("CALLSMITH_PLAYWRIGHT_DIR"),
        )
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(150), cmd.output())
        .await
        .expect("the browser script finished within 150 s")
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the browser script failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // What the script did, step by step, for the test's output.
    eprintln!("{stdout}");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line:\n{stdout}\n{stderr}"));
    serde_json::from_str(line).expect("RESULT is JSON")
}

const EMAIL: &str = "designer@example.test";
const PASSWORD: &str = "correct horse battery";

/// A tenancy with an admin user who logs in with [`EMAIL`] and [`PASSWORD`].
async fn designer(engine: &Engine) -> Tenancy {
    let t = provision(engine, "console", "edge", "+4930555000").await;
    let (s, v) = engine
        .post(
            "/v1/user",
            Some(&t.account),
            json!({"email": EMAIL, "password": PASSWORD, "roles": ["admin"]}),
        )
        .await;
    assert_eq!(s, 201, "create user: {v}");
    t
}

/// The script's environment for `mode` against `engine`.
fn browser_env(
    mode: &str,
    engine: &Engine,
    t: &Tenancy,
    out: &Path,
) -> Vec<(&'static str, String)> {
    vec![
        ("MODE", mode.into()),
        ("BASE_URL", engine.base_url.clone()),
        ("USER_EMAIL", EMAIL.into()),
        ("USER_PASSWORD", PASSWORD.into()),
        ("SU_TOKEN", SU_TOKEN.into()),
        ("TENANT_SID", t.tenant.clone()),
        ("ACCOUNT_SID", t.account.clone()),
        ("NUMBER", t.number.clone()),
        ("OUT_DIR", out.display().to_string()),
    ]
}

/// Checks that each named screenshot is a PNG of a whole page.
fn screenshots(out: &Path, names: &[&str]) {
    for name in names {
        let p = out.join(format!("{name}.png"));
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let (w, h) = png_size(&bytes);
        assert!(
            w >= 1000 && h >= 600 && bytes.len() > 20_000,
            "{}: {w}x{h}, {} bytes",
            p.display(),
            bytes.len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_designer_builds_and_publishes_the_quickstart_in_chromium() {
    let engine = Engine::start(EngineOptions {
        trunks: idle_trunk("edge"),
        ..Default::default()
    })
    .await;
    let t = designer(&engine).await;
    let out = artifacts("design");
    let result = run_browser(&browser_env("design", &engine, &t, &out)).await;

    // What the browser did is what the API holds: the scenario, published once, and its
    // working draft equal to version 1.
    let scn = result["scenario"].as_str().expect("scenario id");
    let (s, sc) = engine
        .get(&format!("/v1/scenario/{scn}"), Some(&t.account))
        .await;
    assert_eq!(s, 200, "{sc}");
    assert_eq!(sc["name"], "Quickstart from the browser");
    assert_eq!(sc["latest_version"], 1);
    let (_, versions) = engine
        .get(
            &format!("/v1/scenario-version?scenario_sid={scn}"),
            Some(&t.account),
        )
        .await;
    let items = versions["items"].as_array().expect("versions");
    let v1 = items.iter().find(|v| v["version"] == 1).expect("version 1");
    let draft = items
        .iter()
        .find(|v| v["draft_version"] == 0)
        .expect("working draft");
    assert_eq!(v1["content_hash"], draft["content_hash"]);
    let (_, report) = engine
        .post(
            &format!("/v1/scenario/{scn}/validate"),
            Some(&t.account),
            json!({}),
        )
        .await;
    assert_eq!(report["valid"], true, "{report}");

    // The records made from the console: an agent on the new number, an audio file.
    let agent = result["agent"].as_str().expect("agent id");
    let (s, a) = engine
        .get(&format!("/v1/agent/{agent}"), Some(&t.account))
        .await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["scenario_sid"], scn);
    assert_eq!(a["call_recording"], true, "{a}");
    let audio = result["audio"].as_str().expect("audio id");
    let (s, f) = engine
        .get(&format!("/v1/audio/{audio}"), Some(&t.account))
        .await;
    assert_eq!(s, 200, "{f}");
    assert_eq!(f["original_filename"], "jingle.wav", "{f}");

    // The account the superuser made in the console, in a tenant of its own.
    let made = result["made_account"].as_str().expect("made account");
    let (s, a) = engine
        .get(&format!("/v1/internal/account/{made}"), None)
        .await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["name"], "console account");
    assert_eq!(a["timezone"], "Europe/Berlin");
    assert_ne!(a["tenant_sid"], t.tenant.as_str());
    // The screenshots are pictures of whole pages, not empty files.
    screenshots(
        &out,
        &[
            "01-scenario",
            "02-scenario-list",
            "03-validation-error",
            "04-published",
            "05-live-view",
            "06-communication",
            "07-numbers",
            "08-superuser",
        ],
    );
    let log = engine.log();
    assert!(!log.contains("panicked"), "the engine panicked:\n{log}");
}

/// The fake microphone's file: flite saying "yes" between pauses; chromium plays it in a
/// loop, so the answer comes again in every listening window of the question.
fn yes_microphone(out: &Path) -> String {
    let ulaw = ulaw_speech(out, "yes.ul", "yes", 2500);
    let wav = out.join("yes.wav");
    let (ulaw, wav_s) = (ulaw.display().to_string(), wav.display().to_string());
    sox(&[
        "-t", "ul", "-r", "8000", "-c", "1", &ulaw, "-b", "16", &wav_s, "rate", "48000", "pad",
        "0", "2.5",
    ]);
    wav_s
}

/// The ICE side of a browser call as the browser saw it: the offer's candidates carry
/// `browser_ip` and no loopback address (a stock browser gathers none), and the pair the
/// browser selected runs from `browser_ip` to `engine_ip`.
fn assert_ice_path(result: &Value, browser_ip: &str, engine_ip: &str) {
    let offered: Vec<&str> = result["offer_candidates"]
        .as_array()
        .expect("the offer's candidates")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        offered
            .iter()
            .all(|c| !c.contains(" 127.0.0.1 ") && !c.contains(" ::1 ")),
        "a stock browser offers no loopback candidate: {offered:?}"
    );
    assert!(
        offered
            .iter()
            .any(|c| c.contains(&format!(" {browser_ip} "))),
        "the browser offers its LAN address {browser_ip}: {offered:?}"
    );
    let pair = &result["selected_pair"];
    let (local, remote) = (
        pair["local"].as_str().unwrap_or_default(),
        pair["remote"].as_str().unwrap_or_default(),
    );
    assert!(
        local.starts_with(&format!("{browser_ip}:")),
        "the browser's end of the selected pair: {pair}"
    );
    assert!(
        remote.starts_with(&format!("{engine_ip}:")) && remote.ends_with(" host"),
        "the engine's end of the selected pair is its host candidate: {pair}"
    );
}

/// The browser on the engine's machine, a machine with a LAN address (a network namespace
/// of the test's own, [`Lan`]): stock chromium offers that address, not loopback, and its
/// checks reach the loopback engine (`media.bind_ip` by default) from it.
#[test]
fn browser_calls_of_the_draft_and_the_version_take_the_spoken_branch() {
    let lan = Lan::create();
    lan.a.run(|| async {
        let result = draft_and_version_calls().await;
        assert_ice_path(&result, &Lan::A_IP.to_string(), "127.0.0.1");
    });
}

async fn draft_and_version_calls() -> Value {
    let node = SttNode::start().await;
    let engine = Engine::start(EngineOptions {
        stt_url: Some(node.url.clone()),
        trunks: idle_trunk("edge"),
        ..Default::default()
    })
    .await;
    let t = designer(&engine).await;
    let out = artifacts("call");
    let mut env = browser_env("call", &engine, &t, &out);
    env.push(("FAKE_AUDIO", yes_microphone(&out)));
    let result = run_browser(&env).await;

    let heard = result["transcript"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(heard.contains("yes"), "the live view showed {heard:?}");
    // What the browser hears of the bot is wideband: speech above 4.5 kHz, which a
    // narrowband leg (G.711, or Opus held to narrowband) leaves 60 dB down, arrives within
    // 40 dB of the telephone band (about 20 dB below it with the shipped relay).
    let bands = &result["received_bands"];
    let (low, high) = (
        bands["low_db"]
            .as_f64()
            .expect("the telephone band's power"),
        bands["high_db"].as_f64().expect("the upper band's power"),
    );
    assert!(
        low > -40.0 && high > low - 40.0,
        "the browser hears the bot in wideband: {bands}"
    );
    let id = result["communication"].as_str().expect("communication id");
    let done = engine
        .wait_communication(&t.account, id, Duration::from_secs(30))
        .await;
    assert_eq!(done["is_test"], true, "{done}");
    assert_eq!(done["communication_status"], "completed", "{done}");
    assert_eq!(done["call_status"], "answered", "{done}");
    assert_eq!(done["goals"], json!(["callback_wanted"]), "{done}");
    assert!(done["agent_sid"].is_null(), "{done}");
    // A draft call runs a frozen copy of the draft, as the dispatch route does.
    assert!(
        done["draft_version"].as_i64().is_some_and(|v| v >= 1),
        "{done}"
    );
    // The published version, called from the same page.
    let id2 = result["version_communication"]
        .as_str()
        .expect("version call id");
    let v = engine
        .wait_communication(&t.account, id2, Duration::from_secs(30))
        .await;
    assert_eq!(v["version"], 1, "{v}");
    assert!(v["draft_version"].is_null(), "{v}");
    assert_eq!(v["goals"], json!(["callback_wanted"]), "{v}");
    // A call hung up from the console ends before the question is answered.
    let id3 = result["hung_up_communication"]
        .as_str()
        .expect("hung-up call id");
    let h = engine
        .wait_communication(&t.account, id3, Duration::from_secs(30))
        .await;
    assert_eq!(h["communication_status"], "completed", "{h}");
    assert!(
        !h["goals"]
            .as_array()
            .is_some_and(|g| g.contains(&json!("callback_wanted"))),
        "{h}"
    );
    let history = engine.history_from_api(&t.account, id).await;
    let turn = history.turns.first().expect("a listen turn");
    assert_eq!(turn.heard.as_str(), "speech", "{turn:?}");
    screenshots(&out, &["10-call", "11-communication", "12-version-call"]);
    let log = engine.log();
    assert!(!log.contains("panicked"), "the engine panicked:\n{log}");
    // Chromium offers Opus first: every browser call speaks it, and the relay speaks
    // G.722 with the media session, so the call is wideband both ways.
    let connected: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("browser call connected"))
        .collect();
    assert!(
        connected.len() >= 2
            && connected
                .iter()
                .all(|l| l.contains("codec=opus") && l.contains("session_codec=G722")),
        "each browser call negotiates Opus, relayed as G.722: {connected:#?}"
    );
    result
}

/// The browser on another machine of the LAN (the second namespace, 10.203.0.2) opens the
/// console of an engine bound to every interface (`media.bind_ip = "0.0.0.0"`, HTTP on
/// every interface) at 10.203.0.1 and calls the draft: the engine announces its LAN
/// address (never 0.0.0.0), pairs with the browser's checks from 10.203.0.2, and the call
/// takes the spoken branch.
#[test]
fn a_browser_on_another_machine_calls_over_the_lan() {
    let lan = Lan::create();
    let browser_ns = lan.b.name.clone();
    lan.a.run(move || async move {
        let node = SttNode::start().await;
        let any: std::net::IpAddr = std::net::Ipv4Addr::UNSPECIFIED.into();
        let engine = Engine::start(EngineOptions {
            stt_url: Some(node.url.clone()),
            trunks: idle_trunk("edge"),
            http_ip: Some(any),
            media_toml: "bind_ip = \"0.0.0.0\"\n".into(),
            ..Default::default()
        })
        .await;
        // The SDP address of the wildcard bind: the host's one LAN address.
        let log = engine.log();
        assert!(
            log.contains(&format!("media={}", Lan::A_IP)),
            "the engine announces {}:\n{log}",
            Lan::A_IP
        );
        let t = designer(&engine).await;
        let out = artifacts("lan-call");
        let port: u16 = engine
            .base_url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port");
        // The designer reaches the console through a tunnel to loopback on the browser's
        // machine (a secure origin, as HTTPS would be); the call's media goes over the LAN.
        let tunnel = Forward::open(&browser_ns, (Lan::A_IP, port).into());
        let mut env = browser_env("call-once", &engine, &t, &out);
        env.retain(|(k, _)| *k != "BASE_URL");
        env.push(("BASE_URL", format!("http://127.0.0.1:{}", tunnel.port)));
        env.push(("FAKE_AUDIO", yes_microphone(&out)));
        let result = run_browser_in(Some(&browser_ns), &env).await;

        assert_ice_path(&result, &Lan::B_IP.to_string(), &Lan::A_IP.to_string());
        let heard = result["transcript"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase();
        assert!(heard.contains("yes"), "the live view showed {heard:?}");
        let id = result["communication"].as_str().expect("communication id");
        let done = engine
            .wait_communication(&t.account, id, Duration::from_secs(30))
            .await;
        assert_eq!(done["communication_status"], "completed", "{done}");
        assert_eq!(done["call_status"], "answered", "{done}");
        assert_eq!(done["goals"], json!(["callback_wanted"]), "{done}");
        screenshots(&out, &["10-call", "11-communication"]);
        let log = engine.log();
        assert!(!log.contains("panicked"), "the engine panicked:\n{log}");
    });
}

/// The newcomer's machine has a LAN address, as in the call test above.
#[test]
fn a_newcomer_builds_a_two_question_bot_with_the_palette_and_calls_it_with_variables() {
    Lan::create().a.run(build_and_call_with_variables);
}

async fn build_and_call_with_variables() {
    let engine = Engine::start(EngineOptions {
        trunks: idle_trunk("edge"),
        ..EngineOptions::default()
    })
    .await;
    let t = designer(&engine).await;
    let out = artifacts("build");
    let result = run_browser(&browser_env("build", &engine, &t, &out)).await;

    // The palette offers every brick kind of the model.
    let palette: Vec<&str> = result["palette"]
        .as_array()
        .expect("palette kinds")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for kind in callsmith_scenarios::model::BrickKind::ALL {
        assert!(
            palette.contains(&kind.as_str()),
            "{} in {palette:?}",
            kind.as_str()
        );
    }
    // Validation showed the empty answer id beside its field while the bot was built.
    let inline = result["inline_error"].as_str().unwrap_or_default();
    assert!(
        inline.contains("SCN") && inline.contains("answer_id"),
        "{inline}"
    );

    // What the forms built is the published version 1: two questions, the variable in the
    // greeting, the answers wired to their bricks.
    let scn = result["built"].as_str().expect("built scenario id");
    let (_, sc) = engine
        .get(&format!("/v1/scenario/{scn}"), Some(&t.account))
        .await;
    assert_eq!(sc["latest_version"], 1, "{sc}");
    let (s, v) = engine
        .get(
            &format!("/v1/scenario-version/by-scenario?scenario_sid={scn}&version=1"),
            Some(&t.account),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let bricks = &v["snapshot"]["constructor"]["bricks"];
    let questions = bricks["question"]["v1"].as_array().expect("questions");
    assert_eq!(questions.len(), 2, "{bricks}");
    let ask = questions.iter().find(|q| q["id"] == "ask").expect("ask");
    assert_eq!(
        ask["properties"]["statement"]["audio"]["tts"]["text"],
        "Hello {{first_name}}, do you have a minute?"
    );
    let next = |b: &Value, ty: &str| {
        b["outputs"]
            .as_array()
            .and_then(|o| o.iter().find(|o| o["type"] == ty))
            .map(|o| o["next"].clone())
    };
    assert_eq!(next(ask, "yes"), Some(json!("ask_2")), "{ask}");
    assert_eq!(
        next(ask, "invalid"),
        Some(json!("bye")),
        "picked on the graph: {ask}"
    );
    assert_eq!(
        next(&bricks["start_call"]["v1"][0], "next"),
        Some(json!("ask"))
    );
    assert_eq!(
        bricks["goal"]["v1"][0]["properties"]["goal"],
        "monday_chosen"
    );

    // The call with the test variable spoke it, and was recorded.
    let greeting = result["greeting"].as_str().unwrap_or_default();
    assert!(
        greeting.contains("Hello Ada, do you have a minute?") && greeting.contains("heard"),
        "the bot's line, with how much of it was heard: {greeting}"
    );
    let id = result["variables_call"].as_str().expect("call id");
    let done = engine
        .wait_communication(&t.account, id, Duration::from_secs(30))
        .await;
    assert_eq!(done["data"], json!({"first_name": "Ada"}), "{done}");
    assert_eq!(done["has_recording"], true, "{done}");
    assert_eq!(done["version"], 1, "{done}");
    assert!(
        result["recording_seconds"].as_f64().unwrap_or(0.0) > 1.0,
        "{result}"
    );
    screenshots(
        &out,
        &[
            "20-inline-error",
            "21-built",
            "22-call-with-variables",
            "23-recording",
        ],
    );
    let log = engine.log();
    assert!(!log.contains("panicked"), "the engine panicked:\n{log}");
}
