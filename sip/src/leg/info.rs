//! DTMF carried by SIP INFO.

use rsipstack::sip::{HeadersExt, Request};

/// A DTMF digit from an INFO body (`application/dtmf-relay` "Signal=5" or `application/dtmf` "5").
pub(crate) fn dtmf_from_info(req: &Request) -> Option<char> {
    let ct = req.header_value("Content-Type")?.to_ascii_lowercase();
    let body = String::from_utf8_lossy(&req.body);
    let raw = if ct.contains("dtmf-relay") {
        body.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("signal"))
            .map(|(_, v)| v.trim().to_string())?
    } else if ct.contains("application/dtmf") {
        body.trim().to_string()
    } else {
        return None;
    };
    match raw.as_str() {
        "10" => return Some('*'),
        "11" => return Some('#'),
        _ => {}
    }
    if raw.chars().count() != 1 {
        return None;
    }
    let c = raw.chars().next()?;
    match c {
        '0'..='9' | '*' | '#' | 'A'..='D' => Some(c),
        'a'..='d' => Some(c.to_ascii_uppercase()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(ct: &str, body: &str) -> Request {
        let text = format!(
            "INFO sip:a@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bK2\r\nFrom: <sip:b@127.0.0.1>;tag=1\r\nTo: <sip:a@127.0.0.1>;tag=2\r\nCall-ID: x\r\nCSeq: 3 INFO\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        Request::try_from(text.as_bytes()).unwrap()
    }

    #[test]
    fn dtmf_info_bodies() {
        assert_eq!(
            dtmf_from_info(&info(
                "application/dtmf-relay",
                "Signal=5\r\nDuration=160\r\n"
            )),
            Some('5')
        );
        assert_eq!(
            dtmf_from_info(&info("application/dtmf-relay", "Signal= #\r\n")),
            Some('#')
        );
        assert_eq!(dtmf_from_info(&info("application/dtmf", "9")), Some('9'));
        assert_eq!(
            dtmf_from_info(&info("application/dtmf-relay", "Signal=11")),
            Some('#')
        );
        assert_eq!(dtmf_from_info(&info("text/plain", "5")), None);
        assert_eq!(dtmf_from_info(&info("application/dtmf", "x")), None);
    }
}
