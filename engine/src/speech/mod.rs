//! The local speech node (`media/speech-node/server.py`) under `callsmith serve`: whether
//! it runs (`[speech]`), its registration as a recognition node and a synthesizer, and its
//! supervision ([`supervisor`]: the state machine; [`process`]: the tokio shell).
//!
//! Registration happens once at start, before the services are built: while `[speech]`
//! has the node on and it is installed, the engine gets
//! * a recognition node `speech-node` for the default recognition engine
//!   (`dialer.default_stt_engine`, `whisper`), Deepgram-style protocol at
//!   `ws://<listen>/v1/listen?words=false` (the node's extension that skips the word timing
//!   pass, which the engine does not use: finals still carry where the speech ends), probed
//!   at `/ready`, taking the questions' `patience` (`turn_patience`), unless `[stt]`
//!   configures nodes for that engine itself;
//! * an `openai` synthesizer `piper` at `http://<listen>` with `speech.voice`, unless a
//!   `[[tts.engines]]` entry is named `piper`; it is the default synthesizer unless
//!   `tts.default_engine` names another.
//!
//! Both stay registered while the node restarts: the recognition pool skips a node whose
//! `/ready` does not answer, and a prompt for the node's synthesizer while it is not ready
//! is spoken with espeak-ng instead (see `call::play`).

mod process;
mod supervisor;

use std::net::SocketAddr;

use callsmith_domain::Services;
use callsmith_domain::readiness::ComponentStatus;
use callsmith_media::stt::{SttNodeConfig, SttProtocol};

use crate::config::{Config, SpeechPlan, TtsEngineSection};
pub use process::SpeechNode;

/// Name of the component on `/readyz`.
pub const COMPONENT: &str = "speech";
/// Name of the recognition node registered for the local node.
pub const STT_NODE_NAME: &str = "speech-node";
/// Name of the synthesizer registered for the local node.
pub const TTS_ENGINE_NAME: &str = "piper";

/// What `serve` does about the node.
#[derive(Debug)]
pub enum Decision {
    /// `speech.local = false`.
    Disabled,
    /// On, but not installed: not started, reported `down`.
    Missing(String),
    /// Started on `listen`; `tts_engine`: the synthesizer registered for it (None when a
    /// `[[tts.engines]]` entry took the name).
    Start {
        plan: Box<SpeechPlan>,
        listen: SocketAddr,
        tts_engine: Option<String>,
    },
}

/// Decides whether the node runs and, when it does, registers it in `cfg` (see the module
/// documentation). Bad `[speech]` values are errors naming the key.
pub fn prepare(cfg: &mut Config) -> anyhow::Result<Decision> {
    let plan = cfg.speech.plan()?;
    if !plan.local {
        return Ok(match plan.missing() {
            Some(why) if !plan.local_explicit => Decision::Missing(why),
            _ => Decision::Disabled,
        });
    }
    if let Some(why) = plan.missing() {
        return Ok(Decision::Missing(why));
    }
    let listen = resolve_port(plan.listen)?;
    let tts_engine = register(cfg, &plan, listen);
    Ok(Decision::Start {
        plan: Box::new(plan),
        listen,
        tts_engine,
    })
}

/// Port 0: a port free on the listen address now, kept for the node's lifetime.
fn resolve_port(listen: SocketAddr) -> anyhow::Result<SocketAddr> {
    if listen.port() != 0 {
        return Ok(listen);
    }
    let l = std::net::TcpListener::bind(listen)
        .map_err(|e| anyhow::anyhow!("speech.listen {listen}: {e}"))?;
    Ok(l.local_addr()?)
}

/// Adds the node's recognition node and synthesizer to `cfg` where the configuration does
/// not define them itself; the name of the synthesizer it added.
fn register(cfg: &mut Config, plan: &SpeechPlan, listen: SocketAddr) -> Option<String> {
    let engine = cfg.dialer.default_stt_engine.clone();
    if cfg.stt.engines.get(&engine).is_some_and(|n| !n.is_empty()) {
        tracing::info!(
            engine,
            "stt.engines.{engine} is configured: the local speech node is not registered for it"
        );
    } else {
        cfg.stt.engines.insert(
            engine,
            vec![SttNodeConfig {
                name: STT_NODE_NAME.into(),
                url: format!("ws://{listen}/v1/listen?words=false"),
                protocol: SttProtocol::Deepgram,
                ready_url: Some(format!("http://{listen}/ready")),
                api_key: None,
                api_key_env: None,
                ca_file: None,
                utterance_end_ms: None,
                turn_patience: true,
            }],
        );
    }
    if cfg.tts.engines.iter().any(|e| e.name == TTS_ENGINE_NAME) {
        tracing::info!(
            "a [[tts.engines]] entry is named {TTS_ENGINE_NAME}: the local speech node's synthesizer is not registered"
        );
        None
    } else {
        cfg.tts.engines.push(TtsEngineSection {
            name: TTS_ENGINE_NAME.into(),
            url: format!("http://{listen}"),
            voice: plan.voice.clone(),
            // The node answers with X-Sample-Rate; this is Piper's own rate.
            pcm_sample_rate: 22050,
            ..TtsEngineSection::default()
        });
        if cfg.tts.default_engine.is_none() {
            cfg.tts.default_engine = Some(TTS_ENGINE_NAME.into());
        }
        Some(TTS_ENGINE_NAME.into())
    }
}

impl Decision {
    /// The synthesizer registered for the node, if any.
    pub fn tts_engine(&self) -> Option<String> {
        match self {
            Decision::Start { tts_engine, .. } => tts_engine.clone(),
            _ => None,
        }
    }
}

/// Acts on the decision once the services exist: reports the component, logs what
/// happens, and starts the supervised node.
pub fn launch(decision: Decision, services: &Services) -> Option<SpeechNode> {
    let readiness = &services.readiness;
    match decision {
        Decision::Disabled => {
            readiness.set(COMPONENT, ComponentStatus::Disabled);
            tracing::info!("local speech node off (speech.local = false)");
            None
        }
        Decision::Missing(why) => {
            readiness.set(COMPONENT, ComponentStatus::Down);
            tracing::warn!(
                "local speech node not started: {why}. Prompts are spoken with {} and no local \
                 recognition node is registered; `bash scripts/setup.sh` installs the node, \
                 `speech.local = false` turns this off",
                crate::config::FALLBACK_TTS_ENGINE
            );
            None
        }
        Decision::Start { plan, listen, .. } => {
            readiness.set(COMPONENT, ComponentStatus::Starting);
            Some(SpeechNode::start(&plan, listen, services))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installed_plan(dir: &std::path::Path) -> Config {
        let python = dir.join("python");
        let server = dir.join("server.py");
        std::fs::write(&python, "").unwrap();
        std::fs::write(&server, "").unwrap();
        let mut cfg = Config::default();
        cfg.speech.python = Some(python);
        cfg.speech.server = Some(server);
        cfg
    }

    #[test]
    fn an_installed_node_is_on_by_default_and_registered() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = installed_plan(dir.path());
        let Decision::Start { listen, .. } = prepare(&mut cfg).unwrap() else {
            panic!("installed: started")
        };
        assert!(listen.ip().is_loopback() && listen.port() != 0);
        let nodes = &cfg.stt.engines["whisper"];
        assert_eq!(nodes[0].url, format!("ws://{listen}/v1/listen?words=false"));
        assert_eq!(nodes[0].protocol, SttProtocol::Deepgram);
        // It takes the questions' patience (docs/voice.md, "Turn policy").
        assert!(nodes[0].turn_patience);
        assert_eq!(
            nodes[0].ready_url.as_deref(),
            Some(format!("http://{listen}/ready").as_str())
        );
        assert_eq!(cfg.tts.default_engine(), "piper");
        assert_eq!(cfg.tts.engines[0].voice, "joe");
        cfg.tts
            .service()
            .expect("the registered synthesizer builds");
    }

    #[test]
    fn explicit_configuration_wins() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = installed_plan(dir.path());
        cfg.tts.default_engine = Some("flite".into());
        cfg.stt.engines.insert(
            "whisper".into(),
            vec![SttNodeConfig {
                name: "mine".into(),
                url: "ws://127.0.0.1:2700".into(),
                protocol: SttProtocol::Vosk,
                ready_url: None,
                api_key: None,
                api_key_env: None,
                ca_file: None,
                utterance_end_ms: None,
                turn_patience: false,
            }],
        );
        assert!(matches!(prepare(&mut cfg).unwrap(), Decision::Start { .. }));
        assert_eq!(cfg.stt.engines["whisper"].len(), 1);
        assert_eq!(cfg.stt.engines["whisper"][0].name, "mine");
        assert_eq!(cfg.tts.default_engine(), "flite");
        assert_eq!(cfg.tts.engines.len(), 1, "piper is registered beside it");

        let mut cfg = installed_plan(dir.path());
        cfg.tts.engines.push(TtsEngineSection {
            name: "piper".into(),
            url: "https://tts.example.test".into(),
            ..TtsEngineSection::default()
        });
        prepare(&mut cfg).unwrap();
        assert_eq!(cfg.tts.engines.len(), 1);
        assert_eq!(cfg.tts.engines[0].url, "https://tts.example.test");
        assert_eq!(
            cfg.tts.default_engine(),
            "espeak-ng",
            "an explicit piper entry is not made the default"
        );
    }

    #[test]
    fn off_or_missing_registers_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = installed_plan(dir.path());
        cfg.speech.local = Some(false);
        assert!(matches!(prepare(&mut cfg).unwrap(), Decision::Disabled));
        assert!(cfg.stt.engines.is_empty() && cfg.tts.engines.is_empty());

        for local in [None, Some(true)] {
            let mut cfg = Config::default();
            cfg.speech.local = local;
            cfg.speech.python = Some(dir.path().join("nowhere/python"));
            let d = prepare(&mut cfg).unwrap();
            let Decision::Missing(why) = d else {
                panic!("absent with local = {local:?}: {d:?}")
            };
            assert!(why.contains("speech.python"), "{why}");
            assert!(cfg.stt.engines.is_empty() && cfg.tts.engines.is_empty());
            assert_eq!(cfg.tts.default_engine(), "espeak-ng");
        }
    }

    #[test]
    fn bad_values_name_the_key() {
        let refused = |f: &dyn Fn(&mut Config), key: &str| {
            let mut cfg = Config::default();
            f(&mut cfg);
            let e = prepare(&mut cfg).expect_err(key).to_string();
            assert!(e.contains(key), "{key}: {e}");
        };
        refused(
            &|c| c.speech.listen = "0.0.0.0:2700".parse().unwrap(),
            "speech.listen",
        );
        refused(&|c| c.speech.threads = Some(0), "speech.threads");
        refused(
            &|c| c.speech.startup_timeout_secs = 0,
            "speech.startup_timeout_secs",
        );
        refused(
            &|c| c.speech.restart_backoff_min_ms = 0,
            "speech.restart_backoff_min_ms",
        );
        refused(
            &|c| {
                c.speech.restart_backoff_min_ms = 5000;
                c.speech.restart_backoff_max_ms = 1000;
            },
            "speech.restart_backoff_max_ms",
        );
        refused(&|c| c.speech.voice = " ".into(), "speech.voice");
    }
}
