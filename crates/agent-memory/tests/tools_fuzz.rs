//! Property tests ("fuzzing") of the model tool dispatcher: arbitrary tool names and arbitrary
//! JSON arguments (huge strings, deep nesting, wrong types, unknown fields, scope-smuggling
//! fields such as `user_id`) through [`tools::dispatch`] and [`tools::dispatch_facts`] over a
//! real `InMemoryStore`.
//!
//! Every call must return a result or a [`ToolError`] (never panic); a rejected call changes
//! nothing; no call ever reads or writes outside the bound scope, whatever its arguments name;
//! and bad input is never reported as a storage failure.
//!
//! `AGENT_MEMORY_FUZZ_CASES` sets the case count per property (default 1,000); see
//! `docs/testing.md`.

mod support {
    pub mod strategies;
}

use std::future::Future;
use std::sync::Arc;

use agent_memory::provider::CursorKind;
use agent_memory::tools::{self, ToolError, ToolErrorKind};
use agent_memory::{
    Facts, InMemoryStore, MemoryRecord, MemoryScope, MemoryStore, MemoryWrite, PageRequest,
    ScopedMemory,
};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use support::strategies::{awkward_ascii, fuzz_cases, json_float, json_tree, JsonShape};

thread_local! {
    static RUNTIME: tokio::runtime::Runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
}

fn block_on<F: Future>(future: F) -> F::Output {
    RUNTIME.with(|runtime| runtime.block_on(future))
}

const APP: &str = "fuzz-app";
const USER: &str = "fuzz-user";
const BOUND_NAMESPACE: &str = "bound";
const FACTS_NAMESPACE: &str = "facts";

/// Every application and user an argument may try to name; the snapshot covers each pair.
const APPS: [&str; 3] = [APP, "other-app", "intruder-app"];
const USERS: [&str; 3] = [USER, "victim", "intruder"];
/// Namespace names an argument may try to name.
const NAMESPACES: [&str; 3] = ["victim-ns", "intruder-ns", BOUND_NAMESPACE];

const TOOL_NAMES: [&str; 8] = [
    tools::MEMORY_SAVE,
    tools::MEMORY_GET,
    tools::MEMORY_LIST,
    tools::MEMORY_SEARCH,
    tools::MEMORY_DELETE,
    tools::REMEMBER,
    tools::FORGET,
    tools::RECALL,
];

/// Every argument any tool declares.
const DECLARED: [&str; 12] = [
    "key",
    "content",
    "metadata",
    "expires_in_seconds",
    "expected_revision",
    "limit",
    "cursor",
    "query",
    "match",
    "ignore_case",
    "text",
    "fact_id",
];

/// Argument names that try to pick a scope or a provenance, or look like a declared one.
const SMUGGLED: [&str; 22] = [
    "user_id",
    "userId",
    "user",
    "application_id",
    "applicationId",
    "app",
    "app_id",
    "namespace",
    "Namespace",
    "scope",
    "tenant",
    "owner",
    "account",
    "source",
    "session_id",
    "agent",
    "revision",
    "__proto__",
    "",
    "key ",
    "KEY",
    "k\u{0}ey",
];

/// Strings that break careless code: SQL, Lua and RESP payloads, wildcards, quotes, controls.
const INJECTIONS: [&str; 14] = [
    "'; DROP TABLE memories; --",
    "\" OR 1=1 --",
    "]] redis.call('FLUSHALL') --[[",
    "\n*3\r\n$8\r\nFLUSHALL\r\n",
    "{tag}",
    "%",
    "_",
    "*",
    "\\",
    "\u{202e}txet",
    "😀",
    "\0",
    "a\u{0}b",
    "victim",
];

// ---------------------------------------------------------------------------------------------
// Strategies

/// A string of `c` at least `bytes` long: around each size limit, and far past them.
fn huge_text() -> impl Strategy<Value = String> {
    let sizes = vec![128, 129, 256, 257, 16_385, 65_535, 65_536, 65_537, 200_000];
    (prop::sample::select(vec!['a', 'é', '😀', '\0', '%', '\n']), prop::sample::select(sizes))
        .prop_map(|(c, bytes)| {
            let mut s = String::with_capacity(bytes + 4);
            while s.len() < bytes {
                s.push(c);
            }
            s
        })
}

fn hostile_text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => any::<String>(),
        4 => awkward_ascii(40),
        2 => prop::sample::select(INJECTIONS.to_vec()).prop_map(str::to_owned),
        2 => prop::sample::select(USERS.iter().chain(&APPS).chain(&NAMESPACES).copied().collect::<Vec<_>>())
            .prop_map(str::to_owned),
        1 => huge_text(),
    ]
    .boxed()
}

/// Arrays and objects nested `depth` levels deep around a string.
fn deep_json() -> impl Strategy<Value = Value> {
    (0usize..300, any::<bool>()).prop_map(|(depth, objects)| {
        let mut value = json!("bottom");
        for level in 0..depth {
            value = if objects || level % 3 == 0 { json!({ "n": value }) } else { json!([value]) };
        }
        value
    })
}

fn arb_json() -> BoxedStrategy<Value> {
    json_tree(hostile_text(), JsonShape { depth: 8, size: 64, branch: 6, floats: true })
}

/// Cursors a model might replay: real ones for the bound scope and for other scopes, of every
/// operation, and garbage.
fn cursor_text() -> impl Strategy<Value = String> {
    let bound = bound_scope();
    let victim = MemoryScope::new(APP, "victim").expect("valid ids");
    let facts = facts_scope();
    let kinds = vec![CursorKind::List, CursorKind::Search, CursorKind::Purge];
    (prop::sample::select(kinds), 0usize..3, "[a-z0-9]{0,4}").prop_map(move |(kind, which, at)| {
        let scope = [&bound, &victim, &facts][which];
        let at = if at.is_empty() { "k".to_owned() } else { at };
        agent_memory::provider::key_cursor(kind, scope, &at).as_str().to_owned()
    })
}

fn arg_value() -> BoxedStrategy<Value> {
    prop_oneof![
        6 => hostile_text().prop_map(Value::String),
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => json_float(),
        2 => prop::sample::select(vec![0.0, 1.0, 5.0, 100.0, 100.5, 101.0, -1.0, 1e300, 315_360_000.0, 315_360_001.0])
            .prop_map(|f| json!(f)),
        2 => prop::sample::select(vec![0_i64, 1, 2, 100, 101, -1, 315_360_000, 315_360_001, i64::MAX])
            .prop_map(Value::from),
        2 => cursor_text().prop_map(Value::String),
        1 => prop::sample::select(vec!["1", "2", "a", "ffffffff", "0", "-1", "1 ", ""]).prop_map(|s| json!(s)),
        1 => Just(json!({"application_id": "other-app", "user_id": "victim", "namespace": "victim-ns"})),
        1 => deep_json(),
        2 => arb_json(),
    ]
    .boxed()
}

fn arg_name() -> BoxedStrategy<String> {
    prop_oneof![
        6 => prop::sample::select(DECLARED.to_vec()).prop_map(str::to_owned),
        2 => prop::sample::select(SMUGGLED.to_vec()).prop_map(str::to_owned),
        1 => hostile_text(),
    ]
    .boxed()
}

fn arguments() -> BoxedStrategy<Value> {
    prop_oneof![
        8 => prop::collection::btree_map(arg_name(), arg_value(), 0..7)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        1 => arg_value(),
        1 => Just(Value::Null),
    ]
    .boxed()
}

/// A value an argument of that name would accept, most of the time.
fn plausible_value(argument: &str) -> BoxedStrategy<Value> {
    match argument {
        "key" | "fact_id" => prop_oneof![
            prop::sample::select(vec!["victim", "k", "a", "new-key", "{tag}", "%"])
                .prop_map(|s| json!(s)),
            "[^\\x00-\\x1f\\x7f-\\x9f]{1,24}".prop_map(Value::String),
            hostile_text().prop_map(Value::String),
        ]
        .boxed(),
        "content" | "text" | "query" => prop_oneof![
            prop::sample::select(vec!["in", "k in", "victim", "%", "_", "*"])
                .prop_map(|s| json!(s)),
            hostile_text().prop_map(Value::String),
        ]
        .boxed(),
        "metadata" => prop_oneof![
            Just(json!({"category": "preferences"})),
            Just(json!({"pinned": true, "rank": 1.0, "gone": null})),
            prop::collection::btree_map(hostile_text(), arb_json(), 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            deep_json().prop_map(|v| json!({ "deep": v })),
        ]
        .boxed(),
        "expires_in_seconds" => prop_oneof![
            (1_u64..=315_360_000).prop_map(Value::from),
            prop::sample::select(vec![1.0, 60.0, 315_360_000.0]).prop_map(|f| json!(f)),
        ]
        .boxed(),
        "expected_revision" => (1_u32..40).prop_map(|n| json!(format!("{n:x}"))).boxed(),
        "limit" => (1_u64..=100).prop_map(Value::from).boxed(),
        "match" => prop_oneof![
            prop::sample::select(vec!["phrase", "all_words", "any_word"]).prop_map(|s| json!(s)),
            prop::sample::select(vec!["", "ALL_WORDS", "all words", "fuzzy", "phrase\u{0}"])
                .prop_map(|s| json!(s)),
        ]
        .boxed(),
        "ignore_case" => any::<bool>().prop_map(Value::Bool).boxed(),
        "cursor" => cursor_text().prop_map(Value::String).boxed(),
        _ => arg_value(),
    }
}

/// Arguments close to what `name` accepts: each declared argument present or not, with a
/// plausible value or (sometimes) any value, and sometimes one undeclared argument more.
fn near_valid_arguments(name: &str) -> BoxedStrategy<Value> {
    let definition =
        tools::definitions().into_iter().chain(tools::fact_definitions()).find(|d| d.name == name);
    let Some(definition) = definition else { return arguments() };
    let required: Vec<String> = definition.required_arguments().map(str::to_owned).collect();
    let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = definition
        .arguments()
        .map(|argument| {
            let owned = argument.to_owned();
            let keep = if required.contains(&owned) { 0.95 } else { 0.5 };
            let value = prop_oneof![9 => plausible_value(argument), 1 => arg_value()];
            prop::option::weighted(keep, value.prop_map(move |v| (owned.clone(), v))).boxed()
        })
        .collect();
    let extra = prop::option::weighted(0.1, (arg_name(), arg_value()));
    (fields, extra)
        .prop_map(|(fields, extra)| {
            let mut map: Map<String, Value> = fields.into_iter().flatten().collect();
            if let Some((name, value)) = extra {
                map.insert(name, value);
            }
            Value::Object(map)
        })
        .boxed()
}

/// A tool name and arguments for it: mostly near-valid, sometimes anything.
fn call() -> impl Strategy<Value = (String, Value)> {
    tool_name().prop_flat_map(|name| {
        let arguments = prop_oneof![3 => near_valid_arguments(&name), 2 => arguments()];
        (Just(name), arguments)
    })
}

fn tool_name() -> BoxedStrategy<String> {
    prop_oneof![
        8 => prop::sample::select(TOOL_NAMES.to_vec()).prop_map(str::to_owned),
        1 => prop::sample::select(vec!["Memory_Save", "memory_save ", " recall", "memory", "", "memory_save\0"])
            .prop_map(str::to_owned),
        1 => hostile_text(),
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------------
// The world a call runs in

fn bound_scope() -> MemoryScope {
    MemoryScope::new(APP, USER).and_then(|s| s.with_namespace(BOUND_NAMESPACE)).expect("valid")
}

fn facts_scope() -> MemoryScope {
    MemoryScope::new(APP, USER).and_then(|s| s.with_namespace(FACTS_NAMESPACE)).expect("valid")
}

/// A started store with records in the bound scope, the facts scope, the bound user's other
/// namespaces, another user and another application.
async fn seeded() -> Arc<InMemoryStore> {
    let store = Arc::new(InMemoryStore::new());
    store.start().await.expect("start");
    let victim = MemoryScope::new(APP, USER).expect("valid");
    let scopes = [
        bound_scope(),
        facts_scope(),
        victim.clone(),
        victim.with_namespace("victim-ns").expect("valid"),
        MemoryScope::new(APP, "victim").expect("valid"),
        MemoryScope::new("other-app", USER).expect("valid"),
    ];
    for scope in &scopes {
        for key in ["k", "victim", "a"] {
            store
                .put(scope, key, MemoryWrite::new(format!("{key} in {scope:?}")))
                .await
                .expect("seed");
        }
    }
    store
}

/// Every record of every namespace of every application user an argument could name, by scope.
async fn snapshot(store: &dyn MemoryStore) -> Vec<(MemoryScope, Vec<MemoryRecord>)> {
    let mut all = Vec::new();
    for app in APPS {
        for user in USERS {
            let mut page = PageRequest::new(100);
            loop {
                let namespaces = store.list_namespaces(app, user, page.clone()).await.expect("ns");
                for scope in namespaces.items {
                    let records = store.list(&scope, PageRequest::new(100)).await.expect("list");
                    all.push((scope, records.items));
                }
                match namespaces.next_cursor {
                    Some(cursor) => page = page.after(cursor),
                    None => break,
                }
            }
        }
    }
    all
}

/// The snapshot without the scope a tool set is bound to.
fn outside(
    snapshot: &[(MemoryScope, Vec<MemoryRecord>)],
    bound: &MemoryScope,
) -> Vec<(MemoryScope, Vec<MemoryRecord>)> {
    snapshot.iter().filter(|(scope, _)| scope != bound).cloned().collect()
}

/// Checks one call's outcome: a JSON object, or an error that is not a storage failure, whose
/// message is one short printable line; nothing outside `bound` changed, and nothing at all
/// after an error.
fn check_outcome(
    outcome: &Result<Value, ToolError>,
    name: &str,
    known: &[&str],
    before: &[(MemoryScope, Vec<MemoryRecord>)],
    after: &[(MemoryScope, Vec<MemoryRecord>)],
    bound: &MemoryScope,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        outside(before, bound),
        outside(after, bound),
        "a call to {:?} changed a scope it is not bound to",
        name
    );
    match outcome {
        Ok(value) => {
            prop_assert!(value.is_object(), "a result must be a JSON object: {}", value);
            prop_assert!(known.contains(&name), "unknown tool {:?} succeeded", name);
        }
        Err(err) => {
            prop_assert_eq!(before, after, "a rejected call to {:?} changed the store", name);
            prop_assert_ne!(
                err.kind(),
                ToolErrorKind::Unavailable,
                "bad input must never be reported as a storage failure: {}",
                err
            );
            prop_assert_eq!(
                err.kind() == ToolErrorKind::UnknownTool,
                !known.contains(&name),
                "unknown-tool errors exactly for unknown names: {}",
                err
            );
            let message = err.message();
            prop_assert!(!message.is_empty(), "an error message is never empty");
            prop_assert!(
                !message.chars().any(char::is_control),
                "an error message is one printable line: {:?}",
                message
            );
            prop_assert!(
                message.len() <= 2_048,
                "an error message stays short: {} bytes",
                message.len()
            );
            let json = err.to_json();
            prop_assert!(json["error"]["message"].is_string());
        }
    }
    Ok(())
}

/// Whether `memory_search` with `request` finds `key` on any page, reading every page (100 at
/// the most) by the cursors it returns; `what` names the search in failures.
async fn search_finds(
    memory: &ScopedMemory,
    mut request: Value,
    key: &Value,
    what: &str,
) -> Result<bool, TestCaseError> {
    let mut found = false;
    let mut cursor = Value::Null;
    for _ in 0..100 {
        request["cursor"] = cursor;
        let page = tools::dispatch(memory, tools::MEMORY_SEARCH, &request)
            .await
            .map_err(|e| TestCaseError::fail(format!("{what} failed: {e}")))?;
        let items = page["items"].as_array();
        found |= items.is_some_and(|items| items.iter().any(|item| item["key"] == *key));
        cursor = page["next_cursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    Ok(found)
}

/// Arguments `name` accepts, naming records that exist in every seeded scope.
fn valid_arguments(name: &str) -> Map<String, Value> {
    let pairs: Vec<(&str, Value)> = match name {
        tools::MEMORY_SAVE => vec![("key", json!("victim")), ("content", json!("smuggled"))],
        tools::MEMORY_GET | tools::MEMORY_DELETE => vec![("key", json!("victim"))],
        tools::MEMORY_SEARCH => vec![("query", json!("in"))],
        tools::REMEMBER => vec![("text", json!("smuggled"))],
        tools::FORGET => vec![("fact_id", json!("victim"))],
        _ => vec![("limit", json!(100))],
    };
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

const KEY_TOOLS: [&str; 5] = [
    tools::MEMORY_SAVE,
    tools::MEMORY_GET,
    tools::MEMORY_LIST,
    tools::MEMORY_SEARCH,
    tools::MEMORY_DELETE,
];
const FACT_TOOLS: [&str; 3] = [tools::REMEMBER, tools::FORGET, tools::RECALL];

/// Runs `name(arguments)` through both dispatchers on a freshly seeded store and checks each.
fn run_both(name: &str, arguments: &Value) -> Result<(), TestCaseError> {
    block_on(async {
        let store = seeded().await;
        let memory = ScopedMemory::new(store.clone(), bound_scope());
        let before = snapshot(store.as_ref()).await;
        let outcome = tools::dispatch(&memory, name, arguments).await;
        let after = snapshot(store.as_ref()).await;
        check_outcome(&outcome, name, &KEY_TOOLS, &before, &after, &bound_scope())?;
        if let (Ok(_), tools::MEMORY_SAVE) = (&outcome, name) {
            let key = arguments["key"].as_str().expect("a saved call had a string key");
            let content = arguments["content"].as_str().expect("a saved call had content");
            let stored = store.get(&bound_scope(), key).await.expect("get").expect("saved");
            prop_assert_eq!(stored.content.as_bytes(), content.as_bytes(), "saved byte for byte");
            prop_assert_eq!(stored.key.as_bytes(), key.as_bytes());
        }

        let facts = Facts::new(store.clone());
        let before = snapshot(store.as_ref()).await;
        let outcome = tools::dispatch_facts(&facts, &facts_scope(), name, arguments).await;
        let after = snapshot(store.as_ref()).await;
        check_outcome(&outcome, name, &FACT_TOOLS, &before, &after, &facts_scope())
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: fuzz_cases(1_000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any name with any arguments: a result or a tool error, never a panic, never a change
    /// outside the bound scope.
    #[test]
    fn any_call_is_a_result_or_a_tool_error((name, arguments) in call()) {
        run_both(&name, &arguments)?;
    }

    /// A well-formed call of a real tool plus one scope-smuggling argument is refused naming
    /// an argument, and changes nothing anywhere, not even in the bound scope.
    #[test]
    fn scope_smuggling_arguments_are_refused_and_change_nothing(
        name in prop::sample::select(TOOL_NAMES.to_vec()),
        smuggled in prop::sample::select(SMUGGLED.to_vec()),
        value in prop_oneof![
            prop::sample::select(USERS.iter().chain(&APPS).chain(&NAMESPACES).copied().collect::<Vec<_>>())
                .prop_map(|s| json!(s)),
            Just(json!({"application_id": "other-app", "user_id": "victim"})),
            arg_value(),
        ],
    ) {
        let mut arguments = valid_arguments(name);
        arguments.insert(smuggled.to_owned(), value);
        let arguments = Value::Object(arguments);
        block_on(async {
            let store = seeded().await;
            let before = snapshot(store.as_ref()).await;
            let memory = ScopedMemory::new(store.clone(), bound_scope());
            let facts = Facts::new(store.clone());
            let outcome = if KEY_TOOLS.contains(&name) {
                tools::dispatch(&memory, name, &arguments).await
            } else {
                tools::dispatch_facts(&facts, &facts_scope(), name, &arguments).await
            };
            let after = snapshot(store.as_ref()).await;
            prop_assert_eq!(&before, &after, "a call carrying {:?} changed the store", smuggled);
            let err = outcome.expect_err("an undeclared argument must be refused");
            prop_assert_eq!(err.kind(), ToolErrorKind::InvalidArguments, "{}", err);
            prop_assert!(err.message().contains("does not accept"), "{}", err);
            Ok(())
        })?;
    }

    /// A save of hostile text is stored and read back byte for byte, found by a literal search
    /// for itself, or refused as invalid arguments; never anything else.
    #[test]
    fn hostile_saves_round_trip_or_are_refused(
        key in hostile_text(),
        content in hostile_text(),
        metadata in prop_oneof![Just(None), arb_json().prop_map(Some), deep_json().prop_map(|v| Some(json!({"m": v})))],
    ) {
        let mut arguments = json!({"key": key, "content": content});
        if let Some(metadata) = metadata {
            arguments["metadata"] = metadata;
        }
        block_on(async {
            let store = seeded().await;
            let memory = ScopedMemory::new(store.clone(), bound_scope());
            let before = snapshot(store.as_ref()).await;
            let saved = tools::dispatch(&memory, tools::MEMORY_SAVE, &arguments).await;
            let after = snapshot(store.as_ref()).await;
            check_outcome(&saved, tools::MEMORY_SAVE, &KEY_TOOLS, &before, &after, &bound_scope())?;
            let Ok(saved) = saved else { return Ok(()) };
            prop_assert_eq!(&saved["memory"]["content"], &arguments["content"]);
            let read = tools::dispatch(&memory, tools::MEMORY_GET, &json!({"key": key})).await
                .map_err(|e| TestCaseError::fail(format!("get after save failed: {e}")))?;
            prop_assert_eq!(&read["memory"]["content"], &arguments["content"], "read back byte for byte");
            prop_assert_eq!(&read["memory"]["key"], &arguments["key"]);
            if !content.is_empty() {
                // A query is at most 1,024 bytes: search for the content's start.
                let mut end = content.len().min(agent_memory::validation::MAX_QUERY_BYTES);
                while !content.is_char_boundary(end) {
                    end -= 1;
                }
                let query = &content[..end];
                let literal = json!({"query": query, "limit": 100});
                let found = search_finds(&memory, literal, &arguments["key"], "search after save");
                prop_assert!(found.await?, "a literal search for the saved content finds it");
                // Every word of the content's start occurs in the content, in any case.
                let words = query.split_whitespace().count();
                if (1..=agent_memory::MAX_QUERY_WORDS).contains(&words) {
                    let words = json!({"query": query, "match": "all_words", "ignore_case": true,
                                       "limit": 100});
                    let found = search_finds(&memory, words, &arguments["key"], "word search");
                    prop_assert!(found.await?, "a word search in any case finds the saved content");
                }
            }
            Ok(())
        })?;
    }

    /// JSON text of any shape, parsed the way an MCP layer would, then dispatched.
    #[test]
    fn any_json_text_as_arguments(name in tool_name(), text in hostile_text()) {
        if let Ok(arguments) = serde_json::from_str::<Value>(&text) {
            run_both(&name, &arguments)?;
        }
    }
}
