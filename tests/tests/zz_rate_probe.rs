//! Throwaway probe (not committed): SIPp UAC at RATE cps into the engine.
use callsmith_e2e::*;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn probe() {
    let rate: u32 = std::env::var("RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let secs: u32 = std::env::var("SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let db = std::env::var("PROBE_PG").ok();
    let gateway_port = free_udp_port();
    let e = Engine::start(EngineOptions {
        trunks: vec![(
            "carrier".into(),
            std::net::SocketAddr::from(([127, 0, 0, 1], gateway_port)),
        )],
        dialer_toml: "max_live_calls = 5000\nwrite_queue = 20000\n".into(),
        rtp_ports: Some((20000, 29999)),
        database_url: db.clone(),
        ..Default::default()
    })
    .await;
    let t = provision(&e, "probe", "carrier", "+4930100900").await;
    let store = store_of(&e, db.as_deref()).await;
    let scn = create_scenario(&store, &t, &greeting_scenario("Thank you for calling. This message is long on purpose, so that every call is still going when the caller hangs up."), true).await;
    create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;
    let pid = e.child.as_ref().unwrap().id().unwrap();
    let (c0, r0) = proc_usage(pid).unwrap();
    let total = rate * secs;
    let t0 = Instant::now();
    let mut caller = Sipp::spawn(
        "uac_answered_caller_bye.xml",
        Some(gateway_port),
        Some(e.sip_addr),
        &[
            "-m",
            &total.to_string(),
            "-r",
            &rate.to_string(),
            "-l",
            "5000",
            "-s",
            "+4930100900",
            "-trace_stat",
            "-fd",
            "1",
            "-trace_rtt",
            "-rtt_freq",
            "1",
        ],
    );
    let ok = caller.success(Duration::from_secs(secs as u64 + 120)).await;
    let el = t0.elapsed();
    let (c1, r1) = proc_usage(pid).unwrap();
    let log = e.log();
    let cpu_ms = (c1 - c0) as f64 * 10.0;
    println!(
        "RATE {rate} calls {total} ok {ok} elapsed {:.1}s cpu {:.0} ms = {:.3} ms/call, rss {} -> {} KiB",
        el.as_secs_f64(),
        cpu_ms,
        cpu_ms / total as f64,
        r0,
        r1
    );
    for k in [
        "pool timed out",
        "recording the end",
        "64*T1",
        "retrying",
        "503",
    ] {
        println!("log '{k}': {}", log.matches(k).count());
    }
    let dir = caller.dir.path().to_path_buf();
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("cp {}/* /tmp/probe/ 2>/dev/null", dir.display()))
        .status();
    std::fs::write("/tmp/probe/engine.log", log).unwrap();
}
