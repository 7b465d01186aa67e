//! Browser calls: the engine's [`BrowserCallRunner`]. It answers the browser's WebRTC
//! offer ([`BrowserPeer`]), stores the communication claimed by this node, and runs the
//! call through the call lifecycle ([`crate::call::lifecycle`]) with [`Browser`] as its
//! setup: from the answer on, a browser call is the same [`crate::call::AnsweredCall`] as a
//! SIP call, its leg a [`Leg::Browser`].

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use callsmith_domain::browser_calls::{BrowserCallError, BrowserCallRunner, BrowserCallStarted};
use callsmith_domain::live_feed::LiveFeed;
use callsmith_domain::reach::ice_candidate_allowed;
use callsmith_domain::store::{
    CommunicationRecord, NewCommunication,
    communications::{CallWrite, Claim, claimed_record},
};
use callsmith_media::MediaSession;
use callsmith_media::browser::{BrowserPeer, BrowserPeerConfig};
use callsmith_media::codec::RtpCodec;
use callsmith_scenarios::interpreter::CallDirection;
use callsmith_sip::{MediaDirection, NegotiatedMedia, SdpCodec};
use chrono::Utc;
use tracing::{info, warn};

use crate::call::{BrowserLeg, Leg, Prepared, fail, lifecycle, prepare};
use crate::config::MediaSection;
use crate::runtime::Runtime;

/// How long ICE and DTLS may take once the answer went back.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// The engine's browser-call runner (installed into the services at start).
pub struct Runner {
    rt: Runtime,
    /// The ICE socket's address (`media.bind_ip`) and announced address
    /// (`media.advertised_ip`).
    bind_ip: IpAddr,
    advertised_ip: Option<IpAddr>,
    /// The address whose reach browser legs keep to: `media.advertised_ip`, else
    /// `media.bind_ip` (a wildcard: private and public addresses).
    reach_ip: IpAddr,
    port_min: u16,
    port_max: u16,
}

impl Runner {
    /// Host candidates on the media bind address (announced as `advertised_ip` when set),
    /// ICE ports from `[media]`.
    pub fn new(rt: Runtime, media: &MediaSection) -> Runner {
        Runner {
            rt,
            bind_ip: media.bind_ip,
            advertised_ip: media.advertised_ip,
            reach_ip: media.advertised_ip.unwrap_or(media.bind_ip),
            port_min: media.ice_port_min,
            port_max: media.ice_port_max,
        }
    }

    /// One call's peer: remote candidates and check sources within the reach address's
    /// reach ([`ice_candidate_allowed`]), with this host's interface addresses as they
    /// are now.
    fn peer_config(&self) -> BrowserPeerConfig {
        let reach_ip = self.reach_ip;
        let host = callsmith_media::browser::host_addresses();
        BrowserPeerConfig {
            ip: self.bind_ip,
            advertised_ip: self.advertised_ip,
            port_min: self.port_min,
            port_max: self.port_max,
            allow_remote: Arc::new(move |ip| ice_candidate_allowed(reach_ip, &host, ip)),
            connect_timeout: CONNECT_TIMEOUT,
        }
    }
}

#[async_trait]
impl BrowserCallRunner for Runner {
    async fn start(
        &self,
        new: NewCommunication,
        offer: &str,
        record: bool,
    ) -> Result<BrowserCallStarted, BrowserCallError> {
        let rt = &self.rt;
        if let Some(why) = rt.capacity.refusal() {
            return Err(BrowserCallError::Unavailable(why.into()));
        }
        let (peer, sdp) = BrowserPeer::answer(&self.peer_config(), offer)
            .await
            .map_err(|e| match e {
                callsmith_media::browser::BrowserError::InvalidOffer(m) => {
                    BrowserCallError::InvalidOffer(m)
                }
                callsmith_media::browser::BrowserError::Local(m) => {
                    warn!(error = %m, "browser peer could not be set up");
                    BrowserCallError::Unavailable(format!("the media side failed: {m}"))
                }
            })?;
        let lease =
            chrono::Duration::from_std(rt.settings.lease).unwrap_or(chrono::Duration::seconds(30));
        let at = Utc::now();
        let claim = Claim {
            token: rt.settings.claim_token.clone(),
            by: rt.settings.instance.clone(),
            until: at + lease,
        };
        let comm = claimed_record(&new, &claim, at);
        let direction = if new.direction == "inbound" {
            CallDirection::Inbound
        } else {
            CallDirection::Outbound
        };
        // Stored before the answer goes back, so the console reads the row it is given.
        match rt
            .journal
            .commit(CallWrite::CreateClaimed {
                new: Box::new(new),
                claim,
                at,
            })
            .await
        {
            Ok(_) => {}
            Err(e) => {
                warn!(error = %e, "storing a browser call failed");
                return Err(BrowserCallError::Unavailable(
                    "the database did not store the call".into(),
                ));
            }
        }
        let feed = rt.services.live_feeds.open(&comm.sid);
        info!(communication = %comm.sid, "browser call started");
        tokio::spawn(lifecycle::run(
            rt.clone(),
            Browser {
                comm: Some(comm.clone()),
                peer: Some(peer),
                feed: Some(feed),
                direction,
                record,
            },
        ));
        Ok(BrowserCallStarted {
            communication: comm,
            sdp,
        })
    }
}

/// A browser call from its stored row to its connected peer.
struct Browser {
    comm: Option<CommunicationRecord>,
    peer: Option<BrowserPeer>,
    feed: Option<LiveFeed>,
    direction: CallDirection,
    /// Record the call (the browser call's `record`).
    record: bool,
}

#[async_trait]
impl lifecycle::Setup for Browser {
    fn direction(&self) -> CallDirection {
        self.direction
    }

    fn live_feed(&mut self) -> Option<LiveFeed> {
        self.feed.take()
    }

    async fn prepare(&mut self, rt: &Runtime) -> Option<(CommunicationRecord, Prepared)> {
        let comm = self.comm.take()?;
        match prepare(rt, &comm, None).await {
            Ok(p) => Some((
                comm,
                Prepared {
                    record: self.record,
                    ..p
                },
            )),
            Err(e) => {
                let why = e.to_string();
                warn!(communication = %comm.sid, error = %why, "browser call cannot run");
                fail(rt, &comm, &why).await;
                None
            }
        }
    }

    async fn media(&mut self, rt: &Runtime, comm: &CommunicationRecord) -> Option<MediaSession> {
        match rt.media.open_session(None) {
            Ok(s) => Some(s),
            Err(e) => {
                warn!(error = %e, "no media session for a browser call");
                fail(rt, comm, &format!("no media session: {e}")).await;
                None
            }
        }
    }

    async fn answered_leg(
        mut self,
        rt: &Runtime,
        comm: &CommunicationRecord,
        prep: &Prepared,
        session: &MediaSession,
    ) -> Option<(Leg, NegotiatedMedia)> {
        let mut peer = self.peer.take()?;
        peer.connect_media(session.local_addr());
        let connected = tokio::select! {
            c = peer.connected() => c,
            _ = prep.hangup.cancelled() => false,
            _ = rt.hangup_all.cancelled() => false,
        };
        if !connected {
            let refused = peer.refused_sources();
            warn!(communication = %comm.sid, ?refused, "the browser did not connect");
            fail(rt, comm, &not_connected(&refused)).await;
            return None;
        }
        rt.journal
            .queue(CallWrite::Answered {
                sid: comm.sid.clone(),
                token: rt.settings.claim_token.clone(),
                call_id: comm.sid.clone(),
                dialog: None,
                at: Utc::now(),
            })
            .await;
        // The codec the browser speaks (Opus when it offers it, PCMU otherwise) and the one
        // the media session hears from the browser leg's relay: G.722 (wideband) for Opus,
        // PCMU for PCMU.
        let session_codec = peer.codec().session_codec();
        info!(
            communication = %comm.sid,
            codec = %peer.codec().name(),
            session_codec = ?session_codec,
            "browser call connected"
        );
        let media = NegotiatedMedia {
            remote_rtp: peer.rtp_addr(),
            codec: match session_codec {
                RtpCodec::Pcmu => SdpCodec::Pcmu,
                RtpCodec::Pcma => SdpCodec::Pcma,
                RtpCodec::G722 => SdpCodec::G722,
            },
            payload_type: session_codec.payload_type(),
            telephone_event: peer.telephone_event(),
            remote_direction: MediaDirection::SendRecv,
            ptime: Some(20),
            srtp: None,
        };
        let trunk = prep.trunk.clone().unwrap_or_default();
        Some((
            Leg::Browser(BrowserLeg::new(peer, comm.sid.clone(), trunk)),
            media,
        ))
    }
}

/// Why a browser call ended before it connected, naming the sources of the browser's
/// checks the media policy refused, if any (where the browser would have to be reachable).
fn not_connected(refused: &[IpAddr]) -> String {
    let mut why = "the browser did not connect (ICE and DTLS did not complete)".to_string();
    if !refused.is_empty() {
        let list: Vec<String> = refused.iter().map(ToString::to_string).collect();
        why.push_str(&format!(
            "; its connectivity checks came from {}, outside the media address's reach \
             (media.bind_ip, media.advertised_ip)",
            list.join(", ")
        ));
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_browser_that_did_not_connect_is_told_where_its_checks_came_from() {
        assert_eq!(
            not_connected(&[]),
            "the browser did not connect (ICE and DTLS did not complete)"
        );
        let why = not_connected(&["192.168.1.7".parse().unwrap(), "10.0.0.2".parse().unwrap()]);
        assert!(
            why.contains("its connectivity checks came from 192.168.1.7, 10.0.0.2, outside"),
            "{why}"
        );
        assert!(why.contains("media.advertised_ip"), "{why}");
    }
}
