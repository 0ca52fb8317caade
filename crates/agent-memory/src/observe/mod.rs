//! Traces and metrics: what every store operation and tool call reports, and how to see it.
//!
//! The library only emits: spans and events through [`tracing`], measurements through the
//! [`metrics`](https://docs.rs/metrics) facade. Install a `tracing` subscriber and a metrics
//! recorder (an exporter) in your program to collect them; with neither installed, an
//! operation pays two checks and nothing else (no field is computed, no clock is read).
//!
//! # Spans
//!
//! Every [`MemoryStore`](crate::MemoryStore) operation of the built-in providers, and of any
//! store wrapped in [`Observed`], is one span
//! at `INFO` level with target `agent_memory::store`, named for the operation (`put`, `get`,
//! `list`, `list_keys`, `search`, `delete`, `delete_all`, `delete_user`, `list_namespaces`,
//! `list_users`, `list_applications`, `purge_expired`, `start`, `close`), with OpenTelemetry's
//! database-client attributes:
//!
//! | field | value |
//! | --- | --- |
//! | `db.system.name` | `memory`, `sqlite`, `postgresql` or `redis` |
//! | `db.operation.name` | the operation, as the span's name |
//! | `db.namespace` | the PostgreSQL database, the Redis database number; absent for `memory` and `sqlite` |
//! | `db.response.returned_rows` | records (or keys, namespaces, user ids or application ids) returned: `get`, `put`, `list`, `list_keys`, `search`, `list_namespaces`, `list_users`, `list_applications` |
//! | `agent_memory.records.deleted` | records removed: `delete` (0 or 1), `delete_all`, `delete_user`, `purge_expired` |
//! | `agent_memory.page.has_more` | whether a page came with a next cursor |
//! | `error.type` | on failure, [`MemoryError::kind_name`](crate::MemoryError::kind_name): `invalid`, `conflict`, `quota_exceeded`, `storage` |
//! | `otel.kind`, `otel.status_code` | `client`; `ERROR` on failure (read by `tracing-opentelemetry`) |
//!
//! Model tool calls ([`tools::dispatch`](crate::tools::dispatch),
//! [`tools::dispatch_facts`](crate::tools::dispatch_facts), [`memory_tool::run`](crate::memory_tool::run))
//! are one span each at `INFO` with target `agent_memory::tools`, named for the tool, with
//! `gen_ai.tool.name` and the GenAI memory operation `gen_ai.operation.name`:
//!
//! | tool | `gen_ai.operation.name` |
//! | --- | --- |
//! | `memory_save` | `upsert_memory` |
//! | `memory_get`, `memory_list`, `memory_search`, `recall` | `search_memory` |
//! | `memory_delete`, `forget` | `delete_memory` |
//! | `remember` | `create_memory` |
//! | `memory` (command in `agent_memory.tool.command`) | `view`: `search_memory`; `create`: `create_memory`; `delete`: `delete_memory`; `str_replace`, `insert`, `rename`: `update_memory` |
//!
//! A failed tool call records `error.type` as its [`ToolErrorKind`](crate::tools::ToolErrorKind)
//! (`unknown_tool`, `invalid_arguments`, `conflict`, `unavailable`, `incomplete`). The store
//! spans of the call nest inside its tool span.
//!
//! **Never recorded:** content, metadata, source, keys, queries, cursors, ids, URLs and
//! credentials. Application and user ids can be added as keyed hashes, when you ask for it,
//! with [`record_hashed_ids`].
//!
//! To send the spans to an OpenTelemetry collector, add a `tracing-opentelemetry` layer to your
//! subscriber: it maps these fields onto span attributes, `otel.kind` onto the span kind and
//! `otel.status_code` onto the status.
//!
//! # Metrics
//!
//! | name | kind | labels |
//! | --- | --- | --- |
//! | [`db.client.operation.duration`](OPERATION_DURATION) | histogram, seconds | `db.system.name`, `db.operation.name`, `outcome` (`ok` or the `error.type`) |
//! | [`agent_memory.conflicts`](CONFLICTS) | counter | `db.system.name`, `db.operation.name` |
//! | [`agent_memory.quota_rejections`](QUOTA_REJECTIONS) | counter | `db.system.name`, `db.operation.name` |
//! | [`agent_memory.records.purged`](PURGED) | counter | `db.system.name` |
//! | [`agent_memory.records.erased`](ERASED) | counter | `db.system.name`, `db.operation.name` |
//! | [`db.client.connection.count`](CONNECTIONS) | gauge (PostgreSQL) | `db.system.name`, `db.client.connection.state` (`used`, `idle`) |
//! | [`agent_memory.redis.reconnects`](RECONNECTS) | counter (Redis) | `db.system.name` |
//! | [`agent_memory.sqlite.writer.queue_depth`](WRITER_QUEUE_DEPTH) | gauge (SQLite) | none |
//! | [`agent_memory.sqlite.writer.group_size`](WRITER_GROUP_SIZE) | gauge (SQLite) | none |
//!
//! Labels never carry an id, a key or anything a caller sent. The gauges are per process:
//! two stores of the same provider in one process set the same gauge. Reconnects are a
//! counter rather than a gauge, since what an operator alerts on is their rate. Call
//! [`describe_metrics`] once after installing a recorder so exporters can show units and help
//! texts.
//!
//! A recorder counts as installed when the facade hands out anything but its zero-sized no-op
//! recorder; only then is the clock read and are labels built.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use agent_memory::{InMemoryStore, MemoryScope, MemoryStore};
//!
//! // With no subscriber and no recorder, operations run as they would without instrumentation.
//! let store = InMemoryStore::new();
//! store.start().await?;
//! let scope = MemoryScope::new("app", "user-1")?;
//! assert!(store.get(&scope, "missing").await?.is_none());
//! # Ok::<(), agent_memory::MemoryError>(())
//! # }).unwrap();
//! ```

mod backend;
mod ids;
mod metrics;
mod observed;
mod span;
mod tool;

pub(crate) use self::backend::{Backend, Telemetry};
pub use self::ids::{hash_id, record_hashed_ids, MIN_ID_KEY_BYTES};
#[cfg(feature = "postgres")]
pub(crate) use self::metrics::connections;
#[cfg(feature = "redis")]
pub(crate) use self::metrics::reconnect;
#[cfg(feature = "sqlite")]
pub(crate) use self::metrics::writer;
pub use self::metrics::{
    describe as describe_metrics, CONFLICTS, CONNECTIONS, ERASED, OPERATION_DURATION, OUTCOME_OK,
    PURGED, QUOTA_REJECTIONS, RECONNECTS, WRITER_GROUP_SIZE, WRITER_QUEUE_DEPTH,
};
pub use self::observed::Observed;
pub(crate) use self::tool::{memory_tool_span, record_command, tool_call, tool_span};
