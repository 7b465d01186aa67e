//! The streamed reply on simulated time: `t0` plus offsets, no clock read.

use std::time::{Duration, Instant};

use callsmith_scenarios::port::PlayOutcome;
use callsmith_scenarios::turn::PlayoutEnd;

use super::{ReplyAction as A, ReplyEnd, ReplyEvent as E, ReplyTurn, SENTENCE_PAUSE};

fn ms(t0: Instant, ms: u64) -> Instant {
    t0 + Duration::from_millis(ms)
}

/// Feeds `ev` and returns the actions it asked for; a `Start` is answered as `started`.
fn feed(r: &mut ReplyTurn, now: Instant, ev: E, started: bool) -> Vec<A> {
    r.handle_event(now, ev);
    drain(r, now, started)
}

fn drain(r: &mut ReplyTurn, now: Instant, started: bool) -> Vec<A> {
    let mut out = Vec::new();
    while let Some(a) = r.poll_action() {
        if matches!(a, A::Start(_)) {
            out.push(a);
            r.handle_event(
                now,
                if started {
                    E::Started
                } else {
                    E::StartFailed("no synthesizer".into())
                },
            );
        } else {
            out.push(a);
        }
    }
    out
}

fn done(reply: &str, error: Option<&str>, outcome: Option<PlayOutcome>) -> A {
    A::Done(ReplyEnd {
        reply: reply.into(),
        error: error.map(String::from),
        outcome,
    })
}

#[test]
fn sentences_are_spoken_as_they_complete_and_the_last_when_the_model_is_done() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(true);
    assert_eq!(feed(&mut r, t0, E::Piece("Hello there".into()), true), []);
    assert_eq!(
        feed(&mut r, ms(t0, 10), E::Piece(". How are".into()), true),
        [A::Start("Hello there.".into())]
    );
    assert!(r.playing());
    assert_eq!(
        feed(&mut r, ms(t0, 20), E::Piece(" you? Bye".into()), true),
        [A::Say("How are you?".into())]
    );
    assert_eq!(feed(&mut r, ms(t0, 30), E::PiecesEnded, true), []);
    assert_eq!(
        feed(&mut r, ms(t0, 30), E::ModelDone(Ok(())), true),
        [A::Say("Bye".into()), A::EndSpeech]
    );
    // The model is done; the reply waits for its playout.
    assert_eq!(
        feed(
            &mut r,
            ms(t0, 900),
            E::PlayoutEnded(PlayoutEnd::Completed),
            true
        ),
        [done(
            "Hello there. How are you? Bye",
            None,
            Some(PlayOutcome::Completed)
        )]
    );
    assert!(!r.playing());
}

#[test]
fn a_sentence_the_model_pauses_after_is_spoken_after_the_pause() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(false);
    assert_eq!(feed(&mut r, t0, E::Piece("One moment.".into()), true), []);
    assert_eq!(r.poll_timeout(), Some(t0 + SENTENCE_PAUSE));
    r.handle_timeout(t0 + SENTENCE_PAUSE - Duration::from_millis(1));
    assert_eq!(drain(&mut r, t0, true), [], "not before the pause");
    r.handle_timeout(t0 + SENTENCE_PAUSE);
    assert_eq!(
        drain(&mut r, t0 + SENTENCE_PAUSE, true),
        [A::Start("One moment.".into())]
    );
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn a_key_barges_in_on_a_streamed_reply_and_the_model_is_not_waited_for() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(true);
    assert_eq!(
        feed(&mut r, t0, E::Piece("First sentence. Sec".into()), true),
        [A::Start("First sentence.".into())]
    );
    // The caller presses a key while the first sentence plays: it is kept for the next
    // question and stops the playout.
    assert_eq!(
        feed(&mut r, ms(t0, 400), E::Digit('1'), true),
        [A::KeepDigit('1'), A::StopPlayout]
    );
    // The stop is on its way: a sentence completed meanwhile still goes to the synthesis
    // (which the stopped playout no longer plays).
    assert_eq!(
        feed(&mut r, ms(t0, 450), E::Piece("ond one. Third".into()), true),
        [A::Say("Second one.".into())]
    );
    // A second key is kept; the playout is asked to stop once.
    assert_eq!(
        feed(&mut r, ms(t0, 460), E::Digit('2'), true),
        [A::KeepDigit('2')]
    );
    // The playout ends as stopped: the reply is interrupted, the model not waited for.
    assert_eq!(
        feed(
            &mut r,
            ms(t0, 480),
            E::PlayoutEnded(PlayoutEnd::Stopped),
            true
        ),
        [done(
            "First sentence. Second one. Third",
            None,
            Some(PlayOutcome::Interrupted)
        )]
    );
    assert!(!r.playing());
    // Over: nothing changes.
    assert_eq!(
        feed(&mut r, ms(t0, 500), E::Piece("More.".into()), true),
        []
    );
}

#[test]
fn speech_barging_in_ends_the_reply_as_interrupted() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(true);
    feed(&mut r, t0, E::Piece("Let me explain. It".into()), true);
    // The media side stopped the playout for the caller's speech.
    assert_eq!(
        feed(
            &mut r,
            ms(t0, 700),
            E::PlayoutEnded(PlayoutEnd::Interrupted),
            true
        ),
        [done(
            "Let me explain. It",
            None,
            Some(PlayOutcome::Interrupted)
        )]
    );
}

#[test]
fn a_key_before_the_first_sentence_takes_the_turn_and_nothing_is_spoken() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(true);
    assert_eq!(feed(&mut r, t0, E::Piece("Well".into()), true), []);
    assert_eq!(
        feed(&mut r, ms(t0, 50), E::Digit('5'), true),
        [A::KeepDigit('5'), done("Well", None, None)]
    );
}

#[test]
fn a_key_does_not_interrupt_a_reply_that_is_not_interruptible() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(false);
    // Before the first sentence: kept, the reply goes on.
    assert_eq!(feed(&mut r, t0, E::Digit('1'), true), [A::KeepDigit('1')]);
    assert_eq!(
        feed(&mut r, ms(t0, 10), E::Piece("Please hold. ".into()), true),
        []
    );
    assert_eq!(
        feed(&mut r, ms(t0, 20), E::Piece("Thanks".into()), true),
        [A::Start("Please hold.".into())]
    );
    // While it plays: kept, not stopped.
    assert_eq!(
        feed(&mut r, ms(t0, 30), E::Digit('2'), true),
        [A::KeepDigit('2')]
    );
    feed(&mut r, ms(t0, 40), E::PiecesEnded, true);
    assert_eq!(
        feed(&mut r, ms(t0, 40), E::ModelDone(Ok(())), true),
        [A::Say("Thanks".into()), A::EndSpeech]
    );
    assert_eq!(
        feed(
            &mut r,
            ms(t0, 900),
            E::PlayoutEnded(PlayoutEnd::Completed),
            true
        ),
        [done(
            "Please hold. Thanks",
            None,
            Some(PlayOutcome::Completed)
        )]
    );
}

#[test]
fn a_hang_up_while_the_reply_plays_stops_it_as_hung_up() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(false);
    feed(&mut r, t0, E::Piece("Hello. Wait".into()), true);
    assert_eq!(feed(&mut r, ms(t0, 100), E::HungUp, true), [A::StopPlayout]);
    assert_eq!(
        feed(
            &mut r,
            ms(t0, 120),
            E::PlayoutEnded(PlayoutEnd::Stopped),
            true
        ),
        [done(
            "Hello. Wait",
            Some("the caller hung up"),
            Some(PlayOutcome::HungUp)
        )]
    );
}

#[test]
fn the_call_ending_before_the_first_sentence_stops_the_reply() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(true);
    feed(&mut r, t0, E::Piece("Hm".into()), true);
    assert_eq!(
        feed(&mut r, ms(t0, 10), E::CallEnding, true),
        [done("Hm", Some("the call ended"), None)]
    );
}

#[test]
fn a_hang_up_after_the_prompt_completed_while_the_model_writes_ends_as_hung_up() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(true);
    feed(&mut r, t0, E::Piece("Short. ".into()), true);
    assert_eq!(
        feed(&mut r, ms(t0, 10), E::Piece("Then".into()), true),
        [A::Start("Short.".into())]
    );
    assert_eq!(
        feed(
            &mut r,
            ms(t0, 500),
            E::PlayoutEnded(PlayoutEnd::Completed),
            true
        ),
        []
    );
    // The prompt completed; a key now is kept, it interrupts nothing.
    assert_eq!(
        feed(&mut r, ms(t0, 600), E::Digit('3'), true),
        [A::KeepDigit('3')]
    );
    assert_eq!(
        feed(&mut r, ms(t0, 700), E::HungUp, true),
        [done(
            "Short. Then",
            Some("the caller hung up"),
            Some(PlayOutcome::HungUp)
        )]
    );
}

#[test]
fn a_failing_model_keeps_the_sentences_spoken_but_not_an_unfinished_one() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(true);
    feed(&mut r, t0, E::Piece("Done. Unfini".into()), true);
    assert_eq!(
        feed(
            &mut r,
            ms(t0, 10),
            E::ModelDone(Err("stream broke".into())),
            true
        ),
        []
    );
    assert_eq!(
        feed(&mut r, ms(t0, 10), E::PiecesEnded, true),
        [A::EndSpeech]
    );
    assert_eq!(
        feed(
            &mut r,
            ms(t0, 800),
            E::PlayoutEnded(PlayoutEnd::Completed),
            true
        ),
        [done(
            "Done. Unfini",
            Some("stream broke"),
            Some(PlayOutcome::Completed)
        )]
    );
}

#[test]
fn a_synthesis_that_cannot_start_fails_the_reply_and_nothing_more_is_said() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(true);
    assert_eq!(
        feed(&mut r, t0, E::Piece("One. Two. Th".into()), false),
        [
            A::Start("One.".into()),
            done(
                "One. Two. Th",
                None,
                Some(PlayOutcome::Failed("no synthesizer".into()))
            )
        ]
    );
}

#[test]
fn a_model_that_says_nothing_ends_the_reply_without_a_prompt() {
    let t0 = Instant::now();
    let mut r = ReplyTurn::new(true);
    feed(&mut r, t0, E::PiecesEnded, true);
    assert_eq!(
        feed(&mut r, t0, E::ModelDone(Ok(())), true),
        [done("", None, None)]
    );
}
