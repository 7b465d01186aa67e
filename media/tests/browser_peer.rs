//! A browser peer against a second WebRTC stack playing the browser (ICE on loopback,
//! DTLS-SRTP, PCMU): audio crosses both ways between the "browser" and a UDP socket in the
//! place of the media session, and closing the browser side is seen as gone.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use callsmith_media::browser::testing::TestBrowser;
use callsmith_media::browser::{BrowserPeer, BrowserPeerConfig, PeerState};
use tokio::net::UdpSocket;

fn config(allow: fn(IpAddr) -> bool) -> BrowserPeerConfig {
    BrowserPeerConfig {
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port_min: 41000,
        port_max: 41999,
        allow_remote: Arc::new(allow),
        connect_timeout: Duration::from_secs(10),
    }
}

fn rtp(seq: u16, payload: u8) -> Vec<u8> {
    let mut p = vec![0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34];
    p[2..4].copy_from_slice(&seq.to_be_bytes());
    p[4..8].copy_from_slice(&(u32::from(seq) * 160).to_be_bytes());
    p.extend(std::iter::repeat_n(payload, 160));
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audio_crosses_both_ways_and_a_closed_browser_is_gone() {
    let browser = TestBrowser::new().await;
    let sdp = browser.offer().await;
    let (mut peer, answer) = BrowserPeer::answer(&config(|ip| ip.is_loopback()), &sdp)
        .await
        .expect("answered");
    assert!(answer.contains("PCMU/8000"), "{answer}");
    assert!(
        answer.contains("127.0.0.1"),
        "a loopback host candidate: {answer}"
    );
    assert!(answer.contains("a=fingerprint"), "DTLS: {answer}");
    browser.accept(&answer).await;
    assert!(peer.connected().await, "ICE + DTLS within the timeout");
    assert_eq!(peer.state(), PeerState::Connected);

    // The media session's place: a socket that sends to the relay and reads from it.
    let session = UdpSocket::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
        .await
        .unwrap();
    peer.connect_media(session.local_addr().unwrap());
    let relay = peer.rtp_addr();

    // Engine → browser: the payload arrives decrypted.
    for seq in 0..20u16 {
        session.send_to(&rtp(seq, 0x55), relay).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while browser.heard().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let heard = browser.heard();
    assert!(!heard.is_empty(), "the browser hears the engine");
    assert!(
        heard.iter().all(|p| p == &vec![0x55; 160]),
        "payloads intact"
    );

    // Browser → engine: RTP arrives at the session's socket as plain RTP.
    let speaking = tokio::spawn(async move {
        browser.speak(&[0x2a; 160 * 50]).await;
        browser
    });
    let mut buf = [0u8; 1500];
    let (n, from) = tokio::time::timeout(Duration::from_secs(5), session.recv_from(&mut buf))
        .await
        .expect("the engine hears the browser")
        .unwrap();
    assert_eq!(from, relay, "the browser's RTP comes from the relay");
    assert_eq!(buf[1] & 0x7f, 0, "PCMU");
    assert_eq!(&buf[12..n], &[0x2a; 160][..]);
    let browser = speaking.await.unwrap();

    // The browser hangs up.
    browser.close().await;
    tokio::time::timeout(Duration::from_secs(15), peer.gone())
        .await
        .expect("a closed browser is seen as gone");
    assert_eq!(peer.state(), PeerState::Gone);
}

#[tokio::test]
async fn offers_it_cannot_use_are_refused_with_the_reason() {
    let sdp = TestBrowser::new().await.offer().await;
    // Every candidate refused by the policy.
    let e = BrowserPeer::answer(&config(|_| false), &sdp)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("no ICE candidate of the offer may be used"),
        "{e}"
    );
    // Not SDP at all.
    let e = BrowserPeer::answer(&config(|_| true), "hello")
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not an SDP offer"), "{e}");
    // No PCMU: an Opus-only offer.
    let opus = sdp
        .lines()
        .filter(|l| !l.contains("PCMU"))
        .map(|l| {
            if l.starts_with("m=audio") {
                l.replace(" 0", " 111") + "\r\na=rtpmap:111 opus/48000/2"
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\r\n")
        + "\r\n";
    let e = BrowserPeer::answer(&config(|_| true), &opus)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("PCMU") || e.contains("no answer"), "{e}");
}
