//! The web console in a real browser: Debian's chromium, headless, driven by
//! `tests/browser/console.mjs` through playwright-core, against the real binary. A user
//! logs in, creates the quickstart scenario, sees its graph, breaks the draft and sees
//! the SCN entry beside the brick, fixes and publishes it, compares versions, opens the
//! lists; the superuser logs in with its token and picks the account. Screenshots go to
//! `<target dir>/e2e-artifacts/console/` and are checked to be real pages.
//!
//! `scripts/test-deps.sh` installs chromium and playwright-core and exports
//! `CALLSMITH_CHROMIUM` and `CALLSMITH_PLAYWRIGHT_DIR`.

use std::{path::PathBuf, process::Stdio, time::Duration};

use callsmith_e2e::{Engine, EngineOptions, SU_TOKEN, provision, workspace};
use serde_json::{Value, json};
use tokio::process::Command;

/// Where the test leaves its screenshots (kept after the run, for people and CI).
fn artifacts() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace().join("target"));
    let dir = target.join("e2e-artifacts").join("console");
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
    let mut cmd = Command::new("node");
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
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line:\n{stdout}\n{stderr}"));
    serde_json::from_str(line).expect("RESULT is JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_designer_builds_and_publishes_the_quickstart_in_chromium() {
    let engine = Engine::start(EngineOptions::default()).await;
    let t = provision(&engine, "console", "edge", "+4930555000").await;
    let (email, password) = ("designer@example.test", "correct horse battery");
    let (s, v) = engine
        .post(
            "/v1/user",
            Some(&t.account),
            json!({"email": email, "password": password, "roles": ["admin"]}),
        )
        .await;
    assert_eq!(s, 201, "create user: {v}");
    let out = artifacts();

    let result = run_browser(&[
        ("MODE", "design".into()),
        ("BASE_URL", engine.base_url.clone()),
        ("USER_EMAIL", email.into()),
        ("USER_PASSWORD", password.into()),
        ("SU_TOKEN", SU_TOKEN.into()),
        ("TENANT_SID", t.tenant.clone()),
        ("ACCOUNT_SID", t.account.clone()),
        ("NUMBER", t.number.clone()),
        ("OUT_DIR", out.display().to_string()),
    ])
    .await;

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

    // The screenshots are pictures of whole pages, not empty files.
    for name in [
        "01-scenario",
        "02-scenario-list",
        "03-validation-error",
        "04-published",
        "07-numbers",
        "08-superuser",
    ] {
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
    let log = engine.log();
    assert!(!log.contains("panicked"), "the engine panicked:\n{log}");
}
