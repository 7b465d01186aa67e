//! Canonical JSON and the content hash of a snapshot.
//!
//! The hash identifies content, not formatting: keys are sorted (by their UTF-8 bytes), no
//! whitespace is written, strings and numbers use serde_json's own encoding.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::model::Snapshot;

/// Canonical text of a JSON value: object keys sorted, no whitespace.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                if let Some(child) = map.get(k.as_str()) {
                    write_canonical(child, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Lower-case hex SHA-256 of the canonical JSON of the snapshot.
pub fn content_hash(snapshot: &Snapshot) -> String {
    content_hash_value(&snapshot.to_value())
}

/// Lower-case hex SHA-256 of the canonical JSON of any value (for callers holding raw JSON).
pub fn content_hash_value(v: &Value) -> String {
    hex::encode(Sha256::digest(canonical_json(v).as_bytes()))
}
