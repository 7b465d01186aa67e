//! Stack configuration.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sdp::SdpCodec;
use crate::tls::SipTlsConfig;
use crate::trunk::{SipTransport, TrunkConfig};

/// Timers the engine may tune. Defaults follow RFC 3261 and common carrier practice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SipTimers {
    /// RFC 3261 T1 (retransmit base). 500 ms.
    pub t1: Duration,
    /// How long a blind transfer waits for the final NOTIFY. 32 s.
    pub refer_timeout: Duration,
    /// Session-Expires we accept as minimum (RFC 4028 Min-SE). 90 s.
    pub min_session_expires: u32,
    /// How often the gateways written as host names are resolved again. 60 s.
    pub gateway_refresh: Duration,
}

impl Default for SipTimers {
    fn default() -> Self {
        SipTimers {
            t1: Duration::from_millis(500),
            refer_timeout: Duration::from_secs(32),
            min_session_expires: 90,
            gateway_refresh: Duration::from_secs(60),
        }
    }
}

/// Everything [`crate::SipStack::start`] needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SipConfig {
    /// UDP listen address (`None` disables UDP). Port 0 picks a free port.
    pub udp: Option<SocketAddr>,
    /// TCP listen address (`None` disables TCP). Port 0 picks a free port.
    pub tcp: Option<SocketAddr>,
    /// SIP over TLS: the node's certificate, the CA bundle and the TLS listener (see
    /// [`crate::tls`]); `None`: no TLS, and a trunk with `transport = "tls"` stops the start.
    #[serde(default)]
    pub tls: Option<SipTlsConfig>,
    pub trunks: Vec<TrunkConfig>,
    /// Trunk used when an outbound call names none.
    pub default_trunk: Option<String>,
    /// Codecs the media side can handle; each trunk's `codecs` are narrowed to these. An
    /// inbound offer with none of its trunk's gets 488.
    pub codecs: Vec<SdpCodec>,
    pub user_agent: String,
    pub timers: SipTimers,
    /// Receive buffer asked for the UDP socket, bytes (`SO_RCVBUF`). SIP arrives in bursts
    /// at high call rates, and a datagram that finds the buffer full is dropped by the
    /// kernel and costs a retransmission (500 ms or more). The kernel caps it at
    /// `net.core.rmem_max`; [`crate::SipStack::udp_receive_buffer`] says what was granted.
    pub udp_receive_buffer_bytes: usize,
}

/// The default [`SipConfig::udp_receive_buffer_bytes`]: 4 MiB, about 2000 datagrams (a
/// datagram of a few hundred bytes takes about 2 KiB of buffer in the kernel), or about a
/// second of arrivals at 500 calls per second (three or four datagrams a call).
pub const UDP_RECEIVE_BUFFER_BYTES: usize = 4 << 20;

impl SipConfig {
    /// What must hold before the stack starts: trunk names non-empty and unique, and
    /// `default_trunk` naming one of them (see [`crate::trunk::check_trunks`]).
    /// A trunk with `transport = "tls"` also needs `tls` with a listen address.
    pub fn check(&self) -> Result<(), String> {
        crate::trunk::check_trunks(&self.trunks, self.default_trunk.as_deref())?;
        if let Some(t) = self
            .trunks
            .iter()
            .find(|t| t.transport == SipTransport::Tls)
            && self.tls.as_ref().is_none_or(|tls| tls.listen.is_none())
        {
            return Err(format!(
                "trunks: {:?} uses transport \"tls\", which needs sip.tls with cert_file, \
                 key_file, ca_file and listen",
                t.name
            ));
        }
        Ok(())
    }
}

impl Default for SipConfig {
    fn default() -> Self {
        let addr: SocketAddr = ([127, 0, 0, 1], 5060).into();
        SipConfig {
            udp: Some(addr),
            tcp: Some(addr),
            tls: None,
            trunks: Vec::new(),
            default_trunk: None,
            codecs: vec![SdpCodec::Pcmu, SdpCodec::Pcma, SdpCodec::G722],
            user_agent: "callsmith".into(),
            timers: SipTimers::default(),
            udp_receive_buffer_bytes: UDP_RECEIVE_BUFFER_BYTES,
        }
    }
}
