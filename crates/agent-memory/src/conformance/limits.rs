//! Limits, checked through the store at and just past each boundary: an `Invalid` error names
//! the right field, and the store is unchanged afterwards.

use serde_json::{json, Value};

use super::support::{expect_invalid, get, list_all, namespaces_all, put, put_every_field};
use crate::conformance::Harness;
use crate::error::Result;
use crate::page::PageRequest;
use crate::record::{MemoryRecord, Source};
use crate::scope::MemoryScope;
use crate::validation::{
    MAX_CONTENT_BYTES, MAX_ID_BYTES, MAX_KEY_BYTES, MAX_METADATA_DEPTH, MAX_METADATA_SOURCE_BYTES,
};
use crate::write::MemoryWrite;

/// A scope holding a record at "existing", and the scope's records as they were then: a case
/// tries writes against it that must be refused, then checks that nothing changed.
struct Guarded<'h> {
    h: &'h Harness,
    scope: MemoryScope,
    before: Vec<MemoryRecord>,
}

impl<'h> Guarded<'h> {
    /// Puts a record at "existing" in `user`'s scope and notes the scope's records.
    async fn new(h: &'h Harness, user: &str) -> Self {
        let scope = h.scope(user);
        put(h.store(), &scope, "existing", "kept").await;
        let before = list_all(h.store(), &scope, 100).await;
        Self { h, scope, before }
    }

    /// Puts `write` at "new" and over "existing"; both must be `Invalid` naming `field`.
    async fn reject(&self, write: MemoryWrite, field: &str, what: &str) {
        self.reject_at("new", write, field, what).await;
    }

    /// Puts `write` at `key`, and (unless the key itself is at fault) over "existing"; both
    /// must be `Invalid` naming `field`.
    async fn reject_at(&self, key: &str, write: MemoryWrite, field: &str, what: &str) {
        let store = self.h.store();
        expect_invalid(store.put(&self.scope, key, write.clone()).await, field, what);
        if field != "key" {
            let replacing = store.put(&self.scope, "existing", write).await;
            expect_invalid(replacing, field, &format!("{what} (replacing)"));
        }
    }

    /// Panics unless put, get and delete each refuse `key` as `Invalid` naming `key`, and the
    /// put changes nothing; `what` names the key in failures.
    async fn refuse_key(&self, key: &str, what: &str) {
        self.reject_at(key, MemoryWrite::new("x"), "key", &format!("put with {what}")).await;
        let store = self.h.store();
        expect_invalid(store.get(&self.scope, key).await, "key", &format!("get with {what}"));
        let delete = store.delete(&self.scope, key, None).await;
        expect_invalid(delete, "key", &format!("delete with {what}"));
    }

    /// Panics unless the scope still holds exactly its records from before, and no namespace
    /// but its own; `what` names the case.
    async fn assert_unchanged(&self, what: &str) {
        let (store, scope) = (self.h.store(), &self.scope);
        assert_eq!(
            list_all(store, scope, 100).await,
            self.before,
            "{what}: a rejected write must change nothing stored"
        );
        assert_eq!(
            namespaces_all(store, scope.application_id(), scope.user_id(), 100).await,
            vec![scope.namespace().map(str::to_owned)],
            "{what}: a rejected write must not leave a namespace behind"
        );
    }
}

/// Keys are 1..=256 UTF-8 bytes: 256 bytes of multi-byte characters work, 257 fail.
pub async fn key_length_limit_counts_bytes(h: Harness) {
    let guarded = Guarded::new(&h, "user-1").await;
    let scope = &guarded.scope;
    let four = "𝄞".repeat(MAX_KEY_BYTES / 4);
    let two = "é".repeat(MAX_KEY_BYTES / 2);
    let three = format!("{}a", "中".repeat(MAX_KEY_BYTES / 3));
    let ascii = "k".repeat(MAX_KEY_BYTES);
    for key in [&four, &two, &three, &ascii] {
        assert_eq!(key.len(), MAX_KEY_BYTES);
        let written = put(h.store(), scope, key, "at the limit").await;
        assert_eq!(&written.key, key, "a 256-byte key must round trip");
        assert!(get(h.store(), scope, key).await.is_some(), "a 256-byte key must read back");
        assert!(
            h.store().delete(scope, key, None).await.expect("delete"),
            "a 256-byte key deletes"
        );
    }
    for key in [format!("{four}a"), format!("{two}é"), "k".repeat(MAX_KEY_BYTES + 1)] {
        let what = format!("a key of {} bytes", key.len());
        guarded.refuse_key(&key, &what).await;
    }
    guarded.assert_unchanged("over-long keys").await;
}

/// An empty key is `Invalid` for put, get and delete.
pub async fn empty_key_is_invalid(h: Harness) {
    let guarded = Guarded::new(&h, "user-1").await;
    guarded.refuse_key("", "an empty key").await;
    guarded.assert_unchanged("empty key").await;
}

/// Control characters (`\n`, `\t`, `\r`, ESC, DEL, NEL) and NUL in a key are `Invalid`.
pub async fn control_characters_in_keys_are_invalid(h: Harness) {
    let guarded = Guarded::new(&h, "user-1").await;
    for c in ['\n', '\t', '\r', '\u{1b}', '\u{7f}', '\u{85}', '\u{9f}', '\0'] {
        let key = format!("a{c}b");
        let what = format!("a key holding {c:?}");
        guarded.refuse_key(&key, &what).await;
    }
    guarded.assert_unchanged("control characters in keys").await;
}

/// Ids are 1..=128 bytes without control characters; the limit holds for scopes, source
/// fields, `delete_user` and `list_namespaces`.
pub async fn id_limits_are_enforced(h: Harness) {
    let at_limit = "é".repeat(MAX_ID_BYTES / 2);
    let app = format!("{}{}", h.app(), "a".repeat(MAX_ID_BYTES - h.app().len()));
    assert_eq!(app.len(), MAX_ID_BYTES);
    let scope = MemoryScope::new(app.clone(), at_limit.clone())
        .and_then(|s| s.with_namespace(at_limit.clone()))
        .expect("128-byte ids are valid");
    let written = h
        .store()
        .put(&scope, "k", MemoryWrite::new("x").source(Source::default().session(at_limit.clone())))
        .await
        .expect("128-byte ids must be stored");
    assert_eq!(get(h.store(), &scope, "k").await, Some(written), "128-byte ids must round trip");
    assert_eq!(namespaces_all(h.store(), &app, &at_limit, 10).await, vec![Some(at_limit.clone())]);
    assert_eq!(h.store().delete_user(&app, &at_limit).await.expect("delete_user"), 1);

    let over = format!("{at_limit}a");
    for (field, result) in [
        ("application_id", MemoryScope::new(over.clone(), "u").map(drop)),
        ("user_id", MemoryScope::new(h.app(), over.clone()).map(drop)),
        ("namespace", h.scope("u").with_namespace(over.clone()).map(drop)),
        ("namespace", h.scope("u").with_namespace("").map(drop)),
        ("user_id", MemoryScope::new(h.app(), "a\u{85}b").map(drop)),
        ("namespace", h.scope("u").with_namespace("a\u{7f}").map(drop)),
    ] {
        expect_invalid(result, field, "building a scope with a bad id");
    }
    let guarded = Guarded::new(&h, "user-1").await;
    for (source, field) in [
        (Source::default().session(over.clone()), "source.session_id"),
        (Source::default().invocation(""), "source.invocation_id"),
        (Source::default().agent("a\nb"), "source.agent"),
        (Source::default().session("a\u{7f}"), "source.session_id"),
    ] {
        let write = MemoryWrite::new("x").source(source);
        guarded.reject(write, field, "put with a bad source field").await;
    }
    expect_invalid(
        h.store().list_namespaces(h.app(), &over, PageRequest::default()).await,
        "user_id",
        "list_namespaces with a 129-byte user id",
    );
    expect_invalid(
        h.store().delete_user(&over, "user-1").await,
        "application_id",
        "delete_user with a 129-byte application id",
    );
    guarded.assert_unchanged("bad ids").await;
}

/// Content may be exactly 65,536 bytes; 65,537 is `Invalid`.
pub async fn content_limit_is_64_kib(h: Harness) {
    let guarded = Guarded::new(&h, "user-1").await;
    let scope = &guarded.scope;
    let largest = format!("{}{}", "é".repeat(MAX_CONTENT_BYTES / 2 - 2), "😀");
    assert_eq!(largest.len(), MAX_CONTENT_BYTES);
    let written = put(h.store(), scope, "large", &largest).await;
    assert_eq!(written.content, largest);
    assert_eq!(
        get(h.store(), scope, "large").await.map(|r| r.content.len()),
        Some(MAX_CONTENT_BYTES),
        "a 65,536-byte content must be stored whole"
    );
    assert!(h.store().delete(scope, "large", None).await.expect("delete"));
    for content in [format!("{largest}a"), "a".repeat(MAX_CONTENT_BYTES + 1)] {
        let write = MemoryWrite::new(content);
        guarded.reject(write, "content", "put with 65,537 bytes of content").await;
    }
    guarded.assert_unchanged("oversize content").await;
}

/// Metadata and source together may be exactly 16,384 bytes of compact JSON; one more is
/// `Invalid` naming `metadata`.
pub async fn metadata_and_source_share_16_kib(h: Harness) {
    let guarded = Guarded::new(&h, "user-1").await;
    let scope = &guarded.scope;
    let source = Source::default().agent("agent-ü").session("s-1");
    let source_len = serde_json::to_vec(&source).expect("a source serializes").len();
    // {"pad":"…"} costs 10 bytes around the string; "ü" costs two bytes, so pad with ASCII.
    let pad_len = MAX_METADATA_SOURCE_BYTES - source_len - 10;
    let metadata = json!({ "pad": "x".repeat(pad_len) });
    assert_eq!(
        serde_json::to_vec(&metadata).expect("serializes").len() + source_len,
        MAX_METADATA_SOURCE_BYTES
    );
    let written = h
        .store()
        .put(
            scope,
            "at-limit",
            MemoryWrite::new("v").metadata(metadata.clone()).source(source.clone()),
        )
        .await
        .expect("metadata and source of exactly 16,384 bytes must be accepted");
    assert_eq!(Value::Object(written.metadata), metadata);
    assert_eq!(get(h.store(), scope, "at-limit").await.map(|r| r.source), Some(source.clone()));
    assert!(h.store().delete(scope, "at-limit", None).await.expect("delete"));

    let over = json!({ "pad": "x".repeat(pad_len + 1) });
    let over = MemoryWrite::new("v").metadata(over).source(source.clone());
    guarded.reject(over, "metadata", "metadata and source of 16,385 bytes").await;
    // The same budget, spent on the source instead.
    let longer = MemoryWrite::new("v").metadata(metadata).source(source.invocation("i"));
    guarded.reject(longer, "metadata", "a source that pushes the pair past 16,384 bytes").await;
    guarded.assert_unchanged("oversize metadata").await;
}

/// Metadata must be a JSON object: arrays, strings, numbers, booleans and null are `Invalid`.
pub async fn metadata_must_be_an_object(h: Harness) {
    let guarded = Guarded::new(&h, "user-1").await;
    for value in [json!([1, 2]), json!("text"), json!(null), json!(3), json!(true), json!([])] {
        let what = format!("put with metadata {value}");
        guarded.reject(MemoryWrite::new("v").metadata(value), "metadata", &what).await;
    }
    guarded.assert_unchanged("non-object metadata").await;
}

/// Metadata may nest 32 levels deep (the object is level 1); one more level is `Invalid`.
pub async fn metadata_depth_is_bounded(h: Harness) {
    let guarded = Guarded::new(&h, "user-1").await;
    let scope = &guarded.scope;
    let nest = |levels: usize| {
        let mut value = json!(1);
        for _ in 0..levels {
            value = json!([value]);
        }
        json!({ "deep": value })
    };
    let deepest = nest(MAX_METADATA_DEPTH - 1);
    h.store()
        .put(scope, "deep", MemoryWrite::new("v").metadata(deepest.clone()))
        .await
        .expect("metadata nested 32 levels deep must be accepted");
    assert_eq!(
        get(h.store(), scope, "deep").await.map(|r| Value::Object(r.metadata)),
        Some(deepest)
    );
    assert!(h.store().delete(scope, "deep", None).await.expect("delete"));
    let deeper = MemoryWrite::new("v").metadata(nest(MAX_METADATA_DEPTH));
    guarded.reject(deeper, "metadata", "metadata nested 33 levels deep").await;
    guarded.assert_unchanged("deep metadata").await;
}

/// NUL is `Invalid` in the key, content, metadata strings, metadata names, every source field,
/// ids and the search query, and never a storage error.
pub async fn nul_is_invalid_everywhere(h: Harness) {
    let guarded = Guarded::new(&h, "user-1").await;
    let scope = &guarded.scope;
    let cases: Vec<(&str, MemoryWrite, &str, &str)> = vec![
        ("a\0b", MemoryWrite::new("x"), "key", "NUL in the key"),
        ("new", MemoryWrite::new("a\0b"), "content", "NUL in the content"),
        ("new", MemoryWrite::new("\0"), "content", "content that is just NUL"),
        (
            "new",
            MemoryWrite::new("x").metadata(json!({"k": "a\0b"})),
            "metadata",
            "NUL in a metadata string",
        ),
        (
            "new",
            MemoryWrite::new("x").metadata(json!({"a\0b": 1})),
            "metadata",
            "NUL in a metadata name",
        ),
        (
            "new",
            MemoryWrite::new("x").metadata(json!({"k": [{"deep": ["\0"]}]})),
            "metadata",
            "NUL deep in metadata",
        ),
        (
            "new",
            MemoryWrite::new("x").source(Source::default().session("a\0")),
            "source.session_id",
            "NUL in source.session_id",
        ),
        (
            "new",
            MemoryWrite::new("x").source(Source::default().invocation("a\0")),
            "source.invocation_id",
            "NUL in source.invocation_id",
        ),
        (
            "new",
            MemoryWrite::new("x").source(Source::default().agent("\0")),
            "source.agent",
            "NUL in source.agent",
        ),
    ];
    for (key, write, field, what) in cases {
        guarded.reject_at(key, write, field, what).await;
    }
    expect_invalid(h.store().get(scope, "a\0b").await, "key", "get with NUL in the key");
    expect_invalid(
        h.store().delete(scope, "a\0b", None).await,
        "key",
        "delete with NUL in the key",
    );
    expect_invalid(
        h.store().search(scope, "\0", PageRequest::default()).await,
        "query",
        "search for NUL",
    );
    let ids: [(&str, Result<MemoryScope>); 3] = [
        ("application_id", MemoryScope::new("a\0", "u")),
        ("user_id", MemoryScope::new(h.app(), "u\0")),
        ("namespace", h.scope("u").with_namespace("\0")),
    ];
    for (field, result) in ids {
        expect_invalid(result, field, "an id holding NUL");
    }
    guarded.assert_unchanged("NUL").await;
}

/// Every `Invalid` error names its field, and a rejected replace leaves the live record exactly
/// as it was (revision and timestamps included).
pub async fn rejected_replace_leaves_record_unchanged(h: Harness) {
    let scope = h.scope("user-1");
    let existing = put_every_field(h.store(), &scope, "k").await;
    let rev = existing.revision.clone();
    let attempts: Vec<(MemoryWrite, &str)> = vec![
        (MemoryWrite::new("a".repeat(MAX_CONTENT_BYTES + 1)), "content"),
        (MemoryWrite::new("x").metadata(json!([])), "metadata"),
        (MemoryWrite::new("x").expires_at(crate::time::Timestamp::EPOCH), "expires_at"),
        (MemoryWrite::new("x").expected_revision(rev.clone()).metadata(json!("no")), "metadata"),
        (MemoryWrite::new("x\0").create_only(), "content"),
        (MemoryWrite::new("x").source(Source::default().agent("")), "source.agent"),
    ];
    for (write, field) in attempts {
        expect_invalid(h.store().put(&scope, "k", write).await, field, "an invalid replace");
        assert_eq!(
            get(h.store(), &scope, "k").await.as_ref(),
            Some(&existing),
            "a replace rejected for `{field}` must leave the record exactly as it was"
        );
    }
    let next = h
        .store()
        .put(&scope, "k", MemoryWrite::new("next").expected_revision(rev))
        .await
        .expect("the original revision is still live after rejected writes");
    assert_ne!(next.revision, existing.revision);
}
