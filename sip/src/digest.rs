//! HTTP/SIP digest computation (RFC 2617, RFC 7616 algorithms, RFC 8760 for SIP).
//!
//! rsipstack answers challenges itself; this module is the independent, pure reference the
//! tests use to check what went on the wire, and a helper for verifying credentials.

use md5::{Digest as _, Md5};
use sha2::Sha256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestAlgorithm {
    Md5,
    Sha256,
}

impl DigestAlgorithm {
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_uppercase().as_str() {
            "MD5" => Some(DigestAlgorithm::Md5),
            "SHA-256" => Some(DigestAlgorithm::Sha256),
            _ => None,
        }
    }
    fn hash(self, data: &str) -> String {
        match self {
            DigestAlgorithm::Md5 => hex::encode(Md5::digest(data.as_bytes())),
            DigestAlgorithm::Sha256 => hex::encode(Sha256::digest(data.as_bytes())),
        }
    }
}

/// Inputs of one digest response.
#[derive(Debug, Clone)]
pub struct DigestInput<'a> {
    pub algorithm: DigestAlgorithm,
    pub username: &'a str,
    pub password: &'a str,
    pub realm: &'a str,
    pub nonce: &'a str,
    pub method: &'a str,
    pub uri: &'a str,
    /// `(cnonce, nc)` when qop=auth was used.
    pub qop_auth: Option<(&'a str, &'a str)>,
}

/// The `response=` value for these inputs.
pub fn digest_response(i: &DigestInput<'_>) -> String {
    let ha1 = i
        .algorithm
        .hash(&format!("{}:{}:{}", i.username, i.realm, i.password));
    let ha2 = i.algorithm.hash(&format!("{}:{}", i.method, i.uri));
    match i.qop_auth {
        Some((cnonce, nc)) => i
            .algorithm
            .hash(&format!("{ha1}:{}:{nc}:{cnonce}:auth:{ha2}", i.nonce)),
        None => i.algorithm.hash(&format!("{ha1}:{}:{ha2}", i.nonce)),
    }
}

/// Parse the parameters of a `Digest ...` credentials or challenge value into (name, value)
/// pairs, lower-cased names, unquoted values. Malformed input yields what could be read.
pub fn parse_digest_params(value: &str) -> Vec<(String, String)> {
    let rest = value.trim();
    let rest = match rest.get(..6) {
        Some(p) if p.eq_ignore_ascii_case("digest") => &rest[6..],
        _ => rest,
    };
    let mut out = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while matches!(chars.peek(), Some(c) if c.is_whitespace() || *c == ',') {
            chars.next();
        }
        let mut name = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ',' {
                break;
            }
            name.push(c);
            chars.next();
        }
        if name.trim().is_empty() {
            break;
        }
        let mut val = String::new();
        if chars.peek() == Some(&'=') {
            chars.next();
            if chars.peek() == Some(&'"') {
                chars.next();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                val.push(n)
                            }
                        }
                        _ => val.push(c),
                    }
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c == ',' {
                        break;
                    }
                    val.push(c);
                    chars.next();
                }
            }
        }
        out.push((name.trim().to_ascii_lowercase(), val.trim().to_string()));
    }
    out
}

/// Check an `Authorization` value against a password for the given method.
pub fn verify_authorization(value: &str, method: &str, password: &str) -> bool {
    let params = parse_digest_params(value);
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let algorithm = match get("algorithm") {
        Some(a) => match DigestAlgorithm::parse(a) {
            Some(a) => a,
            None => return false,
        },
        None => DigestAlgorithm::Md5,
    };
    let (Some(username), Some(realm), Some(nonce), Some(uri), Some(response)) = (
        get("username"),
        get("realm"),
        get("nonce"),
        get("uri"),
        get("response"),
    ) else {
        return false;
    };
    let qop_auth = match (get("qop"), get("cnonce"), get("nc")) {
        (Some("auth"), Some(cnonce), Some(nc)) => Some((cnonce, nc)),
        (Some(_), _, _) => return false,
        _ => None,
    };
    let expected = digest_response(&DigestInput {
        algorithm,
        username,
        password,
        realm,
        nonce,
        method,
        uri,
        qop_auth,
    });
    expected.eq_ignore_ascii_case(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7616 §3.9.1 example (HTTP, but the digest computation is the same).
    fn rfc7616(algorithm: DigestAlgorithm) -> String {
        digest_response(&DigestInput {
            algorithm,
            username: "Mufasa",
            password: "Circle of Life",
            realm: "http-auth@example.org",
            nonce: "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",
            method: "GET",
            uri: "/dir/index.html",
            qop_auth: Some(("f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", "00000001")),
        })
    }

    #[test]
    fn rfc7616_md5_vector() {
        assert_eq!(
            rfc7616(DigestAlgorithm::Md5),
            "8ca523f5e9506fed4657c9700eebdbec"
        );
    }

    #[test]
    fn rfc7616_sha256_vector() {
        assert_eq!(
            rfc7616(DigestAlgorithm::Sha256),
            "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"
        );
    }

    #[test]
    fn rfc2617_md5_qop_auth() {
        // RFC 2617 §3.5 example.
        let r = digest_response(&DigestInput {
            algorithm: DigestAlgorithm::Md5,
            username: "Mufasa",
            password: "Circle Of Life",
            realm: "testrealm@host.com",
            nonce: "dcd98b7102dd2f0e8b11d0f600bfb0c093",
            method: "GET",
            uri: "/dir/index.html",
            qop_auth: Some(("0a4f113b", "00000001")),
        });
        assert_eq!(r, "6629fae49393a05397450978507c4ef1");
    }

    /// rsipstack's own digest (the one that goes on the wire) agrees with ours for both
    /// algorithms, so the SIPp-verified MD5 path also vouches for SHA-256.
    #[test]
    fn rsipstack_agrees_for_md5_and_sha256() {
        use rsipstack::dialog::authenticate::compute_digest;
        use rsipstack::sip::headers::auth::{Algorithm, AuthQop};
        for (ours, theirs) in [
            (DigestAlgorithm::Md5, Algorithm::Md5),
            (DigestAlgorithm::Sha256, Algorithm::Sha256),
        ] {
            let expected = digest_response(&DigestInput {
                algorithm: ours,
                username: "alice",
                password: "s3cret",
                realm: "callsmith.test",
                nonce: "abc123",
                method: "INVITE",
                uri: "sip:+15550100@127.0.0.1:5070",
                qop_auth: Some(("0a4f113b", "00000001")),
            });
            let got = compute_digest(
                "alice",
                "s3cret",
                "callsmith.test",
                "abc123",
                &rsipstack::sip::Method::Invite,
                "sip:+15550100@127.0.0.1:5070",
                theirs,
                Some(&AuthQop::Auth {
                    cnonce: "0a4f113b".into(),
                    nc: 1,
                }),
            );
            assert_eq!(got, expected, "{ours:?}");
        }
    }

    #[test]
    fn verify_round_trip_and_parse() {
        let resp = digest_response(&DigestInput {
            algorithm: DigestAlgorithm::Sha256,
            username: "bob",
            password: "pw",
            realm: "r",
            nonce: "n",
            method: "INVITE",
            uri: "sip:1@h",
            qop_auth: Some(("c", "00000001")),
        });
        let header = format!(
            "Digest username=\"bob\", realm=\"r\", nonce=\"n\", uri=\"sip:1@h\", response=\"{resp}\", algorithm=SHA-256, qop=auth, cnonce=\"c\", nc=00000001"
        );
        assert!(verify_authorization(&header, "INVITE", "pw"));
        assert!(!verify_authorization(&header, "INVITE", "wrong"));
        assert!(!verify_authorization("Digest garbage", "INVITE", "pw"));
        assert!(!verify_authorization("", "INVITE", "pw"));
    }
}
