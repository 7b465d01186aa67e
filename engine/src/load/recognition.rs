//! What the calls of a run will speak and hear through, checked before any call: a
//! question that listens for speech needs a recognition node for its engine (as a call's
//! listen turn picks it: `runtime::stt_engine_for`), and with none the run is refused. When
//! `callsmith load` started the local speech node (as `serve` does: the default recognition
//! node and synthesizer), the run waits until it is ready (its models loaded), so the first
//! calls neither hear nothing nor speak with the fallback voice.

use std::time::{Duration, Instant};

use anyhow::bail;
use callsmith_domain::readiness::ComponentStatus;
use callsmith_scenarios::{Program, Snapshot};
use serde_json::{Value, json};

use crate::config::Config;
use crate::speech;

/// The questions of `constructor` that listen for speech, as (brick id, engine asked for).
pub fn speech_questions(constructor: &Value) -> Vec<(String, String)> {
    match Snapshot::from_value(&json!({ "constructor": constructor })) {
        Ok(s) => Program::new(s).speech_engines(),
        Err(_) => Vec::new(),
    }
}

/// How often the local node's readiness is looked at while waiting.
const POLL: Duration = Duration::from_millis(200);

/// Refuses the run when a speech question has no recognition node, and waits (up to
/// `speech.startup_timeout_secs`) for the local speech node when it was started.
pub async fn ensure(node: &crate::Node, cfg: &Config, constructor: &Value) -> anyhow::Result<()> {
    let questions = speech_questions(constructor);
    let default = &cfg.dialer.default_stt_engine;
    for (brick, asked) in &questions {
        if crate::runtime::stt_engine_for(&node.services.stt, default, asked).is_none() {
            let engine = if asked.is_empty() { default } else { asked };
            let why = cfg
                .speech
                .plan()
                .ok()
                .and_then(|p| {
                    p.missing()
                        .or_else(|| (!p.local).then(|| "speech.local = false".into()))
                })
                .unwrap_or_else(|| "it is not registered for this engine".into());
            bail!(
                "the scenario's question {brick:?} listens for speech with the recognition engine \
                 {engine:?}, and no recognition node serves it: the local speech node is not \
                 available ({why}). `bash scripts/setup.sh` installs the node; or configure \
                 [[stt.engines.{engine}]], or make the question take keys only \
                 (input_mode = \"dtmf\")"
            );
        }
    }
    if node.running.speech.is_some() {
        let limit = Duration::from_secs(cfg.speech.startup_timeout_secs);
        let since = Instant::now();
        eprintln!("waiting for the local speech node to load its models…");
        while node.services.readiness.get(speech::COMPONENT) != Some(ComponentStatus::Ok) {
            if since.elapsed() > limit {
                bail!(
                    "the local speech node was not ready within {} s (speech.startup_timeout_secs); \
                     no call was placed. Its log lines are under the target `speech_node` \
                     (RUST_LOG=speech_node=info)",
                    limit.as_secs()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_that_take_speech_name_their_engine() {
        let q = |id: &str, props: Value| json!({"id": id, "properties": props, "outputs": []});
        let constructor = json!({"bricks": {
        "start_call": {"v1": [{"id": "s", "properties": {"stt_general": {"engine": "whisper"}}, "outputs": []}]},
        "question": {"v1": [
            q("keys", json!({"input_mode": "dtmf"})),
            q("both", json!({"input_mode": "speech_and_dtmf", "stt_properties": {"engine": "deepgram"}})),
            q("unset", json!({})),
        ]}}});
        assert_eq!(
            speech_questions(&constructor),
            [
                ("both".to_string(), "deepgram".to_string()),
                ("unset".to_string(), "whisper".to_string())
            ]
        );
        assert!(speech_questions(&json!({"bricks": {}})).is_empty());
        assert!(speech_questions(&json!("not an object")).is_empty());
    }
}
