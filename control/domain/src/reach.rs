//! Network reach: which addresses are private, and which addresses a browser leg's ICE may
//! talk to. The guarded outbound client ([`crate::guarded_http`]) refuses what
//! [`is_private`] calls private; browser calls pair only with candidates
//! [`ice_candidate_allowed`] lets through.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Loopback, link-local, private, unspecified, broadcast, shared (CGNAT), unique-local,
/// "this network", every IPv6 address that carries an IPv4 address a translator or tunnel
/// would deliver to ([`embedded_ipv4`]) when any IPv4 address it carries is one of those,
/// and the whole local-use NAT64 prefix `64:ff9b:1::/48` (RFC 8215: not globally
/// reachable; where it carries its IPv4 address depends on the local translator's prefix
/// length, so it cannot be read from the address).
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || o[0] == 0
        }
        IpAddr::V6(v6) => {
            let embedded = embedded_ipv4(v6);
            if !embedded.is_empty() {
                return embedded.into_iter().any(|v4| is_private(IpAddr::V4(v4)));
            }
            let seg = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || seg[..3] == [0x64, 0xff9b, 1]
                || (seg[0] & 0xfe00) == 0xfc00
                || (seg[0] & 0xffc0) == 0xfe80
        }
    }
}

/// The IPv4 addresses an IPv6 address stands for, where packets to it end up at an IPv4
/// address (a dual-stack host, a NAT64 translator, a 6to4 or Teredo relay); empty for any
/// other address. The forms:
/// * IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d` (SIIT) and the
///   deprecated IPv4-compatible `::a.b.c.d` (not `::` or `::1`): the last 32 bits;
/// * NAT64 well-known prefix `64:ff9b::/96` (RFC 6052): the last 32 bits;
/// * 6to4 `2002::/16` (RFC 3056): bits 16–47;
/// * Teredo `2001::/32` (RFC 4380): the server (bits 32–63) and the client (the last 32
///   bits, each inverted).
pub fn embedded_ipv4(v6: Ipv6Addr) -> Vec<Ipv4Addr> {
    let seg = v6.segments();
    let o = v6.octets();
    let at = |i: [usize; 4]| Ipv4Addr::new(o[i[0]], o[i[1]], o[i[2]], o[i[3]]);
    let last = at([12, 13, 14, 15]);
    match seg {
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0xffff, 0, ..] => vec![last],
        [0, 0, 0, 0, 0, 0, ..] if !v6.is_unspecified() && !v6.is_loopback() => vec![last],
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => vec![last],
        [0x2002, ..] => vec![at([2, 3, 4, 5])],
        [0x2001, 0, ..] => vec![at([4, 5, 6, 7]), Ipv4Addr::from(!u32::from(last))],
        _ => Vec::new(),
    }
}

/// Whether a browser leg's ICE may pair with, send to and hear from `candidate` (an address
/// of the offer, or the source of a connectivity check: a peer-reflexive candidate), for
/// an engine whose media address is `media_ip` on a host with the interface addresses
/// `host_addrs`: only within the media address's reach. A loopback engine talks to
/// loopback addresses and to this host's own addresses (a datagram to one never leaves
/// the machine: a browser on the same machine without loopback candidates sends its
/// checks from its interface address); an engine on a private address to private ones;
/// one on a public address to public ones; one bound to every interface to private or
/// public ones. Link-local (cloud metadata), unspecified, multicast, broadcast,
/// IPv4-mapped and IPv4-compatible addresses never.
/// Connectivity checks go only to candidates that pass and datagrams from any other source
/// are dropped, so neither an offer nor a packet can point the engine's UDP at a network
/// its media address does not serve.
pub fn ice_candidate_allowed(media_ip: IpAddr, host_addrs: &[IpAddr], candidate: IpAddr) -> bool {
    let never = match candidate {
        IpAddr::V4(v4) => {
            v4.is_link_local() || v4.is_unspecified() || v4.is_multicast() || v4.is_broadcast()
        }
        IpAddr::V6(v6) => {
            let seg = v6.segments();
            v6.is_unspecified()
                || v6.is_multicast()
                || (seg[0] & 0xffc0) == 0xfe80
                || v6.to_ipv4_mapped().is_some()
                // ::a.b.c.d, the deprecated IPv4-compatible form (::1 aside).
                || (seg[..6].iter().all(|s| *s == 0) && !v6.is_loopback())
        }
    };
    if never {
        return false;
    }
    let reach = |ip: IpAddr| {
        if ip.is_loopback() {
            0
        } else if is_private(ip) {
            1
        } else {
            2
        }
    };
    if media_ip.is_unspecified() {
        return !candidate.is_loopback();
    }
    reach(media_ip) == reach(candidate)
        || (media_ip.is_loopback() && host_addrs.contains(&candidate))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// `v4` written into a 32-bit Teredo client field (each bit inverted).
    fn teredo_client(v4: &str) -> String {
        let n = !u32::from(v4.parse::<Ipv4Addr>().unwrap());
        format!("{:x}:{:x}", n >> 16, n & 0xffff)
    }

    #[test]
    fn ipv6_addresses_carrying_an_ipv4_address_are_judged_by_it() {
        // Each form, carrying loopback, private, link-local (metadata) and CGNAT addresses.
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
        ] {
            let v4: Ipv4Addr = private.parse().unwrap();
            let hi = u32::from(v4) >> 16;
            let lo = u32::from(v4) & 0xffff;
            let forms = [
                format!("::ffff:{private}"),
                format!("::ffff:0:{private}"),
                format!("64:ff9b::{private}"),
                format!("64:ff9b::{hi:x}:{lo:x}"),
                format!("2002:{hi:x}:{lo:x}::1"),
                format!("2002:{hi:x}:{lo:x}:1234:5678::9"),
                // Teredo: a public server (65.54.227.120) and the client in the last 32 bits.
                format!("2001:0:4136:e378:8000:63bf:{}", teredo_client(private)),
                // Teredo: a private server, whatever the client.
                format!(
                    "2001:0:{hi:x}:{lo:x}:8000:63bf:{}",
                    teredo_client("8.8.8.8")
                ),
            ];
            for form in forms {
                let six: Ipv6Addr = form.parse().unwrap_or_else(|e| panic!("{form}: {e}"));
                assert!(
                    embedded_ipv4(six).contains(&v4) || form.starts_with("2001:0:4136"),
                    "{form} carries {private}: {:?}",
                    embedded_ipv4(six)
                );
                assert!(
                    is_private(IpAddr::V6(six)),
                    "{form} ({private}) judged public"
                );
            }
        }
        // Teredo clients are read inverted.
        let teredo: Ipv6Addr = format!("2001:0:4136:e378:8000:63bf:{}", teredo_client("127.0.0.1"))
            .parse()
            .unwrap();
        assert_eq!(
            embedded_ipv4(teredo),
            [Ipv4Addr::new(65, 54, 227, 120), Ipv4Addr::LOCALHOST]
        );
        // The same forms carrying public addresses stay public.
        for public in [
            "::ffff:8.8.8.8",
            "::ffff:0:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:808:808::1",
            &format!("2001:0:4136:e378:8000:63bf:{}", teredo_client("8.8.8.8")),
            "2606:4700::1111",
        ] {
            assert!(!is_private(ip(public)), "{public} judged private");
        }
        // The local-use NAT64 prefix is refused whatever it carries, at any prefix length.
        for local in [
            "64:ff9b:1::8.8.8.8",
            "64:ff9b:1:808:8:808::",
            "64:ff9b:1:ffff::1",
        ] {
            assert!(is_private(ip(local)), "{local} judged public");
        }
        // Addresses outside these prefixes carry nothing.
        for plain in [
            "::",
            "::1",
            "2606:4700::1111",
            "64:ff9b:2::1",
            "2001:db8::1",
            "fe80::1",
        ] {
            let IpAddr::V6(six) = ip(plain) else {
                unreachable!()
            };
            assert!(embedded_ipv4(six).is_empty(), "{plain}");
        }
    }

    #[test]
    fn ice_candidates_stay_within_the_media_address_reach() {
        let lo = ip("127.0.0.1");
        assert!(ice_candidate_allowed(lo, &[], ip("127.0.0.1")));
        assert!(ice_candidate_allowed(lo, &[], ip("127.3.0.9")));
        assert!(!ice_candidate_allowed(lo, &[], ip("10.0.0.7")));
        assert!(!ice_candidate_allowed(lo, &[], ip("93.184.216.34")));
        let lan = ip("10.0.0.5");
        assert!(ice_candidate_allowed(lan, &[], ip("192.168.1.20")));
        assert!(!ice_candidate_allowed(lan, &[], ip("127.0.0.1")));
        assert!(!ice_candidate_allowed(lan, &[], ip("93.184.216.34")));
        let public = ip("203.0.113.9");
        assert!(ice_candidate_allowed(public, &[], ip("93.184.216.34")));
        assert!(!ice_candidate_allowed(public, &[], ip("10.0.0.7")));
        let any = ip("0.0.0.0");
        assert!(ice_candidate_allowed(any, &[], ip("10.0.0.7")));
        assert!(ice_candidate_allowed(any, &[], ip("93.184.216.34")));
        assert!(!ice_candidate_allowed(any, &[], ip("127.0.0.1")));
        for never in [
            "169.254.169.254",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "::10.0.0.7",
        ] {
            for media in [lo, lan, public, any] {
                assert!(
                    !ice_candidate_allowed(media, &[ip(never)], ip(never)),
                    "{never} from {media}"
                );
            }
        }
    }

    #[test]
    fn a_loopback_engine_also_reaches_this_hosts_own_addresses() {
        // The host's interfaces: a LAN address and a public one.
        let host = [ip("127.0.0.1"), ip("192.168.1.5"), ip("203.0.113.7")];
        let lo = ip("127.0.0.1");
        // A browser on this machine sends its checks from an interface address.
        assert!(ice_candidate_allowed(lo, &host, ip("192.168.1.5")));
        assert!(ice_candidate_allowed(lo, &host, ip("203.0.113.7")));
        // Another machine's address, on the same LAN or not, stays out of reach.
        assert!(!ice_candidate_allowed(lo, &host, ip("192.168.1.6")));
        assert!(!ice_candidate_allowed(lo, &host, ip("93.184.216.34")));
        // Only a loopback engine: the others keep their reach.
        let lan = ip("192.168.1.5");
        assert!(!ice_candidate_allowed(lan, &host, ip("203.0.113.7")));
        assert!(!ice_candidate_allowed(lan, &host, ip("127.0.0.1")));
    }
}
