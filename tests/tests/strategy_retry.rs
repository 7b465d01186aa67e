//! A communication strategy applied by the dialer, against the real binary and SIPp: a
//! busy recipient (486) is dialled again after the rule's delay and answers; the API lists
//! both attempts and the one result delivery, after the last attempt, carries them. A
//! decline (603) is never dialled again, whatever the rules.

use std::time::Duration;

use callsmith_e2e::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_recipient_is_redialled_and_answers() {
    let sink = Sink::start(0).await;
    // The callee is busy once; then, on the same address, it answers.
    let mut busy = Sipp::spawn("uas_reject_486.xml", None, None, &["-m", "1"]);
    let addr = busy.addr;
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "retry", "carrier", "+4930100800").await;
    let id = dispatch_with_strategy(
        &e,
        &t,
        None,
        &greeting_scenario("Hi."),
        |a| AgentSpec {
            targets: vec![sink.url.clone()],
            ..a
        },
        json!({"retry": {"busy": {"attempts": 1, "delay_s": 4}}}),
        "+15550180",
    )
    .await;
    assert!(
        busy.success(Duration::from_secs(30)).await,
        "{}",
        busy.dump()
    );
    let mut answers = Sipp::spawn("dialer_uas_echo.xml", Some(addr.port()), None, &["-m", "1"]);
    let list = answered_at_the_second_attempt(&e, &t, &id, &mut answers).await;
    let (first, second) = (&list["items"][0], &list["items"][1]);
    assert_eq!(first["sip_code"], 486, "{list}");
    assert_eq!(first["outcome"], "busy", "{list}");
    assert_eq!(second["call_status"], "answered", "{list}");
    assert_eq!(second["outcome"], "completed", "{list}");
    assert_eq!(first["from_number"], "+4930100800");
    // The second dial waited for the rule's delay after the first ended.
    let ended = chrono::DateTime::parse_from_rfc3339(first["ended_at"].as_str().unwrap()).unwrap();
    let started =
        chrono::DateTime::parse_from_rfc3339(second["started_at"].as_str().unwrap()).unwrap();
    assert!(
        started - ended >= chrono::Duration::seconds(4),
        "{ended} → {started}"
    );
    // One result delivery, after the last attempt, carrying both.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while sink.bodies().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let bodies = sink.bodies();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    assert_eq!(bodies[0]["communication"]["id"], id.as_str());
    let carried = bodies[0]["attempts"].as_array().expect("attempts");
    assert_eq!(carried.len(), 2, "{}", bodies[0]);
    assert_eq!(carried[0]["sip_code"], 486);
    assert_eq!(carried[1]["outcome"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decline_is_never_redialled() {
    let mut callee = Sipp::spawn("uas_reject_603.xml", None, None, &["-m", "1"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "decline", "carrier", "+4930100900").await;
    let every = json!({"attempts": 3, "delay_s": 1});
    let id = dispatch_with_strategy(
        &e,
        &t,
        None,
        &greeting_scenario("Hi."),
        |a| a,
        json!({"retry": {"busy": every, "no_answer": every, "failed": every,
                         "voicemail": every, "dropped": every}}),
        "+15550190",
    )
    .await;
    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(60))
        .await;
    assert_eq!(done["sip_code"], 603, "{done}\n{}", e.log());
    assert!(
        callee.success(Duration::from_secs(20)).await,
        "{}",
        callee.dump()
    );
    // Longer than the rules' delay: still one attempt, the row final.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let list = attempts_of(&e, &t, &id).await;
    assert_eq!(list["total"], 1, "{list}");
    assert_eq!(list["items"][0]["outcome"], "declined", "{list}");
    let (_, now) = e
        .get(&format!("/v1/communication/{id}"), Some(&t.account))
        .await;
    assert_eq!(
        now["communication_status"], done["communication_status"],
        "{now}"
    );
    assert_eq!(callee.invites().len(), 1, "dialled once");
}

/// Waits until the communication is released by the pre-dial check (`queued`, due later
/// than `after`); returns it.
async fn wait_deferred(
    e: &Engine,
    t: &Tenancy,
    id: &str,
    after: chrono::DateTime<chrono::Utc>,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, c) = e
            .get(&format!("/v1/communication/{id}"), Some(&t.account))
            .await;
        let due = c["due_at"]
            .as_str()
            .and_then(|d| chrono::DateTime::parse_from_rfc3339(d).ok());
        if c["communication_status"] == "new" && due.is_some_and(|d| d > after) {
            return c;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not deferred: {c}\n{}",
            e.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_hours_and_a_full_cap_defer_the_dial() {
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "defer", "carrier", "+4930101000").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &greeting_scenario("Hi."), true).await;
    let first = create_agent(
        &store,
        &t,
        &AgentSpec::new(scn.clone(), t.number_id.clone()),
    )
    .await;
    let second = create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;

    // Calling hours every day but today and the next two days (in any zone): not dialled,
    // released to a later day.
    let today = chrono::Utc::now().date_naive();
    let day = |d: i64| (today + chrono::Duration::days(d)).to_string();
    let all_day = json!([["00:00", "24:00"]]);
    let closed = create_strategy(
        &e,
        &t,
        "closed now",
        json!({"calling_hours": {"strategy": "weekly", "args": {
            "mon": all_day, "tue": all_day, "wed": all_day, "thu": all_day, "fri": all_day,
            "sat": all_day, "sun": all_day,
            "excluded_dates": [day(-1), day(0), day(1), day(2)]}}}),
    )
    .await;
    let c = e
        .dispatch(
            &t,
            json!({"recipient": "+4930555100", "agent_sid": first, "strategy_sid": closed}),
        )
        .await;
    let id = c["id"].as_str().expect("id").to_string();
    let deferred = wait_deferred(
        &e,
        &t,
        &id,
        chrono::Utc::now() + chrono::Duration::hours(12),
    )
    .await;
    assert!(deferred["started_at"].is_null(), "{deferred}");
    let list = attempts_of(&e, &t, &id).await;
    assert_eq!(list["total"], 0, "no dial: {list}");

    // A cap of one call an hour to a number, across the account's agents: the first
    // agent's call is placed, the second agent's waits an hour.
    let capped = create_strategy(
        &e,
        &t,
        "one an hour",
        json!({"frequency_cap": {"calls": 1, "period_s": 3600}}),
    )
    .await;
    let a = e
        .dispatch(
            &t,
            json!({"recipient": "+15550210", "agent_sid": first, "strategy_sid": capped}),
        )
        .await;
    let a = e
        .wait_communication(
            &t.account,
            a["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(a["call_status"], "answered", "{a}\n{}", e.log());
    let b = e
        .dispatch(
            &t,
            json!({"recipient": "+15550210", "agent_sid": second, "strategy_sid": capped}),
        )
        .await;
    let b_id = b["id"].as_str().expect("id").to_string();
    wait_deferred(
        &e,
        &t,
        &b_id,
        chrono::Utc::now() + chrono::Duration::minutes(55),
    )
    .await;
    assert!(
        callee.success(Duration::from_secs(20)).await,
        "{}",
        callee.dump()
    );
    let dialled: Vec<String> = callee.invites().into_iter().map(|(u, _)| u).collect();
    assert_eq!(dialled, ["+15550210"], "one dial in all");
}

/// A dispatch's own `schedule` replaces the agent's calling schedule for its
/// communication: closed while the agent's is open, the communication is not dialled
/// (released until it opens); open while the agent's is closed, it is dialled, while the
/// agent's other communications wait for the agent's schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_schedule_overrides_the_agents_calling_schedule() {
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1"]);
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "dispatch-schedule", "carrier", "+4930101100").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(&store, &t, &greeting_scenario("Hi."), true).await;
    // Open every day but today and the next two days (in any zone).
    let today = chrono::Utc::now().date_naive();
    let day = |d: i64| (today + chrono::Duration::days(d)).to_string();
    let all_day = json!([["00:00", "24:00"]]);
    let closed = json!({"strategy": "weekly", "args": {
        "mon": all_day, "tue": all_day, "wed": all_day, "thu": all_day, "fri": all_day,
        "sat": all_day, "sun": all_day,
        "excluded_dates": [day(-1), day(0), day(1), day(2)]}});
    let open_agent = create_agent(
        &store,
        &t,
        &AgentSpec::new(scn.clone(), t.number_id.clone()),
    )
    .await;
    let closed_agent = create_agent(
        &store,
        &t,
        &AgentSpec {
            calling_schedule: closed.clone(),
            ..AgentSpec::new(scn, t.number_id.clone())
        },
    )
    .await;

    // The agent is open, the dispatch's schedule closed: not dialled, due days later.
    let c = e
        .dispatch(
            &t,
            json!({"recipient": "+4930555200", "agent_sid": open_agent, "schedule": closed}),
        )
        .await;
    assert_eq!(c["schedule"], closed, "{c}");
    let id = c["id"].as_str().expect("id").to_string();
    let deferred = wait_deferred(
        &e,
        &t,
        &id,
        chrono::Utc::now() + chrono::Duration::hours(12),
    )
    .await;
    assert!(deferred["started_at"].is_null(), "{deferred}");
    assert_eq!(attempts_of(&e, &t, &id).await["total"], 0);

    // The agent is closed: its plain communication waits for the agent's schedule, the one
    // with an open dispatch schedule is dialled and answered.
    let waits = e
        .dispatch(
            &t,
            json!({"recipient": "+4930555201", "agent_sid": closed_agent}),
        )
        .await;
    let dialled = e
        .dispatch(
            &t,
            json!({"recipient": "+4930555202", "agent_sid": closed_agent,
                "schedule": {"strategy": "always", "args": {}}}),
        )
        .await;
    let done = e
        .wait_communication(
            &t.account,
            dialled["id"].as_str().expect("id"),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(done["call_status"], "answered", "{done}\n{}", e.log());
    let (_, w) = e
        .get(
            &format!("/v1/communication/{}", waits["id"].as_str().unwrap()),
            Some(&t.account),
        )
        .await;
    assert!(w["started_at"].is_null(), "{w}");
    let due = w["due_at"]
        .as_str()
        .and_then(|d| chrono::DateTime::parse_from_rfc3339(d).ok())
        .expect("due_at");
    assert!(
        due > chrono::Utc::now() + chrono::Duration::hours(12),
        "deferred to the agent's next window: {w}"
    );
    assert!(
        callee.success(Duration::from_secs(20)).await,
        "{}",
        callee.dump()
    );
    let numbers: Vec<String> = callee.invites().into_iter().map(|(u, _)| u).collect();
    assert_eq!(numbers, ["+4930555202"], "one dial in all");
}
