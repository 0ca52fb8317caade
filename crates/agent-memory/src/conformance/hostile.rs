//! Hostile input: strings built to break a query, a script or a protocol frame, huge values,
//! and forged cursors. Each is either stored and returned byte for byte, or rejected as
//! `Invalid`; either way nothing else in the store changes, which canary records in other
//! scopes prove.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::support::{
    byte_sorted, expect_invalid, get, keys, list_all, namespaces_all, put, put_every_field,
    search_all,
};
use crate::conformance::Harness;
use crate::error::MemoryError;
use crate::page::{Cursor, CursorKind, PageRequest};
use crate::provider::{key_cursor, namespace_cursor};
use crate::record::{MemoryRecord, Revision, Source};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::write::MemoryWrite;

/// Strings that would change a SQL statement, a Lua script, a Redis protocol frame, a key
/// pattern or a cluster hash tag if a provider spliced them in instead of binding them as
/// values, plus quotes, escapes, wildcards and direction marks. The ones holding control
/// characters are used only where control characters are allowed (content, metadata, queries).
const INJECTIONS: &[&str] = &[
    "'; DROP TABLE memories; --",
    "\" OR 1=1 --",
    "' OR '1'='1",
    "') OR ('1'='1",
    "1; DELETE FROM memories",
    "$1",
    "$2::text",
    "?",
    ":key",
    "%s",
    "\\x00",
    "\\0",
    "/* comment */",
    "-- comment",
    "]] redis.call('FLUSHALL') --[[",
    "')) redis.call('DEL', KEYS[1]) --",
    "\n*3\r\n$8\r\nFLUSHALL\r\n",
    "*1\r\n$8\r\nFLUSHALL\r\n",
    "{tag}",
    "{}",
    "}{",
    "KEYS *",
    "*",
    "%",
    "_",
    "%_%",
    "[a-z]",
    "\\",
    "\\\\",
    "\\%",
    "'",
    "\"",
    "`",
    "''",
    "😀",
    "\u{202e}txet\u{202c}",
    "\u{200f}rtl\u{200e}",
    "\u{5e9}\u{5dc}\u{5d5}\u{5dd}",
    "\u{feff}bom",
    "zero\u{200b}width",
    "e\u{301}",
    "../../etc/passwd",
    "${jndi:ldap://x}",
    "<script>alert(1)</script>",
    "null",
    "{\"a\":1}",
    " ",
    "\t",
];

/// True when `s` may be a key or an id (no control characters).
fn id_safe(s: &str) -> bool {
    !s.chars().any(char::is_control)
}

/// The injection strings that may be keys and ids.
fn id_injections() -> impl Iterator<Item = &'static str> {
    INJECTIONS.iter().copied().filter(|s| id_safe(s))
}

/// Every control character a content may hold: C0 but NUL, DEL, and C1 samples.
fn controls() -> String {
    (1u8..=0x1f).map(char::from).chain(['\u{7f}', '\u{85}', '\u{9f}']).collect()
}

/// Records in scopes no case touches on purpose: another user of this application (default and
/// a named namespace) and the same user id in another application. A provider that splices
/// input into a query, script or key pattern changes or erases them.
struct Canaries {
    records: Vec<MemoryRecord>,
    other_app: String,
}

impl Canaries {
    async fn plant(h: &Harness) -> Self {
        let other_app = format!("{}-canary", h.app());
        let scopes = [
            h.scope("canary"),
            h.scope_in("canary", "ns"),
            MemoryScope::new(other_app.clone(), "user-1").expect("valid ids"),
        ];
        let mut records = Vec::new();
        for scope in scopes {
            let write = MemoryWrite::new("canary content")
                .metadata(json!({"canary": true}))
                .source(Source::default().agent("canary"));
            records.push(h.store().put(&scope, "canary", write).await.expect("put a canary"));
        }
        Self { records, other_app }
    }

    async fn assert_intact(&self, h: &Harness, what: &str) {
        for record in &self.records {
            assert_eq!(
                get(h.store(), &record.scope, "canary").await.as_ref(),
                Some(record),
                "{what}: the canary in {:?} changed: input must be bound as values, never \
                 spliced into a query, script or key pattern",
                record.scope
            );
            assert_eq!(
                list_all(h.store(), &record.scope, 100).await,
                vec![record.clone()],
                "{what}: the canary scope {:?} gained or lost records",
                record.scope
            );
        }
        assert_eq!(
            namespaces_all(h.store(), h.app(), "canary", 100).await,
            vec![None, Some("ns".to_owned())],
            "{what}: the canary user's namespaces changed"
        );
        assert_eq!(
            namespaces_all(h.store(), &self.other_app, "user-1", 100).await,
            vec![None],
            "{what}: the other application's user changed"
        );
    }

    /// [`Self::assert_intact`], after checking that `user-1`, whom the case writes for, has
    /// exactly the namespaces `expected` (each once, in byte order): the case's input created
    /// no others.
    async fn assert_intact_beside(&self, h: &Harness, expected: &[Option<String>], what: &str) {
        assert_eq!(
            namespaces_all(h.store(), h.app(), "user-1", 100).await,
            expected,
            "{what}: list_namespaces of the case's user must return exactly its namespaces, \
             each once, in byte order"
        );
        self.assert_intact(h, what).await;
    }
}

/// A metadata object holding `s` as a name and as values, nested.
fn metadata_with(s: &str, i: usize) -> Value {
    let mut inner = Map::new();
    inner.insert(s.to_owned(), json!([s]));
    let mut map = Map::new();
    map.insert(s.to_owned(), Value::String(s.to_owned()));
    map.insert("list".to_owned(), json!([s, Value::Object(inner)]));
    map.insert("i".to_owned(), json!(i));
    Value::Object(map)
}

/// Injection strings, quotes, wildcards, direction marks and every allowed control character,
/// as keys, contents, metadata names and values and source fields, are stored and returned
/// byte for byte, listed in byte order, and change nothing else.
pub async fn injection_strings_round_trip_byte_for_byte(h: Harness) {
    let canaries = Canaries::plant(&h).await;
    let scope = h.scope("user-1");
    let controls = controls();
    let mut samples: Vec<(String, &str)> = INJECTIONS
        .iter()
        .enumerate()
        .map(|(i, s)| (if id_safe(s) { (*s).to_owned() } else { format!("sample-{i:02}") }, *s))
        .collect();
    samples.push(("controls".to_owned(), &controls));
    let mut written: BTreeMap<String, MemoryRecord> = BTreeMap::new();
    for (i, (key, text)) in samples.iter().enumerate() {
        let source = if id_safe(text) {
            Source::default().session(*text).invocation(*text).agent(*text)
        } else {
            Source::default().agent(format!("agent-{i}"))
        };
        let metadata = metadata_with(text, i);
        let write = MemoryWrite::new(*text).metadata(metadata.clone()).source(source.clone());
        let record = h
            .store()
            .put(&scope, key, write)
            .await
            .unwrap_or_else(|e| panic!("put of hostile sample {i} ({text:?}) failed: {e:?}"));
        assert_eq!(record.key.as_bytes(), key.as_bytes(), "put must return key {key:?} as is");
        assert_eq!(record.content.as_bytes(), text.as_bytes(), "put must return content {i} as is");
        assert_eq!(Value::Object(record.metadata.clone()), metadata, "put: metadata {i}");
        assert_eq!(record.source, source, "put must return source {i} as is");
        written.insert(key.clone(), record);
    }
    for (key, record) in &written {
        let read = get(h.store(), &scope, key)
            .await
            .unwrap_or_else(|| panic!("hostile key {key:?} must read back"));
        assert_eq!(read.key.as_bytes(), key.as_bytes(), "key {key:?} must read back byte for byte");
        assert_eq!(
            read.content.as_bytes(),
            record.content.as_bytes(),
            "the content under {key:?} must read back byte for byte"
        );
        assert_eq!(&read, record, "the record under {key:?} must read back exactly as written");
    }
    let expected_keys = byte_sorted(written.keys().map(String::as_str));
    for limit in [1, 7, 100] {
        let listed = list_all(h.store(), &scope, limit).await;
        assert_eq!(
            keys(&listed),
            expected_keys,
            "list(limit {limit}) must return every hostile key once, in byte order"
        );
        assert_eq!(
            listed,
            written.values().cloned().collect::<Vec<_>>(),
            "list(limit {limit}) must return every hostile record exactly as written"
        );
    }
    canaries.assert_intact_beside(&h, &[None], "after hostile writes").await;

    for key in written.keys() {
        assert!(
            h.store().delete(&scope, key, None).await.expect("delete"),
            "delete({key:?}) must find its record"
        );
        assert!(get(h.store(), &scope, key).await.is_none(), "{key:?} is gone after delete");
    }
    assert!(list_all(h.store(), &scope, 100).await.is_empty(), "every hostile key was deleted");
    canaries.assert_intact(&h, "after deleting hostile keys").await;
}

/// Injection strings and pattern characters as search queries match only content that
/// literally contains them, and change nothing.
pub async fn injection_strings_search_literally(h: Harness) {
    let canaries = Canaries::plant(&h).await;
    let scope = h.scope("user-1");
    let mut contents: Vec<String> = INJECTIONS.iter().map(|s| format!("<{s}>")).collect();
    contents.extend(
        ["plain text", "DROP TABLE", "1=1", "FLUSHALL", "redis.call", "txet", "x"]
            .map(str::to_owned),
    );
    contents.push(controls());
    for (i, content) in contents.iter().enumerate() {
        put(h.store(), &scope, &format!("c{i:02}"), content).await;
    }
    let before = list_all(h.store(), &scope, 100).await;
    let mut queries: Vec<String> = INJECTIONS.iter().map(|s| (*s).to_owned()).collect();
    queries.extend(["'", "--", "1=1", "\r\n", "\u{1}", "<", ">"].map(str::to_owned));
    for query in &queries {
        let expected: Vec<String> = contents
            .iter()
            .enumerate()
            .filter(|(_, c)| c.contains(query.as_str()))
            .map(|(i, _)| format!("c{i:02}"))
            .collect();
        let found = search_all(h.store(), &scope, query, 100).await;
        assert_eq!(
            keys(&found),
            expected.iter().map(String::as_str).collect::<Vec<_>>(),
            "search({query:?}) must match exactly the contents that literally contain it"
        );
    }
    let paged = search_all(h.store(), &scope, "'", 2).await;
    assert_eq!(
        keys(&paged),
        keys(&search_all(h.store(), &scope, "'", 100).await),
        "a hostile query pages to the same matches at limit 2"
    );
    assert_eq!(list_all(h.store(), &scope, 100).await, before, "searching must change nothing");
    canaries.assert_intact(&h, "after hostile searches").await;
}

/// Injection strings as application ids, user ids and namespaces: each scope sees only its own
/// record, and `delete_all` and `delete_user` with those ids erase exactly that scope or user.
pub async fn injection_strings_as_ids_stay_isolated(h: Harness) {
    let canaries = Canaries::plant(&h).await;
    let mut users = Vec::new();
    let mut namespaces = Vec::new();
    let mut apps = Vec::new();
    for s in id_injections() {
        users.push(h.scope(s));
        namespaces.push(h.scope_in("user-1", s));
        let app = format!("{}{s}", h.app());
        apps.push(MemoryScope::new(app, "user-1").expect("a valid application id"));
    }
    let all: Vec<&MemoryScope> = users.iter().chain(&namespaces).chain(&apps).collect();
    for (i, scope) in all.iter().enumerate() {
        put(h.store(), scope, "shared-key", &format!("owner {i}")).await;
    }
    for (i, scope) in all.iter().enumerate() {
        let listed = list_all(h.store(), scope, 100).await;
        assert_eq!(
            listed.iter().map(|r| (r.content.as_str(), &r.scope)).collect::<Vec<_>>(),
            vec![(format!("owner {i}").as_str(), *scope)],
            "scope {i} {scope:?} must list exactly its own record"
        );
        let found = search_all(h.store(), scope, "owner", 100).await;
        assert_eq!(found.len(), 1, "search in {scope:?} must see only its own record");
    }
    let mut expected: Vec<Option<String>> = id_injections().map(|s| Some(s.to_owned())).collect();
    expected.sort();
    canaries.assert_intact_beside(&h, &expected, "after writes under hostile ids").await;

    for scope in &users {
        assert_eq!(
            h.store().delete_user(h.app(), scope.user_id()).await.expect("delete_user"),
            1,
            "delete_user({:?}) must erase exactly that user's one record",
            scope.user_id()
        );
    }
    assert_eq!(
        namespaces_all(h.store(), h.app(), "user-1", 100).await.len(),
        expected.len(),
        "delete_user with hostile user ids must not touch user-1"
    );
    for scope in &namespaces {
        assert_eq!(
            h.store().delete_all(scope).await.expect("delete_all"),
            1,
            "delete_all of {scope:?} must erase exactly its one record"
        );
    }
    assert!(
        namespaces_all(h.store(), h.app(), "user-1", 100).await.is_empty(),
        "every hostile namespace was erased"
    );
    for scope in &apps {
        assert_eq!(
            get(h.store(), scope, "shared-key").await.map(|r| r.scope),
            Some(scope.clone()),
            "erasing in {:?} must not touch application {:?}",
            h.app(),
            scope.application_id()
        );
        assert_eq!(
            h.store().delete_user(scope.application_id(), "user-1").await.expect("delete_user"),
            1,
            "delete_user in application {:?} must erase exactly its one record",
            scope.application_id()
        );
    }
    canaries.assert_intact(&h, "after erasing under hostile ids").await;
}

/// Nests `levels` arrays (or objects, alternating) around a number.
fn nested(levels: usize) -> Value {
    let mut value = json!(1);
    for level in 0..levels {
        value = if level % 2 == 0 { json!([value]) } else { json!({ "n": value }) };
    }
    json!({ "deep": value })
}

/// Huge and deeply nested input (megabyte keys, contents, ids, queries, revisions and cursors;
/// metadata a thousand levels deep or with tens of thousands of members) is `Invalid` naming
/// its field, and changes nothing.
pub async fn huge_inputs_are_invalid_and_change_nothing(h: Harness) {
    const MIB: usize = 1 << 20;
    let canaries = Canaries::plant(&h).await;
    let scope = h.scope("user-1");
    let existing = put_every_field(h.store(), &scope, "existing").await;
    let huge = "x".repeat(MIB);

    let wide: Map<String, Value> = (0..50_000).map(|i| (format!("m{i}"), json!(i))).collect();
    let huge_name: Map<String, Value> = [(huge.clone(), json!(1))].into_iter().collect();
    let metadata_cases = [
        ("a one-megabyte metadata string", json!({ "big": huge.clone() })),
        ("a one-megabyte metadata name", Value::Object(huge_name)),
        ("metadata with 50,000 members", Value::Object(wide)),
        ("a metadata array of 100,000 numbers", json!({ "list": vec![0; 100_000] })),
        ("metadata nested 1,000 levels deep", nested(1_000)),
        ("metadata nested 64 levels deep", nested(64)),
    ];
    for (what, metadata) in metadata_cases {
        for key in ["new", "existing"] {
            expect_invalid(
                h.store().put(&scope, key, MemoryWrite::new("v").metadata(metadata.clone())).await,
                "metadata",
                &format!("put at {key:?} with {what}"),
            );
        }
    }
    expect_invalid(
        h.store().put(&scope, &huge, MemoryWrite::new("v")).await,
        "key",
        "put with a one-megabyte key",
    );
    expect_invalid(h.store().get(&scope, &huge).await, "key", "get with a one-megabyte key");
    expect_invalid(
        h.store().delete(&scope, &huge, None).await,
        "key",
        "delete with a one-megabyte key",
    );
    let four_mib = "y".repeat(4 * MIB);
    for key in ["new", "existing"] {
        expect_invalid(
            h.store().put(&scope, key, MemoryWrite::new(four_mib.clone())).await,
            "content",
            &format!("put at {key:?} with four megabytes of content"),
        );
        expect_invalid(
            h.store()
                .put(&scope, key, MemoryWrite::new("v").source(Source::default().session(&*huge)))
                .await,
            "source.session_id",
            &format!("put at {key:?} with a one-megabyte source field"),
        );
    }
    expect_invalid(
        h.store().search(&scope, &huge, PageRequest::default()).await,
        "query",
        "search for a one-megabyte query",
    );
    for (field, result) in [
        ("application_id", MemoryScope::new(&*huge, "u").map(drop)),
        ("user_id", MemoryScope::new(h.app(), &*huge).map(drop)),
        ("namespace", scope.with_namespace(&*huge).map(drop)),
    ] {
        expect_invalid(result, field, "a scope with a one-megabyte id");
    }
    expect_invalid(
        h.store().delete_user(h.app(), &huge).await,
        "user_id",
        "delete_user with a one-megabyte user id",
    );
    expect_invalid(
        h.store().list_namespaces(&huge, "user-1", PageRequest::default()).await,
        "application_id",
        "list_namespaces with a one-megabyte application id",
    );
    expect_invalid(Revision::new(&*huge), "revision", "a one-megabyte revision");
    expect_invalid(Cursor::parse(&huge), "cursor", "a one-megabyte cursor");

    assert_eq!(
        list_all(h.store(), &scope, 100).await,
        vec![existing],
        "rejected huge input must change nothing stored"
    );
    canaries.assert_intact_beside(&h, &[None], "after huge input").await;
}

/// Calls every paged operation of `scope` with `cursor` and panics unless each is `Invalid`
/// naming `cursor`, except `allowed` (the one operation the cursor was made for).
async fn expect_cursor_refused(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    cursor: &Cursor,
    allowed: Option<CursorKind>,
    what: &str,
) {
    let page = || PageRequest::new(5).after(cursor.clone());
    if allowed != Some(CursorKind::List) {
        expect_invalid(store.list(scope, page()).await, "cursor", &format!("list with {what}"));
    }
    if allowed != Some(CursorKind::Search) {
        expect_invalid(
            store.search(scope, "needle", page()).await,
            "cursor",
            &format!("search with {what}"),
        );
    }
    if allowed != Some(CursorKind::Purge) {
        expect_invalid(
            store.purge_expired(scope, page()).await,
            "cursor",
            &format!("purge_expired with {what}"),
        );
    }
    if allowed != Some(CursorKind::Namespaces) {
        expect_invalid(
            store.list_namespaces(scope.application_id(), scope.user_id(), page()).await,
            "cursor",
            &format!("list_namespaces with {what}"),
        );
    }
}

/// `token` with the character at `index` replaced by another base64 character.
fn flip(token: &str, index: usize) -> String {
    token
        .char_indices()
        .map(|(i, c)| {
            if i == index {
                if c == 'A' {
                    'B'
                } else {
                    'A'
                }
            } else {
                c
            }
        })
        .collect()
}

/// Cursors forged with [`key_cursor`](crate::provider::key_cursor) and [`namespace_cursor`](crate::provider::namespace_cursor) for another scope, user or
/// operation, and real tokens with a garbled header, are `Invalid` for every paged operation.
/// Tokens garbled only in their position name a position of the same scope at most: they never
/// return another scope's records. Nothing is purged or changed by any of them.
pub async fn forged_and_garbled_cursors_are_invalid(h: Harness) {
    let canaries = Canaries::plant(&h).await;
    let mine = h.scope("user-1");
    let neighbours = [
        h.scope("user-2"),
        h.scope_in("user-1", "ns"),
        MemoryScope::new(format!("{}-other", h.app()), "user-1").expect("valid ids"),
        h.scope("user-1\u{200b}"),
    ];
    for i in 0..5 {
        put(h.store(), &mine, &format!("k{i}"), "needle mine").await;
        for other in &neighbours {
            put(h.store(), other, &format!("k{i}"), "needle theirs").await;
        }
    }
    let before = list_all(h.store(), &mine, 100).await;
    let kinds = [CursorKind::List, CursorKind::Search, CursorKind::Purge];

    for other in &neighbours {
        for kind in kinds {
            let forged = key_cursor(kind, other, "k1");
            expect_cursor_refused(
                h.store(),
                &mine,
                &forged,
                None,
                &format!("a {kind:?} cursor forged for {other:?}"),
            )
            .await;
        }
        let forged = namespace_cursor(other.application_id(), other.user_id(), "");
        if (other.application_id(), other.user_id()) != (mine.application_id(), mine.user_id()) {
            expect_cursor_refused(
                h.store(),
                &mine,
                &forged,
                None,
                &format!("a namespaces cursor forged for {other:?}"),
            )
            .await;
        }
    }
    for kind in kinds {
        let own = key_cursor(kind, &mine, "k1");
        expect_cursor_refused(
            h.store(),
            &mine,
            &own,
            Some(kind),
            &format!("a {kind:?} cursor used for another operation"),
        )
        .await;
    }
    let own_namespaces = namespace_cursor(h.app(), "user-1", "");
    expect_cursor_refused(
        h.store(),
        &mine,
        &own_namespaces,
        Some(CursorKind::Namespaces),
        "a namespaces cursor used for another operation",
    )
    .await;

    let real = h
        .store()
        .list(&mine, PageRequest::new(1))
        .await
        .expect("list")
        .next_cursor
        .expect("a cursor: more records follow");
    let token = real.as_str();
    // A cursor forged for its own scope names a position there, and nothing more. A store
    // with cursors of its own (its real cursor says so) refuses the core's as foreign.
    let forged_here = key_cursor(CursorKind::List, &mine, "k1");
    if !real.is_core_format() {
        let what = "a list cursor in the core's format, for a store with cursors of its own";
        expect_cursor_refused(h.store(), &mine, &forged_here, None, what).await;
    } else {
        let forged = PageRequest::new(100).after(forged_here);
        let page = h.store().list(&mine, forged).await.expect("list");
        assert_eq!(keys(&page.items), ["k2", "k3", "k4"], "a cursor forged for its own scope");
        assert!(page.items.iter().all(|r| r.scope == mine), "only the scope's own records");
    }
    // The first 13 characters of the core's cursors encode the version, the operation and
    // the scope tag: changing any of them must be refused everywhere.
    let header = if real.is_core_format() { 13 } else { 0 };
    for index in 0..header {
        let garbled = flip(token, index);
        match Cursor::parse(&garbled) {
            Err(err) => expect_invalid(Err::<(), MemoryError>(err), "cursor", "a garbled token"),
            Ok(cursor) => {
                expect_cursor_refused(
                    h.store(),
                    &mine,
                    &cursor,
                    None,
                    &format!("the token {garbled:?}, garbled at character {index}"),
                )
                .await;
            }
        }
    }
    // Cut, padded, doubled, re-cased or re-alphabeted tokens are refused, or at most name a
    // position in the same scope: they never reach another scope's records.
    let mut mangled: Vec<String> =
        (1..=4).filter_map(|cut| token.get(..token.len() - cut)).map(str::to_owned).collect();
    mangled.extend([
        token[..5].to_owned(),
        format!("{token}="),
        format!("{token}=="),
        format!(" {token}"),
        format!("{token}\n"),
        format!("{token}.{token}"),
        format!("{token}{token}"),
        token.to_uppercase(),
        token.to_lowercase(),
        token.replace(['-', '_'], "+"),
    ]);
    for garbled in &mangled {
        let Ok(cursor) = Cursor::parse(garbled) else { continue };
        match h.store().list(&mine, PageRequest::new(100).after(cursor)).await {
            Ok(page) => assert!(
                page.items.iter().all(|r| r.scope == mine && r.content == "needle mine"),
                "the mangled token {garbled:?} returned records of another scope"
            ),
            Err(err) => expect_invalid(Err::<(), MemoryError>(err), "cursor", "a mangled cursor"),
        }
    }

    assert_eq!(list_all(h.store(), &mine, 100).await, before, "refused cursors change nothing");
    for other in &neighbours {
        assert_eq!(list_all(h.store(), other, 100).await.len(), 5, "{other:?} is unchanged");
    }
    canaries.assert_intact(&h, "after forged cursors").await;
}
