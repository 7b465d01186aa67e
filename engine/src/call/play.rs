//! Prompts in a live call: TTS (synthesised sentence by sentence as it plays) or audio by
//! reference (through the one audio resolver), played with keys and the call's end taken
//! in meanwhile.

use std::sync::Arc;

use callsmith_media::MediaEvent;
use callsmith_media::stt::SttEvent;
use callsmith_media::tts::{Synthesis, TtsRequest};
use callsmith_media::{
    BargeIn, PlayEnd, PlayHandle,
    prompt::{Playable, Prompt},
};
use callsmith_scenarios::port::{Interruption, PlayOutcome, PromptSpec, SpeechBargeIn, TtsVoice};
use callsmith_scenarios::turn::{PlayAction, PlayEvent, PlayTurn, PlayoutEnd};
use tokio::time::Instant;

use callsmith_domain::audio_ref::Located;
use callsmith_media::prompt::PromptError;

use super::history::{PromptLog, PromptOutcome};
use super::io::{CallEnd, CallEvent};
use super::port::LivePort;
use super::record::ReplyTimes;

impl LivePort {
    /// The synthesis request for `text` in `voice`, at the call's audio rate: the default
    /// synthesizer when the voice names none or one that is not configured, espeak-ng while
    /// the local speech node is not ready.
    pub(super) fn tts_request(&mut self, text: &str, voice: &TtsVoice) -> TtsRequest {
        let req = TtsRequest {
            engine: if voice.engine.is_empty() {
                self.ctx.rt.settings.default_tts_engine.clone()
            } else {
                voice.engine.clone()
            },
            voice: voice.voice.clone(),
            language: voice.language.clone(),
            model: voice.model.clone(),
            speed: voice.speed.unwrap_or(1.0),
            text: text.to_string(),
            // 16 kHz audio on a wideband (G.722) call.
            rate: self.io.session.audio_rate(),
        };
        let rt = &self.ctx.rt;
        let req = if rt.tts.cached(&req).is_none() && !rt.tts.has_engine(&req.engine) {
            TtsRequest {
                engine: rt.settings.default_tts_engine.clone(),
                ..req
            }
        } else {
            req
        };
        // The local speech node's synthesizer while the node is not ready (loading,
        // restarting): espeak-ng speaks instead of a silent, failed prompt.
        if rt.local_speech_down(&req.engine) && rt.tts.cached(&req).is_none() {
            self.record.error(format!(
                "prompt: the local speech node is not ready; spoken with {} instead of {}",
                crate::config::FALLBACK_TTS_ENGINE,
                req.engine
            ));
            TtsRequest {
                engine: crate::config::FALLBACK_TTS_ENGINE.into(),
                voice: String::new(),
                model: String::new(),
                ..req
            }
        } else {
            req
        }
    }

    /// What a prompt plays: a synthesis (cached, or a growing source with how its
    /// synthesis is doing) or a file's audio.
    pub(super) async fn playable(&mut self, prompt: &PromptSpec) -> Result<Synthesis, String> {
        match prompt {
            PromptSpec::Tts { text, voice } => {
                let req = self.tts_request(text, voice);
                self.ctx.rt.tts.synthesis(&req).map_err(|e| e.to_string())
            }
            PromptSpec::File { url } => Ok(Synthesis {
                playable: self.file_prompt(url).await?,
                status: None,
            }),
        }
    }

    /// The audio a file prompt names, through the one audio resolver
    /// ([`callsmith_domain::audio_ref`]): the account's own audio files and objects, or a
    /// public URL through the guarded client. The ownership check runs for every call;
    /// stored audio is then decoded once per object version and shared by every call that
    /// plays it (`Runtime::prompts`), while a URL's audio is fetched and decoded for its
    /// call. The fetch stops when the call ends.
    pub(super) async fn file_prompt(&mut self, url: &str) -> Result<Playable, String> {
        let audio = self.ctx.rt.services.audio.clone();
        let rt = self.ctx.rt.clone();
        let account = self.ctx.comm.account_sid.clone();
        let reference = url.to_string();
        let load = async move {
            match audio
                .locate(&account, &reference)
                .await
                .map_err(|e| e.to_string())?
            {
                Located::Stored(stored) => rt
                    .prompts
                    .get_or_load(&stored.identity(), || async {
                        audio.read(&stored).await.map(|b| b.to_vec()).map_err(|e| {
                            PromptError::Fetch {
                                source_ref: stored.path.clone(),
                                message: e.to_string(),
                            }
                        })
                    })
                    .await
                    .map_err(|e| e.to_string()),
                Located::Remote(url) => {
                    let bytes = audio.fetch_remote(&url).await.map_err(|e| e.to_string())?;
                    let ext = url.rsplit_once('.').map(|(_, e)| e.to_string());
                    Prompt::decode_off_runtime(bytes, ext)
                        .await
                        .map(Arc::new)
                        .map_err(|e| e.to_string())
                }
            }
        };
        let prompt = match self.while_up(load).await {
            Ok(r) => r?,
            Err(why) => return Err(format!("fetching {url:?} stopped: {why}")),
        };
        Ok(Playable::Prompt(prompt))
    }

    /// Plays one prompt (the port's `play`): keys and the call's end are taken in while
    /// it plays (a key stops it when `interruption.keys`), caller speech stops it as
    /// `interruption.speech` says (the media worker decides); the history records it.
    pub(super) async fn play_prompt(
        &mut self,
        prompt: &PromptSpec,
        interruption: Interruption,
    ) -> PlayOutcome {
        let interruptible = interruption.keys;
        if self.io.hung_up() {
            return PlayOutcome::HungUp;
        }
        let at_ms = self.ms();
        let t0 = Instant::now();
        // The reply is known (classifier, model, webhook done): the port is asked to play it.
        let ready_ns = callsmith_media::clock::now_ns();
        let synthesis = match self.playable(prompt).await {
            Ok(p) => p,
            Err(e) => {
                self.record.error(format!("prompt: {e}"));
                self.record.keep_prompt(PromptLog {
                    at_ms,
                    prompt: prompt.clone(),
                    interruptible,
                    outcome: PromptOutcome::Failed,
                    played_ms: 0,
                    elapsed_ms: t0.elapsed().as_millis() as u64,
                    error: Some(e.clone()),
                });
                return PlayOutcome::Failed(e);
            }
        };
        let requested_ns = callsmith_media::clock::now_ns();
        // The first synthesised audio: a growing source's first samples; a prompt from the
        // synthesis cache has all of its audio at once; a file is no synthesis.
        let source = match &synthesis.playable {
            Playable::Stream(s) => Some(s.clone()),
            Playable::Prompt(_) => None,
        };
        let is_tts = matches!(prompt, PromptSpec::Tts { .. });
        let handle = match self
            .io
            .session
            .play(synthesis.playable, barge_in(interruption.speech))
        {
            Ok(h) => h,
            Err(e) => return PlayOutcome::Failed(e.to_string()),
        };
        let (mut outcome, played_ms, first_rtp_ns) =
            self.drive_playout(handle, interruptible).await;
        // A synthesis that stopped part way (a sentence failed): what was made was played.
        let mut error = match &outcome {
            PlayOutcome::Failed(e) => Some(e.clone()),
            _ => None,
        };
        if let Some(Some(Err(e))) = synthesis.status.as_ref().map(|s| s.result())
            && outcome == PlayOutcome::Completed
        {
            self.record.error(format!("prompt: {e}"));
            error = Some(e.clone());
            outcome = PlayOutcome::Failed(e);
        }
        if let (Some(answer), Some(first)) = (self.record.take_answer(), first_rtp_ns) {
            let first_synthesis_ns = match &source {
                Some(s) => s.first_audio_ns(),
                None => is_tts.then_some(requested_ns),
            };
            self.record.turn_latency(
                &self.ctx.rt.turns,
                answer,
                ReplyTimes {
                    ready_ns,
                    requested_ns,
                    first_synthesis_ns,
                    first_rtp_ns: first,
                },
            );
        }
        self.record.keep_prompt(PromptLog {
            at_ms,
            prompt: prompt.clone(),
            interruptible,
            outcome: outcome_name(&outcome),
            played_ms,
            elapsed_ms: t0.elapsed().as_millis() as u64,
            error,
        });
        outcome
    }

    /// Waits for a playout to end, taking in keys and the call's end meanwhile: what they
    /// do to the prompt is decided by [`PlayTurn`]; this feeds it the call's I/O and does
    /// what it asks. Returns the outcome, the ms played and the first RTP packet's time.
    ///
    /// The first prompt after an answer decided at the recogniser's eager end of turn is
    /// its reply: when the caller goes on speaking before the recogniser confirms the
    /// answer (the call's speech detector's onset, watched meanwhile, or the recogniser's
    /// `TurnResumed`, whichever comes first), the playout is stopped at once (its next
    /// 20 ms frame is not sent) and the outcome is [`PlayOutcome::TakenBack`]; the stream
    /// stays with the port for the turn that goes on. Otherwise the answer is settled when
    /// the prompt ends.
    pub(super) async fn drive_playout(
        &mut self,
        handle: PlayHandle,
        interruptible: bool,
    ) -> (PlayOutcome, u64, Option<u64>) {
        let wait = handle.wait();
        tokio::pin!(wait);
        let mut play = PlayTurn::new(interruptible);
        let (mut played_ms, mut first_rtp_ns) = (0, None);
        let mut eager = self.eager.take();
        let watching = eager.is_some() && self.io.session.watch_speech(true).is_ok();
        loop {
            if let Some(o) = self.play_actions(&mut play) {
                if watching {
                    let _ = self.io.session.watch_speech(false);
                }
                return match eager {
                    Some(e) if e.resumed => {
                        self.eager = Some(e);
                        (PlayOutcome::TakenBack, played_ms, first_rtp_ns)
                    }
                    Some(e) => {
                        e.settle(&mut self.record);
                        (o, played_ms, first_rtp_ns)
                    }
                    None => (o, played_ms, first_rtp_ns),
                };
            }
            let eager_next = async {
                match eager.as_mut() {
                    Some(e) if !e.resumed => e.stt.next().await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                o = &mut wait => {
                    first_rtp_ns = o.first_rtp_ns;
                    played_ms = o.played_ms;
                    play.handle_event(PlayEvent::PlayoutEnded(playout_end(o.end)));
                }
                ev = self.next() => match (ev, eager.as_mut()) {
                    (CallEvent::Media(MediaEvent::SpeechStarted { .. }), Some(e)) if !e.resumed => {
                        let _ = self.io.session.stop_playout();
                        e.resumed = true;
                    }
                    (ev, _) => play_event(&mut play, ev),
                },
                ev = eager_next => match ev {
                    Some(SttEvent::TurnResumed) => {
                        let _ = self.io.session.stop_playout();
                        if let Some(e) = eager.as_mut() {
                            e.resumed = true;
                        }
                    }
                    // The recogniser's end of turn confirms the answer; its final follows.
                    Some(SttEvent::Transcript(t)) if t.end_of_turn => {
                        if let Some(e) = eager.take() {
                            e.settle(&mut self.record);
                        }
                    }
                    Some(SttEvent::Transcript(t)) if t.is_final => {
                        self.record.final_of_last_turn(t);
                        eager = None;
                    }
                    Some(SttEvent::Transcript(_) | SttEvent::EagerEndOfTurn { .. }) => {}
                    Some(SttEvent::NodeFailed { .. } | SttEvent::Ended) | None => eager = None,
                },
            }
        }
    }

    /// Does what the prompt's [`PlayTurn`] asks; its outcome once it is over.
    pub(super) fn play_actions(&mut self, play: &mut PlayTurn) -> Option<PlayOutcome> {
        let mut done = None;
        while let Some(action) = play.poll_action() {
            match action {
                PlayAction::KeepDigit(d) => self.io.keep_digit(d),
                PlayAction::StopPlayout => {
                    let _ = self.io.session.stop_playout();
                }
                PlayAction::Done(o) => done = Some(o),
            }
        }
        done
    }
}

/// Feeds what happened on the call while a prompt plays to its [`PlayTurn`].
pub(super) fn play_event(play: &mut PlayTurn, ev: CallEvent) {
    match ev {
        CallEvent::Digit(d) => play.handle_event(PlayEvent::Digit(d)),
        CallEvent::Media(_) => {}
        CallEvent::Ended(CallEnd::HungUp) => play.handle_event(PlayEvent::HungUp),
        CallEvent::Ended(CallEnd::Forced(_)) => play.handle_event(PlayEvent::CallEnding),
    }
}

/// When caller speech stops a prompt, as the media worker takes it.
pub(super) fn barge_in(speech: SpeechBargeIn) -> BargeIn {
    match speech {
        SpeechBargeIn::Off => BargeIn::Off,
        SpeechBargeIn::After(ms) => BargeIn::After(ms),
        SpeechBargeIn::Last(ms) => BargeIn::Last(ms),
    }
}

/// The media worker's end of a playout, as the prompt's [`PlayTurn`] takes it.
pub(super) fn playout_end(end: PlayEnd) -> PlayoutEnd {
    match end {
        PlayEnd::Completed => PlayoutEnd::Completed,
        PlayEnd::Interrupted => PlayoutEnd::Interrupted,
        PlayEnd::Stopped => PlayoutEnd::Stopped,
    }
}

/// A prompt's outcome as the history names it.
pub(super) fn outcome_name(o: &PlayOutcome) -> PromptOutcome {
    match o {
        PlayOutcome::Completed => PromptOutcome::Completed,
        PlayOutcome::Interrupted => PromptOutcome::Interrupted,
        PlayOutcome::HungUp => PromptOutcome::HungUp,
        PlayOutcome::Failed(_) => PromptOutcome::Failed,
        PlayOutcome::TakenBack => PromptOutcome::TakenBack,
    }
}
