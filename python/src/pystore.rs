//! A store written in Python, seen by the core as a `MemoryStore`.
//!
//! [`PyStore`] calls the Python object's async methods with the package's own types
//! (`MemoryScope`, `MemorySource`, epoch-second floats, revision and cursor strings), awaits
//! them on the asyncio loop that was running when it was made, and reads the replies back:
//! a `MemoryRecord` or `None`, a `MemoryPage`, a `MemoryCleanupPage`, a `NamespacePage`, a
//! `UserPage`, an `ApplicationPage`, a `KeyInfoPage`, a `bool` or an `int`. So the core's
//! layers (the fact port, the scoped handle, the memory tool, the conformance cases) run over a
//! Python store exactly as over a Rust one.
//!
//! `list_keys` is optional for a Python store: one without the method is served by its `list`,
//! the sizes taken from the records it returns (so its contents are read after all) and the
//! cursors translated, so that `list_keys` keeps cursors of its own either way.
//!
//! A request's search options cross as the keyword arguments `match`, `ignore_case` and
//! `metadata` of the store's `search` (`metadata` of its `list`), each only when it is not the
//! default, so a store written before they existed still serves every request without them.
//! The core checks them first (and refuses those an operation does not take), so the store
//! only ever sees options the core would accept.
//!
//! Exceptions cross as [`errors::from_py`](crate::errors::from_py) says; a reply of the wrong
//! shape is a `Storage` error naming the provider `python`.

use std::fmt;

use agent_memory::provider::{CursorKind, KeyPage, PageRequestExt};
use agent_memory::{
    ApplicationPage, Case, Cursor, KeyInfo, KeyInfoPage, MatchMode, MemoryCleanupPage, MemoryError,
    MemoryPage, MemoryRecord, MemoryScope, MemoryStore, MemoryWrite, NamespacePage, PageRequest,
    Result, Revision, UserPage,
};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3_async_runtimes::TaskLocals;
use tokio::sync::oneshot;

use crate::convert;
use crate::errors::{bad_reply, from_py};
use crate::interpreter;
use crate::types::{
    PageClass, PyApplicationPage, PyCleanupPage, PyKeyInfoPage, PyNamespacePage, PyPage, PyRecord,
    PyScope, PySource, PyUserPage,
};

/// A Python object with the `MemoryStore` protocol's async methods.
pub(crate) struct PyStore {
    object: Py<PyAny>,
    locals: TaskLocals,
}

impl fmt::Debug for PyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PyStore")
    }
}

impl PyStore {
    /// Wraps `object`, awaiting its coroutines on the loop running in this thread.
    ///
    /// # Errors
    /// When no asyncio loop is running.
    pub(crate) fn new(object: &Bound<'_, PyAny>) -> PyResult<Self> {
        let locals = pyo3_async_runtimes::tokio::get_current_locals(object.py())?;
        Ok(Self { object: object.clone().unbind(), locals })
    }

    /// Wraps `object`, awaiting its coroutines on the loop of `locals` (for stores made
    /// outside that loop's thread, by a factory it handed over).
    pub(crate) fn with_locals(object: Py<PyAny>, locals: TaskLocals) -> Self {
        Self { object, locals }
    }

    /// Calls one method and awaits what it returns.
    ///
    /// The method is called here (on whichever thread polls, attached through
    /// [`interpreter::attach`]); what it returns is awaited as a task on the store's loop, whose
    /// done callback converts the answer while it holds the GIL and sends it back. So this
    /// side touches Python only to start the call: a loop that closes, or a task that is
    /// dropped, ends the call with a `Storage` error without attaching again.
    async fn call<F>(&self, invoke: F) -> Result<Py<PyAny>>
    where
        F: for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>>,
    {
        let (sender, answer) = oneshot::channel();
        interpreter::attach(|py| {
            let started = (|| -> PyResult<()> {
                let awaitable = invoke(self.object.bind(py))?.unbind();
                let start = StartTask { awaitable: Some(awaitable), sender: Some(sender) };
                let kwargs = PyDict::new(py);
                kwargs.set_item(intern!(py, "context"), self.locals.context(py))?;
                let event_loop = self.locals.event_loop(py);
                event_loop.call_method(
                    intern!(py, "call_soon_threadsafe"),
                    (start,),
                    Some(&kwargs),
                )?;
                Ok(())
            })();
            started.map_err(|err| from_py(py, err))
        })
        .unwrap_or_else(|| Err(exiting()))?;
        answer.await.unwrap_or_else(|_dropped| {
            Err(bad_reply(
                "the Python store's call ended without an answer (its event loop closed)",
            ))
        })
    }

    /// Calls one of the paged methods on a scope (`list`, `list_keys`, `search` or
    /// `purge_expired`, the operation `kind`) and awaits what it returns.
    ///
    /// The core checks the request's options for `kind` first ([`refuse_options`]), so the
    /// method is called with the scope (and the `query`, for `search`), the page's `limit` and
    /// `after`, and only those of `prefix`, `match`, `ignore_case` and `metadata` that the
    /// request sets and the operation takes: a store without prefix or filter support still
    /// serves every request that does not use them.
    async fn call_scoped_page(
        &self,
        name: &'static str,
        kind: CursorKind,
        scope: &MemoryScope,
        query: Option<&str>,
        page: &PageRequest,
    ) -> Result<Py<PyAny>> {
        refuse_options(page, kind, scope)?;
        self.call(|store| {
            let kwargs = page_kwargs(store.py(), page)?;
            if !page.prefix.is_empty() {
                kwargs.set_item("prefix", &page.prefix)?;
            }
            set_options(&kwargs, page)?;
            match query {
                Some(query) => store.call_method(name, (scope_obj(scope), query), Some(&kwargs)),
                None => store.call_method(name, (scope_obj(scope),), Some(&kwargs)),
            }
        })
        .await
    }
}

/// The error of a call into a Python store once the interpreter is exiting.
fn exiting() -> agent_memory::MemoryError {
    bad_reply("the Python interpreter is exiting")
}

type Answer = Result<Py<PyAny>>;

/// Runs on the store's loop: wraps the awaitable a store method returned in a task (in the
/// context of the loop's creator), and sends its answer when the task is done.
#[pyclass(module = "agent_memory._native")]
struct StartTask {
    awaitable: Option<Py<PyAny>>,
    sender: Option<oneshot::Sender<Answer>>,
}

#[pymethods]
impl StartTask {
    fn __call__(&mut self, py: Python<'_>) {
        let (Some(awaitable), Some(sender)) = (self.awaitable.take(), self.sender.take()) else {
            return;
        };
        let task = py
            .import(intern!(py, "asyncio"))
            .and_then(|asyncio| asyncio.call_method1(intern!(py, "ensure_future"), (awaitable,)));
        match task {
            // Should adding the callback fail, the sender goes with it, and the call ends
            // without an answer rather than waiting forever.
            Ok(task) => {
                let done = TaskDone { sender: Some(sender) };
                let _ = task.call_method1(intern!(py, "add_done_callback"), (done,));
            }
            // Not awaitable: a store method that is not `async`.
            Err(err) => {
                let _ = sender.send(Err(from_py(py, err)));
            }
        }
    }
}

/// A Python store's task is done: its result, or its exception as the core's error, goes to
/// the Rust side (which may have stopped waiting: then the answer is dropped here).
#[pyclass(module = "agent_memory._native")]
struct TaskDone {
    sender: Option<oneshot::Sender<Answer>>,
}

#[pymethods]
impl TaskDone {
    fn __call__(&mut self, task: &Bound<'_, PyAny>) {
        let py = task.py();
        if let Some(sender) = self.sender.take() {
            let answer = task
                .call_method0(intern!(py, "result"))
                .map(Bound::unbind)
                .map_err(|err| from_py(py, err));
            let _ = sender.send(answer);
        }
    }
}

impl PyStore {
    /// `list_keys` for a Python store without the method: a page of its `list`. The core's
    /// cursors are translated both ways, so callers see `list_keys` cursors only. A store that
    /// makes cursors of its own gets its `list` tokens back to judge itself; on the way out
    /// they carry [`OWN_KEYS_CURSOR`] in front, so a `list_keys` cursor is never a `list` one
    /// (the store refuses it there) and a `list` cursor is refused here. The request's options
    /// are checked for `list_keys` first, as they are for a store with the method.
    async fn list_keys_by_list(
        &self,
        scope: &MemoryScope,
        mut page: PageRequest,
    ) -> Result<KeyInfoPage> {
        refuse_options(&page, CursorKind::Keys, scope)?;
        if let Some(after) = page.after.take_if(|after| !after.is_core_format()) {
            let own = after.as_str().strip_prefix(OWN_KEYS_CURSOR).ok_or_else(|| {
                MemoryError::invalid("cursor", "belongs to another operation of this store")
            })?;
            let listed = self.list(scope, page.after(Cursor::parse(own)?)).await?;
            return Ok(KeyInfoPage {
                items: listed.items.into_iter().map(key_info).collect(),
                next_cursor: listed.next_cursor.map(own_keys_cursor).transpose()?,
            });
        }
        let checked = page.key_page(CursorKind::Keys, scope)?;
        let as_list = KeyPage { kind: CursorKind::List, ..checked.clone() };
        let mut request = PageRequest::new(page.limit).prefix(page.prefix.clone());
        if let Some(after) = &checked.after {
            request = request.after(as_list.cursor(scope, after));
        }
        let listed = self.list(scope, request.clone()).await?;
        let items = listed.items.into_iter().map(key_info).collect();
        let next_cursor = match listed.next_cursor {
            Some(cursor) if !cursor.is_core_format() => Some(own_keys_cursor(cursor)?),
            Some(cursor) => {
                let position = request
                    .after(cursor)
                    .key_page(CursorKind::List, scope)
                    .map_err(|_| bad_reply("the Python store's list returned a foreign cursor"))?
                    .after;
                position.map(|position| checked.cursor(scope, &position))
            }
            None => None,
        };
        Ok(KeyInfoPage { items, next_cursor })
    }
}

/// What marks a store's own `list` token handed out as a `list_keys` cursor.
const OWN_KEYS_CURSOR: &str = "keys.";

/// A store's own `list` token as a `list_keys` cursor.
fn own_keys_cursor(cursor: Cursor) -> Result<Cursor> {
    Cursor::parse(&format!("{OWN_KEYS_CURSOR}{}", cursor.as_str()))
        .map_err(|_| bad_reply("the Python store's list returned a cursor too long to carry"))
}

/// A listed record's key and content length, for `list_keys` served by `list`.
fn key_info(record: MemoryRecord) -> KeyInfo {
    let length = u64::try_from(record.content.len()).unwrap_or(u64::MAX);
    KeyInfo::new(record.key, length)
}

/// The `metadata=` argument for a write's JSON metadata.
///
/// In the Python API `metadata=None` means "no metadata", so JSON `null` has no spelling of
/// its own there. The core refuses it (metadata must be an object), so it crosses as a value
/// that is no JSON at all, which every store must refuse as metadata just the same.
fn metadata_arg<'py>(py: Python<'py>, metadata: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    if metadata.is_null() {
        return py.import("builtins")?.getattr("object")?.call0();
    }
    convert::from_json(py, metadata)
}

fn scope_obj(scope: &MemoryScope) -> PyScope {
    PyScope::from(scope.clone())
}

/// The core's checks of a request's prefix, match mode, case and metadata filter, when it
/// has any: a prefix, mode or case on an operation that takes none must not be dropped
/// silently (the Python protocol has no argument there to pass it on with), and a filter the
/// core would refuse never reaches the store. The cursor is left to the store, which may
/// make its own.
fn refuse_options(page: &PageRequest, kind: CursorKind, scope: &MemoryScope) -> Result<()> {
    let plain = page.prefix.is_empty()
        && page.matching == MatchMode::Phrase
        && page.case == Case::Sensitive
        && page.metadata.is_empty();
    if !plain {
        PageRequest { after: None, ..page.clone() }.key_page(kind, scope)?;
    }
    Ok(())
}

/// The request's match mode, case and metadata filter as the keyword arguments `match`,
/// `ignore_case` and `metadata`, each only when it is not the default: a store written before
/// they existed still serves every request that does not use them (and one that does fails
/// loudly, with the `TypeError` of an unexpected keyword, instead of ignoring it).
fn set_options(kwargs: &Bound<'_, PyDict>, page: &PageRequest) -> PyResult<()> {
    if page.matching != MatchMode::Phrase {
        kwargs.set_item("match", page.matching.as_str())?;
    }
    if page.case == Case::Insensitive {
        kwargs.set_item("ignore_case", true)?;
    }
    if !page.metadata.is_empty() {
        kwargs.set_item("metadata", convert::from_json(kwargs.py(), &page.metadata.to_json())?)?;
    }
    Ok(())
}

/// The `limit=` and `after=` arguments every paged call passes.
fn page_kwargs<'py>(py: Python<'py>, page: &PageRequest) -> PyResult<Bound<'py, PyDict>> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("limit", i64::try_from(page.limit).unwrap_or(i64::MAX))?;
    kwargs.set_item("after", page.after.as_ref().map(|cursor| cursor.as_str().to_owned()))?;
    Ok(kwargs)
}

/// A cursor a Python store returned: the core's (from the `agent_memory.provider` helpers)
/// or the store's own token, carried opaquely for the store to judge when it comes back.
fn reply_cursor(token: Option<String>) -> Result<Option<Cursor>> {
    convert::cursor(token.as_deref()).map_err(|_| {
        bad_reply("the Python store returned a cursor that is not 1 to 512 printable ASCII bytes")
    })
}

fn read<T>(
    reply: Py<PyAny>,
    extract: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<T>,
    what: &'static str,
) -> Result<T> {
    interpreter::attach(|py| extract(reply.bind(py)).map_err(|_| bad_reply(what)))
        .unwrap_or_else(|| Err(exiting()))
}

#[async_trait::async_trait]
impl MemoryStore for PyStore {
    async fn start(&self) -> Result<()> {
        self.call(|store| store.call_method0("start")).await.map(drop)
    }

    async fn close(&self) -> Result<()> {
        self.call(|store| store.call_method0("close")).await.map(drop)
    }

    async fn put(
        &self,
        scope: &MemoryScope,
        key: &str,
        write: MemoryWrite,
    ) -> Result<MemoryRecord> {
        let reply = self
            .call(|store| {
                let py = store.py();
                let kwargs = PyDict::new(py);
                kwargs.set_item("metadata", metadata_arg(py, write.metadata_ref())?)?;
                kwargs.set_item("expires_at", write.expiry().map(|at| at.as_unix_seconds()))?;
                kwargs.set_item("expected_revision", write.expected().map(Revision::as_str))?;
                kwargs.set_item("create_only", write.is_create_only())?;
                let source = write.source_ref();
                if !source.is_empty() {
                    kwargs.set_item("source", PySource { inner: source.clone() })?;
                }
                store.call_method("put", (scope_obj(scope), key, write.content()), Some(&kwargs))
            })
            .await?;
        read(
            reply,
            |r| Ok(r.cast::<PyRecord>()?.get().inner.clone()),
            "the Python store's put did not return a MemoryRecord",
        )
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        let reply = self.call(|store| store.call_method1("get", (scope_obj(scope), key))).await?;
        read(
            reply,
            |r| {
                if r.is_none() {
                    Ok(None)
                } else {
                    Ok(Some(r.cast::<PyRecord>()?.get().inner.clone()))
                }
            },
            "the Python store's get did not return a MemoryRecord or None",
        )
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        let reply = self.call_scoped_page("list", CursorKind::List, scope, None, &page).await?;
        page_reply::<PyPage>(reply, "the Python store's list did not return a MemoryPage")
    }

    async fn list_keys(&self, scope: &MemoryScope, page: PageRequest) -> Result<KeyInfoPage> {
        let own = Python::attach(|py| self.object.bind(py).hasattr("list_keys")).unwrap_or(false);
        if !own {
            return self.list_keys_by_list(scope, page).await;
        }
        let reply =
            self.call_scoped_page("list_keys", CursorKind::Keys, scope, None, &page).await?;
        page_reply::<PyKeyInfoPage>(
            reply,
            "the Python store's list_keys did not return a KeyInfoPage",
        )
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        let reply =
            self.call_scoped_page("search", CursorKind::Search, scope, Some(query), &page).await?;
        page_reply::<PyPage>(reply, "the Python store's search did not return a MemoryPage")
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool> {
        let expected = expected_revision.map(|r| r.as_str().to_owned());
        let reply = self
            .call(|store| {
                let kwargs = PyDict::new(store.py());
                kwargs.set_item("expected_revision", expected)?;
                store.call_method("delete", (scope_obj(scope), key), Some(&kwargs))
            })
            .await?;
        read(reply, |r| r.extract::<bool>(), "the Python store's delete did not return a bool")
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let reply =
            self.call(|store| store.call_method1("delete_all", (scope_obj(scope),))).await?;
        read(reply, |r| r.extract::<u64>(), "the Python store's delete_all did not return an int")
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        let reply =
            self.call(|store| store.call_method1("delete_user", (application_id, user_id))).await?;
        read(reply, |r| r.extract::<u64>(), "the Python store's delete_user did not return an int")
    }

    async fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> Result<NamespacePage> {
        if !page.prefix.is_empty() {
            page.namespace_page(application_id, user_id)?;
        }
        let reply = self
            .call(|store| {
                let kwargs = page_kwargs(store.py(), &page)?;
                store.call_method("list_namespaces", (application_id, user_id), Some(&kwargs))
            })
            .await?;
        page_reply::<PyNamespacePage>(
            reply,
            "the Python store's list_namespaces did not return a NamespacePage",
        )
    }

    async fn list_users(&self, application_id: &str, page: PageRequest) -> Result<UserPage> {
        if !page.prefix.is_empty() {
            page.user_page(application_id)?;
        }
        let reply = self
            .call(|store| {
                let kwargs = page_kwargs(store.py(), &page)?;
                store.call_method("list_users", (application_id,), Some(&kwargs))
            })
            .await?;
        page_reply::<PyUserPage>(reply, "the Python store's list_users did not return a UserPage")
    }

    async fn list_applications(&self, page: PageRequest) -> Result<ApplicationPage> {
        if !page.prefix.is_empty() {
            page.application_page()?;
        }
        let reply = self
            .call(|store| {
                let kwargs = page_kwargs(store.py(), &page)?;
                store.call_method("list_applications", (), Some(&kwargs))
            })
            .await?;
        page_reply::<PyApplicationPage>(
            reply,
            "the Python store's list_applications did not return an ApplicationPage",
        )
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        let reply =
            self.call_scoped_page("purge_expired", CursorKind::Purge, scope, None, &page).await?;
        let (deleted, next) = read(
            reply,
            |r| Ok(r.cast::<PyCleanupPage>()?.get().parts()),
            "the Python store's purge_expired did not return a MemoryCleanupPage",
        )?;
        Ok(MemoryCleanupPage { deleted, next_cursor: reply_cursor(next)? })
    }
}

/// The core's page of a Python store's reply, which must be a `P`.
fn page_reply<P: PageClass>(reply: Py<PyAny>, what: &'static str) -> Result<P::Core> {
    let (items, next) = read(reply, |r| r.cast::<P>()?.get().to_core(r.py()), what)?;
    Ok(P::core_page(items, reply_cursor(next)?))
}

/// The core store behind a Python store argument: a `NativeStore` as it is, anything else
/// through [`PyStore`].
pub(crate) fn resolve(object: &Bound<'_, PyAny>) -> PyResult<std::sync::Arc<dyn MemoryStore>> {
    if let Ok(native) = object.cast::<crate::store::NativeStore>() {
        return Ok(std::sync::Arc::clone(&native.get().store));
    }
    Ok(std::sync::Arc::new(PyStore::new(object)?))
}
