//! Engines as peers on one PostgreSQL, with real processes:
//! - a node SIGKILLed during an answered call: a peer notices its heartbeat stop, sends the
//!   callee a BYE built from the dialog the node stored at the answer, and writes the
//!   final record (`interrupted`, `end_reason` `node_lost`); nothing is dialled twice.
//! - a dispatch wakes every node at once; a hang-up reaches the node running the call;
//! - the live view of a test call through the node that does not run it (relayed);
//! - a result delivery left claimed by a dead node is sent once by the peer, with its id.

use std::time::{Duration, Instant};

use callsmith_domain::communication::CommunicationStatus;
use callsmith_e2e::*;
use serde_json::{Value, json};

/// A fresh PostgreSQL database for one test.
async fn database() -> String {
    let admin = std::env::var("CALLSMITH_TEST_PG_ADMIN_URL").expect(
        "CALLSMITH_TEST_PG_ADMIN_URL is not set: run `eval \"$(bash scripts/test-deps.sh)\"`",
    );
    callsmith_domain::store::create_postgres_database(&admin, "cse2e_")
        .await
        .expect("a fresh database")
}

/// Waits until the call `id` is answered (in progress) and returns its row and the index
/// of the engine running it (`claimed_by` is its host:pid).
async fn answered_on(
    store: &callsmith_domain::Store,
    engines: &[Engine],
    id: &str,
) -> (callsmith_domain::store::CommunicationRecord, usize) {
    let row = eventually(Duration::from_secs(30), || async {
        let r = store.communication_get(id).await.ok()??;
        (r.communication_status == CommunicationStatus::InProgress).then_some(r)
    })
    .await
    .unwrap_or_else(|| {
        let logs: Vec<String> = engines.iter().map(Engine::log).collect();
        panic!("the call was never answered\n{}", logs.join("\n=====\n"))
    });
    let by = row.claimed_by.clone().expect("claimed");
    let owner = engines
        .iter()
        .position(|e| by.ends_with(&format!(":{}", e.pid().expect("running"))))
        .unwrap_or_else(|| panic!("no engine is {by}"));
    (row, owner)
}

/// Heartbeat and node timeout as shipped (`dialer.heartbeat_interval_ms` 1000,
/// `dialer.node_timeout_ms` 3000): the SIGKILL to the BYE at the callee takes the node
/// timeout plus up to one heartbeat, plus the BYE's transaction; the bound leaves room for
/// a loaded CI machine.
const BYE_WITHIN: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_nodes_answered_call_is_ended_by_a_peer_within_seconds() {
    let db = database().await;
    // Answers one call and waits for its BYE: it exits with success once it answered it.
    // (SIPp sends its 200 to where the INVITE came from, the dead node, not to the BYE's
    // Via: the peer writes the end once the BYE is sent, not waiting for the answer.)
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1"]);
    let parts = rtp_ranges(2);
    let opts = |ports| EngineOptions {
        database_url: Some(db.clone()),
        trunks: vec![("carrier".into(), callee.addr)],
        rtp_ports: Some(ports),
        // No other end comes first: the peer's BYE, not the media timeout.
        media_toml: "rtp_timeout_ms = 60000\n".into(),
        ..Default::default()
    };
    let mut engines = [
        Engine::start(opts(parts[0])).await,
        Engine::start(opts(parts[1])).await,
    ];
    let t = provision(&engines[0], "takeover", "carrier", "+4930100850").await;
    let store = store_of(&engines[0], Some(&db)).await;
    let long =
        "This call goes on and on, so that it is still going when its engine dies. ".repeat(8);
    let scn = create_scenario(&store, &t, &greeting_scenario(&long), true).await;
    let agent = create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;
    let id = engines[1]
        .dispatch(&t, json!({"recipient": "+15550901", "agent_sid": agent}))
        .await["id"]
        .as_str()
        .expect("id")
        .to_string();
    let (_, owner) = answered_on(&store, &engines, &id).await;
    // The node running the call dies; the other is the peer.
    // The call is up a while before the node dies.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed = Instant::now();
    engines[owner].kill().await;
    let peer = &engines[1 - owner];
    assert!(
        callee.success(BYE_WITHIN).await,
        "no BYE within {BYE_WITHIN:?} of the SIGKILL\n{}\npeer:\n{}",
        callee.dump(),
        peer.log()
    );
    let to_bye = killed.elapsed();
    eprintln!("SIGKILL to the BYE answered at the callee: {to_bye:?}");
    let messages = callee.messages();
    assert!(
        messages.contains("the node running the call stopped"),
        "the BYE says why: {messages}"
    );

    let r = peer
        .wait_communication(&t.account, &id, Duration::from_secs(20))
        .await;
    assert_eq!(r["communication_status"], "interrupted", "{r}");
    assert_eq!(r["end_reason"], "node_lost", "{r}");
    assert_eq!(r["call_status"], "answered", "{r}");
    assert!(
        r["error"]
            .as_str()
            .is_some_and(|e| e.contains("ended the call with a BYE")),
        "{r}"
    );
    // Dialled once: one INVITE, one attempt.
    assert_eq!(callee.invites().len(), 1, "{:?}", callee.invites());
    let attempts = attempts_of(peer, &t, &id).await;
    assert_eq!(attempts["total"], 1, "{attempts}");
}

/// On PostgreSQL a dispatch wakes every engine's dialer (LISTEN/NOTIFY): with polls 30 s
/// apart, a communication dispatched through either node is dialled within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_is_dialled_without_waiting_for_a_poll() {
    let db = database().await;
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "2"]);
    let parts = rtp_ranges(2);
    let opts = |ports| EngineOptions {
        database_url: Some(db.clone()),
        trunks: vec![("carrier".into(), callee.addr)],
        rtp_ports: Some(ports),
        dialer_toml: "poll_interval_ms = 30000\n".into(),
        ..Default::default()
    };
    let a = Engine::start(opts(parts[0])).await;
    let b = Engine::start(opts(parts[1])).await;
    let t = provision(&a, "notify", "carrier", "+4930100860").await;
    let store = store_of(&a, Some(&db)).await;
    let scn = create_scenario(&store, &t, &greeting_scenario("Hello there."), true).await;
    let agent = create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;
    for (i, e) in [&b, &a].into_iter().enumerate() {
        let id = e
            .dispatch(
                &t,
                json!({"recipient": format!("+1555090{i}"), "agent_sid": agent}),
            )
            .await["id"]
            .as_str()
            .expect("id")
            .to_string();
        let row = eventually(Duration::from_secs(10), || async {
            let r = store.communication_get(&id).await.ok()??;
            r.started_at.is_some().then_some(r)
        })
        .await
        .unwrap_or_else(|| panic!("{id} was not dialled\nA:\n{}\nB:\n{}", a.log(), b.log()));
        let waited = row.started_at.expect("started") - row.created_at;
        eprintln!("dispatch {i} to its INVITE: {waited}");
        assert!(
            waited < chrono::Duration::seconds(2),
            "{id} waited {waited} for its dial: no wake-up, the poll found it"
        );
        let r = e
            .wait_communication(&t.account, &id, Duration::from_secs(30))
            .await;
        assert_eq!(r["communication_status"], "completed", "{r}");
    }
    assert!(
        callee.success(Duration::from_secs(10)).await,
        "{}",
        callee.dump()
    );
    assert_eq!(callee.invites().len(), 2, "each dialled once");
}

/// A hang-up sent to the node that does not run the call ends it within about a
/// heartbeat: the row carries the request to the node holding the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hangup_sent_to_another_node_ends_the_call() {
    let db = database().await;
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1"]);
    let parts = rtp_ranges(2);
    let opts = |ports| EngineOptions {
        database_url: Some(db.clone()),
        trunks: vec![("carrier".into(), callee.addr)],
        rtp_ports: Some(ports),
        media_toml: "rtp_timeout_ms = 60000\n".into(),
        ..Default::default()
    };
    let engines = [
        Engine::start(opts(parts[0])).await,
        Engine::start(opts(parts[1])).await,
    ];
    let t = provision(&engines[0], "hangup", "carrier", "+4930100870").await;
    let store = store_of(&engines[0], Some(&db)).await;
    let long = "This call goes on until somebody hangs it up. ".repeat(12);
    let scn = create_scenario(&store, &t, &greeting_scenario(&long), true).await;
    let agent = create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;
    let id = engines[0]
        .dispatch(&t, json!({"recipient": "+15550911", "agent_sid": agent}))
        .await["id"]
        .as_str()
        .expect("id")
        .to_string();
    let (_, owner) = answered_on(&store, &engines, &id).await;
    let other = &engines[1 - owner];
    let asked = Instant::now();
    let (status, body) = other
        .post(
            &format!("/v1/communication/{id}/hangup"),
            Some(&t.account),
            json!({}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert!(
        callee.success(Duration::from_secs(5)).await,
        "no BYE after the hang-up\n{}",
        callee.dump()
    );
    let to_bye = asked.elapsed();
    eprintln!("hang-up on the other node to the BYE at the callee: {to_bye:?}");
    let r = other
        .wait_communication(&t.account, &id, Duration::from_secs(10))
        .await;
    assert_eq!(r["communication_status"], "completed", "{r}");
    assert_eq!(r["end_reason"], "hangup_requested", "{r}");
}

/// Server-Sent Events of `GET /v1/communication/{id}/live` on `e`, read to their end:
/// (event, data) in order; panics when the stream does not end within `within`.
async fn live_events(
    e: &Engine,
    account: &str,
    id: &str,
    within: Duration,
) -> Vec<(String, Value)> {
    live_events_at(e.client.clone(), e.base_url.clone(), account, id, within).await
}

/// [`live_events`] from the API at `base_url`.
async fn live_events_at(
    client: reqwest::Client,
    base_url: String,
    account: &str,
    id: &str,
    within: Duration,
) -> Vec<(String, Value)> {
    let mut resp = client
        .get(format!("{base_url}/v1/communication/{id}/live"))
        .bearer_auth(SU_TOKEN)
        .header("X-Account-Sid", account)
        .send()
        .await
        .expect("live");
    assert_eq!(resp.status().as_u16(), 200, "{:?}", resp.text().await);
    let deadline = Instant::now() + within;
    let (mut buf, mut out) = (String::new(), Vec::new());
    loop {
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let (mut name, mut data) = (String::new(), String::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            if !name.is_empty() {
                out.push((name, serde_json::from_str(&data).expect("event json")));
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, resp.chunk()).await {
            Ok(Ok(Some(chunk))) => buf.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(_) => return out,
            Err(_) => panic!("the live stream did not end within {within:?}: {out:?}"),
        }
    }
}

/// The live view of a test call through the node that does not run it: the same events,
/// in the same order, as the node running it streams (the replay of what came before the
/// subscription included), and `ended`, after which the stream closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_of_a_call_is_served_by_the_node_that_does_not_run_it() {
    let db = database().await;
    let mut callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1"]);
    let parts = rtp_ranges(2);
    let opts = |ports| EngineOptions {
        database_url: Some(db.clone()),
        trunks: vec![("carrier".into(), callee.addr)],
        rtp_ports: Some(ports),
        ..Default::default()
    };
    let engines = [
        Engine::start(opts(parts[0])).await,
        Engine::start(opts(parts[1])).await,
    ];
    let t = provision(&engines[0], "live", "carrier", "+4930100890").await;
    let store = store_of(&engines[0], Some(&db)).await;
    let text = "This test call speaks for a few seconds, watched from both nodes. ".repeat(3);
    let scn = create_scenario(&store, &t, &greeting_scenario(&text), true).await;
    // A scenario test dispatch: a test call, with a live feed on the node that dials it.
    let id = engines[0]
        .dispatch(&t, json!({"recipient": "+15550921", "scenario_sid": scn}))
        .await["id"]
        .as_str()
        .expect("id")
        .to_string();
    let (row, owner) = answered_on(&store, &engines, &id).await;
    assert!(row.is_test);
    let (own, other) = (&engines[owner], &engines[1 - owner]);
    let within = Duration::from_secs(60);
    let (relayed, direct) = tokio::join!(
        live_events(other, &t.account, &id, within),
        live_events(own, &t.account, &id, within)
    );
    let names: Vec<&str> = relayed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names.first(),
        Some(&"brick"),
        "the replay comes first: {names:?}"
    );
    assert!(names.contains(&"prompt"), "{names:?}");
    assert_eq!(names.last(), Some(&"ended"), "{names:?}");
    assert_eq!(
        relayed
            .last()
            .map(|(_, d)| d["communication_status"].clone()),
        Some(json!("completed")),
        "{relayed:?}"
    );
    assert_eq!(relayed, direct, "the relayed stream is the owner's own");
    assert!(
        callee.success(Duration::from_secs(10)).await,
        "{}",
        callee.dump()
    );
}

/// A result delivery that a node claimed, POSTed and died before recording is sent again
/// by the peer that takes the node over, once, under the same `delivery_id` (body and
/// `Idempotency-Key`); a delivery the dead node recorded as delivered is never sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_nodes_claimed_delivery_is_sent_once_by_the_peer_with_its_id() {
    use callsmith_domain::store::communications::{CallFinish, CallWrite, Claim, Deliveries};
    use callsmith_domain::store::results::{AttemptOutcome, DeliveryStatus};
    use callsmith_domain::usecases::{Direction, Parties, ScenarioRun, new_communication};

    let db = database().await;
    let sink = Sink::start(0).await;
    let parts = rtp_ranges(2);
    let opts = |ports| EngineOptions {
        database_url: Some(db.clone()),
        trunks: idle_trunk("carrier"),
        rtp_ports: Some(ports),
        ..Default::default()
    };
    // A first node provisions the tenancy, then stops; the rows below are what a node that
    // died while delivering leaves.
    let mut first = Engine::start(opts(parts[0])).await;
    let t = provision(&first, "deliver", "carrier", "+4930100895").await;
    let store = store_of(&first, Some(&db)).await;
    let scn = create_scenario(&store, &t, &greeting_scenario("Hi."), true).await;
    first.kill().await;

    let dead = Claim {
        token: "clm_dead".into(),
        by: "dead-host:1".into(),
        until: chrono::Utc::now() + chrono::Duration::seconds(600),
    };
    let mut sids = Vec::new();
    for recipient in ["+15550931", "+15550932"] {
        let new = new_communication(
            Parties {
                tenant_sid: t.tenant.clone(),
                account_sid: t.account.clone(),
                recipient: recipient.into(),
                from_number: t.number.clone(),
                trunk: None,
                timezone: "UTC".into(),
            },
            ScenarioRun {
                scenario_sid: scn.clone(),
                version: Some(1),
                draft_version: None,
            },
            Direction::Inbound,
        );
        let now = chrono::Utc::now();
        let finish = CallWrite::Finish {
            sid: new.sid.clone(),
            token: dead.token.clone(),
            finish: Box::new(CallFinish::new(CommunicationStatus::Completed)),
            deliveries: Some(Box::new(Deliveries {
                tenant_sid: t.tenant.clone(),
                account_sid: t.account.clone(),
                agent_sid: "agt_gone".into(),
                urls: vec![sink.url.clone()],
            })),
            at: now,
        };
        sids.push(new.sid.clone());
        let create = CallWrite::CreateClaimed {
            new: Box::new(new),
            claim: dead.clone(),
            at: now,
        };
        store
            .communications_apply(&[create, finish])
            .await
            .expect("stored");
    }
    let claimed = store
        .result_delivery_claim_due(
            &dead.token,
            chrono::Utc::now() + chrono::Duration::seconds(60),
            10,
        )
        .await
        .expect("claimed");
    assert_eq!(claimed.len(), 2);
    let done = claimed
        .iter()
        .find(|d| d.communication_sid == sids[0])
        .expect("the first call's delivery");
    let pending = claimed
        .iter()
        .find(|d| d.communication_sid == sids[1])
        .expect("the second call's delivery");
    // The dead node recorded the first; it POSTed the second and died before recording it.
    assert!(
        store
            .result_delivery_record(
                &done.sid,
                &dead.token,
                &AttemptOutcome::Delivered { status_code: 200 }
            )
            .await
            .unwrap()
    );
    store
        .node_heartbeat(
            &dead.token,
            &dead.by,
            None,
            chrono::Utc::now() - chrono::Duration::seconds(60),
        )
        .await
        .unwrap();

    // The peer starts, takes the dead node over and sends what it left.
    let peer = Engine::start(opts(parts[1])).await;
    let got = sink.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 1, "{got:?}\n{}", peer.log());
    // Time for a second POST, if one were coming.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let requests = sink.requests();
    assert_eq!(requests.len(), 1, "sent once: {requests:?}");
    let r = &requests[0];
    assert_eq!(r.json()["delivery_id"], pending.sid.as_str());
    assert_eq!(r.json()["communication"]["id"], sids[1].as_str());
    assert_eq!(r.header("idempotency-key"), Some(pending.sid.as_str()));
    let rows = store
        .result_delivery_list(&t.account, None, 10, 0)
        .await
        .unwrap()
        .0;
    assert_eq!(rows.len(), 2, "one delivery per call and target");
    for row in rows {
        assert_eq!(row.status, DeliveryStatus::Delivered, "{row:?}");
        assert_eq!(row.attempts, 1, "{row:?}");
    }
}

/// The node running a test call is SIGKILLed while a viewer watches the call through its
/// peer: the relayed stream does not hang; it ends with `ended` once the peer has ended the
/// call (`interrupted`, `node_lost`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_live_view_ends_when_the_node_running_the_call_dies() {
    let db = database().await;
    let callee = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "1"]);
    let parts = rtp_ranges(2);
    let opts = |ports| EngineOptions {
        database_url: Some(db.clone()),
        trunks: vec![("carrier".into(), callee.addr)],
        rtp_ports: Some(ports),
        media_toml: "rtp_timeout_ms = 60000\n".into(),
        ..Default::default()
    };
    let mut engines = [
        Engine::start(opts(parts[0])).await,
        Engine::start(opts(parts[1])).await,
    ];
    let t = provision(&engines[0], "livekill", "carrier", "+4930100896").await;
    let store = store_of(&engines[0], Some(&db)).await;
    let long = "This test call goes on until its engine dies. ".repeat(12);
    let scn = create_scenario(&store, &t, &greeting_scenario(&long), true).await;
    let id = engines[0]
        .dispatch(&t, json!({"recipient": "+15550941", "scenario_sid": scn}))
        .await["id"]
        .as_str()
        .expect("id")
        .to_string();
    let (_, owner) = answered_on(&store, &engines, &id).await;
    let viewer = 1 - owner;
    let watch = {
        let (base, client, account, id) = (
            engines[viewer].base_url.clone(),
            engines[viewer].client.clone(),
            t.account.clone(),
            id.clone(),
        );
        tokio::spawn(async move {
            live_events_at(client, base, &account, &id, Duration::from_secs(30)).await
        })
    };
    tokio::time::sleep(Duration::from_millis(800)).await;
    let killed = Instant::now();
    engines[owner].kill().await;
    let events = watch.await.expect("the viewer's stream");
    eprintln!(
        "SIGKILL to the relayed stream's end: {:?}",
        killed.elapsed()
    );
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"brick"), "{names:?}");
    let (last, data) = events.last().expect("events");
    assert_eq!(last, "ended", "{names:?}\n{}", engines[viewer].log());
    assert_eq!(data["communication_status"], "interrupted", "{data}");
    assert_eq!(data["end_reason"], "node_lost", "{data}");
}
