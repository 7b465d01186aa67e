//! The engine's `CallPort` over one answered call, in three parts by ownership: its
//! [`CallContext`] (what it runs with), its [`CallIo`] (leg, media and what ends it) and its
//! [`CallRecord`] (what the history keeps). The scenario's requests are carried out by the
//! turn files (`play`, `listen`, `speak`, `transfer`, `sms`) over these parts.

use std::time::Duration;

use async_trait::async_trait;
use callsmith_domain::store::AgentRecord;
use callsmith_media::amd::{AmdConfig, AmdDecision as Amd};
use callsmith_scenarios::port::{
    AmdVerdict, CallPort, Heard, IntentScore, Interruption, ListenSpec, LlmRequest, PlayOutcome,
    PortError, PromptSpec, SmsOutcome, SpokenReply, TransferMode, TransferOutcome, TransferSpec,
    TtsVoice,
};
use callsmith_scenarios::{
    model::MappingEntry,
    webhook::{CompiledRequest, WebhookOutcome},
};
use chrono::{DateTime, Utc};
use tokio::time::Instant;
use tracing::{info, warn};

use super::context::CallContext;
use super::history::TurnLog;
use super::io::{CallEnd, CallEvent, CallIo, ForcedEnd};
use super::record::CallRecord;
use super::sms::send_sms;
use callsmith_media::MediaEvent;

/// The engine's `CallPort`: one answered call over SIP (or a browser) + media.
pub struct LivePort {
    pub(super) ctx: CallContext,
    pub(super) io: CallIo,
    pub(super) record: CallRecord,
    /// The recognition stream of the last turn while its answer, decided at the
    /// recogniser's eager end of turn, may still be taken back.
    pub(super) eager: Option<super::listen::EagerTurn>,
}

impl LivePort {
    /// Milliseconds since the answer.
    pub(super) fn ms(&self) -> u64 {
        self.record.ms()
    }

    /// The next thing that happens on the call ([`CallIo::next`]); the engine's reason to
    /// end the call goes into the history's errors and the log as it is reported.
    pub(super) async fn next(&mut self) -> CallEvent {
        let ev = self.io.next().await;
        match ev {
            CallEvent::Ended(CallEnd::Forced(f)) => self.forced_end(f),
            // The last turn ended before the speech detector's hangover: here is where
            // the caller's speech ended, for its response time.
            CallEvent::Media(MediaEvent::SpeechUnwatched { silence_ms, .. }) => {
                let end = self.ms().saturating_sub(u64::from(silence_ms));
                self.record.late_speech_end(&self.ctx.rt.turns, end);
            }
            _ => {}
        }
        ev
    }

    fn forced_end(&mut self, why: ForcedEnd) {
        self.record.error(why.message().to_string());
        info!(communication = %self.ctx.comm.sid, reason = why.as_str(), "ending the call");
    }

    /// Takes in what happened while the call waits on something else (a model's answer,
    /// a fetch, the answering-machine detector): keys pressed are kept for the next
    /// question. Returns why the wait must stop when the call ended.
    fn waiting(&mut self, ev: CallEvent) -> Option<&'static str> {
        match ev {
            CallEvent::Digit(d) => {
                self.io.keep_digit(d);
                None
            }
            CallEvent::Media(_) => None,
            CallEvent::Ended(end) => Some(end.why()),
        }
    }

    /// Waits for `work` while the call may end; `Err(why)` when it ended first (`work` is
    /// dropped). Keys pressed meanwhile are kept for the next question.
    pub(super) async fn while_up<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, &'static str> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                r = &mut work => return Ok(r),
                ev = self.next() => {
                    if let Some(why) = self.waiting(ev) {
                        return Err(why);
                    }
                }
            }
        }
    }

    /// A speech turn lost its recognition (no ready node, or the node failed): the turn
    /// goes on without it (keys still count; silence ends it as `no_input`, so the
    /// question's `fallback_empty` runs), and the failure is in the turn's `stt_error`, the
    /// history's `errors`, the log and `callsmith_recognition_failures`.
    pub(super) fn recognition_failed(&mut self, turn: &mut TurnLog, engine: &str, error: String) {
        warn!(communication = %self.ctx.comm.sid, engine, %error, "speech recognition failed");
        self.record
            .error(format!("recognition (turn {}): {error}", turn.index));
        self.ctx
            .rt
            .turns
            .recognition_failures
            .get_or_create(&vec![("engine".to_string(), engine.to_string())])
            .inc();
        turn.stt_error = Some(error);
    }
}

#[async_trait]
impl CallPort for LivePort {
    async fn play(&mut self, prompt: &PromptSpec, interruption: Interruption) -> PlayOutcome {
        self.play_prompt(prompt, interruption).await
    }

    async fn listen(&mut self, spec: &ListenSpec) -> Heard {
        self.listen_turn(spec).await
    }

    async fn classify(
        &mut self,
        id: &str,
        version: i64,
        text: &str,
    ) -> Result<Vec<IntentScore>, PortError> {
        // The same service the API predicts with: local and remote-trained versions alike.
        self.ctx
            .rt
            .services
            .adapters
            .classifiers
            .predict(&self.ctx.comm.account_sid, id, version, text)
            .await
            .map(|p| {
                p.intents
                    .into_iter()
                    .map(|(intent, c)| IntentScore {
                        intent,
                        confidence: f64::from(c),
                    })
                    .collect()
            })
            .map_err(|e| PortError::Failed(e.to_string()))
    }

    async fn llm(&mut self, request: &LlmRequest) -> Result<String, PortError> {
        if self.io.hung_up() {
            return Err(PortError::CallEnded("the caller hung up"));
        }
        let account = self.ctx.llm_account().await?;
        let llm = self.ctx.rt.services.adapters.llm.clone();
        let answer = llm.complete(
            &account.sid,
            chat_request(request),
            self.ctx.rt.settings.llm_call_timeout,
        );
        // The caller may hang up while the model thinks.
        match self.while_up(answer).await {
            Ok(r) => r
                .map(|a| a.content)
                .map_err(|e| PortError::Failed(e.to_string())),
            Err(why) => Err(PortError::CallEnded(why)),
        }
    }

    async fn speak_llm(
        &mut self,
        request: &LlmRequest,
        voice: &TtsVoice,
        interruption: Interruption,
    ) -> SpokenReply {
        self.speak_reply(request, voice, interruption).await
    }

    async fn webhook(
        &mut self,
        request: &CompiledRequest,
        mapping: &[MappingEntry],
    ) -> WebhookOutcome {
        self.ctx.rt.services.webhook.execute(request, mapping).await
    }

    async fn send_sms(&mut self, to: &str, text: &str) -> SmsOutcome {
        let ctx = &self.ctx;
        match send_sms(&ctx.rt, ctx.agent.as_deref(), &ctx.from_number, to, text).await {
            Ok(()) => SmsOutcome::Sent,
            Err(e) => SmsOutcome::Failed(e),
        }
    }

    async fn transfer(&mut self, spec: &TransferSpec) -> TransferOutcome {
        match spec.mode {
            TransferMode::Blind => self.blind_transfer(spec).await,
            TransferMode::Bridged => self.bridged_transfer(spec).await,
        }
    }

    async fn answering_machine(&mut self) -> AmdVerdict {
        if self.io.hung_up() || !amd_enabled(self.ctx.agent.as_deref()) {
            return AmdVerdict::Unknown;
        }
        let cfg = amd_config();
        let mut task = match self.io.session.spawn_answering_machine_detection(cfg) {
            Ok(t) => t,
            Err(e) => {
                self.record
                    .error(format!("answering-machine detection: {e}"));
                return AmdVerdict::Unknown;
            }
        };
        // The detector decides within its window (plus the beep wait); bound it anyway.
        let until = Instant::now()
            + Duration::from_millis(u64::from(cfg.window_ms + cfg.beep_wait_ms) + 2000);
        let verdict = self
            .while_up(tokio::time::timeout_at(until, &mut task))
            .await;
        let verdict = match verdict {
            Ok(Ok(Ok(Amd::Human))) => AmdVerdict::Human,
            Ok(Ok(Ok(Amd::Machine | Amd::Beep))) => AmdVerdict::Machine,
            Ok(Ok(Ok(Amd::Undecided) | Err(_))) => AmdVerdict::Unknown,
            // Out of time, or the call ended first.
            Ok(Err(_)) | Err(_) => {
                task.abort();
                AmdVerdict::Unknown
            }
        };
        self.record.amd = match verdict {
            AmdVerdict::Human => Some("human"),
            AmdVerdict::Machine => Some("machine"),
            AmdVerdict::Unknown => self.record.amd,
        };
        verdict
    }

    async fn hangup(&mut self, _signal: &str) {
        self.io.hangup();
    }

    fn answer_may_be_taken_back(&self) -> bool {
        self.eager.is_some()
    }

    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn traced(&self, event: &callsmith_scenarios::history::TraceEvent) {
        self.record.traced(event);
    }
}

/// Answering-machine detection runs for an outbound_call brick with `is_voicemail` when the
/// call's agent has `voicemail_enabled` (or the call has no agent: a scenario test call);
/// otherwise the verdict is unknown and the brick takes `human`.
pub(super) fn amd_enabled(agent: Option<&AgentRecord>) -> bool {
    agent.is_none_or(|a| a.voicemail_enabled)
}

/// The heuristic's settings in live calls (docs/bricks.md, "Answering-machine detection").
pub(super) fn amd_config() -> AmdConfig {
    AmdConfig {
        beep_wait_ms: 10_000,
        ..AmdConfig::default()
    }
}

/// The chat request of an LLM brick: its messages in order, provider by name (empty: the
/// first provider serving the model), no tools.
pub(super) fn chat_request(r: &LlmRequest) -> callsmith_domain::adapters::llm::ChatRequest {
    callsmith_domain::adapters::llm::ChatRequest {
        messages: r
            .messages
            .iter()
            .map(
                |(role, content)| callsmith_domain::adapters::llm::ChatMessage {
                    role: role.clone(),
                    content: Some(content.clone()),
                    tool_calls: None,
                    tool_call_id: None,
                    name: None,
                },
            )
            .collect(),
        model: r.model.clone(),
        provider: Some(r.provider.clone()).filter(|p| !p.is_empty()),
        temperature: r.temperature,
        tools: Vec::new(),
        gdpr_required: r.gdpr_required,
    }
}
