//! Running a core future for Python: [`run`] returns something to `await`.
//!
//! The in-process store never waits for I/O, so its futures finish on their first poll. A
//! tokio task, an `asyncio.Future` and two loop callbacks per call would cost more than the
//! operation itself, so [`run`] first polls the future once, inline, with the GIL released and
//! inside the tokio runtime's context (so a provider may spawn or register I/O):
//!
//! - finished: the answer is wrapped in [`Ready`], an awaitable that completes at once;
//! - pending (a query in flight): the same future moves to a tokio task, and an
//!   `asyncio.Future` on the caller's loop gets its answer when it is done (see [`pending`]).
//!
//! Polling a future once with a no-op waker and then handing it to an executor is allowed by
//! the `Future` contract: the executor polls it again with its own waker, and a future must
//! register the waker of its latest poll.
//!
//! A panic never crosses into Python as an abort: it is caught on either path and raised as
//! a `RuntimeError` that names no data.
//!
//! # Cancellation, closed loops and exit
//!
//! Nothing the caller does to the awaitable can crash the interpreter:
//!
//! - cancelling the `asyncio.Future` (a task cancelled on a timeout) aborts the tokio task,
//!   dropping the core's future at its next pause. Like a lost connection, that does not undo
//!   a write the datastore already received: a cancelled `put` or `delete` may still commit,
//!   so read the key again before deciding (the rule of `MemoryStorageError`);
//! - an answer for a future that is already done, or for a loop that has closed, is dropped;
//! - once the interpreter begins to exit, no tokio thread attaches to it again
//!   ([`interpreter`]), and a call that would need one raises `RuntimeError`.
//!
//! The answer is handed over by this module rather than by
//! `pyo3_async_runtimes::tokio::future_into_py`, whose threads attach to the interpreter
//! without asking whether it is exiting.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::{Context, Poll, Waker};

use agent_memory::{
    ApplicationPage, Fact, KeyInfoPage, MemoryCleanupPage, MemoryError, MemoryPage, MemoryRecord,
    NamespacePage, UserPage,
};
use futures_util::FutureExt as _;
use pyo3::exceptions::{PyAssertionError, PyRuntimeError, PyStopIteration};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;
use pyo3::IntoPyObjectExt as _;

use crate::errors::{panicked, to_py};
use crate::interpreter;
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
/// When no asyncio loop is running in this thread (checked before the future is polled), or
/// when the interpreter is exiting and the future did not finish on its first poll.
pub(crate) fn run<F>(py: Python<'_>, future: F) -> PyResult<Bound<'_, PyAny>>
where
    F: Future<Output = Outcome> + Send + 'static,
{
    // A pending future needs a loop to resolve on: check for one before anything starts, so
    // an operation is never begun only to be dropped.
    let event_loop = running_loop(py)?;
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
        Ok(Poll::Pending) => return pending(py, event_loop, future),
    };
    Ok(Bound::new(py, Ready { value: Some(value) })?.into_any())
}

/// The running asyncio loop of this thread (`asyncio.get_running_loop()`, looked up once);
/// `RuntimeError` when there is none.
fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let get = GET_RUNNING_LOOP.get_or_try_init(py, || {
        py.import("asyncio")?.getattr("get_running_loop").map(Bound::unbind)
    })?;
    get.bind(py).call0()
}

/// Finishes a future that is still pending after its first poll: on the tokio runtime, with
/// its answer handed to an `asyncio.Future` of `event_loop`.
///
/// Cancelling the `asyncio.Future` aborts the tokio task, which drops the core's future at its
/// next pause: a write the datastore has already received may still commit (as after any
/// other lost connection). The answer is handed over with `call_soon_threadsafe` from a
/// blocking-pool thread (so a tokio worker never waits for the GIL), through
/// [`interpreter::attach`], and only while the loop is open and the future not done; after the
/// loop closed or the interpreter began to exit, it is dropped, since nothing can await it.
fn pending<'py, F>(
    py: Python<'py>,
    event_loop: Bound<'py, PyAny>,
    future: std::pin::Pin<Box<F>>,
) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Outcome> + Send + 'static,
{
    if interpreter::is_closing() {
        return Err(PyRuntimeError::new_err(
            "the Python interpreter is exiting: agent_memory starts no more calls",
        ));
    }
    let py_future = event_loop.call_method0(intern!(py, "create_future"))?;
    let (answer, done) = (py_future.clone().unbind(), event_loop.clone().unbind());
    let guarded = AssertUnwindSafe(future).catch_unwind();
    let task = pyo3_async_runtimes::tokio::get_runtime().spawn(async move {
        let outcome = guarded.await.unwrap_or(Outcome::Panicked);
        // Dropping the JoinHandle detaches the blocking task; it runs to its end regardless.
        drop(tokio::task::spawn_blocking(move || {
            interpreter::attach(|py| deliver(py, done.bind(py), answer.bind(py), outcome));
        }));
    });
    let abort = Abort { task: Some(task.abort_handle()) };
    if let Err(err) = py_future.call_method1(intern!(py, "add_done_callback"), (abort,)) {
        task.abort();
        return Err(err);
    }
    Ok(py_future)
}

/// Hands `outcome` to `future` on `event_loop`, unless the future is done (cancelled) or the
/// loop closed. Never raises: whoever could see an error has stopped waiting.
fn deliver(
    py: Python<'_>,
    event_loop: &Bound<'_, PyAny>,
    future: &Bound<'_, PyAny>,
    outcome: Outcome,
) {
    let closed = |l: &Bound<'_, PyAny>| {
        l.call_method0(intern!(py, "is_closed")).and_then(|c| c.is_truthy()).unwrap_or(true)
    };
    let done = |f: &Bound<'_, PyAny>| {
        f.call_method0(intern!(py, "done")).and_then(|d| d.is_truthy()).unwrap_or(true)
    };
    if closed(event_loop) || done(future) {
        return;
    }
    let handed = (|| -> PyResult<()> {
        let (complete, value) = match outcome.into_py(py) {
            Ok(value) => (future.getattr(intern!(py, "set_result"))?, value.into_bound(py)),
            Err(err) => (
                future.getattr(intern!(py, "set_exception"))?,
                err.into_value(py).into_bound(py).into_any(),
            ),
        };
        event_loop
            .call_method1(intern!(py, "call_soon_threadsafe"), (Complete, future, complete, value))
            .map(drop)
    })();
    // The loop may close between the check and the call (`RuntimeError: Event loop is
    // closed`); anything else is a bug worth a trace on stderr, never a crash.
    if let Err(err) = handed {
        if !closed(event_loop) {
            err.write_unraisable(py, Some(future));
        }
    }
}

/// Sets an `asyncio.Future`'s result on its loop's thread unless it is done by then (it was
/// cancelled while the answer travelled).
#[pyclass(module = "agent_memory._native")]
struct Complete;

#[pymethods]
impl Complete {
    fn __call__(
        &self,
        future: &Bound<'_, PyAny>,
        complete: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        if !future.call_method0(intern!(future.py(), "done"))?.is_truthy()? {
            complete.call1((value,))?;
        }
        Ok(())
    }
}

/// The `asyncio.Future`'s done callback: a cancelled future aborts its tokio task.
#[pyclass(module = "agent_memory._native")]
struct Abort {
    task: Option<tokio::task::AbortHandle>,
}

#[pymethods]
impl Abort {
    fn __call__(&mut self, future: &Bound<'_, PyAny>) -> PyResult<()> {
        let task = self.task.take();
        if future.call_method0(intern!(future.py(), "cancelled"))?.is_truthy()? {
            if let Some(task) = task {
                task.abort();
            }
        }
        Ok(())
    }
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
