//! POST /v1/scenario/webhook/run over real HTTP against a real local axum target. The route
//! touches no store, so SQLite is enough.

use std::net::SocketAddr;

use axum::{
    Router,
    body::Bytes,
    http::{HeaderMap, Method, StatusCode, Uri, header},
    response::IntoResponse,
    routing::{any, get},
};
use callsmith_control::testing::{TestDb, TestServer};
use serde_json::{Value, json};

/// Echoes what it received: method, path, query, Authorization, Content-Type and body.
async fn echo(method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let h = |n: header::HeaderName| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    axum::Json(json!({
        "method": method.as_str(),
        "path": uri.path(),
        "query": uri.query().unwrap_or(""),
        "authorization": h(header::AUTHORIZATION),
        "content_type": h(header::CONTENT_TYPE),
        "body": String::from_utf8_lossy(&body),
    }))
}

/// A real HTTP target on 127.0.0.1 with an ephemeral port.
async fn target() -> SocketAddr {
    let app = Router::new()
        .route(
            "/data",
            get(|| async {
                (
                    [("x-request-id", "req-42")],
                    axum::Json(json!({"user": {"name": "Ann", "id": 7}, "items": [1, 2]})),
                )
            }),
        )
        .route(
            "/fail",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
        )
        .route(
            "/r1",
            any(|| async { (StatusCode::FOUND, [(header::LOCATION, "/r2")]) }),
        )
        .route(
            "/r2",
            any(|| async {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(header::LOCATION, "/echo?hop=2")],
                )
            }),
        )
        .route("/echo", any(echo));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

async fn server(allow_private: bool) -> TestServer {
    TestServer::start_with(TestDb::Sqlite, |s| s.webhook_allow_private = allow_private).await
}

async fn run(s: &TestServer, token: &str, body: Value) -> Value {
    let r = s
        .post("/v1/scenario/webhook/run")
        .bearer(token)
        .json(&body)
        .send()
        .await;
    r.expect(200);
    r.body.clone()
}

fn body_json(outcome: &Value) -> Value {
    serde_json::from_str(outcome["response"]["body"].as_str().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maps_body_and_headers_and_fails_on_bad_targets() {
    let s = server(true).await;
    let f = s.fixture().await;
    let addr = target().await;

    // Processed: JSONPath body mapping, header mapping, set_if_not_found; the URL is
    // compiled against storage.
    let o = run(
        &s,
        &f.account_key,
        json!({
            "properties": {
                "request": {"method": "GET", "url": format!("http://{addr}/{{{{page}}}}")},
                "response_mapping": {"variables": [
                    {"name": "{{user_name}}", "source": "body", "path": "$.user.name", "set_if_not_found": ""},
                    {"name": "{{request_id}}", "source": "header", "path": "X-Request-Id", "set_if_not_found": ""},
                    {"name": "{{missing}}", "source": "body", "path": "$.nope", "set_if_not_found": "fallback"}
                ]}
            },
            "storage": {"page": "data"}
        }),
    )
    .await;
    assert_eq!(o["status"], "processed", "{o}");
    assert_eq!(o["error"], "");
    assert_eq!(o["variables"]["user_name"], "Ann");
    assert_eq!(o["variables"]["request_id"], "req-42");
    assert_eq!(o["variables"]["missing"], "fallback");
    assert_eq!(o["response"]["http_status_code"], 200);
    assert_eq!(o["response"]["http_status_text"], "OK");
    assert_eq!(o["response"]["headers"]["x-request-id"], json!(["req-42"]));
    assert!(o["response"]["duration"].as_i64().unwrap() >= 0);
    assert!(o["redirects"].is_null());
    let curl = o["curl"].as_str().unwrap();
    assert!(curl.contains(&format!("http://{addr}/data")), "{curl}");

    // A 500 from the target: 200 with status fail, the response filled, no variables.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {
            "request": {"method": "GET", "url": format!("http://{addr}/fail")},
            "response_mapping": {"variables": [
                {"name": "{{x}}", "source": "body", "path": "$.x", "set_if_not_found": "nf"}
            ]}
        }, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail");
    assert!(o["error"].as_str().unwrap().contains("500"), "{o}");
    assert_eq!(o["response"]["http_status_code"], 500);
    assert_eq!(o["response"]["body"], "boom");
    assert_eq!(o["variables"], json!({}));

    // Nothing listens on the port: fail with a null response.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": format!("http://{dead}/x"), "timeout": 5}}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail");
    assert!(!o["error"].as_str().unwrap().is_empty());
    assert!(o["response"].is_null(), "{o}");
    assert!(o["curl"].as_str().unwrap().contains(&dead.to_string()));

    // A placeholder that renders to an unusable URL: a compile failure, 200 fail.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": "{{target}}"}}, "storage": {"target": "not a url"}}),
    )
    .await;
    assert_eq!(o["status"], "fail");
    assert!(o["response"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_auth_and_bodies() {
    let s = server(true).await;
    let f = s.fixture().await;
    let addr = target().await;

    // 302 turns the POST into a GET; 307 keeps the method; both hops are recorded.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {
            "method": "POST", "url": format!("http://{addr}/r1"),
            "body": {"type": "json", "data": "{\"a\":1}"}
        }}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "processed", "{o}");
    assert_eq!(
        o["redirects"],
        json!([
            {"code": 302, "url": format!("http://{addr}/r2"), "method": "GET"},
            {"code": 307, "url": format!("http://{addr}/echo?hop=2"), "method": "GET"}
        ])
    );
    let seen = body_json(&o);
    assert_eq!(seen["path"], "/echo");
    assert_eq!(seen["query"], "hop=2");
    assert_eq!(seen["method"], "GET");

    // Basic authentication with a placeholder password, seen by the target.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {
            "method": "GET", "url": format!("http://{addr}/echo"),
            "authentication": {"type": "basic", "basic": {"username": "ann", "password": "{{pw}}"}}
        }}, "storage": {"pw": "s3cret"}}),
    )
    .await;
    assert_eq!(o["status"], "processed", "{o}");
    use base64::Engine as _;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("ann:s3cret")
    );
    assert_eq!(body_json(&o)["authorization"], expected);

    // Bearer authentication and a JSON body compiled against storage.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {
            "method": "PUT", "url": format!("http://{addr}/echo"),
            "authentication": {"type": "bearer", "bearer": {"token": "tok-{{n}}"}},
            "body": {"type": "json", "data": "{\"n\": \"{{n}}\"}"}
        }}, "storage": {"n": "9"}}),
    )
    .await;
    let seen = body_json(&o);
    assert_eq!(seen["authorization"], "Bearer tok-9");
    assert_eq!(seen["method"], "PUT");
    assert_eq!(seen["content_type"], "application/json");
    assert_eq!(seen["body"], "{\"n\": \"9\"}");

    // Form body, url-encoded, with custom headers.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {
            "method": "POST", "url": format!("http://{addr}/echo"),
            "body": {"type": "form", "form_values": [
                {"name": "who", "value": "{{who}}"}, {"name": "q", "value": "a&b c"}
            ]},
            "header": {"headers": [{"name": "X-Extra", "value": "1"}]}
        }}, "storage": {"who": "Zoë"}}),
    )
    .await;
    let seen = body_json(&o);
    assert_eq!(seen["content_type"], "application/x-www-form-urlencoded");
    assert_eq!(seen["body"], "who=Zo%C3%AB&q=a%26b+c");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_configuration_private_targets_and_auth() {
    let s = server(false).await;
    let f = s.fixture().await;
    let addr = target().await;

    // Missing url: 422 with SCN111 on request.url.
    let r = s
        .post("/v1/scenario/webhook/run")
        .bearer(&f.account_key)
        .json(&json!({"properties": {"request": {"method": "GET"}}, "storage": {}}))
        .send()
        .await;
    r.expect_error(422, "scenario_invalid");
    assert_eq!(r.body["data"]["topic"], "validation");
    let errs = r.body["data"]["errors"]["scenario"].as_array().unwrap();
    assert!(errs.iter().any(|e| e["code"] == "SCN111"), "{}", r.text);

    // A bad JSONPath in the mapping: SCN120.
    let r = s
        .post("/v1/scenario/webhook/run")
        .bearer(&f.account_key)
        .json(&json!({"properties": {
            "request": {"method": "GET", "url": format!("http://{addr}/data")},
            "response_mapping": {"variables": [
                {"name": "{{x}}", "source": "body", "path": "$[[", "set_if_not_found": ""}
            ]}
        }, "storage": {}}))
        .send()
        .await;
    r.expect_error(422, "scenario_invalid");
    let errs = r.body["data"]["errors"]["scenario"].as_array().unwrap();
    assert!(errs.iter().any(|e| e["code"] == "SCN120"), "{}", r.text);

    // Unknown top-level field: 400.
    s.post("/v1/scenario/webhook/run")
        .bearer(&f.account_key)
        .json(&json!({"properties": {}, "storage": {}, "extra": 1}))
        .send()
        .await
        .expect_error(400, "invalid_body");

    // A loopback target is refused while private targets are not allowed.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": format!("http://{addr}/data")}}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail");
    assert!(o["error"].as_str().unwrap().contains("refused"), "{o}");
    assert!(o["response"].is_null());
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": format!("http://localhost:{}/data", addr.port())}}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail");
    assert!(o["error"].as_str().unwrap().contains("refused"), "{o}");

    // No token: 401.
    s.post("/v1/scenario/webhook/run")
        .json(&json!({"properties": {}, "storage": {}}))
        .send()
        .await
        .expect(401);

    // Documented in /openapi.json with its error responses.
    let doc = s.get("/openapi.json").send().await;
    doc.expect(200);
    let op = &doc.body["paths"]["/v1/scenario/webhook/run"]["post"];
    for code in ["200", "400", "401", "403", "422", "500"] {
        assert!(op["responses"][code].is_object(), "missing {code}");
    }
    assert!(doc.body["components"]["schemas"]["WebhookRunOutcome"].is_object());
}

// --- insecure_skip_verify against a real HTTPS target -------------------------------------

/// TLS on top of a TCP listener, so `axum::serve` speaks HTTPS. A failed handshake (a client
/// refusing the certificate) is counted and the listener keeps accepting.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    failed_handshakes: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, peer)) = self.tcp.accept().await else {
                continue;
            };
            match self.acceptor.accept(tcp).await {
                Ok(tls) => return (tls, peer),
                Err(_) => {
                    self.failed_handshakes
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// A real HTTPS target on 127.0.0.1 with a self-signed certificate made by the `openssl`
/// CLI (CN localhost, SAN localhost and 127.0.0.1). Returns its address and the count of
/// handshakes the client aborted.
async fn https_target(
    dir: &std::path::Path,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("the openssl CLI runs (apt package openssl)");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(&key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let failed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let listener = TlsListener {
        tcp,
        acceptor: tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)),
        failed_handshakes: failed.clone(),
    };
    let app = Router::new().route(
        "/secure",
        get(|| async { axum::Json(json!({"secure": "yes"})) }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, failed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_skip_verify_against_a_self_signed_https_target() {
    let s = server(true).await;
    let f = s.fixture().await;
    let dir = tempfile::tempdir().unwrap();
    let (addr, failed) = https_target(dir.path()).await;
    let url = format!("https://localhost:{}/secure", addr.port());
    let mapping = json!({"variables": [
        {"name": "{{secure}}", "source": "body", "path": "$.secure", "set_if_not_found": "no"}
    ]});

    // Without the flag the certificate is refused: status fail with the TLS reason, no
    // response, no variables.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": url}, "response_mapping": mapping}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail", "{o}");
    let err = o["error"].as_str().unwrap().to_lowercase();
    assert!(err.contains("certificate"), "{o}");
    assert!(o["response"].is_null(), "{o}");
    assert_eq!(o["variables"], json!({}));
    assert!(!o["curl"].as_str().unwrap().contains(" -k"), "{o}");
    // The target saw the client abort the handshake (it may log that a moment later).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while failed.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the client never reached the target's TLS handshake"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // With insecure_skip_verify the same target is accepted and mapped; curl says -k.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {
            "request": {"method": "GET", "url": url, "insecure_skip_verify": true},
            "response_mapping": mapping
        }, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "processed", "{o}");
    assert_eq!(o["error"], "");
    assert_eq!(o["response"]["http_status_code"], 200);
    assert_eq!(o["variables"]["secure"], "yes");
    assert!(o["curl"].as_str().unwrap().contains(" -k"), "{o}");
}

// --- proxy: a real HTTP forward proxy -------------------------------------------------------

/// A minimal HTTP/1.1 forward proxy on 127.0.0.1: records each request line it receives
/// (absolute-form, as clients send to a proxy), forwards the request in origin-form to the
/// origin and relays the answer. It only ever connects to loopback origins (anything else
/// gets 502), so a test can never send traffic off the machine through it.
async fn forward_proxy() -> (SocketAddr, std::sync::Arc<parking_lot::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = l.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let head_end = loop {
                    let Ok(n) = client.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let mut lines = head.split("\r\n");
                let request_line = lines.next().unwrap_or_default().to_string();
                log.lock().push(request_line.clone());
                let mut parts = request_line.split(' ');
                let (method, target, version) = (
                    parts.next().unwrap_or_default(),
                    parts.next().unwrap_or_default(),
                    parts.next().unwrap_or("HTTP/1.1"),
                );
                let origin = url::Url::parse(target).ok().filter(|u| {
                    u.scheme() == "http"
                        && matches!(u.host_str(), Some("127.0.0.1") | Some("localhost"))
                });
                let Some(origin) = origin else {
                    let _ = client
                        .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                        .await;
                    return;
                };
                let Ok(mut upstream) = tokio::net::TcpStream::connect((
                    "127.0.0.1",
                    origin.port_or_known_default().unwrap_or(80),
                ))
                .await
                else {
                    return;
                };
                let path = &origin[url::Position::BeforePath..];
                let mut out = format!("{method} {path} {version}\r\n");
                for h in lines.filter(|h| !h.is_empty()) {
                    let name = h.split(':').next().unwrap_or_default().to_ascii_lowercase();
                    if name.starts_with("proxy-") || name == "connection" {
                        continue;
                    }
                    out.push_str(h);
                    out.push_str("\r\n");
                }
                out.push_str("Via: 1.1 test-proxy\r\nConnection: close\r\n\r\n");
                if upstream.write_all(out.as_bytes()).await.is_err()
                    || upstream.write_all(&buf[head_end..]).await.is_err()
                {
                    return;
                }
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    (addr, seen)
}

/// Echoes the Via header the proxy adds, so the target proves the request came through it.
async fn via_target() -> SocketAddr {
    let app = Router::new().route(
        "/via",
        any(|headers: HeaderMap| async move {
            let via = headers
                .get("via")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            axum::Json(json!({"via": via}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_carries_the_request_when_private_targets_are_allowed() {
    let s = server(true).await;
    let f = s.fixture().await;
    let addr = via_target().await;
    let (proxy, seen) = forward_proxy().await;
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {
            "request": {"method": "POST", "url": format!("http://{addr}/via?x={{{{x}}}}"),
                "body": {"type": "text", "data": "hello"},
                "proxy": {"url": "http://{{proxy_host}}"}},
            "response_mapping": {"variables": [
                {"name": "{{via}}", "source": "body", "path": "$.via", "set_if_not_found": ""}
            ]}
        }, "storage": {"x": "1", "proxy_host": proxy.to_string()}}),
    )
    .await;
    assert_eq!(o["status"], "processed", "{o}");
    assert_eq!(o["variables"]["via"], "1.1 test-proxy");
    assert_eq!(
        seen.lock().clone(),
        vec![format!("POST http://{addr}/via?x=1 HTTP/1.1")]
    );
    let curl = o["curl"].as_str().unwrap();
    assert!(
        curl.contains(&format!("--proxy 'http://{proxy}'")),
        "{curl}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_does_not_open_private_targets() {
    let s = server(false).await;
    let f = s.fixture().await;
    let addr = via_target().await;
    let (proxy, seen) = forward_proxy().await;

    // A loopback target is refused even though a proxy would carry the request.
    for host in [addr.to_string(), format!("localhost:{}", addr.port())] {
        let o = run(
            &s,
            &f.account_key,
            json!({"properties": {"request": {
                "method": "GET", "url": format!("http://{host}/via"),
                "proxy": {"url": format!("http://{proxy}")}
            }}, "storage": {}}),
        )
        .await;
        assert_eq!(o["status"], "fail", "{o}");
        let err = o["error"].as_str().unwrap();
        assert!(err.contains("refused") && err.contains("non-public"), "{o}");
        assert!(o["response"].is_null(), "{o}");
    }

    // A public target through a loopback proxy: the proxy itself is refused (it would be
    // a way into the private network). 203.0.113.0/24 is a documentation range; nothing is
    // sent anywhere because the run stops before connecting.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {
            "method": "GET", "url": "http://203.0.113.7/via",
            "proxy": {"url": format!("http://{proxy}")}
        }}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail", "{o}");
    let err = o["error"].as_str().unwrap();
    assert!(
        err.starts_with("proxy 127.0.0.1") && err.contains("refused"),
        "{o}"
    );
    assert!(seen.lock().is_empty(), "the proxy was never contacted");
}

// --- timeouts and the async option --------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_floats_and_async_still_returns_the_outcome() {
    let s = server(true).await;
    let f = s.fixture().await;
    let app = Router::new().route(
        "/slow",
        get(|| async {
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
            "late"
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let url = format!("http://{addr}/slow");

    // request.timeout (float seconds) cuts the run short: fail, no response.
    let t0 = std::time::Instant::now();
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": url, "timeout": 0.3}}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail", "{o}");
    assert!(o["response"].is_null(), "{o}");
    assert!(t0.elapsed() < std::time::Duration::from_millis(1400));
    assert!(
        o["curl"].as_str().unwrap().ends_with("--max-time 0.3"),
        "{o}"
    );

    // options.timeout applies when request.timeout is absent.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": url}, "options": {"timeout": 0.25}}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "fail", "{o}");
    assert!(
        o["curl"].as_str().unwrap().ends_with("--max-time 0.25"),
        "{o}"
    );

    // options.async only means a live scenario does not wait; the run still reports what
    // the target answered.
    let o = run(
        &s,
        &f.account_key,
        json!({"properties": {"request": {"method": "GET", "url": url, "timeout": 5}, "options": {"async": true}}, "storage": {}}),
    )
    .await;
    assert_eq!(o["status"], "processed", "{o}");
    assert_eq!(o["response"]["body"], "late");
    // Every field of the outcome is present, with the spec's types.
    for k in [
        "status",
        "error",
        "variables",
        "curl",
        "redirects",
        "response",
    ] {
        assert!(o.get(k).is_some(), "{k} missing: {o}");
    }
    for k in [
        "http_status_code",
        "http_status_text",
        "headers",
        "body",
        "duration",
    ] {
        assert!(o["response"].get(k).is_some(), "response.{k} missing: {o}");
    }
    assert!(o["response"]["duration"].as_i64().unwrap() >= 1400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_a_webhook_needs_write_access() {
    let s = server(true).await;
    let f = s.fixture().await;
    let addr = target().await;
    s.create_user(
        &f.account_sid,
        "viewer@example.test",
        "viewer-password",
        &["viewer"],
    )
    .await;
    s.create_user(
        &f.account_sid,
        "member@example.test",
        "member-password",
        &["member"],
    )
    .await;
    let viewer = s.login("viewer@example.test", "viewer-password").await;
    let member = s.login("member@example.test", "member-password").await;
    let body = json!({
        "properties": {"request": {
            "method": "POST", "url": format!("http://{addr}/echo"),
            "body": {"type": "json", "data": "{\"a\":1}"}
        }},
        "storage": {}
    });

    // A viewer can read the account's scenarios but cannot make the service send a request.
    s.get("/v1/scenario")
        .bearer(&viewer)
        .send()
        .await
        .expect(200);
    let r = s
        .post("/v1/scenario/webhook/run")
        .bearer(&viewer)
        .json(&body)
        .send()
        .await;
    r.expect_error(403, "forbidden");
    assert!(r.text.contains("resources:write"), "{}", r.text);

    // A member (and the account key) run it.
    for token in [&member, &f.account_key] {
        let o = run(&s, token, body.clone()).await;
        assert_eq!(o["status"], "processed", "{o}");
        assert_eq!(body_json(&o)["body"], "{\"a\":1}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nat64_and_6to4_spellings_of_loopback_are_refused() {
    let s = server(false).await;
    let f = s.fixture().await;
    let addr = target().await;
    let port = addr.port();
    for url in [
        format!("http://[64:ff9b::127.0.0.1]:{port}/data"),
        format!("http://[64:ff9b::7f00:1]:{port}/data"),
        format!("http://[2002:7f00:1::1]:{port}/data"),
        format!("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{port}/data"),
        format!("http://[::ffff:0:127.0.0.1]:{port}/data"),
    ] {
        let o = run(
            &s,
            &f.account_key,
            json!({"properties": {"request": {"method": "GET", "url": url}}, "storage": {}}),
        )
        .await;
        assert_eq!(o["status"], "fail", "{url}: {o}");
        assert!(
            o["error"].as_str().unwrap().contains("refused"),
            "{url}: {o}"
        );
        assert!(o["response"].is_null(), "{url}: {o}");
    }
}
