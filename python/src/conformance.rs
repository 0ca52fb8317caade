//! The core's conformance cases, run against a store given from Python.
//!
//! `agent_memory.testing.MemoryStoreConformanceMixin` turns every name of
//! [`CASE_NAMES`](agent_memory::conformance::CASE_NAMES) into one test method that awaits
//! [`run_conformance_case`]. The case is the core's own code: the same rule, the same
//! assertions, the same fresh random application id as the Rust providers' tests. A store
//! written in Python is called through [`PyStore`](crate::pystore::PyStore); the package's own
//! stores are called through their Python classes too, so the cases also check the bindings.
//!
//! A failed case is an `AssertionError` with the case's message. While cases run, the
//! default panic hook is quiet (the message is in the exception instead).

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

use agent_memory::conformance::{case_by_name, Fixture, Harness, CASE_NAMES};
use futures_util::FutureExt as _;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::awaitable::{run, Outcome, Reply};
use crate::clock::PyManualClock;
use crate::pystore::PyStore;

/// The names of the core's conformance cases, in the core's order.
#[pyfunction]
pub(crate) fn conformance_case_names() -> Vec<&'static str> {
    CASE_NAMES.to_vec()
}

/// Runs the case `name` against `store` (unstarted; started and closed by the harness), with
/// an optional second instance `replica` on the same datastore and the `clock` the store
/// reads, if it has one.
///
/// `with_quotas`, when given, is a callable taking the keyword arguments
/// `max_records_per_user` and `max_bytes_per_user` (each an int or `None`) and returning
/// another unstarted store on the same datastore with those quotas, for the quota cases.
#[pyfunction]
#[pyo3(signature = (name, store, replica = None, clock = None, with_quotas = None))]
pub(crate) fn run_conformance_case<'py>(
    py: Python<'py>,
    name: String,
    store: &Bound<'py, PyAny>,
    replica: Option<&Bound<'py, PyAny>>,
    clock: Option<&Bound<'py, PyManualClock>>,
    with_quotas: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    if !CASE_NAMES.contains(&name.as_str()) {
        return Err(PyValueError::new_err("no conformance case has this name"));
    }
    let mut fixture = Fixture::new(std::sync::Arc::new(PyStore::new(store)?));
    if let Some(replica) = replica.filter(|r| !r.is_none()) {
        fixture = fixture.with_replica(std::sync::Arc::new(PyStore::new(replica)?));
    }
    if let Some(clock) = clock {
        fixture = fixture.with_clock(clock.get().inner.clone());
    }
    if let Some(factory) = with_quotas.filter(|f| !f.is_none()) {
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        let factory = factory.clone().unbind();
        fixture = fixture.with_quotas(move |quotas| {
            // A factory that fails is a broken test setup: the case reports it.
            let store = crate::interpreter::attach(|py| {
                let kwargs = pyo3::types::PyDict::new(py);
                kwargs.set_item("max_records_per_user", quotas.records())?;
                kwargs.set_item("max_bytes_per_user", quotas.bytes())?;
                factory.bind(py).call((), Some(&kwargs)).map(Bound::unbind)
            })
            .expect("the interpreter is not exiting while a case runs")
            .expect("the store factory with quotas returns a store");
            std::sync::Arc::new(PyStore::with_locals(store, locals.clone()))
        });
    }
    let quiet = QuietPanics::new();
    run(py, async move {
        let _quiet = quiet;
        let ended = AssertUnwindSafe(run_case(name, fixture)).catch_unwind().await;
        match ended {
            Ok(()) => Outcome::Done(Reply::Unit),
            Err(payload) => Outcome::CaseFailed(panic_message(payload.as_ref())),
        }
    })
}

/// What the core's own `conformance::run` does, on the package's runtime.
async fn run_case(name: String, fixture: Fixture) {
    let harness = Harness::start(fixture).await;
    let store = harness.shared_store();
    let replica = harness.has_replica().then(|| harness.replica());
    let case = case_by_name(&name, harness).expect("the name was checked against CASE_NAMES");
    case.await;
    if let Some(replica) = replica {
        replica.close().await.expect("the replica of the store under test closes");
    }
    store.close().await.expect("the store under test closes");
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "the case panicked".to_owned()
    }
}

/// Cases running now; while there are any, the panic hook prints nothing.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Keeps the panic hook quiet while it lives.
struct QuietPanics;

impl QuietPanics {
    fn new() -> Self {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if RUNNING.load(Ordering::SeqCst) == 0 {
                    previous(info);
                }
            }));
        });
        RUNNING.fetch_add(1, Ordering::SeqCst);
        Self
    }
}

impl Drop for QuietPanics {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Panics inside a future run for Python (after one pending poll when `pending`), so a test
/// can show that a panic becomes a `RuntimeError` and never aborts the interpreter.
#[pyfunction]
pub(crate) fn _panic_probe(py: Python<'_>, pending: bool) -> PyResult<Bound<'_, PyAny>> {
    let quiet = QuietPanics::new();
    run(py, async move {
        let _quiet = quiet;
        if pending {
            tokio::task::yield_now().await;
        }
        std::panic::panic_any("the panic probe panics")
    })
}
