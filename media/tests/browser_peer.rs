//! A browser peer against a second WebRTC stack playing the browser (ICE on loopback,
//! DTLS-SRTP, PCMU): audio crosses both ways between the "browser" and a UDP socket in the
//! place of the media session, and closing the browser side is seen as gone.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use callsmith_media::browser::{BrowserPeer, BrowserPeerConfig, PeerState};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use webrtc::api::APIBuilder;
use webrtc::api::media_engine::{MIME_TYPE_PCMU, MediaEngine};
use webrtc::api::setting_engine::SettingEngine;
use webrtc::ice::mdns::MulticastDnsMode;
use webrtc::peer_connection::RTCPeerConnection;
use webrtc::peer_connection::configuration::RTCConfiguration;
use webrtc::peer_connection::sdp::session_description::RTCSessionDescription;
use webrtc::rtp_transceiver::rtp_codec::{
    RTCRtpCodecCapability, RTCRtpCodecParameters, RTPCodecType,
};
use webrtc::track::track_local::TrackLocalWriter;
use webrtc::track::track_local::track_local_static_rtp::TrackLocalStaticRTP;

fn pcmu() -> RTCRtpCodecCapability {
    RTCRtpCodecCapability {
        mime_type: MIME_TYPE_PCMU.to_owned(),
        clock_rate: 8000,
        channels: 1,
        ..Default::default()
    }
}

fn config(allow: fn(IpAddr) -> bool) -> BrowserPeerConfig {
    BrowserPeerConfig {
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port_min: 41000,
        port_max: 41999,
        allow_remote: Arc::new(allow),
        connect_timeout: Duration::from_secs(10),
    }
}

/// The "browser": an offerer with a PCMU track, gathering on loopback only.
async fn browser() -> (Arc<RTCPeerConnection>, Arc<TrackLocalStaticRTP>) {
    let mut m = MediaEngine::default();
    m.register_codec(
        RTCRtpCodecParameters {
            capability: pcmu(),
            payload_type: 0,
            ..Default::default()
        },
        RTPCodecType::Audio,
    )
    .unwrap();
    let mut s = SettingEngine::default();
    s.set_include_loopback_candidate(true);
    s.set_ip_filter(Box::new(|ip| ip.is_loopback()));
    s.set_ice_multicast_dns_mode(MulticastDnsMode::Disabled);
    let api = APIBuilder::new()
        .with_media_engine(m)
        .with_setting_engine(s)
        .build();
    let pc = Arc::new(
        api.new_peer_connection(RTCConfiguration::default())
            .await
            .unwrap(),
    );
    let track = Arc::new(TrackLocalStaticRTP::new(
        pcmu(),
        "mic".into(),
        "browser".into(),
    ));
    pc.add_track(track.clone()).await.unwrap();
    (pc, track)
}

async fn offer(pc: &RTCPeerConnection) -> String {
    let offer = pc.create_offer(None).await.unwrap();
    let mut gathered = pc.gathering_complete_promise().await;
    pc.set_local_description(offer).await.unwrap();
    let _ = gathered.recv().await;
    pc.local_description().await.unwrap().sdp
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
    let (bpc, mic) = browser().await;
    let (heard_tx, mut heard) = mpsc::unbounded_channel::<Vec<u8>>();
    bpc.on_track(Box::new(move |remote, _, _| {
        let heard_tx = heard_tx.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 1500];
            while let Ok((pkt, _)) = remote.read(&mut buf).await {
                let _ = heard_tx.send(pkt.payload.to_vec());
            }
        });
        Box::pin(async {})
    }));
    let sdp = offer(&bpc).await;
    let (mut peer, answer) = BrowserPeer::answer(&config(|ip| ip.is_loopback()), &sdp)
        .await
        .expect("answered");
    assert!(answer.contains("PCMU/8000"), "{answer}");
    assert!(
        answer.contains("127.0.0.1"),
        "a loopback host candidate: {answer}"
    );
    assert!(answer.contains("a=fingerprint"), "DTLS: {answer}");
    bpc.set_remote_description(RTCSessionDescription::answer(answer).unwrap())
        .await
        .unwrap();
    assert!(peer.connected().await, "ICE + DTLS within the timeout");
    assert_eq!(peer.state(), PeerState::Connected);

    // The media session's place: a socket that sends to the relay and reads from it.
    let session = UdpSocket::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
        .await
        .unwrap();
    peer.connect_media(session.local_addr().unwrap());
    let relay = peer.rtp_addr();

    // Engine → browser: the payload arrives decrypted, in order.
    for seq in 0..20u16 {
        session.send_to(&rtp(seq, 0x55), relay).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = tokio::time::timeout(Duration::from_secs(5), heard.recv())
        .await
        .expect("the browser hears the engine")
        .unwrap();
    assert_eq!(got, vec![0x55; 160]);

    // Browser → engine: RTP arrives at the session's socket as plain RTP.
    let sender = tokio::spawn(async move {
        for seq in 0..50u16 {
            let _ = mic.write(&rtp(seq, 0x2a)).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let mut buf = [0u8; 1500];
    let (n, from) = tokio::time::timeout(Duration::from_secs(5), session.recv_from(&mut buf))
        .await
        .expect("the engine hears the browser")
        .unwrap();
    assert_eq!(from, relay, "the browser's RTP comes from the relay");
    assert_eq!(buf[1] & 0x7f, 0, "PCMU");
    assert_eq!(&buf[12..n], &[0x2a; 160][..]);
    sender.abort();

    // The browser hangs up.
    bpc.close().await.unwrap();
    tokio::time::timeout(Duration::from_secs(15), peer.gone())
        .await
        .expect("a closed browser is seen as gone");
    assert_eq!(peer.state(), PeerState::Gone);
}

#[tokio::test]
async fn offers_it_cannot_use_are_refused_with_the_reason() {
    let (bpc, _) = browser().await;
    let sdp = offer(&bpc).await;
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
