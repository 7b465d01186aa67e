//! The per-call facade: `MediaSession` and the values it hands out.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::MediaError;
use crate::codec::RtpCodec;
use crate::events::{
    AudioReceiver, BargeIn, MediaEvent, MediaEvents, PlayEnd, Playout, SessionStats,
};
use crate::prompt::{Playable, StreamingAudio};
use crate::rate::AudioRate;
use crate::recording::{Recorder, RecordingInfo, RecordingTarget};
use crate::worker::{Command, Tap};

/// Awaitable end of one `play`.
pub struct PlayHandle {
    rx: oneshot::Receiver<Playout>,
}

impl PlayHandle {
    /// The handle of a playback whose end `rx` receives: a session's own plays, or a
    /// stand-in session's (an in-process test peer) that ends its playbacks itself.
    pub fn new(rx: oneshot::Receiver<Playout>) -> PlayHandle {
        PlayHandle { rx }
    }

    /// Waits for the playback to end.
    pub async fn wait(self) -> Playout {
        self.rx.await.unwrap_or(Playout {
            end: PlayEnd::Stopped,
            played_ms: 0,
            first_rtp_ns: None,
        })
    }
}

/// The media of one call. Dropping it removes the session from its worker.
pub struct MediaSession {
    pub(crate) id: u64,
    pub(crate) local_rtp: SocketAddr,
    pub(crate) cmd: Sender<Command>,
    pub(crate) events: Option<MediaEvents>,
    pub(crate) recorder: Mutex<Option<Recorder>>,
    pub(crate) recording_queue_frames: usize,
    /// Whether the negotiated codec makes the session wideband (see [`Self::audio_rate`]).
    pub(crate) wide: std::sync::atomic::AtomicBool,
    /// The worker's session count (for least-loaded placement).
    pub(crate) load: Arc<std::sync::atomic::AtomicU64>,
}

impl MediaSession {
    fn send(&self, c: Command) -> Result<(), MediaError> {
        self.cmd.send(c).map_err(|_| MediaError::EngineStopped)
    }

    /// Local RTP port (RTCP is this + 1).
    pub fn local_port(&self) -> u16 {
        self.local_rtp.port()
    }

    /// Local RTP address as bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_rtp
    }

    /// Sets the negotiated peer, codec and telephone-event payload type (None: no DTMF).
    /// Until the first packet arrives RTP goes here; then it goes where packets come from.
    /// The codec sets the session's [`AudioRate`] (see [`Self::audio_rate`]).
    pub fn set_remote(
        &self,
        addr: SocketAddr,
        codec: impl Into<RtpCodec>,
        te_payload_type: Option<u8>,
    ) -> Result<(), MediaError> {
        let codec = codec.into();
        self.wide.store(
            codec.audio_rate() == AudioRate::Wide,
            std::sync::atomic::Ordering::Relaxed,
        );
        self.send(Command::SetRemote {
            id: self.id,
            addr,
            codec,
            te_pt: te_payload_type,
        })
    }

    /// The rate of the session's audio, chosen by its codec: 16 kHz with G.722, 8 kHz with
    /// G.711 (and before a codec is set). Caller audio taps, recognition and recordings
    /// carry it; prompts and synthesis play at it.
    pub fn audio_rate(&self) -> AudioRate {
        if self.wide.load(std::sync::atomic::Ordering::Relaxed) {
            AudioRate::Wide
        } else {
            AudioRate::Narrow
        }
    }

    /// Holds the session's media until [`Self::set_srtp`] brings the keys (or says the call
    /// is plain): meanwhile it sends nothing, and what arrives is dropped (counted in
    /// `srtp_dropped`) and takes no latch. For a call whose offer or answer will carry SDES
    /// keys, so that no packet goes out before them (the peer may start sending, and a
    /// latch would start our stream, before the signalling hands the keys over).
    pub fn await_srtp(&self) -> Result<(), MediaError> {
        self.send(Command::AwaitSrtp(self.id))
    }

    /// Protects the session's RTP and RTCP with SRTP from now on (None: plain RTP again),
    /// with keys agreed in the signalling. Call it before [`Self::set_remote`] so that no
    /// packet goes to the peer unprotected; the contexts are derived here, not on the
    /// worker. Called again with other keys (a re-INVITE's), it re-keys: see
    /// [`crate::srtp::SrtpContexts::continue_from`].
    pub fn set_srtp(&self, params: Option<&crate::srtp::SrtpParams>) -> Result<(), MediaError> {
        let contexts = params.map(|p| p.contexts()).transpose()?;
        self.send(Command::SetSrtp {
            id: self.id,
            contexts: contexts.map(Box::new),
        })
    }

    /// Queues a prompt (played after any current one). `barge_in`: when caller speech
    /// stops it (`true`: from its start, `false`: never).
    pub fn play(
        &self,
        source: impl Into<Playable>,
        barge_in: impl Into<BargeIn>,
    ) -> Result<PlayHandle, MediaError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Play {
            id: self.id,
            source: source.into(),
            barge_in: barge_in.into(),
            done: tx,
        })?;
        Ok(PlayHandle { rx })
    }

    /// Whether someone listens for the caller's speech: while on, the session detects it
    /// and sends [`MediaEvent::SpeechStarted`] / [`MediaEvent::SpeechStopped`]. Detection
    /// also runs while an interruptible prompt plays, whose barge-in it decides. Off at
    /// first: detection is the costliest work per caller frame, and a call that only plays
    /// prompts and takes keys needs none.
    pub fn watch_speech(&self, on: bool) -> Result<(), MediaError> {
        self.send(Command::WatchSpeech { id: self.id, on })
    }

    /// Stops the current prompt and clears the queue (handles resolve `Stopped`).
    pub fn stop_playout(&self) -> Result<(), MediaError> {
        self.send(Command::StopPlayout(self.id))
    }

    /// Sends digits as RFC 4733 events (0-9 * # A-D), one after another.
    pub fn send_dtmf(&self, digits: &str) -> Result<(), MediaError> {
        let mut v = Vec::with_capacity(digits.len());
        for d in digits.chars() {
            crate::dtmf::digit_to_event(d).map_err(|e| MediaError::InvalidInput(e.to_string()))?;
            v.push(d);
        }
        self.send(Command::SendDtmf {
            id: self.id,
            digits: v,
        })
    }

    /// The event stream (can be taken once).
    pub fn take_events(&mut self) -> Option<MediaEvents> {
        self.events.take()
    }

    /// Next event, if the stream was not taken.
    pub async fn next_event(&mut self) -> Option<MediaEvent> {
        match self.events.as_mut() {
            Some(rx) => rx.next().await,
            None => None,
        }
    }

    /// A copy of caller audio at the session's [`AudioRate`] on a bounded channel: 20 ms per
    /// tick, in one 8 kHz frame or two 16 kHz frames (frames are dropped, and counted, when
    /// the reader lags `capacity` ticks).
    pub fn tap_caller_audio(&self, capacity: usize) -> Result<AudioReceiver, MediaError> {
        let slots = capacity.max(1) * self.audio_rate().factor();
        let (tx, rx) = tokio::sync::mpsc::channel(slots);
        self.send(Command::AddTap {
            id: self.id,
            tap: Tap::Channel(tx),
        })?;
        Ok(rx)
    }

    pub(crate) fn tap_into_stream(&self, stream: Arc<StreamingAudio>) -> Result<(), MediaError> {
        self.send(Command::AddTap {
            id: self.id,
            tap: Tap::Stream(stream),
        })
    }

    /// Starts recording both parties to one stereo WAV (caller left, bot right) at the
    /// session's [`AudioRate`], uploaded to `target` by `stop_recording` or `close`.
    pub fn start_recording(&self, target: RecordingTarget) -> Result<(), MediaError> {
        let mut slot = self.recorder.lock();
        if slot.is_some() {
            return Err(MediaError::InvalidInput("already recording".into()));
        }
        let (rec, tap) = Recorder::start(target, self.recording_queue_frames)
            .map_err(|e| MediaError::Recording(e.to_string()))?;
        self.send(Command::StartRecording { id: self.id, tap })?;
        *slot = Some(rec);
        Ok(())
    }

    /// Stops recording and stores the file; None when not recording.
    pub async fn stop_recording(&self) -> Result<Option<RecordingInfo>, MediaError> {
        let Some(rec) = self.recorder.lock().take() else {
            return Ok(None);
        };
        let (tx, rx) = oneshot::channel();
        self.send(Command::StopRecording {
            id: self.id,
            done: tx,
        })?;
        let _ = rx.await;
        rec.finish()
            .await
            .map(Some)
            .map_err(|e| MediaError::Recording(e.to_string()))
    }

    /// Current counters.
    pub async fn stats(&self) -> Result<SessionStats, MediaError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Stats(self.id, tx))?;
        rx.await.map_err(|_| MediaError::EngineStopped)
    }

    /// Ends the session: stops playout, stores any recording, returns final counters.
    pub async fn close(self) -> Result<(SessionStats, Option<RecordingInfo>), MediaError> {
        let recording = self.stop_recording().await?;
        let (tx, rx) = oneshot::channel();
        self.send(Command::Remove(self.id, Some(tx)))?;
        let stats = rx.await.map_err(|_| MediaError::EngineStopped)?;
        Ok((stats, recording))
    }
}

impl Drop for MediaSession {
    fn drop(&mut self) {
        let _ = self.cmd.send(Command::Remove(self.id, None));
        self.load.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Two sessions relaying caller audio to each other (bridged transfer).
/// Dropping or `stop`ping it ends the relay; both sessions stay open.
pub struct Bridge {
    a_to_b: Arc<StreamingAudio>,
    b_to_a: Arc<StreamingAudio>,
}

impl Bridge {
    /// Starts relaying: what A's caller says is played to B's caller and back.
    /// Each direction buffers at most 200 ms (older audio is dropped), at the rate of the
    /// session whose caller it carries.
    pub fn start(a: &MediaSession, b: &MediaSession) -> Result<Bridge, MediaError> {
        let relay = |s: &MediaSession| {
            let rate = s.audio_rate();
            StreamingAudio::new_at(rate, 200 * rate.samples_per_ms())
        };
        let a_to_b = relay(a);
        let b_to_a = relay(b);
        a.tap_into_stream(a_to_b.clone())?;
        b.tap_into_stream(b_to_a.clone())?;
        a.stop_playout()?;
        b.stop_playout()?;
        drop(b.play(a_to_b.clone(), false)?);
        drop(a.play(b_to_a.clone(), false)?);
        Ok(Bridge { a_to_b, b_to_a })
    }

    /// Ends the relay (the playbacks complete, the taps detach).
    pub fn stop(self) {}
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.a_to_b.finish();
        self.b_to_a.finish();
    }
}
