//! A question's listening settings in a call (docs/bricks.md, the `stt_properties` table):
//! when caller speech interrupts a prompt and when listening starts.

use serde_json::{Value, json};

use super::super::testing::{Act, CallTest, Script};
use super::{question, question_with, taken};

const LONG: &str = "Please say your code after this rather long introduction. \
    We will read it back to you, so speak clearly and slowly. Thank you for calling.";

/// When the statement ended (ms since the answer): `at_ms + elapsed_ms` of the first prompt.
fn ended_ms(h: &Value) -> u64 {
    let p = &h["prompts"][0];
    p["at_ms"].as_u64().unwrap() + p["elapsed_ms"].as_u64().unwrap()
}

/// `interruption_shift` `after` 3000 ms: speech 1 s into the statement does not stop it,
/// speech 3.5 s in does; without the shift the first speech stops it at once.
#[tokio::test(start_paused = true)]
async fn interruption_shift_opens_barge_in_part_way_through_the_prompt() {
    let script = || {
        Script::new()
            .at(1000, Act::Say("hello".into()))
            .at(3500, Act::Say("forty two".into()))
    };
    let shifted = json!({"interruption_shift": {"direction": "after", "duration": 3000}});
    let done = CallTest::new(question_with(LONG, true, "speech", shifted))
        .caller(script())
        .run()
        .await;
    let h = &done.history;
    assert_eq!(
        h["prompts"][0]["outcome"], "interrupted",
        "{}",
        h["prompts"]
    );
    assert!((3500..=3520).contains(&ended_ms(h)), "{}", h["prompts"]);
    assert_eq!(taken(h, "ask"), "code42", "{}", h["trace"]);

    let plain = CallTest::new(question_with(LONG, true, "speech", Value::Null))
        .caller(script())
        .run()
        .await;
    assert!((1000..=1020).contains(&ended_ms(&plain.history)));
}

/// `interruption_shift` `before` 1500 ms: only speech over the statement's last 1.5 s
/// stops it.
#[tokio::test(start_paused = true)]
async fn interruption_shift_before_opens_barge_in_over_the_prompts_end() {
    // The statement's length, from a call where nobody speaks.
    let quiet = CallTest::new(question_with(LONG, true, "speech", Value::Null))
        .caller(Script::new())
        .run()
        .await;
    let end = ended_ms(&quiet.history);
    assert!(end > 4000, "{}", quiet.history["prompts"]);
    let shifted = json!({"interruption_shift": {"direction": "before", "duration": 1500}});
    let done = CallTest::new(question_with(LONG, true, "speech", shifted))
        .caller(
            Script::new()
                .at(end - 3000, Act::Say("hello".into()))
                .at(end - 1000, Act::Say("forty two".into())),
        )
        .run()
        .await;
    let h = &done.history;
    assert_eq!(
        h["prompts"][0]["outcome"], "interrupted",
        "{}",
        h["prompts"]
    );
    let cut = ended_ms(h);
    assert!((end - 1000..=end - 980).contains(&cut), "{cut} {end}");
    assert_eq!(taken(h, "ask"), "code42", "{}", h["trace"]);
}

/// `enable_voice_activity_detection: false`: the caller's speech does not stop an
/// interruptible statement, a key does.
#[tokio::test(start_paused = true)]
async fn without_voice_activity_detection_only_keys_interrupt() {
    let no_vad = json!({"enable_voice_activity_detection": false});
    let done = CallTest::new(question_with(LONG, true, "speech_and_dtmf", no_vad))
        .caller(
            Script::new()
                .at(1000, Act::Say("hello".into()))
                .at(2500, Act::Keys("42#".into())),
        )
        .run()
        .await;
    let h = &done.history;
    assert_eq!(
        h["prompts"][0]["outcome"], "interrupted",
        "{}",
        h["prompts"]
    );
    assert!((2500..=2520).contains(&ended_ms(h)), "{}", h["prompts"]);
    assert_eq!(taken(h, "ask"), "code42", "{}", h["trace"]);
}

/// `recognition_shift` `after` 2000 ms: what the caller says in the first 2 s after the
/// statement is not heard; listening starts then. Without it, the same words answer.
#[tokio::test(start_paused = true)]
async fn recognition_shift_starts_listening_after_the_prompt() {
    let statement = "Say your code.";
    let quiet = CallTest::new(question_with(statement, false, "speech", Value::Null))
        .caller(Script::new())
        .run()
        .await;
    let end = ended_ms(&quiet.history);
    let script = || {
        Script::new()
            .at(end + 300, Act::Say("forty two".into()))
            .at(end + 3000, Act::Say("seven".into()))
    };
    let shifted = json!({"recognition_shift": {"direction": "after", "duration": 2000}});
    let done = CallTest::new(question_with(statement, false, "speech", shifted))
        .caller(script())
        .run()
        .await;
    let h = &done.history;
    assert_eq!(taken(h, "ask"), "code7", "{}", h["trace"]);
    let started = h["turns"][0]["started_ms"].as_u64().unwrap();
    assert!(
        (end + 2000..=end + 2020).contains(&started),
        "{}",
        h["turns"]
    );

    let plain = CallTest::new(question_with(statement, false, "speech", Value::Null))
        .caller(script())
        .run()
        .await;
    assert_eq!(taken(&plain.history, "ask"), "code42");
}

/// A dictionary the question names is resolved through the store when the turn starts;
/// one the store cannot give (the rig's database has no tables: the lookup fails) is left
/// out of the hints, the turn's notes say so, and the call goes on. The resolve itself
/// (own, preset, another account's) is control/tests/dictionaries.rs.
#[tokio::test(start_paused = true)]
async fn a_dictionary_the_store_cannot_give_is_left_out_and_noted() {
    let stt = json!({"class_token": {"tokens": ["dic_elsewhere"]}});
    let done = CallTest::new(question_with("Say your code.", false, "speech", stt))
        // The failing lookup is real I/O: the caller answers once listening started.
        .caller(Script::new().answers("forty two"))
        .run()
        .await;
    let h = &done.history;
    assert_eq!(taken(h, "ask"), "code42", "{}", h["trace"]);
    let notes = h["turns"][0]["notes"].to_string();
    assert!(
        notes.contains("dictionary dic_elsewhere: not read") && notes.contains("left out"),
        "{}",
        h["turns"]
    );
}

/// The recogniser's end of turn with an interim transcript that names one answer
/// ("forty two" of seven / forty two) ends the turn at once with it, before the final
/// ("forty two please"), and the turn's notes say so; the final is recorded as the turn's
/// `final_transcript` when it arrives. An interim naming no answer leaves the turn to the
/// final.
#[tokio::test(start_paused = true)]
async fn an_end_of_turn_interim_that_names_one_answer_decides_the_question() {
    let say = |interim: &str| {
        Script::new().at(
            3000,
            Act::SayWithEndOfTurn {
                interim: interim.into(),
                text: "forty two please".into(),
            },
        )
    };
    let done = CallTest::new(question("Your code?", false, "speech"))
        .caller(say("forty two"))
        .run()
        .await;
    let h = &done.history;
    assert_eq!(taken(h, "ask"), "code42", "{}", h["trace"]);
    let turn = &h["turns"][0];
    assert_eq!(turn["transcript"], "forty two", "{turn}");
    // The final, which came after the branch was taken, is recorded beside the interim.
    assert_eq!(turn["final_transcript"], "forty two please", "{turn}");
    // The turn ended before the speech detector's hangover: the detector, turned off,
    // told where the speech ended, and the reply's response time counts from there.
    let ms = |k: &str| turn[k].as_u64().unwrap_or_else(|| panic!("{k}: {turn}"));
    assert!(ms("speech_ended_ms") >= ms("speech_started_ms"), "{turn}");
    assert!(ms("speech_ended_ms") <= ms("ended_ms"), "{turn}");
    assert_eq!(
        ms("response_ms"),
        ms("reply_first_rtp_ms") - ms("speech_ended_ms"),
        "{turn}"
    );
    assert!(
        turn["notes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n.as_str().unwrap().contains("interim transcript")),
        "{turn}"
    );

    let undecided = CallTest::new(question("Your code?", false, "speech"))
        .caller(say("forty"))
        .run()
        .await;
    let turn = &undecided.history["turns"][0];
    assert_eq!(taken(&undecided.history, "ask"), "code42");
    assert_eq!(turn["transcript"], "forty two please", "{turn}");
    assert!(turn.get("final_transcript").is_none(), "{turn}");
    assert!(
        turn.get("notes")
            .is_none_or(|n| n.as_array().unwrap().is_empty()),
        "{turn}"
    );
}

/// The recogniser's eager end of turn names one answer ("forty two"): the reply starts at
/// once. The caller goes on 200 ms into it ("… please"): the reply stops at the speech
/// detector's onset, not 100 ms later at the recogniser's `TurnResumed` (taken back), the
/// question listens on and the two parts are one answer, whose reply then plays whole; the
/// goal after the reply is reached once.
#[tokio::test(start_paused = true)]
async fn a_reply_to_an_eager_answer_is_taken_back_when_the_caller_goes_on() {
    let eager = |more: Option<(u64, String)>| {
        Script::new().at(
            3000,
            Act::SayEager {
                text: "forty two".into(),
                more,
            },
        )
    };
    let done = CallTest::new(question("Your code?", false, "speech"))
        .caller(eager(Some((200, "please".into()))))
        .run()
        .await;
    let h = &done.history;
    let reply = "Code accepted. Thank you.";
    let prompts = h["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 3, "{}", h["prompts"]);
    assert_eq!(prompts[1]["prompt"]["text"], reply);
    assert_eq!(prompts[1]["outcome"], "taken_back", "{}", h["prompts"]);
    // Stopped at the packet after the caller went on, 200 ms in.
    let cut = prompts[1]["played_ms"].as_u64().unwrap();
    assert!((180..=220).contains(&cut), "{}", h["prompts"]);
    assert_eq!(prompts[2]["prompt"]["text"], reply);
    assert_eq!(prompts[2]["outcome"], "completed");
    let heard: Vec<u64> = done.heard.played.iter().map(|p| p.played_ms).collect();
    assert_eq!(
        heard[1], cut,
        "the caller heard the reply until it was taken back"
    );
    let turns = h["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{}", h["turns"]);
    assert_eq!(turns[0]["transcript"], "forty two");
    assert!(turns[0]["notes"].to_string().contains("eager end of turn"));
    assert_eq!(turns[1]["transcript"], "forty two please", "{}", h["turns"]);
    assert!(turns[1]["notes"].to_string().contains("taken back"));
    assert_eq!(h["goals"], json!(["code_ok"]), "{}", h["trace"]);
    let outcomes: Vec<&Value> = h["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "prompt_played")
        .map(|e| &e["outcome"])
        .collect();
    assert_eq!(outcomes[1], &json!({"result": "taken_back"}));

    // The caller does not go on: the reply plays whole, and the turn records the final.
    let kept = CallTest::new(question("Your code?", false, "speech"))
        .caller(eager(None))
        .run()
        .await;
    let h = &kept.history;
    assert_eq!(h["prompts"][1]["outcome"], "completed", "{}", h["prompts"]);
    assert_eq!(h["prompts"].as_array().unwrap().len(), 2);
    let turns = h["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "{}", h["turns"]);
    assert_eq!(turns[0]["transcript"], "forty two");
    assert_eq!(turns[0]["final_transcript"], "forty two", "{}", h["turns"]);
    assert_eq!(h["goals"], json!(["code_ok"]));
}
