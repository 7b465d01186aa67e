//! `[media]`: the RTP and ICE sockets, and the address written into SDP.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// `[media]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MediaSection {
    /// Pacing worker threads. Default 1.
    pub workers: usize,
    /// Address RTP sockets bind to. Default `127.0.0.1`.
    pub bind_ip: std::net::IpAddr,
    /// Address written into SDP (SIP offers and answers) and announced by browser legs'
    /// ICE candidates, when peers reach the engine at another address than `bind_ip`
    /// (NAT) or `bind_ip` is a wildcard. A concrete address of `bind_ip`'s family.
    /// Default: `bind_ip`; for a wildcard `bind_ip`, the host's one address of that family
    /// that is not loopback or link-local ([`MediaSection::sdp_address`]).
    pub advertised_ip: Option<std::net::IpAddr>,
    /// RTP port range (even ports RTP, odd RTCP). Default 20000..29999.
    pub rtp_port_min: u16,
    pub rtp_port_max: u16,
    /// An answered call whose peer sends no RTP for this many ms is hung up
    /// (`end_reason` `rtp_timeout`); 0 turns the check off. Default 30000.
    pub rtp_timeout_ms: u64,
    /// Caller speech (voiced ms from its onset) that interrupts an interruptible prompt;
    /// shorter speech ("mm-hm") is a backchannel and the prompt plays on. 0 interrupts at
    /// the onset. Default 300.
    pub barge_in_min_ms: u32,
    /// UDP port range of browser legs' ICE sockets (one port per browser call).
    /// Default 30000..30999.
    pub ice_port_min: u16,
    pub ice_port_max: u16,
}

impl Default for MediaSection {
    fn default() -> Self {
        MediaSection {
            workers: 1,
            bind_ip: std::net::IpAddr::from([127, 0, 0, 1]),
            advertised_ip: None,
            rtp_port_min: 20000,
            rtp_port_max: 29999,
            rtp_timeout_ms: 30_000,
            barge_in_min_ms: callsmith_media::vad::BARGE_IN_MIN_MS,
            ice_port_min: 30000,
            ice_port_max: 30999,
        }
    }
}

impl MediaSection {
    /// The address SDP carries for this node's media, never an unspecified one:
    /// `advertised_ip` when set (a concrete address of `bind_ip`'s family), else a concrete
    /// `bind_ip`, else, for a wildcard `bind_ip`, the one address of its family among
    /// `host_addrs` (this host's interface addresses) that is not loopback, link-local or
    /// multicast. An error naming `media.advertised_ip` when that is not one address.
    pub fn sdp_address(&self, host_addrs: &[IpAddr]) -> anyhow::Result<IpAddr> {
        let bind = self.bind_ip;
        let family = if bind.is_ipv4() { "IPv4" } else { "IPv6" };
        if let Some(a) = self.advertised_ip {
            anyhow::ensure!(
                !a.is_unspecified() && !a.is_multicast(),
                "media.advertised_ip is {a}: it must be the concrete address SIP peers and \
                 browsers send media to"
            );
            anyhow::ensure!(
                a.is_ipv4() == bind.is_ipv4(),
                "media.advertised_ip {a} is not an {family} address like media.bind_ip {bind}"
            );
            return Ok(a);
        }
        if !bind.is_unspecified() {
            return Ok(bind);
        }
        let mut found: Vec<IpAddr> = host_addrs
            .iter()
            .copied()
            .filter(|ip| ip.is_ipv4() == bind.is_ipv4() && announceable(*ip))
            .collect();
        found.sort();
        found.dedup();
        match found.as_slice() {
            [one] => Ok(*one),
            [] => anyhow::bail!(
                "media.bind_ip is {bind} (every interface) and this host has no {family} \
                 address other than loopback and link-local to write into SDP in its place: \
                 set media.advertised_ip to the address SIP peers and browsers reach"
            ),
            several => anyhow::bail!(
                "media.bind_ip is {bind} (every interface) and this host has several {family} \
                 addresses ({}): set media.advertised_ip to the one SIP peers and browsers \
                 reach (SDP never carries {bind})",
                several
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// An interface address a wildcard media address may be announced as: not loopback,
/// link-local, multicast or unspecified.
fn announceable(ip: IpAddr) -> bool {
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    !ip.is_loopback() && !ip.is_unspecified() && !ip.is_multicast() && !link_local
}
