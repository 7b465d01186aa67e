//! The call history trace: every brick entered, output taken, prompt played, input heard and
//! variable changed, with milliseconds since the call started. Serialised as the saved call
//! execution history.

use serde::{Deserialize, Serialize};

use crate::port::values::{
    AmdVerdict, Heard, IntentScore, PlayOutcome, PromptSpec, SmsOutcome, TransferOutcome,
    TransferSpec,
};
use crate::webhook::WebhookOutcome;

/// One trace entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// Milliseconds since the call started.
    pub at_ms: i64,
    #[serde(flatten)]
    pub event: Event,
}

/// What happened. The larger payloads are boxed so an event stays small (a call's trace
/// is kept in memory for the whole call).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    BrickEntered {
        brick_id: String,
        kind: String,
    },
    /// `next` is `None` when the output is absent or unconnected (the call then ends).
    OutputTaken {
        brick_id: String,
        output: String,
        next: Option<String>,
    },
    PromptPlayed {
        brick_id: String,
        prompt: Box<PromptSpec>,
        interruptible: bool,
        outcome: PlayOutcome,
    },
    InputHeard {
        brick_id: String,
        heard: Heard,
    },
    IntentsClassified {
        brick_id: String,
        intents: Vec<IntentScore>,
    },
    LlmReplied {
        brick_id: String,
        reply: String,
    },
    AnswerMatched {
        brick_id: String,
        answer_id: String,
    },
    /// A fallback step of `fallback_invalid` (`kind` = invalid) or `fallback_empty` (empty).
    Fallback {
        brick_id: String,
        kind: String,
        index: usize,
    },
    VariableChanged {
        name: String,
        old: Option<String>,
        new: String,
    },
    GoalReached {
        brick_id: String,
        goal: String,
    },
    WebhookCalled {
        brick_id: String,
        outcome: Box<WebhookOutcome>,
    },
    SmsSent {
        brick_id: String,
        to: String,
        text: String,
        outcome: SmsOutcome,
    },
    Transferred {
        brick_id: String,
        spec: Box<TransferSpec>,
        outcome: TransferOutcome,
    },
    AnsweringMachine {
        brick_id: String,
        verdict: AmdVerdict,
    },
    /// A port call failed (classifier, LLM); the scenario went on without it.
    PortError {
        brick_id: String,
        operation: String,
        error: String,
    },
    CallEnded {
        reason: EndReason,
    },
}

/// Why the interpreter stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum EndReason {
    /// An `end` brick.
    End { brick_id: String },
    /// An `end_call` brick with its rendered signal.
    EndCall { brick_id: String, signal: String },
    /// The remote side hung up.
    HungUp,
    /// The output taken is absent or not connected.
    Unconnected { brick_id: String, output: String },
    /// The step budget ran out (a loop in the graph).
    StepBudget { steps: usize },
    /// No entry brick for this call direction.
    NoStart,
}

/// The whole trace of one call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub events: Vec<TraceEvent>,
}
