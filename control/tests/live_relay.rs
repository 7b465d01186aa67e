//! The live view of a test call from any node (PostgreSQL): a node asked for the feed of a
//! call its peer runs relays the peer's own stream (the replay, the events in order, the
//! end), ends it with `ended` from the row when the peer stops mid-call and a takeover
//! writes the end, and answers 503 `live_node_unreachable` at once (no hang) when the peer
//! is unknown, publishes no address, refuses the connection or never answers. On SQLite
//! (one process per file) nothing is relayed: 409 `not_live` as ever.

use std::time::{Duration, Instant};

use callsmith_control::{
    live_relay,
    testing::{Fixture, TestDb, TestServer, minimal_snapshot},
};
use callsmith_domain::{
    communication::CommunicationStatus,
    store::communications::{CallFinish, CallWrite, Claim, ClaimScope},
};
use chrono::Utc;
use serde_json::{Value, json};

/// A test call of `f`'s account, claimed by node `token` (`dialing`); returns its sid.
async fn claimed_test_call(s: &TestServer, f: &Fixture, token: &str) -> String {
    let scn = s.published_scenario(f, &minimal_snapshot("t")).await;
    s.post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": format!("+49{}", rand_digits())}))
        .send()
        .await
        .expect(201);
    let r = s
        .post("/v1/communication/-/dispatch")
        .bearer(&f.account_key)
        .json(&json!({"recipient": "+15550001", "scenario_sid": scn}))
        .send()
        .await;
    r.expect(201);
    let id = r.str("id");
    let claim = Claim {
        token: token.into(),
        by: format!("{token}-host:1"),
        until: Utc::now() + chrono::Duration::seconds(600),
    };
    let rows = s
        .store
        .communication_claim_due(&claim, &ClaimScope::TestCalls, 10)
        .await
        .unwrap();
    assert!(rows.iter().any(|r| r.sid == id && r.is_test), "{rows:?}");
    id
}

fn rand_digits() -> String {
    format!("{:08}", uuid::Uuid::new_v4().as_u128() % 100_000_000)
}

/// A `text/event-stream` read event by event.
struct Stream {
    resp: reqwest::Response,
    parser: live_relay::SseParser,
    ready: std::collections::VecDeque<live_relay::RelayedEvent>,
}

impl Stream {
    async fn open(s: &TestServer, key: &str, id: &str) -> Stream {
        let resp = s
            .client
            .get(format!("{}/v1/communication/{id}/live", s.base_url))
            .bearer_auth(key)
            .send()
            .await
            .expect("live");
        assert_eq!(resp.status(), 200, "{:?}", resp.text().await);
        Stream {
            resp,
            parser: Default::default(),
            ready: Default::default(),
        }
    }

    /// The next event (name, data), None when the stream closed; panics after 15 s.
    async fn next(&mut self) -> Option<(String, Value)> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some((e.name, serde_json::from_str(&e.data).expect("json data")));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.resp.chunk())
                .await
                .expect("an event or the end within 15 s")
                .ok()??;
            self.ready.extend(self.parser.push(&chunk));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_relays_the_feed_with_its_replay_and_its_end() {
    let owner = TestServer::start(TestDb::Postgres).await;
    let viewer = owner.peer().await;
    let f = owner.fixture().await;
    let id = claimed_test_call(&owner, &f, "owner").await;
    owner
        .store
        .node_heartbeat("owner", "owner-host:1", Some(&owner.base_url), Utc::now())
        .await
        .unwrap();
    // Without the feed on the owner: the owner's own refusal, relayed in its envelope.
    let r = viewer
        .get(&format!("/v1/communication/{id}/live"))
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect_error(409, "not_live");

    let feed = owner.state.live_feeds.open(&id);
    feed.publish("brick", json!({"brick_id": "s", "kind": "start_call"}));
    // The viewer's node runs nothing: it relays, with the replay first.
    let mut sse = Stream::open(&viewer, &f.account_key, &id).await;
    let (name, data) = sse.next().await.expect("the replay");
    assert_eq!((name.as_str(), &data["brick_id"]), ("brick", &json!("s")));
    feed.publish("variable", json!({"name": "x", "old": null, "new": 1}));
    feed.publish("transcript", json!({"text": "yes", "final": true}));
    let (name, data) = sse.next().await.expect("variable");
    assert_eq!((name.as_str(), &data["name"]), ("variable", &json!("x")));
    let (name, data) = sse.next().await.expect("transcript");
    assert_eq!(
        (name.as_str(), &data["text"]),
        ("transcript", &json!("yes"))
    );
    feed.end(json!({"communication_status": "completed", "duration": 3}));
    let (name, data) = sse.next().await.expect("ended");
    assert_eq!(name, "ended");
    assert_eq!(data["duration"], 3, "the owner's own end: {data}");
    assert!(
        sse.next().await.is_none(),
        "the stream closes after `ended`"
    );

    // A request relayed already is never relayed again.
    let r = viewer
        .get(&format!("/v1/communication/{id}/live"))
        .bearer(&f.account_key)
        .header(live_relay::RELAYED, "1")
        .send()
        .await;
    r.expect_error(409, "not_live");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_that_stops_mid_stream_ends_the_relay_with_the_takeovers_end() {
    let owner = TestServer::start(TestDb::Postgres).await;
    let viewer = owner.peer().await;
    let f = owner.fixture().await;
    let id = claimed_test_call(&owner, &f, "owner").await;
    owner
        .store
        .node_heartbeat("owner", "owner-host:1", Some(&owner.base_url), Utc::now())
        .await
        .unwrap();
    let feed = owner.state.live_feeds.open(&id);
    feed.publish("brick", json!({"brick_id": "s"}));
    let mut sse = Stream::open(&viewer, &f.account_key, &id).await;
    assert_eq!(sse.next().await.expect("brick").0, "brick");
    // The owner stops: its stream breaks off without `ended`, its server goes away.
    drop(feed);
    drop(owner);
    tokio::time::sleep(Duration::from_millis(700)).await;
    // A peer takes the node over and writes the call's end.
    let mut end = CallFinish::new(CommunicationStatus::Interrupted);
    end.end_reason = Some("node_lost".into());
    let written = Instant::now();
    assert!(
        viewer
            .store
            .communication_apply(CallWrite::Finish {
                sid: id.clone(),
                token: "owner".into(),
                finish: Box::new(end),
                deliveries: None,
                at: Utc::now(),
            })
            .await
            .unwrap()
    );
    let (name, data) = sse.next().await.expect("ended from the row");
    assert_eq!(name, "ended");
    assert_eq!(data["communication_status"], "interrupted", "{data}");
    assert_eq!(data["end_reason"], "node_lost", "{data}");
    assert!(
        written.elapsed() < Duration::from_secs(3),
        "`ended` {:?} after the end was written",
        written.elapsed()
    );
    assert!(
        sse.next().await.is_none(),
        "the stream closes after `ended`"
    );
}

/// The 503 `live_node_unreachable` of `id` on `s`, and how long it took.
async fn unreachable(s: &TestServer, f: &Fixture, id: &str) -> (String, Duration) {
    let t = Instant::now();
    let r = s
        .get(&format!("/v1/communication/{id}/live"))
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect_error(503, live_relay::UNREACHABLE);
    (r.str("message"), t.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_that_cannot_be_relayed_from_is_a_clear_503_not_a_hang() {
    let s = TestServer::start(TestDb::Postgres).await;
    let f = s.fixture().await;
    let now = Utc::now();

    // Unknown: no heartbeat row holds the claim (the node left, or was taken over).
    let id = claimed_test_call(&s, &f, "gone").await;
    let (why, _) = unreachable(&s, &f, &id).await;
    assert!(why.contains("writes no heartbeat"), "{why}");

    // Known, without an address for its peers.
    let id = claimed_test_call(&s, &f, "quiet").await;
    s.store
        .node_heartbeat("quiet", "quiet-host:1", None, now)
        .await
        .unwrap();
    let (why, _) = unreachable(&s, &f, &id).await;
    assert!(
        why.contains("quiet-host:1") && why.contains("http.internal_url"),
        "{why}"
    );

    // An address nothing listens on: refused at once.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let id = claimed_test_call(&s, &f, "dead").await;
    s.store
        .node_heartbeat(
            "dead",
            "dead-host:1",
            Some(&format!("http://{closed}")),
            now,
        )
        .await
        .unwrap();
    let (why, took) = unreachable(&s, &f, &id).await;
    assert!(why.contains("cannot be reached"), "{why}");
    assert!(took < Duration::from_secs(3), "{took:?}");

    // An address that accepts and never answers: the relay gives up, bounded.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((c, _)) = silent.accept().await {
            held.push(c);
        }
    });
    let id = claimed_test_call(&s, &f, "hung").await;
    s.store
        .node_heartbeat(
            "hung",
            "hung-host:1",
            Some(&format!("http://{silent_addr}")),
            now,
        )
        .await
        .unwrap();
    let (why, took) = unreachable(&s, &f, &id).await;
    assert!(why.contains("did not answer within 5 s"), "{why}");
    assert!(
        took >= live_relay::CONNECT_WITHIN && took < live_relay::CONNECT_WITHIN * 2,
        "{took:?}"
    );
    holder.abort();
}

/// One process per SQLite file: a call another process claimed is `not_live`, never
/// relayed, whatever its heartbeat row says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_nothing_is_relayed() {
    let s = TestServer::start(TestDb::Sqlite).await;
    let f = s.fixture().await;
    let id = claimed_test_call(&s, &f, "other").await;
    s.store
        .node_heartbeat("other", "other-host:1", Some(&s.base_url), Utc::now())
        .await
        .unwrap();
    let r = s
        .get(&format!("/v1/communication/{id}/live"))
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect_error(409, "not_live");
}
