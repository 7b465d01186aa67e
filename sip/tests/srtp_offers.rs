//! Inbound SDES offers against a trunk's SRTP policy, sent from a raw UDP socket: a
//! `required` trunk answers 488 to plain RTP and to an offer whose crypto is unusable
//! (bad base64, unknown suite, oversized key), with the reason in a Warning header and
//! never a key; a usable offer reaches the engine, whose answer carries SRTP.

mod common;

use std::time::Duration;

use callsmith_sip::{LegEvent, SrtpPolicy, TrunkConfig};
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

/// A request inside the raw caller's dialog (`to_tag`: the 200's), CSeq `cseq`.
fn in_dialog(
    method: &str,
    me: std::net::SocketAddr,
    call_id: &str,
    to_tag: &str,
    cseq: u32,
    sdp: &str,
) -> String {
    let body = if sdp.is_empty() {
        String::new()
    } else {
        format!(
            "v=0\r\no=peer 1 {cseq} IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n{sdp}"
        )
    };
    let content_type = if body.is_empty() {
        ""
    } else {
        "Content-Type: application/sdp\r\n"
    };
    format!(
        "{method} sip:15550100@127.0.0.1 SIP/2.0\r\n\
         Via: SIP/2.0/UDP {me};rport;branch=z9hG4bK-{call_id}-{cseq}{method}\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:+15550001@127.0.0.1>;tag=offer\r\n\
         To: <sip:15550100@127.0.0.1>;tag={to_tag}\r\n\
         Call-ID: {call_id}@127.0.0.1\r\n\
         CSeq: {cseq} {method}\r\n\
         Contact: <sip:+15550001@{me}>\r\n\
         {content_type}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// The key of the first `a=crypto` line of a message's SDP.
fn answer_key(resp: &str) -> String {
    let line = resp
        .lines()
        .find_map(|l| l.strip_prefix("a=crypto:"))
        .unwrap_or_else(|| panic!("no a=crypto: {resp}"));
    let inline = line.split("inline:").nth(1).unwrap();
    inline.split(['|', ' ']).next().unwrap().to_string()
}

/// RFC 4568 §7.1.4 on the wire: a re-INVITE with a new key is answered 200 with a fresh key
/// of ours and the leg reports the new keys for the media; one with the same key keeps
/// ours and reports nothing; one without crypto gets 488 and the call goes on.
#[tokio::test]
async fn a_reinvite_with_a_new_key_is_answered_with_a_fresh_key_of_ours() {
    const KEY2: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd";
    let savp = |key: &str| {
        format!(
            "m=audio 6000 RTP/SAVP 0\r\n{PCMU}a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{key}\r\n"
        )
    };
    let mut trunk = TrunkConfig::new("carrier", "127.0.0.1:5999".parse().unwrap());
    trunk.srtp = SrtpPolicy::Optional;
    let stack = start_stack(vec![trunk], &["15550100"]).await;
    let mut calls = stack.take_incoming().unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let me = sock.local_addr().unwrap();
    let to = stack.udp_addr().unwrap();
    let call_id = "rekey";
    sock.send_to(raw_invite(me, call_id, &savp(KEY)).as_bytes(), to)
        .await
        .unwrap();
    let call = tokio::time::timeout(T, calls.recv())
        .await
        .unwrap()
        .unwrap();
    let mut leg = call.answer(media()).await.unwrap();
    let ok = final_response(&sock, T).await.expect("200");
    assert_eq!(status_line(&ok), "SIP/2.0 200 OK", "{ok}");
    let first_key = answer_key(&ok);
    let to_tag = ok
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("to:"))
        .and_then(|l| l.split(";tag=").nth(1))
        .expect("a To tag")
        .trim()
        .to_string();
    sock.send_to(in_dialog("ACK", me, call_id, &to_tag, 1, "").as_bytes(), to)
        .await
        .unwrap();
    let next_event = async |leg: &mut callsmith_sip::CallLeg| {
        tokio::time::timeout(Duration::from_millis(500), leg.next_event())
            .await
            .ok()
            .flatten()
    };
    assert!(matches!(
        next_event(&mut leg).await,
        Some(LegEvent::Answered(_))
    ));

    let reinvite = |cseq: u32, sdp: String| in_dialog("INVITE", me, call_id, &to_tag, cseq, &sdp);
    sock.send_to(reinvite(2, savp(KEY)).as_bytes(), to)
        .await
        .unwrap();
    let resp = final_response(&sock, T).await.expect("a response");
    assert_eq!(status_line(&resp), "SIP/2.0 200 OK", "{resp}");
    assert_eq!(
        answer_key(&resp),
        first_key,
        "the same key of the peer's: ours stays"
    );
    sock.send_to(in_dialog("ACK", me, call_id, &to_tag, 2, "").as_bytes(), to)
        .await
        .unwrap();
    assert!(matches!(
        next_event(&mut leg).await,
        Some(LegEvent::MediaChanged(_))
    ));
    assert_eq!(next_event(&mut leg).await, None, "no re-key");

    sock.send_to(reinvite(3, savp(KEY2)).as_bytes(), to)
        .await
        .unwrap();
    let resp = final_response(&sock, T).await.expect("a response");
    assert_eq!(status_line(&resp), "SIP/2.0 200 OK", "{resp}");
    let second_key = answer_key(&resp);
    assert_ne!(second_key, first_key, "a fresh key of ours: {resp}");
    sock.send_to(in_dialog("ACK", me, call_id, &to_tag, 3, "").as_bytes(), to)
        .await
        .unwrap();
    assert!(matches!(
        next_event(&mut leg).await,
        Some(LegEvent::MediaChanged(_))
    ));
    match next_event(&mut leg).await {
        Some(LegEvent::SrtpRekeyed(keys)) => {
            use base64::Engine as _;
            let engine = base64::engine::general_purpose::STANDARD;
            assert_eq!(keys.remote.0.to_vec(), engine.decode(KEY2).unwrap());
            assert_eq!(keys.local.0.to_vec(), engine.decode(&second_key).unwrap());
        }
        other => panic!("expected the new keys: {other:?}"),
    }

    sock.send_to(
        reinvite(4, format!("m=audio 6000 RTP/AVP 0\r\n{PCMU}")).as_bytes(),
        to,
    )
    .await
    .unwrap();
    let resp = final_response(&sock, T).await.expect("a response");
    assert_eq!(
        status_line(&resp),
        "SIP/2.0 488 Not Acceptable Here",
        "{resp}"
    );
    assert_eq!(next_event(&mut leg).await, None, "the call keeps its keys");
}
