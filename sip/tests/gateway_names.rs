//! Trunk gateways written as host names, with the test as the gateway on a plain loopback
//! socket: `localhost:<port>` is resolved when the stack starts, INVITEs go to the address
//! it resolved to (the Request-URI keeps the name), and requests from that address are the
//! trunk's. A default trunk that names no trunk stops the start with an error saying so.
//! (A name that does not resolve is tested without a lookup, in `trunk::tests`: looking one
//! up would ask the machine's DNS server, off loopback.)

mod common;

use std::time::Duration;

use callsmith_sip::{OutboundCall, SipConfig, SipStack, TrunkConfig};
use common::*;
use tokio::net::UdpSocket;

const T: Duration = Duration::from_secs(10);

async fn recv(sock: &UdpSocket) -> String {
    let mut buf = vec![0u8; 65536];
    let (n, _) = tokio::time::timeout(T, sock.recv_from(&mut buf))
        .await
        .expect("a message within the time")
        .expect("recv");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn a_host_name_gateway_is_resolved_and_used() {
    let sock = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let port = sock.local_addr().expect("addr").port();
    let mut trunk = TrunkConfig::new("gw", "127.0.0.1:9".parse().expect("addr"));
    trunk.gateway = format!("localhost:{port}")
        .parse()
        .expect("a host-name gateway");
    let stack = start_stack_with(vec![trunk], &[], |c| c.tcp = None).await;
    assert_eq!(
        stack.gateway_addr("gw"),
        Some(sock.local_addr().expect("addr")),
        "localhost resolves to the IPv4 loopback the UDP listener sends from"
    );

    // The INVITE reaches the resolved address, addressed to the name.
    let _leg = stack
        .place_call(OutboundCall {
            trunk: Some("gw".into()),
            from_number: "+15550001".into(),
            from_display: None,
            to_number: "+15550100".into(),
            headers: vec![],
            local_media: media(),
            ring_timeout: T,
        })
        .await
        .expect("the call is placed");
    let invite = recv(&sock).await;
    assert!(
        invite.starts_with(&format!("INVITE sip:+15550100@localhost:{port} SIP/2.0")),
        "{invite}"
    );
    assert!(invite.contains("sip:+15550001@localhost"), "From: {invite}");

    // A request from the resolved address is the trunk's (answered, not 403).
    let stack_addr = stack.udp_addr().expect("udp");
    let options = format!(
        "OPTIONS sip:ping@{stack_addr} SIP/2.0\r\n\
         Via: SIP/2.0/UDP 127.0.0.1:{port};branch=z9hG4bK-gw-options-1;rport\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:gw@localhost>;tag=gw1\r\n\
         To: <sip:ping@{stack_addr}>\r\n\
         Call-ID: gateway-names-options-1\r\n\
         CSeq: 1 OPTIONS\r\n\
         Content-Length: 0\r\n\r\n"
    );
    sock.send_to(options.as_bytes(), stack_addr)
        .await
        .expect("send");
    // Skip retransmissions of the INVITE until the OPTIONS answer comes.
    let answer = loop {
        let m = recv(&sock).await;
        if m.starts_with("SIP/2.0") && m.contains("gateway-names-options-1") {
            break m;
        }
    };
    assert!(answer.starts_with("SIP/2.0 200"), "{answer}");
}

#[tokio::test]
async fn a_default_trunk_naming_no_trunk_stops_the_start() {
    let config = SipConfig {
        udp: Some("127.0.0.1:0".parse().expect("addr")),
        tcp: None,
        trunks: vec![TrunkConfig::new(
            "carrier",
            "127.0.0.1:9".parse().expect("addr"),
        )],
        default_trunk: Some("carier".into()),
        ..Default::default()
    };
    let Err(e) = SipStack::start(config, |_: &str, _: &str| true).await else {
        panic!("the stack started with a default trunk that names no trunk");
    };
    let msg = e.to_string();
    assert!(
        msg.contains("default_trunk \"carier\"") && msg.contains("carrier"),
        "{msg}"
    );
}
