//! One prompt's playout: keys pressed meanwhile (barge-in on an interruptible prompt, kept
//! for the next listen turn either way), the call's end, and how the playout ended.

use std::collections::VecDeque;

use crate::port::PlayOutcome;

/// How the media side reports the end of a playout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlayoutEnd {
    /// Played to the end.
    Completed,
    /// The media side stopped it for barge-in by speech.
    Interrupted,
    /// Stopped on request (or the session went away).
    Stopped,
}

/// Something that happened while a prompt plays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlayEvent {
    /// A key, whichever way it came (RFC 4733 or SIP INFO).
    Digit(char),
    /// The call's leg ended (the caller hung up, or the leg is gone).
    HungUp,
    /// The engine is ending the call (maximum duration, shutdown, RTP timeout, hang-up
    /// through the API): for the scenario the call is over, as with [`PlayEvent::HungUp`].
    CallEnding,
    /// The playout ended.
    PlayoutEnded(PlayoutEnd),
}

/// What the playout asks of its driver, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlayAction {
    /// Keep this key for the next listen turn.
    KeepDigit(char),
    /// Stop the playout (its end is then reported as [`PlayoutEnd::Stopped`]).
    StopPlayout,
    /// The prompt is over with this outcome; nothing follows.
    Done(PlayOutcome),
}

/// A prompt's playout as a machine. It has no timer of its own (the playout ends by
/// itself), so it takes no time and has no deadline.
///
/// Every key is kept for the next listen turn; the first one stops an interruptible prompt,
/// which then counts as interrupted. The call's end stops the playout too. The playout is
/// asked to stop at most once.
#[derive(Debug)]
pub struct PlayTurn {
    interruptible: bool,
    stopped_by_key: bool,
    hung_up: bool,
    stop_asked: bool,
    done: bool,
    actions: VecDeque<PlayAction>,
}

impl PlayTurn {
    /// A prompt that started playing; `interruptible` lets a key stop it.
    pub fn new(interruptible: bool) -> PlayTurn {
        PlayTurn {
            interruptible,
            stopped_by_key: false,
            hung_up: false,
            stop_asked: false,
            done: false,
            actions: VecDeque::new(),
        }
    }

    /// Takes in what happened. Nothing changes once the prompt is over.
    pub fn handle_event(&mut self, event: PlayEvent) {
        if self.done {
            return;
        }
        match event {
            PlayEvent::Digit(d) => {
                self.actions.push_back(PlayAction::KeepDigit(d));
                if self.interruptible && !self.stopped_by_key {
                    self.stopped_by_key = true;
                    self.stop();
                }
            }
            PlayEvent::HungUp | PlayEvent::CallEnding => {
                self.hung_up = true;
                self.stop();
            }
            PlayEvent::PlayoutEnded(end) => {
                let outcome = match end {
                    PlayoutEnd::Completed => PlayOutcome::Completed,
                    PlayoutEnd::Interrupted => PlayOutcome::Interrupted,
                    PlayoutEnd::Stopped if self.stopped_by_key => PlayOutcome::Interrupted,
                    PlayoutEnd::Stopped if self.hung_up => PlayOutcome::HungUp,
                    PlayoutEnd::Stopped => PlayOutcome::Completed,
                };
                self.done = true;
                self.actions.push_back(PlayAction::Done(outcome));
            }
        }
    }

    /// The next thing to do, if any.
    pub fn poll_action(&mut self) -> Option<PlayAction> {
        self.actions.pop_front()
    }

    /// Whether the prompt is over (its `Done` was queued).
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn stop(&mut self) {
        if !self.stop_asked {
            self.stop_asked = true;
            self.actions.push_back(PlayAction::StopPlayout);
        }
    }
}
