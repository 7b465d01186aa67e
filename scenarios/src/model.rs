//! The brick model: serde types for the "Scenario version record" snapshot.
//!
//! Every field is an [`Opt`] and every object keeps unknown keys in `extra`, so a snapshot
//! deserialised and serialised again is the same JSON value (see `docs/bricks.md`).
//! Numbers are kept as [`serde_json::Number`] so `1` never turns into `1.0`.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Number, Value};

use crate::opt::{FromJson, Opt};

/// Declares a record whose fields are all [`Opt`] and whose unknown keys are kept in `extra`.
macro_rules! record {
    ($(#[$m:meta])* $name:ident { $( $(#[$fm:meta])* $field:ident $(as $rename:literal)? : $ty:ty ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize)]
        pub struct $name {
            $(
                $(#[$fm])*
                #[serde(default, skip_serializing_if = "Opt::is_absent" $(, rename = $rename)?)]
                pub $field: Opt<$ty>,
            )*
            /// Keys this version does not know, kept so stored content is never lossy.
            #[serde(flatten)]
            pub extra: Map<String, Value>,
        }

        impl FromJson for $name {
            fn from_json(v: Value) -> Result<Self, Value> {
                let Value::Object(map) = v else { return Err(v) };
                let mut out = $name::default();
                // One pass over the keys: known ones fill fields, the rest keep their order in `extra`.
                for (k, val) in map {
                    match k.as_str() {
                        $( record!(@name $field $($rename)?) => out.$field = Opt::from_field(Some(val)), )*
                        _ => {
                            out.extra.insert(k, val);
                        }
                    }
                }
                Ok(out)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                from_deserializer(d)
            }
        }

        impl $name {
            /// The JSON keys this object takes.
            pub const FIELDS: &'static [&'static str] = &[ $( record!(@name $field $($rename)?), )* ];
        }

        impl crate::walk::Walk for $name {
            const EXPECTED: &'static str = "an object";
            #[allow(unused_variables)]
            fn walk(&self, path: &mut String, v: &mut dyn crate::walk::Visitor) {
                $( self.$field.walk_field(record!(@name $field $($rename)?), path, v); )*
                crate::walk::walk_extra(&self.extra, Self::FIELDS, path, v);
            }
        }
    };
    (@name $field:ident $rename:literal) => { $rename };
    (@name $field:ident) => { stringify!($field) };
}

record!(
    /// The `snapshot` object of a scenario version record.
    Snapshot { name: String, constructor: Constructor }
);
record!(
    /// `snapshot.constructor`.
    Constructor { bricks: Bricks }
);

/// One kind's group: `{"v1": [brick, ...]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(bound(serialize = "P: Serialize"))]
pub struct KindGroup<P> {
    /// The bricks of this kind.
    #[serde(default, skip_serializing_if = "Opt::is_absent")]
    pub v1: Opt<Vec<Brick<P>>>,
    /// Unknown keys (for example a future `v2`), kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl<P: FromJson + Serialize> FromJson for KindGroup<P> {
    fn from_json(v: Value) -> Result<Self, Value> {
        let Value::Object(mut map) = v else {
            return Err(v);
        };
        Ok(KindGroup {
            v1: Opt::from_field(map.shift_remove("v1")),
            extra: map,
        })
    }
}

impl<P: FromJson + Serialize> FromJson for Brick<P> {
    fn from_json(v: Value) -> Result<Self, Value> {
        let Value::Object(map) = v else {
            return Err(v);
        };
        let mut out = Brick::default();
        for (k, val) in map {
            match k.as_str() {
                "id" => out.id = Opt::from_field(Some(val)),
                "description" => out.description = Opt::from_field(Some(val)),
                "properties" => out.properties = Opt::from_field(Some(val)),
                "outputs" => out.outputs = Opt::from_field(Some(val)),
                _ => {
                    out.extra.insert(k, val);
                }
            }
        }
        Ok(out)
    }
}

/// Deserialises any model type through one owned [`Value`] and [`FromJson`].
fn from_deserializer<'de, T: FromJson, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    let v = Value::deserialize(d)?;
    T::from_json(v).map_err(|_| serde::de::Error::custom("expected a JSON object"))
}

impl<P> Default for KindGroup<P> {
    fn default() -> Self {
        KindGroup {
            v1: Opt::Absent,
            extra: Map::new(),
        }
    }
}

/// The keys of a brick entry.
pub const BRICK_FIELDS: &[&str] = &["id", "description", "properties", "outputs"];
/// The keys of a kind group.
pub const KIND_GROUP_FIELDS: &[&str] = &["v1"];

/// One brick entry: id, description, kind-specific properties and outputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(bound(serialize = "P: Serialize"))]
pub struct Brick<P> {
    #[serde(default, skip_serializing_if = "Opt::is_absent")]
    pub id: Opt<String>,
    #[serde(default, skip_serializing_if = "Opt::is_absent")]
    pub description: Opt<String>,
    #[serde(default, skip_serializing_if = "Opt::is_absent")]
    pub properties: Opt<P>,
    #[serde(default, skip_serializing_if = "Opt::is_absent")]
    pub outputs: Opt<Vec<Output>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl<P> Default for Brick<P> {
    fn default() -> Self {
        Brick {
            id: Opt::Absent,
            description: Opt::Absent,
            properties: Opt::Absent,
            outputs: Opt::Absent,
            extra: Map::new(),
        }
    }
}

record!(
    /// A brick output. `type` names the branch (see `docs/bricks.md` for the types each kind
    /// emits) and `next` is the id of the brick the branch leads to; empty or absent means the
    /// branch is not connected and taking it ends the call.
    Output { kind as "type": String, description: String, next: String }
);

// ---------------------------------------------------------------- shared shapes

record!(
    /// Speech-synthesis settings (`tts_general`, `tts_properties`).
    TtsSettings { language: String, voice: String, engine: String, speed: Number, model: String }
);
record!(
    /// `{text}`.
    TtsText { text: String }
);
record!(
    /// `{url}`.
    FileRef { url: String }
);
record!(
    /// A prompt of the form `{mode, tts{text}, file{url}}` (question statement, fallbacks,
    /// call-transfer messages). `mode` is `tts` or `file`.
    PromptAudio { mode: String, tts: TtsText, file: FileRef }
);
record!(
    /// `{name, value}`.
    NameValue { name: String, value: String }
);
record!(
    /// `{direction, duration}` (recognition and interruption shifts).
    Shift { direction: String, duration: Number }
);

// ---------------------------------------------------------------- per-kind properties

record!(
    /// `audio`: a list of prompts played per `play_mode` (`sequential` or `random`).
    AudioProps { play_mode: String, audios: Vec<AudioEntry>, tts_general: TtsSettings }
);
record!(
    /// One `audios` entry: `mode` is `tts` or `file`.
    AudioEntry { mode: String, tts_properties: TtsText, file_properties: FileRef }
);
record!(
    /// `audio_file`.
    AudioFileProps { url: String }
);
record!(
    /// `audio_tts`.
    AudioTtsProps { text: String, language: String, voice: String, engine: String, model: String }
);
record!(
    /// `sms`: `to` empty means the communication recipient.
    SmsProps { to: String, text: String }
);
record!(
    /// `goal`.
    GoalProps { goal: String }
);
record!(
    /// `end_call`.
    EndCallProps { signal: String }
);
record!(
    /// `assignment`.
    AssignmentProps { variables: Vec<NameValue> }
);
record!(
    /// `increment`.
    IncrementProps { variables: Vec<IncrementVariable> }
);
record!(
    /// One `increment` entry.
    IncrementVariable { variable: String }
);
record!(
    /// `condition_group`.
    ConditionGroupProps { condition: ConditionSet }
);
record!(
    /// `condition_group.condition`.
    ConditionSet { conditions: Vec<Condition> }
);
record!(
    /// One branch of a condition group; its `condition_id` is the output type it takes.
    Condition {
        condition_id: String,
        description: String,
        condition_operator: String,
        elements: Vec<ConditionElement>,
    }
);
record!(
    /// One comparison: `{{variable}} element_operator value`.
    ConditionElement { variable: String, element_operator: String, value: String }
);
record!(
    /// `start_tree`, `inbound_call`, `end`: no properties.
    EmptyProps {}
);
record!(
    /// `start_call`: scenario-level speech defaults.
    StartCallProps { stt_general: SttGeneral, tts_general: TtsSettings }
);
record!(
    /// `start_call.stt_general`.
    SttGeneral {
        language: String,
        engine: String,
        model: String,
        primary_language: String,
        fallback_languages: Vec<String>,
    }
);
record!(
    /// `outbound_call`.
    OutboundCallProps { is_voicemail: bool }
);
record!(
    /// `call_transfer`.
    CallTransferProps {
        from: String,
        number: String,
        message_to_manager: PromptAudio,
        message_to_client: PromptAudio,
        timeout: Number,
        tts_properties: TtsSettings,
        sip_header: SipHeaders,
        transfer_mode: String,
    }
);
record!(
    /// `call_transfer.sip_header`.
    SipHeaders { sip_headers: Vec<NameValue> }
);
record!(
    /// `question`.
    QuestionProps {
        tts_properties: TtsSettings,
        dtmf_properties: DtmfProperties,
        stt_properties: SttProperties,
        statement: Statement,
        kind as "type": String,
        input_mode: String,
        answer: AnswerSet,
        fallback_invalid: FallbackSet,
        fallback_empty: FallbackSet,
        entity: Value,
    }
);
record!(
    /// `question.dtmf_properties` (timeouts in seconds).
    DtmfProperties {
        dtmf_timeout: Number,
        no_input_timeout: Number,
        min_symbols: Number,
        max_symbols: Number,
        finish_on_key: String,
    }
);
record!(
    /// `question.stt_properties` (timeouts in seconds, shift durations in milliseconds).
    SttProperties {
        speech_timeout: Number,
        no_input_timeout: Number,
        language: String,
        recognition_shift: Shift,
        engine: String,
        grammar_parameter: GrammarParameter,
        class_token: ClassToken,
        filter: FilterSet,
        tokens: Value,
        intent_properties: IntentProperties,
        timezone: String,
        recognition_mode: String,
        enable_voice_activity_detection: bool,
        interruptible_dialog: bool,
        interruption_shift: Shift,
        model: String,
        primary_language: String,
        fallback_languages: Vec<String>,
    }
);
record!(
    /// `stt_properties.grammar_parameter`.
    GrammarParameter { parameters: Vec<KeyValue> }
);
record!(
    /// `{key, value}`.
    KeyValue { key: String, value: String }
);
record!(
    /// `stt_properties.class_token`.
    ClassToken { tokens: Value }
);
record!(
    /// `stt_properties.filter`.
    FilterSet { filters: Value }
);
record!(
    /// `stt_properties.intent_properties`.
    IntentProperties { classifier: ClassifierRef, llm_properties: LlmProperties, threshold: Number }
);
record!(
    /// A classifier reference; version 0 means the classifier as the unversioned surface serves it.
    ClassifierRef { id: String, version: Number }
);
record!(
    /// Language-model settings.
    LlmProperties {
        engine: String,
        model: String,
        messages: Vec<LlmMessage>,
        temperature: Number,
        provider: String,
        gdpr_required: bool,
    }
);
record!(
    /// `{role, content}`.
    LlmMessage { role: String, content: String }
);
record!(
    /// `question.statement`.
    Statement { audio: PromptAudio, is_interruptible: bool }
);
record!(
    /// `question.answer`.
    AnswerSet { answers: Vec<Answer> }
);
record!(
    /// One expected answer; its `answer_id` is the output type taken when it matches.
    Answer {
        answer_id: String,
        description: String,
        speech_input: SpeechInput,
        dtmf_input: DtmfInput,
        tag: String,
    }
);
record!(
    /// `answers[].speech_input`. `tokens` is an array of phrases (a single string is split on
    /// commas); `mode` is `contains` (default) or `exact`.
    SpeechInput { tokens: Value, mode: String, intent: IntentRef, entity: EntitySet }
);
record!(
    /// `{id}` of an intent.
    IntentRef { id: String }
);
record!(
    /// `speech_input.entity`.
    EntitySet { entities: Vec<Entity> }
);
record!(
    /// An entity to extract into a variable: `type` is one of [`crate::entity::KINDS`].
    Entity { kind as "type": String, variable: VariableRef }
);
record!(
    /// `{name}` of a variable.
    VariableRef { name: String }
);
record!(
    /// `answers[].dtmf_input`.
    DtmfInput { value: String }
);
record!(
    /// `fallback_invalid` / `fallback_empty`.
    FallbackSet { fallbacks: Vec<Fallback> }
);
record!(
    /// One fallback step: an optional prompt, then optionally the statement again.
    Fallback {
        is_repeat_statement: bool,
        audio: PromptAudio,
        is_interruptible: bool,
        kind as "type": String,
        llm_properties: LlmProperties,
    }
);
record!(
    /// `webhook` brick properties; the same shape as the webhook run request `properties`.
    WebhookProps { request: WebhookRequest, options: WebhookOptions, response_mapping: ResponseMapping }
);
record!(
    /// `webhook.request`.
    WebhookRequest {
        method: String,
        url: String,
        body: WebhookBody,
        authentication: Authentication,
        header: HeaderSet,
        insecure_skip_verify: bool,
        proxy: ProxySettings,
        attach_call_metadata: bool,
        timeout: Number,
    }
);
record!(
    /// `request.body`: `type` is `json`, `text`, `form` or empty (no body).
    WebhookBody { data: String, kind as "type": String, form_values: Vec<NameValue> }
);
record!(
    /// `request.authentication`: `type` is `none`/empty, `basic` or `bearer`.
    Authentication { kind as "type": String, basic: BasicAuth, bearer: BearerAuth }
);
record!(
    /// Basic credentials.
    BasicAuth { username: String, password: String }
);
record!(
    /// Bearer token.
    BearerAuth { token: String }
);
record!(
    /// `request.header`.
    HeaderSet { headers: Vec<NameValue> }
);
record!(
    /// `request.proxy`.
    ProxySettings { url: String }
);
record!(
    /// `webhook.options`.
    WebhookOptions { is_async as "async": bool, timeout: Number }
);
record!(
    /// `webhook.response_mapping`.
    ResponseMapping { variables: Vec<MappingEntry> }
);
record!(
    /// One mapping: `name` is the target variable (written `{{name}}`), `source` is `body`
    /// (JSONPath in `path`) or `header` (header name in `path`).
    MappingEntry { name: String, source: String, path: String, set_if_not_found: String }
);
record!(
    /// `data_mapping`: `input` is rendered, parsed as JSON, and each entry's JSONPath is applied.
    DataMappingProps { input: String, variables: Vec<MappingEntry> }
);

// ---------------------------------------------------------------- kinds

/// Declares the brick kinds once: the `Bricks` struct, the `BrickKind` enum and `BrickProps`.
macro_rules! kinds {
    ($( $field:ident => $variant:ident ( $props:ty ) ),* $(,)?) => {
        /// `constructor.bricks`: one group per kind; unknown kinds stay in `extra` (SCN101).
        #[derive(Debug, Clone, Default, PartialEq, Serialize)]
        pub struct Bricks {
            $(
                #[serde(default, skip_serializing_if = "Opt::is_absent")]
                pub $field: Opt<KindGroup<$props>>,
            )*
            /// Unknown brick kinds, kept verbatim.
            #[serde(flatten)]
            pub extra: Map<String, Value>,
        }

        /// Every known brick kind.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum BrickKind { $( $variant, )* }

        impl BrickKind {
            /// All kinds, in snapshot order.
            pub const ALL: &'static [BrickKind] = &[ $( BrickKind::$variant, )* ];
            /// The key of this kind in `constructor.bricks`.
            pub fn as_str(self) -> &'static str {
                match self { $( BrickKind::$variant => stringify!($field), )* }
            }
            /// Parses a kind key.
            pub fn parse(s: &str) -> Option<BrickKind> {
                match s { $( stringify!($field) => Some(BrickKind::$variant), )* _ => None }
            }
        }

        impl BrickKind {
            /// Calls `f` with empty properties of this kind (so an absent `properties` object is
            /// validated like an empty one).
            pub fn with_empty_props<R>(self, f: impl FnOnce(BrickProps<'_>) -> R) -> R {
                match self { $( BrickKind::$variant => f(BrickProps::$variant(&<$props>::default())), )* }
            }
        }

        /// Borrowed typed properties of one brick.
        #[derive(Debug, Clone, Copy)]
        pub enum BrickProps<'a> { $( $variant(&'a $props), )* }

        impl FromJson for Bricks {
            fn from_json(v: Value) -> Result<Self, Value> {
                let Value::Object(map) = v else { return Err(v) };
                let mut out = Bricks::default();
                for (k, val) in map {
                    match k.as_str() {
                        $( stringify!($field) => out.$field = Opt::from_field(Some(val)), )*
                        _ => {
                            out.extra.insert(k, val);
                        }
                    }
                }
                Ok(out)
            }
        }

        impl<'de> Deserialize<'de> for Bricks {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                from_deserializer(d)
            }
        }

        impl Bricks {
            /// Calls `f` for every brick, in kind order then array order.
            pub fn for_each<'a>(&'a self, mut f: impl FnMut(BrickRef<'a>)) {
                $(
                    if let Opt::Set(group) = &self.$field {
                        for (index, b) in group.v1.items().iter().enumerate() {
                            f(BrickRef::of(BrickKind::$variant, index, b, BrickProps::$variant));
                        }
                    }
                )*
            }
            /// The brick at `index` of its kind's `v1` array (the position a [`BrickRef`]
            /// names), so an index can keep positions rather than borrows.
            pub fn get(&self, kind: BrickKind, index: usize) -> Option<BrickRef<'_>> {
                match kind {
                    $(
                        BrickKind::$variant => {
                            let Opt::Set(group) = &self.$field else { return None };
                            let b = group.v1.items().get(index)?;
                            Some(BrickRef::of(kind, index, b, BrickProps::$variant))
                        }
                    )*
                }
            }
            /// Keys of kind groups beside `v1`: (kind, key).
            pub fn unknown_group_keys(&self) -> Vec<(BrickKind, &str)> {
                let mut out = Vec::new();
                $(
                    if let Opt::Set(g) = &self.$field {
                        out.extend(g.extra.keys().map(|k| (BrickKind::$variant, k.as_str())));
                    }
                )*
                out
            }
            /// Kind groups whose value is not of the expected shape: (kind, offending value).
            pub fn invalid_groups(&self) -> Vec<(BrickKind, Value)> {
                let mut out = Vec::new();
                $(
                    match &self.$field {
                        Opt::Invalid(v) => out.push((BrickKind::$variant, v.clone())),
                        Opt::Set(g) => if let Some(v) = g.v1.invalid() { out.push((BrickKind::$variant, v.clone())) },
                        _ => {}
                    }
                )*
                out
            }
        }
    };
}

kinds! {
    audio => Audio(AudioProps),
    audio_file => AudioFile(AudioFileProps),
    audio_tts => AudioTts(AudioTtsProps),
    sms => Sms(SmsProps),
    goal => Goal(GoalProps),
    end_call => EndCall(EndCallProps),
    assignment => Assignment(AssignmentProps),
    increment => Increment(IncrementProps),
    condition_group => ConditionGroup(ConditionGroupProps),
    start_tree => StartTree(EmptyProps),
    inbound_call => InboundCall(EmptyProps),
    end => End(EmptyProps),
    start_call => StartCall(StartCallProps),
    outbound_call => OutboundCall(OutboundCallProps),
    call_transfer => CallTransfer(CallTransferProps),
    question => Question(QuestionProps),
    webhook => Webhook(WebhookProps),
    data_mapping => DataMapping(DataMappingProps),
}

/// Bricks are walked one by one by validation (with their own paths), not as a whole.
impl crate::walk::Walk for Bricks {
    const EXPECTED: &'static str = "an object";
    fn walk(&self, _: &mut String, _: &mut dyn crate::walk::Visitor) {}
}

/// Raw parts of a brick that validation needs beyond the typed view.
#[derive(Debug, Clone, Copy)]
pub struct RawBrick<'a> {
    pub id: &'a Opt<String>,
    pub properties_invalid: Option<&'a Value>,
    pub outputs_invalid: Option<&'a Value>,
    /// Keys of the brick entry beside id, description, properties and outputs.
    pub extra: &'a Map<String, Value>,
}

/// A borrowed, kind-erased view of one brick.
#[derive(Debug, Clone, Copy)]
pub struct BrickRef<'a> {
    pub kind: BrickKind,
    /// Position in its kind's `v1` array.
    pub index: usize,
    pub id: &'a str,
    pub description: &'a str,
    pub outputs: &'a [Output],
    /// `None` when `properties` is absent, null or not an object.
    pub props: Option<BrickProps<'a>>,
    pub raw: RawBrick<'a>,
}

impl<'a> BrickRef<'a> {
    /// The view of brick `b`, at `index` of kind `kind`, whose properties `props` wraps.
    fn of<P>(
        kind: BrickKind,
        index: usize,
        b: &'a Brick<P>,
        props: fn(&'a P) -> BrickProps<'a>,
    ) -> BrickRef<'a> {
        BrickRef {
            kind,
            index,
            id: b.id.str(),
            description: b.description.str(),
            outputs: b.outputs.items(),
            props: b.properties.get().map(props),
            raw: RawBrick {
                id: &b.id,
                properties_invalid: b.properties.invalid(),
                outputs_invalid: b.outputs.invalid(),
                extra: &b.extra,
            },
        }
    }

    /// The id of the brick the output of type `kind` leads to ("" when none).
    pub fn next_of(&self, kind: &str) -> Option<&'a Output> {
        self.outputs.iter().find(|o| o.kind.str() == kind)
    }
}

impl BrickKind {
    /// Kinds that begin a tree.
    pub fn is_root(self) -> bool {
        matches!(
            self,
            BrickKind::StartCall
                | BrickKind::OutboundCall
                | BrickKind::InboundCall
                | BrickKind::StartTree
        )
    }
}

impl Snapshot {
    /// Parses a snapshot value. Only fails when the value is not a JSON object: every other
    /// shape problem is kept in the model and reported by validation.
    pub fn from_value(v: &Value) -> Result<Snapshot, serde_json::Error> {
        Snapshot::from_owned(v.clone())
    }
    /// Like [`Snapshot::from_value`], consuming the value (no copy).
    pub fn from_owned(v: Value) -> Result<Snapshot, serde_json::Error> {
        Snapshot::from_json(v)
            .map_err(|_| serde::de::Error::custom("the snapshot must be a JSON object"))
    }
    /// The snapshot back as a JSON value (the same value it was parsed from).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
    /// The bricks, or an empty set when `constructor.bricks` is absent or malformed.
    pub fn bricks(&self) -> Option<&Bricks> {
        self.constructor.get().and_then(|c| c.bricks.get())
    }
    /// Scenario-level defaults from the first `start_call` brick.
    pub fn start_call(&self) -> Option<&StartCallProps> {
        let b = self.bricks()?;
        let g = b.start_call.get()?;
        g.v1.items().first()?.properties.get()
    }
}
