//! Dispatch batches, statistics and the report page of v1 communications, on SQLite and
//! PostgreSQL: a batch selects its calls in the list, the statistics and the report;
//! another account's batch answers as an unknown one; the statistics limit gives 422
//! `too_many_communications`; the page shows the figures the API gives, the turn latency
//! and setup time over time, the outcomes, and the agent's cpl (or why there is none).

use callsmith_control::{
    both_backends,
    testing::{Fixture, TestDb, TestResponse, TestServer, minimal_snapshot},
};
use callsmith_domain::{
    communication::history::{CallHistory, Direction, TurnLog},
    objects::CallObjects,
    store::{Pool, sqlx},
};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

const DISPATCH: &str = "/v1/communication/-/dispatch";

/// A number, a published scenario and an agent dialling from it with `cpl`.
async fn agent(s: &TestServer, f: &Fixture, number: &str, cpl: i64) -> String {
    let scenario = s.published_scenario(f, &minimal_snapshot("bot")).await;
    let r = s
        .post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": number}))
        .send()
        .await;
    r.expect(201);
    let number_sid = r.str("id");
    let r = s
        .post("/v1/agent")
        .bearer(&f.admin_session)
        .json(&json!({"gateway_type": "number", "number_sid": number_sid,
            "scenario_sid": scenario, "limits": {"cps": 5, "cpl": cpl}}))
        .send()
        .await;
    r.expect(201);
    r.str("id")
}

async fn dispatch(s: &TestServer, f: &Fixture, body: Value) -> TestResponse {
    s.post(DISPATCH)
        .bearer(&f.account_key)
        .json(&body)
        .send()
        .await
}

async fn get(s: &TestServer, f: &Fixture, path: &str) -> TestResponse {
    s.get(path).bearer(&f.account_key).send().await
}

fn ids(r: &TestResponse) -> Vec<String> {
    r.body["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {}", r.text))
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}

async fn batches(s: TestServer) {
    let a = s.fixture_named("a").await;
    let b = s.fixture_named("b").await;
    let agt = agent(&s, &a, "+4911", 4).await;
    let first = dispatch(&s, &a, json!({"agent_sid": agt, "recipient": "+4920"})).await;
    first.expect(201);
    let batch = first.str("batch_sid");
    assert!(batch.starts_with("bat_") && batch.len() == 36, "{batch}");
    let second = dispatch(
        &s,
        &a,
        json!({"agent_sid": agt, "recipient": "+4921", "batch_sid": batch}),
    )
    .await;
    second.expect(201);
    assert_eq!(second.str("batch_sid"), batch);
    // A dispatch without batch_sid starts a batch of its own.
    let other = dispatch(&s, &a, json!({"agent_sid": agt, "recipient": "+4922"})).await;
    other.expect(201);
    assert_ne!(other.str("batch_sid"), batch);
    // GET shows it too.
    let g = get(&s, &a, &format!("/v1/communication/{}", first.str("id"))).await;
    assert_eq!(g.str("batch_sid"), batch);

    // The list, the statistics and the report select the batch.
    let l = get(&s, &a, &format!("/v1/communication?batch={batch}")).await;
    l.expect(200);
    assert_eq!(l.body["total"], 2);
    assert_eq!(ids(&l), vec![second.str("id"), first.str("id")]);
    let st = get(
        &s,
        &a,
        &format!("/v1/communication/-/statistics?batch={batch}"),
    )
    .await;
    st.expect(200);
    assert_eq!(st.body["total"], 2);
    assert_eq!(st.body["communication_status"]["new"], 2);
    let all = get(&s, &a, "/v1/communication/-/statistics").await;
    assert_eq!(all.body["total"], 3);
    let page = get(
        &s,
        &a,
        &format!("/v1/communication/-/report.html?batch={batch}"),
    )
    .await;
    page.expect(200);
    assert!(
        page.text
            .contains("<tr><th>communications</th><td>2</td></tr>")
    );
    // One agent made the batch: its cpl is the dashed line.
    assert!(page.text.contains("dashed: 4"), "{}", page.text);

    // Errors: a malformed batch is 400 on the list, statistics and report; joining a batch
    // the account does not have is 422 unknown_batch.
    for path in [
        "/v1/communication?batch=nope",
        "/v1/communication/-/statistics?batch=bat_XYZ",
        "/v1/communication/-/report.html?batch=bat_",
    ] {
        get(&s, &a, path).await.expect_error(400, "invalid_query");
    }
    let unknown = "bat_0123456789abcdef0123456789abcdef";
    let r = dispatch(
        &s,
        &a,
        json!({"agent_sid": agt, "recipient": "+4923", "batch_sid": unknown}),
    )
    .await;
    r.expect_error(422, "unknown_batch");
    assert_eq!(r.body["data"]["topic"], "validation");
    dispatch(
        &s,
        &a,
        json!({"agent_sid": agt, "recipient": "+4923", "batch_sid": "batch-1"}),
    )
    .await
    .expect_error(422, "unknown_batch");

    // Tenant isolation: another account's batch answers exactly as an unknown one.
    let b_agent = agent(&s, &b, "+4912", 2).await;
    let theirs = dispatch(
        &s,
        &b,
        json!({"agent_sid": b_agent, "recipient": "+4930", "batch_sid": batch}),
    )
    .await;
    let unknown_answer = dispatch(
        &s,
        &b,
        json!({"agent_sid": b_agent, "recipient": "+4930", "batch_sid": unknown}),
    )
    .await;
    theirs.expect_error(422, "unknown_batch");
    assert_eq!(theirs.body, unknown_answer.body);
    for path in [
        "/v1/communication?batch=",
        "/v1/communication/-/statistics?batch=",
        "/v1/communication/-/report.html?batch=",
    ] {
        let theirs = get(&s, &b, &format!("{path}{batch}")).await;
        let unknown_answer = get(&s, &b, &format!("{path}{unknown}")).await;
        theirs.expect(200);
        assert_eq!(theirs.text, unknown_answer.text, "{path}");
    }
    let st = get(
        &s,
        &b,
        &format!("/v1/communication/-/statistics?batch={batch}"),
    )
    .await;
    assert_eq!(st.body["total"], 0);
}

/// The statistics limit is the service's (a setting, 200,000 by default): above it the
/// statistics and the report are 422 `too_many_communications` in the error envelope.
async fn too_many_communications(db: TestDb) {
    let s = TestServer::start_with(db, |settings| settings.statistics_max_communications = 2).await;
    assert_eq!(s.state.statistics.max_communications(), 2);
    let f = s.fixture().await;
    let agt = agent(&s, &f, "+4911", 1).await;
    let first = dispatch(&s, &f, json!({"agent_sid": agt, "recipient": "+4920"})).await;
    let batch = first.str("batch_sid");
    dispatch(
        &s,
        &f,
        json!({"agent_sid": agt, "recipient": "+4921", "batch_sid": batch}),
    )
    .await
    .expect(201);
    dispatch(&s, &f, json!({"agent_sid": agt, "recipient": "+4922"}))
        .await
        .expect(201);
    for path in [
        "/v1/communication/-/statistics",
        "/v1/communication/-/report.html",
    ] {
        let r = get(&s, &f, path).await;
        r.expect_error(422, "too_many_communications");
        assert_eq!(r.body["code"], "ERR006", "{}", r.text);
        assert_eq!(r.body["data"]["topic"], "validation");
        let m = r.body["message"].as_str().unwrap();
        assert!(
            m.starts_with("3 communications match; one request reads at most 2"),
            "{m}"
        );
        // A narrower set is read.
        get(&s, &f, &format!("{path}?batch={batch}"))
            .await
            .expect(200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_communications_sqlite() {
    too_many_communications(TestDb::Sqlite).await
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_communications_postgres() {
    too_many_communications(TestDb::Postgres).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_statistics_limit_is_200_000() {
    let s = TestServer::start(TestDb::Sqlite).await;
    assert_eq!(s.state.statistics.max_communications(), 200_000);
    assert_eq!(s.state.settings.statistics_max_communications, 200_000);
}

/// Writes an ended, answered call to `sid` with a saved history of `turns_ms` turn
/// latencies and `media`: (RTP packets lost of 100, jitter in ms).
async fn answered_with_history(
    s: &TestServer,
    account: &str,
    sid: &str,
    started: DateTime<Utc>,
    setup_ms: i64,
    turns_ms: &[u64],
    media: (i64, f64),
) {
    let (lost, jitter_ms) = media;
    let answered = started + Duration::milliseconds(setup_ms);
    let ended = answered + Duration::seconds(5);
    let history = CallHistory {
        communication_id: sid.into(),
        direction: Direction::Outbound,
        recipient: "+4920".into(),
        from_number: "+4911".into(),
        call_id: format!("{sid}@test"),
        answered_at: answered,
        ended_at: ended,
        duration_ms: 5000,
        end: callsmith_scenarios::history::EndReason::End {
            brick_id: "e".into(),
        },
        forced_end: None,
        hangup: None,
        goals: vec!["greeted".into()],
        variables: Default::default(),
        steps: 2,
        trace: vec![callsmith_scenarios::history::TraceEvent {
            at_ms: 5,
            event: callsmith_scenarios::history::Event::AnsweringMachine {
                brick_id: "s".into(),
                verdict: callsmith_scenarios::port::AmdVerdict::Human,
            },
        }],
        prompts: Vec::new(),
        turns: turns_ms
            .iter()
            .enumerate()
            .map(|(i, ms)| TurnLog {
                index: i + 1,
                ended_ms: 1000 * (i as u64 + 1),
                reply_first_rtp_ms: Some(1000 * (i as u64 + 1) + ms),
                turn_latency_us: Some(ms * 1000),
                ..Default::default()
            })
            .collect(),
        errors: Vec::new(),
        transfers: Vec::new(),
        media: Some(callsmith_media::SessionStats {
            packets_expected: 100,
            packets_received: (100 - lost) as u64,
            packets_lost: lost,
            jitter_ms,
            ..Default::default()
        }),
    };
    s.state
        .objects
        .put(
            &CallObjects::new(account, sid).history(),
            serde_json::to_vec(&history).unwrap().into(),
            Some("application/json"),
        )
        .await
        .unwrap();
    macro_rules! run {
        ($p:expr) => {
            sqlx::query(
                "UPDATE communications SET communication_status = 'completed', call_status = 'answered', sip_code = 200, \
                 started_at = $2, answered_at = $3, ended_at = $4, duration = 5, goals = '[\"greeted\"]', has_history = TRUE \
                 WHERE sid = $1",
            )
            .bind(sid)
            .bind(started)
            .bind(answered)
            .bind(ended)
            .execute($p)
            .await
            .unwrap()
            .rows_affected()
        };
    }
    let n = match s.store.pool() {
        Pool::Sqlite(p) => run!(p),
        Pool::Postgres(p) => run!(p),
    };
    assert_eq!(n, 1);
}

/// The JSON the page embeds as its figures.
fn embedded(page: &str) -> Value {
    let start = page
        .find(r#"<script type="application/json" id="statistics">"#)
        .expect("embedded statistics")
        + r#"<script type="application/json" id="statistics">"#.len();
    let end = start + page[start..].find("</script>").unwrap();
    serde_json::from_str(&page[start..end]).unwrap()
}

async fn the_report_shows_the_api_figures(s: TestServer) {
    let f = s.fixture().await;
    let agt = agent(&s, &f, "+4911", 3).await;
    let first = dispatch(&s, &f, json!({"agent_sid": agt, "recipient": "+4920"})).await;
    let batch = first.str("batch_sid");
    let mut calls = vec![first.str("id")];
    for r in ["+4921", "+4922"] {
        let c = dispatch(
            &s,
            &f,
            json!({"agent_sid": agt, "recipient": r, "batch_sid": batch}),
        )
        .await;
        calls.push(c.str("id"));
    }
    let t0: DateTime<Utc> = "2030-01-02T03:04:05Z".parse().unwrap();
    answered_with_history(
        &s,
        &f.account_sid,
        &calls[0],
        t0,
        300,
        &[420, 610],
        (0, 1.0),
    )
    .await;
    answered_with_history(
        &s,
        &f.account_sid,
        &calls[1],
        t0 + Duration::seconds(2),
        900,
        &[380],
        (3, 4.0),
    )
    .await;
    let q = format!("?batch={batch}");
    let api = get(&s, &f, &format!("/v1/communication/-/statistics{q}")).await;
    api.expect(200);
    let quality = &api.body["quality"];
    assert_eq!(quality["calls"], 2);
    assert_eq!(
        quality["turn_latency_ms"],
        json!({"count": 3, "p50": 420, "p95": 610, "p99": 610})
    );
    assert_eq!(quality["amd"], json!({"human": 2}));
    assert_eq!(api.body["goals"], json!({"greeted": 2}));
    let page = get(&s, &f, &format!("/v1/communication/-/report.html{q}")).await;
    page.expect(200);
    // The page's figures are the API's, and its table shows them.
    assert_eq!(embedded(&page.text), api.body);
    for row in [
        "<tr><th>answered</th><td>2</td></tr>".to_string(),
        "<tr><th>setup_time_ms</th><td>p50 300 ms, p95 900 ms, p99 900 ms (2 calls)</td></tr>"
            .to_string(),
        "<tr><th>turn latency, the engine's share (answer known → first reply RTP)</th><td>p50 420 ms, p95 610 ms, p99 610 ms (3 turns)</td></tr>"
            .to_string(),
        format!(
            "<tr><th>RTP loss</th><td>{:.3} % (3 of 200 packets, 2 calls)</td></tr>",
            quality["loss_percent"].as_f64().unwrap()
        ),
        format!(
            "<tr><th>jitter</th><td>p50 {} ms, p95 {} ms, p99 {} ms (2 calls)</td></tr>",
            quality["jitter_ms"]["p50"], quality["jitter_ms"]["p95"], quality["jitter_ms"]["p99"]
        ),
        "<tr><th>answering-machine verdicts</th><td>{&quot;human&quot;:2}</td></tr>".to_string(),
    ] {
        assert!(page.text.contains(&row), "{row}\n{}", page.text);
    }
    // Setup time and turn latency over time: one dot per answered call and per turn.
    let section = |from: &str, to: &str| {
        let a = page.text.find(from).unwrap_or_else(|| panic!("{from}"));
        let b = a + page.text[a..].find(to).unwrap();
        page.text[a..b].to_string()
    };
    assert_eq!(
        section("<h2>Setup time over time", "<h2>Turn latency")
            .matches("<circle")
            .count(),
        2
    );
    assert_eq!(
        section("<h2>Turn latency over time", "<h2>Outcomes")
            .matches("<circle")
            .count(),
        3
    );
    let outcomes = section("<h2>Outcomes", "</body>");
    for h in [
        "By communication status",
        "By call status",
        "By goal reached",
        "By answering-machine verdict",
    ] {
        assert!(outcomes.contains(h), "{h}");
    }
    assert!(outcomes.contains(">greeted</text>") && outcomes.contains(">answered</text>"));
    assert!(page.text.contains("(cpl dashed)") && page.text.contains("dashed: 3"));

    // The set spans two agents: no cpl line, and the page says why.
    let second = agent(&s, &f, "+4912", 7).await;
    dispatch(
        &s,
        &f,
        json!({"agent_sid": second, "recipient": "+4925", "batch_sid": batch}),
    )
    .await
    .expect(201);
    let page = get(&s, &f, &format!("/v1/communication/-/report.html{q}")).await;
    assert!(!page.text.contains("class=\"limit\""));
    assert!(
        page.text
            .contains("no cpl line: these calls were made by 2 agents"),
        "{}",
        page.text
    );
    // Scenario test calls have no agent, so no cpl limits them.
    let scenario = s.published_scenario(&f, &minimal_snapshot("test")).await;
    let test = dispatch(
        &s,
        &f,
        json!({"scenario_sid": scenario, "recipient": "+4926"}),
    )
    .await;
    test.expect(201);
    let page = get(
        &s,
        &f,
        &format!(
            "/v1/communication/-/report.html?batch={}",
            test.str("batch_sid")
        ),
    )
    .await;
    assert!(!page.text.contains("class=\"limit\""));
    assert!(page.text.contains("made through no agent"), "{}", page.text);
}

both_backends!(batches, the_report_shows_the_api_figures);
