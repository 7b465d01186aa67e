//! The interpreter against a scripted call: one scenario per brick kind, plus fallbacks,
//! loops, hang-ups and the trace.

use std::collections::BTreeMap;

use callsmith_scenarios::history::{EndReason, Event};
use callsmith_scenarios::interpreter::{CallDirection, CallInfo, CallRun, Program};
use callsmith_scenarios::port::{
    AmdVerdict, Heard, PlayOutcome, PromptSpec, SmsOutcome, TransferMode, TransferOutcome,
};
use callsmith_scenarios::testing::ScriptedCall;
use callsmith_scenarios::{AcceptAll, Snapshot, validate};
use serde_json::{Value, json};

fn fixture() -> Value {
    serde_json::from_str(include_str!("fixtures/all_bricks.json")).expect("fixture is JSON")
}

fn call(direction: CallDirection) -> CallInfo {
    let mut data = BTreeMap::new();
    data.insert("name".to_string(), "Ann".to_string());
    data.insert("order_id".to_string(), "42".to_string());
    data.insert("api_token".to_string(), "tok".to_string());
    CallInfo {
        direction,
        recipient: "+4930123".into(),
        from: "+4930999".into(),
        communication_id: "com_1".into(),
        timezone: chrono_tz::Europe::Berlin,
        data,
    }
}

async fn run_with(
    v: &Value,
    info: &CallInfo,
    port: &mut ScriptedCall,
    max_steps: Option<usize>,
) -> CallRun {
    let snap = Snapshot::from_value(v).expect("snapshot");
    let mut program = Program::new(snap);
    if let Some(m) = max_steps {
        program.max_steps = m;
    }
    program.run(info, port).await
}

async fn run(v: &Value, port: &mut ScriptedCall) -> CallRun {
    run_with(v, &call(CallDirection::Outbound), port, None).await
}

fn entered(r: &CallRun) -> Vec<String> {
    r.trace
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Event::BrickEntered { brick_id, .. } => Some(brick_id.clone()),
            _ => None,
        })
        .collect()
}

fn path(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

/// A small scenario: start_call → the given bricks (linked by the caller) → end "e".
fn scenario(bricks: Value) -> Value {
    let mut b = bricks;
    b["end"] = json!({"v1": [{"id": "e", "properties": {}, "outputs": []}]});
    if b.get("start_call").is_none() {
        b["start_call"] = json!({"v1": [{"id": "s", "properties": {
            "tts_general": {"engine": "flite", "voice": "slt", "language": "en-US", "speed": 1}},
            "outputs": [{"type": "next", "next": "first"}]}]});
    }
    let v = json!({"name": "t", "constructor": {"bricks": b}});
    let snap = Snapshot::from_value(&v).expect("snapshot");
    assert_eq!(
        validate(&snap, &AcceptAll),
        vec![],
        "test scenario must be valid"
    );
    v
}

fn next(to: &str) -> Value {
    json!([{"type": "next", "next": to}])
}

#[tokio::test]
async fn full_outbound_path_through_every_linear_kind() {
    let mut port = ScriptedCall::new().say("Yes, sure!").webhook_response(
        200,
        &[("X-Request-Id", "rq-9")],
        r#"{"account": {"balance": 150, "tier": "gold"}}"#,
    );
    let r = run(&fixture(), &mut port).await;
    assert_eq!(
        entered(&r),
        path(&[
            "sc",
            "oc",
            "greet",
            "intro",
            "assign",
            "inc",
            "ask",
            "hook",
            "map",
            "branch",
            "text",
            "done_goal",
            "finish"
        ])
    );
    assert_eq!(
        r.end,
        EndReason::End {
            brick_id: "finish".into()
        }
    );
    assert_eq!(
        port.played_texts(),
        vec![
            "Hello Ann.",
            "file:aud_jingle",
            "Your order 42 is ready.",
            "Shall we deliver today? Say yes or press 2 for no."
        ]
    );
    // brick tts over start_call tts_general, field by field
    let PromptSpec::Tts { voice, .. } = &port.played[0].0 else {
        panic!("tts expected")
    };
    assert_eq!(
        (
            voice.engine.as_str(),
            voice.voice.as_str(),
            voice.language.as_str(),
            voice.speed
        ),
        ("flite", "kal16", "en-US", Some(1.25))
    );
    let PromptSpec::Tts { voice, .. } = &port.played[2].0 else {
        panic!("tts expected")
    };
    assert_eq!(
        (voice.voice.as_str(), voice.language.as_str(), voice.speed),
        ("slt", "en-GB", Some(1.0))
    );
    assert!(port.played[3].1, "the statement is interruptible");
    // question listened for speech and DTMF with the merged STT settings
    let spec = &port.listens[0];
    let speech = spec.speech.as_ref().expect("speech");
    assert_eq!(
        (
            speech.engine.as_str(),
            speech.language.as_str(),
            speech.model.as_str()
        ),
        ("whisper", "en-US", "tiny.en")
    );
    assert_eq!(speech.tokens, vec!["order", "deliver"]);
    assert_eq!(speech.speech_timeout_secs, Some(1.5));
    // yes/sure/no answers: the recogniser may end the turn soonest.
    assert_eq!(speech.patience, callsmith_scenarios::port::Patience::Short);
    assert_eq!(
        speech.stt_properties["grammar_parameter"]["parameters"][0]["key"],
        "k"
    );
    let dtmf = spec.dtmf.as_ref().expect("dtmf");
    assert_eq!((dtmf.max_symbols, dtmf.finish_on_key), (1, Some('#')));
    assert_eq!(spec.no_input_timeout_secs, 6.0);
    // webhook compiled against variables and built-ins
    let req = &port.webhooks[0];
    assert_eq!(req.url, "http://127.0.0.1:9/orders/42");
    assert!(
        req.headers
            .contains(&("Authorization".into(), "Bearer tok".into()))
    );
    assert!(req.headers.contains(&("X-Trace".into(), "com_1".into())));
    assert_eq!(
        req.body.as_deref(),
        Some(r#"{"answer": "yes", "who": "+4930123"}"#)
    );
    assert_eq!(req.timeout_secs, 2.5);
    assert_eq!(
        port.sms,
        vec![(
            "+4930123".to_string(),
            "Order 42 confirmed, balance 150.".to_string()
        )]
    );
    assert_eq!(r.goals, vec!["confirmed"]);
    for (k, v) in [
        ("attempts", "1"),
        ("greeting", "hi Ann"),
        ("balance", "150"),
        ("req_id", "rq-9"),
        ("tier", "gold"),
        ("webhook.status_code", "200"),
    ] {
        assert_eq!(r.variables.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert_eq!(port.hangups, vec![""]);
    // trace: relative, monotonic timestamps, serialisable
    assert_eq!(r.trace.events[0].at_ms, 0);
    assert!(r.trace.events.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    let last = r.trace.events.last().expect("events");
    assert_eq!(last.at_ms, 4 * 1000 + 2000, "four prompts and one listen");
    assert!(matches!(last.event, Event::CallEnded { .. }));
    let json = serde_json::to_value(&r.trace).expect("serialises");
    assert_eq!(json["events"][0]["event"], "brick_entered");
    assert!(r.trace.events.iter().any(|e| matches!(&e.event, Event::VariableChanged { name, old: None, new } if name == "greeting" && new == "hi Ann")));
    assert!(
        r.trace.events.iter().any(
            |e| matches!(&e.event, Event::AnswerMatched { answer_id, .. } if answer_id == "yes")
        )
    );
    assert!(r.trace.events.iter().any(|e| matches!(
        &e.event,
        Event::InputHeard {
            heard: Heard::Speech { .. },
            ..
        }
    )));
}

#[tokio::test]
async fn outbound_call_routes_voicemail_to_its_output() {
    let mut port = ScriptedCall::new().amd(AmdVerdict::Machine);
    let r = run(&fixture(), &mut port).await;
    assert_eq!(entered(&r), path(&["sc", "oc", "vm", "vm_end"]));
    assert_eq!(port.played_texts(), vec!["file:aud_voicemail"]);
    assert_eq!(
        r.end,
        EndReason::EndCall {
            brick_id: "vm_end".into(),
            signal: "voicemail".into()
        }
    );
    assert_eq!(port.hangups, vec!["voicemail"]);
    assert!(r.trace.events.iter().any(|e| matches!(
        e.event,
        Event::AnsweringMachine {
            verdict: AmdVerdict::Machine,
            ..
        }
    )));
}

#[tokio::test]
async fn inbound_calls_start_at_inbound_call() {
    let mut port = ScriptedCall::new();
    let r = run_with(&fixture(), &call(CallDirection::Inbound), &mut port, None).await;
    assert_eq!(entered(&r), path(&["ic", "in_hello", "in_end"]));
    assert_eq!(port.played_texts(), vec!["Thanks for calling."]);
}

#[tokio::test]
async fn dtmf_answer_jumps_to_a_start_tree() {
    let mut port = ScriptedCall::new().press("2");
    let r = run(&fixture(), &mut port).await;
    assert_eq!(
        &entered(&r)[6..],
        &path(&["ask", "later_tree", "later_goal", "finish"])[..]
    );
    assert_eq!(r.goals, vec!["declined"]);
}

#[tokio::test]
async fn question_fallbacks_then_invalid_output_then_bridged_transfer() {
    let mut port = ScriptedCall::new()
        .silence()
        .say("blah")
        .say("meh")
        .transfer_outcome(TransferOutcome::Success);
    let r = run(&fixture(), &mut port).await;
    let statement = "Shall we deliver today? Say yes or press 2 for no.";
    assert_eq!(
        port.played_texts()[3..],
        [
            statement,
            "Are you there?",             // empty fallback 0: no statement repeat
            "Sorry, I did not get that.", // invalid fallback 0: repeats the statement
            statement,
        ]
    );
    // the transfer messages are handed to the port, not played by the interpreter
    assert_eq!(port.listens.len(), 3);
    let fallbacks: Vec<(String, usize)> = r
        .trace
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Fallback { kind, index, .. } => Some((kind.clone(), *index)),
            _ => None,
        })
        .collect();
    assert_eq!(
        fallbacks,
        vec![("empty".to_string(), 0), ("invalid".to_string(), 0)]
    );
    assert_eq!(&entered(&r)[6..], &path(&["ask", "transfer", "finish"])[..]);
    let t = &port.transfers[0];
    assert_eq!(t.mode, TransferMode::Bridged);
    assert_eq!(
        (t.from.as_str(), t.number.as_str(), t.timeout_secs),
        ("+4930999", "+15550100", 20.0)
    );
    assert_eq!(
        t.sip_headers,
        vec![("X-Reason".to_string(), "fallback".to_string())]
    );
    assert!(
        matches!(&t.message_to_manager, Some(PromptSpec::Tts { text, .. }) if text == "Customer +4930123 needs help.")
    );
    assert_eq!(
        t.message_to_client,
        Some(PromptSpec::File {
            url: "aud_hold".into()
        })
    );
}

#[tokio::test]
async fn exhausted_empty_fallbacks_take_the_empty_output() {
    let mut port = ScriptedCall::new().silence().silence();
    let r = run(&fixture(), &mut port).await;
    assert_eq!(&entered(&r)[6..], &path(&["ask", "vm_end"])[..]);
    assert_eq!(
        r.end,
        EndReason::EndCall {
            brick_id: "vm_end".into(),
            signal: "voicemail".into()
        }
    );
}

#[tokio::test]
async fn transfer_outcomes_pick_their_outputs() {
    for (outcome, expected) in [
        (TransferOutcome::Success, "success"),
        (TransferOutcome::Failure("busy".into()), "failure"),
        (TransferOutcome::Timeout, "timeout"),
    ] {
        let v = scenario(
            json!({"call_transfer": {"v1": [{"id": "first", "properties": {"number": "{{agent}}"},
            "outputs": [{"type": "success", "next": "e"}, {"type": "failure", "next": "e"}, {"type": "timeout", "next": "e"}]}]}}),
        );
        let mut port = ScriptedCall::new().transfer_outcome(outcome);
        let r = run(&v, &mut port).await;
        assert!(
            r.trace.events.iter().any(
                |e| matches!(&e.event, Event::OutputTaken { output, .. } if output == expected)
            )
        );
        assert_eq!(port.transfers[0].mode, TransferMode::Blind);
        assert_eq!(port.transfers[0].timeout_secs, 30.0);
    }
}

#[tokio::test]
async fn webhook_failures_take_the_fail_output() {
    let mut port = ScriptedCall::new()
        .say("yes")
        .webhook_response(500, &[], "oops");
    let r = run(&fixture(), &mut port).await;
    assert_eq!(
        &entered(&r)[7..],
        &path(&["hook", "transfer", "finish"])[..]
    );
    assert_eq!(
        r.variables.get("webhook.status_code").map(String::as_str),
        Some("500")
    );
    assert!(
        !r.variables.contains_key("balance"),
        "no mapping on failure"
    );
    let mut port = ScriptedCall::new()
        .say("yes")
        .webhook_error("connection refused");
    let r = run(&fixture(), &mut port).await;
    let outcome = r.trace.events.iter().find_map(|e| match &e.event {
        Event::WebhookCalled { outcome, .. } => Some((**outcome).clone()),
        _ => None,
    });
    let outcome = outcome.expect("webhook event");
    assert_eq!(outcome.error, "connection refused");
    assert!(
        outcome
            .curl
            .starts_with("curl -X POST 'http://127.0.0.1:9/orders/42'")
    );
}

#[tokio::test]
async fn condition_group_branches_and_else() {
    // regular: tier basic (set_if_not_found) with a low balance
    let mut port = ScriptedCall::new().say("yes").webhook_response(
        200,
        &[],
        r#"{"account": {"balance": 20}}"#,
    );
    let r = run(&fixture(), &mut port).await;
    assert_eq!(
        &entered(&r)[9..],
        &path(&["branch", "done_goal", "finish"])[..]
    );
    // else: rich but not gold
    let mut port = ScriptedCall::new().say("yes").webhook_response(
        200,
        &[],
        r#"{"account": {"balance": 500, "tier": "silver"}}"#,
    );
    let r = run(&fixture(), &mut port).await;
    assert_eq!(
        &entered(&r)[9..],
        &path(&["branch", "transfer", "finish"])[..]
    );
}

#[tokio::test]
async fn condition_operators_compare_numbers_and_text() {
    let v = scenario(json!({
        "assignment": {"v1": [{"id": "first", "properties": {"variables": [{"name": "n", "value": "9"}, {"name": "s", "value": "Hello World"}]}, "outputs": next("c")}]},
        "condition_group": {"v1": [{"id": "c", "properties": {"condition": {"conditions": [
            {"condition_id": "text_and", "condition_operator": "and", "elements": [
                {"variable": "n", "element_operator": "greater", "value": "10"},
                {"variable": "s", "element_operator": "contains", "value": "World"}]},
            {"condition_id": "numeric_or", "condition_operator": "or", "elements": [
                {"variable": "missing", "element_operator": "not_empty", "value": ""},
                {"variable": "n", "element_operator": "less_or_equal", "value": "9.0"}]}
        ]}}, "outputs": [{"type": "text_and", "next": "e"}, {"type": "numeric_or", "next": "e"}, {"type": "else", "next": "e"}]}]}
    }));
    let r = run(&v, &mut ScriptedCall::new()).await;
    assert!(
        r.trace.events.iter().any(|e| matches!(&e.event, Event::OutputTaken { brick_id, output, .. } if brick_id == "c" && output == "numeric_or")),
        "9 > 10 is false numerically (true as text), 9 <= 9.0 is true numerically"
    );
}

#[tokio::test]
async fn one_program_runs_concurrent_calls_each_with_its_own_variables() {
    // The engine shares one Program per scenario version across live calls: its index and
    // pattern cache are shared, a call's variables and trace are not.
    let v = scenario(json!({
        "condition_group": {"v1": [{"id": "first", "properties": {"condition": {"conditions": [
            {"condition_id": "order", "condition_operator": "and", "elements": [
                {"variable": "order_id", "element_operator": "regex", "value": "^4[0-9]$"}]}
        ]}}, "outputs": [{"type": "order", "next": "hit"}, {"type": "else", "next": "miss"}]}]},
        "goal": {"v1": [
            {"id": "hit", "properties": {"goal": "order {{order_id}}"}, "outputs": next("e")},
            {"id": "miss", "properties": {"goal": "none for {{name}}"}, "outputs": next("e")}
        ]}
    }));
    let program = Program::new(Snapshot::from_value(&v).expect("snapshot"));
    let a = call(CallDirection::Outbound);
    let b = {
        let mut c = call(CallDirection::Outbound);
        c.data.insert("order_id".into(), "7".into());
        c.data.insert("name".into(), "Bo".into());
        c
    };
    let (mut pa, mut pb) = (ScriptedCall::new(), ScriptedCall::new());
    let (ra, rb) = tokio::join!(program.run(&a, &mut pa), program.run(&b, &mut pb));
    assert_eq!(ra.goals, vec!["order 42"]);
    assert_eq!(rb.goals, vec!["none for Bo"]);
    assert_eq!(ra.variables.get("name").map(String::as_str), Some("Ann"));
    assert_eq!(rb.variables.get("name").map(String::as_str), Some("Bo"));
    // A third call on the same program, after the others, still starts from its own data.
    let rc = program.run(&a, &mut ScriptedCall::new()).await;
    assert_eq!(rc.goals, ra.goals);
    assert_eq!(entered(&rc), entered(&ra));
}

#[tokio::test]
async fn goal_assignment_increment_and_built_in_time() {
    let v = scenario(json!({
        "increment": {"v1": [{"id": "first", "properties": {"variables": [{"variable": "count"}, {"variable": "ratio"}, {"variable": "word"}]}, "outputs": next("g")}]},
        "goal": {"v1": [{"id": "g", "properties": {"goal": "{{count}}-{{ratio}}-{{word}}"}, "outputs": next("t")}]},
        "audio_tts": {"v1": [{"id": "t", "properties": {"text": "It is {{time.time}} on {{time.date}} in {{time.timezone}}, {{call.direction}} {{nobody}}."}, "outputs": next("e")}]}
    }));
    let info = {
        let mut c = call(CallDirection::Outbound);
        c.data.insert("ratio".into(), "1.5".into());
        c.data.insert("word".into(), "many".into());
        c
    };
    let mut port = ScriptedCall::new();
    let r = run_with(&v, &info, &mut port, None).await;
    assert_eq!(r.goals, vec!["1-2.5-1"]);
    // 09:00 UTC is 10:00 in Berlin in January
    assert_eq!(
        port.played_texts(),
        vec!["It is 10:00:00 on 2026-01-01 in Europe/Berlin, outbound ."]
    );
}

#[tokio::test]
async fn data_mapping_extracts_json_paths() {
    let v = scenario(json!({
        "assignment": {"v1": [{"id": "first", "properties": {"variables": [{"name": "doc", "value": "{\"items\": [{\"sku\": \"A1\", \"qty\": 2}], \"ok\": true}"}]}, "outputs": next("m")}]},
        "data_mapping": {"v1": [{"id": "m", "properties": {"input": "{{doc}}", "variables": [
            {"name": "{{sku}}", "path": "$.items[0].sku", "set_if_not_found": ""},
            {"name": "qty", "path": "$.items[0].qty", "set_if_not_found": ""},
            {"name": "ok", "path": "$.ok", "set_if_not_found": ""},
            {"name": "none", "path": "$.items[5].sku", "set_if_not_found": "unknown"}
        ]}, "outputs": next("e")}]}
    }));
    let r = run(&v, &mut ScriptedCall::new()).await;
    for (k, want) in [
        ("sku", "A1"),
        ("qty", "2"),
        ("ok", "true"),
        ("none", "unknown"),
    ] {
        assert_eq!(r.variables.get(k).map(String::as_str), Some(want), "{k}");
    }
}

#[tokio::test]
async fn audio_random_plays_one_entry_and_audio_file_plays_a_file() {
    let v = scenario(json!({
        "audio": {"v1": [{"id": "first", "properties": {"play_mode": "random", "audios": [
            {"mode": "tts", "tts_properties": {"text": "one"}}, {"mode": "tts", "tts_properties": {"text": "two"}},
            {"mode": "file", "file_properties": {"url": "aud_three"}}]}, "outputs": next("f")}]},
        "audio_file": {"v1": [{"id": "f", "properties": {"url": "aud_{{order_id}}"}, "outputs": next("e")}]}
    }));
    let mut port = ScriptedCall::new();
    run(&v, &mut port).await;
    let played = port.played_texts();
    assert_eq!(played.len(), 2);
    assert!(["one", "two", "file:aud_three"].contains(&played[0].as_str()));
    assert_eq!(played[1], "file:aud_42");
    // the choice is stable for one call
    let mut again = ScriptedCall::new();
    run(&v, &mut again).await;
    assert_eq!(again.played_texts(), played);
}

#[tokio::test]
async fn sms_outcomes_and_recipient_override() {
    let v = scenario(
        json!({"sms": {"v1": [{"id": "first", "properties": {"to": "+1{{order_id}}", "text": "hi {{name}}"},
        "outputs": [{"type": "success", "next": "e"}, {"type": "failure", "next": "g"}]}]},
        "goal": {"v1": [{"id": "g", "properties": {"goal": "sms_failed"}, "outputs": next("e")}]}}),
    );
    let mut port = ScriptedCall::new().sms_outcome(SmsOutcome::Failed("provider down".into()));
    let r = run(&v, &mut port).await;
    assert_eq!(port.sms, vec![("+142".to_string(), "hi Ann".to_string())]);
    assert_eq!(r.goals, vec!["sms_failed"]);
}

fn question(props: Value) -> Value {
    scenario(
        json!({"question": {"v1": [{"id": "first", "properties": props,
        "outputs": [{"type": "a", "next": "e"}, {"type": "b", "next": "e"}, {"type": "invalid", "next": "e"}, {"type": "empty", "next": "e"}]}]}}),
    )
}

fn answer_taken(r: &CallRun) -> String {
    r.trace
        .events
        .iter()
        .find_map(|e| match &e.event {
            Event::OutputTaken {
                brick_id, output, ..
            } if brick_id == "first" => Some(output.clone()),
            _ => None,
        })
        .expect("question output")
}

#[tokio::test]
async fn question_matches_classifier_intents_above_threshold() {
    let props = json!({
        "stt_properties": {"intent_properties": {"classifier": {"id": "clf", "version": 3}, "threshold": 0.7}},
        "statement": {"audio": {"mode": "tts", "tts": {"text": "How can I help?"}}, "is_interruptible": false},
        "answer": {"answers": [
            {"answer_id": "a", "speech_input": {"intent": {"id": "billing"}}},
            {"answer_id": "b", "speech_input": {"intent": {"id": "callback"}}}]}
    });
    let mut port = ScriptedCall::new()
        .say("call me later")
        .intents(&[("billing", 0.2), ("callback", 0.8)]);
    let r = run(&question(props.clone()), &mut port).await;
    assert_eq!(answer_taken(&r), "b");
    assert_eq!(
        port.classified,
        vec![("clf".to_string(), 3, "call me later".to_string())]
    );
    let mut port = ScriptedCall::new().say("hmm").intents(&[("callback", 0.5)]);
    let r = run(&question(props), &mut port).await;
    assert_eq!(answer_taken(&r), "invalid", "below threshold, no fallbacks");
}

#[tokio::test]
async fn question_asks_the_llm_for_an_answer_id() {
    let props = json!({
        "stt_properties": {"intent_properties": {"llm_properties": {"engine": "e", "model": "m", "temperature": 0.1,
            "messages": [{"role": "system", "content": "You help {{name}}."}]}}},
        "answer": {"answers": [{"answer_id": "a", "description": "wants a refund"}, {"answer_id": "b", "description": "other"}]}
    });
    let mut port = ScriptedCall::new()
        .say("give me my money back")
        .llm_reply(" a. ");
    let r = run(&question(props), &mut port).await;
    assert_eq!(answer_taken(&r), "a");
    let req = &port.llm_requests[0];
    assert_eq!(
        req.messages[0],
        ("system".to_string(), "You help Ann.".to_string())
    );
    assert!(req.messages[1].1.contains("a: wants a refund"));
    assert_eq!(
        req.messages[2],
        ("user".to_string(), "give me my money back".to_string())
    );
}

#[tokio::test]
async fn question_token_modes_entities_and_dtmf() {
    let props = json!({
        "input_mode": "speech_and_dtmf",
        "answer": {"answers": [
            {"answer_id": "a", "speech_input": {"tokens": "yes please, exactly", "mode": "exact"}, "dtmf_input": {"value": "1"}},
            {"answer_id": "b", "speech_input": {"entity": {"entities": [
                {"type": "number", "variable": {"name": "{{count}}"}}, {"type": "text", "variable": {"name": "said"}}]}}}
        ]}
    });
    let r = run(
        &question(props.clone()),
        &mut ScriptedCall::new().say("Yes, please!"),
    )
    .await;
    assert_eq!(answer_taken(&r), "a", "exact match after normalisation");
    let r = run(
        &question(props.clone()),
        &mut ScriptedCall::new().say("I want 3 tickets"),
    )
    .await;
    assert_eq!(answer_taken(&r), "b");
    assert_eq!(r.variables.get("count").map(String::as_str), Some("3"));
    assert_eq!(
        r.variables.get("said").map(String::as_str),
        Some("I want 3 tickets")
    );
    let r = run(
        &question(props.clone()),
        &mut ScriptedCall::new().say("four tickets"),
    )
    .await;
    assert_eq!(answer_taken(&r), "b");
    assert_eq!(r.variables.get("count").map(String::as_str), Some("4"));
    let r = run(
        &question(props.clone()),
        &mut ScriptedCall::new().press("1"),
    )
    .await;
    assert_eq!(answer_taken(&r), "a");
    let r = run(&question(props), &mut ScriptedCall::new().press("9")).await;
    assert_eq!(answer_taken(&r), "invalid");
}

#[tokio::test]
async fn barge_in_on_an_interruptible_statement_goes_straight_to_listening() {
    let mut port = ScriptedCall::new().say("yes");
    port.barge_in = true;
    port.webhook_responses.push_back(Err("down".into()));
    run(&fixture(), &mut port).await;
    let statement = port
        .played
        .iter()
        .position(|(_, i)| *i)
        .expect("interruptible prompt");
    assert_eq!(statement, 3);
    assert_eq!(port.listens.len(), 1);
}

#[tokio::test]
async fn barge_in_on_a_reprompt_skips_the_statement_repeat() {
    let props = |interruptible: bool| {
        json!({
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Press 1 or 2."}}, "is_interruptible": false},
            "input_mode": "dtmf",
            "answer": {"answers": [{"answer_id": "a", "dtmf_input": {"value": "1"}}, {"answer_id": "b", "dtmf_input": {"value": "2"}}]},
            "fallback_invalid": {"fallbacks": [{"is_repeat_statement": true, "is_interruptible": interruptible,
                "audio": {"mode": "tts", "tts": {"text": "That key is not on the menu."}}}]}
        })
    };
    // The caller presses 1 over the interruptible reprompt: it is the answer, and the
    // statement is not played again before it is taken.
    let mut port = ScriptedCall::new().press("9").press("1");
    port.barge_in = true;
    let r = run(&question(props(true)), &mut port).await;
    assert_eq!(answer_taken(&r), "a");
    assert_eq!(
        port.played_texts(),
        vec!["Press 1 or 2.", "That key is not on the menu."]
    );
    assert_eq!(port.listens.len(), 2);
    // A reprompt that cannot be interrupted plays out, then the statement is repeated.
    let mut port = ScriptedCall::new().press("9").press("1");
    port.barge_in = true;
    let r = run(&question(props(false)), &mut port).await;
    assert_eq!(answer_taken(&r), "a");
    assert_eq!(
        port.played_texts(),
        vec![
            "Press 1 or 2.",
            "That key is not on the menu.",
            "Press 1 or 2."
        ]
    );
}

#[tokio::test]
async fn a_hang_up_during_a_prompt_ends_the_run() {
    let mut port = ScriptedCall::new();
    port.hang_up_on_play = Some(1);
    let r = run(&fixture(), &mut port).await;
    assert_eq!(r.end, EndReason::HungUp);
    assert!(
        port.hangups.is_empty(),
        "the remote hung up; we do not hang up again"
    );
    assert!(r.trace.events.iter().any(|e| matches!(
        e.event,
        Event::PromptPlayed {
            outcome: PlayOutcome::HungUp,
            ..
        }
    )));
    // a caller who stops answering mid-question is a hang-up too
    let r = run(&fixture(), &mut ScriptedCall::new()).await;
    assert_eq!(r.end, EndReason::HungUp);
}

#[tokio::test]
async fn loops_stop_at_the_step_budget() {
    let v = scenario(json!({
        "increment": {"v1": [{"id": "first", "properties": {"variables": [{"variable": "n"}]}, "outputs": next("c")}]},
        "condition_group": {"v1": [{"id": "c", "properties": {"condition": {"conditions": [
            {"condition_id": "done", "elements": [{"variable": "n", "element_operator": "greater_or_equal", "value": "1000000"}]}]}},
            "outputs": [{"type": "done", "next": "e"}, {"type": "else", "next": "first"}]}]}
    }));
    let mut port = ScriptedCall::new();
    let r = run_with(&v, &call(CallDirection::Outbound), &mut port, Some(50)).await;
    assert_eq!(r.end, EndReason::StepBudget { steps: 50 });
    assert_eq!(r.steps, 50);
    assert_eq!(r.variables.get("n").map(String::as_str), Some("25"));
    assert_eq!(port.hangups.len(), 1);
}

#[tokio::test]
async fn an_unconnected_output_ends_the_call() {
    let v = json!({"constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "properties": {}, "outputs": [{"type": "next", "next": "t"}]}]},
        "audio_tts": {"v1": [{"id": "t", "properties": {"text": "bye"}, "outputs": [{"type": "next", "next": ""}]}]}}}});
    let mut port = ScriptedCall::new();
    let r = run(&v, &mut port).await;
    assert_eq!(
        r.end,
        EndReason::Unconnected {
            brick_id: "t".into(),
            output: "next".into()
        }
    );
    assert_eq!(port.hangups, vec![""]);
    let r = run_with(
        &v,
        &call(CallDirection::Inbound),
        &mut ScriptedCall::new(),
        None,
    )
    .await;
    assert_eq!(r.end, EndReason::NoStart);
}

#[test]
fn a_run_can_be_spawned_on_a_multi_threaded_runtime() {
    fn assert_send<T: Send>(_: &T) {}
    fn assert_sync<T: Sync + Send>() {}
    assert_sync::<Program>();
    let v = fixture();
    let snap = Snapshot::from_value(&v).expect("snapshot");
    let program = Program::new(snap);
    let info = call(CallDirection::Inbound);
    let mut port = ScriptedCall::new();
    let fut = program.run(&info, &mut port);
    assert_send(&fut);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let r = rt.block_on(fut);
    assert_eq!(
        r.end,
        EndReason::End {
            brick_id: "in_end".into()
        }
    );
}

#[tokio::test]
async fn without_start_call_outbound_calls_start_at_outbound_call() {
    let v = json!({"constructor": {"bricks": {
        "outbound_call": {"v1": [{"id": "o", "properties": {"is_voicemail": false}, "outputs": [{"type": "next", "next": "t"}]}]},
        "audio_tts": {"v1": [{"id": "t", "properties": {"text": "hi {{call.recipient}}"}, "outputs": [{"type": "next", "next": "e"}]}]},
        "end": {"v1": [{"id": "e", "properties": {}, "outputs": []}]}}}});
    assert_eq!(
        validate(&Snapshot::from_value(&v).expect("snapshot"), &AcceptAll),
        vec![]
    );
    let mut port = ScriptedCall::new().amd(AmdVerdict::Machine);
    let r = run(&v, &mut port).await;
    assert_eq!(
        entered(&r),
        path(&["o", "t", "e"]),
        "no voicemail check when is_voicemail is false"
    );
    assert_eq!(port.played_texts(), vec!["hi +4930123"]);
    // default voice when there is no start_call: engine defaults (empty fields)
    let PromptSpec::Tts { voice, .. } = &port.played[0].0 else {
        panic!("tts expected")
    };
    assert_eq!((voice.engine.as_str(), voice.speed), ("", None));
}

#[tokio::test]
async fn llm_fallbacks_generate_the_reprompt_and_blank_speech_is_no_input() {
    let props = json!({
        "statement": {"audio": {"mode": "tts", "tts": {"text": "Pick a or b."}}, "is_interruptible": false},
        "answer": {"answers": [{"answer_id": "a", "speech_input": {"tokens": ["alpha"]}}, {"answer_id": "b", "speech_input": {"tokens": ["bravo"]}}]},
        "fallback_invalid": {"fallbacks": [{"is_repeat_statement": false, "type": "llm",
            "llm_properties": {"model": "m", "messages": [{"role": "system", "content": "Rephrase for {{name}}."}]}}]},
        "fallback_empty": {"fallbacks": [{"is_repeat_statement": true}]}
    });
    let mut port = ScriptedCall::new()
        .say("   ")
        .say("beta")
        .llm_reply("Say alpha, please.")
        .say("alpha");
    let r = run(&question(props), &mut port).await;
    assert_eq!(answer_taken(&r), "a");
    assert_eq!(
        port.played_texts(),
        vec!["Pick a or b.", "Pick a or b.", "Say alpha, please."]
    );
    assert_eq!(
        port.llm_requests[0].messages,
        vec![
            ("system".to_string(), "Rephrase for Ann.".to_string()),
            ("user".to_string(), "beta".to_string())
        ]
    );
}

#[tokio::test]
async fn terminal_bricks_stop_even_without_properties() {
    for (kind, want) in [
        (
            "end",
            EndReason::End {
                brick_id: "x".into(),
            },
        ),
        (
            "end_call",
            EndReason::EndCall {
                brick_id: "x".into(),
                signal: String::new(),
            },
        ),
    ] {
        let v = json!({"constructor": {"bricks": {
            "start_call": {"v1": [{"id": "s", "outputs": [{"type": "next", "next": "x"}]}]},
            kind: {"v1": [{"id": "x"}]}}}});
        assert_eq!(
            validate(&Snapshot::from_value(&v).expect("snapshot"), &AcceptAll),
            vec![]
        );
        let mut port = ScriptedCall::new();
        let r = run(&v, &mut port).await;
        assert_eq!(r.end, want);
        assert_eq!(port.hangups, vec![""]);
    }
}

/// The question's `filter` takes filler out before matching and entities; its `entity`
/// reads a date in its `timezone` from any speech answer; an answer's `time` entity too.
#[tokio::test]
async fn question_filter_timezone_and_date_entities() {
    let props = json!({
        "stt_properties": {"timezone": "Asia/Tokyo", "filter": {"filters": ["um", "uh"]}},
        "entity": {"entities": [{"type": "date", "variable": {"name": "day"}}]},
        "answer": {"answers": [
            {"answer_id": "a", "speech_input": {"tokens": ["yes tomorrow"], "mode": "exact"}},
            {"answer_id": "b", "speech_input": {"entity": {"entities": [{"type": "time", "variable": {"name": "at"}}]}}}
        ]}
    });
    let mut port = ScriptedCall::new().say("Um, yes, uh, tomorrow");
    // 2026-11-27 23:30 UTC is already the 28th in Tokyo.
    port.clock = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 11, 27, 23, 30, 0).unwrap();
    let r = run(&question(props.clone()), &mut port).await;
    assert_eq!(answer_taken(&r), "a", "matched once filtered");
    assert_eq!(
        r.variables.get("day").map(String::as_str),
        Some("2026-11-29")
    );

    let mut port = ScriptedCall::new().say("on friday at 3:30 pm");
    port.clock = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 11, 27, 23, 30, 0).unwrap();
    let r = run(&question(props), &mut port).await;
    assert_eq!(answer_taken(&r), "b");
    assert_eq!(r.variables.get("at").map(String::as_str), Some("15:30"));
    // Friday in UTC, but Saturday in Tokyo: the coming Friday is next week's.
    assert_eq!(
        r.variables.get("day").map(String::as_str),
        Some("2026-12-04")
    );
}

/// A reply taken back (the caller went on after an eager end of turn): the state of before
/// the answer is restored (the goal reached on the way to the reply is reached once) and
/// the question listens on without its statement; the second answer decides again, and its
/// reply plays.
#[tokio::test]
async fn a_reply_taken_back_goes_back_to_the_question_which_listens_on() {
    let v = scenario(json!({
        "question": {"v1": [{"id": "first", "properties": {
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Shall we call back?"}}, "is_interruptible": false},
            "answer": {"answers": [
                {"answer_id": "yes", "speech_input": {"tokens": ["yes"]}},
                {"answer_id": "no", "speech_input": {"tokens": ["no"]}}]}},
            "outputs": [{"type": "yes", "next": "g"}, {"type": "no", "next": "e"},
                        {"type": "invalid", "next": "e"}, {"type": "empty", "next": "e"}]}]},
        "goal": {"v1": [{"id": "g", "properties": {"goal": "callback"}, "outputs": next("reply")}]},
        "audio_tts": {"v1": [{"id": "reply", "properties": {"text": "We will call you."}, "outputs": next("e")}]}
    }));
    let mut port = ScriptedCall::new().say("yes").say("yes in the afternoon");
    port.take_back_play = Some(1);
    let r = run(&v, &mut port).await;
    assert_eq!(
        port.played_texts(),
        [
            "Shall we call back?",
            "We will call you.",
            "We will call you."
        ]
    );
    assert_eq!(port.listens.len(), 2);
    assert_eq!(r.goals, vec!["callback"]);
    assert_eq!(
        entered(&r),
        path(&["s", "first", "g", "reply", "first", "g", "reply", "e"])
    );
    let outcomes: Vec<&PlayOutcome> = r
        .trace
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Event::PromptPlayed { outcome, .. } => Some(outcome),
            _ => None,
        })
        .collect();
    assert_eq!(outcomes[1], &PlayOutcome::TakenBack);
}
