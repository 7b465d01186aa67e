//! SCN1xx validation codes and the validation entry type.
//!
//! The registry is append-only and never renumbered; `docs/scenario-codes.md` lists the same
//! codes with their meaning. The control plane puts the errors of a validation into the error
//! envelope's `data.errors.scenario`; warnings ([`Code::is_warning`]) travel beside them in
//! the validate response's `warnings` and never refuse anything.

use serde::{Deserialize, Serialize};

/// A registered SCN code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// SCN101: a key of `constructor.bricks` that is not a known brick kind.
    UnknownKind,
    /// SCN102: the snapshot structure is malformed (constructor, bricks, a kind group, a brick
    /// entry, `properties` or `outputs` is not of the expected JSON type).
    MalformedStructure,
    /// SCN103: two bricks share an id.
    DuplicateId,
    /// SCN104: a brick has no id (absent or empty).
    MissingId,
    /// SCN105: an output's `next` names a brick that does not exist.
    DanglingOutput,
    /// SCN106: a brick has two outputs of the same type.
    DuplicateOutput,
    /// SCN107: an output type the brick kind never takes.
    UnknownOutputType,
    /// SCN108: no entry brick (start_call, outbound_call or inbound_call).
    MissingStart,
    /// SCN109: more than one entry brick of one kind (start_call, outbound_call, inbound_call).
    DuplicateStart,
    /// SCN110: a brick no tree root reaches.
    UnreachableBrick,
    /// SCN111: a required property is missing or empty.
    MissingProperty,
    /// SCN112: a property has the wrong JSON type.
    InvalidPropertyType,
    /// SCN113: a number is out of its allowed range (or not an integer where one is needed).
    OutOfRange,
    /// SCN114: a value outside its enumeration (play_mode, mode, operator, method...).
    InvalidEnumValue,
    /// SCN115: a `{{placeholder}}` syntax error in a text property.
    BadPlaceholder,
    /// SCN116: an invalid variable name (assignment, increment, entity or mapping target).
    InvalidVariableName,
    /// SCN117: a classifier (id, version) that does not exist.
    UnknownClassifier,
    /// SCN118: an audio file that does not exist.
    UnknownAudio,
    /// SCN119: an invalid regular expression in a `regex` condition.
    InvalidRegex,
    /// SCN120: an invalid JSONPath.
    InvalidJsonPath,
    /// SCN121: an invalid URL (webhook url, proxy url).
    InvalidUrl,
    /// SCN122: two branches of one brick share an id (condition_id or answer_id).
    DuplicateBranchId,
    /// SCN123: a reference the engine will not reach for this account: an audio reference
    /// that is a local path, a foreign scheme, another account's object or a non-public
    /// address; a webhook or proxy url naming a non-public address.
    RefusedReference,
    /// SCN124: a key the brick model does not know in a brick's `properties`, at any depth.
    UnknownProperty,
    /// SCN125: a synthesizer (`engine` of TTS settings or of an audio_tts brick) the node
    /// does not speak with.
    UnknownSynthesizer,
    /// SCN126: a recognizer (`engine` of `stt_general` or `stt_properties`) the account
    /// cannot use.
    UnknownRecognizer,
    /// SCN127 (warning): a `{{placeholder}}` naming a variable no brick sets and no
    /// built-in provides; only the dispatch `data` can provide it, else it renders empty.
    UnknownVariable,
    /// SCN128 (warning): a key beside the known ones of the snapshot, `constructor`, a kind
    /// group, a brick entry or an output that is a near miss of a known key (`propreties`,
    /// `nxt`). Other keys there are designer metadata, kept and not reported.
    MisspeltKey,
    /// SCN129 (warning): a question's listening setting that no live call applies
    /// (`grammar_parameter`, `recognition_mode`, a `recognition_shift` `before` the
    /// prompt's end, a shift direction other than `after`/`before`, an unknown `timezone`,
    /// `interruptible_dialog`, a question `entity` that reads nothing): kept, and the call
    /// goes on without it.
    IgnoredSetting,
}

impl Code {
    /// Every code, in registry order.
    pub const ALL: &'static [Code] = &[
        Code::UnknownKind,
        Code::MalformedStructure,
        Code::DuplicateId,
        Code::MissingId,
        Code::DanglingOutput,
        Code::DuplicateOutput,
        Code::UnknownOutputType,
        Code::MissingStart,
        Code::DuplicateStart,
        Code::UnreachableBrick,
        Code::MissingProperty,
        Code::InvalidPropertyType,
        Code::OutOfRange,
        Code::InvalidEnumValue,
        Code::BadPlaceholder,
        Code::InvalidVariableName,
        Code::UnknownClassifier,
        Code::UnknownAudio,
        Code::InvalidRegex,
        Code::InvalidJsonPath,
        Code::InvalidUrl,
        Code::DuplicateBranchId,
        Code::RefusedReference,
        Code::UnknownProperty,
        Code::UnknownSynthesizer,
        Code::UnknownRecognizer,
        Code::UnknownVariable,
        Code::MisspeltKey,
        Code::IgnoredSetting,
    ];

    /// The registered code string.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::UnknownKind => "SCN101",
            Code::MalformedStructure => "SCN102",
            Code::DuplicateId => "SCN103",
            Code::MissingId => "SCN104",
            Code::DanglingOutput => "SCN105",
            Code::DuplicateOutput => "SCN106",
            Code::UnknownOutputType => "SCN107",
            Code::MissingStart => "SCN108",
            Code::DuplicateStart => "SCN109",
            Code::UnreachableBrick => "SCN110",
            Code::MissingProperty => "SCN111",
            Code::InvalidPropertyType => "SCN112",
            Code::OutOfRange => "SCN113",
            Code::InvalidEnumValue => "SCN114",
            Code::BadPlaceholder => "SCN115",
            Code::InvalidVariableName => "SCN116",
            Code::UnknownClassifier => "SCN117",
            Code::UnknownAudio => "SCN118",
            Code::InvalidRegex => "SCN119",
            Code::InvalidJsonPath => "SCN120",
            Code::InvalidUrl => "SCN121",
            Code::DuplicateBranchId => "SCN122",
            Code::RefusedReference => "SCN123",
            Code::UnknownProperty => "SCN124",
            Code::UnknownSynthesizer => "SCN125",
            Code::UnknownRecognizer => "SCN126",
            Code::UnknownVariable => "SCN127",
            Code::MisspeltKey => "SCN128",
            Code::IgnoredSetting => "SCN129",
        }
    }

    /// The short, stable summary line of the code.
    pub fn summary(self) -> &'static str {
        match self {
            Code::UnknownKind => "unknown brick kind",
            Code::MalformedStructure => "malformed snapshot structure",
            Code::DuplicateId => "duplicate brick id",
            Code::MissingId => "missing brick id",
            Code::DanglingOutput => "output leads to an unknown brick",
            Code::DuplicateOutput => "duplicate output type",
            Code::UnknownOutputType => "output type not used by this brick kind",
            Code::MissingStart => "missing start brick",
            Code::DuplicateStart => "duplicate start brick",
            Code::UnreachableBrick => "unreachable brick",
            Code::MissingProperty => "missing required property",
            Code::InvalidPropertyType => "property has the wrong type",
            Code::OutOfRange => "number out of range",
            Code::InvalidEnumValue => "value not allowed",
            Code::BadPlaceholder => "bad placeholder syntax",
            Code::InvalidVariableName => "invalid variable name",
            Code::UnknownClassifier => "unknown classifier",
            Code::UnknownAudio => "unknown audio file",
            Code::InvalidRegex => "invalid regular expression",
            Code::InvalidJsonPath => "invalid JSONPath",
            Code::InvalidUrl => "invalid URL",
            Code::DuplicateBranchId => "duplicate branch id",
            Code::RefusedReference => "reference refused",
            Code::UnknownProperty => "unknown property",
            Code::UnknownSynthesizer => "unknown synthesizer",
            Code::UnknownRecognizer => "unknown recognizer",
            Code::UnknownVariable => "unknown variable",
            Code::MisspeltKey => "misspelt key",
            Code::IgnoredSetting => "setting not applied in a call",
        }
    }

    /// Whether entries of this code are warnings: reported beside the errors (the
    /// `warnings` of a validation), never refusing a publish or a test call.
    pub fn is_warning(self) -> bool {
        matches!(
            self,
            Code::UnknownVariable | Code::MisspeltKey | Code::IgnoredSetting
        )
    }
}

/// One validation problem, shaped as the spec's `data.errors.scenario` entries: every field is
/// a string and every field is always present ("" when it does not apply).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioError {
    /// SCN1xx code.
    pub code: String,
    /// Human-readable detail.
    pub message: String,
    /// The code's short summary.
    pub summary: String,
    /// Id of the root brick of the tree the problem is in ("" when not in a tree).
    pub tree_id: String,
    /// Id of the brick the problem is on.
    pub node_id: String,
    /// Output type concerned (dangling, duplicate or unknown output).
    pub output_type: String,
    /// Position of the duplicate root (`<kind>.v1[<i>]`) for SCN109.
    pub duplicate_tree_index: String,
    /// Position of the duplicate brick or output (`<kind>.v1[<i>]`, `outputs[<i>]`).
    pub duplicate_node_index: String,
    /// Dotted path of the property concerned, relative to the brick (`properties.audios[0].mode`).
    pub property: String,
    /// The offending value as text (strings verbatim, other values as compact JSON).
    pub invalid_value: String,
}

impl ScenarioError {
    /// A new entry with code, summary and message filled in.
    pub fn new(code: Code, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            code: code.as_str().to_string(),
            summary: code.summary().to_string(),
            message: message.into(),
            ..ScenarioError::default()
        }
    }
    /// Sets `node_id`.
    pub fn node(mut self, id: &str) -> Self {
        self.node_id = id.to_string();
        self
    }
    /// Sets `property`.
    pub fn property(mut self, p: impl Into<String>) -> Self {
        self.property = p.into();
        self
    }
    /// Sets `invalid_value`.
    pub fn value(mut self, v: impl Into<String>) -> Self {
        self.invalid_value = v.into();
        self
    }
    /// Sets `output_type`.
    pub fn output(mut self, t: &str) -> Self {
        self.output_type = t.to_string();
        self
    }
}

/// A JSON value as `invalid_value` text: strings verbatim, others compact JSON.
pub fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
