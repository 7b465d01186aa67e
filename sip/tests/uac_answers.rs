//! Outbound INVITEs and their 2xx responses, with the test as the trunk's gateway on a plain
//! loopback socket, so that it can read every header and send what SIPp scenarios cannot
//! order precisely:
//! - an edge-routed trunk's INVITE names the trunk in `X-Callsmith-Trunk` (the SIP edge's
//!   routing key); another trunk's carries no such header, and a call's own headers cannot
//!   set it;
//! - a 2xx retransmitted after the INVITE transaction has ended is ACKed again, and is not
//!   taken for a new branch;
//! - a second branch answering the same INVITE is ACKed and ended with a BYE, along its own
//!   route, while the call goes on with the first;
//! - in-dialog requests reach the call from the branch that answered first; from another
//!   branch they get 481.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use callsmith_sip::{
    CallStatus, EDGE_TRUNK_HEADER, LegEvent, OutboundCall, Party, SipStack, TrunkConfig,
};
use common::*;
use tokio::net::UdpSocket;

const T: Duration = Duration::from_secs(10);

const ANSWER_SDP: &str = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\n\
                          t=0 0\r\nm=audio 41000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n";

struct Gateway {
    sock: UdpSocket,
    addr: SocketAddr,
}

impl Gateway {
    async fn start() -> (Gateway, SipStack) {
        Gateway::start_with(|_| {}).await
    }

    /// A gateway whose trunk (`gw`) `adjust` configures.
    async fn start_with(adjust: impl FnOnce(&mut TrunkConfig)) -> (Gateway, SipStack) {
        let sock = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let addr = sock.local_addr().expect("addr");
        let mut trunk = TrunkConfig::new("gw", addr);
        adjust(&mut trunk);
        let stack = start_stack(vec![trunk], &[]).await;
        (Gateway { sock, addr }, stack)
    }

    /// The next message the stack sends, and where from.
    async fn next(&self, within: Duration) -> Option<(String, SocketAddr)> {
        let mut buf = vec![0u8; 65536];
        let (n, from) = tokio::time::timeout(within, self.sock.recv_from(&mut buf))
            .await
            .ok()?
            .expect("recv");
        Some((String::from_utf8_lossy(&buf[..n]).into_owned(), from))
    }

    /// The next message, which must be a `method` request.
    async fn expect(&self, method: &str) -> (String, SocketAddr) {
        let (msg, from) = self
            .next(T)
            .await
            .unwrap_or_else(|| panic!("no {method} came"));
        assert!(
            msg.starts_with(&format!("{method} ")),
            "expected {method}:\n{msg}"
        );
        (msg, from)
    }

    async fn send(&self, msg: &str, to: SocketAddr) {
        self.sock.send_to(msg.as_bytes(), to).await.expect("send");
    }
}

fn call() -> OutboundCall {
    OutboundCall {
        trunk: Some("gw".into()),
        from_number: "+15550001".into(),
        from_display: None,
        to_number: "+15550100".into(),
        headers: vec![],
        local_media: media(),
        ring_timeout: T,
    }
}

/// Every value of header `name` in `msg`.
fn headers<'a>(msg: &'a str, name: &str) -> Vec<&'a str> {
    msg.split("\r\n")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
        .collect()
}

fn header<'a>(msg: &'a str, name: &str) -> &'a str {
    headers(msg, name)
        .first()
        .copied()
        .unwrap_or_else(|| panic!("no {name} in\n{msg}"))
}

fn to_tag(msg: &str) -> Option<&str> {
    let to = header(msg, "To");
    let rest = &to[to.find(";tag=")? + 5..];
    Some(rest.split([';', '>', ' ']).next().unwrap_or(rest))
}

fn request_uri(msg: &str) -> &str {
    msg.split(' ').nth(1).expect("request line")
}

/// A 200 to `invite` from the branch tagged `tag`, whose Contact is `sip:<tag>@gateway`.
fn ok(invite: &str, gw: SocketAddr, tag: &str, extra: &str) -> String {
    let vias: String = headers(invite, "Via")
        .iter()
        .map(|v| format!("Via: {v}\r\n"))
        .collect();
    format!(
        "SIP/2.0 200 OK\r\n{vias}From: {}\r\nTo: {};tag={tag}\r\nCall-ID: {}\r\nCSeq: {}\r\n\
         Contact: <sip:{tag}@{gw}>\r\n{extra}Content-Type: application/sdp\r\n\
         Content-Length: {}\r\n\r\n{ANSWER_SDP}",
        header(invite, "From"),
        header(invite, "To"),
        header(invite, "Call-ID"),
        header(invite, "CSeq"),
        ANSWER_SDP.len()
    )
}

/// A 200 to an in-dialog request.
fn ok_to(request: &str) -> String {
    let vias: String = headers(request, "Via")
        .iter()
        .map(|v| format!("Via: {v}\r\n"))
        .collect();
    format!(
        "SIP/2.0 200 OK\r\n{vias}From: {}\r\nTo: {}\r\nCall-ID: {}\r\nCSeq: {}\r\n\
         Content-Length: 0\r\n\r\n",
        header(request, "From"),
        header(request, "To"),
        header(request, "Call-ID"),
        header(request, "CSeq"),
    )
}

/// A BYE from the branch tagged `tag` of `invite`'s call.
fn bye_from(invite: &str, gw: SocketAddr, tag: &str, branch: &str) -> String {
    let contact = header(invite, "Contact");
    let target = contact
        .trim_start_matches('<')
        .split('>')
        .next()
        .expect("uri");
    format!(
        "BYE {target} SIP/2.0\r\nVia: SIP/2.0/UDP {gw};branch=z9hG4bK-{branch}\r\n\
         From: {};tag={tag}\r\nTo: {}\r\nCall-ID: {}\r\nCSeq: 1 BYE\r\nMax-Forwards: 70\r\n\
         Content-Length: 0\r\n\r\n",
        header(invite, "To"),
        header(invite, "From"),
        header(invite, "Call-ID"),
    )
}

async fn answered(leg: &mut callsmith_sip::CallLeg) {
    loop {
        match tokio::time::timeout(T, leg.next_event()).await {
            Ok(Some(LegEvent::Answered(_))) => return,
            Ok(Some(LegEvent::Ended(e))) => panic!("ended before the answer: {e:?}"),
            Ok(Some(_)) => {}
            other => panic!("no answer: {other:?}"),
        }
    }
}

/// The leg reports nothing within `quiet` (it has not ended).
async fn still_up(leg: &mut callsmith_sip::CallLeg, quiet: Duration) {
    if let Ok(ev) = tokio::time::timeout(quiet, leg.next_event()).await {
        panic!("the call should go on, got {ev:?}");
    }
}

#[tokio::test]
async fn an_edge_routed_trunk_names_itself_to_the_edge() {
    let (gw, stack) = Gateway::start_with(|t| t.edge_route = true).await;
    let _leg = stack.place_call(call()).await.expect("invite sent");
    let (invite, _) = gw.expect("INVITE").await;
    assert_eq!(headers(&invite, EDGE_TRUNK_HEADER), ["gw"], "{invite}");

    let (plain, stack) = Gateway::start().await;
    let _leg = stack.place_call(call()).await.expect("invite sent");
    let (invite, _) = plain.expect("INVITE").await;
    assert!(headers(&invite, EDGE_TRUNK_HEADER).is_empty(), "{invite}");

    // A call's own headers cannot name (or rename) the trunk.
    let spoofed = OutboundCall {
        headers: vec![(EDGE_TRUNK_HEADER.into(), "other".into())],
        ..call()
    };
    assert!(stack.place_call(spoofed).await.is_err());
}

#[tokio::test]
async fn a_retransmitted_2xx_is_acked_again_after_the_invite_transaction_ended() {
    let (gw, stack) = Gateway::start().await;
    let mut leg = stack.place_call(call()).await.expect("invite sent");
    let (invite, stack_addr) = gw.expect("INVITE").await;
    let answer = ok(&invite, gw.addr, "a", "");
    gw.send(&answer, stack_addr).await;
    let (ack, _) = gw.expect("ACK").await;
    assert_eq!(to_tag(&ack), Some("a"), "{ack}");
    answered(&mut leg).await;

    // The 200 again, as if the ACK had been lost, well after the transaction ended.
    tokio::time::sleep(Duration::from_millis(300)).await;
    gw.send(&answer, stack_addr).await;
    let (again, _) = gw.expect("ACK").await;
    assert_eq!(to_tag(&again), Some("a"), "{again}");
    assert_eq!(header(&again, "CSeq"), header(&ack, "CSeq"));
    assert_eq!(request_uri(&again), request_uri(&ack));
    // A retransmission is not a second branch: no BYE, and the call goes on.
    assert!(gw.next(Duration::from_millis(400)).await.is_none());
    still_up(&mut leg, Duration::from_millis(100)).await;

    leg.hangup();
    let (bye, _) = gw.expect("BYE").await;
    assert_eq!(to_tag(&bye), Some("a"), "{bye}");
    assert_eq!(request_uri(&bye), format!("sip:a@{}", gw.addr));
    gw.send(&ok_to(&bye), stack_addr).await;
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(
        (end.call_status, end.by),
        (CallStatus::Answered, Party::Local)
    );
}

#[tokio::test]
async fn a_second_branch_that_answers_is_acked_and_ended_while_the_call_goes_on() {
    let (gw, stack) = Gateway::start().await;
    let mut leg = stack.place_call(call()).await.expect("invite sent");
    let (invite, stack_addr) = gw.expect("INVITE").await;
    let invite_seq: u32 = header(&invite, "CSeq")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("CSeq number");

    // Two branches answer, as after a forking proxy; the second one through two proxies.
    let first = ok(&invite, gw.addr, "a", "");
    let second = ok(
        &invite,
        gw.addr,
        "b",
        &format!(
            "Record-Route: <sip:p1@{0};lr>, <sip:p2@{0};lr>\r\n",
            gw.addr
        ),
    );
    gw.send(&first, stack_addr).await;
    gw.send(&second, stack_addr).await;

    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|m: &String| m.starts_with("BYE ") && to_tag(m) == Some("b"))
        || seen.iter().filter(|m| m.starts_with("ACK ")).count() < 2
    {
        let (msg, _) = gw
            .next(T)
            .await
            .unwrap_or_else(|| panic!("expected ACKs to both branches and a BYE: {seen:#?}"));
        seen.push(msg);
    }
    let position = |method: &str, tag: &str| {
        seen.iter()
            .position(|m| m.starts_with(&format!("{method} ")) && to_tag(m) == Some(tag))
            .unwrap_or_else(|| panic!("no {method} to branch {tag}: {seen:#?}"))
    };
    let (ack_a, ack_b, bye_b) = (
        position("ACK", "a"),
        position("ACK", "b"),
        position("BYE", "b"),
    );
    assert!(
        ack_b < bye_b,
        "the second branch is ACKed before its BYE: {seen:#?}"
    );
    assert_eq!(request_uri(&seen[ack_a]), format!("sip:a@{}", gw.addr));
    let bye = seen[bye_b].clone();
    assert_eq!(request_uri(&bye), format!("sip:b@{}", gw.addr), "{bye}");
    assert_eq!(
        headers(&bye, "Route"),
        [
            format!("<sip:p2@{};lr>", gw.addr),
            format!("<sip:p1@{};lr>", gw.addr)
        ],
        "the branch's route set, reversed: {bye}"
    );
    assert_eq!(header(&bye, "CSeq"), format!("{} BYE", invite_seq + 1));
    assert_eq!(header(&bye, "Call-ID"), header(&invite, "Call-ID"));
    assert!(
        !seen
            .iter()
            .any(|m| m.starts_with("BYE ") && to_tag(m) == Some("a")),
        "the first branch keeps the call: {seen:#?}"
    );
    gw.send(&ok_to(&bye), stack_addr).await;
    answered(&mut leg).await;
    still_up(&mut leg, Duration::from_millis(300)).await;

    // The second branch's 200 again: ACKed, but ended once only.
    gw.send(&second, stack_addr).await;
    let (ack, _) = gw.expect("ACK").await;
    assert_eq!(to_tag(&ack), Some("b"), "{ack}");
    assert!(
        gw.next(Duration::from_millis(400)).await.is_none(),
        "one BYE per branch"
    );

    // In-dialog requests: from the ended branch 481, from the first the call's end.
    gw.send(&bye_from(&invite, gw.addr, "b", "from-b"), stack_addr)
        .await;
    let (refused, _) = gw.next(T).await.expect("a response");
    assert!(refused.starts_with("SIP/2.0 481"), "{refused}");
    still_up(&mut leg, Duration::from_millis(100)).await;
    gw.send(&bye_from(&invite, gw.addr, "a", "from-a"), stack_addr)
        .await;
    let (accepted, _) = gw.next(T).await.expect("a response");
    assert!(accepted.starts_with("SIP/2.0 200"), "{accepted}");
    let end = ended(&events_until_end(&mut leg, T).await).expect("ended");
    assert_eq!(
        (end.call_status, end.by),
        (CallStatus::Answered, Party::Remote)
    );
}
