//! `agent_memory._native`: the Rust core of agent-memory as a Python extension module.
//!
//! The Python package (`python/agent_memory/`) is the public API; this module is its engine.
//! Nothing here re-decides what the core decides: scopes, records, limits, cursors and every
//! provider come from the `agent-memory` crate, and each function only converts arguments,
//! runs the core and converts the answer back.
//!
//! | module | job |
//! | --- | --- |
//! | `errors` | core errors to the package's exception classes, and back (for Python stores) |
//! | `convert` | JSON, timestamps, revisions and cursors between Python and the core |
//! | `types` | `MemoryScope`, `MemorySource`, `MemoryRecord`, the pages, `Fact` |
//! | `awaitable` | running a core future: inline when it finishes on its first poll, else on tokio |
//! | `interpreter` | attaching from tokio's threads, and never once the interpreter began to exit |
//! | `store` | `NativeStore`: the four providers behind one class |
//! | `pystore` | a store written in Python, seen by the core as a `MemoryStore` |
//! | `layers` | the fact port and the scoped handle, over any store |
//! | `provider` | the core's validation and cursor helpers, for stores written in Python |
//! | `conformance` | the core's conformance cases, run against any store |
//! | `clock` | `ManualClock`, so tests move time instead of sleeping |
//! | `review` | sign-in links to the review page of the remote server |
//! | `bench` | the Rust side of the benchmark, beside the Python side in one process |

use pyo3::prelude::*;

mod awaitable;
mod bench;
mod clock;
mod conformance;
mod convert;
mod errors;
mod interpreter;
mod layers;
mod provider;
mod pystore;
mod review;
mod store;
mod types;

/// The module `agent_memory._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<types::PyScope>()?;
    m.add_class::<types::PySource>()?;
    m.add_class::<types::PyRecord>()?;
    m.add_class::<types::PyPage>()?;
    m.add_class::<types::PyCleanupPage>()?;
    m.add_class::<types::PyNamespacePage>()?;
    m.add_class::<types::PyUserPage>()?;
    m.add_class::<types::PyApplicationPage>()?;
    m.add_class::<types::PyKeyInfo>()?;
    m.add_class::<types::PyKeyInfoPage>()?;
    m.add_class::<types::PyFact>()?;
    m.add_class::<awaitable::Ready>()?;
    m.add_class::<clock::PyManualClock>()?;
    m.add_class::<store::NativeStore>()?;
    m.add_class::<layers::NativeFacts>()?;
    m.add_class::<layers::NativeUserFacts>()?;
    m.add_class::<layers::NativeScoped>()?;
    m.add_function(wrap_pyfunction!(conformance::conformance_case_names, m)?)?;
    m.add_function(wrap_pyfunction!(conformance::run_conformance_case, m)?)?;
    m.add_function(wrap_pyfunction!(conformance::_panic_probe, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_bench_core, m)?)?;
    provider::register(m)?;
    m.add_function(wrap_pyfunction!(review::review_link, m)?)?;
    interpreter::register(m)?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
