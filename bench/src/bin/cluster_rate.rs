//! cluster_rate: calls per second through the SIP edge to 1, 2 and 3 `callsmith` nodes
//! on one PostgreSQL database, with the edge's own cost, on this machine.
//!
//! ```sh
//! eval "$(bash scripts/test-deps.sh)"     # PostgreSQL and Kamailio
//! cargo build --release -p callsmith-cli -p callsmith-bench --bin callsmith --bin cluster_rate
//! CALLSMITH_BIN=target/release/callsmith target/release/cluster_rate \
//!   --nodes 1,2,3 --rate 300 --seconds 10 --hold-ms 2000 --rounds 2
//! ```
//!
//! Every step starts fresh processes: a new database, `n` nodes (the release binary from
//! `CALLSMITH_BIN`; each its own RTP range), Kamailio with the shipped configuration
//! (`deploy/kamailio/kamailio.cfg`, four workers, 512 MB of shared memory) in front of them, and a SIPp caller
//! (`bench/sipp/rate_uac_edge_caller.xml`) calling the edge at `--rate` for `--seconds`,
//! each call held `--hold-ms` with RTP both ways; the nodes answer with the `call_rate` bot
//! (a TTS question, then listening for DTMF). A step `direct` has SIPp call one node
//! without the edge: the same load, for the edge's share of set-up time. Steps alternate
//! round by round (`1, 2, 3, direct, 1, 2, 3, direct`) so the machine's noise spreads over
//! all of them.
//!
//! Printed per step: calls placed and failed (SIPp), retransmissions, set-up p50/p99
//! (INVITE → 200 at the caller), how the calls spread over the nodes (the INVITEs each
//! admitted), the nodes' CPU per call (all nodes' CPU over the load ÷ calls), the edge's
//! CPU per call (every `kamailio` process), and per rate of a full core: how many calls a
//! second one core of nodes, and one core of edge, would take at these costs.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use callsmith_bench::calls::{Sipp, SippJob, rate_scenario, wait_all_ended};
use callsmith_bench::{CLK_TCK, cpu_ticks_of_command, fmt_setup, proc_stat};
use callsmith_domain::store::communications::CommunicationFilter;
use callsmith_e2e::peers::kamailio::Sizing;
use callsmith_e2e::{
    AgentSpec, Engine, EngineOptions, Kamailio, create_agent, create_scenario, free_udp_port,
    provision, store_of,
};
use clap::Parser;

const NUMBER: &str = "+4930100900";
const TRUNK: &str = "edge";
/// What a node logs for each INVITE it admits.
const ADMITTED: &str = "inbound call call_id=";

#[derive(Parser, Debug)]
#[command(about = "Calls per second through the SIP edge to 1, 2 and 3 nodes")]
struct Args {
    /// Node counts to run, in order, each round.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    nodes: Vec<usize>,
    /// Also run SIPp straight to one node (no edge) each round.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    direct: bool,
    /// Calls a second SIPp offers.
    #[arg(long, default_value_t = 300)]
    rate: u32,
    /// How long the calls arrive.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// How long SIPp holds each call.
    #[arg(long, default_value_t = 2000)]
    hold_ms: u64,
    /// Rounds of all steps, alternated.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
}

/// One step's figures.
#[derive(Debug, Clone)]
struct Step {
    label: String,
    placed: u64,
    failed: u64,
    retrans: u64,
    setup_p50: String,
    setup_p99: String,
    spread: Vec<usize>,
    node_cpu_ms_per_call: f64,
    edge_cpu_ms_per_call: Option<f64>,
    /// SIPp's error kinds, when a call failed.
    errors: Vec<(String, usize)>,
}

/// Whether a process named `kamailio` is alive (the previous step's edge is killed on drop
/// and its workers take a moment to go; their CPU must not count in this step's).
fn kamailio_alive() -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
        .any(|c| c.trim() == "kamailio")
}

async fn step(args: &Args, nodes: usize, through_edge: bool) -> Result<Step> {
    for _ in 0..100 {
        if !kamailio_alive() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if kamailio_alive() {
        bail!("a kamailio process is still running: stop it first, its CPU would count");
    }
    let admin = std::env::var("CALLSMITH_TEST_PG_ADMIN_URL")
        .context("CALLSMITH_TEST_PG_ADMIN_URL: run `eval \"$(bash scripts/test-deps.sh)\"`")?;
    let db = callsmith_domain::store::create_postgres_database(&admin, "csbench_")
        .await
        .context("a fresh database")?;
    let edge_addr = Kamailio::pick_addr();
    let live = u64::from(args.rate) * (args.hold_ms / 1000 + 2);
    let mut engines = Vec::new();
    for i in 0..nodes {
        let lo = 10000 + (i as u16) * 6000;
        engines.push(
            Engine::start(EngineOptions {
                database_url: Some(db.clone()),
                trunks: vec![(TRUNK.into(), edge_addr)],
                rtp_ports: Some((lo, lo + 5999)),
                dialer_toml: format!("max_live_calls = {}\n", live * 2 + 100),
                ..Default::default()
            })
            .await,
        );
    }
    let t = provision(&engines[0], "cluster", TRUNK, NUMBER).await;
    let store = store_of(&engines[0], Some(&db)).await;
    let scn = create_scenario(&store, &t, &rate_scenario(), true).await;
    create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;
    let addrs: Vec<SocketAddr> = engines.iter().map(|e| e.sip_addr).collect();
    // The edge's trunk gateway: a port nothing answers on (these calls stay inbound).
    let nowhere = SocketAddr::from(([127, 0, 0, 1], free_udp_port()));
    let edge = if through_edge {
        Some(
            Kamailio::start_sized(edge_addr, &addrs, &[("carrier", &[nowhere])], Sizing::LOAD)
                .await,
        )
    } else {
        None
    };
    // Routes are read from the database; let every node see the agent.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let pids: Vec<u32> = engines.iter().filter_map(|e| e.pid()).collect();
    let cpu = |pids: &[u32]| -> u64 {
        pids.iter()
            .filter_map(|p| proc_stat(*p))
            .map(|s| s.cpu_ticks)
            .sum()
    };
    let (nodes_before, edge_before) = (cpu(&pids), cpu_ticks_of_command("kamailio"));
    let calls = u64::from(args.rate) * args.seconds;
    let mut sipp = Sipp::spawn(
        &SippJob {
            scenario: if through_edge {
                "rate_uac_edge_caller"
            } else {
                "rate_uac_caller"
            },
            port: free_udp_port(),
            target: Some(if through_edge {
                edge_addr
            } else {
                engines[0].sip_addr
            }),
            calls,
            rate: Some(args.rate),
            hold_ms: Some(args.hold_ms),
            service: Some(NUMBER),
            budget_secs: args.seconds + args.hold_ms / 1000 + 60,
            // Kamailio's workers may pass a 180 on after the 200 that overtook it: a late
            // provisional answer is ignored, not a failed call.
            extra_args: &["-default_behaviors", "all,-abortunexp"],
        },
        args.hold_ms,
    )?;
    let exited = sipp
        .wait(Duration::from_secs(args.seconds + args.hold_ms / 1000 + 90))
        .await;
    let inbound = CommunicationFilter {
        direction: Some("inbound".into()),
        ..Default::default()
    };
    wait_all_ended(&store, &t.account, &inbound, Duration::from_secs(60)).await?;
    let node_ticks = cpu(&pids).saturating_sub(nodes_before);
    let edge_ticks = cpu_ticks_of_command("kamailio").saturating_sub(edge_before);
    if exited.is_none() {
        sipp.kill().await;
    }
    let st = sipp.stat();
    let rtts = sipp.rtts();
    let placed = st.outgoing.max(1);
    let spread = engines
        .iter()
        .map(|e| e.log().matches(ADMITTED).count())
        .collect();
    drop(edge);
    Ok(Step {
        label: if through_edge {
            format!("{nodes} behind the edge")
        } else {
            "1, direct".into()
        },
        placed: st.outgoing,
        failed: st.failed,
        retrans: st.retransmissions,
        setup_p50: fmt_setup(&rtts, 0.50),
        setup_p99: fmt_setup(&rtts, 0.99),
        spread,
        node_cpu_ms_per_call: node_ticks as f64 / CLK_TCK * 1000.0 / placed as f64,
        edge_cpu_ms_per_call: through_edge
            .then(|| edge_ticks as f64 / CLK_TCK * 1000.0 / placed as f64),
        errors: if st.failed > 0 {
            sipp.errors()
        } else {
            Vec::new()
        },
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

async fn run(args: Args) -> Result<()> {
    let mut steps: Vec<(usize, bool)> = args.nodes.iter().map(|&n| (n, true)).collect();
    if args.direct {
        steps.push((1, false));
    }
    let mut all: Vec<Step> = Vec::new();
    for round in 1..=args.rounds {
        for &(n, through_edge) in &steps {
            let s = step(&args, n, through_edge).await?;
            println!(
                "round {round}: {:<18} placed {:>5} failed {:>4} retrans {:>4} setup p50 {:>6} p99 {:>6} ms  spread {:?}  nodes {:.2} ms/call  edge {}",
                s.label,
                s.placed,
                s.failed,
                s.retrans,
                s.setup_p50,
                s.setup_p99,
                s.spread,
                s.node_cpu_ms_per_call,
                s.edge_cpu_ms_per_call
                    .map(|e| format!("{e:.3} ms/call"))
                    .unwrap_or_else(|| "-".into())
            );
            if !s.errors.is_empty() {
                println!("  SIPp's errors: {:?}", s.errors);
            }
            all.push(s);
        }
    }
    println!(
        "\n{} calls/s for {} s, each held {} ms, {} round(s); medians over the rounds\n",
        args.rate, args.seconds, args.hold_ms, args.rounds
    );
    println!(
        "| nodes | placed | failed | retrans | set-up p50 / p99 ms (last round) | calls per node (last round) | nodes' CPU ms/call | edge CPU ms/call | calls/s per core of nodes | calls/s per core of edge |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut labels: Vec<String> = all.iter().map(|s| s.label.clone()).collect();
    labels.dedup();
    labels.truncate(steps.len());
    for label in labels {
        let of: Vec<&Step> = all.iter().filter(|s| s.label == label).collect();
        let last = of.last().expect("a step");
        let node = median(of.iter().map(|s| s.node_cpu_ms_per_call).collect());
        let edge = median(of.iter().filter_map(|s| s.edge_cpu_ms_per_call).collect());
        println!(
            "| {label} | {} | {} | {} | {} / {} | {:?} | {node:.2} | {} | {:.0} | {} |",
            of.iter().map(|s| s.placed).sum::<u64>(),
            of.iter().map(|s| s.failed).sum::<u64>(),
            of.iter().map(|s| s.retrans).sum::<u64>(),
            last.setup_p50,
            last.setup_p99,
            last.spread,
            if edge.is_nan() {
                "-".into()
            } else {
                format!("{edge:.3}")
            },
            1000.0 / node,
            if edge.is_nan() {
                "-".into()
            } else {
                format!("{:.0}", 1000.0 / edge)
            },
        );
    }
    if all.iter().any(|s| s.failed > 0) {
        bail!("some calls failed");
    }
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.nodes.is_empty() || args.nodes.iter().any(|&n| n == 0 || n > 3) {
        bail!("--nodes takes counts from 1 to 3");
    }
    if args.rate == 0 || args.seconds == 0 || args.hold_ms < 1000 || args.rounds == 0 {
        bail!("--rate, --seconds and --rounds must be positive and --hold-ms at least 1000");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run(args))
}
