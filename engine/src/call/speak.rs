//! A language model's reply spoken as it streams (the port's `speak_llm`): the model's
//! content arrives in pieces, each complete sentence (one the model pauses after for
//! [`super::reply::SENTENCE_PAUSE`]) is handed to one growing synthesis
//! ([`callsmith_media::tts::TtsService::speech`]) that plays as one prompt from its first
//! sentence on, while the model writes the rest.
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
//!
//! What the reply does is decided by [`ReplyTurn`]; this feeds it the model's stream, the
//! playout and the call's I/O, and does what it asks.

use std::future::Future;
use std::pin::Pin;

use callsmith_media::Playout;
use callsmith_media::tts::Speech;
use callsmith_scenarios::port::{
    Interruption, LlmRequest, PlayOutcome, PromptSpec, SpeechBargeIn, SpokenReply, TtsVoice,
};
use tokio::time::Instant;

use super::history::PromptLog;
use super::io::{CallEnd, CallEvent};
use super::play::{outcome_name, playout_end};
use super::port::{LivePort, chat_request};
use super::record::ReplyTimes;
use super::reply::{ReplyAction, ReplyEnd, ReplyEvent, ReplyTurn};

/// A reply being spoken: its synthesis, its playout and when they started.
struct Playing {
    speech: Speech,
    wait: Pin<Box<dyn Future<Output = Playout> + Send>>,
    ready_ns: u64,
    requested_ns: u64,
    played_ms: u64,
    first_rtp_ns: Option<u64>,
}

/// What the driver keeps of the reply's synthesis.
#[derive(Default)]
struct Spoken {
    playing: Option<Playing>,
    /// The sentences handed to the synthesis, as the prompt's text.
    text: String,
}

impl Spoken {
    fn push(&mut self, sentence: &str) {
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        self.text.push_str(sentence);
    }
}

impl LivePort {
    /// The port's `speak_llm`.
    pub(super) async fn speak_reply(
        &mut self,
        request: &LlmRequest,
        voice: &TtsVoice,
        interruption: Interruption,
    ) -> SpokenReply {
        let interruptible = interruption.keys;
        let failed = |error: String| SpokenReply {
            reply: String::new(),
            error: Some(error),
            spoken: None,
        };
        if self.io.hung_up() {
            return failed("the caller hung up".into());
        }
        let at_ms = self.ms();
        let t0 = Instant::now();
        let account = match self.ctx.llm_account().await {
            Ok(a) => a,
            Err(e) => return failed(e.to_string()),
        };
        let llm = self.ctx.rt.services.adapters.llm.clone();
        let within = self.ctx.rt.settings.llm_call_timeout;
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
        let (mut pieces_open, mut model_open) = (true, true);
        let mut reply = ReplyTurn::new(interruptible);
        let mut spoken = Spoken::default();
        let end = loop {
            if let Some(end) = self.reply_actions(&mut reply, &mut spoken, voice, interruption) {
                break end;
            }
            let playing = reply.playing();
            let wait = async {
                match spoken.playing.as_mut() {
                    Some(p) if playing => (&mut p.wait).await,
                    _ => std::future::pending().await,
                }
            };
            let quiet = reply.poll_timeout();
            let quiet = async {
                match quiet {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            let (at, ev) = tokio::select! {
                piece = rx.recv(), if pieces_open => (now(), match piece {
                    Some(piece) => ReplyEvent::Piece(piece),
                    None => {
                        pieces_open = false;
                        ReplyEvent::PiecesEnded
                    }
                }),
                _ = quiet => {
                    reply.handle_timeout(now());
                    continue;
                }
                r = &mut answer, if model_open => {
                    model_open = false;
                    (now(), ReplyEvent::ModelDone(r))
                }
                o = wait => {
                    if let Some(p) = spoken.playing.as_mut() {
                        p.played_ms = o.played_ms;
                        p.first_rtp_ns = o.first_rtp_ns;
                    }
                    (now(), ReplyEvent::PlayoutEnded(playout_end(o.end)))
                }
                ev = self.next() => match ev {
                    CallEvent::Digit(d) => (now(), ReplyEvent::Digit(d)),
                    CallEvent::Media(_) => continue,
                    CallEvent::Ended(CallEnd::HungUp) => (now(), ReplyEvent::HungUp),
                    CallEvent::Ended(CallEnd::Forced(_)) => (now(), ReplyEvent::CallEnding),
                },
            };
            reply.handle_event(at, ev);
        };
        let ReplyEnd {
            reply,
            error,
            outcome,
        } = end;
        let Spoken { playing, text } = spoken;
        let Some(p) = playing else {
            return SpokenReply {
                reply,
                error,
                spoken: outcome.map(|o| (text, o)),
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
            self.record.error(format!("prompt: {e}"));
            prompt_error = Some(e.clone());
            outcome = PlayOutcome::Failed(e);
        }
        if let (Some(answer), Some(first)) = (self.record.take_answer(), p.first_rtp_ns) {
            self.record.turn_latency(
                &self.ctx.rt.turns,
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
            text: text.clone(),
            voice: voice.clone(),
        };
        self.record.keep_prompt(PromptLog {
            at_ms,
            prompt,
            interruptible,
            outcome: outcome_name(&outcome),
            played_ms: p.played_ms,
            elapsed_ms: t0.elapsed().as_millis() as u64,
            error: prompt_error,
        });
        SpokenReply {
            reply,
            error,
            spoken: Some((text, outcome)),
        }
    }

    /// Does what the reply's [`ReplyTurn`] asks; its end once it is over.
    fn reply_actions(
        &mut self,
        reply: &mut ReplyTurn,
        spoken: &mut Spoken,
        voice: &TtsVoice,
        interruption: Interruption,
    ) -> Option<ReplyEnd> {
        let mut end = None;
        while let Some(action) = reply.poll_action() {
            match action {
                ReplyAction::Start(sentence) => {
                    let started = self.start_speech(&sentence, voice, interruption.speech);
                    spoken.push(&sentence);
                    match started {
                        Ok(p) => {
                            spoken.playing = Some(p);
                            reply.handle_event(now(), ReplyEvent::Started);
                        }
                        Err(e) => {
                            self.record.error(format!("prompt: {e}"));
                            reply.handle_event(now(), ReplyEvent::StartFailed(e));
                        }
                    }
                }
                ReplyAction::Say(sentence) => {
                    if let Some(p) = &spoken.playing
                        && p.speech.say(&sentence)
                    {
                        spoken.push(&sentence);
                    }
                }
                ReplyAction::EndSpeech => {
                    if let Some(p) = spoken.playing.as_mut() {
                        p.speech.end();
                    }
                }
                ReplyAction::KeepDigit(d) => self.io.keep_digit(d),
                ReplyAction::StopPlayout => {
                    let _ = self.io.session.stop_playout();
                }
                ReplyAction::Done(e) => end = Some(e),
            }
        }
        end
    }

    /// Starts the reply's synthesis with its first sentence, and its playout.
    fn start_speech(
        &mut self,
        sentence: &str,
        voice: &TtsVoice,
        speech_barge_in: SpeechBargeIn,
    ) -> Result<Playing, String> {
        let ready_ns = callsmith_media::clock::now_ns();
        let req = self.tts_request("", voice);
        let speech = self.ctx.rt.tts.speech(&req).map_err(|e| e.to_string())?;
        speech.say(sentence);
        let handle = self
            .io
            .session
            .play(speech.playable(), super::play::barge_in(speech_barge_in))
            .map_err(|e| e.to_string())?;
        Ok(Playing {
            speech,
            wait: Box::pin(handle.wait()),
            ready_ns,
            requested_ns: callsmith_media::clock::now_ns(),
            played_ms: 0,
            first_rtp_ns: None,
        })
    }
}

/// The time the reply machine is fed: the runtime's clock, the one its deadline is slept on.
fn now() -> std::time::Instant {
    Instant::now().into_std()
}
