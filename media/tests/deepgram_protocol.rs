//! The Deepgram-style recognition client against recorded protocol sessions: a loopback
//! websocket server records what the client sends (the URL's query, the key, its text
//! messages) and plays back server messages in the shape Deepgram's streaming API
//! reference documents (`tests/fixtures/deepgram_sessions.json`).
//!
//! Checked: every streaming option the client sends, as the vendor names it; a turn the
//! service finalizes in segments (a caller pausing mid-sentence) reported as one final;
//! `UtteranceEnd` ending a turn endpointing never ended; the answer to `CloseStream`
//! taken as the turn's final; `KeepAlive` on a stream without audio; a service error close
//! reported with its code and reason.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use callsmith_media::AudioFrame;
use callsmith_media::stt::{
    SttEvent, SttNodeConfig, SttParams, SttPool, SttProtocol, start_stream,
};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

const KEY: &str = "dg-recorded-key";

/// What the server saw of one connection.
#[derive(Default, Debug)]
struct Seen {
    query: Vec<(String, String)>,
    authorization: Option<String>,
    texts: Vec<String>,
    audio_bytes: usize,
    /// The size of each audio message.
    messages: Vec<usize>,
}

/// How the server answers.
#[derive(Clone)]
enum Script {
    /// A recorded session: `stream` entries sent once `after_bytes` of audio arrived,
    /// `close` entries when the client sends `CloseStream`, then a normal close.
    Session(Value),
    /// Closes with 1011 and `reason` at the first audio, as the service does on an error.
    ErrorClose(&'static str),
}

fn session(name: &str) -> Script {
    let all: Value = serde_json::from_str(include_str!("fixtures/deepgram_sessions.json"))
        .expect("fixture parses");
    Script::Session(all[name].clone())
}

async fn serve(script: Script) -> (u16, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let s2 = seen.clone();
    tokio::spawn(async move {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let s3 = s2.clone();
        // The callback's signature is tungstenite's.
        #[allow(clippy::result_large_err)]
        let record = move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
            let url = url::Url::parse(&format!("ws://x{}", req.uri())).expect("uri");
            let mut s = s3.lock().expect("seen");
            s.query = url
                .query_pairs()
                .map(|(k, v)| (k.into(), v.into()))
                .collect();
            s.authorization = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(String::from);
            Ok(resp)
        };
        let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, record).await else {
            return;
        };
        let (stream, close) = match &script {
            Script::Session(v) => (
                v["stream"].as_array().cloned().unwrap_or_default(),
                v["close"].as_array().cloned().unwrap_or_default(),
            ),
            Script::ErrorClose(_) => (Vec::new(), Vec::new()),
        };
        let mut next = 0;
        while let Some(Ok(msg)) = ws.next().await {
            match msg {
                Message::Binary(b) => {
                    let total = {
                        let mut s = s2.lock().expect("seen");
                        s.audio_bytes += b.len();
                        s.messages.push(b.len());
                        s.audio_bytes
                    };
                    if let Script::ErrorClose(reason) = script {
                        let _ = ws
                            .close(Some(CloseFrame {
                                code: CloseCode::Error,
                                reason: reason.into(),
                            }))
                            .await;
                        return;
                    }
                    while next < stream.len()
                        && stream[next]["after_bytes"].as_u64().unwrap_or(0) as usize <= total
                    {
                        let m = stream[next]["message"].to_string();
                        let _ = ws.send(Message::text(m)).await;
                        next += 1;
                    }
                }
                Message::Text(t) => {
                    let closing = t.contains("CloseStream");
                    s2.lock().expect("seen").texts.push(t.to_string());
                    if closing {
                        for m in &close {
                            let _ = ws.send(Message::text(m.to_string())).await;
                        }
                        let _ = ws.close(None).await;
                        return;
                    }
                }
                _ => {}
            }
        }
    });
    (port, seen)
}

fn node(port: u16) -> SttNodeConfig {
    SttNodeConfig {
        api_key: Some(KEY.into()),
        ..SttNodeConfig::new(
            "hosted",
            format!("ws://127.0.0.1:{port}/v1/listen"),
            SttProtocol::Deepgram,
        )
    }
}

/// Streams `frames` 20 ms frames as fast as the client takes them, waits `hold` with the
/// audio still open, then ends it; returns every event until the stream ends.
async fn stream(
    node: SttNodeConfig,
    params: SttParams,
    frames: u64,
    hold: Duration,
) -> Vec<SttEvent> {
    let pool = SttPool::new(vec![node.clone()]);
    let (atx, arx) = tokio::sync::mpsc::channel::<AudioFrame>(64);
    let mut s = start_stream(pool, node, params, arx);
    tokio::spawn(async move {
        for i in 0..frames {
            let pcm = [((i * 37) % 2000) as i16; 160];
            if atx.send(AudioFrame::narrow(pcm, i * 20)).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(hold).await;
        // Dropping the sender ends the audio: the client sends CloseStream.
    });
    let mut events = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(15), s.next()).await {
        let last = matches!(ev, SttEvent::Ended | SttEvent::NodeFailed { .. });
        events.push(ev);
        if last {
            break;
        }
    }
    events
}

fn transcripts(events: &[SttEvent]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            SttEvent::Transcript(t) => Some((t.text.clone(), t.is_final)),
            _ => None,
        })
        .collect()
}

fn values(q: &[(String, String)], key: &str) -> Vec<String> {
    q.iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .collect()
}

#[tokio::test]
async fn every_streaming_option_is_sent_as_the_vendor_names_it() {
    let (port, seen) = serve(session("paused_turn")).await;
    let n = SttNodeConfig {
        utterance_end_ms: Some(1200),
        ..node(port)
    };
    n.check()
        .expect("a Deepgram-style node with utterance_end_ms checks");
    let params = SttParams {
        language: "de-DE".into(),
        alternative_languages: vec!["en-US".into()],
        model: "nova-3".into(),
        endpointing_ms: Some(300),
        hints: vec!["Callsmith".into(), "order number".into()],
        ..SttParams::default()
    };
    let events = stream(n, params, 80, Duration::ZERO).await;
    assert_eq!(events.last(), Some(&SttEvent::Ended), "{events:?}");
    let s = seen.lock().expect("seen");
    assert_eq!(s.authorization, Some(format!("Token {KEY}")));
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        s.query,
        pairs(&[
            ("encoding", "linear16"),
            ("sample_rate", "8000"),
            ("channels", "1"),
            ("language", "multi"),
            ("interim_results", "true"),
            ("model", "nova-3"),
            ("detect_language", "de-DE"),
            ("detect_language", "en-US"),
            ("endpointing", "300"),
            ("utterance_end_ms", "1200"),
            ("keyterm", "Callsmith"),
            ("keyterm", "order number"),
        ])
    );
    assert_eq!(s.texts, vec![r#"{"type":"CloseStream"}"#.to_string()]);
    assert_eq!(s.audio_bytes, 80 * 320, "every sample arrived as linear16");
    // One message per 20 ms frame: a recogniser counts the silence that ends a turn as the
    // audio arrives, so none of it is held back for a larger batch.
    assert!(s.messages.iter().all(|&n| n == 320), "{:?}", s.messages);
}

#[tokio::test]
async fn options_follow_the_model_the_vad_and_interim_results() {
    // An older model takes hints as `keywords`; no voice activity detection is
    // `endpointing=false`; without interim results Deepgram sends no UtteranceEnd, so
    // `utterance_end_ms` is not asked for.
    let (port, seen) = serve(session("paused_turn")).await;
    let n = SttNodeConfig {
        utterance_end_ms: Some(1000),
        ..node(port)
    };
    let params = SttParams {
        model: "nova-2".into(),
        vad_endpointing: false,
        endpointing_ms: Some(300),
        interim_results: false,
        hints: vec!["Callsmith".into()],
        ..SttParams::default()
    };
    stream(n, params, 10, Duration::ZERO).await;
    let q = &seen.lock().expect("seen").query;
    assert_eq!(values(q, "language"), ["en-US"]);
    assert_eq!(values(q, "interim_results"), ["false"]);
    assert_eq!(values(q, "keywords"), ["Callsmith"]);
    assert!(values(q, "keyterm").is_empty(), "{q:?}");
    assert_eq!(values(q, "endpointing"), ["false"]);
    assert!(values(q, "utterance_end_ms").is_empty(), "{q:?}");
    assert!(values(q, "detect_language").is_empty(), "{q:?}");
}

/// A caller pausing mid-sentence: the service finalizes "I'd like to" without
/// `speech_final`; the turn is one final, "I'd like to maybe next week".
#[tokio::test]
async fn a_turn_finalized_in_segments_is_one_final() {
    let (port, _seen) = serve(session("paused_turn")).await;
    let events = stream(node(port), SttParams::default(), 80, Duration::ZERO).await;
    assert_eq!(
        transcripts(&events),
        vec![
            ("I'd like to".into(), false),
            ("I'd like to maybe next".into(), false),
            ("I'd like to maybe next week".into(), true),
        ],
        "{events:?}"
    );
    assert_eq!(events.last(), Some(&SttEvent::Ended));
}

/// Segments finalized without `speech_final` (endpointing never fired): `UtteranceEnd`
/// ends the turn while the audio still flows.
#[tokio::test]
async fn utterance_end_ends_a_turn_endpointing_never_ended() {
    let (port, _seen) = serve(session("utterance_end")).await;
    let events = stream(node(port), SttParams::default(), 80, Duration::ZERO).await;
    let finals: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            SttEvent::Transcript(t) if t.is_final => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(finals.len(), 1, "{events:?}");
    assert_eq!(finals[0].text, "five five five one two");
    assert_eq!(
        finals[0].end_ms, 1600,
        "the turn ends where its last segment ended (0.9 s + 0.7 s)"
    );
}

/// The client ends the audio mid-turn: the service's answer to `CloseStream` (a final
/// `from_finalize`, without `speech_final`) is the turn's final.
#[tokio::test]
async fn the_answer_to_close_stream_is_the_turns_final() {
    let (port, _seen) = serve(session("flushed_on_close")).await;
    let events = stream(node(port), SttParams::default(), 20, Duration::ZERO).await;
    assert_eq!(
        transcripts(&events),
        vec![("my number".into(), false), ("my number is".into(), true)],
        "{events:?}"
    );
    assert_eq!(events.last(), Some(&SttEvent::Ended));
}

/// No audio for a while (the caller's phone sends none): the client keeps the stream open
/// with `KeepAlive` rather than letting the service close it.
#[tokio::test]
async fn a_stream_without_audio_is_kept_alive() {
    let (port, seen) = serve(session("flushed_on_close")).await;
    let events = stream(
        node(port),
        SttParams::default(),
        5,
        Duration::from_millis(3600),
    )
    .await;
    assert_eq!(events.last(), Some(&SttEvent::Ended), "{events:?}");
    assert_eq!(
        seen.lock().expect("seen").texts,
        vec![
            r#"{"type":"KeepAlive"}"#.to_string(),
            r#"{"type":"CloseStream"}"#.to_string()
        ]
    );
}

/// The service closes the stream with an error (Deepgram: 1011 and a `DATA-0000`-style
/// reason): the listener is told the node failed, with the code and the reason.
#[tokio::test]
async fn a_service_error_close_names_its_code_and_reason() {
    let (port, _seen) = serve(Script::ErrorClose("DATA-0000")).await;
    let events = stream(node(port), SttParams::default(), 20, Duration::ZERO).await;
    match events.as_slice() {
        [SttEvent::NodeFailed { node, error }] => {
            assert_eq!(node, "hosted");
            assert!(
                error.contains("1011") && error.contains("DATA-0000"),
                "{error}"
            );
        }
        other => panic!("expected one NodeFailed, got {other:?}"),
    }
}

#[test]
fn utterance_end_ms_is_checked() {
    let dg = node(1);
    let low = SttNodeConfig {
        utterance_end_ms: Some(500),
        ..dg.clone()
    };
    let err = low.check().expect_err("500 ms is refused");
    assert!(err.contains("at least 1000"), "{err}");
    let vosk = SttNodeConfig {
        utterance_end_ms: Some(1000),
        ..SttNodeConfig::new("v", "ws://127.0.0.1:1", SttProtocol::Vosk)
    };
    let err = vosk
        .check()
        .expect_err("a Vosk node takes no utterance_end_ms");
    assert!(err.contains("Deepgram-style"), "{err}");
}
