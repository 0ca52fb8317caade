//! Replicas: two independent instances on one datastore (see
//! [`Fixture::with_replica`](crate::conformance::Fixture::with_replica)) race each other. The
//! datastore, not the instance, decides every conditional write, so no revision is ever won
//! twice and an erasure racing writes leaves only whole records.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::support::{
    assert_distinct, expect_conflict, get, increment_existing, list_all, namespaces_all,
};
use crate::conformance::Harness;
use crate::error::MemoryError;
use crate::record::{MemoryRecord, Source};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::time::Timestamp;
use crate::write::MemoryWrite;

const TASKS: usize = 16;
const INCREMENTS: usize = 10;

/// The store for even task numbers, the replica for odd ones.
fn instance(h: &Harness, task: usize) -> Arc<dyn MemoryStore> {
    if task.is_multiple_of(2) {
        h.shared_store()
    } else {
        h.replica()
    }
}

/// A write on one instance is visible on the other at once; a revision from one instance is
/// checked by the other; a delete on either removes the record for both.
pub async fn replicas_see_each_others_writes(h: Harness) {
    let scope = h.scope("user-1");
    let (a, b) = (h.shared_store(), h.replica());
    let first = a
        .put(&scope, "k", MemoryWrite::new("from a").metadata(json!({"by": "a"})))
        .await
        .expect("put on the store");
    assert_eq!(
        get(b.as_ref(), &scope, "k").await,
        Some(first.clone()),
        "the replica must read the store's write at once, exactly"
    );
    let second = b
        .put(&scope, "k", MemoryWrite::new("from b").expected_revision(first.revision.clone()))
        .await
        .expect("the replica must accept the live revision written by the store");
    expect_conflict(
        a.put(&scope, "k", MemoryWrite::new("stale").expected_revision(first.revision.clone()))
            .await,
        "the store writing with a revision the replica already replaced",
    );
    assert_eq!(get(a.as_ref(), &scope, "k").await, Some(second.clone()), "the store sees b");
    assert_eq!(
        list_all(a.as_ref(), &scope, 100).await,
        list_all(b.as_ref(), &scope, 100).await,
        "both instances list the same records"
    );
    assert!(
        b.delete(&scope, "k", Some(&second.revision)).await.expect("delete on the replica"),
        "the replica deletes the live revision"
    );
    assert!(get(a.as_ref(), &scope, "k").await.is_none(), "the store sees the delete at once");
    let third = a.put(&scope, "k", MemoryWrite::new("again")).await.expect("re-create");
    assert_distinct(
        &[first.revision, second.revision.clone(), third.revision],
        "revisions across two instances and a delete",
    );
    expect_conflict(
        b.put(&scope, "k", MemoryWrite::new("x").expected_revision(second.revision)).await,
        "a revision from before the delete, on the replica",
    );
    assert_eq!(b.delete_user(h.app(), "user-1").await.expect("delete_user on the replica"), 1);
    assert!(
        namespaces_all(a.as_ref(), h.app(), "user-1", 10).await.is_empty(),
        "the store sees the replica's erasure"
    );
}

/// 16 tasks split over the store and its replica, doing compare-and-set increments of one
/// counter, end at exactly 16 × 10; every successful write won a distinct revision and a
/// distinct value.
pub async fn replicas_compare_and_set_never_wins_a_revision_twice(h: Harness) {
    let scope = h.scope("user-1");
    let initial = h.store().put(&scope, "counter", MemoryWrite::new("0")).await.expect("put");
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let store = instance(&h, t);
        let scope = scope.clone();
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            for _ in 0..INCREMENTS {
                let increment = increment_existing(store.as_ref(), &scope, "counter").await;
                won.push((increment.record.revision, increment.value));
            }
            won
        }));
    }
    let mut revisions = vec![initial.revision];
    let mut values = Vec::new();
    for task in tasks {
        for (revision, value) in task.await.expect("an increment task panicked") {
            revisions.push(revision);
            values.push(value);
        }
    }
    assert_distinct(&revisions, "compare-and-set across two instances");
    values.sort_unstable();
    assert_eq!(
        values,
        (1..=TASKS * INCREMENTS).collect::<Vec<_>>(),
        "each counter value must be won exactly once: two instances both won the same revision"
    );
    for (name, store) in [("store", h.shared_store()), ("replica", h.replica())] {
        assert_eq!(
            get(store.as_ref(), &scope, "counter").await.map(|r| r.content),
            Some((TASKS * INCREMENTS).to_string()),
            "the {name} must read the exact total"
        );
    }
}

/// 16 tasks split over the store and its replica racing `create_only` on each of four keys:
/// exactly one wins per key, and both instances read the winner's record.
pub async fn replicas_create_only_has_one_winner_per_key(h: Harness) {
    const KEYS: usize = 4;
    let scope = h.scope("user-1");
    let mut tasks = Vec::new();
    for k in 0..KEYS {
        for t in 0..TASKS {
            let store = instance(&h, t);
            let scope = scope.clone();
            tasks.push(tokio::spawn(async move {
                let key = format!("k{k}");
                let write = MemoryWrite::new(format!("task {t}")).create_only();
                (k, store.put(&scope, &key, write).await)
            }));
        }
    }
    let mut winners: Vec<Vec<MemoryRecord>> = vec![Vec::new(); KEYS];
    for task in tasks {
        match task.await.expect("a create task panicked") {
            (k, Ok(record)) => winners[k].push(record),
            (_, Err(MemoryError::Conflict { .. })) => {}
            (_, Err(other)) => panic!("a racing create_only failed with {other:?}"),
        }
    }
    let mut revisions = Vec::new();
    for (k, won) in winners.into_iter().enumerate() {
        assert_eq!(
            won.len(),
            1,
            "exactly one racing create_only may win key k{k}, {} did",
            won.len()
        );
        for (name, store) in [("store", h.shared_store()), ("replica", h.replica())] {
            assert_eq!(
                get(store.as_ref(), &scope, &format!("k{k}")).await.as_ref(),
                won.first(),
                "the {name} must read the winner's record of k{k}"
            );
        }
        revisions.extend(won.into_iter().map(|r| r.revision));
    }
    assert_distinct(&revisions, "create_only winners");
}

/// One write of the delete_user race: every field names the write, so a record mixing two
/// writes shows.
struct RaceWrite {
    id: usize,
    writer: usize,
    namespace: Option<&'static str>,
    key: String,
}

const RACE_NAMESPACES: [Option<&str>; 3] = [None, Some("a"), Some("b")];
const RACE_WRITERS: usize = 4;
const RACE_WRITES: usize = 24;
const RACE_USER: &str = "racer";

impl RaceWrite {
    fn new(writer: usize, index: usize) -> Self {
        Self {
            id: writer * 1_000 + index,
            writer,
            namespace: RACE_NAMESPACES[index % RACE_NAMESPACES.len()],
            key: format!("k{}", index % 4),
        }
    }

    fn from_id(id: usize) -> Self {
        Self::new(id / 1_000, id % 1_000)
    }

    fn scope(&self, h: &Harness) -> MemoryScope {
        match self.namespace {
            Some(ns) => h.scope_in(RACE_USER, ns),
            None => h.scope(RACE_USER),
        }
    }

    /// Whole seconds, so every provider stores the expiry exactly.
    fn expires_at(&self, base_seconds: i64) -> Timestamp {
        let seconds = base_seconds + i64::try_from(self.id).expect("a small id");
        Timestamp::from_micros(seconds * 1_000_000).expect("a valid expiry")
    }

    fn write(&self, base_seconds: i64) -> MemoryWrite {
        MemoryWrite::new(format!("write {}", self.id))
            .metadata(json!({"write": self.id, "pad": "p".repeat(self.id % 40)}))
            .expires_at(self.expires_at(base_seconds))
            .source(
                Source::default()
                    .session(format!("write {}", self.id))
                    .agent(format!("writer {}", self.writer)),
            )
    }

    /// Panics unless `record` is exactly this write, field by field.
    fn assert_whole(&self, h: &Harness, record: &MemoryRecord, base_seconds: i64) {
        let what = format!("record {:?} in {:?}", record.key, record.scope);
        assert_eq!(record.scope, self.scope(h), "{what}: written in another namespace");
        assert_eq!(record.key, self.key, "{what}: written under another key");
        assert_eq!(
            record.metadata.get("write"),
            Some(&json!(self.id)),
            "{what}: its metadata belongs to another write than its content: a write racing \
             delete_user must land whole or not at all"
        );
        assert_eq!(
            record.metadata.get("pad"),
            Some(&json!("p".repeat(self.id % 40))),
            "{what}: its metadata is partial"
        );
        assert_eq!(
            record.source,
            Source::default()
                .session(format!("write {}", self.id))
                .agent(format!("writer {}", self.writer)),
            "{what}: its source belongs to another write than its content"
        );
        assert_eq!(
            record.expires_at,
            Some(self.expires_at(base_seconds)),
            "{what}: its expiry belongs to another write than its content"
        );
    }
}

/// `delete_user` called over and over on one instance while tasks on both instances write
/// records (content, metadata, expiry and source) for the same user: every surviving record is
/// one whole write, `list_namespaces` agrees with what `list` returns, and a final
/// `delete_user` leaves nothing.
pub async fn delete_user_racing_writes_leaves_whole_records(h: Harness) {
    let day = Duration::from_secs(86_400);
    let base_seconds = h.now().saturating_add(day).as_micros() / 1_000_000;
    let done = Arc::new(AtomicBool::new(false));

    let deleter = {
        let store = h.replica();
        let app = h.app().to_owned();
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            let mut calls = 0usize;
            loop {
                let finished = done.load(Ordering::Acquire);
                store
                    .delete_user(&app, RACE_USER)
                    .await
                    .unwrap_or_else(|e| panic!("delete_user racing writes failed: {e:?}"));
                calls += 1;
                if finished && calls >= 3 {
                    return calls;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let mut writers = Vec::new();
    for w in 0..RACE_WRITERS {
        let store = instance(&h, w);
        let scopes: Vec<MemoryScope> =
            (0..RACE_WRITES).map(|i| RaceWrite::new(w, i).scope(&h)).collect();
        writers.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for (i, scope) in scopes.iter().enumerate() {
                let write = RaceWrite::new(w, i);
                store
                    .put(scope, &write.key, write.write(base_seconds))
                    .await
                    .unwrap_or_else(|e| panic!("a write racing delete_user failed: {e:?}"));
                acknowledged.push(write.id);
                tokio::task::yield_now().await;
            }
            acknowledged
        }));
    }
    let mut acknowledged = BTreeSet::new();
    for writer in writers {
        acknowledged.extend(writer.await.expect("a writer task panicked"));
    }
    done.store(true, Ordering::Release);
    let calls = deleter.await.expect("the delete_user task panicked");
    assert!(calls >= 3, "delete_user ran {calls} times");

    let listed_namespaces = namespaces_all(h.store(), h.app(), RACE_USER, 100).await;
    let mut survivors = 0u64;
    for namespace in RACE_NAMESPACES {
        let scope = match namespace {
            Some(ns) => h.scope_in(RACE_USER, ns),
            None => h.scope(RACE_USER),
        };
        let records = list_all(h.store(), &scope, 100).await;
        assert_eq!(
            listed_namespaces.contains(&namespace.map(str::to_owned)),
            !records.is_empty(),
            "list_namespaces must list {namespace:?} exactly when list finds records there \
             (it listed {listed_namespaces:?}; list found {} records)",
            records.len()
        );
        for record in &records {
            let id: usize = record
                .content
                .strip_prefix("write ")
                .and_then(|id| id.parse().ok())
                .unwrap_or_else(|| panic!("a surviving record has foreign content {record:?}"));
            assert!(acknowledged.contains(&id), "record {id} was never written");
            RaceWrite::from_id(id).assert_whole(&h, record, base_seconds);
            survivors += 1;
        }
    }
    assert!(
        listed_namespaces.iter().all(|ns| RACE_NAMESPACES.contains(&ns.as_deref())),
        "list_namespaces lists a namespace nobody wrote: {listed_namespaces:?}"
    );
    assert_eq!(
        h.store().delete_user(h.app(), RACE_USER).await.expect("the final delete_user"),
        survivors,
        "the final delete_user must erase exactly the surviving records"
    );
    assert!(
        namespaces_all(h.store(), h.app(), RACE_USER, 100).await.is_empty(),
        "after the final delete_user no namespace is left"
    );
    for namespace in RACE_NAMESPACES {
        let scope = match namespace {
            Some(ns) => h.scope_in(RACE_USER, ns),
            None => h.scope(RACE_USER),
        };
        assert!(
            list_all(h.replica().as_ref(), &scope, 100).await.is_empty(),
            "after the final delete_user the replica lists nothing in {namespace:?}"
        );
    }
}
