//! The engine's peers on loopback: SIPp callers and callees, a baresip phone, the SIP edge (Kamailio), the
//! speech node, HTTP peers, RTP endpoints and an S3-compatible object store (moto).

pub mod baresip;
pub mod http;
pub mod kamailio;
pub mod rtp;
pub mod s3;
pub mod sipp;
pub mod stt;
