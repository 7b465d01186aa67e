//! Media load benchmark: N concurrent calls' media on loopback.
//!
//! The engine under test plays a prompt to every call at 20 ms ptime and
//! receives caller audio (jitter buffer, VAD) on every call. A load generator
//! thread plays the callers: it sends caller audio and measures what it
//! receives (RFC 3550 loss and interarrival jitter per stream).
//!
//! Reported per N: send lateness p50/p99 over the measured seconds and the whole run's
//! p99/max (each packet against its absolute
//! deadline, measured by the engine), receive jitter and loss (measured by the
//! generator), engine CPU per stream (the engine's worker-thread CPU time) and
//! memory per stream (RSS growth from opening the sessions).
//! Beside them, the machine's timer floor: how late an idle thread with the workers'
//! scheduling wakes from a 5 ms absolute sleep in the same seconds.
//! Targets: lateness p99 <= 1 ms, 0 loss, <= 0.1 % of a core and <= 64 KiB per stream.
//!
//! Usage: `cargo run --release -p callsmith-bench --bin media_load -- --calls 100,500,1000 --seconds 10 --workers 2`
//! Uses only std and callsmith-media.

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use callsmith_media::clock::{
    now_ns, rss_bytes, set_realtime_priority, sleep_until_ns, thread_cpu_ns,
};
use callsmith_media::g711::Codec;
use callsmith_media::prompt::Prompt;
use callsmith_media::rtcp::ReceiverStats;
use callsmith_media::rtp::{RtpPacket, write_rtp};
use callsmith_media::{MediaConfig, MediaEngine};

struct Args {
    calls: Vec<usize>,
    seconds: u64,
    workers: usize,
    rt: Option<i32>,
}

fn parse_args() -> Args {
    let mut a = Args {
        calls: vec![100, 500, 1000],
        seconds: 10,
        workers: 2,
        rt: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let v = argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--calls" => a.calls = v.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
            "--seconds" => a.seconds = v.parse().unwrap_or(a.seconds),
            "--workers" => a.workers = v.parse().unwrap_or(a.workers),
            "--rt" => a.rt = v.parse().ok(),
            "-h" | "--help" => {
                println!(
                    "media_load [--calls 100,500,1000] [--seconds 10] [--workers 2] [--rt <SCHED_FIFO priority>]"
                );
                std::process::exit(0);
            }
            other => {
                eprintln!("unknown argument {other}");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    a
}

struct Caller {
    sock: UdpSocket,
    stats: ReceiverStats,
    seq: u16,
    ts: u32,
}

struct GenResult {
    expected: u64,
    received: u64,
    lost: i64,
    jitter_ms_mean: f64,
    jitter_ms_max: f64,
}

/// The callers: one thread, absolute 20 ms deadlines, every stream sends one frame per tick and drains its socket.
fn run_generator(
    mut callers: Vec<Caller>,
    targets: Vec<std::net::SocketAddr>,
    stop: Arc<AtomicBool>,
) -> GenResult {
    let frame: Vec<u8> = (0..160)
        .map(|i| {
            Codec::Pcmu.encode(
                ((i as f32 * 2.0 * std::f32::consts::PI * 300.0 / 8000.0).sin() * 3000.0) as i16,
            )
        })
        .collect();
    let mut buf = [0u8; 1500];
    let mut pkt = [0u8; 200];
    let start = now_ns();
    let mut step = 0u64;
    while !stop.load(Ordering::Relaxed) {
        step += 1;
        sleep_until_ns(start + step * 20_000_000);
        let now = now_ns();
        let arrival = ((now - start) / 125_000) as u32;
        for (c, to) in callers.iter_mut().zip(&targets) {
            if let Ok(n) = write_rtp(&mut pkt, step == 1, 0, c.seq, c.ts, 0x1234, &frame) {
                let _ = c.sock.send_to(&pkt[..n], to);
            }
            c.seq = c.seq.wrapping_add(1);
            c.ts = c.ts.wrapping_add(160);
            for _ in 0..16 {
                let Ok((n, _)) = c.sock.recv_from(&mut buf) else {
                    break;
                };
                // Only the engine's audio (RTCP for a neighbour's port+1 may land here).
                if let Ok(p) = RtpPacket::parse(&buf[..n])
                    && p.payload_type == 0
                {
                    c.stats.on_packet(p.sequence, p.timestamp, arrival);
                }
            }
        }
    }
    let n = callers.len().max(1) as f64;
    let jit: Vec<f64> = callers
        .iter()
        .map(|c| c.stats.jitter() as f64 / 8.0)
        .collect();
    GenResult {
        expected: callers.iter().map(|c| c.stats.expected()).sum(),
        received: callers.iter().map(|c| c.stats.received()).sum(),
        lost: callers
            .iter()
            .map(|c| c.stats.cumulative_lost().max(0))
            .sum(),
        jitter_ms_mean: jit.iter().sum::<f64>() / n,
        jitter_ms_max: jit.iter().cloned().fold(0.0, f64::max),
    }
}

/// The machine's own timer floor, measured beside the engine: a thread with the workers'
/// scheduling that does nothing but sleep to absolute 5 ms deadlines and record how late
/// it woke (what cyclictest measures). The engine's send lateness cannot be better than
/// this; on a VM whose host preempts it, this p99 alone can reach milliseconds.
fn run_timer_probe(rt: Option<i32>, stop: Arc<AtomicBool>) -> (f64, f64) {
    if let Some(prio) = rt {
        let _ = set_realtime_priority(prio);
    }
    let mut late_us: Vec<u64> = Vec::with_capacity(4096);
    let start = now_ns();
    let mut step = 0u64;
    while !stop.load(Ordering::Relaxed) {
        step += 1;
        let deadline = start + step * 5_000_000;
        sleep_until_ns(deadline);
        late_us.push(now_ns().saturating_sub(deadline) / 1000);
    }
    late_us.sort_unstable();
    let at = |q: f64| {
        late_us
            .get(((late_us.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0) as f64
    };
    (at(0.5), at(0.99))
}

fn run(n: usize, seconds: u64, workers: usize, rt: Option<i32>) -> Result<(), String> {
    let cfg = MediaConfig {
        workers,
        realtime_priority: rt,
        rtp_port_min: 30000,
        rtp_port_max: 39999,
        rtcp_interval_ms: 5000,
        ..MediaConfig::default()
    };
    // Generator sockets first, so the RSS baseline includes them.
    let callers: Vec<Caller> = (0..n)
        .map(|_| {
            let sock = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
            sock.set_nonblocking(true).map_err(|e| e.to_string())?;
            Ok(Caller {
                sock,
                stats: ReceiverStats::default(),
                seq: 1,
                ts: 0,
            })
        })
        .collect::<Result<_, String>>()?;
    let prompt = Arc::new(Prompt::from_pcm(
        (0..(seconds as usize + 3) * 8000)
            .map(|i| {
                ((i as f32 * 2.0 * std::f32::consts::PI * 440.0 / 8000.0).sin() * 8000.0) as i16
            })
            .collect(),
    ));
    let engine = MediaEngine::new(cfg).map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(200));
    let rss_before = rss_bytes();
    let mut sessions = Vec::with_capacity(n);
    let mut targets = Vec::with_capacity(n);
    for c in &callers {
        let s = engine.open_session(None).map_err(|e| e.to_string())?;
        s.set_remote(
            c.sock.local_addr().map_err(|e| e.to_string())?,
            Codec::Pcmu,
            Some(101),
        )
        .map_err(|e| e.to_string())?;
        targets.push(s.local_addr());
        sessions.push(s);
    }
    let handles: Vec<_> = sessions
        .iter()
        .map(|s| s.play(prompt.clone(), false))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let gen_stop = stop.clone();
    let generator = std::thread::Builder::new()
        .name("callers".into())
        .spawn(move || {
            let cpu0 = thread_cpu_ns();
            let r = run_generator(callers, targets, gen_stop);
            (r, thread_cpu_ns() - cpu0)
        })
        .map_err(|e| e.to_string())?;
    // Warm-up second (jitter buffers fill, sockets settle), then measure.
    std::thread::sleep(Duration::from_secs(1));
    let rss_after = rss_bytes();
    let probe_stop = Arc::new(AtomicBool::new(false));
    let probe = {
        let stop = probe_stop.clone();
        std::thread::Builder::new()
            .name("timer-probe".into())
            .spawn(move || run_timer_probe(rt, stop))
            .map_err(|e| e.to_string())?
    };
    let p0 = engine.pacing();
    let t0 = now_ns();
    std::thread::sleep(Duration::from_secs(seconds));
    let p1 = engine.pacing();
    probe_stop.store(true, Ordering::Relaxed);
    let (probe_p50, probe_p99) = probe.join().map_err(|_| "probe panicked")?;
    let elapsed_s = (now_ns() - t0) as f64 / 1e9;
    stop.store(true, Ordering::Relaxed);
    let (g, gen_cpu_ns) = generator
        .join()
        .map_err(|_| "generator panicked".to_string())?;
    drop(handles);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let stats = rt.block_on(async {
        let mut late = 0u64;
        let mut malformed = 0u64;
        for s in &sessions {
            if let Ok(st) = s.stats().await {
                late += st.late;
                malformed += st.malformed_rtp;
            }
        }
        (late, malformed)
    });
    drop(sessions);

    // Lateness of the measured seconds only (setup and warm-up excluded).
    let w = p1.since(&p0);
    let cpu_ms = w.worker_cpu_ms;
    let cpu_pct_per_stream = cpu_ms / 1000.0 / elapsed_s * 100.0 / n as f64;
    let mem_per_stream = rss_after.saturating_sub(rss_before) as f64 / n as f64 / 1024.0;
    let loss_pct = if g.expected > 0 {
        g.lost as f64 * 100.0 / g.expected as f64
    } else {
        0.0
    };
    println!(
        "N={n:5} | send lateness p50 {:.0} us p99 {:.0} us ({} pkts; whole run p99 {:.0} us max {:.0} us) | rx jitter mean {:.2} ms max {:.2} ms | \
         loss {} / {} ({loss_pct:.3} %) | engine CPU {:.4} % of a core per stream | RSS {:.1} KiB per stream | \
         generator CPU {:.1} % | engine late/malformed caller pkts {}/{} | timer floor (idle probe thread) p50 {:.0} us p99 {:.0} us",
        w.p50_us,
        w.p99_us,
        w.packets,
        p1.p99_us,
        p1.max_us,
        g.jitter_ms_mean,
        g.jitter_ms_max,
        g.lost,
        g.expected,
        cpu_pct_per_stream,
        mem_per_stream,
        gen_cpu_ns as f64 / 1e9 / elapsed_s * 100.0,
        stats.0,
        stats.1,
        probe_p50,
        probe_p99,
    );
    let _ = g.received;
    Ok(())
}

pub fn main() {
    let args = parse_args();
    println!(
        "media_load: {} s per run, {} worker thread(s), SCHED_FIFO {:?}, {} CPUs",
        args.seconds,
        args.workers,
        args.rt,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    for n in args.calls.clone() {
        if let Err(e) = run(n, args.seconds, args.workers, args.rt) {
            eprintln!("N={n}: {e}");
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
