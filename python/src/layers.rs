//! The core's layers over a store, for Python: the fact port (`Facts`, per end user) and the
//! scoped handle (`ScopedMemory`).
//!
//! Each holds the Python store object and resolves it on each call
//! ([`pystore::resolve`](crate::pystore::resolve)): a native store is used directly, a store
//! written in Python through the adapter on the loop that is running the call. So the rules
//! of these layers (facts always add, recall is oldest first and `limit` only truncates,
//! erase removes the whole user; a handle's own source fills writes that carry none) are the
//! core's, whatever the store.

use agent_memory::{memory_tool, Facts, MemoryError, MemoryScope, ScopedMemory, Source};
use pyo3::prelude::*;

use crate::awaitable::{run, Outcome, Reply};
use crate::convert;
use crate::errors::to_py;
use crate::pystore::resolve;
use crate::store::{filter_arg, page_arg, search_arg, write_arg, WriteOptions};
use crate::types::{key_arg, source_arg, PyScope, PySource};

/// The fact port over one store: a [`NativeUserFacts`] per end user.
#[pyclass(frozen, module = "agent_memory._native")]
pub(crate) struct NativeFacts {
    store: Py<PyAny>,
    namespace: Option<String>,
    source: Source,
}

#[pymethods]
impl NativeFacts {
    #[new]
    #[pyo3(signature = (store, namespace = None, source = None))]
    fn new(
        py: Python<'_>,
        store: Py<PyAny>,
        namespace: Option<String>,
        source: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        if let Some(ns) = &namespace {
            agent_memory::validation::id("namespace", ns).map_err(|e| to_py(py, e))?;
        }
        Ok(Self { store, namespace, source: source_arg(source)?.unwrap_or_default() })
    }

    /// The port for one end user. The one place a fact's scope is built: application
    /// (tenant) plus end user, both required, in the port's namespace.
    fn user(
        &self,
        py: Python<'_>,
        application_id: &Bound<'_, PyAny>,
        end_user_id: &Bound<'_, PyAny>,
    ) -> PyResult<NativeUserFacts> {
        let scope = MemoryScope::new(
            convert::text(application_id, "application_id")?,
            convert::text(end_user_id, "user_id")?,
        )
        .map_err(|e| to_py(py, e))?;
        let scope = match &self.namespace {
            Some(ns) => scope.with_namespace(ns.clone()).map_err(|e| to_py(py, e))?,
            None => scope,
        };
        let (store, source) = (self.store.clone_ref(py), self.source.clone());
        Ok(NativeUserFacts { store, scope, source })
    }
}

/// The fact port for one end user: `remember`, `forget`, `recall`, `erase`.
#[pyclass(frozen, module = "agent_memory._native")]
pub(crate) struct NativeUserFacts {
    store: Py<PyAny>,
    scope: MemoryScope,
    source: Source,
}

impl NativeUserFacts {
    /// The core's port over the store, and the user's scope to call it with.
    fn facts(&self, py: Python<'_>) -> PyResult<(Facts, MemoryScope)> {
        let facts = Facts::new(resolve(self.store.bind(py))?).with_source(self.source.clone());
        Ok((facts, self.scope.clone()))
    }
}

#[pymethods]
impl NativeUserFacts {
    fn remember<'py>(&self, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = text.py();
        let text = convert::text(text, "text")?;
        let (facts, scope) = self.facts(py)?;
        run(py, async move { facts.remember(&scope, &text).await.map(Reply::Fact).into() })
    }

    fn forget<'py>(&self, fact_id: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = fact_id.py();
        let id = convert::text(fact_id, "key")?;
        let (facts, scope) = self.facts(py)?;
        run(py, async move { facts.forget(&scope, &id).await.map(Reply::Bool).into() })
    }

    #[pyo3(signature = (limit = None))]
    fn recall<'py>(&self, py: Python<'py>, limit: Option<i64>) -> PyResult<Bound<'py, PyAny>> {
        let limit = limit
            .map(|n| {
                usize::try_from(n)
                    .map_err(|_| to_py(py, MemoryError::invalid("limit", "must be at least 0")))
            })
            .transpose()?;
        let (facts, scope) = self.facts(py)?;
        run(
            py,
            async move { facts.recall(&scope, limit).await.map(|r| Reply::Facts(r.facts)).into() },
        )
    }

    fn erase<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (facts, scope) = self.facts(py)?;
        run(py, async move { facts.erase(&scope).await.map(Reply::Count).into() })
    }
}

/// A store bound to one scope and source: what agent code gets.
#[pyclass(frozen, module = "agent_memory._native")]
pub(crate) struct NativeScoped {
    store: Py<PyAny>,
    scope: MemoryScope,
    source: Source,
}

impl NativeScoped {
    fn memory(&self, py: Python<'_>) -> PyResult<ScopedMemory> {
        Ok(ScopedMemory::new(resolve(self.store.bind(py))?, self.scope.clone())
            .with_source(self.source.clone()))
    }
}

#[pymethods]
impl NativeScoped {
    #[new]
    #[pyo3(signature = (store, scope, source = None))]
    fn new(
        store: Py<PyAny>,
        scope: &Bound<'_, PyScope>,
        source: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(Self {
            store,
            scope: scope.get().inner.clone(),
            source: source_arg(source)?.unwrap_or_default(),
        })
    }

    /// The bound scope.
    #[getter]
    fn scope(&self) -> PyScope {
        PyScope::from(self.scope.clone())
    }

    /// The bound source.
    #[getter]
    fn source(&self) -> PySource {
        PySource { inner: self.source.clone() }
    }

    /// The same user and source in namespace `name`.
    fn namespace(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Self> {
        let scope = self
            .scope
            .with_namespace(convert::text(name, "namespace")?)
            .map_err(|e| to_py(py, e))?;
        Ok(Self { store: self.store.clone_ref(py), scope, source: self.source.clone() })
    }

    #[pyo3(signature = (key, content, *, metadata = None, expires_at = None, expected_revision = None, create_only = false, source = None))]
    #[allow(clippy::too_many_arguments)]
    fn put<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        content: &Bound<'py, PyAny>,
        metadata: Option<&Bound<'py, PyAny>>,
        expires_at: Option<f64>,
        expected_revision: Option<&str>,
        create_only: bool,
        source: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = WriteOptions { metadata, expires_at, expected_revision, create_only, source };
        let write = write_arg(py, content, options)?;
        let (memory, key) = (self.memory(py)?, key_arg(key)?);
        run(py, async move { memory.put(&key, write).await.map(|r| Reply::Record(Some(r))).into() })
    }

    fn get<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let (memory, key) = (self.memory(py)?, key_arg(key)?);
        run(py, async move { memory.get(&key).await.map(Reply::Record).into() })
    }

    #[pyo3(signature = (limit = 20, after = None, prefix = "", *, metadata = None))]
    fn list<'py>(
        &self,
        py: Python<'py>,
        limit: i64,
        after: Option<&str>,
        prefix: &str,
        metadata: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let filter = filter_arg(metadata).map_err(|e| to_py(py, e))?;
        let page = page_arg(py, limit, after)?.prefix(prefix).metadata(filter);
        let memory = self.memory(py)?;
        run(py, async move { memory.list(page).await.map(Reply::Page).into() })
    }

    #[pyo3(signature = (limit = 20, after = None, prefix = ""))]
    fn list_keys<'py>(
        &self,
        py: Python<'py>,
        limit: i64,
        after: Option<&str>,
        prefix: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let page = page_arg(py, limit, after)?.prefix(prefix);
        let memory = self.memory(py)?;
        run(py, async move { memory.list_keys(page).await.map(Reply::Keys).into() })
    }

    #[pyo3(signature = (query, limit = 20, after = None, *, r#match = None, ignore_case = false, metadata = None))]
    #[allow(clippy::too_many_arguments)]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: &Bound<'py, PyAny>,
        limit: i64,
        after: Option<&str>,
        r#match: Option<&Bound<'py, PyAny>>,
        ignore_case: bool,
        metadata: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let page = search_arg(py, limit, after, r#match, ignore_case, metadata)?;
        let memory = self.memory(py)?;
        let query = convert::text(query, "query")?;
        run(py, async move { memory.search(&query, page).await.map(Reply::Page).into() })
    }

    #[pyo3(signature = (key, expected_revision = None))]
    fn delete<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        expected_revision: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let expected =
            expected_revision.map(convert::revision).transpose().map_err(|e| to_py(py, e))?;
        let (memory, key) = (self.memory(py)?, key_arg(key)?);
        run(py, async move { memory.delete(&key, expected.as_ref()).await.map(Reply::Bool).into() })
    }

    /// Runs one command of Claude's memory tool (`input`: the `tool_use` block's input, a
    /// dict) with the core's dispatcher over this handle, and returns `(text, is_error)`:
    /// the text the model reads, and whether to send it back with `"is_error": true`.
    fn memory_tool<'py>(
        &self,
        py: Python<'py>,
        input: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let memory = self.memory(py)?;
        let input = convert::to_json(input, "input").map_err(|e| to_py(py, e))?;
        run(py, async move {
            let (text, is_error) = match memory_tool::run(&memory, &input).await {
                Ok(text) => (text, false),
                Err(error) => (error.message().to_owned(), true),
            };
            Outcome::Done(Reply::ToolResult { text, is_error })
        })
    }
}
