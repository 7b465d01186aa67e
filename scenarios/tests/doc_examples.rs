//! The examples of `docs/scenario-examples.md` stay true: every `json` block is a snapshot
//! `POST /v1/scenario` takes and validation accepts, the blocks use every brick kind of the
//! every-kind fixture (each in its own section), and the questions answered by speech, by keys
//! or by a language model take the branches the page describes when run through the
//! interpreter against a scripted call.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use callsmith_scenarios::history::Event;
use callsmith_scenarios::interpreter::{CallDirection, CallInfo, CallRun, Program};
use callsmith_scenarios::testing::ScriptedCall;
use callsmith_scenarios::{RefProblem, Snapshot, ValidationContext, validate};
use serde_json::Value;

const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/scenario-examples.md");

/// One ```json block of the page.
struct Example {
    /// The headings the block is under: `kind`, or `kind / subsection`.
    heading: String,
    /// The `##` heading alone (the brick kind the section is about).
    section: String,
    /// Text of the section before the block, outside code blocks.
    prose: String,
    /// 1-based line of the opening fence.
    line: usize,
    value: Value,
}

impl Example {
    fn at(&self) -> String {
        format!("\"{}\" (line {})", self.heading, self.line)
    }
}

fn examples() -> Vec<Example> {
    let text = std::fs::read_to_string(PAGE).unwrap_or_else(|e| panic!("{PAGE}: {e}"));
    let mut out = Vec::new();
    let (mut h2, mut h3, mut prose) = (String::new(), String::new(), String::new());
    // (language, line of the opening fence, body)
    let mut fence: Option<(String, usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if fence.is_some() {
            if line.trim_start().starts_with("```") {
                let (lang, at, body) = fence.take().expect("an open fence");
                if lang == "json" {
                    let heading = if h3.is_empty() {
                        h2.clone()
                    } else {
                        format!("{h2} / {h3}")
                    };
                    let value = serde_json::from_str(&body).unwrap_or_else(|e| {
                        panic!("the json block under \"{heading}\" (line {at}) does not parse: {e}")
                    });
                    out.push(Example {
                        heading,
                        section: h2.clone(),
                        prose: prose.clone(),
                        line: at,
                        value,
                    });
                }
            } else if let Some((_, _, body)) = fence.as_mut() {
                body.push_str(line);
                body.push('\n');
            }
            continue;
        }
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            fence = Some((lang.trim().to_string(), i + 1, String::new()));
        } else if let Some(t) = line.strip_prefix("### ") {
            h3 = t.trim().to_string();
            prose.clear();
        } else if let Some(t) = line.strip_prefix("## ") {
            h2 = t.trim().to_string();
            h3.clear();
            prose.clear();
        } else {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    assert!(fence.is_none(), "{PAGE} ends inside a code block");
    assert!(!out.is_empty(), "{PAGE} has no json block");
    out
}

fn fixture_kinds() -> BTreeSet<String> {
    let v: Value =
        serde_json::from_str(include_str!("fixtures/all_bricks.json")).expect("fixture is JSON");
    v["constructor"]["bricks"]
        .as_object()
        .expect("fixture bricks")
        .keys()
        .cloned()
        .collect()
}

/// Kinds with at least one brick in a snapshot.
fn kinds_used(v: &Value) -> BTreeSet<String> {
    v["constructor"]["bricks"]
        .as_object()
        .map(|b| {
            b.iter()
                .filter(|(_, g)| g["v1"].as_array().is_some_and(|a| !a.is_empty()))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default()
}

fn bricks<'a>(v: &'a Value, kind: &str) -> Vec<&'a Value> {
    v["constructor"]["bricks"][kind]["v1"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn brick_kind_and_value<'a>(v: &'a Value, id: &str) -> Option<(&'a str, &'a Value)> {
    v["constructor"]["bricks"]
        .as_object()?
        .iter()
        .find_map(|(k, g)| {
            g["v1"]
                .as_array()?
                .iter()
                .find(|b| b["id"] == id)
                .map(|b| (k.as_str(), b))
        })
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn answers(q: &Value) -> Vec<&Value> {
    q["properties"]["answer"]["answers"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn tokens(answer: &Value) -> Vec<String> {
    match &answer["speech_input"]["tokens"] {
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Value::String(s) => s
            .split(',')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect(),
        _ => Vec::new(),
    }
}

fn fallbacks<'a>(q: &'a Value, list: &str) -> Vec<&'a Value> {
    q["properties"][list]["fallbacks"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// The brick a question's output of `output_type` leads to; the page wires every output a
/// user reads about explicitly.
fn branch<'a>(ex: &Example, q: &'a Value, output_type: &str) -> &'a str {
    q["outputs"]
        .as_array()
        .and_then(|o| o.iter().find(|o| o["type"] == output_type))
        .and_then(|o| o["next"].as_str())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{}: question {} has no connected {output_type:?} output",
                ex.at(),
                q["id"]
            )
        })
}

/// Records what validation asks the outside world, accepting everything.
#[derive(Default)]
struct Lookups {
    classifiers: RefCell<Vec<String>>,
    audio: RefCell<Vec<String>>,
    urls: RefCell<Vec<String>>,
}

impl ValidationContext for Lookups {
    fn classifier_exists(&self, id: &str, version: i64) -> bool {
        self.classifiers
            .borrow_mut()
            .push(format!("{id}@{version}"));
        true
    }
    fn audio_problem(&self, reference: &str) -> Option<RefProblem> {
        self.audio.borrow_mut().push(reference.to_string());
        None
    }
    fn url_problem(&self, url: &str) -> Option<String> {
        self.urls.borrow_mut().push(url.to_string());
        None
    }
}

#[test]
fn every_example_is_a_valid_snapshot() {
    for ex in examples() {
        let obj = ex
            .value
            .as_object()
            .unwrap_or_else(|| panic!("{}: a snapshot is a JSON object", ex.at()));
        // POST /v1/scenario takes {name, description?, constructor} and refuses other keys.
        let keys: BTreeSet<&str> = obj.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            BTreeSet::from(["constructor", "name"]),
            "{}: a snapshot is {{name, constructor}}",
            ex.at()
        );
        assert!(
            ex.value["name"]
                .as_str()
                .is_some_and(|n| !n.trim().is_empty()),
            "{}: the snapshot needs a name",
            ex.at()
        );
        let snapshot = Snapshot::from_value(&ex.value)
            .unwrap_or_else(|e| panic!("{}: not a snapshot: {e}", ex.at()));
        let lookups = Lookups::default();
        let errors = validate(&snapshot, &lookups);
        assert!(
            errors.is_empty(),
            "{}: the example must validate without SCN1xx entries, got {errors:#?}",
            ex.at()
        );
        // What publishing checks against the account: no classifier (it would have to exist,
        // SCN117); audio only as an uploaded file's id the section says how to get (SCN118);
        // webhook URLs naming hosts, not loopback or private addresses (SCN123).
        assert_eq!(
            lookups.classifiers.borrow().as_slice(),
            &[] as &[String],
            "{}: an example that names a classifier cannot be published as it is",
            ex.at()
        );
        for reference in lookups.audio.borrow().iter() {
            assert!(
                reference.starts_with("aud_") && ex.prose.contains("POST /v1/audio"),
                "{}: audio reference {reference:?} must be an aud_ id the section explains how to upload",
                ex.at()
            );
        }
        for url in lookups.urls.borrow().iter() {
            let host = url::Url::parse(url)
                .ok()
                .and_then(|u| u.domain().map(str::to_string));
            assert!(
                host.is_some_and(|h| h != "localhost"),
                "{}: webhook url {url:?} must name a public host",
                ex.at()
            );
        }
    }
}

#[test]
fn the_examples_cover_every_brick_kind_each_in_its_own_section() {
    let examples = examples();
    let all = fixture_kinds();
    assert_eq!(all.len(), 18, "the fixture holds every kind");
    let used: BTreeSet<String> = examples.iter().flat_map(|e| kinds_used(&e.value)).collect();
    let missing: Vec<&String> = all.difference(&used).collect();
    assert!(missing.is_empty(), "no example uses {missing:?}");
    for kind in &all {
        assert!(
            examples
                .iter()
                .any(|e| &e.section == kind && kinds_used(&e.value).contains(kind)),
            "no section \"## {kind}\" with an example using a {kind} brick"
        );
    }
}

#[test]
fn a_question_is_answered_by_speech() {
    let examples = examples();
    let speech: Vec<(&Example, &Value)> = examples
        .iter()
        .flat_map(|e| {
            bricks(&e.value, "question")
                .into_iter()
                .map(move |q| (e, q))
        })
        .filter(|(_, q)| q["properties"]["input_mode"] == "speech")
        .filter(|(_, q)| answers(q).iter().any(|a| !tokens(a).is_empty()))
        .collect();
    assert!(
        !speech.is_empty(),
        "no question with input_mode speech and answer phrases"
    );
    for (ex, q) in speech {
        let general = &bricks(&ex.value, "start_call")
            .first()
            .unwrap_or_else(|| panic!("{}: no start_call", ex.at()))["properties"]["stt_general"];
        assert!(
            !text(general, "/language").is_empty(),
            "{}: start_call needs stt_general with a language",
            ex.at()
        );
        for output in ["invalid", "empty"] {
            branch(ex, q, output);
        }
    }
}

// ---------------------------------------------------------------- running the questions

fn call() -> CallInfo {
    // A test call through scenario_sid: no dispatch data.
    CallInfo {
        direction: CallDirection::Outbound,
        recipient: "+15550001".into(),
        from: "+4930100200".into(),
        communication_id: "com_doc".into(),
        timezone: chrono_tz::Europe::Berlin,
        data: BTreeMap::new(),
    }
}

async fn run(ex: &Example, port: &mut ScriptedCall) -> CallRun {
    let snapshot = Snapshot::from_value(&ex.value).expect("snapshot");
    Program::new(snapshot).run(&call(), port).await
}

/// The brick entered right after the first visit of `id`.
fn entered_after(r: &CallRun, id: &str) -> Option<String> {
    let entered: Vec<&str> = r
        .trace
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Event::BrickEntered { brick_id, .. } => Some(brick_id.as_str()),
            _ => None,
        })
        .collect();
    let at = entered.iter().position(|b| *b == id)?;
    entered.get(at + 1).map(|b| b.to_string())
}

/// Asserts the call went from question `q` down its `output_type` branch, and reached that
/// branch's goal when the branch is a goal brick.
fn assert_took(ex: &Example, q: &Value, r: &CallRun, output_type: &str, what: &str) {
    let qid = text(q, "/id");
    let want = branch(ex, q, output_type);
    assert_eq!(
        entered_after(r, qid).as_deref(),
        Some(want),
        "{}: {what} should take {output_type:?} to {want:?}; trace {:#?}",
        ex.at(),
        r.trace.events
    );
    if let Some(("goal", g)) = brick_kind_and_value(&ex.value, want) {
        let goal = text(g, "/properties/goal");
        assert!(
            r.goals.iter().any(|x| x == goal),
            "{}: {what} should reach the goal {goal:?}, reached {:?}",
            ex.at(),
            r.goals
        );
    }
}

fn questions_where(examples: &[Example], keep: impl Fn(&Value) -> bool) -> Vec<(&Example, &Value)> {
    examples
        .iter()
        .flat_map(|e| {
            bricks(&e.value, "question")
                .into_iter()
                .map(move |q| (e, q))
        })
        .filter(|(_, q)| keep(q))
        .collect()
}

fn fallback_texts(q: &Value, list: &str) -> Vec<String> {
    fallbacks(q, list)
        .iter()
        .map(|f| text(f, "/audio/tts/text").to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// "Yes" → "Yes!": what a recogniser writes differs from the phrase in case and punctuation.
fn spoken(phrase: &str) -> String {
    let mut c = phrase.chars();
    match c.next() {
        Some(first) => format!("{}{}!", first.to_uppercase(), c.as_str()),
        None => String::new(),
    }
}

#[tokio::test]
async fn spoken_answers_take_their_branch_and_unknown_phrases_take_invalid() {
    let examples = examples();
    let speech = questions_where(&examples, |q| {
        matches!(
            q["properties"]["input_mode"].as_str().unwrap_or(""),
            "" | "speech" | "speech_and_dtmf"
        ) && answers(q).iter().any(|a| !tokens(a).is_empty())
    });
    assert!(!speech.is_empty(), "no question with answer phrases");
    for (ex, q) in speech {
        // Every phrase of every answer (the language model, if any, is not scripted: it
        // fails, and the question goes on with the phrase lists).
        for a in answers(q) {
            let id = text(a, "/answer_id");
            for phrase in tokens(a) {
                let said = if text(a, "/speech_input/mode") == "exact" {
                    phrase.clone()
                } else {
                    spoken(&phrase)
                };
                let mut port = ScriptedCall::new().say(&said);
                let r = run(ex, &mut port).await;
                assert_took(ex, q, &r, id, &format!("saying {said:?}"));
            }
        }

        // A phrase no answer lists: every invalid fallback, then `invalid`.
        let nonsense = "Purple elephant.";
        for a in answers(q) {
            for t in tokens(a) {
                assert!(
                    !nonsense.to_lowercase().contains(&t.to_lowercase()),
                    "{}: pick a phrase that avoids {t:?}",
                    ex.at()
                );
            }
        }
        let tries = fallbacks(q, "fallback_invalid").len() + 1;
        let mut port = ScriptedCall::new();
        for _ in 0..tries {
            port = port.say(nonsense);
        }
        let r = run(ex, &mut port).await;
        assert_took(
            ex,
            q,
            &r,
            "invalid",
            &format!("saying {nonsense:?} {tries} times"),
        );
        let played = port.played_texts();
        for t in fallback_texts(q, "fallback_invalid") {
            assert!(
                played.contains(&t),
                "{}: the invalid fallback {t:?} should play; played {played:?}",
                ex.at()
            );
        }

        // Silence: every empty fallback, then `empty`.
        let tries = fallbacks(q, "fallback_empty").len() + 1;
        let mut port = ScriptedCall::new();
        for _ in 0..tries {
            port = port.silence();
        }
        let r = run(ex, &mut port).await;
        assert_took(ex, q, &r, "empty", &format!("silence {tries} times"));
        let played = port.played_texts();
        for t in fallback_texts(q, "fallback_empty") {
            assert!(
                played.contains(&t),
                "{}: the empty fallback {t:?} should play; played {played:?}",
                ex.at()
            );
        }
    }
}

#[tokio::test]
async fn keys_take_their_branch_and_other_keys_take_invalid() {
    let examples = examples();
    let keyed = questions_where(&examples, |q| {
        matches!(
            q["properties"]["input_mode"].as_str().unwrap_or(""),
            "dtmf" | "speech_and_dtmf"
        )
    });
    assert!(!keyed.is_empty(), "no question that takes keys");
    for (ex, q) in keyed {
        let mut values = BTreeSet::new();
        for a in answers(q) {
            let key = text(a, "/dtmf_input/value");
            if key.is_empty() {
                continue;
            }
            values.insert(key.to_string());
            let mut port = ScriptedCall::new().press(key);
            let r = run(ex, &mut port).await;
            assert_took(ex, q, &r, text(a, "/answer_id"), &format!("pressing {key}"));
        }
        assert!(!values.is_empty(), "{}: no answer has a key", ex.at());
        let other = ["9", "8", "0", "*"]
            .into_iter()
            .find(|k| !values.contains(*k))
            .expect("a key no answer uses");
        let tries = fallbacks(q, "fallback_invalid").len() + 1;
        let mut port = ScriptedCall::new();
        for _ in 0..tries {
            port = port.press(other);
        }
        let r = run(ex, &mut port).await;
        assert_took(
            ex,
            q,
            &r,
            "invalid",
            &format!("pressing {other} {tries} times"),
        );
    }
}

#[tokio::test]
async fn a_language_model_picks_the_answer_and_words_the_reprompt() {
    let examples = examples();
    let with_llm = questions_where(&examples, |q| {
        !text(
            q,
            "/properties/stt_properties/intent_properties/llm_properties/model",
        )
        .is_empty()
    });
    assert!(!with_llm.is_empty(), "no question understood by a model");
    let vague = "Hmm, let me see.";
    for (ex, q) in with_llm {
        for a in answers(q) {
            for t in tokens(a) {
                assert!(
                    !vague.to_lowercase().contains(&t.to_lowercase()),
                    "{}: pick a phrase that avoids {t:?}",
                    ex.at()
                );
            }
        }
        // The model names the answer: its branch, whatever the phrase lists say.
        for a in answers(q) {
            let id = text(a, "/answer_id");
            let mut port = ScriptedCall::new().say(vague).llm_reply(id);
            let r = run(ex, &mut port).await;
            assert_took(ex, q, &r, id, &format!("the model answering {id:?}"));
        }
        // The model places the answer nowhere: a fallback with llm_properties and no audio
        // speaks the model's reprompt, then the next answer counts.
        let generated = fallbacks(q, "fallback_invalid").first().is_some_and(|f| {
            text(f, "/audio/tts/text").is_empty() && !text(f, "/llm_properties/model").is_empty()
        });
        if generated {
            let first = answers(q)
                .first()
                .map(|a| text(a, "/answer_id"))
                .expect("an answer");
            let reprompt = "Would you like to keep the day, pick another or talk to someone?";
            let mut port = ScriptedCall::new()
                .say(vague)
                .llm_reply("none")
                .llm_reply(reprompt)
                .say(vague)
                .llm_reply(first);
            let r = run(ex, &mut port).await;
            assert!(
                port.played_texts().iter().any(|p| p == reprompt),
                "{}: the generated reprompt should be spoken; played {:?}",
                ex.at(),
                port.played_texts()
            );
            assert_took(ex, q, &r, first, "an answer after the generated reprompt");
        }
    }
}

#[tokio::test]
async fn a_spoken_number_is_captured_into_its_variable() {
    let examples = examples();
    let capturing = questions_where(&examples, |q| {
        answers(q).iter().any(|a| {
            tokens(a).is_empty()
                && a["speech_input"]["entity"]["entities"]
                    .as_array()
                    .is_some_and(|e| !e.is_empty() && e.iter().all(|e| e["type"] == "number"))
        })
    });
    assert!(!capturing.is_empty(), "no question capturing a number");
    for (ex, q) in capturing {
        let a = answers(q)
            .into_iter()
            .find(|a| tokens(a).is_empty())
            .expect("the capturing answer");
        let variables: Vec<&str> = a["speech_input"]["entity"]["entities"]
            .as_array()
            .expect("entities")
            .iter()
            .map(|e| text(e, "/variable/name"))
            .collect();
        for (said, number) in [("Three, I think.", "3"), ("About 12 of them.", "12")] {
            let mut port = ScriptedCall::new().say(said);
            let r = run(ex, &mut port).await;
            assert_took(
                ex,
                q,
                &r,
                text(a, "/answer_id"),
                &format!("saying {said:?}"),
            );
            for v in &variables {
                assert_eq!(
                    r.variables.get(*v).map(String::as_str),
                    Some(number),
                    "{}: saying {said:?} should set {v}",
                    ex.at()
                );
            }
        }
    }
}

/// What the caller does in a scripted call.
enum Caller {
    Says(&'static str),
    Presses(&'static str),
    Silent,
}

/// A call a question section describes after its example.
struct Case {
    /// The section heading of the example.
    heading: &'static str,
    /// What the caller does, in order.
    caller: Vec<Caller>,
    /// The language model's replies, in order.
    replies: Vec<&'static str>,
    /// The goals the page says the call reaches (none: the call ends without one).
    goals: Vec<&'static str>,
}

fn case(heading: &'static str, caller: Vec<Caller>, goals: Vec<&'static str>) -> Case {
    Case {
        heading,
        caller,
        replies: Vec::new(),
        goals,
    }
}

/// The calls the question sections describe after "At run time" reach the goals the page
/// says. Each utterance is quoted from the section's text, so the test and the page change
/// together.
#[tokio::test]
async fn the_question_sections_run_as_their_text_says() {
    use Caller::*;
    const SPEECH: &str = "question / A question answered by speech";
    const KEYS: &str = "question / Keys or speech";
    const LLM: &str = "question / Understanding with a language model, and a generated fallback";
    const VALUE: &str = "question / Capturing a value from speech";
    let cases = [
        case(
            SPEECH,
            vec![Says("Yes, that works")],
            vec!["delivery_confirmed"],
        ),
        case(
            SPEECH,
            vec![Says("Not tomorrow, please")],
            vec!["delivery_declined"],
        ),
        case(
            SPEECH,
            vec![Says("Purple elephant"), Says("Purple elephant")],
            vec!["not_understood"],
        ),
        case(SPEECH, vec![Silent, Silent], vec!["no_answer"]),
        case(KEYS, vec![Presses("1")], vec!["change_requested"]),
        case(
            KEYS,
            vec![Says("I need another day")],
            vec!["change_requested"],
        ),
        case(KEYS, vec![Presses("2")], vec!["person_requested"]),
        case(
            KEYS,
            vec![Says("a person, please")],
            vec!["person_requested"],
        ),
        case(KEYS, vec![Presses("9"), Presses("9")], vec![]),
        case(KEYS, vec![Silent, Silent], vec![]),
        Case {
            replies: vec!["reschedule"],
            ..case(
                LLM,
                vec![Says("I won't be home on Friday, can you come next week?")],
                vec!["reschedule_requested"],
            )
        },
        case(
            VALUE,
            vec![Says("three, I think")],
            vec!["parcel_count_noted"],
        ),
        case(
            VALUE,
            vec![Says("I am not sure"), Says("I am not sure")],
            vec![],
        ),
    ];
    let examples = examples();
    for c in &cases {
        let ex = examples
            .iter()
            .find(|e| e.heading == c.heading)
            .unwrap_or_else(|| panic!("no example under \"{}\"", c.heading));
        let mut port = ScriptedCall::new();
        for step in &c.caller {
            port = match step {
                Says(s) => {
                    assert!(
                        ex.prose.contains(s) || page_after(ex).contains(s),
                        "{}: the page should quote {s:?}",
                        ex.at()
                    );
                    port.say(s)
                }
                Presses(k) => port.press(k),
                Silent => port.silence(),
            };
        }
        for r in &c.replies {
            port = port.llm_reply(r);
        }
        let r = run(ex, &mut port).await;
        assert_eq!(
            r.goals,
            c.goals,
            "{}: goals reached; trace {:#?}",
            ex.at(),
            r.trace.events
        );
    }
}

/// The text between an example's block and the next heading (its "At run time" line).
fn page_after(ex: &Example) -> String {
    let text = std::fs::read_to_string(PAGE).unwrap_or_default();
    let mut lines = text.lines().skip(ex.line);
    // Skip the block itself, then take the prose up to the next heading.
    lines.by_ref().find(|l| l.trim_start().starts_with("```"));
    lines
        .take_while(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}
