//! Network reach: which addresses are private, and which addresses a browser leg's ICE may
//! talk to. The guarded outbound client ([`crate::outbound`]) refuses what
//! [`is_private`] calls private; browser calls pair only with candidates
//! [`ice_candidate_allowed`] lets through.

use std::net::IpAddr;

/// Loopback, link-local, private, unspecified, broadcast, shared (CGNAT), unique-local,
/// "this network" and the IPv4-mapped and IPv4-compatible forms of those.
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
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let seg = v6.segments();
            // ::a.b.c.d (deprecated IPv4-compatible form).
            if seg[..6].iter().all(|s| *s == 0) && !v6.is_loopback() && !v6.is_unspecified() {
                let o = v6.octets();
                return is_private(IpAddr::V4(std::net::Ipv4Addr::new(
                    o[12], o[13], o[14], o[15],
                )));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || (seg[0] & 0xfe00) == 0xfc00
                || (seg[0] & 0xffc0) == 0xfe80
        }
    }
}

/// Whether a browser's ICE candidate at `candidate` may be paired with an engine whose
/// media address is `media_ip`: only within the same reach. A loopback engine talks to
/// loopback candidates only; an engine on a private address to private ones; one on a
/// public address to public ones; one bound to every interface to private or public ones.
/// Link-local (cloud metadata), unspecified, multicast, broadcast, IPv4-mapped and
/// IPv4-compatible addresses never.
/// Connectivity checks go only to candidates that pass, so an offer cannot point the
/// engine's UDP at a network its media address does not serve.
pub fn ice_candidate_allowed(media_ip: IpAddr, candidate: IpAddr) -> bool {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ice_candidates_stay_within_the_media_address_reach() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let lo = ip("127.0.0.1");
        assert!(ice_candidate_allowed(lo, ip("127.0.0.1")));
        assert!(ice_candidate_allowed(lo, ip("127.3.0.9")));
        assert!(!ice_candidate_allowed(lo, ip("10.0.0.7")));
        assert!(!ice_candidate_allowed(lo, ip("93.184.216.34")));
        let lan = ip("10.0.0.5");
        assert!(ice_candidate_allowed(lan, ip("192.168.1.20")));
        assert!(!ice_candidate_allowed(lan, ip("127.0.0.1")));
        assert!(!ice_candidate_allowed(lan, ip("93.184.216.34")));
        let public = ip("203.0.113.9");
        assert!(ice_candidate_allowed(public, ip("93.184.216.34")));
        assert!(!ice_candidate_allowed(public, ip("10.0.0.7")));
        let any = ip("0.0.0.0");
        assert!(ice_candidate_allowed(any, ip("10.0.0.7")));
        assert!(ice_candidate_allowed(any, ip("93.184.216.34")));
        assert!(!ice_candidate_allowed(any, ip("127.0.0.1")));
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
                    !ice_candidate_allowed(media, ip(never)),
                    "{never} from {media}"
                );
            }
        }
    }
}
