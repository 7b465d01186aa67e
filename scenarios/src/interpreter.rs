//! The interpreter: runs a scenario snapshot against one call through a [`CallPort`].
//!
//! A [`Program`] indexes a snapshot once (brick ids, scenario-level defaults) and can run any
//! number of calls. Running starts at the entry brick for the call's direction, enters bricks,
//! takes outputs and stops at `end`/`end_call`, a hang-up, an unconnected output, or when the
//! step budget (bricks entered, [`DEFAULT_MAX_STEPS`]) runs out. See `docs/bricks.md`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Datelike, Timelike, Utc};
/// Re-exported so callers can build a [`CallInfo`] without depending on chrono-tz.
pub use chrono_tz::Tz;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::condition::{self, Combine, ElementOp};
use crate::entity;
use crate::history::{EndReason, Event, Trace, TraceEvent};
use crate::model::*;
use crate::opt::Opt;
use crate::port::*;
use crate::template::{self, Vars};
use crate::turn::DEFAULT_NO_INPUT_SECS;
use crate::validate::output;
use crate::webhook::{self, CallMetadata, WebhookOutcome, WebhookStatus};

/// A question's own setting when it is not empty, else the scenario's (`start_call`), else "".
fn own_or_base(own: Option<&str>, base: Option<&str>) -> String {
    match own.filter(|s| !s.is_empty()) {
        Some(s) => s.to_string(),
        None => base.unwrap_or("").to_string(),
    }
}

/// The recognition engine a question listens with: its `stt_properties.engine`, else the
/// scenario's `stt_general.engine`, else "" (the node's default engine).
fn stt_engine(p: &QuestionProps, general: Option<&SttGeneral>) -> String {
    own_or_base(
        p.stt_properties.get().map(|s| s.engine.str()),
        general.map(|g| g.engine.str()),
    )
}

/// Whether a question takes speech: by its `input_mode` (`dtmf` alone does not; unset
/// does).
fn takes_speech(p: &QuestionProps) -> bool {
    p.input_mode.str() != "dtmf"
}

/// Bricks a call may enter before the interpreter stops it as a loop.
pub const DEFAULT_MAX_STEPS: usize = 1000;
/// Transfer answer timeout when the brick sets none (seconds).
pub const DEFAULT_TRANSFER_TIMEOUT_SECS: f64 = 30.0;
/// Classifier confidence needed when `threshold` is unset.
pub const DEFAULT_INTENT_THRESHOLD: f64 = 0.5;

/// CallDirection of the call being run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallDirection {
    Outbound,
    Inbound,
}

impl CallDirection {
    /// The text the call's records keep (`outbound`, `inbound`; its serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            CallDirection::Outbound => "outbound",
            CallDirection::Inbound => "inbound",
        }
    }
}

/// Facts about the call the scenario runs in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallInfo {
    pub direction: CallDirection,
    pub recipient: String,
    pub from: String,
    pub communication_id: String,
    /// The call's timezone (the agent's or the account's).
    pub timezone: Tz,
    /// The dispatch `data` map, already flattened to strings (see [`data_to_vars`]).
    pub data: BTreeMap<String, String>,
}

/// Flattens a dispatch `data` map (scalars) into variables: strings verbatim, numbers and
/// booleans as JSON text; nested values (rejected by the route) are kept as compact JSON.
pub fn data_to_vars(data: &serde_json::Map<String, Value>) -> BTreeMap<String, String> {
    data.iter()
        .map(|(k, v)| (k.clone(), crate::codes::value_text(v)))
        .collect()
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRun {
    pub end: EndReason,
    /// Variables at the end of the call (built-ins excluded).
    pub variables: BTreeMap<String, String>,
    /// Goals reached, in order.
    pub goals: Vec<String>,
    /// Bricks entered.
    pub steps: usize,
    pub trace: Trace,
}

/// A brick's position in its snapshot: its kind and its index in that kind's `v1` array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BrickAt {
    kind: BrickKind,
    index: usize,
}

impl BrickAt {
    fn of(b: &BrickRef<'_>) -> BrickAt {
        BrickAt {
            kind: b.kind,
            index: b.index,
        }
    }
}

/// An indexed snapshot, ready to run calls. It owns its snapshot and keeps positions, not
/// borrows, so one `Program` (behind an `Arc`) serves every call of a scenario version:
/// the index is built once, and compiled patterns are shared across calls.
#[derive(Debug)]
pub struct Program {
    snapshot: Arc<Snapshot>,
    by_id: HashMap<String, BrickAt>,
    start_call: Option<BrickAt>,
    outbound_call: Option<BrickAt>,
    inbound_call: Option<BrickAt>,
    /// Compiled `regex` condition patterns shared by every call of this program (compiling is
    /// ~50 µs; matching is far cheaper). Bounded by [`REGEX_CACHE_LIMIT`].
    regexes: Mutex<HashMap<String, Option<Regex>>>,
    /// Bricks a call may enter.
    pub max_steps: usize,
}

/// Most distinct patterns a program caches (rendered patterns could otherwise grow it).
pub const REGEX_CACHE_LIMIT: usize = 1024;

impl Program {
    /// Indexes a snapshot (first brick wins on duplicate ids; validate first).
    pub fn new(snapshot: impl Into<Arc<Snapshot>>) -> Program {
        let snapshot = snapshot.into();
        let mut p = Program {
            snapshot: snapshot.clone(),
            by_id: HashMap::new(),
            start_call: None,
            outbound_call: None,
            inbound_call: None,
            regexes: Mutex::new(HashMap::new()),
            max_steps: DEFAULT_MAX_STEPS,
        };
        if let Some(bricks) = snapshot.bricks() {
            bricks.for_each(|b| {
                if !b.id.is_empty() {
                    p.by_id
                        .entry(b.id.to_string())
                        .or_insert_with(|| BrickAt::of(&b));
                }
                let slot = match b.kind {
                    BrickKind::StartCall => &mut p.start_call,
                    BrickKind::OutboundCall => &mut p.outbound_call,
                    BrickKind::InboundCall => &mut p.inbound_call,
                    _ => return,
                };
                if slot.is_none() {
                    *slot = Some(BrickAt::of(&b));
                }
            });
        }
        p
    }

    /// The snapshot this program runs.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    fn brick(&self, at: BrickAt) -> Option<BrickRef<'_>> {
        self.snapshot.bricks()?.get(at.kind, at.index)
    }

    /// Scenario-level defaults: the properties of the first `start_call` brick.
    fn defaults(&self) -> Option<&StartCallProps> {
        match self.brick(self.start_call?)?.props {
            Some(BrickProps::StartCall(s)) => Some(s),
            _ => None,
        }
    }

    /// The questions that listen for speech, as (brick id, recognition engine): the engine
    /// a call's listen turn asks for ("" when neither the question nor `start_call` names
    /// one: the node's default engine). Questions that take keys only are left out.
    pub fn speech_engines(&self) -> Vec<(String, String)> {
        let general = self.defaults().and_then(|d| d.stt_general.get());
        let mut out = Vec::new();
        if let Some(bricks) = self.snapshot.bricks() {
            bricks.for_each(|b| {
                if let Some(BrickProps::Question(p)) = b.props
                    && takes_speech(p)
                {
                    out.push((b.id.to_string(), stt_engine(p, general)));
                }
            });
        }
        out
    }

    /// Runs the scenario for one call.
    pub async fn run(&self, call: &CallInfo, port: &mut dyn CallPort) -> CallRun {
        let mut run = Run {
            program: self,
            call,
            start: port.now(),
            vars: call.data.clone(),
            goals: Vec::new(),
            trace: Trace::default(),
            visits: 0,
            rewind: None,
            taken_back: false,
            resume: None,
        };
        let (end, steps) = run.walk(port).await;
        run.record(
            port,
            Event::CallEnded {
                reason: end.clone(),
            },
        );
        CallRun {
            end,
            variables: run.vars,
            goals: run.goals,
            steps,
            trace: run.trace,
        }
    }

    /// The compiled pattern (None when it does not compile), from the shared cache.
    fn regex(&self, pattern: &str) -> Option<Regex> {
        let mut cache = self.regexes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = cache.get(pattern) {
            return r.clone();
        }
        let compiled = Regex::new(pattern).ok();
        if cache.len() < REGEX_CACHE_LIMIT {
            cache.insert(pattern.to_string(), compiled.clone());
        }
        compiled
    }

    fn entry(&self, direction: CallDirection) -> Option<BrickRef<'_>> {
        let at = match direction {
            CallDirection::Outbound => self.start_call.or(self.outbound_call),
            CallDirection::Inbound => self.inbound_call,
        }?;
        self.brick(at)
    }
}

/// Built-in variables every call provides (see `docs/bricks.md`, "Templating"); [`Scope`]
/// answers each of them.
pub const CALL_VARIABLES: &[&str] = &[
    "call.recipient",
    "call.from",
    "call.communication_id",
    "call.direction",
    "time.now",
    "time.date",
    "time.time",
    "time.hour",
    "time.minute",
    "time.weekday",
    "time.timezone",
];

/// Set by every webhook brick that gets a response: its HTTP status code.
pub const WEBHOOK_STATUS_CODE: &str = "webhook.status_code";
/// Set by every webhook brick that gets a response: its body.
pub const WEBHOOK_BODY: &str = "webhook.body";

/// Whether a call provides `name` whatever the scenario sets: a call variable or a webhook
/// brick's response variable.
pub fn is_builtin_variable(name: &str) -> bool {
    CALL_VARIABLES.contains(&name) || name == WEBHOOK_STATUS_CODE || name == WEBHOOK_BODY
}

/// Variables plus built-ins, as seen by templates.
struct Scope<'r> {
    vars: &'r BTreeMap<String, String>,
    call: &'r CallInfo,
    now: DateTime<Tz>,
}

impl Vars for Scope<'_> {
    fn lookup(&self, name: &str) -> Option<String> {
        if let Some(v) = self.vars.get(name) {
            return Some(v.clone());
        }
        let n = &self.now;
        Some(match name {
            "call.recipient" => self.call.recipient.clone(),
            "call.from" => self.call.from.clone(),
            "call.communication_id" => self.call.communication_id.clone(),
            "call.direction" => match self.call.direction {
                CallDirection::Outbound => "outbound".into(),
                CallDirection::Inbound => "inbound".into(),
            },
            "time.now" => n.to_rfc3339(),
            "time.date" => n.format("%Y-%m-%d").to_string(),
            "time.time" => n.format("%H:%M:%S").to_string(),
            "time.hour" => n.hour().to_string(),
            "time.minute" => n.minute().to_string(),
            "time.weekday" => n.weekday().number_from_monday().to_string(),
            "time.timezone" => self.call.timezone.name().to_string(),
            _ => return None,
        })
    }
}

/// What a brick decided: take an output, or stop.
enum Step {
    Take(String),
    Stop(EndReason),
}

/// What a question says before it listens again after a fallback.
enum Reprompt {
    /// The fallback's own prompt.
    Prompt(PromptSpec, bool),
    /// A reply generated by a language model, spoken as it streams.
    Llm(LlmRequest, TtsVoice, bool),
}

struct Run<'p> {
    program: &'p Program,
    call: &'p CallInfo,
    start: DateTime<Utc>,
    vars: BTreeMap<String, String>,
    goals: Vec<String>,
    trace: Trace,
    visits: u64,
    /// Where to go back to when the reply to an eager answer is taken back.
    rewind: Option<Rewind<'p>>,
    /// A reply was taken back ([`PlayOutcome::TakenBack`]): the walk goes back to
    /// `rewind`'s question once the brick returns.
    taken_back: bool,
    /// The question re-entered after a take-back listens on without its statement, with
    /// these fallback counts (invalid, empty).
    resume: Option<(usize, usize)>,
}

/// A question whose answer may still be taken back, and the state before the answer.
struct Rewind<'p> {
    question: BrickRef<'p>,
    vars: BTreeMap<String, String>,
    goals: Vec<String>,
    fallbacks: (usize, usize),
}

impl<'p> Run<'p> {
    fn record(&mut self, port: &dyn CallPort, event: Event) {
        let at_ms = (port.now() - self.start).num_milliseconds();
        let event = TraceEvent { at_ms, event };
        port.traced(&event);
        self.trace.events.push(event);
    }

    fn render(&self, port: &dyn CallPort, text: &str) -> String {
        if !template::has_open(text) {
            return text.to_string();
        }
        let scope = Scope {
            vars: &self.vars,
            call: self.call,
            now: port.now().with_timezone(&self.call.timezone),
        };
        template::render(text, &scope)
    }

    fn lookup(&self, port: &dyn CallPort, name: &str) -> Option<String> {
        let scope = Scope {
            vars: &self.vars,
            call: self.call,
            now: port.now().with_timezone(&self.call.timezone),
        };
        scope.lookup(name)
    }

    fn set_var(&mut self, port: &dyn CallPort, name: &str, value: String) {
        let old = self.vars.insert(name.to_string(), value.clone());
        if old.as_deref() != Some(value.as_str()) {
            self.record(
                port,
                Event::VariableChanged {
                    name: name.to_string(),
                    old,
                    new: value,
                },
            );
        }
    }

    async fn walk(&mut self, port: &mut dyn CallPort) -> (EndReason, usize) {
        let Some(mut brick) = self.program.entry(self.call.direction) else {
            port.hangup("").await;
            return (EndReason::NoStart, 0);
        };
        let mut steps = 0;
        loop {
            if steps >= self.program.max_steps {
                port.hangup("").await;
                return (EndReason::StepBudget { steps }, steps);
            }
            steps += 1;
            self.visits += 1;
            self.record(
                &*port,
                Event::BrickEntered {
                    brick_id: brick.id.to_string(),
                    kind: brick.kind.as_str().to_string(),
                },
            );
            let step = self.enter(brick, port).await;
            if let Some(question) = self.take_back() {
                brick = question;
                continue;
            }
            let out = match step {
                Step::Stop(reason) => return (reason, steps),
                Step::Take(out) => out,
            };
            // The specific output, else the catch-all `next`.
            let chosen = brick.next_of(&out).map(|o| (out.clone(), o)).or_else(|| {
                (out != output::NEXT)
                    .then(|| {
                        brick
                            .next_of(output::NEXT)
                            .map(|o| (output::NEXT.to_string(), o))
                    })
                    .flatten()
            });
            let target = chosen
                .as_ref()
                .and_then(|(_, o)| self.program.by_id.get(o.next.str()))
                .and_then(|&at| self.program.brick(at));
            let taken = chosen.as_ref().map(|(t, _)| t.clone()).unwrap_or(out);
            self.record(
                &*port,
                Event::OutputTaken {
                    brick_id: brick.id.to_string(),
                    output: taken.clone(),
                    next: target.map(|t| t.id.to_string()),
                },
            );
            match target {
                Some(t) => brick = t,
                None => {
                    port.hangup("").await;
                    return (
                        EndReason::Unconnected {
                            brick_id: brick.id.to_string(),
                            output: taken,
                        },
                        steps,
                    );
                }
            }
        }
    }

    /// After a brick whose reply was taken back: the state before the eager answer is
    /// restored and the question that took it is next (it listens on).
    fn take_back(&mut self) -> Option<BrickRef<'p>> {
        if !std::mem::take(&mut self.taken_back) {
            return None;
        }
        let r = self.rewind.take()?;
        self.vars = r.vars;
        self.goals = r.goals;
        self.resume = Some(r.fallbacks);
        Some(r.question)
    }

    async fn enter(&mut self, b: BrickRef<'p>, port: &mut dyn CallPort) -> Step {
        let next = || Step::Take(output::NEXT.to_string());
        let Some(props) = b.props else {
            // Terminal kinds stop even without (or with malformed) properties.
            return match b.kind {
                BrickKind::End | BrickKind::EndCall => {
                    port.hangup("").await;
                    Step::Stop(match b.kind {
                        BrickKind::End => EndReason::End {
                            brick_id: b.id.to_string(),
                        },
                        _ => EndReason::EndCall {
                            brick_id: b.id.to_string(),
                            signal: String::new(),
                        },
                    })
                }
                _ => next(),
            };
        };
        match props {
            BrickProps::StartTree(_) | BrickProps::InboundCall(_) | BrickProps::StartCall(_) => {
                next()
            }
            BrickProps::End(_) => {
                port.hangup("").await;
                Step::Stop(EndReason::End {
                    brick_id: b.id.to_string(),
                })
            }
            BrickProps::EndCall(p) => {
                let signal = self.render(&*port, p.signal.str());
                port.hangup(&signal).await;
                Step::Stop(EndReason::EndCall {
                    brick_id: b.id.to_string(),
                    signal,
                })
            }
            BrickProps::OutboundCall(p) => {
                if !p.is_voicemail.flag() {
                    return next();
                }
                let verdict = port.answering_machine().await;
                self.record(
                    &*port,
                    Event::AnsweringMachine {
                        brick_id: b.id.to_string(),
                        verdict,
                    },
                );
                Step::Take(
                    match verdict {
                        AmdVerdict::Machine => output::VOICEMAIL,
                        AmdVerdict::Human | AmdVerdict::Unknown => output::HUMAN,
                    }
                    .to_string(),
                )
            }
            BrickProps::Goal(p) => {
                let goal = self.render(&*port, p.goal.str());
                self.goals.push(goal.clone());
                self.record(
                    &*port,
                    Event::GoalReached {
                        brick_id: b.id.to_string(),
                        goal,
                    },
                );
                next()
            }
            BrickProps::Assignment(p) => {
                for v in p.variables.items() {
                    if let Some(name) = template::unwrap_target(v.name.str()) {
                        let value = self.render(&*port, v.value.str());
                        self.set_var(&*port, name, value);
                    }
                }
                next()
            }
            BrickProps::Increment(p) => {
                for v in p.variables.items() {
                    if let Some(name) = template::unwrap_target(v.variable.str()) {
                        let cur = self.lookup(&*port, name).unwrap_or_default();
                        self.set_var(&*port, name, increment(&cur));
                    }
                }
                next()
            }
            BrickProps::ConditionGroup(p) => Step::Take(self.condition_group(p, &*port)),
            BrickProps::DataMapping(p) => {
                let input = self.render(&*port, p.input.str());
                let doc: Option<Value> = serde_json::from_str(&input).ok();
                for m in p.variables.items() {
                    let Some(name) = template::unwrap_target(m.name.str()) else {
                        continue;
                    };
                    let found = doc
                        .as_ref()
                        .and_then(|d| webhook::json_path_first(m.path.str(), d));
                    let value = found.unwrap_or_else(|| m.set_if_not_found.str().to_string());
                    self.set_var(&*port, name, value);
                }
                next()
            }
            BrickProps::Audio(p) => {
                let base = p.tts_general.get();
                let audios = p.audios.items();
                let chosen: Vec<&AudioEntry> =
                    if p.play_mode.str() == "random" && !audios.is_empty() {
                        let i = (fnv(&[
                            self.call.communication_id.as_bytes(),
                            b.id.as_bytes(),
                            &self.visits.to_le_bytes(),
                        ]) % audios.len() as u64) as usize;
                        vec![&audios[i]]
                    } else {
                        audios.iter().collect()
                    };
                for a in chosen {
                    let prompt = match a.mode.str() {
                        "file" => PromptSpec::File {
                            url: self.render(
                                &*port,
                                a.file_properties.get().map(|f| f.url.str()).unwrap_or(""),
                            ),
                        },
                        _ => PromptSpec::Tts {
                            text: self.render(
                                &*port,
                                a.tts_properties.get().map(|t| t.text.str()).unwrap_or(""),
                            ),
                            voice: self.voice(base),
                        },
                    };
                    if self.play(b, port, prompt, Interruption::NONE).await == PlayOutcome::HungUp {
                        return Step::Stop(EndReason::HungUp);
                    }
                }
                next()
            }
            BrickProps::AudioFile(p) => {
                let prompt = PromptSpec::File {
                    url: self.render(&*port, p.url.str()),
                };
                if self.play(b, port, prompt, Interruption::NONE).await == PlayOutcome::HungUp {
                    return Step::Stop(EndReason::HungUp);
                }
                next()
            }
            BrickProps::AudioTts(p) => {
                let own = TtsSettings {
                    language: p.language.clone(),
                    voice: p.voice.clone(),
                    engine: p.engine.clone(),
                    model: p.model.clone(),
                    ..TtsSettings::default()
                };
                let prompt = PromptSpec::Tts {
                    text: self.render(&*port, p.text.str()),
                    voice: self.voice(Some(&own)),
                };
                if self.play(b, port, prompt, Interruption::NONE).await == PlayOutcome::HungUp {
                    return Step::Stop(EndReason::HungUp);
                }
                next()
            }
            BrickProps::Sms(p) => {
                let to = match self.render(&*port, p.to.str()).trim() {
                    "" => self.call.recipient.clone(),
                    t => t.to_string(),
                };
                let text = self.render(&*port, p.text.str());
                let outcome = port.send_sms(&to, &text).await;
                let out = match outcome {
                    SmsOutcome::Sent => output::SUCCESS,
                    SmsOutcome::Failed(_) => output::FAILURE,
                };
                self.record(
                    &*port,
                    Event::SmsSent {
                        brick_id: b.id.to_string(),
                        to,
                        text,
                        outcome,
                    },
                );
                Step::Take(out.to_string())
            }
            BrickProps::CallTransfer(p) => {
                let voice_base = p.tts_properties.get();
                let spec = TransferSpec {
                    mode: if p.transfer_mode.str() == "bridged" {
                        TransferMode::Bridged
                    } else {
                        TransferMode::Blind
                    },
                    from: self.render(&*port, p.from.str()),
                    number: self.render(&*port, p.number.str()),
                    timeout_secs: p
                        .timeout
                        .f64()
                        .filter(|t| *t > 0.0)
                        .unwrap_or(DEFAULT_TRANSFER_TIMEOUT_SECS),
                    sip_headers: p
                        .sip_header
                        .get()
                        .map(|h| h.sip_headers.items())
                        .unwrap_or(&[])
                        .iter()
                        .filter(|nv| !nv.name.str().trim().is_empty())
                        .map(|nv| {
                            (
                                nv.name.str().trim().to_string(),
                                self.render(&*port, nv.value.str()),
                            )
                        })
                        .collect(),
                    message_to_manager: self.prompt_audio(
                        &*port,
                        p.message_to_manager.get(),
                        voice_base,
                    ),
                    message_to_client: self.prompt_audio(
                        &*port,
                        p.message_to_client.get(),
                        voice_base,
                    ),
                };
                let outcome = port.transfer(&spec).await;
                let out = match outcome {
                    TransferOutcome::Success => output::SUCCESS,
                    TransferOutcome::Failure(_) => output::FAILURE,
                    TransferOutcome::Timeout => output::TIMEOUT,
                };
                self.record(
                    &*port,
                    Event::Transferred {
                        brick_id: b.id.to_string(),
                        spec: Box::new(spec),
                        outcome,
                    },
                );
                Step::Take(out.to_string())
            }
            BrickProps::Webhook(p) => {
                let metadata = CallMetadata {
                    communication_id: self.call.communication_id.clone(),
                    recipient: self.call.recipient.clone(),
                    from: self.call.from.clone(),
                };
                let compiled = {
                    let scope = Scope {
                        vars: &self.vars,
                        call: self.call,
                        now: port.now().with_timezone(&self.call.timezone),
                    };
                    webhook::compile(p, &scope, Some(&metadata))
                };
                let mapping = webhook::mapping(p);
                let outcome = match compiled {
                    Ok(req) => port.webhook(&req, mapping).await,
                    Err(error) => WebhookOutcome::finish(String::new(), None, Err(error), mapping),
                };
                for (k, v) in &outcome.variables {
                    self.set_var(&*port, k, v.clone());
                }
                if let Some(r) = &outcome.response {
                    self.set_var(&*port, WEBHOOK_STATUS_CODE, r.http_status_code.to_string());
                    self.set_var(&*port, WEBHOOK_BODY, r.body.clone());
                }
                let out = match outcome.status {
                    WebhookStatus::Processed => output::PROCESSED,
                    WebhookStatus::Fail => output::FAIL,
                };
                self.record(
                    &*port,
                    Event::WebhookCalled {
                        brick_id: b.id.to_string(),
                        outcome: Box::new(outcome),
                    },
                );
                Step::Take(out.to_string())
            }
            BrickProps::Question(p) => self.question(b, p, port).await,
        }
    }

    /// Brick TTS settings over the scenario-level `start_call.tts_general`, field by field.
    fn voice(&self, brick: Option<&TtsSettings>) -> TtsVoice {
        let base = self.program.defaults().and_then(|d| d.tts_general.get());
        let pick = |f: fn(&TtsSettings) -> &Opt<String>| -> String {
            let own = brick.map(|t| f(t).str()).unwrap_or("");
            if own.is_empty() {
                base.map(|t| f(t).str()).unwrap_or("").to_string()
            } else {
                own.to_string()
            }
        };
        TtsVoice {
            engine: pick(|t| &t.engine),
            voice: pick(|t| &t.voice),
            language: pick(|t| &t.language),
            model: pick(|t| &t.model),
            speed: brick
                .and_then(|t| t.speed.f64())
                .or_else(|| base.and_then(|t| t.speed.f64()))
                .filter(|s| *s > 0.0),
        }
    }

    fn prompt_audio(
        &self,
        port: &dyn CallPort,
        p: Option<&PromptAudio>,
        voice: Option<&TtsSettings>,
    ) -> Option<PromptSpec> {
        let p = p?;
        let text = p.tts.get().map(|t| t.text.str()).unwrap_or("");
        let url = p.file.get().map(|f| f.url.str()).unwrap_or("");
        match p.mode.str() {
            "file" if !url.is_empty() => Some(PromptSpec::File {
                url: self.render(port, url),
            }),
            "tts" | "" if !text.is_empty() => Some(PromptSpec::Tts {
                text: self.render(port, text),
                voice: self.voice(voice),
            }),
            _ => None,
        }
    }

    async fn play(
        &mut self,
        b: BrickRef<'p>,
        port: &mut dyn CallPort,
        prompt: PromptSpec,
        interruption: Interruption,
    ) -> PlayOutcome {
        // The rest of a brick whose reply was taken back is not played.
        if self.taken_back {
            return PlayOutcome::TakenBack;
        }
        let outcome = port.play(&prompt, interruption).await;
        if outcome == PlayOutcome::TakenBack && self.rewind.is_some() {
            self.taken_back = true;
        }
        self.record(
            &*port,
            Event::PromptPlayed {
                brick_id: b.id.to_string(),
                prompt: Box::new(prompt),
                interruptible: interruption.keys,
                outcome: outcome.clone(),
            },
        );
        outcome
    }

    fn condition_group(&mut self, p: &ConditionGroupProps, port: &dyn CallPort) -> String {
        for c in p
            .condition
            .get()
            .map(|c| c.conditions.items())
            .unwrap_or(&[])
        {
            let combine = Combine::parse(c.condition_operator.str()).unwrap_or(Combine::And);
            let mut result = matches!(combine, Combine::And);
            for el in c.elements.items() {
                let left = template::unwrap_target(el.variable.str())
                    .and_then(|n| self.lookup(port, n))
                    .unwrap_or_default();
                let right = self.render(port, el.value.str());
                let hit = match ElementOp::parse(el.element_operator.str()) {
                    Some(ElementOp::Regex) => self
                        .program
                        .regex(&right)
                        .is_some_and(|r| r.is_match(&left)),
                    Some(op) => condition::evaluate(op, &left, &right),
                    None => false,
                };
                match combine {
                    Combine::And if !hit => {
                        result = false;
                        break;
                    }
                    Combine::Or if hit => {
                        result = true;
                        break;
                    }
                    _ => {}
                }
            }
            if c.elements.items().is_empty() {
                result = false;
            }
            if result {
                return c.condition_id.str().to_string();
            }
        }
        output::ELSE.to_string()
    }

    async fn question(
        &mut self,
        b: BrickRef<'p>,
        p: &'p QuestionProps,
        port: &mut dyn CallPort,
    ) -> Step {
        let answers = p.answer.get().map(|a| a.answers.items()).unwrap_or(&[]);
        let voice = p.tts_properties.get();
        let statement = p
            .statement
            .get()
            .and_then(|s| self.prompt_audio(&*port, s.audio.get(), voice));
        let stt = p.stt_properties.get();
        let interruptible = p.statement.get().is_some_and(|s| s.is_interruptible.flag());
        let interruption = crate::listening::interruption(stt, interruptible);
        let spec = self.listen_spec(p, answers);
        let invalid = p
            .fallback_invalid
            .get()
            .map(|f| f.fallbacks.items())
            .unwrap_or(&[]);
        let empty = p
            .fallback_empty
            .get()
            .map(|f| f.fallbacks.items())
            .unwrap_or(&[]);
        // Re-entered after a take-back: the caller is still answering; listen on.
        let resume = self.resume.take();
        let (mut n_invalid, mut n_empty) = resume.unwrap_or((0, 0));
        let mut pre: Option<Reprompt> = None;
        let mut say_statement = resume.is_none();
        loop {
            if let Some(reprompt) = pre.take() {
                let outcome = match reprompt {
                    Reprompt::Prompt(prompt, intr) => {
                        let intr = crate::listening::interruption(stt, intr);
                        self.play(b, port, prompt, intr).await
                    }
                    Reprompt::Llm(request, voice, intr) => {
                        let intr = crate::listening::interruption(stt, intr);
                        self.speak_llm(b, port, request, voice, intr).await
                    }
                };
                match outcome {
                    PlayOutcome::HungUp => return Step::Stop(EndReason::HungUp),
                    // The caller answered over the reprompt: listen now, as after an
                    // interrupted statement, instead of repeating the statement first.
                    PlayOutcome::Interrupted => say_statement = false,
                    _ => {}
                }
            }
            if say_statement
                && let Some(s) = &statement
                && self.play(b, port, s.clone(), interruption).await == PlayOutcome::HungUp
            {
                return Step::Stop(EndReason::HungUp);
            }
            let heard = port.listen(&spec).await;
            self.rewind = port.answer_may_be_taken_back().then(|| Rewind {
                question: b,
                vars: self.vars.clone(),
                goals: self.goals.clone(),
                fallbacks: (n_invalid, n_empty),
            });
            self.record(
                &*port,
                Event::InputHeard {
                    brick_id: b.id.to_string(),
                    heard: heard.clone(),
                },
            );
            // Filtered (`stt_properties.filter`); a blank transcript is no input.
            let heard = match crate::listening::filtered(stt, heard) {
                Heard::Speech { transcript, .. } if transcript.trim().is_empty() => Heard::NoInput,
                h => h,
            };
            let matched = match &heard {
                Heard::HungUp => return Step::Stop(EndReason::HungUp),
                Heard::NoInput => {
                    let Some(f) = empty.get(n_empty) else {
                        return Step::Take(output::EMPTY.to_string());
                    };
                    self.record(
                        &*port,
                        Event::Fallback {
                            brick_id: b.id.to_string(),
                            kind: "empty".into(),
                            index: n_empty,
                        },
                    );
                    n_empty += 1;
                    pre = self.fallback_prompt(f, "", voice, &*port);
                    say_statement = f.is_repeat_statement.flag();
                    continue;
                }
                Heard::Dtmf { digits } => {
                    let d = digits.trim();
                    answers.iter().find(|a| {
                        a.dtmf_input
                            .get()
                            .is_some_and(|i| !i.value.str().is_empty() && i.value.str().trim() == d)
                    })
                }
                Heard::Speech { transcript, .. } => {
                    let now = self.question_now(p, &*port);
                    let asked = crate::listening::question_entities(p.entity.get());
                    self.extract_entities(&asked, transcript, now, &*port);
                    self.match_speech(b, p, answers, transcript, port).await
                }
            };
            match matched {
                Some(a) => {
                    if let Heard::Speech { transcript, .. } = &heard
                        && let Some(si) = a.speech_input.get()
                    {
                        let entities = si.entity.get().map(|e| e.entities.items()).unwrap_or(&[]);
                        let now = self.question_now(p, &*port);
                        self.extract_entities(entities, transcript, now, &*port);
                    }
                    let id = a.answer_id.str().to_string();
                    self.record(
                        &*port,
                        Event::AnswerMatched {
                            brick_id: b.id.to_string(),
                            answer_id: id.clone(),
                        },
                    );
                    return Step::Take(id);
                }
                None => {
                    let Some(f) = invalid.get(n_invalid) else {
                        return Step::Take(output::INVALID.to_string());
                    };
                    self.record(
                        &*port,
                        Event::Fallback {
                            brick_id: b.id.to_string(),
                            kind: "invalid".into(),
                            index: n_invalid,
                        },
                    );
                    n_invalid += 1;
                    let said = match &heard {
                        Heard::Speech { transcript, .. } => transcript.as_str(),
                        _ => "",
                    };
                    pre = self.fallback_prompt(f, said, voice, &*port);
                    say_statement = f.is_repeat_statement.flag();
                }
            }
        }
    }

    /// A fallback's reprompt: its `audio`, else (when its `llm_properties` has a model or
    /// messages) a reply generated from the configured messages plus what the caller said,
    /// spoken as it is generated.
    fn fallback_prompt(
        &self,
        f: &Fallback,
        said: &str,
        voice: Option<&TtsSettings>,
        port: &dyn CallPort,
    ) -> Option<Reprompt> {
        let interruptible = f.is_interruptible.flag();
        if let Some(p) = self.prompt_audio(port, f.audio.get(), voice) {
            return Some(Reprompt::Prompt(p, interruptible));
        }
        let l = f
            .llm_properties
            .get()
            .filter(|l| !l.model.str().is_empty() || !l.messages.items().is_empty())?;
        let mut req = self.llm_request(port, l);
        if !said.trim().is_empty() {
            req.messages.push(("user".into(), said.to_string()));
        }
        Some(Reprompt::Llm(req, self.voice(voice), interruptible))
    }

    /// Asks the model and speaks its reply as it streams ([`CallPort::speak_llm`]); the
    /// trace gets the whole reply (or the error) and then the prompt as spoken.
    async fn speak_llm(
        &mut self,
        b: BrickRef<'p>,
        port: &mut dyn CallPort,
        request: LlmRequest,
        voice: TtsVoice,
        interruption: Interruption,
    ) -> PlayOutcome {
        let r = port.speak_llm(&request, &voice, interruption).await;
        let event = match r.error {
            None => Event::LlmReplied {
                brick_id: b.id.to_string(),
                reply: r.reply,
            },
            Some(error) => Event::PortError {
                brick_id: b.id.to_string(),
                operation: "llm".into(),
                error,
            },
        };
        self.record(&*port, event);
        let Some((text, outcome)) = r.spoken else {
            return PlayOutcome::Completed;
        };
        self.record(
            &*port,
            Event::PromptPlayed {
                brick_id: b.id.to_string(),
                prompt: Box::new(PromptSpec::Tts { text, voice }),
                interruptible: interruption.keys,
                outcome: outcome.clone(),
            },
        );
        outcome
    }

    /// An LLM request from brick settings, messages rendered.
    fn llm_request(&self, port: &dyn CallPort, l: &LlmProperties) -> LlmRequest {
        LlmRequest {
            engine: l.engine.str().to_string(),
            model: l.model.str().to_string(),
            provider: l.provider.str().to_string(),
            temperature: l.temperature.f64(),
            gdpr_required: l.gdpr_required.flag(),
            messages: l
                .messages
                .items()
                .iter()
                .map(|m| (m.role.str().to_string(), self.render(port, m.content.str())))
                .collect(),
        }
    }

    fn listen_spec(&self, p: &QuestionProps, answers: &[Answer]) -> ListenSpec {
        let wants_dtmf = answers.iter().any(|a| {
            a.dtmf_input
                .get()
                .is_some_and(|d| !d.value.str().is_empty())
        });
        let speech_on = takes_speech(p);
        let dtmf_on = match p.input_mode.str() {
            "speech" => false,
            "dtmf" | "speech_and_dtmf" => true,
            _ => wants_dtmf || p.dtmf_properties.get().is_some(),
        };
        let stt = p.stt_properties.get();
        let general = self.program.defaults().and_then(|d| d.stt_general.get());
        let speech = speech_on.then(|| SpeechSpec {
            engine: stt_engine(p, general),
            language: own_or_base(
                stt.map(|s| s.language.str()),
                general.map(|g| g.language.str()),
            ),
            model: own_or_base(stt.map(|s| s.model.str()), general.map(|g| g.model.str())),
            primary_language: own_or_base(
                stt.map(|s| s.primary_language.str()),
                general.map(|g| g.primary_language.str()),
            ),
            fallback_languages: stt
                .map(|s| s.fallback_languages.items())
                .filter(|l| !l.is_empty())
                .or_else(|| general.map(|g| g.fallback_languages.items()))
                .unwrap_or(&[])
                .to_vec(),
            recognition_mode: stt
                .map(|s| s.recognition_mode.str().to_string())
                .unwrap_or_default(),
            speech_timeout_secs: stt
                .and_then(|s| s.speech_timeout.f64())
                .filter(|t| *t > 0.0),
            tokens: crate::listening::hints(stt),
            dictionaries: crate::listening::dictionaries(stt),
            enable_voice_activity_detection: crate::listening::vad_on(stt),
            recognition_shift_ms: crate::listening::recognition_delay_ms(stt),
            interruption_shift_ms: stt
                .and_then(|s| s.interruption_shift.get())
                .and_then(|s| s.duration.f64()),
            stt_properties: stt
                .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
                .unwrap_or(Value::Null),
            patience: crate::listening::patience(p, answers),
            interim_answers: crate::listening::interim_answers(p, answers),
        });
        let d = p.dtmf_properties.get();
        let dtmf = dtmf_on.then(|| DtmfSpec {
            inter_digit_timeout_secs: d.and_then(|d| d.dtmf_timeout.f64()).filter(|t| *t > 0.0),
            min_symbols: d.and_then(|d| d.min_symbols.f64()).unwrap_or(0.0).max(0.0) as u32,
            max_symbols: d.and_then(|d| d.max_symbols.f64()).unwrap_or(0.0).max(0.0) as u32,
            finish_on_key: d.and_then(|d| d.finish_on_key.str().chars().next()),
        });
        let no_input = stt
            .and_then(|s| s.no_input_timeout.f64())
            .filter(|t| *t > 0.0)
            .or_else(|| {
                d.and_then(|d| d.no_input_timeout.f64())
                    .filter(|t| *t > 0.0)
            })
            .unwrap_or(DEFAULT_NO_INPUT_SECS);
        ListenSpec {
            speech,
            dtmf,
            no_input_timeout_secs: no_input,
        }
    }

    async fn match_speech(
        &mut self,
        b: BrickRef<'p>,
        p: &'p QuestionProps,
        answers: &'p [Answer],
        transcript: &str,
        port: &mut dyn CallPort,
    ) -> Option<&'p Answer> {
        let ip = p
            .stt_properties
            .get()
            .and_then(|s| s.intent_properties.get());
        // 1. Classifier intents.
        if let Some(c) = ip
            .and_then(|i| i.classifier.get())
            .filter(|c| !c.id.str().trim().is_empty())
        {
            let version = c.version.f64().unwrap_or(0.0) as i64;
            match port.classify(c.id.str().trim(), version, transcript).await {
                Ok(intents) => {
                    let threshold = ip
                        .and_then(|i| i.threshold.f64())
                        .unwrap_or(DEFAULT_INTENT_THRESHOLD);
                    let best = intents
                        .iter()
                        .filter(|s| s.confidence >= threshold)
                        .max_by(|a, b| a.confidence.total_cmp(&b.confidence))
                        .map(|s| s.intent.clone());
                    self.record(
                        &*port,
                        Event::IntentsClassified {
                            brick_id: b.id.to_string(),
                            intents,
                        },
                    );
                    if let Some(intent) = best
                        && let Some(a) = answers.iter().find(|a| {
                            a.speech_input
                                .get()
                                .and_then(|s| s.intent.get())
                                .is_some_and(|i| i.id.str() == intent)
                        })
                    {
                        return Some(a);
                    }
                }
                Err(error) => self.record(
                    &*port,
                    Event::PortError {
                        brick_id: b.id.to_string(),
                        operation: "classify".into(),
                        error: error.to_string(),
                    },
                ),
            }
        }
        // 2. Language model picks an answer id.
        if let Some(l) = ip
            .and_then(|i| i.llm_properties.get())
            .filter(|l| !l.model.str().is_empty() || !l.messages.items().is_empty())
        {
            let mut req = self.llm_request(&*port, l);
            let choices: Vec<String> = answers
                .iter()
                .map(|a| format!("{}: {}", a.answer_id.str(), a.description.str()))
                .collect();
            req.messages.push((
                "system".into(),
                format!(
                    "Reply with exactly one answer id from this list, or none:\n{}",
                    choices.join("\n")
                ),
            ));
            req.messages.push(("user".into(), transcript.to_string()));
            match port.llm(&req).await {
                Ok(reply) => {
                    let r = reply
                        .trim()
                        .trim_matches(|c: char| c == '"' || c == '.' || c == '\'')
                        .to_string();
                    self.record(
                        &*port,
                        Event::LlmReplied {
                            brick_id: b.id.to_string(),
                            reply: reply.clone(),
                        },
                    );
                    if let Some(a) = answers
                        .iter()
                        .find(|a| !a.answer_id.str().is_empty() && a.answer_id.str() == r)
                    {
                        return Some(a);
                    }
                }
                Err(error) => self.record(
                    &*port,
                    Event::PortError {
                        brick_id: b.id.to_string(),
                        operation: "llm".into(),
                        error: error.to_string(),
                    },
                ),
            }
        }
        // 3. Tokens, then 4. entity-only answers.
        let norm = normalize(transcript);
        for a in answers {
            let Some(si) = a.speech_input.get() else {
                continue;
            };
            let tokens = si.tokens.get().map(phrases).unwrap_or_default();
            let exact = si.mode.str() == "exact";
            if tokens.iter().any(|t| {
                let t = normalize(t);
                !t.is_empty()
                    && if exact {
                        norm == t
                    } else {
                        crate::listening::says(&norm, &t)
                    }
            }) {
                return Some(a);
            }
        }
        let now = self.question_now(p, &*port);
        answers.iter().find(|a| {
            a.speech_input.get().is_some_and(|si| {
                let ents = si.entity.get().map(|e| e.entities.items()).unwrap_or(&[]);
                si.tokens.get().map(phrases).unwrap_or_default().is_empty()
                    && si.intent.get().is_none_or(|i| i.id.str().is_empty())
                    && !ents.is_empty()
                    && ents
                        .iter()
                        .all(|e| entity::extract(e.kind.str(), transcript, now).is_some())
            })
        })
    }

    /// The call's now in the question's timezone (`stt_properties.timezone`, else the
    /// call's): what relative dates and times are read against.
    fn question_now(&self, p: &QuestionProps, port: &dyn CallPort) -> DateTime<Tz> {
        let tz = crate::listening::timezone(p.stt_properties.get()).unwrap_or(self.call.timezone);
        port.now().with_timezone(&tz)
    }

    /// Writes each entity found in `transcript` to its variable.
    fn extract_entities(
        &mut self,
        entities: &[Entity],
        transcript: &str,
        now: DateTime<Tz>,
        port: &dyn CallPort,
    ) {
        for e in entities {
            let Some(name) = e
                .variable
                .get()
                .and_then(|v| template::unwrap_target(v.name.str()))
            else {
                continue;
            };
            if let Some(v) = entity::extract(e.kind.str(), transcript, now) {
                self.set_var(port, name, v);
            }
        }
    }
}

/// Adds one to a variable: integers stay integers, decimals stay decimals, anything else
/// (empty, text) counts as 0 and becomes "1".
pub fn increment(cur: &str) -> String {
    let t = cur.trim();
    if let Ok(i) = t.parse::<i64>() {
        return i.saturating_add(1).to_string();
    }
    match t.parse::<f64>() {
        Ok(f) if f.is_finite() => (f + 1.0).to_string(),
        _ => "1".to_string(),
    }
}

/// Lower-cases and replaces everything but letters and digits with single spaces.
pub fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for w in s
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(w.chars().flat_map(char::to_lowercase));
    }
    out
}

/// Phrases from a `tokens` value: an array of strings, or one string split on commas.
pub fn phrases(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.as_str())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        Value::String(s) => s
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        _ => Vec::new(),
    }
}

/// FNV-1a over byte slices: a stable per-call choice for `play_mode: random`.
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for p in parts {
        for b in *p {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_variable_resolves_and_others_do_not() {
        let call = CallInfo {
            direction: CallDirection::Inbound,
            recipient: "+1".into(),
            from: "+2".into(),
            communication_id: "c".into(),
            timezone: chrono_tz::UTC,
            data: Default::default(),
        };
        let vars = BTreeMap::new();
        let scope = Scope {
            vars: &vars,
            call: &call,
            now: Utc::now().with_timezone(&chrono_tz::UTC),
        };
        for name in CALL_VARIABLES {
            assert!(scope.lookup(name).is_some(), "{name} is not answered");
            assert!(is_builtin_variable(name));
        }
        assert!(scope.lookup("call.nothing").is_none());
        assert!(is_builtin_variable(WEBHOOK_BODY) && !is_builtin_variable("order_id"));
    }
}
