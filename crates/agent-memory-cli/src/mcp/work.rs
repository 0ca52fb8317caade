//! How much work a request did, for the HTTP server's rate limit: the store operations its
//! tool call ran, counted by a [`Metered`] store the handler puts in front of the shared one.
//!
//! A request is charged in *units*: one for the request itself, which covers up to
//! [`INCLUDED_OPERATIONS`] store operations, and one for every further operation. An ordinary
//! call (a read, a write, an edit, a listing of a page) costs one unit; a rename of a directory
//! of 1,000 files, about 3,000 operations, costs about as many units as 3,000 ordinary calls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use agent_memory::MemoryStore;

/// Store operations one unit of a request covers.
pub const INCLUDED_OPERATIONS: u64 = 10;

/// The store operations one request ran; shared by the HTTP layer, which puts it in the
/// request, and the handler, which counts into it.
#[derive(Debug, Clone, Default)]
pub struct Work(Arc<AtomicU64>);

impl Work {
    /// Store operations counted so far.
    pub fn operations(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// What the request costs in units: one, plus one per operation past
    /// [`INCLUDED_OPERATIONS`].
    pub fn units(&self) -> u64 {
        1 + self.operations().saturating_sub(INCLUDED_OPERATIONS)
    }

    fn count(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// A store that forwards every operation to `inner` and counts it in a [`Work`].
#[derive(Debug)]
pub struct Metered {
    inner: Arc<dyn MemoryStore>,
    work: Work,
}

impl Metered {
    /// `inner`, counting into `work`.
    pub fn new(inner: Arc<dyn MemoryStore>, work: Work) -> Self {
        Self { inner, work }
    }

    /// Counts one operation, whichever it is.
    fn counted(&self, _operation: &'static str) {
        self.work.count();
    }
}

// `start` and `close` are forwarded as they are; every other operation is counted once, then
// forwarded.
agent_memory::forward_store!(Metered, inner, counted);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_costs_one_unit_up_to_the_included_operations_then_one_per_operation() {
        let work = Work::default();
        assert_eq!(work.units(), 1, "a request that ran nothing");
        for _ in 0..INCLUDED_OPERATIONS {
            work.count();
        }
        assert_eq!(work.units(), 1);
        for _ in 0..3_000 {
            work.count();
        }
        assert_eq!(work.units(), 3_001);
    }
}
