//! The answered party of a call: a SIP leg, a browser over WebRTC, or (in tests) a scripted
//! peer in process ([`super::testing::FakeLeg`]). The rest of the call (the port, prompts,
//! listening, the end) sees one [`Leg`] and the same [`LegEvent`]s.

use std::sync::atomic::{AtomicBool, Ordering};

use callsmith_media::browser::BrowserPeer;
use callsmith_sip::{CallStatus, Party, ReferOutcome};

use callsmith_sip::{CallLeg, EndInfo, LegEvent};

/// The party a call's scenario talks to.
pub enum Leg {
    Sip(CallLeg),
    Browser(BrowserLeg),
    /// A scripted peer's leg, in process.
    #[cfg(any(test, feature = "testing"))]
    Fake(super::testing::FakeLeg),
}

/// A browser's microphone and speaker as a call leg ([`BrowserPeer`]).
pub struct BrowserLeg {
    peer: BrowserPeer,
    /// The communication's sid: a browser leg has no SIP Call-ID.
    call_id: String,
    /// Where a bridged transfer's second leg leaves (the default SIP trunk).
    trunk: String,
    /// Set when the engine hung up, so the end is told as the engine's.
    hung_up: AtomicBool,
    /// `Ended` was delivered.
    ended: bool,
}

impl BrowserLeg {
    pub fn new(peer: BrowserPeer, call_id: String, trunk: String) -> Self {
        BrowserLeg {
            peer,
            call_id,
            trunk,
            hung_up: AtomicBool::new(false),
            ended: false,
        }
    }
}

impl Leg {
    /// The SIP Call-ID, or the communication's sid for a browser.
    pub fn call_id(&self) -> &str {
        match self {
            Leg::Sip(l) => l.call_id(),
            Leg::Browser(b) => &b.call_id,
            #[cfg(any(test, feature = "testing"))]
            Leg::Fake(f) => f.call_id(),
        }
    }

    /// The trunk the call runs on (a bridged transfer's second leg leaves through it).
    pub fn trunk(&self) -> &str {
        match self {
            Leg::Sip(l) => l.trunk(),
            Leg::Browser(b) => &b.trunk,
            #[cfg(any(test, feature = "testing"))]
            Leg::Fake(f) => f.trunk(),
        }
    }

    /// The next event; `None` after `Ended` was delivered. A browser leg has one event: its
    /// end, when the browser goes away or the engine hangs up.
    pub async fn next_event(&mut self) -> Option<LegEvent> {
        match self {
            Leg::Sip(l) => l.next_event().await,
            Leg::Browser(b) => {
                if b.ended {
                    return None;
                }
                b.peer.gone().await;
                b.ended = true;
                let local = b.hung_up.load(Ordering::Relaxed);
                Some(LegEvent::Ended(EndInfo {
                    call_status: CallStatus::Answered,
                    sip_code: None,
                    reason: if local {
                        "hung up".into()
                    } else {
                        "the browser left".into()
                    },
                    by: if local { Party::Local } else { Party::Remote },
                }))
            }
            #[cfg(any(test, feature = "testing"))]
            Leg::Fake(f) => f.next_event().await,
        }
    }

    /// Hangs up (a BYE, or closing the browser's peer connection).
    pub fn hangup(&self) {
        match self {
            Leg::Sip(l) => l.hangup(),
            Leg::Browser(b) => {
                b.hung_up.store(true, Ordering::Relaxed);
                let peer = b.peer.closer();
                tokio::spawn(async move { peer.close().await });
            }
            #[cfg(any(test, feature = "testing"))]
            Leg::Fake(f) => f.hangup(),
        }
    }

    /// A blind transfer (REFER). A browser cannot carry one out: it is a failure the
    /// scenario's transfer brick takes its failure output on (a bridged transfer works).
    pub async fn refer(&self, target: &str, headers: &[(String, String)]) -> ReferOutcome {
        match self {
            Leg::Sip(l) => l.refer(target, headers).await,
            Leg::Browser(_) => ReferOutcome::Failed {
                sip_code: None,
                reason: "a browser leg cannot be transferred blind (REFER); use a bridged transfer"
                    .into(),
            },
            #[cfg(any(test, feature = "testing"))]
            Leg::Fake(f) => f.refer(target, headers).await,
        }
    }
}
