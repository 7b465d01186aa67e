//! The engine's `CallPort` over one answered call: the SIP leg, the media session and
//! what happens while the call waits (keys, the leg's end, the engine ending the call).

use super::*;

/// The leg events an answered call acts on.
#[derive(Debug)]
pub(super) enum Signal {
    Dtmf(char),
    Ended(EndInfo),
}

/// The next [`Signal`] of the leg, passing over the events an answered call has no use
/// for; `None` once the leg is gone. Cancel-safe: an event is taken only when returned or
/// passed over.
pub(super) async fn next_signal(leg: &mut Leg) -> Option<Signal> {
    loop {
        match leg.next_event().await? {
            LegEvent::Dtmf(d) => return Some(Signal::Dtmf(d)),
            LegEvent::Ended(e) => return Some(Signal::Ended(e)),
            _ => {}
        }
    }
}

/// The engine's `CallPort`: one answered call over SIP + media.
pub struct LivePort {
    pub(super) rt: Runtime,
    pub(super) comm: CommunicationRecord,
    pub(super) agent: Option<Arc<AgentRecord>>,
    pub(super) from_number: String,
    pub(super) session: MediaSession,
    pub(super) media_events: Option<callsmith_media::MediaEvents>,
    /// The call's leg (SIP or browser): its events, and hanging up or transferring it.
    pub(super) leg: Leg,
    pub(super) ended: Option<EndInfo>,
    pub(super) started: Instant,
    pub(super) deadline: Instant,
    pub(super) pending_dtmf: String,
    pub(super) turns: Vec<TurnLog>,
    pub(super) prompts: Vec<PromptLog>,
    pub(super) errors: Vec<String>,
    /// Uploads of turn audio still running: (index into `turns`, upload). They are
    /// awaited before the history is written; a failed one clears its reference.
    pub(super) turn_audio_saves: Vec<(usize, tokio::task::JoinHandle<bool>)>,
    /// The trunk the call runs on (a bridged transfer's second leg leaves through it).
    pub(super) trunk: String,
    /// call_transfer attempts, for the history.
    pub(super) transfers: Vec<TransferLog>,
    /// When the last turn's answer became available ([`callsmith_media::clock::now_ns`]),
    /// until the reply's first RTP packet is measured.
    pub(super) answer_ns: Option<u64>,
    /// Cancelled when `POST /v1/communication/{id}/hangup` asks this call to end.
    pub(super) hangup: CancellationToken,
    /// Why the engine ended the call, when it did.
    pub(super) forced: Option<ForcedEnd>,
    /// The live feed of a test call (see [`super::live`]).
    pub(super) live: Option<Live>,
}

/// The moments of a turn's reply ([`callsmith_media::clock::now_ns`]).
pub(super) struct ReplyTimes {
    /// The reply known (classifier, model, webhook done; a streamed reply's first sentence).
    pub ready_ns: u64,
    /// The reply handed to the media worker.
    pub requested_ns: u64,
    /// Its first synthesised audio (`None` for a file prompt).
    pub first_synthesis_ns: Option<u64>,
    /// Its first RTP packet.
    pub first_rtp_ns: u64,
}

/// Something that happened while waiting.
pub(super) enum Happening {
    Media(Option<MediaEvent>),
    Signal(Option<Signal>),
    /// The engine must end the call (reported once per call).
    Forced(ForcedEnd),
}

/// Why the engine ended a call itself; the communication's `end_reason` then says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForcedEnd {
    /// `dialer.max_call_secs` passed.
    MaxDuration,
    /// The drain time of a shutdown ran out.
    Shutdown,
    /// No RTP from the peer for `media.rtp_timeout_ms`.
    RtpTimeout,
    /// `POST /v1/communication/{id}/hangup`.
    HangupRequested,
}

impl ForcedEnd {
    /// The `end_reason` written for the communication.
    pub fn reason(self) -> &'static str {
        match self {
            ForcedEnd::MaxDuration => "max_duration",
            ForcedEnd::Shutdown => "shutdown",
            ForcedEnd::RtpTimeout => "rtp_timeout",
            ForcedEnd::HangupRequested => "hangup_requested",
        }
    }

    /// The line in the history's `errors`.
    pub fn message(self) -> &'static str {
        match self {
            ForcedEnd::MaxDuration => "maximum call duration reached",
            ForcedEnd::Shutdown => "engine shutting down",
            ForcedEnd::RtpTimeout => "no RTP from the peer within media.rtp_timeout_ms",
            ForcedEnd::HangupRequested => "hang-up requested through the API",
        }
    }
}

impl LivePort {
    pub(super) fn ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub(super) async fn next_happening(&mut self) -> Happening {
        let deadline = self.deadline;
        let hangup_all = self.rt.hangup_all.clone();
        let requested = self.hangup.clone();
        // Each reason to end the call is reported once; after that only the leg's end
        // and media are waited for.
        let open = self.forced.is_none();
        // The leg is heard until it has reported its end (`ended`): after that it answers
        // every poll at once with nothing, and a wait that outlasts the end (a prompt being
        // stopped after the caller hung up) would spin on it. A wait that begins after the
        // end checks `ended` before it waits.
        let leg_open = self.ended.is_none();
        let media = async {
            match self.media_events.as_mut() {
                Some(rx) => rx.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            m = media => match m {
                Some(MediaEvent::RtpTimeout { .. }) if open => Happening::Forced(ForcedEnd::RtpTimeout),
                m => Happening::Media(m),
            },
            s = next_signal(&mut self.leg), if leg_open => Happening::Signal(s),
            _ = tokio::time::sleep_until(deadline), if open => Happening::Forced(ForcedEnd::MaxDuration),
            _ = hangup_all.cancelled(), if open => Happening::Forced(ForcedEnd::Shutdown),
            _ = requested.cancelled(), if open => Happening::Forced(ForcedEnd::HangupRequested),
        }
    }

    /// Handles a signal; true when the call ended.
    pub(super) fn on_signal(&mut self, s: Option<Signal>) -> Option<char> {
        match s {
            Some(Signal::Dtmf(d)) => Some(d),
            Some(Signal::Ended(e)) => {
                self.ended = Some(e);
                None
            }
            None => {
                if self.ended.is_none() {
                    self.ended = Some(EndInfo {
                        call_status: callsmith_sip::CallStatus::Answered,
                        sip_code: None,
                        reason: "leg closed".into(),
                        by: callsmith_sip::Party::Remote,
                    });
                }
                None
            }
        }
    }

    /// Waits, at most `within`, for the leg to report its end (after we hung it up). Keys
    /// pressed meanwhile are of no use any more.
    pub(super) async fn wait_leg_end(&mut self, within: Duration) {
        let until = Instant::now() + within;
        while self.ended.is_none() {
            match tokio::time::timeout_at(until, next_signal(&mut self.leg)).await {
                Ok(s) => {
                    self.on_signal(s);
                }
                Err(_) => break,
            }
        }
    }

    /// Keeps a prompt for the history (and tells the live feed).
    pub(super) fn keep_prompt(&mut self, log: PromptLog) {
        if let Some(live) = &self.live {
            live.prompt(&log);
        }
        self.prompts.push(log);
    }

    /// Records a turn's latency (answer → first RTP of the reply) and the moments of its
    /// reply on the last turn, on /metrics and in the live feed.
    pub(super) fn record_turn_latency(&mut self, answer_ns: u64, reply: ReplyTimes) {
        let total_us = reply.first_rtp_ns.saturating_sub(answer_ns) / 1000;
        let engine_us = reply.requested_ns.saturating_sub(answer_ns) / 1000;
        self.rt.turns.latency.observe(total_us as f64 / 1e6);
        self.rt.turns.engine.observe(engine_us as f64 / 1e6);
        let now_ns = callsmith_media::clock::now_ns();
        let ms_at = |ns: u64| {
            self.ms()
                .saturating_sub(now_ns.saturating_sub(ns) / 1_000_000)
        };
        let at_ms = ms_at(reply.first_rtp_ns);
        let (ready_ms, requested_ms) = (ms_at(reply.ready_ns), ms_at(reply.requested_ns));
        let synthesis_ms = reply.first_synthesis_ns.map(ms_at);
        if let Some(t) = self.turns.last_mut() {
            t.reply_ready_ms = Some(ready_ms);
            t.reply_requested_ms = Some(requested_ms);
            t.first_synthesis_ms = synthesis_ms;
            t.reply_first_rtp_ms = Some(at_ms);
            t.response_ms = t.speech_ended_ms.map(|end| at_ms.saturating_sub(end));
            if let Some(ms) = t.response_ms {
                self.rt.turns.response.observe(ms as f64 / 1000.0);
            }
            t.turn_latency_us = Some(total_us);
            t.turn_engine_us = Some(engine_us);
            self.rt.turns.observe_stages(t);
            if let Some(live) = &self.live {
                live.turn(t);
            }
        }
    }

    /// Takes in what happened while the call waits on something else (a model's answer,
    /// the answering-machine detector): keys pressed are kept for the next question, the
    /// call's end is noted, and the deadline or a shutdown ends the call. Returns why the
    /// wait must stop, if it must.
    pub(super) fn wait_interrupted(&mut self, h: Happening) -> Option<&'static str> {
        match h {
            Happening::Media(Some(MediaEvent::Dtmf { digit, .. })) => {
                self.pending_dtmf.push(digit);
                None
            }
            Happening::Media(Some(_)) => None,
            Happening::Media(None) => {
                self.media_events = None;
                None
            }
            Happening::Signal(s) => {
                if let Some(d) = self.on_signal(s) {
                    self.pending_dtmf.push(d);
                }
                self.ended.is_some().then_some("the caller hung up")
            }
            Happening::Forced(f) => {
                self.force_end(f);
                Some("the call ended")
            }
        }
    }

    /// A speech turn lost its recognition (no ready node, or the node failed): the turn
    /// goes on without it (keys still count; silence ends it as `no_input`, so the
    /// question's `fallback_empty` runs), and the failure is in the turn's `stt_error`, the
    /// history's `errors`, the log and `callsmith_recognition_failures`.
    pub(super) fn recognition_failed(&mut self, turn: &mut TurnLog, engine: &str, error: String) {
        warn!(communication = %self.comm.sid, engine, %error, "speech recognition failed");
        self.errors
            .push(format!("recognition (turn {}): {error}", turn.index));
        self.rt
            .turns
            .recognition_failures
            .get_or_create(&vec![("engine".to_string(), engine.to_string())])
            .inc();
        turn.stt_error = Some(error);
    }

    /// Ends the call for `why` (the first reason is the one written).
    pub(super) fn force_end(&mut self, why: ForcedEnd) {
        if self.forced.is_none() {
            self.forced = Some(why);
            self.errors.push(why.message().to_string());
            info!(communication = %self.comm.sid, reason = why.reason(), "ending the call");
        }
        self.leg.hangup();
    }
}

#[async_trait]
impl CallPort for LivePort {
    async fn play(&mut self, prompt: &PromptSpec, interruptible: bool) -> PlayOutcome {
        self.play_prompt(prompt, interruptible).await
    }

    async fn listen(&mut self, spec: &ListenSpec) -> Heard {
        self.listen_turn(spec).await
    }

    async fn classify(
        &mut self,
        id: &str,
        version: i64,
        text: &str,
    ) -> Result<Vec<IntentScore>, String> {
        // The same service the API predicts with: local and remote-trained versions alike.
        self.rt
            .services
            .adapters
            .classifiers
            .predict(&self.comm.account_sid, id, version, text)
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
            .map_err(|e| e.to_string())
    }

    async fn llm(&mut self, request: &LlmRequest) -> Result<String, String> {
        if self.ended.is_some() {
            return Err("the caller hung up".into());
        }
        let account = self.llm_account().await?;
        let llm = self.rt.services.adapters.llm.clone();
        let answer = llm.complete(
            &account.sid,
            chat_request(request),
            self.rt.settings.llm_call_timeout,
        );
        tokio::pin!(answer);
        // The caller may hang up while the model thinks.
        loop {
            tokio::select! {
                r = &mut answer => return r.map(|a| a.content).map_err(|e| e.to_string()),
                h = self.next_happening() => {
                    if let Some(why) = self.wait_interrupted(h) {
                        return Err(why.into());
                    }
                }
            }
        }
    }

    async fn speak_llm(
        &mut self,
        request: &LlmRequest,
        voice: &TtsVoice,
        interruptible: bool,
    ) -> SpokenReply {
        self.speak_reply(request, voice, interruptible).await
    }

    async fn webhook(
        &mut self,
        request: &CompiledRequest,
        mapping: &[MappingEntry],
    ) -> WebhookOutcome {
        self.rt.services.webhook.execute(request, mapping).await
    }

    async fn send_sms(&mut self, to: &str, text: &str) -> SmsOutcome {
        match send_sms(&self.rt, self.agent.as_deref(), &self.from_number, to, text).await {
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
        if self.ended.is_some() || !amd_enabled(self.agent.as_deref()) {
            return AmdVerdict::Unknown;
        }
        let cfg = amd_config();
        let task = match self.session.spawn_answering_machine_detection(cfg) {
            Ok(t) => t,
            Err(e) => {
                self.errors
                    .push(format!("answering-machine detection: {e}"));
                return AmdVerdict::Unknown;
            }
        };
        tokio::pin!(task);
        // The detector decides within its window (plus the beep wait); bound it anyway.
        let until = Instant::now()
            + Duration::from_millis(u64::from(cfg.window_ms + cfg.beep_wait_ms) + 2000);
        loop {
            tokio::select! {
                v = &mut task => {
                    return match v {
                        Ok(Amd::Human) => AmdVerdict::Human,
                        Ok(Amd::Machine | Amd::Beep) => AmdVerdict::Machine,
                        Ok(Amd::Undecided) | Err(_) => AmdVerdict::Unknown,
                    };
                }
                _ = tokio::time::sleep_until(until) => { task.abort(); return AmdVerdict::Unknown; }
                h = self.next_happening() => {
                    if self.wait_interrupted(h).is_some() {
                        task.abort();
                        return AmdVerdict::Unknown;
                    }
                }
            }
        }
    }

    async fn hangup(&mut self, _signal: &str) {
        self.leg.hangup();
    }

    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn traced(&self, event: &callsmith_scenarios::history::TraceEvent) {
        if let Some(live) = &self.live {
            live.traced(event);
        }
    }
}

impl LivePort {
    /// The call's account, when its `global_llm` feature flag lets its bricks ask a model.
    pub(super) async fn llm_account(
        &mut self,
    ) -> Result<callsmith_domain::store::AccountRecord, String> {
        let store = self.rt.store.clone();
        let account = store
            .account_get(&self.comm.account_sid)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the account no longer exists")?;
        let enabled = callsmith_domain::adapters::llm::llm_enabled(&store, &account)
            .await
            .map_err(|e| e.to_string())?;
        if !enabled {
            return Err("llm_disabled: the global_llm feature flag is off for this account".into());
        }
        Ok(account)
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
