//! HTTP peers: a small recording HTTP/1.1 server ([`HttpPeer`]) and a result sink on it
//! ([`Sink`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request an [`HttpPeer`] received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The body as JSON (Null when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The answer of an [`HttpPeer`]: a status, a content type and the body, written in
/// chunks with a pause before each (a server-sent event stream is several chunks).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub chunks: Vec<(Duration, Vec<u8>)>,
}

impl Reply {
    pub fn json(status: u16, v: &Value) -> Reply {
        Reply {
            status,
            content_type: "application/json".into(),
            chunks: vec![(Duration::ZERO, v.to_string().into_bytes())],
        }
    }

    pub fn empty(status: u16) -> Reply {
        Reply {
            status,
            content_type: "text/plain".into(),
            chunks: vec![],
        }
    }

    /// An OpenAI-compatible chat-completions stream: `content` split into chunks of a few
    /// characters, one `data:` event each (`gap` apart), a finish chunk and `data: [DONE]`.
    pub fn chat_stream(model: &str, content: &str, gap: Duration) -> Reply {
        let chunk = |delta: Value, finish: Value| {
            let v = json!({"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 1,
                "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            (gap, format!("data: {v}\n\n").into_bytes())
        };
        let mut chunks = vec![chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        )];
        let chars: Vec<char> = content.chars().collect();
        for piece in chars.chunks(3) {
            chunks.push(chunk(
                json!({"content": piece.iter().collect::<String>()}),
                Value::Null,
            ));
        }
        chunks.push(chunk(json!({}), json!("stop")));
        chunks.push((gap, b"data: [DONE]\n\n".to_vec()));
        Reply {
            status: 200,
            content_type: "text/event-stream".into(),
            chunks,
        }
    }
}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

/// When an [`HttpPeer`] read a request, and when it wrote the last byte of its answer.
pub type Timing = (tokio::time::Instant, Option<tokio::time::Instant>);

/// A small HTTP/1.1 server on 127.0.0.1 that records every request and answers with what
/// its handler returns (one request per connection, `connection: close`).
pub struct HttpPeer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// Per answered request: when it was read and when its answer's last byte was written.
    timings: Arc<Mutex<Vec<Timing>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one HTTP/1.1 request (head and content-length body).
async fn read_request(s: &mut tokio::net::TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head_end, len) = loop {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (i + 4, len);
        }
        if buf.len() > 1 << 20 {
            return None;
        }
    };
    while buf.len() < head_end + len {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf[..head_end - 4]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let target = first.next().unwrap_or_default().to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(Recorded {
        method,
        target,
        headers,
        body: buf[head_end..(head_end + len).min(buf.len())].to_vec(),
    })
}

impl HttpPeer {
    pub async fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> HttpPeer {
        let handler: Arc<Handler> = Arc::new(handler);
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind http peer");
        let addr = l.local_addr().expect("http peer addr");
        let requests: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let r2 = requests.clone();
        let timings: Arc<Mutex<Vec<_>>> = Arc::default();
        let t2 = timings.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                let requests = r2.clone();
                let timings = t2.clone();
                let handler = handler.clone();
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut s).await else {
                        return;
                    };
                    let read_at = tokio::time::Instant::now();
                    let reply = handler(&req);
                    let slot = {
                        let mut t = timings.lock().expect("peer lock");
                        t.push((read_at, None));
                        t.len() - 1
                    };
                    requests.lock().expect("peer lock").push(req);
                    let len = if reply.content_type == "text/event-stream" {
                        String::new()
                    } else {
                        let n: usize = reply.chunks.iter().map(|(_, c)| c.len()).sum();
                        format!("content-length: {n}\r\n")
                    };
                    let head = format!(
                        "HTTP/1.1 {} X\r\ncontent-type: {}\r\n{len}connection: close\r\n\r\n",
                        reply.status, reply.content_type
                    );
                    if s.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    for (pause, c) in &reply.chunks {
                        tokio::time::sleep(*pause).await;
                        if s.write_all(c).await.is_err() {
                            return;
                        }
                        let _ = s.flush().await;
                    }
                    timings.lock().expect("peer lock")[slot].1 = Some(tokio::time::Instant::now());
                    let _ = s.shutdown().await;
                });
            }
        });
        HttpPeer {
            url: format!("http://{addr}"),
            requests,
            timings,
            task,
        }
    }

    /// Per request, in the order they were read: when it was read and when the last byte
    /// of its answer was written (`None` while it is being answered).
    pub fn timings(&self) -> Vec<Timing> {
        self.timings.lock().expect("peer lock").clone()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("peer lock").clone()
    }
}

/// A tiny HTTP server recording every request body it receives (as JSON).
pub struct Sink {
    pub url: String,
    peer: HttpPeer,
    fail_first: usize,
}

impl Sink {
    /// Serves on 127.0.0.1; the first `fail_first` requests get 503, later ones 200.
    pub async fn start(fail_first: usize) -> Sink {
        let seen = std::sync::atomic::AtomicUsize::new(0);
        let peer = HttpPeer::start(move |_| {
            if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < fail_first {
                Reply::empty(503)
            } else {
                Reply::empty(200)
            }
        })
        .await;
        Sink {
            url: format!("{}/results", peer.url),
            peer,
            fail_first,
        }
    }

    /// Every request received, refused ones included, with its headers.
    pub fn requests(&self) -> Vec<Recorded> {
        self.peer.requests()
    }

    /// Bodies of the requests answered 200.
    pub fn bodies(&self) -> Vec<Value> {
        self.peer
            .requests()
            .iter()
            .skip(self.fail_first)
            .map(Recorded::json)
            .collect()
    }

    /// The bodies answered 200 once at least `n` arrived, or all of them when `within`
    /// passed first.
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let bodies = self.bodies();
            if bodies.len() >= n || tokio::time::Instant::now() >= deadline {
                return bodies;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
