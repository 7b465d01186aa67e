//! What the interpreter and a call exchange through [`super::CallPort`]: what to play,
//! listen for, send or transfer, and how each went. The call history records the same
//! values.

use serde::{Deserialize, Serialize};

/// Speech-synthesis settings after merging brick over scenario-level `tts_general`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TtsVoice {
    pub engine: String,
    pub voice: String,
    pub language: String,
    pub model: String,
    /// Speaking rate; `None` means the engine default.
    pub speed: Option<f64>,
}

/// One prompt to play.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum PromptSpec {
    /// Synthesised text (placeholders already rendered).
    Tts { text: String, voice: TtsVoice },
    /// A stored audio file (`aud_` id, location or storage url).
    File { url: String },
}

/// How a prompt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", content = "detail", rename_all = "snake_case")]
pub enum PlayOutcome {
    /// Played to the end.
    Completed,
    /// The caller spoke or pressed a key while an interruptible prompt played; the port keeps
    /// what it heard for the next `listen`.
    Interrupted,
    /// The remote side hung up.
    HungUp,
    /// The prompt could not be played (synthesis or file error); the scenario goes on.
    Failed(String),
    /// The reply to an answer decided at the recogniser's eager end of turn, stopped
    /// because the caller went on speaking ([`super::CallPort::answer_may_be_taken_back`]):
    /// the question that took the answer listens on.
    TakenBack,
}

/// Who may stop a prompt, and when: keys by the prompt's `is_interruptible`; caller speech
/// also by the question's listening settings (`enable_voice_activity_detection`,
/// `interruption_shift`: [`crate::listening::interruption`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Interruption {
    /// A key stops the prompt.
    pub keys: bool,
    /// When caller speech stops it.
    pub speech: SpeechBargeIn,
}

/// When caller speech may stop a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpeechBargeIn {
    /// Never.
    #[default]
    Off,
    /// Once this many ms of the prompt have played (0: from its start).
    After(u64),
    /// Over the prompt's last this many ms (its length known: a decoded prompt at once, a
    /// synthesis once it is finished).
    Last(u64),
}

impl Interruption {
    /// Nothing stops the prompt.
    pub const NONE: Interruption = Interruption {
        keys: false,
        speech: SpeechBargeIn::Off,
    };

    /// A prompt's `is_interruptible` alone: keys and speech from its start, or neither.
    pub fn from_flag(interruptible: bool) -> Interruption {
        Interruption {
            keys: interruptible,
            speech: if interruptible {
                SpeechBargeIn::After(0)
            } else {
                SpeechBargeIn::Off
            },
        }
    }

    /// Whether anything may stop the prompt.
    pub fn any(self) -> bool {
        self.keys || self.speech != SpeechBargeIn::Off
    }
}

/// How patient the recogniser is before it ends the caller's turn, derived from the
/// question ([`crate::listening::patience`]) and sent to the recognition node as its
/// stream option (the local speech node's `patience`; docs/voice.md, "Turn policy").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Patience {
    /// Answers are short keywords (yes/no): the turn may end soonest.
    Short,
    /// The node's own settings.
    #[default]
    Normal,
    /// A long free answer: the turn model must be surer, the silence cap is longer.
    Long,
    /// Numbers, digit strings, dates or times: as `Long`, and a transcript ending in a digit
    /// run is held open (the caller may go on with more digits).
    Digits,
}

impl Patience {
    /// The level as the stream option names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Patience::Short => "short",
            Patience::Normal => "normal",
            Patience::Long => "long",
            Patience::Digits => "digits",
        }
    }
}

/// Speech recognition settings after merging `stt_properties` over `stt_general`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeechSpec {
    pub engine: String,
    pub language: String,
    pub model: String,
    pub primary_language: String,
    pub fallback_languages: Vec<String>,
    pub recognition_mode: String,
    /// Seconds of silence that end an utterance; `None` = engine default.
    pub speech_timeout_secs: Option<f64>,
    /// Recognition hints: the question's `tokens` and `class_token.tokens`, in that order,
    /// without repeats ([`crate::listening::hints`]).
    pub tokens: Vec<String>,
    /// The account's STT dictionaries named among the hints (`dic_…` ids,
    /// [`crate::listening::dictionaries`]): the engine adds their words to the hints.
    #[serde(default)]
    pub dictionaries: Vec<String>,
    /// Voice activity detection shapes the turn: caller speech interrupts an interruptible
    /// prompt and the recogniser ends the turn on silence. `false` only when the question
    /// sets `enable_voice_activity_detection: false` (docs/bricks.md).
    pub enable_voice_activity_detection: bool,
    /// Milliseconds after the prompt's end that listening starts (`recognition_shift`
    /// with direction `after`: [`crate::listening::recognition_delay_ms`]); None: at once.
    pub recognition_shift_ms: Option<f64>,
    /// `interruption_shift.duration` as given (ms); the prompts' [`Interruption`] applies it.
    pub interruption_shift_ms: Option<f64>,
    /// The brick's whole `stt_properties` object as stored (grammar parameters, class tokens,
    /// filters, timezone...), for engines that use more than the fields above; `Null` when absent.
    pub stt_properties: serde_json::Value,
    /// How patient the recogniser is before it ends the turn ([`Patience`]).
    #[serde(default)]
    pub patience: Patience,
    /// The token phrases (normalised) of each answer, when an interim transcript may
    /// decide the question ([`crate::listening::interim_answers`]): at the recogniser's
    /// end-of-turn decision, an interim transcript that matches exactly one of them is the
    /// answer, without waiting for the final. Empty: the final decides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interim_answers: Vec<Vec<String>>,
}

impl Default for SpeechSpec {
    /// Nothing named, voice activity detection on.
    fn default() -> Self {
        SpeechSpec {
            engine: String::new(),
            language: String::new(),
            model: String::new(),
            primary_language: String::new(),
            fallback_languages: Vec::new(),
            recognition_mode: String::new(),
            speech_timeout_secs: None,
            tokens: Vec::new(),
            dictionaries: Vec::new(),
            enable_voice_activity_detection: true,
            recognition_shift_ms: None,
            interruption_shift_ms: None,
            stt_properties: serde_json::Value::Null,
            patience: Patience::Normal,
            interim_answers: Vec::new(),
        }
    }
}

impl SpeechSpec {
    /// The language recognition starts in: `primary_language`, else `language`.
    pub fn recognition_language(&self) -> &str {
        if self.primary_language.trim().is_empty() {
            self.language.trim()
        } else {
            self.primary_language.trim()
        }
    }

    /// The other languages the caller may speak (`fallback_languages`, blanks and the
    /// recognition language left out): the recogniser identifies the spoken one among
    /// these and [`SpeechSpec::recognition_language`].
    pub fn other_languages(&self) -> Vec<String> {
        let first = self.recognition_language();
        let mut out: Vec<String> = Vec::new();
        for l in self.fallback_languages.iter().map(|l| l.trim()) {
            if !l.is_empty() && l != first && !out.iter().any(|o| o == l) {
                out.push(l.to_string());
            }
        }
        out
    }
}

/// DTMF collection settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DtmfSpec {
    /// Seconds allowed between digits; `None` = port default.
    pub inter_digit_timeout_secs: Option<f64>,
    pub min_symbols: u32,
    /// 0 = no maximum.
    pub max_symbols: u32,
    /// Key that ends entry early (not included in the digits).
    pub finish_on_key: Option<char>,
}

/// What to listen for. At least one of `speech` and `dtmf` is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListenSpec {
    pub speech: Option<SpeechSpec>,
    pub dtmf: Option<DtmfSpec>,
    /// Seconds to wait for any input before reporting `NoInput`.
    pub no_input_timeout_secs: f64,
}

/// What `listen` heard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "input", rename_all = "snake_case")]
pub enum Heard {
    /// A final transcript.
    Speech {
        transcript: String,
        confidence: Option<f64>,
    },
    /// DTMF digits (without the finish key).
    Dtmf { digits: String },
    /// Nothing within the no-input timeout.
    NoInput,
    /// The remote side hung up.
    HungUp,
}

/// One intent and its confidence (0..1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntentScore {
    pub intent: String,
    pub confidence: f64,
}

/// A chat request to a language model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    pub engine: String,
    pub model: String,
    pub provider: String,
    pub temperature: Option<f64>,
    pub gdpr_required: bool,
    /// (role, content) pairs, placeholders rendered.
    pub messages: Vec<(String, String)>,
}

/// What [`CallPort::speak_llm`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpokenReply {
    /// The model's reply: all of it, or what arrived before an error or before the caller
    /// interrupted it.
    pub reply: String,
    /// Why the reply stopped early (the provider failed or broke off, the call ended).
    pub error: Option<String>,
    /// The text handed to synthesis and how its playback ended; `None` when nothing was
    /// spoken (an empty reply, or an error before its first sentence).
    pub spoken: Option<(String, PlayOutcome)>,
}

/// Why a classifier or language-model call gave no answer. The scenario goes on without
/// it; the call's history keeps the text (`PortError` event).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// The call ended before the answer came (the caller hung up, the call was ended).
    #[error("{0}")]
    CallEnded(&'static str),
    /// The account may not use the service: it is gone, or its feature flag is off.
    #[error("{0}")]
    NotAllowed(String),
    /// The service failed, refused or timed out.
    #[error("{0}")]
    Failed(String),
}

/// Result of sending an SMS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", content = "detail", rename_all = "snake_case")]
pub enum SmsOutcome {
    Sent,
    Failed(String),
}

/// Transfer mode: `blind` hands the call over; `bridged` dials the target and bridges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferMode {
    Blind,
    Bridged,
}

/// A call transfer to perform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferSpec {
    pub mode: TransferMode,
    /// Caller id to present ("" = the call's own from-number).
    pub from: String,
    pub number: String,
    /// Seconds to wait for the target to answer.
    pub timeout_secs: f64,
    pub sip_headers: Vec<(String, String)>,
    /// Played to the target before bridging (bridged mode).
    pub message_to_manager: Option<PromptSpec>,
    /// Played to the caller before the transfer.
    pub message_to_client: Option<PromptSpec>,
}

/// Result of a transfer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", content = "detail", rename_all = "snake_case")]
pub enum TransferOutcome {
    Success,
    Failure(String),
    Timeout,
}

/// Answering-machine detection verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AmdVerdict {
    Human,
    Machine,
    Unknown,
}
