//! SDES key exchange for SRTP (RFC 4568): the `a=crypto` attribute, the per-trunk SRTP
//! policy and the keys offer/answer settles on.
//!
//! Pure code, no sockets. Keys are 30 bytes (a 128-bit AES key and a 112-bit salt, RFC 3711
//! §8.2) for both suites this stack does, `AES_CM_128_HMAC_SHA1_80` and `_32`. Every type
//! holding a key prints it as `<redacted>`, so no `{:?}` of a leg, an offer or a call logs
//! one.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use serde::{Deserialize, Serialize};

/// Bytes of an SDES master key and salt together for the AES_CM_128 suites.
pub const MASTER_LEN: usize = 30;

/// The longest `a=crypto` value read; anything longer is refused unread.
const MAX_ATTRIBUTE_LEN: usize = 512;

/// Whether a trunk's calls use SRTP (SDES keys in the SDP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SrtpPolicy {
    /// Plain RTP only: offers carry no `a=crypto`; an `RTP/SAVP` offer is answered 488 and
    /// crypto attributes beside `RTP/AVP` are ignored.
    #[default]
    Off,
    /// SRTP when the peer does it: outbound offers are `RTP/AVP` with `a=crypto` (a peer
    /// without SRTP answers plain RTP); inbound, an offer with usable crypto is answered
    /// with SRTP and one without with plain RTP.
    Optional,
    /// SRTP or no call: outbound offers are `RTP/SAVP`, an answer without usable crypto
    /// ends the call, and an inbound offer without usable crypto is answered 488.
    Required,
}

/// SRTP protection suites negotiated here (RFC 4568 §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CryptoSuite {
    /// AES counter mode, HMAC-SHA1 with an 80-bit tag.
    AesCm128HmacSha1_80,
    /// AES counter mode, HMAC-SHA1 with a 32-bit tag on RTP (80 on RTCP).
    AesCm128HmacSha1_32,
}

impl CryptoSuite {
    /// Both suites, in the order offers list them.
    pub const ALL: [CryptoSuite; 2] = [
        CryptoSuite::AesCm128HmacSha1_80,
        CryptoSuite::AesCm128HmacSha1_32,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CryptoSuite::AesCm128HmacSha1_80 => "AES_CM_128_HMAC_SHA1_80",
            CryptoSuite::AesCm128HmacSha1_32 => "AES_CM_128_HMAC_SHA1_32",
        }
    }

    fn from_name(name: &str) -> Option<CryptoSuite> {
        CryptoSuite::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

/// A master key and salt (30 bytes). Its Debug is `<redacted>`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MasterKey(pub [u8; MASTER_LEN]);

impl MasterKey {
    /// A fresh key from the thread's cryptographic generator.
    pub fn random() -> MasterKey {
        MasterKey(rand::random())
    }

    /// The AES key (the first 16 bytes).
    pub fn key(&self) -> &[u8] {
        &self.0[..16]
    }

    /// The salt (the last 14 bytes).
    pub fn salt(&self) -> &[u8] {
        &self.0[16..]
    }

    fn inline(&self) -> String {
        STANDARD.encode(self.0)
    }
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// One `a=crypto` attribute: tag, suite and inline key (lifetime accepted, MKI and
/// session parameters refused: see [`CryptoAttribute::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CryptoAttribute {
    pub tag: u32,
    pub suite: CryptoSuite,
    pub key: MasterKey,
}

/// Why an `a=crypto` attribute cannot be used. The text names what is wrong, never the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a=crypto: {0}")]
pub struct CryptoError(pub String);

fn bad(what: impl Into<String>) -> CryptoError {
    CryptoError(what.into())
}

impl CryptoAttribute {
    /// Reads the value of an `a=crypto` line (after `crypto:`):
    /// `<tag> <suite> inline:<base64 key||salt>[|<lifetime>][|<MKI>:<length>] [<session params>]`.
    ///
    /// Refused, each with its reason: an unknown suite, a tag that is not a number below
    /// 10^9, a key that is not base64 or not 30 bytes once decoded, a malformed lifetime,
    /// an MKI (packets would carry it, which the media path does not), several keys, a key
    /// method other than `inline`, and any session parameter (`KDR=`, `UNENCRYPTED_SRTP`,
    /// …). A lifetime is accepted and not enforced: no call comes near 2^31 packets.
    pub fn parse(value: &str) -> Result<CryptoAttribute, CryptoError> {
        if value.len() > MAX_ATTRIBUTE_LEN {
            return Err(bad(format!("longer than {MAX_ATTRIBUTE_LEN} bytes")));
        }
        let mut fields = value.split_ascii_whitespace();
        let (Some(tag), Some(suite), Some(params)) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(bad("expected <tag> <suite> inline:<key>"));
        };
        if fields.next().is_some() {
            return Err(bad("session parameters are not supported"));
        }
        let tag: u32 = tag
            .parse()
            .ok()
            .filter(|t| tag.len() <= 9 && *t < 1_000_000_000)
            .ok_or_else(|| bad(format!("tag {tag:?} is not a number of at most 9 digits")))?;
        let suite = CryptoSuite::from_name(suite).ok_or_else(|| {
            bad(format!(
                "unknown suite {:?} (AES_CM_128_HMAC_SHA1_80 and _32 are supported)",
                suite.chars().take(40).collect::<String>()
            ))
        })?;
        if params.contains(';') {
            return Err(bad("several keys are not supported"));
        }
        let inline = params
            .strip_prefix("inline:")
            .ok_or_else(|| bad("the key method must be inline"))?;
        let mut parts = inline.split('|');
        let key_text = parts.next().unwrap_or("");
        for part in parts {
            if part.contains(':') {
                return Err(bad("an MKI is not supported"));
            }
            if !valid_lifetime(part) {
                return Err(bad("malformed key lifetime"));
            }
        }
        if key_text.len() > 64 {
            return Err(bad("the key is longer than 30 bytes"));
        }
        let decoded = STANDARD
            .decode(key_text)
            .or_else(|_| STANDARD_NO_PAD.decode(key_text))
            .map_err(|_| bad("the key is not base64"))?;
        let key: [u8; MASTER_LEN] = decoded.try_into().map_err(|v: Vec<u8>| {
            bad(format!(
                "the key is {} bytes, not {MASTER_LEN} (16-byte key and 14-byte salt)",
                v.len()
            ))
        })?;
        Ok(CryptoAttribute {
            tag,
            suite,
            key: MasterKey(key),
        })
    }

    /// The attribute's value as written after `a=crypto:`.
    pub fn render(&self) -> String {
        format!(
            "{} {} inline:{}",
            self.tag,
            self.suite.name(),
            self.key.inline()
        )
    }
}

/// `text` (a whole SIP message or SDP body) with every SDES key after `inline:` replaced
/// by `<redacted>`: what message logs show.
pub fn redact_keys(text: &str) -> std::borrow::Cow<'_, str> {
    const MARK: &str = "inline:";
    if !text.contains(MARK) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(MARK) {
        out.push_str(&rest[..i + MARK.len()]);
        rest = &rest[i + MARK.len()..];
        let end = rest
            .find(|c: char| c == '|' || c == ';' || c.is_whitespace())
            .unwrap_or(rest.len());
        out.push_str("<redacted>");
        rest = &rest[end..];
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// A lifetime: decimal, or `2^<n>`, each at most 2^48 (RFC 4568 §6.1).
fn valid_lifetime(s: &str) -> bool {
    match s.strip_prefix("2^") {
        Some(exp) => exp.len() <= 2 && exp.parse::<u32>().is_ok_and(|e| e <= 48),
        None => s.len() <= 15 && s.parse::<u64>().is_ok_and(|v| v > 0 && v <= 1 << 48),
    }
}

/// What a leg's own side brings to SRTP: its policy and the key it sends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalSrtp {
    pub policy: SrtpPolicy,
    pub key: MasterKey,
}

impl LocalSrtp {
    /// The leg's SRTP side for a trunk's policy (with a fresh key), None when it is off.
    pub fn for_policy(policy: SrtpPolicy) -> Option<LocalSrtp> {
        (policy != SrtpPolicy::Off).then(|| LocalSrtp {
            policy,
            key: MasterKey::random(),
        })
    }

    /// The attributes an offer carries: one per suite, all with this key.
    pub fn offered(&self) -> Vec<CryptoAttribute> {
        CryptoSuite::ALL
            .into_iter()
            .zip(1..)
            .map(|(suite, tag)| CryptoAttribute {
                tag,
                suite,
                key: self.key,
            })
            .collect()
    }
}

/// The SRTP keys offer/answer settled on: `local` protects what this side sends, `remote`
/// unprotects what the peer sends. Debug redacts both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrtpKeys {
    pub suite: CryptoSuite,
    pub local: MasterKey,
    pub remote: MasterKey,
}

/// Why no SRTP could be agreed where it had to be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SdesError {
    /// Crypto attributes were there and none could be used; the first one's reason.
    #[error("no usable a=crypto: {0}")]
    Unusable(CryptoError),
    /// The trunk requires SRTP and the peer brought no crypto.
    #[error("SRTP is required on this trunk and the peer offered no a=crypto")]
    Required,
    /// The stream's profile is SRTP (`RTP/SAVP`) and it carries no crypto.
    #[error("an RTP/SAVP stream without a=crypto")]
    SavpWithoutCrypto,
    /// A re-offer without crypto in a call whose media is SRTP: the call keeps its keys.
    #[error("the call's media is SRTP and the new offer has no a=crypto")]
    Downgrade,
}

/// The answerer's choice among an offer's `a=crypto` values (RFC 4568 §7.1.2): the first
/// one that parses, with this side's key. `savp`: the stream is `RTP/SAVP`.
///
/// Ok(None): answer plain RTP (policy off, or optional and no crypto offered beside
/// `RTP/AVP`). Errors mean 488: crypto offered and none usable (whatever the policy,
/// unless off with `RTP/AVP`), `RTP/SAVP` without crypto, or `required` without crypto.
///
/// `current`: in a call whose media is SRTP, the keys in use, and the offer is a re-offer
/// (a re-INVITE or UPDATE, RFC 4568 §7.1.4). The peer keeping its key and suite is
/// answered with our current key (nothing changes); a new key or suite from the peer is
/// answered with a fresh key of ours, so both directions re-key together. A re-offer
/// without crypto is refused ([`SdesError::Downgrade`], 488) whatever the policy: a call
/// never drops from SRTP to plain RTP.
pub fn answer_crypto(
    offered: &[String],
    savp: bool,
    local: Option<&LocalSrtp>,
    current: Option<&SrtpKeys>,
) -> Result<Option<(CryptoAttribute, SrtpKeys)>, SdesError> {
    let Some(local) = local else {
        return Ok(None);
    };
    let mut first_error = None;
    for value in offered {
        match CryptoAttribute::parse(value) {
            Ok(theirs) => {
                let key = match current {
                    Some(c) if c.remote == theirs.key && c.suite == theirs.suite => c.local,
                    Some(_) => MasterKey::random(),
                    None => local.key,
                };
                let ours = CryptoAttribute { key, ..theirs };
                let keys = SrtpKeys {
                    suite: theirs.suite,
                    local: key,
                    remote: theirs.key,
                };
                return Ok(Some((ours, keys)));
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(SdesError::Unusable(e)),
        None if savp => Err(SdesError::SavpWithoutCrypto),
        None if local.policy == SrtpPolicy::Required => Err(SdesError::Required),
        None if current.is_some() => Err(SdesError::Downgrade),
        None => Ok(None),
    }
}

/// The keys from the peer's answer to an offer made with `local` (RFC 4568 §7.1.3): the
/// answer's `a=crypto` must carry a tag and suite the offer had. Ok(None): the answer
/// has no crypto and the policy allows plain RTP.
pub fn keys_from_answer(
    answered: &[String],
    local: Option<&LocalSrtp>,
) -> Result<Option<SrtpKeys>, SdesError> {
    let Some(local) = local else {
        return Ok(None);
    };
    let Some(value) = answered.first() else {
        return match local.policy {
            SrtpPolicy::Required => Err(SdesError::Required),
            _ => Ok(None),
        };
    };
    let theirs = CryptoAttribute::parse(value).map_err(SdesError::Unusable)?;
    let offered = local.offered();
    if !offered
        .iter()
        .any(|o| o.tag == theirs.tag && o.suite == theirs.suite)
    {
        return Err(SdesError::Unusable(bad(format!(
            "the answer's tag {} and suite {} are not ones offered",
            theirs.tag,
            theirs.suite.name()
        ))));
    }
    Ok(Some(SrtpKeys {
        suite: theirs.suite,
        local: local.key,
        remote: theirs.key,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz";

    #[test]
    fn a_crypto_line_is_read_and_written_back() {
        let a = CryptoAttribute::parse(&format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}")).unwrap();
        assert_eq!((a.tag, a.suite), (1, CryptoSuite::AesCm128HmacSha1_80));
        assert_eq!(
            a.render(),
            format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}")
        );
        let b = CryptoAttribute::parse(&format!("7 aes_cm_128_hmac_sha1_32 inline:{KEY}|2^31"))
            .unwrap();
        assert_eq!((b.tag, b.suite), (7, CryptoSuite::AesCm128HmacSha1_32));
        assert_eq!(b.key, a.key);
        assert!(
            CryptoAttribute::parse(&format!("2 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|1048576"))
                .is_ok()
        );
    }

    #[test]
    fn malformed_crypto_lines_are_refused_with_a_reason_and_never_a_panic() {
        let key31 = STANDARD.encode([7u8; 31]);
        let key29 = STANDARD.encode([7u8; 29]);
        let huge = "A".repeat(10_000);
        for (value, reason) in [
            ("", "expected"),
            ("1", "expected"),
            ("1 AES_CM_128_HMAC_SHA1_80", "expected"),
            (&format!("x AES_CM_128_HMAC_SHA1_80 inline:{KEY}"), "tag"),
            (&format!("-1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}"), "tag"),
            (
                &format!("99999999999 AES_CM_128_HMAC_SHA1_80 inline:{KEY}"),
                "tag",
            ),
            (&format!("1 AEAD_AES_256_GCM inline:{KEY}"), "unknown suite"),
            (
                &format!("1 F8_128_HMAC_SHA1_80 inline:{KEY}"),
                "unknown suite",
            ),
            (&format!("1 AES_CM_128_HMAC_SHA1_80 uri:{KEY}"), "inline"),
            (
                "1 AES_CM_128_HMAC_SHA1_80 inline:!!!!notbase64!!!!",
                "base64",
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{key31}"),
                "31 bytes",
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{key29}"),
                "29 bytes",
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{}", "QUFB".repeat(30)),
                "longer",
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|2^31|1:4"),
                "MKI",
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|1:4"),
                "MKI",
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|2^99"),
                "lifetime",
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|0"),
                "lifetime",
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|"),
                "lifetime",
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY};inline:{KEY}"),
                "several keys",
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY} KDR=1"),
                "session parameters",
            ),
            (
                &format!("1 AES_CM_128_HMAC_SHA1_80 inline:{huge}"),
                "longer than",
            ),
            ("1 AES_CM_128_HMAC_SHA1_80 inline:", "0 bytes"),
            ("1 AES_CM_128_HMAC_SHA1_80 inline:\u{e9}\u{e9}", "base64"),
        ] {
            let e = CryptoAttribute::parse(value).unwrap_err();
            assert!(e.to_string().contains(reason), "{value:?}: {e}");
            assert!(!e.to_string().contains(KEY), "the key is not echoed: {e}");
        }
    }

    #[test]
    fn message_text_loses_its_keys() {
        let text = format!(
            "m=audio 1 RTP/SAVP 0\r\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|2^31\r\n\
             a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:{KEY}\r\na=ptime:20\r\n"
        );
        let r = redact_keys(&text);
        assert!(!r.contains(KEY), "{r}");
        assert_eq!(
            r,
            "m=audio 1 RTP/SAVP 0\r\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:<redacted>|2^31\r\n\
             a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:<redacted>\r\na=ptime:20\r\n"
        );
        assert_eq!(redact_keys("a=ptime:20"), "a=ptime:20");
        assert_eq!(redact_keys("inline:"), "inline:<redacted>");
    }

    /// Mutations of a valid attribute (bytes flipped, cut, repeated, replaced by
    /// separators and multibyte characters) parse or are refused; none panics.
    #[test]
    fn mutated_crypto_lines_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(4568);
        let base = format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|2^31");
        let pieces = [
            "|",
            ":",
            ";",
            " ",
            "^",
            "=",
            "\u{e9}",
            "\u{1F600}",
            "\0",
            "2^",
            "inline:",
        ];
        let local = LocalSrtp::for_policy(SrtpPolicy::Optional).unwrap();
        for _ in 0..20_000 {
            let mut text: Vec<char> = base.chars().collect();
            for _ in 0..rng.random_range(1..6) {
                let at = rng.random_range(0..=text.len());
                match rng.random_range(0..4) {
                    0 if at < text.len() => {
                        text.remove(at);
                    }
                    1 => {
                        let p = pieces[rng.random_range(0..pieces.len())];
                        for (i, c) in p.chars().enumerate() {
                            text.insert(at + i, c);
                        }
                    }
                    2 => text.truncate(at),
                    _ if at < text.len() => text[at] = rng.random_range(b' '..=b'~') as char,
                    _ => {}
                }
            }
            let value: String = text.into_iter().collect();
            if let Ok(a) = CryptoAttribute::parse(&value) {
                assert_eq!(CryptoAttribute::parse(&a.render()), Ok(a), "{value:?}");
            }
            let _ = answer_crypto(std::slice::from_ref(&value), true, Some(&local), None);
            let _ = keys_from_answer(std::slice::from_ref(&value), Some(&local));
            let _ = redact_keys(&value);
        }
    }

    #[test]
    fn keys_are_redacted_in_debug() {
        let a = CryptoAttribute::parse(&format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}")).unwrap();
        let local = LocalSrtp::for_policy(SrtpPolicy::Required).unwrap();
        let keys = SrtpKeys {
            suite: a.suite,
            local: local.key,
            remote: a.key,
        };
        for text in [format!("{a:?}"), format!("{local:?}"), format!("{keys:?}")] {
            assert!(text.contains("<redacted>"), "{text}");
            assert!(!text.contains(KEY), "{text}");
            assert!(!text.contains(&format!("{:?}", a.key.0)), "{text}");
        }
    }

    #[test]
    fn the_answerer_takes_the_first_usable_attribute_with_its_own_key() {
        let local = LocalSrtp::for_policy(SrtpPolicy::Optional).unwrap();
        let offered = vec![
            format!("1 AEAD_AES_128_GCM inline:{KEY}"),
            format!("2 AES_CM_128_HMAC_SHA1_32 inline:{KEY}"),
            format!("3 AES_CM_128_HMAC_SHA1_80 inline:{KEY}"),
        ];
        let (ours, keys) = answer_crypto(&offered, true, Some(&local), None)
            .unwrap()
            .unwrap();
        assert_eq!(
            (ours.tag, ours.suite),
            (2, CryptoSuite::AesCm128HmacSha1_32)
        );
        assert_eq!(ours.key, local.key);
        assert_eq!(keys.local, local.key);
        assert_eq!(keys.remote.0.to_vec(), STANDARD.decode(KEY).unwrap());
        // Policy off: crypto is not looked at.
        assert_eq!(answer_crypto(&offered, false, None, None), Ok(None));
    }

    #[test]
    fn the_answerer_refuses_what_the_policy_cannot_take() {
        let optional = LocalSrtp::for_policy(SrtpPolicy::Optional).unwrap();
        let required = LocalSrtp::for_policy(SrtpPolicy::Required).unwrap();
        assert_eq!(answer_crypto(&[], false, Some(&optional), None), Ok(None));
        assert_eq!(
            answer_crypto(&[], false, Some(&required), None),
            Err(SdesError::Required)
        );
        assert_eq!(
            answer_crypto(&[], true, Some(&optional), None),
            Err(SdesError::SavpWithoutCrypto)
        );
        let e = answer_crypto(
            &[format!("1 AEAD_AES_256_GCM inline:{KEY}")],
            false,
            Some(&optional),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown suite"), "{e}");
    }

    /// RFC 4568 §7.1.4: a re-offer keeping the peer's key keeps ours; a new key (or suite)
    /// from the peer gets a fresh key of ours; no crypto in an SRTP call is refused.
    #[test]
    fn a_re_offer_with_new_keys_is_answered_with_a_fresh_key_and_without_keys_is_refused() {
        let local = LocalSrtp::for_policy(SrtpPolicy::Optional).unwrap();
        let first = format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}");
        let (_, current) = answer_crypto(std::slice::from_ref(&first), false, Some(&local), None)
            .unwrap()
            .unwrap();
        assert_eq!(current.local, local.key);
        let (ours, same) = answer_crypto(&[first], false, Some(&local), Some(&current))
            .unwrap()
            .unwrap();
        assert_eq!(same, current, "the same key: nothing changes");
        assert_eq!(ours.key, local.key);
        let new_key = STANDARD.encode([9u8; MASTER_LEN]);
        for offer in [
            format!("1 AES_CM_128_HMAC_SHA1_80 inline:{new_key}"),
            format!("2 AES_CM_128_HMAC_SHA1_32 inline:{KEY}"),
        ] {
            let (ours, rekeyed) = answer_crypto(&[offer], false, Some(&local), Some(&current))
                .unwrap()
                .unwrap();
            assert_ne!(rekeyed.local, current.local, "a fresh key of ours");
            assert_eq!(ours.key, rekeyed.local);
            assert_ne!(
                (rekeyed.remote, rekeyed.suite),
                (current.remote, current.suite)
            );
        }
        assert_eq!(
            answer_crypto(&[], false, Some(&local), Some(&current)),
            Err(SdesError::Downgrade)
        );
        let required = LocalSrtp::for_policy(SrtpPolicy::Required).unwrap();
        assert_eq!(
            answer_crypto(&[], false, Some(&required), Some(&current)),
            Err(SdesError::Required)
        );
    }

    #[test]
    fn an_answer_must_pick_an_offered_tag_and_suite() {
        let local = LocalSrtp::for_policy(SrtpPolicy::Required).unwrap();
        let theirs = format!("2 AES_CM_128_HMAC_SHA1_32 inline:{KEY}");
        let keys = keys_from_answer(&[theirs], Some(&local)).unwrap().unwrap();
        assert_eq!(keys.suite, CryptoSuite::AesCm128HmacSha1_32);
        let wrong = format!("2 AES_CM_128_HMAC_SHA1_80 inline:{KEY}");
        assert!(keys_from_answer(&[wrong], Some(&local)).is_err());
        assert_eq!(
            keys_from_answer(&[], Some(&local)),
            Err(SdesError::Required)
        );
        let optional = LocalSrtp::for_policy(SrtpPolicy::Optional).unwrap();
        assert_eq!(keys_from_answer(&[], Some(&optional)), Ok(None));
    }

    #[test]
    fn an_offer_lists_both_suites_with_one_fresh_key() {
        let a = LocalSrtp::for_policy(SrtpPolicy::Optional).unwrap();
        let b = LocalSrtp::for_policy(SrtpPolicy::Optional).unwrap();
        assert_ne!(a.key, b.key);
        let offered = a.offered();
        assert_eq!(offered.len(), 2);
        for o in &offered {
            let back = CryptoAttribute::parse(&o.render()).unwrap();
            assert_eq!(back, *o);
        }
        assert_eq!(LocalSrtp::for_policy(SrtpPolicy::Off), None);
    }
}
