//! The call's record: what the saved history keeps of the call as it runs (prompts, listen
//! turns with their latency, transfers, errors), told to a test call's live feed as it is
//! kept, and turned into the [`CallHistory`] when the call ends.

use callsmith_media::SessionStats;
use callsmith_media::stt::Transcript;
use callsmith_scenarios::history::TraceEvent;
use callsmith_scenarios::interpreter::CallRun;
use callsmith_sip::EndInfo;
use chrono::{DateTime, Utc};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::history::{CallHistory, Direction, HangupLog, PromptLog, TransferLog, TurnLog};
use super::io::ForcedEnd;
use super::live_feed::Live;
use crate::runtime::TurnMetrics;

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

/// What the history keeps of a call while it runs.
pub(super) struct CallRecord {
    /// The answer: the history's times are milliseconds since then.
    started: Instant,
    turns: Vec<TurnLog>,
    prompts: Vec<PromptLog>,
    errors: Vec<String>,
    /// Uploads of turn audio still running: (index into `turns`, upload). They are
    /// awaited before the history is written; a failed one clears its reference.
    turn_audio_saves: Vec<(usize, JoinHandle<bool>)>,
    /// The finals still to come of turns decided from the interim transcript: (index into
    /// `turns`, the stream's reader). Awaited before the history is written.
    late_finals: Vec<(usize, JoinHandle<Option<Transcript>>)>,
    /// call_transfer attempts.
    transfers: Vec<TransferLog>,
    /// When the last turn's answer became available ([`callsmith_media::clock::now_ns`]),
    /// until the reply's first RTP packet is measured.
    answer_ns: Option<u64>,
    /// The live feed of a test call (see [`super::live_feed`]).
    live: Option<Live>,
    /// The answering-machine detector's last verdict (`human`, `machine`).
    pub(super) amd: Option<&'static str>,
    /// The last turn ended while the call's speech detector still heard the caller (a
    /// recogniser's end of turn comes before the detector's hangover): where the speech
    /// ended comes with the detector's [`MediaEvent::SpeechUnwatched`](callsmith_media::MediaEvent).
    speech_end_to_come: bool,
}

/// What the history says of the call besides its record.
pub(super) struct CallFacts<'a> {
    pub communication_id: String,
    pub direction: Direction,
    pub recipient: String,
    pub from_number: String,
    pub call_id: String,
    pub answered_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub forced: Option<ForcedEnd>,
    pub hangup: Option<&'a EndInfo>,
    pub media: Option<SessionStats>,
}

impl CallRecord {
    /// The record of a call answered at `started`.
    pub(super) fn new(started: Instant, live: Option<Live>) -> CallRecord {
        CallRecord {
            started,
            turns: Vec::new(),
            prompts: Vec::new(),
            errors: Vec::new(),
            turn_audio_saves: Vec::new(),
            late_finals: Vec::new(),
            transfers: Vec::new(),
            answer_ns: None,
            speech_end_to_come: false,
            live,
            amd: None,
        }
    }

    /// When the call was answered.
    pub(super) fn started(&self) -> Instant {
        self.started
    }

    /// Milliseconds since the answer.
    pub(super) fn ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// A line of the history's `errors`.
    pub(super) fn error(&mut self, line: String) {
        self.errors.push(line);
    }

    /// The number the next listen turn gets (from 1).
    pub(super) fn next_turn_index(&self) -> usize {
        self.turns.len() + 1
    }

    /// A listen turn begins: the last reply's latency is no longer measured.
    pub(super) fn turn_started(&mut self) {
        self.answer_ns = None;
    }

    /// The caller answered (speech or keys) now: the reply's latency runs from here.
    pub(super) fn answered_now(&mut self) {
        self.answer_ns = Some(callsmith_media::clock::now_ns());
    }

    /// When the caller's answer the reply now played answers became available (taken).
    pub(super) fn take_answer(&mut self) -> Option<u64> {
        self.answer_ns.take()
    }

    /// Keeps a prompt (and tells the live feed).
    pub(super) fn keep_prompt(&mut self, log: PromptLog) {
        if let Some(live) = &self.live {
            live.prompt(&log);
        }
        self.prompts.push(log);
    }

    /// Keeps a listen turn (and tells the live feed); `upload` stores its audio.
    pub(super) fn keep_turn(&mut self, turn: TurnLog, upload: Option<JoinHandle<bool>>) {
        if let Some(live) = &self.live {
            live.turn(&turn);
        }
        if let Some(u) = upload {
            self.turn_audio_saves.push((self.turns.len(), u));
        }
        self.turns.push(turn);
    }

    /// The last kept turn's final transcript comes from `final_`: its answer was decided
    /// from the interim transcript ([`TurnLog::final_transcript`]).
    pub(super) fn final_to_come(&mut self, final_: JoinHandle<Option<Transcript>>) {
        if let Some(i) = self.turns.len().checked_sub(1) {
            self.late_finals.push((i, final_));
        }
    }

    /// The last kept turn's final transcript, which came after its answer was decided
    /// ([`TurnLog::final_transcript`]).
    pub(super) fn final_of_last_turn(&mut self, t: Transcript) {
        if let Some(turn) = self.turns.last_mut() {
            set_final(turn, t);
        }
    }

    /// Keeps a call_transfer attempt.
    pub(super) fn keep_transfer(&mut self, log: TransferLog) {
        self.transfers.push(log);
    }

    /// Tells a test call's live feed an interim or final transcript.
    pub(super) fn transcript(&self, text: &str, is_final: bool) {
        if let Some(live) = &self.live {
            live.transcript(text, is_final, self.ms());
        }
    }

    /// Tells a test call's live feed what the interpreter traced.
    pub(super) fn traced(&self, event: &TraceEvent) {
        if let Some(live) = &self.live {
            live.traced(event);
        }
    }

    /// The last turn ended while the speech detector was still in the caller's speech:
    /// its speech end is not known yet ([`Self::late_speech_end`] brings it), and a stop
    /// heard earlier in the turn was only a pause.
    pub(super) fn speech_end_to_come(&mut self) {
        self.speech_end_to_come = true;
        if let Some(t) = self.turns.last_mut() {
            t.speech_ended_ms = None;
        }
    }

    /// Where the last turn's speech ended, `ms` into the call, when that turn is waiting
    /// for it ([`Self::speech_end_to_come`]; otherwise nothing happens): its
    /// `speech_ended_ms`, and its `response_ms` when its reply is already on the wire.
    pub(super) fn late_speech_end(&mut self, metrics: &TurnMetrics, ms: u64) {
        if !std::mem::take(&mut self.speech_end_to_come) {
            return;
        }
        if let Some(t) = self.turns.last_mut() {
            t.speech_ended_ms = Some(ms);
            response(t, metrics);
            metrics.observe_speech_end(t);
        }
    }

    /// Records a turn's latency (answer → first RTP of the reply) and the moments of its
    /// reply on the last turn, on /metrics and in the live feed.
    pub(super) fn turn_latency(
        &mut self,
        metrics: &TurnMetrics,
        answer_ns: u64,
        reply: ReplyTimes,
    ) {
        let total_us = reply.first_rtp_ns.saturating_sub(answer_ns) / 1000;
        let engine_us = reply.requested_ns.saturating_sub(answer_ns) / 1000;
        metrics.latency.observe(total_us as f64 / 1e6);
        metrics.engine.observe(engine_us as f64 / 1e6);
        let now_ns = callsmith_media::clock::now_ns();
        let ms = self.ms();
        let ms_at = |ns: u64| ms.saturating_sub(now_ns.saturating_sub(ns) / 1_000_000);
        let at_ms = ms_at(reply.first_rtp_ns);
        let (ready_ms, requested_ms) = (ms_at(reply.ready_ns), ms_at(reply.requested_ns));
        let synthesis_ms = reply.first_synthesis_ns.map(ms_at);
        if let Some(t) = self.turns.last_mut() {
            t.reply_ready_ms = Some(ready_ms);
            t.reply_requested_ms = Some(requested_ms);
            t.first_synthesis_ms = synthesis_ms;
            t.reply_first_rtp_ms = Some(at_ms);
            response(t, metrics);
            t.turn_latency_us = Some(total_us);
            t.turn_engine_us = Some(engine_us);
            metrics.observe_stages(t);
            if let Some(live) = &self.live {
                live.turn(t);
            }
        }
    }

    /// The saved history of the call: the turn audio uploads are awaited first (a failed
    /// one clears its turn's reference). The live feed comes back to be told the end.
    pub(super) async fn into_history(
        self,
        facts: CallFacts<'_>,
        run: &CallRun,
    ) -> (CallHistory, Option<Live>) {
        let CallRecord {
            mut turns,
            prompts,
            errors,
            turn_audio_saves,
            late_finals,
            transfers,
            live,
            ..
        } = self;
        for (i, final_) in late_finals {
            if let (Ok(Some(t)), Some(turn)) = (final_.await, turns.get_mut(i)) {
                set_final(turn, t);
            }
        }
        for (i, save) in turn_audio_saves {
            if !save.await.unwrap_or(false)
                && let Some(t) = turns.get_mut(i)
            {
                t.speech_recognition_recording = None;
            }
        }
        let duration = (facts.ended_at - facts.answered_at)
            .num_milliseconds()
            .max(0);
        let history = CallHistory {
            communication_id: facts.communication_id,
            direction: facts.direction,
            recipient: facts.recipient,
            from_number: facts.from_number,
            call_id: facts.call_id,
            answered_at: facts.answered_at,
            ended_at: facts.ended_at,
            duration_ms: duration,
            end: run.end.clone(),
            forced_end: facts.forced,
            hangup: facts.hangup.map(|e| HangupLog {
                call_status: e.call_status,
                sip_code: e.sip_code,
                reason: e.reason.clone(),
                by: e.by,
            }),
            goals: run.goals.clone(),
            variables: run.variables.clone(),
            steps: run.steps,
            trace: run.trace.events.clone(),
            prompts,
            turns,
            errors,
            transfers,
            media: facts.media,
        };
        (history, live)
    }
}

/// Records a turn's final transcript that came after its answer was decided (and its
/// language, when the turn has none).
fn set_final(turn: &mut TurnLog, t: Transcript) {
    if turn.language.is_none() && !t.text.trim().is_empty() {
        turn.language = t.language;
    }
    turn.final_transcript = Some(t.text);
}

/// The turn's `response_ms` (speech end → the reply's first RTP packet, what the caller
/// waits), observed on /metrics, once both ends are known.
fn response(t: &mut TurnLog, metrics: &TurnMetrics) {
    if let (Some(end), Some(at_ms)) = (t.speech_ended_ms, t.reply_first_rtp_ms) {
        let ms = at_ms.saturating_sub(end);
        t.response_ms = Some(ms);
        metrics.response.observe(ms as f64 / 1000.0);
    }
}
