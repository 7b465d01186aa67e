//! The dialer against the real binary and SIPp: call limits (cps, cpl), calling schedule
//! windows, scheduled dispatch, inbound calls answered by their agent, and crash safety
//! (SIGKILL mid-campaign: nothing lost, nothing dialled twice).

use std::time::Duration;

use callsmith_e2e::*;
use chrono::{DateTime, Datelike, Utc};
use serde_json::{Value, json};

fn always() -> Value {
    json!({"strategy": "always", "args": {}})
}

fn ts(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|d| d.with_timezone(&Utc))
        .unwrap_or_else(|| panic!("not a timestamp: {v}"))
}

async fn dispatch(e: &Engine, t: &Tenancy, agent: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let c = e
            .post_ok(
                "/v1/communication/-/dispatch",
                Some(&t.account),
                json!({"recipient": format!("+1555010{i:02}"), "agent_sid": agent}),
                201,
            )
            .await;
        ids.push(c["id"].as_str().expect("id").to_string());
    }
    ids
}

/// cps bounds call starts per second; cpl bounds calls live at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cps_and_cpl_shape_call_starts_and_concurrency() {
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "7"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "limits", "carrier", "+4930100400").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &greeting_scenario("Hello there."), true).await;
    let spec = |cps, cpl| AgentSpec {
        scenario_sid: scn.clone(),
        number_sid: t.number_id.clone(),
        cps,
        cpl,
        targets: vec![],
        calling_schedule: always(),
        timezone: "UTC".into(),
        call_recording: false,
    };
    let fast = create_agent(&store, &t, &spec(2, 0)).await;
    let single = create_agent(&store, &t, &spec(0, 1)).await;
    let by_cps = dispatch(&e, &t, &fast, 4).await;
    let by_cpl = dispatch(&e, &t, &single, 3).await;

    let rows = |ids: Vec<String>| {
        let e = &e;
        let t = &t;
        async move {
            let mut out = Vec::new();
            for id in ids {
                out.push(
                    e.wait_communication(&t.account, &id, Duration::from_secs(120))
                        .await,
                );
            }
            out.sort_by_key(|r| ts(&r["started_at"]));
            out
        }
    };
    let cps_rows = rows(by_cps).await;
    let cpl_rows = rows(by_cpl).await;
    for r in cps_rows.iter().chain(cpl_rows.iter()) {
        assert_eq!(r["communication_status"], "completed", "{r}\n{}", e.log());
        assert_eq!(r["goals"], json!(["greeted"]));
    }
    // cps 2: any three consecutive starts span at least about a second (burst of 2, then 2/s).
    for w in cps_rows.windows(3) {
        let span = ts(&w[2]["started_at"]) - ts(&w[0]["started_at"]);
        assert!(
            span >= chrono::Duration::milliseconds(850),
            "three starts within {span:?}: cps 2 violated"
        );
    }
    // cpl 1: a call starts only after the previous one ended.
    for w in cpl_rows.windows(2) {
        assert!(
            ts(&w[1]["started_at"]) >= ts(&w[0]["ended_at"]),
            "calls overlapped: {} started before {} ended",
            w[1]["id"],
            w[0]["id"]
        );
    }
    assert!(
        callee.success(Duration::from_secs(30)).await,
        "{}",
        callee.dump()
    );
}

/// Outside the agent's calling window a call waits (`queued`) until the next window
/// opens; a test call with scheduled_at waits until then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_window_and_scheduled_at_defer_calls() {
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "sched", "carrier", "+4930100450").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &greeting_scenario("Hi."), true).await;
    // Only tomorrow (UTC) is open, all day.
    let tomorrow = Utc::now().date_naive().succ_opt().expect("tomorrow");
    let day = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
        [tomorrow.weekday().num_days_from_monday() as usize];
    let agent = create_agent(
        &store,
        &t,
        &AgentSpec {
            scenario_sid: scn.clone(),
            number_sid: t.number_id.clone(),
            cps: 0,
            cpl: 0,
            targets: vec![],
            calling_schedule: json!({"strategy": "weekly", "args": {day: [["00:00", "24:00"]]}}),
            timezone: "UTC".into(),
            call_recording: false,
        },
    )
    .await;
    let ids = dispatch(&e, &t, &agent, 1).await;
    let queued = eventually(Duration::from_secs(20), || async {
        let (_, v) = e
            .get(&format!("/v1/communication/{}", ids[0]), Some(&t.account))
            .await;
        (v["communication_status"] == "queued").then_some(v)
    })
    .await
    .expect("the call is deferred to the next window");
    let want = tomorrow.and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    assert_eq!(ts(&queued["due_at"]), want, "{queued}");
    assert!(queued["started_at"].is_null());

    // A test call scheduled 3 s ahead starts no earlier.
    let at = Utc::now() + chrono::Duration::seconds(3);
    let c = e
        .post_ok(
            "/v1/communication/-/dispatch",
            Some(&t.account),
            json!({"recipient": "+15550199", "scenario_sid": scn, "scheduled_at": at.to_rfc3339()}),
            201,
        )
        .await;
    assert_eq!(c["version"], 1, "published version when draft is omitted");
    let done = e
        .wait_communication(
            &t.account,
            c["id"].as_str().expect("id"),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(done["communication_status"], "completed", "{done}");
    assert!(ts(&done["started_at"]) >= at, "{done}");
    assert!(
        callee.success(Duration::from_secs(20)).await,
        "{}",
        callee.dump()
    );
}

/// A call to a number is answered by the active agent dialling from that number and runs
/// its scenario's inbound entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbound_call_is_answered_by_its_agent() {
    let gateway_port = free_udp_port();
    let e = Engine::start(EngineOptions {
        trunks: vec![(
            "carrier".into(),
            std::net::SocketAddr::from(([127, 0, 0, 1], gateway_port)),
        )],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "in", "carrier", "+4930100500").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &greeting_scenario("Thanks for calling."), true).await;
    let agent = create_agent(
        &store,
        &t,
        &AgentSpec {
            scenario_sid: scn,
            number_sid: t.number_id.clone(),
            cps: 0,
            cpl: 0,
            targets: vec![],
            calling_schedule: always(),
            timezone: "UTC".into(),
            call_recording: false,
        },
    )
    .await;
    let mut caller = Sipp::spawn(
        "uac_answered_engine_bye.xml",
        Some(gateway_port),
        Some(e.sip_addr),
        &["-m", "1", "-s", "+4930100500"],
    );
    assert!(
        caller.success(Duration::from_secs(60)).await,
        "caller: {}\nengine: {}",
        caller.dump(),
        e.log()
    );
    let row = eventually(Duration::from_secs(20), || async {
        let (_, v) = e
            .get("/v1/communication?direction=inbound", Some(&t.account))
            .await;
        let r = v["items"][0].clone();
        (r["communication_status"] == "completed").then_some(r)
    })
    .await
    .unwrap_or_else(|| panic!("no completed inbound communication\n{}", e.log()));
    assert_eq!(row["agent_sid"], agent.as_str());
    assert_eq!(row["direction"], "inbound");
    assert_eq!(row["recipient"], "+15550001");
    assert_eq!(row["from_number"], "+4930100500");
    assert_eq!(row["goals"], json!(["greeted"]));

    // A number nobody serves is refused.
    let mut stranger = Sipp::spawn(
        "uac_expect_404.xml",
        None,
        Some(e.sip_addr),
        &["-m", "1", "-s", "+4930999999"],
    );
    assert!(
        stranger.success(Duration::from_secs(30)).await,
        "{}",
        stranger.dump()
    );
}

/// SIGKILL while calls are live: after a restart the live calls are `interrupted` (never
/// redialled), the calls not yet dialled are dialled exactly once, nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_campaign_loses_nothing_and_dials_nothing_twice() {
    let callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "4"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        data_dir: Some(dir.path().to_path_buf()),
        dialer_toml: "lease_secs = 2\nreconcile_interval_secs = 1\n".into(),
        ..Default::default()
    };
    let mut e = Engine::start(opts.clone()).await;
    let t = provision(&e, "kill", "carrier", "+4930100600").await;
    let store = store_of(&e, None).await;
    let long = "This call carries a long message so that it is still going when the engine dies. \
                It goes on for a while, sentence after sentence, and then it goes on a little more.";
    let scn = create_scenario(&store, &t, &greeting_scenario(long), true).await;
    let agent = create_agent(
        &store,
        &t,
        &AgentSpec {
            scenario_sid: scn,
            number_sid: t.number_id.clone(),
            cps: 0,
            cpl: 2,
            targets: vec![],
            calling_schedule: always(),
            timezone: "UTC".into(),
            call_recording: false,
        },
    )
    .await;
    let ids = dispatch(&e, &t, &agent, 4).await;
    // Wait for two live calls, then kill the engine.
    eventually(Duration::from_secs(30), || async {
        let (_, v) = e
            .get(
                "/v1/communication?communication_status=in_progress",
                Some(&t.account),
            )
            .await;
        (v["total"] == 2).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("two calls never went live\n{}", e.log()));
    let killed_at = Utc::now();
    e.kill().await;
    drop(store);

    let e = Engine::start(opts).await;
    let mut rows = Vec::new();
    for id in &ids {
        rows.push(
            e.wait_communication(&t.account, id, Duration::from_secs(120))
                .await,
        );
    }
    let interrupted: Vec<&Value> = rows
        .iter()
        .filter(|r| r["communication_status"] == "interrupted")
        .collect();
    let completed: Vec<&Value> = rows
        .iter()
        .filter(|r| r["communication_status"] == "completed")
        .collect();
    assert_eq!(
        interrupted.len(),
        2,
        "the two live calls: {rows:?}\n{}",
        e.log()
    );
    assert_eq!(completed.len(), 2, "the two waiting calls: {rows:?}");
    for r in &interrupted {
        assert!(ts(&r["started_at"]) < killed_at, "never redialled: {r}");
        assert!(r["error"].is_string());
    }
    for r in &completed {
        assert!(
            ts(&r["started_at"]) > killed_at,
            "dialled after the restart: {r}"
        );
        assert_eq!(r["goals"], json!(["greeted"]));
    }
}
