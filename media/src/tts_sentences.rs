//! Playing a synthesis while it is made, one sentence at a time, into one growing source.
//!
//! * [`TtsService::synthesis`]: a whole prompt. A text of several sentences
//!   ([`crate::sentences::split_sentences`]) is synthesised sentence by sentence: playback
//!   starts with the first sentence's first audio, and sentence n+1 is asked for as soon as
//!   sentence n's audio is complete, while sentence n still plays. The whole prompt is
//!   cached under its own key once every sentence is done, so the next call plays it from
//!   memory; a sentence already cached on its own is not synthesised again.
//! * [`TtsService::speech`]: sentences handed over as they come (a language model's
//!   reply as it streams), spoken in order into one source, each cached under its own key.
//!
//! Both start at the synthesis's first audible sample
//! ([`StreamingAudio::trim_leading_silence`]): the silence a synthesiser puts before its
//! speech is not played (later sentences keep theirs, the pause between sentences).
//!
//! When a sentence fails, the source ends after the audio made so far (what was spoken
//! stays spoken), nothing of the whole is cached, and the [`SynthStatus`] says why.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::prompt::{Playable, Prompt, StreamingAudio};
use crate::sentences::split_sentences;
use crate::tts::{STREAM_BUFFER, TtsEngine, TtsError, TtsRequest, TtsService};

/// How a synthesis into a growing source ended: `None` while it runs. It is set before
/// the source finishes, so a player that played to the end can read it.
#[derive(Debug, Default)]
pub struct SynthStatus(Mutex<Option<Result<(), String>>>);

impl SynthStatus {
    /// `Some(Ok)` when the whole text was synthesised, `Some(Err)` with the reason when it
    /// stopped early, `None` while it runs.
    pub fn result(&self) -> Option<Result<(), String>> {
        self.0.lock().clone()
    }

    fn set(&self, r: Result<(), String>) {
        let mut g = self.0.lock();
        if g.is_none() {
            *g = Some(r);
        }
    }
}

/// Something to play now and, unless it was cached, how its synthesis is doing.
#[derive(Debug, Clone)]
pub struct Synthesis {
    pub playable: Playable,
    /// `None` for a prompt played from the cache.
    pub status: Option<Arc<SynthStatus>>,
}

impl TtsService {
    /// Something to play now: the cached prompt, or a growing source fed as synthesis
    /// proceeds (see [`Self::synthesis`]).
    pub fn playable(self: &Arc<Self>, req: &TtsRequest) -> Result<Playable, TtsError> {
        Ok(self.synthesis(req)?.playable)
    }

    /// The cached prompt, or a growing source fed as synthesis proceeds, sentence by
    /// sentence when the text has several (the finished audio is cached for next time).
    /// A synthesis of the same request under way is followed, not started again.
    pub fn synthesis(self: &Arc<Self>, req: &TtsRequest) -> Result<Synthesis, TtsError> {
        if let Some(p) = self.cached(req) {
            return Ok(Synthesis {
                playable: Playable::Prompt(p),
                status: None,
            });
        }
        let engine = self.engine(&req.engine)?;
        let key = req.cache_key();
        let (out, status) = {
            let mut in_flight = self.in_flight.lock();
            if let Some((primary, status)) = in_flight.get(&key) {
                return Ok(Synthesis {
                    playable: Playable::Stream(primary.follow(STREAM_BUFFER)),
                    status: Some(status.clone()),
                });
            }
            // Checked again under the lock: a synthesis may have finished meanwhile.
            if let Some(p) = self.cached(req) {
                return Ok(Synthesis {
                    playable: Playable::Prompt(p),
                    status: None,
                });
            }
            // Nobody plays the primary itself (every player follows it): it keeps its
            // history and one frame.
            let primary = StreamingAudio::new_with_history_at(req.rate, 0);
            primary.trim_leading_silence();
            let status = Arc::new(SynthStatus::default());
            in_flight.insert(key.clone(), (primary.clone(), status.clone()));
            (primary, status)
        };
        let player = out.follow(STREAM_BUFFER);
        let sentences: Vec<String> = split_sentences(&req.text)
            .into_iter()
            .map(str::to_string)
            .collect();
        let (svc, req, st) = (self.clone(), req.clone(), status.clone());
        tokio::spawn(async move {
            let result = if sentences.len() > 1 {
                let mut r = Ok(());
                for s in &sentences {
                    r = svc.sentence_into(&engine, &req, s, &out, false).await;
                    if r.is_err() {
                        break;
                    }
                }
                r
            } else {
                engine.synthesize_into(&req, &out).await
            };
            {
                // Under the in-flight lock: a request sees the synthesis either in flight
                // (with its whole history) or cached, never neither.
                let mut in_flight = svc.in_flight.lock();
                let pcm = out.take_history();
                if result.is_ok() && !pcm.is_empty() {
                    svc.store(key.clone(), Arc::new(Prompt::from_pcm_at(pcm, out.rate())));
                }
                in_flight.remove(&key);
                st.set(result.as_ref().map(|_| ()).map_err(|e| e.to_string()));
                out.finish();
            }
            if let Err(e) = result {
                tracing::warn!(engine = %req.engine, error = %e, "streamed synthesis failed");
            }
        });
        Ok(Synthesis {
            playable: Playable::Stream(player),
            status: Some(status),
        })
    }

    /// Sentences spoken as they are handed over ([`Speech::say`]), in order, into one
    /// growing source; `voice` gives every setting but the text. Each sentence is looked up
    /// in the cache and cached under its own key once synthesised.
    pub fn speech(self: &Arc<Self>, voice: &TtsRequest) -> Result<Speech, TtsError> {
        let engine = self.engine(&voice.engine)?;
        let out = StreamingAudio::new_at(voice.rate, STREAM_BUFFER);
        out.trim_leading_silence();
        let status = Arc::new(SynthStatus::default());
        let stop = CancellationToken::new();
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let (svc, base, st, src, cancel) = (
            self.clone(),
            voice.clone(),
            status.clone(),
            out.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let work = async {
                while let Some(sentence) = rx.recv().await {
                    svc.sentence_into(&engine, &base, &sentence, &src, true)
                        .await?;
                }
                Ok::<(), TtsError>(())
            };
            let result = tokio::select! {
                r = work => r.map_err(|e| e.to_string()),
                _ = cancel.cancelled() => Err("stopped".to_string()),
            };
            if let Err(e) = &result {
                tracing::warn!(engine = %base.engine, error = %e, "sentence synthesis failed");
            }
            st.set(result);
            src.finish();
        });
        Ok(Speech {
            tx: Some(tx),
            source: out,
            status,
            stop,
        })
    }

    /// Synthesises one sentence of `base`'s voice into `out` (from the cache when it is
    /// there; cached under its own key when `cache_it`).
    async fn sentence_into(
        &self,
        engine: &Arc<dyn TtsEngine>,
        base: &TtsRequest,
        sentence: &str,
        out: &Arc<StreamingAudio>,
        cache_it: bool,
    ) -> Result<(), TtsError> {
        let req = TtsRequest {
            text: sentence.to_string(),
            ..base.clone()
        };
        if let Some(p) = self.cached(&req) {
            out.push_prompt(&p);
            return Ok(());
        }
        if !cache_it {
            return engine.synthesize_into(&req, out).await;
        }
        // The sentence's own source passes everything on to `out` and keeps a copy.
        let own = StreamingAudio::new_with_history_at(out.rate(), 0);
        own.pass_to(out.clone());
        engine.synthesize_into(&req, &own).await?;
        let pcm = own.take_history();
        if !pcm.is_empty() {
            self.store(
                req.cache_key(),
                Arc::new(Prompt::from_pcm_at(pcm, own.rate())),
            );
        }
        Ok(())
    }
}

/// A source spoken sentence by sentence as the sentences come ([`TtsService::speech`]).
/// Dropping it stops the synthesis (a reply the caller interrupted is not synthesised to
/// its end).
#[derive(Debug)]
pub struct Speech {
    tx: Option<mpsc::UnboundedSender<String>>,
    source: Arc<StreamingAudio>,
    status: Arc<SynthStatus>,
    stop: CancellationToken,
}

impl Speech {
    /// Queues a sentence; false when the synthesis already stopped (a sentence failed).
    pub fn say(&self, sentence: &str) -> bool {
        let s = sentence.trim();
        if s.is_empty() {
            return true;
        }
        self.tx
            .as_ref()
            .is_some_and(|tx| tx.send(s.to_string()).is_ok())
    }

    /// No more sentences: the source finishes once the queued ones are spoken.
    pub fn end(&mut self) {
        self.tx = None;
    }

    /// What a player plays.
    pub fn playable(&self) -> Playable {
        Playable::Stream(self.source.clone())
    }

    /// The growing source itself (its first audio: [`StreamingAudio::first_audio_ns`]).
    pub fn source(&self) -> &Arc<StreamingAudio> {
        &self.source
    }

    /// How the synthesis is doing.
    pub fn status(&self) -> &Arc<SynthStatus> {
        &self.status
    }
}

impl Drop for Speech {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
