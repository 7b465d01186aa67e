//! The dialer against the real binary and SIPp: call limits (cps, cpl), calling schedule
//! windows, scheduled dispatch, inbound calls answered by their agent, and crash safety
//! (SIGKILL mid-campaign: nothing lost, nothing dialled twice).

use std::time::Duration;

use callsmith_domain::communication::CommunicationStatus;
use callsmith_e2e::*;
use chrono::{DateTime, Datelike, Utc};
use serde_json::{Value, json};

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
            .dispatch(
                t,
                json!({"recipient": format!("+1555010{i:02}"), "agent_sid": agent}),
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
        cps,
        cpl,
        ..AgentSpec::new(scn.clone(), t.number_id.clone())
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
            calling_schedule: json!({"strategy": "weekly", "args": {day: [["00:00", "24:00"]]}}),
            ..AgentSpec::new(scn.clone(), t.number_id.clone())
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
        .dispatch(
            &t,
            json!({"recipient": "+15550199", "scenario_sid": scn, "scheduled_at": at.to_rfc3339()}),
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
    let agent = create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;
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
            cpl: 2,
            ..AgentSpec::new(scn, t.number_id.clone())
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

/// SIGTERM while calls are live: the process stops claiming (the waiting communications
/// stay `new`, unclaimed, for the next process), the live calls play to their end, then the
/// process exits 0; the next process dials the rest, each exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_live_calls_and_leaves_the_queue_for_the_next_process() {
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "4"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let mut e = Engine::start(opts.clone()).await;
    let t = provision(&e, "term", "carrier", "+4930100700").await;
    let store = store_of(&e, None).await;
    let long = "This call carries a message of several seconds, so that it is still going when \
                the engine is asked to stop. It plays to its end all the same.";
    let scn = create_scenario(&store, &t, &greeting_scenario(long), true).await;
    let agent = create_agent(
        &store,
        &t,
        &AgentSpec {
            cpl: 2,
            ..AgentSpec::new(scn, t.number_id.clone())
        },
    )
    .await;
    let ids = dispatch(&e, &t, &agent, 4).await;
    let live: Vec<String> = eventually(Duration::from_secs(30), || async {
        let (_, v) = e
            .get(
                "/v1/communication?communication_status=in_progress",
                Some(&t.account),
            )
            .await;
        let items: Vec<String> = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_str().map(String::from))
            .collect();
        (items.len() == 2).then_some(items)
    })
    .await
    .unwrap_or_else(|| panic!("two calls never went live\n{}", e.log()));
    let waiting: Vec<String> = ids.iter().filter(|i| !live.contains(i)).cloned().collect();
    let term_at = Utc::now();
    let status = e
        .terminate(Duration::from_secs(60))
        .await
        .unwrap_or_else(|| panic!("the engine did not exit within 60 s\n{}", e.log()));
    let log = e.log();
    assert!(status.success(), "exit status {status:?}\n{log}");
    assert!(log.contains("draining: no new calls"), "{log}");
    assert!(
        !log.contains("hanging up live calls"),
        "the live calls finished within the drain time\n{log}"
    );

    // Straight from the database: the process is gone.
    for id in &live {
        let r = store
            .communication_get(id)
            .await
            .expect("read")
            .expect("row");
        assert_eq!(
            r.communication_status,
            CommunicationStatus::Completed,
            "{r:?}"
        );
        assert_eq!(
            r.goal_list(),
            vec!["greeted".to_string()],
            "played to its end"
        );
        assert!(
            r.ended_at.expect("ended") > term_at,
            "it ended after SIGTERM"
        );
    }
    for id in &waiting {
        let r = store
            .communication_get(id)
            .await
            .expect("read")
            .expect("row");
        assert_eq!(
            r.communication_status,
            CommunicationStatus::New,
            "still queued: {r:?}"
        );
        assert!(r.started_at.is_none() && r.claim_token.is_none(), "{r:?}");
    }
    drop(store);

    // The next process dials what was left, once each.
    let e2 = Engine::start(opts).await;
    for id in &waiting {
        let r = e2
            .wait_communication(&t.account, id, Duration::from_secs(90))
            .await;
        assert_eq!(r["communication_status"], "completed", "{r}");
        assert_eq!(r["goals"], json!(["greeted"]));
    }
    assert!(
        callee.success(Duration::from_secs(30)).await,
        "four calls, each answered once: {}",
        callee.dump()
    );
    let invites = callee.invites();
    assert_eq!(invites.len(), 4, "{invites:?}");
}

/// Two `callsmith` processes on one PostgreSQL database: every communication is dialled by
/// exactly one of them, all complete, and each agent's cps and cpl hold for the two
/// processes together (the limits are claimed in the database, not per process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_on_one_postgres_dial_each_call_once_within_shared_limits() {
    let admin = std::env::var("CALLSMITH_TEST_PG_ADMIN_URL").expect(
        "CALLSMITH_TEST_PG_ADMIN_URL is not set: run `eval \"$(bash scripts/test-deps.sh)\"`",
    );
    let db = callsmith_domain::store::create_postgres_database(&admin, "cse2e_")
        .await
        .expect("a fresh database");
    let (by_cps_n, by_cpl_n) = (8usize, 6usize);
    let mut callee = Sipp::spawn(
        "dialer_uas_echo.xml",
        None,
        None,
        &["-m", &(by_cps_n + by_cpl_n).to_string()],
    );
    let parts = rtp_ranges(2);
    let opts = |ports, dialer_toml: &str| EngineOptions {
        database_url: Some(db.clone()),
        trunks: vec![("carrier".into(), callee.addr)],
        rtp_ports: Some(ports),
        dialer_toml: dialer_toml.into(),
        ..Default::default()
    };
    // Each process holds one live call at most, so while one has a call the other due rows
    // are the other's to claim: both dial however the two processes are scheduled on a
    // loaded machine.
    let a = Engine::start(opts(parts[0], "max_live_calls = 1\n")).await;
    let b = Engine::start(opts(parts[1], "max_live_calls = 1\n")).await;
    let t = provision(&a, "fleet", "carrier", "+4930100800").await;
    let store = store_of(&a, Some(&db)).await;
    let scn = create_scenario(&store, &t, &greeting_scenario("Hello there."), true).await;
    let spec = |cps, cpl| AgentSpec {
        cps,
        cpl,
        ..AgentSpec::new(scn.clone(), t.number_id.clone())
    };
    let fast = create_agent(&store, &t, &spec(2, 0)).await;
    let narrow = create_agent(&store, &t, &spec(0, 2)).await;
    let mut send = Vec::new();
    for (agent, n, tag) in [(&fast, by_cps_n, "1"), (&narrow, by_cpl_n, "2")] {
        let mut ids = Vec::new();
        for i in 0..n {
            // Half of the dispatches go through each engine.
            let e = if i % 2 == 0 { &a } else { &b };
            let c = e
                .dispatch(
                    &t,
                    json!({"recipient": format!("+15550{tag}{i:03}"), "agent_sid": agent}),
                )
                .await;
            ids.push(c["id"].as_str().expect("id").to_string());
        }
        send.push(ids);
    }
    let mut rows = Vec::new();
    for ids in &send {
        let mut out = Vec::new();
        for id in ids {
            let r = a
                .wait_communication(&t.account, id, Duration::from_secs(180))
                .await;
            assert_eq!(
                r["communication_status"],
                "completed",
                "{r}\nA:\n{}\nB:\n{}",
                a.log(),
                b.log()
            );
            assert_eq!(r["goals"], json!(["greeted"]));
            // Exactly one engine ran it (its history is in that engine's storage).
            let (in_a, in_b) = (a.has_history(&t.account, id), b.has_history(&t.account, id));
            assert!(in_a != in_b, "{id}: ran by A {in_a}, by B {in_b}");
            out.push((r, in_a));
        }
        out.sort_by_key(|(r, _)| ts(&r["started_at"]));
        rows.push(out);
    }
    let all = rows.iter().flatten();
    let by_a = all.clone().filter(|(_, in_a)| *in_a).count();
    let total = by_cps_n + by_cpl_n;
    assert!(
        by_a > 0 && by_a < total,
        "both engines dialled ({by_a} of {total} by A)\nA:\n{}\nB:\n{}",
        a.log(),
        b.log()
    );

    // Each recipient saw exactly one INVITE (one Call-ID).
    assert!(
        callee.success(Duration::from_secs(30)).await,
        "{}",
        callee.dump()
    );
    let invites = callee.invites();
    assert_eq!(invites.len(), total, "{invites:?}");
    let users: std::collections::BTreeSet<&String> = invites.iter().map(|(u, _)| u).collect();
    assert_eq!(users.len(), total, "one INVITE per recipient: {invites:?}");

    // cps 2 over both engines: any three consecutive starts span about a second.
    for w in rows[0].windows(3) {
        let span = ts(&w[2].0["started_at"]) - ts(&w[0].0["started_at"]);
        assert!(
            span >= chrono::Duration::milliseconds(850),
            "three starts within {span:?} across two engines: cps 2 violated"
        );
    }
    let span = ts(&rows[0][by_cps_n - 1].0["started_at"]) - ts(&rows[0][0].0["started_at"]);
    assert!(
        span >= chrono::Duration::milliseconds(((by_cps_n - 1) as i64) * 500 - 150),
        "{by_cps_n} starts in {span:?}: more than 2 per second combined"
    );
    // cpl 2 over both engines: when a call starts, at most one other is live.
    let narrow_rows = &rows[1];
    for (r, _) in narrow_rows {
        let s = ts(&r["started_at"]);
        let others = narrow_rows
            .iter()
            .filter(|(o, _)| o["id"] != r["id"])
            .filter(|(o, _)| ts(&o["started_at"]) <= s && ts(&o["ended_at"]) > s)
            .count();
        assert!(
            others <= 1,
            "{} started with {others} others live: cpl 2 violated",
            r["id"]
        );
    }
}

/// `consent_granted` is set by the call: the callee presses 1 to agree, the scenario sets the
/// reserved variable `consent_granted`, and the finished communication carries the flag (a
/// call whose scenario never sets it stays false).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consent_is_granted_by_the_scenario_variable() {
    let mut agreeing = Sipp::spawn("uas_answer_dtmf.xml", None, None, &["-m", "1"]);
    let mut plain = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![
            ("agree".into(), agreeing.addr),
            ("plain".into(), plain.addr),
        ],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "consent", "agree", "+4930100950").await;
    let store = store_of(&e, None).await;
    // The confirm scenario, with consent recorded on the agreeing answer.
    let mut snapshot = reply_scenario("dtmf");
    let bricks = &mut snapshot["constructor"]["bricks"];
    bricks["audio_tts"]["v1"][0]["outputs"][0]["next"] = json!("consent");
    bricks["assignment"] = json!({"v1": [{"id": "consent", "description": "", "properties": {
        "variables": [{"name": "consent_granted", "value": "true"}]},
        "outputs": [{"type": "next", "description": "", "next": "g_yes"}]}]});
    let with_consent = create_scenario(&store, &t, &snapshot, true).await;
    let agent = create_agent(
        &store,
        &t,
        &AgentSpec::new(with_consent, t.number_id.clone()),
    )
    .await;
    let c = e
        .dispatch(&t, json!({"recipient": "+15550950", "agent_sid": agent}))
        .await;
    assert_eq!(c["consent_granted"], false, "not before the call: {c}");
    let done = e
        .wait_communication(
            &t.account,
            c["id"].as_str().expect("id"),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(done["goals"], json!(["confirmed"]), "{done}\n{}", e.log());
    assert_eq!(done["variables"]["consent_granted"], "true");
    assert_eq!(done["consent_granted"], true, "{done}");
    // The reply's first RTP packet was measured for the DTMF turn.
    let h = e.history(&t.account, done["id"].as_str().expect("id"));
    let turn = &h["turns"][0];
    assert_eq!(turn["heard"], "dtmf", "{turn}");
    let total = turn["turn_latency_us"].as_u64().expect("turn latency");
    let engine = turn["turn_engine_us"].as_u64().expect("engine share");
    assert!(engine <= total && total < 2_000_000, "{turn}");
    let (_, metrics) = e.get("/metrics", None).await;
    assert!(
        metrics
            .as_str()
            .unwrap_or_default()
            .contains("callsmith_turn_latency_seconds_count 1"),
        "{metrics}"
    );

    // A test call on the other trunk whose scenario never sets the variable.
    let plain_t = {
        let r = e
            .client
            .post(format!("{}/v1/internal/trunk", e.base_url))
            .bearer_auth(SU_TOKEN)
            .header("X-Tenant-Sid", &t.tenant)
            .json(&json!({"name": "plain"}))
            .send()
            .await
            .expect("create trunk");
        assert_eq!(r.status().as_u16(), 201, "create trunk");
        let n = e
            .post_ok(
                "/v1/number",
                Some(&t.account),
                json!({"identifier": "+4930100951", "name": "plain line", "trunk": "plain"}),
                201,
            )
            .await;
        n["id"].as_str().expect("number").to_string()
    };
    let greet = create_scenario(&store, &t, &greeting_scenario("Hello."), true).await;
    let other = create_agent(&store, &t, &AgentSpec::new(greet, plain_t)).await;
    let c = e
        .dispatch(&t, json!({"recipient": "+15550951", "agent_sid": other}))
        .await;
    let done = e
        .wait_communication(
            &t.account,
            c["id"].as_str().expect("id"),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(done["goals"], json!(["greeted"]), "{done}");
    assert_eq!(done["consent_granted"], false);
    assert!(
        agreeing.success(Duration::from_secs(20)).await,
        "{}",
        agreeing.dump()
    );
    assert!(
        plain.success(Duration::from_secs(20)).await,
        "{}",
        plain.dump()
    );
}
