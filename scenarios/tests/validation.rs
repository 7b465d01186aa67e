//! Validation: one test per SCN code, plus "every problem at once" and the entry shape.

use callsmith_scenarios::codes::Code;
use callsmith_scenarios::{
    AcceptAll, RefProblem, ScenarioError, Validation, ValidationContext, validate_value,
};
use serde_json::{Value, json};

fn fixture() -> Value {
    serde_json::from_str(include_str!("fixtures/all_bricks.json")).expect("fixture is JSON")
}

/// start_call → audio_tts → end.
fn base() -> Value {
    json!({"name": "base", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {}, "outputs": [{"type": "next", "description": "", "next": "t"}]}]},
        "audio_tts": {"v1": [{"id": "t", "description": "", "properties": {"text": "Hello"}, "outputs": [{"type": "next", "description": "", "next": "e"}]}]},
        "end": {"v1": [{"id": "e", "description": "", "properties": {}, "outputs": []}]}
    }}})
}

fn bricks(v: &mut Value) -> &mut Value {
    &mut v["constructor"]["bricks"]
}

/// Adds `brick` of `kind` and links `t` to it instead of `e`; the brick links on to `e` via `out`.
fn with_brick(kind: &str, mut brick: Value) -> Value {
    let mut v = base();
    let id = brick["id"].as_str().expect("id").to_string();
    if brick.get("outputs").is_none() {
        brick["outputs"] = json!([{"type": "next", "description": "", "next": "e"}]);
    }
    bricks(&mut v)[kind] = json!({"v1": [brick]});
    bricks(&mut v)["audio_tts"]["v1"][0]["outputs"][0]["next"] = json!(id);
    v
}

fn codes(errs: &[ScenarioError]) -> Vec<&str> {
    errs.iter().map(|e| e.code.as_str()).collect()
}

fn only(v: &Value, code: &str) -> ScenarioError {
    only_with(v, code, &AcceptAll)
}

fn only_with(v: &Value, code: &str, ctx: &dyn ValidationContext) -> ScenarioError {
    let errs = validate_value(v, ctx);
    assert_eq!(codes(&errs), vec![code], "{errs:#?}");
    errs.into_iter().next().expect("one error")
}

#[test]
fn the_every_kind_fixture_and_the_base_are_valid() {
    assert_eq!(validate_value(&fixture(), &AcceptAll), vec![]);
    assert_eq!(validate_value(&base(), &AcceptAll), vec![]);
}

#[test]
fn scn101_unknown_kind() {
    let mut v = base();
    bricks(&mut v)["hologram"] = json!({"v1": []});
    let e = only(&v, "SCN101");
    assert_eq!(e.invalid_value, "hologram");
    assert_eq!(e.summary, "unknown brick kind");
}

#[test]
fn scn102_malformed_structure() {
    let mut v = base();
    bricks(&mut v)["goal"] = json!("not a group");
    let e = only(&v, "SCN102");
    assert_eq!(e.property, "constructor.bricks.goal");
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]["properties"] = json!([1]);
    let e = only(&v, "SCN102");
    assert_eq!(
        (e.node_id.as_str(), e.property.as_str()),
        ("t", "properties")
    );
    assert_eq!(
        codes(&validate_value(&json!([1, 2]), &AcceptAll)),
        vec!["SCN102"]
    );
}

#[test]
fn scn103_duplicate_id() {
    let mut v = base();
    bricks(&mut v)["goal"] =
        json!({"v1": [{"id": "t", "properties": {"goal": "x"}, "outputs": []}]});
    let errs = validate_value(&v, &AcceptAll);
    let dup = errs.iter().find(|e| e.code == "SCN103").expect("SCN103");
    assert_eq!(dup.node_id, "t");
    assert_eq!(dup.duplicate_node_index, "goal.v1[0]");
}

#[test]
fn scn104_missing_id() {
    let mut v = base();
    bricks(&mut v)["end"]["v1"][0]["id"] = json!("");
    let errs = validate_value(&v, &AcceptAll);
    // the audio_tts output now dangles too: both problems are reported
    assert!(codes(&errs).contains(&"SCN104"), "{errs:#?}");
    assert!(codes(&errs).contains(&"SCN105"), "{errs:#?}");
}

#[test]
fn scn105_dangling_output() {
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]["outputs"][0]["next"] = json!("nowhere");
    let errs = validate_value(&v, &AcceptAll);
    let e = errs.iter().find(|e| e.code == "SCN105").expect("SCN105");
    assert_eq!(
        (
            e.node_id.as_str(),
            e.output_type.as_str(),
            e.invalid_value.as_str()
        ),
        ("t", "next", "nowhere")
    );
    assert_eq!(e.tree_id, "s");
    assert_eq!(e.property, "outputs[0].next");
}

#[test]
fn scn106_duplicate_output() {
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]["outputs"] =
        json!([{"type": "next", "next": "e"}, {"type": "next", "next": "e"}]);
    let e = only(&v, "SCN106");
    assert_eq!(
        (e.output_type.as_str(), e.duplicate_node_index.as_str()),
        ("next", "outputs[1]")
    );
}

#[test]
fn scn107_output_type_not_taken_by_kind() {
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]["outputs"] =
        json!([{"type": "next", "next": "e"}, {"type": "yes", "next": "e"}]);
    let e = only(&v, "SCN107");
    assert_eq!(e.output_type, "yes");
    let mut v = base();
    bricks(&mut v)["end"]["v1"][0]["outputs"] = json!([{"type": "next", "next": "t"}]);
    only(&v, "SCN107");
}

#[test]
fn scn108_missing_start() {
    let mut v = base();
    bricks(&mut v)
        .as_object_mut()
        .expect("obj")
        .remove("start_call");
    bricks(&mut v)["start_tree"] = json!({"v1": [{"id": "tree", "properties": {}, "outputs": [{"type": "next", "next": "t"}]}]});
    let e = only(&v, "SCN108");
    assert_eq!(e.node_id, "");
    let errs = validate_value(&json!({"name": "empty"}), &AcceptAll);
    assert_eq!(codes(&errs), vec!["SCN108"]);
}

#[test]
fn scn109_duplicate_start() {
    let mut v = base();
    bricks(&mut v)["start_call"]["v1"]
        .as_array_mut()
        .expect("arr")
        .push(json!({"id": "s2", "properties": {}, "outputs": [{"type": "next", "next": "t"}]}));
    let e = only(&v, "SCN109");
    assert_eq!(
        (e.node_id.as_str(), e.duplicate_tree_index.as_str()),
        ("s2", "start_call.v1[1]")
    );
}

#[test]
fn scn110_unreachable_brick() {
    let mut v = base();
    bricks(&mut v)["goal"] = json!({"v1": [{"id": "orphan", "properties": {"goal": "g"}, "outputs": [{"type": "next", "next": "e"}]}]});
    let e = only(&v, "SCN110");
    assert_eq!((e.node_id.as_str(), e.tree_id.as_str()), ("orphan", ""));
}

#[test]
fn scn111_missing_required_property() {
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]["properties"] = json!({"text": "  "});
    let e = only(&v, "SCN111");
    assert_eq!(
        (e.node_id.as_str(), e.property.as_str()),
        ("t", "properties.text")
    );
    let v = with_brick(
        "call_transfer",
        json!({"id": "x", "properties": {"transfer_mode": "blind"}}),
    );
    assert_eq!(only(&v, "SCN111").property, "properties.number");
    // an absent properties object is checked like an empty one
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]
        .as_object_mut()
        .expect("obj")
        .remove("properties");
    assert_eq!(only(&v, "SCN111").property, "properties.text");
}

#[test]
fn scn112_wrong_property_type() {
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]["properties"] = json!({"text": "hi", "voice": 7});
    let e = only(&v, "SCN112");
    assert_eq!(
        (e.property.as_str(), e.invalid_value.as_str()),
        ("properties.voice", "7")
    );
    let v = with_brick(
        "outbound_call",
        json!({"id": "o", "properties": {"is_voicemail": "yes"}}),
    );
    assert_eq!(only(&v, "SCN112").property, "properties.is_voicemail");
}

#[test]
fn scn113_number_out_of_range() {
    let v = with_brick(
        "audio",
        json!({"id": "a", "properties": {"audios": [{"mode": "tts", "tts_properties": {"text": "x"}}], "tts_general": {"speed": 9}}}),
    );
    let e = only(&v, "SCN113");
    assert_eq!(
        (e.property.as_str(), e.invalid_value.as_str()),
        ("properties.tts_general.speed", "9")
    );
    let q = json!({"id": "q", "properties": {"dtmf_properties": {"min_symbols": 4, "max_symbols": 2}},
                   "outputs": [{"type": "next", "next": "e"}]});
    let e = only(&with_brick("question", q), "SCN113");
    assert_eq!(e.property, "properties.dtmf_properties.min_symbols");
    let q = json!({"id": "q", "properties": {"dtmf_properties": {"max_symbols": 1.5}}});
    only(&with_brick("question", q), "SCN113");
}

#[test]
fn scn114_value_outside_enumeration() {
    let v = with_brick(
        "audio",
        json!({"id": "a", "properties": {"play_mode": "shuffle", "audios": [{"mode": "tts", "tts_properties": {"text": "x"}}]}}),
    );
    let e = only(&v, "SCN114");
    assert_eq!(
        (e.property.as_str(), e.invalid_value.as_str()),
        ("properties.play_mode", "shuffle")
    );
}

#[test]
fn scn115_bad_placeholder() {
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]["properties"] = json!({"text": "Hi {{first name}}"});
    let e = only(&v, "SCN115");
    assert_eq!(
        (e.property.as_str(), e.invalid_value.as_str()),
        ("properties.text", "Hi {{first name}}")
    );
    let v = with_brick(
        "sms",
        json!({"id": "m", "properties": {"to": "{{phone", "text": "ok"}}),
    );
    assert_eq!(only(&v, "SCN115").property, "properties.to");
}

#[test]
fn scn116_invalid_variable_name() {
    let v = with_brick(
        "assignment",
        json!({"id": "a", "properties": {"variables": [{"name": "bad name", "value": "1"}]}}),
    );
    let e = only(&v, "SCN116");
    assert_eq!(e.property, "properties.variables[0].name");
    let v = with_brick(
        "increment",
        json!({"id": "i", "properties": {"variables": [{"variable": "a/b"}]}}),
    );
    only(&v, "SCN116");
}

struct Known;
impl ValidationContext for Known {
    fn classifier_exists(&self, id: &str, version: i64) -> bool {
        id == "clf-1" && version <= 2
    }
    fn audio_problem(&self, url: &str) -> Option<RefProblem> {
        match url {
            "aud_known" => None,
            u if u.starts_with('/') => Some(RefProblem::Refused(format!("{u:?} is a local path"))),
            u => Some(RefProblem::Missing(format!("audio file {u:?} not found"))),
        }
    }
    fn url_problem(&self, url: &str) -> Option<String> {
        url.contains("127.0.0.1")
            .then(|| format!("{url:?} names the non-public address 127.0.0.1"))
    }
}

#[test]
fn scn117_unknown_classifier() {
    let q = |version: i64| {
        json!({"id": "q", "properties": {"stt_properties": {"intent_properties": {"classifier": {"id": "clf-1", "version": version}}}},
               "outputs": [{"type": "next", "next": "e"}]})
    };
    assert_eq!(
        validate_value(&with_brick("question", q(2)), &Known),
        vec![]
    );
    let e = only_with(&with_brick("question", q(3)), "SCN117", &Known);
    assert_eq!(
        (e.invalid_value.as_str(), e.node_id.as_str()),
        ("clf-1@3", "q")
    );
}

#[test]
fn scn118_unknown_audio_file() {
    let v = with_brick(
        "audio_file",
        json!({"id": "f", "properties": {"url": "aud_known"}}),
    );
    assert_eq!(validate_value(&v, &Known), vec![]);
    let v = with_brick(
        "audio_file",
        json!({"id": "f", "properties": {"url": "aud_missing"}}),
    );
    let e = only_with(&v, "SCN118", &Known);
    assert_eq!(e.invalid_value, "aud_missing");
}

#[test]
fn scn123_refused_references() {
    // An audio reference whose form the engine will not fetch.
    let v = with_brick(
        "audio_file",
        json!({"id": "f", "properties": {"url": "/etc/passwd"}}),
    );
    let e = only_with(&v, "SCN123", &Known);
    assert_eq!(
        (e.property.as_str(), e.invalid_value.as_str()),
        ("properties.url", "/etc/passwd")
    );
    assert!(e.message.contains("local path"), "{}", e.message);
    // A templated reference is judged when the call renders it.
    let v = with_brick(
        "audio_file",
        json!({"id": "f", "properties": {"url": "{{where}}"}}),
    );
    assert_eq!(validate_value(&v, &Known), vec![]);
    // A webhook url and a proxy url naming a non-public address.
    let hook = |url: &str, proxy: &str| {
        with_brick(
            "webhook",
            json!({"id": "w", "properties": {"request": {"method": "GET", "url": url, "proxy": {"url": proxy}}},
                   "outputs": [{"type": "next", "next": "e"}]}),
        )
    };
    let e = only_with(&hook("http://127.0.0.1:8080/x", ""), "SCN123", &Known);
    assert_eq!(e.property, "properties.request.url");
    let e = only_with(
        &hook("https://example.test/x", "http://127.0.0.1:3128"),
        "SCN123",
        &Known,
    );
    assert_eq!(e.property, "properties.request.proxy.url");
    assert_eq!(
        validate_value(&hook("https://example.test/{{path}}", ""), &Known),
        vec![]
    );
}

fn condition_group(conditions: Value) -> Value {
    with_brick(
        "condition_group",
        json!({"id": "c", "properties": {"condition": {"conditions": conditions}}, "outputs": [{"type": "else", "next": "e"}]}),
    )
}

#[test]
fn scn119_invalid_regex() {
    let v = condition_group(json!([{"condition_id": "a", "condition_operator": "and",
        "elements": [{"variable": "x", "element_operator": "regex", "value": "(unclosed"}]}]));
    let e = only(&v, "SCN119");
    assert_eq!(e.invalid_value, "(unclosed");
}

fn webhook(request: Value, mapping: Value) -> Value {
    with_brick(
        "webhook",
        json!({"id": "w", "properties": {"request": request, "response_mapping": {"variables": mapping}},
               "outputs": [{"type": "processed", "next": "e"}, {"type": "fail", "next": "e"}]}),
    )
}

#[test]
fn scn120_invalid_json_path() {
    let v = webhook(
        json!({"method": "GET", "url": "http://127.0.0.1/x"}),
        json!([{"name": "{{v}}", "source": "body", "path": "$.a[", "set_if_not_found": ""}]),
    );
    let e = only(&v, "SCN120");
    assert_eq!(e.property, "properties.response_mapping.variables[0].path");
}

#[test]
fn scn121_invalid_url() {
    let v = webhook(
        json!({"method": "GET", "url": "ftp://127.0.0.1/x"}),
        json!([]),
    );
    assert_eq!(only(&v, "SCN121").property, "properties.request.url");
    let v = webhook(
        json!({"method": "GET", "url": "not a url {{x}}"}),
        json!([]),
    );
    only(&v, "SCN121");
    // a URL that is one placeholder is only known at run time
    let v = webhook(json!({"method": "GET", "url": "{{target}}"}), json!([]));
    assert_eq!(validate_value(&v, &AcceptAll), vec![]);
}

#[test]
fn scn122_duplicate_branch_id() {
    let el = json!([{"variable": "x", "element_operator": "empty", "value": ""}]);
    let v = condition_group(json!([
        {"condition_id": "a", "condition_operator": "and", "elements": el},
        {"condition_id": "a", "condition_operator": "or", "elements": el}
    ]));
    let e = only(&v, "SCN122");
    assert_eq!(
        e.property,
        "properties.condition.conditions[1].condition_id"
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let mut v = base();
    bricks(&mut v)["hologram"] = json!({});
    bricks(&mut v)["audio_tts"]["v1"][0]["properties"] = json!({"text": "{{"});
    bricks(&mut v)["audio_tts"]["v1"][0]["outputs"] =
        json!([{"type": "next", "next": "gone"}, {"type": "next", "next": "e"}]);
    bricks(&mut v)["goal"] = json!({"v1": [{"id": "g", "properties": {}, "outputs": []}]});
    let errs = validate_value(&v, &AcceptAll);
    let mut got = codes(&errs);
    got.sort();
    assert_eq!(
        got,
        vec!["SCN101", "SCN105", "SCN106", "SCN110", "SCN111", "SCN115"],
        "{errs:#?}"
    );
}

#[test]
fn entries_serialise_every_field_as_a_string() {
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]["outputs"][0]["next"] = json!("nowhere");
    let errs = validate_value(&v, &AcceptAll);
    let json = serde_json::to_value(&errs[0]).expect("ser");
    let obj = json.as_object().expect("object");
    for key in [
        "code",
        "message",
        "summary",
        "tree_id",
        "node_id",
        "output_type",
        "duplicate_tree_index",
        "duplicate_node_index",
        "property",
        "invalid_value",
    ] {
        assert!(
            obj.get(key).is_some_and(Value::is_string),
            "{key} missing or not a string"
        );
    }
    assert_eq!(obj.len(), 10);
}

#[test]
fn scn124_unknown_properties_at_every_depth() {
    // A typo in a question's stt_properties: the nearest known key is named.
    let v = with_brick(
        "question",
        json!({"id": "q", "properties": {"stt_properties": {"langauge": "de-DE"}}}),
    );
    let e = only(&v, "SCN124");
    assert_eq!(
        (
            e.property.as_str(),
            e.invalid_value.as_str(),
            e.node_id.as_str()
        ),
        ("properties.stt_properties.langauge", "langauge", "q")
    );
    assert!(
        e.message.contains("did you mean \"language\""),
        "{}",
        e.message
    );
    assert_eq!(e.summary, "unknown property");

    // is_interruptable beside the statement's audio, and in a fallback.
    let v = with_brick(
        "question",
        json!({"id": "q", "properties": {
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Hi"}}, "is_interruptable": true},
            "fallback_empty": {"fallbacks": [{"is_repeat_statement": true, "is_interruptable": false}]}}}),
    );
    let errs = validate_value(&v, &AcceptAll);
    let props: Vec<&str> = errs.iter().map(|e| e.property.as_str()).collect();
    assert_eq!(
        props,
        vec![
            "properties.statement.is_interruptable",
            "properties.fallback_empty.fallbacks[0].is_interruptable"
        ],
        "{errs:#?}"
    );
    assert!(
        errs.iter()
            .all(|e| e.code == "SCN124" && e.message.contains("did you mean \"is_interruptible\""))
    );

    // Top level of properties, an array entry, a webhook request object, an answer.
    let e = only(&base_tts("langauge", json!("en")), "SCN124");
    assert_eq!(
        (e.property.as_str(), e.node_id.as_str()),
        ("properties.langauge", "t")
    );
    for (kind, brick, path) in [
        (
            "audio",
            json!({"id": "x", "properties": {"audios": [{"mode": "tts", "tts_properties": {"text": "Hi", "voice": "a"}}]}}),
            "properties.audios[0].tts_properties.voice",
        ),
        (
            "webhook",
            json!({"id": "x", "properties": {"request": {"method": "GET", "url": "https://example.com", "headers": []}}}),
            "properties.request.headers",
        ),
        (
            "question",
            json!({"id": "x", "properties": {"answer": {"answers": [{"answer_id": "yes", "speech_input": {"tokens": ["yes"], "modes": "exact"}}]}}}),
            "properties.answer.answers[0].speech_input.modes",
        ),
    ] {
        let e = only(&with_brick(kind, brick), "SCN124");
        assert_eq!(e.property, path);
    }

    // Beside a brick's own keys, in an output, in a kind group, constructor and snapshot:
    // near misses of a known key are warnings, other keys designer metadata.
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]["propreties"] = json!({});
    bricks(&mut v)["audio_tts"]["v1"][0]["position"] = json!({"x": 1});
    bricks(&mut v)["audio_tts"]["v1"][0]["outputs"][0]["nxt"] = json!("e");
    bricks(&mut v)["audio_tts"]["v1"][0]["outputs"][0]["waypoints"] = json!([]);
    bricks(&mut v)["end"]["v2"] = json!([]);
    v["constructor"]["brick"] = json!({});
    v["constructor"]["layout"] = json!({});
    v["nmae"] = json!("x");
    v["designer_layout"] = json!({});
    let report = Validation::of_value(&v, &AcceptAll);
    assert_eq!(report.errors, vec![], "{report:#?}");
    let mut got: Vec<(&str, &str, &str)> = report
        .warnings
        .iter()
        .map(|e| (e.code.as_str(), e.property.as_str(), e.node_id.as_str()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("SCN128", "constructor.brick", ""),
            ("SCN128", "constructor.bricks.end.v2", ""),
            ("SCN128", "nmae", ""),
            ("SCN128", "outputs[0].nxt", "t"),
            ("SCN128", "propreties", "t"),
        ],
        "{report:#?}"
    );
    let nxt = report
        .warnings
        .iter()
        .find(|e| e.property == "outputs[0].nxt");
    assert!(nxt.is_some_and(|e| e.message.contains("did you mean \"next\"")));
    // Free-form values are not looked into.
    let v = with_brick(
        "question",
        json!({"id": "q", "properties": {"entity": {"anything": 1}, "stt_properties": {"tokens": {"any": 2}}}}),
    );
    assert_eq!(validate_value(&v, &AcceptAll), vec![]);
}

/// Knows the synthesizers flite and piper and the recognizer whisper.
struct Engines;
impl ValidationContext for Engines {
    fn classifier_exists(&self, _: &str, _: i64) -> bool {
        true
    }
    fn audio_problem(&self, _: &str) -> Option<RefProblem> {
        None
    }
    fn synthesizer_known(&self, engine: &str) -> bool {
        ["flite", "piper"].contains(&engine)
    }
    fn recognizer_known(&self, engine: &str) -> bool {
        engine == "whisper"
    }
}

/// The base scenario with one more property on its audio_tts brick `t`.
fn base_tts(key: &str, value: Value) -> Value {
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]["properties"][key] = value;
    v
}

#[test]
fn scn125_scn126_unknown_engines() {
    let tts = base_tts("engine", json!("piper"));
    assert_eq!(validate_value(&tts, &Engines), vec![]);
    let typo = base_tts("engine", json!("piperr"));
    let e = only_with(&typo, "SCN125", &Engines);
    assert_eq!(
        (e.property.as_str(), e.invalid_value.as_str()),
        ("properties.engine", "piperr")
    );
    // Every place an engine is named; empty means the default.
    let mut v = with_brick(
        "question",
        json!({"id": "q", "properties": {"tts_properties": {"engine": "espeak"}, "stt_properties": {"engine": "wisper"}}}),
    );
    bricks(&mut v)["start_call"]["v1"][0]["properties"] = json!({
        "stt_general": {"engine": "vosk"}, "tts_general": {"engine": "festival"}});
    let errs = validate_value(&v, &Engines);
    let got: Vec<(&str, &str, &str)> = errs
        .iter()
        .map(|e| {
            (
                e.code.as_str(),
                e.property.as_str(),
                e.invalid_value.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("SCN125", "properties.tts_general.engine", "festival"),
            ("SCN126", "properties.stt_general.engine", "vosk"),
            ("SCN125", "properties.tts_properties.engine", "espeak"),
            ("SCN126", "properties.stt_properties.engine", "wisper"),
        ],
        "{errs:#?}"
    );
    let v = with_brick(
        "call_transfer",
        json!({"id": "c", "properties": {"number": "+1", "tts_properties": {"engine": ""}}}),
    );
    assert_eq!(validate_value(&v, &Engines), vec![]);
    // Without a context that knows the node, every name is accepted.
    assert_eq!(validate_value(&typo, &AcceptAll), vec![]);
}

#[test]
fn scn127_unknown_template_variables_are_warnings() {
    let mut v = base();
    bricks(&mut v)["audio_tts"]["v1"][0]["properties"]["text"] = json!(
        "Hi {{nmae}}, {{ name }}, {{call.recipient}}, {{time.hour}}, {{webhook.body}}, {{count}}, {{order.id}}, {{nmae}}"
    );
    bricks(&mut v)["assignment"] = json!({"v1": [{"id": "a", "properties": {"variables": [{"name": "{{name}}", "value": "{{seed}}"}]}, "outputs": []}]});
    bricks(&mut v)["increment"] = json!({"v1": [{"id": "i", "properties": {"variables": [{"variable": "count"}]}, "outputs": []}]});
    bricks(&mut v)["data_mapping"] = json!({"v1": [{"id": "m", "properties": {"input": "{}", "variables": [{"name": "order.id", "path": "$.id"}]}, "outputs": []}]});
    bricks(&mut v)["condition_group"] = json!({"v1": [{"id": "c", "properties": {"condition": {"conditions": [
        {"condition_id": "k", "condition_operator": "and", "elements": [
            {"variable": "count", "element_operator": "equal", "value": "{{limit}}"},
            {"variable": "{{colour}}", "element_operator": "empty", "value": ""}]}]}}, "outputs": []}]});
    bricks(&mut v)["start_tree"] = json!({"v1": [
        {"id": "tree", "properties": {}, "outputs": [{"type": "next", "next": "a"}]}]});
    bricks(&mut v)["assignment"]["v1"][0]["outputs"] = json!([{"type": "next", "next": "i"}]);
    bricks(&mut v)["increment"]["v1"][0]["outputs"] = json!([{"type": "next", "next": "m"}]);
    bricks(&mut v)["data_mapping"]["v1"][0]["outputs"] = json!([{"type": "next", "next": "c"}]);
    let report = Validation::of_value(&v, &AcceptAll);
    assert_eq!(report.errors, vec![], "{report:#?}");
    let got: Vec<(&str, &str, &str, &str)> = report
        .warnings
        .iter()
        .map(|e| {
            (
                e.code.as_str(),
                e.node_id.as_str(),
                e.property.as_str(),
                e.invalid_value.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("SCN127", "t", "properties.text", "nmae"),
            ("SCN127", "a", "properties.variables[0].value", "seed"),
            (
                "SCN127",
                "c",
                "properties.condition.conditions[0].elements[0].value",
                "limit"
            ),
            (
                "SCN127",
                "c",
                "properties.condition.conditions[0].elements[1].variable",
                "colour"
            ),
        ],
        "{report:#?}"
    );
    assert_eq!(report.warnings[0].summary, "unknown variable");
    assert_eq!(report.warnings[0].tree_id, "s");
    // Warnings never count as errors.
    assert_eq!(validate_value(&v, &AcceptAll), vec![]);
}

#[test]
fn entity_and_response_mapping_targets_are_known_variables() {
    let v = with_brick(
        "question",
        json!({"id": "q", "properties": {
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Your number, {{digits}}? Status {{status}}"}}},
            "answer": {"answers": [{"answer_id": "n", "speech_input": {"entity": {"entities": [{"type": "digits", "variable": {"name": "{{digits}}"}}]}}}]}},
            "outputs": [{"type": "next", "next": "w"}]}),
    );
    let mut v = v;
    bricks(&mut v)["webhook"] = json!({"v1": [{"id": "w", "properties": {
        "request": {"method": "GET", "url": "https://example.com/{{digits}}"},
        "response_mapping": {"variables": [{"name": "{{status}}", "source": "body", "path": "$.s"}]}},
        "outputs": [{"type": "next", "next": "e"}]}]});
    let report = Validation::of_value(&v, &AcceptAll);
    assert_eq!(report, Validation::default(), "{report:#?}");
}

#[test]
fn the_code_registry_is_documented_and_distinct() {
    let doc = include_str!("../../docs/scenario-codes.md");
    let mut seen = std::collections::HashSet::new();
    for code in Code::ALL {
        assert!(
            seen.insert(code.as_str()),
            "{} registered twice",
            code.as_str()
        );
        assert!(
            doc.contains(code.as_str()),
            "{} is not in docs/scenario-codes.md",
            code.as_str()
        );
        assert!(
            doc.contains(code.summary()),
            "summary of {} is not documented",
            code.as_str()
        );
    }
}

#[test]
fn the_realistic_bench_scenario_is_valid() {
    let v = callsmith_scenarios::testing::realistic_scenario(200);
    let snap = callsmith_scenarios::Snapshot::from_value(&v).expect("snapshot");
    let mut n = 0;
    snap.bricks().expect("bricks").for_each(|_| n += 1);
    assert_eq!(n, 202, "200 block bricks plus start and end");
    assert_eq!(validate_value(&v, &AcceptAll), vec![]);
}
