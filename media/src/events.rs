//! What a session reports: its events, the caller audio a tap receives, how a playback
//! ended, and its counters. The pacing worker produces them and [`crate::MediaSession`]
//! hands them on, so they live beneath both.

use std::net::SocketAddr;

use crate::prompt::FRAME_SAMPLES;
use crate::rate::AudioRate;

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
    /// Speech detection was turned off ([`crate::MediaSession::watch_speech`]) while the
    /// caller was speaking, before the hangover could end it: their speech last had voice
    /// `silence_ms` before `at_ms` (0: it had voice then). A listener that decides sooner
    /// than the hangover (a recogniser's end of turn) learns here where the speech ended.
    SpeechUnwatched { at_ms: u64, silence_ms: u32 },
    /// No RTP for the configured timeout (reported once until RTP resumes).
    RtpTimeout { at_ms: u64 },
    /// Symmetric RTP: the first packet's source became the send target.
    RemoteLatched { addr: SocketAddr, at_ms: u64 },
}

/// A session's events, in order (see [`crate::MediaSession::take_events`]).
///
/// A futures bounded queue, which allocates per event: a session keeps its event queue
/// for its whole life, and a tokio channel would reserve 32 events (1.3 KiB) up front.
/// Events are rare (a digit, a VAD edge), so the worker allocates seldom.
pub type MediaEvents = futures::channel::mpsc::Receiver<MediaEvent>;

/// Caller audio from a tap, 20 ms of it per tick (see [`crate::MediaSession::tap_caller_audio`]).
///
/// A tokio channel: it reserves 32 frames (10.5 KiB) when made but reuses its blocks,
/// so the media worker does not allocate per frame. A tap lives for one turn.
pub type AudioReceiver = tokio::sync::mpsc::Receiver<AudioFrame>;

/// 160 samples of caller audio, linear at the session's [`AudioRate`]: 20 ms at 8 kHz, or
/// 10 ms at 16 kHz (a wideband session's tap gets two frames per 20 ms tick, so a tap's
/// slot is the same size for every session).
#[derive(Debug, Clone, Copy)]
pub struct AudioFrame {
    pub pcm: [i16; FRAME_SAMPLES],
    /// Start of the frame in call time.
    pub at_ms: u64,
    pub rate: AudioRate,
}

impl AudioFrame {
    /// An 8 kHz frame (20 ms).
    pub fn narrow(pcm: [i16; FRAME_SAMPLES], at_ms: u64) -> AudioFrame {
        AudioFrame {
            pcm,
            at_ms,
            rate: AudioRate::Narrow,
        }
    }

    /// How much audio the frame holds: 20 or 10 ms.
    pub fn duration_ms(&self) -> u64 {
        (FRAME_SAMPLES / self.rate.samples_per_ms()) as u64
    }
}

/// When caller speech may stop a prompt (barge-in): from its start, from part way
/// through, over its last part only, or never. `true` is [`BargeIn::After`]`(0)`,
/// `false` is [`BargeIn::Off`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BargeIn {
    /// Speech never stops the prompt.
    #[default]
    Off,
    /// Once this many ms of the prompt have played (0: from its start).
    After(u64),
    /// Once at most this many ms of the prompt are left: a decoded prompt's length is
    /// known at once, a growing source's once its synthesis is finished (until then the
    /// prompt plays on).
    Last(u64),
}

impl BargeIn {
    /// Whether speech may stop the prompt now, `played_ms` into it with `left_ms` of it
    /// left (None: not known yet).
    pub fn open(self, played_ms: u64, left_ms: Option<u64>) -> bool {
        match self {
            BargeIn::Off => false,
            BargeIn::After(ms) => played_ms >= ms,
            BargeIn::Last(ms) => left_ms.is_some_and(|left| left <= ms),
        }
    }

    /// Whether speech may stop the prompt at some point.
    pub fn is_on(self) -> bool {
        self != BargeIn::Off
    }
}

impl From<bool> for BargeIn {
    fn from(interruptible: bool) -> BargeIn {
        if interruptible {
            BargeIn::After(0)
        } else {
            BargeIn::Off
        }
    }
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
    /// SRTP/SRTCP packets dropped: authentication failed, a replay, or too short (with
    /// SRTP on, see `MediaSession::set_srtp`).
    #[serde(default)]
    pub srtp_dropped: u64,
    pub remote: Option<SocketAddr>,
}

#[cfg(test)]
mod tests {
    use super::BargeIn;

    #[test]
    fn the_barge_in_window_opens_part_way_or_over_the_last_part() {
        assert!(!BargeIn::Off.open(10_000, Some(0)));
        assert!(BargeIn::from(true).open(0, None));
        assert_eq!(BargeIn::from(false), BargeIn::Off);
        assert!(!BargeIn::After(2000).open(1980, Some(5000)));
        assert!(BargeIn::After(2000).open(2000, None));
        // The last 1.5 s: open once at most that much is left, shut while the length is
        // not known.
        assert!(!BargeIn::Last(1500).open(0, Some(1520)));
        assert!(BargeIn::Last(1500).open(0, Some(1500)));
        assert!(!BargeIn::Last(1500).open(60_000, None));
    }
}
