//! The Rust side of the package's benchmark (`python/bench/bench.py`): the same loop of core
//! calls as the Python side, on the same store in the same process, so the two figures come
//! from one run on one machine state.

use std::sync::Arc;
use std::time::Instant;

use agent_memory::MemoryWrite;
use pyo3::prelude::*;

use crate::awaitable::{run, Outcome, Reply};
use crate::store::NativeStore;
use crate::types::PyScope;

/// Runs `ops` calls of `op` (`get` or `put`) on the keys `key-0 … key-{keys-1}` of `scope`,
/// split over `tasks` tokio tasks, and returns the elapsed seconds.
#[pyfunction]
pub(crate) fn _bench_core<'py>(
    py: Python<'py>,
    store: &Bound<'py, NativeStore>,
    scope: &Bound<'py, PyScope>,
    op: &str,
    tasks: usize,
    ops: usize,
    keys: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let put = match op {
        "get" => false,
        "put" => true,
        _ => return Err(pyo3::exceptions::PyValueError::new_err("op must be get or put")),
    };
    let store = Arc::clone(&store.get().store);
    let scope = scope.get().inner.clone();
    let (tasks, keys) = (tasks.max(1), keys.max(1));
    let keys: Arc<Vec<String>> = Arc::new((0..keys).map(|i| format!("key-{i}")).collect());
    let per_task = ops / tasks;
    run(py, async move {
        let started = Instant::now();
        let mut handles = Vec::with_capacity(tasks);
        for t in 0..tasks {
            let (store, scope, keys) = (Arc::clone(&store), scope.clone(), Arc::clone(&keys));
            handles.push(tokio::spawn(async move {
                for i in 0..per_task {
                    let key = &keys[(t * per_task + i) % keys.len()];
                    let result = if put {
                        store
                            .put(&scope, key, MemoryWrite::new("a benchmark value"))
                            .await
                            .map(drop)
                    } else {
                        store.get(&scope, key).await.map(drop)
                    };
                    result?;
                }
                Ok::<(), agent_memory::MemoryError>(())
            }));
        }
        for handle in handles {
            match handle.await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Outcome::Failed(err),
                Err(_) => return Outcome::Panicked,
            }
        }
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        Outcome::Done(Reply::Count(micros))
    })
}
