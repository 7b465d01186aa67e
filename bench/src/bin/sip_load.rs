//! SIP signalling load: SIPp's built-in UAC (INVITE, ACK, hold, BYE) at rising call rates
//! against the callsmith UAS (in this process, answering everything), and the same load
//! against SIPp's own UAS as the reference.
//!
//! Prints, per target, the highest rate with 0 failed calls and the call setup time
//! (INVITE to 200, SIPp `-trace_rtt`, 1 ms resolution) p50/p95/p99 at each clean rate.
//! Loopback only. Targets: >= 500 CPS with 0 failures; setup p99 <= 5 ms at 100 CPS.
//!
//! `cargo run --release -p callsmith-bench --bin sip_load -- --max-rate 2000`

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use callsmith_bench::percentile;
use callsmith_sip::{LegEvent, LocalMedia, SipConfig, SipStack, TrunkConfig};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "SIP load: SIPp UAC against the callsmith UAS and against SIPp's UAS")]
struct Args {
    /// Highest call rate (calls per second) to try.
    #[arg(long, default_value_t = 2000)]
    max_rate: u32,
    /// Seconds of call arrivals per step.
    #[arg(long, default_value_t = 4)]
    seconds: u32,
    /// Call hold time in milliseconds.
    #[arg(long, default_value_t = 2000)]
    hold_ms: u32,
    /// Rates to try, comma separated (overrides the default ladder).
    #[arg(long, value_delimiter = ',')]
    rates: Vec<u32>,
    /// Skip the SIPp-against-SIPp reference run.
    #[arg(long)]
    no_reference: bool,
}

#[derive(Debug, Clone)]
struct Step {
    rate: u32,
    ok: bool,
    calls: u32,
    p50: f64,
    p95: f64,
    p99: f64,
}

fn free_port() -> Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Response times (ms) from SIPp's `*_rtt.csv` files in `dir`.
fn read_rtts(dir: &Path) -> Vec<f64> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if !e.file_name().to_string_lossy().ends_with("_rtt.csv") {
                continue;
            }
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            for line in text.lines().skip(1) {
                if let Some(v) = line
                    .split(';')
                    .nth(1)
                    .and_then(|v| v.trim().parse::<f64>().ok())
                {
                    out.push(v);
                }
            }
        }
    }
    out.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    out
}

/// One load step: SIPp UAC at `rate` against `target`. Success means SIPp exit code 0.
fn run_uac(target: SocketAddr, rate: u32, seconds: u32, hold_ms: u32) -> Result<Step> {
    let dir = tempfile::tempdir()?;
    let calls = rate * seconds;
    let limit = (rate * (hold_ms / 1000 + 2)).max(10);
    let status = Command::new("sipp")
        .args([
            "-sn",
            "uac",
            "-nostdin",
            "-i",
            "127.0.0.1",
            "-p",
            &free_port()?.to_string(),
        ])
        .args([
            "-r",
            &rate.to_string(),
            "-m",
            &calls.to_string(),
            "-l",
            &limit.to_string(),
        ])
        .args(["-d", &hold_ms.to_string(), "-trace_rtt", "-rtt_freq", "1"])
        .args([
            "-timeout",
            &format!("{}s", seconds + hold_ms / 1000 + 30),
            "-timeout_error",
        ])
        .args(["-recv_timeout", "10000"])
        .arg(target.to_string())
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("run sipp (install sip-tester)")?;
    let rtts = read_rtts(dir.path());
    Ok(Step {
        rate,
        ok: status.success(),
        calls,
        p50: percentile(&rtts, 50.0),
        p95: percentile(&rtts, 95.0),
        p99: percentile(&rtts, 99.0),
    })
}

fn ladder(args: &Args) -> Vec<u32> {
    if !args.rates.is_empty() {
        return args.rates.clone();
    }
    [50, 100, 200, 300, 500, 700, 1000, 1500, 2000, 3000]
        .into_iter()
        .filter(|r| *r <= args.max_rate)
        .collect()
}

fn climb(name: &str, target: SocketAddr, args: &Args) -> Result<Vec<Step>> {
    let mut steps = Vec::new();
    for rate in ladder(args) {
        let step = run_uac(target, rate, args.seconds, args.hold_ms)?;
        println!(
            "{name:>9} {:>5} cps  {:>6} calls  {}  setup ms p50 {:.1} p95 {:.1} p99 {:.1}",
            step.rate,
            step.calls,
            if step.ok { "0 failed " } else { "FAILURES " },
            step.p50,
            step.p95,
            step.p99
        );
        let ok = step.ok;
        steps.push(step);
        if !ok {
            break;
        }
        // Let lingering transactions (Timer J/K, 2xx retransmit windows) drain between steps.
        std::thread::sleep(Duration::from_secs(2));
    }
    Ok(steps)
}

fn best(steps: &[Step]) -> Option<&Step> {
    steps.iter().filter(|s| s.ok).max_by_key(|s| s.rate)
}

/// The callsmith UAS: answers every call, waits for the BYE.
async fn start_uas(addr: SocketAddr) -> Result<SipStack> {
    let mut trunk = TrunkConfig::new("loopback", "127.0.0.1:5060".parse()?);
    trunk.inbound_sources = vec!["127.0.0.1".parse()?];
    let config = SipConfig {
        udp: Some(addr),
        tcp: None,
        trunks: vec![trunk],
        ..Default::default()
    };
    let stack = SipStack::start(config, |_: &str, _: &str| true).await?;
    let Some(mut calls) = stack.take_incoming() else {
        bail!("incoming stream taken")
    };
    tokio::spawn(async move {
        while let Some(call) = calls.recv().await {
            tokio::spawn(async move {
                let Ok(mut leg) = call
                    .answer(LocalMedia::g711([127, 0, 0, 1].into(), 40000))
                    .await
                else {
                    return;
                };
                while let Some(ev) = leg.next_event().await {
                    if matches!(ev, LegEvent::Ended(_)) {
                        break;
                    }
                }
            });
        }
    });
    Ok(stack)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let stack = rt.block_on(start_uas(addr))?;
    let target = stack.udp_addr().context("udp listener")?;
    println!(
        "callsmith UAS on {target}; SIPp uac, hold {} ms, {} s of arrivals per step",
        args.hold_ms, args.seconds
    );
    let ours = climb("callsmith", target, &args)?;
    drop(stack);
    drop(rt);

    let reference = if args.no_reference {
        Vec::new()
    } else {
        let port = free_port()?;
        let dir = tempfile::tempdir()?;
        let mut uas = Command::new("sipp")
            .args([
                "-sn",
                "uas",
                "-nostdin",
                "-i",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("spawn sipp uas")?;
        std::thread::sleep(Duration::from_millis(500));
        let r = climb("sipp-uas", format!("127.0.0.1:{port}").parse()?, &args);
        let _ = uas.kill();
        let _ = uas.wait();
        r?
    };

    println!();
    match best(&ours) {
        Some(s) => println!(
            "callsmith UAS: highest clean rate {} cps (setup p50 {:.1} / p95 {:.1} / p99 {:.1} ms)",
            s.rate, s.p50, s.p95, s.p99
        ),
        None => println!("callsmith UAS: no clean rate"),
    }
    if let Some(s) = ours.iter().find(|s| s.rate == 100) {
        println!(
            "callsmith UAS at 100 cps: setup p99 {:.1} ms (target <= 5 ms)",
            s.p99
        );
    }
    if let Some(r) = best(&reference) {
        println!(
            "SIPp UAS reference: highest clean rate {} cps (setup p99 {:.1} ms)",
            r.rate, r.p99
        );
        if let Some(o) = best(&ours) {
            println!("ratio callsmith/SIPp: {:.2}", o.rate as f64 / r.rate as f64);
        }
    }
    Ok(())
}
