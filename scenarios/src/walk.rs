//! A generic walk over the typed model, visiting every string field and every mistyped value
//! with its property path. Validation uses it ([`check_fields`]) to check placeholder syntax
//! in every text property (SCN115) and to report every wrongly typed field (SCN112) without
//! a hand-written check per field. It allocates nothing but the path buffer, so it stays
//! linear and cheap.

use serde_json::{Number, Value};

use crate::{
    codes::{Code, ScenarioError, value_text},
    opt::Opt,
    template,
};

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

/// Reports wrongly typed fields (SCN112) and placeholder syntax errors in every string field
/// (SCN115) of a typed value. `base` is the property path of `t` ("" for a root).
pub fn check_fields<T: Walk>(t: &T, base: &str, out: &mut Vec<ScenarioError>) {
    struct V<'a>(&'a mut Vec<ScenarioError>);
    impl Visitor for V<'_> {
        fn string(&mut self, path: &str, s: &str) {
            if let Err(e) = template::check(s) {
                self.0.push(placeholder_error(path, s, &e.message));
            }
        }
        fn invalid(&mut self, path: &str, expected: &'static str, v: &Value) {
            self.0.push(type_error(path, expected, v));
        }
    }
    let mut path = base.to_string();
    t.walk(&mut path, &mut V(out));
}

/// SCN112: the field at `path` is not of the `expected` type.
pub(crate) fn type_error(path: &str, expected: &str, v: &Value) -> ScenarioError {
    ScenarioError::new(
        Code::InvalidPropertyType,
        format!("{path} must be {expected}"),
    )
    .property(path)
    .value(value_text(v))
}

/// SCN115: the placeholder syntax of the text at `path` is wrong.
pub(crate) fn placeholder_error(path: &str, text: &str, msg: &str) -> ScenarioError {
    ScenarioError::new(Code::BadPlaceholder, format!("{path}: {msg}"))
        .property(path)
        .value(text)
}
