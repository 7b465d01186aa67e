//! One call, outbound or inbound: resolve what it runs, place or answer it through the SIP
//! stack, open its media session, run the scenario interpreter over [`LivePort`] (the
//! engine's `CallPort`: prompts, listening with STT + DTMF, webhooks, SMS, transfer,
//! classifiers), then save the history (and recording) and write how it ended.
//!
//! Every call goes through one lifecycle ([`lifecycle`]: guard → prepare → media →
//! answered leg → [`AnsweredCall`] → end); only how a direction reaches its answered leg
//! differs (`outbound::Dial` here, `crate::inbound::Answer` for calls to our numbers).
//!
//! One job per file: `lifecycle`, [`prepare`] (what a call runs: scenario version, agent,
//! from-number, trunk, time zone), `error` (retryable or permanent setup failures),
//! `outbound` (placing a call up to its answer), `answered` (running an answered call and
//! storing its end), `port` (the `CallPort` over the call's three parts: `context` what
//! it runs with, `io` its leg, media and what ends it, `record` what its history keeps),
//! `play` and `listen` (prompts and listen turns), `speak` (a language model's reply
//! spoken as it streams), `sms`, `transfer`, and `history` (the saved history's types).
//!
//! The turn logic that waits on several things at once is a sans-IO machine fed events
//! and the time, with its own tests on simulated time, beside the scenario crate's
//! `ListenTurn` and `PlayTurn`: `reply` (a streamed reply), `ring` (a placed leg up to its
//! answer: an outbound call's, a transfer target's) and `bridge` (a bridged transfer).

use callsmith_domain::store::{
    AgentRecord, CommunicationRecord,
    communications::{CallFinish, CallWrite},
};
use chrono::Utc;
use tracing::warn;

use crate::runtime::Runtime;

mod answered;
#[cfg(test)]
mod behaviour;
mod bridge;
mod context;
mod error;
mod history;
mod io;
mod leg;
pub mod lifecycle;
mod listen;
mod live_feed;
mod media;
mod outbound;
mod play;
mod port;
mod prepare;
mod record;
mod reply;
mod ring;
mod sms;
mod speak;
mod strategy;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod transfer;

pub use answered::AnsweredCall;
pub use error::CallError;
pub use io::ForcedEnd;
pub use leg::{BrowserLeg, Leg};
pub use media::CallMedia;
pub use outbound::run_outbound;
pub use port::LivePort;
pub use prepare::{Prepared, prepare};

fn media_codec(c: callsmith_sip::SdpCodec) -> callsmith_media::codec::RtpCodec {
    match c {
        callsmith_sip::SdpCodec::Pcmu => callsmith_media::codec::RtpCodec::Pcmu,
        callsmith_sip::SdpCodec::Pcma => callsmith_media::codec::RtpCodec::Pcma,
        callsmith_sip::SdpCodec::G722 => callsmith_media::codec::RtpCodec::G722,
    }
}

/// The media's SRTP parameters for keys a SIP leg agreed (None: plain RTP). The leg's
/// `local` key protects what the session sends; the peer's `remote` key unprotects what
/// it receives.
fn media_srtp(m: &callsmith_sip::NegotiatedMedia) -> Option<callsmith_media::srtp::SrtpParams> {
    m.srtp.as_ref().map(srtp_params)
}

/// The media's SRTP parameters for keys a SIP leg agreed.
fn srtp_params(keys: &callsmith_sip::SrtpKeys) -> callsmith_media::srtp::SrtpParams {
    use callsmith_media::srtp::{SrtpParams, SrtpProfile};
    SrtpParams {
        profile: match keys.suite {
            callsmith_sip::CryptoSuite::AesCm128HmacSha1_80 => SrtpProfile::Aes128CmHmacSha1_80,
            callsmith_sip::CryptoSuite::AesCm128HmacSha1_32 => SrtpProfile::Aes128CmHmacSha1_32,
        },
        send_key: keys.local.0,
        recv_key: keys.remote.0,
    }
}

/// Holds an outbound call's media for its SRTP keys when the trunk it leaves through
/// (`trunk`, else the default) does SRTP: nothing is sent before [`point_media`].
fn hold_for_keys(rt: &Runtime, trunk: Option<&str>, session: &callsmith_media::MediaSession) {
    if rt.sip.srtp_policy(trunk) != callsmith_sip::SrtpPolicy::Off
        && let Err(e) = session.await_srtp()
    {
        warn!(error = %e, "holding the media for its SRTP keys failed");
    }
}

/// Points `session` at a SIP leg's negotiated media: SRTP first (so nothing leaves
/// unprotected), then the peer, codec and telephone-event type.
fn point_media(
    session: &callsmith_media::MediaSession,
    m: &callsmith_sip::NegotiatedMedia,
) -> Result<(), callsmith_media::MediaError> {
    session.set_srtp(media_srtp(m).as_ref())?;
    session.set_remote(m.remote_rtp, media_codec(m.codec), m.telephone_event)
}

/// Writes why a call this node created claimed (inbound, browser) did not come up.
pub(crate) async fn fail(rt: &Runtime, comm: &CommunicationRecord, why: &str) {
    rt.journal
        .queue(CallWrite::Fail {
            sid: comm.sid.clone(),
            token: rt.settings.claim_token.clone(),
            error: why.to_string(),
            deliveries: None,
            at: Utc::now(),
        })
        .await;
}

/// Writes the end of a communication and queues its result deliveries (to `agent`'s
/// targets) in the same transaction, through the journal, waiting until it is stored. A
/// database that does not answer is waited for (see [`crate::persist`]), so a call's end is
/// not lost under load.
async fn finish(
    rt: &Runtime,
    comm: &CommunicationRecord,
    agent: Option<&AgentRecord>,
    f: &CallFinish,
) {
    let mut f = f.clone();
    // Listed before the end is written: a crash between the two keeps the opt-out (the
    // claimed row is then reconciled `interrupted`, never redialled).
    if f.opted_out {
        strategy::record_opt_out(rt, comm).await;
    }
    if comm.direction == "outbound" {
        strategy::after_attempt(rt, comm, &mut f).await;
    }
    // A retry delivers nothing yet: the result follows the last attempt.
    let deliveries = match f.retry_at {
        Some(_) => None,
        None => crate::delivery::deliveries(comm, agent),
    };
    let write = CallWrite::Finish {
        sid: comm.sid.clone(),
        token: rt.settings.claim_token.clone(),
        finish: Box::new(f),
        deliveries,
        at: Utc::now(),
    };
    match rt.journal.commit(write).await {
        Ok(true) => {}
        Ok(false) => warn!(communication = %comm.sid, "claim lost; end of call not recorded"),
        Err(e) => {
            warn!(communication = %comm.sid, error = %e, "recording the end of a call failed")
        }
    }
}
