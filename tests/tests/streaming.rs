//! Streaming end to end, with the real binary, a SIPp callee whose media is an
//! [`RtpPeer`], and loopback HTTP peers for the language model (server-sent events with
//! pauses between sentences) and for an OpenAI-compatible synthesizer (slow, per sentence):
//!
//! - a language model's reply to a wrong key is heard while the model still writes its last
//!   sentence; the history keeps the whole reply and the turn's timestamps;
//! - a model stream cut after its first sentence: that sentence is spoken, the error is in
//!   the trace;
//! - a key during an interruptible reply's first sentence stops it there (the model is not
//!   waited for, the history has what was heard) and answers the question; a key before
//!   its first sentence leaves it unspoken; a reply that is not interruptible plays on, the
//!   key answering after it;
//! - a long prompt's first audio reaches the callee before its last sentence is asked for;
//! - a synthesizer failing on the second sentence: the first is heard, the prompt fails.

use std::time::Duration;

use callsmith_e2e::scenario::{brick, next, outs};
use callsmith_e2e::*;
use serde_json::{Value, json};

fn snapshot(bricks: Value) -> Value {
    callsmith_e2e::scenario::snapshot("streaming e2e", bricks)
}

fn start_call(to: &str, engine: &str) -> Value {
    json!({"v1": [brick("s", json!({
        "tts_general": {"engine": engine, "voice": "", "language": "en-US", "speed": 1, "model": ""},
        "stt_general": {"language": "en-US", "engine": "whisper", "model": "", "primary_language": "", "fallback_languages": []}
    }), next(to))]})
}

fn events<'a>(h: &'a Value, kind: &str) -> Vec<&'a Value> {
    h["trace"]
        .as_array()
        .map(|t| t.iter().filter(|e| e["event"] == kind).collect())
        .unwrap_or_default()
}

/// An SSE chat stream: each (pause, text) one content chunk; `finish`: a stop chunk and
/// `[DONE]` after the last (else the stream just ends).
fn sse(parts: &[(u64, &str)], finish: bool) -> Reply {
    let chunk = |delta: Value, fin: Value| {
        let v = json!({"object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]});
        format!("data: {v}\n\n").into_bytes()
    };
    let mut chunks: Vec<(Duration, Vec<u8>)> = parts
        .iter()
        .map(|(ms, t)| {
            (
                Duration::from_millis(*ms),
                chunk(json!({"content": t}), Value::Null),
            )
        })
        .collect();
    if finish {
        chunks.push((Duration::ZERO, chunk(json!({}), json!("stop"))));
        chunks.push((Duration::ZERO, b"data: [DONE]\n\n".to_vec()));
    }
    Reply {
        status: 200,
        content_type: "text/event-stream".into(),
        chunks,
    }
}

struct Rig {
    e: Engine,
    t: Tenancy,
    callee: Sipp,
    rtp: RtpPeer,
}

async fn rig(tag: &str, script: Vec<RtpStep>, extra_toml: &str) -> Rig {
    let rtp = RtpPeer::start(script).await;
    let port = rtp.port.to_string();
    let callee = Sipp::spawn(
        "dialer_uas_rtp_peer.xml",
        None,
        None,
        &["-m", "1", "-key", "rtpport", &port],
    );
    let e = Engine::start(EngineOptions {
        trunks: vec![("carrier".into(), callee.addr)],
        extra_toml: extra_toml.to_string(),
        ..Default::default()
    })
    .await;
    let t = provision(&e, tag, "carrier", &format!("+49301008{:02}", tag.len())).await;
    let (s, v) = e
        .call(
            reqwest::Method::PATCH,
            &format!("/v1/internal/tenant/{}/feature-flag/global_llm", t.tenant),
            None,
            Some(json!({"enabled": true, "account_sids": [t.account]})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    Rig { e, t, callee, rtp }
}

impl Rig {
    /// A test call of `snap`; the finished communication and its history.
    async fn call(&mut self, snap: &Value) -> (Value, Value) {
        let store = store_of(&self.e, None).await;
        let scn = create_scenario(&store, &self.t, snap, false).await;
        let c = self
            .e
            .dispatch(
                &self.t,
                json!({"recipient": "+4915550777", "scenario_sid": scn, "draft": true}),
            )
            .await;
        let id = c["id"].as_str().expect("id").to_string();
        let done = self
            .e
            .wait_communication(&self.t.account, &id, Duration::from_secs(60))
            .await;
        assert_eq!(done["has_history"], true, "{done}\n{}", self.e.log());
        let h = self.e.history(&self.t.account, &id);
        assert!(
            self.callee.success(Duration::from_secs(10)).await,
            "{}",
            self.callee.dump()
        );
        (done, h)
    }
}

/// A question answered by key 1; any other key makes the model reply (its fallback_invalid
/// has `llm_properties`; `interruptible` is the fallback's `is_interruptible`), then the
/// question listens again without repeating its statement; silence ends it as `empty`.
fn llm_question(interruptible: bool) -> Value {
    snapshot(json!({
        "start_call": start_call("ask", "espeak-ng"),
        "question": {"v1": [brick("ask", json!({
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Press one."}}, "is_interruptible": false},
            "type": "standard", "input_mode": "dtmf",
            "dtmf_properties": {"dtmf_timeout": 1, "no_input_timeout": 2, "min_symbols": 1, "max_symbols": 1},
            "answer": {"answers": [{"answer_id": "one", "description": "", "dtmf_input": {"value": "1"}}]},
            "fallback_invalid": {"fallbacks": [{"is_repeat_statement": false, "is_interruptible": interruptible, "type": "llm",
                "llm_properties": {"engine": "", "model": "gpt-e2e", "provider": "", "gdpr_required": false,
                    "messages": [{"role": "system", "content": "Tell the caller which key to press."}]}}]}
        }), outs(&[("one", "g_one"), ("empty", "g_silent"), ("invalid", "g_silent")]))]},
        "goal": {"v1": [
            brick("g_one", json!({"goal": "one"}), next("bye")),
            brick("g_silent", json!({"goal": "silent"}), next("bye"))
        ]},
        "end_call": {"v1": [brick("bye", json!({"signal": ""}), json!([]))]}
    }))
}

fn providers(url: &str) -> String {
    format!(
        "[[adapters.llm_providers]]\nname = \"local\"\nbase_url = \"{url}/v1\"\nmodels = [\"gpt-e2e\"]\n"
    )
}

const FIRST: &str = "Sorry, that key is not on the menu. ";
const LAST: &str = "Please press one to continue.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_llm_reply_is_heard_before_the_model_finishes() {
    let llm = HttpPeer::start(|_| sse(&[(100, FIRST), (3000, LAST)], true)).await;
    let script = vec![
        RtpStep::Wait(Duration::from_millis(2500)),
        RtpStep::Digits("9".into()),
    ];
    let mut r = rig("stream", script, &providers(&llm.url)).await;
    let (done, h) = r.call(&llm_question(false)).await;
    assert_eq!(done["goals"], json!(["silent"]), "{}", h["trace"]);

    // The callee heard the reply while the model was still writing its last sentence.
    let timings = llm.timings();
    assert_eq!(timings.len(), 1, "one model request");
    let (asked, finished) = (timings[0].0, timings[0].1.expect("the model finished"));
    let voiced = r.rtp.voiced_since(asked);
    let first_heard = *voiced.first().expect("the reply was heard");
    eprintln!(
        "first voiced RTP of the reply {} ms after the model was asked; the model finished after {} ms; {} voiced packets",
        (first_heard - asked).as_millis(),
        (finished - asked).as_millis(),
        voiced.len()
    );
    assert!(
        first_heard + Duration::from_millis(1500) < finished,
        "the first sentence was heard well before the model's last one"
    );
    let after_last = voiced.iter().filter(|t| **t > finished).count();
    assert!(
        after_last > 20,
        "the last sentence was heard too: {after_last} packets"
    );

    // The history: the whole reply, the prompt as spoken, the turn's moments in order.
    let whole = format!("{FIRST}{LAST}");
    assert_eq!(events(&h, "llm_replied")[0]["reply"], whole.as_str());
    let prompt = h["prompts"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["prompt"]["text"] == whole.trim()))
        .unwrap_or_else(|| panic!("the reply was not played: {}", h["prompts"]));
    assert_eq!(prompt["outcome"], "completed", "{prompt}");
    let turn = &h["turns"][0];
    assert_eq!(turn["dtmf"], "9", "{turn}");
    let ms = |k: &str| {
        turn[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} missing in {turn}"))
    };
    let (ended, ready, requested, synth, rtp) = (
        ms("ended_ms"),
        ms("reply_ready_ms"),
        ms("reply_requested_ms"),
        ms("first_synthesis_ms"),
        ms("reply_first_rtp_ms"),
    );
    assert!(
        ended <= ready && ready <= requested && requested <= synth && synth <= rtp,
        "{turn}"
    );
    assert!(
        rtp < prompt["at_ms"].as_u64().unwrap() + 2500,
        "first RTP before the model's last sentence (sent 3 s after its first): {turn}"
    );
    let metrics =
        r.e.client
            .get(format!("{}/metrics", r.e.base_url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
    for stage in ["reply", "synthesis", "send"] {
        assert!(
            metrics.contains(&format!(
                "callsmith_turn_stage_seconds_count{{stage=\"{stage}\"}} 1"
            )),
            "stage {stage} on /metrics"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_model_stream_speaks_what_arrived_and_records_the_error() {
    // The first sentence, then the next one broken off: no finish, the connection closes.
    let llm = HttpPeer::start(|_| sse(&[(50, FIRST), (300, "Please pre")], false)).await;
    let script = vec![
        RtpStep::Wait(Duration::from_millis(2500)),
        RtpStep::Digits("9".into()),
    ];
    let mut r = rig("cut", script, &providers(&llm.url)).await;
    let (_, h) = r.call(&llm_question(false)).await;
    let err = events(&h, "port_error");
    assert_eq!(err.len(), 1, "{}", h["trace"]);
    assert_eq!(err[0]["operation"], "llm");
    assert!(
        err[0]["error"]
            .as_str()
            .unwrap_or("")
            .contains("stream ended before the answer finished"),
        "{}",
        err[0]
    );
    assert!(events(&h, "llm_replied").is_empty());
    let spoken: Vec<&Value> = events(&h, "prompt_played")
        .into_iter()
        .filter(|e| e["prompt"]["text"] == FIRST.trim())
        .collect();
    assert_eq!(
        spoken.len(),
        1,
        "the complete sentence was spoken, the broken one not: {}",
        h["trace"]
    );
    let p = h["prompts"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["prompt"]["text"] == FIRST.trim()))
        .expect("prompt log");
    assert_eq!(p["outcome"], "completed");
    assert!(p["played_ms"].as_u64().unwrap() > 1000, "{p}");
}

/// A reply of three sentences, the model pausing 2.5 s before each of the last two: it
/// streams for 5.1 s.
const BARGE_FIRST: &str = "Sorry, that key is not on the menu. ";
const BARGE_SECOND: &str = "This menu has a single choice. ";
const BARGE_LAST: &str = "Please press one to continue.";
const BARGE_MODEL_MS: u64 = 5100;

fn barge_model() -> Reply {
    sse(
        &[(100, BARGE_FIRST), (2500, BARGE_SECOND), (2500, BARGE_LAST)],
        true,
    )
}

/// A wrong key (the model is asked for the fallback's reply), then key 1 1.2 s later: while
/// the reply's first sentence plays and the model still writes the second.
fn barge_script() -> Vec<RtpStep> {
    vec![
        RtpStep::Wait(Duration::from_millis(2500)),
        RtpStep::Digits("9".into()),
        RtpStep::Wait(Duration::from_millis(1000)),
        RtpStep::Digits("1".into()),
    ]
}

/// When the callee started pressing key 1 (the engine takes a key at its end, 100 ms on).
fn key_one(rtp: &RtpPeer) -> tokio::time::Instant {
    rtp.keys_sent()
        .iter()
        .find(|(k, _)| *k == '1')
        .map(|(_, at)| *at)
        .expect("key 1 was sent")
}

fn prompt_log<'a>(h: &'a Value, text: &str) -> &'a Value {
    h["prompts"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["prompt"]["text"] == text))
        .unwrap_or_else(|| panic!("no prompt {text:?}: {}", h["prompts"]))
}

fn at_ms(h: &Value, kind: &str) -> u64 {
    events(h, kind)
        .first()
        .and_then(|e| e["at_ms"].as_u64())
        .unwrap_or_else(|| panic!("no {kind} in {}", h["trace"]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_interrupts_a_streamed_reply_and_answers_the_question() {
    let llm = HttpPeer::start(|_| barge_model()).await;
    let mut r = rig("barge", barge_script(), &providers(&llm.url)).await;
    let (done, h) = r.call(&llm_question(true)).await;
    // The key that interrupted the reply is the question's answer.
    assert_eq!(done["goals"], json!(["one"]), "{}", h["trace"]);
    assert_eq!(h["turns"][1]["dtmf"], "1", "{}", h["turns"]);

    let asked = llm.timings()[0].0;
    let key = key_one(&r.rtp);
    assert!(
        key < asked + Duration::from_millis(2500),
        "the key was pressed before the model wrote its second sentence"
    );
    let voiced = r.rtp.voiced_since(asked);
    let first_heard = *voiced.first().expect("the reply was heard");
    let before = voiced.iter().filter(|t| **t < key).count();
    let after = voiced.iter().filter(|t| **t >= key).count();
    let late = voiced
        .iter()
        .filter(|t| **t > key + Duration::from_millis(600))
        .count();
    eprintln!(
        "reply heard {} ms after the model was asked; key 1 {} ms later; voiced packets: {before} before the key, {after} after it, {late} more than 600 ms after it",
        (first_heard - asked).as_millis(),
        (key - first_heard).as_millis()
    );
    assert!(before >= 10, "the first sentence was heard: {before}");
    // The engine takes the key at its end (100 ms); the playout stops at its next frame.
    assert!(after <= 15, "the reply stopped at the key: {after}");
    assert_eq!(late, 0, "nothing was spoken after the key");

    // The history: the prompt as spoken (the first sentence), interrupted after what the
    // callee heard of it; the reply as it had arrived.
    let spoken = BARGE_FIRST.trim();
    let p = prompt_log(&h, spoken);
    assert_eq!(p["outcome"], "interrupted", "{p}");
    assert_eq!(p["interruptible"], true, "{p}");
    let played = p["played_ms"].as_u64().expect("played_ms");
    let heard_ms = (key - first_heard).as_millis() as u64;
    eprintln!("played_ms {played}; {heard_ms} ms from the first voiced packet to the key");
    assert!(
        played > 0 && played + 300 >= heard_ms && played <= heard_ms + 500,
        "played_ms {played} is what was heard before the key ({heard_ms} ms)"
    );
    let played_events = events(&h, "prompt_played");
    let reply_event = played_events
        .iter()
        .find(|e| e["prompt"]["text"] == spoken)
        .unwrap_or_else(|| panic!("{}", h["trace"]));
    assert_eq!(reply_event["outcome"]["result"], "interrupted");
    assert!(
        !h["prompts"].to_string().contains(BARGE_SECOND.trim()),
        "the later sentences were not spoken: {}",
        h["prompts"]
    );
    assert_eq!(events(&h, "llm_replied")[0]["reply"], BARGE_FIRST);
    assert!(events(&h, "port_error").is_empty(), "{}", h["trace"]);

    // The model was not waited for: the call was over well before it would have finished.
    let (asked_ms, ended_ms) = (at_ms(&h, "fallback"), at_ms(&h, "call_ended"));
    assert!(
        ended_ms - asked_ms + 2000 < BARGE_MODEL_MS,
        "the call ended {} ms after the model was asked; it streams for {BARGE_MODEL_MS} ms",
        ended_ms - asked_ms
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_before_the_first_sentence_interrupts_a_streamed_reply() {
    // The model writes its first sentence 1.5 s after it was asked; key 1 comes before.
    let llm = HttpPeer::start(|_| {
        sse(
            &[
                (1500, BARGE_FIRST),
                (2500, BARGE_SECOND),
                (2500, BARGE_LAST),
            ],
            true,
        )
    })
    .await;
    let script = vec![
        RtpStep::Wait(Duration::from_millis(2500)),
        RtpStep::Digits("9".into()),
        RtpStep::Wait(Duration::from_millis(300)),
        RtpStep::Digits("1".into()),
    ];
    let mut r = rig("early", script, &providers(&llm.url)).await;
    let (done, h) = r.call(&llm_question(true)).await;
    assert_eq!(done["goals"], json!(["one"]), "{}", h["trace"]);
    let asked = llm.timings()[0].0;
    assert!(
        key_one(&r.rtp) + Duration::from_millis(100) < asked + Duration::from_millis(1500),
        "key 1 was taken before the model's first sentence"
    );
    assert!(
        r.rtp.voiced_since(asked).is_empty(),
        "nothing of the reply was spoken"
    );
    assert!(
        !h["prompts"].to_string().contains(BARGE_FIRST.trim()),
        "{}",
        h["prompts"]
    );
    assert_eq!(events(&h, "llm_replied")[0]["reply"], "");
    let (asked_ms, ended_ms) = (at_ms(&h, "fallback"), at_ms(&h, "call_ended"));
    assert!(
        ended_ms - asked_ms < 1500,
        "the call ended {} ms after the model was asked, before its first sentence",
        ended_ms - asked_ms
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_does_not_interrupt_a_streamed_reply_that_is_not_interruptible() {
    let llm = HttpPeer::start(|_| barge_model()).await;
    let mut r = rig("nobarge", barge_script(), &providers(&llm.url)).await;
    let (done, h) = r.call(&llm_question(false)).await;
    // The key is kept: after the reply it answers the question.
    assert_eq!(done["goals"], json!(["one"]), "{}", h["trace"]);

    let (asked, finished) = llm.timings()[0];
    let finished = finished.expect("the model finished");
    let key = key_one(&r.rtp);
    let voiced = r.rtp.voiced_since(asked);
    let late = voiced
        .iter()
        .filter(|t| **t > key + Duration::from_millis(600))
        .count();
    let after_model = voiced.iter().filter(|t| **t > finished).count();
    eprintln!(
        "voiced packets more than 600 ms after key 1: {late}; after the model finished: {after_model}"
    );
    assert!(late > 100, "the reply played on after the key: {late}");
    assert!(
        after_model > 20,
        "the last sentence was heard: {after_model}"
    );
    let whole = format!("{BARGE_FIRST}{BARGE_SECOND}{BARGE_LAST}");
    let p = prompt_log(&h, whole.trim());
    assert_eq!(p["outcome"], "completed", "{p}");
    assert!(p["played_ms"].as_u64().unwrap() > 4000, "{p}");
    assert_eq!(events(&h, "llm_replied")[0]["reply"], whole.as_str());
}

/// An OpenAI-compatible synthesizer answering each sentence after `delay_ms` with 1 s of
/// 8 kHz tone, or 500 for the sentences `fail` names.
async fn synthesizer(delay_ms: u64, fail: &'static str) -> HttpPeer {
    HttpPeer::start(move |req| {
        let input = req.json()["input"].as_str().unwrap_or_default().to_string();
        if !fail.is_empty() && input.starts_with(fail) {
            return Reply::json(500, &json!({"error": {"message": "voice engine crashed"}}));
        }
        let pcm: Vec<u8> = (0..8000)
            .flat_map(|i| {
                let v = (f64::sin(i as f64 * 2.0 * std::f64::consts::PI * 440.0 / 8000.0) * 9000.0)
                    as i16;
                v.to_le_bytes()
            })
            .collect();
        let (a, b) = pcm.split_at(8000);
        Reply {
            status: 200,
            content_type: "audio/pcm".into(),
            chunks: vec![
                (Duration::from_millis(delay_ms), a.to_vec()),
                (Duration::from_millis(100), b.to_vec()),
            ],
        }
    })
    .await
}

fn slow_tts_toml(url: &str) -> String {
    format!(
        "[[tts.engines]]\nname = \"slow\"\nkind = \"openai\"\nurl = \"{url}\"\npcm_sample_rate = 8000\n"
    )
}

const LONG: &str = "Welcome to the bank of Mr. Smith. Your balance is 3.5 euros. Goodbye for now.";

fn long_prompt() -> Value {
    snapshot(json!({
        "start_call": start_call("say", "slow"),
        "audio_tts": {"v1": [brick("say",
            json!({"text": LONG, "language": "", "voice": "", "engine": "", "model": ""}),
            next("bye"))]},
        "end_call": {"v1": [brick("bye", json!({"signal": ""}), json!([]))]}
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_prompt_is_heard_before_its_last_sentence_is_synthesised() {
    let tts = synthesizer(700, "").await;
    let mut r = rig("long", vec![], &slow_tts_toml(&tts.url)).await;
    let (_, h) = r.call(&long_prompt()).await;
    let inputs: Vec<String> = tts
        .requests()
        .iter()
        .map(|q| q.json()["input"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        inputs,
        vec![
            "Welcome to the bank of Mr. Smith.",
            "Your balance is 3.5 euros.",
            "Goodbye for now."
        ]
    );
    let timings = tts.timings();
    let voiced = r.rtp.voiced_since(timings[0].0);
    let first_heard = *voiced.first().expect("the prompt was heard");
    eprintln!(
        "first voiced RTP {} ms after the first sentence was asked for; the last sentence asked for after {} ms and done after {} ms",
        (first_heard - timings[0].0).as_millis(),
        (timings[2].0 - timings[0].0).as_millis(),
        (timings[2].1.unwrap() - timings[0].0).as_millis()
    );
    assert!(
        first_heard < timings[2].0,
        "heard before the last sentence was asked for"
    );
    assert!(
        voiced.len() >= 120,
        "all three seconds were heard: {}",
        voiced.len()
    );
    let p = &h["prompts"][0];
    assert_eq!(p["outcome"], "completed", "{p}");
    assert!(p["played_ms"].as_u64().unwrap() >= 3000, "{p}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synthesizer_failing_on_the_second_sentence_fails_the_prompt_after_the_first() {
    let tts = synthesizer(100, "Your balance").await;
    let mut r = rig("tts2", vec![], &slow_tts_toml(&tts.url)).await;
    let (done, h) = r.call(&long_prompt()).await;
    assert_eq!(done["communication_status"], "completed", "{done}");
    assert_eq!(
        tts.requests().len(),
        2,
        "nothing asked after the failed sentence"
    );
    let p = &h["prompts"][0];
    assert_eq!(p["outcome"], "failed", "{p}");
    assert!(
        p["error"]
            .as_str()
            .unwrap_or("")
            .contains("voice engine crashed"),
        "{p}"
    );
    let played = p["played_ms"].as_u64().unwrap();
    assert!(
        (900..=1300).contains(&played),
        "the first sentence was played: {p}"
    );
    assert!(
        h["errors"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e.as_str().unwrap_or("").contains("500"))),
        "{}",
        h["errors"]
    );
    assert!(
        r.rtp.voiced().0 >= 40,
        "the callee heard the first sentence"
    );
}
