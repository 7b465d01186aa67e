//! A communication strategy's redials against the real binary and real SIPp callees, beyond
//! a busy line and a decline (tests/strategy_retry.rs): a callee that rings out is dialled
//! again by the `no_answer` rule; an answering machine (a generated greeting ending in a
//! beep, played by the test's RTP peer) is dialled again by the `voicemail` rule, the
//! detector's verdict on each attempt; and a SIGKILL between two attempts loses no attempt
//! and dials none twice, on SQLite and on PostgreSQL. Each test ends with the one result
//! delivery, after the last attempt, carrying every attempt.

use std::time::Duration;

use callsmith_e2e::*;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

fn ts(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("a time: {v}")))
        .unwrap_or_else(|e| panic!("{v}: {e}"))
        .with_timezone(&Utc)
}

/// The one result delivery of communication `id`: waits for it, then watches a second more
/// that no other arrives; asserts it carries `attempts` attempts and returns it.
async fn one_delivery(sink: &Sink, id: &str, attempts: usize) -> Value {
    let first = sink.wait_for(1, Duration::from_secs(30)).await;
    assert!(!first.is_empty(), "no result delivery");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let bodies = sink.bodies();
    assert_eq!(bodies.len(), 1, "one delivery: {bodies:?}");
    let b = bodies[0].clone();
    assert_eq!(b["communication"]["id"], id, "{b}");
    let carried = b["attempts"].as_array().expect("attempts");
    assert_eq!(carried.len(), attempts, "{b}");
    b
}

/// Waits until communication `id` stored its first attempt and waits (`queued`, due later)
/// for its retry; returns the communication.
async fn wait_retry_queued(e: &Engine, t: &Tenancy, id: &str) -> Value {
    eventually(Duration::from_secs(30), || async {
        if attempts_of(e, t, id).await["total"] != 1 {
            return None;
        }
        let (_, c) = e
            .get(&format!("/v1/communication/{id}"), Some(&t.account))
            .await;
        (c["communication_status"] == "queued").then_some(c)
    })
    .await
    .unwrap_or_else(|| panic!("no first attempt queued for a retry\n{}", e.log()))
}

/// A callee that rings until the dialer's ring timeout (2 s, `[sip] ring_timeout_secs`)
/// gives up is `no_answer`; the strategy's `no_answer` rule dials it again after its delay,
/// and the second dial is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recipient_who_does_not_answer_is_redialled() {
    let sink = Sink::start(0).await;
    let mut rings = Sipp::spawn("uas_ring_forever.xml", None, None, &["-m", "1"]);
    let addr = rings.addr;
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), addr)],
        sip_toml: "ring_timeout_secs = 2\n".into(),
        ..Default::default()
    })
    .await;
    let t = provision(&e, "ringout", "carrier", "+4930101100").await;
    let id = dispatch_with_strategy(
        &e,
        &t,
        None,
        &greeting_scenario("Hi."),
        |a| AgentSpec {
            targets: vec![sink.url.clone()],
            ..a
        },
        json!({"retry": {"no_answer": {"attempts": 1, "delay_s": 3}}}),
        "+15550220",
    )
    .await;
    assert!(
        rings.success(Duration::from_secs(30)).await,
        "the ringing callee got its CANCEL: {}\n{}",
        rings.dump(),
        e.log()
    );
    let mut answers = Sipp::spawn("dialer_uas_echo.xml", Some(addr.port()), None, &["-m", "1"]);
    let list = answered_at_the_second_attempt(&e, &t, &id, &mut answers).await;
    let (first, second) = (&list["items"][0], &list["items"][1]);
    assert_eq!(
        (first["n"].as_u64(), second["n"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(first["call_status"], "no_answer", "{list}");
    assert_eq!(first["outcome"], "no_answer", "{list}");
    assert_eq!(second["call_status"], "answered", "{list}");
    assert_eq!(second["outcome"], "completed", "{list}");
    // The first dial rang for the ring timeout; the second waited for the rule's delay.
    let rang = ts(&first["ended_at"]) - ts(&first["started_at"]);
    assert!(rang >= chrono::Duration::milliseconds(1900), "rang {rang}");
    let waited = ts(&second["started_at"]) - ts(&first["ended_at"]);
    assert!(waited >= chrono::Duration::seconds(3), "waited {waited}");
    assert_eq!(rings.invites().len(), 1, "{:?}", rings.invites());
    assert_eq!(answers.invites().len(), 1, "{:?}", answers.invites());
    let b = one_delivery(&sink, &id, 2).await;
    assert_eq!(b["attempts"][0]["outcome"], "no_answer", "{b}");
    assert_eq!(b["attempts"][1]["outcome"], "completed", "{b}");
}

/// An answering machine (a generated greeting ending in a beep) is `voicemail` on an agent
/// with `voicemail_enabled`: the attempt records the detector's `machine`, the strategy's
/// `voicemail` rule dials again, and a person answers the second dial (`human`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answering_machine_is_redialled_by_the_voicemail_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let greeting = ulaw_greeting_with_beep(
        dir.path(),
        "greeting.ul",
        "Hello, you have reached the voicemail of John Smith. Please leave a message after the tone.",
        500,
    );
    let hello = ulaw_speech(dir.path(), "hello.ul", "Hello?", 300);
    let sink = Sink::start(0).await;
    let machine = RtpPeer::start(vec![RtpStep::Audio(
        std::fs::read(&greeting).expect("greeting"),
    )])
    .await;
    let machine_port = machine.port.to_string();
    let mut first = Sipp::spawn(
        "dialer_uas_rtp_peer.xml",
        None,
        None,
        &["-m", "1", "-key", "rtpport", &machine_port],
    );
    let addr = first.addr;
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), addr)],
        ..Default::default()
    })
    .await;
    let t = provision(&e, "machine", "carrier", "+4930101200").await;
    let id = dispatch_with_strategy(
        &e,
        &t,
        None,
        &voicemail_scenario(),
        |a| AgentSpec {
            targets: vec![sink.url.clone()],
            voicemail_enabled: true,
            ..a
        },
        json!({"retry": {"voicemail": {"attempts": 1, "delay_s": 3}}}),
        "+15550230",
    )
    .await;
    assert!(
        first.success(Duration::from_secs(60)).await,
        "{}\n{}",
        first.dump(),
        e.log()
    );
    assert!(machine.voiced().0 > 20, "the machine recorded the message");
    // The second dial: a person says "Hello?".
    let person = RtpPeer::start(vec![RtpStep::Audio(std::fs::read(&hello).expect("hello"))]).await;
    let person_port = person.port.to_string();
    let mut second = Sipp::spawn(
        "dialer_uas_rtp_peer.xml",
        Some(addr.port()),
        None,
        &["-m", "1", "-key", "rtpport", &person_port],
    );
    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(60))
        .await;
    assert_eq!(
        done["communication_status"],
        "completed",
        "{done}\n{}",
        e.log()
    );
    assert!(
        second.success(Duration::from_secs(20)).await,
        "{}",
        second.dump()
    );
    let list = attempts_of(&e, &t, &id).await;
    assert_eq!(list["total"], 2, "{list}");
    let (one, two) = (&list["items"][0], &list["items"][1]);
    assert_eq!(one["call_status"], "answered", "{list}");
    assert_eq!(one["amd"], "machine", "{list}");
    assert_eq!(one["outcome"], "voicemail", "{list}");
    assert_eq!(two["amd"], "human", "{list}");
    assert_eq!(two["outcome"], "completed", "{list}");
    let waited = ts(&two["started_at"]) - ts(&one["ended_at"]);
    assert!(waited >= chrono::Duration::seconds(3), "waited {waited}");
    // The communication shows its last attempt: the person's conversation.
    assert_eq!(done["goals"], json!(["human"]), "{done}");
    let b = one_delivery(&sink, &id, 2).await;
    assert_eq!(b["attempts"][0]["amd"], "machine", "{b}");
    assert_eq!(b["attempts"][0]["outcome"], "voicemail", "{b}");
    assert_eq!(b["attempts"][1]["outcome"], "completed", "{b}");
}

/// SIGKILL after the first attempt (busy) is stored and before its retry is due; a new
/// process on the same database dials the retry exactly once, at its time: two attempts,
/// none lost, none twice, one delivery.
async fn sigkill_between_attempts(database_url: Option<String>) {
    let sink = Sink::start(0).await;
    let mut busy = Sipp::spawn("uas_reject_486.xml", None, None, &["-m", "1"]);
    let addr = busy.addr;
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = EngineOptions {
        database_url: database_url.clone(),
        data_dir: Some(dir.path().to_path_buf()),
        trunks: vec![("carrier".into(), addr)],
        // The reconcile runs often: it must leave a row waiting for its retry alone.
        dialer_toml: "lease_secs = 2\nreconcile_interval_secs = 1\n".into(),
        ..Default::default()
    };
    let mut e = Engine::start(opts.clone()).await;
    let t = provision(&e, "crash", "carrier", "+4930101300").await;
    let id = dispatch_with_strategy(
        &e,
        &t,
        database_url.as_deref(),
        &greeting_scenario("Hi."),
        |a| AgentSpec {
            targets: vec![sink.url.clone()],
            ..a
        },
        json!({"retry": {"busy": {"attempts": 1, "delay_s": 6}}}),
        "+15550240",
    )
    .await;
    let queued = wait_retry_queued(&e, &t, &id).await;
    let due = ts(&queued["due_at"]);
    let killed_at = Utc::now();
    e.kill().await;
    assert!(
        due > killed_at,
        "killed before the retry was due ({due}, killed {killed_at})"
    );
    assert!(
        busy.success(Duration::from_secs(10)).await,
        "{}",
        busy.dump()
    );
    let mut answers = Sipp::spawn("dialer_uas_echo.xml", Some(addr.port()), None, &["-m", "1"]);

    let e = Engine::start(opts).await;
    let list = answered_at_the_second_attempt(&e, &t, &id, &mut answers).await;
    let (first, second) = (&list["items"][0], &list["items"][1]);
    assert_eq!(
        (first["n"].as_u64(), second["n"].as_u64()),
        (Some(1), Some(2)),
        "{list}"
    );
    assert_eq!(first["outcome"], "busy", "{list}");
    assert_eq!(first["sip_code"], 486, "{list}");
    assert!(ts(&first["ended_at"]) <= killed_at, "{list}");
    assert_eq!(second["outcome"], "completed", "{list}");
    // The new process dialled the retry at its time, not earlier.
    assert!(
        ts(&second["started_at"]) >= due - chrono::Duration::seconds(1),
        "{list}"
    );
    assert_eq!(busy.invites().len(), 1, "{:?}", busy.invites());
    assert_eq!(answers.invites().len(), 1, "{:?}", answers.invites());
    let b = one_delivery(&sink, &id, 2).await;
    assert_eq!(b["attempts"][0]["outcome"], "busy", "{b}");
    assert_eq!(b["attempts"][1]["outcome"], "completed", "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_attempts_loses_none_and_dials_none_twice() {
    sigkill_between_attempts(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_attempts_loses_none_and_dials_none_twice_postgres() {
    let admin = std::env::var("CALLSMITH_TEST_PG_ADMIN_URL").expect(
        "CALLSMITH_TEST_PG_ADMIN_URL is not set: run `eval \"$(bash scripts/test-deps.sh)\"`",
    );
    let db = callsmith_domain::store::create_postgres_database(&admin, "cse2e_")
        .await
        .expect("a fresh database");
    sigkill_between_attempts(Some(db)).await;
}
