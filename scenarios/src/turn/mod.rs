//! The call's turn logic as sans-IO machines: a listen turn ([`ListenTurn`]) and a prompt's
//! playout ([`PlayTurn`]).
//!
//! A machine is fed what happened (`handle_event`, with the time it happened where time
//! matters) and says what to do through `poll_action`; a machine that waits on time gives
//! its next deadline through `poll_timeout`, and `handle_timeout(now)` tells it the time
//! has come. It never reads a clock, sleeps or touches a socket: the engine drives it from
//! the call's I/O (recognition stream, media events, the SIP leg, the playout), and tests
//! drive it on simulated time.
//!
//! The timing rules of a turn live here and only here: [`DEFAULT_NO_INPUT_SECS`],
//! [`DEFAULT_INTER_DIGIT`], [`INTERIM_EXTENSION`], [`MAX_UTTERANCE`], [`FINAL_GRACE`] and
//! [`MAX_WAIT`].

use std::time::Duration;

mod listen;
mod play;

pub use listen::{ListenAction, ListenEvent, ListenTurn};
pub use play::{PlayAction, PlayEvent, PlayTurn, PlayoutEnd};

/// No-input timeout when a question sets none (seconds).
pub const DEFAULT_NO_INPUT_SECS: f64 = 5.0;
/// Time allowed between two keys of an entry when the question sets none.
pub const DEFAULT_INTER_DIGIT: Duration = Duration::from_secs(3);
/// A non-empty interim transcript keeps the turn open at least this long after it.
pub const INTERIM_EXTENSION: Duration = Duration::from_secs(3);
/// Longest a caller may speak in one turn before the turn is cut.
pub const MAX_UTTERANCE: Duration = Duration::from_secs(20);
/// Time allowed for the final transcript after the audio ended.
pub const FINAL_GRACE: Duration = Duration::from_secs(8);
/// The longest wait a turn takes (no-input, between keys), whatever it was given:
/// validation refuses more, and a value that slipped past cannot overflow a deadline.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);
