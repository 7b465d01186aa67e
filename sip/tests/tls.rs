//! SIP over TLS on loopback with certificates the test makes (rcgen): a call between two
//! stacks over TLS with SRTP required on both trunks, mutual TLS refusing a client whose
//! certificate is not on the allow-list (or that has none), and the start-up errors of a
//! missing or bad certificate.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use callsmith_sip::{
    LegEvent, OutboundCall, SipConfig, SipStack, SipTlsConfig, SipTransport, SrtpPolicy,
    TrunkConfig,
};
use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const T: Duration = Duration::from_secs(15);

/// A CA and certificates it signs, written as PEM files in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "callsmith test CA");
        let ca = params.self_signed(&ca_key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Pki { dir, ca, ca_key }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A certificate for `names`, signed by the CA: (cert file, key file).
    fn issue(&self, stem: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let (c, k) = (
            self.path(&format!("{stem}.crt")),
            self.path(&format!("{stem}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }

    fn tls(&self, stem: &str) -> SipTlsConfig {
        let (cert_file, key_file) = self.issue(stem, &["127.0.0.1", "localhost"]);
        SipTlsConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            cert_file,
            key_file,
            ca_file: self.path("ca.pem"),
            require_client_cert: false,
            allowed_names: Vec::new(),
        }
    }
}

async fn stack(
    tls: SipTlsConfig,
    trunks: Vec<TrunkConfig>,
    known: &'static [&'static str],
) -> Result<SipStack, callsmith_sip::SipError> {
    init_tracing();
    let config = SipConfig {
        udp: Some("127.0.0.1:0".parse().unwrap()),
        tcp: None,
        tls: Some(tls),
        default_trunk: trunks.first().map(|t| t.name.clone()),
        trunks,
        ..Default::default()
    };
    SipStack::start(config, move |_: &str, called: &str| known.contains(&called)).await
}

#[tokio::test]
async fn a_call_between_two_stacks_over_tls_with_srtp_required() {
    let pki = Pki::new();
    // The answering stack: its trunk is the caller at 127.0.0.1.
    let mut inbound_trunk = TrunkConfig::new("caller", "127.0.0.1:9".parse().unwrap());
    inbound_trunk.srtp = SrtpPolicy::Required;
    let mut answering_tls = pki.tls("answering");
    answering_tls.require_client_cert = true;
    answering_tls.allowed_names = vec!["127.0.0.1".into()];
    let answering = stack(answering_tls, vec![inbound_trunk], &["+15550100"])
        .await
        .expect("answering stack");
    let gateway = answering.tls_addr().expect("tls listener");
    let mut calls = answering.take_incoming().unwrap();

    let mut trunk = TrunkConfig::new("secure", gateway);
    trunk.transport = SipTransport::Tls;
    trunk.srtp = SrtpPolicy::Required;
    let calling = stack(pki.tls("calling"), vec![trunk], &[])
        .await
        .expect("calling stack");
    let mut leg = calling
        .place_call(OutboundCall {
            trunk: Some("secure".into()),
            from_number: "+15550001".into(),
            from_display: None,
            to_number: "15550100".into(),
            headers: Vec::new(),
            local_media: media(),
            ring_timeout: T,
        })
        .await
        .expect("invite sent");
    let call = tokio::time::timeout(T, calls.recv())
        .await
        .expect("the INVITE arrives over TLS")
        .expect("a call");
    let offered = call.remote_media.srtp.expect("the offer carried SDES keys");
    let inbound_header = call
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("via"))
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(inbound_header.contains("TLS"), "Via: {inbound_header}");
    let mut answered_leg = call.answer(media()).await.expect("answer");
    let inbound_keys = match answered_leg.next_event().await {
        Some(LegEvent::Answered(m)) => m.srtp.expect("srtp agreed inbound"),
        other => panic!("expected Answered, got {other:?}"),
    };
    assert_eq!(inbound_keys, offered);
    let outbound_keys = loop {
        match tokio::time::timeout(T, leg.next_event())
            .await
            .expect("event")
        {
            Some(LegEvent::Answered(m)) => break m.srtp.expect("srtp agreed outbound"),
            Some(LegEvent::Ended(e)) => panic!("ended: {e:?}"),
            Some(_) => {}
            None => panic!("leg closed"),
        }
    };
    // Each side's send key is the other's receive key.
    assert_eq!(outbound_keys.local, inbound_keys.remote);
    assert_eq!(outbound_keys.remote, inbound_keys.local);
    assert_eq!(outbound_keys.suite, inbound_keys.suite);
    leg.hangup();
    let end = ended(&events_until_end(&mut answered_leg, T).await).expect("BYE over TLS");
    assert_eq!(end.call_status, callsmith_sip::CallStatus::Answered);
}

#[tokio::test]
async fn a_gateway_written_as_a_name_is_verified_for_that_name() {
    let pki = Pki::new();
    // The gateway's certificate names `localhost` only, no IP address.
    let (cert_file, key_file) = pki.issue("named", &["localhost"]);
    let gateway_tls = SipTlsConfig {
        cert_file,
        key_file,
        ..pki.tls("unused")
    };
    let gateway = stack(
        gateway_tls,
        vec![TrunkConfig::new("caller", "127.0.0.1:9".parse().unwrap())],
        &["+15550100"],
    )
    .await
    .expect("gateway stack");
    let port = gateway.tls_addr().unwrap().port();
    let mut calls = gateway.take_incoming().unwrap();
    let outbound = || OutboundCall {
        trunk: None,
        from_number: "+15550001".into(),
        from_display: None,
        to_number: "15550100".into(),
        headers: Vec::new(),
        local_media: media(),
        ring_timeout: T,
    };
    let mut by_name = TrunkConfig::new("named", "127.0.0.1:1".parse().unwrap());
    by_name.gateway = format!("localhost:{port}").parse().unwrap();
    by_name.transport = SipTransport::Tls;
    let calling = stack(pki.tls("calling"), vec![by_name], &[])
        .await
        .expect("stack");
    let _leg = calling.place_call(outbound()).await.expect("invite sent");
    let call = tokio::time::timeout(T, calls.recv())
        .await
        .expect("the INVITE arrives: the certificate was checked for localhost")
        .expect("a call");
    call.reject(486, None);
    // The same gateway by address: its certificate names no IP, so the handshake fails and
    // no INVITE gets through (the call ends when its transaction times out).
    let mut by_address = TrunkConfig::new("address", format!("127.0.0.1:{port}").parse().unwrap());
    by_address.transport = SipTransport::Tls;
    let calling = stack(pki.tls("calling2"), vec![by_address], &[])
        .await
        .expect("stack");
    let _leg = calling
        .place_call(outbound())
        .await
        .expect("invite handed over");
    assert!(
        tokio::time::timeout(Duration::from_secs(3), calls.recv())
            .await
            .is_err(),
        "no INVITE reached the gateway"
    );
}

/// Sends OPTIONS over a TLS connection made with `client` (cert and key files, or none)
/// and returns the answer's status line; None when the server closes the connection.
async fn options_over_tls(
    server: SocketAddr,
    ca: &Path,
    client: Option<(PathBuf, PathBuf)>,
) -> Option<String> {
    let mut tls = connect_tls(server, ca, client).await?;
    let me = tls.get_ref().0.local_addr().unwrap();
    let msg = format!(
        "OPTIONS sip:{server};transport=tls SIP/2.0\r\nVia: SIP/2.0/TLS {me};branch=z9hG4bKtls{}\r\n\
         From: <sip:probe@{me}>;tag=1\r\nTo: <sip:{server}>\r\nCall-ID: tls-{}\r\n\
         CSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
        me.port(),
        me.port()
    );
    // TLS 1.3 reports a refused client certificate on the first read, not the handshake.
    tls.write_all(msg.as_bytes()).await.ok()?;
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    (n > 0).then(|| text.lines().next().unwrap_or("").to_string())
}

/// A TLS connection to `server` verified against `ca`, presenting `client` (cert and key
/// files) when given; None when the handshake fails.
async fn connect_tls(
    server: SocketAddr,
    ca: &Path,
    client: Option<(PathBuf, PathBuf)>,
) -> Option<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(&cert)
                    .unwrap()
                    .map(|c| c.unwrap())
                    .collect(),
                PrivateKeyDer::from_pem_file(&key).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(server).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    connector.connect(name, tcp).await.ok()
}

#[tokio::test]
async fn mutual_tls_refuses_a_client_whose_certificate_is_not_on_the_allow_list() {
    let pki = Pki::new();
    let mut tls = pki.tls("server");
    tls.require_client_cert = true;
    tls.allowed_names = vec!["good-peer.example".into()];
    let trunk = TrunkConfig::new("peer", "127.0.0.1:9".parse().unwrap());
    let server = stack(tls, vec![trunk], &[]).await.expect("stack");
    let addr = server.tls_addr().unwrap();
    let ca = pki.path("ca.pem");

    let good = pki.issue("good", &["good-peer.example"]);
    assert_eq!(
        options_over_tls(addr, &ca, Some(good)).await.as_deref(),
        Some("SIP/2.0 200 OK"),
        "a client on the allow-list is served"
    );
    let other = pki.issue("other", &["other-peer.example"]);
    assert_eq!(
        options_over_tls(addr, &ca, Some(other)).await,
        None,
        "a verified certificate with another name is closed"
    );
    assert_eq!(
        options_over_tls(addr, &ca, None).await,
        None,
        "a client without a certificate is refused"
    );
    // A certificate from another CA, with the allowed name, is refused in the handshake.
    let stranger = Pki::new();
    let forged = stranger.issue("forged", &["good-peer.example"]);
    assert_eq!(options_over_tls(addr, &ca, Some(forged)).await, None);
}

#[tokio::test]
async fn a_missing_or_bad_certificate_stops_the_start_with_the_file_named() {
    let pki = Pki::new();
    let good = pki.tls("node");
    let start = |tls: SipTlsConfig| async move {
        stack(tls, Vec::new(), &[])
            .await
            .err()
            .expect("the start fails")
            .to_string()
    };

    let mut missing = good.clone();
    missing.cert_file = pki.path("absent.crt");
    let e = start(missing).await;
    assert!(
        e.contains("sip.tls.cert_file") && e.contains("absent.crt"),
        "{e}"
    );

    let garbage = pki.path("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let mut bad_cert = good.clone();
    bad_cert.cert_file = garbage.clone();
    let e = start(bad_cert).await;
    assert!(
        e.contains("sip.tls.cert_file") && e.contains("no PEM certificate"),
        "{e}"
    );

    let mut bad_key = good.clone();
    bad_key.key_file = garbage.clone();
    let e = start(bad_key).await;
    assert!(
        e.contains("sip.tls.key_file") && e.contains("no PEM private key"),
        "{e}"
    );

    // A key that is not the certificate's.
    let (_, other_key) = pki.issue("other", &["localhost"]);
    let mut mismatched = good.clone();
    mismatched.key_file = other_key;
    let e = start(mismatched).await;
    assert!(
        e.contains("sip.tls.cert_file") && e.contains("key_file"),
        "{e}"
    );

    let mut bad_ca = good.clone();
    bad_ca.ca_file = garbage;
    let e = start(bad_ca).await;
    assert!(
        e.contains("sip.tls.ca_file") && e.contains("no PEM certificate"),
        "{e}"
    );

    let mut names_without_certs = good.clone();
    names_without_certs.allowed_names = vec!["peer.example".into()];
    let e = start(names_without_certs).await;
    assert!(e.contains("require_client_cert"), "{e}");

    // A TLS trunk on a node without TLS.
    let mut trunk = TrunkConfig::new("secure", "127.0.0.1:5061".parse().unwrap());
    trunk.transport = SipTransport::Tls;
    let config = SipConfig {
        udp: Some("127.0.0.1:0".parse().unwrap()),
        tcp: None,
        trunks: vec![trunk],
        ..Default::default()
    };
    let e = SipStack::start(config, |_: &str, _: &str| true)
        .await
        .err()
        .expect("the start fails")
        .to_string();
    assert!(e.contains("\"secure\"") && e.contains("sip.tls"), "{e}");
}

/// An INVITE to `request_uri` from `me` over `via` ("UDP" or "TLS"), with a plain PCMU offer.
fn invite_to(request_uri: &str, me: SocketAddr, via: &str, call_id: &str) -> String {
    let sdp = "v=0\r\no=peer 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
               m=audio 6000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n";
    let scheme = if via == "TLS" { "sips" } else { "sip" };
    format!(
        "INVITE {request_uri} SIP/2.0\r\n\
         Via: SIP/2.0/{via} {me};rport;branch=z9hG4bK-{call_id}\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:+15550001@127.0.0.1>;tag=caller\r\n\
         To: <{request_uri}>\r\n\
         Call-ID: {call_id}@127.0.0.1\r\n\
         CSeq: 1 INVITE\r\n\
         Contact: <{scheme}:+15550001@{me}>\r\n\
         Content-Type: application/sdp\r\n\
         Content-Length: {}\r\n\r\n{sdp}",
        sdp.len()
    )
}

/// The first final response in what `tls` reads within `T`.
async fn final_over_tls(
    tls: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
) -> String {
    let mut text = String::new();
    let mut buf = vec![0u8; 8192];
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let n = tokio::time::timeout_at(deadline, tls.read(&mut buf))
            .await
            .expect("a final response in time")
            .unwrap();
        assert!(n > 0, "connection closed: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
        // Responses end with an empty body here (1xx) or an SDP; take the first non-1xx.
        if let Some(start) = text.find("SIP/2.0 2").or_else(|| text.find("SIP/2.0 4")) {
            let rest = &text[start..];
            if rest.contains("\r\n\r\n") && rest.contains("Content-Length") {
                let head_end = rest.find("\r\n\r\n").unwrap() + 4;
                let len: usize = rest[..head_end]
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length:"))
                    .map(|v| v.trim().parse().unwrap())
                    .unwrap();
                if rest.len() >= head_end + len {
                    return rest[..head_end + len].to_string();
                }
            }
        }
    }
}

fn contact_of(msg: &str) -> String {
    msg.lines()
        .find(|l| {
            let l = l.to_ascii_lowercase();
            l.starts_with("contact:") || l.starts_with("m:")
        })
        .unwrap_or_else(|| panic!("no Contact: {msg}"))
        .to_string()
}

/// RFC 3261 §26.2.2 and RFC 5630: an INVITE for a `sips:` Request-URI over UDP is answered
/// 416 and never reaches the engine; over TLS it is a call, and the dialog's Contact is
/// `sips:` (a `sip:` one over TLS keeps `sip:…;transport=tls`).
#[tokio::test]
async fn a_sips_request_uri_is_416_without_tls_and_gets_a_sips_contact_over_tls() {
    let pki = Pki::new();
    let trunk = TrunkConfig::new("peer", "127.0.0.1:9".parse().unwrap());
    let server = stack(pki.tls("server"), vec![trunk], &["+15550100"])
        .await
        .expect("stack");
    let mut calls = server.take_incoming().unwrap();

    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let me = udp.local_addr().unwrap();
    let uri = format!("sips:+15550100@{}", server.tls_addr().unwrap());
    udp.send_to(
        invite_to(&uri, me, "UDP", "sips-udp").as_bytes(),
        server.udp_addr().unwrap(),
    )
    .await
    .unwrap();
    let resp = final_response(&udp, T).await.expect("a final response");
    assert!(resp.starts_with("SIP/2.0 416 "), "sips: over UDP: {resp}");
    assert!(
        resp.contains("Warning: 399 callsmith") && resp.contains("only used over TLS"),
        "{resp}"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), calls.recv())
            .await
            .is_err(),
        "no call reached the engine"
    );

    let ca = pki.path("ca.pem");
    for (scheme, call_id) in [("sips", "sips-tls"), ("sip", "sip-tls")] {
        let mut tls = connect_tls(server.tls_addr().unwrap(), &ca, None)
            .await
            .expect("handshake");
        let me = tls.get_ref().0.local_addr().unwrap();
        let uri = format!("{scheme}:+15550100@{}", server.tls_addr().unwrap());
        tls.write_all(invite_to(&uri, me, "TLS", call_id).as_bytes())
            .await
            .unwrap();
        let call = tokio::time::timeout(T, calls.recv())
            .await
            .expect("the call arrives")
            .expect("a call");
        let _leg = call.answer(media()).await.expect("answer");
        let ok = final_over_tls(&mut tls).await;
        assert!(ok.starts_with("SIP/2.0 200 "), "{ok}");
        let contact = contact_of(&ok);
        if scheme == "sips" {
            assert!(contact.contains("<sips:"), "{contact}");
            assert!(!contact.contains("transport="), "{contact}");
        } else {
            assert!(
                contact.contains("<sip:") && contact.to_ascii_lowercase().contains("transport=tls"),
                "{contact}"
            );
        }
    }
}

/// A trunk whose gateway is written `sips:` sends a `sips:` INVITE (Request-URI and
/// Contact) over TLS, which the other side takes as a call.
#[tokio::test]
async fn a_sips_gateway_places_a_sips_call_over_tls() {
    let pki = Pki::new();
    let answering = stack(
        pki.tls("answering"),
        vec![TrunkConfig::new("caller", "127.0.0.1:9".parse().unwrap())],
        &["+15550100"],
    )
    .await
    .expect("answering stack");
    let mut calls = answering.take_incoming().unwrap();
    let mut trunk = TrunkConfig::new("secure", "127.0.0.1:1".parse().unwrap());
    trunk.gateway = format!("sips:{}", answering.tls_addr().unwrap())
        .parse()
        .unwrap();
    trunk.transport = SipTransport::Tls;
    let calling = stack(pki.tls("calling"), vec![trunk], &[])
        .await
        .expect("calling stack");
    let _leg = calling
        .place_call(OutboundCall {
            trunk: None,
            from_number: "+15550001".into(),
            from_display: None,
            to_number: "15550100".into(),
            headers: Vec::new(),
            local_media: media(),
            ring_timeout: T,
        })
        .await
        .expect("invite sent");
    let call = tokio::time::timeout(T, calls.recv())
        .await
        .expect("the INVITE arrives over TLS")
        .expect("a call");
    let header = |name: &str| {
        call.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert!(header("Via").contains("TLS"), "{:?}", call.headers);
    assert!(header("Contact").contains("sips:"), "{:?}", call.headers);
    assert!(header("To").contains("sips:"), "{:?}", call.headers);
    call.reject(486, None);
}
