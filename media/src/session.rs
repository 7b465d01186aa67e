//! The per-call facade: `MediaSession` and the values it hands out.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::MediaError;
use crate::g711::Codec;
use crate::prompt::{FRAME_SAMPLES, Playable, StreamingAudio};
use crate::recording::{Recorder, RecordingInfo, RecordingTarget};
use crate::worker::{Command, Tap};

/// Something that happened on a session, in call time (`at_ms` since the session opened).
#[derive(Debug, Clone, PartialEq)]
pub enum MediaEvent {
    /// An RFC 4733 digit ended (reported once per event).
    Dtmf {
        digit: char,
        duration_ms: u32,
        at_ms: u64,
    },
    /// VAD onset on caller audio.
    SpeechStarted { at_ms: u64 },
    /// VAD offset, decided `hangover_ms` after the last voiced frame (the speech itself
    /// ended at `at_ms - hangover_ms`).
    SpeechStopped { at_ms: u64, hangover_ms: u32 },
    /// No RTP for the configured timeout (reported once until RTP resumes).
    RtpTimeout { at_ms: u64 },
    /// Symmetric RTP: the first packet's source became the send target.
    RemoteLatched { addr: SocketAddr, at_ms: u64 },
}

/// A session's events, in order (see [`MediaSession::take_events`]).
///
/// A futures bounded queue, which allocates per event: a session keeps its event queue
/// for its whole life, and a tokio channel would reserve 32 events (1.3 KiB) up front.
/// Events are rare (a digit, a VAD edge), so the worker allocates seldom.
pub type MediaEvents = futures::channel::mpsc::Receiver<MediaEvent>;

/// Caller audio from a tap, one frame per 20 ms (see [`MediaSession::tap_caller_audio`]).
///
/// A tokio channel: it reserves 32 frames (10.5 KiB) when made but reuses its blocks,
/// so the media worker does not allocate per frame. A tap lives for one turn.
pub type AudioReceiver = tokio::sync::mpsc::Receiver<AudioFrame>;

/// One 20 ms frame of caller audio, 8 kHz linear.
#[derive(Debug, Clone, Copy)]
pub struct AudioFrame {
    pub pcm: [i16; FRAME_SAMPLES],
    /// Start of the frame in call time.
    pub at_ms: u64,
}

/// How a playback ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlayEnd {
    Completed,
    /// Barge-in: the caller started speaking during an interruptible prompt.
    Interrupted,
    /// `stop_playout`, session closed, or the session was gone.
    Stopped,
}

/// The end of a playback and how much of it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Playout {
    pub end: PlayEnd,
    pub played_ms: u64,
    /// When the first RTP packet of this playback left the socket ([`crate::clock::now_ns`]);
    /// None when nothing was sent (no peer yet, stopped before its first frame).
    pub first_rtp_ns: Option<u64>,
}

/// Awaitable end of one `play`.
pub struct PlayHandle {
    rx: oneshot::Receiver<Playout>,
}

impl PlayHandle {
    /// Waits for the playback to end.
    pub async fn wait(self) -> Playout {
        self.rx.await.unwrap_or(Playout {
            end: PlayEnd::Stopped,
            played_ms: 0,
            first_rtp_ns: None,
        })
    }
}

/// Per-session counters (RFC 3550 receive statistics plus drop counters).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SessionStats {
    pub packets_sent: u64,
    pub octets_sent: u64,
    /// Packets received over the whole call, from every source the peer used.
    pub packets_received: u64,
    /// Packets expected over the whole call: the sequence span of each source, summed.
    pub packets_expected: u64,
    /// Cumulative lost over the whole call (RFC 3550 A.3 per source, summed; negative with
    /// duplicates). A change of source is not a gap.
    pub packets_lost: i64,
    /// Interarrival jitter (RFC 3550 A.8) of the current source, in milliseconds.
    pub jitter_ms: f64,
    /// Times the peer's SSRC changed (a restarted stream: re-INVITE, transfer, an SBC
    /// switching sources). Each new source starts its own sequence and jitter tracking.
    pub ssrc_changes: u64,
    pub malformed_rtp: u64,
    pub malformed_rtcp: u64,
    /// Datagrams from a source other than the latched one (dropped). Once the address
    /// the peer signalled holds the latch the socket is connected to it, and the kernel
    /// drops other sources' datagrams before they reach the session: they are not counted.
    pub foreign_packets: u64,
    pub unknown_payload_type: u64,
    pub late: u64,
    pub duplicate: u64,
    /// Frames the jitter buffer concealed.
    pub concealed: u64,
    pub jitter_target_packets: u32,
    pub rtcp_sent: u64,
    pub rtcp_received: u64,
    /// From the peer's RTCP report about our stream.
    pub remote_fraction_lost: f64,
    pub remote_cumulative_lost: i64,
    pub remote_jitter_ms: f64,
    pub send_errors: u64,
    pub events_dropped: u64,
    pub tap_frames_dropped: u64,
    /// Caller speech that ended, while an interruptible prompt played, before it was long
    /// enough to interrupt it (`barge_in_min_ms`): "mm-hm", "yeah", a cough.
    #[serde(default)]
    pub backchannels: u64,
    pub remote: Option<SocketAddr>,
}

/// The media of one call. Dropping it removes the session from its worker.
pub struct MediaSession {
    pub(crate) id: u64,
    pub(crate) local_rtp: SocketAddr,
    pub(crate) cmd: Sender<Command>,
    pub(crate) events: Option<MediaEvents>,
    pub(crate) recorder: Mutex<Option<Recorder>>,
    pub(crate) recording_queue_frames: usize,
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
    pub fn set_remote(
        &self,
        addr: SocketAddr,
        codec: Codec,
        te_payload_type: Option<u8>,
    ) -> Result<(), MediaError> {
        self.send(Command::SetRemote {
            id: self.id,
            addr,
            codec,
            te_pt: te_payload_type,
        })
    }

    /// Queues a prompt (played after any current one). `interruptible`: caller speech stops it.
    pub fn play(
        &self,
        source: impl Into<Playable>,
        interruptible: bool,
    ) -> Result<PlayHandle, MediaError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Play {
            id: self.id,
            source: source.into(),
            interruptible,
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

    /// A copy of caller audio, one frame per 20 ms, on a bounded channel
    /// (frames are dropped, and counted, when the reader lags `capacity` frames).
    pub fn tap_caller_audio(&self, capacity: usize) -> Result<AudioReceiver, MediaError> {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity.max(1));
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

    /// Starts recording both parties to one stereo WAV (caller left, bot right),
    /// uploaded to `target` by `stop_recording` or `close`.
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
    /// Each direction buffers at most 200 ms (older audio is dropped).
    pub fn start(a: &MediaSession, b: &MediaSession) -> Result<Bridge, MediaError> {
        let a_to_b = StreamingAudio::new(1600);
        let b_to_a = StreamingAudio::new(1600);
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
