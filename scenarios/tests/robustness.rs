//! Robustness: any value anywhere in a snapshot is kept verbatim and reported, never a panic.

use callsmith_scenarios::interpreter::{CallDirection, CallInfo, Program};
use callsmith_scenarios::testing::ScriptedCall;
use callsmith_scenarios::{AcceptAll, Snapshot, template, validate};
use serde_json::{Value, json};

fn fixture() -> Value {
    serde_json::from_str(include_str!("fixtures/all_bricks.json")).expect("fixture is JSON")
}

/// JSON pointers of every node of `v`.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(c, p, out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(c, p, out);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn replacing_any_node_round_trips_validates_and_runs() {
    let original = fixture();
    let mut ptrs = Vec::new();
    pointers(&original, String::new(), &mut ptrs);
    assert!(
        ptrs.len() > 400,
        "the fixture is big enough to mean something ({})",
        ptrs.len()
    );
    let replacements = [Value::Null, json!(7), json!("{{"), json!({"x": [1]})];
    let mut reported = 0;
    for (n, p) in ptrs.iter().enumerate() {
        let r = &replacements[n % replacements.len()];
        let mut v = original.clone();
        if let Some(slot) = v.pointer_mut(p) {
            *slot = r.clone();
        }
        let snap = Snapshot::from_value(&v).expect("any object parses");
        assert_eq!(
            snap.to_value(),
            v,
            "round trip after replacing {p} with {r}"
        );
        if !validate(&snap, &AcceptAll).is_empty() {
            reported += 1;
        }
        // every 7th mutation also runs (bounded: the script hangs up when it runs dry)
        if n % 7 == 0 {
            let program = Program::new(snap);
            let info = CallInfo {
                direction: CallDirection::Outbound,
                recipient: "+1".into(),
                from: "+2".into(),
                communication_id: "c".into(),
                timezone: chrono_tz::UTC,
                data: Default::default(),
            };
            let mut port = ScriptedCall::new()
                .say("yes")
                .webhook_response(200, &[], "{}");
            let run = program.run(&info, &mut port).await;
            assert!(run.steps <= program.max_steps);
        }
    }
    assert!(
        reported > ptrs.len() / 2,
        "most mutations are reported ({reported} of {})",
        ptrs.len()
    );
}

#[test]
fn templating_never_panics_on_odd_text() {
    let vars: std::collections::BTreeMap<String, String> =
        [("a".to_string(), "Ä{{b}}".to_string())].into();
    let pieces = [
        "{{", "}}", "{", "}", "a", " ", "é", "🙂", "{{a}}", "{{ a }}", "\\", "\"", "{{{", "}}}",
    ];
    // every sequence of up to three pieces
    let mut count = 0;
    for x in pieces {
        for y in pieces {
            for z in pieces {
                let s = format!("{x}{y}{z}");
                let rendered = template::render(&s, &vars);
                if template::check(&s).is_ok() {
                    assert!(!rendered.contains("{{a}}"), "{s:?} rendered {rendered:?}");
                }
                count += 1;
            }
        }
    }
    assert_eq!(count, pieces.len().pow(3));
    // a value containing a placeholder is not rendered again
    assert_eq!(template::render("{{a}}", &vars), "Ä{{b}}");
}
