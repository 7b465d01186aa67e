//! A browser peer's ICE socket, with the remote-address policy applied to every datagram.
//!
//! The ICE agent is given this socket through webrtc's `UDPNetwork::Muxed` (the only way
//! its API lets a caller own the sockets): one UDP socket per agent, bound on the peer's
//! address within its port range, that
//! - hands the agent no datagram from an address the policy refuses, so STUN from such an
//!   address never becomes a peer-reflexive candidate, is never answered and never paired;
//! - sends nothing to an address the policy refuses (the send fails).
//!
//! The candidates of the offer are judged before the agent sees them
//! ([`super::policy::filter_candidates`]); this is the second, independent place the same
//! policy holds, for addresses the agent learns any other way.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;
use tracing::debug;
use webrtc::ice::udp_mux::UDPMux;
use webrtc::util::Conn;

use super::policy::RemotePolicy;

type ConnResult<T> = Result<T, webrtc::util::Error>;

/// How many distinct refused sources a peer remembers (for the reason of a failed call).
const REMEMBERED_REFUSALS: usize = 4;

/// The sources whose datagrams a peer's socket dropped, first seen first.
#[derive(Default)]
pub(super) struct Refused(Mutex<Vec<IpAddr>>);

impl Refused {
    fn note(&self, ip: IpAddr) {
        let mut seen = self.0.lock();
        if seen.len() < REMEMBERED_REFUSALS && !seen.contains(&ip) {
            seen.push(ip);
        }
    }

    pub(super) fn list(&self) -> Vec<IpAddr> {
        self.0.lock().clone()
    }
}

/// The agent's sockets, by local ICE username fragment (one agent, one fragment).
pub(super) struct PolicedUdp {
    ip: IpAddr,
    port_min: u16,
    port_max: u16,
    allow: Arc<RemotePolicy>,
    refused: Arc<Refused>,
    conns: Mutex<HashMap<String, Arc<PolicedConn>>>,
}

impl PolicedUdp {
    pub(super) fn new(
        ip: IpAddr,
        port_min: u16,
        port_max: u16,
        allow: Arc<RemotePolicy>,
        refused: Arc<Refused>,
    ) -> Arc<PolicedUdp> {
        Arc::new(PolicedUdp {
            ip,
            port_min,
            port_max,
            allow,
            refused,
            conns: Mutex::new(HashMap::new()),
        })
    }
}

#[async_trait]
impl UDPMux for PolicedUdp {
    async fn close(&self) -> ConnResult<()> {
        for (_, c) in self.conns.lock().drain() {
            c.closed.cancel();
        }
        Ok(())
    }

    async fn get_conn(self: Arc<Self>, ufrag: &str) -> ConnResult<Arc<dyn Conn + Send + Sync>> {
        if let Some(c) = self.conns.lock().get(ufrag) {
            return Ok(c.clone());
        }
        let sock = bind_in_range(self.ip, self.port_min, self.port_max).await?;
        let conn = Arc::new(PolicedConn {
            local: sock.local_addr()?,
            sock,
            allow: self.allow.clone(),
            refused: self.refused.clone(),
            closed: CancellationToken::new(),
        });
        self.conns.lock().insert(ufrag.to_owned(), conn.clone());
        Ok(conn)
    }

    async fn remove_conn_by_ufrag(&self, ufrag: &str) {
        if let Some(c) = self.conns.lock().remove(ufrag) {
            c.closed.cancel();
        }
    }
}

/// A UDP socket on `ip` with a port in `min..=max` (any port when both are 0), trying the
/// range from a random place.
async fn bind_in_range(ip: IpAddr, min: u16, max: u16) -> ConnResult<UdpSocket> {
    if min == 0 && max == 0 {
        return Ok(UdpSocket::bind(SocketAddr::new(ip, 0)).await?);
    }
    let (min, max) = (u32::from(min.max(1)), u32::from(max.max(min.max(1))));
    let span = max - min + 1;
    let start = rand::random_range(0..span);
    for i in 0..span {
        let port = (min + (start + i) % span) as u16;
        if let Ok(s) = UdpSocket::bind(SocketAddr::new(ip, port)).await {
            return Ok(s);
        }
    }
    Err(webrtc::util::Error::Other(format!(
        "no free UDP port on {ip} in {min}-{max}"
    )))
}

/// One agent's socket: datagrams from refused addresses are dropped, sends to them fail.
pub(super) struct PolicedConn {
    sock: UdpSocket,
    local: SocketAddr,
    allow: Arc<RemotePolicy>,
    refused: Arc<Refused>,
    closed: CancellationToken,
}

impl PolicedConn {
    fn refused(&self, to: SocketAddr) -> webrtc::util::Error {
        webrtc::util::Error::Other(format!(
            "{} is outside what this browser leg may reach",
            to.ip()
        ))
    }
}

#[async_trait]
impl Conn for PolicedConn {
    async fn connect(&self, _addr: SocketAddr) -> ConnResult<()> {
        Err(std::io::Error::other("an ICE socket is not connected").into())
    }

    async fn recv(&self, buf: &mut [u8]) -> ConnResult<usize> {
        Ok(self.recv_from(buf).await?.0)
    }

    async fn recv_from(&self, buf: &mut [u8]) -> ConnResult<(usize, SocketAddr)> {
        loop {
            let (n, from) = tokio::select! {
                r = self.sock.recv_from(buf) => r?,
                _ = self.closed.cancelled() => return Err(webrtc::util::Error::ErrUseClosedNetworkConn),
            };
            // An IPv4 peer of a dual-stack socket is seen as `::ffff:a.b.c.d`: it is judged,
            // and becomes a peer-reflexive candidate, as the IPv4 address it is.
            let from = SocketAddr::new(from.ip().to_canonical(), from.port());
            if (self.allow)(from.ip()) {
                return Ok((n, from));
            }
            self.refused.note(from.ip());
            debug!(%from, "ICE: a datagram from a refused address dropped");
        }
    }

    async fn send(&self, _buf: &[u8]) -> ConnResult<usize> {
        Err(std::io::Error::other("an ICE socket is not connected").into())
    }

    async fn send_to(&self, buf: &[u8], target: SocketAddr) -> ConnResult<usize> {
        if self.closed.is_cancelled() {
            return Err(webrtc::util::Error::ErrUseClosedNetworkConn);
        }
        if !(self.allow)(target.ip()) {
            debug!(%target, "ICE: a send to a refused address stopped");
            return Err(self.refused(target));
        }
        // A dual-stack socket reaches an IPv4 address in its IPv4-mapped form.
        let to = match (target, self.local) {
            (SocketAddr::V4(v4), SocketAddr::V6(_)) => {
                SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
            }
            _ => target,
        };
        Ok(self.sock.send_to(buf, to).await?)
    }

    fn local_addr(&self) -> ConnResult<SocketAddr> {
        Ok(self.local)
    }

    fn remote_addr(&self) -> Option<SocketAddr> {
        None
    }

    async fn close(&self) -> ConnResult<()> {
        self.closed.cancel();
        Ok(())
    }

    fn as_any(&self) -> &(dyn std::any::Any + Send + Sync) {
        self
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use super::*;

    fn lo(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    #[tokio::test]
    async fn refused_addresses_neither_reach_the_agent_nor_are_sent_to() {
        let refused_seen = Arc::new(Refused::default());
        let mux = PolicedUdp::new(
            lo(1),
            0,
            0,
            Arc::new(|ip: IpAddr| ip == lo(1)),
            refused_seen.clone(),
        );
        let conn = mux.clone().get_conn("ufrag").await.unwrap();
        let at = conn.local_addr().unwrap();
        // The same fragment gets the same socket.
        let again = mux.clone().get_conn("ufrag").await.unwrap();
        assert_eq!(again.local_addr().unwrap(), at);

        let refused = UdpSocket::bind(SocketAddr::new(lo(2), 0)).await.unwrap();
        let allowed = UdpSocket::bind(SocketAddr::new(lo(1), 0)).await.unwrap();
        refused
            .send_to(b"from a refused address", at)
            .await
            .unwrap();
        allowed.send_to(b"from an allowed one", at).await.unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = tokio::time::timeout(Duration::from_secs(2), conn.recv_from(&mut buf))
            .await
            .expect("the allowed datagram arrives")
            .unwrap();
        assert_eq!(&buf[..n], b"from an allowed one");
        assert_eq!(from, allowed.local_addr().unwrap());
        // The dropped source is remembered, for the reason of a call that cannot connect.
        assert_eq!(refused_seen.list(), [lo(2)]);

        // Sends: to the refused address an error, nothing on the wire; to the allowed one
        // the datagram.
        let e = conn
            .send_to(b"probe", refused.local_addr().unwrap())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("127.0.0.2"), "{e}");
        conn.send_to(b"reply", allowed.local_addr().unwrap())
            .await
            .unwrap();
        let (n, _) = tokio::time::timeout(Duration::from_secs(2), allowed.recv_from(&mut buf))
            .await
            .expect("the allowed address is reached")
            .unwrap();
        assert_eq!(&buf[..n], b"reply");
        let nothing =
            tokio::time::timeout(Duration::from_millis(200), refused.recv_from(&mut buf)).await;
        assert!(nothing.is_err(), "nothing reached the refused address");

        // Removing the fragment closes the socket: a pending read ends.
        let reading = tokio::spawn({
            let conn = conn.clone();
            async move {
                let mut buf = [0u8; 8];
                conn.recv_from(&mut buf).await
            }
        });
        mux.remove_conn_by_ufrag("ufrag").await;
        let ended = tokio::time::timeout(Duration::from_secs(2), reading)
            .await
            .expect("the read ends")
            .unwrap();
        assert!(ended.is_err());
    }

    #[tokio::test]
    async fn ports_come_from_the_range() {
        let mux = PolicedUdp::new(
            lo(1),
            42100,
            42101,
            Arc::new(|_: IpAddr| true),
            Arc::default(),
        );
        let a = mux.clone().get_conn("a").await.unwrap();
        let b = mux.clone().get_conn("b").await.unwrap();
        let mut ports = [
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        ];
        ports.sort();
        assert_eq!(ports, [42100, 42101]);
        let e = mux
            .clone()
            .get_conn("c")
            .await
            .err()
            .expect("the range is full");
        assert!(e.to_string().contains("42100-42101"), "{e}");
    }

    /// A dual-stack socket hears an IPv4 browser at `::ffff:a.b.c.d`: the policy judges,
    /// and the agent sees, the IPv4 address.
    #[tokio::test]
    async fn ipv4_sources_of_a_dual_stack_socket_are_judged_as_ipv4() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let policy = {
            let seen = seen.clone();
            move |ip: IpAddr| {
                seen.lock().push(ip);
                ip == lo(1)
            }
        };
        let Ok(probe) = std::net::UdpSocket::bind("[::]:0") else {
            // No IPv6 on this host: nothing to check.
            return;
        };
        drop(probe);
        let mux = PolicedUdp::new(
            IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
            0,
            0,
            Arc::new(policy),
            Arc::default(),
        );
        let conn = mux.clone().get_conn("ufrag").await.unwrap();
        let port = conn.local_addr().unwrap().port();
        let browser = UdpSocket::bind(SocketAddr::new(lo(1), 0)).await.unwrap();
        browser
            .send_to(b"check", SocketAddr::new(lo(1), port))
            .await
            .unwrap();
        let mut buf = [0u8; 16];
        let (_, from) = tokio::time::timeout(Duration::from_secs(2), conn.recv_from(&mut buf))
            .await
            .expect("the IPv4 datagram arrives")
            .unwrap();
        assert_eq!(from, browser.local_addr().unwrap());
        assert_eq!(*seen.lock(), [lo(1)]);
    }
}
