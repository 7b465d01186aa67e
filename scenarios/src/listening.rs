//! The listening settings of a question (`stt_properties`) as a live call applies them,
//! each resolved here once: recognition hints, voice activity detection, when caller speech
//! interrupts a prompt and when listening starts. The interpreter puts the results into
//! [`crate::port::SpeechSpec`] and the prompts' [`Interruption`]; docs/bricks.md lists
//! every field.

use crate::codes::{Code, ScenarioError};
use crate::interpreter::normalize;
use crate::interpreter::phrases;
use crate::model::{Answer, Entity, EntitySet, QuestionProps, Shift, SttProperties};
use crate::port::{Heard, Interruption, Patience, SpeechBargeIn};

/// Whether a hint names one of the account's STT dictionaries (`dic_…`) rather than
/// being a phrase.
pub fn is_dictionary(hint: &str) -> bool {
    hint.starts_with("dic_")
}

/// The account STT dictionaries a question names among its hints (`tokens`,
/// `class_token.tokens`): the engine adds their words to the hints.
pub fn dictionaries(stt: Option<&SttProperties>) -> Vec<String> {
    all_hints(stt)
        .into_iter()
        .filter(|h| is_dictionary(h))
        .collect()
}

/// The recognition hints of a question: its `tokens` then its `class_token.tokens`
/// (each an array of phrases or one comma-separated string), trimmed, without repeats,
/// dictionary ids left out ([`dictionaries`]).
pub fn hints(stt: Option<&SttProperties>) -> Vec<String> {
    all_hints(stt)
        .into_iter()
        .filter(|h| !is_dictionary(h))
        .collect()
}

fn all_hints(stt: Option<&SttProperties>) -> Vec<String> {
    let Some(s) = stt else {
        return Vec::new();
    };
    let tokens = s.tokens.get().map(phrases).unwrap_or_default();
    let classes = s
        .class_token
        .get()
        .and_then(|c| c.tokens.get())
        .map(phrases)
        .unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    for p in tokens.into_iter().chain(classes) {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// Whether voice activity detection shapes the question's turn: on unless the question
/// sets `enable_voice_activity_detection` to `false` (absent or not a boolean: on).
pub fn vad_on(stt: Option<&SttProperties>) -> bool {
    stt.and_then(|s| s.enable_voice_activity_detection.get())
        .copied()
        .unwrap_or(true)
}

/// A shift's direction: `after` (also empty) or `before`; None for anything else.
fn direction(shift: &Shift) -> Option<Direction> {
    match shift.direction.str().trim().to_ascii_lowercase().as_str() {
        "" | "after" => Some(Direction::After),
        "before" => Some(Direction::Before),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    After,
    Before,
}

/// A shift's duration in whole ms (0 when absent or not a number).
fn shift_ms(shift: &Shift) -> u64 {
    shift
        .duration
        .f64()
        .filter(|d| d.is_finite() && *d > 0.0)
        .map_or(0, |d| d.round() as u64)
}

/// Who may stop one of the question's prompts whose `is_interruptible` is `interruptible`:
/// keys by that flag alone; caller speech only with voice activity detection on, and then
/// as `interruption_shift` says: `after` N ms = once N ms of the prompt have played,
/// `before` N ms = over its last N ms (an unknown direction: no shift, SCN129).
pub fn interruption(stt: Option<&SttProperties>, interruptible: bool) -> Interruption {
    if !interruptible {
        return Interruption::NONE;
    }
    let speech = if !vad_on(stt) {
        SpeechBargeIn::Off
    } else {
        match stt.and_then(|s| s.interruption_shift.get()) {
            Some(shift) => match direction(shift) {
                Some(Direction::Before) => SpeechBargeIn::Last(shift_ms(shift)),
                Some(Direction::After) => SpeechBargeIn::After(shift_ms(shift)),
                None => SpeechBargeIn::After(0),
            },
            None => SpeechBargeIn::After(0),
        }
    };
    Interruption { keys: true, speech }
}

/// How long after the prompt's end listening starts: `recognition_shift` with direction
/// `after` (or none), above 0 ms. `before` (listening under the prompt's last part) is not
/// applied (SCN129): listening starts at the prompt's end.
pub fn recognition_delay_ms(stt: Option<&SttProperties>) -> Option<f64> {
    let shift = stt.and_then(|s| s.recognition_shift.get())?;
    let ms = shift_ms(shift);
    (direction(shift) == Some(Direction::After) && ms > 0).then_some(ms as f64)
}

/// The question's timezone (`timezone`, an IANA name such as `Europe/Zurich`): relative
/// dates and times are read in it. None when absent or not a timezone (the call's is used;
/// SCN129 warns about an unknown one).
pub fn timezone(stt: Option<&SttProperties>) -> Option<chrono_tz::Tz> {
    stt.map(|s| s.timezone.str().trim())
        .filter(|t| !t.is_empty())
        .and_then(|t| t.parse().ok())
}

/// The filter phrases (`filter.filters`: an array of phrases or one comma-separated
/// string), normalised, blank ones left out.
fn filters(stt: Option<&SttProperties>) -> Vec<Vec<String>> {
    stt.and_then(|s| s.filter.get())
        .and_then(|f| f.filters.get())
        .map(phrases)
        .unwrap_or_default()
        .iter()
        .map(|p| {
            normalize(p)
                .split(' ')
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|p: &Vec<String>| p.iter().any(|w| !w.is_empty()))
        .collect()
}

/// `filter`: what the caller said with every filter phrase taken out (whole words, any
/// case, punctuation around them ignored), before matching and entities. The words left
/// keep their own spelling ("um, my email is a@b.io" less "um" is "my email is a@b.io").
/// Other inputs are as heard.
pub fn filtered(stt: Option<&SttProperties>, heard: Heard) -> Heard {
    let Heard::Speech {
        transcript,
        confidence,
    } = heard
    else {
        return heard;
    };
    let phrases = filters(stt);
    if phrases.is_empty() {
        return Heard::Speech {
            transcript,
            confidence,
        };
    }
    let words: Vec<&str> = transcript.split_whitespace().collect();
    let norm: Vec<String> = words.iter().map(|w| normalize(w)).collect();
    let mut kept = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let hit = phrases
            .iter()
            .find(|p| i + p.len() <= norm.len() && p.iter().zip(&norm[i..]).all(|(a, b)| a == b));
        match hit {
            Some(p) => i += p.len(),
            None => {
                kept.push(words[i]);
                i += 1;
            }
        }
    }
    Heard::Speech {
        transcript: kept.join(" "),
        confidence,
    }
}

/// The question's own `entity` (shaped as an answer's: `{"entities": [{"type",
/// "variable": {"name"}}]}`): read from every speech answer to the question, matched or
/// not. Anything else reads nothing (SCN129 warns).
pub fn question_entities(entity: Option<&serde_json::Value>) -> Vec<Entity> {
    entity
        .and_then(|e| serde_json::from_value::<EntitySet>(e.clone()).ok())
        .map(|s| s.entities.items().to_vec())
        .unwrap_or_default()
}

/// Whether a classifier or a language model reads the question's answer (its
/// `stt_properties.intent_properties` names a classifier, or a model or messages).
fn reads_intents(stt: Option<&SttProperties>) -> bool {
    stt.and_then(|s| s.intent_properties.get())
        .is_some_and(|i| {
            i.classifier
                .get()
                .is_some_and(|c| !c.id.str().trim().is_empty())
                || i.llm_properties
                    .get()
                    .is_some_and(|l| !l.model.str().is_empty() || !l.messages.items().is_empty())
        })
}

/// The most words a keyword answer's phrase has for the question to be [`Patience::Short`].
const SHORT_ANSWER_WORDS: usize = 2;

/// How patient the recogniser is with a question's answer ([`Patience`]), from what the
/// question expects:
/// * `digits`: the question's `entity` or an answer's `speech_input.entity` reads a number,
///   digits, a date or a time;
/// * `long`: one of them reads free text or an e-mail address, or no answer is decided by
///   what was said (no tokens, intents, entities, classifier or language model: the
///   answer is whatever the caller says);
/// * `short`: every answer decided by speech is decided by tokens alone, each of at most
///   [`SHORT_ANSWER_WORDS`] words (yes/no, keywords), and no classifier or language model
///   reads the answer;
/// * else `normal`.
///
/// The question's own `speech_timeout` is sent beside it and wins over the patience's
/// silence cap (docs/voice.md, "Turn policy").
pub fn patience(p: &QuestionProps, answers: &[Answer]) -> Patience {
    let speech: Vec<_> = answers
        .iter()
        .filter_map(|a| a.speech_input.get())
        .collect();
    let kinds: Vec<String> = question_entities(p.entity.get())
        .iter()
        .chain(
            speech
                .iter()
                .filter_map(|s| s.entity.get())
                .flat_map(|e| e.entities.items()),
        )
        .map(|e| e.kind.str().trim().to_ascii_lowercase())
        .collect();
    if kinds
        .iter()
        .any(|k| matches!(k.as_str(), "number" | "digits" | "date" | "time"))
    {
        return Patience::Digits;
    }
    if kinds.iter().any(|k| matches!(k.as_str(), "text" | "email")) {
        return Patience::Long;
    }
    let intents = reads_intents(p.stt_properties.get());
    let tokens = |s: &&crate::model::SpeechInput| s.tokens.get().map(phrases).unwrap_or_default();
    let by_intent = |s: &&crate::model::SpeechInput| {
        s.intent
            .get()
            .is_some_and(|i| !i.id.str().trim().is_empty())
    };
    let decided: Vec<_> = speech
        .iter()
        .filter(|s| !tokens(s).is_empty() || by_intent(s))
        .collect();
    if decided.is_empty() && !intents {
        return Patience::Long;
    }
    let short = !intents
        && decided.iter().all(|s| {
            !by_intent(s)
                && tokens(s)
                    .iter()
                    .all(|t| normalize(t).split(' ').count() <= SHORT_ANSWER_WORDS)
        });
    if short {
        Patience::Short
    } else {
        Patience::Normal
    }
}

/// Whether a normalised transcript says a normalised phrase: the phrase's words, in a
/// row, as whole words (how a `contains` answer matches).
pub fn says(transcript: &str, phrase: &str) -> bool {
    !phrase.is_empty() && format!(" {transcript} ").contains(&format!(" {phrase} "))
}

/// The answers an interim transcript may decide, as each answer's token phrases
/// (normalised); empty when only the final may decide. The interim decides only what the
/// final would decide the same way from more words: every answer decided by speech is a
/// `contains` token answer, and nothing else reads the transcript — no classifier or
/// language model, no intent, no entity (the question's or an answer's) and no `filter`.
pub fn interim_answers(p: &QuestionProps, answers: &[Answer]) -> Vec<Vec<String>> {
    let stt = p.stt_properties.get();
    let intents = reads_intents(stt);
    if intents || !filters(stt).is_empty() || !question_entities(p.entity.get()).is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for si in answers.iter().filter_map(|a| a.speech_input.get()) {
        let tokens: Vec<String> = si
            .tokens
            .get()
            .map(phrases)
            .unwrap_or_default()
            .iter()
            .map(|t| normalize(t))
            .filter(|t| !t.is_empty())
            .collect();
        let entities = si
            .entity
            .get()
            .is_some_and(|e| !e.entities.items().is_empty());
        let intent = si
            .intent
            .get()
            .is_some_and(|i| !i.id.str().trim().is_empty());
        if entities || intent || si.mode.str() == "exact" {
            return Vec::new();
        }
        if !tokens.is_empty() {
            out.push(tokens);
        }
    }
    out
}

/// Whether an interim transcript decides the question: it says a phrase of exactly one
/// of `answers` ([`interim_answers`]).
pub fn interim_decides(answers: &[Vec<String>], interim: &str) -> bool {
    let norm = normalize(interim);
    answers
        .iter()
        .filter(|tokens| tokens.iter().any(|t| says(&norm, t)))
        .count()
        == 1
}

/// Warns (SCN129) when a question's `entity` is set but reads nothing: not shaped as
/// `{"entities": [...]}`, or no entry with a known type and a variable.
pub fn question_entity_unread(entity: Option<&serde_json::Value>, out: &mut Vec<ScenarioError>) {
    let Some(v) = entity.filter(|v| !v.is_null()) else {
        return;
    };
    let reads = question_entities(Some(v)).iter().any(|e| {
        crate::entity::KINDS.contains(&e.kind.str())
            && e.variable
                .get()
                .is_some_and(|n| !n.name.str().trim().is_empty())
    });
    if !reads {
        out.push(
            ScenarioError::new(
                Code::IgnoredSetting,
                "entity is not applied in a call: it is {\"entities\": [{\"type\", \"variable\": {\"name\"}}]} \
                 with a type among number, digits, text, email, date, time",
            )
            .property("properties.entity")
            .value(v.to_string()),
        );
    }
}

/// Warns (SCN129) about each listening setting of `stt` (at `path`) that a live call does
/// not apply, when it asks for something: no engine takes grammar parameters or a
/// recognition mode; a `recognition_shift` `before` the prompt's end, a shift direction
/// other than `after` and `before`, a timezone that is not one and `interruptible_dialog`
/// are not interpreted.
pub fn unapplied(stt: &SttProperties, path: &str, out: &mut Vec<ScenarioError>) {
    let mut warn = |name: &str, value: String, why: &str| {
        out.push(
            ScenarioError::new(
                Code::IgnoredSetting,
                format!("{name} is not applied in a call: {why}"),
            )
            .property(format!("{path}.{name}"))
            .value(value),
        );
    };
    if let Some(g) = stt.grammar_parameter.get()
        && !g.parameters.items().is_empty()
    {
        let keys: Vec<&str> = g.parameters.items().iter().map(|p| p.key.str()).collect();
        warn(
            "grammar_parameter",
            keys.join(","),
            "no recognition engine takes grammar parameters",
        );
    }
    let mode = stt.recognition_mode.str().trim();
    if !mode.is_empty() {
        warn(
            "recognition_mode",
            mode.to_string(),
            "no recognition engine takes a recognition mode",
        );
    }
    for (name, shift) in [
        ("recognition_shift", &stt.recognition_shift),
        ("interruption_shift", &stt.interruption_shift),
    ] {
        let Some(shift) = shift.get() else { continue };
        match direction(shift) {
            None => warn(
                &format!("{name}.direction"),
                shift.direction.str().to_string(),
                "the direction is after or before; taken as no shift",
            ),
            Some(Direction::Before) if name == "recognition_shift" && shift_ms(shift) > 0 => warn(
                name,
                format!("before {}", shift_ms(shift)),
                "listening starts at the prompt's end, not under it",
            ),
            _ => {}
        }
    }
    let tz = stt.timezone.str().trim();
    if !tz.is_empty() && tz.parse::<chrono_tz::Tz>().is_err() {
        warn(
            "timezone",
            tz.to_string(),
            "not an IANA timezone; dates are read in the call's",
        );
    }
    if stt.interruptible_dialog.flag() {
        warn(
            "interruptible_dialog",
            "true".into(),
            "the prompts' is_interruptible decides barge-in",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_no_call_applies_are_warned_about() {
        let s = stt(serde_json::json!({
            "grammar_parameter": {"parameters": [{"key": "k", "value": "v"}]},
            "recognition_mode": "command",
            "recognition_shift": {"direction": "before", "duration": 200},
            "interruption_shift": {"direction": "sideways", "duration": 100},
            "filter": {"filters": ["profanity"]},
            "timezone": "Mars/Olympus",
            "interruptible_dialog": true,
            "tokens": ["applied"],
            "enable_voice_activity_detection": false
        }));
        let mut out = Vec::new();
        unapplied(&s, "properties.stt_properties", &mut out);
        let props: Vec<&str> = out.iter().map(|e| e.property.as_str()).collect();
        assert_eq!(
            props,
            [
                "properties.stt_properties.grammar_parameter",
                "properties.stt_properties.recognition_mode",
                "properties.stt_properties.recognition_shift",
                "properties.stt_properties.interruption_shift.direction",
                "properties.stt_properties.timezone",
                "properties.stt_properties.interruptible_dialog",
            ]
        );
        assert!(out.iter().all(|e| e.code == "SCN129"));
        assert!(Code::IgnoredSetting.is_warning());
        // Applied or empty settings: nothing.
        let mut none = Vec::new();
        unapplied(
            &stt(
                serde_json::json!({"recognition_mode": " ", "grammar_parameter": {"parameters": []},
                "timezone": "Europe/Zurich", "filter": {"filters": ["um"]}}),
            ),
            "p",
            &mut none,
        );
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn shifts_say_when_speech_interrupts_and_when_listening_starts() {
        let s = |v| Some(stt(v));
        let after = s(
            serde_json::json!({"interruption_shift": {"direction": "after", "duration": 1200.4}}),
        );
        assert_eq!(
            interruption(after.as_ref(), true),
            Interruption {
                keys: true,
                speech: SpeechBargeIn::After(1200)
            }
        );
        assert_eq!(interruption(after.as_ref(), false), Interruption::NONE);
        let before =
            s(serde_json::json!({"interruption_shift": {"direction": "Before", "duration": 800}}));
        assert_eq!(
            interruption(before.as_ref(), true).speech,
            SpeechBargeIn::Last(800)
        );
        // No direction: after; nothing set: from the start.
        let bare = s(serde_json::json!({"interruption_shift": {"duration": 300}}));
        assert_eq!(
            interruption(bare.as_ref(), true).speech,
            SpeechBargeIn::After(300)
        );
        assert_eq!(interruption(None, true), Interruption::from_flag(true));
        // Without voice activity detection speech never interrupts; keys still do.
        let no_vad = s(serde_json::json!({"enable_voice_activity_detection": false,
            "interruption_shift": {"duration": 300}}));
        assert_eq!(
            interruption(no_vad.as_ref(), true),
            Interruption {
                keys: true,
                speech: SpeechBargeIn::Off
            }
        );

        let delay = |v| recognition_delay_ms(s(v).as_ref());
        assert_eq!(
            delay(
                serde_json::json!({"recognition_shift": {"direction": "after", "duration": 2000}})
            ),
            Some(2000.0)
        );
        assert_eq!(
            delay(serde_json::json!({"recognition_shift": {"duration": 500}})),
            Some(500.0)
        );
        assert_eq!(
            delay(
                serde_json::json!({"recognition_shift": {"direction": "before", "duration": 500}})
            ),
            None
        );
        assert_eq!(
            delay(serde_json::json!({"recognition_shift": {"direction": "after", "duration": 0}})),
            None
        );
        assert_eq!(recognition_delay_ms(None), None);
    }

    #[test]
    fn filter_phrases_are_taken_out_of_the_transcript() {
        let s = stt(serde_json::json!({"filter": {"filters": ["um", "you know", "PLEASE"]}}));
        let said = |t: &str| Heard::Speech {
            transcript: t.into(),
            confidence: Some(0.9),
        };
        assert_eq!(
            filtered(Some(&s), said("Um, my email is a@b.io, you know. Please!")),
            said("my email is a@b.io,")
        );
        // Part of a word is not a phrase; blank after filtering (then no input).
        assert_eq!(filtered(Some(&s), said("umbrella")), said("umbrella"));
        assert_eq!(filtered(Some(&s), said("um um")), said(""));
        // A comma-separated string; other inputs as heard; no filter, as heard.
        let c = stt(serde_json::json!({"filter": {"filters": "uh, er"}}));
        assert_eq!(filtered(Some(&c), said("uh yes er")), said("yes"));
        assert_eq!(filtered(Some(&c), Heard::NoInput), Heard::NoInput);
        assert_eq!(filtered(None, said("um")), said("um"));
    }

    #[test]
    fn the_questions_timezone_and_entities() {
        let tz = |v| timezone(Some(&stt(v)));
        assert_eq!(
            tz(serde_json::json!({"timezone": "Asia/Tokyo"})),
            Some(chrono_tz::Asia::Tokyo)
        );
        assert_eq!(tz(serde_json::json!({"timezone": "Mars/Olympus"})), None);
        assert_eq!(tz(serde_json::json!({})), None);

        let v = serde_json::json!({"entities": [{"type": "date", "variable": {"name": "day"}}]});
        let e = question_entities(Some(&v));
        assert_eq!(
            (e[0].kind.str(), e[0].variable.get().unwrap().name.str()),
            ("date", "day")
        );
        let mut out = Vec::new();
        question_entity_unread(Some(&v), &mut out);
        question_entity_unread(None, &mut out);
        assert!(out.is_empty(), "{out:?}");
        for bad in [
            serde_json::json!("date"),
            serde_json::json!({"entities": [{"type": "colour", "variable": {"name": "c"}}]}),
        ] {
            question_entity_unread(Some(&bad), &mut out);
        }
        assert_eq!(out.len(), 2);
        assert!(
            out.iter()
                .all(|e| e.code == "SCN129" && e.property == "properties.entity")
        );
    }

    fn stt(v: serde_json::Value) -> SttProperties {
        serde_json::from_value(v).unwrap()
    }

    /// The patience of a question with these properties besides its `answer.answers`.
    fn patience_of(props: serde_json::Value, answers: serde_json::Value) -> Patience {
        let p: QuestionProps = serde_json::from_value(props).unwrap();
        let a: Vec<Answer> = serde_json::from_value(answers).unwrap();
        patience(&p, &a)
    }

    #[test]
    fn an_interim_transcript_decides_only_token_answers_and_only_one() {
        let yes_no = serde_json::json!([
            {"answer_id": "yes", "speech_input": {"tokens": ["yes", "sure thing"], "mode": "contains"}},
            {"answer_id": "no", "speech_input": {"tokens": "No, not now"}},
            {"answer_id": "key", "dtmf_input": {"value": "1"}}
        ]);
        let of = |props: serde_json::Value, answers: &serde_json::Value| {
            let p: QuestionProps = serde_json::from_value(props).unwrap();
            let a: Vec<Answer> = serde_json::from_value(answers.clone()).unwrap();
            interim_answers(&p, &a)
        };
        let a = of(serde_json::json!({}), &yes_no);
        assert_eq!(a, [vec!["yes", "sure thing"], vec!["no", "not now"]]);
        assert!(interim_decides(&a, "Yes, in the afternoon"));
        assert!(interim_decides(&a, "Sure thing."));
        // Both answers, a part of a phrase, part of a word, nothing: the final decides.
        assert!(!interim_decides(&a, "yes no"));
        assert!(!interim_decides(&a, "sure"));
        assert!(!interim_decides(&a, "yesterday"));
        assert!(!interim_decides(&a, ""));
        // Anything else reading the transcript: never from the interim.
        let exact = serde_json::json!([{"answer_id": "no", "speech_input": {"tokens": ["no"], "mode": "exact"}}]);
        assert!(of(serde_json::json!({}), &exact).is_empty());
        let filter = serde_json::json!({"stt_properties": {"filter": {"filters": ["um"]}}});
        assert!(of(filter, &yes_no).is_empty());
        let entity = serde_json::json!({"entity": {"entities": [{"type": "date", "variable": {"name": "d"}}]}});
        assert!(of(entity, &yes_no).is_empty());
        let classifier = serde_json::json!({"stt_properties":
            {"intent_properties": {"classifier": {"id": "cls_1"}}}});
        assert!(of(classifier, &yes_no).is_empty());
        let intent = serde_json::json!([
            {"answer_id": "yes", "speech_input": {"tokens": ["yes"]}},
            {"answer_id": "book", "speech_input": {"intent": {"id": "booking"}}}
        ]);
        assert!(of(serde_json::json!({}), &intent).is_empty());
    }

    #[test]
    fn the_question_says_how_patient_the_recogniser_is() {
        let yes_no = serde_json::json!([
            {"answer_id": "yes", "speech_input": {"tokens": ["yes", "yeah", "sure thing"]}},
            {"answer_id": "no", "speech_input": {"tokens": "no, not now"}},
            {"answer_id": "key", "dtmf_input": {"value": "1"}}
        ]);
        assert_eq!(
            patience_of(serde_json::json!({}), yes_no.clone()),
            Patience::Short
        );
        // A longer phrase, an intent or a classifier: the answer may take more words.
        let phrase = serde_json::json!([
            {"answer_id": "yes", "speech_input": {"tokens": ["yes please call me"]}}
        ]);
        assert_eq!(patience_of(serde_json::json!({}), phrase), Patience::Normal);
        let intent = serde_json::json!([
            {"answer_id": "yes", "speech_input": {"tokens": ["yes"]}},
            {"answer_id": "book", "speech_input": {"intent": {"id": "booking"}}}
        ]);
        assert_eq!(patience_of(serde_json::json!({}), intent), Patience::Normal);
        let classifier = serde_json::json!({"stt_properties":
            {"intent_properties": {"classifier": {"id": "cls_1"}}}});
        assert_eq!(patience_of(classifier, yes_no.clone()), Patience::Normal);
        // Digits, numbers, dates, times: the question's own entity or an answer's.
        let date = serde_json::json!({"entity": {"entities": [{"type": "date", "variable": {"name": "d"}}]}});
        assert_eq!(patience_of(date, yes_no), Patience::Digits);
        let digits = serde_json::json!([
            {"answer_id": "n", "speech_input": {"entity": {"entities": [{"type": "digits", "variable": {"name": "n"}}]}}}
        ]);
        assert_eq!(patience_of(serde_json::json!({}), digits), Patience::Digits);
        // Free text, an e-mail address, or no answer decided by speech: a long answer.
        let email = serde_json::json!([
            {"answer_id": "m", "speech_input": {"entity": {"entities": [{"type": "email", "variable": {"name": "m"}}]}}}
        ]);
        assert_eq!(patience_of(serde_json::json!({}), email), Patience::Long);
        assert_eq!(
            patience_of(serde_json::json!({}), serde_json::json!([])),
            Patience::Long
        );
        assert_eq!(Patience::default(), Patience::Normal);
        assert_eq!(Patience::Digits.as_str(), "digits");
    }

    #[test]
    fn hints_are_tokens_then_class_tokens_without_repeats() {
        let s = stt(serde_json::json!({
            "tokens": ["Callsmith", " order number "],
            "class_token": {"tokens": "order number, Zurich"}
        }));
        assert_eq!(hints(Some(&s)), ["Callsmith", "order number", "Zurich"]);
        assert!(hints(None).is_empty());
        // Dictionary ids name the account's dictionaries; they are no phrases.
        let d = stt(serde_json::json!({
            "tokens": ["Callsmith", "dic_products"],
            "class_token": {"tokens": ["dic_banking", "dic_products"]}
        }));
        assert_eq!(hints(Some(&d)), ["Callsmith"]);
        assert_eq!(dictionaries(Some(&d)), ["dic_products", "dic_banking"]);
    }

    #[test]
    fn voice_activity_detection_is_on_unless_turned_off() {
        assert!(vad_on(None));
        assert!(vad_on(Some(&stt(serde_json::json!({})))));
        assert!(vad_on(Some(&stt(
            serde_json::json!({"enable_voice_activity_detection": true})
        ))));
        assert!(!vad_on(Some(&stt(
            serde_json::json!({"enable_voice_activity_detection": false})
        ))));
    }
}
