//! Browser legs: a WebRTC peer (ICE host candidates, DTLS-SRTP, Opus or PCMU) whose audio
//! is relayed to and from a [`crate::MediaSession`] as plain RTP over loopback.
//!
//! The peer answers Opus (48 kHz, mono voice, in-band FEC) when the offer has it, as every
//! browser's does, and PCMU/8000 otherwise; the answer names that one audio codec (and
//! telephone-event at its clock rate), so the browser sends what the relay expects. With
//! Opus the relay transcodes ([`opus`]) to and from G.722, the wideband codec the session
//! speaks on SIP legs too: the browser's Opus is decoded at 16 kHz and coded as G.722 for
//! the session (telephone-event moved from the 48 kHz clock to 8 kHz), and the session's
//! G.722 is decoded at 16 kHz and encoded to Opus for the browser, each packet in fixed
//! buffers. With PCMU the relay passes the packets as they are.
//!
//! A browser's microphone and speaker become a call leg like a SIP peer's RTP: the session
//! sends its RTP to the relay's address and gets the browser's RTP from it, so pacing,
//! prompts, recognition, recording and DTMF (telephone-event, when the browser's offer has
//! it) work unchanged. The relay costs one loopback datagram per packet each way, which a
//! test call can afford.
//!
//! The peer answers a complete offer (ICE gathering finished; no trickle) with a complete
//! answer. Which remote addresses it may talk to is the caller's policy
//! ([`BrowserPeerConfig::allow_remote`]), held in two places: the offer's candidates are
//! judged on the description as the WebRTC stack parses it, and only the allowed ones are
//! handed to the peer connection ([`policy`]); and the ICE agent's socket drops datagrams
//! from, and refuses sends to, refused addresses (`sockets`), so an address the agent learns
//! another way (a peer-reflexive one) is never answered or checked either.
//!
//! A browser need not show its addresses: one that offers only mDNS `.local` names (which
//! are never resolved) checks the engine's host candidates from its real address, and the
//! agent pairs with that source as a peer-reflexive candidate when the policy allows it
//! ([`policy::filter_candidates`] states which offers are answered). The engine's host
//! candidates are its interface addresses the policy allows (never an unspecified one), or
//! the configured announced address ([`BrowserPeerConfig::advertised_ip`]); the answer's
//! `c=` lines and `m=` ports name its first candidate, not `0.0.0.0`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::watch;
use tracing::{debug, warn};
use webrtc::api::APIBuilder;
use webrtc::api::media_engine::{
    MIME_TYPE_OPUS, MIME_TYPE_PCMU, MIME_TYPE_TELEPHONE_EVENT, MediaEngine,
};
use webrtc::api::setting_engine::SettingEngine;
use webrtc::ice::mdns::MulticastDnsMode;
use webrtc::ice::network_type::NetworkType;
use webrtc::ice::udp_network::UDPNetwork;
use webrtc::ice_transport::ice_candidate_type::RTCIceCandidateType;
use webrtc::peer_connection::RTCPeerConnection;
use webrtc::peer_connection::configuration::RTCConfiguration;
use webrtc::peer_connection::peer_connection_state::RTCPeerConnectionState;
use webrtc::peer_connection::sdp::session_description::RTCSessionDescription;
use webrtc::rtp_transceiver::rtp_codec::{
    RTCRtpCodecCapability, RTCRtpCodecParameters, RTPCodecType,
};
use webrtc::track::track_local::TrackLocalWriter;
use webrtc::track::track_local::track_local_static_rtp::TrackLocalStaticRTP;
use webrtc::util::marshal::{Marshal, MarshalSize};

use crate::codec::RtpCodec;

mod opus;
pub mod policy;
mod sockets;
pub mod testing;

pub use policy::{RemotePolicy, filter_candidates};

/// PCMU's static payload type.
const PCMU_PT: u8 = 0;
/// The payload type the engine registers Opus under (an answer uses the offer's).
const OPUS_PT: u8 = 111;
/// The payload type the engine registers telephone-event under (an answer uses the
/// offer's).
const TELEPHONE_EVENT_PT: u8 = 101;

/// The audio codec a browser leg speaks with the browser (the media session hears
/// [`BrowserCodec::session_codec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowserCodec {
    /// Opus/48000/2 (mono content, in-band FEC), transcoded by the relay.
    Opus,
    /// PCMU/8000, relayed as it is.
    Pcmu,
}

impl BrowserCodec {
    /// Its name in logs: `opus` or `pcmu`.
    pub fn name(self) -> &'static str {
        match self {
            BrowserCodec::Opus => "opus",
            BrowserCodec::Pcmu => "pcmu",
        }
    }

    /// The codec the relay speaks with the media session: G.722 for Opus, so the call's
    /// audio stays wideband (16 kHz) between the browser and the session, and PCMU as it
    /// is for PCMU.
    pub fn session_codec(self) -> RtpCodec {
        match self {
            BrowserCodec::Opus => RtpCodec::G722,
            BrowserCodec::Pcmu => RtpCodec::Pcmu,
        }
    }

    /// The codec the engine answers an offer with: Opus when the offer has
    /// `opus/48000/2`, PCMU otherwise.
    fn for_offer(offer: &str) -> BrowserCodec {
        if audio_rtpmaps(offer).any(|c| c.eq_ignore_ascii_case("opus/48000/2")) {
            BrowserCodec::Opus
        } else {
            BrowserCodec::Pcmu
        }
    }

    fn capability(self) -> RTCRtpCodecCapability {
        match self {
            BrowserCodec::Opus => RTCRtpCodecCapability {
                mime_type: MIME_TYPE_OPUS.to_owned(),
                clock_rate: 48000,
                // WebRTC's rtpmap says 2 channels (RFC 7587); the content is mono.
                channels: 2,
                sdp_fmtp_line: "minptime=10;useinbandfec=1".to_owned(),
                rtcp_feedback: vec![],
            },
            BrowserCodec::Pcmu => RTCRtpCodecCapability {
                mime_type: MIME_TYPE_PCMU.to_owned(),
                clock_rate: 8000,
                channels: 1,
                sdp_fmtp_line: String::new(),
                rtcp_feedback: vec![],
            },
        }
    }

    fn clock_rate(self) -> u32 {
        match self {
            BrowserCodec::Opus => 48000,
            BrowserCodec::Pcmu => 8000,
        }
    }

    /// The rtpmap (lower case) an answer names it with.
    fn rtpmaps(self) -> &'static [&'static str] {
        match self {
            BrowserCodec::Opus => &["opus/48000/2"],
            BrowserCodec::Pcmu => &["pcmu/8000", "pcmu/8000/1"],
        }
    }
}

/// Why a browser peer could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// The offer is not usable (not SDP, no audio, neither Opus nor PCMU, no allowed
    /// candidate).
    #[error("{0}")]
    InvalidOffer(String),
    /// The local side failed (sockets, the WebRTC stack).
    #[error("{0}")]
    Local(String),
}

/// Where a browser peer listens and whom it may talk to.
#[derive(Clone)]
pub struct BrowserPeerConfig {
    /// The address its ICE socket is bound to and its host candidates are gathered on (an
    /// unspecified address: one socket on every interface, a candidate per interface
    /// address, all on the socket's port).
    pub ip: IpAddr,
    /// The address its host candidates announce instead of its interface addresses (NAT
    /// 1:1: the socket stays bound on `ip`); None: the interface addresses themselves.
    /// The same family as `ip`.
    pub advertised_ip: Option<IpAddr>,
    /// The UDP port range of its ICE socket (one port per peer).
    pub port_min: u16,
    pub port_max: u16,
    /// Whether a remote address may be paired with, sent to or heard from.
    pub allow_remote: Arc<RemotePolicy>,
    /// How long ICE and DTLS may take before the peer counts as failed.
    pub connect_timeout: Duration,
}

impl std::fmt::Debug for BrowserPeerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserPeerConfig")
            .field("ip", &self.ip)
            .field("advertised_ip", &self.advertised_ip)
            .field("port_min", &self.port_min)
            .field("port_max", &self.port_max)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// Where a browser peer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// ICE and DTLS are under way.
    Connecting,
    /// Media can flow.
    Connected,
    /// The browser went away (closed, failed or lost); final.
    Gone,
}

/// One browser peer and its RTP relay. Dropping it closes the peer connection.
pub struct BrowserPeer {
    pc: Arc<RTCPeerConnection>,
    state: watch::Receiver<PeerState>,
    relay_addr: SocketAddr,
    /// Where the browser's RTP goes (the media session's address), once known.
    media_to: Arc<OnceLock<SocketAddr>>,
    telephone_event: Option<u8>,
    codec: BrowserCodec,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    connect_timeout: Duration,
    /// Sources whose datagrams the ICE socket dropped (the policy refused them).
    refused: Arc<sockets::Refused>,
}

impl BrowserPeer {
    /// Answers a browser's complete SDP offer: returns the peer and the complete answer
    /// (its host candidates gathered).
    pub async fn answer(
        config: &BrowserPeerConfig,
        offer: &str,
    ) -> Result<(BrowserPeer, String), BrowserError> {
        let offer = filter_candidates(offer, &*config.allow_remote)?;
        let codec = BrowserCodec::for_offer(&offer);
        let refused = Arc::new(sockets::Refused::default());
        let api = build_api(config, refused.clone(), codec)?;
        let pc = Arc::new(
            api.new_peer_connection(RTCConfiguration::default())
                .await
                .map_err(local)?,
        );
        let track = Arc::new(TrackLocalStaticRTP::new(
            codec.capability(),
            "audio".to_owned(),
            "callsmith".to_owned(),
        ));
        pc.add_track(track.clone()).await.map_err(local)?;

        let (state_tx, state) = watch::channel(PeerState::Connecting);
        let state_tx = Arc::new(state_tx);
        {
            let state_tx = state_tx.clone();
            pc.on_peer_connection_state_change(Box::new(move |s| {
                debug!(state = %s, "browser peer state");
                let next = match s {
                    RTCPeerConnectionState::Connected => Some(PeerState::Connected),
                    RTCPeerConnectionState::Disconnected
                    | RTCPeerConnectionState::Failed
                    | RTCPeerConnectionState::Closed => Some(PeerState::Gone),
                    _ => None,
                };
                if let Some(next) = next {
                    state_tx.send_if_modified(|cur| {
                        // Gone is final.
                        let changed = *cur != PeerState::Gone && *cur != next;
                        if changed {
                            *cur = next;
                        }
                        changed
                    });
                }
                Box::pin(async {})
            }));
        }

        let relay = Arc::new(
            UdpSocket::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
                .await
                .map_err(|e| BrowserError::Local(format!("relay socket: {e}")))?,
        );
        let relay_addr = relay
            .local_addr()
            .map_err(|e| BrowserError::Local(e.to_string()))?;
        let media_to: Arc<OnceLock<SocketAddr>> = Arc::new(OnceLock::new());

        pc.set_remote_description(
            RTCSessionDescription::offer(offer)
                .map_err(|e| BrowserError::InvalidOffer(format!("not an SDP offer: {e}")))?,
        )
        .await
        .map_err(|e| BrowserError::InvalidOffer(format!("offer refused: {e}")))?;
        let answer = pc
            .create_answer(None)
            .await
            .map_err(|e| BrowserError::InvalidOffer(format!("no answer to this offer: {e}")))?;
        let mut gathered = pc.gathering_complete_promise().await;
        pc.set_local_description(answer).await.map_err(local)?;
        let _ = tokio::time::timeout(Duration::from_secs(5), gathered.recv()).await;
        let answer = pc
            .local_description()
            .await
            .ok_or_else(|| BrowserError::Local("no local description".into()))?
            .sdp;
        let Some(audio_pt) = answer_payload_type(&answer, codec.rtpmaps()) else {
            let _ = pc.close().await;
            return Err(BrowserError::InvalidOffer(
                "the offer has neither Opus/48000/2 nor PCMU/8000 audio (the browser leg \
                 speaks Opus or G.711 µ-law)"
                    .into(),
            ));
        };
        let event_rtpmap = format!("telephone-event/{}", codec.clock_rate());
        let telephone_event = answer_payload_type(&answer, &[event_rtpmap.as_str()]);
        let answer = with_default_candidates(&answer);
        let to_browser = match codec {
            BrowserCodec::Opus => Some(opus::ToBrowser::new().map_err(opus_error)?),
            BrowserCodec::Pcmu => None,
        };

        // The browser's RTP, decrypted, to the media session (Opus transcoded to PCMU,
        // telephone-event moved to the 8 kHz clock).
        {
            let relay = relay.clone();
            let media_to = media_to.clone();
            pc.on_track(Box::new(move |remote, _, _| {
                let relay = relay.clone();
                let media_to = media_to.clone();
                tokio::spawn(async move {
                    let mut transcoder = match codec {
                        BrowserCodec::Opus => match opus::ToSession::new() {
                            Ok(t) => Some(t),
                            Err(e) => {
                                warn!(error = %e, "browser leg: no Opus decoder");
                                return;
                            }
                        },
                        BrowserCodec::Pcmu => None,
                    };
                    let mut buf = vec![0u8; 1500];
                    let mut out = Box::new([0u8; opus::TO_SESSION_BUF]);
                    while let Ok((pkt, _)) = remote.read(&mut buf).await {
                        let Some(to) = media_to.get().copied() else {
                            continue;
                        };
                        let pt = pkt.header.payload_type;
                        if let Some(t) = transcoder.as_mut().filter(|_| pt == audio_pt) {
                            let header = opus::Header {
                                marker: pkt.header.marker,
                                seq: pkt.header.sequence_number,
                                ts: pkt.header.timestamp,
                                ssrc: pkt.header.ssrc,
                            };
                            let written = t.relay(header, &pkt.payload, &mut out);
                            for (at, len) in written.into_iter().flatten() {
                                let _ = relay.send_to(&out[at..at + len], to).await;
                            }
                            continue;
                        }
                        let n = pkt.marshal_size();
                        if n > out.len() || pkt.marshal_to(&mut out[..n]).is_err() {
                            continue;
                        }
                        if let Some(t) = transcoder.as_mut()
                            && Some(pt) == telephone_event
                            && !t.telephone_event(&mut out[..n])
                        {
                            continue;
                        }
                        let _ = relay.send_to(&out[..n], to).await;
                    }
                });
                Box::pin(async {})
            }));
        }

        // The media session's RTP, to the browser (audio only: telephone-event from the
        // engine is not relayed, the track writes one codec; the track sets the payload
        // type and SSRC it negotiated).
        let to_browser = {
            let session_pt = codec.session_codec().payload_type();
            let relay = relay.clone();
            let media_to = media_to.clone();
            let mut to_browser = to_browser;
            tokio::spawn(async move {
                let mut buf = vec![0u8; 1500];
                let mut out = Box::new([0u8; opus::TO_BROWSER_BUF]);
                while let Ok((n, from)) = relay.recv_from(&mut buf).await {
                    if media_to.get() != Some(&from) || n < 12 || (buf[1] & 0x7f) != session_pt {
                        continue;
                    }
                    match to_browser.as_mut() {
                        Some(t) => {
                            if let Some(n) = t.relay(&buf[..n], &mut out) {
                                let _ = track.write(&out[..n]).await;
                            }
                        }
                        None => {
                            let _ = track.write(&buf[..n]).await;
                        }
                    }
                }
            })
        };

        Ok((
            BrowserPeer {
                pc,
                state,
                relay_addr,
                media_to,
                telephone_event,
                codec,
                tasks: vec![to_browser],
                connect_timeout: config.connect_timeout,
                refused,
            },
            answer,
        ))
    }

    /// Where the media session sends its RTP (the relay), as a SIP answer's address would be.
    pub fn rtp_addr(&self) -> SocketAddr {
        self.relay_addr
    }

    /// The telephone-event payload type both sides have, if any: the one the relay's
    /// events reach the session with (on the 8 kHz clock whatever the browser's codec).
    pub fn telephone_event(&self) -> Option<u8> {
        self.telephone_event
    }

    /// The audio codec negotiated with the browser.
    pub fn codec(&self) -> BrowserCodec {
        self.codec
    }

    /// Points the browser's RTP at the media session (its RTP address; an unspecified IP is
    /// reached on loopback). Only the first call counts.
    pub fn connect_media(&self, session: SocketAddr) {
        let to = if session.ip().is_unspecified() {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), session.port())
        } else {
            session
        };
        let _ = self.media_to.set(to);
    }

    /// The peer's state now.
    pub fn state(&self) -> PeerState {
        *self.state.borrow()
    }

    /// Waits until media can flow: true when connected, false when the browser went away or
    /// the connect timeout passed first.
    pub async fn connected(&mut self) -> bool {
        let wait = self.state.wait_for(|s| *s != PeerState::Connecting);
        matches!(
            tokio::time::timeout(self.connect_timeout, wait).await,
            Ok(Ok(s)) if *s == PeerState::Connected
        )
    }

    /// The sources (at most four, first seen first) whose datagrams the ICE socket dropped
    /// because the policy refused them: where a browser that cannot connect checked from.
    pub fn refused_sources(&self) -> Vec<IpAddr> {
        self.refused.list()
    }

    /// Waits until the browser is gone (returns at once if it is).
    pub async fn gone(&mut self) {
        let _ = self.state.wait_for(|s| *s == PeerState::Gone).await;
    }

    /// A handle that closes the peer connection from another task.
    pub fn closer(&self) -> PeerCloser {
        PeerCloser(self.pc.clone())
    }
}

/// Closes a [`BrowserPeer`]'s connection (the browser sees the DTLS close and the peer
/// becomes [`PeerState::Gone`]).
#[derive(Clone)]
pub struct PeerCloser(Arc<RTCPeerConnection>);

impl PeerCloser {
    pub async fn close(&self) {
        let _ = self.0.close().await;
    }
}

impl Drop for BrowserPeer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        let pc = self.pc.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = pc.close().await;
            });
        }
    }
}

fn local(e: webrtc::Error) -> BrowserError {
    BrowserError::Local(e.to_string())
}

fn opus_error(e: audiopus::Error) -> BrowserError {
    BrowserError::Local(format!("Opus: {e}"))
}

/// This host's interface addresses (every interface, up or not): the addresses a loopback
/// engine's browser legs may also reach, and those a wildcard media address is announced
/// from. Empty when the interfaces cannot be read.
pub fn host_addresses() -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = webrtc::util::ifaces::ifaces()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| i.addr.map(|a| a.ip()))
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

/// The answer with each media section's `c=` address and `m=` port set to its first
/// candidate (the default candidate of a complete description), and the origin's address
/// to the first of them: the stack writes the placeholder `0.0.0.0` there, and the engine
/// never announces the unspecified address. Unchanged when it has no candidate.
fn with_default_candidates(answer: &str) -> String {
    use webrtc::ice::candidate::Candidate;
    use webrtc::ice::candidate::candidate_base::unmarshal_candidate;
    use webrtc::sdp::description::common::{Address, ConnectionInformation};

    let Ok(mut desc) = policy::parse_sdp(answer) else {
        return answer.to_owned();
    };
    let mut first = None;
    for m in &mut desc.media_descriptions {
        let default = m
            .attributes
            .iter()
            .filter(|a| a.is_ice_candidate())
            .filter_map(|a| unmarshal_candidate(a.value.as_deref()?).ok())
            .find_map(|c| Some((c.address().parse::<IpAddr>().ok()?, c.port())));
        let Some((ip, port)) = default else {
            continue;
        };
        first.get_or_insert(ip);
        m.media_name.port.value = port as isize;
        m.connection_information = Some(ConnectionInformation {
            network_type: "IN".into(),
            address_type: if ip.is_ipv4() { "IP4" } else { "IP6" }.into(),
            address: Some(Address {
                address: ip.to_string(),
                ttl: None,
                range: None,
            }),
        });
    }
    let Some(ip) = first else {
        return answer.to_owned();
    };
    desc.origin.address_type = if ip.is_ipv4() { "IP4" } else { "IP6" }.into();
    desc.origin.unicast_address = ip.to_string();
    desc.marshal()
}

/// The peer's API, with `codec` (the one audio codec it answers) and telephone-event at
/// that codec's clock rate.
fn build_api(
    config: &BrowserPeerConfig,
    refused: Arc<sockets::Refused>,
    codec: BrowserCodec,
) -> Result<webrtc::api::API, BrowserError> {
    let mut media = MediaEngine::default();
    media
        .register_codec(
            RTCRtpCodecParameters {
                capability: codec.capability(),
                payload_type: match codec {
                    BrowserCodec::Opus => OPUS_PT,
                    BrowserCodec::Pcmu => PCMU_PT,
                },
                ..Default::default()
            },
            RTPCodecType::Audio,
        )
        .map_err(local)?;
    media
        .register_codec(
            RTCRtpCodecParameters {
                capability: RTCRtpCodecCapability {
                    mime_type: MIME_TYPE_TELEPHONE_EVENT.to_owned(),
                    clock_rate: codec.clock_rate(),
                    channels: 1,
                    sdp_fmtp_line: "0-16".to_owned(),
                    rtcp_feedback: vec![],
                },
                payload_type: TELEPHONE_EVENT_PT,
                ..Default::default()
            },
            RTPCodecType::Audio,
        )
        .map_err(local)?;
    let mut settings = SettingEngine::default();
    let ip = config.ip;
    // Host candidates: the bound address, or every interface address of a wildcard bind
    // that the policy lets a browser reach (a wildcard engine offers no loopback or
    // link-local candidate), never an unspecified one.
    let allow = config.allow_remote.clone();
    settings.set_include_loopback_candidate(ip.is_loopback() || ip.is_unspecified());
    if let Some(announced) = config.advertised_ip {
        if announced.is_unspecified() || announced.is_ipv4() != ip.is_ipv4() {
            return Err(BrowserError::Local(format!(
                "the announced ICE address {announced} is not a concrete address of the \
                 family of {ip}"
            )));
        }
        // Every local address is announced as this one: one candidate, from the first
        // address gathered (two equal candidates would make the agent close the shared
        // socket).
        let one = OnceLock::new();
        settings.set_ip_filter(Box::new(move |a| {
            (ip.is_unspecified() || a == ip) && !a.is_unspecified() && *one.get_or_init(|| a) == a
        }));
        settings.set_nat_1to1_ips(vec![announced.to_string()], RTCIceCandidateType::Host);
    } else {
        settings.set_ip_filter(Box::new(move |a| {
            a == ip || (ip.is_unspecified() && !a.is_unspecified() && allow(a))
        }));
    }
    settings.set_ice_multicast_dns_mode(MulticastDnsMode::Disabled);
    settings.set_network_types(if ip.is_ipv6() {
        vec![NetworkType::Udp6]
    } else {
        vec![NetworkType::Udp4]
    });
    if config.port_max < config.port_min {
        return Err(BrowserError::Local(format!(
            "ICE port range: {} is below {}",
            config.port_max, config.port_min
        )));
    }
    // The agent's socket is ours: it drops datagrams from, and refuses sends to, addresses
    // the policy refuses, however the agent learnt them (peer-reflexive ones included).
    settings.set_udp_network(UDPNetwork::Muxed(sockets::PolicedUdp::new(
        ip,
        config.port_min,
        config.port_max,
        config.allow_remote.clone(),
        refused,
    )));
    Ok(APIBuilder::new()
        .with_media_engine(media)
        .with_setting_engine(settings)
        .build())
}

fn audio_rtpmaps(sdp: &str) -> impl Iterator<Item = &str> {
    sdp.lines()
        .filter_map(|l| l.strip_prefix("a=rtpmap:"))
        .filter_map(|r| r.split_once(' ').map(|(_, codec)| codec.trim()))
}

/// The payload type an answer with an active audio section maps to one of `rtpmaps`
/// (lower case, e.g. `opus/48000/2`).
fn answer_payload_type(sdp: &str, rtpmaps: &[&str]) -> Option<u8> {
    if !sdp
        .lines()
        .any(|l| l.starts_with("m=audio ") && !l.starts_with("m=audio 0 "))
    {
        return None;
    }
    sdp.lines()
        .filter_map(|l| l.strip_prefix("a=rtpmap:"))
        .filter_map(|r| r.split_once(' '))
        .find(|(_, codec)| {
            let codec = codec.trim().to_ascii_lowercase();
            rtpmaps.contains(&codec.as_str())
        })
        .and_then(|(pt, _)| pt.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_checks() {
        let pcmu = BrowserCodec::Pcmu.rtpmaps();
        let opus = BrowserCodec::Opus.rtpmaps();
        let a = "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=rtpmap:0 PCMU/8000\r\n";
        assert_eq!(answer_payload_type(a, pcmu), Some(0));
        assert_eq!(answer_payload_type(a, opus), None);
        let a = "m=audio 0 UDP/TLS/RTP/SAVPF 0\r\na=rtpmap:0 PCMU/8000\r\n";
        assert_eq!(answer_payload_type(a, pcmu), None, "a refused section");
        let a = "m=audio 9 UDP/TLS/RTP/SAVPF 111 110\r\na=rtpmap:111 opus/48000/2\r\n\
                 a=rtpmap:110 telephone-event/48000\r\n";
        assert_eq!(answer_payload_type(a, opus), Some(111));
        assert_eq!(
            answer_payload_type(a, &["telephone-event/48000"]),
            Some(110)
        );
        assert_eq!(answer_payload_type(a, &["telephone-event/8000"]), None);
        let a = "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=rtpmap:0 PCMU/8000/1\r\n";
        assert_eq!(answer_payload_type(a, pcmu), Some(0));
    }

    #[test]
    fn opus_is_answered_when_offered() {
        let chrome = "m=audio 9 UDP/TLS/RTP/SAVPF 111 0 126\r\na=rtpmap:111 opus/48000/2\r\n\
                      a=rtpmap:0 PCMU/8000\r\na=rtpmap:126 telephone-event/8000\r\n";
        assert_eq!(BrowserCodec::for_offer(chrome), BrowserCodec::Opus);
        let g711 = "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=rtpmap:0 PCMU/8000\r\n";
        assert_eq!(BrowserCodec::for_offer(g711), BrowserCodec::Pcmu);
    }
}
