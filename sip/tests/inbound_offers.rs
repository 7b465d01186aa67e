//! Inbound offers the stack cannot serve, sent from a raw UDP socket: an offer whose only
//! audio stream is rejected (port 0) or that offers audio on SRTP alone is answered 488 Not
//! Acceptable Here before the engine hears of the call; a plain RTP offer reaches the engine.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use callsmith_sip::TrunkConfig;
use common::*;
use tokio::net::UdpSocket;

const T: Duration = Duration::from_secs(10);
const PLAIN: &str = "m=audio 6000 RTP/AVP 0 8 101\r\n";

/// An INVITE offering `m_line` with PCMU, PCMA and telephone-event mapped.
fn invite(me: SocketAddr, call_id: &str, m_line: &str) -> String {
    raw_invite(
        me,
        call_id,
        &format!(
            "{m_line}a=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\na=rtpmap:101 telephone-event/8000\r\n"
        ),
    )
}

async fn status_for(m_line: &str, call_id: &str) -> String {
    let stack = start_stack(
        vec![TrunkConfig::new(
            "carrier",
            "127.0.0.1:5999".parse().unwrap(),
        )],
        &["15550100"],
    )
    .await;
    let mut calls = stack.take_incoming().unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let msg = invite(sock.local_addr().unwrap(), call_id, m_line);
    sock.send_to(msg.as_bytes(), stack.udp_addr().unwrap())
        .await
        .unwrap();
    // A call that reaches the engine is refused with 486, so every case ends in a final
    // response and a 488 can only come from the media check.
    let resp = tokio::select! {
        resp = final_response(&sock, T) => resp,
        Some(call) = calls.recv() => {
            call.reject(486, None);
            final_response(&sock, T).await
        }
    };
    let resp = resp.unwrap_or_else(|| panic!("{call_id}: no final response"));
    resp.split("\r\n").next().unwrap_or("").to_string()
}

#[tokio::test]
async fn an_offer_whose_only_audio_is_rejected_gets_488() {
    assert_eq!(
        status_for("m=audio 0 RTP/AVP 0 8 101\r\n", "audio-port-0").await,
        "SIP/2.0 488 Not Acceptable Here"
    );
}

#[tokio::test]
async fn an_srtp_only_offer_gets_488() {
    for proto in ["RTP/SAVP", "RTP/SAVPF"] {
        let m_line = format!("m=audio 6000 {proto} 0 8 101\r\n");
        assert_eq!(
            status_for(&m_line, &format!("srtp-{}", proto.len())).await,
            "SIP/2.0 488 Not Acceptable Here",
            "{proto}"
        );
    }
}

#[tokio::test]
async fn a_plain_rtp_offer_reaches_the_engine() {
    assert_eq!(status_for(PLAIN, "plain").await, "SIP/2.0 486 Busy Here");
}

#[tokio::test]
async fn plain_audio_beside_an_srtp_stream_reaches_the_engine() {
    let m_lines = format!("m=audio 6002 RTP/SAVP 0\r\n{PLAIN}");
    assert_eq!(
        status_for(&m_lines, "srtp-and-plain").await,
        "SIP/2.0 486 Busy Here"
    );
}
