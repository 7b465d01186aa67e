//! `ScriptedCall`: a [`CallPort`] with scripted caller behaviour, for tests and benchmarks.
//!
//! It is a stand-in for the live call (the real one is SIP + media in the engine): each
//! `listen` pops the next scripted input, each service call pops the next scripted result,
//! and everything the interpreter asked for is recorded for assertions. Its clock is virtual:
//! a prompt advances it by `ms_per_play`, a listen by `ms_per_listen`, so traces are
//! deterministic. An exhausted script behaves like a caller who hung up.

use std::collections::VecDeque;

use async_trait::async_trait;
use chrono::{DateTime, Duration, TimeZone, Utc};

use crate::model::MappingEntry;
use crate::port::*;
use crate::webhook::{self, CompiledRequest, WebhookOutcome, WebhookResponse};

/// A scripted call.
#[derive(Debug, Clone)]
pub struct ScriptedCall {
    /// The virtual clock.
    pub clock: DateTime<Utc>,
    pub ms_per_play: i64,
    pub ms_per_listen: i64,
    /// Inputs returned by `listen`, in order (empty → `HungUp`).
    pub inputs: VecDeque<Heard>,
    /// Classifier results, in order (empty → `Err`).
    pub intents: VecDeque<Vec<IntentScore>>,
    /// LLM replies, in order (empty → `Err`).
    pub llm_replies: VecDeque<String>,
    /// Webhook responses (`Err` = transport error), in order (empty → transport error).
    pub webhook_responses: VecDeque<Result<WebhookResponse, String>>,
    pub sms_outcomes: VecDeque<SmsOutcome>,
    pub transfer_outcomes: VecDeque<TransferOutcome>,
    pub amd: AmdVerdict,
    /// Hang up when asked to play prompt number `n` (0-based), if set.
    pub hang_up_on_play: Option<usize>,
    /// Report an interruptible prompt as `Interrupted`.
    pub barge_in: bool,
    /// Report prompt number `n` (0-based) as `TakenBack`, if set: the answers heard before
    /// it may be taken back (an eager end of turn the caller then went on after).
    pub take_back_play: Option<usize>,

    // Recordings.
    pub played: Vec<(PromptSpec, bool)>,
    /// Each played prompt's whole [`Interruption`] (`played` has its `keys`).
    pub interruptions: Vec<Interruption>,
    pub listens: Vec<ListenSpec>,
    pub classified: Vec<(String, i64, String)>,
    pub llm_requests: Vec<LlmRequest>,
    pub webhooks: Vec<CompiledRequest>,
    pub sms: Vec<(String, String)>,
    pub transfers: Vec<TransferSpec>,
    pub hangups: Vec<String>,
}

impl Default for ScriptedCall {
    fn default() -> Self {
        ScriptedCall::new()
    }
}

impl ScriptedCall {
    /// A call starting at 2026-01-01T09:00:00Z, 1 s per prompt, 2 s per listen.
    pub fn new() -> ScriptedCall {
        ScriptedCall {
            clock: Utc
                .with_ymd_and_hms(2026, 1, 1, 9, 0, 0)
                .single()
                .unwrap_or_default(),
            ms_per_play: 1000,
            ms_per_listen: 2000,
            inputs: VecDeque::new(),
            intents: VecDeque::new(),
            llm_replies: VecDeque::new(),
            webhook_responses: VecDeque::new(),
            sms_outcomes: VecDeque::new(),
            transfer_outcomes: VecDeque::new(),
            amd: AmdVerdict::Human,
            hang_up_on_play: None,
            barge_in: false,
            take_back_play: None,
            played: Vec::new(),
            interruptions: Vec::new(),
            listens: Vec::new(),
            classified: Vec::new(),
            llm_requests: Vec::new(),
            webhooks: Vec::new(),
            sms: Vec::new(),
            transfers: Vec::new(),
            hangups: Vec::new(),
        }
    }
    /// The caller says `text`.
    pub fn say(mut self, text: &str) -> Self {
        self.inputs.push_back(Heard::Speech {
            transcript: text.to_string(),
            confidence: Some(0.9),
        });
        self
    }
    /// The caller presses `digits`.
    pub fn press(mut self, digits: &str) -> Self {
        self.inputs.push_back(Heard::Dtmf {
            digits: digits.to_string(),
        });
        self
    }
    /// The caller stays silent once.
    pub fn silence(mut self) -> Self {
        self.inputs.push_back(Heard::NoInput);
        self
    }
    /// The next classification returns `scores`.
    pub fn intents(mut self, scores: &[(&str, f64)]) -> Self {
        self.intents.push_back(
            scores
                .iter()
                .map(|(i, c)| IntentScore {
                    intent: (*i).to_string(),
                    confidence: *c,
                })
                .collect(),
        );
        self
    }
    /// The next LLM reply.
    pub fn llm_reply(mut self, reply: &str) -> Self {
        self.llm_replies.push_back(reply.to_string());
        self
    }
    /// The next webhook receives this response.
    pub fn webhook_response(mut self, status: i64, headers: &[(&str, &str)], body: &str) -> Self {
        let mut resp = WebhookResponse {
            http_status_code: status,
            http_status_text: String::new(),
            body: body.to_string(),
            duration: 5,
            ..WebhookResponse::default()
        };
        for (k, v) in headers {
            resp.headers
                .entry((*k).to_string())
                .or_default()
                .push((*v).to_string());
        }
        self.webhook_responses.push_back(Ok(resp));
        self
    }
    /// The next webhook fails in transport.
    pub fn webhook_error(mut self, error: &str) -> Self {
        self.webhook_responses.push_back(Err(error.to_string()));
        self
    }
    /// The next SMS has this outcome.
    pub fn sms_outcome(mut self, o: SmsOutcome) -> Self {
        self.sms_outcomes.push_back(o);
        self
    }
    /// The next transfer has this outcome.
    pub fn transfer_outcome(mut self, o: TransferOutcome) -> Self {
        self.transfer_outcomes.push_back(o);
        self
    }
    /// The answering-machine verdict.
    pub fn amd(mut self, v: AmdVerdict) -> Self {
        self.amd = v;
        self
    }
    /// Texts of the TTS prompts played, in order (files as `file:<url>`).
    pub fn played_texts(&self) -> Vec<String> {
        self.played
            .iter()
            .map(|(p, _)| match p {
                PromptSpec::Tts { text, .. } => text.clone(),
                PromptSpec::File { url } => format!("file:{url}"),
            })
            .collect()
    }
}

#[async_trait]
impl CallPort for ScriptedCall {
    async fn play(&mut self, prompt: &PromptSpec, interruption: Interruption) -> PlayOutcome {
        let n = self.played.len();
        self.played.push((prompt.clone(), interruption.keys));
        self.interruptions.push(interruption);
        self.clock += Duration::milliseconds(self.ms_per_play);
        if self.hang_up_on_play == Some(n) {
            return PlayOutcome::HungUp;
        }
        if self.take_back_play == Some(n) {
            return PlayOutcome::TakenBack;
        }
        if interruption.any() && self.barge_in {
            PlayOutcome::Interrupted
        } else {
            PlayOutcome::Completed
        }
    }
    async fn listen(&mut self, spec: &ListenSpec) -> Heard {
        self.listens.push(spec.clone());
        self.clock += Duration::milliseconds(self.ms_per_listen);
        self.inputs.pop_front().unwrap_or(Heard::HungUp)
    }
    async fn classify(
        &mut self,
        id: &str,
        version: i64,
        text: &str,
    ) -> Result<Vec<IntentScore>, PortError> {
        self.classified
            .push((id.to_string(), version, text.to_string()));
        self.intents
            .pop_front()
            .ok_or_else(|| PortError::Failed("no scripted classification".into()))
    }
    async fn llm(&mut self, request: &LlmRequest) -> Result<String, PortError> {
        self.llm_requests.push(request.clone());
        self.llm_replies
            .pop_front()
            .ok_or_else(|| PortError::Failed("no scripted llm reply".into()))
    }
    async fn webhook(
        &mut self,
        request: &CompiledRequest,
        mapping: &[MappingEntry],
    ) -> WebhookOutcome {
        self.webhooks.push(request.clone());
        let received = self
            .webhook_responses
            .pop_front()
            .unwrap_or_else(|| Err("connection refused".to_string()));
        WebhookOutcome::finish(webhook::to_curl(request), None, received, mapping)
    }
    async fn send_sms(&mut self, to: &str, text: &str) -> SmsOutcome {
        self.sms.push((to.to_string(), text.to_string()));
        self.sms_outcomes.pop_front().unwrap_or(SmsOutcome::Sent)
    }
    async fn transfer(&mut self, spec: &TransferSpec) -> TransferOutcome {
        self.transfers.push(spec.clone());
        self.transfer_outcomes
            .pop_front()
            .unwrap_or(TransferOutcome::Success)
    }
    async fn answering_machine(&mut self) -> AmdVerdict {
        self.amd
    }
    async fn hangup(&mut self, signal: &str) {
        self.hangups.push(signal.to_string());
    }
    fn now(&self) -> DateTime<Utc> {
        self.clock
    }
    fn answer_may_be_taken_back(&self) -> bool {
        self.take_back_play.is_some_and(|n| n >= self.played.len())
    }
}

/// A realistic scenario of about `bricks` bricks (rounded up to blocks of ten) for benchmarks
/// and load tests: start_call → blocks of (audio_tts, assignment, question with two answers
/// and fallbacks, webhook with mappings, data_mapping, condition_group, increment, goal, audio,
/// sms) → end. Every branch leads to the next block, so the scenario validates cleanly.
pub fn realistic_scenario(bricks: usize) -> serde_json::Value {
    use serde_json::json;
    let blocks = bricks.div_ceil(10).max(1);
    let head = |b: usize| {
        if b >= blocks {
            "end".to_string()
        } else {
            format!("b{b}_say")
        }
    };
    let mut kinds: std::collections::BTreeMap<&str, Vec<serde_json::Value>> = Default::default();
    let mut push =
        |kind: &'static str, v: serde_json::Value| kinds.entry(kind).or_default().push(v);
    push(
        "start_call",
        json!({"id": "start", "description": "", "properties": {
            "stt_general": {"language": "en-US", "engine": "whisper", "model": "tiny.en", "primary_language": "en-US", "fallback_languages": []},
            "tts_general": {"language": "en-US", "voice": "slt", "engine": "flite", "speed": 1, "model": ""}},
            "outputs": [{"type": "next", "description": "", "next": head(0)}]}),
    );
    push(
        "end",
        json!({"id": "end", "description": "", "properties": {}, "outputs": []}),
    );
    for b in 0..blocks {
        let id = |s: &str| format!("b{b}_{s}");
        let next = |to: String| json!([{"type": "next", "description": "", "next": to}]);
        push(
            "audio_tts",
            json!({"id": id("say"), "description": "", "properties": {"text": "Step {{step}} for {{name}}, order {{order_id}}.", "language": "", "voice": "", "engine": "", "model": ""}, "outputs": next(id("set"))}),
        );
        push(
            "assignment",
            json!({"id": id("set"), "description": "", "properties": {"variables": [{"name": "step", "value": format!("{b}")}, {"name": "{{label}}", "value": "block {{step}} of {{call.recipient}}"}]}, "outputs": next(id("ask"))}),
        );
        push(
            "question",
            json!({"id": id("ask"), "description": "", "properties": {
            "dtmf_properties": {"dtmf_timeout": 3, "no_input_timeout": 5, "min_symbols": 1, "max_symbols": 1, "finish_on_key": "#"},
            "stt_properties": {"speech_timeout": 1, "no_input_timeout": 5, "language": "", "tokens": ["yes", "no"],
                "intent_properties": {"classifier": {"id": "", "version": 0}, "threshold": 0.6}},
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Do you confirm step {{step}}?"}, "file": {"url": ""}}, "is_interruptible": true},
            "type": "standard", "input_mode": "speech_and_dtmf",
            "answer": {"answers": [
                {"answer_id": "yes", "description": "", "speech_input": {"tokens": ["yes", "sure"], "mode": "contains", "intent": {"id": ""}, "entity": {"entities": []}}, "dtmf_input": {"value": "1"}, "tag": ""},
                {"answer_id": "no", "description": "", "speech_input": {"tokens": ["no"], "mode": "exact", "intent": {"id": ""}, "entity": {"entities": [{"type": "number", "variable": {"name": "n"}}]}}, "dtmf_input": {"value": "2"}, "tag": ""}]},
            "fallback_invalid": {"fallbacks": [{"is_repeat_statement": true, "audio": {"mode": "tts", "tts": {"text": "Sorry?"}, "file": {"url": ""}}, "is_interruptible": false, "type": "audio"}]},
            "fallback_empty": {"fallbacks": [{"is_repeat_statement": true, "audio": {"mode": "tts", "tts": {"text": "Hello?"}, "file": {"url": ""}}, "is_interruptible": false, "type": "audio"}]}},
            "outputs": [{"type": "yes", "description": "", "next": id("hook")}, {"type": "no", "description": "", "next": id("hook")},
                        {"type": "invalid", "description": "", "next": id("hook")}, {"type": "empty", "description": "", "next": id("hook")}]}),
        );
        push(
            "webhook",
            json!({"id": id("hook"), "description": "", "properties": {
            "request": {"method": "POST", "url": "http://127.0.0.1:8080/steps/{{step}}",
                "body": {"data": "{\"step\": \"{{step}}\", \"who\": \"{{call.recipient}}\"}", "type": "json", "form_values": []},
                "authentication": {"type": "bearer", "bearer": {"token": "{{api_token}}"}},
                "header": {"headers": [{"name": "X-Step", "value": "{{step}}"}]}, "timeout": 2},
            "options": {"async": false, "timeout": 5},
            "response_mapping": {"variables": [{"name": "{{score}}", "source": "body", "path": "$.score", "set_if_not_found": "0"},
                                               {"name": "{{rid}}", "source": "header", "path": "X-Request-Id", "set_if_not_found": ""}]}},
            "outputs": [{"type": "processed", "description": "", "next": id("map")}, {"type": "fail", "description": "", "next": id("map")}]}),
        );
        push(
            "data_mapping",
            json!({"id": id("map"), "description": "", "properties": {"input": "{{webhook.body}}", "variables": [{"name": "tier", "source": "body", "path": "$.tier", "set_if_not_found": "basic"}]}, "outputs": next(id("branch"))}),
        );
        push(
            "condition_group",
            json!({"id": id("branch"), "description": "", "properties": {"condition": {"conditions": [
            {"condition_id": "high", "description": "", "condition_operator": "and", "elements": [
                {"variable": "score", "element_operator": "greater", "value": "50"}, {"variable": "tier", "element_operator": "regex", "value": "^(gold|silver)$"}]},
            {"condition_id": "low", "description": "", "condition_operator": "or", "elements": [
                {"variable": "score", "element_operator": "less_or_equal", "value": "50"}, {"variable": "tier", "element_operator": "empty", "value": ""}]}]}},
            "outputs": [{"type": "high", "description": "", "next": id("count")}, {"type": "low", "description": "", "next": id("count")}, {"type": "else", "description": "", "next": id("count")}]}),
        );
        push(
            "increment",
            json!({"id": id("count"), "description": "", "properties": {"variables": [{"variable": "visits"}]}, "outputs": next(id("goal"))}),
        );
        push(
            "goal",
            json!({"id": id("goal"), "description": "", "properties": {"goal": "step-{{step}}"}, "outputs": next(id("play"))}),
        );
        push(
            "audio",
            json!({"id": id("play"), "description": "", "properties": {"play_mode": "sequential", "audios": [
            {"mode": "tts", "tts_properties": {"text": "Thanks {{name}}."}, "file_properties": {"url": ""}},
            {"mode": "file", "tts_properties": {"text": ""}, "file_properties": {"url": "https://cdn.example.test/chime.wav"}}],
            "tts_general": {"language": "", "voice": "kal16", "engine": "", "speed": 1.1, "model": ""}}, "outputs": next(id("sms"))}),
        );
        push(
            "sms",
            json!({"id": id("sms"), "description": "", "properties": {"to": "", "text": "Step {{step}} done, score {{score}}."},
            "outputs": [{"type": "success", "description": "", "next": head(b + 1)}, {"type": "failure", "description": "", "next": head(b + 1)}]}),
        );
    }
    let bricks: serde_json::Map<String, serde_json::Value> = kinds
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!({ "v1": v })))
        .collect();
    json!({"name": "realistic", "constructor": {"bricks": bricks}})
}
