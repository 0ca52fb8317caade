//! Basic reads and writes.

use crate::conformance::Harness;
use crate::write::MemoryWrite;

/// A written record reads back with the same content, metadata, revision and timestamps.
pub async fn put_then_get_round_trips(h: Harness) {
    let scope = h.scope("user-1");
    let written = h
        .store()
        .put(&scope, "k", MemoryWrite::new("hello").metadata(serde_json::json!({"a": 1})))
        .await
        .expect("put");
    assert_eq!(written.content, "hello");
    assert_eq!(written.created_at, written.updated_at);
    let read = h.store().get(&scope, "k").await.expect("get").expect("present");
    assert_eq!(read, written);
}
