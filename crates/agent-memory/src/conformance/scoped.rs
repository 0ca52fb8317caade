//! [`ScopedMemory`](crate::ScopedMemory) over the store under test: bound scope, sibling
//! namespaces, and the bound source.

use super::support::get;
use crate::conformance::Harness;
use crate::page::PageRequest;
use crate::record::Source;
use crate::scoped::ScopedMemory;
use crate::write::MemoryWrite;

/// A `ScopedMemory` reads and writes only its scope; `namespace()` siblings are isolated.
pub async fn scoped_memory_namespaces_are_isolated(h: Harness) {
    let memory = ScopedMemory::new(h.shared_store(), h.scope("user-1"));
    let prefs = memory.namespace("prefs").expect("a valid namespace");
    let other_user = ScopedMemory::new(h.shared_store(), h.scope("user-2"));
    memory.put("k", "default namespace").await.expect("put");
    prefs.put("k", "prefs namespace").await.expect("put");
    other_user.put("k", "another user").await.expect("put");

    assert_eq!(
        memory.get("k").await.expect("get").map(|r| r.content).as_deref(),
        Some("default namespace")
    );
    assert_eq!(
        prefs.get("k").await.expect("get").map(|r| r.content).as_deref(),
        Some("prefs namespace")
    );
    assert_eq!(prefs.scope(), &h.scope_in("user-1", "prefs"), "namespace() keeps app and user");
    assert_eq!(memory.list(PageRequest::default()).await.expect("list").items.len(), 1);
    assert_eq!(
        prefs.search("namespace", PageRequest::default()).await.expect("search").items[0].content,
        "prefs namespace",
        "search through a sibling sees only that namespace"
    );
    assert!(prefs.delete("k", None).await.expect("delete"));
    assert!(
        memory.get("k").await.expect("get").is_some(),
        "deleting in a sibling keeps the default"
    );
    assert!(other_user.get("k").await.expect("get").is_some(), "another user keeps its record");
}

/// The bound source is recorded on writes that carry none; a write's own source wins.
pub async fn scoped_memory_applies_its_source(h: Harness) {
    let bound = Source::default().session("s-1").agent("assistant");
    let memory = ScopedMemory::new(h.shared_store(), h.scope("user-1")).with_source(bound.clone());
    let written = memory.put("plain", "no source of its own").await.expect("put");
    assert_eq!(written.source, bound, "the bound source must be applied");
    assert_eq!(
        get(h.store(), &h.scope("user-1"), "plain").await.map(|r| r.source),
        Some(bound.clone())
    );

    let own = Source::default().invocation("i-9");
    let written =
        memory.put("own", MemoryWrite::new("own source").source(own.clone())).await.expect("put");
    assert_eq!(written.source, own, "a write's own source must not be replaced");

    let sibling = memory.namespace("notes").expect("a valid namespace");
    assert_eq!(sibling.source(), &bound, "namespace() keeps the bound source");
    assert_eq!(sibling.put("k", "x").await.expect("put").source, bound);
}
