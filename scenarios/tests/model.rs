//! Round trips of the brick model and the content hash.

use callsmith_scenarios::canonical::content_hash_value;
use callsmith_scenarios::model::{BrickKind, BrickProps};
use callsmith_scenarios::opt::Opt;
use callsmith_scenarios::{Snapshot, canonical_json, content_hash};
use serde_json::{Value, json};

fn fixture() -> Value {
    serde_json::from_str(include_str!("fixtures/all_bricks.json")).expect("fixture is JSON")
}

#[test]
fn every_brick_kind_round_trips_exactly() {
    let original = fixture();
    let snap = Snapshot::from_value(&original).expect("parses");
    let bricks = snap.bricks().expect("has bricks");
    let mut kinds = std::collections::HashSet::new();
    bricks.for_each(|b| {
        assert!(b.props.is_some(), "{} has typed properties", b.id);
        kinds.insert(b.kind);
    });
    for k in BrickKind::ALL {
        assert!(kinds.contains(k), "fixture lacks a {} brick", k.as_str());
    }
    assert_eq!(snap.to_value(), original);
    // and through text
    let text = serde_json::to_string(&snap).expect("serialises");
    let again: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(again, original);
}

#[test]
fn a_brick_is_found_again_by_its_kind_and_index() {
    let snap = Snapshot::from_value(&fixture()).expect("parses");
    let bricks = snap.bricks().expect("bricks");
    let mut n = 0;
    bricks.for_each(|b| {
        let again = bricks.get(b.kind, b.index).expect("the same position");
        assert_eq!((again.kind, again.index, again.id), (b.kind, b.index, b.id));
        assert_eq!(again.outputs.len(), b.outputs.len());
        assert_eq!(again.props.is_some(), b.props.is_some());
        // One past the last brick of its kind is nothing, not a panic.
        let count = {
            let mut c = 0;
            bricks.for_each(|o| c += usize::from(o.kind == b.kind));
            c
        };
        assert!(bricks.get(b.kind, count).is_none());
        n += 1;
    });
    assert!(n >= BrickKind::ALL.len());
    // A kind the snapshot has no group for.
    let empty = Snapshot::from_value(&json!({"constructor": {"bricks": {}}})).expect("parses");
    assert!(
        empty
            .bricks()
            .expect("bricks")
            .get(BrickKind::Question, 0)
            .is_none()
    );
}

#[test]
fn typed_fields_are_reachable() {
    let snap = Snapshot::from_value(&fixture()).expect("parses");
    let mut seen_question = false;
    snap.bricks().expect("bricks").for_each(|b| {
        if let Some(BrickProps::Question(q)) = b.props {
            seen_question = true;
            let answers = q.answer.get().expect("answer").answers.items();
            assert_eq!(answers[0].answer_id.str(), "yes");
            assert_eq!(
                q.dtmf_properties.get().expect("dtmf").max_symbols.f64(),
                Some(1.0)
            );
            assert_eq!(q.kind.str(), "standard");
            assert_eq!(q.entity, Opt::Null);
        }
    });
    assert!(seen_question);
}

#[test]
fn unknown_null_and_mistyped_values_are_kept_verbatim() {
    let original = json!({
        "name": "odd",
        "future_field": {"a": [1, 2.5, null]},
        "constructor": {"bricks": {
            "hologram": {"v1": [{"id": "h"}]},
            "audio_tts": {"v1": [{
                "id": "t",
                "description": null,
                "properties": {"text": 42, "language": null, "voice": ["x"], "new_prop": true},
                "outputs": [{"type": "next", "next": "t", "weight": 3}],
                "ui": {"color": "red"}
            }], "v2": []},
            "audio": {"v1": [{"id": "a", "properties": {"play_mode": "sequential", "audios": "not-an-array", "tts_general": {"speed": "fast"}}}]},
            "question": "not-a-group",
            "goal": {"v1": [{"id": "g", "properties": [1, 2], "outputs": {"type": "next"}}]}
        }}
    });
    let snap = Snapshot::from_value(&original).expect("parses any object");
    assert_eq!(snap.to_value(), original);
}

#[test]
fn integers_stay_integers_and_floats_stay_floats() {
    let original = json!({"constructor": {"bricks": {"audio": {"v1": [{"id": "a", "properties": {
        "audios": [], "tts_general": {"speed": 1}}}, {"id": "b", "properties": {"tts_general": {"speed": 1.0}}}]}}}});
    let snap = Snapshot::from_value(&original).expect("parses");
    assert_eq!(
        serde_json::to_string(&snap).expect("ser"),
        serde_json::to_string(&original).expect("ser")
    );
}

#[test]
fn canonical_json_sorts_keys_without_whitespace() {
    let v = json!({"b": [1, {"z": "é\"", "a": null}], "a": 1.5});
    assert_eq!(
        canonical_json(&v),
        r#"{"a":1.5,"b":[1,{"a":null,"z":"é\""}]}"#
    );
}

#[test]
fn content_hash_ignores_key_order_but_not_content() {
    let a: Snapshot =
        Snapshot::from_value(&json!({"name": "x", "constructor": {"bricks": {}}})).expect("a");
    let b: Snapshot =
        Snapshot::from_value(&json!({"constructor": {"bricks": {}}, "name": "x"})).expect("b");
    let c: Snapshot =
        Snapshot::from_value(&json!({"constructor": {"bricks": {}}, "name": "y"})).expect("c");
    assert_eq!(content_hash(&a), content_hash(&b));
    assert_ne!(content_hash(&a), content_hash(&c));
    assert_eq!(content_hash(&a).len(), 64);
    assert!(
        content_hash(&a)
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    // sha256 of {"constructor":{"bricks":{}},"name":"x"}
    let expected = {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(
            br#"{"constructor":{"bricks":{}},"name":"x"}"#,
        ))
    };
    assert_eq!(content_hash(&a), expected);
}

#[test]
fn the_hash_of_a_parsed_snapshot_is_the_hash_of_its_json() {
    let v = fixture();
    let snap = Snapshot::from_value(&v).expect("parses");
    assert_eq!(content_hash(&snap), content_hash_value(&v));
}
