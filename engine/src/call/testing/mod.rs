//! An answered call in process: the real [`LivePort`](super::LivePort) and scenario
//! interpreter against a scripted caller ([`peer`]: a fake leg and media session), over a
//! runtime with an in-memory database, objects in a temporary folder and a synthesizer
//! that makes silence (60 ms a character) — no socket, no process. The model is
//! quinn-proto's in-process test pairs: both ends in one task tree, time simulated.
//!
//! Run it under paused time (`#[tokio::test(start_paused = true)]`): the runtime is built
//! on the real clock (the database's pool times its connections), the call runs on the
//! paused one (prompts, silences, the caller's script and the call's limits all take
//! simulated time, so a call of a minute runs in milliseconds and its times are exact),
//! and the end (history, the final write) is stored on the real clock again.
//!
//! ```ignore
//! let done = CallTest::new(snapshot).caller(Script::new().at(1500, Act::Keys("42#".into()))).run().await;
//! assert_eq!(done.history["goals"], json!(["code_ok"]));
//! ```

mod peer;
mod rig;

pub use peer::{Act, FakeLeg, FakeMedia, Heard, Peer, Played, Script};
pub use rig::{CallResult, CallTest};
