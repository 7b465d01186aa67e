//! The OpenAI-compatible synthesis client: against the real speech node (its speech is
//! recognised back by the same node), and against a loopback HTTP peer for what the
//! request carries and for the error paths (an error answer, a body cut off, a stall).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use callsmith_media::prompt::StreamingAudio;
use callsmith_media::stt::{SttParams, SttPool, recognize};
use callsmith_media::tone::power_at;
use callsmith_media::tts::{OpenAiTts, OpenAiTtsConfig, TtsEngine, TtsError, TtsRequest};
use common::*;
use tokio::io::AsyncWriteExt;

const SENTENCE: &str = "I would like to check the balance of my account";

fn config(url: String) -> OpenAiTtsConfig {
    OpenAiTtsConfig {
        url,
        ..Default::default()
    }
}

fn request(text: &str) -> TtsRequest {
    TtsRequest {
        engine: "openai".into(),
        text: text.into(),
        speed: 1.0,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthesis_by_the_speech_node_is_recognised_back() {
    let node = SttNode::start();
    let tts = OpenAiTts::new(config(format!("http://127.0.0.1:{}", node.port))).unwrap();

    // Piper's voice (the node's default for OpenAI's "alloy"), as 8 kHz PCM.
    let prompt = tts
        .synthesize(&request(&format!("{SENTENCE}.")))
        .await
        .expect("the node synthesizes");
    let ms = prompt.duration_ms();
    assert!((1500..8000).contains(&ms), "sentence lasts {ms} ms");
    assert!(level(prompt.pcm()) > 200.0, "speech, not silence");
    let pool = SttPool::new(vec![node.vosk("local")]);
    let heard = recognize(&pool, &prompt, &SttParams::default(), false)
        .await
        .expect("recognised");
    eprintln!("[joe] heard {:?}", heard.transcript);
    assert!(
        word_recall(SENTENCE, &heard.transcript) >= 0.75,
        "{:?}",
        heard.transcript
    );

    // Pico, by voice name; faster speech is shorter.
    let pico = tts
        .synthesize(&TtsRequest {
            voice: "pico-en-US".into(),
            ..request(&format!("{SENTENCE}."))
        })
        .await
        .expect("pico synthesizes");
    let fast = tts
        .synthesize(&TtsRequest {
            voice: "pico-en-US".into(),
            speed: 2.0,
            ..request(&format!("{SENTENCE}."))
        })
        .await
        .expect("pico synthesizes faster");
    eprintln!(
        "[pico] {} ms, at speed 2 {} ms",
        pico.duration_ms(),
        fast.duration_ms()
    );
    assert!(pico.duration_ms() > 1000);
    assert!(fast.duration_ms() * 10 < pico.duration_ms() * 7);

    // Streamed: the first sentence is playable while the node still works on the rest.
    let text = format!(
        "Hello there. {SENTENCE}, and then I would like to hear about the offers you have for \
         new customers this month, and about the fees."
    );
    let out = StreamingAudio::new(usize::MAX / 2);
    let watch = {
        let out = out.clone();
        tokio::spawn(async move {
            loop {
                if out.buffered() > 0 {
                    return Instant::now();
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    tts.synthesize_into(&request(&text), &out)
        .await
        .expect("streamed synthesis");
    let done = Instant::now();
    let first = watch.await.unwrap();
    eprintln!(
        "[stream] first audio {} ms before the end; {} samples",
        (done - first).as_millis(),
        out.buffered()
    );
    assert!(first < done, "audio arrived before the body ended");
    assert!(out.buffered() > 8000 * 4, "the whole text was spoken");

    // The node's own refusal comes back as a clear error.
    match tts
        .synthesize(&TtsRequest {
            voice: "nobody".into(),
            ..request("Hello.")
        })
        .await
    {
        Err(TtsError::Rejected { status, message }) => {
            assert_eq!(status, 400);
            assert!(message.contains("nobody"), "{message}");
        }
        other => panic!("unknown voice: {other:?}"),
    }
}

/// What the peer does once it has read a request.
#[derive(Clone)]
enum Then {
    Close,
    /// Keeps the connection open without another byte.
    Hang,
}

/// One request as the peer read it.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: Vec<u8>,
}

/// A loopback HTTP peer answering every request with `parts` (raw bytes, written
/// 20 ms apart), then `then`.
async fn peer(parts: Vec<Vec<u8>>, then: Then) -> (String, Arc<std::sync::Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (parts, then, log) = (parts.clone(), then.clone(), log.clone());
            tokio::spawn(async move {
                let Some((head, body)) = read_http_request(&mut sock).await else {
                    return;
                };
                log.lock().unwrap().push(Seen { head, body });
                for p in parts {
                    if sock.write_all(&p).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if let Then::Hang = then {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            });
        }
    });
    (url, seen)
}

fn chunk(data: &[u8]) -> Vec<u8> {
    let mut c = format!("{:x}\r\n", data.len()).into_bytes();
    c.extend_from_slice(data);
    c.extend_from_slice(b"\r\n");
    c
}

/// One second of a 440 Hz tone, 16-bit LE at `rate`.
fn tone_bytes(rate: u32) -> Vec<u8> {
    (0..rate)
        .flat_map(|i| {
            let v = (f64::sin(i as f64 * 2.0 * std::f64::consts::PI * 440.0 / rate as f64) * 8000.0)
                as i16;
            v.to_le_bytes()
        })
        .collect()
}

fn chunked_head(extra: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: audio/pcm\r\nTransfer-Encoding: chunked\r\n{extra}\r\n"
    )
    .into_bytes()
}

#[tokio::test]
async fn a_wideband_request_asks_for_16k_and_keeps_the_upper_band() {
    // The endpoint answers one second of a 6 kHz tone at 24 kHz.
    let rate = 24000u32;
    let pcm: Vec<u8> = (0..rate)
        .map(|i| {
            ((i as f64 * 2.0 * std::f64::consts::PI * 6000.0 / rate as f64).sin() * 8000.0) as i16
        })
        .flat_map(i16::to_le_bytes)
        .collect();
    let mut parts = vec![chunked_head("X-Sample-Rate: 24000\r\n")];
    parts.extend(pcm.chunks(6001).map(chunk));
    parts.push(b"0\r\n\r\n".to_vec());
    let (url, seen) = peer(parts, Then::Close).await;
    let tts = OpenAiTts::new(config(url.clone())).unwrap();
    let wide = TtsRequest {
        rate: callsmith_media::AudioRate::Wide,
        ..request("Hello.")
    };
    let p = tts.synthesize(&wide).await.expect("synthesized");
    let w = p.wide().expect("16 kHz samples");
    assert!((15_900..=16_100).contains(&w.len()), "{} samples", w.len());
    assert!(level(&w[1000..15000]) > 3000.0, "the 6 kHz tone is kept");
    // Streamed into a wideband source, as a G.722 call plays it.
    let out = StreamingAudio::new_at(callsmith_media::AudioRate::Wide, usize::MAX / 2);
    // A client of its own: the peer closes each connection after one answer.
    let tts = OpenAiTts::new(config(url)).unwrap();
    tts.synthesize_into(&wide, &out).await.expect("streamed");
    let mut frame = [0i16; 320];
    let mut got = Vec::new();
    out.finish();
    while out.take_frame_as(callsmith_media::AudioRate::Wide, &mut frame)
        == callsmith_media::prompt::StreamFrame::Frame
    {
        got.extend_from_slice(&frame);
    }
    assert!((15_900..=16_400).contains(&got.len()), "{}", got.len());
    let voiced = &got[1000..15000];
    assert!(power_at(voiced, 6000.0, 16000.0) > 100.0 * power_at(voiced, 3000.0, 16000.0));
    let seen = seen.lock().unwrap().clone();
    for s in &seen {
        let body: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
        assert_eq!(body["sample_rate"], 16000, "{body}");
    }
    assert_eq!(seen.len(), 2);
}

#[tokio::test]
async fn the_request_carries_what_an_openai_endpoint_expects() {
    let pcm = tone_bytes(16000);
    let mut parts = vec![chunked_head("X-Sample-Rate: 16000\r\n")];
    parts.extend(pcm.chunks(6001).map(chunk));
    parts.push(b"0\r\n\r\n".to_vec());
    let (url, seen) = peer(parts, Then::Close).await;
    let tts = OpenAiTts::new(OpenAiTtsConfig {
        url: format!("{url}/v1/"),
        api_key: Some("sk-test".into()),
        model: "tts-1-hd".into(),
        voice: "nova".into(),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(tts.endpoint(), format!("{url}/v1/audio/speech"));
    let p = tts
        .synthesize(&TtsRequest {
            speed: 1.5,
            ..request("Hello \"there\".")
        })
        .await
        .expect("synthesized");
    let ms = p.duration_ms() as i64;
    assert!(
        (ms - 1000).abs() <= 40,
        "one second at 16 kHz became {ms} ms"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let head = seen[0].head.to_ascii_lowercase();
    assert!(head.starts_with("post /v1/audio/speech http/1.1"), "{head}");
    assert!(head.contains("authorization: bearer sk-test"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    let body: serde_json::Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"model": "tts-1-hd", "input": "Hello \"there\".", "voice": "nova",
            "response_format": "pcm", "speed": 1.5, "sample_rate": 8000})
    );

    // The request's own voice and model win; no key, no Authorization header.
    let (url, seen) = peer(
        vec![
            chunked_head(""),
            chunk(&tone_bytes(24000)),
            b"0\r\n\r\n".to_vec(),
        ],
        Then::Close,
    )
    .await;
    let tts = OpenAiTts::new(config(url)).unwrap();
    let p = tts
        .synthesize(&TtsRequest {
            voice: "joe".into(),
            model: "piper".into(),
            ..request("Hi.")
        })
        .await
        .unwrap();
    // No X-Sample-Rate: OpenAI's 24 kHz.
    let ms = p.duration_ms() as i64;
    assert!((ms - 1000).abs() <= 40, "{ms} ms");
    let seen = seen.lock().unwrap().clone();
    assert!(!seen[0].head.to_ascii_lowercase().contains("authorization"));
    let body: serde_json::Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(body["voice"], "joe");
    assert_eq!(body["model"], "piper");
    assert_eq!(body["speed"], 1.0);
}

#[tokio::test]
async fn an_error_answer_is_a_clear_error() {
    let err = serde_json::json!({"error": {"message": "Input is too long (max 4096 characters)",
        "type": "invalid_request_error", "param": "input", "code": null}})
    .to_string();
    let (url, _) = peer(
        vec![
            format!(
                "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{err}",
                err.len()
            )
            .into_bytes(),
        ],
        Then::Close,
    )
    .await;
    let tts = OpenAiTts::new(config(url)).unwrap();
    let e = tts.synthesize(&request("Hello.")).await.unwrap_err();
    assert!(
        matches!(&e, TtsError::Rejected { status: 400, message } if message == "Input is too long (max 4096 characters)"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "synthesizer answered 400: Input is too long (max 4096 characters)"
    );

    // A 401 with a text body, and a 500 with none.
    let (url, _) = peer(
        vec![b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 11\r\n\r\nbad api key".to_vec()],
        Then::Close,
    )
    .await;
    let e = OpenAiTts::new(config(url))
        .unwrap()
        .synthesize(&request("Hello."))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "synthesizer answered 401: bad api key");
    let (url, _) = peer(
        vec![b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".to_vec()],
        Then::Close,
    )
    .await;
    let e = OpenAiTts::new(config(url))
        .unwrap()
        .synthesize(&request("Hello."))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "synthesizer answered 500: Internal Server Error"
    );

    // A success that is not audio, and a bad declared rate.
    let (url, _) = peer(
        vec![
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
                .to_vec(),
        ],
        Then::Close,
    )
    .await;
    let e = OpenAiTts::new(config(url))
        .unwrap()
        .synthesize(&request("Hello."))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("instead of audio"), "{e}");
    let (url, _) = peer(
        vec![
            chunked_head("X-Sample-Rate: fast\r\n"),
            chunk(&[0; 64]),
            b"0\r\n\r\n".to_vec(),
        ],
        Then::Close,
    )
    .await;
    let e = OpenAiTts::new(config(url))
        .unwrap()
        .synthesize(&request("Hello."))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("X-Sample-Rate"), "{e}");
    // An empty 200 body is no audio.
    let (url, _) = peer(vec![chunked_head(""), b"0\r\n\r\n".to_vec()], Then::Close).await;
    let e = OpenAiTts::new(config(url))
        .unwrap()
        .synthesize(&request("Hello."))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no audio"), "{e}");

    // Nothing is sent for empty text; a URL that is not http(s) is refused up front.
    let tts = OpenAiTts::new(config("http://127.0.0.1:9".into())).unwrap();
    assert!(matches!(
        tts.synthesize(&request("  ")).await,
        Err(TtsError::EmptyText)
    ));
    for bad in ["ftp://example.com", "not a url", "http://"] {
        let e = OpenAiTts::new(config(bad.into())).unwrap_err();
        assert!(
            e.to_string().contains("invalid synthesis URL"),
            "{bad}: {e}"
        );
    }
    // Nobody listening.
    let e = OpenAiTts::new(config(format!("http://127.0.0.1:{}", free_port())))
        .unwrap()
        .synthesize(&request("Hello."))
        .await
        .unwrap_err();
    assert!(matches!(e, TtsError::Http(_)), "{e:?}");
}

#[tokio::test]
async fn a_body_cut_off_mid_stream_fails_after_the_audio_it_carried() {
    let pcm = tone_bytes(8000);
    // Half a second of audio, then the connection closes without the last chunk.
    let (url, _) = peer(
        vec![chunked_head("X-Sample-Rate: 8000\r\n"), chunk(&pcm[..8000])],
        Then::Close,
    )
    .await;
    let tts = OpenAiTts::new(config(url)).unwrap();
    let e = tts.synthesize(&request("Hello.")).await.unwrap_err();
    assert!(
        matches!(&e, TtsError::Http(m) if m.contains("broke off")),
        "{e:?}"
    );
    let out = StreamingAudio::new(usize::MAX / 2);
    let e = tts
        .synthesize_into(&request("Hello."), &out)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("broke off"), "{e}");
    assert_eq!(
        out.buffered(),
        4000,
        "the half second that arrived was pushed"
    );

    // Content-Length promising more than arrives.
    let mut short = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: audio/pcm\r\nX-Sample-Rate: 8000\r\nContent-Length: {}\r\n\r\n",
        pcm.len()
    )
    .into_bytes();
    short.extend_from_slice(&pcm[..1000]);
    let (url, _) = peer(vec![short], Then::Close).await;
    let e = OpenAiTts::new(config(url))
        .unwrap()
        .synthesize(&request("Hello."))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("broke off"), "{e}");
}

#[tokio::test]
async fn a_stalled_synthesizer_times_out() {
    let short = |url: String| OpenAiTtsConfig {
        timeout: Duration::from_millis(500),
        ..config(url)
    };
    // No answer at all.
    let (url, _) = peer(vec![], Then::Hang).await;
    let tts = OpenAiTts::new(short(url)).unwrap();
    let t = Instant::now();
    let e = tts.synthesize(&request("Hello.")).await.unwrap_err();
    assert!(matches!(e, TtsError::Timeout(_)), "{e:?}");
    assert_eq!(e.to_string(), "synthesis did not complete within 500ms");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());

    // Headers and some audio, then nothing: the bound covers the whole body.
    let (url, _) = peer(
        vec![
            chunked_head("X-Sample-Rate: 8000\r\n"),
            chunk(&tone_bytes(8000)[..1600]),
        ],
        Then::Hang,
    )
    .await;
    let tts = OpenAiTts::new(short(url.clone())).unwrap();
    let out = StreamingAudio::new(usize::MAX / 2);
    let t = Instant::now();
    let e = tts
        .synthesize_into(&request("Hello."), &out)
        .await
        .unwrap_err();
    assert!(matches!(e, TtsError::Timeout(_)), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(out.buffered(), 800);

    // The bound holds over a client of the caller's too.
    let tts = OpenAiTts::with_client(short(url), reqwest::Client::new()).unwrap();
    let t = Instant::now();
    let e = tts.synthesize(&request("Hello.")).await.unwrap_err();
    assert!(matches!(e, TtsError::Timeout(_)), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}
