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
//! in one of eight modes, one packet per flow every 20 ms:
//!
//! - `send-only`: one socket per flow, `sendto` each tick, never reads: what SIPp's UAS
//!   does with its prompt (the caller's packets are left in the socket).
//! - `per-call`: one socket per flow, drained with `recvmmsg` then one `sendto` each tick:
//!   what callsmith's media worker does.
//! - `connected`: `per-call` with each socket connected to its peer, sending with `send`
//!   (the route is looked up once, at `connect`).
//! - `shared`: one socket for every flow, drained with `recvmmsg` 64 at a time and sent
//!   with `sendmmsg` 64 at a time, each message to its own flow's address.
//! - Four ways through one io_uring (see [`Uring`] and [`UringMulti`]): connected and
//!   registered sockets with `recv`/`send` for all flows in one kernel entry; `recvmsg`
//!   (with the source address) and `send` with a destination, 50 flows (a media worker's
//!   slot at 1000 calls) per entry; `recvmmsg` per flow with only the sends through the
//!   ring; and a multishot `recvmsg` armed once per socket, filling buffers from a ring.
//!   Each receive reads one datagram: the kernel does not say whether a UDP socket holds
//!   more after a `recvmsg`.
//!
//! Printed per mode: the measured side's CPU (the process's less the peer thread's, so
//! work the kernel hands to io_uring's worker threads counts) as % of a core, per flow,
//! and per packet handled (sent + received), medians over the runs (the modes alternate
//! within each run), and each mode's ratio to `send-only` per flow. On loopback
//! the sender also pays the receiving socket's delivery, so `sendto` is the larger cost.
//! Only 127.0.0.1 is ever a target.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Parser;

const PERIOD: Duration = Duration::from_millis(20);
const PACKET: usize = 172;
const BATCH: usize = 64;

#[derive(Parser, Debug)]
#[command(about = "CPU per RTP packet on loopback: per-call sockets, one shared socket, io_uring")]
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
    Uring,
    UringSlot,
    UringSendRecvmmsg,
    UringMulti,
}

impl Mode {
    const ALL: [Mode; 8] = [
        Mode::SendOnly,
        Mode::PerCall,
        Mode::Connected,
        Mode::Shared,
        Mode::Uring,
        Mode::UringSlot,
        Mode::UringSendRecvmmsg,
        Mode::UringMulti,
    ];
    fn name(self) -> &'static str {
        match self {
            Mode::SendOnly => "send-only (SIPp's UAS)",
            Mode::PerCall => "per-call (callsmith)",
            Mode::Connected => "per-call, connected",
            Mode::Shared => "shared + mmsg",
            Mode::Uring => "io_uring, connected, registered",
            Mode::UringSlot => "io_uring, recvmsg + sendto, 50 a batch",
            Mode::UringSendRecvmmsg => "recvmmsg + io_uring sends",
            Mode::UringMulti => "io_uring, multishot recvmsg + sendto",
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

/// CPU time on `clock` (`CLOCK_THREAD_CPUTIME_ID` or `CLOCK_PROCESS_CPUTIME_ID`).
fn cpu_time(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
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

/// Flows per kernel entry in `Mode::UringSlot`: a media worker's slot at 1000 calls (20
/// slots of the 20 ms period).
const SLOT_FLOWS: usize = 50;

/// One `recvmsg` a flow: its header, the source address and the buffer (set up once).
struct MsgRx {
    hdr: libc::msghdr,
    name: libc::sockaddr_storage,
    iov: libc::iovec,
    buf: [u8; 256],
}

/// Per-call sockets driven through one io_uring: each tick queues a non-blocking receive
/// and a send for every flow, `batch` flows per kernel entry.
/// - `Mode::Uring`: sockets connected to their peer and registered with the ring; `recv`
///   and `send` (no address either way, no file lookup).
/// - `Mode::UringSlot`: what a media worker would do with unconnected sockets: `recvmsg`
///   (the source address is needed to latch) and `send` with a destination, a slot's
///   worth of flows per entry.
/// - `Mode::UringSendRecvmmsg`: `recvmmsg` per flow as in `per-call`, only the sends
///   through the ring.
struct Uring {
    ring: io_uring::IoUring,
    bufs: Vec<[u8; 256]>,
    msgs: Vec<MsgRx>,
    packet: Box<[u8; PACKET]>,
    /// Each flow's peer when the sockets are not connected (and not registered).
    dest: Option<Vec<libc::sockaddr_in>>,
    fds: Vec<i32>,
    batch: usize,
    receive: bool,
}

impl Uring {
    fn new(own: &[UdpSocket], mode: Mode, to: &[SocketAddr]) -> Result<Uring> {
        let ring = io_uring::IoUring::builder()
            .setup_single_issuer()
            .setup_coop_taskrun()
            .build(4096)?;
        let fds: Vec<i32> = own.iter().map(|s| s.as_raw_fd()).collect();
        let dest = if mode == Mode::Uring {
            ring.submitter().register_files(&fds)?;
            None
        } else {
            Some(to.iter().map(|a| v4(*a)).collect::<Result<Vec<_>>>()?)
        };
        // SAFETY: all-zero is a valid value for these plain C structs and the buffer.
        let mut msgs: Vec<MsgRx> = (0..own.len())
            .map(|_| unsafe { std::mem::zeroed() })
            .collect();
        // The vector is not resized again: the pointers into it stay valid.
        for m in &mut msgs {
            m.iov = libc::iovec {
                iov_base: m.buf.as_mut_ptr().cast(),
                iov_len: m.buf.len(),
            };
            m.hdr.msg_name = (&mut m.name as *mut libc::sockaddr_storage).cast();
            m.hdr.msg_iov = &mut m.iov;
            m.hdr.msg_iovlen = 1;
        }
        Ok(Uring {
            ring,
            bufs: vec![[0u8; 256]; own.len()],
            msgs,
            packet: Box::new([0x80u8; PACKET]),
            dest,
            fds,
            batch: if mode == Mode::UringSlot {
                SLOT_FLOWS
            } else {
                2048
            },
            receive: mode != Mode::UringSendRecvmmsg,
        })
    }

    /// One tick: a receive (unless `recvmmsg` does it) and a send per flow; returns
    /// (sent, received).
    fn tick(&mut self) -> Result<(u64, u64)> {
        use io_uring::{opcode, types};
        let (mut sent, mut received) = (0u64, 0u64);
        for start in (0..self.fds.len()).step_by(self.batch) {
            let end = (start + self.batch).min(self.fds.len());
            let mut pending = 0;
            {
                let mut sq = self.ring.submission();
                for i in start..end {
                    let (recv, send) = match &self.dest {
                        None => (
                            opcode::Recv::new(
                                types::Fixed(i as u32),
                                self.bufs[i].as_mut_ptr(),
                                256,
                            )
                            .flags(libc::MSG_DONTWAIT)
                            .build(),
                            opcode::Send::new(
                                types::Fixed(i as u32),
                                self.packet.as_ptr(),
                                PACKET as u32,
                            )
                            .build(),
                        ),
                        Some(dest) => {
                            let m = &mut self.msgs[i];
                            m.hdr.msg_namelen =
                                std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                            (
                                opcode::RecvMsg::new(types::Fd(self.fds[i]), &mut m.hdr)
                                    .flags(libc::MSG_DONTWAIT as u32)
                                    .build(),
                                opcode::Send::new(
                                    types::Fd(self.fds[i]),
                                    self.packet.as_ptr(),
                                    PACKET as u32,
                                )
                                .dest_addr((&dest[i] as *const libc::sockaddr_in).cast())
                                .dest_addr_len(std::mem::size_of::<libc::sockaddr_in>() as u32)
                                .flags(libc::MSG_DONTWAIT)
                                .build(),
                            )
                        }
                    };
                    // SAFETY: the buffers, headers and addresses live in `self` and every
                    // completion is reaped below, before they are touched again.
                    unsafe {
                        if self.receive {
                            sq.push(&recv.user_data(0))?;
                            pending += 1;
                        }
                        sq.push(&send.user_data(1))?;
                    }
                    pending += 1;
                }
            }
            self.ring.submit_and_wait(pending)?;
            for cqe in self.ring.completion() {
                if cqe.result() > 0 {
                    if cqe.user_data() == 1 {
                        sent += 1;
                    } else {
                        received += 1;
                    }
                }
            }
        }
        Ok((sent, received))
    }
}

/// The process's CPU less the peer thread's: the measured thread's own, and any kernel
/// worker thread it hands work to (io_uring's io-wq workers belong to the process).
fn own_cpu(peer: &AtomicU64) -> Duration {
    cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID)
        .saturating_sub(Duration::from_nanos(peer.load(Ordering::Relaxed)))
}

const MULTI_BUFS: u16 = 4096;
const MULTI_BUF: usize = 256;

/// Per-call sockets, each with one multishot `recvmsg` armed for good that takes its
/// buffers from a ring the kernel fills as datagrams arrive; each tick queues one send per
/// flow (with its destination) and enters the kernel once, then reaps what arrived.
struct UringMulti {
    ring: io_uring::IoUring,
    fds: Vec<i32>,
    dest: Vec<libc::sockaddr_in>,
    packet: Box<[u8; PACKET]>,
    msghdr: Box<libc::msghdr>,
    br: *mut io_uring::types::BufRingEntry,
    bufs: Vec<u8>,
    tail: u16,
}

impl UringMulti {
    fn new(own: &[UdpSocket], to: &[SocketAddr]) -> Result<UringMulti> {
        let ring = io_uring::IoUring::builder()
            .setup_single_issuer()
            .setup_coop_taskrun()
            .build(4096)?;
        let layout = std::alloc::Layout::from_size_align(MULTI_BUFS as usize * 16, 4096)?;
        // SAFETY: a non-zero layout.
        let br = unsafe { std::alloc::alloc_zeroed(layout) } as *mut io_uring::types::BufRingEntry;
        // SAFETY: the ring memory lives as long as the ring (leaked with it at the end).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(br as u64, MULTI_BUFS, 0, 0)?
        };
        // SAFETY: all-zero is a valid msghdr.
        let mut msghdr: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msghdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
        let mut m = UringMulti {
            ring,
            fds: own.iter().map(|s| s.as_raw_fd()).collect(),
            dest: to.iter().map(|a| v4(*a)).collect::<Result<_>>()?,
            packet: Box::new([0x80u8; PACKET]),
            msghdr,
            br,
            bufs: vec![0u8; MULTI_BUFS as usize * MULTI_BUF],
            tail: 0,
        };
        for bid in 0..MULTI_BUFS {
            m.give_back(bid);
        }
        m.publish();
        for i in 0..m.fds.len() {
            m.arm(i)?;
            if m.ring.submission().is_full() {
                m.ring.submit()?;
            }
        }
        m.ring.submit()?;
        Ok(m)
    }

    fn arm(&mut self, flow: usize) -> Result<()> {
        let sqe = io_uring::opcode::RecvMsgMulti::new(
            io_uring::types::Fd(self.fds[flow]),
            &*self.msghdr,
            0,
        )
        .build()
        .user_data(flow as u64 | 1 << 63);
        // SAFETY: the msghdr is boxed in self and outlives the request.
        unsafe { self.ring.submission().push(&sqe)? };
        Ok(())
    }

    fn give_back(&mut self, bid: u16) {
        let idx = (self.tail & (MULTI_BUFS - 1)) as usize;
        // SAFETY: idx is within the ring's entries.
        let e = unsafe { &mut *self.br.add(idx) };
        e.set_addr(self.bufs.as_ptr() as u64 + bid as u64 * MULTI_BUF as u64);
        e.set_len(MULTI_BUF as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail lives in the ring's first entry; the kernel reads it atomically.
        let tail = unsafe { io_uring::types::BufRingEntry::tail(self.br) }
            as *const std::sync::atomic::AtomicU16;
        unsafe { (*tail).store(self.tail, Ordering::Release) };
    }

    fn tick(&mut self) -> Result<(u64, u64)> {
        use io_uring::{cqueue, opcode, types};
        let (mut sent, mut received) = (0u64, 0u64);
        let mut pending = 0usize;
        let mut next = 0usize;
        let mut rearm = Vec::new();
        while next < self.fds.len() || pending > 0 {
            {
                let mut sq = self.ring.submission();
                while next < self.fds.len() && !sq.is_full() {
                    let send = opcode::Send::new(
                        types::Fd(self.fds[next]),
                        self.packet.as_ptr(),
                        PACKET as u32,
                    )
                    .dest_addr((&self.dest[next] as *const libc::sockaddr_in).cast())
                    .dest_addr_len(std::mem::size_of::<libc::sockaddr_in>() as u32)
                    .flags(libc::MSG_DONTWAIT)
                    .build()
                    .user_data(next as u64);
                    // SAFETY: the packet and addresses live in self.
                    unsafe { sq.push(&send)? };
                    next += 1;
                    pending += 1;
                }
            }
            self.ring.submit_and_wait(pending.min(1))?;
            let mut done = Vec::new();
            for cqe in self.ring.completion() {
                done.push((cqe.user_data(), cqe.result(), cqe.flags()));
            }
            for (ud, res, flags) in done {
                if ud & 1 << 63 == 0 {
                    pending -= 1;
                    if res > 0 {
                        sent += 1;
                    }
                    continue;
                }
                if let Some(bid) = cqueue::buffer_select(flags) {
                    let start = bid as usize * MULTI_BUF;
                    let buf = &self.bufs[start..start + res.max(0) as usize];
                    if res > 0 && io_uring::types::RecvMsgOut::parse(buf, &self.msghdr).is_ok() {
                        received += 1;
                    }
                    self.give_back(bid);
                }
                if !cqueue::more(flags) {
                    rearm.push((ud & !(1 << 63)) as usize);
                }
            }
            self.publish();
        }
        for f in rearm {
            self.arm(f)?;
        }
        Ok((sent, received))
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
    let peer_cpu = Arc::new(AtomicU64::new(0));
    let peer_cpu_w = peer_cpu.clone();
    let peer = std::thread::spawn(move || {
        let packet = [0x80u8; PACKET];
        let mut rx = Rx::new();
        let mut next = Instant::now();
        while !peer_stop.load(Ordering::Relaxed) {
            for (s, to) in peers.iter().zip(&targets) {
                let _ = s.send_to(&packet, to);
                rx.drain(s);
            }
            peer_cpu_w.store(
                cpu_time(libc::CLOCK_THREAD_CPUTIME_ID).as_nanos() as u64,
                Ordering::Relaxed,
            );
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
    if matches!(mode, Mode::Connected | Mode::Uring) {
        for (s, to) in own.iter().zip(&peer_addrs) {
            s.connect(to)?;
        }
    }
    let mut multi = match mode {
        Mode::UringMulti => Some(UringMulti::new(&own, &peer_addrs)?),
        _ => None,
    };
    let mut uring = match mode {
        Mode::Uring | Mode::UringSlot | Mode::UringSendRecvmmsg => {
            Some(Uring::new(&own, mode, &peer_addrs)?)
        }
        _ => None,
    };
    let mut next = Instant::now();
    let mut cpu0 = None;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if cpu0.is_none() && now >= settle {
            cpu0 = Some((own_cpu(&peer_cpu), now, sent, received));
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
            Mode::UringMulti => {
                let (s, r) = multi.as_mut().expect("ring").tick()?;
                sent += s;
                received += r;
            }
            Mode::UringSendRecvmmsg => {
                for s in &own {
                    received += rx.drain(s);
                }
                let (s, _) = uring.as_mut().expect("ring").tick()?;
                sent += s;
            }
            Mode::Uring | Mode::UringSlot => {
                let (s, r) = uring.as_mut().expect("ring").tick()?;
                sent += s;
                received += r;
            }
        }
        next += PERIOD;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    let (c0, t0, s0, r0) = cpu0.ok_or_else(|| anyhow::anyhow!("the run never settled"))?;
    let cpu = own_cpu(&peer_cpu) - c0;
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
