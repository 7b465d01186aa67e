//! Message sanity checks beyond what the parser enforces (RFC 3261 §8.2, §16.3; RFC 4475).
//!
//! The transport silently drops bytes it cannot parse at all (there is no reliable Via to
//! answer to). A request that parses but is refused gets a final response from the stack: 505
//! for a SIP-Version other than 2.0 (§8.2.1, §21.5.7), 400 when it breaks a rule the
//! transaction layer relies on. [`inspect`] is the pure decision, used by tests on the
//! RFC 4475 torture messages; [`validate_request`] is what the stack runs on every new request.

use rsipstack::sip::prelude::*;
use rsipstack::sip::{Request, SipMessage};

/// What the stack does with a datagram or stream message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A well-formed request: handed to the transaction layer.
    Request { method: String },
    /// A well-formed response.
    Response { code: u16 },
    /// Parsed, but a request the stack refuses with a final response.
    Refused(Refusal),
    /// Not parseable as SIP: dropped (logged), never answered.
    Dropped(String),
}

/// Why a parsed request is refused: the final status code and the reason the stack puts in
/// its Warning header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: u16,
    pub reason: String,
}

impl Refusal {
    /// 400 Bad Request.
    pub fn bad_request(reason: impl Into<String>) -> Refusal {
        Refusal {
            code: 400,
            reason: reason.into(),
        }
    }
    /// 505 Version Not Supported.
    pub fn version_not_supported() -> Refusal {
        Refusal {
            code: 505,
            reason: "SIP version not supported".into(),
        }
    }
}

/// Classify raw bytes as the UDP/TCP transport would see them.
pub fn inspect(bytes: &[u8]) -> Verdict {
    match SipMessage::try_from(bytes) {
        Err(e) => Verdict::Dropped(e.to_string()),
        Ok(SipMessage::Request(req)) => match validate_request(&req) {
            Ok(()) => Verdict::Request {
                method: req.method.to_string(),
            },
            Err(refusal) => Verdict::Refused(refusal),
        },
        Ok(SipMessage::Response(resp)) => {
            let code = u16::from(resp.status_code.clone());
            if !(100..=699).contains(&code) {
                return Verdict::Dropped(format!("status code {code} out of range"));
            }
            // A response whose CSeq cannot be read matches no transaction: drop it.
            if resp.cseq_header().and_then(|c| c.seq()).is_err() {
                return Verdict::Dropped("malformed CSeq".into());
            }
            Verdict::Response { code }
        }
    }
}

/// The checks a request must pass before any transaction or dialog logic sees it.
pub fn validate_request(req: &Request) -> Result<(), Refusal> {
    if req.version != rsipstack::sip::Version::V2 {
        return Err(Refusal::version_not_supported());
    }
    validate_headers(req).map_err(Refusal::bad_request)
}

/// The header rules behind a 400.
fn validate_headers(req: &Request) -> Result<(), String> {
    let via = req.via_header().map_err(|_| "Missing Via".to_string())?;
    via.typed().map_err(|_| "Malformed Via".to_string())?;
    let from = req.from_header().map_err(|_| "Missing From".to_string())?;
    from.typed().map_err(|_| "Malformed From".to_string())?;
    let to = req.to_header().map_err(|_| "Missing To".to_string())?;
    to.typed().map_err(|_| "Malformed To".to_string())?;
    let call_id = req
        .call_id_header()
        .map_err(|_| "Missing Call-ID".to_string())?;
    if call_id.value().trim().is_empty() {
        return Err("Empty Call-ID".into());
    }
    let cseq = req.cseq_header().map_err(|_| "Missing CSeq".to_string())?;
    let seq = cseq.seq().map_err(|_| "Malformed CSeq".to_string())?;
    if seq > 0x7fff_ffff {
        return Err("CSeq out of range".into());
    }
    let cseq_method = cseq.method().map_err(|_| "Malformed CSeq".to_string())?;
    if cseq_method != req.method {
        return Err("CSeq method does not match".into());
    }
    if let Ok(mf) = req.max_forwards_header() {
        match mf.value().trim().parse::<u32>() {
            Ok(n) if n <= 255 => {}
            _ => return Err("Bad Max-Forwards".into()),
        }
    }
    if let Some(cl) = req.header_value("Content-Length") {
        match cl.trim().parse::<usize>() {
            Ok(n) if n == req.body.len() => {}
            Ok(_) => return Err("Content-Length mismatch".into()),
            Err(_) => return Err("Bad Content-Length".into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "OPTIONS sip:bob@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5061;branch=z9hG4bK1\r\nMax-Forwards: 70\r\nFrom: <sip:a@127.0.0.1>;tag=1\r\nTo: <sip:bob@127.0.0.1>\r\nCall-ID: abc\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n";

    #[test]
    fn good_request_passes() {
        assert_eq!(
            inspect(GOOD.as_bytes()),
            Verdict::Request {
                method: "OPTIONS".into()
            }
        );
    }

    #[test]
    fn cseq_mismatch_is_400() {
        let m = GOOD.replace("CSeq: 1 OPTIONS", "CSeq: 1 INVITE");
        assert_eq!(
            inspect(m.as_bytes()),
            Verdict::Refused(Refusal::bad_request("CSeq method does not match"))
        );
    }

    #[test]
    fn another_sip_version_is_505_before_any_header_rule() {
        let m = GOOD.replace("bob@127.0.0.1 SIP/2.0", "bob@127.0.0.1 SIP/7.0");
        let v = inspect(m.as_bytes());
        assert_eq!(v, Verdict::Refused(Refusal::version_not_supported()));
        // A request that also breaks a header rule is still a version matter first.
        let both = m.replace("CSeq: 1 OPTIONS", "CSeq: 1 INVITE");
        assert!(matches!(
            inspect(both.as_bytes()),
            Verdict::Refused(Refusal { code: 505, .. })
        ));
    }

    #[test]
    fn garbage_is_dropped() {
        assert!(matches!(
            inspect(b"\x00\x01\x02garbage"),
            Verdict::Dropped(_)
        ));
        assert!(matches!(inspect(b""), Verdict::Dropped(_)));
    }
}
