//! RFC 4475 torture messages: every one is parsed or refused (400 / 505 / dropped), none panics,
//! and a flood of them plus random garbage does not disturb a call in progress.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use callsmith_sip::wire::{Refusal, Verdict, inspect};
use callsmith_sip::{CallStatus, LegEvent, TrunkConfig};
use common::*;
use tokio::net::UdpSocket;

const T: Duration = Duration::from_secs(30);

/// Valid RFC 4475 messages our parser (rsip inside rsipstack 0.7.14) refuses: extension
/// methods with characters outside its method grammar. Dropped, never answered, no panic.
const KNOWN_PARSER_GAPS: &[&str] = &["intmeth.sip"];

/// Invalid messages that must never be accepted as-is.
const MUST_REJECT: &[&str] = &[
    "badvers.sip",
    "bigcode.sip",
    "clerr.sip",
    "insuf.sip",
    "lwsruri.sip",
    "lwsstart.sip",
    "mismatch01.sip",
    "mismatch02.sip",
    "scalar02.sip",
    "scalarlg.sip",
];

fn fixtures(kind: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/torture")
        .join(kind);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("fixture dir")
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read fixture"),
            )
        })
        .collect();
    out.sort();
    out
}

fn accepted(v: &Verdict) -> bool {
    matches!(v, Verdict::Request { .. } | Verdict::Response { .. })
}

#[test]
fn valid_torture_messages_parse() {
    let all = fixtures("valid");
    assert!(all.len() >= 10);
    for (name, bytes) in all {
        let v = inspect(&bytes);
        if KNOWN_PARSER_GAPS.contains(&name.as_str()) {
            assert!(matches!(v, Verdict::Dropped(_)), "{name}: {v:?}");
        } else {
            assert!(accepted(&v), "{name} should parse: {v:?}");
        }
    }
}

#[test]
fn invalid_torture_messages_are_rejected_or_handled() {
    let all = fixtures("invalid");
    assert!(all.len() >= 20);
    for (name, bytes) in all {
        let v = inspect(&bytes);
        if MUST_REJECT.contains(&name.as_str()) {
            assert!(
                matches!(v, Verdict::Refused(_) | Verdict::Dropped(_)),
                "{name} must be rejected: {v:?}"
            );
        }
    }
    // The rules behind the 400s, spot-checked.
    let by_name = |n: &str| {
        fixtures("invalid")
            .into_iter()
            .find(|(f, _)| f == n)
            .map(|(_, b)| inspect(&b))
    };
    assert_eq!(
        by_name("mismatch01.sip"),
        Some(Verdict::Refused(Refusal::bad_request(
            "CSeq method does not match"
        )))
    );
    assert_eq!(
        by_name("clerr.sip"),
        Some(Verdict::Refused(Refusal::bad_request(
            "Content-Length mismatch"
        )))
    );
    assert_eq!(
        by_name("badvers.sip"),
        Some(Verdict::Refused(Refusal::version_not_supported()))
    );
}

#[test]
fn truncations_and_mutations_never_panic() {
    // Every prefix and a few byte flips of every fixture: a cheap fuzz of the parser path.
    for kind in ["valid", "invalid"] {
        for (_, bytes) in fixtures(kind) {
            for cut in (0..bytes.len()).step_by(7) {
                let _ = inspect(&bytes[..cut]);
            }
            for i in (0..bytes.len()).step_by(13) {
                let mut m = bytes.clone();
                m[i] = m[i].wrapping_add(0x5a);
                let _ = inspect(&m);
            }
        }
    }
}

/// Rewrite a request's top Via so the stack's answer comes back to `sock`.
fn via_to(msg: &str, sock: SocketAddr) -> String {
    let mut out = Vec::new();
    let mut done = false;
    for line in msg.split("\r\n") {
        if !done && line.to_ascii_lowercase().starts_with("via:") {
            out.push(format!(
                "Via: SIP/2.0/UDP {sock};rport;branch=z9hG4bK{}",
                rand_branch()
            ));
            done = true;
        } else {
            out.push(line.to_string());
        }
    }
    out.join("\r\n")
}

fn rand_branch() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    format!(
        "t{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn start_line(text: &str) -> &str {
    text.split("\r\n").next().unwrap_or("")
}

fn loopback_trunk() -> TrunkConfig {
    TrunkConfig::new("carrier", "127.0.0.1:5999".parse().unwrap())
}

#[tokio::test]
async fn parseable_bad_requests_get_400_or_505_on_the_wire() {
    let stack = start_stack(vec![loopback_trunk()], &[]).await;
    let target = stack.udp_addr().unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let me = sock.local_addr().unwrap();
    for (name, status) in [
        ("mismatch01.sip", "SIP/2.0 400 "),
        ("clerr.sip", "SIP/2.0 400 "),
        ("badvers.sip", "SIP/2.0 505 "),
    ] {
        let (_, bytes) = fixtures("invalid")
            .into_iter()
            .find(|(f, _)| f == name)
            .unwrap();
        let msg = via_to(&String::from_utf8_lossy(&bytes), me);
        sock.send_to(msg.as_bytes(), target).await.unwrap();
        let resp = final_response(&sock, Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("{name}: no response"));
        assert!(resp.starts_with(status), "{name}: {resp}");
        assert!(resp.contains("Warning: 399 callsmith"), "{name}: {resp}");
    }
}

#[tokio::test]
async fn an_invite_of_another_sip_version_gets_505_with_a_sip_2_status_line() {
    let stack = start_stack(vec![loopback_trunk()], &["15550100"]).await;
    let target = stack.udp_addr().unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let me = sock.local_addr().unwrap();
    let invite = format!(
        "INVITE sip:15550100@127.0.0.1 SIP/7.0\r\n\
         Via: SIP/2.0/UDP {me};rport;branch=z9hG4bKv7{}\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:+15550001@127.0.0.1>;tag=v7\r\n\
         To: <sip:15550100@127.0.0.1>\r\n\
         Call-ID: version-7@127.0.0.1\r\n\
         CSeq: 1 INVITE\r\n\
         Contact: <sip:+15550001@{me}>\r\n\
         Content-Length: 0\r\n\r\n",
        rand_branch()
    );
    sock.send_to(invite.as_bytes(), target).await.unwrap();
    let resp = final_response(&sock, Duration::from_secs(5))
        .await
        .expect("a final response");
    assert_eq!(
        start_line(&resp),
        "SIP/2.0 505 Version Not Supported",
        "{resp}"
    );
    assert!(resp.contains("Call-ID: version-7@127.0.0.1"), "{resp}");
    let to = resp
        .split("\r\n")
        .find(|l| l.starts_with("To:"))
        .expect("a To header");
    assert!(
        to.contains(";tag="),
        "a final response carries a To tag: {resp}"
    );
}

#[tokio::test]
async fn garbage_flood_does_not_stop_a_call_in_progress() {
    let stack = start_stack(vec![loopback_trunk()], &["15550100"]).await;
    let target = stack.udp_addr().unwrap();
    let mut calls = stack.take_incoming().unwrap();
    let mut sipp = Sipp::start(
        "uac_long_call.xml",
        "127.0.0.1",
        Some(target),
        &["-s", "15550100"],
    )
    .await;
    let call = tokio::time::timeout(T, calls.recv())
        .await
        .unwrap()
        .unwrap();
    let mut leg = call.answer(media()).await.unwrap();
    assert!(matches!(
        leg.next_event().await,
        Some(LegEvent::Answered(_))
    ));

    // Flood while the call is up: torture messages and pseudo-random bytes.
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut torture: Vec<Vec<u8>> = fixtures("valid")
        .into_iter()
        .chain(fixtures("invalid"))
        .map(|(_, b)| b)
        .collect();
    torture.push(b"INVITE sip:x SIP/2.0\r\n\r\n".to_vec());
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let mut sent = 0;
    for round in 0..3000u32 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (seed % 1400) as usize + 1;
        let garbage: Vec<u8> = (0..len)
            .map(|i| (seed.rotate_left(i as u32 % 64) & 0xff) as u8)
            .collect();
        let _ = sock.send_to(&garbage, target).await;
        let _ = sock
            .send_to(&torture[round as usize % torture.len()], target)
            .await;
        sent += 2;
        if round % 200 == 0 {
            tokio::task::yield_now().await;
        }
    }
    assert_eq!(sent, 6000);

    let end = ended(&events_until_end(&mut leg, T).await).expect("call ends normally");
    assert_eq!(end.call_status, CallStatus::Answered);
    assert!(
        sipp.success(T).await,
        "the caller's BYE got its 200 despite the flood"
    );

    // And the stack still takes new work.
    let mut ping = Sipp::start("uac_options.xml", "127.0.0.1", Some(target), &[]).await;
    assert!(ping.success(T).await);
}
