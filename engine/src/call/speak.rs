//! A language model's reply spoken as it streams (the port's `speak_llm`): the model's
//! content arrives in pieces, each complete sentence ([`SentenceBuffer`]; one the model
//! pauses after for [`SENTENCE_PAUSE`]) is handed to one
//! growing synthesis ([`callsmith_media::tts::TtsService::speech`]) that plays as one
//! prompt from its first sentence on, while the model writes the rest.
//!
//! - The model's whole reply is read to its end and returned for the trace; the sentences
//!   spoken are the prompt's text in the history.
//! - The model fails or breaks off: the sentences completed before stay spoken (an
//!   unfinished one is not), and the error is returned.
//! - A sentence's synthesis fails: the prompt ends after the audio made so far (outcome
//!   `failed`), the model's reply is still read to its end.
//! - The caller interrupts an interruptible reply (speech or a key while it plays, a key
//!   before its first sentence: then nothing is spoken) or hangs up: the model is not
//!   waited for; the reply returned is what had arrived. Keys are kept for the next listen.

use std::future::Future;
use std::pin::Pin;

use callsmith_media::Playout;
use callsmith_media::sentences::SentenceBuffer;
use callsmith_media::tts::Speech;
use callsmith_scenarios::turn::{PlayEvent, PlayTurn};

use super::play::{outcome_name, playout_end};
use super::*;

/// A pause of the model after text that ends like a sentence (a terminator, no
/// abbreviation before it) after which that sentence is spoken without waiting for the
/// next one's first character, which would make its end certain.
const SENTENCE_PAUSE: Duration = Duration::from_millis(150);

/// A reply being spoken: its synthesis, its playout and when they started.
struct Playing {
    speech: Speech,
    wait: Pin<Box<dyn Future<Output = Playout> + Send>>,
    /// The playout ended (its `wait` must not be polled again).
    ended: bool,
    play: PlayTurn,
    ready_ns: u64,
    requested_ns: u64,
    played_ms: u64,
    first_rtp_ns: Option<u64>,
}

impl LivePort {
    /// The port's `speak_llm`.
    pub(super) async fn speak_reply(
        &mut self,
        request: &LlmRequest,
        voice: &TtsVoice,
        interruptible: bool,
    ) -> SpokenReply {
        let failed = |error: String, reply: String| SpokenReply {
            reply,
            error: Some(error),
            spoken: None,
        };
        if self.ended.is_some() {
            return failed("the caller hung up".into(), String::new());
        }
        let at_ms = self.ms();
        let t0 = Instant::now();
        let account = match self.llm_account().await {
            Ok(a) => a,
            Err(e) => return failed(e, String::new()),
        };
        let llm = self.rt.services.adapters.llm.clone();
        let within = self.rt.settings.llm_call_timeout;
        let chat = chat_request(request);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        // The sender lives in the model's future: the pieces end when it does.
        let answer = async move {
            llm.complete_streaming(&account.sid, chat, within, Some(&tx))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        tokio::pin!(answer);
        let mut sentences = SentenceBuffer::default();
        let (mut reply, mut spoken) = (String::new(), String::new());
        let mut result: Option<Result<(), String>> = None;
        let (mut pieces_open, mut flushed) = (true, false);
        let mut playing: Option<Playing> = None;
        let mut outcome: Option<PlayOutcome> = None;
        // When the model has paused long enough after text that ends like a sentence for
        // it to be spoken without waiting for the next one's first character.
        let mut quiet_at: Option<Instant> = None;
        loop {
            // The model is done and every piece taken: the rest is its last sentence.
            if result.is_some() && !pieces_open && !flushed {
                flushed = true;
                if matches!(result, Some(Ok(())))
                    && let Some(tail) = sentences.finish()
                {
                    self.say(
                        &mut playing,
                        &mut outcome,
                        &tail,
                        voice,
                        interruptible,
                        &mut spoken,
                    );
                }
                if let Some(p) = playing.as_mut() {
                    p.speech.end();
                }
            }
            if outcome.is_none()
                && let Some(p) = playing.as_mut()
            {
                outcome = self.play_actions(&mut p.play);
            }
            let model_done = result.is_some() && !pieces_open;
            match &outcome {
                // Interrupted, hung up, the call ending: the rest is not waited for.
                Some(o) if *o != PlayOutcome::Completed => break,
                Some(_) if model_done => break,
                None if model_done && playing.is_none() => break,
                _ => {}
            }
            let wait = async {
                match playing.as_mut() {
                    Some(p) if !p.ended && outcome.is_none() => (&mut p.wait).await,
                    _ => std::future::pending().await,
                }
            };
            let quiet = async {
                match quiet_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                piece = rx.recv(), if pieces_open => match piece {
                    Some(piece) => {
                        reply.push_str(&piece);
                        for s in sentences.push(&piece) {
                            self.say(&mut playing, &mut outcome, &s, voice, interruptible, &mut spoken);
                        }
                        quiet_at = Some(Instant::now() + SENTENCE_PAUSE);
                    }
                    None => pieces_open = false,
                },
                _ = quiet => {
                    quiet_at = None;
                    if let Some(s) = sentences.take_ended() {
                        self.say(&mut playing, &mut outcome, &s, voice, interruptible, &mut spoken);
                    }
                }
                r = &mut answer, if result.is_none() => result = Some(r),
                o = wait => {
                    if let Some(p) = playing.as_mut() {
                        p.ended = true;
                        p.played_ms = o.played_ms;
                        p.first_rtp_ns = o.first_rtp_ns;
                        p.play.handle_event(PlayEvent::PlayoutEnded(playout_end(o.end)));
                    }
                }
                h = self.next_happening() => match playing.as_mut() {
                    Some(p) if outcome.is_none() => self.play_happening(&mut p.play, h),
                    _ => {
                        let keys = self.pending_dtmf.len();
                        if let Some(why) = self.wait_interrupted(h) {
                            if playing.is_none() {
                                return failed(why.into(), reply);
                            }
                            outcome = Some(PlayOutcome::HungUp);
                        } else if interruptible
                            && playing.is_none()
                            && outcome.is_none()
                            && self.pending_dtmf.len() > keys
                        {
                            // A key before the first sentence: the caller took the turn,
                            // nothing is spoken (the key is kept for the next listen).
                            return SpokenReply {
                                reply,
                                error: match result {
                                    Some(Err(e)) => Some(e),
                                    _ => None,
                                },
                                spoken: None,
                            };
                        }
                    }
                },
            }
        }
        let error = match result {
            Some(Err(e)) => Some(e),
            Some(Ok(())) => None,
            None if outcome == Some(PlayOutcome::HungUp) => Some("the caller hung up".into()),
            // Interrupted: the reply is what had arrived.
            None => None,
        };
        let Some(p) = playing else {
            return SpokenReply {
                reply,
                error,
                spoken: outcome.map(|o| (spoken, o)),
            };
        };
        let mut outcome = outcome.unwrap_or(PlayOutcome::Completed);
        let mut prompt_error = match &outcome {
            PlayOutcome::Failed(e) => Some(e.clone()),
            _ => None,
        };
        if let Some(Err(e)) = p.speech.status().result()
            && outcome == PlayOutcome::Completed
        {
            self.errors.push(format!("prompt: {e}"));
            prompt_error = Some(e.clone());
            outcome = PlayOutcome::Failed(e);
        }
        if let (Some(answer), Some(first)) = (self.answer_ns.take(), p.first_rtp_ns) {
            self.record_turn_latency(
                answer,
                ReplyTimes {
                    ready_ns: p.ready_ns,
                    requested_ns: p.requested_ns,
                    first_synthesis_ns: p.speech.source().first_audio_ns(),
                    first_rtp_ns: first,
                },
            );
        }
        let prompt = PromptSpec::Tts {
            text: spoken.clone(),
            voice: voice.clone(),
        };
        self.keep_prompt(PromptLog {
            at_ms,
            prompt,
            interruptible,
            outcome: outcome_name(&outcome).into(),
            played_ms: p.played_ms,
            elapsed_ms: t0.elapsed().as_millis() as u64,
            error: prompt_error,
        });
        SpokenReply {
            reply,
            error,
            spoken: Some((spoken, outcome)),
        }
    }

    /// Hands one sentence to the reply's synthesis; the first one starts it and its
    /// playout. A synthesis that cannot start ends the reply's prompt as `failed`.
    fn say(
        &mut self,
        playing: &mut Option<Playing>,
        outcome: &mut Option<PlayOutcome>,
        sentence: &str,
        voice: &TtsVoice,
        interruptible: bool,
        spoken: &mut String,
    ) {
        if outcome.is_some() {
            return;
        }
        if let Some(p) = playing {
            if p.speech.say(sentence) {
                push_sentence(spoken, sentence);
            }
            return;
        }
        let ready_ns = callsmith_media::clock::now_ns();
        let req = self.tts_request("", voice);
        let started = self
            .rt
            .tts
            .speech(&req)
            .map_err(|e| e.to_string())
            .and_then(|speech| {
                speech.say(sentence);
                let handle = self
                    .session
                    .play(speech.playable(), interruptible)
                    .map_err(|e| e.to_string())?;
                Ok((speech, handle))
            });
        match started {
            Ok((speech, handle)) => {
                push_sentence(spoken, sentence);
                *playing = Some(Playing {
                    speech,
                    wait: Box::pin(handle.wait()),
                    ended: false,
                    play: PlayTurn::new(interruptible),
                    ready_ns,
                    requested_ns: callsmith_media::clock::now_ns(),
                    played_ms: 0,
                    first_rtp_ns: None,
                });
            }
            Err(e) => {
                self.errors.push(format!("prompt: {e}"));
                push_sentence(spoken, sentence);
                *outcome = Some(PlayOutcome::Failed(e));
            }
        }
    }
}

fn push_sentence(spoken: &mut String, sentence: &str) {
    if !spoken.is_empty() {
        spoken.push(' ');
    }
    spoken.push_str(sentence);
}
