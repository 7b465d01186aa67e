//! The real server's connection handling: header-read, idle, body and send timeouts (raw
//! TCP clients that start a head or a body and never finish it, send nothing, or read
//! nothing), the per-address connection cap, keep-alive, and graceful shutdown.

use std::time::{Duration, Instant};

use axum::{Router, routing::get};
use callsmith_control::{
    api::HttpSettings,
    testing::{TestDb, TestServer},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

async fn server(header_read_timeout: Duration, idle_timeout: Duration) -> TestServer {
    server_with(HttpSettings {
        header_read_timeout,
        idle_timeout,
        ..HttpSettings::default()
    })
    .await
}

async fn server_with(http: HttpSettings) -> TestServer {
    TestServer::start_with(TestDb::Sqlite, |s| s.http = http).await
}

/// Waits up to `within` for the server to close `c`; returns how long that took, or None
/// if the connection is still open (or sent data).
async fn closed_within(c: &mut TcpStream, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    match tokio::time::timeout(within, c.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Some(start.elapsed()),
        Ok(Ok(n)) => panic!(
            "expected a silent close, got {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(_) => None,
    }
}

/// Reads one whole response (head and Content-Length body) from `c`.
async fn read_response(c: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
            .await
            .expect("a response in time")
            .expect("read");
        assert!(
            n > 0,
            "closed before a whole response: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(head_end) = text.find("\r\n\r\n") {
            let length = text[..head_end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if got.len() >= head_end + 4 + length {
                return text;
            }
        }
    }
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_heads_are_closed_after_the_header_timeout() {
    let s = server(Duration::from_millis(400), Duration::from_secs(30)).await;
    // Many connections that start a head and never finish it …
    let mut held = Vec::new();
    for _ in 0..50 {
        let mut c = TcpStream::connect(s.addr).await.unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n")
            .await
            .unwrap();
        held.push(c);
    }
    // … and one that drips a byte every 100 ms: later bytes do not restart the clock.
    let mut drip = TcpStream::connect(s.addr).await.unwrap();
    let dripping = Instant::now();
    let mut drip_closed = None;
    for b in b"GET /healthz HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
        if drip.write_all(&[*b]).await.is_err() {
            drip_closed = Some(dripping.elapsed());
            break;
        }
        if closed_within(&mut drip, Duration::from_millis(100))
            .await
            .is_some()
        {
            drip_closed = Some(dripping.elapsed());
            break;
        }
    }
    let drip_closed = drip_closed.expect("the dripping connection was kept open");
    assert!(
        drip_closed < Duration::from_secs(2),
        "dripping head closed after {drip_closed:?}"
    );
    // Every unfinished head is closed well before the idle timeout.
    for c in &mut held {
        let t = closed_within(c, Duration::from_secs(3))
            .await
            .expect("an unfinished head kept open");
        assert!(t < Duration::from_secs(3));
    }
    // A complete request is still served.
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(HEALTHZ).await.unwrap();
    let r = read_response(&mut c).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    s.get("/healthz").send().await.expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let header = Duration::from_millis(300);
    let idle = Duration::from_millis(1500);
    let s = server(header, idle).await;

    // A connection that sends nothing is closed after the idle timeout, not the header one.
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    let t = closed_within(&mut silent, Duration::from_secs(5))
        .await
        .expect("a silent connection kept open");
    assert!(
        t >= idle - Duration::from_millis(200) && t < idle + Duration::from_secs(2),
        "silent connection closed after {t:?}"
    );

    // Keep-alive: idle longer than the header timeout, then two requests on one connection …
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    c.write_all(HEALTHZ).await.unwrap();
    assert!(read_response(&mut c).await.starts_with("HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_millis(700)).await;
    c.write_all(HEALTHZ).await.unwrap();
    assert!(read_response(&mut c).await.starts_with("HTTP/1.1 200"));
    // … then silence: closed after the idle timeout.
    let t = closed_within(&mut c, Duration::from_secs(5))
        .await
        .expect("an idle keep-alive connection kept open");
    assert!(
        t >= idle - Duration::from_millis(200),
        "idle keep-alive connection closed after {t:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_in_flight_requests_finish() {
    let app = Router::new()
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(600)).await;
                "done"
            }),
        )
        .route("/fast", get(|| async { "fast" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(callsmith_control::api::serve(
        listener,
        app,
        HttpSettings::default(),
        async {
            let _ = stopped.await;
        },
    ));
    // An idle keep-alive connection and a request under way when shutdown begins.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /fast HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    assert!(read_response(&mut idle).await.ends_with("fast"));
    let slow = tokio::spawn(async move {
        reqwest::get(format!("http://{addr}/slow"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.send(()).unwrap();
    // The idle connection is closed at once, the slow request is answered in full …
    closed_within(&mut idle, Duration::from_secs(1))
        .await
        .expect("the idle connection survived shutdown");
    assert_eq!(slow.await.unwrap(), "done");
    // … and serve returns once it is done; nothing is accepted any more.
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("serve returned")
        .unwrap()
        .unwrap();
    assert!(TcpStream::connect(addr).await.is_err());
}

/// Reads from `c` until it is closed (or reset), up to `within`: what arrived, and whether
/// it was closed in time.
async fn read_until_closed(c: &mut TcpStream, within: Duration) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, c.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (got, true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (got, false),
        }
    }
}

/// The JSON body of a whole response read by [`read_response`].
fn json_body(response: &str) -> serde_json::Value {
    let (_, body) = response.split_once("\r\n\r\n").expect("a head");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

const LOGIN_HEAD: &str = "POST /v1/auth/login HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_and_trickling_bodies_on_public_routes_time_out() {
    let s = server_with(HttpSettings {
        body_read_timeout: Duration::from_millis(400),
        body_min_rate: 1000,
        idle_timeout: Duration::from_secs(30),
        ..HttpSettings::default()
    })
    .await;
    let f = s.fixture().await;

    // A login whose body stops after a few of its 1000 bytes: 408 in the envelope once the
    // body timeout has passed, then the connection is closed.
    let mut stalled = TcpStream::connect(s.addr).await.unwrap();
    let start = Instant::now();
    stalled
        .write_all(format!("{LOGIN_HEAD}{{\"email\":").as_bytes())
        .await
        .unwrap();
    let r = read_response(&mut stalled).await;
    let took = start.elapsed();
    assert!(r.starts_with("HTTP/1.1 408"), "{r}");
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_secs(3),
        "answered after {took:?}"
    );
    let body = json_body(&r);
    assert_eq!(body["error"], "request_timeout", "{r}");
    assert_eq!(body["code"], "ERR015", "{r}");
    assert!(body["message"].as_str().unwrap().contains("did not arrive"));
    assert!(r.to_ascii_lowercase().contains("connection: close"), "{r}");
    assert!(
        closed_within(&mut stalled, Duration::from_secs(2))
            .await
            .is_some(),
        "the stalled connection stayed open after its 408"
    );

    // A body dripped a byte every 100 ms: no gap reaches the body timeout, but 10 bytes a
    // second is under the 1000 B/s floor, so it is cut off within a second or so (a 408,
    // or a reset when a byte was still unread), long before its 1000 bytes are sent.
    let drip = TcpStream::connect(s.addr).await.unwrap();
    let (mut rd, mut wr) = drip.into_split();
    wr.write_all(LOGIN_HEAD.as_bytes()).await.unwrap();
    let start = Instant::now();
    let dripper = tokio::spawn(async move {
        let mut sent = 0;
        for _ in 0..1000 {
            if wr.write_all(b" ").await.is_err() {
                break;
            }
            sent += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        sent
    });
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let ended = loop {
        match tokio::time::timeout(Duration::from_secs(5), rd.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break start.elapsed(),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("a dripping body kept its connection open"),
        }
    };
    dripper.abort();
    assert!(
        ended < Duration::from_secs(3),
        "dripping body cut after {ended:?}"
    );
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );

    // Positive control: a login sent at once is answered.
    s.login(&f.admin_email, &f.admin_password).await;
}

/// A valid 8 kHz 16-bit mono WAV of `samples` samples (a quiet ramp).
fn wav(samples: usize) -> Vec<u8> {
    let data = (samples * 2) as u32;
    let mut w = Vec::with_capacity(44 + data as usize);
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + data).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&8000u32.to_le_bytes());
    w.extend_from_slice(&16000u32.to_le_bytes());
    w.extend_from_slice(&2u16.to_le_bytes());
    w.extend_from_slice(&16u16.to_le_bytes());
    w.extend_from_slice(b"data");
    w.extend_from_slice(&data.to_le_bytes());
    for i in 0..samples {
        w.extend_from_slice(&(((i % 200) as i16 - 100) * 10).to_le_bytes());
    }
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_but_steady_upload_completes() {
    // Each pause may last 300 ms; the body must average 64 KiB/s.
    let s = server_with(HttpSettings {
        body_read_timeout: Duration::from_millis(300),
        body_min_rate: 64 * 1024,
        ..HttpSettings::default()
    })
    .await;
    let f = s.fixture().await;
    let file = wav(256 * 1024); // 512 KiB
    let boundary = "slowboundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.wav\"\r\nContent-Type: audio/wav\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());

    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(
        format!(
            "POST /v1/audio HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\n\r\n",
            f.account_key,
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    // 16 KiB every 100 ms (about 160 KiB/s): the upload takes over 3 s, ten times the body
    // timeout, with every pause under it.
    let start = Instant::now();
    for chunk in body.chunks(16 * 1024) {
        c.write_all(chunk).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = read_response(&mut c).await;
    assert!(start.elapsed() > Duration::from_secs(3));
    assert!(r.starts_with("HTTP/1.1 201"), "{r}");
    assert_eq!(json_body(&r)["size_bytes"], file.len());
}

/// A TCP connection to `to` from the loopback address `from`.
async fn connect_from(from: [u8; 4], to: std::net::SocketAddr) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind((std::net::Ipv4Addr::from(from), 0).into())?;
    socket.connect(to).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_per_address_cap_are_closed() {
    let s = server_with(HttpSettings {
        max_connections_per_address: 4,
        idle_timeout: Duration::from_secs(30),
        ..HttpSettings::default()
    })
    .await;
    // Four connections from 127.0.0.1, each answered (so each is accepted and held) …
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut c = connect_from([127, 0, 0, 1], s.addr).await.unwrap();
        c.write_all(HEALTHZ).await.unwrap();
        assert!(read_response(&mut c).await.starts_with("HTTP/1.1 200"));
        held.push(c);
    }
    // … and a fifth is closed without an answer.
    let mut fifth = connect_from([127, 0, 0, 1], s.addr).await.unwrap();
    let _ = fifth.write_all(HEALTHZ).await;
    let (got, closed) = read_until_closed(&mut fifth, Duration::from_secs(3)).await;
    assert!(closed, "the connection over the cap was kept open");
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));

    // Another address is not affected.
    let mut other = connect_from([127, 0, 0, 2], s.addr).await.unwrap();
    other.write_all(HEALTHZ).await.unwrap();
    assert!(read_response(&mut other).await.starts_with("HTTP/1.1 200"));

    // Closing one of the four frees its place.
    drop(held.pop());
    let mut answered = false;
    for _ in 0..40 {
        let mut c = connect_from([127, 0, 0, 1], s.addr).await.unwrap();
        let _ = c.write_all(HEALTHZ).await;
        let (got, _) = read_until_closed(&mut c, Duration::from_millis(500)).await;
        if got.starts_with(b"HTTP/1.1 200") {
            answered = true;
            break;
        }
    }
    assert!(answered, "a freed place was not given to a new connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_nothing_is_closed_after_the_send_timeout() {
    let s = server_with(HttpSettings {
        send_timeout: Duration::from_millis(500),
        ..HttpSettings::default()
    })
    .await;
    let doc = s.get("/openapi.json").send().await;
    doc.expect(200);
    let one = doc.text.len();
    // Enough pipelined requests for their responses to fill every buffer on the way, from a
    // client with a small receive buffer that then reads nothing.
    let n = (32 << 20) / one + 1;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut c = socket.connect(s.addr).await.unwrap();
    let request = b"GET /openapi.json HTTP/1.1\r\nHost: test\r\n\r\n".repeat(n);
    c.write_all(&request).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Reading now finds the connection closed part-way: the server gave up on its blocked
    // write instead of waiting for the client.
    let (got, closed) = read_until_closed(&mut c, Duration::from_secs(10)).await;
    assert!(closed, "the connection was still open");
    assert!(
        got.len() < n * one,
        "all {n} responses arrived ({} bytes)",
        got.len()
    );
}
