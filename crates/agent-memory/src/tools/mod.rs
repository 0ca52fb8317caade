//! Model tools: JSON-Schema tool definitions and the one dispatcher that runs a model's tool
//! call against a [`ScopedMemory`] (or, for the simpler fact model, against [`Facts`]).
//!
//! Two tool sets:
//!
//! | set | tools | runs against |
//! | --- | --- | --- |
//! | [`definitions`] | `memory_save`, `memory_get`, `memory_list`, `memory_search`, `memory_delete` | [`dispatch`] over a [`ScopedMemory`] |
//! | [`fact_definitions`] | `remember`, `forget`, `recall` | [`dispatch_facts`] over [`Facts`] and a [`MemoryScope`] |
//!
//! Each [`ToolDefinition`] carries a name, a description written for the model, a plain JSON
//! Schema for the arguments (an object with `"additionalProperties": false`, using only
//! `type`, `properties`, `required`, `description`, `minimum`, `maximum`, `minLength` and
//! `maxLength`, which every function-calling API accepts), and [`ToolAnnotations`]. Pass the
//! schema as OpenAI's `parameters`, Anthropic's `input_schema` or MCP's `inputSchema`. Where an
//! argument takes one of a few words (`memory_search`'s `match`), the description lists them
//! and the dispatcher refuses any other, instead of an `enum` some APIs reject.
//!
//! # Searching and filtering
//!
//! `memory_search` matches literally, as [`MemoryStore::search`](crate::MemoryStore::search)
//! does, and by default exactly as it always has: the whole `query` as one case-sensitive
//! phrase. Its optional arguments map onto the [`PageRequest`](crate::PageRequest):
//!
//! | argument | values | request |
//! | --- | --- | --- |
//! | `match` | `"phrase"` (default), `"all_words"`, `"any_word"` | [`match_mode`](crate::PageRequest::match_mode) |
//! | `ignore_case` | `false` (default), `true` | [`case`](crate::PageRequest::case) ([`Case::Insensitive`](crate::Case::Insensitive) for `true`) |
//! | `metadata` | an object of at most 8 top-level fields and the values they must equal | [`metadata`](crate::PageRequest::metadata), from [`MetadataFilter::from_json`](crate::MetadataFilter::from_json) |
//!
//! `memory_list` takes `metadata` too. The descriptions tell the model when to reach for them
//! (a phrase search that finds nothing is worth repeating with `"all_words"` and
//! `ignore_case`). A cursor continues only the call it came from: the next page must repeat
//! the same `match`, `ignore_case` and `metadata`, or the cursor is refused as `cursor`.
//!
//! # The scope is not an argument
//!
//! The scope comes from trusted code: you bind it into the [`ScopedMemory`] (or pass the
//! [`MemoryScope`] to [`dispatch_facts`]) from your authenticated session. No schema has a
//! field for the application, the user or the namespace, and the dispatcher rejects every
//! argument its schema does not declare (for example `user_id`) with an error naming it,
//! instead of ignoring it or, worse, using it. The schema is the single list of accepted
//! arguments: the dispatcher checks calls against the same definitions it publishes.
//!
//! # Results and errors
//!
//! A successful call returns a JSON object. Records appear as `key`, `content`, `metadata`,
//! `revision`, `created_at`, `updated_at` and `expires_at` (epoch seconds, `null` for no
//! expiry); results that carry stored content also carry a `note` reminding the model that
//! stored content is data, not instructions. The record's scope and source are left out.
//! Send a result to the model as [`result_text`]: compact JSON escaped with the prompt block's
//! rules, so stored text cannot imitate a tag or hide characters from a reader.
//!
//! A failed call returns a [`ToolError`] whose message is written for the model to act on: it
//! names the argument and the limit it broke, says "revision is stale, read the key again" for
//! a conflict, and says only that the store is unavailable for a storage failure (the
//! failure is logged with `tracing` at `warn` as a fixed sentence, and the provider's own error,
//! which can quote stored rows, only at `debug`; neither is shown to the model). Nothing a model sends can make the dispatcher panic.
//!
//! Optional arguments may be left out or sent as `null`; both mean "not given".
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use agent_memory::{tools, InMemoryStore, MemoryScope, MemoryStore, ScopedMemory};
//! use serde_json::json;
//!
//! let store = Arc::new(InMemoryStore::new());
//! store.start().await?;
//! // Trusted code binds the scope; the model only ever sees the tool definitions.
//! let memory = ScopedMemory::new(store, MemoryScope::new("support-bot", "user-42")?);
//! let tool_list = tools::definitions();
//! assert_eq!(tool_list.len(), 5);
//!
//! let saved = tools::dispatch(&memory, "memory_save",
//!     &json!({"key": "units", "content": "Prefers metric units"})).await.unwrap();
//! assert_eq!(saved["memory"]["content"], "Prefers metric units");
//!
//! let found = tools::dispatch(&memory, "memory_get", &json!({"key": "units"})).await.unwrap();
//! assert_eq!(found["found"], true);
//!
//! // Scope fields are not arguments: the call is rejected, nothing is read or written.
//! let err = tools::dispatch(&memory, "memory_get",
//!     &json!({"key": "units", "user_id": "someone-else"})).await.unwrap_err();
//! assert_eq!(err.kind(), tools::ToolErrorKind::InvalidArguments);
//! assert!(err.message().contains("`user_id`"));
//! # Ok::<(), agent_memory::MemoryError>(())
//! # }).unwrap();
//! ```
//!
//! [`Facts`]: crate::Facts
//! [`MemoryScope`]: crate::MemoryScope
//! [`ScopedMemory`]: crate::ScopedMemory

mod call;
mod definitions;
mod dispatch;
mod error;
mod results;

pub use definitions::{
    definitions, fact_definitions, ToolAnnotations, ToolDefinition, FORGET, MAX_EXPIRES_IN_SECONDS,
    MEMORY_DELETE, MEMORY_GET, MEMORY_LIST, MEMORY_SAVE, MEMORY_SEARCH, RECALL, REMEMBER,
};
pub use dispatch::{dispatch, dispatch_facts, dispatch_with};
pub(crate) use error::full_because;
pub(crate) use error::printable as printable_name;
pub use error::{ToolError, ToolErrorKind};
pub use results::{
    fact_json, record_json, result_text, ToolOptions, DATA_NOTE, DEFAULT_RESULT_BYTES,
    PREVIEW_BYTES, TRUNCATED_HINT,
};
