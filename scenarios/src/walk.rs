//! A generic walk over the typed model, visiting every string field and every mistyped value
//! with its property path. Validation uses it to check placeholder syntax in every text
//! property (SCN115) and to report every wrongly typed field (SCN112) without a hand-written
//! check per field. It allocates nothing but the path buffer, so it stays linear and cheap.

use serde_json::{Number, Value};

use crate::opt::Opt;

/// Receives what the walk finds.
pub trait Visitor {
    /// A string field at `path`.
    fn string(&mut self, path: &str, s: &str);
    /// A field at `path` whose value is not of the `expected` type.
    fn invalid(&mut self, path: &str, expected: &'static str, v: &Value);
}

/// A value the walk can descend into.
pub trait Walk {
    /// What the value's JSON type is, for messages ("a string", "an object", ...).
    const EXPECTED: &'static str;
    /// Visits this value; `path` holds its property path and is restored on return.
    fn walk(&self, path: &mut String, v: &mut dyn Visitor);
}

impl Walk for String {
    const EXPECTED: &'static str = "a string";
    fn walk(&self, path: &mut String, v: &mut dyn Visitor) {
        v.string(path, self);
    }
}

impl Walk for bool {
    const EXPECTED: &'static str = "a boolean";
    fn walk(&self, _: &mut String, _: &mut dyn Visitor) {}
}

impl Walk for Number {
    const EXPECTED: &'static str = "a number";
    fn walk(&self, _: &mut String, _: &mut dyn Visitor) {}
}

impl Walk for Value {
    const EXPECTED: &'static str = "any JSON value";
    fn walk(&self, _: &mut String, _: &mut dyn Visitor) {}
}

impl<T: Walk> Walk for Vec<T> {
    const EXPECTED: &'static str = "an array";
    fn walk(&self, path: &mut String, v: &mut dyn Visitor) {
        for (i, item) in self.iter().enumerate() {
            let len = path.len();
            path.push('[');
            push_index(path, i);
            path.push(']');
            item.walk(path, v);
            path.truncate(len);
        }
    }
}

fn push_index(path: &mut String, i: usize) {
    use std::fmt::Write as _;
    let _ = write!(path, "{i}");
}

impl<T: Walk> Opt<T> {
    /// Walks the field named `name` under `path`.
    pub fn walk_field(&self, name: &str, path: &mut String, v: &mut dyn Visitor) {
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(name);
        match self {
            Opt::Set(t) => t.walk(path, v),
            Opt::Invalid(bad) => v.invalid(path, T::EXPECTED, bad),
            Opt::Absent | Opt::Null => {}
        }
        path.truncate(len);
    }
}
