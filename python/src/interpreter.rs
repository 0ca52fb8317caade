//! Attaching to the interpreter from tokio's threads, and never after it began to exit.
//!
//! A call that does not finish on its first poll runs on a tokio thread, which must attach to
//! the interpreter to hand the answer back (or, for a store written in Python, to call it).
//! The tokio runtime outlives the interpreter: its threads keep running while Python exits.
//! Attaching to an interpreter that is finalizing or gone is undefined behaviour in CPython
//! (before 3.14 the attaching thread is ended with `pthread_exit`, which unwinds through Rust
//! frames; after finalization `PyGILState_Ensure` reads freed state), and showed up as SIGSEGV
//! and as "PyGILState_Release: thread state must be current" aborts when a process exited
//! with calls in flight. And with the limited API of CPython 3.9, pyo3 cannot ask whether the
//! interpreter is finalizing.
//!
//! So every such attach goes through [`attach`], and the module registers [`close`] with
//! `atexit` when it is imported. Python runs `atexit` functions at exit while the interpreter
//! still works, after joining its non-daemon threads and before it starts finalizing; `close`
//! shuts the gate and waits (detached, so they can finish) for the attaches in progress. After
//! it, [`attach`] returns `None` without touching Python, and the callers drop what they would
//! have delivered: nothing is awaiting it any more.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// How long `close` waits for attaches in progress. They only hand over an answer or start a
/// Python store's coroutine, so this is generous; past it, exit goes on rather than hang.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

struct Gate {
    /// Threads attached through [`attach`] right now.
    attached: usize,
    /// Set by [`close`]; never cleared.
    closed: bool,
}

static GATE: Mutex<Gate> = Mutex::new(Gate { attached: 0, closed: false });
static DRAINED: Condvar = Condvar::new();

fn gate() -> MutexGuard<'static, Gate> {
    // The gate holds two plain values that no panic leaves half-updated.
    GATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts one attach in progress until dropped.
struct Entered;

impl Drop for Entered {
    fn drop(&mut self) {
        let mut gate = gate();
        gate.attached -= 1;
        if gate.attached == 0 {
            DRAINED.notify_all();
        }
    }
}

/// Runs `f` attached to the interpreter, or returns `None` without touching Python when the
/// interpreter has begun to exit (or is not running at all).
pub(crate) fn attach<F, R>(f: F) -> Option<R>
where
    F: for<'py> FnOnce(Python<'py>) -> R,
{
    let _entered = {
        let mut gate = gate();
        if gate.closed {
            return None;
        }
        gate.attached += 1;
        Entered
    };
    Python::try_attach(f)
}

/// Whether the interpreter has begun to exit: calls started now could never be answered.
pub(crate) fn is_closing() -> bool {
    gate().closed
}

/// Shuts the gate for good and waits for the attaches in progress. Registered with `atexit`.
#[pyfunction]
pub(crate) fn _close_at_exit(py: Python<'_>) {
    gate().closed = true;
    // Detached: the threads being waited for need the GIL to finish.
    py.detach(|| {
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        let mut gate = gate();
        while gate.attached > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            gate = DRAINED.wait_timeout(gate, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    });
}

/// Registers [`_close_at_exit`] with `atexit`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let close = wrap_pyfunction!(_close_at_exit, m)?;
    m.py().import("atexit")?.call_method1("register", (close,))?;
    Ok(())
}
