//! Building scenario snapshots in tests: bricks and their outputs as the v1 JSON has them.

use serde_json::{Value, json};

/// One `next` output to `to`.
pub fn next(to: &str) -> Value {
    json!([{"type": "next", "description": "", "next": to}])
}

/// Outputs of the given (type, next brick) pairs.
pub fn outs(pairs: &[(&str, &str)]) -> Value {
    Value::Array(
        pairs
            .iter()
            .map(|(t, n)| json!({"type": t, "description": "", "next": n}))
            .collect(),
    )
}

/// A brick with its properties and outputs.
pub fn brick(id: &str, properties: Value, outputs: Value) -> Value {
    json!({"id": id, "description": "", "properties": properties, "outputs": outputs})
}

/// A snapshot named `name` of `bricks` (kind → version → bricks).
pub fn snapshot(name: &str, bricks: Value) -> Value {
    json!({"name": name, "constructor": {"bricks": bricks}})
}
