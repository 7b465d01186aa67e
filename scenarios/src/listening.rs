//! The listening settings of a question (`stt_properties`) as a live call applies them,
//! each resolved here once: recognition hints, voice activity detection. The interpreter
//! puts the results into [`crate::port::SpeechSpec`]; docs/bricks.md lists every field.

use crate::codes::{Code, ScenarioError};
use crate::interpreter::phrases;
use crate::model::SttProperties;

/// The recognition hints of a question: its `tokens` then its `class_token.tokens`
/// (each an array of phrases or one comma-separated string), trimmed, without repeats.
pub fn hints(stt: Option<&SttProperties>) -> Vec<String> {
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

/// Warns (SCN129) about each listening setting of `stt` (at `path`) that a live call does
/// not apply, when it asks for something: no engine takes grammar parameters or a
/// recognition mode; the shifts, filters, timezone and `interruptible_dialog` are not
/// interpreted.
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
        if let Some(ms) = shift.get().and_then(|s| s.duration.f64())
            && ms > 0.0
        {
            warn(
                name,
                ms.to_string(),
                "listening and barge-in start as without it",
            );
        }
    }
    if let Some(f) = stt.filter.get().and_then(|f| f.filters.get())
        && !phrases(f).is_empty()
    {
        warn(
            "filter",
            f.to_string(),
            "the transcript is matched unfiltered",
        );
    }
    let tz = stt.timezone.str().trim();
    if !tz.is_empty() {
        warn("timezone", tz.to_string(), "no entity reads dates");
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
            "recognition_shift": {"direction": "after", "duration": 200},
            "interruption_shift": {"duration": 0},
            "filter": {"filters": ["profanity"]},
            "timezone": "Europe/Zurich",
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
                "properties.stt_properties.filter",
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
                serde_json::json!({"recognition_mode": " ", "grammar_parameter": {"parameters": []}}),
            ),
            "p",
            &mut none,
        );
        assert!(none.is_empty(), "{none:?}");
    }

    fn stt(v: serde_json::Value) -> SttProperties {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn hints_are_tokens_then_class_tokens_without_repeats() {
        let s = stt(serde_json::json!({
            "tokens": ["Callsmith", " order number "],
            "class_token": {"tokens": "order number, Zurich"}
        }));
        assert_eq!(hints(Some(&s)), ["Callsmith", "order number", "Zurich"]);
        assert!(hints(None).is_empty());
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
