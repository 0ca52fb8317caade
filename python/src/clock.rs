//! `ManualClock`: a clock tests move by hand, shared with the stores that read it.

use std::time::Duration;

use agent_memory::{Clock as _, ManualClock, Timestamp};
use pyo3::prelude::*;

use crate::errors::to_py;

/// `ManualClock(start=None)`: time that moves only when told, for expiry tests without sleeps.
///
/// Pass it as `clock=` to `InMemoryStore` or `SqliteMemoryStore`; a store written in Python
/// reads `clock.now()`. Times are UTC epoch seconds.
#[pyclass(frozen, name = "ManualClock", module = "agent_memory.testing")]
pub(crate) struct PyManualClock {
    pub(crate) inner: ManualClock,
}

#[pymethods]
impl PyManualClock {
    #[new]
    #[pyo3(signature = (start = None))]
    fn new(py: Python<'_>, start: Option<f64>) -> PyResult<Self> {
        let inner = match start {
            Some(seconds) => {
                ManualClock::new(Timestamp::from_unix_seconds(seconds).map_err(|e| to_py(py, e))?)
            }
            None => ManualClock::starting_now(),
        };
        Ok(Self { inner })
    }

    /// The clock's current time.
    fn now(&self) -> f64 {
        self.inner.now().as_unix_seconds()
    }

    /// Moves the clock forward by `seconds` (at least 0).
    fn advance(&self, py: Python<'_>, seconds: f64) -> PyResult<()> {
        let by = Duration::try_from_secs_f64(seconds).map_err(|_| {
            to_py(
                py,
                agent_memory::MemoryError::invalid(
                    "timestamp",
                    "must be a finite number of seconds",
                ),
            )
        })?;
        self.inner.advance(by);
        Ok(())
    }

    /// Sets the clock to `seconds`.
    fn set(&self, py: Python<'_>, seconds: f64) -> PyResult<()> {
        self.inner.set(Timestamp::from_unix_seconds(seconds).map_err(|e| to_py(py, e))?);
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("ManualClock({})", self.inner.now())
    }
}
