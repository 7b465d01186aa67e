//! Long prompts and streamed replies synthesised sentence by sentence, against a loopback
//! OpenAI-compatible synthesizer (the peer of `openai_tts.rs`, answering per sentence): the
//! first audio plays before the last sentence is asked for, a failed sentence ends the
//! audio after what was spoken, and the cache holds the whole prompt (or each sentence of
//! a streamed reply).

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use callsmith_media::prompt::{FRAME_SAMPLES, Playable, StreamFrame, StreamingAudio};
use callsmith_media::tts::{OpenAiTts, OpenAiTtsConfig, TtsRequest, TtsService};
use common::read_http_request;
use tokio::io::AsyncWriteExt;

/// How the peer answers one sentence.
#[derive(Clone)]
enum Answer {
    /// After `delay`, `ms` of an 8 kHz tone in two halves 50 ms apart.
    Audio { delay: Duration, ms: u32 },
    /// An error status.
    Fail(u16),
}

/// One request as the peer saw it: the sentence and when it arrived.
#[derive(Debug, Clone)]
struct Seen {
    input: String,
    at: Instant,
}

/// A loopback OpenAI-compatible synthesizer answering each request by its `input`.
async fn peer(
    answer: impl Fn(&str) -> Answer + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (log, answer) = (log.clone(), answer.clone());
            tokio::spawn(async move {
                let Some((_head, body)) = read_http_request(&mut sock).await else {
                    return;
                };
                let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let input = body["input"].as_str().unwrap_or_default().to_string();
                log.lock().unwrap().push(Seen {
                    input: input.clone(),
                    at: Instant::now(),
                });
                match answer(&input) {
                    Answer::Fail(status) => {
                        let body = r#"{"error":{"message":"voice engine crashed"}}"#;
                        let _ = sock
                            .write_all(
                                format!(
                                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                                    body.len()
                                )
                                .as_bytes(),
                            )
                            .await;
                    }
                    Answer::Audio { delay, ms } => {
                        tokio::time::sleep(delay).await;
                        let pcm: Vec<u8> = (0..ms * 8)
                            .flat_map(|i| {
                                let v = (f64::sin(
                                    i as f64 * 2.0 * std::f64::consts::PI * 440.0 / 8000.0,
                                ) * 8000.0) as i16;
                                v.to_le_bytes()
                            })
                            .collect();
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: audio/pcm\r\nx-sample-rate: 8000\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            pcm.len()
                        );
                        if sock.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        let (a, b) = pcm.split_at(pcm.len() / 2 / 2 * 2);
                        let _ = sock.write_all(a).await;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let _ = sock.write_all(b).await;
                    }
                }
            });
        }
    });
    (url, seen)
}

fn service(url: &str) -> Arc<TtsService> {
    let mut svc = TtsService::new(64);
    let engine = OpenAiTts::new(OpenAiTtsConfig {
        url: url.to_string(),
        ..Default::default()
    })
    .unwrap();
    svc.register("openai", Arc::new(engine));
    Arc::new(svc)
}

fn request(text: &str) -> TtsRequest {
    TtsRequest {
        engine: "openai".into(),
        text: text.into(),
        speed: 1.0,
        ..Default::default()
    }
}

/// Drains `s` in real time (one frame per 20 ms, as a call plays it); returns when the
/// first frame was played and how many samples were played in all.
async fn play_out(s: Arc<StreamingAudio>) -> (Option<Instant>, usize) {
    let mut first = None;
    let mut n = 0;
    let mut frame = [0i16; FRAME_SAMPLES];
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        tick.tick().await;
        match s.take_frame(&mut frame) {
            StreamFrame::Frame => {
                first.get_or_insert_with(Instant::now);
                n += FRAME_SAMPLES;
            }
            StreamFrame::Starved => {}
            StreamFrame::Finished => return (first, n),
        }
    }
}

const LONG: &str = "Welcome to the bank of Mr. Smith. Your balance is 3.5 euros. \
                    Please listen carefully, e.g. to the options. Goodbye.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_prompt_plays_its_first_sentence_while_the_rest_is_synthesised() {
    let (url, seen) = peer(|_| Answer::Audio {
        delay: Duration::from_millis(300),
        ms: 1000,
    })
    .await;
    let svc = service(&url);
    let t0 = Instant::now();
    let syn = svc.synthesis(&request(LONG)).unwrap();
    let Playable::Stream(src) = syn.playable else {
        panic!("nothing cached yet")
    };
    let (first, played) = play_out(src).await;
    let first = first.expect("audio played");
    let seen = seen.lock().unwrap().clone();
    let inputs: Vec<&str> = seen.iter().map(|s| s.input.as_str()).collect();
    assert_eq!(
        inputs,
        vec![
            "Welcome to the bank of Mr. Smith.",
            "Your balance is 3.5 euros.",
            "Please listen carefully, e.g. to the options.",
            "Goodbye."
        ],
        "one request per sentence, in order"
    );
    eprintln!(
        "first audio after {} ms; last sentence asked for after {} ms; {played} samples",
        (first - t0).as_millis(),
        (seen[3].at - t0).as_millis()
    );
    assert!(
        first < seen[3].at,
        "the first sentence played before the last one was asked for"
    );
    // Sentence 2 was asked for while sentence 1 (1 s of audio) still played.
    assert!(seen[1].at < first + Duration::from_millis(1000));
    assert!(played >= 4 * 8000, "every sentence was played: {played}");
    assert_eq!(syn.status.unwrap().result(), Some(Ok(())));
    // The whole prompt is cached: the next call plays it from memory, no request.
    match svc.playable(&request(LONG)).unwrap() {
        Playable::Prompt(p) => assert!(p.duration_ms() >= 4000),
        Playable::Stream(_) => panic!("the whole prompt was not cached"),
    }
    assert_eq!(
        svc.cached(&request("Goodbye.")).map(|_| ()),
        None,
        "sentences of a prompt are not cached on their own"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_second_sentence_ends_the_prompt_after_the_first() {
    let (url, seen) = peer(|input| {
        if input.starts_with("Your balance") {
            Answer::Fail(500)
        } else {
            Answer::Audio {
                delay: Duration::from_millis(50),
                ms: 600,
            }
        }
    })
    .await;
    let svc = service(&url);
    let syn = svc.synthesis(&request(LONG)).unwrap();
    let Playable::Stream(src) = syn.playable else {
        panic!("nothing cached yet")
    };
    let (_, played) = play_out(src).await;
    assert!(
        (4800..=4800 + FRAME_SAMPLES).contains(&played),
        "the first sentence, and nothing after it, was played: {played}"
    );
    let err = syn.status.unwrap().result().expect("finished").unwrap_err();
    assert!(
        err.contains("500") && err.contains("voice engine crashed"),
        "{err}"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        2,
        "no sentence after the failed one was asked for"
    );
    assert!(
        matches!(svc.playable(&request(LONG)).unwrap(), Playable::Stream(_)),
        "a broken prompt is not cached"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentences_handed_over_as_they_come_play_in_order_and_are_cached() {
    let (url, seen) = peer(|_| Answer::Audio {
        delay: Duration::from_millis(20),
        ms: 400,
    })
    .await;
    let svc = service(&url);
    let mut speech = svc.speech(&request("")).unwrap();
    let Playable::Stream(src) = speech.playable() else {
        panic!("a speech is a stream")
    };
    let player = tokio::spawn(play_out(src));
    assert!(speech.say("Hello there."));
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(speech.say("How can I help?"));
    speech.end();
    let (_, played) = player.await.unwrap();
    assert!(played >= 2 * 3200, "both sentences played: {played}");
    assert!(speech.source().first_audio_ns().is_some());
    assert_eq!(speech.status().result(), Some(Ok(())));
    assert_eq!(seen.lock().unwrap().len(), 2);
    // Each sentence is cached on its own: said again, it needs no request.
    assert!(svc.cached(&request("How can I help?")).is_some());
    let mut again = svc.speech(&request("")).unwrap();
    again.say("Hello there.");
    again.end();
    let Playable::Stream(src) = again.playable() else {
        panic!()
    };
    let (_, played) = play_out(src).await;
    assert!(played >= 3200);
    assert_eq!(seen.lock().unwrap().len(), 2, "played from the cache");

    // A failing sentence: the speech stops after what was spoken; later sentences are refused.
    let (url, _) = peer(|input| {
        if input == "Two." {
            Answer::Fail(503)
        } else {
            Answer::Audio {
                delay: Duration::ZERO,
                ms: 200,
            }
        }
    })
    .await;
    let svc = service(&url);
    let speech = svc.speech(&request("")).unwrap();
    let Playable::Stream(src) = speech.playable() else {
        panic!()
    };
    speech.say("One.");
    speech.say("Two.");
    let (_, played) = play_out(src).await;
    assert!((1600..=1600 + FRAME_SAMPLES).contains(&played), "{played}");
    assert!(
        speech
            .status()
            .result()
            .unwrap()
            .unwrap_err()
            .contains("503")
    );
    assert!(
        !speech.say("Three."),
        "a stopped speech takes no more sentences"
    );
}
