//! Spans, through a capturing subscriber: every operation on every provider is one span with
//! OpenTelemetry's database-client attributes, tool calls are spans with the GenAI memory
//! operation names, and no content, metadata, key, query or id appears in anything recorded.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use agent_memory::{
    memory_tool, observe, tools, Facts, InMemoryStore, MemoryScope, MemoryStore, MemoryWrite,
    PageRequest, PostgresMemoryStore, RedisMemoryStore, ScopedMemory, Source, SqliteMemoryStore,
};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

// The example's `main` is not run here.
#[allow(dead_code)]
#[path = "../examples/custom_provider.rs"]
mod custom_provider;

/// Every private value the tests write carries this, so one search finds any leak.
const MARKER: &str = "PRIVATE7f3a";

/// One test at a time: the hashed-ids switch is process-wide, and tracing caches whether a
/// callsite is wanted when it is first hit, so a callsite first hit on another test's thread
/// while a capture is being installed could stay unwanted by the capture.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One captured span: its name, target, parent's name and every field recorded on it.
#[derive(Debug, Clone)]
struct Captured {
    name: &'static str,
    target: String,
    parent: Option<&'static str>,
    fields: BTreeMap<String, String>,
}

#[derive(Debug, Default, Clone)]
struct Capture {
    spans: Arc<Mutex<Vec<Captured>>>,
    /// Every event's level and fields, as text.
    events: Arc<Mutex<Vec<(tracing::Level, String)>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// The index of a span in [`Capture::spans`], kept in the span's extensions.
struct Index(usize);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let span = ctx.span(id).expect("a new span is registered");
        let parent = span.parent().map(|parent| parent.name());
        let mut spans = self.spans.lock().unwrap();
        spans.push(Captured {
            name: attrs.metadata().name(),
            target: attrs.metadata().target().to_owned(),
            parent,
            fields,
        });
        span.extensions_mut().insert(Index(spans.len() - 1));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a recorded span is registered");
        let extensions = span.extensions();
        let Some(Index(index)) = extensions.get::<Index>() else { return };
        let mut spans = self.spans.lock().unwrap();
        values.record(&mut Fields(&mut spans[*index].fields));
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let level = *event.metadata().level();
        self.events.lock().unwrap().push((level, format!("{fields:?}")));
    }
}

impl Capture {
    /// Runs `f` with this capture as the thread's subscriber (the tests run on one thread).
    async fn run<F: std::future::Future>(&self, f: F) -> F::Output {
        let subscriber = tracing_subscriber::registry().with(self.clone());
        let _guard = tracing::subscriber::set_default(subscriber);
        f.await
    }

    fn store_spans(&self) -> Vec<Captured> {
        let spans = self.spans.lock().unwrap();
        spans.iter().filter(|span| span.target == "agent_memory::store").cloned().collect()
    }

    fn all_text(&self) -> String {
        format!("{:?} {:?}", self.spans.lock().unwrap(), self.events.lock().unwrap())
    }

    /// Nothing private in any span or event.
    fn assert_no_private_data(&self) {
        let text = self.all_text();
        assert!(!text.contains(MARKER), "a private value was recorded: {text}");
    }
}

fn scope() -> MemoryScope {
    let app = format!("app-{MARKER}-{}", uuid::Uuid::new_v4().simple());
    MemoryScope::new(app, format!("user-{MARKER}"))
        .unwrap()
        .with_namespace(format!("ns-{MARKER}"))
        .unwrap()
}

/// The one span named `name`, checked for the attributes every store span has.
fn only(spans: &[Captured], name: &str, system: &str) -> BTreeMap<String, String> {
    let found: Vec<_> = spans.iter().filter(|span| span.name == name).collect();
    assert_eq!(found.len(), 1, "one `{name}` span: {spans:#?}");
    let fields = found[0].fields.clone();
    assert_eq!(fields["db.system.name"], system, "{name}");
    assert_eq!(fields["db.operation.name"], name);
    assert_eq!(fields["otel.kind"], "client");
    fields
}

/// Runs every operation once on `store`, with private markers in every value it writes, and
/// checks each operation's span. `namespace` is the expected `db.namespace`, if any.
async fn every_operation(store: Arc<dyn MemoryStore>, system: &str, namespace: Option<&str>) {
    let _serial = SERIAL.lock().await;
    let capture = Capture::default();
    let scope = scope();
    let key = format!("key-{MARKER}");
    capture
        .run(async {
            store.start().await.unwrap();
            let write = MemoryWrite::new(format!("content {MARKER}"))
                .metadata(json!({"label": MARKER}))
                .source(Source::default().session(format!("session-{MARKER}")));
            let saved = store.put(&scope, &key, write).await.unwrap();
            store.get(&scope, &key).await.unwrap().expect("just saved");
            store.list(&scope, PageRequest::new(10)).await.unwrap();
            store.list_keys(&scope, PageRequest::new(10)).await.unwrap();
            store.search(&scope, MARKER, PageRequest::new(10)).await.unwrap();
            let (app, user) = (scope.application_id(), scope.user_id());
            store.list_namespaces(app, user, PageRequest::new(10)).await.unwrap();
            store.list_users(app, PageRequest::new(10)).await.unwrap();
            store.list_applications(PageRequest::new(10)).await.unwrap();
            store.purge_expired(&scope, PageRequest::new(10)).await.unwrap();
            store.delete(&scope, &key, Some(&saved.revision)).await.unwrap();
            store.put(&scope, &key, MemoryWrite::new(MARKER)).await.unwrap();
            store.delete_all(&scope).await.unwrap();
            store.put(&scope, &key, MemoryWrite::new(MARKER)).await.unwrap();
            store.delete_user(app, user).await.unwrap();
            store.close().await.unwrap();
        })
        .await;

    let spans = capture.store_spans();
    let start = only(&spans, "start", system);
    assert_eq!(start.get("db.namespace").map(String::as_str), namespace);
    only(&spans, "close", system);
    let puts: Vec<_> = spans.iter().filter(|span| span.name == "put").collect();
    assert_eq!(puts.len(), 3);
    assert_eq!(puts[0].fields["db.response.returned_rows"], "1");
    let get = only(&spans, "get", system);
    assert_eq!(get["db.response.returned_rows"], "1");
    for name in ["list", "list_keys", "search"] {
        let page = only(&spans, name, system);
        assert_eq!(page["db.response.returned_rows"], "1", "{name}");
        assert_eq!(page["agent_memory.page.has_more"], "false", "{name}");
    }
    let namespaces = only(&spans, "list_namespaces", system);
    assert_eq!(namespaces["db.response.returned_rows"], "1");
    let users = only(&spans, "list_users", system);
    assert_eq!(users["db.response.returned_rows"], "1");
    assert_eq!(users["agent_memory.page.has_more"], "false");
    // Other tests' applications may share the datastore: the count is theirs too.
    let applications = only(&spans, "list_applications", system);
    assert!(applications.contains_key("db.response.returned_rows"));
    assert!(applications.contains_key("agent_memory.page.has_more"));
    let purge = only(&spans, "purge_expired", system);
    assert_eq!(purge["agent_memory.records.deleted"], "0");
    assert_eq!(purge["agent_memory.page.has_more"], "false");
    assert_eq!(only(&spans, "delete", system)["agent_memory.records.deleted"], "1");
    assert_eq!(only(&spans, "delete_all", system)["agent_memory.records.deleted"], "1");
    assert_eq!(only(&spans, "delete_user", system)["agent_memory.records.deleted"], "1");
    for span in &spans {
        assert!(!span.fields.contains_key("error.type"), "{span:?}");
        assert!(!span.fields.contains_key("agent_memory.user_id.hash"), "{span:?}");
    }
    capture.assert_no_private_data();

    // Failures name their kind, and still nothing private.
    let failures = Capture::default();
    failures
        .run(async {
            store.start().await.unwrap();
            let saved = store.put(&scope, &key, MemoryWrite::new(MARKER)).await.unwrap();
            store.put(&scope, &key, MemoryWrite::new(MARKER).create_only()).await.unwrap_err();
            store.get(&scope, &format!("bad\u{7}{MARKER}")).await.unwrap_err();
            store.delete(&scope, &key, Some(&saved.revision)).await.unwrap();
            store.close().await.unwrap();
        })
        .await;
    let spans = failures.store_spans();
    let put =
        spans.iter().find(|span| span.name == "put" && span.fields.contains_key("error.type"));
    let put = put.expect("the conflicting put has an error type");
    assert_eq!(put.fields["error.type"], "conflict");
    assert_eq!(put.fields["otel.status_code"], "ERROR");
    assert_eq!(only(&spans, "get", system)["error.type"], "invalid");
    failures.assert_no_private_data();
}

#[tokio::test(flavor = "current_thread")]
async fn memory_operations_are_spans() {
    every_operation(Arc::new(InMemoryStore::new()), "memory", None).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_provider_written_outside_the_crate_is_observed_through_the_wrapper() {
    let store = observe::Observed::new("map", custom_provider::MapStore::new());
    every_operation(Arc::new(store), "map", None).await;
}

#[tokio::test(flavor = "current_thread")]
async fn sqlite_operations_are_spans() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteMemoryStore::builder(dir.path().join("observe.db")).build().unwrap();
    every_operation(Arc::new(store), "sqlite", None).await;
}

#[tokio::test(flavor = "current_thread")]
async fn postgres_operations_are_spans() {
    let url = agent_memory_testkit::postgres::shared_url();
    let table = format!("observe_{}", uuid::Uuid::new_v4().simple());
    let store = PostgresMemoryStore::builder(&url).unwrap().table(table).build().unwrap();
    // The database the URL names; a URL without one names none.
    let database = url_database(&url);
    let namespace = (!database.is_empty()).then_some(database.as_str());
    every_operation(Arc::new(store), "postgresql", namespace).await;
}

#[tokio::test(flavor = "current_thread")]
async fn redis_operations_are_spans() {
    let store = RedisMemoryStore::from_url(&agent_memory_testkit::redis::shared_url()).unwrap();
    every_operation(Arc::new(store), "redis", Some("0")).await;
}

/// The database a PostgreSQL URL names (its path).
fn url_database(url: &str) -> String {
    let parsed = url::Url::parse(url).unwrap();
    parsed.path().trim_start_matches('/').to_owned()
}

#[tokio::test(flavor = "current_thread")]
async fn tool_calls_are_spans_named_for_the_tool() {
    let _serial = SERIAL.lock().await;
    let capture = Capture::default();
    let store = Arc::new(InMemoryStore::new());
    let scope = scope();
    capture
        .run(async {
            store.start().await.unwrap();
            let memory = ScopedMemory::new(store.clone(), scope.clone());
            let key = format!("key-{MARKER}");
            let content = format!("content {MARKER}");
            tools::dispatch(&memory, "memory_save", &json!({"key": key, "content": content}))
                .await
                .unwrap();
            tools::dispatch(&memory, "memory_get", &json!({"key": key})).await.unwrap();
            tools::dispatch(&memory, "memory_list", &json!({})).await.unwrap();
            tools::dispatch(&memory, "memory_search", &json!({"query": MARKER})).await.unwrap();
            tools::dispatch(&memory, "memory_delete", &json!({"key": key})).await.unwrap();
            tools::dispatch(&memory, &format!("tool-{MARKER}"), &json!({})).await.unwrap_err();
            let facts = Facts::new(store.clone());
            let fact_scope = scope.clone().with_namespace("facts").unwrap();
            let remembered =
                tools::dispatch_facts(&facts, &fact_scope, "remember", &json!({"text": content}))
                    .await
                    .unwrap();
            tools::dispatch_facts(&facts, &fact_scope, "recall", &json!({})).await.unwrap();
            let id = remembered["fact"]["fact_id"].clone();
            tools::dispatch_facts(&facts, &fact_scope, "forget", &json!({"fact_id": id}))
                .await
                .unwrap();
            let file = format!("/memories/{MARKER}.md");
            memory_tool::run(
                &memory,
                &json!({"command": "create", "path": file, "file_text": content}),
            )
            .await
            .unwrap();
            memory_tool::run(&memory, &json!({"command": "view", "path": file})).await.unwrap();
            memory_tool::run(&memory, &json!({"command": "delete", "path": file})).await.unwrap();
        })
        .await;

    let spans = capture.spans.lock().unwrap().clone();
    let tool = |name: &str| -> Vec<Captured> {
        spans
            .iter()
            .filter(|s| s.target == "agent_memory::tools" && s.name == name)
            .cloned()
            .collect()
    };
    for (name, operation) in [
        ("memory_save", "upsert_memory"),
        ("memory_get", "search_memory"),
        ("memory_list", "search_memory"),
        ("memory_search", "search_memory"),
        ("memory_delete", "delete_memory"),
        ("remember", "create_memory"),
        ("recall", "search_memory"),
        ("forget", "delete_memory"),
    ] {
        let found = tool(name);
        assert_eq!(found.len(), 1, "{name}: {spans:#?}");
        assert_eq!(found[0].fields["gen_ai.operation.name"], operation, "{name}");
        assert_eq!(found[0].fields["gen_ai.tool.name"], name);
        assert!(!found[0].fields.contains_key("error.type"), "{name}");
    }
    let unknown = tool("tool");
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].fields["error.type"], "unknown_tool");
    let commands: Vec<_> = tool("memory")
        .iter()
        .map(|s| {
            (
                s.fields["agent_memory.tool.command"].clone(),
                s.fields["gen_ai.operation.name"].clone(),
            )
        })
        .collect();
    assert_eq!(
        commands,
        [
            ("create".to_owned(), "create_memory".to_owned()),
            ("view".to_owned(), "search_memory".to_owned()),
            ("delete".to_owned(), "delete_memory".to_owned()),
        ]
    );
    // The store's spans nest inside the tool's.
    let put = spans.iter().find(|s| s.name == "put").expect("the save wrote");
    assert_eq!(put.parent, Some("memory_save"));
    capture.assert_no_private_data();
}

#[tokio::test(flavor = "current_thread")]
async fn ids_are_recorded_hashed_only_when_asked_for() {
    let _serial = SERIAL.lock().await;
    assert!(observe::record_hashed_ids(Some(b"short")).is_err());
    let capture = Capture::default();
    let store = InMemoryStore::new();
    let scope = scope();
    capture
        .run(async {
            store.start().await.unwrap();
            observe::record_hashed_ids(Some(b"a secret of sixteen bytes or more")).unwrap();
            store.get(&scope, "k").await.unwrap();
            store.list_users(scope.application_id(), PageRequest::new(1)).await.unwrap();
            store.list_applications(PageRequest::new(1)).await.unwrap();
            observe::record_hashed_ids(None).unwrap();
        })
        .await;
    let spans = capture.store_spans();
    let get = only(&spans, "get", "memory");
    let user = &get["agent_memory.user_id.hash"];
    assert_eq!(user.len(), 16);
    assert!(user.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(user, &get["agent_memory.application_id.hash"]);
    // An operation over a whole application records the application's hash alone.
    let users = only(&spans, "list_users", "memory");
    assert_eq!(users["agent_memory.application_id.hash"], get["agent_memory.application_id.hash"]);
    assert!(!users.contains_key("agent_memory.user_id.hash"));
    // An operation over the whole store names no id at all.
    let applications = only(&spans, "list_applications", "memory");
    assert!(!applications.contains_key("agent_memory.application_id.hash"));
    assert!(!applications.contains_key("agent_memory.user_id.hash"));
    capture.assert_no_private_data();
}

#[tokio::test(flavor = "current_thread")]
async fn a_drivers_error_text_is_logged_at_debug_only() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.db");
    let store = Arc::new(SqliteMemoryStore::new(&path));
    store.start().await.expect("start");
    // The table goes behind the store's back, so the next statement fails in the driver with
    // the driver's own words.
    rusqlite::Connection::open(&path)
        .and_then(|conn| conn.execute_batch("DROP TABLE memory_records"))
        .expect("drop the table");
    let memory = ScopedMemory::new(store, scope());
    let capture = Capture::default();
    let err = capture
        .run(tools::dispatch(&memory, "memory_get", &json!({"key": "k"})))
        .await
        .expect_err("the table is gone");
    assert_eq!(err.kind(), tools::ToolErrorKind::Unavailable);
    let events = capture.events.lock().unwrap().clone();
    let detail = "memory_records"; // in SQLite's "no such table" message, never in ours
    assert!(
        events.iter().any(|(level, text)| *level == tracing::Level::DEBUG && text.contains(detail)),
        "the driver's text is there for an operator who asks: {events:?}"
    );
    for (level, text) in &events {
        if *level < tracing::Level::DEBUG {
            assert!(!text.contains(detail), "logged at {level}: {text}");
        }
    }
    assert!(events.iter().any(|(level, _)| *level == tracing::Level::WARN), "{events:?}");
}
