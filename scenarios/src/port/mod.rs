//! The call port: everything the interpreter needs from a live call, as one small async trait.
//!
//! The interpreter is the scenario logic; the port is the call's I/O (the engine implements it
//! over SIP + media, tests use [`crate::testing::ScriptedCall`]). Every method reports what
//! happened as a value: a hang-up is an outcome, never an error. Those values (what to
//! play, listen for, send or transfer, and how it went) are in `values.rs`, beneath both
//! the port and the call history that records them.

pub mod values;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub use values::*;

use crate::history::TraceEvent;
use crate::model::MappingEntry;
use crate::webhook::{CompiledRequest, WebhookOutcome};

/// The call's I/O, as the interpreter sees it.
#[async_trait]
pub trait CallPort: Send {
    /// Plays one prompt; `interruption` says whether keys and when caller speech stop it.
    async fn play(&mut self, prompt: &PromptSpec, interruption: Interruption) -> PlayOutcome;
    /// Waits for speech and/or DTMF.
    async fn listen(&mut self, spec: &ListenSpec) -> Heard;
    /// Classifies `text` with classifier `id` at `version` (0 = unversioned surface).
    async fn classify(
        &mut self,
        id: &str,
        version: i64,
        text: &str,
    ) -> Result<Vec<IntentScore>, PortError>;
    /// One chat completion; returns the reply text.
    async fn llm(&mut self, request: &LlmRequest) -> Result<String, PortError>;
    /// One chat completion spoken in `voice` as it is generated: one prompt, each complete
    /// sentence synthesised and played while the model still writes the next, the
    /// `interruption` applying to the whole. By default the whole reply is asked
    /// for with [`CallPort::llm`], then played.
    async fn speak_llm(
        &mut self,
        request: &LlmRequest,
        voice: &TtsVoice,
        interruption: Interruption,
    ) -> SpokenReply {
        match self.llm(request).await {
            Ok(reply) => {
                let text = reply.trim().to_string();
                let spoken = if text.is_empty() {
                    None
                } else {
                    let prompt = PromptSpec::Tts {
                        text: text.clone(),
                        voice: voice.clone(),
                    };
                    Some((text, self.play(&prompt, interruption).await))
                };
                SpokenReply {
                    reply,
                    error: None,
                    spoken,
                }
            }
            Err(error) => SpokenReply {
                error: Some(error.to_string()),
                ..SpokenReply::default()
            },
        }
    }
    /// Executes a compiled webhook and maps its response (see [`WebhookOutcome::finish`]).
    async fn webhook(
        &mut self,
        request: &CompiledRequest,
        mapping: &[MappingEntry],
    ) -> WebhookOutcome;
    /// Sends an SMS through the agent's provider.
    async fn send_sms(&mut self, to: &str, text: &str) -> SmsOutcome;
    /// Transfers the call.
    async fn transfer(&mut self, spec: &TransferSpec) -> TransferOutcome;
    /// Answering-machine verdict for the answered outbound call.
    async fn answering_machine(&mut self) -> AmdVerdict;
    /// Ends the call with a signal (`end_call.signal`, "" for a plain hang-up).
    async fn hangup(&mut self, signal: &str);
    /// The current time (the interpreter's clock: timestamps and `time.*` variables).
    fn now(&self) -> DateTime<Utc>;
    /// Told of each trace event as the interpreter records it (a live view of the call);
    /// the trace itself is returned in the run's result. Does nothing by default.
    fn traced(&self, _event: &TraceEvent) {}
    /// Whether the answer the last `listen` returned was decided at the recogniser's eager
    /// end of turn and may still be taken back: until the recogniser confirms it, a `play`
    /// that the caller's going on stops returns [`PlayOutcome::TakenBack`], and the next
    /// `listen` continues that turn. False by default.
    fn answer_may_be_taken_back(&self) -> bool {
        false
    }
}
