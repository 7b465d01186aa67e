//! One listen turn: speech through a recognition stream, a key entry, silence and the
//! call's end decide what the caller answered.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{
    DEFAULT_INTER_DIGIT, DEFAULT_NO_INPUT_SECS, FINAL_GRACE, INTERIM_EXTENSION, MAX_UTTERANCE,
    MAX_WAIT,
};
use crate::port::{DtmfSpec, Heard, ListenSpec};

/// Something that happened during a listen turn.
#[derive(Debug, Clone, PartialEq)]
pub enum ListenEvent {
    /// A transcript from the recognition stream (interim or final).
    Transcript { text: String, is_final: bool },
    /// The recogniser's end-of-turn decision, ahead of its final, with the interim
    /// transcript it had: the answer when it decides the question
    /// ([`crate::listening::interim_decides`] over the spec's `interim_answers`).
    EndOfTurn { text: String },
    /// The recognition stream failed or could not start: the turn goes on without it (keys
    /// still count, silence ends it as no input).
    RecognitionFailed,
    /// The recognition stream ended.
    RecognitionEnded,
    /// Voice activity detection heard the caller start speaking.
    SpeechStarted,
    /// A key, whichever way it came (RFC 4733 or SIP INFO).
    Digit(char),
    /// The call ended: the caller hung up or the engine ends the call.
    HungUp,
}

/// What the turn asks of its driver, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum ListenAction {
    /// The caller's first speech onset of this turn (the turn's `speech_started`).
    SpeechStarted,
    /// A non-empty interim transcript, as received; `first` for the turn's first partial.
    Interim { text: String, first: bool },
    /// A non-empty final transcript arrived (the turn's `final`), or an end-of-turn
    /// interim transcript decided the question; `Done(Speech)` follows.
    Final,
    /// End the audio sent to recognition so it gives its final transcript.
    FinishRecognition,
    /// The turn is over with this answer; nothing follows.
    Done(Heard),
}

/// A listen turn as a machine. Recognition counts as running when the spec asks for
/// speech, until [`ListenEvent::RecognitionFailed`] or [`ListenEvent::RecognitionEnded`].
///
/// The turn waits for one deadline at a time:
/// * at first the no-input timeout;
/// * each key sets it to the inter-digit timeout after the key;
/// * a non-empty interim transcript keeps it at least [`INTERIM_EXTENSION`] away, and a
///   speech onset (while recognition runs) at least [`MAX_UTTERANCE`] away.
///
/// When it passes: enough keys make the entry the answer; else, when speech was heard and
/// recognition still runs, recognition is finished and its final transcript awaited for
/// [`FINAL_GRACE`]; else the caller said nothing.
///
/// With voice activity detection, the recogniser's end of turn with an interim transcript
/// that says a phrase of exactly one of the spec's `interim_answers` ends the turn with
/// that transcript at once, without waiting for the final.
///
/// Without voice activity detection (the speech spec's `enable_voice_activity_detection`
/// false) the turn is the no-input window and nothing else: speech onsets and interim
/// transcripts do not extend it, final transcripts before it ends are kept and do not end
/// it, and when it passes recognition is finished; the answer is every final transcript
/// of the window, joined (none: no input).
#[derive(Debug)]
pub struct ListenTurn {
    dtmf: Option<DtmfSpec>,
    /// Voice activity detection shapes the turn (see above).
    vad: bool,
    /// Final transcripts kept so far (without voice activity detection).
    said: Vec<String>,
    /// The answers an end-of-turn interim transcript may decide (the speech spec's).
    interim_answers: Vec<Vec<String>>,
    recognizing: bool,
    digits: String,
    deadline: Instant,
    /// Recognition was asked for its final transcript.
    finishing: bool,
    speech_started: bool,
    interim_seen: bool,
    done: bool,
    actions: VecDeque<ListenAction>,
}

/// A wait given in seconds: `default` when unset, zero, negative or not a number; at most
/// [`MAX_WAIT`] (validation refuses more; a value that slipped past cannot overflow a
/// deadline).
fn wait(secs: Option<f64>, default: Duration) -> Duration {
    match secs.filter(|s| *s > 0.0) {
        Some(s) => Duration::try_from_secs_f64(s).map_or(MAX_WAIT, |d| d.min(MAX_WAIT)),
        None => default,
    }
}

impl ListenTurn {
    /// A turn starting at `now`, waiting for the spec's no-input timeout (or
    /// [`DEFAULT_NO_INPUT_SECS`]).
    pub fn new(spec: &ListenSpec, now: Instant) -> ListenTurn {
        let no_input = wait(
            Some(spec.no_input_timeout_secs),
            Duration::from_secs_f64(DEFAULT_NO_INPUT_SECS),
        );
        ListenTurn {
            dtmf: spec.dtmf.clone(),
            vad: spec
                .speech
                .as_ref()
                .is_none_or(|s| s.enable_voice_activity_detection),
            said: Vec::new(),
            interim_answers: spec
                .speech
                .as_ref()
                .map(|s| s.interim_answers.clone())
                .unwrap_or_default(),
            recognizing: spec.speech.is_some(),
            digits: String::new(),
            deadline: now + no_input,
            finishing: false,
            speech_started: false,
            interim_seen: false,
            done: false,
            actions: VecDeque::new(),
        }
    }

    /// Whether the turn takes keys (its spec has DTMF): only then are the keys pressed
    /// during the prompt handed to [`ListenTurn::typed_during_prompt`].
    pub fn takes_keys(&self) -> bool {
        self.dtmf.is_some()
    }

    /// Keys pressed during the prompt before this turn: they start the entry (and may
    /// complete it), and when some are kept the inter-digit timeout runs from `now`.
    /// Keys after a complete entry are dropped.
    pub fn typed_during_prompt(&mut self, keys: &str, now: Instant) {
        if self.dtmf.is_none() {
            return;
        }
        for d in keys.chars() {
            if self.done {
                return;
            }
            self.push_digit(d);
        }
        if !self.done && !self.digits.is_empty() {
            self.deadline = now + self.inter_digit();
        }
    }

    /// Takes in what happened at `now`. Nothing changes once the turn is over.
    pub fn handle_event(&mut self, now: Instant, event: ListenEvent) {
        if self.done {
            return;
        }
        match event {
            ListenEvent::Transcript {
                text,
                is_final: true,
            } => {
                let text = text.trim();
                if !text.is_empty() {
                    self.actions.push_back(ListenAction::Final);
                    self.said.push(text.to_string());
                    if self.vad || self.finishing {
                        self.finish_with_speech();
                    }
                } else if self.finishing {
                    self.finish_with_speech();
                }
            }
            ListenEvent::Transcript {
                text,
                is_final: false,
            } => {
                if !text.trim().is_empty() {
                    let first = !self.interim_seen;
                    self.interim_seen = true;
                    self.actions
                        .push_back(ListenAction::Interim { text, first });
                    if self.vad {
                        self.deadline = self.deadline.max(now + INTERIM_EXTENSION);
                    }
                }
            }
            ListenEvent::EndOfTurn { text } => {
                if self.vad
                    && self.recognizing
                    && !self.finishing
                    && crate::listening::interim_decides(&self.interim_answers, &text)
                {
                    self.actions.push_back(ListenAction::Final);
                    self.said.push(text.trim().to_string());
                    self.finish_with_speech();
                }
            }
            ListenEvent::RecognitionFailed => self.recognizing = false,
            ListenEvent::RecognitionEnded => {
                self.recognizing = false;
                if self.finishing {
                    self.finish_with_speech();
                }
            }
            ListenEvent::SpeechStarted => {
                if !self.speech_started {
                    self.speech_started = true;
                    self.actions.push_back(ListenAction::SpeechStarted);
                }
                if self.recognizing && self.vad {
                    self.deadline = self.deadline.max(now + MAX_UTTERANCE);
                }
            }
            ListenEvent::Digit(d) => {
                if self.dtmf.is_some() {
                    self.push_digit(d);
                    self.deadline = now + self.inter_digit();
                }
            }
            ListenEvent::HungUp => self.finish(Heard::HungUp),
        }
    }

    /// The deadline from [`ListenTurn::poll_timeout`] has passed when `now` reaches it
    /// (earlier calls change nothing).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.done || now < self.deadline {
            return;
        }
        let min = self
            .dtmf
            .as_ref()
            .map_or(1, |d| d.min_symbols.max(1) as usize);
        if !self.digits.is_empty() && self.digits.len() >= min {
            let digits = std::mem::take(&mut self.digits);
            self.finish(Heard::Dtmf { digits });
        } else if !self.finishing
            && self.recognizing
            && (self.speech_started || self.interim_seen || !self.vad)
        {
            // Speech is under way (or, without voice activity detection, the window is
            // over): end the audio and wait for the final result.
            self.finishing = true;
            self.actions.push_back(ListenAction::FinishRecognition);
            self.deadline = now + FINAL_GRACE;
        } else {
            self.finish_with_speech();
        }
    }

    /// Ends the turn with the final transcripts kept (joined), or no input without any.
    fn finish_with_speech(&mut self) {
        if self.said.is_empty() {
            self.finish(Heard::NoInput);
        } else {
            let transcript = self.said.join(" ");
            self.finish(Heard::Speech {
                transcript,
                confidence: None,
            });
        }
    }

    /// The next thing to do, if any.
    pub fn poll_action(&mut self) -> Option<ListenAction> {
        self.actions.pop_front()
    }

    /// When the turn next needs [`ListenTurn::handle_timeout`]; `None` once it is over.
    pub fn poll_timeout(&self) -> Option<Instant> {
        (!self.done).then_some(self.deadline)
    }

    /// Whether the turn is over (its `Done` was queued).
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn finish(&mut self, heard: Heard) {
        self.done = true;
        self.actions.push_back(ListenAction::Done(heard));
    }

    /// Time allowed between two keys of an entry.
    fn inter_digit(&self) -> Duration {
        wait(
            self.dtmf.as_ref().and_then(|d| d.inter_digit_timeout_secs),
            DEFAULT_INTER_DIGIT,
        )
    }

    /// Adds a key to the entry; the finish key (not part of the digits) completes it once
    /// `min_symbols` are there, and `max_symbols` completes it at once.
    fn push_digit(&mut self, d: char) {
        let Some(spec) = &self.dtmf else {
            return;
        };
        if spec.finish_on_key == Some(d) {
            if self.digits.len() >= spec.min_symbols as usize {
                let digits = std::mem::take(&mut self.digits);
                self.finish(Heard::Dtmf { digits });
            }
            return;
        }
        self.digits.push(d);
        if spec.max_symbols > 0 && self.digits.len() >= spec.max_symbols as usize {
            let digits = std::mem::take(&mut self.digits);
            self.finish(Heard::Dtmf { digits });
        }
    }
}
