//! A language model's reply spoken as it streams, as a sans-IO machine ([`ReplyTurn`]),
//! beside the prompt's [`PlayTurn`] it drives once the reply plays.
//!
//! It is fed what happened (the model's pieces, its end, the playout's end, the caller's
//! keys and the call's end) with the time it happened, says what to do through
//! `poll_action` (start the synthesis with a first sentence, hand it more, stop the
//! playout, keep a key) and gives its next deadline (a sentence the model paused after)
//! through `poll_timeout`. It never reads a clock or touches a socket: `speak.rs` drives it
//! from the call's I/O, and the tests below on simulated time.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use callsmith_media::sentences::SentenceBuffer;
use callsmith_scenarios::port::PlayOutcome;
use callsmith_scenarios::turn::{PlayAction, PlayEvent, PlayTurn, PlayoutEnd};

/// A pause of the model after text that ends like a sentence (a terminator, no
/// abbreviation before it) after which that sentence is spoken without waiting for the
/// next one's first character, which would make its end certain.
pub(super) const SENTENCE_PAUSE: Duration = Duration::from_millis(150);

/// Something that happened while a reply streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ReplyEvent {
    /// A piece of the model's content.
    Piece(String),
    /// The model's pieces ended (its stream is closed).
    PiecesEnded,
    /// The model's request ended: its whole reply was read, or it failed.
    ModelDone(Result<(), String>),
    /// The synthesis and playout asked for by [`ReplyAction::Start`] are running.
    Started,
    /// They could not start: the reply's prompt ends as `failed`.
    StartFailed(String),
    /// The playout ended.
    PlayoutEnded(PlayoutEnd),
    /// A key, whichever way it came.
    Digit(char),
    /// The caller hung up (or the leg is gone).
    HungUp,
    /// The engine is ending the call.
    CallEnding,
}

/// What the reply asks of its driver, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ReplyAction {
    /// Start the synthesis with this first sentence and play it; answer with
    /// [`ReplyEvent::Started`] or [`ReplyEvent::StartFailed`] before polling again.
    Start(String),
    /// Hand this sentence to the running synthesis.
    Say(String),
    /// No more sentences: the synthesis ends after the ones handed over.
    EndSpeech,
    /// Keep this key for the next listen turn.
    KeepDigit(char),
    /// Stop the playout.
    StopPlayout,
    /// The reply is over; nothing follows.
    Done(ReplyEnd),
}

/// How a reply ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReplyEnd {
    /// The model's reply, as far as it was read.
    pub reply: String,
    /// The model's error, or why the reply stopped before its end was read.
    pub error: Option<String>,
    /// How its prompt ended; `None` when nothing was spoken (the model said nothing
    /// speakable, or the caller took the turn or left before the first sentence).
    pub outcome: Option<PlayOutcome>,
}

/// The synthesis and playout of the reply.
#[derive(Debug)]
enum Speech {
    /// No sentence yet.
    None,
    /// [`ReplyAction::Start`] was asked; what the reply asks meanwhile waits for it.
    Starting(Vec<ReplyAction>),
    /// Playing: the prompt's keys, the call's end and the playout's end go to its turn.
    Playing(PlayTurn),
}

/// A streamed reply as a machine.
///
/// * Each complete sentence of the model's content (or one it paused after for
///   [`SENTENCE_PAUSE`]) is spoken: the first starts the synthesis and its playout, the
///   next ones are handed to it; once the model is done its last, unfinished sentence is
///   spoken too (not when the model failed) and the synthesis is ended.
/// * While the reply plays, its [`PlayTurn`] takes the keys and the call's end (barge-in
///   on an interruptible reply).
/// * Before the first sentence, or after the prompt completed while the model still
///   writes, keys are kept for the next question; on an interruptible reply a key before
///   the first sentence takes the turn: nothing is spoken. The call's end stops the reply.
/// * The reply is over when its prompt ended other than completed, or the model is done
///   and the prompt (if any) completed.
#[derive(Debug)]
pub(super) struct ReplyTurn {
    interruptible: bool,
    sentences: SentenceBuffer,
    reply: String,
    result: Option<Result<(), String>>,
    pieces_open: bool,
    flushed: bool,
    speech: Speech,
    /// How the reply's prompt ended (set also when its synthesis could not start).
    outcome: Option<PlayOutcome>,
    /// When the model has paused long enough after text that ends like a sentence.
    quiet_at: Option<Instant>,
    done: bool,
    actions: VecDeque<ReplyAction>,
}

impl ReplyTurn {
    /// A reply whose model request was just sent.
    pub(super) fn new(interruptible: bool) -> ReplyTurn {
        ReplyTurn {
            interruptible,
            sentences: SentenceBuffer::default(),
            reply: String::new(),
            result: None,
            pieces_open: true,
            flushed: false,
            speech: Speech::None,
            outcome: None,
            quiet_at: None,
            done: false,
            actions: VecDeque::new(),
        }
    }

    /// Takes in what happened at `now`. Nothing changes once the reply is over.
    pub(super) fn handle_event(&mut self, now: Instant, event: ReplyEvent) {
        if self.done {
            return;
        }
        match event {
            ReplyEvent::Piece(piece) => {
                self.reply.push_str(&piece);
                for s in self.sentences.push(&piece) {
                    self.say(s);
                }
                self.quiet_at = Some(now + SENTENCE_PAUSE);
            }
            ReplyEvent::PiecesEnded => self.pieces_open = false,
            ReplyEvent::ModelDone(r) => self.result = Some(r),
            ReplyEvent::Started => {
                if let Speech::Starting(held) = std::mem::replace(
                    &mut self.speech,
                    Speech::Playing(PlayTurn::new(self.interruptible)),
                ) {
                    self.actions.extend(held);
                }
            }
            ReplyEvent::StartFailed(e) => {
                self.speech = Speech::None;
                self.outcome = Some(PlayOutcome::Failed(e));
            }
            ReplyEvent::PlayoutEnded(end) => self.play(PlayEvent::PlayoutEnded(end)),
            ReplyEvent::Digit(d) => match &self.speech {
                Speech::Playing(_) if self.outcome.is_none() => self.play(PlayEvent::Digit(d)),
                _ => {
                    self.actions.push_back(ReplyAction::KeepDigit(d));
                    if self.interruptible
                        && matches!(self.speech, Speech::None)
                        && self.outcome.is_none()
                    {
                        // A key before the first sentence: the caller took the turn,
                        // nothing is spoken (the key is kept for the next listen).
                        let error = match &self.result {
                            Some(Err(e)) => Some(e.clone()),
                            _ => None,
                        };
                        return self.finish(error);
                    }
                }
            },
            ReplyEvent::HungUp | ReplyEvent::CallEnding => {
                let why = if event == ReplyEvent::HungUp {
                    "the caller hung up"
                } else {
                    "the call ended"
                };
                match &self.speech {
                    Speech::Playing(_) if self.outcome.is_none() => {
                        self.play(if event == ReplyEvent::HungUp {
                            PlayEvent::HungUp
                        } else {
                            PlayEvent::CallEnding
                        })
                    }
                    Speech::Playing(_) => self.outcome = Some(PlayOutcome::HungUp),
                    _ => return self.finish(Some(why.into())),
                }
            }
        }
        self.advance();
    }

    /// When the model's pause after a sentence is long enough to speak it.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.quiet_at.filter(|_| !self.done)
    }

    /// The time has come (`now` at or past [`ReplyTurn::poll_timeout`]).
    pub(super) fn handle_timeout(&mut self, now: Instant) {
        if self.done || self.quiet_at.is_none_or(|at| now < at) {
            return;
        }
        self.quiet_at = None;
        if let Some(s) = self.sentences.take_ended() {
            self.say(s);
        }
        self.advance();
    }

    /// The next thing to do, if any.
    pub(super) fn poll_action(&mut self) -> Option<ReplyAction> {
        self.actions.pop_front()
    }

    /// Whether the playout runs and its end is still awaited.
    pub(super) fn playing(&self) -> bool {
        !self.done && matches!(&self.speech, Speech::Playing(p) if !p.is_done())
    }

    fn say(&mut self, sentence: String) {
        if self.outcome.is_some() {
            return;
        }
        match &mut self.speech {
            Speech::None => {
                self.speech = Speech::Starting(Vec::new());
                self.actions.push_back(ReplyAction::Start(sentence));
            }
            Speech::Starting(held) => held.push(ReplyAction::Say(sentence)),
            Speech::Playing(_) => self.actions.push_back(ReplyAction::Say(sentence)),
        }
    }

    fn end_speech(&mut self) {
        match &mut self.speech {
            Speech::None => {}
            Speech::Starting(held) => held.push(ReplyAction::EndSpeech),
            Speech::Playing(_) => self.actions.push_back(ReplyAction::EndSpeech),
        }
    }

    /// Feeds the playing prompt's turn and does what it asks.
    fn play(&mut self, event: PlayEvent) {
        let Speech::Playing(play) = &mut self.speech else {
            return;
        };
        play.handle_event(event);
        while let Some(a) = play.poll_action() {
            match a {
                PlayAction::KeepDigit(d) => self.actions.push_back(ReplyAction::KeepDigit(d)),
                PlayAction::StopPlayout => self.actions.push_back(ReplyAction::StopPlayout),
                PlayAction::Done(o) => {
                    if self.outcome.is_none() {
                        self.outcome = Some(o);
                    }
                }
            }
        }
    }

    /// Speaks the last sentence once the model is done, and ends the reply when it is
    /// over.
    fn advance(&mut self) {
        if self.done {
            return;
        }
        let model_done = self.result.is_some() && !self.pieces_open;
        // The model is done and every piece taken: the rest is its last sentence.
        if model_done && !self.flushed {
            self.flushed = true;
            if matches!(self.result, Some(Ok(())))
                && let Some(tail) = self.sentences.finish()
            {
                self.say(tail);
            }
            self.end_speech();
        }
        if matches!(self.speech, Speech::Starting(_)) {
            return;
        }
        let over = match &self.outcome {
            // Interrupted, hung up, failed, the call ending: the rest is not waited for.
            Some(o) if *o != PlayOutcome::Completed => true,
            Some(_) => model_done,
            None => model_done && matches!(self.speech, Speech::None),
        };
        if over {
            let error = match &self.result {
                Some(Err(e)) => Some(e.clone()),
                Some(Ok(())) => None,
                None if self.outcome == Some(PlayOutcome::HungUp) => {
                    Some("the caller hung up".into())
                }
                // Interrupted: the reply is what had arrived.
                None => None,
            };
            let outcome = self.outcome.clone();
            self.done = true;
            self.actions.push_back(ReplyAction::Done(ReplyEnd {
                reply: std::mem::take(&mut self.reply),
                error,
                outcome,
            }));
        }
    }

    /// Ends the reply before anything was spoken.
    fn finish(&mut self, error: Option<String>) {
        self.done = true;
        self.actions.push_back(ReplyAction::Done(ReplyEnd {
            reply: std::mem::take(&mut self.reply),
            error,
            outcome: None,
        }));
    }
}

#[cfg(test)]
mod tests;
