//! A small SDP model (RFC 4566 / RFC 3264 offer-answer) covering what a telephony leg
//! needs: one audio stream, PCMU/PCMA/G722 and telephone-event, and a direction attribute.
//!
//! Pure code: the engine hands a [`LocalMedia`]; this module builds offers and answers and
//! turns the peer's SDP into [`NegotiatedMedia`]. Nothing here touches a socket.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::sdes::{self, CryptoAttribute, LocalSrtp, SdesError, SrtpKeys, SrtpPolicy};

/// Audio codecs this stack negotiates. Static payload types per RFC 3551.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SdpCodec {
    /// G.711 µ-law, payload type 0.
    Pcmu,
    /// G.711 A-law, payload type 8.
    Pcma,
    /// G.722, payload type 9: 16 kHz audio on an 8000 Hz RTP clock, written `G722/8000`
    /// in `a=rtpmap` (RFC 3551 §4.5.2).
    G722,
}

impl SdpCodec {
    pub fn payload_type(self) -> u8 {
        match self {
            SdpCodec::Pcmu => 0,
            SdpCodec::Pcma => 8,
            SdpCodec::G722 => 9,
        }
    }
    pub fn encoding_name(self) -> &'static str {
        match self {
            SdpCodec::Pcmu => "PCMU",
            SdpCodec::Pcma => "PCMA",
            SdpCodec::G722 => "G722",
        }
    }
    /// The RTP clock rate, as `a=rtpmap` writes it: 8000 for each, G.722 included.
    pub fn clock_rate(self) -> u32 {
        8000
    }
    fn from_name(name: &str) -> Option<SdpCodec> {
        match name.to_ascii_uppercase().as_str() {
            "PCMU" => Some(SdpCodec::Pcmu),
            "PCMA" => Some(SdpCodec::Pcma),
            "G722" => Some(SdpCodec::G722),
            _ => None,
        }
    }
    fn from_static_pt(pt: u8) -> Option<SdpCodec> {
        match pt {
            0 => Some(SdpCodec::Pcmu),
            8 => Some(SdpCodec::Pcma),
            9 => Some(SdpCodec::G722),
            _ => None,
        }
    }
}

/// Media direction attribute (RFC 3264 §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MediaDirection {
    #[default]
    SendRecv,
    SendOnly,
    RecvOnly,
    Inactive,
}

impl MediaDirection {
    fn attr(self) -> &'static str {
        match self {
            MediaDirection::SendRecv => "sendrecv",
            MediaDirection::SendOnly => "sendonly",
            MediaDirection::RecvOnly => "recvonly",
            MediaDirection::Inactive => "inactive",
        }
    }
    /// The direction an answerer uses for an offer with this direction.
    pub fn mirrored(self) -> MediaDirection {
        match self {
            MediaDirection::SendRecv => MediaDirection::SendRecv,
            MediaDirection::SendOnly => MediaDirection::RecvOnly,
            MediaDirection::RecvOnly => MediaDirection::SendOnly,
            MediaDirection::Inactive => MediaDirection::Inactive,
        }
    }
    /// True when the peer stopped sending us media (it put us on hold).
    pub fn is_hold(self) -> bool {
        matches!(self, MediaDirection::SendOnly | MediaDirection::Inactive)
    }
}

/// What the engine's media side offers: where it receives RTP and which codecs it can do,
/// in order of preference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalMedia {
    pub addr: IpAddr,
    pub port: u16,
    pub codecs: Vec<SdpCodec>,
    /// Offer RFC 4733 telephone-event (DTMF) with this dynamic payload type.
    pub telephone_event: Option<u8>,
    /// Packetisation time in ms (20 for the usual G.711 stream).
    pub ptime: u32,
    /// SRTP (SDES) policy and send key; None: plain RTP. The stack sets it from the
    /// trunk's `srtp` policy (see [`crate::sdes`]).
    pub srtp: Option<LocalSrtp>,
}

impl LocalMedia {
    /// Every codec the media side does (PCMU, PCMA, G722) and telephone-event/101 at
    /// 20 ms; the SIP stack narrows the codecs to the call's trunk's.
    pub fn telephony(addr: IpAddr, port: u16) -> Self {
        LocalMedia {
            codecs: vec![SdpCodec::Pcmu, SdpCodec::Pcma, SdpCodec::G722],
            ..LocalMedia::g711(addr, port)
        }
    }

    /// PCMU, PCMA and telephone-event/101 at 20 ms: the usual G.711 offer.
    pub fn g711(addr: IpAddr, port: u16) -> Self {
        LocalMedia {
            addr,
            port,
            codecs: vec![SdpCodec::Pcmu, SdpCodec::Pcma],
            telephone_event: Some(101),
            ptime: 20,
            srtp: None,
        }
    }
}

/// The outcome of offer/answer the media side needs to send and receive RTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegotiatedMedia {
    /// Where to send RTP.
    pub remote_rtp: SocketAddr,
    pub codec: SdpCodec,
    pub payload_type: u8,
    /// The peer's telephone-event payload type, when both sides have it.
    pub telephone_event: Option<u8>,
    /// MediaDirection as the peer declared it.
    pub remote_direction: MediaDirection,
    pub ptime: Option<u32>,
    /// The SRTP keys agreed (SDES), None for plain RTP. Debug redacts them.
    pub srtp: Option<SrtpKeys>,
}

/// One parsed `m=` section with the attributes that matter for audio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaSection {
    pub kind: String,
    pub port: u16,
    pub proto: String,
    pub formats: Vec<u8>,
    /// (payload type, encoding name, clock rate) from `a=rtpmap`.
    pub rtpmaps: Vec<(u8, String, u32)>,
    pub connection: Option<IpAddr>,
    pub direction: Option<MediaDirection>,
    pub ptime: Option<u32>,
    /// The values of the section's `a=crypto` lines (RFC 4568), unread; see [`crate::sdes`].
    pub crypto: Vec<String>,
}

/// A parsed session description (only the parts this stack uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDescription {
    pub origin_session_id: String,
    pub origin_version: u64,
    pub connection: Option<IpAddr>,
    pub direction: Option<MediaDirection>,
    pub media: Vec<MediaSection>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SdpError {
    #[error("sdp is not valid: {0}")]
    Invalid(String),
    #[error("sdp has no audio stream")]
    NoAudio,
    /// Every audio stream has port 0 (RFC 3264 §5.1, §6: a rejected or disabled stream).
    #[error("sdp audio stream is rejected (port 0)")]
    AudioRejected,
    /// No audio stream on a transport this leg takes (`RTP/AVP`, and `RTP/SAVP` when the
    /// trunk's SRTP policy is not off); this is the first other transport.
    #[error("sdp audio transport {0} is not supported (RTP/AVP, or RTP/SAVP on a trunk with SRTP)")]
    UnsupportedTransport(String),
    /// SDES could not agree on SRTP keys (see [`SdesError`]).
    #[error("srtp: {0}")]
    Srtp(#[from] SdesError),
    #[error("no common codec")]
    NoCommonCodec,
    #[error("sdp audio stream has no connection address")]
    NoConnection,
}

fn parse_direction(attr: &str) -> Option<MediaDirection> {
    match attr {
        "sendrecv" => Some(MediaDirection::SendRecv),
        "sendonly" => Some(MediaDirection::SendOnly),
        "recvonly" => Some(MediaDirection::RecvOnly),
        "inactive" => Some(MediaDirection::Inactive),
        _ => None,
    }
}

fn parse_connection(value: &str) -> Result<IpAddr, SdpError> {
    // c=IN IP4 192.0.2.1[/ttl]
    let mut parts = value.split_whitespace();
    let (net, _addrtype, addr) = (parts.next(), parts.next(), parts.next());
    if net != Some("IN") {
        return Err(SdpError::Invalid(format!("connection line {value:?}")));
    }
    let addr = addr.ok_or_else(|| SdpError::Invalid(format!("connection line {value:?}")))?;
    let addr = addr.split('/').next().unwrap_or(addr);
    addr.parse()
        .map_err(|_| SdpError::Invalid(format!("connection address {addr:?}")))
}

impl SessionDescription {
    /// Parse an SDP body. Unknown lines are ignored; structural errors are reported.
    pub fn parse(text: &str) -> Result<SessionDescription, SdpError> {
        let mut sd = SessionDescription {
            origin_session_id: String::new(),
            origin_version: 0,
            connection: None,
            direction: None,
            media: Vec::new(),
        };
        let mut saw_version = false;
        for raw in text.lines() {
            let line = raw.trim_end_matches('\r');
            if line.is_empty() {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(SdpError::Invalid(format!("line {line:?}")));
            };
            if key.len() != 1 {
                return Err(SdpError::Invalid(format!("line {line:?}")));
            }
            match key {
                "v" => {
                    if value != "0" {
                        return Err(SdpError::Invalid(format!("version {value:?}")));
                    }
                    saw_version = true;
                }
                "o" => {
                    let fields: Vec<&str> = value.split_whitespace().collect();
                    if fields.len() >= 3 {
                        sd.origin_session_id = fields[1].to_string();
                        sd.origin_version = fields[2].parse().unwrap_or(0);
                    }
                }
                "c" => {
                    let addr = parse_connection(value)?;
                    match sd.media.last_mut() {
                        Some(m) => m.connection = Some(addr),
                        None => sd.connection = Some(addr),
                    }
                }
                "m" => {
                    let fields: Vec<&str> = value.split_whitespace().collect();
                    if fields.len() < 3 {
                        return Err(SdpError::Invalid(format!("media line {value:?}")));
                    }
                    let port_field = fields[1].split('/').next().unwrap_or("");
                    let port: u16 = port_field
                        .parse()
                        .map_err(|_| SdpError::Invalid(format!("media port {:?}", fields[1])))?;
                    let formats = fields[3..]
                        .iter()
                        .filter_map(|f| f.parse::<u8>().ok())
                        .collect();
                    sd.media.push(MediaSection {
                        kind: fields[0].to_string(),
                        port,
                        proto: fields[2].to_string(),
                        formats,
                        rtpmaps: Vec::new(),
                        connection: None,
                        direction: None,
                        ptime: None,
                        crypto: Vec::new(),
                    });
                }
                "a" => {
                    let (name, attr_value) = match value.split_once(':') {
                        Some((n, v)) => (n, Some(v)),
                        None => (value, None),
                    };
                    if let Some(dir) = parse_direction(name) {
                        match sd.media.last_mut() {
                            Some(m) => m.direction = Some(dir),
                            None => sd.direction = Some(dir),
                        }
                        continue;
                    }
                    let Some(m) = sd.media.last_mut() else {
                        continue;
                    };
                    match (name, attr_value) {
                        ("rtpmap", Some(v)) => {
                            // a=rtpmap:<pt> <name>/<rate>[/<channels>]
                            let mut it = v.split_whitespace();
                            let pt = it.next().and_then(|p| p.parse::<u8>().ok());
                            let enc = it.next();
                            if let (Some(pt), Some(enc)) = (pt, enc) {
                                let mut enc_parts = enc.split('/');
                                let name = enc_parts.next().unwrap_or("").to_string();
                                let rate =
                                    enc_parts.next().and_then(|r| r.parse().ok()).unwrap_or(0);
                                m.rtpmaps.push((pt, name, rate));
                            }
                        }
                        ("ptime", Some(v)) => m.ptime = v.trim().parse().ok(),
                        ("crypto", Some(v)) => m.crypto.push(v.to_string()),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        if !saw_version {
            return Err(SdpError::Invalid("missing v= line".into()));
        }
        Ok(sd)
    }

    /// The first audio stream, if any.
    pub fn audio(&self) -> Option<&MediaSection> {
        self.media.iter().find(|m| m.kind == "audio")
    }

    /// The audio stream this stack can use: the first `m=audio` with a port other than 0 on
    /// plain RTP (`RTP/AVP`). Without one, why not: no audio stream at all, only streams on
    /// another transport (SRTP's `RTP/SAVP`/`RTP/SAVPF`, …), or only rejected ones (port 0).
    pub fn usable_audio(&self) -> Result<&MediaSection, SdpError> {
        self.usable_audio_for(false)
    }

    /// [`Self::usable_audio`], where `srtp` also admits `RTP/SAVP` (SDES SRTP): the first
    /// stream on either profile.
    pub fn usable_audio_for(&self, srtp: bool) -> Result<&MediaSection, SdpError> {
        let audio = || self.media.iter().filter(|m| m.kind == "audio");
        if let Some(m) = audio().find(|m| m.port != 0 && (m.is_plain_rtp() || srtp && m.is_savp()))
        {
            return Ok(m);
        }
        if let Some(m) = audio().find(|m| m.port != 0) {
            return Err(SdpError::UnsupportedTransport(m.proto.clone()));
        }
        match audio().next() {
            Some(_) => Err(SdpError::AudioRejected),
            None => Err(SdpError::NoAudio),
        }
    }
}

impl MediaSection {
    /// RTP without encryption: the `RTP/AVP` profile (RFC 3551), compared without regard to
    /// case.
    fn is_plain_rtp(&self) -> bool {
        self.proto.eq_ignore_ascii_case("RTP/AVP")
    }
    /// The SRTP profile SDES keys go with (RFC 3711 `RTP/SAVP`).
    fn is_savp(&self) -> bool {
        self.proto.eq_ignore_ascii_case("RTP/SAVP")
    }
    /// The codec a payload type means in this section: rtpmap first, static types second.
    fn codec_of(&self, pt: u8) -> Option<SdpCodec> {
        match self.rtpmaps.iter().find(|(p, _, _)| *p == pt) {
            Some((_, name, rate)) => {
                SdpCodec::from_name(name).filter(|c| *rate == 0 || *rate == c.clock_rate())
            }
            None => SdpCodec::from_static_pt(pt),
        }
    }
    fn telephone_event_pt(&self) -> Option<u8> {
        self.rtpmaps
            .iter()
            .find(|(pt, name, rate)| {
                name.eq_ignore_ascii_case("telephone-event")
                    && *rate == 8000
                    && self.formats.contains(pt)
            })
            .map(|(pt, _, _)| *pt)
    }
}

/// Render an SDP body for `local` with the given codecs and direction.
fn render(
    local: &LocalMedia,
    session_id: u64,
    version: u64,
    codecs: &[(u8, SdpCodec)],
    telephone_event: Option<u8>,
    direction: MediaDirection,
    srtp: &SrtpLines,
) -> String {
    let ip_kind = if local.addr.is_ipv6() { "IP6" } else { "IP4" };
    let mut pts: Vec<String> = codecs.iter().map(|(pt, _)| pt.to_string()).collect();
    if let Some(te) = telephone_event {
        pts.push(te.to_string());
    }
    let mut s = String::new();
    let _ = write!(
        s,
        "v=0\r\no=callsmith {session_id} {version} IN {ip_kind} {addr}\r\ns=callsmith\r\nc=IN {ip_kind} {addr}\r\nt=0 0\r\nm=audio {port} {proto} {pts}\r\n",
        proto = srtp.proto,
        addr = local.addr,
        port = local.port,
        pts = pts.join(" ")
    );
    for (pt, codec) in codecs {
        let _ = write!(
            s,
            "a=rtpmap:{pt} {}/{}\r\n",
            codec.encoding_name(),
            codec.clock_rate()
        );
    }
    if let Some(te) = telephone_event {
        let _ = write!(
            s,
            "a=rtpmap:{te} telephone-event/8000\r\na=fmtp:{te} 0-16\r\n"
        );
    }
    let _ = write!(s, "a=ptime:{}\r\na={}\r\n", local.ptime, direction.attr());
    for c in &srtp.crypto {
        let _ = write!(s, "a=crypto:{}\r\n", c.render());
    }
    s
}

/// The profile of the `m=audio` line and the `a=crypto` lines a body carries.
struct SrtpLines {
    proto: &'static str,
    crypto: Vec<CryptoAttribute>,
}

impl SrtpLines {
    const PLAIN: SrtpLines = SrtpLines {
        proto: "RTP/AVP",
        crypto: Vec::new(),
    };

    /// An offer's: `RTP/SAVP` when SRTP is required, else `RTP/AVP` (with crypto when
    /// optional, so a peer without SRTP can still answer plain RTP).
    fn offer(local: Option<&LocalSrtp>) -> SrtpLines {
        match local {
            None => SrtpLines::PLAIN,
            Some(l) => SrtpLines {
                proto: if l.policy == SrtpPolicy::Required {
                    "RTP/SAVP"
                } else {
                    "RTP/AVP"
                },
                crypto: l.offered(),
            },
        }
    }
}

/// Build an SDP offer from the engine's local media description.
pub fn build_offer(
    local: &LocalMedia,
    session_id: u64,
    version: u64,
    direction: MediaDirection,
) -> String {
    let codecs: Vec<(u8, SdpCodec)> = local
        .codecs
        .iter()
        .map(|c| (c.payload_type(), *c))
        .collect();
    render(
        local,
        session_id,
        version,
        &codecs,
        local.telephone_event,
        direction,
        &SrtpLines::offer(local.srtp.as_ref()),
    )
}

/// Answer a remote offer: on its [usable audio stream](SessionDescription::usable_audio),
/// pick the first codec in the offerer's order that we support
/// (RFC 3264 §6.1 lets the answerer follow the offerer's preference), mirror the direction,
/// and return the answer body with the negotiated parameters.
pub fn answer_offer(
    offer: &SessionDescription,
    local: &LocalMedia,
    session_id: u64,
    version: u64,
) -> Result<(String, NegotiatedMedia), SdpError> {
    answer_reoffer(offer, local, None, session_id, version)
}

/// [`answer_offer`] for an offer inside a dialog (a re-INVITE or UPDATE) whose media
/// uses the SRTP keys `current` (None: plain RTP): the SRTP answer follows
/// [`sdes::answer_crypto`]'s rules for a re-offer (same keys kept, new keys from the peer
/// answered with a fresh key of ours, no downgrade to plain RTP). The answer's
/// `srtp.local` is the key this side sends with from now on.
pub fn answer_reoffer(
    offer: &SessionDescription,
    local: &LocalMedia,
    current: Option<&SrtpKeys>,
    session_id: u64,
    version: u64,
) -> Result<(String, NegotiatedMedia), SdpError> {
    let audio = offer.usable_audio_for(local.srtp.is_some())?;
    let crypto = sdes::answer_crypto(&audio.crypto, audio.is_savp(), local.srtp.as_ref(), current)?;
    let (pt, codec) = audio
        .formats
        .iter()
        .filter_map(|pt| audio.codec_of(*pt).map(|c| (*pt, c)))
        .find(|(_, c)| local.codecs.contains(c))
        .ok_or(SdpError::NoCommonCodec)?;
    let remote_te = audio
        .telephone_event_pt()
        .filter(|_| local.telephone_event.is_some());
    let remote_direction = audio.direction.or(offer.direction).unwrap_or_default();
    let ip = audio
        .connection
        .or(offer.connection)
        .ok_or(SdpError::NoConnection)?;
    // A 0.0.0.0 connection (RFC 2543 hold) means the peer sends nothing.
    let remote_direction = if ip.is_unspecified() && remote_direction == MediaDirection::SendRecv {
        MediaDirection::SendOnly
    } else {
        remote_direction
    };
    let body = render(
        local,
        session_id,
        version,
        &[(pt, codec)],
        remote_te,
        remote_direction.mirrored(),
        &SrtpLines {
            proto: if audio.is_savp() {
                "RTP/SAVP"
            } else {
                "RTP/AVP"
            },
            crypto: crypto.iter().map(|(ours, _)| *ours).collect(),
        },
    );
    Ok((
        body,
        NegotiatedMedia {
            remote_rtp: SocketAddr::new(ip, audio.port),
            codec,
            payload_type: pt,
            telephone_event: remote_te,
            remote_direction,
            ptime: audio.ptime,
            srtp: crypto.map(|(_, keys)| keys),
        },
    ))
}

/// Read the negotiated parameters from the peer's answer (or early-media SDP) to our offer.
/// An answer without a [usable audio stream](SessionDescription::usable_audio) is an error:
/// the peer rejected our audio (port 0) or answered on a transport we did not offer.
pub fn negotiated_from_answer(
    answer: &SessionDescription,
    local: &LocalMedia,
) -> Result<NegotiatedMedia, SdpError> {
    let audio = answer.usable_audio_for(local.srtp.is_some())?;
    let srtp = sdes::keys_from_answer(&audio.crypto, local.srtp.as_ref())?;
    if audio.is_savp() && srtp.is_none() {
        return Err(SdesError::SavpWithoutCrypto.into());
    }
    let (pt, codec) = audio
        .formats
        .iter()
        .filter_map(|pt| audio.codec_of(*pt).map(|c| (*pt, c)))
        .find(|(_, c)| local.codecs.contains(c))
        .ok_or(SdpError::NoCommonCodec)?;
    let ip = audio
        .connection
        .or(answer.connection)
        .ok_or(SdpError::NoConnection)?;
    Ok(NegotiatedMedia {
        remote_rtp: SocketAddr::new(ip, audio.port),
        codec,
        payload_type: pt,
        telephone_event: audio
            .telephone_event_pt()
            .filter(|_| local.telephone_event.is_some()),
        remote_direction: audio.direction.or(answer.direction).unwrap_or_default(),
        ptime: audio.ptime,
        srtp,
    })
}

/// A placeholder address for tests and defaults.
pub const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

#[cfg(test)]
mod tests {
    use super::*;

    const SIPP_OFFER: &str = "v=0\r\no=user1 53655765 2353687637 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 6000 RTP/AVP 8 0 101\r\na=rtpmap:8 PCMA/8000\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\n";

    fn local() -> LocalMedia {
        LocalMedia::g711(LOOPBACK, 40000)
    }

    #[test]
    fn offer_lists_pcmu_pcma_and_telephone_event() {
        let offer = build_offer(&local(), 1, 1, MediaDirection::SendRecv);
        assert!(offer.contains("m=audio 40000 RTP/AVP 0 8 101\r\n"));
        assert!(offer.contains("a=rtpmap:101 telephone-event/8000\r\n"));
        assert!(offer.contains("c=IN IP4 127.0.0.1\r\n"));
        let parsed = SessionDescription::parse(&offer).unwrap();
        assert_eq!(parsed.audio().unwrap().formats, vec![0, 8, 101]);
    }

    #[test]
    fn answer_follows_offerer_preference() {
        let offer = SessionDescription::parse(SIPP_OFFER).unwrap();
        let (body, neg) = answer_offer(&offer, &local(), 7, 7).unwrap();
        assert_eq!(neg.codec, SdpCodec::Pcma);
        assert_eq!(neg.payload_type, 8);
        assert_eq!(neg.telephone_event, Some(101));
        assert_eq!(neg.remote_rtp, "127.0.0.1:6000".parse().unwrap());
        assert!(body.contains("m=audio 40000 RTP/AVP 8 101\r\n"));
        assert!(body.contains("a=sendrecv"));
    }

    #[test]
    fn no_common_codec_is_an_error() {
        let offer = SessionDescription::parse(
            "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 6000 RTP/AVP 18 9\r\na=rtpmap:18 G729/8000\r\na=rtpmap:9 G722/8000\r\n",
        )
        .unwrap();
        assert_eq!(
            answer_offer(&offer, &local(), 1, 1).unwrap_err(),
            SdpError::NoCommonCodec
        );
    }

    #[test]
    fn hold_offer_is_mirrored() {
        let text = SIPP_OFFER.to_string() + "a=sendonly\r\n";
        let offer = SessionDescription::parse(&text).unwrap();
        let (body, neg) = answer_offer(&offer, &local(), 1, 2).unwrap();
        assert_eq!(neg.remote_direction, MediaDirection::SendOnly);
        assert!(neg.remote_direction.is_hold());
        assert!(body.contains("a=recvonly"));
        let inactive =
            SessionDescription::parse(&(SIPP_OFFER.to_string() + "a=inactive\r\n")).unwrap();
        let (body, _) = answer_offer(&inactive, &local(), 1, 3).unwrap();
        assert!(body.contains("a=inactive"));
        let old_hold = SessionDescription::parse(
            &SIPP_OFFER.replace("c=IN IP4 127.0.0.1", "c=IN IP4 0.0.0.0"),
        )
        .unwrap();
        let (body, neg) = answer_offer(&old_hold, &local(), 1, 4).unwrap();
        assert!(neg.remote_direction.is_hold());
        assert!(body.contains("a=recvonly"));
    }

    #[test]
    fn dynamic_payload_type_uses_rtpmap() {
        let offer = SessionDescription::parse(
            "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 7000 RTP/AVP 96\r\nc=IN IP4 127.0.0.2\r\na=rtpmap:96 PCMU/8000\r\n",
        )
        .unwrap();
        let (_, neg) = answer_offer(&offer, &local(), 1, 1).unwrap();
        assert_eq!((neg.codec, neg.payload_type), (SdpCodec::Pcmu, 96));
        assert_eq!(neg.remote_rtp, "127.0.0.2:7000".parse().unwrap());
    }

    #[test]
    fn answer_to_our_offer_is_read() {
        let answer = SessionDescription::parse(
            "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 6002 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\na=ptime:20\r\n",
        )
        .unwrap();
        let neg = negotiated_from_answer(&answer, &local()).unwrap();
        assert_eq!(neg.codec, SdpCodec::Pcmu);
        assert_eq!(neg.ptime, Some(20));
        assert_eq!(neg.telephone_event, None);
    }

    fn with_audio_lines(m_lines: &str) -> SessionDescription {
        SessionDescription::parse(&format!(
            "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n{m_lines}"
        ))
        .unwrap()
    }

    #[test]
    fn an_offer_whose_only_audio_is_rejected_is_not_answered() {
        let offer = with_audio_lines("m=audio 0 RTP/AVP 0 8\r\na=rtpmap:0 PCMU/8000\r\n");
        assert_eq!(
            answer_offer(&offer, &local(), 1, 1).unwrap_err(),
            SdpError::AudioRejected
        );
        // Next to a video stream, too.
        let offer = with_audio_lines("m=video 5000 RTP/AVP 96\r\nm=audio 0 RTP/AVP 0\r\n");
        assert_eq!(
            answer_offer(&offer, &local(), 1, 1).unwrap_err(),
            SdpError::AudioRejected
        );
    }

    #[test]
    fn an_srtp_only_offer_is_not_answered() {
        for proto in ["RTP/SAVP", "RTP/SAVPF", "UDP/TLS/RTP/SAVPF"] {
            let offer = with_audio_lines(&format!(
                "m=audio 6000 {proto} 0\r\na=rtpmap:0 PCMU/8000\r\n\
                 a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz\r\n"
            ));
            assert_eq!(
                answer_offer(&offer, &local(), 1, 1).unwrap_err(),
                SdpError::UnsupportedTransport(proto.into()),
                "{proto}"
            );
        }
        // A rejected plain stream does not make an SRTP one usable.
        let offer = with_audio_lines("m=audio 0 RTP/AVP 0\r\nm=audio 6000 RTP/SAVP 0\r\n");
        assert_eq!(
            answer_offer(&offer, &local(), 1, 1).unwrap_err(),
            SdpError::UnsupportedTransport("RTP/SAVP".into())
        );
    }

    #[test]
    fn plain_rtp_audio_is_chosen_beside_a_rejected_or_srtp_stream() {
        let offer = with_audio_lines(
            "m=audio 0 RTP/AVP 0\r\nm=audio 6000 RTP/SAVP 0\r\nm=audio 6002 rtp/avp 8\r\n",
        );
        let (body, neg) = answer_offer(&offer, &local(), 1, 1).unwrap();
        assert_eq!(neg.remote_rtp, "127.0.0.1:6002".parse().unwrap());
        assert_eq!(neg.codec, SdpCodec::Pcma);
        assert!(body.contains("m=audio 40000 RTP/AVP 8\r\n"), "{body}");
    }

    #[test]
    fn an_answer_rejecting_our_audio_or_on_srtp_is_unusable() {
        let rejected = with_audio_lines("m=audio 0 RTP/AVP 0\r\n");
        assert_eq!(
            negotiated_from_answer(&rejected, &local()).unwrap_err(),
            SdpError::AudioRejected
        );
        let srtp = with_audio_lines("m=audio 6002 RTP/SAVP 0\r\n");
        assert_eq!(
            negotiated_from_answer(&srtp, &local()).unwrap_err(),
            SdpError::UnsupportedTransport("RTP/SAVP".into())
        );
        let no_audio = with_audio_lines("m=video 6002 RTP/AVP 96\r\n");
        assert_eq!(
            negotiated_from_answer(&no_audio, &local()).unwrap_err(),
            SdpError::NoAudio
        );
    }

    fn srtp_local(policy: SrtpPolicy) -> LocalMedia {
        LocalMedia {
            srtp: LocalSrtp::for_policy(policy),
            ..local()
        }
    }

    const KEY: &str = "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz";

    #[test]
    fn srtp_offers_carry_both_suites_and_the_profile_the_policy_asks() {
        let required = srtp_local(SrtpPolicy::Required);
        let offer = build_offer(&required, 1, 1, MediaDirection::SendRecv);
        assert!(
            offer.contains("m=audio 40000 RTP/SAVP 0 8 101\r\n"),
            "{offer}"
        );
        assert!(
            offer.contains("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:"),
            "{offer}"
        );
        assert!(
            offer.contains("a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:"),
            "{offer}"
        );
        let optional = build_offer(
            &srtp_local(SrtpPolicy::Optional),
            1,
            1,
            MediaDirection::SendRecv,
        );
        assert!(
            optional.contains("m=audio 40000 RTP/AVP 0 8 101\r\n"),
            "{optional}"
        );
        assert!(optional.contains("a=crypto:1 "), "{optional}");
        let plain = build_offer(&local(), 1, 1, MediaDirection::SendRecv);
        assert!(!plain.contains("a=crypto"), "{plain}");
    }

    #[test]
    fn an_savp_offer_is_answered_with_srtp_and_our_own_key() {
        let offer = with_audio_lines(&format!(
            "m=audio 6000 RTP/SAVP 0\r\na=rtpmap:0 PCMU/8000\r\n\
             a=crypto:1 AES_CM_128_HMAC_SHA1_32 inline:{KEY}|2^31\r\n"
        ));
        for policy in [SrtpPolicy::Optional, SrtpPolicy::Required] {
            let me = srtp_local(policy);
            let (body, neg) = answer_offer(&offer, &me, 1, 1).unwrap();
            assert!(body.contains("m=audio 40000 RTP/SAVP 0\r\n"), "{body}");
            let keys = neg.srtp.expect("srtp agreed");
            assert_eq!(keys.suite, crate::sdes::CryptoSuite::AesCm128HmacSha1_32);
            assert_eq!(keys.local, me.srtp.unwrap().key);
            let ours = CryptoAttribute {
                tag: 1,
                suite: keys.suite,
                key: keys.local,
            };
            assert!(
                body.contains(&format!("a=crypto:{}\r\n", ours.render())),
                "{body}"
            );
            assert!(!body.contains(KEY), "the peer's key is not echoed: {body}");
            // The answer reads back as the keys seen from the other side.
            let answer = SessionDescription::parse(&body).unwrap();
            assert_eq!(answer.audio().unwrap().crypto.len(), 1);
        }
        // An SRTP offer on a trunk with SRTP off stays refused.
        assert_eq!(
            answer_offer(&offer, &local(), 1, 1).unwrap_err(),
            SdpError::UnsupportedTransport("RTP/SAVP".into())
        );
    }

    #[test]
    fn a_required_trunk_refuses_plain_rtp_and_an_optional_one_answers_it() {
        let plain = SessionDescription::parse(SIPP_OFFER).unwrap();
        assert_eq!(
            answer_offer(&plain, &srtp_local(SrtpPolicy::Required), 1, 1).unwrap_err(),
            SdpError::Srtp(SdesError::Required)
        );
        let (body, neg) = answer_offer(&plain, &srtp_local(SrtpPolicy::Optional), 1, 1).unwrap();
        assert_eq!(neg.srtp, None);
        assert!(
            body.contains("RTP/AVP") && !body.contains("a=crypto"),
            "{body}"
        );
        // Best-effort SRTP: crypto beside RTP/AVP is taken, and answered on RTP/AVP.
        let best_effort = SessionDescription::parse(&format!(
            "{SIPP_OFFER}a=crypto:3 AES_CM_128_HMAC_SHA1_80 inline:{KEY}\r\n"
        ))
        .unwrap();
        let (body, neg) =
            answer_offer(&best_effort, &srtp_local(SrtpPolicy::Required), 1, 1).unwrap();
        assert!(neg.srtp.is_some());
        assert!(
            body.contains("m=audio 40000 RTP/AVP 8 101\r\na=rtpmap"),
            "{body}"
        );
        assert!(
            body.contains("a=crypto:3 AES_CM_128_HMAC_SHA1_80 inline:"),
            "{body}"
        );
        // SRTP off: crypto beside RTP/AVP is ignored.
        let (_, neg) = answer_offer(&best_effort, &local(), 1, 1).unwrap();
        assert_eq!(neg.srtp, None);
    }

    #[test]
    fn malformed_crypto_in_an_offer_is_a_refusal_not_a_panic() {
        let huge = "A".repeat(100_000);
        for (crypto, why) in [
            (
                format!("1 AES_CM_128_HMAC_SHA1_80 inline:%%%%{}", &KEY[4..]),
                "base64",
            ),
            (format!("1 NULL_CIPHER inline:{KEY}"), "unknown suite"),
            (
                format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}{KEY}"),
                "longer",
            ),
            (format!("1 AES_CM_128_HMAC_SHA1_80 inline:{huge}"), "longer"),
            ("".to_string(), "expected"),
            ("1 AES_CM_128_HMAC_SHA1_80".to_string(), "expected"),
            (
                format!("1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}|2^20|1:4"),
                "MKI",
            ),
        ] {
            for proto in ["RTP/SAVP", "RTP/AVP"] {
                let text = format!(
                    "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
                     m=audio 6000 {proto} 0\r\na=crypto:{crypto}\r\n"
                );
                let offer = SessionDescription::parse(&text).unwrap();
                let e = answer_offer(&offer, &srtp_local(SrtpPolicy::Optional), 1, 1).unwrap_err();
                assert!(
                    matches!(e, SdpError::Srtp(SdesError::Unusable(_))),
                    "{proto} {crypto:.80}: {e}"
                );
                assert!(e.to_string().contains(why), "{e}");
            }
        }
        let savp_bare = with_audio_lines("m=audio 6000 RTP/SAVP 0\r\n");
        assert_eq!(
            answer_offer(&savp_bare, &srtp_local(SrtpPolicy::Optional), 1, 1).unwrap_err(),
            SdpError::Srtp(SdesError::SavpWithoutCrypto)
        );
    }

    #[test]
    fn an_answer_to_our_srtp_offer_gives_both_keys() {
        let me = srtp_local(SrtpPolicy::Required);
        let answer = with_audio_lines(&format!(
            "m=audio 6002 RTP/SAVP 0\r\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{KEY}\r\n"
        ));
        let neg = negotiated_from_answer(&answer, &me).unwrap();
        let keys = neg.srtp.unwrap();
        assert_eq!(keys.local, me.srtp.unwrap().key);
        assert_ne!(keys.remote, keys.local);
        let plain = with_audio_lines("m=audio 6002 RTP/AVP 0\r\n");
        assert_eq!(
            negotiated_from_answer(&plain, &me).unwrap_err(),
            SdpError::Srtp(SdesError::Required)
        );
        let optional = srtp_local(SrtpPolicy::Optional);
        assert_eq!(
            negotiated_from_answer(&plain, &optional).unwrap().srtp,
            None
        );
        let savp_bare = with_audio_lines("m=audio 6002 RTP/SAVP 0\r\n");
        assert_eq!(
            negotiated_from_answer(&savp_bare, &optional).unwrap_err(),
            SdpError::Srtp(SdesError::SavpWithoutCrypto)
        );
    }

    #[test]
    fn garbage_is_rejected_not_panicking() {
        for text in [
            "",
            "hello",
            "v=1\r\n",
            "v=0\r\nm=audio x RTP/AVP 0\r\n",
            "v=0\r\nc=IN IP4 nope\r\n",
            "v=0\r\nm=\r\n",
        ] {
            assert!(SessionDescription::parse(text).is_err(), "{text:?}");
        }
        let no_audio = SessionDescription::parse("v=0\r\nm=video 5000 RTP/AVP 96\r\n").unwrap();
        assert_eq!(
            answer_offer(&no_audio, &local(), 1, 1).unwrap_err(),
            SdpError::NoAudio
        );
    }
}

#[cfg(test)]
mod g722_tests {
    use super::*;

    const BARESIP_OFFER: &str = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 6000 RTP/AVP 9 0 8 101\r\na=rtpmap:9 G722/8000\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\na=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\na=ptime:20\r\na=sendrecv\r\n";

    #[test]
    fn g722_offered_first_is_answered_at_its_8000_clock_with_telephone_event() {
        let offer = SessionDescription::parse(BARESIP_OFFER).unwrap();
        let local = LocalMedia::telephony(LOOPBACK, 40000);
        let (body, neg) = answer_offer(&offer, &local, 1, 1).unwrap();
        assert_eq!((neg.codec, neg.payload_type), (SdpCodec::G722, 9));
        assert_eq!(neg.telephone_event, Some(101));
        assert!(body.contains("m=audio 40000 RTP/AVP 9 101\r\n"), "{body}");
        assert!(body.contains("a=rtpmap:9 G722/8000\r\n"), "{body}");
        assert!(
            body.contains("a=rtpmap:101 telephone-event/8000\r\n"),
            "{body}"
        );
    }

    #[test]
    fn g722_is_refused_where_not_listed_and_pcmu_only_offers_get_pcmu() {
        let offer = SessionDescription::parse(BARESIP_OFFER).unwrap();
        let (_, neg) = answer_offer(&offer, &LocalMedia::g711(LOOPBACK, 40000), 1, 1).unwrap();
        assert_eq!(neg.codec, SdpCodec::Pcmu);
        let pcmu_only = BARESIP_OFFER
            .replace("RTP/AVP 9 0 8 101", "RTP/AVP 0 101")
            .replace("a=rtpmap:9 G722/8000\r\n", "")
            .replace("a=rtpmap:8 PCMA/8000\r\n", "");
        let offer = SessionDescription::parse(&pcmu_only).unwrap();
        let (body, neg) =
            answer_offer(&offer, &LocalMedia::telephony(LOOPBACK, 40000), 1, 1).unwrap();
        assert_eq!(neg.codec, SdpCodec::Pcmu);
        assert!(body.contains("RTP/AVP 0 101\r\n"), "{body}");
    }

    #[test]
    fn g722_at_16000_in_rtpmap_is_not_g722() {
        // RFC 3551 fixes G.722's RTP clock at 8000; a map claiming 16000 is some other
        // stream, and static type 9 without a map is G.722.
        let wrong = BARESIP_OFFER.replace("G722/8000", "G722/16000");
        let offer = SessionDescription::parse(&wrong).unwrap();
        let (_, neg) = answer_offer(&offer, &LocalMedia::telephony(LOOPBACK, 40000), 1, 1).unwrap();
        assert_eq!(neg.codec, SdpCodec::Pcmu);
        let bare = BARESIP_OFFER.replace("a=rtpmap:9 G722/8000\r\n", "");
        let offer = SessionDescription::parse(&bare).unwrap();
        let (_, neg) = answer_offer(&offer, &LocalMedia::telephony(LOOPBACK, 40000), 1, 1).unwrap();
        assert_eq!(neg.codec, SdpCodec::G722);
    }

    #[test]
    fn an_offer_lists_the_codecs_in_the_given_order() {
        let local = LocalMedia {
            codecs: vec![SdpCodec::G722, SdpCodec::Pcmu],
            ..LocalMedia::telephony(LOOPBACK, 40000)
        };
        let offer = build_offer(&local, 1, 1, MediaDirection::SendRecv);
        assert!(
            offer.contains("m=audio 40000 RTP/AVP 9 0 101\r\n"),
            "{offer}"
        );
        assert!(offer.contains("a=rtpmap:9 G722/8000\r\n"), "{offer}");
        let answer = SessionDescription::parse(
            "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 6002 RTP/AVP 9\r\na=rtpmap:9 G722/8000\r\n",
        )
        .unwrap();
        assert_eq!(
            negotiated_from_answer(&answer, &local).unwrap().codec,
            SdpCodec::G722
        );
    }

    #[test]
    fn ipv6_connections_are_read_and_written() {
        let offer =
            SessionDescription::parse(&BARESIP_OFFER.replace("IN IP4 127.0.0.1", "IN IP6 ::1"))
                .unwrap();
        let local = LocalMedia::telephony("::1".parse().unwrap(), 40000);
        let (body, neg) = answer_offer(&offer, &local, 1, 1).unwrap();
        assert_eq!(neg.remote_rtp, "[::1]:6000".parse().unwrap());
        assert!(body.contains("c=IN IP6 ::1\r\n"), "{body}");
        assert!(body.contains("o=callsmith 1 1 IN IP6 ::1\r\n"), "{body}");
    }
}
