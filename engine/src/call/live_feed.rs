//! A test call's live feed ([`callsmith_domain::live_feed`]): what the interpreter traces, the
//! prompts with how much of them was heard, the transcripts as they come, each listen turn
//! with its latency breakdown, and the end.

use std::cell::RefCell;

use callsmith_domain::live_feed::LiveFeed;
use callsmith_scenarios::history::{Event, TraceEvent};
use serde_json::json;

use callsmith_domain::store::communications::CallFinish;
use callsmith_scenarios::port::PromptSpec;

use super::history::{PromptLog, PromptOutcome, TurnLog};

/// A call's feed and the brick it is in (prompts and turns are told with their brick).
pub struct Live {
    feed: LiveFeed,
    brick: RefCell<String>,
    /// The brick of each listen turn (by index - 1), as it was when the turn ended.
    turn_bricks: RefCell<Vec<String>>,
}

impl Live {
    pub fn new(feed: LiveFeed) -> Live {
        Live {
            feed,
            brick: RefCell::new(String::new()),
            turn_bricks: RefCell::default(),
        }
    }

    /// One trace event: `brick` and `variable` by name, the rest as `trace`.
    pub(super) fn traced(&self, ev: &TraceEvent) {
        let at_ms = ev.at_ms;
        match &ev.event {
            Event::BrickEntered { brick_id, kind } => {
                self.brick.replace(brick_id.clone());
                self.feed.publish(
                    "brick",
                    json!({"brick_id": brick_id, "kind": kind, "at_ms": at_ms}),
                );
            }
            Event::VariableChanged { name, old, new } => self.feed.publish(
                "variable",
                json!({"name": name, "old": old, "new": new, "at_ms": at_ms}),
            ),
            _ => self
                .feed
                .publish("trace", json!({"at_ms": at_ms, "event": ev})),
        }
    }

    /// A prompt as played: its text (or file), how much was heard, how it ended.
    pub(super) fn prompt(&self, log: &PromptLog) {
        let (text, file) = match &log.prompt {
            PromptSpec::Tts { text, .. } => (Some(text.as_str()), None),
            PromptSpec::File { url } => (None, Some(url.as_str())),
        };
        self.feed.publish(
            "prompt",
            json!({
                "brick_id": *self.brick.borrow(),
                "text": text,
                "file": file,
                "played_ms": log.played_ms,
                "interrupted": log.outcome == PromptOutcome::Interrupted,
                "outcome": log.outcome,
                "at_ms": log.at_ms,
            }),
        );
    }

    /// An interim or final transcript of the caller's speech.
    pub(super) fn transcript(&self, text: &str, is_final: bool, at_ms: u64) {
        self.feed.publish(
            "transcript",
            json!({"text": text, "final": is_final, "at_ms": at_ms}),
        );
    }

    /// A listen turn: when it ends, and again when its reply's first RTP is measured.
    pub(super) fn turn(&self, turn: &TurnLog) {
        let mut bricks = self.turn_bricks.borrow_mut();
        if bricks.len() < turn.index {
            bricks.resize(turn.index, self.brick.borrow().clone());
        }
        let brick = bricks.get(turn.index.saturating_sub(1)).cloned();
        let mut v = serde_json::to_value(turn).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("brick_id".into(), json!(brick));
        }
        self.feed.publish("turn", v);
    }

    /// The call's end, as stored; the feed closes.
    pub(super) fn end(self, f: &CallFinish) {
        self.feed.end(json!({
            "communication_status": f.communication_status.as_str(),
            "call_status": f.call_status,
            "goals": f.goals,
            "end_reason": f.end_reason,
            "duration": f.duration,
        }));
    }
}
