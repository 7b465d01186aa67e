//! The real server's connection handling: header-read and idle timeouts (raw TCP
//! clients that start a head and never finish it, or send nothing), keep-alive, and
//! graceful shutdown.

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
    TestServer::start_with(TestDb::Sqlite, |s| {
        s.http = HttpSettings {
            header_read_timeout,
            idle_timeout,
        }
    })
    .await
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
