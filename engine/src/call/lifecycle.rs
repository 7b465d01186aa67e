//! One lifecycle for every call, whatever its direction:
//!
//! guard → prepare → hang-up registration → media → answered leg → [`AnsweredCall`] → end
//!
//! Only how each step is done differs by direction ([`Setup`]: `outbound::Dial` places a
//! claimed row, `crate::inbound::Answer` answers an INVITE to one of our numbers). A step
//! that cannot go on writes (or answers) its own outcome and the lifecycle stops there;
//! from the answer on, both directions are the same [`AnsweredCall`].

use async_trait::async_trait;
use callsmith_domain::hangups::HangupHandle;
use callsmith_domain::live_feed::LiveFeed;
use callsmith_domain::store::CommunicationRecord;
use callsmith_media::MediaSession;
use callsmith_scenarios::interpreter::CallDirection;
use callsmith_sip::NegotiatedMedia;

use super::AnsweredCall;
use super::leg::Leg;
use super::prepare::Prepared;
use crate::runtime::Runtime;

/// How a call of one direction gets from its start to an answered leg.
#[async_trait]
pub trait Setup: Send + 'static {
    /// The direction the scenario sees.
    fn direction(&self) -> CallDirection;

    /// The call's live feed when this step opened one already (a browser call opens it
    /// before its answer goes back, so the console's subscription finds it); otherwise a
    /// test call gets one once prepared, and other calls none.
    fn live_feed(&mut self) -> Option<LiveFeed> {
        None
    }

    /// The communication and what it runs, ready to place or answer; `None` when the call
    /// does not go ahead (this step wrote or answered why).
    async fn prepare(&mut self, rt: &Runtime) -> Option<(CommunicationRecord, Prepared)>;

    /// The call's media session; `None` when there is none now (this step wrote or
    /// answered why).
    async fn media(&mut self, rt: &Runtime, comm: &CommunicationRecord) -> Option<MediaSession>;

    /// Places or answers the leg, up to its answer; `None` when it was not answered (this
    /// step wrote how it ended).
    async fn answered_leg(
        self,
        rt: &Runtime,
        comm: &CommunicationRecord,
        prep: &Prepared,
        session: &MediaSession,
    ) -> Option<(Leg, NegotiatedMedia)>;
}

/// Runs one call through the lifecycle. The live-call guard is taken at once, so
/// `max_live_calls` and the shutdown drain count the call from its first step; it and the
/// hang-up registration are held until the end is written.
///
/// The task holds pointers only: the setup phase is boxed (and freed once the call is
/// answered or over), and the answered call is one [`AnsweredCall`] box.
pub fn run<S: Setup>(rt: Runtime, setup: S) -> impl std::future::Future<Output = ()> + Send {
    let live = rt.live.enter();
    let answering = Box::pin(answer(rt, setup));
    async move {
        let _live = live;
        if let Some((call, _hangup)) = answering.await {
            call.run().await;
        }
    }
}

async fn answer<S: Setup>(rt: Runtime, mut setup: S) -> Option<(Box<AnsweredCall>, HangupHandle)> {
    let direction = setup.direction();
    let (comm, prep) = setup.prepare(&rt).await?;
    let feed = setup
        .live_feed()
        .or_else(|| comm.is_test.then(|| rt.services.live_feeds.open(&comm.sid)));
    let hangup = rt.services.hangups.register(&comm.sid);
    let prep = Prepared {
        hangup: hangup.token(),
        live: feed,
        ..prep
    };
    let session = setup.media(&rt, &comm).await?;
    let (leg, media) = setup.answered_leg(&rt, &comm, &prep, &session).await?;
    let call = AnsweredCall::new(rt, comm, prep, session, leg, media, direction);
    Some((call, hangup))
}
