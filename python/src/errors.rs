//! Core errors as the package's exceptions, and exceptions of Python stores as core errors.
//!
//! The exception classes are plain Python classes in `agent_memory/_errors.py` (so third-party
//! stores raise and catch the same classes, and one class can be both a `MemoryError` and a
//! `ValueError`). This module maps the core's variants onto them:
//!
//! | core | Python |
//! | --- | --- |
//! | `MemoryError::Invalid` | `MemoryValidationError` (also a `ValueError`), with `field` and `reason` |
//! | `MemoryError::Conflict` | `MemoryConflictError` |
//! | `MemoryError::QuotaExceeded` | `MemoryQuotaError`, with `quota` and `limit` |
//! | `MemoryError::Storage` | `MemoryStorageError`, with `provider` |
//! | a variant this build does not know | `MemoryError`, the base class |
//!
//! A new core variant is one class in `_errors.py` and one arm in
//! [`class_name`]. The message is always the core's fixed `Display`: it never holds content,
//! keys, ids, URLs or the driver's text, and the driver's error is not attached as a cause.

use agent_memory::MemoryError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The Python module holding the exception classes.
const ERRORS_MODULE: &str = "agent_memory._errors";

/// The `provider` a core `Storage` error names when a store written in Python failed.
pub(crate) const PYTHON_PROVIDER: &str = "python";

/// The class a core error becomes.
fn class_name(err: &MemoryError) -> &'static str {
    match err {
        MemoryError::Invalid { .. } => "MemoryValidationError",
        MemoryError::Conflict { .. } => "MemoryConflictError",
        MemoryError::QuotaExceeded { .. } => "MemoryQuotaError",
        MemoryError::Storage { .. } => "MemoryStorageError",
        // `MemoryError` is non-exhaustive: a variant added to the core before this mapping
        // learns it still raises the base class.
        _ => "MemoryError",
    }
}

/// One of the exception classes of `agent_memory._errors`, imported once.
fn class<'py>(py: Python<'py>, name: &'static str) -> PyResult<Bound<'py, PyType>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let module = MODULE.get_or_try_init(py, || py.import(ERRORS_MODULE).map(Bound::unbind))?;
    Ok(module.bind(py).getattr(name)?.cast_into::<PyType>()?)
}

/// The Python exception for a core error.
///
/// An error that came from a store written in Python (see [`from_py`]) is that store's own
/// exception again, unchanged.
pub(crate) fn to_py(py: Python<'_>, err: MemoryError) -> PyErr {
    if let MemoryError::Storage { source: Some(source), .. } = &err {
        if let Some(original) = source.downcast_ref::<PyErr>() {
            return original.clone_ref(py);
        }
    }
    match build(py, &err) {
        Ok(exception) => exception,
        Err(import_failed) => import_failed,
    }
}

fn build(py: Python<'_>, err: &MemoryError) -> PyResult<PyErr> {
    let class = class(py, class_name(err))?;
    let exception = class.call1((err.to_string(),))?;
    match err {
        MemoryError::Invalid { field, reason } => {
            exception.setattr("field", *field)?;
            exception.setattr("reason", reason.as_str())?;
        }
        MemoryError::Storage { provider, .. } => exception.setattr("provider", *provider)?,
        MemoryError::QuotaExceeded { quota, limit } => {
            exception.setattr("quota", *quota)?;
            exception.setattr("limit", *limit)?;
        }
        _ => {}
    }
    Ok(PyErr::from_value(exception))
}

/// The error raised when Rust code panicked: a bug in this package, never the caller's fault.
/// The panic's message is left out, as it could hold data.
pub(crate) fn panicked() -> PyErr {
    PyRuntimeError::new_err(
        "agent_memory hit an internal error (a bug; please report it); \
         a write may or may not have completed",
    )
}

/// Every field name the core's validation can report, so an error raised by a store written
/// in Python keeps its field when it crosses into the core (which names fields with
/// `&'static str`).
const FIELDS: &[&str] = &[
    "application_id",
    "user_id",
    "namespace",
    "key",
    "content",
    "metadata",
    "source",
    "source.session_id",
    "source.invocation_id",
    "source.agent",
    "expires_at",
    "expected_revision",
    "create_only",
    "revision",
    "limit",
    "cursor",
    "prefix",
    "query",
    "match",
    "case",
    "timestamp",
    "text",
    "record",
];

/// The core error for an exception raised by a store written in Python.
///
/// - `MemoryValidationError` becomes `Invalid` with its `field` (when it is one the core
///   knows) and its `reason`.
/// - `MemoryConflictError` becomes `Conflict`.
/// - `MemoryQuotaError` becomes `QuotaExceeded` with its `quota` (when it is one the core
///   knows) and `limit`.
/// - Anything else becomes `Storage` naming the provider `python`, keeping the exception
///   itself as the source, so [`to_py`] raises it again unchanged.
pub(crate) fn from_py(py: Python<'_>, err: PyErr) -> MemoryError {
    let value = err.value(py);
    let is = |name: &'static str| {
        class(py, name).map(|class| value.is_instance(&class).unwrap_or(false)).unwrap_or(false)
    };
    if is("MemoryValidationError") {
        let field = value
            .getattr("field")
            .ok()
            .and_then(|f| f.extract::<String>().ok())
            .and_then(|f| FIELDS.iter().copied().find(|known| *known == f))
            .unwrap_or("input");
        let reason = value
            .getattr("reason")
            .ok()
            .and_then(|r| r.extract::<String>().ok())
            .unwrap_or_else(|| "was refused by the store".to_owned());
        MemoryError::invalid(field, reason)
    } else if is("MemoryConflictError") {
        MemoryError::conflict("the store reported a revision conflict")
    } else if is("MemoryQuotaError") {
        let quota = value
            .getattr("quota")
            .ok()
            .and_then(|q| q.extract::<String>().ok())
            .and_then(|q| {
                [agent_memory::quota::MAX_RECORDS_PER_USER, agent_memory::quota::MAX_BYTES_PER_USER]
                    .into_iter()
                    .find(|known| *known == q)
            })
            .unwrap_or(agent_memory::quota::MAX_RECORDS_PER_USER);
        let limit = value.getattr("limit").ok().and_then(|l| l.extract::<u64>().ok()).unwrap_or(0);
        MemoryError::quota_exceeded(quota, limit)
    } else {
        MemoryError::storage_from(PYTHON_PROVIDER, "the Python store raised an exception", err)
    }
}

/// The `Storage` error for a reply of a Python store that has the wrong shape.
pub(crate) fn bad_reply(what: &'static str) -> MemoryError {
    MemoryError::storage(PYTHON_PROVIDER, what)
}
