//! The OpenAPI document against the running binary: schemathesis (PyPI) generates requests
//! from `/openapi.json` for every operation, with all its checks (server errors, status
//! codes, content types, response schemas, schema-valid requests accepted, invalid ones
//! refused, stateful links), as three principals in turn: an account user (session
//! token), the legacy family (HTTP Basic `account_sid:account_token`) and the superuser
//! (last, since it may delete the tenant the others live in). Settings and the exceptions
//! the document cannot state: `tests/schemathesis.toml`.
//!
//! `CALLSMITH_SCHEMATHESIS` names the `st` program (`scripts/test-deps.sh` installs it);
//! `CALLSMITH_ST_EXAMPLES` (default 15) and `CALLSMITH_ST_SEED` (default 1) bound and fix
//! the run. docs/fuzzing.md says how to run it longer.

use std::{path::Path, process::Stdio, time::Duration};

use callsmith_e2e::{Engine, EngineOptions, SU_TOKEN, idle_trunk, provision, workspace};
use serde_json::{Value, json};

/// One schemathesis run; panics with its report when any check failed.
fn schemathesis(engine: &Engine, who: &str, args: &[&str], report: &Path) {
    let st = std::env::var("CALLSMITH_SCHEMATHESIS").unwrap_or_else(|_| {
        panic!("CALLSMITH_SCHEMATHESIS is not set: run `eval \"$(bash scripts/test-deps.sh)\"`")
    });
    let examples = std::env::var("CALLSMITH_ST_EXAMPLES").unwrap_or_else(|_| "15".into());
    let seed = std::env::var("CALLSMITH_ST_SEED").unwrap_or_else(|_| "1".into());
    let out = std::process::Command::new(st)
        .arg("--config-file")
        .arg(workspace().join("tests/schemathesis.toml"))
        .arg("run")
        .arg(format!("{}/openapi.json", engine.base_url))
        .args(["--no-color", "--max-examples", &examples, "--seed", &seed])
        // Credentials come from the principal's headers; schemathesis does not make up
        // its own (which `--auth` would then overwrite, reporting requests it never sent).
        .args(["--generation-with-security-parameters", "false"])
        .args(["--request-timeout", "30"])
        .args(args)
        // Its example database would make later runs depend on earlier ones.
        .args(["--generation-database", "none"])
        // Whatever it keeps on disk stays in the engine's temporary directory.
        .current_dir(&engine.data_dir)
        .stdin(Stdio::null())
        .output()
        .expect("run schemathesis");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    std::fs::write(report, &text).expect("write the report");
    assert!(
        out.status.success(),
        "schemathesis as {who} failed ({}); report {}:\n{text}",
        out.status,
        report.display()
    );
    assert!(
        text.contains("Tested:"),
        "schemathesis as {who} tested nothing:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_holds_for_every_principal() {
    let engine = Engine::start(EngineOptions {
        trunks: idle_trunk("edge"),
        ..Default::default()
    })
    .await;
    let t = provision(&engine, "openapi", "edge", "+4930123456").await;
    let su = |req: reqwest::RequestBuilder| {
        req.bearer_auth(SU_TOKEN)
            .header("X-Tenant-Sid", &t.tenant)
            .header("X-Account-Sid", &t.account)
    };
    // An account user with a session, and the account's legacy token.
    let r = su(engine.client.post(format!("{}/v1/user", engine.base_url)))
        .json(&json!({"email": "designer@example.test", "password": "correct horse", "roles": ["admin"]}))
        .send()
        .await
        .expect("create user");
    assert_eq!(r.status().as_u16(), 201, "create user");
    let login: Value = engine
        .client
        .post(format!("{}/v1/auth/login", engine.base_url))
        .json(&json!({"email": "designer@example.test", "password": "correct horse"}))
        .send()
        .await
        .expect("login")
        .json()
        .await
        .expect("login json");
    let session = login["session_token"].as_str().expect("session token");
    let legacy: Value = su(engine.client.post(format!(
        "{}/v1/internal/account/{}/legacy-token",
        engine.base_url, t.account
    )))
    .send()
    .await
    .expect("legacy token")
    .json()
    .await
    .expect("legacy token json");
    let account_token = legacy["account_token"].as_str().expect("account token");

    let reports = engine.data_dir.clone();
    let engine = std::sync::Arc::new(engine);
    let (e, session, t2) = (engine.clone(), session.to_string(), t.account.clone());
    let account_token = account_token.to_string();
    let tenant = t.tenant.clone();
    let runs = tokio::task::spawn_blocking(move || {
        schemathesis(
            &e,
            "account user",
            &["-H", &format!("Authorization: Bearer {session}")],
            &reports.join("st-user.txt"),
        );
        schemathesis(
            &e,
            "legacy account",
            &[
                "--include-tag",
                "legacy",
                "--auth",
                &format!("{t2}:{account_token}"),
            ],
            &reports.join("st-legacy.txt"),
        );
        schemathesis(
            &e,
            "superuser",
            &[
                "-H",
                &format!("Authorization: Bearer {SU_TOKEN}"),
                "-H",
                &format!("X-Tenant-Sid: {tenant}"),
                "-H",
                &format!("X-Account-Sid: {t2}"),
            ],
            &reports.join("st-superuser.txt"),
        );
    });
    tokio::time::timeout(Duration::from_secs(900), runs)
        .await
        .expect("schemathesis finished within 15 minutes")
        .expect("schemathesis runs");
    let log = engine.log();
    assert!(!log.contains("panicked"), "the engine panicked:\n{log}");
}
