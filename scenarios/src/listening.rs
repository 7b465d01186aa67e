//! The listening settings of a question (`stt_properties`) as a live call applies them,
//! each resolved here once: recognition hints, voice activity detection. The interpreter
//! puts the results into [`crate::port::SpeechSpec`]; docs/bricks.md lists every field.

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

#[cfg(test)]
mod tests {
    use super::*;

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
