//! The Deepgram-style recognition client over `wss://`: a loopback TLS websocket server
//! with a certificate made by the test (rcgen) stands in for a hosted service. Trusted
//! through the node's `ca_file`, transcripts come through and the key arrives as
//! `Authorization: Token <key>`; a certificate nobody trusts is a clear `NodeFailed`, not a
//! panic; a bad `ca_file` or an unset `api_key_env` is refused by [`SttNodeConfig::check`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use callsmith_media::AudioFrame;
use callsmith_media::stt::{
    SttEvent, SttNodeConfig, SttParams, SttPool, SttProtocol, start_stream,
};
use futures::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};

const KEY: &str = "dg-test-key-0123";

/// A self-signed certificate for 127.0.0.1 and localhost: (certificate PEM, server config).
fn server_tls() -> (String, Arc<rustls::ServerConfig>) {
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
        .expect("certificate");
    let pem = ck.cert.pem();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into());
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_no_client_auth()
    .with_single_cert(vec![ck.cert.der().clone()], key)
    .expect("server config");
    (pem, Arc::new(cfg))
}

/// What the server saw of its connections.
#[derive(Default, Debug)]
struct Seen {
    authorization: Vec<Option<String>>,
    paths: Vec<String>,
    audio_bytes: usize,
}

/// A Deepgram-style websocket server over TLS on a loopback port: it refuses a connection
/// without `Authorization: Token KEY` (401), answers an interim result after the first
/// audio and, on `CloseStream`, a final "hello world" and closes.
async fn serve(tls: Arc<rustls::ServerConfig>) -> (u16, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let s2 = seen.clone();
    tokio::spawn(async move {
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let seen = s2.clone();
            tokio::spawn(async move {
                // A handshake the client aborts (untrusted certificate) ends here.
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let s3 = seen.clone();
                // The callback's signature is tungstenite's.
                #[allow(clippy::result_large_err)]
                let check =
                    move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
                        let auth = req
                            .headers()
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .map(String::from);
                        let mut s = s3.lock().expect("seen");
                        s.paths.push(req.uri().to_string());
                        s.authorization.push(auth.clone());
                        if auth.as_deref() == Some(&format!("Token {KEY}")) {
                            Ok(resp)
                        } else {
                            let mut r = ErrorResponse::new(Some("bad key".into()));
                            *r.status_mut() =
                                tokio_tungstenite::tungstenite::http::StatusCode::UNAUTHORIZED;
                            Err(r)
                        }
                    };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, check).await else {
                    return;
                };
                let mut interim_sent = false;
                while let Some(Ok(msg)) = ws.next().await {
                    match msg {
                        Message::Binary(b) => {
                            seen.lock().expect("seen").audio_bytes += b.len();
                            if !interim_sent {
                                interim_sent = true;
                                let r = r#"{"type":"Results","is_final":false,"channel":{"alternatives":[{"transcript":"hello"}]}}"#;
                                let _ = ws.send(Message::text(r)).await;
                            }
                        }
                        Message::Text(t) if t.contains("CloseStream") => {
                            let r = r#"{"type":"Results","is_final":true,"speech_final":true,"start":0.0,"duration":0.4,"channel":{"alternatives":[{"transcript":"hello world"}]}}"#;
                            let _ = ws.send(Message::text(r)).await;
                            let _ = ws.close(None).await;
                            return;
                        }
                        _ => {}
                    }
                }
            });
        }
    });
    (port, seen)
}

fn node(port: u16, ca_file: Option<std::path::PathBuf>, key: Option<&str>) -> SttNodeConfig {
    SttNodeConfig {
        api_key: key.map(String::from),
        ca_file,
        ..SttNodeConfig::new(
            "hosted",
            format!("wss://127.0.0.1:{port}/v1/listen"),
            SttProtocol::Deepgram,
        )
    }
}

/// Streams half a second of audio to `node` and returns every event until the stream ends.
async fn stream(node: SttNodeConfig) -> Vec<SttEvent> {
    let pool = SttPool::new(vec![node.clone()]);
    let (atx, arx) = tokio::sync::mpsc::channel::<AudioFrame>(64);
    let mut s = start_stream(pool, node, SttParams::default(), arx);
    tokio::spawn(async move {
        for i in 0..25u64 {
            let pcm = [((i * 37) % 2000) as i16; 160];
            if atx.send(AudioFrame::narrow(pcm, i * 20)).await.is_err() {
                return;
            }
        }
        // Dropping the sender ends the audio: the client sends CloseStream.
    });
    let mut events = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(10), s.next()).await {
        let last = matches!(ev, SttEvent::Ended | SttEvent::NodeFailed { .. });
        events.push(ev);
        if last {
            break;
        }
    }
    events
}

#[tokio::test]
async fn wss_with_the_extra_ca_and_a_key_carries_transcripts() {
    let (pem, tls) = server_tls();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pem).expect("write ca");
    let (port, seen) = serve(tls).await;
    let n = node(port, Some(ca), Some(KEY));
    n.check()
        .expect("a wss node with a readable ca_file checks");
    let events = stream(n).await;
    let texts: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            SttEvent::Transcript(t) => Some((t.text.clone(), t.is_final)),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        vec![("hello".into(), false), ("hello world".into(), true)],
        "{events:?}"
    );
    assert_eq!(events.last(), Some(&SttEvent::Ended), "{events:?}");
    let s = seen.lock().expect("seen");
    assert_eq!(s.authorization, vec![Some(format!("Token {KEY}"))]);
    assert!(
        s.paths[0].starts_with("/v1/listen?encoding=linear16&sample_rate=8000"),
        "{:?}",
        s.paths
    );
    assert_eq!(s.audio_bytes, 25 * 320, "every sample arrived as linear16");
}

#[tokio::test]
async fn an_untrusted_certificate_is_a_clear_node_failure() {
    let (_pem, tls) = server_tls();
    let (port, seen) = serve(tls).await;
    // No ca_file: the public roots do not know the test's certificate.
    let events = stream(node(port, None, Some(KEY))).await;
    match events.as_slice() {
        [SttEvent::NodeFailed { node, error }] => {
            assert_eq!(node, "hosted");
            assert!(
                error.contains("TLS handshake with 127.0.0.1")
                    && error.contains("invalid peer certificate")
                    && error.contains("ca_file"),
                "{error}"
            );
        }
        other => panic!("expected one NodeFailed, got {other:?}"),
    }
    assert!(
        seen.lock().expect("seen").paths.is_empty(),
        "no websocket request reached the server"
    );

    // Another CA in ca_file does not help either.
    let (other_pem, _) = server_tls();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("other.pem");
    std::fs::write(&ca, other_pem).expect("write ca");
    let events = stream(node(port, Some(ca), Some(KEY))).await;
    assert!(
        matches!(events.as_slice(), [SttEvent::NodeFailed { error, .. }] if error.contains("invalid peer certificate")),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_wrong_key_is_refused_by_the_server_and_reported() {
    let (pem, tls) = server_tls();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pem).expect("write ca");
    let (port, _seen) = serve(tls).await;
    let events = stream(node(port, Some(ca), Some("wrong"))).await;
    assert!(
        matches!(events.as_slice(), [SttEvent::NodeFailed { error, .. }] if error.contains("401")),
        "{events:?}"
    );
}

#[test]
fn check_refuses_what_cannot_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").expect("write");
    let mut n = node(443, Some(garbage), None);
    let e = n.check().expect_err("no certificate in the file");
    assert!(e.contains("ca_file") && e.contains("no certificate"), "{e}");
    n.ca_file = Some(dir.path().join("missing.pem"));
    assert!(n.check().expect_err("missing file").contains("missing.pem"));
    n.ca_file = None;
    n.check().expect("wss with the public roots only");
    n.api_key_env = Some("CALLSMITH_TEST_STT_KEY_UNSET".into());
    let e = n.check().expect_err("unset key variable");
    assert!(e.contains("CALLSMITH_TEST_STT_KEY_UNSET is not set"), "{e}");
    let mut plain = SttNodeConfig::new("p", "ws://127.0.0.1:1/v1/listen", SttProtocol::Deepgram);
    plain.check().expect("plain ws");
    plain.ca_file = Some(dir.path().join("x.pem"));
    assert!(
        plain
            .check()
            .expect_err("ca_file on ws")
            .contains("not wss")
    );
    let http = SttNodeConfig::new("h", "https://127.0.0.1/v1/listen", SttProtocol::Deepgram);
    assert!(http.check().expect_err("https").contains("not ws or wss"));
}
