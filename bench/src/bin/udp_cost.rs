//! What one thread pays per RTP packet on loopback, for the ways a media engine can hold
//! its streams. It answers one question of `call_rate`'s plateau: how much of the engine's
//! CPU per live call is the kernel's, and what sharing a socket between calls would buy.
//!
//! ```text
//! cargo run --release -p callsmith-bench --bin udp_cost -- --flows 1000 --seconds 5 --runs 3
//! ```
//!
//! A peer thread plays the callers: one socket per flow, one 172-byte packet per flow every
//! 20 ms (µ-law at 20 ms), draining what comes back. The measured thread plays the engine,
//! in one of four modes, one packet per flow every 20 ms:
//!
//! - `send-only`: one socket per flow, `sendto` each tick, never reads: what SIPp's UAS
//!   does with its prompt (the caller's packets are left in the socket).
//! - `per-call`: one socket per flow, drained with `recvmmsg` then one `sendto` each tick:
//!   what callsmith's media worker does.
//! - `connected`: `per-call` with each socket connected to its peer, sending with `send`
//!   (the route is looked up once, at `connect`).
//! - `shared`: one socket for every flow, drained with `recvmmsg` 64 at a time and sent
//!   with `sendmmsg` 64 at a time, each message to its own flow's address.
//!
//! Printed per mode: the measured thread's CPU (`CLOCK_THREAD_CPUTIME_ID`) as % of a core,
//! per flow, and per packet handled (sent + received), medians over the runs (the modes
//! alternate within each run), and each mode's ratio to `send-only` per flow. On loopback
//! the sender also pays the receiving socket's delivery, so `sendto` is the larger cost.
//! Only 127.0.0.1 is ever a target.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Parser;

const PERIOD: Duration = Duration::from_millis(20);
const PACKET: usize = 172;
const BATCH: usize = 64;

#[derive(Parser, Debug)]
#[command(about = "CPU per RTP packet on loopback: per-call sockets vs one shared socket")]
struct Args {
    /// Streams at once (each one packet per 20 ms both ways).
    #[arg(long, default_value_t = 1000)]
    flows: usize,
    /// Seconds per mode and run.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Runs (each runs every mode once); medians are printed.
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    SendOnly,
    PerCall,
    Connected,
    Shared,
}

impl Mode {
    const ALL: [Mode; 4] = [Mode::SendOnly, Mode::PerCall, Mode::Connected, Mode::Shared];
    fn name(self) -> &'static str {
        match self {
            Mode::SendOnly => "send-only (SIPp's UAS)",
            Mode::PerCall => "per-call (callsmith)",
            Mode::Connected => "per-call, connected",
            Mode::Shared => "shared + mmsg",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    cpu_pct: f64,
    per_flow_pct: f64,
    us_per_packet: f64,
    sent: u64,
    received: u64,
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn bind_loopback() -> Result<UdpSocket> {
    let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// The shared socket, with room in its receive queue for a whole tick of every flow
/// (the default queue holds about 200 small datagrams; the kernel caps the size at
/// `net.core.rmem_max`).
fn shared_socket(flows: usize) -> Result<UdpSocket> {
    let s = bind_loopback()?;
    let bytes = (flows * 2048).clamp(1 << 20, 64 << 20) as libc::c_int;
    // SAFETY: a valid socket, option and option length.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        bail!("SO_RCVBUF: {}", std::io::Error::last_os_error());
    }
    Ok(s)
}

fn v4(addr: SocketAddr) -> Result<libc::sockaddr_in> {
    let SocketAddr::V4(a) = addr else {
        bail!("IPv4 loopback expected")
    };
    // SAFETY: sockaddr_in is plain old data; zeroed is a valid value.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = a.port().to_be();
    sa.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    Ok(sa)
}

/// Receive buffers for recvmmsg, set up once (the measured loop allocates nothing).
struct Rx {
    _bufs: Vec<[u8; 256]>,
    _iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

impl Rx {
    fn new() -> Rx {
        let mut bufs = vec![[0u8; 256]; BATCH];
        let mut iov: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        let msgs = iov
            .iter_mut()
            .map(|v| {
                // SAFETY: mmsghdr is plain old data; zeroed is a valid value.
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = v;
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        // The vectors' heap buffers do not move when `Rx` does: the pointers stay valid.
        Rx {
            _bufs: bufs,
            _iov: iov,
            msgs,
        }
    }

    /// Drains `sock`, `BATCH` datagrams per recvmmsg; returns datagrams read.
    fn drain(&mut self, sock: &UdpSocket) -> u64 {
        let mut total = 0;
        loop {
            // SAFETY: every message points into buffers owned by `self`.
            let n = unsafe {
                libc::recvmmsg(
                    sock.as_raw_fd(),
                    self.msgs.as_mut_ptr(),
                    self.msgs.len() as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if n <= 0 {
                return total;
            }
            total += n as u64;
            if (n as usize) < self.msgs.len() {
                return total;
            }
        }
    }
}

/// One packet to each of many addresses through one socket, `BATCH` per sendmmsg; set up
/// once.
struct Tx {
    _dest: Vec<libc::sockaddr_in>,
    _packet: Box<[u8; PACKET]>,
    _iov: Box<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

impl Tx {
    fn new(to: &[SocketAddr]) -> Result<Tx> {
        let mut dest: Vec<libc::sockaddr_in> = to.iter().map(|a| v4(*a)).collect::<Result<_>>()?;
        let mut packet = Box::new([0x80u8; PACKET]);
        let mut iov = Box::new(libc::iovec {
            iov_base: packet.as_mut_ptr().cast(),
            iov_len: PACKET,
        });
        let iov_ptr: *mut libc::iovec = &mut *iov;
        let msgs = dest
            .iter_mut()
            .map(|sa| {
                // SAFETY: mmsghdr is plain old data; zeroed is a valid value.
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_name = (sa as *mut libc::sockaddr_in).cast();
                m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
                m.msg_hdr.msg_iov = iov_ptr;
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        Ok(Tx {
            _dest: dest,
            _packet: packet,
            _iov: iov,
            msgs,
        })
    }

    fn send(&mut self, sock: &UdpSocket) -> u64 {
        let mut sent = 0;
        for chunk in self.msgs.chunks_mut(BATCH) {
            // SAFETY: every message points at data owned by `self`.
            let n = unsafe {
                libc::sendmmsg(
                    sock.as_raw_fd(),
                    chunk.as_mut_ptr(),
                    chunk.len() as libc::c_uint,
                    0,
                )
            };
            if n > 0 {
                sent += n as u64;
            }
        }
        sent
    }
}

/// One mode for `seconds`: a peer thread streams to the measured side, which runs `mode`.
fn run_mode(mode: Mode, flows: usize, seconds: u64) -> Result<Sample> {
    let peers: Vec<UdpSocket> = (0..flows).map(|_| bind_loopback()).collect::<Result<_>>()?;
    let peer_addrs: Vec<SocketAddr> = peers
        .iter()
        .map(|s| s.local_addr())
        .collect::<std::io::Result<_>>()?;
    let (own, shared) = match mode {
        Mode::Shared => (Vec::new(), Some(shared_socket(flows)?)),
        _ => (
            (0..flows)
                .map(|_| bind_loopback())
                .collect::<Result<Vec<_>>>()?,
            None,
        ),
    };
    let targets: Vec<SocketAddr> = match &shared {
        Some(s) => vec![s.local_addr()?; flows],
        None => own
            .iter()
            .map(|s| s.local_addr())
            .collect::<std::io::Result<_>>()?,
    };

    let stop = Arc::new(AtomicBool::new(false));
    let peer_stop = stop.clone();
    let peer = std::thread::spawn(move || {
        let packet = [0x80u8; PACKET];
        let mut rx = Rx::new();
        let mut next = Instant::now();
        while !peer_stop.load(Ordering::Relaxed) {
            for (s, to) in peers.iter().zip(&targets) {
                let _ = s.send_to(&packet, to);
                rx.drain(s);
            }
            next += PERIOD;
            if let Some(d) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
        }
    });

    let packet = [0x80u8; PACKET];
    let mut rx = Rx::new();
    let mut tx = Tx::new(&peer_addrs)?;
    let (mut sent, mut received) = (0u64, 0u64);
    // Settle one second before measuring (the first ticks fill the sockets).
    let settle = Instant::now() + Duration::from_secs(1);
    let end = settle + Duration::from_secs(seconds);
    if mode == Mode::Connected {
        for (s, to) in own.iter().zip(&peer_addrs) {
            s.connect(to)?;
        }
    }
    let mut next = Instant::now();
    let mut cpu0 = None;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if cpu0.is_none() && now >= settle {
            cpu0 = Some((thread_cpu(), now, sent, received));
        }
        match mode {
            Mode::SendOnly => {
                for (s, to) in own.iter().zip(&peer_addrs) {
                    if s.send_to(&packet, to).is_ok() {
                        sent += 1;
                    }
                }
            }
            Mode::Connected => {
                for s in &own {
                    received += rx.drain(s);
                    if s.send(&packet).is_ok() {
                        sent += 1;
                    }
                }
            }
            Mode::PerCall => {
                for (s, to) in own.iter().zip(&peer_addrs) {
                    received += rx.drain(s);
                    if s.send_to(&packet, to).is_ok() {
                        sent += 1;
                    }
                }
            }
            Mode::Shared => {
                let s = shared.as_ref().expect("shared socket");
                received += rx.drain(s);
                sent += tx.send(s);
            }
        }
        next += PERIOD;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    let (c0, t0, s0, r0) = cpu0.ok_or_else(|| anyhow::anyhow!("the run never settled"))?;
    let cpu = thread_cpu() - c0;
    let wall = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    peer.join()
        .map_err(|_| anyhow::anyhow!("the peer thread panicked"))?;
    let (sent, received) = (sent - s0, received - r0);
    let cpu_pct = cpu.as_secs_f64() / wall.as_secs_f64() * 100.0;
    let handled = (sent + received).max(1);
    Ok(Sample {
        cpu_pct,
        per_flow_pct: cpu_pct / flows as f64,
        us_per_packet: cpu.as_secs_f64() * 1e6 / handled as f64,
        sent,
        received,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.flows == 0 || args.seconds == 0 || args.runs == 0 {
        bail!("--flows, --seconds and --runs must be at least 1");
    }
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); Mode::ALL.len()];
    for run in 0..args.runs {
        for (i, mode) in Mode::ALL.into_iter().enumerate() {
            let s = run_mode(mode, args.flows, args.seconds)?;
            eprintln!(
                "run {} {:<24} {:6.1} % of a core  {:.4} % per flow  {:.2} µs per packet  sent {} received {}",
                run + 1,
                mode.name(),
                s.cpu_pct,
                s.per_flow_pct,
                s.us_per_packet,
                s.sent,
                s.received
            );
            samples[i].push(s);
        }
    }
    println!(
        "\n{} flows, one 172-byte packet per flow every 20 ms each way, {} s × {} runs (medians)\n",
        args.flows, args.seconds, args.runs
    );
    println!("| mode | % of a core | % per flow | µs per packet handled | × send-only per flow |");
    println!("|---|---|---|---|---|");
    let base = median(samples[0].iter().map(|s| s.per_flow_pct).collect());
    for (mode, s) in Mode::ALL.into_iter().zip(&samples) {
        let per_flow = median(s.iter().map(|x| x.per_flow_pct).collect());
        println!(
            "| {} | {:.1} | {:.4} | {:.2} | {:.2} |",
            mode.name(),
            median(s.iter().map(|x| x.cpu_pct).collect()),
            per_flow,
            median(s.iter().map(|x| x.us_per_packet).collect()),
            per_flow / base
        );
    }
    Ok(())
}
