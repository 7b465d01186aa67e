//! Prompts in a live call: TTS or audio by reference (through the one audio resolver),
//! played with keys and the call's end taken in meanwhile.

use callsmith_scenarios::turn::{PlayAction, PlayEvent, PlayTurn, PlayoutEnd};

use super::*;

impl LivePort {
    pub(super) async fn playable(&mut self, prompt: &PromptSpec) -> Result<Playable, String> {
        match prompt {
            PromptSpec::Tts { text, voice } => {
                let req = TtsRequest {
                    engine: if voice.engine.is_empty() {
                        self.rt.settings.default_tts_engine.clone()
                    } else {
                        voice.engine.clone()
                    },
                    voice: voice.voice.clone(),
                    language: voice.language.clone(),
                    model: voice.model.clone(),
                    speed: voice.speed.unwrap_or(1.0),
                    text: text.clone(),
                };
                let req =
                    if self.rt.tts.cached(&req).is_none() && !self.rt.tts.has_engine(&req.engine) {
                        TtsRequest {
                            engine: self.rt.settings.default_tts_engine.clone(),
                            ..req
                        }
                    } else {
                        req
                    };
                // The local speech node's synthesizer while the node is not ready (loading,
                // restarting): espeak-ng speaks instead of a silent, failed prompt.
                let req = if self.rt.local_speech_down(&req.engine)
                    && self.rt.tts.cached(&req).is_none()
                {
                    self.errors.push(format!(
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
                };
                self.rt.tts.playable(&req).map_err(|e| e.to_string())
            }
            PromptSpec::File { url } => self.file_prompt(url).await,
        }
    }

    /// The audio a file prompt names, through the one audio resolver
    /// ([`callsmith_control::audio_ref`]): the account's own audio files and objects, or a
    /// public URL through the guarded client. The fetch stops when the call ends.
    pub(super) async fn file_prompt(&mut self, url: &str) -> Result<Playable, String> {
        let audio = self.rt.services.audio.clone();
        let account = self.comm.account_sid.clone();
        let reference = url.to_string();
        let fetch = async move { audio.fetch(&account, &reference).await };
        tokio::pin!(fetch);
        let bytes = loop {
            tokio::select! {
                r = &mut fetch => break r.map_err(|e| e.to_string())?,
                h = self.next_happening() => {
                    if let Some(why) = self.wait_interrupted(h) {
                        return Err(format!("fetching {url:?} stopped: {why}"));
                    }
                }
            }
        };
        let ext = url.rsplit_once('.').map(|(_, e)| e.to_string());
        let p = tokio::task::spawn_blocking(move || Prompt::decode(&bytes, ext.as_deref()))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        Ok(Playable::Prompt(Arc::new(p)))
    }

    /// Plays one prompt (the port's `play`): keys and the call's end are taken in while
    /// it plays; the history records it. What they do to the prompt is decided by
    /// [`PlayTurn`]; this feeds it the call's I/O and does what it asks.
    pub(super) async fn play_prompt(
        &mut self,
        prompt: &PromptSpec,
        interruptible: bool,
    ) -> PlayOutcome {
        if self.ended.is_some() {
            return PlayOutcome::HungUp;
        }
        let at_ms = self.ms();
        let t0 = Instant::now();
        let playable = match self.playable(prompt).await {
            Ok(p) => p,
            Err(e) => {
                self.errors.push(format!("prompt: {e}"));
                self.keep_prompt(PromptLog {
                    at_ms,
                    prompt: prompt.clone(),
                    interruptible,
                    outcome: "failed".into(),
                    played_ms: 0,
                    elapsed_ms: t0.elapsed().as_millis() as u64,
                    error: Some(e.clone()),
                });
                return PlayOutcome::Failed(e);
            }
        };
        let requested_ns = callsmith_media::clock::now_ns();
        let handle = match self.session.play(playable, interruptible) {
            Ok(h) => h,
            Err(e) => return PlayOutcome::Failed(e.to_string()),
        };
        let wait = handle.wait();
        tokio::pin!(wait);
        let mut play = PlayTurn::new(interruptible);
        let mut played_ms = 0;
        let mut first_rtp_ns = None;
        let outcome = loop {
            let mut done = None;
            while let Some(action) = play.poll_action() {
                match action {
                    PlayAction::KeepDigit(d) => self.pending_dtmf.push(d),
                    PlayAction::StopPlayout => {
                        let _ = self.session.stop_playout();
                    }
                    PlayAction::Done(o) => done = Some(o),
                }
            }
            if let Some(o) = done {
                break o;
            }
            tokio::select! {
                o = &mut wait => {
                    first_rtp_ns = o.first_rtp_ns;
                    played_ms = o.played_ms;
                    play.handle_event(PlayEvent::PlayoutEnded(match o.end {
                        PlayEnd::Completed => PlayoutEnd::Completed,
                        PlayEnd::Interrupted => PlayoutEnd::Interrupted,
                        PlayEnd::Stopped => PlayoutEnd::Stopped,
                    }));
                }
                h = self.next_happening() => match h {
                    Happening::Media(Some(MediaEvent::Dtmf { digit, .. })) => {
                        play.handle_event(PlayEvent::Digit(digit));
                    }
                    Happening::Media(None) => self.media_events = None,
                    Happening::Media(Some(_)) => {}
                    Happening::Signal(s) => {
                        if let Some(d) = self.on_signal(s) {
                            play.handle_event(PlayEvent::Digit(d));
                        }
                        if self.ended.is_some() {
                            play.handle_event(PlayEvent::HungUp);
                        }
                    }
                    Happening::Forced(f) => {
                        self.force_end(f);
                        play.handle_event(PlayEvent::CallEnding);
                    }
                }
            }
        };
        if let (Some(answer), Some(first)) = (self.answer_ns.take(), first_rtp_ns) {
            self.record_turn_latency(answer, requested_ns, first);
        }
        let name = match &outcome {
            PlayOutcome::Completed => "completed",
            PlayOutcome::Interrupted => "interrupted",
            PlayOutcome::HungUp => "hung_up",
            PlayOutcome::Failed(_) => "failed",
        };
        self.keep_prompt(PromptLog {
            at_ms,
            prompt: prompt.clone(),
            interruptible,
            outcome: name.into(),
            played_ms,
            elapsed_ms: t0.elapsed().as_millis() as u64,
            error: match &outcome {
                PlayOutcome::Failed(e) => Some(e.clone()),
                _ => None,
            },
        });
        outcome
    }
}
