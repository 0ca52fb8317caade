//! The core's building blocks for a store written in Python (`agent_memory.provider`): the
//! shared validation, page checks and cursors, so such a store enforces exactly the limits
//! and cursor rules every Rust provider does, instead of a copy of them.

use agent_memory::provider::{self, CursorKind};
use agent_memory::validation;
use agent_memory::PageRequest;
use pyo3::prelude::*;

use crate::convert;
use crate::errors::to_py;
use crate::store::{page_arg, write_arg};
use crate::types::PyScope;

fn kind(py: Python<'_>, name: &str) -> PyResult<CursorKind> {
    match name {
        "list" => Ok(CursorKind::List),
        "search" => Ok(CursorKind::Search),
        "purge" => Ok(CursorKind::Purge),
        "keys" => Ok(CursorKind::Keys),
        _ => Err(to_py(
            py,
            agent_memory::MemoryError::invalid(
                "cursor",
                "kind must be list, keys, search or purge",
            ),
        )),
    }
}

/// Checks a `put` as every provider does before any I/O: the key, content, metadata and
/// source limits, and that `expires_at` is after `now` (epoch seconds, by the store's clock).
#[pyfunction]
#[pyo3(signature = (key, content, *, metadata = None, expires_at = None, expected_revision = None, create_only = false, source = None, now))]
#[allow(clippy::too_many_arguments)]
fn check_put(
    py: Python<'_>,
    key: &Bound<'_, PyAny>,
    content: &Bound<'_, PyAny>,
    metadata: Option<&Bound<'_, PyAny>>,
    expires_at: Option<f64>,
    expected_revision: Option<&str>,
    create_only: bool,
    source: Option<&Bound<'_, PyAny>>,
    now: f64,
) -> PyResult<()> {
    let write =
        write_arg(py, content, metadata, expires_at, expected_revision, create_only, source)?;
    let key = convert::text(key, "key")?;
    let now = convert::timestamp(now).map_err(|e| to_py(py, e))?;
    write.validate(&key, now).map_err(|e| to_py(py, e))
}

/// Checks a key.
#[pyfunction]
fn check_key(py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
    validation::key(&convert::text(key, "key")?).map_err(|e| to_py(py, e))
}

/// Checks a search query.
#[pyfunction]
fn check_query(py: Python<'_>, query: &Bound<'_, PyAny>) -> PyResult<()> {
    validation::query(&convert::text(query, "query")?).map_err(|e| to_py(py, e))
}

/// Checks the ids of `delete_user` and `list_namespaces`.
#[pyfunction]
fn check_user(
    py: Python<'_>,
    application_id: &Bound<'_, PyAny>,
    user_id: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let application_id = convert::text(application_id, "application_id")?;
    let user_id = convert::text(user_id, "user_id")?;
    validation::user(&application_id, &user_id).map_err(|e| to_py(py, e))
}

/// Checks `limit`, `after` and `prefix` of a key page (`kind`: `list`, `keys` (for
/// `list_keys`), `search` or `purge`; a prefix is for `list` and `keys` only) and returns the key to continue after, or `None` to start at
/// the first key (of the prefix). The page then holds the keys above it that start with
/// `prefix`.
#[pyfunction]
#[pyo3(signature = (kind, scope, limit, after = None, prefix = ""))]
fn key_page(
    py: Python<'_>,
    kind: &str,
    scope: &Bound<'_, PyScope>,
    limit: i64,
    after: Option<&str>,
    prefix: &str,
) -> PyResult<Option<String>> {
    let request: PageRequest = page_arg(py, limit, after)?.prefix(prefix);
    let page =
        request.key_page(self::kind(py, kind)?, &scope.get().inner).map_err(|e| to_py(py, e))?;
    Ok(page.after)
}

/// The cursor that continues a key page of `kind` (listing keys that start with `prefix`)
/// after `key`.
#[pyfunction]
#[pyo3(signature = (kind, scope, key, prefix = ""))]
fn key_cursor(
    py: Python<'_>,
    kind: &str,
    scope: &Bound<'_, PyScope>,
    key: &str,
    prefix: &str,
) -> PyResult<String> {
    let (kind, scope) = (self::kind(py, kind)?, &scope.get().inner);
    if prefix.is_empty() {
        return Ok(provider::key_cursor(kind, scope, key).into());
    }
    // The prefix binds the cursor; the core's page checks it, as for every provider.
    let page =
        PageRequest::new(1).prefix(prefix).key_page(kind, scope).map_err(|e| to_py(py, e))?;
    Ok(page.cursor(scope, key).into())
}

/// Checks the ids, `limit` and `after` of `list_namespaces` and returns the namespace to
/// continue after (`""` is the default namespace), or `None` to start at the first.
#[pyfunction]
#[pyo3(signature = (application_id, user_id, limit, after = None))]
fn namespace_page(
    py: Python<'_>,
    application_id: &str,
    user_id: &str,
    limit: i64,
    after: Option<&str>,
) -> PyResult<Option<String>> {
    let request = page_arg(py, limit, after)?;
    let page = request.namespace_page(application_id, user_id).map_err(|e| to_py(py, e))?;
    Ok(page.after)
}

/// The cursor that continues `list_namespaces` after `namespace` (`""`: the default).
#[pyfunction]
fn namespace_cursor(application_id: &str, user_id: &str, namespace: &str) -> String {
    provider::namespace_cursor(application_id, user_id, namespace).into()
}

/// Checks the application id, `limit` and `after` of `list_users` and returns the user id to
/// continue after, or `None` to start at the first.
#[pyfunction]
#[pyo3(signature = (application_id, limit, after = None))]
fn user_page(
    py: Python<'_>,
    application_id: &str,
    limit: i64,
    after: Option<&str>,
) -> PyResult<Option<String>> {
    let request = page_arg(py, limit, after)?;
    let page = request.user_page(application_id).map_err(|e| to_py(py, e))?;
    Ok(page.after)
}

/// The cursor that continues `list_users` after `user_id`.
#[pyfunction]
fn user_cursor(application_id: &str, user_id: &str) -> String {
    provider::user_cursor(application_id, user_id).into()
}

/// Checks `limit` and `after` of `list_applications` and returns the application id to
/// continue after, or `None` to start at the first.
#[pyfunction]
#[pyo3(signature = (limit, after = None))]
fn application_page(py: Python<'_>, limit: i64, after: Option<&str>) -> PyResult<Option<String>> {
    let request = page_arg(py, limit, after)?;
    let page = request.application_page().map_err(|e| to_py(py, e))?;
    Ok(page.after)
}

/// The cursor that continues `list_applications` after `application_id`.
#[pyfunction]
fn application_cursor(application_id: &str) -> String {
    provider::application_cursor(application_id).into()
}

/// Adds the helpers and the core's limits to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_put, m)?)?;
    m.add_function(wrap_pyfunction!(check_key, m)?)?;
    m.add_function(wrap_pyfunction!(check_query, m)?)?;
    m.add_function(wrap_pyfunction!(check_user, m)?)?;
    m.add_function(wrap_pyfunction!(key_page, m)?)?;
    m.add_function(wrap_pyfunction!(key_cursor, m)?)?;
    m.add_function(wrap_pyfunction!(namespace_page, m)?)?;
    m.add_function(wrap_pyfunction!(namespace_cursor, m)?)?;
    m.add_function(wrap_pyfunction!(user_page, m)?)?;
    m.add_function(wrap_pyfunction!(user_cursor, m)?)?;
    m.add_function(wrap_pyfunction!(application_page, m)?)?;
    m.add_function(wrap_pyfunction!(application_cursor, m)?)?;
    m.add("MAX_KEY_BYTES", validation::MAX_KEY_BYTES)?;
    m.add("MAX_CONTENT_BYTES", validation::MAX_CONTENT_BYTES)?;
    m.add("MAX_METADATA_SOURCE_BYTES", validation::MAX_METADATA_SOURCE_BYTES)?;
    m.add("MAX_METADATA_DEPTH", validation::MAX_METADATA_DEPTH)?;
    m.add("MAX_ID_BYTES", validation::MAX_ID_BYTES)?;
    m.add("MAX_PAGE_LIMIT", validation::MAX_PAGE_LIMIT)?;
    m.add("MAX_CURSOR_BYTES", validation::MAX_CURSOR_BYTES)?;
    m.add("DEFAULT_PAGE_LIMIT", agent_memory::DEFAULT_PAGE_LIMIT)?;
    Ok(())
}
