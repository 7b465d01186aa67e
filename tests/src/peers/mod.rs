//! The engine's peers on loopback: SIPp callers and callees, a baresip phone, the SIP edge (Kamailio), the
//! speech node, HTTP peers and RTP endpoints.

pub mod baresip;
pub mod http;
pub mod kamailio;
pub mod rtp;
pub mod sipp;
pub mod stt;
