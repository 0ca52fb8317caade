//! Property tests for everything that parses untrusted input in the library: cursors,
//! revisions, timestamps, scopes and records from JSON, and the validation rules. Each must
//! return a value or a clear `Invalid` error for any input: no panic, no unbounded allocation.
//!
//! `AGENT_MEMORY_FUZZ_CASES` raises the case count (default 2,000 per property).

mod support {
    pub mod strategies;
}

use agent_memory::provider::PageRequestExt;
use agent_memory::provider::{key_cursor, CursorKind};
use agent_memory::{
    validation, Cursor, MemoryError, MemoryRecord, MemoryScope, MemoryWrite, PageRequest, Revision,
    Source, Timestamp,
};
use proptest::prelude::*;
use support::strategies::{awkward_ascii, fuzz_cases, json_tree, JsonShape};

fn invalid_or_ok<T>(result: Result<T, MemoryError>) -> Result<(), TestCaseError> {
    match result {
        Ok(_) | Err(MemoryError::Invalid { .. }) => Ok(()),
        Err(other) => Err(TestCaseError::fail(format!("expected Ok or Invalid, got {other:?}"))),
    }
}

/// Strings biased towards the characters that break careless code.
fn hostile_text() -> BoxedStrategy<String> {
    prop_oneof![
        any::<String>(),
        awkward_ascii(300),
        proptest::collection::vec(any::<char>(), 0..80).prop_map(|c| c.into_iter().collect()),
    ]
    .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(2_000), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_cursor_text_parses_or_is_invalid(token in hostile_text()) {
        invalid_or_ok(Cursor::parse(&token))?;
        if let Ok(cursor) = Cursor::parse(&token) {
            let scope = MemoryScope::new("app", "user").unwrap();
            let page = PageRequest::default().after(cursor);
            invalid_or_ok(page.key_page(CursorKind::List, &scope))?;
            invalid_or_ok(page.namespace_page("app", "user"))?;
        }
    }

    #[test]
    fn any_base64_payload_decodes_or_is_invalid(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        use base64::Engine as _;
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
        if let Ok(cursor) = Cursor::parse(&token) {
            let scope = MemoryScope::new("app", "user").unwrap();
            invalid_or_ok(PageRequest::default().after(cursor).key_page(CursorKind::Search, &scope))?;
        }
    }

    #[test]
    fn cursors_round_trip_only_in_their_own_scope(key in "[^\\x00-\\x1f\\x7f-\\x9f]{1,60}", user in "[a-z:{}%]{1,10}") {
        let scope = MemoryScope::new("app", user.clone()).unwrap();
        let position = |cursor: &Cursor, kind, scope: &MemoryScope| {
            PageRequest::default().after(cursor.clone()).key_page(kind, scope).map(|page| page.after)
        };
        let cursor = key_cursor(CursorKind::List, &scope, &key);
        prop_assert_eq!(position(&cursor, CursorKind::List, &scope).unwrap(), Some(key.clone()));
        let reparsed = Cursor::parse(cursor.as_str()).unwrap();
        prop_assert_eq!(position(&reparsed, CursorKind::List, &scope).unwrap(), Some(key));
        let other = MemoryScope::new("app", format!("{user}x")).unwrap();
        prop_assert!(position(&cursor, CursorKind::List, &other).is_err());
        prop_assert!(position(&cursor, CursorKind::Search, &scope).is_err());
    }

    #[test]
    fn ids_keys_queries_and_revisions_never_panic(text in hostile_text()) {
        invalid_or_ok(validation::key(&text))?;
        invalid_or_ok(validation::id("user_id", &text))?;
        invalid_or_ok(validation::query(&text))?;
        invalid_or_ok(validation::content(&text))?;
        invalid_or_ok(Revision::new(text.clone()))?;
        invalid_or_ok(MemoryScope::new(text.clone(), "u"))?;
        if let Ok(scope) = MemoryScope::new("a", "u") {
            invalid_or_ok(scope.with_namespace(text.clone()))?;
        }
        let write = MemoryWrite::new(text.clone()).source(Source::default().agent(text.clone()));
        invalid_or_ok(write.validate(&text, Timestamp::now()))?;
        // Accepted text never carries NUL, which PostgreSQL could not store.
        if validation::key(&text).is_ok() || validation::content(&text).is_ok() {
            prop_assert!(!text.contains('\0'));
        }
    }

    #[test]
    fn any_float_is_a_timestamp_or_invalid(seconds in any::<f64>()) {
        invalid_or_ok(Timestamp::from_unix_seconds(seconds))?;
    }

    #[test]
    fn any_json_metadata_is_accepted_or_invalid(json in arb_json()) {
        invalid_or_ok(validation::metadata(&json).and_then(validation::metadata_budget))?;
    }

    #[test]
    fn records_and_scopes_from_any_json_text_parse_or_fail_cleanly(text in hostile_text()) {
        let _ = serde_json::from_str::<MemoryRecord>(&text);
        let _ = serde_json::from_str::<MemoryScope>(&text);
    }
}

fn arb_json() -> BoxedStrategy<serde_json::Value> {
    json_tree(hostile_text(), JsonShape { depth: 40, size: 400, branch: 6, floats: false })
}

#[test]
fn scopes_from_json_are_validated() {
    let bad = r#"{"application_id":"a","user_id":"u\u0000"}"#;
    assert!(serde_json::from_str::<MemoryScope>(bad).is_err());
    let extra = r#"{"application_id":"a","user_id":"u","admin":true}"#;
    assert!(serde_json::from_str::<MemoryScope>(extra).is_err());
    let good = r#"{"application_id":"a","user_id":"u","namespace":"n"}"#;
    assert_eq!(serde_json::from_str::<MemoryScope>(good).unwrap().namespace(), Some("n"));
}
