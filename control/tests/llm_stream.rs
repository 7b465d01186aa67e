//! One-shot completions for calls, read as they stream: against a loopback
//! OpenAI-compatible server (raw HTTP/1.1 on 127.0.0.1) that sends sentences with pauses,
//! answers one JSON document instead of a stream, cuts the stream, or sends a malformed
//! event. Each piece of content reaches the caller as it arrives; what arrived before an
//! error stays delivered and the error says what happened.

use std::time::{Duration, Instant};

use callsmith_domain::adapters::{
    LlmProvider, LlmService,
    llm::{ChatMessage, ChatRequest, LlmError},
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// The server's answer: a content type and (pause before, bytes) parts; the connection
/// closes after the last part.
type Script = (&'static str, Vec<(Duration, String)>);

async fn upstream(script: Script) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let script = script.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if buf.len() >= i + 4 + len {
                            break;
                        }
                    }
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let (ctype, parts) = script;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\nconnection: close\r\n\r\n"
                );
                let _ = s.write_all(head.as_bytes()).await;
                for (pause, bytes) in parts {
                    tokio::time::sleep(pause).await;
                    if s.write_all(bytes.as_bytes()).await.is_err() {
                        return;
                    }
                    let _ = s.flush().await;
                }
                let _ = s.shutdown().await;
            });
        }
    });
    url
}

fn chunk(content: &str) -> String {
    let v = json!({"object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]});
    format!("data: {v}\n\n")
}

fn stop() -> String {
    let v = json!({"object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    format!("data: {v}\n\ndata: [DONE]\n\n")
}

fn service(url: &str) -> LlmService {
    LlmService::new(
        reqwest::Client::new(),
        vec![LlmProvider {
            name: "local".into(),
            base_url: url.to_string(),
            api_key: None,
            gdpr: false,
            models: vec!["m".into()],
        }],
        Duration::from_secs(30),
        Duration::from_secs(60),
    )
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage {
            role: "user".into(),
            content: Some("hi".into()),
            tool_calls: None,
            tool_call_id: None,
            name: None,
        }],
        model: "m".into(),
        provider: None,
        temperature: None,
        tools: vec![],
        gdpr_required: false,
    }
}

/// Runs a completion, collecting (arrival, piece) of every delta.
async fn run(url: &str) -> (Result<String, LlmError>, Vec<(Instant, String)>, Instant) {
    let llm = service(url);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let collect = tokio::spawn(async move {
        let mut got = Vec::new();
        while let Some(p) = rx.recv().await {
            got.push((Instant::now(), p));
        }
        got
    });
    let r = llm
        .complete_streaming("AC1", request(), Duration::from_secs(10), Some(&tx))
        .await
        .map(|a| a.content);
    let done = Instant::now();
    drop(tx);
    (r, collect.await.unwrap(), done)
}

#[tokio::test]
async fn pieces_arrive_as_the_provider_streams_them() {
    let gap = Duration::from_millis(400);
    let url = upstream((
        "text/event-stream",
        vec![
            (Duration::ZERO, chunk("Hello there. ")),
            (gap, chunk("Your balance is 3.5 euros. ")),
            (gap, chunk("Bye.")),
            (Duration::ZERO, stop()),
        ],
    ))
    .await;
    let (r, pieces, done) = run(&url).await;
    assert_eq!(
        r.unwrap(),
        "Hello there. Your balance is 3.5 euros. Bye.",
        "the whole reply"
    );
    let texts: Vec<&str> = pieces.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(
        texts,
        vec!["Hello there. ", "Your balance is 3.5 euros. ", "Bye."]
    );
    assert!(
        done - pieces[0].0 >= gap * 2 - Duration::from_millis(50),
        "the first piece came {} ms before the end",
        (done - pieces[0].0).as_millis()
    );
}

#[tokio::test]
async fn a_provider_that_answers_json_still_works() {
    let body = json!({"object": "chat.completion", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "One. Two."}, "finish_reason": "stop"}]});
    let url = upstream(("application/json", vec![(Duration::ZERO, body.to_string())])).await;
    let (r, pieces, _) = run(&url).await;
    assert_eq!(r.unwrap(), "One. Two.");
    assert_eq!(pieces.len(), 1);
    assert_eq!(pieces[0].1, "One. Two.");

    // A JSON error document is the provider's error.
    let url = upstream((
        "application/json",
        vec![(
            Duration::ZERO,
            json!({"error": {"message": "quota exceeded", "code": 429}}).to_string(),
        )],
    ))
    .await;
    match run(&url).await.0 {
        Err(LlmError::Upstream(m, 429)) => assert!(m.contains("quota exceeded"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A JSON answer that is no chat completion.
    let url = upstream((
        "application/json",
        vec![(Duration::ZERO, "{\"choices\": 5".to_string())],
    ))
    .await;
    match run(&url).await.0 {
        Err(LlmError::Upstream(m, _)) => assert!(m.contains("unparseable"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_cut_stream_keeps_what_arrived_and_says_so() {
    let url = upstream((
        "text/event-stream",
        vec![
            (Duration::ZERO, chunk("First sentence. ")),
            (Duration::from_millis(100), chunk("Second sen")),
        ],
    ))
    .await;
    let (r, pieces, _) = run(&url).await;
    let texts: Vec<&str> = pieces.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(texts, vec!["First sentence. ", "Second sen"]);
    match r {
        Err(LlmError::Upstream(m, _)) => {
            assert!(m.contains("ended before the answer finished"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_malformed_event_is_an_error_after_what_came_before() {
    let url = upstream((
        "text/event-stream",
        vec![
            (Duration::ZERO, chunk("Fine so far. ")),
            (Duration::from_millis(50), "data: {not json\n\n".to_string()),
            (Duration::ZERO, chunk("Never read.")),
        ],
    ))
    .await;
    let (r, pieces, _) = run(&url).await;
    assert_eq!(pieces.len(), 1);
    assert_eq!(pieces[0].1, "Fine so far. ");
    match r {
        Err(LlmError::Upstream(m, _)) => assert!(m.contains("unparseable stream chunk"), "{m}"),
        other => panic!("{other:?}"),
    }
}
