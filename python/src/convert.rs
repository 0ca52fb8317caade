//! Values between Python and the core: JSON metadata, epoch-second timestamps, revisions,
//! cursors and page limits.
//!
//! Every rule (how deep metadata may nest, which timestamps exist, what a cursor looks like)
//! is the core's; these functions only translate, and name the argument when a Python value
//! has no JSON or core counterpart at all.

use agent_memory::validation::MAX_METADATA_DEPTH;
use agent_memory::{Cursor, MemoryError, Revision, Timestamp};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Deepest Python nesting converted at all. Deeper than the core's limit, so the core still
/// decides (and names the rule); shallow enough that a self-containing list cannot exhaust
/// the stack.
const MAX_CONVERSION_DEPTH: usize = MAX_METADATA_DEPTH + 2;

fn not_json(field: &'static str) -> MemoryError {
    MemoryError::invalid(
        field,
        "must hold only JSON values (dict with str keys, list, tuple, str, int, float, bool, None)",
    )
}

/// A Python value as JSON, for `metadata`.
pub(crate) fn to_json(value: &Bound<'_, PyAny>, field: &'static str) -> Result<Value, MemoryError> {
    to_json_at(value, field, 1)
}

fn to_json_at(
    value: &Bound<'_, PyAny>,
    field: &'static str,
    depth: usize,
) -> Result<Value, MemoryError> {
    if value.is_none() {
        return Ok(Value::Null);
    }
    // `bool` before `int`: in Python, `True` is an `int`.
    if let Ok(flag) = value.cast::<PyBool>() {
        return Ok(Value::Bool(flag.is_true()));
    }
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(Value::String(text.to_cow().map_err(|_| not_utf8(field))?.into_owned()));
    }
    if value.cast::<PyInt>().is_ok() {
        if let Ok(n) = value.extract::<i64>() {
            return Ok(Value::Number(n.into()));
        }
        if let Ok(n) = value.extract::<u64>() {
            return Ok(Value::Number(n.into()));
        }
        return Err(MemoryError::invalid(field, "holds an integer outside the 64-bit range"));
    }
    if let Ok(float) = value.cast::<PyFloat>() {
        return Number::from_f64(float.value())
            .map(Value::Number)
            .ok_or_else(|| MemoryError::invalid(field, "holds a float that is not finite"));
    }
    if depth > MAX_CONVERSION_DEPTH {
        return Err(MemoryError::invalid(
            field,
            format!("must be nested at most {MAX_METADATA_DEPTH} levels deep"),
        ));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut map = Map::new();
        for (name, item) in dict.iter() {
            let name = name.cast::<PyString>().map_err(|_| not_json(field))?;
            let name = name.to_cow().map_err(|_| not_utf8(field))?.into_owned();
            map.insert(name, to_json_at(&item, field, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(list) = value.cast::<PyList>() {
        return list.iter().map(|item| to_json_at(&item, field, depth + 1)).collect();
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        return tuple.iter().map(|item| to_json_at(&item, field, depth + 1)).collect();
    }
    Err(not_json(field))
}

fn not_utf8(field: &'static str) -> MemoryError {
    MemoryError::invalid(field, "must be valid Unicode (no lone surrogates)")
}

/// JSON as a fresh Python value (dicts and lists the caller may change freely).
pub(crate) fn from_json<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(flag) => PyBool::new(py, *flag).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
            }
        }
        Value::String(text) => PyString::new(py, text).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(from_json(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => from_map(py, map)?.into_any(),
    })
}

/// A JSON object as a fresh Python dict.
pub(crate) fn from_map<'py>(
    py: Python<'py>,
    map: &Map<String, Value>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, item) in map {
        dict.set_item(name, from_json(py, item)?)?;
    }
    Ok(dict)
}

/// A string argument, refusing text Rust cannot hold (lone surrogates) as invalid input.
pub(crate) fn text(value: &Bound<'_, PyAny>, field: &'static str) -> PyResult<String> {
    let text = value
        .cast::<PyString>()
        .map_err(|_| pyo3::exceptions::PyTypeError::new_err(format!("{field} must be a str")))?;
    match text.to_cow() {
        Ok(text) => Ok(text.into_owned()),
        Err(_) => Err(crate::errors::to_py(value.py(), not_utf8(field))),
    }
}

/// Epoch seconds as a core timestamp.
pub(crate) fn timestamp(seconds: f64) -> Result<Timestamp, MemoryError> {
    Timestamp::from_unix_seconds(seconds)
}

/// A revision token as the core reads it.
pub(crate) fn revision(token: &str) -> Result<Revision, MemoryError> {
    Revision::new(token)
}

/// A cursor token, when one is given.
pub(crate) fn cursor(token: Option<&str>) -> Result<Option<Cursor>, MemoryError> {
    token.map(Cursor::parse).transpose()
}

/// A page limit; a negative or huge number is the core's `limit` error, not an overflow.
pub(crate) fn limit(limit: i64) -> usize {
    usize::try_from(limit).unwrap_or(0)
}
