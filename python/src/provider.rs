//! The core's building blocks for a store written in Python (`agent_memory.provider`): the
//! shared validation, page checks and cursors, so such a store enforces exactly the limits
//! and cursor rules every Rust provider does, instead of a copy of them.

use agent_memory::provider::{self, CursorKind, PageRequestExt, TextMatcher};
use agent_memory::validation;
use agent_memory::{Case, MatchMode};
use pyo3::prelude::*;

use crate::convert;
use crate::errors::to_py;
use crate::store::{match_arg, page_arg, search_arg, write_arg, WriteOptions};
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
    let options = WriteOptions { metadata, expires_at, expected_revision, create_only, source };
    let write = write_arg(py, content, options)?;
    let key = convert::text(key, "key")?;
    let now = convert::timestamp(now).map_err(|e| to_py(py, e))?;
    write.validate(&key, now).map_err(|e| to_py(py, e))
}

/// Checks a key.
#[pyfunction]
fn check_key(py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
    validation::key(&convert::text(key, "key")?).map_err(|e| to_py(py, e))
}

/// Checks a search query for the match mode `match` (in a word mode: at least one word and
/// at most `MAX_QUERY_WORDS`).
#[pyfunction]
#[pyo3(signature = (query, *, r#match = None))]
fn check_query(
    py: Python<'_>,
    query: &Bound<'_, PyAny>,
    r#match: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    search_words(py, query, r#match, false).map(drop)
}

/// What a record's content must contain for the query to match, checked as `check_query`
/// checks it: the whole query for `"phrase"`, its words (split on Unicode white space) for
/// `"all_words"` (every one must occur) and `"any_word"` (one is enough); each folded with
/// `fold_case` when `ignore_case`, to be looked for in the folded content.
#[pyfunction]
#[pyo3(signature = (query, *, r#match = None, ignore_case = false))]
fn search_words(
    py: Python<'_>,
    query: &Bound<'_, PyAny>,
    r#match: Option<&Bound<'_, PyAny>>,
    ignore_case: bool,
) -> PyResult<Vec<String>> {
    let fail = |e| to_py(py, e);
    let query = convert::text(query, "query")?;
    let mode = match_arg(r#match).map_err(fail)?;
    let case = if ignore_case { Case::Insensitive } else { Case::Sensitive };
    // The core's matcher checks the query; the words are split exactly as it splits them.
    TextMatcher::new(&query, mode, case).map_err(fail)?;
    let words: Vec<&str> = match mode {
        MatchMode::Phrase => vec![&query],
        MatchMode::AllWords | MatchMode::AnyWord => query.split_whitespace().collect(),
    };
    Ok(words
        .into_iter()
        .map(|word| match case {
            Case::Sensitive => word.to_owned(),
            Case::Insensitive => provider::fold_case(word).into_owned(),
        })
        .collect())
}

/// `text` after Unicode simple case folding (CaseFolding.txt statuses C and S), one character
/// to one character: what `ignore_case` compares. Not `str.casefold()` (full folding: `ß`
/// becomes `ss`) nor `str.lower()` (the Kelvin sign stays, `ς` stays).
#[pyfunction]
fn fold_case(text: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(provider::fold_case(&convert::text(text, "text")?).into_owned())
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

/// Checks `limit`, `after`, `prefix`, `match`, `ignore_case` and `metadata` of a key page
/// (`kind`: `list`, `keys` (for `list_keys`), `search` or `purge`; a prefix is for `list` and
/// `keys` only, `match` and `ignore_case` for `search` only, a metadata filter for `list` and
/// `search` only) and returns the key to continue after, or `None` to start at the first key
/// (of the prefix). The page then holds the keys above it that start with `prefix`. A cursor
/// made for another prefix, match mode, case or filter is refused.
#[pyfunction]
#[pyo3(signature = (kind, scope, limit, after = None, prefix = "", *, r#match = None, ignore_case = false, metadata = None))]
#[allow(clippy::too_many_arguments)]
fn key_page(
    py: Python<'_>,
    kind: &str,
    scope: &Bound<'_, PyScope>,
    limit: i64,
    after: Option<&str>,
    prefix: &str,
    r#match: Option<&Bound<'_, PyAny>>,
    ignore_case: bool,
    metadata: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<String>> {
    let request = search_arg(py, limit, after, r#match, ignore_case, metadata)?.prefix(prefix);
    let page =
        request.key_page(self::kind(py, kind)?, &scope.get().inner).map_err(|e| to_py(py, e))?;
    Ok(page.after)
}

/// The cursor that continues a key page of `kind` after `key`, bound to the page's `prefix`,
/// `match`, `ignore_case` and `metadata` filter (checked as `key_page` checks them).
#[pyfunction]
#[pyo3(signature = (kind, scope, key, prefix = "", *, r#match = None, ignore_case = false, metadata = None))]
#[allow(clippy::too_many_arguments)]
fn key_cursor(
    py: Python<'_>,
    kind: &str,
    scope: &Bound<'_, PyScope>,
    key: &str,
    prefix: &str,
    r#match: Option<&Bound<'_, PyAny>>,
    ignore_case: bool,
    metadata: Option<&Bound<'_, PyAny>>,
) -> PyResult<String> {
    let (kind, scope) = (self::kind(py, kind)?, &scope.get().inner);
    // The prefix and the options bind the cursor; the core's page checks them, as for every
    // provider.
    let page = search_arg(py, 1, None, r#match, ignore_case, metadata)?
        .prefix(prefix)
        .key_page(kind, scope)
        .map_err(|e| to_py(py, e))?;
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
    m.add_function(wrap_pyfunction!(search_words, m)?)?;
    m.add_function(wrap_pyfunction!(fold_case, m)?)?;
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
    m.add("MAX_QUERY_BYTES", validation::MAX_QUERY_BYTES)?;
    m.add("MAX_QUERY_WORDS", agent_memory::MAX_QUERY_WORDS)?;
    m.add("MAX_METADATA_FILTER_FIELDS", agent_memory::MAX_METADATA_FILTER_FIELDS)?;
    Ok(())
}
