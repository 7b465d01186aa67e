//! Prompts in a live call: TTS or audio by reference (through the one audio resolver),
//! played with keys and the call's end taken in meanwhile.

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
                let req = if self.rt.tts.cached(&req).is_none() && !known_engine(&req.engine) {
                    TtsRequest {
                        engine: self.rt.settings.default_tts_engine.clone(),
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
    /// it plays; the history records it.
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
                self.prompts.push(PromptLog {
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
        let mut stopped_by_dtmf = false;
        let first_rtp_ns;
        let outcome = loop {
            tokio::select! {
                o = &mut wait => {
                    first_rtp_ns = o.first_rtp_ns;
                    break match o.end {
                        PlayEnd::Completed => (PlayOutcome::Completed, o.played_ms),
                        PlayEnd::Interrupted => (PlayOutcome::Interrupted, o.played_ms),
                        PlayEnd::Stopped if stopped_by_dtmf => (PlayOutcome::Interrupted, o.played_ms),
                        PlayEnd::Stopped if self.ended.is_some() => (PlayOutcome::HungUp, o.played_ms),
                        PlayEnd::Stopped => (PlayOutcome::Completed, o.played_ms),
                    };
                }
                h = self.next_happening() => match h {
                    Happening::Media(Some(MediaEvent::Dtmf { digit, .. })) => {
                        self.pending_dtmf.push(digit);
                        if interruptible && !stopped_by_dtmf {
                            stopped_by_dtmf = true;
                            let _ = self.session.stop_playout();
                        }
                    }
                    Happening::Media(None) => { self.media_events = None; }
                    Happening::Media(Some(_)) => {}
                    Happening::Signal(s) => {
                        if let Some(d) = self.on_signal(s) {
                            self.pending_dtmf.push(d);
                            if interruptible && !stopped_by_dtmf {
                                stopped_by_dtmf = true;
                                let _ = self.session.stop_playout();
                            }
                        }
                        if self.ended.is_some() {
                            let _ = self.session.stop_playout();
                        }
                    }
                    Happening::Forced(f) => { self.force_end(f); let _ = self.session.stop_playout(); }
                }
            }
        };
        if let (Some(answer), Some(first)) = (self.answer_ns.take(), first_rtp_ns) {
            self.record_turn_latency(answer, requested_ns, first);
        }
        let name = match &outcome.0 {
            PlayOutcome::Completed => "completed",
            PlayOutcome::Interrupted => "interrupted",
            PlayOutcome::HungUp => "hung_up",
            PlayOutcome::Failed(_) => "failed",
        };
        self.prompts.push(PromptLog {
            at_ms,
            prompt: prompt.clone(),
            interruptible,
            outcome: name.into(),
            played_ms: outcome.1,
            elapsed_ms: t0.elapsed().as_millis() as u64,
            error: match &outcome.0 {
                PlayOutcome::Failed(e) => Some(e.clone()),
                _ => None,
            },
        });
        outcome.0
    }
}

pub(super) fn known_engine(e: &str) -> bool {
    matches!(e, "espeak-ng" | "flite")
}
