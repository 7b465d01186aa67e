//! What a call does, tested in process ([`super::testing`]): the real port and interpreter
//! against a scripted caller on paused time, asserting what a user reads in the saved
//! history. The binary's end-to-end tests (tests/) keep what needs the wire: SIP, RTP,
//! the API.

use std::time::Duration;

use callsmith_domain::store::communications::CommunicationStatus;
use callsmith_sip::ReferOutcome;
use serde_json::{Value, json};

use super::testing::{Act, CallTest, Script};

fn next(to: &str) -> Value {
    json!([{"type": "next", "description": "", "next": to}])
}

fn outs(pairs: &[(&str, &str)]) -> Value {
    Value::Array(
        pairs
            .iter()
            .map(|(t, n)| json!({"type": t, "description": "", "next": n}))
            .collect(),
    )
}

fn brick(id: &str, properties: Value, outputs: Value) -> Value {
    json!({"id": id, "description": "", "properties": properties, "outputs": outputs})
}

fn snapshot(bricks: Value) -> Value {
    json!({"name": "in process", "constructor": {"bricks": bricks}})
}

fn start_call(to: &str) -> Value {
    json!({"v1": [brick("s", json!({
        "tts_general": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""},
        "stt_general": {"language": "en-US", "engine": "whisper", "model": "", "primary_language": "", "fallback_languages": []}
    }), next(to))]})
}

fn goal(id: &str, g: &str, to: &str) -> Value {
    brick(id, json!({"goal": g}), next(to))
}

fn end_call(id: &str) -> Value {
    brick(id, json!({"signal": "done"}), json!([]))
}

fn tts(id: &str, text: &str, to: &str) -> Value {
    brick(
        id,
        json!({"text": text, "language": "", "voice": "", "engine": "", "model": ""}),
        next(to),
    )
}

/// The trace events of one kind.
fn events<'a>(h: &'a Value, kind: &str) -> Vec<&'a Value> {
    h["trace"]
        .as_array()
        .map(|t| t.iter().filter(|e| e["event"] == kind).collect())
        .unwrap_or_default()
}

/// The output a brick took.
fn taken(h: &Value, brick_id: &str) -> String {
    events(h, "output_taken")
        .iter()
        .find(|e| e["brick_id"] == brick_id)
        .and_then(|e| e["output"].as_str())
        .unwrap_or_else(|| panic!("{brick_id} took no output: {}", h["trace"]))
        .to_string()
}

/// A question `ask` with `statement`, answered by keys or speech, routed to goals.
fn question(statement: &str, interruptible: bool, input_mode: &str) -> Value {
    question_with(statement, interruptible, input_mode, Value::Null)
}

/// [`question`] with `stt_properties` (Null: none).
fn question_with(statement: &str, interruptible: bool, input_mode: &str, stt: Value) -> Value {
    snapshot(json!({
        "start_call": start_call("ask"),
        "question": {"v1": [brick("ask", json!({
            "statement": {"audio": {"mode": "tts", "tts": {"text": statement}}, "is_interruptible": interruptible},
            "type": "standard", "input_mode": input_mode, "stt_properties": stt,
            "dtmf_properties": {"dtmf_timeout": 3, "no_input_timeout": 8, "min_symbols": 1, "max_symbols": 4, "finish_on_key": "#"},
            "answer": {"answers": [
                {"answer_id": "code7", "description": "", "dtmf_input": {"value": "7"}, "speech_input": {"tokens": ["seven"]}},
                {"answer_id": "code42", "description": "", "dtmf_input": {"value": "42"}, "speech_input": {"tokens": ["forty two"]}}
            ]}
        }), outs(&[("code7", "g_wrong"), ("code42", "ok"), ("invalid", "g_invalid"), ("empty", "g_empty")]))]},
        "audio_tts": {"v1": [tts("ok", "Code accepted. Thank you.", "g_ok")]},
        "goal": {"v1": [goal("g_ok", "code_ok", "bye"), goal("g_wrong", "wrong_code", "bye"),
                        goal("g_invalid", "invalid", "bye"), goal("g_empty", "empty", "bye")]},
        "end_call": {"v1": [end_call("bye")]}
    }))
}

/// The caller types 4 2 # (RFC 4733) after the statement: the answer `code42` is taken,
/// its goal reached and its confirmation played to the end (tests/tests/bricks.rs
/// `question_dtmf_branch` checks the same call over SIP and RTP).
#[tokio::test(start_paused = true)]
async fn a_dtmf_answer_takes_its_branch() {
    let statement = "Enter your code, then hash.";
    let done = CallTest::new(question(statement, false, "dtmf"))
        .caller(Script::new().at(2000, Act::Keys("42#".into())))
        .run()
        .await;
    let h = &done.history;
    assert_eq!(h["goals"], json!(["code_ok"]), "{}", h["trace"]);
    assert_eq!(taken(h, "ask"), "code42");
    let heard = events(h, "input_heard");
    assert_eq!(heard[0]["heard"], json!({"input": "dtmf", "digits": "42"}));
    assert_eq!(events(h, "answer_matched")[0]["answer_id"], "code42");
    assert_eq!(h["turns"][0]["dtmf"], "42", "{}", h["turns"]);
    assert_eq!(
        h["end"],
        json!({"reason": "end_call", "brick_id": "bye", "signal": "done"})
    );
    assert_eq!(
        h["prompts"][1]["prompt"]["text"],
        "Code accepted. Thank you."
    );
    assert_eq!(h["prompts"][1]["outcome"], "completed");
    // Synthesised sentence by sentence, and heard whole: 60 ms a character.
    assert_eq!(
        done.said,
        [statement, "Code accepted.", "Thank you."],
        "what the caller was told"
    );
    let heard: Vec<u64> = done.heard.played.iter().map(|p| p.played_ms).collect();
    assert_eq!(heard, [27 * 60, (14 + 10) * 60]);
    assert_eq!(done.finish.goals, ["code_ok"]);
    assert_eq!(done.finish.end_reason.as_deref(), Some("end_call"));
}

/// Keys sent by SIP INFO answer a question as RFC 4733 ones do.
#[tokio::test(start_paused = true)]
async fn sip_info_keys_answer_a_question() {
    let done = CallTest::new(question("Your code?", false, "dtmf"))
        .caller(Script::new().at(1000, Act::InfoKeys("7#".into())))
        .run()
        .await;
    assert_eq!(done.history["goals"], json!(["wrong_code"]));
    assert_eq!(done.history["turns"][0]["dtmf"], "7");
}

/// A re-INVITE's new SRTP keys reach the call's media while a question waits: our new key
/// protects what we send, the peer's what we receive, and the call goes on.
#[tokio::test(start_paused = true)]
async fn new_srtp_keys_from_a_reinvite_re_key_the_media() {
    use callsmith_media::srtp::SrtpProfile;
    use callsmith_sip::{CryptoSuite, SrtpKeys};
    let keys = SrtpKeys {
        suite: CryptoSuite::AesCm128HmacSha1_32,
        local: callsmith_sip::sdes::MasterKey([1; 30]),
        remote: callsmith_sip::sdes::MasterKey([2; 30]),
    };
    let done = CallTest::new(question("Your code?", false, "dtmf"))
        .caller(
            Script::new()
                .at(500, Act::Rekey(keys))
                .at(1000, Act::Keys("7#".into())),
        )
        .run()
        .await;
    assert_eq!(done.history["goals"], json!(["wrong_code"]));
    let [rekeyed] = &done.heard.rekeyed[..] else {
        panic!("one re-key: {:?}", done.heard.rekeyed);
    };
    assert_eq!(rekeyed.profile, SrtpProfile::Aes128CmHmacSha1_32);
    assert_eq!((rekeyed.send_key, rekeyed.recv_key), ([1; 30], [2; 30]));
}

/// A caller who says nothing: the question waits its `no_input_timeout` (8 s after the
/// statement) and takes `empty`; the turn says so.
#[tokio::test(start_paused = true)]
async fn silence_takes_the_empty_output_after_the_no_input_timeout() {
    let done = CallTest::new(question("Your code?", false, "dtmf"))
        .run()
        .await;
    let h = &done.history;
    assert_eq!(h["goals"], json!(["empty"]), "{}", h["trace"]);
    assert_eq!(taken(h, "ask"), "empty");
    let turn = &h["turns"][0];
    assert_eq!(turn["heard"], "no_input", "{turn}");
    let waited = turn["ended_ms"].as_u64().unwrap() - turn["started_ms"].as_u64().unwrap();
    assert!((8000..8020).contains(&waited), "{turn}");
}

/// The caller speaks over an interruptible statement: the statement stops (barge-in),
/// the recogniser's transcript answers the question.
#[tokio::test(start_paused = true)]
async fn speech_over_an_interruptible_statement_cuts_it_and_answers() {
    let statement = "Please say your code after this rather long introduction.";
    let done = CallTest::new(question(statement, true, "speech"))
        .caller(Script::new().at(1000, Act::Say("forty two".into())))
        .run()
        .await;
    let h = &done.history;
    assert_eq!(h["goals"], json!(["code_ok"]), "{}", h["trace"]);
    assert_eq!(
        h["prompts"][0]["outcome"], "interrupted",
        "{}",
        h["prompts"]
    );
    let played = h["prompts"][0]["played_ms"].as_u64().unwrap();
    let (at, elapsed) = (
        h["prompts"][0]["at_ms"].as_u64().unwrap(),
        h["prompts"][0]["elapsed_ms"].as_u64().unwrap(),
    );
    assert!(
        (1000..=1020).contains(&(at + elapsed)) && (800..=elapsed).contains(&played),
        "the statement stopped when the caller spoke: {}",
        h["prompts"]
    );
    assert_eq!(h["turns"][0]["heard"], "speech", "{}", h["turns"]);
    assert_eq!(h["turns"][0]["transcript"], "forty two");
    assert_eq!(h["turns"][0]["stt_node"], "scripted");
    assert_eq!(done.heard.played[0].played_ms, played);
}

/// Speech over a statement that is not interruptible does not stop it.
#[tokio::test(start_paused = true)]
async fn speech_over_a_plain_statement_does_not_cut_it() {
    let statement = "Please say your code after this rather long introduction.";
    let done = CallTest::new(question(statement, false, "speech"))
        .caller(
            Script::new()
                .at(1000, Act::Say("hello".into()))
                .at(4500, Act::Say("forty two".into())),
        )
        .run()
        .await;
    let h = &done.history;
    assert_eq!(h["prompts"][0]["outcome"], "completed", "{}", h["prompts"]);
    assert_eq!(h["goals"], json!(["code_ok"]), "{}", h["trace"]);
}

/// The caller hangs up 500 ms into a 30 s prompt: the prompt stops there and is recorded
/// as hung up with what was played, end_call is not reached, the engine forced nothing
/// (the BYE over SIP is in tests/tests/capacity.rs).
#[tokio::test(start_paused = true)]
async fn a_caller_who_hangs_up_mid_prompt_ends_the_prompt_and_the_call() {
    let long = "a".repeat(500);
    let scn = snapshot(json!({
        "start_call": start_call("play"),
        "audio_tts": {"v1": [tts("play", &long, "bye")]},
        "end_call": {"v1": [end_call("bye")]}
    }));
    let done = CallTest::new(scn)
        .caller(Script::new().at(500, Act::HangUp))
        .run()
        .await;
    let h = &done.history;
    let prompts = h["prompts"].as_array().expect("prompts");
    assert_eq!(prompts.len(), 1, "end_call is not reached: {h}");
    assert_eq!(prompts[0]["outcome"], "hung_up", "{h}");
    let played = prompts[0]["played_ms"].as_u64().unwrap();
    let (at, elapsed) = (
        prompts[0]["at_ms"].as_u64().unwrap(),
        prompts[0]["elapsed_ms"].as_u64().unwrap(),
    );
    assert!(
        (500..=520).contains(&(at + elapsed)),
        "stopped at the hang-up: {h}"
    );
    assert!((300..=elapsed).contains(&played), "{h}");
    assert!(h["forced_end"].is_null(), "the caller ended it: {h}");
    assert_eq!(h["hangup"]["by"], "remote", "{}", h["hangup"]);
    assert_eq!(done.finish.call_status.as_deref(), Some("answered"));
    assert!(done.took < Duration::from_secs(1), "{:?}", done.took);
}

/// A call still up at `dialer.max_call_secs` is ended by the engine, and says so.
#[tokio::test(start_paused = true)]
async fn the_maximum_duration_ends_a_call() {
    let scn = question("Your code?", false, "dtmf");
    let done = CallTest::new(scn)
        .max_call(Duration::from_secs(3))
        .run()
        .await;
    let h = &done.history;
    assert_eq!(h["forced_end"], "max_duration", "{h}");
    assert_eq!(h["hangup"]["by"], "local", "{}", h["hangup"]);
    assert!(
        h["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "maximum call duration reached"),
        "{}",
        h["errors"]
    );
    assert!(
        (Duration::from_secs(3)..Duration::from_millis(3100)).contains(&done.took),
        "{:?}",
        done.took
    );
    assert_eq!(done.finish.end_reason.as_deref(), Some("max_duration"));
}

/// A scenario: call_transfer (blind) → goal `transferred` / `transfer_failed`.
fn blind_transfer() -> Value {
    let tts = |text: &str| json!({"mode": "tts", "tts": {"text": text}, "file": {"url": ""}});
    snapshot(json!({
        "start_call": start_call("xfer"),
        "call_transfer": {"v1": [brick("xfer", json!({
            "from": "", "number": "+15550999", "transfer_mode": "blind", "timeout": 10,
            "message_to_client": tts("Connecting you."),
            "message_to_manager": tts("A caller for you."),
            "tts_properties": {"engine": "espeak-ng", "voice": "", "language": "en-US", "speed": 1, "model": ""},
            "sip_header": {"sip_headers": [{"name": "X-Transfer-Id", "value": "blind-1"}]}
        }), outs(&[("success", "g_ok"), ("failure", "g_fail"), ("timeout", "g_timeout")]))]},
        "goal": {"v1": [goal("g_ok", "transferred", "bye"), goal("g_fail", "transfer_failed", "bye"),
                        goal("g_timeout", "transfer_timeout", "bye")]},
        "end_call": {"v1": [end_call("bye")]}
    }))
}

/// A blind transfer the far side accepts takes `success`; one it refuses takes
/// `failure` with its SIP code; the caller hears the message first either way.
#[tokio::test(start_paused = true)]
async fn a_blind_transfer_takes_the_output_of_its_outcome() {
    for (refer, goal, outcome, code) in [
        (
            ReferOutcome::Succeeded { sip_code: 200 },
            "transferred",
            "success",
            200,
        ),
        (
            ReferOutcome::Failed {
                sip_code: Some(486),
                reason: "Busy Here".into(),
            },
            "transfer_failed",
            "failure",
            486,
        ),
    ] {
        let done = CallTest::new(blind_transfer())
            .caller(Script::new().refer(refer))
            .run()
            .await;
        let h = &done.history;
        assert_eq!(h["goals"], json!([goal]), "{}", h["transfers"]);
        let x = &h["transfers"][0];
        assert_eq!(x["mode"], "blind", "{x}");
        assert_eq!(x["outcome"], outcome, "{x}");
        assert_eq!(x["sip_code"], code, "{x}");
        assert_eq!(h["prompts"][0]["prompt"]["text"], "Connecting you.");
        assert_eq!(h["prompts"][0]["outcome"], "completed");
        assert_eq!(done.heard.referred, ["+15550999"]);
    }
}

/// A question whose "stop calling me" answer (key 9) sets the reserved variable
/// `opt_out` with an assignment brick, and whose "not interested" answer (key 2) ends the
/// call with the `end_call` signal `declined` (docs/strategies.md).
fn opt_out_question() -> Value {
    snapshot(json!({
        "start_call": start_call("ask"),
        "question": {"v1": [brick("ask", json!({
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Press 9 to stop our calls."}}, "is_interruptible": false},
            "type": "standard", "input_mode": "dtmf",
            "dtmf_properties": {"dtmf_timeout": 3, "no_input_timeout": 8, "min_symbols": 1, "max_symbols": 1, "finish_on_key": "#"},
            "answer": {"answers": [
                {"answer_id": "stop", "description": "", "dtmf_input": {"value": "9"}},
                {"answer_id": "no", "description": "", "dtmf_input": {"value": "2"}}
            ]}
        }), outs(&[("stop", "opt_out"), ("no", "declined"), ("empty", "bye")]))]},
        "assignment": {"v1": [brick("opt_out", json!({"variables": [{"name": "opt_out", "value": "true"}]}), next("bye"))]},
        "end_call": {"v1": [end_call("bye"), brick("declined", json!({"signal": "declined"}), json!([]))]}
    }))
}

/// Retry rules for every retryable outcome: whatever is not retried is so by its nature.
fn retry_everything() -> Value {
    let r = json!({"attempts": 5, "delay_s": 60});
    json!({"retry": {"busy": r, "no_answer": r, "failed": r, "voicemail": r, "dropped": r}})
}

/// The callee presses 9: the scenario sets `opt_out`, the number lands on the account's
/// do-not-call list (source `opt_out`), the attempt is `opted_out` and, although the
/// strategy retries every outcome it can, nothing is scheduled: the row is done.
#[tokio::test(start_paused = true)]
async fn an_in_call_opt_out_lists_the_number_and_schedules_no_retry() {
    let done = CallTest::new(opt_out_question())
        .caller(Script::new().at(2500, Act::Keys("9".into())))
        .stored(Some(retry_everything()))
        .run()
        .await;
    assert_eq!(
        taken(&done.history, "ask"),
        "stop",
        "{}",
        done.history["trace"]
    );
    assert!(done.finish.opted_out && !done.finish.declined);
    let store = &done.store;
    let entry = store
        .do_not_call_get("acc_in_process", "+4915550777")
        .await
        .unwrap()
        .expect("the recipient is on the do-not-call list");
    assert_eq!(entry.source, "opt_out");
    let row = store
        .communication_get(&done.communication_sid)
        .await
        .unwrap()
        .expect("the row");
    assert_eq!(row.communication_status, CommunicationStatus::Completed);
    assert!(
        row.claim_token.is_none(),
        "the row is released, not queued again"
    );
    let attempts = store
        .communication_attempts_all(&done.communication_sid)
        .await
        .unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome.as_deref(), Some("opted_out"));
}

/// The callee presses 2: the `end_call` signal `declined` is the explicit "no": the
/// attempt is `declined`, nothing is retried, and the number is not listed.
#[tokio::test(start_paused = true)]
async fn an_explicit_no_is_declined_and_not_retried_nor_listed() {
    let done = CallTest::new(opt_out_question())
        .caller(Script::new().at(2500, Act::Keys("2".into())))
        .stored(Some(retry_everything()))
        .run()
        .await;
    assert_eq!(taken(&done.history, "ask"), "no");
    assert!(done.finish.declined && !done.finish.opted_out);
    let store = &done.store;
    let listed = store
        .do_not_call_get("acc_in_process", "+4915550777")
        .await
        .unwrap();
    assert!(listed.is_none(), "a no is not an opt-out");
    let row = store
        .communication_get(&done.communication_sid)
        .await
        .unwrap()
        .expect("the row");
    assert_eq!(row.communication_status, CommunicationStatus::Completed);
    let attempts = store
        .communication_attempts_all(&done.communication_sid)
        .await
        .unwrap();
    assert_eq!(attempts[0].outcome.as_deref(), Some("declined"));
}

/// A callee who answers nothing: the same strategy's `dropped`/`completed` rules decide
/// (a completed conversation is not retried either), and nothing is listed.
#[tokio::test(start_paused = true)]
async fn a_call_without_an_opt_out_lists_nothing() {
    let done = CallTest::new(opt_out_question()).stored(None).run().await;
    assert_eq!(taken(&done.history, "ask"), "empty");
    assert!(!done.finish.opted_out && !done.finish.declined);
    let (entries, total) = done
        .store
        .do_not_call_list("acc_in_process", 10, 0)
        .await
        .unwrap();
    assert_eq!((entries.len(), total), (0, 0));
    let attempts = done
        .store
        .communication_attempts_all(&done.communication_sid)
        .await
        .unwrap();
    assert_eq!(attempts[0].outcome.as_deref(), Some("completed"));
}

mod listening;
