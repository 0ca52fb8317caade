//! `NativeStore`: every provider of the core behind one Python class.
//!
//! The Python classes `InMemoryStore`, `SqliteMemoryStore`, `PostgresMemoryStore` and
//! `RedisMemoryStore` (in `agent_memory/_stores.py`) each hold one `NativeStore` and forward
//! to it. Each method here converts its arguments (raising before any I/O when one has the
//! wrong type), then runs the core's method through [`awaitable::run`](crate::awaitable::run).
//! The operations on one scope (`put`, `get`, `list`, `list_keys`, `search`, `delete`) are
//! the scoped handle's ([`NativeScoped`](crate::layers::NativeScoped)), which the Python
//! classes bind to the call's scope: one implementation serves both.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_memory::postgres::PostgresMemoryStore;
use agent_memory::redis::RedisMemoryStore;
use agent_memory::sqlite::SqliteMemoryStore;
use agent_memory::{
    Case, InMemoryStore, MatchMode, MemoryError, MemoryStore, MemoryWrite, MetadataFilter,
    PageRequest,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::awaitable::{run, Reply};
use crate::clock::PyManualClock;
use crate::convert;
use crate::errors::to_py;
use crate::types::{source_arg, PyScope};

/// One started-or-not store of the core, shared by every Python object that uses it.
#[pyclass(frozen, module = "agent_memory._native")]
pub(crate) struct NativeStore {
    pub(crate) store: Arc<dyn MemoryStore>,
    provider: &'static str,
}

/// `put`'s keyword options, as Python passed them: what [`write_arg`] adds to the content.
pub(crate) struct WriteOptions<'a> {
    pub(crate) metadata: Option<&'a Bound<'a, PyAny>>,
    pub(crate) expires_at: Option<f64>,
    pub(crate) expected_revision: Option<&'a str>,
    pub(crate) create_only: bool,
    pub(crate) source: Option<&'a Bound<'a, PyAny>>,
}

/// Builds the core's `MemoryWrite` from `put`'s content and options.
///
/// `expected_revision` and `create_only` ask for opposite things, so together they are
/// invalid rather than one silently winning.
pub(crate) fn write_arg(
    py: Python<'_>,
    content: &Bound<'_, PyAny>,
    options: WriteOptions<'_>,
) -> PyResult<MemoryWrite> {
    let WriteOptions { metadata, expires_at, expected_revision, create_only, source } = options;
    let fail = |e| to_py(py, e);
    let mut write = MemoryWrite::new(convert::text(content, "content")?);
    if let Some(metadata) = metadata.filter(|m| !m.is_none()) {
        write = write.metadata(convert::to_json(metadata, "metadata").map_err(fail)?);
    }
    if let Some(seconds) = expires_at {
        write = write.expires_at(convert::timestamp(seconds).map_err(fail)?);
    }
    match (expected_revision, create_only) {
        (Some(_), true) => {
            return Err(fail(MemoryError::invalid(
                "create_only",
                "cannot be combined with expected_revision",
            )))
        }
        (Some(token), false) => {
            write = write.expected_revision(convert::revision(token).map_err(fail)?);
        }
        (None, true) => write = write.create_only(),
        (None, false) => {}
    }
    if let Some(source) = source_arg(source)? {
        write = write.source(source);
    }
    Ok(write)
}

/// A page request from `limit` and `after`.
pub(crate) fn page_arg(py: Python<'_>, limit: i64, after: Option<&str>) -> PyResult<PageRequest> {
    let after = convert::cursor(after).map_err(|e| to_py(py, e))?;
    Ok(PageRequest::new(convert::limit(limit)).after_opt(after))
}

/// A `match=` argument: `"phrase"`, `"all_words"` or `"any_word"` (not given: `"phrase"`);
/// anything else (another string, or not a string) is `Invalid` naming `match`.
pub(crate) fn match_arg(value: Option<&Bound<'_, PyAny>>) -> Result<MatchMode, MemoryError> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(MatchMode::Phrase);
    };
    let bad = || MemoryError::invalid("match", "must be phrase, all_words or any_word");
    value.extract::<String>().map_err(|_| bad())?.parse()
}

/// A `metadata=` filter argument: `None` (no condition) or a dict of field names to `str`,
/// `int`, `float`, `bool` or `None`, checked by the core (`Invalid` naming `metadata`).
pub(crate) fn filter_arg(value: Option<&Bound<'_, PyAny>>) -> Result<MetadataFilter, MemoryError> {
    match value.filter(|v| !v.is_none()) {
        None => Ok(MetadataFilter::new()),
        Some(value) => MetadataFilter::from_json(&convert::to_json(value, "metadata")?),
    }
}

/// A `search` page request: `limit` and `after`, then the match mode, the case and the
/// metadata filter.
pub(crate) fn search_arg(
    py: Python<'_>,
    limit: i64,
    after: Option<&str>,
    matching: Option<&Bound<'_, PyAny>>,
    ignore_case: bool,
    metadata: Option<&Bound<'_, PyAny>>,
) -> PyResult<PageRequest> {
    let fail = |e| to_py(py, e);
    let case = if ignore_case { Case::Insensitive } else { Case::Sensitive };
    Ok(page_arg(py, limit, after)?
        .match_mode(match_arg(matching).map_err(fail)?)
        .case(case)
        .metadata(filter_arg(metadata).map_err(fail)?))
}

/// The quota keyword options as core [`Quotas`](agent_memory::Quotas); a negative limit is
/// `Invalid` naming it, like zero (which the builders refuse).
fn quotas_arg(
    py: Python<'_>,
    max_records_per_user: Option<i64>,
    max_bytes_per_user: Option<i64>,
) -> PyResult<agent_memory::Quotas> {
    use agent_memory::quota::{MAX_BYTES_PER_USER, MAX_RECORDS_PER_USER};
    let limit = |name: &'static str, value: Option<i64>| -> PyResult<Option<u64>> {
        value
            .map(|n| u64::try_from(n).map_err(|_| MemoryError::invalid(name, "must be at least 1")))
            .transpose()
            .map_err(|e| to_py(py, e))
    };
    let mut quotas = agent_memory::Quotas::unlimited();
    if let Some(n) = limit(MAX_RECORDS_PER_USER, max_records_per_user)? {
        quotas = quotas.max_records_per_user(n);
    }
    if let Some(n) = limit(MAX_BYTES_PER_USER, max_bytes_per_user)? {
        quotas = quotas.max_bytes_per_user(n);
    }
    Ok(quotas)
}

fn clock_arg(clock: Option<&Bound<'_, PyManualClock>>) -> Option<Arc<dyn agent_memory::Clock>> {
    clock.map(|c| Arc::new(c.get().inner.clone()) as Arc<dyn agent_memory::Clock>)
}

#[pymethods]
impl NativeStore {
    /// The process-local store.
    #[staticmethod]
    #[pyo3(signature = (clock = None, max_records_per_user = None, max_bytes_per_user = None))]
    fn memory(
        py: Python<'_>,
        clock: Option<&Bound<'_, PyManualClock>>,
        max_records_per_user: Option<i64>,
        max_bytes_per_user: Option<i64>,
    ) -> PyResult<Self> {
        let mut builder = InMemoryStore::builder().quotas(quotas_arg(
            py,
            max_records_per_user,
            max_bytes_per_user,
        )?);
        if let Some(clock) = clock_arg(clock) {
            builder = builder.clock(clock);
        }
        let store = builder.build().map_err(|e| to_py(py, e))?;
        Ok(Self { store: Arc::new(store), provider: "memory" })
    }

    /// The SQLite store on the file at `path` (the default file when `None`).
    #[staticmethod]
    #[pyo3(signature = (path = None, clock = None, max_records_per_user = None, max_bytes_per_user = None))]
    fn sqlite(
        py: Python<'_>,
        path: Option<PathBuf>,
        clock: Option<&Bound<'_, PyManualClock>>,
        max_records_per_user: Option<i64>,
        max_bytes_per_user: Option<i64>,
    ) -> PyResult<Self> {
        let quotas = quotas_arg(py, max_records_per_user, max_bytes_per_user)?;
        let fail = |e| to_py(py, e);
        let path = match path {
            Some(path) => path,
            None => agent_memory::default_sqlite_path().map_err(fail)?,
        };
        let mut builder = SqliteMemoryStore::builder(path).quotas(quotas);
        if let Some(clock) = clock_arg(clock) {
            builder = builder.clock(clock);
        }
        Ok(Self { store: Arc::new(builder.build().map_err(fail)?), provider: "sqlite" })
    }

    /// The PostgreSQL store on the server at `url`, with the seed's `pool_options`
    /// (`min_size`, `max_size`, and `connect_timeout` / `acquire_timeout` in seconds).
    #[staticmethod]
    #[pyo3(signature = (url, pool_options = None, setup_schema = true, max_records_per_user = None, max_bytes_per_user = None))]
    fn postgres(
        py: Python<'_>,
        url: &str,
        pool_options: Option<&Bound<'_, PyDict>>,
        setup_schema: bool,
        max_records_per_user: Option<i64>,
        max_bytes_per_user: Option<i64>,
    ) -> PyResult<Self> {
        let quotas = quotas_arg(py, max_records_per_user, max_bytes_per_user)?;
        let fail = |e| to_py(py, e);
        let bad = |reason: &'static str| to_py(py, MemoryError::invalid("pool_options", reason));
        let mut builder = PostgresMemoryStore::builder(url)
            .map_err(fail)?
            .setup_schema(setup_schema)
            .quotas(quotas);
        for (name, value) in pool_options.into_iter().flat_map(|options| options.iter()) {
            let name: String = name.extract().map_err(|_| bad("names must be str"))?;
            match name.as_str() {
                "min_size" => {
                    let min = value
                        .extract()
                        .map_err(|_| bad("min_size must be an int of at least 0"))?;
                    builder = builder.min_connections(min);
                }
                "max_size" => {
                    let max = value
                        .extract()
                        .map_err(|_| bad("max_size must be an int of at least 1"))?;
                    builder = builder.max_connections(max);
                }
                "connect_timeout" | "acquire_timeout" => {
                    let seconds = value
                        .extract::<f64>()
                        .ok()
                        .and_then(|s| Duration::try_from_secs_f64(s).ok())
                        .ok_or_else(|| bad("timeouts must be a number of seconds"))?;
                    builder = if name == "connect_timeout" {
                        builder.connect_timeout(seconds)
                    } else {
                        builder.acquire_timeout(seconds)
                    };
                }
                _ => {
                    return Err(bad(
                        "knows only min_size, max_size, connect_timeout and acquire_timeout",
                    ))
                }
            }
        }
        Ok(Self { store: Arc::new(builder.build().map_err(fail)?), provider: "postgres" })
    }

    /// The Redis (or Redis Cluster) store at `url`.
    #[staticmethod]
    #[pyo3(signature = (url, max_records_per_user = None, max_bytes_per_user = None))]
    fn redis(
        py: Python<'_>,
        url: &str,
        max_records_per_user: Option<i64>,
        max_bytes_per_user: Option<i64>,
    ) -> PyResult<Self> {
        let quotas = quotas_arg(py, max_records_per_user, max_bytes_per_user)?;
        let fail = |e| to_py(py, e);
        let store =
            RedisMemoryStore::builder(url).map_err(fail)?.quotas(quotas).build().map_err(fail)?;
        Ok(Self { store: Arc::new(store), provider: "redis" })
    }

    /// The store a URL names, as `agent_memory::open` reads it.
    #[staticmethod]
    fn open(py: Python<'_>, url: &str) -> PyResult<Self> {
        let store = agent_memory::open(url).map_err(|e| to_py(py, e))?;
        // `open` succeeded, so the URL names a registered provider.
        let provider = agent_memory::provider::registration(url).map_or("unknown", |p| p.name);
        Ok(Self { store, provider })
    }

    /// The provider's registered name: `memory`, `sqlite`, `postgres` or `redis`.
    #[getter]
    fn provider(&self) -> &'static str {
        self.provider
    }

    fn start<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let store = Arc::clone(&self.store);
        run(py, async move { store.start().await.map(|()| Reply::Unit).into() })
    }

    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let store = Arc::clone(&self.store);
        run(py, async move { store.close().await.map(|()| Reply::Unit).into() })
    }

    fn delete_all<'py>(
        &self,
        py: Python<'py>,
        scope: &Bound<'py, PyScope>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (store, scope) = (Arc::clone(&self.store), scope.get().inner.clone());
        run(py, async move { store.delete_all(&scope).await.map(Reply::Count).into() })
    }

    fn delete_user<'py>(
        &self,
        py: Python<'py>,
        application_id: &Bound<'py, PyAny>,
        user_id: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let application_id = convert::text(application_id, "application_id")?;
        let user_id = convert::text(user_id, "user_id")?;
        let store = Arc::clone(&self.store);
        run(py, async move {
            store.delete_user(&application_id, &user_id).await.map(Reply::Count).into()
        })
    }

    #[pyo3(signature = (application_id, user_id, limit = 20, after = None))]
    fn list_namespaces<'py>(
        &self,
        py: Python<'py>,
        application_id: &Bound<'py, PyAny>,
        user_id: &Bound<'py, PyAny>,
        limit: i64,
        after: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let page = page_arg(py, limit, after)?;
        let application_id = convert::text(application_id, "application_id")?;
        let user_id = convert::text(user_id, "user_id")?;
        let store = Arc::clone(&self.store);
        run(py, async move {
            store
                .list_namespaces(&application_id, &user_id, page)
                .await
                .map(Reply::Namespaces)
                .into()
        })
    }

    #[pyo3(signature = (application_id, limit = 20, after = None))]
    fn list_users<'py>(
        &self,
        py: Python<'py>,
        application_id: &Bound<'py, PyAny>,
        limit: i64,
        after: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let page = page_arg(py, limit, after)?;
        let application_id = convert::text(application_id, "application_id")?;
        let store = Arc::clone(&self.store);
        run(
            py,
            async move { store.list_users(&application_id, page).await.map(Reply::Users).into() },
        )
    }

    #[pyo3(signature = (limit = 20, after = None))]
    fn list_applications<'py>(
        &self,
        py: Python<'py>,
        limit: i64,
        after: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let page = page_arg(py, limit, after)?;
        let store = Arc::clone(&self.store);
        run(py, async move { store.list_applications(page).await.map(Reply::Applications).into() })
    }

    #[pyo3(signature = (scope, limit = 100, after = None))]
    fn purge_expired<'py>(
        &self,
        py: Python<'py>,
        scope: &Bound<'py, PyScope>,
        limit: i64,
        after: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let page = page_arg(py, limit, after)?;
        let (store, scope) = (Arc::clone(&self.store), scope.get().inner.clone());
        run(py, async move { store.purge_expired(&scope, page).await.map(Reply::Cleanup).into() })
    }
}
