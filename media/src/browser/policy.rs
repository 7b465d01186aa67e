//! Which remote ICE candidates of a browser's offer the peer may pair with, judged on the
//! description as the WebRTC stack reads it.
//!
//! The offer is parsed with the parser the peer connection itself uses
//! (`webrtc::sdp::SessionDescription::unmarshal`), each candidate attribute is read with the
//! ICE agent's own candidate parser (`unmarshal_candidate`), and what is left is written
//! back out ([`SessionDescription::marshal`]). Only that text goes to the peer connection, and
//! it is parsed once more here and checked candidate by candidate, so no spelling of a line
//! (whitespace after `a=`, a carriage return before it, Unicode spaces, another section) can
//! carry a candidate past the policy: what is judged is what the agent gets.

use std::io::Cursor;
use std::net::IpAddr;

use webrtc::ice::candidate::candidate_base::unmarshal_candidate;
use webrtc::ice::candidate::{Candidate, CandidateType};
use webrtc::sdp::SessionDescription;
use webrtc::sdp::description::common::Attribute;

use super::BrowserError;

/// The caller's answer to "may the engine's ICE talk to this address?".
pub type RemotePolicy = dyn Fn(IpAddr) -> bool + Send + Sync;

/// How many refused candidates an error message names.
const NAMED_REFUSALS: usize = 8;

/// A candidate attribute judged: the address the agent would pair with, or why it may not.
pub fn judge_candidate(value: &str, allow: &dyn Fn(IpAddr) -> bool) -> Result<IpAddr, String> {
    let shown = shown_address(value);
    let c = unmarshal_candidate(value)
        .map_err(|_| format!("{shown} (not a candidate the ICE agent can read)"))?;
    if c.candidate_type() != CandidateType::Host {
        return Err(format!(
            "{shown} ({} candidate: only host candidates are paired)",
            c.candidate_type()
        ));
    }
    if !c.network_type().is_udp() {
        return Err(format!("{shown} (not UDP: the engine's ICE is UDP only)"));
    }
    // A host candidate whose address is a `.local` name is not resolved by the agent (mDNS
    // is off) and has no address to judge.
    if c.address().parse::<IpAddr>().is_err() {
        return Err(format!("{shown} (a name, not an address)"));
    }
    // The address as the agent resolved it: where its checks would go.
    let ip = c.addr().ip();
    if !allow(ip) {
        return Err(format!("{ip} (outside the media address's reach)"));
    }
    Ok(ip)
}

/// The address field of a candidate value, for messages (escaped, at most 64 characters).
fn shown_address(value: &str) -> String {
    let raw = value.split_whitespace().nth(4).unwrap_or("?");
    let escaped: String = raw.escape_debug().collect();
    match escaped.char_indices().nth(64) {
        Some((cut, _)) => format!("{}…", &escaped[..cut]),
        None => escaped,
    }
}

/// Parses SDP exactly as the peer connection does (`RTCSessionDescription::unmarshal`).
pub fn parse_sdp(sdp: &str) -> Result<SessionDescription, String> {
    SessionDescription::unmarshal(&mut Cursor::new(sdp.as_bytes())).map_err(|e| e.to_string())
}

/// Every candidate attribute the description holds, session level and every media section
/// (the agent reads those of active media sections; all are listed, to be judged).
pub fn candidate_attributes(desc: &SessionDescription) -> impl Iterator<Item = &Attribute> {
    desc.attributes
        .iter()
        .chain(
            desc.media_descriptions
                .iter()
                .flat_map(|m| m.attributes.iter()),
        )
        .filter(|a| a.is_ice_candidate())
}

/// Whether a candidate the agent is not given still shows where the browser's
/// connectivity checks may come from, so that the engine can pair with it peer-reflexively
/// (the check's source judged by the same policy at the socket): a UDP candidate whose
/// address is a name (an mDNS `.local` name hides the browser's address, which only its
/// checks reveal; [`is_mdns_name`]) or whose address the policy allows (a server-reflexive or relay
/// candidate: checks come from that address).
pub fn may_send_checks(value: &str, allow: &dyn Fn(IpAddr) -> bool) -> bool {
    let Ok(c) = unmarshal_candidate(value) else {
        return false;
    };
    // The transport as written (for a name the agent cannot tell it from the address).
    let udp = value
        .split_whitespace()
        .nth(2)
        .is_some_and(|t| t.eq_ignore_ascii_case("udp"));
    if !udp || !c.network_type().is_udp() {
        return false;
    }
    let address = c.address();
    match address.parse::<IpAddr>() {
        Err(_) => is_mdns_name(&address),
        Ok(_) => allow(c.addr().ip()),
    }
}

/// An mDNS host name as browsers write them in candidates (RFC 8828: a UUID and `.local`):
/// letters, digits and dashes, one label before `.local`.
fn is_mdns_name(address: &str) -> bool {
    let lower = address.to_ascii_lowercase();
    lower.strip_suffix(".local").is_some_and(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    })
}

/// The offer with only the candidates the policy allows: host UDP candidates at an address
/// `allow` accepts, in media sections. Session-level candidates (which the agent ignores)
/// and bare `a=candidate` attributes are dropped too.
///
/// The rule for the whole offer: it is refused (an error naming the refused candidates)
/// only when none of its candidates could be the source of the browser's checks, i.e. none
/// is kept and none passes [`may_send_checks`], or when it has no candidate at all (an
/// offer sent before ICE gathering finished, or from a browser with no address). An offer
/// whose candidates are all names (`.local`: a browser that hides its addresses) is passed
/// on with none: the engine's host candidates are in the answer, the browser checks them,
/// and the agent pairs with each check's source when the policy allows it. An error too
/// when the offer is not SDP the peer connection reads.
pub fn filter_candidates(
    offer: &str,
    allow: &dyn Fn(IpAddr) -> bool,
) -> Result<String, BrowserError> {
    let mut desc = parse_sdp(offer)
        .map_err(|e| BrowserError::InvalidOffer(format!("not an SDP offer ({e})")))?;
    let mut refused = Vec::new();
    let mut kept = 0usize;
    let mut checks_possible = false;
    let mut judge = |a: &Attribute, usable: bool| -> bool {
        if !a.is_ice_candidate() {
            return true;
        }
        let Some(value) = a.value.as_deref() else {
            return false;
        };
        if usable && may_send_checks(value, allow) {
            checks_possible = true;
        }
        match judge_candidate(value, allow) {
            Ok(_) if usable => {
                kept += 1;
                true
            }
            Ok(ip) => {
                refused.push(format!(
                    "{ip} (at session level: the agent reads media sections)"
                ));
                false
            }
            Err(why) => {
                refused.push(why);
                false
            }
        }
    };
    desc.attributes.retain(|a| judge(a, false));
    for m in &mut desc.media_descriptions {
        m.attributes.retain(|a| judge(a, true));
    }
    if kept == 0 && !checks_possible {
        let why = if refused.is_empty() {
            "the offer has no ICE candidate (send it once ICE gathering is complete)".to_string()
        } else {
            let more = refused.len().saturating_sub(NAMED_REFUSALS);
            refused.truncate(NAMED_REFUSALS);
            let mut named = refused.join(", ");
            if more > 0 {
                named.push_str(&format!(" and {more} more"));
            }
            format!(
                "no ICE candidate of the offer may be used (refused: {named}); the engine pairs \
                 only with UDP candidates, and connectivity checks from addresses, its media \
                 address can reach"
            )
        };
        return Err(BrowserError::InvalidOffer(why));
    }
    let out = desc.marshal();
    check_filtered(&out, allow).map_err(BrowserError::InvalidOffer)?;
    Ok(out)
}

/// The filtered text, read again as the peer connection will read it: every candidate
/// attribute in it must pass the policy.
fn check_filtered(sdp: &str, allow: &dyn Fn(IpAddr) -> bool) -> Result<(), String> {
    let desc = parse_sdp(sdp).map_err(|e| format!("the offer does not read back ({e})"))?;
    for a in candidate_attributes(&desc) {
        let value = a.value.as_deref().unwrap_or("");
        judge_candidate(value, allow)
            .map_err(|why| format!("the offer reads back with a refused candidate: {why}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n\
        m=audio 9 UDP/TLS/RTP/SAVPF 0\r\nc=IN IP4 0.0.0.0\r\n\
        a=ice-ufrag:abcd\r\na=ice-pwd:0123456789abcdef0123456789\r\n\
        a=candidate:1 1 udp 2113937151 127.0.0.1 50000 typ host generation 0\r\n";
    const TAIL: &str = "a=rtpmap:0 PCMU/8000\r\n";

    fn loopback(ip: IpAddr) -> bool {
        ip.is_loopback()
    }

    /// The addresses of the candidates the peer connection reads from `sdp` (media sections,
    /// as `extract_ice_details` does).
    fn agent_sees(sdp: &str) -> Vec<String> {
        let desc = parse_sdp(sdp).expect("parses");
        desc.media_descriptions
            .iter()
            .flat_map(|m| m.attributes.iter())
            .filter(|a| a.is_ice_candidate())
            .map(|a| {
                let c = unmarshal_candidate(a.value.as_deref().unwrap()).expect("candidate");
                c.address()
            })
            .collect()
    }

    /// A line ending the parser reads as `\r\n`.
    fn offer_with(line: &str) -> String {
        format!("{HEAD}{line}{TAIL}")
    }

    /// Spellings of a candidate line at a refused address that the webrtc parser reads as a
    /// candidate: each must leave the offer with the allowed candidate only.
    #[test]
    fn every_spelling_the_parser_reads_is_judged() {
        let cases = [
            // Whitespace between `a=` and the attribute: the parser trims the value.
            "a= candidate:2 1 udp 2113937151 169.254.169.254 50002 typ host\r\n",
            "a=\tcandidate:2 1 udp 2113937151 169.254.169.254 50002 typ host\r\n",
            "a=\x0bcandidate:2 1 udp 2113937151 10.0.0.1 50002 typ host\r\n",
            "a=\x0ccandidate:2 1 udp 2113937151 10.0.0.1 50002 typ host\r\n",
            // Unicode white space (no-break space, ideographic space, line separator).
            "a=\u{a0}candidate:2 1 udp 2113937151 0.0.0.0 50002 typ host\r\n",
            "a=\u{3000}candidate:2 1 udp 2113937151 10.0.0.1 50002 typ host\r\n",
            "a=\u{2028}candidate:2 1 udp 2113937151 10.0.0.1 50002 typ host\r\n",
            // Carriage returns before the line: the parser skips them (`\n\r` line ends).
            "\ra=candidate:2 1 udp 2113937151 169.254.169.254 50002 typ host\r\n",
            "\r\ra=candidate:2 1 udp 2113937151 10.0.0.1 50002 typ host\n",
            // Trailing white space of every kind after the line.
            "a= candidate:2 1 udp 2113937151 192.168.1.1 50002 typ host \t\r\n",
        ];
        for line in cases {
            let offer = offer_with(line);
            // The parser hands this candidate to the agent.
            assert_eq!(
                agent_sees(&offer).len(),
                2,
                "the parser reads a second candidate in {line:?}"
            );
            let out = filter_candidates(&offer, &loopback).unwrap();
            assert_eq!(agent_sees(&out), ["127.0.0.1"], "{line:?} gave {out}");
        }
    }

    #[test]
    fn keeps_only_allowed_udp_host_addresses() {
        let refused = [
            "a=candidate:2 1 udp 2113937151 10.1.2.3 50002 typ host generation 0\r\n",
            "a=candidate:3 1 udp 2113937151 abc.local 50004 typ host generation 0\r\n",
            "a=candidate:4 1 udp 1677729535 127.0.0.1 50006 typ srflx raddr 0.0.0.0 rport 0\r\n",
            "a=candidate:5 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active\r\n",
            "a=candidate:6 1 udp 2113937151 ::ffff:127.0.0.1 50008 typ host\r\n",
            "a=candidate:7 1 udp 2113937151 ::1 50010 typ host\r\n",
            // Odd IPv4 notations: the agent's parser refuses them (the whole offer would
            // fail), so they are dropped.
            "a=candidate:8 1 udp 2113937151 0x7f.1 50012 typ host\r\n",
            "a=candidate:9 1 udp 2113937151 2130706433 50014 typ host\r\n",
            "a=candidate:10 1 udp 2113937151 127.000.000.001 50016 typ host\r\n",
            "a=candidate:11 1 udp 2113937151 127.0.0.1 50018 typ\r\n",
            "a=candidate\r\n",
        ];
        let policy = |ip: IpAddr| ip.is_loopback() && ip.is_ipv4();
        for line in refused {
            let out = filter_candidates(&offer_with(line), &policy).unwrap();
            assert_eq!(agent_sees(&out), ["127.0.0.1"], "{line:?} gave {out}");
            assert!(out.contains("a=rtpmap:0 PCMU/8000\r\n"), "{out}");
            assert!(out.contains("a=ice-ufrag:abcd\r\n"), "{out}");
        }
    }

    #[test]
    fn candidates_in_every_section_are_judged() {
        // A second media section and the session level.
        let offer = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n\
            a=candidate:9 1 udp 2113937151 10.0.0.9 50000 typ host\r\n\
            m=audio 9 UDP/TLS/RTP/SAVPF 0\r\nc=IN IP4 0.0.0.0\r\n\
            a=candidate:1 1 udp 2113937151 127.0.0.1 50000 typ host\r\n\
            m=audio 9 UDP/TLS/RTP/SAVPF 0\r\nc=IN IP4 0.0.0.0\r\n\
            a=candidate:2 1 udp 2113937151 127.0.0.2 50002 typ host\r\n\
            a=candidate:3 1 udp 2113937151 169.254.169.254 50004 typ host\r\n";
        let out = filter_candidates(offer, &loopback).unwrap();
        assert_eq!(agent_sees(&out), ["127.0.0.1", "127.0.0.2"], "{out}");
        let desc = parse_sdp(&out).unwrap();
        assert_eq!(candidate_attributes(&desc).count(), 2, "{out}");
        assert!(
            !out.contains("10.0.0.9") && !out.contains("169.254"),
            "{out}"
        );
    }

    #[test]
    fn no_allowed_candidate_is_an_invalid_offer_naming_them() {
        let offer = offer_with(
            "a=candidate:2 1 udp 2113937151 10.1.2.3 50002 typ host\r\n\
             a=candidate:3 1 udp 1677729535 10.1.2.4 50004 typ srflx raddr 0.0.0.0 rport 0\r\n\
             a=candidate:4 1 tcp 1518280447 abc.local 9 typ host tcptype active\r\n",
        );
        let e = filter_candidates(&offer, &|_| false)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("no ICE candidate of the offer may be used"),
            "{e}"
        );
        assert!(e.contains("127.0.0.1 (outside"), "{e}");
        assert!(e.contains("10.1.2.3 (outside"), "{e}");
        assert!(e.contains("10.1.2.4 (srflx candidate"), "{e}");
        assert!(e.contains("abc.local ("), "{e}");
        // Many refusals: eight are named.
        let many: String = (0..20)
            .map(|i| format!("a=candidate:{i} 1 udp 1 10.0.0.{i} 5000 typ host\r\n"))
            .collect();
        let e = filter_candidates(&offer_with(&many), &|_| false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("and 13 more"), "{e}");
        // A refused address in the message is escaped.
        let e = filter_candidates(
            &offer_with("a=candidate:2 1 udp 1 \u{1b}[31m 5000 typ host\r\n"),
            &|_| false,
        )
        .unwrap_err()
        .to_string();
        assert!(!e.contains('\u{1b}'), "{e}");
    }

    #[test]
    fn offers_without_candidates_or_not_sdp() {
        let bare =
            "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\n";
        let e = filter_candidates(bare, &|_| true).unwrap_err().to_string();
        assert!(e.contains("the offer has no ICE candidate"), "{e}");
        let e = filter_candidates("hello", &|_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an SDP offer"), "{e}");
        // A candidate only at session level: the agent would have none.
        let session = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n\
            a=candidate:1 1 udp 2113937151 127.0.0.1 50000 typ host\r\n\
            m=audio 9 UDP/TLS/RTP/SAVPF 0\r\n";
        let e = filter_candidates(session, &|_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("127.0.0.1 (at session level"), "{e}");
    }

    #[test]
    fn the_policy_sees_the_address_the_agent_resolves() {
        let seen = std::sync::Mutex::new(Vec::new());
        let policy = |ip: IpAddr| {
            seen.lock().unwrap().push(ip);
            true
        };
        filter_candidates(
            &offer_with("a=candidate:2 1 UDP 1 ::ffff:10.0.0.1 5000 typ host\r\n"),
            &policy,
        )
        .unwrap();
        let seen = seen.lock().unwrap();
        assert!(
            seen.contains(&"::ffff:10.0.0.1".parse::<IpAddr>().unwrap()),
            "{seen:?}"
        );
    }

    /// A browser that hides its addresses behind mDNS names, or whose addresses the offer
    /// shows only as seen from outside (server-reflexive), is answered: the agent gets no
    /// candidate and pairs with the sources of the browser's checks, judged at the socket.
    #[test]
    fn named_or_reflexive_candidates_leave_the_pairing_to_the_checks() {
        let hidden = "a=candidate:2 1 udp 2113937151 4f1e-9a.local 50002 typ host\r\n";
        let reflexive =
            "a=candidate:3 1 udp 1677729535 10.1.2.4 50004 typ srflx raddr 0.0.0.0 rport 0\r\n";
        let lan = |ip: IpAddr| ip.to_string().starts_with("10.");
        for (line, allow) in [
            (hidden, &loopback as &dyn Fn(IpAddr) -> bool),
            (reflexive, &lan),
        ] {
            let offer = format!(
                "{}{line}{TAIL}",
                HEAD.replace("127.0.0.1 50000", "172.16.9.9 1")
            );
            let out = filter_candidates(&offer, allow).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            assert_eq!(
                agent_sees(&out),
                Vec::<String>::new(),
                "{line:?} gave {out}"
            );
            assert!(out.contains("a=ice-ufrag:abcd\r\n"), "{out}");
        }
        // A reflexive candidate outside the reach shows only checks that would be dropped.
        let offer = format!(
            "{}{reflexive}{TAIL}",
            HEAD.replace("127.0.0.1 50000", "172.16.9.9 1")
        );
        let e = filter_candidates(&offer, &loopback)
            .unwrap_err()
            .to_string();
        assert!(e.contains("10.1.2.4 (srflx candidate"), "{e}");
        assert!(e.contains("172.16.9.9 (outside"), "{e}");
        // Other names show no browser: an offer of them alone is refused.
        let odd = "a=candidate:2 1 udp 2113937151 host.example.com 50002 typ host\r\n";
        let offer = format!(
            "{}{odd}{TAIL}",
            HEAD.replace("127.0.0.1 50000", "172.16.9.9 1")
        );
        let e = filter_candidates(&offer, &loopback)
            .unwrap_err()
            .to_string();
        assert!(e.contains("host.example.com ("), "{e}");
        // Names are never resolved: the policy is not asked about them.
        let asked = std::sync::Mutex::new(Vec::new());
        let policy = |ip: IpAddr| {
            asked.lock().unwrap().push(ip);
            false
        };
        let offer = format!(
            "{}{hidden}{TAIL}",
            HEAD.replace("127.0.0.1 50000", "172.16.9.9 1")
        );
        filter_candidates(&offer, &policy).unwrap();
        let asked = asked.lock().unwrap();
        assert!(
            !asked.is_empty() && asked.iter().all(|ip| ip.to_string() == "172.16.9.9"),
            "only the address candidate is judged: {asked:?}"
        );
    }
}
