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
pub use callsmith_sip::{CallStatus, Party};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::text_enum::text_enum;
pub use crate::usecases::Direction;

text_enum!(
    "forced end",
    /// Why the engine ended a call itself; the communication's `end_reason` then says so.
    pub enum ForcedEnd {
        /// `dialer.max_call_secs` passed.
        MaxDuration = "max_duration",
        /// The drain time of a shutdown ran out.
        Shutdown = "shutdown",
        /// No RTP from the peer for `media.rtp_timeout_ms`.
        RtpTimeout = "rtp_timeout",
        /// `POST /v1/communication/{id}/hangup`.
        HangupRequested = "hangup_requested",
    }
);

impl ForcedEnd {
    /// The line in the history's `errors`.
    pub fn message(self) -> &'static str {
        match self {
            ForcedEnd::MaxDuration => "maximum call duration reached",
            ForcedEnd::Shutdown => "engine shutting down",
            ForcedEnd::RtpTimeout => "no RTP from the peer within media.rtp_timeout_ms",
            ForcedEnd::HangupRequested => "hang-up requested through the API",
        }
    }
}

text_enum!(
    "prompt outcome",
    /// How a prompt's playout ended.
    pub enum PromptOutcome {
        Completed = "completed",
        /// The caller barged in.
        Interrupted = "interrupted",
        HungUp = "hung_up",
        /// The audio could not be had, or its synthesis stopped part way.
        Failed = "failed",
        /// The reply to an answer decided at the recogniser's eager end of turn, stopped
        /// because the caller went on speaking (docs/voice.md, "Turn policy").
        TakenBack = "taken_back",
    }
);

text_enum!(
    "heard",
    /// What a listen turn heard.
    #[derive(Default)]
    pub enum Heard {
        Speech = "speech",
        Dtmf = "dtmf",
        #[default]
        NoInput = "no_input",
        HungUp = "hung_up",
    }
);

text_enum!(
    "transfer mode",
    /// How a call_transfer hands the caller over.
    pub enum TransferMode {
        /// A REFER: the caller's side calls the target.
        Blind = "blind",
        /// The engine calls the target and relays audio between the two legs.
        Bridged = "bridged",
    }
);

text_enum!(
    "transfer result",
    /// The output a call_transfer brick took.
    pub enum TransferResult {
        Success = "success",
        Failure = "failure",
        Timeout = "timeout",
    }
);

text_enum!(
    "bridge side",
    /// Who ended a bridged transfer.
    pub enum BridgeSide {
        Caller = "caller",
        Target = "target",
    }
);

/// What one answered call did, end to end.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CallHistory {
    pub communication_id: String,
    /// `outbound` or `inbound`.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub direction: Direction,
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
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub forced_end: Option<ForcedEnd>,
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
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub call_status: CallStatus,
    pub sip_code: Option<u16>,
    pub reason: String,
    /// `local` (the engine hung up) or `remote` (the caller did).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub by: Party,
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
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub outcome: PromptOutcome,
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
    /// last one in the turn), or, when the turn ended inside the VAD's hangover, the last
    /// voiced frame the VAD had heard then.
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
    /// What was heard: the final transcript, or the interim one when the answer was
    /// decided from it at the recogniser's end of turn (`notes` then say so).
    pub transcript: Option<String>,
    /// The recogniser's final transcript of a turn whose answer was decided from the
    /// interim transcript (docs/voice.md, "Turn policy"): the branch was taken without
    /// waiting for it, and it is recorded when it arrives. Unset for other turns (their
    /// `transcript` is the final) and when no final came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_transcript: Option<String>,
    pub dtmf: Option<String>,
    /// `speech`, `dtmf`, `no_input` or `hung_up`.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub heard: Heard,
    /// Interim results: (call ms, text).
    pub interim: Vec<(u64, String)>,
    /// The recognition node that served the turn.
    pub stt_node: Option<String>,
    /// Why recognition failed in this turn (the question then follows its no-input path).
    pub stt_error: Option<String>,
    /// The language the recogniser decoded the final transcript in, when it says (the
    /// one it identified among the question's `primary_language` and `fallback_languages`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// Listening settings of the question the recognition stream could not carry, one line
    /// each (docs/voice.md, "Listening settings per engine"), and a line when the answer was
    /// decided from the interim transcript at the recogniser's end of turn (docs/voice.md,
    /// "Turn policy").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
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
            (self.heard == Heard::Dtmf)
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
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub mode: TransferMode,
    /// The brick's rendered `number`.
    pub target: String,
    pub started_ms: u64,
    pub ended_ms: u64,
    /// `success`, `failure` or `timeout` (the output the brick took).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub outcome: TransferResult,
    pub detail: Option<String>,
    /// Blind: the sipfrag / REFER response code. Bridged: the target leg's final SIP code.
    pub sip_code: Option<u16>,
    /// Bridged: the target leg's Call-ID.
    pub call_id: Option<String>,
    /// Bridged: how the target leg ended (call_status vocabulary).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub call_status: Option<CallStatus>,
    pub ringing_ms: Option<u64>,
    pub answered_ms: Option<u64>,
    /// How much of `message_to_manager` the target heard.
    pub manager_prompt_played_ms: Option<u64>,
    pub bridged_ms: Option<u64>,
    /// Who ended the bridge: `caller` or `target`.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub ended_by: Option<BridgeSide>,
    /// Media counters of the target leg (what the bridge relayed to and from the target).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub target_media: Option<SessionStats>,
}

impl TransferLog {
    /// An attempt just started: `failure` until it says otherwise.
    pub fn new(mode: TransferMode, target: &str, started_ms: u64) -> TransferLog {
        TransferLog {
            mode,
            target: target.into(),
            started_ms,
            ended_ms: started_ms,
            outcome: TransferResult::Failure,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A history as the engine wrote it when these vocabularies were kept as text: every
    /// closed vocabulary reads into its type and writes back to the same JSON.
    #[test]
    fn saved_vocabularies_round_trip_as_the_same_text() {
        let mut old = serde_json::json!({
            "communication_id": "com_1", "direction": "inbound", "recipient": "+1",
            "from_number": "+2", "call_id": "c@h",
            "answered_at": "2025-01-01T00:00:00Z", "ended_at": "2025-01-01T00:00:05Z",
            "duration_ms": 5000, "end": {"reason": "hung_up"},
            "forced_end": "rtp_timeout",
            "hangup": {"call_status": "no_answer", "sip_code": 408, "reason": "r", "by": "remote"},
            "goals": [], "variables": {}, "steps": 1, "trace": [],
            "prompts": [{"at_ms": 1, "prompt": {"mode": "file", "url": "aud_1"}, "interruptible": true,
                "outcome": "hung_up", "played_ms": 2, "elapsed_ms": 3}],
            "turns": [], "errors": [], "transfers": [],
            "media": null,
        });
        old["turns"] = serde_json::json!([{"index": 1, "started_ms": 0, "ended_ms": 9, "speech_started_ms": null,
                "speech_ended_ms": null, "first_partial_ms": null, "end_of_turn_ms": null,
                "final_ms": null, "final_latency_ms": null, "transcript": null, "dtmf": "1",
                "heard": "dtmf", "interim": [], "stt_node": null, "stt_error": null,
                "speech_recognition_recording": null, "reply_ready_ms": null,
                "reply_requested_ms": null, "first_synthesis_ms": null,
                "reply_first_rtp_ms": 20, "response_ms": null, "turn_latency_us": 11000,
                "turn_engine_us": null}]);
        old["transfers"] = serde_json::json!([{"mode": "bridged", "target": "+3", "started_ms": 1, "ended_ms": 2,
                "outcome": "timeout", "detail": null, "sip_code": 486, "call_id": null,
                "call_status": "busy", "ringing_ms": null, "answered_ms": null,
                "manager_prompt_played_ms": null, "bridged_ms": null, "ended_by": "target",
                "target_media": null}]);
        let h: CallHistory = serde_json::from_value(old.clone()).expect("the old history reads");
        assert_eq!(h.direction, Direction::Inbound);
        assert_eq!(h.forced_end, Some(ForcedEnd::RtpTimeout));
        let hangup = h.hangup.as_ref().unwrap();
        assert_eq!(hangup.call_status, CallStatus::NoAnswer);
        assert_eq!(hangup.by, Party::Remote);
        assert_eq!(h.prompts[0].outcome, PromptOutcome::HungUp);
        assert_eq!(h.turns[0].heard, Heard::Dtmf);
        assert_eq!(h.turns[0].caller_wait_ms(), Some(11));
        let t = &h.transfers[0];
        assert_eq!(t.mode, TransferMode::Bridged);
        assert_eq!(t.outcome, TransferResult::Timeout);
        assert_eq!(t.call_status, Some(CallStatus::Busy));
        assert_eq!(t.ended_by, Some(BridgeSide::Target));
        assert_eq!(serde_json::to_value(&h).unwrap(), old);
        // The other names of each vocabulary, as they were written.
        let text = |v: serde_json::Value| v.as_str().unwrap().to_string();
        assert_eq!(text(serde_json::to_value(Party::Local).unwrap()), "local");
        assert_eq!(
            text(serde_json::to_value(Direction::Outbound).unwrap()),
            "outbound"
        );
        for (s, name) in [
            (CallStatus::Answered, "answered"),
            (CallStatus::Rejected, "rejected"),
            (CallStatus::Failed, "failed"),
            (CallStatus::Canceled, "canceled"),
        ] {
            assert_eq!(text(serde_json::to_value(s).unwrap()), name);
            assert_eq!(
                serde_json::from_value::<CallStatus>(name.into()).unwrap(),
                s
            );
        }
        let names = |all: &[&str]| all.join(",");
        assert_eq!(
            names(
                &ForcedEnd::ALL
                    .iter()
                    .map(|f| f.as_str())
                    .collect::<Vec<_>>()
            ),
            "max_duration,shutdown,rtp_timeout,hangup_requested"
        );
        assert_eq!(
            PromptOutcome::names(),
            "completed, interrupted, hung_up, failed, taken_back"
        );
        assert_eq!(Heard::names(), "speech, dtmf, no_input, hung_up");
        assert_eq!(TransferMode::names(), "blind, bridged");
        assert_eq!(TransferResult::names(), "success, failure, timeout");
        assert_eq!(BridgeSide::names(), "caller, target");
    }
}
