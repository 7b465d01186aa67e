//! A generic walk over the typed model, visiting every string field and every mistyped value
//! with its property path. Validation uses it ([`check_fields`]) to check placeholder syntax
//! in every text property (SCN115), to report every wrongly typed field (SCN112) and every
//! key the model does not know (SCN124), and to find the variables templates name, without
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
    /// A key the model does not know, at `path` (which ends with the key); `known` lists
    /// the keys the enclosing object takes.
    fn unknown(&mut self, path: &str, key: &str, known: &'static [&'static str]);
}

/// A value the walk can descend into.
pub trait Walk {
    /// What the value's JSON type is, for messages ("a string", "an object", ...).
    const EXPECTED: &'static str;
    /// Visits this value; `path` holds its property path and is restored on return.
    fn walk(&self, path: &mut String, v: &mut dyn Visitor);
}

/// Visits the unknown keys `extra` of an object at `path` whose known keys are `known`.
pub fn walk_extra(
    extra: &serde_json::Map<String, Value>,
    known: &'static [&'static str],
    path: &mut String,
    v: &mut dyn Visitor,
) {
    for key in extra.keys() {
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
        v.unknown(path, key, known);
        path.truncate(len);
    }
}

/// The known key closest to `key` by edit distance, when close enough to be a typo of it
/// (at most a third of the key's length, and at most 3 edits).
pub fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let limit = (key.chars().count() / 3).clamp(1, 3);
    known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Edit distance over characters counting a swap of two neighbours as one edit (optimal
/// string alignment): `nmae` is one edit from `name`. Keys are short: quadratic is fine.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        d[i * w] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = best;
        }
    }
    d[a.len() * w + b.len()]
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

/// Reports wrongly typed fields (SCN112), placeholder syntax errors in every string field
/// (SCN115) and keys the model does not know (SCN124) of a typed value. `base` is the
/// property path of `t` ("" for a root).
pub fn check_fields<T: Walk>(t: &T, base: &str, out: &mut Vec<ScenarioError>) {
    check_fields_as(t, base, |p, k, known| Some(unknown_key(p, k, known)), out)
}

/// [`check_fields`] with unknown keys judged by `unknown` (an entry, or None to accept the
/// key).
pub fn check_fields_as<T: Walk>(
    t: &T,
    base: &str,
    unknown: fn(&str, &str, &[&str]) -> Option<ScenarioError>,
    out: &mut Vec<ScenarioError>,
) {
    struct V<'a>(
        &'a mut Vec<ScenarioError>,
        fn(&str, &str, &[&str]) -> Option<ScenarioError>,
    );
    impl Visitor for V<'_> {
        fn string(&mut self, path: &str, s: &str) {
            if let Err(e) = template::check(s) {
                self.0.push(placeholder_error(path, s, &e.message));
            }
        }
        fn invalid(&mut self, path: &str, expected: &'static str, v: &Value) {
            self.0.push(type_error(path, expected, v));
        }
        fn unknown(&mut self, path: &str, key: &str, known: &'static [&'static str]) {
            self.0.extend((self.1)(path, key, known));
        }
    }
    let mut path = base.to_string();
    t.walk(&mut path, &mut V(out, unknown));
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

/// SCN124: `key` (at `path`) is none of the `known` keys of its object.
pub(crate) fn unknown_key(path: &str, key: &str, known: &[&str]) -> ScenarioError {
    let hint = match closest(key, known) {
        Some(k) => format!(" (did you mean {k:?}?)"),
        None if known.is_empty() => " (this object takes no keys)".to_string(),
        None => format!(" (known: {})", known.join(", ")),
    };
    ScenarioError::new(
        Code::UnknownProperty,
        format!("unknown property {key:?} at {path}{hint}"),
    )
    .property(path)
    .value(key)
}

/// SCN128 (warning): `key` (at `path`), beside the `known` keys of a structural object
/// (snapshot, constructor, kind group, brick entry, output), when it is a near miss of one
/// of them; None for any other key (designer metadata, kept as it is).
pub(crate) fn misspelt_key(path: &str, key: &str, known: &[&str]) -> Option<ScenarioError> {
    let k = closest(key, known)?;
    Some(
        ScenarioError::new(
            Code::MisspeltKey,
            format!(
                "{key:?} at {path} is no key of its object and is ignored by calls: did you mean {k:?}?"
            ),
        )
        .property(path)
        .value(key),
    )
}

/// SCN115: the placeholder syntax of the text at `path` is wrong.
pub(crate) fn placeholder_error(path: &str, text: &str, msg: &str) -> ScenarioError {
    ScenarioError::new(Code::BadPlaceholder, format!("{path}: {msg}"))
        .property(path)
        .value(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses_find_their_key_and_metadata_does_not() {
        assert_eq!(edit_distance("nmae", "name"), 1);
        assert_eq!(edit_distance("langauge", "language"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        let brick = ["id", "description", "properties", "outputs"];
        assert_eq!(closest("propreties", &brick), Some("properties"));
        assert_eq!(closest("position", &brick), None);
        assert_eq!(closest("x", &brick), None);
        assert_eq!(
            closest("is_interruptable", &["audio", "is_interruptible"]),
            Some("is_interruptible")
        );
    }
}
