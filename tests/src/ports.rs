//! The ports a peer must be given before it starts, picked in this one place.
//!
//! Everything that can bind port 0 and say what it got does so: the engine's control API
//! and SIP socket (read back from its log, see [`crate::engine`]), the speech node (its
//! `listening on` line), the HTTP and RTP peers (their own sockets). What is left:
//!
//! * SIPp takes its SIP and media ports on its command line and reports neither, and an
//!   engine's trunk names its gateway (a SIPp) in the configuration it starts with, before
//!   the SIPp exists: [`free_udp_port`] picks such a port (free when asked; SIPp binds it
//!   a moment later).
//! * The engine's RTP range is configured as a range: [`rtp_range`] and [`rtp_ranges`].

use std::net::{SocketAddr, UdpSocket};

/// A UDP port free on 127.0.0.1 right now, for a SIPp (see the module's note): the only
/// port the harness picks and releases before its user binds it.
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("free udp port")
}

/// The RTP port range (200 ports) of this test process's engine: engines of parallel
/// test processes are spread over 30000–59999 by process id.
pub fn rtp_range() -> (u16, u16) {
    let base = 30000 + ((std::process::id() % 150) as u16) * 200;
    (base, base + 199)
}

/// [`rtp_range`] split into `n` equal parts of even start, one for each of `n` engines of
/// one test (each part's last 20 ports are that engine's ICE ports).
pub fn rtp_ranges(n: u16) -> Vec<(u16, u16)> {
    let (lo, hi) = rtp_range();
    let width = ((hi - lo + 1) / n) & !1;
    (0..n)
        .map(|i| (lo + i * width, lo + (i + 1) * width - 1))
        .collect()
}

/// A TCP address on 127.0.0.1 where nothing listens: connecting is refused for as long as
/// the returned socket lives (it holds the port, bound but not listening).
pub fn refused_tcp_addr() -> (tokio::net::TcpSocket, SocketAddr) {
    let sock = tokio::net::TcpSocket::new_v4().expect("tcp socket");
    sock.bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .expect("bind");
    let addr = sock.local_addr().expect("addr");
    (sock, addr)
}
