//! Concurrency: conditional writes are one atomic step, so racing tasks never lose an update.

use std::collections::HashSet;
use std::sync::Arc;

use super::support::{get, increment_existing, list_all, put};
use crate::conformance::Harness;
use crate::error::MemoryError;
use crate::record::MemoryRecord;
use crate::store::MemoryStore;
use crate::write::MemoryWrite;

const TASKS: usize = 16;
const INCREMENTS: usize = 10;

/// 16 tasks doing compare-and-set increments of one counter end at exactly 16 × 10.
pub async fn concurrent_compare_and_set_loses_no_update(h: Harness) {
    let scope = h.scope("user-1");
    put(h.store(), &scope, "counter", "0").await;
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let store = h.shared_store();
        let scope = scope.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for _ in 0..INCREMENTS {
                conflicts += increment_existing(store.as_ref(), &scope, "counter").await.conflicts;
            }
            conflicts
        }));
    }
    for task in tasks {
        task.await.expect("an increment task panicked");
    }
    let counter = get(h.store(), &scope, "counter").await.expect("the counter exists");
    assert_eq!(
        counter.content,
        (TASKS * INCREMENTS).to_string(),
        "{TASKS} tasks x {INCREMENTS} compare-and-set increments must all land: the revision \
         check and the write must be one atomic step"
    );
}

/// 16 tasks racing `create_only` on one key: exactly one wins, the rest get `Conflict`.
pub async fn concurrent_create_only_has_one_winner(h: Harness) {
    let scope = h.scope("user-1");
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let store = h.shared_store();
        let scope = scope.clone();
        tasks.push(tokio::spawn(async move {
            store.put(&scope, "k", MemoryWrite::new(format!("task {i}")).create_only()).await
        }));
    }
    let mut winners: Vec<MemoryRecord> = Vec::new();
    for task in tasks {
        match task.await.expect("a create task panicked") {
            Ok(record) => winners.push(record),
            Err(MemoryError::Conflict { .. }) => {}
            Err(other) => panic!("a racing create_only failed with {other:?} instead of Conflict"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one racing create_only may win, {} did", winners.len());
    assert_eq!(
        get(h.store(), &scope, "k").await,
        winners.pop(),
        "the stored record must be the winner's"
    );
}

/// 16 tasks racing a delete with the live revision: exactly one deletes, the rest get `Conflict`.
pub async fn concurrent_conditional_delete_has_one_winner(h: Harness) {
    let scope = h.scope("user-1");
    let record = put(h.store(), &scope, "k", "x").await;
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let store = h.shared_store();
        let scope = scope.clone();
        let revision = record.revision.clone();
        tasks.push(tokio::spawn(async move { store.delete(&scope, "k", Some(&revision)).await }));
    }
    let mut deleted = 0;
    for task in tasks {
        match task.await.expect("a delete task panicked") {
            Ok(true) => deleted += 1,
            Ok(false) => panic!(
                "a delete with a revision must not return false: it either deletes or conflicts"
            ),
            Err(MemoryError::Conflict { .. }) => {}
            Err(other) => panic!("a racing conditional delete failed with {other:?}"),
        }
    }
    assert_eq!(deleted, 1, "exactly one racing conditional delete may succeed");
    assert!(get(h.store(), &scope, "k").await.is_none(), "the record is gone");
}

/// Concurrent writes to many keys all land, each with its own distinct revision.
pub async fn concurrent_writes_to_distinct_keys_all_land(h: Harness) {
    let scope = h.scope("user-1");
    let store: Arc<dyn MemoryStore> = h.shared_store();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let store = Arc::clone(&store);
        let scope = scope.clone();
        tasks.push(tokio::spawn(async move {
            let mut revisions = Vec::new();
            for i in 0..INCREMENTS {
                let key = format!("t{t:02}-k{i:02}");
                let record =
                    store.put(&scope, &key, MemoryWrite::new(key.clone())).await.expect("put");
                revisions.push(record.revision);
            }
            revisions
        }));
    }
    let mut revisions = HashSet::new();
    for task in tasks {
        for revision in task.await.expect("a writer task panicked") {
            revisions.insert(revision);
        }
    }
    let listed = list_all(h.store(), &scope, 100).await;
    assert_eq!(listed.len(), TASKS * INCREMENTS, "every concurrent write must be stored");
    assert!(listed.iter().all(|r| r.content == r.key), "each key holds its own content");
    assert_eq!(
        revisions.len(),
        TASKS * INCREMENTS,
        "concurrent writes must get distinct revisions"
    );
}
