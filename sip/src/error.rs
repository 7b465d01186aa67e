//! What the stack reports back to the engine when it cannot do what was asked.

use std::net::SocketAddr;

use crate::trunk::{SipTransport, TrunkError};

/// Errors the engine can get back from the stack.
#[derive(Debug, thiserror::Error)]
pub enum SipError {
    #[error(transparent)]
    Trunk(#[from] TrunkError),
    #[error("transport {0:?} is not enabled")]
    TransportDisabled(SipTransport),
    #[error("invalid header {0:?}: {1}")]
    InvalidHeader(String, &'static str),
    #[error("sip stack error: {0}")]
    Stack(String),
    /// A listen address could not be bound (in use, not local, no permission).
    #[error("cannot listen for SIP on {transport} {addr}: {reason}")]
    Listen {
        transport: &'static str,
        addr: SocketAddr,
        reason: String,
    },
    /// The configuration breaks a rule of [`crate::SipConfig::check`].
    #[error("invalid SIP configuration: {0}")]
    Config(String),
    /// A trunk's gateway name does not resolve to an address a gateway may have.
    #[error("trunk {trunk:?}: gateway {reason}")]
    Gateway { trunk: String, reason: String },
    #[error("call ended before it could be answered")]
    CallGone,
    #[error("cannot answer: {0}")]
    Answer(String),
}

impl From<rsipstack::Error> for SipError {
    fn from(e: rsipstack::Error) -> Self {
        SipError::Stack(e.to_string())
    }
}

impl From<rsipstack::sip::Error> for SipError {
    fn from(e: rsipstack::sip::Error) -> Self {
        SipError::Stack(e.to_string())
    }
}
