//! Headers the engine adds to a request (the call_transfer brick's `sip_headers`, an
//! outbound call's extras): checked here, so none can replace what the stack owns or
//! inject another header.

use rsipstack::sip::Header;

use crate::error::SipError;

/// Headers the stack owns; user headers may not replace them.
const RESERVED: &[&str] = &[
    "via",
    "from",
    "to",
    "call-id",
    "cseq",
    "contact",
    "content-length",
    "content-type",
    "max-forwards",
    "route",
    "record-route",
    "refer-to",
    "authorization",
    "proxy-authorization",
    // The edge's routing key, set from the trunk's configuration only.
    "x-callsmith-trunk",
    "v",
    "f",
    "t",
    "i",
    "m",
    "l",
    "c",
    "r",
];

/// Validate engine-supplied headers and turn them into SIP headers.
pub(crate) fn custom_headers(headers: &[(String, String)]) -> Result<Vec<Header>, SipError> {
    let mut out = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let token_ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-.!%*_+`'~".contains(c));
        if !token_ok {
            return Err(SipError::InvalidHeader(
                name.clone(),
                "name is not a SIP token",
            ));
        }
        if RESERVED.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(SipError::InvalidHeader(
                name.clone(),
                "header is managed by the stack",
            ));
        }
        if value.chars().any(|c| c == '\r' || c == '\n' || c == '\0') {
            return Err(SipError::InvalidHeader(
                name.clone(),
                "value contains a line break",
            ));
        }
        out.push(Header::Other(name.clone(), value.clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: &str, v: &str) -> (String, String) {
        (n.to_string(), v.to_string())
    }

    #[test]
    fn custom_headers_are_validated() {
        let ok = custom_headers(&[
            h("X-Campaign", "42"),
            h("P-Asserted-Identity", "<sip:+1@x>"),
        ])
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[0].to_string(), "X-Campaign: 42");
        for bad in [
            h("Via", "x"),
            h("call-id", "x"),
            h("r", "sip:x"),
            h("X Bad", "x"),
            h("", "x"),
            h("X-Inject", "a\r\nVia: evil"),
        ] {
            assert!(
                custom_headers(std::slice::from_ref(&bad)).is_err(),
                "{bad:?}"
            );
        }
    }
}
