//! Bounded fuzzing of the SIP-side parsers fed with network bytes: the wire check every
//! datagram goes through (`wire::inspect`: rsipstack's `SipMessage::try_from` plus our
//! `validate_request`) and SDP parsing with offer/answer negotiation.
//!
//! Each target replays `tests/fuzz_corpus/<target>/` and then mutations of it for at most
//! ~3 s or its iteration cap, whichever comes first (see `tests/fuzz/harness.rs`).
//! `CALLSMITH_FUZZ_SEED=<u64>|random` sets the seed (printed on every run; the default is
//! fixed per target); `CALLSMITH_FUZZ_SECS=<secs>` sets the time budget and lifts the cap:
//! `CALLSMITH_FUZZ_SECS=600 cargo test -p callsmith-sip --test fuzz -- --nocapture`.

#[path = "../../tests/fuzz/harness.rs"]
mod harness;

use callsmith_sip::sdes::{CryptoSuite, LocalSrtp, MasterKey, SrtpKeys, SrtpPolicy};
use callsmith_sip::sdp::{
    LOOPBACK, LocalMedia, SdpError, SessionDescription, answer_offer, answer_reoffer,
    negotiated_from_answer,
};
use callsmith_sip::tls::check_sips;
use callsmith_sip::wire::{Verdict, inspect, validate_request};
use rsipstack::sip::SipMessage;

#[test]
fn fuzz_sip_message() {
    harness::run(
        "sip_message",
        &harness::corpus_dir("sip_message"),
        Vec::new(),
        50_000,
        |bytes| {
            let verdict = inspect(bytes);
            match &verdict {
                Verdict::Request { method } => {
                    if method.is_empty() {
                        return Err("accepted request without a method".into());
                    }
                    // The accepted request is the one `validate_request` passes.
                    match SipMessage::try_from(bytes) {
                        Ok(SipMessage::Request(req)) => {
                            validate_request(&req).map_err(|r| {
                                format!("accepted, then refused on re-parse: {r:?}")
                            })?;
                            // The 416 rule reads the scheme the parser saw.
                            let uri = req.uri.to_string();
                            let sips = req.uri.scheme == Some(rsipstack::sip::Scheme::Sips);
                            if check_sips(&uri, false).is_err() != sips {
                                return Err(format!("sips: {sips} but check_sips on {uri:?}"));
                            }
                            check_sips(&uri, true).map_err(|e| format!("over TLS: {e}"))?;
                        }
                        other => return Err(format!("accepted, then re-parsed as {other:?}")),
                    }
                }
                Verdict::Response { code } if !(100..=699).contains(code) => {
                    return Err(format!("response code {code} passed"));
                }
                Verdict::Refused(r) if r.code != 400 && r.code != 505 => {
                    return Err(format!("refusal with code {}", r.code));
                }
                _ => {}
            }
            // The decision is a pure function of the bytes.
            let again = inspect(bytes);
            if again != verdict {
                return Err(format!("verdict changed: {verdict:?} then {again:?}"));
            }
            Ok(())
        },
    );
}

#[test]
fn fuzz_sdp() {
    let local = LocalMedia::g711(LOOPBACK, 40_000);
    harness::run(
        "sdp",
        &harness::corpus_dir("sdp"),
        Vec::new(),
        100_000,
        |bytes| {
            // SIP bodies are bytes; the stack reads them as (lossy) UTF-8 text.
            let text = String::from_utf8_lossy(bytes);
            let Ok(sd) = SessionDescription::parse(&text) else {
                return Ok(());
            };
            let _ = sd.audio();
            let usable = sd.usable_audio().is_ok();
            let as_answer = negotiated_from_answer(&sd, &local);
            match answer_offer(&sd, &local, 7, 8) {
                Ok((body, negotiated)) => {
                    if !usable {
                        return Err("answered an offer without usable audio".into());
                    }
                    // Our own answer parses back and negotiates the same codec and type.
                    let parsed = SessionDescription::parse(&body)
                        .map_err(|e| format!("our answer does not parse: {e:?}\n{body}"))?;
                    let back = negotiated_from_answer(&parsed, &local)
                        .map_err(|e| format!("our answer does not negotiate: {e:?}\n{body}"))?;
                    if (back.codec, back.payload_type)
                        != (negotiated.codec, negotiated.payload_type)
                    {
                        return Err(format!(
                            "answer negotiates {:?}/{} but was built for {:?}/{}\n{body}",
                            back.codec,
                            back.payload_type,
                            negotiated.codec,
                            negotiated.payload_type
                        ));
                    }
                    if back.remote_rtp.port() != local.port {
                        return Err(format!("answer port {}", back.remote_rtp.port()));
                    }
                    if as_answer.is_err() {
                        return Err(format!(
                            "offer answered but not readable as an answer: {as_answer:?}"
                        ));
                    }
                }
                Err(_) => {
                    if usable && as_answer.is_ok() {
                        // Both read the same stream: a codec and address found by one are found
                        // by the other.
                        return Err(format!(
                            "answer_offer failed where negotiated_from_answer gave {as_answer:?}"
                        ));
                    }
                }
            }
            Ok(())
        },
    );
}

/// SDP with SDES crypto (`a=crypto`, RFC 4568) against a trunk with SRTP required: an offer
/// is answered with SRTP or refused (an error, the stack's 488), never with plain RTP; the
/// answer carries exactly one `a=crypto`, with our key and not the offerer's.
#[test]
fn fuzz_sdp_srtp() {
    let local = LocalMedia {
        srtp: LocalSrtp::for_policy(SrtpPolicy::Required),
        ..LocalMedia::g711(LOOPBACK, 40_000)
    };
    harness::run(
        "sdp_srtp",
        &harness::corpus_dir("sdp_srtp"),
        Vec::new(),
        100_000,
        |bytes| {
            let text = String::from_utf8_lossy(bytes);
            let Ok(sd) = SessionDescription::parse(&text) else {
                return Ok(());
            };
            let _ = negotiated_from_answer(&sd, &local);
            match answer_offer(&sd, &local, 7, 8) {
                Ok((body, negotiated)) => {
                    let Some(keys) = negotiated.srtp else {
                        return Err(format!("a required trunk answered plain RTP\n{body}"));
                    };
                    let parsed = SessionDescription::parse(&body)
                        .map_err(|e| format!("our answer does not parse: {e:?}\n{body}"))?;
                    let crypto = &parsed.audio().ok_or("no audio in our answer")?.crypto;
                    if crypto.len() != 1 {
                        return Err(format!(
                            "{} a=crypto lines in our answer\n{body}",
                            crypto.len()
                        ));
                    }
                    let ours = callsmith_sip::sdes::CryptoAttribute::parse(&crypto[0])
                        .map_err(|e| format!("our a=crypto does not parse: {e}\n{body}"))?;
                    if ours.key != keys.local || ours.suite != keys.suite {
                        return Err(format!("our a=crypto is not our key and suite\n{body}"));
                    }
                }
                Err(SdpError::Invalid(_)) => return Err("parsed, then invalid".into()),
                Err(_) => {}
            }
            // The same body as a re-offer in a call with SRTP keys (RFC 4568 §7.1.4):
            // never plain RTP; our key stays only while the peer keeps its key and suite.
            let current = SrtpKeys {
                suite: CryptoSuite::AesCm128HmacSha1_80,
                local: local.srtp.unwrap().key,
                remote: MasterKey([0x5a; 30]),
            };
            if let Ok((body, negotiated)) = answer_reoffer(&sd, &local, Some(&current), 7, 9) {
                let Some(keys) = negotiated.srtp else {
                    return Err(format!("a re-offer dropped the call to plain RTP\n{body}"));
                };
                let kept = keys.remote == current.remote && keys.suite == current.suite;
                if kept != (keys.local == current.local) {
                    return Err(format!(
                        "peer key kept: {kept}, ours kept: {}\n{body}",
                        keys.local == current.local
                    ));
                }
            }
            Ok(())
        },
    );
}
