//! `Opt<T>`: a lossless optional field.
//!
//! Stored scenario content must round-trip exactly (deserialise then serialise gives the same
//! JSON value), and validation must be able to report *every* problem at once instead of
//! failing on the first mistyped property. A plain `Option<T>` can do neither: it forgets
//! whether a field was absent or `null`, and a wrongly typed value aborts the whole parse.
//! `Opt<T>` remembers all four cases and keeps a mistyped value verbatim so validation can
//! report it (SCN112) and serialisation can write it back unchanged.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A field that may be absent, `null`, a well-typed value, or a value of the wrong JSON type.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Opt<T> {
    /// The key was not present (serialised by omission; use `skip_serializing_if = "Opt::is_absent"`).
    #[default]
    Absent,
    /// The key was present with `null`.
    Null,
    /// The key held a value of the expected shape.
    Set(T),
    /// The key held a value of another JSON type; kept verbatim.
    Invalid(Value),
}

impl<T> Opt<T> {
    /// True when the key was absent (used by serde to omit the key again).
    pub fn is_absent(&self) -> bool {
        matches!(self, Opt::Absent)
    }
    /// The typed value, if the field held one.
    pub fn get(&self) -> Option<&T> {
        match self {
            Opt::Set(t) => Some(t),
            _ => None,
        }
    }
    /// The verbatim value of a mistyped field.
    pub fn invalid(&self) -> Option<&Value> {
        match self {
            Opt::Invalid(v) => Some(v),
            _ => None,
        }
    }
    /// Mutable access to the typed value.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        match self {
            Opt::Set(t) => Some(t),
            _ => None,
        }
    }
}

impl<T> From<T> for Opt<T> {
    fn from(t: T) -> Self {
        Opt::Set(t)
    }
}

impl Opt<String> {
    /// The string, or "" when absent, null or mistyped.
    pub fn str(&self) -> &str {
        self.get().map(String::as_str).unwrap_or("")
    }
}

impl Opt<bool> {
    /// The boolean, or `false` when absent, null or mistyped.
    pub fn flag(&self) -> bool {
        self.get().copied().unwrap_or(false)
    }
}

impl Opt<serde_json::Number> {
    /// The number as f64, if present and well typed.
    pub fn f64(&self) -> Option<f64> {
        self.get().and_then(serde_json::Number::as_f64)
    }
}

impl<T> Opt<Vec<T>> {
    /// The elements, or an empty slice.
    pub fn items(&self) -> &[T] {
        self.get().map(Vec::as_slice).unwrap_or(&[])
    }
}

impl<T: Serialize> Serialize for Opt<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Opt::Absent | Opt::Null => s.serialize_none(),
            Opt::Set(t) => t.serialize(s),
            Opt::Invalid(v) => v.serialize(s),
        }
    }
}

impl<'de, T: FromJson> Deserialize<'de> for Opt<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Opt::from_field(Some(Value::deserialize(d)?)))
    }
}

impl<T: FromJson> Opt<T> {
    /// Builds the field from the value under its key (`None` when the key is absent).
    pub fn from_field(v: Option<Value>) -> Self {
        match v {
            None => Opt::Absent,
            Some(Value::Null) => Opt::Null,
            Some(v) => match T::from_json(v) {
                Ok(t) => Opt::Set(t),
                Err(v) => Opt::Invalid(v),
            },
        }
    }
}

/// Conversion from an owned JSON value that hands the value back unchanged when it has the
/// wrong shape. The model is built with it in one pass that moves strings instead of copying
/// them (serde's `flatten` + a per-field buffer made parsing quadratic in nesting depth).
pub trait FromJson: Sized {
    /// The typed value, or the untouched input when it has another shape.
    fn from_json(v: Value) -> Result<Self, Value>;
}

impl FromJson for String {
    fn from_json(v: Value) -> Result<Self, Value> {
        match v {
            Value::String(s) => Ok(s),
            other => Err(other),
        }
    }
}

impl FromJson for bool {
    fn from_json(v: Value) -> Result<Self, Value> {
        match v {
            Value::Bool(b) => Ok(b),
            other => Err(other),
        }
    }
}

impl FromJson for serde_json::Number {
    fn from_json(v: Value) -> Result<Self, Value> {
        match v {
            Value::Number(n) => Ok(n),
            other => Err(other),
        }
    }
}

impl FromJson for Value {
    fn from_json(v: Value) -> Result<Self, Value> {
        Ok(v)
    }
}

impl<T: FromJson + Serialize> FromJson for Vec<T> {
    fn from_json(v: Value) -> Result<Self, Value> {
        let Value::Array(items) = v else {
            return Err(v);
        };
        let mut out = Vec::with_capacity(items.len());
        let mut rest = items.into_iter();
        while let Some(item) = rest.next() {
            match T::from_json(item) {
                Ok(t) => out.push(t),
                Err(bad) => {
                    // Rebuild the original array: converted elements serialise back exactly.
                    let mut arr: Vec<Value> = out
                        .iter()
                        .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
                        .collect();
                    arr.push(bad);
                    arr.extend(rest);
                    return Err(Value::Array(arr));
                }
            }
        }
        Ok(out)
    }
}
