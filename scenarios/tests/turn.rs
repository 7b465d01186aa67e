//! The turn machines on simulated time: what a caller observes of a listen turn (keys,
//! speech, silence, hang-up) and of a prompt (barge-in by key, hang-up), driven the way the
//! engine drives them (sleep until `poll_timeout`, then `handle_timeout`).

use std::time::{Duration, Instant};

use callsmith_scenarios::port::{DtmfSpec, Heard, ListenSpec, PlayOutcome, SpeechSpec};
use callsmith_scenarios::turn::{
    DEFAULT_NO_INPUT_SECS, FINAL_GRACE, ListenAction, ListenEvent, ListenTurn, MAX_UTTERANCE,
    PlayAction, PlayEvent, PlayTurn, PlayoutEnd,
};

/// A listen turn on simulated time; every action is logged with the call time (ms since
/// the turn started) it was asked at.
struct Sim {
    t0: Instant,
    turn: ListenTurn,
    log: Vec<(u64, ListenAction)>,
}

impl Sim {
    fn new(spec: &ListenSpec) -> Sim {
        let t0 = Instant::now();
        let mut sim = Sim {
            t0,
            turn: ListenTurn::new(spec, t0),
            log: Vec::new(),
        };
        sim.drain(0);
        sim
    }

    fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    fn ms(&self, t: Instant) -> u64 {
        t.duration_since(self.t0).as_millis() as u64
    }

    fn drain(&mut self, ms: u64) {
        while let Some(a) = self.turn.poll_action() {
            self.log.push((ms, a));
        }
    }

    /// Lets time pass up to `ms`, firing each deadline on its time.
    fn advance(&mut self, ms: u64) {
        let until = self.at(ms);
        while let Some(deadline) = self.turn.poll_timeout() {
            if deadline > until {
                break;
            }
            self.turn.handle_timeout(deadline);
            let at = self.ms(deadline);
            self.drain(at);
        }
    }

    fn typed_during_prompt(&mut self, keys: &str) {
        let now = self.t0;
        self.turn.typed_during_prompt(keys, now);
        self.drain(0);
    }

    fn event(&mut self, ms: u64, event: ListenEvent) {
        self.advance(ms);
        let now = self.at(ms);
        self.turn.handle_event(now, event);
        self.drain(ms);
    }

    fn key(&mut self, ms: u64, d: char) {
        self.event(ms, ListenEvent::Digit(d));
    }

    fn interim(&mut self, ms: u64, text: &str) {
        let text = text.to_string();
        self.event(
            ms,
            ListenEvent::Transcript {
                text,
                is_final: false,
            },
        );
    }

    fn final_transcript(&mut self, ms: u64, text: &str) {
        let text = text.to_string();
        self.event(
            ms,
            ListenEvent::Transcript {
                text,
                is_final: true,
            },
        );
    }

    /// The answer and when it came, if the turn is over.
    fn done(&self) -> Option<(u64, Heard)> {
        self.log.iter().find_map(|(ms, a)| match a {
            ListenAction::Done(h) => Some((*ms, h.clone())),
            _ => None,
        })
    }

    fn next_deadline_ms(&self) -> Option<u64> {
        self.turn.poll_timeout().map(|t| self.ms(t))
    }

    fn count(&self, f: impl Fn(&ListenAction) -> bool) -> usize {
        self.log.iter().filter(|(_, a)| f(a)).count()
    }
}

fn dtmf(min: u32, max: u32, finish: Option<char>) -> DtmfSpec {
    DtmfSpec {
        inter_digit_timeout_secs: None,
        min_symbols: min,
        max_symbols: max,
        finish_on_key: finish,
    }
}

fn keys_only(d: DtmfSpec, no_input: f64) -> ListenSpec {
    ListenSpec {
        speech: None,
        dtmf: Some(d),
        no_input_timeout_secs: no_input,
    }
}

fn speech_only(no_input: f64) -> ListenSpec {
    ListenSpec {
        speech: Some(SpeechSpec::default()),
        dtmf: None,
        no_input_timeout_secs: no_input,
    }
}

fn speech_and_keys(d: DtmfSpec, no_input: f64) -> ListenSpec {
    ListenSpec {
        speech: Some(SpeechSpec::default()),
        dtmf: Some(d),
        no_input_timeout_secs: no_input,
    }
}

/// Speech without voice activity detection (`enable_voice_activity_detection: false`).
fn speech_without_vad(no_input: f64) -> ListenSpec {
    ListenSpec {
        speech: Some(SpeechSpec {
            enable_voice_activity_detection: false,
            ..SpeechSpec::default()
        }),
        dtmf: None,
        no_input_timeout_secs: no_input,
    }
}

fn digits(s: &str) -> Heard {
    Heard::Dtmf { digits: s.into() }
}

const MAX_UTTERANCE_MS: u64 = MAX_UTTERANCE.as_millis() as u64;
const FINAL_GRACE_MS: u64 = FINAL_GRACE.as_millis() as u64;

#[test]
fn silence_is_no_input_at_the_no_input_deadline() {
    let mut sim = Sim::new(&speech_and_keys(dtmf(1, 0, Some('#')), 4.0));
    assert_eq!(sim.next_deadline_ms(), Some(4000));
    sim.advance(3999);
    assert_eq!(sim.done(), None);
    sim.advance(60_000);
    assert_eq!(sim.done(), Some((4000, Heard::NoInput)));
    assert_eq!(sim.log.len(), 1, "{:?}", sim.log);
    assert_eq!(sim.next_deadline_ms(), None);

    // No timeout in the spec: the default one.
    let mut sim = Sim::new(&speech_only(0.0));
    sim.advance(60_000);
    let default_ms = (DEFAULT_NO_INPUT_SECS * 1000.0) as u64;
    assert_eq!(sim.done(), Some((default_ms, Heard::NoInput)));
}

#[test]
fn keys_up_to_the_finish_key_are_the_answer() {
    let mut sim = Sim::new(&keys_only(dtmf(1, 0, Some('#')), 5.0));
    sim.key(1000, '1');
    sim.key(1500, '2');
    assert_eq!(sim.done(), None);
    sim.key(2000, '#');
    assert_eq!(sim.done(), Some((2000, digits("12"))));
}

#[test]
fn the_last_key_allowed_ends_the_entry_at_once() {
    let mut sim = Sim::new(&keys_only(dtmf(1, 3, Some('#')), 5.0));
    sim.key(100, '4');
    sim.key(200, '5');
    sim.key(300, '6');
    assert_eq!(sim.done(), Some((300, digits("456"))));
    // Keys after the answer change nothing.
    sim.key(400, '7');
    assert_eq!(sim.count(|a| matches!(a, ListenAction::Done(_))), 1);
}

#[test]
fn the_finish_key_before_enough_keys_does_not_end_the_entry() {
    let mut sim = Sim::new(&keys_only(dtmf(3, 0, Some('#')), 10.0));
    sim.key(1000, '1');
    sim.key(1500, '#');
    assert_eq!(sim.done(), None);
    sim.key(2000, '2');
    sim.key(2500, '3');
    sim.key(3000, '#');
    assert_eq!(sim.done(), Some((3000, digits("123"))));

    // Too few keys when the inter-digit timeout passes: nothing usable was entered.
    let mut sim = Sim::new(&keys_only(dtmf(3, 0, Some('#')), 10.0));
    sim.key(1000, '1');
    sim.key(1500, '#');
    assert_eq!(sim.next_deadline_ms(), Some(4500));
    sim.advance(20_000);
    assert_eq!(sim.done(), Some((4500, Heard::NoInput)));
}

#[test]
fn the_inter_digit_timeout_ends_the_entry() {
    let mut sim = Sim::new(&keys_only(dtmf(1, 0, Some('#')), 10.0));
    sim.key(1000, '1');
    sim.key(2000, '2');
    assert_eq!(sim.next_deadline_ms(), Some(5000), "3 s after the last key");
    sim.advance(20_000);
    assert_eq!(sim.done(), Some((5000, digits("12"))));

    // The question's own inter-digit timeout, shorter than the no-input one left.
    let mut d = dtmf(1, 0, None);
    d.inter_digit_timeout_secs = Some(1.5);
    let mut sim = Sim::new(&keys_only(d, 10.0));
    sim.key(500, '9');
    sim.advance(20_000);
    assert_eq!(sim.done(), Some((2000, digits("9"))));

    // A key late in the no-input time keeps the turn open past it.
    let mut sim = Sim::new(&keys_only(dtmf(1, 0, None), 5.0));
    sim.key(4500, '3');
    sim.advance(20_000);
    assert_eq!(sim.done(), Some((7500, digits("3"))));
}

#[test]
fn keys_typed_during_the_prompt_start_the_entry() {
    // They switch the turn to the inter-digit timeout from its start.
    let mut sim = Sim::new(&keys_only(dtmf(1, 0, Some('#')), 10.0));
    sim.typed_during_prompt("12");
    assert_eq!(sim.done(), None);
    assert_eq!(sim.next_deadline_ms(), Some(3000));
    sim.key(1000, '3');
    sim.key(1200, '#');
    assert_eq!(sim.done(), Some((1200, digits("123"))));

    let mut sim = Sim::new(&keys_only(dtmf(1, 0, Some('#')), 10.0));
    sim.typed_during_prompt("12");
    sim.advance(20_000);
    assert_eq!(sim.done(), Some((3000, digits("12"))));

    // A complete entry typed ahead is the answer at once; later keys are dropped.
    let mut sim = Sim::new(&keys_only(dtmf(1, 2, None), 10.0));
    sim.typed_during_prompt("4567");
    assert_eq!(sim.done(), Some((0, digits("45"))));
    assert_eq!(sim.next_deadline_ms(), None);

    // Without keys in the spec the turn takes none.
    let mut sim = Sim::new(&speech_only(5.0));
    assert!(!sim.turn.takes_keys());
    sim.typed_during_prompt("12");
    sim.key(1000, '3');
    sim.advance(20_000);
    assert_eq!(sim.done(), Some((5000, Heard::NoInput)));
}

#[test]
fn an_interim_transcript_keeps_the_turn_open() {
    let mut sim = Sim::new(&speech_only(5.0));
    sim.interim(4000, " I would ");
    assert_eq!(sim.next_deadline_ms(), Some(7000));
    sim.interim(4500, "I would like");
    assert_eq!(sim.next_deadline_ms(), Some(7500));
    // An empty interim is no sign of speech.
    sim.interim(5000, "  ");
    assert_eq!(sim.next_deadline_ms(), Some(7500));
    assert_eq!(
        sim.log,
        vec![
            (
                4000,
                ListenAction::Interim {
                    text: " I would ".into(),
                    first: true
                }
            ),
            (
                4500,
                ListenAction::Interim {
                    text: "I would like".into(),
                    first: false
                }
            ),
        ]
    );
    sim.final_transcript(6000, " I would like a taxi ");
    assert_eq!(
        sim.done(),
        Some((
            6000,
            Heard::Speech {
                transcript: "I would like a taxi".into(),
                confidence: None
            }
        ))
    );
    assert_eq!(sim.count(|a| *a == ListenAction::Final), 1);

    // An interim never shortens the deadline.
    let mut sim = Sim::new(&speech_only(10.0));
    sim.interim(1000, "hello");
    assert_eq!(sim.next_deadline_ms(), Some(10_000));
}

#[test]
fn speech_keeps_the_turn_open_up_to_the_longest_utterance() {
    let mut sim = Sim::new(&speech_only(5.0));
    sim.event(1000, ListenEvent::SpeechStarted);
    assert_eq!(sim.next_deadline_ms(), Some(1000 + MAX_UTTERANCE_MS));
    sim.event(3000, ListenEvent::SpeechStarted);
    assert_eq!(sim.next_deadline_ms(), Some(3000 + MAX_UTTERANCE_MS));
    assert_eq!(
        sim.count(|a| *a == ListenAction::SpeechStarted),
        1,
        "the first onset is the turn's"
    );
    sim.advance(3000 + MAX_UTTERANCE_MS - 1);
    assert_eq!(sim.done(), None);

    // Without recognition an onset is noted but keeps nothing open.
    let mut sim = Sim::new(&keys_only(dtmf(1, 0, None), 5.0));
    sim.event(1000, ListenEvent::SpeechStarted);
    sim.advance(60_000);
    assert_eq!(
        sim.log,
        vec![
            (1000, ListenAction::SpeechStarted),
            (5000, ListenAction::Done(Heard::NoInput))
        ]
    );
}

#[test]
fn the_deadline_during_speech_finishes_recognition_and_waits_for_the_final() {
    let mut sim = Sim::new(&speech_only(5.0));
    sim.event(1000, ListenEvent::SpeechStarted);
    let cut = 1000 + MAX_UTTERANCE_MS;
    sim.advance(cut);
    assert_eq!(
        sim.log.last(),
        Some(&(cut, ListenAction::FinishRecognition))
    );
    assert_eq!(sim.next_deadline_ms(), Some(cut + FINAL_GRACE_MS));
    sim.final_transcript(cut + 700, "a very long story");
    assert_eq!(
        sim.done(),
        Some((
            cut + 700,
            Heard::Speech {
                transcript: "a very long story".into(),
                confidence: None
            }
        ))
    );
    assert_eq!(sim.count(|a| *a == ListenAction::FinishRecognition), 1);

    // Only interim results: the same at the interim's deadline.
    let mut sim = Sim::new(&speech_only(5.0));
    sim.interim(4000, "yes");
    sim.advance(7000);
    assert_eq!(
        sim.log.last(),
        Some(&(7000, ListenAction::FinishRecognition))
    );
}

#[test]
fn an_empty_final_while_finishing_is_no_input() {
    let mut sim = Sim::new(&speech_only(5.0));
    sim.event(1000, ListenEvent::SpeechStarted);
    // An empty final before the cut is passed over.
    sim.final_transcript(2000, " ");
    assert_eq!(sim.done(), None);
    let cut = 1000 + MAX_UTTERANCE_MS;
    sim.advance(cut);
    sim.final_transcript(cut + 300, "");
    assert_eq!(sim.done(), Some((cut + 300, Heard::NoInput)));
    assert_eq!(sim.count(|a| *a == ListenAction::Final), 0);

    // The stream's end while finishing is the same.
    let mut sim = Sim::new(&speech_only(5.0));
    sim.interim(1000, "uh");
    sim.advance(5000);
    sim.event(5200, ListenEvent::RecognitionEnded);
    assert_eq!(sim.done(), Some((5200, Heard::NoInput)));
}

#[test]
fn no_final_within_the_grace_is_no_input() {
    let mut sim = Sim::new(&speech_only(5.0));
    sim.event(500, ListenEvent::SpeechStarted);
    let cut = 500 + MAX_UTTERANCE_MS;
    sim.advance(120_000);
    assert_eq!(
        sim.log,
        vec![
            (500, ListenAction::SpeechStarted),
            (cut, ListenAction::FinishRecognition),
            (cut + FINAL_GRACE_MS, ListenAction::Done(Heard::NoInput)),
        ]
    );
}

#[test]
fn keys_still_count_after_recognition_failed() {
    let mut sim = Sim::new(&speech_and_keys(dtmf(1, 0, Some('#')), 5.0));
    sim.event(0, ListenEvent::RecognitionFailed);
    // Speech can no longer be recognised: it keeps nothing open.
    sim.event(1000, ListenEvent::SpeechStarted);
    assert_eq!(sim.next_deadline_ms(), Some(5000));
    sim.key(2000, '7');
    sim.key(2500, '#');
    assert_eq!(sim.done(), Some((2500, digits("7"))));

    // Silence after a failure is no input, without waiting on recognition.
    let mut sim = Sim::new(&speech_and_keys(dtmf(1, 0, None), 5.0));
    sim.interim(1000, "hel");
    sim.event(1500, ListenEvent::RecognitionFailed);
    sim.advance(60_000);
    assert_eq!(sim.done(), Some((5000, Heard::NoInput)));
    assert_eq!(sim.count(|a| *a == ListenAction::FinishRecognition), 0);
}

#[test]
fn keys_during_speech_are_the_answer() {
    let mut sim = Sim::new(&speech_and_keys(dtmf(1, 0, None), 5.0));
    sim.event(1000, ListenEvent::SpeechStarted);
    sim.key(2000, '1');
    // A key sets the inter-digit timeout, even below the speech's.
    assert_eq!(sim.next_deadline_ms(), Some(5000));
    sim.advance(60_000);
    assert_eq!(sim.done(), Some((5000, digits("1"))));
}

#[test]
fn hanging_up_ends_the_turn() {
    let mut sim = Sim::new(&speech_and_keys(dtmf(1, 0, Some('#')), 5.0));
    sim.event(500, ListenEvent::SpeechStarted);
    sim.key(1000, '1');
    sim.event(1200, ListenEvent::HungUp);
    assert_eq!(sim.done(), Some((1200, Heard::HungUp)));
    assert_eq!(sim.next_deadline_ms(), None);
    assert!(sim.turn.is_done());
    sim.final_transcript(1300, "too late");
    sim.advance(60_000);
    assert_eq!(sim.count(|a| matches!(a, ListenAction::Done(_))), 1);
}

/// A prompt's actions until (and with) its end.
fn play(interruptible: bool, events: &[PlayEvent]) -> Vec<PlayAction> {
    let mut turn = PlayTurn::new(interruptible);
    let mut out = Vec::new();
    for e in events {
        turn.handle_event(e.clone());
        while let Some(a) = turn.poll_action() {
            out.push(a);
        }
    }
    out
}

#[test]
fn a_key_stops_an_interruptible_prompt_once_and_is_kept() {
    let actions = play(
        true,
        &[
            PlayEvent::Digit('1'),
            PlayEvent::Digit('2'),
            PlayEvent::PlayoutEnded(PlayoutEnd::Stopped),
        ],
    );
    assert_eq!(
        actions,
        vec![
            PlayAction::KeepDigit('1'),
            PlayAction::StopPlayout,
            PlayAction::KeepDigit('2'),
            PlayAction::Done(PlayOutcome::Interrupted),
        ]
    );
}

#[test]
fn a_key_during_a_prompt_that_cannot_be_interrupted_is_kept() {
    let actions = play(
        false,
        &[
            PlayEvent::Digit('5'),
            PlayEvent::PlayoutEnded(PlayoutEnd::Completed),
        ],
    );
    assert_eq!(
        actions,
        vec![
            PlayAction::KeepDigit('5'),
            PlayAction::Done(PlayOutcome::Completed)
        ]
    );
}

#[test]
fn hanging_up_stops_the_prompt() {
    let actions = play(
        false,
        &[
            PlayEvent::HungUp,
            PlayEvent::HungUp,
            PlayEvent::PlayoutEnded(PlayoutEnd::Stopped),
        ],
    );
    assert_eq!(
        actions,
        vec![
            PlayAction::StopPlayout,
            PlayAction::Done(PlayOutcome::HungUp)
        ]
    );

    // A key that stopped the prompt first makes it interrupted.
    let actions = play(
        true,
        &[
            PlayEvent::Digit('9'),
            PlayEvent::HungUp,
            PlayEvent::PlayoutEnded(PlayoutEnd::Stopped),
        ],
    );
    assert_eq!(
        actions,
        vec![
            PlayAction::KeepDigit('9'),
            PlayAction::StopPlayout,
            PlayAction::Done(PlayOutcome::Interrupted)
        ]
    );
}

#[test]
fn the_playout_end_is_the_outcome() {
    let end = |e| play(true, &[PlayEvent::PlayoutEnded(e)]);
    assert_eq!(
        end(PlayoutEnd::Completed),
        vec![PlayAction::Done(PlayOutcome::Completed)]
    );
    assert_eq!(
        end(PlayoutEnd::Interrupted),
        vec![PlayAction::Done(PlayOutcome::Interrupted)]
    );
    assert_eq!(
        end(PlayoutEnd::Stopped),
        vec![PlayAction::Done(PlayOutcome::Completed)]
    );

    // The engine ending the call stops the prompt, and the scenario sees the call's end at
    // once (it does not run on while the leg's end is on its way).
    let actions = play(
        false,
        &[
            PlayEvent::CallEnding,
            PlayEvent::PlayoutEnded(PlayoutEnd::Stopped),
        ],
    );
    assert_eq!(
        actions,
        vec![
            PlayAction::StopPlayout,
            PlayAction::Done(PlayOutcome::HungUp)
        ]
    );

    // Nothing follows the end.
    let actions = play(
        true,
        &[
            PlayEvent::PlayoutEnded(PlayoutEnd::Completed),
            PlayEvent::Digit('1'),
            PlayEvent::HungUp,
        ],
    );
    assert_eq!(actions, vec![PlayAction::Done(PlayOutcome::Completed)]);
}

#[test]
fn waits_out_of_range_never_overflow() {
    use callsmith_scenarios::turn::MAX_WAIT;
    let t0 = Instant::now();
    for secs in [f64::INFINITY, f64::NAN, 1e300, -5.0] {
        let spec = ListenSpec {
            speech: None,
            dtmf: Some(DtmfSpec {
                inter_digit_timeout_secs: Some(secs),
                min_symbols: 1,
                max_symbols: 4,
                finish_on_key: None,
            }),
            no_input_timeout_secs: secs,
        };
        let turn = ListenTurn::new(&spec, t0);
        let deadline = turn.poll_timeout().expect("a deadline");
        assert!(deadline > t0 && deadline <= t0 + MAX_WAIT, "{secs}");
    }
}

/// Without voice activity detection the turn is the no-input window: speech and interim
/// transcripts do not stretch it, an early final does not end it, and what was said in
/// the window (every final, joined) is the answer once recognition is finished.
#[test]
fn without_vad_the_turn_is_the_whole_no_input_window() {
    let mut sim = Sim::new(&speech_without_vad(6.0));
    sim.event(1000, ListenEvent::SpeechStarted);
    sim.interim(1500, "my number is");
    assert_eq!(sim.next_deadline_ms(), Some(6000));
    // A pause the recogniser took as the end of a segment: the caller goes on.
    sim.final_transcript(2500, "my number is");
    assert_eq!(sim.done(), None);
    sim.event(3500, ListenEvent::SpeechStarted);
    sim.interim(5800, "five five five");
    assert_eq!(sim.next_deadline_ms(), Some(6000));
    sim.advance(6000);
    assert_eq!(sim.count(|a| *a == ListenAction::FinishRecognition), 1);
    assert_eq!(sim.next_deadline_ms(), Some(6000 + FINAL_GRACE_MS));
    sim.final_transcript(6300, "five five five");
    assert_eq!(
        sim.done(),
        Some((
            6300,
            Heard::Speech {
                transcript: "my number is five five five".into(),
                confidence: None
            }
        ))
    );

    // Silence all along: recognition is still finished, then no input.
    let mut quiet = Sim::new(&speech_without_vad(3.0));
    quiet.advance(3000);
    assert_eq!(quiet.count(|a| *a == ListenAction::FinishRecognition), 1);
    quiet.event(3100, ListenEvent::RecognitionEnded);
    assert_eq!(quiet.done(), Some((3100, Heard::NoInput)));

    // The same speech with detection on: the first final is the answer.
    let mut vad = Sim::new(&speech_only(6.0));
    vad.event(1000, ListenEvent::SpeechStarted);
    vad.final_transcript(2500, "my number is");
    assert_eq!(
        vad.done(),
        Some((
            2500,
            Heard::Speech {
                transcript: "my number is".into(),
                confidence: None
            }
        ))
    );
}

/// A yes/no question whose answers an interim transcript may decide.
fn yes_no_interim(no_input: f64) -> ListenSpec {
    ListenSpec {
        speech: Some(SpeechSpec {
            interim_answers: vec![vec!["yes".into(), "sure".into()], vec!["no".into()]],
            ..SpeechSpec::default()
        }),
        dtmf: None,
        no_input_timeout_secs: no_input,
    }
}

#[test]
fn an_end_of_turn_interim_that_decides_the_question_is_the_answer_at_once() {
    let mut sim = Sim::new(&yes_no_interim(5.0));
    sim.event(1000, ListenEvent::SpeechStarted);
    sim.interim(1500, "Yes");
    assert_eq!(sim.done(), None, "an interim alone decides nothing");
    sim.event(
        1800,
        ListenEvent::EndOfTurn {
            text: "Yes, in the afternoon".into(),
        },
    );
    assert_eq!(
        sim.done(),
        Some((
            1800,
            Heard::Speech {
                transcript: "Yes, in the afternoon".into(),
                confidence: None
            }
        ))
    );
    assert_eq!(sim.count(|a| *a == ListenAction::Final), 1);
}

#[test]
fn an_end_of_turn_interim_that_does_not_decide_waits_for_the_final() {
    for (spec, text) in [
        // Two answers, or none.
        (yes_no_interim(5.0), "yes no"),
        (yes_no_interim(5.0), "I already paid"),
        // The question does not let an interim decide.
        (speech_only(5.0), "yes"),
        (
            ListenSpec {
                speech: Some(SpeechSpec {
                    enable_voice_activity_detection: false,
                    ..yes_no_interim(5.0).speech.unwrap()
                }),
                ..yes_no_interim(5.0)
            },
            "yes",
        ),
    ] {
        let mut sim = Sim::new(&spec);
        sim.event(1000, ListenEvent::SpeechStarted);
        sim.event(1800, ListenEvent::EndOfTurn { text: text.into() });
        assert_eq!(sim.done(), None, "{text:?}");
        sim.final_transcript(2100, "the final");
        if spec
            .speech
            .as_ref()
            .is_some_and(|s| s.enable_voice_activity_detection)
        {
            assert_eq!(
                sim.done(),
                Some((
                    2100,
                    Heard::Speech {
                        transcript: "the final".into(),
                        confidence: None
                    }
                ))
            );
        }
    }
}
