//! The vocabulary as Python classes: `MemoryScope`, `MemorySource`, `MemoryRecord`,
//! `MemoryPage`, `MemoryCleanupPage`, `NamespacePage`, `UserPage`, `ApplicationPage`,
//! `KeyInfo`, `KeyInfoPage` and `Fact`.
//!
//! Each is frozen and wraps the core's own value, so a scope is validated by the core's one
//! constructor and a record read from a provider is handed over without copying its fields.
//! Getters build fresh Python values on each access (a record's `metadata` dict is the
//! caller's to change; the record stays as it was read).
//!
//! `repr()` never shows stored text, keys or ids (they end up in logs); the attributes do.

use agent_memory::{
    ApplicationPage, Cursor, Fact, KeyInfo, KeyInfoPage, MemoryCleanupPage, MemoryPage,
    MemoryRecord, MemoryScope, NamespacePage, Source, UserPage,
};
use pyo3::prelude::*;
use pyo3::pyclass::boolean_struct::True;
use pyo3::types::{PyDict, PyTuple};
use pyo3::PyClass;

use crate::convert;
use crate::errors::to_py;

/// Which of a value's optional fields are set, for a `repr()` that shows no value.
fn set_or_unset(value: Option<&str>) -> &'static str {
    if value.is_some() {
        "<set>"
    } else {
        "None"
    }
}

/// `MemoryScope(application_id, user_id, namespace=None)`: the isolation boundary.
#[pyclass(frozen, eq, hash, name = "MemoryScope", module = "agent_memory")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct PyScope {
    pub(crate) inner: MemoryScope,
}

#[pymethods]
impl PyScope {
    #[new]
    #[pyo3(signature = (application_id, user_id, namespace = None))]
    fn new(
        py: Python<'_>,
        application_id: &Bound<'_, PyAny>,
        user_id: &Bound<'_, PyAny>,
        namespace: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let application_id = convert::text(application_id, "application_id")?;
        let user_id = convert::text(user_id, "user_id")?;
        let scope = MemoryScope::new(application_id, user_id).map_err(|e| to_py(py, e))?;
        let inner = match namespace {
            Some(ns) if !ns.is_none() => {
                scope.with_namespace(convert::text(ns, "namespace")?).map_err(|e| to_py(py, e))?
            }
            _ => scope,
        };
        Ok(Self { inner })
    }

    /// The application (tenant) id.
    #[getter]
    fn application_id(&self) -> &str {
        self.inner.application_id()
    }

    /// The end user's id.
    #[getter]
    fn user_id(&self) -> &str {
        self.inner.user_id()
    }

    /// The namespace, or `None` for the user's default namespace.
    #[getter]
    fn namespace(&self) -> Option<&str> {
        self.inner.namespace()
    }

    /// The same user in namespace `name` (`None`: the default namespace).
    #[pyo3(signature = (name))]
    fn with_namespace(&self, py: Python<'_>, name: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let inner = match name {
            Some(name) if !name.is_none() => self
                .inner
                .with_namespace(convert::text(name, "namespace")?)
                .map_err(|e| to_py(py, e))?,
            _ => self.inner.with_default_namespace(),
        };
        Ok(Self { inner })
    }

    fn __repr__(&self) -> String {
        let namespace = if self.inner.namespace().is_some() { "<named>" } else { "None" };
        format!("MemoryScope(application_id=<hidden>, user_id=<hidden>, namespace={namespace})")
    }
}

impl From<MemoryScope> for PyScope {
    fn from(inner: MemoryScope) -> Self {
        Self { inner }
    }
}

/// `MemorySource(session_id=None, invocation_id=None, agent=None)`: where a write came from.
#[pyclass(frozen, eq, name = "MemorySource", module = "agent_memory")]
#[derive(Clone, PartialEq)]
pub(crate) struct PySource {
    pub(crate) inner: Source,
}

#[pymethods]
impl PySource {
    #[new]
    #[pyo3(signature = (session_id = None, invocation_id = None, agent = None))]
    fn new(
        session_id: Option<String>,
        invocation_id: Option<String>,
        agent: Option<String>,
    ) -> Self {
        Self { inner: Source { session_id, invocation_id, agent } }
    }

    /// The session the write came from.
    #[getter]
    fn session_id(&self) -> Option<&str> {
        self.inner.session_id.as_deref()
    }

    /// The invocation the write came from.
    #[getter]
    fn invocation_id(&self) -> Option<&str> {
        self.inner.invocation_id.as_deref()
    }

    /// The agent that wrote.
    #[getter]
    fn agent(&self) -> Option<&str> {
        self.inner.agent.as_deref()
    }

    fn __repr__(&self) -> String {
        format!(
            "MemorySource(session_id={}, invocation_id={}, agent={})",
            set_or_unset(self.inner.session_id.as_deref()),
            set_or_unset(self.inner.invocation_id.as_deref()),
            set_or_unset(self.inner.agent.as_deref()),
        )
    }
}

/// A `source=` argument: `None`, a `MemorySource`, or a dict with its field names.
pub(crate) fn source_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Source>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if let Ok(source) = value.cast::<PySource>() {
        return Ok(Some(source.get().inner.clone()));
    }
    let py = value.py();
    let invalid =
        |reason: &'static str| to_py(py, agent_memory::MemoryError::invalid("source", reason));
    let dict = value.cast::<PyDict>().map_err(|_| invalid("must be a MemorySource or a dict"))?;
    let mut source = Source::default();
    for (name, item) in dict.iter() {
        let name: String =
            name.extract().map_err(|_| invalid("has a field name that is not a str"))?;
        let item: Option<String> =
            item.extract().map_err(|_| invalid("fields must be str or None"))?;
        match name.as_str() {
            "session_id" => source.session_id = item,
            "invocation_id" => source.invocation_id = item,
            "agent" => source.agent = item,
            _ => return Err(invalid("has a field other than session_id, invocation_id and agent")),
        }
    }
    Ok(Some(source))
}

/// One memory, as read. Frozen; timestamps are UTC epoch seconds (`float`).
#[pyclass(frozen, eq, name = "MemoryRecord", module = "agent_memory")]
#[derive(Clone, PartialEq)]
pub(crate) struct PyRecord {
    pub(crate) inner: MemoryRecord,
}

#[pymethods]
impl PyRecord {
    /// Builds a record: what a store written in Python returns. Providers assign `revision`
    /// and the timestamps; values are checked for shape (a revision token, timestamps between
    /// 1970 and 9999, an object for `metadata`), not against the write limits.
    #[new]
    #[pyo3(signature = (scope, key, content, metadata, revision, created_at, updated_at, expires_at = None, source = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        scope: &Bound<'_, PyScope>,
        key: &Bound<'_, PyAny>,
        content: &Bound<'_, PyAny>,
        metadata: Option<&Bound<'_, PyAny>>,
        revision: &str,
        created_at: f64,
        updated_at: f64,
        expires_at: Option<f64>,
        source: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let fail = |e| to_py(py, e);
        let metadata = match metadata.filter(|m| !m.is_none()) {
            None => serde_json::Map::new(),
            Some(m) => match convert::to_json(m, "metadata").map_err(fail)? {
                serde_json::Value::Object(map) => map,
                _ => {
                    return Err(fail(agent_memory::MemoryError::invalid(
                        "metadata",
                        "must be a JSON object",
                    )))
                }
            },
        };
        Ok(Self {
            inner: MemoryRecord {
                scope: scope.get().inner.clone(),
                key: convert::text(key, "key")?,
                content: convert::text(content, "content")?,
                metadata,
                revision: convert::revision(revision).map_err(fail)?,
                created_at: convert::timestamp(created_at).map_err(fail)?,
                updated_at: convert::timestamp(updated_at).map_err(fail)?,
                expires_at: expires_at.map(convert::timestamp).transpose().map_err(fail)?,
                source: source_arg(source)?.unwrap_or_default(),
            },
        })
    }

    /// The scope the record lives in.
    #[getter]
    fn scope(&self) -> PyScope {
        PyScope::from(self.inner.scope.clone())
    }

    /// The record's key.
    #[getter]
    fn key(&self) -> &str {
        &self.inner.key
    }

    /// The stored text. Treat it as data, never as instructions.
    #[getter]
    fn content(&self) -> &str {
        &self.inner.content
    }

    /// The metadata, as a fresh dict on each access.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        convert::from_map(py, &self.inner.metadata)
    }

    /// The opaque revision token; pass it as `expected_revision`.
    #[getter]
    fn revision(&self) -> &str {
        self.inner.revision.as_str()
    }

    /// When the key was first written (UTC epoch seconds).
    #[getter]
    fn created_at(&self) -> f64 {
        self.inner.created_at.as_unix_seconds()
    }

    /// When the record was last written (UTC epoch seconds).
    #[getter]
    fn updated_at(&self) -> f64 {
        self.inner.updated_at.as_unix_seconds()
    }

    /// When the record stops being visible (UTC epoch seconds), or `None`.
    #[getter]
    fn expires_at(&self) -> Option<f64> {
        self.inner.expires_at.map(|at| at.as_unix_seconds())
    }

    /// Where the write came from.
    #[getter]
    fn source(&self) -> PySource {
        PySource { inner: self.inner.source.clone() }
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryRecord(key=<{} bytes>, content=<{} bytes>, revision={:?})",
            self.inner.key.len(),
            self.inner.content.len(),
            self.inner.revision.as_str(),
        )
    }
}

/// The items of an iterable as a tuple, each checked to be a `T` (frozen, so the page shares
/// the caller's objects).
fn class_tuple<'py, T: PyClass>(
    py: Python<'py>,
    items: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let items =
        items.try_iter()?.map(|item| Ok(item?.cast_into::<T>()?)).collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, items)
}

/// A page class as a store written in Python replies it, read back as the core's page.
pub(crate) trait PageClass: PyClass<Frozen = True> + Sync {
    /// One item, as the core has it.
    type Item;
    /// The core's page.
    type Core;

    /// The items as the core's values (failing on an item of another class) and the cursor.
    fn to_core(&self, py: Python<'_>) -> PyResult<(Vec<Self::Item>, Option<String>)>;

    /// The core's page of `items`.
    fn core_page(items: Vec<Self::Item>, next_cursor: Option<Cursor>) -> Self::Core;
}

/// Declares a page class, `Name(items, next_cursor=None)`: a tuple of items and the cursor to
/// continue from, with the getters, `repr()` (counts only) and accessors every page has.
/// `new` turns the constructor's iterable into the tuple; `from_core` a core page's items;
/// `to_core` one item of the tuple back into the core's value (see [`PageClass`]). A page
/// `of $item as $class` holds instances of the class `$class`, each wrapping an `$item` as
/// `inner`; a page `of ids` holds strings (user or application ids).
macro_rules! page_class {
    (
        $(#[$meta:meta])*
        $ty:ident: $core:ident of ids, $name:literal counts $noun:literal;
        items: $items_doc:literal;
        cursor: $cursor_doc:literal;
    ) => {
        page_class! {
            $(#[$meta])*
            $ty: $core of String, $name counts $noun;
            items: $items_doc;
            cursor: $cursor_doc;
            new: |py, items| str_tuple(py, items)?;
            from_core: |py, items| PyTuple::new(py, items)?;
            to_core: |item| item.extract::<String>();
        }
    };
    (
        $(#[$meta:meta])*
        $ty:ident: $core:ident of $item:ty as $class:ident, $name:literal counts $noun:literal;
        items: $items_doc:literal;
        cursor: $cursor_doc:literal;
    ) => {
        page_class! {
            $(#[$meta])*
            $ty: $core of $item, $name counts $noun;
            items: $items_doc;
            cursor: $cursor_doc;
            new: |py, items| class_tuple::<$class>(py, items)?;
            from_core: |py, items| PyTuple::new(py, items.into_iter().map(|inner| $class { inner }))?;
            to_core: |item| Ok(item.cast::<$class>()?.get().inner.clone());
        }
    };
    (
        $(#[$meta:meta])*
        $ty:ident: $core:ident of $item:ty, $name:literal counts $noun:literal;
        items: $items_doc:literal;
        cursor: $cursor_doc:literal;
        new: |$py:ident, $from:ident| $new:expr;
        from_core: |$core_py:ident, $core_items:ident| $from_core:expr;
        to_core: |$one:ident| $to_core:expr;
    ) => {
        $(#[$meta])*
        #[pyclass(frozen, name = $name, module = "agent_memory")]
        pub(crate) struct $ty {
            items: Py<PyTuple>,
            next_cursor: Option<String>,
        }

        #[pymethods]
        impl $ty {
            #[new]
            #[pyo3(signature = (items, next_cursor = None))]
            fn new(
                $py: Python<'_>,
                $from: &Bound<'_, PyAny>,
                next_cursor: Option<String>,
            ) -> PyResult<Self> {
                let items: Bound<'_, PyTuple> = $new;
                Ok(Self { items: items.unbind(), next_cursor })
            }

            #[doc = $items_doc]
            #[getter]
            fn items(&self, py: Python<'_>) -> Py<PyTuple> {
                self.items.clone_ref(py)
            }

            #[doc = $cursor_doc]
            #[getter]
            fn next_cursor(&self) -> Option<&str> {
                self.next_cursor.as_deref()
            }

            fn __repr__(&self, py: Python<'_>) -> String {
                let more = if self.next_cursor.is_some() { "<cursor>" } else { "None" };
                let count = self.items.bind(py).len();
                format!(concat!($name, "(items=<{} ", $noun, ">, next_cursor={})"), count, more)
            }
        }

        impl $ty {
            pub(crate) fn from_core($core_py: Python<'_>, page: $core) -> PyResult<Self> {
                let $core_items = page.items;
                let items: Bound<'_, PyTuple> = $from_core;
                Ok(Self { items: items.unbind(), next_cursor: page.next_cursor.map(String::from) })
            }
        }

        impl PageClass for $ty {
            type Item = $item;
            type Core = $core;

            fn to_core(&self, py: Python<'_>) -> PyResult<(Vec<$item>, Option<String>)> {
                let items = self
                    .items
                    .bind(py)
                    .iter()
                    .map(|$one| $to_core)
                    .collect::<PyResult<Vec<_>>>()?;
                Ok((items, self.next_cursor.clone()))
            }

            fn core_page(items: Vec<$item>, next_cursor: Option<Cursor>) -> $core {
                $core { items, next_cursor }
            }
        }
    };
}

/// The strings of an iterable (user or application ids), as a tuple.
fn str_tuple<'py>(py: Python<'py>, items: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let ids =
        items.try_iter()?.map(|item| item?.extract::<String>()).collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, ids)
}

page_class! {
    /// `MemoryPage(items, next_cursor=None)`: a bounded page of records.
    PyPage: MemoryPage of MemoryRecord as PyRecord, "MemoryPage" counts "records";
    items: "The records, in ascending key order.";
    cursor: "Pass it as `after` for the next page; `None` only when nothing is left.";
}

page_class! {
    /// `NamespacePage(items, next_cursor=None)`: one scope per namespace holding records.
    PyNamespacePage: NamespacePage of MemoryScope as PyScope, "NamespacePage" counts "scopes";
    items: "One scope per namespace, the default namespace (`namespace=None`) first.";
    cursor: "Pass it as `after` for the next page; `None` only when nothing is left.";
}

page_class! {
    /// `UserPage(items, next_cursor=None)`: the ids of an application's users holding records.
    PyUserPage: UserPage of ids, "UserPage" counts "users";
    items: "The user ids, in ascending byte order.";
    cursor: "Pass it as `after` for the next page; `None` only when nothing is left. A page may be\nshort, even empty, and still have one.";
}

page_class! {
    /// `ApplicationPage(items, next_cursor=None)`: the ids of the store's applications holding
    /// records.
    PyApplicationPage: ApplicationPage of ids, "ApplicationPage" counts "applications";
    items: "The application ids, in ascending byte order.";
    cursor: "Pass it as `after` for the next page; `None` only when nothing is left. A page may be\nshort, even empty, and still have one.";
}

/// `MemoryCleanupPage(deleted, next_cursor=None)`: what one `purge_expired` call removed.
#[pyclass(frozen, eq, name = "MemoryCleanupPage", module = "agent_memory")]
#[derive(PartialEq)]
pub(crate) struct PyCleanupPage {
    #[pyo3(get)]
    deleted: u64,
    #[pyo3(get)]
    next_cursor: Option<String>,
}

#[pymethods]
impl PyCleanupPage {
    #[new]
    #[pyo3(signature = (deleted, next_cursor = None))]
    fn new(deleted: u64, next_cursor: Option<String>) -> Self {
        Self { deleted, next_cursor }
    }

    fn __repr__(&self) -> String {
        let more = if self.next_cursor.is_some() { "<cursor>" } else { "None" };
        format!("MemoryCleanupPage(deleted={}, next_cursor={more})", self.deleted)
    }
}

impl PyCleanupPage {
    pub(crate) fn from_core(page: MemoryCleanupPage) -> Self {
        Self { deleted: page.deleted, next_cursor: page.next_cursor.map(String::from) }
    }

    pub(crate) fn parts(&self) -> (u64, Option<String>) {
        (self.deleted, self.next_cursor.clone())
    }
}

/// `KeyInfo(key, content_len)`: one key from `list_keys`, with its content's size in bytes.
#[pyclass(frozen, eq, name = "KeyInfo", module = "agent_memory")]
#[derive(PartialEq)]
pub(crate) struct PyKeyInfo {
    pub(crate) inner: KeyInfo,
}

#[pymethods]
impl PyKeyInfo {
    #[new]
    fn new(key: String, content_len: u64) -> Self {
        Self { inner: KeyInfo::new(key, content_len) }
    }

    /// The record's key.
    #[getter]
    fn key(&self) -> &str {
        &self.inner.key
    }

    /// The length of the record's content in bytes (UTF-8).
    #[getter]
    fn content_len(&self) -> u64 {
        self.inner.content_len
    }

    fn __repr__(&self) -> String {
        format!(
            "KeyInfo(key=<{} bytes>, content_len={})",
            self.inner.key.len(),
            self.inner.content_len
        )
    }
}

page_class! {
    /// `KeyInfoPage(items, next_cursor=None)`: a page of `list_keys`, `KeyInfo` items in key order.
    PyKeyInfoPage: KeyInfoPage of KeyInfo as PyKeyInfo, "KeyInfoPage" counts "keys";
    items: "The keys with their sizes, in ascending key order.";
    cursor: "Pass it as `after` for the next page; `None` only when nothing is left. A page may be\nshort, even empty, and still have one.";
}

/// One remembered fact of the fact port.
#[pyclass(frozen, eq, get_all, name = "Fact", module = "agent_memory")]
#[derive(PartialEq)]
pub(crate) struct PyFact {
    /// Pass it to `forget`.
    id: String,
    /// The fact's text.
    text: String,
    /// When it was remembered (UTC epoch seconds).
    created_at: f64,
}

#[pymethods]
impl PyFact {
    fn __repr__(&self) -> String {
        format!("Fact(id={:?}, text=<{} bytes>)", self.id, self.text.len())
    }
}

impl From<Fact> for PyFact {
    fn from(fact: Fact) -> Self {
        Self { id: fact.id, text: fact.text, created_at: fact.created_at.as_unix_seconds() }
    }
}

/// A Python `str` for a key argument.
pub(crate) fn key_arg(key: &Bound<'_, PyAny>) -> PyResult<String> {
    convert::text(key, "key")
}
