//! The media of an answered call as the call sees it: the media worker's [`MediaSession`],
//! or (in tests) a scripted peer's stand-in ([`super::testing::FakeMedia`]) that plays,
//! hears and recognises on the runtime's clock without sockets. Only what an answered call
//! does with its media is here; setting the peer and the recording up happens on the
//! [`MediaSession`] before the call is answered (see [`super::AnsweredCall::new`]).

use callsmith_media::amd::{AmdConfig, AmdDecision};
use callsmith_media::recording::RecordingInfo;
use callsmith_media::stt::{SttError, SttParams, SttPool, SttStream};
use callsmith_media::{
    AudioReceiver, BargeIn, Bridge, MediaError, MediaEvents, MediaSession, PlayHandle,
    SessionStats, prompt::Playable,
};

/// An answered call's media.
pub enum CallMedia {
    /// The media worker's session (RTP, or a browser's WebRTC).
    Session(MediaSession),
    /// A scripted peer's session, in process.
    #[cfg(any(test, feature = "testing"))]
    Fake(super::testing::FakeMedia),
}

impl From<MediaSession> for CallMedia {
    fn from(s: MediaSession) -> CallMedia {
        CallMedia::Session(s)
    }
}

impl CallMedia {
    /// The event stream (can be taken once).
    pub(super) fn take_events(&mut self) -> Option<MediaEvents> {
        match self {
            CallMedia::Session(s) => s.take_events(),
            #[cfg(any(test, feature = "testing"))]
            CallMedia::Fake(f) => f.take_events(),
        }
    }

    /// Queues a prompt (played after any current one).
    pub(super) fn play(
        &self,
        source: impl Into<Playable>,
        barge_in: impl Into<BargeIn>,
    ) -> Result<PlayHandle, MediaError> {
        match self {
            CallMedia::Session(s) => s.play(source, barge_in),
            #[cfg(any(test, feature = "testing"))]
            CallMedia::Fake(f) => Ok(f.play(source.into(), barge_in.into())),
        }
    }

    /// Whether the caller's speech is detected (see [`MediaSession::watch_speech`]).
    pub(super) fn watch_speech(&self, on: bool) -> Result<(), MediaError> {
        match self {
            CallMedia::Session(s) => s.watch_speech(on),
            #[cfg(any(test, feature = "testing"))]
            CallMedia::Fake(f) => {
                f.watch_speech(on);
                Ok(())
            }
        }
    }

    /// Re-keys the session's SRTP (a re-INVITE's new keys, see [`MediaSession::set_srtp`]).
    pub(super) fn rekey_srtp(
        &self,
        params: &callsmith_media::srtp::SrtpParams,
    ) -> Result<(), MediaError> {
        match self {
            CallMedia::Session(s) => s.set_srtp(Some(params)),
            #[cfg(any(test, feature = "testing"))]
            CallMedia::Fake(f) => {
                f.rekey(params);
                Ok(())
            }
        }
    }

    /// Stops the current prompt and clears the queue.
    pub(super) fn stop_playout(&self) -> Result<(), MediaError> {
        match self {
            CallMedia::Session(s) => s.stop_playout(),
            #[cfg(any(test, feature = "testing"))]
            CallMedia::Fake(f) => {
                f.stop_playout();
                Ok(())
            }
        }
    }

    /// The rate of the call's audio (see [`MediaSession::audio_rate`]).
    pub(super) fn audio_rate(&self) -> callsmith_media::AudioRate {
        match self {
            CallMedia::Session(s) => s.audio_rate(),
            #[cfg(any(test, feature = "testing"))]
            CallMedia::Fake(_) => callsmith_media::AudioRate::Narrow,
        }
    }

    /// A copy of the caller's audio (see [`MediaSession::tap_caller_audio`]).
    pub(super) fn tap_caller_audio(&self, capacity: usize) -> Result<AudioReceiver, MediaError> {
        match self {
            CallMedia::Session(s) => s.tap_caller_audio(capacity),
            #[cfg(any(test, feature = "testing"))]
            CallMedia::Fake(f) => Ok(f.tap_caller_audio(capacity)),
        }
    }

    /// A recognition stream of the caller's speech through a node of `pool`.
    pub(super) async fn start_stt(
        &self,
        pool: &SttPool,
        params: SttParams,
    ) -> Result<SttStream, SttError> {
        match self {
            CallMedia::Session(s) => s.start_stt(pool, params).await,
            #[cfg(any(test, feature = "testing"))]
            CallMedia::Fake(f) => Ok(f.start_stt(pool, params)),
        }
    }

    /// Starts answering-machine detection on the caller's audio from now on.
    pub(super) fn spawn_answering_machine_detection(
        &self,
        cfg: AmdConfig,
    ) -> Result<tokio::task::JoinHandle<AmdDecision>, MediaError> {
        match self {
            CallMedia::Session(s) => s.spawn_answering_machine_detection(cfg),
            #[cfg(any(test, feature = "testing"))]
            CallMedia::Fake(f) => Ok(f.answering_machine()),
        }
    }

    /// Relays audio both ways between the caller and a transfer target's session.
    pub(super) fn bridge(&self, target: &MediaSession) -> Result<Bridge, MediaError> {
        match self {
            CallMedia::Session(s) => Bridge::start(s, target),
            #[cfg(any(test, feature = "testing"))]
            CallMedia::Fake(_) => Err(MediaError::InvalidInput(
                "a scripted peer's media cannot be bridged".into(),
            )),
        }
    }

    /// Ends the media: the final counters and the recording, if one was made.
    pub(super) async fn close(self) -> Result<(SessionStats, Option<RecordingInfo>), MediaError> {
        match self {
            CallMedia::Session(s) => s.close().await,
            #[cfg(any(test, feature = "testing"))]
            CallMedia::Fake(f) => Ok(f.close()),
        }
    }
}
