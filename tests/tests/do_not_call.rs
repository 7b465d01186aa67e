//! The do-not-call list between dispatch and dial, against the real binary and SIPp: a
//! number listed after its communication was dispatched is never dialled (the row ends
//! `failed` with `recipient_suppressed`), while the other communication of the same batch
//! is placed.

use std::time::Duration;

use callsmith_e2e::*;
use chrono::Utc;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_listed_after_dispatch_is_not_dialled() {
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "dnc", "carrier", "+4930100700").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &greeting_scenario("Hi."), true).await;
    let agent = create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;
    // Both calls are due in 3 s; one number is listed in the meantime.
    let at = (Utc::now() + chrono::Duration::seconds(3)).to_rfc3339();
    let listed = e
        .dispatch(
            &t,
            json!({"recipient": "+15550170", "agent_sid": agent, "scheduled_at": at}),
        )
        .await;
    let other = e
        .dispatch(
            &t,
            json!({"recipient": "+15550171", "agent_sid": agent, "scheduled_at": at}),
        )
        .await;
    let (status, body) = e
        .post(
            "/v1/do-not-call",
            Some(&t.account),
            json!({"number": "+1 555 0170"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");

    let listed = e
        .wait_communication(
            &t.account,
            listed["id"].as_str().expect("id"),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(listed["communication_status"], "failed", "{listed}");
    assert!(
        listed["error"]
            .as_str()
            .is_some_and(|m| m.starts_with("recipient_suppressed")),
        "{listed}"
    );
    assert!(listed["started_at"].is_null(), "never dialled: {listed}");
    assert!(listed["sip_code"].is_null(), "{listed}");
    let other = e
        .wait_communication(
            &t.account,
            other["id"].as_str().expect("id"),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(other["communication_status"], "completed", "{other}");
    assert!(
        callee.success(Duration::from_secs(20)).await,
        "{}",
        callee.dump()
    );
    let dialled: Vec<String> = callee.invites().into_iter().map(|(u, _)| u).collect();
    assert_eq!(dialled, ["+15550171"], "only the unlisted number rings");
}
