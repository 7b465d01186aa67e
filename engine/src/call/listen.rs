//! Listen turns in a live call: speech through a recognition stream, keys (RFC 4733 and SIP
//! INFO), silence and the call's end.

use bytes::Bytes;
use callsmith_domain::objects::CallObjects;
use callsmith_media::MediaEvent;
use callsmith_media::stt::{
    SttEvent, SttNodeConfig, SttParams, SttProtocol, SttStream, Transcript,
};
use callsmith_scenarios::port::{Heard, ListenSpec, SpeechSpec};
use callsmith_scenarios::turn::{ListenAction, ListenEvent, ListenTurn};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::warn;

use super::history::{self, TurnLog};
use super::io::CallEvent;
use super::port::LivePort;

/// A 16-bit PCM mono WAV at `rate` Hz.
pub(super) fn wav_mono(pcm: &[i16], rate: u32) -> Vec<u8> {
    let data_len = (pcm.len() * 2) as u32;
    let mut out = Vec::with_capacity(44 + data_len as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for s in pcm {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out
}

impl LivePort {
    /// One listen turn (the port's `listen`): speech through a recognition stream and keys,
    /// until an answer, silence or the call's end; the history records it. What the turn
    /// means is decided by [`ListenTurn`]; this feeds it the call's I/O and does what it
    /// asks.
    pub(super) async fn listen_turn(&mut self, spec: &ListenSpec) -> Heard {
        if self.io.hung_up() {
            return Heard::HungUp;
        }
        // `recognition_shift` `after`: listening starts that long after the prompt's end
        // (keys pressed meanwhile are kept, and count in the turn).
        if let Some(ms) = spec.speech.as_ref().and_then(|s| s.recognition_shift_ms) {
            let delay = std::time::Duration::from_millis(ms as u64);
            if self.while_up(tokio::time::sleep(delay)).await.is_err() {
                return Heard::HungUp;
            }
        }
        // A turn whose eager answer was taken back goes on here, on its stream; one that
        // was not is settled (its final recorded when it comes).
        let resumed = match self.eager.take() {
            Some(e) if e.resumed => Some(e.stt),
            Some(e) => {
                e.settle(&mut self.record);
                None
            }
            None => None,
        };
        self.record.turn_started();
        let mut turn = TurnLog {
            index: self.record.next_turn_index(),
            started_ms: self.ms(),
            ..Default::default()
        };
        let mut stt = None;
        let continued = resumed.is_some() && spec.speech.is_some();
        if let Some(s) = resumed.filter(|_| spec.speech.is_some()) {
            turn.notes.push(
                "continues the turn whose answer was taken back: the caller went on speaking \
                 after the recogniser's eager end of turn"
                    .into(),
            );
            turn.stt_node = Some(s.node.name.clone());
            stt = Some(s);
        } else if let Some(speech) = &spec.speech {
            let words = self.dictionary_words(speech, &mut turn).await;
            match self.ctx.rt.stt_pool(&speech.engine) {
                Some(pool) => {
                    let params = stt_params(speech, &words);
                    match self.io.session.start_stt(&pool, params.clone()).await {
                        Ok(s) => {
                            turn.notes.extend(stream_notes(&params, &s.node));
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
        // Speech is detected while a turn takes it (a turn that takes only keys needs no
        // detector); the turn's end turns detection off again.
        let _ = self.io.session.watch_speech(spec.speech.is_some());
        // The caller's audio is kept only to store a speech turn's recording.
        let mut audio = if spec.speech.is_some() {
            self.io.session.tap_caller_audio(3000).ok()
        } else {
            None
        };
        let mut pcm: Vec<i16> = Vec::new();
        // The session's audio rate (16 kHz on a wideband call): the turn's audio is kept at it.
        let mut rate = self.io.session.audio_rate();
        // The no-input time runs once recognition is up (or known to be missing).
        let mut listen = ListenTurn::new(spec, now());
        if spec.speech.is_some() && stt.is_none() {
            listen.handle_event(now(), ListenEvent::RecognitionFailed);
        }
        if continued {
            // The caller is speaking: they went on after the eager end of turn.
            listen.handle_event(now(), ListenEvent::SpeechStarted);
        }
        if listen.takes_keys() {
            let typed = self.io.take_typed();
            listen.typed_during_prompt(&typed, now());
        }
        // Recognition latency of the last final transcript fed, and the node's decision
        // to send it (ms before it arrived), for the turn's record.
        let mut final_latency_ms = None;
        let mut decision_lag_ms: Option<u64> = None;
        // The answer was decided from the interim transcript: the final is still to come;
        // at the eager end of turn, the turn may also be taken back.
        let mut from_interim = false;
        let mut eager = false;
        // The call's speech detector hears the caller now (between its onset and its
        // hangover's end).
        let mut in_speech = false;
        let heard = loop {
            let mut done = None;
            while let Some(action) = listen.poll_action() {
                match action {
                    ListenAction::SpeechStarted => turn.speech_started_ms = Some(self.ms()),
                    ListenAction::Interim { text, first } => {
                        let at = self.ms();
                        if first {
                            turn.first_partial_ms = Some(at);
                        }
                        turn.interim.push((at, text));
                    }
                    ListenAction::Final => {
                        let at = self.ms();
                        turn.final_ms = Some(at);
                        turn.end_of_turn_ms = Some(at.saturating_sub(decision_lag_ms.unwrap_or(0)));
                        turn.final_latency_ms = final_latency_ms;
                    }
                    ListenAction::FinishRecognition => {
                        if let Some(s) = stt.as_mut() {
                            s.finish();
                        }
                    }
                    ListenAction::Done(h) => done = Some(h),
                }
            }
            if let Some(h) = done {
                break h;
            }
            // A turn without a deadline is over, and its `Done` was handled above.
            let Some(deadline) = listen.poll_timeout() else {
                break Heard::NoInput;
            };
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
                    Some(SttEvent::Transcript(t)) if t.end_of_turn => {
                        // The node's end of turn ahead of its final: the answer when the
                        // interim decides the question.
                        listen.handle_event(now(), ListenEvent::EndOfTurn { text: t.text });
                        if listen.is_done() {
                            from_interim = true;
                            turn.notes.push(
                                "answer decided from the interim transcript at the recogniser's \
                                 end of turn, before its final"
                                    .into(),
                            );
                        }
                    }
                    Some(SttEvent::Transcript(t)) => {
                        self.record.transcript(&t.text, t.is_final);
                        if t.is_final {
                            final_latency_ms = Some(t.at_ms.saturating_sub(t.end_ms));
                            decision_lag_ms = t.decision_to_final_ms;
                            if !t.text.trim().is_empty() && t.language.is_some() {
                                turn.language = t.language.clone();
                            }
                        }
                        let ev = ListenEvent::Transcript { text: t.text, is_final: t.is_final };
                        listen.handle_event(now(), ev);
                    }
                    Some(SttEvent::EagerEndOfTurn { text }) => {
                        // The node's eager end of turn decides as its end of turn does; the
                        // reply may then be taken back until the node confirms it.
                        listen.handle_event(now(), ListenEvent::EndOfTurn { text });
                        if listen.is_done() {
                            eager = true;
                            turn.notes.push(
                                "answer decided from the transcript at the recogniser's eager \
                                 end of turn, before its end of turn"
                                    .into(),
                            );
                        }
                    }
                    Some(SttEvent::TurnResumed) => {}
                    Some(SttEvent::NodeFailed { node, error }) => {
                        self.recognition_failed(&mut turn, &engine, format!("{node}: {error}"));
                        stt = None;
                        listen.handle_event(now(), ListenEvent::RecognitionFailed);
                    }
                    Some(SttEvent::Ended) | None => {
                        stt = None;
                        listen.handle_event(now(), ListenEvent::RecognitionEnded);
                    }
                },
                f = frame => match f {
                    Some(f) => if pcm.len() < 60 * rate.hz() as usize {
                        // A codec change mid-turn starts the audio again at its rate.
                        if f.rate != rate { pcm.clear(); rate = f.rate; }
                        pcm.extend_from_slice(&f.pcm);
                    },
                    None => audio = None,
                },
                ev = self.next() => match ev {
                    CallEvent::Digit(d) => listen.handle_event(now(), ListenEvent::Digit(d)),
                    CallEvent::Media(MediaEvent::SpeechStarted { .. }) => {
                        in_speech = true;
                        listen.handle_event(now(), ListenEvent::SpeechStarted);
                    }
                    CallEvent::Media(MediaEvent::SpeechStopped { hangover_ms, .. }) => {
                        in_speech = false;
                        turn.speech_ended_ms =
                            Some(self.ms().saturating_sub(u64::from(hangover_ms)));
                    }
                    CallEvent::Media(_) => {}
                    CallEvent::Ended(_) => listen.handle_event(now(), ListenEvent::HungUp),
                },
                _ = tokio::time::sleep_until(Instant::from_std(deadline)) => listen.handle_timeout(now()),
            }
        };
        if matches!(heard, Heard::Speech { .. } | Heard::Dtmf { .. }) {
            self.record.answered_now();
        }
        // A turn decided from the interim transcript keeps its stream until the final
        // arrives, off the reply's path: the turn's record gets it as `final_transcript`.
        // One decided at the eager end of turn keeps it in the port while the answer may
        // be taken back.
        let (late_final, eager) = match stt {
            Some(s) if eager => (None, Some(EagerTurn::new(s))),
            s => (s.filter(|_| from_interim).map(final_after_interim), None),
        };
        drop(audio);
        let _ = self.io.session.watch_speech(false);
        turn.ended_ms = self.ms();
        match &heard {
            Heard::Speech { transcript, .. } => {
                turn.heard = history::Heard::Speech;
                turn.transcript = Some(transcript.clone());
            }
            Heard::Dtmf { digits } => {
                turn.heard = history::Heard::Dtmf;
                turn.dtmf = Some(digits.clone());
            }
            Heard::NoInput => turn.heard = history::Heard::NoInput,
            Heard::HungUp => turn.heard = history::Heard::HungUp,
        }
        let upload = if spec.speech.is_some() {
            self.save_turn_audio(turn.index, pcm, rate.hz())
                .map(|(reference, upload)| {
                    turn.speech_recognition_recording = Some(reference);
                    upload
                })
        } else {
            None
        };
        self.record.keep_turn(turn, upload);
        // A recogniser that ends the turn before the detector's hangover (400 ms) leaves
        // the speech's end to come: the detector reports it once detection stops
        // (`SpeechUnwatched`).
        if in_speech && spec.speech.is_some() {
            self.record.speech_end_to_come();
        }
        if let Some(f) = late_final {
            self.record.final_to_come(f);
        }
        self.eager = eager;
        heard
    }

    /// Starts storing a turn's caller audio off the reply's path (the reply must not wait
    /// for object storage): the reference it will have, and its upload.
    fn save_turn_audio(
        &self,
        index: usize,
        pcm: Vec<i16>,
        rate: u32,
    ) -> Option<(String, JoinHandle<bool>)> {
        if pcm.is_empty() {
            return None;
        }
        let comm = &self.ctx.comm;
        let path = CallObjects::new(&comm.account_sid, &comm.sid).speech_turn(index);
        let reference = callsmith_domain::objects::bucket_reference(&path);
        let objects = self.ctx.rt.objects().clone();
        let upload = tokio::spawn(async move {
            let bytes = wav_mono(&pcm, rate);
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
        Some((reference, upload))
    }
}

impl LivePort {
    /// The words of the account STT dictionaries the question names, resolved through
    /// the store with the ownership check (the call's account's own, or a global preset;
    /// [`callsmith_domain::store::Store::dictionary_for_account`]). One that is unknown
    /// (or another account's) or that the store could not read is left out, noted in the
    /// turn's `notes`.
    async fn dictionary_words(&mut self, speech: &SpeechSpec, turn: &mut TurnLog) -> Vec<String> {
        let mut words = Vec::new();
        for id in &speech.dictionaries {
            let account = &self.ctx.comm.account_sid;
            match self.ctx.rt.store.dictionary_for_account(account, id).await {
                Ok(Some(d)) => words.extend(d.tokens),
                Ok(None) => turn.notes.push(format!(
                    "dictionary {id}: not found for this account; left out"
                )),
                Err(e) => turn
                    .notes
                    .push(format!("dictionary {id}: not read ({e}); left out")),
            }
        }
        words
    }
}

/// What a question's listening settings ask of the recognition stream: the recognition
/// language and the others to identify among, the hints (the question's, then the words
/// of its dictionaries, without repeats), the endpointing (none without voice activity
/// detection) and the question's patience (sent to a node that takes it).
fn stt_params(speech: &SpeechSpec, dictionary_words: &[String]) -> SttParams {
    let mut hints = speech.tokens.clone();
    for w in dictionary_words {
        let w = w.trim();
        if !w.is_empty() && !hints.iter().any(|h| h == w) {
            hints.push(w.to_string());
        }
    }
    let language = speech.recognition_language();
    SttParams {
        language: if language.is_empty() {
            "en-US".into()
        } else {
            language.to_string()
        },
        model: speech.model.clone(),
        interim_results: true,
        endpointing_ms: speech.speech_timeout_secs.map(endpointing_ms),
        vad_endpointing: speech.enable_voice_activity_detection,
        alternative_languages: speech.other_languages(),
        hints,
        patience: Some(speech.patience.as_str().to_string()),
        // The session's rate, set when the stream starts.
        ..SttParams::default()
    }
}

/// The listening settings a recognition node's protocol cannot carry, for the turn's
/// `notes`. The local speech node (registered by `serve`) takes them all, through both
/// protocols; a hosted Deepgram-style service identifies the language itself; a Vosk
/// server takes only the sample rate.
fn stream_notes(params: &SttParams, node: &SttNodeConfig) -> Vec<String> {
    if node.name == crate::speech::STT_NODE_NAME {
        return Vec::new();
    }
    let languages = params.candidate_languages().join(", ");
    let mut notes = Vec::new();
    match node.protocol {
        SttProtocol::Deepgram => {
            if !languages.is_empty() {
                notes.push(format!(
                    "languages: a Deepgram-style stream identifies the language itself \
                     (language=multi); {languages} were sent as detect_language, which \
                     the streaming API does not hold it to"
                ));
            }
        }
        SttProtocol::Vosk => {
            if !languages.is_empty() {
                notes.push(format!(
                    "languages: the Vosk protocol names no language; {languages} were sent \
                     as the local speech node's extension, a Vosk server uses its model's"
                ));
            }
            if !params.hints.is_empty() {
                notes.push(
                    "hints: the Vosk protocol carries no hints; sent as the local speech \
                     node's extension, a Vosk server ignores them"
                        .into(),
                );
            }
            if !params.vad_endpointing || params.endpointing_ms.is_some() {
                notes.push(
                    "endpointing: the Vosk protocol carries no endpointing; sent as the \
                     local speech node's extension, a Vosk server ends turns its own way"
                        .into(),
                );
            }
        }
    }
    notes
}

/// A question's `speech_timeout` (seconds of silence that end the caller's turn) as the
/// recognition stream's endpointing, within 50 ms and 30 s.
fn endpointing_ms(secs: f64) -> u32 {
    (secs * 1000.0).round().clamp(50.0, 30_000.0) as u32
}

/// How long a turn decided from the interim transcript waits for the recogniser's final
/// (its decoding, a few hundred ms on the local node; more on a loaded machine).
const LATE_FINAL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads the rest of `stt` for its final transcript (None when the stream ends, fails or
/// has sent none within [`LATE_FINAL_WAIT`]); the stream closes then.
fn final_after_interim(mut stt: SttStream) -> JoinHandle<Option<Transcript>> {
    tokio::spawn(async move {
        let read = async {
            while let Some(ev) = stt.next().await {
                match ev {
                    SttEvent::Transcript(t) if t.is_final => return Some(t),
                    SttEvent::Transcript(_) => {}
                    SttEvent::EagerEndOfTurn { .. } | SttEvent::TurnResumed => {}
                    SttEvent::NodeFailed { .. } | SttEvent::Ended => return None,
                }
            }
            None
        };
        tokio::time::timeout(LATE_FINAL_WAIT, read)
            .await
            .ok()
            .flatten()
    })
}

/// The recognition stream of a turn whose answer was decided at the recogniser's eager end
/// of turn, while the answer may be taken back: the reply that plays meanwhile stops when
/// the caller goes on (`TurnResumed`), and the next listen turn continues on the stream;
/// the node's end of turn confirms the answer.
pub(super) struct EagerTurn {
    pub(super) stt: SttStream,
    /// The caller went on speaking: the reply was taken back.
    pub(super) resumed: bool,
}

impl EagerTurn {
    fn new(stt: SttStream) -> EagerTurn {
        EagerTurn {
            stt,
            resumed: false,
        }
    }

    /// The answer stands: the turn (the record's last) gets its final when it comes.
    pub(super) fn settle(self, record: &mut super::record::CallRecord) {
        record.final_to_come(final_after_interim(self.stt));
    }
}

/// The time the turn machine is fed: the runtime's clock, the one its deadline is slept on.
fn now() -> std::time::Instant {
    Instant::now().into_std()
}

#[cfg(test)]
mod tests {
    use super::{
        SpeechSpec, SttNodeConfig, SttParams, SttProtocol, endpointing_ms, stream_notes, stt_params,
    };

    #[test]
    fn speech_timeout_becomes_the_streams_endpointing() {
        assert_eq!(endpointing_ms(1.5), 1500);
        assert_eq!(endpointing_ms(0.7), 700);
        assert_eq!(endpointing_ms(0.001), 50);
        assert_eq!(endpointing_ms(600.0), 30_000);
    }

    #[test]
    fn listening_settings_reach_the_recognition_stream() {
        let speech = SpeechSpec {
            language: "en-US".into(),
            primary_language: "de-DE".into(),
            fallback_languages: vec!["en-US".into(), "de-DE".into(), " ".into()],
            tokens: vec!["Callsmith".into()],
            enable_voice_activity_detection: false,
            speech_timeout_secs: Some(1.2),
            ..SpeechSpec::default()
        };
        let p = stt_params(&speech, &[]);
        assert_eq!(p.language, "de-DE");
        assert_eq!(p.alternative_languages, ["en-US"]);
        assert_eq!(p.hints, ["Callsmith"]);
        assert!(!p.vad_endpointing);
        assert_eq!(p.endpointing_ms, Some(1200));
        assert_eq!(p.patience.as_deref(), Some("normal"));
        let digits = SpeechSpec {
            patience: callsmith_scenarios::port::Patience::Digits,
            ..SpeechSpec::default()
        };
        assert_eq!(stt_params(&digits, &[]).patience.as_deref(), Some("digits"));
        // Nothing named: English, voice activity detection on.
        let p = stt_params(
            &SpeechSpec {
                enable_voice_activity_detection: true,
                ..SpeechSpec::default()
            },
            &[],
        );
        assert_eq!(p.language, "en-US");
        assert!(p.alternative_languages.is_empty() && p.vad_endpointing);
    }

    /// The words of the question's dictionaries follow its own hints, without repeats.
    #[test]
    fn dictionary_words_reach_the_streams_hints() {
        let speech = SpeechSpec {
            tokens: vec!["Callsmith".into(), "order number".into()],
            dictionaries: vec!["dic_products".into()],
            ..SpeechSpec::default()
        };
        let words = [
            "overdraft".to_string(),
            "Callsmith".into(),
            " ".into(),
            "IBAN".into(),
        ];
        let p = stt_params(&speech, &words);
        assert_eq!(p.hints, ["Callsmith", "order number", "overdraft", "IBAN"]);
        assert_eq!(
            stt_params(&speech, &[]).hints,
            ["Callsmith", "order number"]
        );
    }

    #[test]
    fn what_a_nodes_protocol_cannot_carry_is_noted() {
        let params = SttParams {
            alternative_languages: vec!["es-ES".into()],
            hints: vec!["Callsmith".into()],
            ..SttParams::default()
        };
        let node = |name: &str, protocol| SttNodeConfig::new(name, "ws://127.0.0.1:1/", protocol);
        // The local node takes everything, whichever protocol.
        let local = node(crate::speech::STT_NODE_NAME, SttProtocol::Vosk);
        assert!(stream_notes(&params, &local).is_empty());
        // Hosted Deepgram: the language list is not a limit; hints are carried.
        let dg = stream_notes(&params, &node("deepgram", SttProtocol::Deepgram));
        assert_eq!(dg.len(), 1, "{dg:?}");
        assert!(dg[0].starts_with("languages:") && dg[0].contains("en-US, es-ES"));
        // A Vosk server: neither languages nor hints.
        let vosk = stream_notes(&params, &node("vosk", SttProtocol::Vosk));
        assert!(vosk[0].starts_with("languages:") && vosk[1].starts_with("hints:"));
        assert_eq!(vosk.len(), 2, "{vosk:?}");
        // Each note reads as one sentence (no runs of spaces from the source's line breaks).
        for n in dg.iter().chain(&vosk) {
            assert!(!n.contains("  "), "{n:?}");
        }
        // Nothing asked, nothing noted.
        assert!(stream_notes(&SttParams::default(), &node("vosk", SttProtocol::Vosk)).is_empty());
    }
}
