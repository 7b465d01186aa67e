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
//! storing its end), `port` (the `CallPort` and what the call waits on), `play` and
//! `listen` (prompts and listen turns), `speak` (a language model's reply spoken as it
//! streams), `sms`, `transfer`, and `history` (the saved
//! history's types).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use callsmith_domain::objects::CallObjects;
use callsmith_domain::store::{
    AgentRecord, CommunicationRecord,
    communications::{CallFinish, CallWrite, CommunicationStatus},
};
use callsmith_media::{
    MediaEvent, MediaSession, PlayEnd,
    amd::{AmdConfig, AmdDecision as Amd},
    prompt::{Playable, Prompt},
    recording::RecordingTarget,
    stt::{SttEvent, SttParams},
    tts::TtsRequest,
};
use callsmith_scenarios::{
    interpreter::{CallDirection, CallInfo, CallRun, Program, Tz},
    model::MappingEntry,
    port::*,
    webhook::{CompiledRequest, WebhookOutcome},
};
use callsmith_sip::{CallLeg, EndInfo, LegEvent, LocalMedia, NegotiatedMedia};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::runtime::Runtime;

mod answered;
mod error;
mod history;
mod leg;
pub mod lifecycle;
mod listen;
mod live;
mod outbound;
mod play;
mod port;
mod prepare;
mod sms;
mod speak;
mod transfer;

pub use answered::AnsweredCall;
pub use error::CallError;
use history::*;
pub use leg::{BrowserLeg, Leg};
use live::Live;
pub use outbound::run_outbound;
use port::*;
pub use port::{ForcedEnd, LivePort};
pub use prepare::{Prepared, prepare};
use sms::*;

fn media_codec(c: callsmith_sip::SdpCodec) -> callsmith_media::g711::Codec {
    match c {
        callsmith_sip::SdpCodec::Pcmu => callsmith_media::g711::Codec::Pcmu,
        callsmith_sip::SdpCodec::Pcma => callsmith_media::g711::Codec::Pcma,
    }
}

/// Waits for a leg's `Ended` event.
async fn wait_end(leg: &mut CallLeg, within: Duration) -> Option<EndInfo> {
    tokio::time::timeout(within, async {
        while let Some(ev) = leg.next_event().await {
            if let LegEvent::Ended(e) = ev {
                return Some(e);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
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
    let write = CallWrite::Finish {
        sid: comm.sid.clone(),
        token: rt.settings.claim_token.clone(),
        finish: Box::new(f.clone()),
        deliveries: crate::delivery::deliveries(comm, agent),
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
