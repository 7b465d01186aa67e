//! Fixes between rsipstack 0.7.14 and the wire.
//!
//! rsipstack names the SHA-256 digest algorithm `SHA256` and refuses the standard token
//! `SHA-256` (RFC 7616, RFC 8760) in challenges. The hash itself is the same, so an
//! inspector renames the token on the way in (challenges) and out (credentials).

use rsipstack::sip::{Header, SipMessage};
use rsipstack::transaction::endpoint::MessageInspector;
use rsipstack::transport::SipAddr;

/// `SHA-256` / `SHA-256-sess` (any case, quoted or not) to rsipstack's `SHA256` spelling.
pub(crate) fn algorithm_to_rsip(value: &str) -> String {
    rename(
        value,
        &[
            ("SHA-256-SESS", "SHA256-sess"),
            ("SHA-256", "SHA256"),
            ("SHA-512-256", "SHA512"),
        ],
    )
}

/// rsipstack's `SHA256` spelling back to the standard token.
pub(crate) fn algorithm_to_wire(value: &str) -> String {
    rename(
        value,
        &[("SHA256-SESS", "SHA-256-sess"), ("SHA256", "SHA-256")],
    )
}

/// Replace the value of the `algorithm` parameter when it matches one of `map` (case-insensitive).
fn rename(value: &str, map: &[(&str, &str)]) -> String {
    let lower = value.to_ascii_lowercase();
    let Some(pos) = lower.find("algorithm=") else {
        return value.to_string();
    };
    let start = pos + "algorithm=".len();
    let rest = &value[start..];
    let quoted = rest.starts_with('"');
    let token_start = if quoted { start + 1 } else { start };
    let token_end = value[token_start..]
        .find([',', '"', ' ', '\t'])
        .map(|i| token_start + i)
        .unwrap_or(value.len());
    let token = &value[token_start..token_end];
    match map
        .iter()
        .find(|(from, _)| token.eq_ignore_ascii_case(from))
    {
        Some((_, to)) => format!("{}{}{}", &value[..token_start], to, &value[token_end..]),
        None => value.to_string(),
    }
}

pub(crate) struct AlgorithmNames;

impl MessageInspector for AlgorithmNames {
    fn before_send(&self, msg: SipMessage, _dest: Option<&SipAddr>) -> SipMessage {
        match msg {
            SipMessage::Request(mut req) => {
                for h in req.headers.iter_mut() {
                    match h {
                        Header::Authorization(v) => {
                            *h = Header::Authorization(
                                algorithm_to_wire(&v.to_string_value()).into(),
                            )
                        }
                        Header::ProxyAuthorization(v) => {
                            *h = Header::ProxyAuthorization(
                                algorithm_to_wire(&v.to_string_value()).into(),
                            )
                        }
                        _ => {}
                    }
                }
                SipMessage::Request(req)
            }
            other => other,
        }
    }

    fn after_received(&self, msg: SipMessage, _from: Option<&SipAddr>) -> SipMessage {
        match msg {
            SipMessage::Response(mut resp) => {
                for h in resp.headers.iter_mut() {
                    match h {
                        Header::WwwAuthenticate(v) => {
                            *h = Header::WwwAuthenticate(
                                algorithm_to_rsip(&v.to_string_value()).into(),
                            )
                        }
                        Header::ProxyAuthenticate(v) => {
                            *h = Header::ProxyAuthenticate(
                                algorithm_to_rsip(&v.to_string_value()).into(),
                            )
                        }
                        _ => {}
                    }
                }
                SipMessage::Response(resp)
            }
            other => other,
        }
    }
}

trait ValueString {
    fn to_string_value(&self) -> String;
}

impl<T: for<'a> rsipstack::sip::UntypedHeader<'a>> ValueString for T {
    fn to_string_value(&self) -> String {
        self.value().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_only_the_algorithm_token() {
        assert_eq!(
            algorithm_to_rsip(r#"Digest realm="r", nonce="n", qop="auth", algorithm=SHA-256"#),
            r#"Digest realm="r", nonce="n", qop="auth", algorithm=SHA256"#
        );
        assert_eq!(
            algorithm_to_rsip(r#"Digest algorithm="sha-256", realm="SHA-256""#),
            r#"Digest algorithm="SHA256", realm="SHA-256""#
        );
        assert_eq!(
            algorithm_to_rsip("Digest algorithm=MD5, realm=x"),
            "Digest algorithm=MD5, realm=x"
        );
        assert_eq!(algorithm_to_rsip("Digest realm=x"), "Digest realm=x");
        assert_eq!(
            algorithm_to_wire("Digest username=\"a\", algorithm=SHA256, qop=auth"),
            "Digest username=\"a\", algorithm=SHA-256, qop=auth"
        );
        assert_eq!(
            algorithm_to_wire("Digest algorithm=SHA256-sess"),
            "Digest algorithm=SHA-256-sess"
        );
        assert_eq!(algorithm_to_wire("algorithm="), "algorithm=");
    }
}
