//! A browser peer against a second WebRTC stack playing the browser (ICE on loopback,
//! DTLS-SRTP, PCMU or Opus): audio crosses both ways between the "browser" and a UDP socket
//! in the place of the media session, and closing the browser side is seen as gone.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use callsmith_media::browser::testing::TestBrowser;
use callsmith_media::browser::{BrowserCodec, BrowserPeer, BrowserPeerConfig, PeerState};
use tokio::net::UdpSocket;

fn config(allow: fn(IpAddr) -> bool) -> BrowserPeerConfig {
    BrowserPeerConfig {
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        advertised_ip: None,
        port_min: 41000,
        port_max: 41999,
        allow_remote: Arc::new(allow),
        connect_timeout: Duration::from_secs(10),
    }
}

/// The offer with every candidate's address replaced by an mDNS name, as a browser that
/// hides its addresses writes it.
fn hidden(offer: &str) -> String {
    offer
        .split_inclusive('\n')
        .enumerate()
        .map(|(i, l)| match l.strip_prefix("a=candidate:") {
            Some(rest) => {
                let mut f: Vec<String> = rest.split(' ').map(str::to_owned).collect();
                f[4] = format!("5c3f1e2a-0b7d-4e41-9d1c-7a0e2f6b{i:04}.local");
                format!("a=candidate:{}", f.join(" "))
            }
            None => l.to_owned(),
        })
        .collect()
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
    assert!(!answer.to_lowercase().contains("opus"), "{answer}");
    assert_eq!(
        peer.codec(),
        BrowserCodec::Pcmu,
        "a PCMU-only browser gets PCMU"
    );
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
    // Neither Opus nor PCMU: a PCMA-only offer.
    let pcma = sdp
        .lines()
        .map(|l| {
            if l.starts_with("m=audio") {
                l.replace(" 0", " 8")
            } else {
                l.replace("a=rtpmap:0 PCMU/8000", "a=rtpmap:8 PCMA/8000")
            }
        })
        .collect::<Vec<_>>()
        .join("\r\n")
        + "\r\n";
    let e = BrowserPeer::answer(&config(|_| true), &pcma)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("PCMU") || e.contains("no answer"), "{e}");
}

/// Root mean square of linear samples.
fn rms(samples: &[i16]) -> f64 {
    let sum: f64 = samples.iter().map(|s| f64::from(*s).powi(2)).sum();
    (sum / samples.len().max(1) as f64).sqrt()
}

/// Zero crossings per second of linear samples at `rate` (twice a tone's frequency).
fn crossings_per_second(samples: &[i16], rate: f64) -> f64 {
    let n = samples
        .windows(2)
        .filter(|w| (w[0] < 0) != (w[1] < 0))
        .count();
    n as f64 * rate / samples.len() as f64
}

/// The tone that crosses an Opus browser leg: above the 4 kHz a narrowband leg carries.
const TONE_HZ: f64 = 6000.0;
/// Where its measured frequency must fall.
const WIDEBAND_TONE: std::ops::Range<f64> = 5800.0..6200.0;

/// Opus with the browser, G.722 with the session: a 6 kHz tone crosses both ways, so the
/// leg is wideband end to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_offering_opus_gets_opus_and_a_wideband_tone_crosses_both_ways() {
    use audiopus::coder::{Decoder, Encoder};
    use audiopus::packet::Packet;
    use audiopus::{Application, Channels, MutSignals, SampleRate};
    use callsmith_media::g722::{G722Decoder, G722Encoder};

    let browser = TestBrowser::with_opus().await;
    let offer = browser.offer().await;
    assert!(
        offer.contains("opus/48000/2") && offer.contains("PCMU/8000"),
        "{offer}"
    );
    let (mut peer, answer) = BrowserPeer::answer(&config(|ip| ip.is_loopback()), &offer)
        .await
        .expect("answered");
    assert_eq!(peer.codec(), BrowserCodec::Opus);
    assert!(answer.contains("a=rtpmap:111 opus/48000/2"), "{answer}");
    assert!(answer.contains("useinbandfec=1"), "in-band FEC: {answer}");
    assert!(
        !answer.contains("PCMU"),
        "one audio codec answered: {answer}"
    );
    browser.accept(&answer).await;
    assert!(peer.connected().await, "ICE + DTLS within the timeout");

    let session = UdpSocket::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
        .await
        .unwrap();
    peer.connect_media(session.local_addr().unwrap());
    let relay = peer.rtp_addr();

    // Engine → browser: a 6 kHz tone (above G.711's band) in G.722 arrives as Opus.
    let mut g722 = G722Encoder::new();
    for seq in 0..50u16 {
        let mut p = vec![0x80, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34];
        p[2..4].copy_from_slice(&seq.to_be_bytes());
        p[4..8].copy_from_slice(&(u32::from(seq) * 160).to_be_bytes());
        let pcm: Vec<i16> = (0..320)
            .map(|i| {
                let t = f64::from(u32::from(seq) * 320 + i) / 16000.0;
                (8000.0 * (2.0 * std::f64::consts::PI * TONE_HZ * t).sin()) as i16
            })
            .collect();
        let mut codes = [0u8; 160];
        assert_eq!(g722.encode(&pcm, &mut codes), 160);
        p.extend_from_slice(&codes);
        session.send_to(&p, relay).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while browser.heard().len() < 40 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let heard = browser.heard();
    assert!(
        heard.len() >= 40,
        "the browser hears the engine: {} packets",
        heard.len()
    );
    let mut decoder = Decoder::new(SampleRate::Hz48000, Channels::Mono).unwrap();
    let mut pcm = vec![0i16; 5760];
    let mut tone = Vec::new();
    for payload in &heard {
        let n = decoder
            .decode(
                Some(Packet::try_from(payload.as_slice()).expect("an Opus packet")),
                MutSignals::try_from(&mut pcm[..]).unwrap(),
                false,
            )
            .expect("the browser decodes Opus");
        assert_eq!(n, 960, "20 ms frames at 48 kHz");
        tone.extend_from_slice(&pcm[..n]);
    }
    let tail = &tone[tone.len() / 4..];
    assert!(rms(tail) > 2000.0, "the tone is heard (RMS {})", rms(tail));
    let hz = crossings_per_second(tail, 48000.0) / 2.0;
    assert!(WIDEBAND_TONE.contains(&hz), "a 6 kHz tone: {hz} Hz");

    // Browser → engine: a 6 kHz tone in Opus arrives as G.722 (16 kHz audio).
    let encoder = Encoder::new(SampleRate::Hz48000, Channels::Mono, Application::Voip).unwrap();
    let frames: Vec<Vec<u8>> = (0..50u32)
        .map(|k| {
            let pcm: Vec<i16> = (0..960)
                .map(|i| {
                    let t = f64::from(k * 960 + i) / 48000.0;
                    (8000.0 * (2.0 * std::f64::consts::PI * TONE_HZ * t).sin()) as i16
                })
                .collect();
            let mut out = vec![0u8; 1500];
            let n = encoder.encode(&pcm, &mut out).unwrap();
            out.truncate(n);
            out
        })
        .collect();
    let speaking = tokio::spawn(async move {
        browser
            .speak_frames(frames.iter().map(Vec::as_slice), 960)
            .await;
        browser
    });
    let mut heard = Vec::new();
    let mut stamps = Vec::new();
    let mut buf = [0u8; 1500];
    let mut g722 = G722Decoder::new();
    while heard.len() < 320 * 40 {
        let (n, from) = tokio::time::timeout(Duration::from_secs(5), session.recv_from(&mut buf))
            .await
            .expect("the engine hears the browser")
            .unwrap();
        assert_eq!(from, relay);
        assert_eq!(buf[1] & 0x7f, 9, "G.722 to the session");
        assert_eq!(n, 12 + 160, "20 ms of G.722");
        stamps.push(u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]));
        let mut pcm = [0i16; 320];
        assert_eq!(g722.decode(&buf[12..n], &mut pcm), 320);
        heard.extend_from_slice(&pcm);
    }
    assert!(
        stamps.windows(2).all(|w| w[1].wrapping_sub(w[0]) == 160),
        "G.722's 8000 Hz clock steps 160 a packet: {stamps:?}"
    );
    let tail = &heard[heard.len() / 4..];
    assert!(rms(tail) > 2000.0, "the tone is heard (RMS {})", rms(tail));
    let hz = crossings_per_second(tail, 16000.0) / 2.0;
    assert!(WIDEBAND_TONE.contains(&hz), "a 6 kHz tone: {hz} Hz");
    speaking.await.unwrap().close().await;
}

/// The value of the first `a=<key>:` line of an SDP.
fn sdp_value<'a>(sdp: &'a str, key: &str) -> &'a str {
    sdp.lines()
        .find_map(|l| l.strip_prefix(&format!("a={key}:")))
        .unwrap_or_else(|| panic!("no a={key} in {sdp}"))
        .trim()
}

/// A valid ICE connectivity check to the answered peer (the browser's credentials), sent
/// from `from`: true when the peer answers it within a second.
async fn binding_answered(from: &UdpSocket, to: SocketAddr, offer: &str, answer: &str) -> bool {
    use webrtc::stun::agent::TransactionId;
    use webrtc::stun::attributes::ATTR_USERNAME;
    use webrtc::stun::fingerprint::FINGERPRINT;
    use webrtc::stun::integrity::MessageIntegrity;
    use webrtc::stun::message::{BINDING_REQUEST, CLASS_SUCCESS_RESPONSE, Message, Setter};
    use webrtc::stun::textattrs::TextAttribute;

    let username = format!(
        "{}:{}",
        sdp_value(answer, "ice-ufrag"),
        sdp_value(offer, "ice-ufrag")
    );
    let mut m = Message::new();
    let setters: Vec<Box<dyn Setter>> = vec![
        Box::new(BINDING_REQUEST),
        Box::new(TransactionId::new()),
        Box::new(TextAttribute::new(ATTR_USERNAME, username)),
        Box::new(MessageIntegrity::new_short_term_integrity(
            sdp_value(answer, "ice-pwd").to_owned(),
        )),
        Box::new(FINGERPRINT),
    ];
    m.build(&setters).expect("STUN request");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    let mut buf = [0u8; 1500];
    from.send_to(&m.raw, to).await.unwrap();
    while let Ok(Ok((n, src))) = tokio::time::timeout_at(deadline, from.recv_from(&mut buf)).await {
        let mut r = Message::new();
        if src == to
            && r.unmarshal_binary(&buf[..n]).is_ok()
            && r.transaction_id == m.transaction_id
            && r.typ.class == CLASS_SUCCESS_RESPONSE
        {
            return true;
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connectivity_checks_from_a_refused_address_are_not_answered() {
    let browser = TestBrowser::new().await;
    let offer = browser.offer().await;
    let (_peer, answer) =
        BrowserPeer::answer(&config(|ip| ip == IpAddr::V4(Ipv4Addr::LOCALHOST)), &offer)
            .await
            .expect("answered");
    let port: u16 = answer
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.strip_prefix("a=candidate:")?.split(' ').collect();
            (f.get(4) == Some(&"127.0.0.1")).then(|| f[5].parse().unwrap())
        })
        .expect("a loopback host candidate in the answer");
    let ice = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);

    // From an allowed address a check is answered (the agent may take a moment to start).
    let allowed = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut answered = false;
    for _ in 0..5 {
        answered = binding_answered(&allowed, ice, &offer, &answer).await;
        if answered {
            break;
        }
    }
    assert!(answered, "a valid check from 127.0.0.1 is answered");
    // From a refused one the same check is not: no peer-reflexive candidate, no reply, and
    // no checks of the engine's own go there.
    let refused = UdpSocket::bind("127.0.0.2:0").await.unwrap();
    assert!(
        !binding_answered(&refused, ice, &offer, &answer).await,
        "a check from 127.0.0.2 (refused by the policy) is answered"
    );
    let mut buf = [0u8; 1500];
    let heard = tokio::time::timeout(Duration::from_secs(2), refused.recv_from(&mut buf)).await;
    assert!(heard.is_err(), "the engine sent to a refused address");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_that_hides_its_addresses_connects_through_its_checks() {
    let browser = TestBrowser::new().await;
    let offer = hidden(&browser.offer().await);
    assert!(
        offer.contains(".local ") && !offer.contains(" 127.0.0.1 "),
        "{offer}"
    );
    let (mut peer, answer) = BrowserPeer::answer(&config(|ip| ip.is_loopback()), &offer)
        .await
        .expect("an offer of mDNS names is answered");
    // The answer names a concrete address everywhere: its candidate, `c=` and `o=`.
    assert!(!answer.contains("0.0.0.0"), "{answer}");
    assert!(answer.contains("c=IN IP4 127.0.0.1\r\n"), "{answer}");
    assert!(!answer.contains("m=audio 9 "), "{answer}");
    browser.accept(&answer).await;
    assert!(
        peer.connected().await,
        "paired with the source of the browser's checks (peer-reflexive)"
    );
    assert!(peer.refused_sources().is_empty());

    // Media flows on that pair.
    let session = UdpSocket::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
        .await
        .unwrap();
    peer.connect_media(session.local_addr().unwrap());
    let speaking = tokio::spawn(async move {
        browser.speak(&[0x2a; 160 * 50]).await;
        browser
    });
    let mut buf = [0u8; 1500];
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), session.recv_from(&mut buf))
        .await
        .expect("the engine hears the browser")
        .unwrap();
    assert_eq!(&buf[12..n], &[0x2a; 160][..]);
    speaking.await.unwrap().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_browser_checking_from_a_refused_address_does_not_connect() {
    let browser = TestBrowser::new().await;
    let offer = hidden(&browser.offer().await);
    // The browser's checks come from 127.0.0.1, which this policy refuses.
    let mut cfg = config(|ip| ip != IpAddr::V4(Ipv4Addr::LOCALHOST));
    cfg.connect_timeout = Duration::from_secs(4);
    let (mut peer, answer) = BrowserPeer::answer(&cfg, &offer)
        .await
        .expect("answered: the names could stand for an allowed address");
    browser.accept(&answer).await;
    assert!(!peer.connected().await, "no pairing with a refused source");
    assert_eq!(
        peer.refused_sources(),
        [IpAddr::V4(Ipv4Addr::LOCALHOST)],
        "the refused source is named"
    );
    browser.close().await;
}
