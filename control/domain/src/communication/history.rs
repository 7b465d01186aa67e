//! The saved call history (`calls/<account>/<communication>.history.json`): one typed
//! document, written by the engine at the end of an answered call, served by
//! `GET /v1/communication/{id}/history` and read by the tests with the same types. Unknown
//! fields are refused when it is read, so what the engine writes, what the OpenAPI
//! document describes and what the tests check cannot drift apart.

use std::collections::BTreeMap;

use callsmith_media::SessionStats;
use callsmith_scenarios::{
    history::{EndReason, TraceEvent},
    port::PromptSpec,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What one answered call did, end to end.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CallHistory {
    pub communication_id: String,
    /// `outbound` or `inbound`.
    pub direction: String,
    pub recipient: String,
    pub from_number: String,
    /// SIP Call-ID of the caller's leg.
    pub call_id: String,
    pub answered_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub duration_ms: i64,
    /// Why the scenario stopped (`{"reason": "end" | "end_call" | "hung_up" | …}`).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub end: EndReason,
    /// Set when the engine ended the call itself: `max_duration`, `shutdown`,
    /// `rtp_timeout` or `hangup_requested`.
    pub forced_end: Option<String>,
    /// How the caller's leg ended; null when it had not ended when the history was saved.
    pub hangup: Option<HangupLog>,
    /// Goals reached, in order.
    pub goals: Vec<String>,
    /// Scenario variables at the end of the call.
    pub variables: BTreeMap<String, String>,
    /// Bricks entered.
    pub steps: usize,
    /// Every brick entered, output taken, prompt, input, variable change and goal, with
    /// milliseconds since the answer.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub trace: Vec<TraceEvent>,
    pub prompts: Vec<PromptLog>,
    pub turns: Vec<TurnLog>,
    /// What went wrong without ending the call (a prompt that could not be had, a
    /// recognition node that failed, the RTP timeout…).
    pub errors: Vec<String>,
    pub transfers: Vec<TransferLog>,
    /// RTP/RTCP counters of the caller's media session; null when it could not be closed.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub media: Option<SessionStats>,
}

/// How the caller's leg ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HangupLog {
    /// The call_status vocabulary (answered, busy, no_answer, rejected, failed, canceled).
    pub call_status: String,
    pub sip_code: Option<u16>,
    pub reason: String,
    /// `local` (the engine hung up) or `remote` (the caller did).
    pub by: String,
}

/// One prompt as played.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PromptLog {
    /// Milliseconds since the answer when the prompt was asked for.
    pub at_ms: u64,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub prompt: PromptSpec,
    pub interruptible: bool,
    /// `completed`, `interrupted`, `hung_up` or `failed`.
    pub outcome: String,
    /// Milliseconds of audio that went out.
    pub played_ms: u64,
    /// Time from the play request to the end of playout.
    pub elapsed_ms: u64,
    /// Why the prompt failed (outcome `failed`): the audio could not be had, or its
    /// synthesis stopped part way (a sentence failed; what was made before was played).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One listen turn: timings and what was heard.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnLog {
    /// 1 for the call's first turn.
    pub index: usize,
    pub started_ms: u64,
    pub ended_ms: u64,
    /// VAD onset of caller speech, in a turn that takes speech (a keys-only turn runs no
    /// speech detection and leaves it unset).
    pub speech_started_ms: Option<u64>,
    /// End of the caller's speech: the last voiced frame before the VAD's offset (the
    /// last one in the turn).
    #[serde(default)]
    pub speech_ended_ms: Option<u64>,
    pub first_partial_ms: Option<u64>,
    /// When the recogniser decided the caller's turn was over: the final transcript's
    /// arrival minus the time the node reports between its decision and sending the final
    /// (the local speech node's `decision_to_final_ms`); the final's arrival for a node that
    /// does not report it.
    #[serde(default)]
    pub end_of_turn_ms: Option<u64>,
    pub final_ms: Option<u64>,
    /// Final transcript minus the end of speech (recognition latency).
    pub final_latency_ms: Option<u64>,
    pub transcript: Option<String>,
    pub dtmf: Option<String>,
    /// `speech`, `dtmf`, `no_input` or `hung_up`.
    pub heard: String,
    /// Interim results: (call ms, text).
    pub interim: Vec<(u64, String)>,
    /// The recognition node that served the turn.
    pub stt_node: Option<String>,
    /// Why recognition failed in this turn (the question then follows its no-input path).
    pub stt_error: Option<String>,
    /// Bucket-qualified storage path of the caller audio of this turn
    /// (`callsmith/calls/…/speech/<n>.wav`), for `GET …/speech-recording`.
    pub speech_recognition_recording: Option<String>,
    /// Call time the reply to this turn's answer was known: the port asked to play it (the
    /// answer decided: classifier, LLM or webhook done), or a streamed LLM reply's first
    /// complete sentence.
    #[serde(default)]
    pub reply_ready_ms: Option<u64>,
    /// Call time the reply was handed to the media worker (its audio resolved: a file
    /// fetched, a synthesis started or found in the cache).
    #[serde(default)]
    pub reply_requested_ms: Option<u64>,
    /// Call time the reply's first synthesised audio was there (for a prompt from the
    /// synthesis cache, when it was handed to the media worker; unset for a file prompt).
    #[serde(default)]
    pub first_synthesis_ms: Option<u64>,
    /// Call time of the first RTP packet of the reply to this turn's answer.
    pub reply_first_rtp_ms: Option<u64>,
    /// What the caller waits: end of their speech → first RTP packet of the reply, ms.
    #[serde(default)]
    pub response_ms: Option<u64>,
    /// Turn latency: answer available (final transcript / DTMF entry) → first RTP packet
    /// of the reply, µs.
    pub turn_latency_us: Option<u64>,
    /// The engine's share of it: answer available → reply handed to the media worker, µs.
    pub turn_engine_us: Option<u64>,
}

impl TurnLog {
    /// What the caller waited in this turn: the end of their input (the last voiced frame
    /// of their speech, `response_ms`; for a turn answered by keys, the key, which is when
    /// the answer was there: its turn latency) → the first RTP packet of the reply, ms.
    /// None for a turn with no reply.
    pub fn caller_wait_ms(&self) -> Option<u64> {
        self.response_ms.or_else(|| {
            (self.heard == "dtmf")
                .then_some(self.turn_latency_us?)
                .map(|us| us / 1000)
        })
    }
}

/// One call_transfer attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TransferLog {
    /// `blind` or `bridged`.
    pub mode: String,
    /// The brick's rendered `number`.
    pub target: String,
    pub started_ms: u64,
    pub ended_ms: u64,
    /// `success`, `failure` or `timeout` (the output the brick took).
    pub outcome: String,
    pub detail: Option<String>,
    /// Blind: the sipfrag / REFER response code. Bridged: the target leg's final SIP code.
    pub sip_code: Option<u16>,
    /// Bridged: the target leg's Call-ID.
    pub call_id: Option<String>,
    /// Bridged: how the target leg ended (call_status vocabulary).
    pub call_status: Option<String>,
    pub ringing_ms: Option<u64>,
    pub answered_ms: Option<u64>,
    /// How much of `message_to_manager` the target heard.
    pub manager_prompt_played_ms: Option<u64>,
    pub bridged_ms: Option<u64>,
    /// Who ended the bridge: `caller` or `target`.
    pub ended_by: Option<String>,
    /// Media counters of the target leg (what the bridge relayed to and from the target).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub target_media: Option<SessionStats>,
}

impl TransferLog {
    /// An attempt just started: `failure` until it says otherwise.
    pub fn new(mode: &str, target: &str, started_ms: u64) -> TransferLog {
        TransferLog {
            mode: mode.into(),
            target: target.into(),
            started_ms,
            ended_ms: started_ms,
            outcome: "failure".into(),
            detail: None,
            sip_code: None,
            call_id: None,
            call_status: None,
            ringing_ms: None,
            answered_ms: None,
            manager_prompt_played_ms: None,
            bridged_ms: None,
            ended_by: None,
            target_media: None,
        }
    }
}
