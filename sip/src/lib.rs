//! callsmith-sip: SIP signalling for the callsmith engine.
//!
//! The engine starts a [`SipStack`], places outbound calls through named trunks with
//! [`SipStack::place_call`] and takes inbound calls from [`SipStack::take_incoming`].
//! Every call is a [`CallLeg`] whose [`LegEvent`]s carry negotiated media parameters
//! ([`NegotiatedMedia`]) and the end of the call with its [`CallStatus`].
//! No media bytes and no scenario logic live here.
//!
//! Pure, unit-tested cores: [`sdp`] (offer/answer), [`status`] (call_status mapping),
//! [`trunk`] (selection, number format, inbound sources), [`digest`] (MD5/SHA-256),
//! [`wire`] (request validation, 400/505 decisions), and each leg's dialog logic, a sans-IO state
//! machine driven by a thin tokio task (`leg::machine`, `leg::driver`).
//!
//! Logging: whole SIP messages are DEBUG events of [`logging::MESSAGE_TARGET`]; INFO call
//! lines show phone numbers through [`redact_number`].

pub mod config;
pub mod digest;
mod error;
mod headers;
mod interop;
mod leg;
pub mod logging;
mod outbound;
mod relay;
pub mod retransmit;
pub mod sdes;
pub mod sdp;
mod stack;
mod states;
pub mod status;
mod takeover;
pub mod tls;
pub mod trunk;
pub mod wire;

pub use config::{SipConfig, SipTimers, UDP_RECEIVE_BUFFER_BYTES};
pub use leg::{CallLeg, EndInfo, LegController, LegDirection, LegEvent, Party, ReferOutcome};
pub use logging::redact_number;
pub use retransmit::RetransmissionCounts;
pub use sdes::{CryptoSuite, SrtpKeys, SrtpPolicy};
pub use sdp::{LocalMedia, MediaDirection, NegotiatedMedia, SdpCodec};
pub use stack::{
    Admission, CallRouter, IncomingCall, IncomingCalls, OutboundCall, SipError, SipStack,
};
pub use status::CallStatus;
pub use takeover::{CSEQ_GAP, DialogRecord};
pub use tls::SipTlsConfig;
pub use trunk::{
    DigestCredentials, EDGE_TRUNK_HEADER, Gateway, GatewayUri, NumberFormat, SipTransport,
    TrunkConfig,
};
