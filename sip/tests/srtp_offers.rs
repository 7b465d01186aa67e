//! Inbound SDES offers against a trunk's SRTP policy, sent from a raw UDP socket: a
//! `required` trunk answers 488 to plain RTP and to an offer whose crypto is unusable
//! (bad base64, unknown suite, oversized key), with the reason in a Warning header and
//! never a key; a usable offer reaches the engine, whose answer carries SRTP.

mod common;

use std::time::Duration;

use callsmith_sip::{SrtpPolicy, TrunkConfig};
use common::*;
use tokio::net::UdpSocket;

const T: Duration = Duration::from_secs(10);
const KEY: &str = "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz";

/// The final response to an INVITE with `offer` (its media lines) on a trunk with `policy`; a call that
/// reaches the engine is answered, and the answer's SDP comes back in the 200.
async fn response_for(policy: SrtpPolicy, offer: &str, call_id: &str) -> String {
    let mut trunk = TrunkConfig::new("carrier", "127.0.0.1:5999".parse().unwrap());
    trunk.srtp = policy;
    let stack = start_stack(vec![trunk], &["15550100"]).await;
    let mut calls = stack.take_incoming().unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let msg = raw_invite(sock.local_addr().unwrap(), call_id, offer);
    sock.send_to(msg.as_bytes(), stack.udp_addr().unwrap())
        .await
        .unwrap();
    let resp = tokio::select! {
        resp = final_response(&sock, T) => resp,
        Some(call) = calls.recv() => {
            // The engine's media as it asks for it (no SRTP): the trunk's policy applies.
            let _leg = call.answer(media()).await;
            final_response(&sock, T).await
        }
    };
    resp.unwrap_or_else(|| panic!("{call_id}: no final response"))
}

fn status_line(resp: &str) -> &str {
    resp.split("\r\n").next().unwrap_or("")
}

const PCMU: &str = "a=rtpmap:0 PCMU/8000\r\n";

#[tokio::test]
async fn a_required_trunk_answers_488_to_plain_rtp() {
    let resp = response_for(
        SrtpPolicy::Required,
        &format!("m=audio 6000 RTP/AVP 0\r\n{PCMU}"),
        "required-plain",
    )
    .await;
    assert_eq!(
        status_line(&resp),
        "SIP/2.0 488 Not Acceptable Here",
        "{resp}"
    );
    assert!(
        resp.contains("Warning: 399 callsmith") && resp.contains("SRTP is required"),
        "{resp}"
    );
}

#[tokio::test]
async fn malformed_crypto_is_a_clean_488_with_the_reason_and_no_key() {
    let oversized = format!("{KEY}{KEY}");
    for (n, (crypto, why)) in [
        (
            format!("1 AES_CM_128_HMAC_SHA1_80 inline:%%%%{}", &KEY[4..]),
            "base64",
        ),
        (
            format!("1 AES_256_CM_HMAC_SHA1_80 inline:{KEY}"),
            "unknown suite",
        ),
        (
            format!("1 AES_CM_128_HMAC_SHA1_80 inline:{oversized}"),
            "longer than 30 bytes",
        ),
        ("1 AES_CM_128_HMAC_SHA1_80".to_string(), "expected"),
    ]
    .into_iter()
    .enumerate()
    {
        for policy in [SrtpPolicy::Optional, SrtpPolicy::Required] {
            let resp = response_for(
                policy,
                &format!("m=audio 6000 RTP/SAVP 0\r\n{PCMU}a=crypto:{crypto}\r\n"),
                &format!("malformed-{n}-{policy:?}"),
            )
            .await;
            assert_eq!(
                status_line(&resp),
                "SIP/2.0 488 Not Acceptable Here",
                "{crypto}: {resp}"
            );
            assert!(resp.contains(why), "{crypto}: {resp}");
            assert!(!resp.contains(&KEY[8..]), "no key in the response: {resp}");
        }
    }
}

#[tokio::test]
async fn a_usable_srtp_offer_is_answered_with_srtp_and_another_key() {
    for policy in [SrtpPolicy::Optional, SrtpPolicy::Required] {
        let resp = response_for(
            policy,
            &format!(
                "m=audio 6000 RTP/SAVP 0\r\n{PCMU}a=crypto:5 AES_CM_128_HMAC_SHA1_80 inline:{KEY}\r\n"
            ),
            &format!("usable-{policy:?}"),
        )
        .await;
        assert_eq!(status_line(&resp), "SIP/2.0 200 OK", "{resp}");
        assert!(resp.contains(" RTP/SAVP 0"), "{resp}");
        assert!(
            resp.contains("a=crypto:5 AES_CM_128_HMAC_SHA1_80 inline:"),
            "{resp}"
        );
        assert!(!resp.contains(KEY), "our key is our own: {resp}");
    }
}

#[tokio::test]
async fn an_optional_trunk_answers_plain_rtp_and_an_off_trunk_refuses_savp() {
    let resp = response_for(
        SrtpPolicy::Optional,
        &format!("m=audio 6000 RTP/AVP 0\r\n{PCMU}"),
        "optional-plain",
    )
    .await;
    assert_eq!(status_line(&resp), "SIP/2.0 200 OK", "{resp}");
    assert!(!resp.contains("a=crypto"), "{resp}");
    let resp = response_for(
        SrtpPolicy::Off,
        &format!(
            "m=audio 6000 RTP/SAVP 0\r\n{PCMU}a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}\r\n"
        ),
        "off-savp",
    )
    .await;
    assert_eq!(
        status_line(&resp),
        "SIP/2.0 488 Not Acceptable Here",
        "{resp}"
    );
}
