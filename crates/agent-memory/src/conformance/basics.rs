//! Basic reads and writes: what `put` stores, what `get` returns, and how a replace behaves.

use std::time::Duration;

use serde_json::json;

use super::support::{assert_distinct, get, list_all, put, AWKWARD_TEXT};
use crate::conformance::Harness;
use crate::record::Source;
use crate::write::MemoryWrite;

/// A written record reads back with the same content, metadata, revision and timestamps.
pub async fn put_then_get_round_trips(h: Harness) {
    let scope = h.scope("user-1");
    let written = h
        .store()
        .put(&scope, "k", MemoryWrite::new("hello").metadata(json!({"a": 1})))
        .await
        .expect("put");
    assert_eq!(written.scope, scope, "put must return the record's scope");
    assert_eq!(written.key, "k", "put must return the record's key");
    assert_eq!(written.content, "hello", "put must return the written content");
    assert_eq!(written.metadata.get("a"), Some(&json!(1)), "put must return the written metadata");
    assert_eq!(written.expires_at, None, "a write without expiry must have expires_at None");
    assert!(written.source.is_empty(), "a write without source must have an empty source");
    assert_eq!(written.created_at, written.updated_at, "a new record has created_at == updated_at");
    let read = get(h.store(), &scope, "k").await.expect("get must find the record just written");
    assert_eq!(read, written, "get must return exactly what put returned");
}

/// `get` of a key that was never written returns `None`, not an error.
pub async fn get_missing_key_returns_none(h: Harness) {
    let scope = h.scope("user-1");
    assert!(
        get(h.store(), &scope, "never-written").await.is_none(),
        "an unknown key reads as None"
    );
    put(h.store(), &scope, "other", "x").await;
    assert!(
        get(h.store(), &scope, "never-written").await.is_none(),
        "an unknown key reads as None even when the scope holds other records"
    );
}

/// A new record gets `created_at == updated_at == now` (by the store's clock).
pub async fn new_record_is_stamped_now(h: Harness) {
    let scope = h.scope("user-1");
    let before = h.now();
    let record = put(h.store(), &scope, "k", "v").await;
    let after = h.now();
    assert_eq!(record.created_at, record.updated_at, "a new record has created_at == updated_at");
    if h.has_manual_clock() {
        assert_eq!(record.created_at, before, "created_at must be the injected clock's now");
    } else {
        // The datastore keeps its own time; allow for clock skew but catch unit mistakes.
        let slack = Duration::from_secs(60);
        assert!(
            record.created_at >= before.saturating_sub(slack)
                && record.created_at <= after.saturating_add(slack),
            "created_at {:?} is not near now ({before:?}..{after:?}): check the timestamp unit",
            record.created_at
        );
    }
}

/// Replacing a live record keeps `created_at` and moves `updated_at` forward.
pub async fn replace_keeps_created_at_and_moves_updated_at(h: Harness) {
    let scope = h.scope("user-1");
    let first = put(h.store(), &scope, "k", "one").await;
    h.advance(Duration::from_millis(5)).await;
    let second = put(h.store(), &scope, "k", "two").await;
    assert_eq!(second.created_at, first.created_at, "a replace must keep created_at");
    assert!(
        second.updated_at > first.updated_at,
        "a replace must move updated_at forward: {:?} then {:?}",
        first.updated_at,
        second.updated_at
    );
    if h.has_manual_clock() {
        assert_eq!(second.updated_at, h.now(), "updated_at must be the injected clock's now");
    }
    let read = get(h.store(), &scope, "k").await.expect("the record is live");
    assert_eq!(read, second, "get must return the replacing version");
}

/// A replace overwrites content, metadata, expiry and source entirely: nothing is merged.
pub async fn replace_overwrites_every_field(h: Harness) {
    let scope = h.scope("user-1");
    let first = MemoryWrite::new("first content")
        .metadata(json!({"a": 1, "b": {"x": true}}))
        .expires_at(h.now().saturating_add(Duration::from_secs(3600)))
        .source(Source::default().session("s-1").invocation("i-1").agent("agent-1"));
    h.store().put(&scope, "k", first).await.expect("first put");

    let second = MemoryWrite::new("second")
        .metadata(json!({"c": [1, 2]}))
        .source(Source::default().agent("agent-2"));
    let written = h.store().put(&scope, "k", second).await.expect("second put");
    let read = get(h.store(), &scope, "k").await.expect("the record is live");
    assert_eq!(read, written, "get must return the replacing version");
    assert_eq!(read.content, "second", "content must be replaced");
    assert_eq!(
        serde_json::Value::Object(read.metadata.clone()),
        json!({"c": [1, 2]}),
        "metadata must be replaced, not merged with the old object"
    );
    assert_eq!(read.expires_at, None, "replacing without an expiry must clear the old expiry");
    assert_eq!(
        read.source,
        Source::default().agent("agent-2"),
        "source must be replaced as a whole, not merged field by field"
    );

    let third =
        MemoryWrite::new("third").expires_at(h.now().saturating_add(Duration::from_secs(60)));
    let written = h.store().put(&scope, "k", third).await.expect("third put");
    let read = get(h.store(), &scope, "k").await.expect("the record is live");
    assert_eq!(read.expires_at, written.expires_at, "a replace may set a new expiry");
    assert!(read.expires_at.is_some(), "a replace with an expiry must store it");
    assert!(read.metadata.is_empty(), "a replace with default metadata must store an empty object");
    assert!(read.source.is_empty(), "a replace with no source must clear the source");
}

/// Every write gets a revision the key never had, and `get` reports the latest one.
pub async fn every_write_gets_a_new_revision(h: Harness) {
    let scope = h.scope("user-1");
    let mut revisions = Vec::new();
    for i in 0..6 {
        let record = put(h.store(), &scope, "k", &format!("v{i}")).await;
        let read = get(h.store(), &scope, "k").await.expect("the record is live");
        assert_eq!(read.revision, record.revision, "get must report the revision put returned");
        revisions.push(record.revision);
    }
    // Writing identical content must still produce a new revision.
    revisions.push(put(h.store(), &scope, "k", "v5").await.revision);
    assert_distinct(&revisions, "successive writes of one key");
}

/// Records handed out are detached copies: changing them changes nothing stored.
pub async fn returned_records_are_detached(h: Harness) {
    let scope = h.scope("user-1");
    let mut written = h
        .store()
        .put(&scope, "k", MemoryWrite::new("original").metadata(json!({"a": 1})))
        .await
        .expect("put");
    let snapshot = written.clone();
    written.content.push_str(" changed");
    written.metadata.insert("b".into(), json!(2));
    written.key = "other".into();

    let mut read = get(h.store(), &scope, "k").await.expect("the record is live");
    assert_eq!(read, snapshot, "changing the record put returned must not change what is stored");
    read.content.clear();
    read.metadata.clear();

    let mut listed = list_all(h.store(), &scope, 10).await;
    assert_eq!(listed, vec![snapshot.clone()], "list must show the stored record unchanged");
    listed[0].content = "mutated".into();

    let again = get(h.store(), &scope, "k").await.expect("the record is live");
    assert_eq!(again, snapshot, "changing records from get or list must not change what is stored");
    assert!(get(h.store(), &scope, "other").await.is_none(), "renaming a copy must write nothing");
}

/// Content with emoji, combining marks, right-to-left text, `\r\n` and tabs reads back byte
/// for byte.
pub async fn unicode_content_round_trips(h: Harness) {
    let scope = h.scope("user-1");
    let samples = [
        "emoji 😀👩‍👩‍👧‍👦🏳️‍🌈 and a flag 🇩🇪",
        "combining: e\u{301} vs \u{e9}, a\u{30a}\u{323}",
        "right to left: \u{5e9}\u{5dc}\u{5d5}\u{5dd} \u{627}\u{644}\u{639}\u{631}\u{628}\u{64a}\u{629} \u{202e}mixed",
        "line one\r\nline two\nline three\rtab\there\u{b}vt\u{c}ff",
        "  leading and trailing spaces  ",
        "quotes ' \" ` and backslashes \\ \\\\ and %_*?[]{}",
        "zero width\u{200b}joiner\u{200d}and BOM \u{feff}",
        "𝄞 beyond the BMP 𠀋 \u{10ffff}",
        "",
    ];
    for (i, content) in samples.iter().enumerate() {
        let key = format!("k{i}");
        let written = put(h.store(), &scope, &key, content).await;
        assert_eq!(
            written.content.as_bytes(),
            content.as_bytes(),
            "put must return content {i} as is"
        );
        let read = get(h.store(), &scope, &key).await.expect("the record is live");
        assert_eq!(
            read.content.as_bytes(),
            content.as_bytes(),
            "content sample {i} ({content:?}) must read back byte for byte"
        );
    }
}

/// Metadata with nested objects, arrays, numbers, booleans, null and Unicode names reads back
/// as the same JSON value.
pub async fn metadata_round_trips(h: Harness) {
    let scope = h.scope("user-1");
    let metadata = json!({
        "string": "text with \"quotes\" and \\ and \n newline",
        "int": 42,
        "negative": -7,
        "zero": 0,
        "float": 1.5,
        "big": 9_007_199_254_740_991_u64,
        "true": true,
        "false": false,
        "null": null,
        "array": [1, "two", [3], {"four": 4}, null, false],
        "empty_object": {},
        "empty_array": [],
        "nested": {"a": {"b": {"c": ["deep"]}}},
        "ключ": "значение",
        "中文键": "值",
        "emoji 😀": "🎉",
        "": "empty name",
        "a.b": "dotted name",
        "$where": "dollar name",
    });
    let written = h
        .store()
        .put(&scope, "k", MemoryWrite::new("v").metadata(metadata.clone()))
        .await
        .expect("put");
    assert_eq!(
        serde_json::Value::Object(written.metadata),
        metadata,
        "put must return the metadata as written"
    );
    let read = get(h.store(), &scope, "k").await.expect("the record is live");
    assert_eq!(
        serde_json::Value::Object(read.metadata),
        metadata,
        "metadata must read back as the same JSON value"
    );
}

/// Every source field reads back as written, and unset fields stay unset.
pub async fn source_round_trips(h: Harness) {
    let scope = h.scope("user-1");
    let full =
        Source::default().session("session ü:1/{x}").invocation("run%_\\'\"").agent("agent 😀");
    let written = h
        .store()
        .put(&scope, "full", MemoryWrite::new("v").source(full.clone()))
        .await
        .expect("put");
    assert_eq!(written.source, full, "put must return the source as written");
    assert_eq!(
        get(h.store(), &scope, "full").await.expect("live").source,
        full,
        "source must read back field by field"
    );
    let partial = Source::default().invocation("only-invocation");
    h.store()
        .put(&scope, "partial", MemoryWrite::new("v").source(partial.clone()))
        .await
        .expect("put");
    assert_eq!(
        get(h.store(), &scope, "partial").await.expect("live").source,
        partial,
        "unset source fields must stay unset (None, not empty strings)"
    );
}

/// Keys are opaque text: separators, wildcards, quotes and non-ASCII work as ordinary keys.
pub async fn keys_are_opaque_text(h: Harness) {
    let scope = h.scope("user-1");
    for &key in AWKWARD_TEXT {
        put(h.store(), &scope, key, &format!("content of {key}")).await;
    }
    for &key in AWKWARD_TEXT {
        let read = get(h.store(), &scope, key)
            .await
            .unwrap_or_else(|| panic!("key {key:?} must read back"));
        assert_eq!(read.key, key, "the record must carry its key {key:?} unchanged");
        assert_eq!(
            read.content,
            format!("content of {key}"),
            "key {key:?} must hold its own record"
        );
    }
    let listed = list_all(h.store(), &scope, 100).await;
    assert_eq!(listed.len(), AWKWARD_TEXT.len(), "list must return each opaque key exactly once");
    for &key in AWKWARD_TEXT {
        assert!(
            h.store().delete(&scope, key, None).await.expect("delete"),
            "delete({key:?}) must find the live record"
        );
    }
    assert!(list_all(h.store(), &scope, 100).await.is_empty(), "every key was deleted");
}

/// `start` is idempotent: a second call succeeds and keeps the data.
pub async fn start_is_idempotent(h: Harness) {
    let scope = h.scope("user-1");
    let written = put(h.store(), &scope, "k", "v").await;
    h.store().start().await.expect("a second start() must succeed");
    assert_eq!(
        get(h.store(), &scope, "k").await,
        Some(written),
        "a second start() must not lose or change records"
    );
}
