//! Running a core future for Python: [`run`] returns something to `await`.
//!
//! The in-process store never waits for I/O, so its futures finish on their first poll. A
//! tokio task, an `asyncio.Future` and two loop callbacks per call would cost more than the
//! operation itself, so [`run`] first polls the future once, inline, with the GIL released and
//! inside the tokio runtime's context (so a provider may spawn or register I/O):
//!
//! - finished: the answer is wrapped in [`Ready`], an awaitable that completes at once;
//! - pending (a query in flight): the same future moves to the tokio runtime through
//!   `pyo3_async_runtimes::tokio::future_into_py`, which resolves an `asyncio.Future` on the
//!   caller's loop when it is done.
//!
//! Polling a future once with a no-op waker and then handing it to an executor is allowed by
//! the `Future` contract: the executor polls it again with its own waker, and a future must
//! register the waker of its latest poll.
//!
//! A panic never crosses into Python as an abort: it is caught on either path and raised as
//! a `RuntimeError` that names no data.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::{Context, Poll, Waker};

use agent_memory::{
    ApplicationPage, Fact, KeyInfoPage, MemoryCleanupPage, MemoryError, MemoryPage, MemoryRecord,
    NamespacePage, UserPage,
};
use futures_util::FutureExt as _;
use pyo3::exceptions::{PyAssertionError, PyRuntimeError, PyStopIteration};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;
use pyo3::IntoPyObjectExt as _;

use crate::errors::{panicked, to_py};
use crate::types::{
    PyApplicationPage, PyCleanupPage, PyFact, PyKeyInfoPage, PyNamespacePage, PyPage, PyRecord,
    PyUserPage,
};

/// A successful answer of the core, before it becomes a Python value.
pub(crate) enum Reply {
    Unit,
    Bool(bool),
    Count(u64),
    Record(Option<MemoryRecord>),
    Page(MemoryPage),
    Cleanup(MemoryCleanupPage),
    Namespaces(NamespacePage),
    Users(UserPage),
    Applications(ApplicationPage),
    Keys(KeyInfoPage),
    Fact(Fact),
    Facts(Vec<Fact>),
    /// A memory tool command's result text, and whether it is an error for the model.
    ToolResult {
        text: String,
        is_error: bool,
    },
}

/// How a core future ended. Converted to Python with the GIL held, on whichever path ran it.
pub(crate) enum Outcome {
    Done(Reply),
    Failed(MemoryError),
    /// A conformance case failed: its message becomes an `AssertionError`.
    CaseFailed(String),
    /// Rust code panicked (a bug).
    Panicked,
}

impl From<Result<Reply, MemoryError>> for Outcome {
    fn from(result: Result<Reply, MemoryError>) -> Self {
        match result {
            Ok(reply) => Outcome::Done(reply),
            Err(err) => Outcome::Failed(err),
        }
    }
}

impl Outcome {
    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let reply = match self {
            Outcome::Done(reply) => reply,
            Outcome::Failed(err) => return Err(to_py(py, err)),
            Outcome::CaseFailed(message) => return Err(PyAssertionError::new_err(message)),
            Outcome::Panicked => return Err(panicked()),
        };
        match reply {
            Reply::Unit => Ok(py.None()),
            Reply::Bool(flag) => flag.into_py_any(py),
            Reply::Count(n) => n.into_py_any(py),
            Reply::Record(None) => Ok(py.None()),
            Reply::Record(Some(inner)) => PyRecord { inner }.into_py_any(py),
            Reply::Page(page) => PyPage::from_core(py, page)?.into_py_any(py),
            Reply::Cleanup(page) => PyCleanupPage::from_core(page).into_py_any(py),
            Reply::Namespaces(page) => PyNamespacePage::from_core(py, page)?.into_py_any(py),
            Reply::Users(page) => PyUserPage::from_core(py, page)?.into_py_any(py),
            Reply::Applications(page) => PyApplicationPage::from_core(py, page)?.into_py_any(py),
            Reply::Keys(page) => PyKeyInfoPage::from_core(py, page)?.into_py_any(py),
            Reply::Fact(fact) => PyFact::from(fact).into_py_any(py),
            Reply::Facts(facts) => {
                let facts = facts
                    .into_iter()
                    .map(|fact| Bound::new(py, PyFact::from(fact)))
                    .collect::<PyResult<Vec<_>>>()?;
                PyTuple::new(py, facts)?.into_py_any(py)
            }
            Reply::ToolResult { text, is_error } => (text, is_error).into_py_any(py),
        }
    }
}

impl<'py> IntoPyObject<'py> for Outcome {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        self.into_py(py).map(|value| value.into_bound(py))
    }
}

/// Runs `future` for Python and returns what to `await`: a [`Ready`] when it finished on its
/// first poll, else an `asyncio.Future` on the running loop.
///
/// # Errors
/// When no asyncio loop is running in this thread (checked before the future is polled).
pub(crate) fn run<F>(py: Python<'_>, future: F) -> PyResult<Bound<'_, PyAny>>
where
    F: Future<Output = Outcome> + Send + 'static,
{
    // A pending future needs a loop to resolve on: check for one before anything starts, so
    // an operation is never begun only to be dropped.
    require_running_loop(py)?;
    let mut future = Box::pin(future);
    let runtime = pyo3_async_runtimes::tokio::get_runtime();
    let first = py.detach(|| {
        let _context = runtime.enter();
        let mut cx = Context::from_waker(Waker::noop());
        catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)))
    });
    let value = match first {
        Ok(Poll::Ready(outcome)) => outcome.into_py(py),
        Err(_panic) => Err(panicked()),
        Ok(Poll::Pending) => {
            let guarded = AssertUnwindSafe(future)
                .catch_unwind()
                .map(|ended| Ok(ended.unwrap_or(Outcome::Panicked)));
            return pyo3_async_runtimes::tokio::future_into_py(py, guarded);
        }
    };
    Ok(Bound::new(py, Ready { value: Some(value) })?.into_any())
}

/// Raises `RuntimeError` unless an asyncio loop is running in this thread
/// (`asyncio.get_running_loop()`, looked up once).
fn require_running_loop(py: Python<'_>) -> PyResult<()> {
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let get = GET_RUNNING_LOOP.get_or_try_init(py, || {
        py.import("asyncio")?.getattr("get_running_loop").map(Bound::unbind)
    })?;
    get.call0(py).map(drop)
}

/// An awaitable whose answer is already known: `await` returns it (or raises it) at once,
/// without a round trip through the event loop.
#[pyclass(module = "agent_memory._native")]
pub(crate) struct Ready {
    value: Option<PyResult<Py<PyAny>>>,
}

impl Ready {
    fn take(&mut self) -> PyErr {
        match self.value.take() {
            Some(Ok(value)) => PyStopIteration::new_err((value,)),
            Some(Err(err)) => err,
            None => PyRuntimeError::new_err("cannot await an agent_memory result twice"),
        }
    }
}

#[pymethods]
impl Ready {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self) -> PyResult<Py<PyAny>> {
        Err(self.take())
    }

    /// Generator protocol, for callers that drive the awaitable by hand.
    fn send(&mut self, _value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        Err(self.take())
    }

    /// Generator protocol: raises the given exception, dropping the answer.
    #[pyo3(signature = (exception, _value = None, _traceback = None))]
    fn throw(
        &mut self,
        exception: &Bound<'_, PyAny>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.value = None;
        Err(PyErr::from_value(exception.clone()))
    }

    /// Generator protocol: drops the answer.
    fn close(&mut self) {
        self.value = None;
    }
}
