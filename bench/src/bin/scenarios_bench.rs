//! Scenario benchmarks: validation time of a realistic 200-brick scenario, and interpreter
//! overhead per non-I/O brick (targets: validation well under 10 ms, ≤ 20 µs per brick).
//!
//! Run: `cargo run --release -p callsmith-bench --bin scenarios_bench [-- <iterations>]`.
//! Prints one line per figure: median and p99 over the iterations.

use std::time::{Duration, Instant};

use callsmith_scenarios::interpreter::{CallDirection, CallInfo, Program, Tz};
use callsmith_scenarios::testing::{ScriptedCall, realistic_scenario};
use callsmith_scenarios::{AcceptAll, Snapshot, validate};
use serde_json::{Value, json};

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    callsmith_bench::nearest_rank(sorted, q).unwrap_or_default()
}

fn report(name: &str, mut samples: Vec<Duration>, per: u32) {
    samples.sort();
    let m = percentile(&samples, 0.5) / per;
    let p99 = percentile(&samples, 0.99) / per;
    println!(
        "{name}: median {:.2} µs, p99 {:.2} µs (n={})",
        m.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        samples.len()
    );
}

/// A chain of `n` non-I/O bricks (assignment, increment, condition_group, goal, data_mapping).
fn non_io_chain(n: usize) -> Value {
    let id = |i: usize| {
        if i >= n {
            "end".to_string()
        } else {
            format!("n{i}")
        }
    };
    let mut kinds: std::collections::BTreeMap<&str, Vec<Value>> = Default::default();
    kinds.entry("start_call").or_default().push(
        json!({"id": "start", "properties": {}, "outputs": [{"type": "next", "next": id(0)}]}),
    );
    kinds
        .entry("end")
        .or_default()
        .push(json!({"id": "end", "properties": {}, "outputs": []}));
    for i in 0..n {
        let next = json!([{"type": "next", "next": id(i + 1)}]);
        let (kind, props, outputs) = match i % 5 {
            0 => (
                "assignment",
                json!({"variables": [{"name": "v", "value": "{{name}}-{{i}}"}, {"name": "doc", "value": "{\"a\": {\"b\": [1, 2, 3]}}"}]}),
                next,
            ),
            1 => ("increment", json!({"variables": [{"variable": "i"}]}), next),
            2 => (
                "condition_group",
                json!({"condition": {"conditions": [
                    {"condition_id": "big", "condition_operator": "and", "elements": [
                        {"variable": "i", "element_operator": "greater", "value": "100"},
                        {"variable": "v", "element_operator": "regex", "value": "^Ann-\\d+$"}]}]}}),
                json!([{"type": "big", "next": id(i + 1)}, {"type": "else", "next": id(i + 1)}]),
            ),
            3 => ("goal", json!({"goal": "g{{i}}"}), next),
            _ => (
                "data_mapping",
                json!({"input": "{{doc}}", "variables": [{"name": "x", "path": "$.a.b[1]", "set_if_not_found": ""}]}),
                next,
            ),
        };
        kinds
            .entry(kind)
            .or_default()
            .push(json!({"id": id(i), "properties": props, "outputs": outputs}));
    }
    let bricks: serde_json::Map<String, Value> = kinds
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!({"v1": v})))
        .collect();
    json!({"name": "chain", "constructor": {"bricks": bricks}})
}

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);

    // Validation of a realistic 200-brick scenario.
    let value = realistic_scenario(200);
    let snap = Snapshot::from_value(&value).expect("snapshot");
    assert!(
        validate(&snap, &AcceptAll).is_empty(),
        "bench scenario must be valid"
    );
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        let errs = validate(&snap, &AcceptAll);
        samples.push(t.elapsed());
        assert!(errs.is_empty());
    }
    report("validate(200 bricks, parsed)", samples, 1);
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        let s = Snapshot::from_value(&value).expect("snapshot");
        let errs = validate(&s, &AcceptAll);
        samples.push(t.elapsed());
        assert!(errs.is_empty());
    }
    report("parse + validate(200 bricks)", samples, 1);

    // Interpreter overhead per non-I/O brick.
    let n = 1000;
    let chain = non_io_chain(n);
    let snap = Snapshot::from_value(&chain).expect("snapshot");
    assert!(
        validate(&snap, &AcceptAll).is_empty(),
        "chain must be valid"
    );
    let mut program = Program::new(snap);
    program.max_steps = n + 10;
    let mut data = std::collections::BTreeMap::new();
    data.insert("name".to_string(), "Ann".to_string());
    let info = CallInfo {
        direction: CallDirection::Outbound,
        recipient: "+1555".into(),
        from: "+1666".into(),
        communication_id: "bench".into(),
        timezone: Tz::UTC,
        data,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let runs = (iterations / 10).max(20);
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let mut port = ScriptedCall::new();
        let t = Instant::now();
        let r = rt.block_on(program.run(&info, &mut port));
        samples.push(t.elapsed());
        assert_eq!(r.steps, n + 2);
    }
    report(
        &format!(
            "interpreter per non-I/O brick ({} bricks/run, trace on)",
            n + 2
        ),
        samples,
        (n + 2) as u32,
    );
}
