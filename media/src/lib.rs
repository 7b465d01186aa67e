//! callsmith-media: moves call audio with telephony-grade timing. Knows
//! nothing of SIP or scenarios.
//!
//! Layers, bottom up:
//! - sans-IO cores: [`g711`], [`g722`] (with [`codec`], a stream's codec state, and
//!   [`rate`], the 8 or 16 kHz audio rate the codec gives a session), [`rtp`], [`rtcp`],
//!   [`dtmf`], [`jitter`], [`vad`], [`amd`];
//! - audio sources: [`prompt`] (decode, resample, cache, growing sources), [`tts`]
//!   (spoken sentence by sentence, split by [`sentences`]);
//! - the pacing workers ([`worker`], private) behind [`MediaEngine`] / [`MediaSession`];
//! - speech recognition clients and the batch helper: [`stt`];
//! - [`recording`];
//! - [`browser`]: WebRTC peers relayed into a session (browser legs).
//!
//! Typical use (one engine per process, one session per call):
//! ```no_run
//! # async fn f() -> Result<(), callsmith_media::MediaError> {
//! use callsmith_media::{MediaConfig, MediaEngine, g711::Codec};
//! let engine = MediaEngine::new(MediaConfig::default())?;
//! let session = engine.open_session(None)?;
//! session.set_remote("127.0.0.1:40000".parse().unwrap(), Codec::Pcmu, Some(101))?;
//! let prompt = std::sync::Arc::new(callsmith_media::prompt::Prompt::from_pcm(vec![0; 8000]));
//! let outcome = session.play(prompt, true)?.wait().await;
//! # let _ = outcome; Ok(()) }
//! ```

pub mod amd;
pub mod browser;
pub mod clock;
pub mod codec;
pub mod dtmf;
mod engine;
mod events;
pub mod g711;
pub mod g722;
pub mod jitter;
pub mod prompt;
pub mod rate;
pub mod recording;
pub mod rtcp;
pub mod rtp;
pub mod sentences;
mod session;
pub mod srtp;
pub mod stt;
pub mod tone;
pub mod tts;
mod tts_sentences;
pub mod vad;
mod worker;

pub use engine::{MediaConfig, MediaEngine, PacingSnapshot};
pub use events::{
    AudioFrame, AudioReceiver, BargeIn, MediaEvent, MediaEvents, PlayEnd, Playout, SessionStats,
};
pub use rate::AudioRate;
pub use session::{Bridge, MediaSession, PlayHandle};

/// Errors of the session facade.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("invalid input: {0}")]
    InvalidInput(String),
    #[error("no free RTP port pair in the configured range")]
    NoPorts,
    #[error("I/O: {0}")]
    Io(String),
    #[error("the media engine stopped")]
    EngineStopped,
    #[error("recording: {0}")]
    Recording(String),
}
