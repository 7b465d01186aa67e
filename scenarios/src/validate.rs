//! Scenario validation: every problem at once, as SCN1xx entries (see `docs/scenario-codes.md`).
//!
//! One pass collects the bricks, one builds the id index, one walks the graph from the roots,
//! and one checks each brick's properties; all linear in the size of the snapshot.

use std::collections::{HashMap, HashSet};

use serde_json::{Number, Value};

use crate::codes::{Code, ScenarioError, value_text};
use crate::condition::{Combine, ElementOp};
use crate::model::*;
use crate::opt::Opt;
use crate::template;
use crate::walk::{Visitor, Walk, check_fields, check_fields_as, misspelt_key, type_error};
use crate::webhook;

/// Lookups validation needs from the outside world; the control plane implements it over its
/// store and its audio resolver. They must be cheap (validation calls them once per
/// reference).
pub trait ValidationContext {
    /// Whether the account has classifier `id` at `version` (0 = the unversioned surface).
    fn classifier_exists(&self, id: &str, version: i64) -> bool;
    /// Why the account may not play this audio reference (written without placeholders);
    /// None when it may.
    fn audio_problem(&self, reference: &str) -> Option<RefProblem>;
    /// Why a webhook or proxy url (written without placeholders) will not be called; None
    /// when it may.
    fn url_problem(&self, _url: &str) -> Option<String> {
        None
    }
    /// Whether the node speaks with the synthesizer `engine` (a non-empty brick `engine`
    /// of TTS settings or of an audio_tts brick); every name by default.
    fn synthesizer_known(&self, _engine: &str) -> bool {
        true
    }
    /// Whether the account may recognize with `engine` (a non-empty `engine` of
    /// `stt_general` or `stt_properties`); every name by default.
    fn recognizer_known(&self, _engine: &str) -> bool {
        true
    }
}

/// Why a reference cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefProblem {
    /// Nothing the account may use is there (SCN118).
    Missing(String),
    /// The form of the reference is not allowed (SCN123).
    Refused(String),
}

/// A context that accepts every reference (for structure-only validation and tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptAll;

impl ValidationContext for AcceptAll {
    fn classifier_exists(&self, _: &str, _: i64) -> bool {
        true
    }
    fn audio_problem(&self, _: &str) -> Option<RefProblem> {
        None
    }
}

/// Output types the interpreter takes, beyond each brick's own branch ids.
pub mod output {
    /// The catch-all of every non-terminal brick; taken when the specific output is absent.
    pub const NEXT: &str = "next";
    /// condition_group: no condition matched.
    pub const ELSE: &str = "else";
    /// question: fallback_invalid exhausted.
    pub const INVALID: &str = "invalid";
    /// question: fallback_empty exhausted.
    pub const EMPTY: &str = "empty";
    /// webhook status processed.
    pub const PROCESSED: &str = "processed";
    /// webhook status fail.
    pub const FAIL: &str = "fail";
    /// sms / call_transfer succeeded.
    pub const SUCCESS: &str = "success";
    /// sms / call_transfer failed.
    pub const FAILURE: &str = "failure";
    /// call_transfer not answered in time.
    pub const TIMEOUT: &str = "timeout";
    /// outbound_call: a person answered (or the verdict is unknown).
    pub const HUMAN: &str = "human";
    /// outbound_call: an answering machine answered.
    pub const VOICEMAIL: &str = "voicemail";
}

/// The fixed output types of a kind (branch ids of questions and condition groups come on top).
pub fn fixed_output_types(kind: BrickKind) -> &'static [&'static str] {
    use output::*;
    match kind {
        BrickKind::End | BrickKind::EndCall => &[],
        BrickKind::Sms => &[NEXT, SUCCESS, FAILURE],
        BrickKind::OutboundCall => &[NEXT, HUMAN, VOICEMAIL],
        BrickKind::CallTransfer => &[NEXT, SUCCESS, FAILURE, TIMEOUT],
        BrickKind::Webhook => &[NEXT, PROCESSED, FAIL],
        BrickKind::ConditionGroup => &[NEXT, ELSE],
        BrickKind::Question => &[NEXT, INVALID, EMPTY],
        _ => &[NEXT],
    }
}

fn output_allowed(b: &BrickRef<'_>, t: &str) -> bool {
    if fixed_output_types(b.kind).contains(&t) {
        return true;
    }
    match b.props {
        Some(BrickProps::ConditionGroup(p)) => p.condition.get().is_some_and(|c| {
            c.conditions
                .items()
                .iter()
                .any(|c| c.condition_id.str() == t)
        }),
        Some(BrickProps::Question(p)) => p
            .answer
            .get()
            .is_some_and(|a| a.answers.items().iter().any(|a| a.answer_id.str() == t)),
        _ => false,
    }
}

/// Everything validation found: errors (the snapshot cannot be published or run) and
/// warnings ([`Code::is_warning`]: reported, never refusing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validation {
    pub errors: Vec<ScenarioError>,
    pub warnings: Vec<ScenarioError>,
}

impl Validation {
    /// Validates a snapshot.
    pub fn of(snapshot: &Snapshot, ctx: &dyn ValidationContext) -> Validation {
        let mut v = Validation::default();
        for e in entries(snapshot, ctx) {
            let warning = Code::ALL
                .iter()
                .any(|c| c.is_warning() && c.as_str() == e.code);
            if warning {
                v.warnings.push(e);
            } else {
                v.errors.push(e);
            }
        }
        v
    }

    /// Validates a raw snapshot value.
    pub fn of_value(v: &Value, ctx: &dyn ValidationContext) -> Validation {
        match Snapshot::from_value(v) {
            Ok(s) => Validation::of(&s, ctx),
            Err(_) => Validation {
                errors: vec![
                    ScenarioError::new(Code::MalformedStructure, "the snapshot must be an object")
                        .value(value_text(v)),
                ],
                warnings: Vec::new(),
            },
        }
    }
}

/// Validates a raw snapshot value: its errors (see [`Validation::of_value`] for warnings too).
pub fn validate_value(v: &Value, ctx: &dyn ValidationContext) -> Vec<ScenarioError> {
    Validation::of_value(v, ctx).errors
}

/// Validates a snapshot; an empty list means it can run (see [`Validation::of`] for
/// warnings too).
pub fn validate(snapshot: &Snapshot, ctx: &dyn ValidationContext) -> Vec<ScenarioError> {
    Validation::of(snapshot, ctx).errors
}

/// Every entry, errors and warnings, in the order they are found.
fn entries(snapshot: &Snapshot, ctx: &dyn ValidationContext) -> Vec<ScenarioError> {
    let mut out = Vec::new();
    if let Opt::Invalid(v) = &snapshot.name {
        out.push(type_error("name", "a string", v));
    }
    for key in snapshot.extra.keys() {
        out.extend(misspelt_key(key, key, Snapshot::FIELDS));
    }
    if let Opt::Set(c) = &snapshot.constructor {
        for key in c.extra.keys() {
            out.extend(misspelt_key(
                &format!("constructor.{key}"),
                key,
                Constructor::FIELDS,
            ));
        }
    }
    let bricks = match &snapshot.constructor {
        Opt::Set(c) => match &c.bricks {
            Opt::Set(b) => Some(b),
            Opt::Invalid(v) => {
                out.push(
                    ScenarioError::new(
                        Code::MalformedStructure,
                        "constructor.bricks must be an object",
                    )
                    .property("constructor.bricks")
                    .value(value_text(v)),
                );
                None
            }
            _ => None,
        },
        Opt::Invalid(v) => {
            out.push(
                ScenarioError::new(Code::MalformedStructure, "constructor must be an object")
                    .property("constructor")
                    .value(value_text(v)),
            );
            None
        }
        _ => None,
    };
    let Some(bricks) = bricks else {
        if out.is_empty() {
            out.push(ScenarioError::new(
                Code::MissingStart,
                "the snapshot has no constructor.bricks",
            ));
        }
        return out;
    };
    for key in bricks.extra.keys() {
        out.push(
            ScenarioError::new(Code::UnknownKind, format!("unknown brick kind {key:?}"))
                .property(format!("constructor.bricks.{key}"))
                .value(key.as_str()),
        );
    }
    for (kind, key) in bricks.unknown_group_keys() {
        out.extend(misspelt_key(
            &format!("constructor.bricks.{}.{key}", kind.as_str()),
            key,
            KIND_GROUP_FIELDS,
        ));
    }
    for (kind, v) in bricks.invalid_groups() {
        out.push(
            ScenarioError::new(
                Code::MalformedStructure,
                format!(
                    "constructor.bricks.{} must be {{\"v1\": [brick...]}}",
                    kind.as_str()
                ),
            )
            .property(format!("constructor.bricks.{}", kind.as_str()))
            .value(value_text(&v)),
        );
    }

    let mut all: Vec<BrickRef<'_>> = Vec::new();
    bricks.for_each(|b| all.push(b));

    // Ids.
    let mut by_id: HashMap<&str, usize> = HashMap::with_capacity(all.len());
    for (i, b) in all.iter().enumerate() {
        let at = || format!("{}.v1[{}]", b.kind.as_str(), b.index);
        if let Opt::Invalid(v) = b.raw.id {
            out.push(type_error(
                &format!("constructor.bricks.{}.id", at()),
                "a string",
                v,
            ));
            continue;
        }
        if b.id.trim().is_empty() {
            out.push(
                ScenarioError::new(Code::MissingId, format!("brick {} has no id", at()))
                    .property(format!("constructor.bricks.{}.id", at())),
            );
            continue;
        }
        if by_id.contains_key(b.id) {
            let mut e = ScenarioError::new(
                Code::DuplicateId,
                format!("brick id {:?} is used more than once", b.id),
            )
            .node(b.id);
            e.duplicate_node_index = at();
            out.push(e);
        } else {
            by_id.insert(b.id, i);
        }
    }

    // Roots.
    let entry_kinds = [
        BrickKind::StartCall,
        BrickKind::OutboundCall,
        BrickKind::InboundCall,
    ];
    let mut roots: Vec<usize> = Vec::new();
    for kind in entry_kinds.iter().chain([BrickKind::StartTree].iter()) {
        let mut seen = 0;
        for (i, b) in all.iter().enumerate().filter(|(_, b)| b.kind == *kind) {
            seen += 1;
            if *kind != BrickKind::StartTree && seen > 1 {
                let mut e = ScenarioError::new(
                    Code::DuplicateStart,
                    format!("more than one {} brick", kind.as_str()),
                )
                .node(b.id);
                e.duplicate_tree_index = format!("{}.v1[{}]", kind.as_str(), b.index);
                out.push(e);
            }
            roots.push(i);
        }
    }
    if !all.iter().any(|b| entry_kinds.contains(&b.kind)) {
        out.push(ScenarioError::new(
            Code::MissingStart,
            "the scenario needs a start_call, outbound_call or inbound_call brick",
        ));
    }

    // Reachability and tree membership.
    let mut tree: Vec<Option<usize>> = vec![None; all.len()];
    let mut stack: Vec<usize> = Vec::new();
    for &r in &roots {
        if tree[r].is_some() {
            continue;
        }
        tree[r] = Some(r);
        stack.push(r);
        while let Some(i) = stack.pop() {
            for o in all[i].outputs {
                if let Some(&j) = by_id.get(o.next.str())
                    && tree[j].is_none()
                {
                    tree[j] = Some(r);
                    stack.push(j);
                }
            }
        }
    }

    // Variables the scenario sets, wherever it sets them (a brick may run after any other).
    let mut defined: HashSet<&str> = HashSet::new();
    for b in &all {
        if let Some(props) = b.props {
            name_fields(props, &mut |_, name, sets| {
                if sets && let Some(n) = template::unwrap_target(name) {
                    defined.insert(n);
                }
            });
        }
    }

    // Per brick.
    for (i, b) in all.iter().enumerate() {
        let first = out.len();
        let at = || format!("constructor.bricks.{}.v1[{}]", b.kind.as_str(), b.index);
        if tree[i].is_none() && !b.id.is_empty() {
            out.push(ScenarioError::new(
                Code::UnreachableBrick,
                format!("brick {:?} is not reachable from any start", b.id),
            ));
        }
        if let Some(v) = b.raw.properties_invalid {
            out.push(
                ScenarioError::new(
                    Code::MalformedStructure,
                    format!("{}.properties must be an object", at()),
                )
                .property("properties")
                .value(value_text(v)),
            );
        }
        if let Some(v) = b.raw.outputs_invalid {
            out.push(
                ScenarioError::new(
                    Code::MalformedStructure,
                    format!("{}.outputs must be an array of objects", at()),
                )
                .property("outputs")
                .value(value_text(v)),
            );
        }
        for key in b.raw.extra.keys() {
            out.extend(misspelt_key(key, key, BRICK_FIELDS));
        }
        check_outputs(b, &by_id, &mut out);
        if let Some(props) = b.props {
            check_variables(props, &defined, &mut out);
        }
        match b.props {
            Some(props) => check_props(props, ctx, &mut out),
            None if b.raw.properties_invalid.is_none() => b
                .kind
                .with_empty_props(|props| check_props(props, ctx, &mut out)),
            None => {}
        }
        let tree_id = tree[i].map(|r| all[r].id).unwrap_or("");
        for e in &mut out[first..] {
            if e.node_id.is_empty() {
                e.node_id = b.id.to_string();
            }
            e.tree_id = tree_id.to_string();
        }
    }
    out
}

fn check_outputs(b: &BrickRef<'_>, by_id: &HashMap<&str, usize>, out: &mut Vec<ScenarioError>) {
    let mut seen: HashSet<&str> = HashSet::new();
    for (k, o) in b.outputs.iter().enumerate() {
        let mut path = format!("outputs[{k}]");
        check_fields_as(o, &path, misspelt_key, out);
        let t = o.kind.str();
        if t.trim().is_empty() {
            if o.kind.invalid().is_none() {
                out.push(
                    ScenarioError::new(Code::MissingProperty, "an output needs a type")
                        .property(format!("{path}.type")),
                );
            }
        } else if !seen.insert(t) {
            let mut e = ScenarioError::new(
                Code::DuplicateOutput,
                format!("output type {t:?} appears more than once"),
            )
            .output(t);
            e.duplicate_node_index = path.clone();
            out.push(e);
        } else if !output_allowed(b, t) {
            out.push(
                ScenarioError::new(
                    Code::UnknownOutputType,
                    format!("a {} brick never takes output {t:?}", b.kind.as_str()),
                )
                .output(t)
                .property(format!("{path}.type"))
                .value(t),
            );
        }
        let next = o.next.str();
        if !next.is_empty() && !by_id.contains_key(next) {
            path.push_str(".next");
            out.push(
                ScenarioError::new(
                    Code::DanglingOutput,
                    format!("output {t:?} leads to unknown brick {next:?}"),
                )
                .output(t)
                .property(path)
                .value(next),
            );
        }
    }
}

// ---------------------------------------------------------------- property checks

fn missing(path: &str, what: &str) -> ScenarioError {
    ScenarioError::new(
        Code::MissingProperty,
        format!("{path} is required ({what})"),
    )
    .property(path)
}

/// Required non-empty string; a mistyped value is reported by the field walk instead.
fn required(o: &Opt<String>, path: &str, what: &str, out: &mut Vec<ScenarioError>) {
    if o.invalid().is_none() && o.str().trim().is_empty() {
        out.push(missing(path, what));
    }
}

fn range(
    o: &Opt<Number>,
    path: &str,
    lo: f64,
    hi: f64,
    integer: bool,
    out: &mut Vec<ScenarioError>,
) -> Option<f64> {
    let n = o.get()?;
    let f = n.as_f64().unwrap_or(f64::NAN);
    let ok = (lo..=hi).contains(&f) && (!integer || f.fract() == 0.0);
    if !ok {
        let kind = if integer { "an integer" } else { "a number" };
        out.push(
            ScenarioError::new(
                Code::OutOfRange,
                format!("{path} must be {kind} between {lo} and {hi}"),
            )
            .property(path)
            .value(n.to_string()),
        );
        return None;
    }
    Some(f)
}

fn one_of(o: &Opt<String>, path: &str, allowed: &[&str], out: &mut Vec<ScenarioError>) {
    if let Opt::Set(s) = o
        && !allowed.contains(&s.as_str())
    {
        out.push(
            ScenarioError::new(
                Code::InvalidEnumValue,
                format!("{path} must be one of {allowed:?}"),
            )
            .property(path)
            .value(s.as_str()),
        );
    }
}

fn audio_ref(url: &str, path: &str, ctx: &dyn ValidationContext, out: &mut Vec<ScenarioError>) {
    let url = url.trim();
    if url.is_empty() || template::has_open(url) {
        return;
    }
    let (code, message) = match ctx.audio_problem(url) {
        None => return,
        Some(RefProblem::Missing(m)) => (Code::UnknownAudio, m),
        Some(RefProblem::Refused(m)) => (Code::RefusedReference, m),
    };
    out.push(ScenarioError::new(code, message).property(path).value(url));
}

/// Reports a webhook's url or proxy url the context refuses (SCN123); templated urls are
/// judged when the call renders them.
fn outbound_url(url: &str, path: &str, ctx: &dyn ValidationContext, out: &mut Vec<ScenarioError>) {
    let url = url.trim();
    if url.is_empty() || template::has_open(url) || url::Url::parse(url).is_err() {
        return;
    }
    if let Some(why) = ctx.url_problem(url) {
        out.push(
            ScenarioError::new(Code::RefusedReference, why)
                .property(path)
                .value(url),
        );
    }
}

fn tts(
    t: &Opt<TtsSettings>,
    path: &str,
    ctx: &dyn ValidationContext,
    out: &mut Vec<ScenarioError>,
) {
    if let Some(t) = t.get() {
        range(&t.speed, &format!("{path}.speed"), 0.0, 4.0, false, out);
        synthesizer(&t.engine, &format!("{path}.engine"), ctx, out);
    }
}

/// SCN125: a named synthesizer the node does not speak with (engine names are not
/// templated: a call would fall back to the default engine).
fn synthesizer(
    engine: &Opt<String>,
    path: &str,
    ctx: &dyn ValidationContext,
    out: &mut Vec<ScenarioError>,
) {
    let name = engine.str();
    if !name.is_empty() && !ctx.synthesizer_known(name) {
        out.push(
            ScenarioError::new(
                Code::UnknownSynthesizer,
                format!("{path}: no synthesizer is named {name:?}"),
            )
            .property(path)
            .value(name),
        );
    }
}

/// SCN126: a named recognizer the account cannot use.
fn recognizer(
    engine: &Opt<String>,
    path: &str,
    ctx: &dyn ValidationContext,
    out: &mut Vec<ScenarioError>,
) {
    let name = engine.str();
    if !name.is_empty() && !ctx.recognizer_known(name) {
        out.push(
            ScenarioError::new(
                Code::UnknownRecognizer,
                format!("{path}: no recognizer is named {name:?}"),
            )
            .property(path)
            .value(name),
        );
    }
}

/// Calls `f(path, value, sets)` for every property holding a variable name rather than a
/// template: the targets bricks set (`sets`: assignment, increment, data_mapping and
/// response-mapping targets, entity variables) and the variables conditions read.
fn name_fields<'a>(props: BrickProps<'a>, f: &mut dyn FnMut(String, &'a str, bool)) {
    match props {
        BrickProps::Assignment(p) => {
            for (i, v) in p.variables.items().iter().enumerate() {
                f(
                    format!("properties.variables[{i}].name"),
                    v.name.str(),
                    true,
                );
            }
        }
        BrickProps::Increment(p) => {
            for (i, v) in p.variables.items().iter().enumerate() {
                f(
                    format!("properties.variables[{i}].variable"),
                    v.variable.str(),
                    true,
                );
            }
        }
        BrickProps::DataMapping(p) => {
            for (i, v) in p.variables.items().iter().enumerate() {
                f(
                    format!("properties.variables[{i}].name"),
                    v.name.str(),
                    true,
                );
            }
        }
        BrickProps::Webhook(p) => {
            let maps = p.response_mapping.get().map(|m| m.variables.items());
            for (i, v) in maps.unwrap_or(&[]).iter().enumerate() {
                f(
                    format!("properties.response_mapping.variables[{i}].name"),
                    v.name.str(),
                    true,
                );
            }
        }
        BrickProps::Question(p) => {
            let answers = p.answer.get().map(|a| a.answers.items()).unwrap_or(&[]);
            for (i, a) in answers.iter().enumerate() {
                let Some(si) = a.speech_input.get() else {
                    continue;
                };
                let entities = si.entity.get().map(|e| e.entities.items()).unwrap_or(&[]);
                for (k, e) in entities.iter().enumerate() {
                    if let Some(v) = e.variable.get() {
                        f(
                            format!(
                                "properties.answer.answers[{i}].speech_input.entity.entities[{k}].variable.name"
                            ),
                            v.name.str(),
                            true,
                        );
                    }
                }
            }
        }
        BrickProps::ConditionGroup(p) => {
            let conditions = p.condition.get().map(|c| c.conditions.items());
            for (i, c) in conditions.unwrap_or(&[]).iter().enumerate() {
                for (k, el) in c.elements.items().iter().enumerate() {
                    f(
                        format!("properties.condition.conditions[{i}].elements[{k}].variable"),
                        el.variable.str(),
                        false,
                    );
                }
            }
        }
        _ => {}
    }
}

/// SCN127 (warning): variables a brick reads, in its templates or its conditions, that no
/// brick sets and no built-in provides. The dispatch `data` is not known before a call, so
/// such a variable may still come from it: a warning, one per variable and brick.
fn check_variables(props: BrickProps<'_>, defined: &HashSet<&str>, out: &mut Vec<ScenarioError>) {
    struct Reads<'s> {
        names: HashSet<String>,
        unknown: Vec<(String, String)>,
        defined: &'s HashSet<&'s str>,
    }
    impl Reads<'_> {
        fn read(&mut self, path: &str, var: &str) {
            if !self.defined.contains(var)
                && !crate::interpreter::is_builtin_variable(var)
                && !self.unknown.iter().any(|(_, v)| v == var)
            {
                self.unknown.push((path.to_string(), var.to_string()));
            }
        }
    }
    impl Visitor for Reads<'_> {
        fn string(&mut self, path: &str, s: &str) {
            if self.names.contains(path) || !template::has_open(s) {
                return;
            }
            for var in template::variables(s) {
                self.read(path, var);
            }
        }
        fn invalid(&mut self, _: &str, _: &'static str, _: &Value) {}
        fn unknown(&mut self, _: &str, _: &str, _: &'static [&'static str]) {}
    }
    let mut reads = Reads {
        names: HashSet::new(),
        unknown: Vec::new(),
        defined,
    };
    name_fields(props, &mut |path, _, _| {
        reads.names.insert(path);
    });
    let mut path = String::from("properties");
    match props {
        BrickProps::Audio(p) => p.walk(&mut path, &mut reads),
        BrickProps::AudioFile(p) => p.walk(&mut path, &mut reads),
        BrickProps::AudioTts(p) => p.walk(&mut path, &mut reads),
        BrickProps::Sms(p) => p.walk(&mut path, &mut reads),
        BrickProps::Goal(p) => p.walk(&mut path, &mut reads),
        BrickProps::EndCall(p) => p.walk(&mut path, &mut reads),
        BrickProps::Assignment(p) => p.walk(&mut path, &mut reads),
        BrickProps::Increment(p) => p.walk(&mut path, &mut reads),
        BrickProps::ConditionGroup(p) => p.walk(&mut path, &mut reads),
        BrickProps::StartTree(p) | BrickProps::InboundCall(p) | BrickProps::End(p) => {
            p.walk(&mut path, &mut reads)
        }
        BrickProps::StartCall(p) => p.walk(&mut path, &mut reads),
        BrickProps::OutboundCall(p) => p.walk(&mut path, &mut reads),
        BrickProps::CallTransfer(p) => p.walk(&mut path, &mut reads),
        BrickProps::Question(p) => p.walk(&mut path, &mut reads),
        BrickProps::Webhook(p) => p.walk(&mut path, &mut reads),
        BrickProps::DataMapping(p) => p.walk(&mut path, &mut reads),
    }
    // Conditions read their variable by name.
    name_fields(props, &mut |path, name, sets| {
        if !sets && let Some(var) = template::unwrap_target(name) {
            reads.read(&path, var);
        }
    });
    for (path, var) in reads.unknown {
        out.push(
            ScenarioError::new(
                Code::UnknownVariable,
                format!(
                    "{{{{{var}}}}} is set by no brick and is no built-in: unless the dispatch data provides it, it is empty"
                ),
            )
            .property(path)
            .value(var),
        );
    }
}

/// Timeouts are seconds; 10 minutes is the most any single wait may take.
const MAX_WAIT_SECS: f64 = 600.0;
/// Recognition and interruption shifts are milliseconds.
const MAX_SHIFT_MS: f64 = 60_000.0;
/// Longest DTMF entry.
const MAX_DTMF_SYMBOLS: f64 = 64.0;

fn prompt(
    p: &Opt<PromptAudio>,
    path: &str,
    ctx: &dyn ValidationContext,
    out: &mut Vec<ScenarioError>,
) {
    let Some(p) = p.get() else { return };
    let text = p.tts.get().map(|t| t.text.str()).unwrap_or("");
    let url = p.file.get().map(|f| f.url.str()).unwrap_or("");
    match p.mode.str() {
        "" if text.is_empty() && url.is_empty() => {}
        "" => out.push(missing(&format!("{path}.mode"), "tts or file")),
        "tts" => {
            if text.trim().is_empty() {
                out.push(missing(&format!("{path}.tts.text"), "the text to speak"));
            }
        }
        "file" => {
            if url.trim().is_empty() {
                out.push(missing(&format!("{path}.file.url"), "the audio file"));
            }
            audio_ref(url, &format!("{path}.file.url"), ctx, out);
        }
        _ => one_of(&p.mode, &format!("{path}.mode"), &["tts", "file"], out),
    }
}

fn llm(l: &Opt<LlmProperties>, path: &str, out: &mut Vec<ScenarioError>) {
    if let Some(l) = l.get() {
        range(
            &l.temperature,
            &format!("{path}.temperature"),
            0.0,
            2.0,
            false,
            out,
        );
    }
}

fn variable_name(name: &str, path: &str, out: &mut Vec<ScenarioError>) {
    if name.trim().is_empty() {
        out.push(missing(path, "a variable name"));
    } else if template::check(name).is_ok() && template::unwrap_target(name).is_none() {
        // A broken `{{` is already reported as SCN115 by the field walk.
        out.push(
            ScenarioError::new(
                Code::InvalidVariableName,
                format!("{name:?} is not a variable name (letters, digits, '-', '_', '.')"),
            )
            .property(path)
            .value(name),
        );
    }
}

fn check_props(props: BrickProps<'_>, ctx: &dyn ValidationContext, out: &mut Vec<ScenarioError>) {
    const P: &str = "properties";
    match props {
        BrickProps::Audio(p) => {
            check_fields(p, P, out);
            one_of(
                &p.play_mode,
                "properties.play_mode",
                &["", "sequential", "random"],
                out,
            );
            tts(&p.tts_general, "properties.tts_general", ctx, out);
            if p.audios.items().is_empty() && p.audios.invalid().is_none() {
                out.push(missing("properties.audios", "at least one prompt"));
            }
            for (i, a) in p.audios.items().iter().enumerate() {
                let at = format!("properties.audios[{i}]");
                match a.mode.str() {
                    "tts" => required(
                        a.tts_properties
                            .get()
                            .map(|t| &t.text)
                            .unwrap_or(&Opt::Absent),
                        &format!("{at}.tts_properties.text"),
                        "the text to speak",
                        out,
                    ),
                    "file" => {
                        let url = a
                            .file_properties
                            .get()
                            .map(|f| &f.url)
                            .unwrap_or(&Opt::Absent);
                        required(
                            url,
                            &format!("{at}.file_properties.url"),
                            "the audio file",
                            out,
                        );
                        audio_ref(url.str(), &format!("{at}.file_properties.url"), ctx, out);
                    }
                    "" => out.push(missing(&format!("{at}.mode"), "tts or file")),
                    _ => one_of(&a.mode, &format!("{at}.mode"), &["tts", "file"], out),
                }
            }
        }
        BrickProps::AudioFile(p) => {
            check_fields(p, P, out);
            required(&p.url, "properties.url", "the audio file", out);
            audio_ref(p.url.str(), "properties.url", ctx, out);
        }
        BrickProps::AudioTts(p) => {
            check_fields(p, P, out);
            required(&p.text, "properties.text", "the text to speak", out);
            synthesizer(&p.engine, "properties.engine", ctx, out);
        }
        BrickProps::Sms(p) => {
            check_fields(p, P, out);
            required(&p.text, "properties.text", "the message", out);
        }
        BrickProps::Goal(p) => {
            check_fields(p, P, out);
            required(&p.goal, "properties.goal", "the goal reached", out);
        }
        BrickProps::EndCall(p) => check_fields(p, P, out),
        BrickProps::Assignment(p) => {
            check_fields(p, P, out);
            for (i, v) in p.variables.items().iter().enumerate() {
                variable_name(
                    v.name.str(),
                    &format!("properties.variables[{i}].name"),
                    out,
                );
            }
        }
        BrickProps::Increment(p) => {
            check_fields(p, P, out);
            for (i, v) in p.variables.items().iter().enumerate() {
                variable_name(
                    v.variable.str(),
                    &format!("properties.variables[{i}].variable"),
                    out,
                );
            }
        }
        BrickProps::ConditionGroup(p) => {
            check_fields(p, P, out);
            let conditions = p
                .condition
                .get()
                .map(|c| c.conditions.items())
                .unwrap_or(&[]);
            if conditions.is_empty() && p.condition.invalid().is_none() {
                out.push(missing(
                    "properties.condition.conditions",
                    "at least one condition",
                ));
            }
            let mut ids = HashSet::new();
            for (i, c) in conditions.iter().enumerate() {
                let at = format!("properties.condition.conditions[{i}]");
                let id = c.condition_id.str();
                if id.trim().is_empty() {
                    out.push(missing(&format!("{at}.condition_id"), "the branch id"));
                } else if !ids.insert(id) {
                    out.push(
                        ScenarioError::new(
                            Code::DuplicateBranchId,
                            format!("condition_id {id:?} appears more than once"),
                        )
                        .property(format!("{at}.condition_id"))
                        .value(id),
                    );
                }
                if Combine::parse(c.condition_operator.str()).is_none()
                    && c.condition_operator.invalid().is_none()
                {
                    one_of(
                        &c.condition_operator,
                        &format!("{at}.condition_operator"),
                        &["and", "or"],
                        out,
                    );
                }
                if c.elements.items().is_empty() && c.elements.invalid().is_none() {
                    out.push(missing(
                        &format!("{at}.elements"),
                        "at least one comparison",
                    ));
                }
                for (k, el) in c.elements.items().iter().enumerate() {
                    let ep = format!("{at}.elements[{k}]");
                    variable_name(el.variable.str(), &format!("{ep}.variable"), out);
                    let op = el.element_operator.str();
                    match ElementOp::parse(op) {
                        Some(ElementOp::Regex) => {
                            let pat = el.value.str();
                            if !template::has_open(pat)
                                && let Err(e) = regex_syntax::Parser::new().parse(pat)
                            {
                                out.push(
                                    ScenarioError::new(
                                        Code::InvalidRegex,
                                        format!("invalid regex: {e}"),
                                    )
                                    .property(format!("{ep}.value"))
                                    .value(pat),
                                );
                            }
                        }
                        Some(_) => {}
                        None if el.element_operator.invalid().is_some() => {}
                        None if op.is_empty() => {
                            out.push(missing(&format!("{ep}.element_operator"), "the comparison"))
                        }
                        None => one_of(
                            &el.element_operator,
                            &format!("{ep}.element_operator"),
                            ElementOp::NAMES,
                            out,
                        ),
                    }
                }
            }
        }
        BrickProps::StartTree(p) | BrickProps::InboundCall(p) | BrickProps::End(p) => {
            check_fields(p, P, out)
        }
        BrickProps::StartCall(p) => {
            check_fields(p, P, out);
            tts(&p.tts_general, "properties.tts_general", ctx, out);
            if let Some(g) = p.stt_general.get() {
                recognizer(&g.engine, "properties.stt_general.engine", ctx, out);
            }
        }
        BrickProps::OutboundCall(p) => check_fields(p, P, out),
        BrickProps::CallTransfer(p) => {
            check_fields(p, P, out);
            required(
                &p.number,
                "properties.number",
                "the number to transfer to",
                out,
            );
            one_of(
                &p.transfer_mode,
                "properties.transfer_mode",
                &["", "blind", "bridged"],
                out,
            );
            range(
                &p.timeout,
                "properties.timeout",
                0.0,
                MAX_WAIT_SECS,
                false,
                out,
            );
            tts(&p.tts_properties, "properties.tts_properties", ctx, out);
            prompt(
                &p.message_to_manager,
                "properties.message_to_manager",
                ctx,
                out,
            );
            prompt(
                &p.message_to_client,
                "properties.message_to_client",
                ctx,
                out,
            );
        }
        BrickProps::Question(p) => check_question(p, ctx, out),
        BrickProps::Webhook(p) => {
            check_fields(p, P, out);
            webhook::validate_webhook(p, "properties.", out);
            if let Some(r) = p.request.get() {
                outbound_url(r.url.str(), "properties.request.url", ctx, out);
                if let Some(px) = r.proxy.get() {
                    outbound_url(px.url.str(), "properties.request.proxy.url", ctx, out);
                }
            }
        }
        BrickProps::DataMapping(p) => {
            check_fields(p, P, out);
            required(&p.input, "properties.input", "the JSON to map from", out);
            webhook::validate_mapping(&p.variables, "properties.variables", false, out);
        }
    }
}

fn check_question(p: &QuestionProps, ctx: &dyn ValidationContext, out: &mut Vec<ScenarioError>) {
    check_fields(p, "properties", out);
    crate::listening::question_entity_unread(p.entity.get(), out);
    tts(&p.tts_properties, "properties.tts_properties", ctx, out);
    one_of(
        &p.input_mode,
        "properties.input_mode",
        &["", "speech", "dtmf", "speech_and_dtmf"],
        out,
    );
    if let Some(d) = p.dtmf_properties.get() {
        let dp = "properties.dtmf_properties";
        range(
            &d.dtmf_timeout,
            &format!("{dp}.dtmf_timeout"),
            0.0,
            MAX_WAIT_SECS,
            false,
            out,
        );
        range(
            &d.no_input_timeout,
            &format!("{dp}.no_input_timeout"),
            0.0,
            MAX_WAIT_SECS,
            false,
            out,
        );
        let min = range(
            &d.min_symbols,
            &format!("{dp}.min_symbols"),
            0.0,
            MAX_DTMF_SYMBOLS,
            true,
            out,
        );
        let max = range(
            &d.max_symbols,
            &format!("{dp}.max_symbols"),
            0.0,
            MAX_DTMF_SYMBOLS,
            true,
            out,
        );
        if let (Some(min), Some(max)) = (min, max)
            && max > 0.0
            && min > max
        {
            out.push(
                ScenarioError::new(
                    Code::OutOfRange,
                    "dtmf min_symbols is greater than max_symbols",
                )
                .property(format!("{dp}.min_symbols"))
                .value(min.to_string()),
            );
        }
        let key = d.finish_on_key.str();
        let key_ok = key.is_empty()
            || (key.chars().count() == 1 && key.chars().all(|c| "0123456789*#".contains(c)));
        if !key_ok {
            out.push(
                ScenarioError::new(
                    Code::InvalidEnumValue,
                    "finish_on_key must be one of 0-9, * or #",
                )
                .property(format!("{dp}.finish_on_key"))
                .value(key),
            );
        }
    }
    if let Some(s) = p.stt_properties.get() {
        let sp = "properties.stt_properties";
        recognizer(&s.engine, &format!("{sp}.engine"), ctx, out);
        crate::listening::unapplied(s, sp, out);
        range(
            &s.speech_timeout,
            &format!("{sp}.speech_timeout"),
            0.0,
            MAX_WAIT_SECS,
            false,
            out,
        );
        range(
            &s.no_input_timeout,
            &format!("{sp}.no_input_timeout"),
            0.0,
            MAX_WAIT_SECS,
            false,
            out,
        );
        for (name, shift) in [
            ("recognition_shift", &s.recognition_shift),
            ("interruption_shift", &s.interruption_shift),
        ] {
            if let Some(sh) = shift.get() {
                range(
                    &sh.duration,
                    &format!("{sp}.{name}.duration"),
                    0.0,
                    MAX_SHIFT_MS,
                    false,
                    out,
                );
            }
        }
        if let Some(ip) = s.intent_properties.get() {
            let ipp = format!("{sp}.intent_properties");
            range(
                &ip.threshold,
                &format!("{ipp}.threshold"),
                0.0,
                1.0,
                false,
                out,
            );
            llm(&ip.llm_properties, &format!("{ipp}.llm_properties"), out);
            if let Some(c) = ip.classifier.get() {
                let id = c.id.str().trim();
                let version = match &c.version {
                    Opt::Set(_) => range(
                        &c.version,
                        &format!("{ipp}.classifier.version"),
                        0.0,
                        i64::MAX as f64,
                        true,
                        out,
                    ),
                    _ => Some(0.0),
                };
                if !id.is_empty()
                    && let Some(v) = version
                    && !ctx.classifier_exists(id, v as i64)
                {
                    out.push(
                        ScenarioError::new(
                            Code::UnknownClassifier,
                            format!("classifier {id:?} version {v} does not exist"),
                        )
                        .property(format!("{ipp}.classifier"))
                        .value(format!("{id}@{v}")),
                    );
                }
            }
        }
    }
    if let Some(st) = p.statement.get() {
        prompt(&st.audio, "properties.statement.audio", ctx, out);
    }
    let mut ids = HashSet::new();
    for (i, a) in p
        .answer
        .get()
        .map(|a| a.answers.items())
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let at = format!("properties.answer.answers[{i}]");
        let id = a.answer_id.str();
        if id.trim().is_empty() {
            out.push(missing(&format!("{at}.answer_id"), "the branch id"));
        } else if !ids.insert(id) {
            out.push(
                ScenarioError::new(
                    Code::DuplicateBranchId,
                    format!("answer_id {id:?} appears more than once"),
                )
                .property(format!("{at}.answer_id"))
                .value(id),
            );
        }
        if let Some(si) = a.speech_input.get() {
            one_of(
                &si.mode,
                &format!("{at}.speech_input.mode"),
                &["", "contains", "exact"],
                out,
            );
            for (k, e) in si
                .entity
                .get()
                .map(|e| e.entities.items())
                .unwrap_or(&[])
                .iter()
                .enumerate()
            {
                let ep = format!("{at}.speech_input.entity.entities[{k}]");
                one_of(&e.kind, &format!("{ep}.type"), crate::entity::KINDS, out);
                if e.kind.get().is_none() && e.kind.invalid().is_none() {
                    out.push(missing(
                        &format!("{ep}.type"),
                        "number, digits, text, email, date or time",
                    ));
                }
                variable_name(
                    e.variable.get().map(|v| v.name.str()).unwrap_or(""),
                    &format!("{ep}.variable.name"),
                    out,
                );
            }
        }
    }
    for (name, set) in [
        ("fallback_invalid", &p.fallback_invalid),
        ("fallback_empty", &p.fallback_empty),
    ] {
        for (i, f) in set
            .get()
            .map(|s| s.fallbacks.items())
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            let at = format!("properties.{name}.fallbacks[{i}]");
            prompt(&f.audio, &format!("{at}.audio"), ctx, out);
            llm(&f.llm_properties, &format!("{at}.llm_properties"), out);
        }
    }
}
