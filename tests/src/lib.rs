//! End-to-end test helpers: the real `callsmith` binary, real SIPp peers, the real
//! recognition node and a tiny HTTP result sink, all on loopback.
//!
//! The binary is looked up as `$CALLSMITH_BIN`, else `$CARGO_TARGET_DIR/debug/callsmith`,
//! else `<workspace>/target/debug/callsmith`; build it first with
//! `cargo build -p callsmith-cli --bin callsmith`.
//!
//! By job: [`engine`] (the process, its configuration, log and addresses), [`fixtures`]
//! (what a test provisions in it), [`peers`] (SIPp, the speech node, HTTP and RTP peers),
//! [`audio`] (speech, tones and recordings), [`ports`] (the few ports picked up front).
//! Their items are re-exported here.

pub mod audio;
pub mod engine;
pub mod fixtures;
pub mod netns;
pub mod peers;
pub mod ports;
pub mod scenario;

pub use audio::{
    caller_tone_6k, sox, tone_and_speech_wav, tone_frames, tone_wav, ulaw_greeting_with_beep,
    ulaw_speech, ulaw_tone, wav_channels, wav_rate,
};
pub use engine::{
    Engine, EngineOptions, SU_TOKEN, binary, idle_trunk, proc_usage, store_of, workspace,
};
pub use fixtures::{
    AgentSpec, Tenancy, always, answered_at_the_second_attempt, attempts_of, create_agent,
    create_scenario, create_strategy, dispatch_with_strategy, eventually, greeting_scenario,
    provision, question_scenario, reply_scenario, upload_audio, voicemail_scenario,
};
pub use peers::baresip::{Baresip, tls_certificates};
pub use peers::http::{HttpPeer, Recorded, Reply, Sink, Timing};
pub use peers::kamailio::{Kamailio, options_status};
pub use peers::rtp::{RtpPeer, RtpStep, TonePeer};
pub use peers::sipp::{Sipp, sipp_scenario};
pub use peers::stt::SttNode;
pub use ports::{free_udp_port, refused_tcp_addr, rtp_range, rtp_ranges};
