//! An engine driven past its capacity (`dialer.max_live_calls`): new inbound calls are
//! refused at once with 503 and Retry-After, before any dialog exists; the admitted calls
//! run clean and every one of them is stored; the node takes calls again once it has room.

use std::time::Duration;

use callsmith_e2e::*;
use serde_json::Value;

const LONG: &str = "Thank you for calling. This message is long on purpose, so that every \
                    admitted call is still going when the caller hangs up three seconds in.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_capacity_new_calls_get_503_and_admitted_calls_stay_clean() {
    let gateway_port = free_udp_port();
    let e = Engine::start(EngineOptions {
        trunks: vec![(
            "carrier".into(),
            std::net::SocketAddr::from(([127, 0, 0, 1], gateway_port)),
        )],
        dialer_toml: "max_live_calls = 5\n".into(),
        ..Default::default()
    })
    .await;
    let t = provision(&e, "cap", "carrier", "+4930100800").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &greeting_scenario(LONG), true).await;
    create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;

    // 20 calls within 0.4 s, each held 3 s: four times what the node takes.
    let mut caller = Sipp::spawn(
        "uac_answered_or_503.xml",
        Some(gateway_port),
        Some(e.sip_addr),
        &["-m", "20", "-r", "50", "-l", "20", "-s", "+4930100800"],
    );
    assert!(
        caller.success(Duration::from_secs(90)).await,
        "every call is answered or refused 503 with Retry-After\ncaller: {}\nengine: {}",
        caller.dump(),
        e.log()
    );
    let refused = caller
        .messages()
        .lines()
        .filter(|l| l.trim_start().starts_with("SIP/2.0 503"))
        .count();

    // Every admitted call is stored and ended cleanly.
    let rows: Vec<Value> = eventually(Duration::from_secs(30), || async {
        let (_, v) = e
            .get(
                "/v1/communication?direction=inbound&limit=100",
                Some(&t.account),
            )
            .await;
        let items = v["items"].as_array().cloned().unwrap_or_default();
        // Rows are written behind the calls: wait for the admitted ones to be there (an
        // empty list is not "all completed").
        (items.len() >= 5
            && items
                .iter()
                .all(|r| r["communication_status"] == "completed"))
        .then_some(items)
    })
    .await
    .unwrap_or_else(|| panic!("admitted calls did not all complete\n{}", e.log()));
    assert_eq!(
        rows.len(),
        5,
        "exactly max_live_calls admitted (refused {refused})\n{}",
        e.log()
    );
    assert_eq!(
        rows.len() + refused,
        20,
        "each call answered or refused once"
    );
    for r in &rows {
        assert_eq!(r["call_status"], "answered", "{r}");
        assert!(r["error"].is_null(), "{r}");
    }
    let log = e.log();
    for bad in [
        "recording the end of a call failed",
        "pool timed out",
        "could not be stored",
    ] {
        assert!(!log.contains(bad), "{bad}: {log}");
    }
    let metrics = e
        .client
        .get(format!("{}/metrics", e.base_url))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    assert!(
        metrics.contains("callsmith_call_writes_queued"),
        "{metrics}"
    );

    // With room again, the next call is answered.
    let mut again = Sipp::spawn(
        "uac_answered_caller_bye.xml",
        Some(gateway_port),
        Some(e.sip_addr),
        &["-m", "1", "-s", "+4930100800"],
    );
    assert!(
        again.success(Duration::from_secs(30)).await,
        "{}\n{}",
        again.dump(),
        e.log()
    );
}
