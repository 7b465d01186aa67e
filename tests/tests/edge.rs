//! Three `callsmith` nodes behind the SIP edge (Kamailio with `deploy/kamailio/kamailio.cfg`),
//! each on its own loopback port and its own SQLite database, so each node's stored calls
//! say which calls it answered. SIPp callers call through the edge:
//! - a call a node places leaves through the edge to the trunk's gateway (a SIPp callee),
//!   and its in-dialog requests pass the edge;
//! - inbound calls are spread over the nodes by their load, and the caller's BYE reaches
//!   the node that answered (Record-Route): every node's calls end `completed`;
//! - a node told to stop (SIGTERM) drains: it answers OPTIONS 503, the edge takes it out
//!   of rotation within the probe interval, it takes no new call and finishes its own;
//! - a node SIGKILLed: the edge sends its next call elsewhere after the node timeout and
//!   marks it down, new calls stop reaching it within the probe interval, every call
//!   succeeds on the nodes left;
//! - calls a node places on several edge-routed trunks leave to the gateways of the trunk
//!   each names (`X-Callsmith-Trunk`, removed at the edge); a trunk the edge does not know
//!   is refused, no carrier sees its call.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use callsmith_domain::communication::CommunicationStatus;
use callsmith_e2e::peers::kamailio::{NODE_TIMEOUT_MS, PROBE_INTERVAL_SECS, edge_callers};
use callsmith_e2e::*;
use serde_json::Value;

/// The line a node logs for each INVITE it admits.
const ADMITTED: &str = "inbound call call_id=";
const NUMBER: &str = "+4930100700";
const TRUNK: &str = "edge";
const LONG: &str = "Thank you for calling. This message is long on purpose, so that the \
                    caller hangs up while it still plays.";

struct Node {
    engine: Engine,
    tenancy: Tenancy,
    agent: String,
}

impl Node {
    async fn start(edge: SocketAddr, rtp: (u16, u16)) -> Node {
        let engine = Engine::start(EngineOptions {
            trunks: vec![(TRUNK.into(), edge)],
            rtp_ports: Some(rtp),
            // A node drains within the test's bounds.
            dialer_toml: "drain_timeout_secs = 20\n".into(),
            ..Default::default()
        })
        .await;
        let tenancy = provision(&engine, "edge", TRUNK, NUMBER).await;
        let store = store_of(&engine, None).await;
        let scn = create_scenario(&store, &tenancy, &greeting_scenario(LONG), true).await;
        let agent = create_agent(
            &store,
            &tenancy,
            &AgentSpec::new(scn, tenancy.number_id.clone()),
        )
        .await;
        Node {
            engine,
            tenancy,
            agent,
        }
    }

    /// The node's inbound calls, as its API lists them.
    async fn calls(&self) -> Vec<Value> {
        let (_, v) = self
            .engine
            .get(
                "/v1/communication?direction=inbound&limit=100",
                Some(&self.tenancy.account),
            )
            .await;
        v["items"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until the node has stored `n` inbound calls and all are `completed`.
    async fn completed(&self, n: usize) -> Vec<Value> {
        eventually(Duration::from_secs(20), || async {
            let rows = self.calls().await;
            (rows.len() >= n
                && rows
                    .iter()
                    .all(|r| r["communication_status"] == "completed"))
            .then_some(rows)
        })
        .await
        .unwrap_or_else(|| {
            panic!(
                "node {} did not store {n} completed calls\n{}",
                self.engine.sip_addr,
                self.engine.log()
            )
        })
    }
}

/// SIPp calling the number through the edge: `n` calls at `rate` a second, each held
/// `hold_ms`.
fn callers(edge: SocketAddr, n: usize, rate: u32, hold_ms: u64) -> Sipp {
    edge_callers(edge, NUMBER, n, rate, hold_ms)
}

async fn all_succeed(caller: &mut Sipp, what: &str, edge: &Kamailio, nodes: &[&Node]) {
    if !caller.success(Duration::from_secs(40)).await {
        let logs: Vec<String> = nodes.iter().map(|n| n.engine.log()).collect();
        panic!(
            "{what}: not every call succeeded\ncaller: {}\nedge: {}\nnodes: {}",
            caller.dump(),
            edge.log(),
            logs.join("\n=====\n")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_spreads_calls_by_load_drains_and_fails_over() {
    let edge_addr = Kamailio::pick_addr();
    let rtp = rtp_ranges(3);
    let a = Node::start(edge_addr, rtp[0]).await;
    let b = Node::start(edge_addr, rtp[1]).await;
    let mut c = Node::start(edge_addr, rtp[2]).await;
    let addrs = [a.engine.sip_addr, b.engine.sip_addr, c.engine.sip_addr];
    // -aa: the edge probes the trunk's gateway with OPTIONS too (SIPp counts each probe as
    // a call of its own, so the callee runs until the test ends).
    let carrier = Sipp::spawn("uas_edge_answer.xml", None, None, &["-rtp_echo", "-aa"]);
    let edge = Kamailio::start(edge_addr, &addrs, &[carrier.addr]).await;

    // 0. A call a node places leaves through the edge to the trunk's gateway; its ACK and
    // BYE follow the Record-Route through the edge too.
    let placed = a
        .engine
        .dispatch(
            &a.tenancy,
            serde_json::json!({"recipient": "+15550009", "agent_sid": a.agent}),
        )
        .await;
    let placed = placed["id"].as_str().expect("id").to_string();
    let row = a
        .engine
        .wait_communication(&a.tenancy.account, &placed, Duration::from_secs(30))
        .await;
    assert_eq!(row["communication_status"], "completed", "{row}");
    // Each request of the call the callee received (SIPp's trace: a dashed line, "UDP
    // message received", the message) has the edge's Via on top.
    let via_edge = format!("Via: SIP/2.0/UDP {edge_addr};branch=");
    let received = eventually(Duration::from_secs(10), || async {
        let log = carrier.messages();
        let requests: Vec<String> = log
            .split("-----------------------------------------------")
            .filter(|m| m.contains("message received"))
            .filter_map(|m| {
                let body = m.split_once("\n\n")?.1.trim_start().to_string();
                ["INVITE ", "ACK ", "BYE "]
                    .iter()
                    .any(|r| body.starts_with(r))
                    .then_some(body)
            })
            .collect();
        (requests.len() >= 3).then_some(requests)
    })
    .await
    .unwrap_or_else(|| panic!("the callee got no INVITE, ACK and BYE\n{}", carrier.dump()));
    for r in &received {
        let top_via = r
            .lines()
            .find(|l| l.starts_with("Via:"))
            .unwrap_or_default();
        assert!(top_via.starts_with(&via_edge), "came through the edge: {r}");
    }

    // 1. Spread by load: 12 calls within 2 s, each held 2 s, so each node holds some
    // while the next ones arrive; every BYE reaches its node (all rows completed).
    let mut caller = callers(edge.addr, 12, 6, 2000);
    all_succeed(&mut caller, "spread", &edge, &[&a, &b, &c]).await;
    let mut first = Vec::new();
    for n in [&a, &b, &c] {
        first.push(n.completed(1).await.len());
    }
    assert_eq!(
        first.iter().sum::<usize>(),
        12,
        "each call answered once: {first:?}"
    );
    assert!(
        first.iter().all(|&k| (2..=6).contains(&k)),
        "calls spread by load over the three nodes: {first:?}"
    );
    for (n, k) in [&a, &b, &c].iter().zip(&first) {
        n.completed(*k).await;
    }

    // 2. Drain: node c gets SIGTERM while it holds a call. It answers OPTIONS 503, leaves
    // the rotation within the probe interval, takes no new call and finishes its own.
    let mut caller = callers(edge.addr, 9, 3, 4000);
    let live_on_c: Vec<String> = eventually(Duration::from_secs(15), || async {
        let (_, v) = c
            .engine
            .get(
                "/v1/communication?communication_status=in_progress",
                Some(&c.tenancy.account),
            )
            .await;
        let ids: Vec<String> = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_str().map(String::from))
            .collect();
        (!ids.is_empty()).then_some(ids)
    })
    .await
    .unwrap_or_else(|| panic!("node c never held a call\n{}", edge.log()));
    let c_store = store_of(&c.engine, None).await;
    let term_at = Instant::now();
    let term_wall = chrono::Utc::now();
    if let Some(pid) = c.engine.pid() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    let out_after = edge
        .wait_down(c.engine.sip_addr, term_at, Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("the edge never took the draining node out\n{}", edge.log()));
    assert!(
        out_after <= Duration::from_secs(PROBE_INTERVAL_SECS) + Duration::from_millis(900),
        "out of rotation within the probe interval: {out_after:?}"
    );
    all_succeed(&mut caller, "drain", &edge, &[&a, &b, &c]).await;
    let status = c
        .engine
        .terminate(Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("the drained node did not exit\n{}", c.engine.log()));
    assert!(status.success(), "{status:?}");
    let c_log = c.engine.log();
    let (_, during_drain) = c_log
        .split_once("draining: no new calls")
        .unwrap_or_else(|| panic!("node c did not drain\n{c_log}"));
    assert!(
        !during_drain.contains(ADMITTED),
        "a draining node takes no new call\n{c_log}"
    );
    assert!(
        !c_log.contains("hanging up live calls"),
        "its calls finished within the drain time\n{c_log}"
    );
    for id in &live_on_c {
        let r = c_store
            .communication_get(id)
            .await
            .expect("read")
            .expect("row");
        assert_eq!(
            r.communication_status,
            CommunicationStatus::Completed,
            "{r:?}"
        );
        assert!(
            r.ended_at.expect("ended") > term_wall,
            "it ended after SIGTERM: {r:?}"
        );
    }
    let second_a = a.completed(first[0]).await.len() - first[0];
    let second_b = b.completed(first[1]).await.len() - first[1];
    assert_eq!(
        second_a + second_b + live_on_c.len(),
        9,
        "every call of the drain phase answered once (a {second_a}, b {second_b}, c {})",
        live_on_c.len()
    );

    // 3. SIGKILL: node b dies. The calls sent to it before the edge notices fail over
    // after the node timeout; the edge marks it down within the probe interval (or at
    // the first INVITE it leaves unanswered); every call succeeds on node a.
    let a_before = a.calls().await.len();
    let mut b = b;
    let killed_at = Instant::now();
    b.engine.kill().await;
    let mut caller = callers(edge.addr, 6, 6, 500);
    let down_after = edge
        .wait_down(b.engine.sip_addr, killed_at, Duration::from_secs(10))
        .await
        .unwrap_or_else(|| {
            panic!(
                "the edge never took the dead node {} out (a {}, c {})\n{}",
                b.engine.sip_addr,
                a.engine.sip_addr,
                c.engine.sip_addr,
                edge.log()
            )
        });
    assert!(
        down_after
            <= Duration::from_secs(PROBE_INTERVAL_SECS)
                + Duration::from_millis(NODE_TIMEOUT_MS)
                + Duration::from_millis(900),
        "out of rotation within the probe interval and the node timeout: {down_after:?}"
    );
    all_succeed(&mut caller, "failover", &edge, &[&a]).await;
    let rows = a.completed(a_before + 6).await;
    assert_eq!(rows.len(), a_before + 6, "node a answered every call once");
    drop(c);
}

/// A trunk's call as its carrier saw it: (INVITEs, whether any request carried the
/// routing key).
fn carrier_saw(carrier: &Sipp) -> (usize, bool) {
    let log = carrier.messages();
    (
        carrier.invites().len(),
        log.to_ascii_lowercase().contains("x-callsmith-trunk"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_placed_call_leaves_to_the_gateways_of_its_trunk() {
    let edge_addr = Kamailio::pick_addr();
    let trunks = ["carrier_a", "carrier_b", "unlisted"];
    let node = Engine::start(EngineOptions {
        trunks: trunks.iter().map(|t| (t.to_string(), edge_addr)).collect(),
        trunk_toml: "edge_route = true\n".into(),
        ..Default::default()
    })
    .await;
    // -aa: the edge probes each gateway with OPTIONS too.
    let carrier_a = Sipp::spawn("uas_edge_answer.xml", None, None, &["-rtp_echo", "-aa"]);
    let carrier_b = Sipp::spawn("uas_edge_answer.xml", None, None, &["-rtp_echo", "-aa"]);
    let edge = Kamailio::start_with_trunks(
        edge_addr,
        &[node.sip_addr],
        &[
            ("carrier_a", &[carrier_a.addr]),
            ("carrier_b", &[carrier_b.addr]),
        ],
    )
    .await;
    let store = store_of(&node, None).await;
    let mut placed = Vec::new();
    for (i, trunk) in trunks.iter().enumerate() {
        let number = format!("+493010071{i}");
        let t = provision(&node, &format!("edge{i}"), trunk, &number).await;
        let scn = create_scenario(&store, &t, &greeting_scenario("Hello."), true).await;
        let agent = create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;
        let c = node
            .dispatch(
                &t,
                serde_json::json!({"recipient": format!("+1555001{i}"), "agent_sid": agent}),
            )
            .await;
        placed.push((t, c["id"].as_str().expect("id").to_string()));
    }
    let mut rows = Vec::new();
    for (t, id) in &placed {
        rows.push(
            node.wait_communication(&t.account, id, Duration::from_secs(30))
                .await,
        );
    }
    let context = || format!("{}\nedge:\n{}", node.log(), edge.log());
    assert_eq!(
        rows[0]["communication_status"],
        "completed",
        "{}",
        context()
    );
    assert_eq!(
        rows[1]["communication_status"],
        "completed",
        "{}",
        context()
    );
    // Each carrier got exactly its trunk's call, without the routing key.
    assert_eq!(carrier_saw(&carrier_a), (1, false), "{}", carrier_a.dump());
    assert_eq!(carrier_saw(&carrier_b), (1, false), "{}", carrier_b.dump());
    // The trunk the edge does not list: refused there (503), its call reached no carrier.
    assert_eq!(rows[2]["call_status"], "failed", "{}", rows[2]);
    assert_eq!(rows[2]["sip_code"], 503, "{}", rows[2]);
    assert!(
        edge.log().contains("no trunk unlisted in the trunks table"),
        "{}",
        edge.log()
    );
}
