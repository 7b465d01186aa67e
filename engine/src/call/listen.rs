//! Listen turns in a live call: speech through a recognition stream, keys (RFC 4733 and SIP
//! INFO), silence and the call's end.

use super::*;

/// A 16-bit PCM mono WAV at 8 kHz.
pub(super) fn wav_8k_mono(pcm: &[i16]) -> Vec<u8> {
    let data_len = (pcm.len() * 2) as u32;
    let mut out = Vec::with_capacity(44 + data_len as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&8000u32.to_le_bytes());
    out.extend_from_slice(&16000u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for s in pcm {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out
}

/// Longest a caller may speak in one turn before the turn is cut.
pub(super) const MAX_UTTERANCE: Duration = Duration::from_secs(20);
/// Time allowed for the final transcript after the audio ended.
pub(super) const FINAL_GRACE: Duration = Duration::from_secs(8);

impl LivePort {
    /// One listen turn (the port's `listen`): speech through a recognition stream and keys,
    /// until an answer, silence or the call's end; the history records it.
    pub(super) async fn listen_turn(&mut self, spec: &ListenSpec) -> Heard {
        if self.ended.is_some() {
            return Heard::HungUp;
        }
        self.answer_ns = None;
        let mut turn = Turn {
            index: self.turns.len() + 1,
            started_ms: self.ms(),
            ..Default::default()
        };
        let mut stt = None;
        if let Some(speech) = &spec.speech {
            match self.rt.stt_pool(&speech.engine) {
                Some(pool) => {
                    let params = SttParams {
                        language: if speech.language.is_empty() {
                            "en-US".into()
                        } else {
                            speech.language.clone()
                        },
                        model: speech.model.clone(),
                        interim_results: true,
                    };
                    match self.session.start_stt(&pool, params).await {
                        Ok(s) => {
                            turn.stt_node = Some(s.node.name.clone());
                            stt = Some(s);
                        }
                        Err(e) => self.recognition_failed(&mut turn, &speech.engine, e.to_string()),
                    }
                }
                None => self.recognition_failed(
                    &mut turn,
                    &speech.engine,
                    "no recognition node configured".into(),
                ),
            }
        }
        let engine = spec
            .speech
            .as_ref()
            .map(|s| s.engine.clone())
            .unwrap_or_default();
        // The caller's audio is kept only to store a speech turn's recording.
        let mut audio = if spec.speech.is_some() {
            self.session.tap_caller_audio(3000).ok()
        } else {
            None
        };
        let mut pcm: Vec<i16> = Vec::new();
        let dtmf = spec.dtmf.clone();
        let mut digits = String::new();
        let no_input = Duration::from_secs_f64(if spec.no_input_timeout_secs > 0.0 {
            spec.no_input_timeout_secs
        } else {
            callsmith_scenarios::interpreter::DEFAULT_NO_INPUT_SECS
        });
        let mut deadline = Instant::now() + no_input;
        let mut finishing = false;
        let mut heard: Option<Heard> = None;
        // Digits typed during the prompt start the entry.
        if dtmf.is_some() {
            for d in std::mem::take(&mut self.pending_dtmf).chars() {
                if let Some(h) = push_digit(&mut digits, d, dtmf.as_ref()) {
                    heard = Some(h);
                    break;
                }
            }
            if !digits.is_empty() {
                deadline = Instant::now() + inter_digit(dtmf.as_ref());
            }
        }
        while heard.is_none() {
            let stt_next = async {
                match stt.as_mut() {
                    Some(s) => s.next().await,
                    None => std::future::pending().await,
                }
            };
            let frame = async {
                match audio.as_mut() {
                    Some(a) => a.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = stt_next => match ev {
                    Some(SttEvent::Transcript(t)) => {
                        let now = self.ms();
                        if t.is_final {
                            if !t.text.trim().is_empty() {
                                turn.final_ms = Some(now);
                                turn.final_latency_ms = Some(t.at_ms.saturating_sub(t.end_ms));
                                heard = Some(Heard::Speech { transcript: t.text.trim().to_string(), confidence: None });
                            } else if finishing {
                                heard = Some(Heard::NoInput);
                            }
                        } else if !t.text.trim().is_empty() {
                            turn.first_partial_ms.get_or_insert(now);
                            turn.interim.push((now, t.text.clone()));
                            deadline = deadline.max(Instant::now() + Duration::from_secs(3));
                        }
                    }
                    Some(SttEvent::NodeFailed { node, error }) => {
                        self.recognition_failed(&mut turn, &engine, format!("{node}: {error}"));
                        stt = None;
                    }
                    Some(SttEvent::Ended) | None => {
                        stt = None;
                        if finishing { heard = Some(Heard::NoInput); }
                    }
                },
                f = frame => match f {
                    Some(f) => if pcm.len() < 8000 * 60 { pcm.extend_from_slice(&f.pcm) },
                    None => audio = None,
                },
                h = self.next_happening() => match h {
                    Happening::Media(Some(MediaEvent::Dtmf { digit, .. })) => {
                        if dtmf.is_some() {
                            heard = push_digit(&mut digits, digit, dtmf.as_ref());
                            deadline = Instant::now() + inter_digit(dtmf.as_ref());
                        }
                    }
                    Happening::Media(Some(MediaEvent::SpeechStarted { .. })) => {
                        turn.speech_started_ms.get_or_insert(self.ms());
                        if stt.is_some() {
                            deadline = deadline.max(Instant::now() + MAX_UTTERANCE);
                        }
                    }
                    Happening::Media(Some(_)) => {}
                    Happening::Media(None) => self.media_events = None,
                    Happening::Signal(s) => {
                        if let Some(d) = self.on_signal(s)
                            && dtmf.is_some()
                        {
                            heard = push_digit(&mut digits, d, dtmf.as_ref());
                            deadline = Instant::now() + inter_digit(dtmf.as_ref());
                        }
                        if self.ended.is_some() { heard = Some(Heard::HungUp); }
                    }
                    Happening::Forced(f) => { self.force_end(f); heard = Some(Heard::HungUp); }
                },
                _ = tokio::time::sleep_until(deadline) => {
                    let min = dtmf.as_ref().map_or(1, |d| d.min_symbols.max(1) as usize);
                    if !digits.is_empty() && digits.len() >= min {
                        heard = Some(Heard::Dtmf { digits: std::mem::take(&mut digits) });
                    } else if !finishing && stt.is_some() && (turn.speech_started_ms.is_some() || !turn.interim.is_empty()) {
                        // Speech is under way: end the audio and wait for the final result.
                        finishing = true;
                        if let Some(s) = stt.as_mut() { s.finish(); }
                        deadline = Instant::now() + FINAL_GRACE;
                    } else {
                        heard = Some(Heard::NoInput);
                    }
                }
            }
        }
        if matches!(heard, Some(Heard::Speech { .. } | Heard::Dtmf { .. })) {
            self.answer_ns = Some(callsmith_media::clock::now_ns());
        }
        drop(stt);
        drop(audio);
        let heard = heard.unwrap_or(Heard::NoInput);
        turn.ended_ms = self.ms();
        match &heard {
            Heard::Speech { transcript, .. } => {
                turn.heard = "speech".into();
                turn.transcript = Some(transcript.clone());
            }
            Heard::Dtmf { digits } => {
                turn.heard = "dtmf".into();
                turn.dtmf = Some(digits.clone());
            }
            Heard::NoInput => turn.heard = "no_input".into(),
            Heard::HungUp => turn.heard = "hung_up".into(),
        }
        if spec.speech.is_some() {
            turn.speech_recognition_recording = self.save_turn_audio(turn.index, pcm);
        }
        self.turns.push(turn);
        heard
    }

    /// Starts storing a turn's caller audio off the reply's path (the reply must not wait
    /// for object storage) and returns the reference it will have.
    pub(super) fn save_turn_audio(&mut self, index: usize, pcm: Vec<i16>) -> Option<String> {
        if pcm.is_empty() {
            return None;
        }
        let path = CallObjects::new(&self.comm.account_sid, &self.comm.sid).speech_turn(index);
        let reference = callsmith_control::objects::bucket_reference(&path);
        let objects = self.rt.objects().clone();
        let upload = tokio::spawn(async move {
            let bytes = wav_8k_mono(&pcm);
            match objects
                .put(&path, Bytes::from(bytes), Some("audio/wav"))
                .await
            {
                Ok(()) => true,
                Err(e) => {
                    warn!(error = %e, "saving turn audio failed");
                    false
                }
            }
        });
        self.turn_audio_saves.push((self.turns.len(), upload));
        Some(reference)
    }
}

/// Time allowed between two keys of an entry.
pub(super) fn inter_digit(d: Option<&DtmfSpec>) -> Duration {
    Duration::from_secs_f64(
        d.and_then(|d| d.inter_digit_timeout_secs)
            .filter(|s| *s > 0.0)
            .unwrap_or(3.0),
    )
}

/// Adds a digit; Some when entry is complete (finish key or max symbols).
pub(super) fn push_digit(digits: &mut String, d: char, spec: Option<&DtmfSpec>) -> Option<Heard> {
    let spec = spec?;
    if spec.finish_on_key == Some(d) {
        if digits.len() >= spec.min_symbols as usize {
            return Some(Heard::Dtmf {
                digits: std::mem::take(digits),
            });
        }
        return None;
    }
    digits.push(d);
    if spec.max_symbols > 0 && digits.len() >= spec.max_symbols as usize {
        return Some(Heard::Dtmf {
            digits: std::mem::take(digits),
        });
    }
    None
}
