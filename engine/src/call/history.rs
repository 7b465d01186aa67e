//! What a call's saved history records of its prompts and listen turns.

use super::*;

/// One prompt as played, for the history.
#[derive(Debug, Clone, Serialize)]
pub(super) struct PromptLog {
    pub(super) at_ms: u64,
    pub(super) prompt: PromptSpec,
    pub(super) interruptible: bool,
    pub(super) outcome: String,
    pub(super) played_ms: u64,
    /// Time from the play request to the end of playout.
    pub(super) elapsed_ms: u64,
    /// Why nothing was played (outcome `failed`): the audio could not be had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<String>,
}

/// One listen turn, for the history (per-turn timings and transcripts).
#[derive(Debug, Clone, Serialize, Default)]
pub(super) struct Turn {
    pub(super) index: usize,
    pub(super) started_ms: u64,
    pub(super) ended_ms: u64,
    /// VAD onset of caller speech.
    pub(super) speech_started_ms: Option<u64>,
    pub(super) first_partial_ms: Option<u64>,
    pub(super) final_ms: Option<u64>,
    /// Final transcript minus the end of speech (recognition latency).
    pub(super) final_latency_ms: Option<u64>,
    pub(super) transcript: Option<String>,
    pub(super) dtmf: Option<String>,
    pub(super) heard: String,
    pub(super) interim: Vec<(u64, String)>,
    pub(super) stt_node: Option<String>,
    pub(super) stt_error: Option<String>,
    /// Bucket-qualified storage path of the caller audio of this turn.
    pub(super) speech_recognition_recording: Option<String>,
    /// Call time of the first RTP packet of the reply to this turn's answer.
    pub(super) reply_first_rtp_ms: Option<u64>,
    /// Turn latency: answer available (final transcript / DTMF entry) → first RTP packet
    /// of the reply, µs.
    pub(super) turn_latency_us: Option<u64>,
    /// The engine's share of it: answer available → reply handed to the media worker, µs.
    pub(super) turn_engine_us: Option<u64>,
}
