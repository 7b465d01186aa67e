//! Bounded fuzzing of what scenario designers and webhook targets feed the scenario crate:
//! scenario JSON (parse + SCN1xx validation), `{{ }}` templates, JSONPath response mapping and
//! webhook properties (parse, validate, compile, map a response).
//!
//! Each target replays `tests/fuzz_corpus/<target>/` and then mutations of it (byte-level and,
//! for JSON targets, node-level) for at most ~3 s or its iteration cap, whichever comes first
//! (see `tests/fuzz/harness.rs`). `CALLSMITH_FUZZ_SEED=<u64>|random` sets the seed (printed on
//! every run; the default is fixed per target); `CALLSMITH_FUZZ_SECS=<secs>` sets the time
//! budget and lifts the cap:
//! `CALLSMITH_FUZZ_SECS=600 cargo test -p callsmith-scenarios --test fuzz -- --nocapture`.

#[path = "../../tests/fuzz/harness.rs"]
mod harness;

use std::collections::BTreeMap;

use callsmith_scenarios::template::{self, Piece};
use callsmith_scenarios::webhook::{
    self, WebhookResponse, compile, json_path_first, json_to_var, map_response, mapping,
    parse_properties, to_curl, validate_webhook,
};
use callsmith_scenarios::{
    AcceptAll, Program, ScenarioError, Snapshot, canonical_json, content_hash, validate_value,
};
use harness::Rng;
use serde_json::{Value, json};

/// A random JSON value of the kinds that break parsers: huge and fractional numbers, unicode
/// and placeholder strings, deep nesting.
fn random_value(rng: &mut Rng, depth: usize) -> Value {
    const STRINGS: &[&str] = &[
        "",
        " ",
        "{{",
        "{{x}}",
        "{{ call.recipient }}",
        "{{}}",
        "}}{{",
        "$..*",
        "$[?@.a == 1]",
        "http://[::1]:99999/",
        "https://example.com/{{id}}",
        "e\u{301}\u{202e}\u{1f600}",
        "\0",
        "v1",
        "next",
        "POST",
        "json",
        "form",
        "basic",
        "body",
        "header",
    ];
    match rng.below(if depth > 6 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(2)),
        2 => json!(rng.next_u64()),
        3 => json!(-(rng.below(1 << 20) as i64)),
        4 => json!([1e300, -0.5, 0.1, f64::MAX, 1e-300][rng.below(5)]),
        5 => Value::String(STRINGS[rng.below(STRINGS.len())].to_string()),
        6 => Value::String("x".repeat(rng.below(5000))),
        7 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.below(4))
                .map(|i| {
                    let k = STRINGS[(i + rng.below(STRINGS.len())) % STRINGS.len()].to_string();
                    (k, random_value(rng, depth + 1))
                })
                .collect(),
        ),
    }
}

/// Every node of `v` as a JSON pointer.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                pointers(
                    c,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                pointers(c, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Node-level JSON mutation: replace, remove or duplicate a node, or nest it deeper.
fn mutate_json(rng: &mut Rng, seed: &[u8]) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(seed).ok()?;
    for _ in 0..1 + rng.below(4) {
        let mut ptrs = Vec::new();
        pointers(&v, String::new(), &mut ptrs);
        let p = ptrs[rng.below(ptrs.len())].clone();
        match rng.below(4) {
            0 => {
                let new = random_value(rng, 0);
                *v.pointer_mut(&p)? = new;
            }
            1 if !p.is_empty() => {
                let (parent, key) = p.rsplit_once('/')?;
                match v.pointer_mut(parent)? {
                    Value::Object(m) => {
                        m.shift_remove(&key.replace("~1", "/").replace("~0", "~"));
                    }
                    Value::Array(a) => {
                        let i: usize = key.parse().ok()?;
                        a.remove(i);
                    }
                    _ => {}
                }
            }
            2 => {
                let node = v.pointer_mut(&p)?;
                let copy = node.clone();
                match node {
                    Value::Array(a) => a.push(copy),
                    Value::Object(m) => {
                        m.insert(format!("k{}", rng.below(100)), copy);
                    }
                    other => *other = json!([copy.clone(), copy]),
                }
            }
            _ => {
                let node = v.pointer_mut(&p)?;
                let inner = node.take();
                *node = (0..1 + rng.below(40)).fold(inner, |acc, _| json!([acc]));
            }
        }
    }
    serde_json::to_vec(&v).ok()
}

fn scn_codes_only(errs: &[ScenarioError]) -> Result<(), String> {
    match errs.iter().find(|e| !e.code.starts_with("SCN1")) {
        Some(e) => Err(format!("error without an SCN1xx code: {e:?}")),
        None => Ok(()),
    }
}

#[test]
fn fuzz_scenario_json() {
    harness::run_with_mutator(
        "scenario",
        &harness::corpus_dir("scenario"),
        Vec::new(),
        20_000,
        Some(mutate_json),
        |bytes| {
            let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
                return Ok(());
            };
            let errs = validate_value(&v, &AcceptAll);
            scn_codes_only(&errs)?;
            let Ok(snapshot) = Snapshot::from_value(&v) else {
                if errs.is_empty() {
                    return Err("a value that is no snapshot validated clean".into());
                }
                return Ok(());
            };
            // The model keeps the value verbatim, so it validates the same way again.
            let back = snapshot.to_value();
            if back != v {
                return Err(format!("snapshot does not round-trip:\n{v}\n{back}"));
            }
            let again = validate_value(&back, &AcceptAll);
            if again != errs {
                return Err(format!("re-validation differs: {errs:?} then {again:?}"));
            }
            let _ = content_hash(&snapshot);
            let _ = canonical_json(&back);
            if errs.is_empty() {
                let _ = Program::new(snapshot);
            }
            Ok(())
        },
    );
}

fn vars() -> BTreeMap<String, String> {
    [
        ("name", "Ann"),
        ("order_id", "42/../x?y#z"),
        ("order.id", "7"),
        ("call.recipient", "+15551234567"),
        ("x", "{{x}}"),
        ("api_token", "t\u{e9}k\u{1f600}n"),
        ("count", "-1e308"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[test]
fn fuzz_template() {
    let vars = vars();
    harness::run(
        "template",
        &harness::corpus_dir("template"),
        Vec::new(),
        100_000,
        |bytes| {
            let t = String::from_utf8_lossy(bytes);
            let rendered = template::render(&t, &vars);
            let parsed = template::parse(&t);
            if template::check(&t).is_ok() != (parsed.is_ok() || !template::has_open(&t)) {
                return Err(format!("check and parse disagree: {parsed:?}"));
            }
            let Ok(pieces) = parsed else {
                return Ok(());
            };
            // A template that parses renders piece by piece; values are never re-expanded.
            let mut want = String::new();
            let mut names = Vec::new();
            for p in &pieces {
                match p {
                    Piece::Text(s) => want.push_str(s),
                    Piece::Var(n) => {
                        if !template::is_valid_name(n) {
                            return Err(format!("placeholder name {n:?} is not valid"));
                        }
                        names.push(*n);
                        want.push_str(vars.get(*n).map(String::as_str).unwrap_or(""));
                    }
                }
            }
            if rendered != want {
                return Err(format!("rendered {rendered:?}, pieces give {want:?}"));
            }
            if template::variables(&t) != names {
                return Err(format!(
                    "variables {:?} vs {names:?}",
                    template::variables(&t)
                ));
            }
            Ok(())
        },
    );
}

/// Input: a JSONPath, a newline, then the document (JSON, or else taken as a string).
#[test]
fn fuzz_json_path() {
    harness::run(
        "json_path",
        &harness::corpus_dir("json_path"),
        Vec::new(),
        50_000,
        |bytes| {
            let text = String::from_utf8_lossy(bytes);
            let (path, doc) = text.split_once('\n').unwrap_or((&text, ""));
            let doc: Value =
                serde_json::from_str(doc).unwrap_or_else(|_| Value::String(doc.to_string()));
            let found = json_path_first(path, &doc);
            if path == "$" && found != Some(json_to_var(&doc)) {
                return Err(format!("`$` found {found:?}"));
            }
            Ok(())
        },
    );
}

#[test]
fn fuzz_webhook() {
    let vars = vars();
    let meta = webhook::CallMetadata {
        communication_id: "c-1".into(),
        recipient: "+1555\r\nX-Injected: 1".into(),
        from: "\u{202e}".into(),
    };
    let resp = WebhookResponse {
        http_status_code: 200,
        http_status_text: "OK".into(),
        headers: [("X-Request-Id".to_string(), vec!["r-1".to_string()])].into(),
        body: r#"{"account": {"balance": 12.5, "tier": "gold"}, "list": [1, {"a": null}]}"#.into(),
        duration: 3,
    };
    harness::run_with_mutator(
        "webhook",
        &harness::corpus_dir("webhook"),
        Vec::new(),
        20_000,
        Some(mutate_json),
        |bytes| {
            let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
                return Ok(());
            };
            let props = match parse_properties(&v) {
                Ok(p) => p,
                Err(errs) => return scn_codes_only(&errs),
            };
            let mut errs = Vec::new();
            validate_webhook(&props, "properties.", &mut errs);
            scn_codes_only(&errs)?;
            for metadata in [None, Some(&meta)] {
                if let Ok(req) = compile(&props, &vars, metadata) {
                    let url = url::Url::parse(&req.url)
                        .map_err(|e| format!("compiled an unparseable url {:?}: {e}", req.url))?;
                    if !matches!(url.scheme(), "http" | "https") {
                        return Err(format!("compiled url {:?}", req.url));
                    }
                    if to_curl(&req).is_empty() {
                        return Err("empty curl".into());
                    }
                }
            }
            // Every entry with a usable target yields a variable.
            let entries = mapping(&props);
            let out = map_response(entries, &resp);
            for m in entries {
                if let Some(name) = template::unwrap_target(m.name.str())
                    && !out.contains_key(name)
                {
                    return Err(format!("mapping target {name:?} missing from {out:?}"));
                }
            }
            Ok(())
        },
    );
}
