//! The metadata filter: equality conditions on top-level metadata fields, compared by type.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};

use crate::error::{MemoryError, Result};
use crate::record::Metadata;

/// Most fields one [`MetadataFilter`] names.
pub const MAX_METADATA_FILTER_FIELDS: usize = 8;

/// Longest field name of a [`MetadataFilter`], in bytes.
pub const MAX_METADATA_FIELD_BYTES: usize = 256;

/// Longest string value of a [`MetadataFilter`], in bytes.
pub const MAX_METADATA_VALUE_BYTES: usize = 1_024;

/// Equality conditions on top-level metadata fields, all of which must hold: what `list` and
/// `search` select records by, beside the query.
///
/// Values are strings, numbers, booleans or null; numbers compare as numbers (`1` equals `1.0`),
/// and a field that is absent equals nothing, not even null. At most
/// [`MAX_METADATA_FILTER_FIELDS`] fields.
///
/// ```
/// use agent_memory::{MetadataFilter, Metadata};
/// use serde_json::json;
///
/// let filter = MetadataFilter::new().field("category", "preferences").field("pinned", true);
/// let metadata: Metadata = serde_json::from_value(json!({
///     "category": "preferences", "pinned": true, "weight": 1.0
/// }))?;
/// assert!(filter.matches(&metadata));
/// assert!(MetadataFilter::new().field("weight", 1).matches(&metadata));
/// assert!(!MetadataFilter::new().field("missing", serde_json::Value::Null).matches(&metadata));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MetadataFilter {
    fields: BTreeMap<String, Value>,
}

impl MetadataFilter {
    /// The empty filter, which every record passes.
    pub fn new() -> Self {
        Self::default()
    }

    /// The filter with one more condition: `name` equals `value` (checked by
    /// [`check`](Self::check) when the request is).
    pub fn field(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.fields.insert(name.into(), value.into());
        self
    }

    /// The filter a JSON object spells (a tool's `metadata` argument), checked.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `metadata` for anything but an object of at
    /// most [`MAX_METADATA_FILTER_FIELDS`] scalar values.
    pub fn from_json(value: &Value) -> Result<Self> {
        let Value::Object(object) = value else {
            return Err(MemoryError::invalid("metadata", "must be an object of field values"));
        };
        let filter = Self { fields: object.iter().map(|(k, v)| (k.clone(), v.clone())).collect() };
        filter.check()?;
        Ok(filter)
    }

    /// True when the filter has no condition.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// How many fields it names.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// The conditions, by field name in byte order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.fields.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The conditions as one JSON object (a PostgreSQL `jsonb` containment's right side, a
    /// script's argument).
    pub fn to_json(&self) -> Value {
        Value::Object(self.fields.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    /// Checks the filter: at most [`MAX_METADATA_FILTER_FIELDS`] fields, each name 1 to
    /// [`MAX_METADATA_FIELD_BYTES`] bytes and each value a string (at most
    /// [`MAX_METADATA_VALUE_BYTES`]), a finite number, a boolean or null, with no NUL anywhere.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `metadata`.
    pub fn check(&self) -> Result<()> {
        let invalid = |reason: String| Err(MemoryError::invalid("metadata", reason));
        if self.fields.len() > MAX_METADATA_FILTER_FIELDS {
            return invalid(format!("must name at most {MAX_METADATA_FILTER_FIELDS} fields"));
        }
        for (name, value) in &self.fields {
            if name.is_empty() || name.len() > MAX_METADATA_FIELD_BYTES || name.contains('\0') {
                return invalid(format!(
                    "field names must be 1 to {MAX_METADATA_FIELD_BYTES} bytes without NUL"
                ));
            }
            match value {
                Value::String(text)
                    if text.len() > MAX_METADATA_VALUE_BYTES || text.contains('\0') =>
                {
                    return invalid(format!(
                        "string values must be at most {MAX_METADATA_VALUE_BYTES} bytes without NUL"
                    ));
                }
                Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => {}
                Value::Array(_) | Value::Object(_) => {
                    return invalid("values must be strings, numbers, booleans or null".into());
                }
            }
        }
        Ok(())
    }

    /// True when every condition holds in `metadata`.
    pub fn matches(&self, metadata: &Metadata) -> bool {
        self.fields
            .iter()
            .all(|(name, wanted)| metadata.get(name).is_some_and(|found| same_value(found, wanted)))
    }

    /// As [`matches`](Self::matches), for metadata kept as JSON text (`true` for the empty
    /// filter without parsing). Text that is not a JSON object matches no condition.
    pub fn matches_json(&self, metadata: &str) -> bool {
        if self.is_empty() {
            return true;
        }
        serde_json::from_str::<Metadata>(metadata).is_ok_and(|parsed| self.matches(&parsed))
    }

    /// The filter in one canonical spelling (fields in byte order, whole numbers without a
    /// fraction), what a cursor is bound to.
    pub(super) fn canonical(&self) -> String {
        let canonical: BTreeMap<&str, Value> = self
            .fields
            .iter()
            .map(|(name, value)| {
                let value = match value {
                    Value::Number(n) => Value::Number(canonical_number(n)),
                    other => other.clone(),
                };
                (name.as_str(), value)
            })
            .collect();
        serde_json::to_string(&canonical).unwrap_or_default()
    }
}

impl fmt::Debug for MetadataFilter {
    // Field values can be anything a user wrote: only the names' count is shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetadataFilter").field("fields", &self.fields.len()).finish()
    }
}

/// Equality of a stored value and a wanted scalar: numbers by value, the rest exactly.
fn same_value(found: &Value, wanted: &Value) -> bool {
    match (found, wanted) {
        (Value::Number(a), Value::Number(b)) => same_number(a, b),
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Null, Value::Null) => true,
        _ => false,
    }
}

/// Numbers as the values they were read as: integers exactly, a float equal to an integer
/// only when it has no fraction and the same value.
fn same_number(a: &Number, b: &Number) -> bool {
    let whole = |n: &Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
    let float_is = |f: Option<f64>, i: i128| {
        // An f64 below 2^127 in magnitude converts to i128 exactly when it has no fraction.
        #[allow(clippy::cast_possible_truncation)]
        f.is_some_and(|f| f.fract() == 0.0 && f.abs() < 1.0e38 && f as i128 == i)
    };
    match (whole(a), whole(b)) {
        (Some(x), Some(y)) => x == y,
        (Some(x), None) => float_is(b.as_f64(), x),
        (None, Some(y)) => float_is(a.as_f64(), y),
        (None, None) => a.as_f64() == b.as_f64(),
    }
}

/// A whole number kept as a float, spelled as an integer.
fn canonical_number(n: &Number) -> Number {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 =>
        {
            #[allow(clippy::cast_possible_truncation)]
            Number::from(f as i64)
        }
        _ => n.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        let n = |v: Value| match v {
            Value::Number(n) => n,
            _ => unreachable!(),
        };
        assert!(same_number(&n(json!(1)), &n(json!(1.0))));
        assert!(same_number(&n(json!(-3)), &n(json!(-3.0))));
        assert!(!same_number(&n(json!(1)), &n(json!(1.5))));
        assert!(same_number(&n(json!(u64::MAX)), &n(json!(u64::MAX))));
        assert!(!same_number(&n(json!(-1)), &n(json!(u64::MAX))));
        assert!(!same_number(
            &n(json!(9_007_199_254_740_993_i64)),
            &n(json!(9_007_199_254_740_992.0))
        ));
    }

    #[test]
    fn filters_are_checked() {
        assert!(MetadataFilter::from_json(&json!({"a": [1]})).is_err());
        assert!(MetadataFilter::from_json(&json!({"a": {"b": 1}})).is_err());
        assert!(MetadataFilter::from_json(&json!(["a"])).is_err());
        assert!(MetadataFilter::from_json(&json!({"": 1})).is_err());
        assert!(MetadataFilter::from_json(&json!({"a": "x\u{0}"})).is_err());
        let nine: serde_json::Map<String, Value> =
            (0..9).map(|i| (format!("f{i}"), json!(i))).collect();
        assert!(MetadataFilter::from_json(&Value::Object(nine)).is_err());
        assert!(
            MetadataFilter::from_json(&json!({"a": null, "b": 1.5, "c": true, "d": "x"})).is_ok()
        );
    }
}
