//! Explicit, scoped, long-term memory for AI agents.
//!
//! `agent-memory` stores the facts an agent (or the application around it) deliberately saves
//! for one user, and reads them back in a later session. It is the storage layer only: it never
//! calls a model, never extracts memories on its own, never injects them into prompts, and has
//! no embeddings or semantic search. Search is literal: a phrase, or every or any of its
//! words, as substrings of the content, optionally after Unicode simple case folding, and
//! optionally only among records whose metadata fields hold given values (see
//! [Matching and filters](PageRequest#matching-and-filters)); bring your own retrieval tool
//! if you want RAG.
//!
//! # Quick start
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use agent_memory::{MemoryScope, MemoryWrite, PageRequest};
//! use serde_json::json;
//!
//! // `memory:` here; `sqlite:/path/to/memories.db`, `postgres://…` or `redis://…` in production.
//! let store = agent_memory::open("memory:")?;
//! store.start().await?;
//!
//! // The scope comes from trusted code (your authenticated session), never from a model.
//! let scope = MemoryScope::new("support-bot", "user-42")?;
//!
//! let saved = store
//!     .put(&scope, "report-format", MemoryWrite::new("Start with an executive summary.")
//!         .metadata(json!({"category": "preferences"})))
//!     .await?;
//! let read = store.get(&scope, "report-format").await?.expect("just saved");
//! assert_eq!(read.revision, saved.revision);
//!
//! let page = store.search(&scope, "executive summary", PageRequest::default()).await?;
//! assert_eq!(page.items.len(), 1);
//! store.close().await?;
//! # Ok::<(), agent_memory::MemoryError>(())
//! # }).unwrap();
//! ```
//!
//! # The pieces
//!
//! - [`MemoryStore`]: the object-safe trait every provider implements. Hold an
//!   `Arc<dyn MemoryStore>` from [`open`].
//! - [`MemoryScope`]: application + user (+ namespace), the isolation boundary.
//! - [`MemoryRecord`], [`MemoryWrite`], [`Revision`], [`Source`], [`Timestamp`]: the vocabulary.
//! - [`PageRequest`], [`MemoryPage`], [`MemoryCleanupPage`], [`NamespacePage`], [`UserPage`],
//!   [`ApplicationPage`], [`Cursor`]: bounded pages with opaque cursors; `list` can be
//!   restricted to a key prefix.
//! - [`ScopedMemory`]: a store bound to one scope and source, for agent code.
//! - [`Facts`]: the simpler fact port (remember, forget, recall, erase).
//! - [`validation`]: every input limit, shared by all providers.
//! - [`MemoryError`]: `Invalid`, `Conflict`, `QuotaExceeded` or `Storage`.
//! - [`Quotas`]: optional per-user limits on records and bytes; see [Quotas](#quotas).
//! - [`observe`]: the spans and metrics every operation and tool call reports (through
//!   `tracing` and the `metrics` facade), with none of the stored data in them.
//! - [`provider`]: the building blocks for writing a provider.
//! - [`tools`]: model tools (JSON Schema definitions and their dispatcher) over a
//!   [`ScopedMemory`]; [`memory_tool`]: Claude's memory tool (`memory_20250818`), files under
//!   `/memories` kept in the store.
//! - `review` (feature `review`): the signed sign-in links of the review page, where end users
//!   see, correct, download and erase their memories (`docs/review-page.md`).
//!
//! # Providers
//!
//! | provider | feature | use it for |
//! | --- | --- | --- |
//! | [`InMemoryStore`] | always | tests and single-process programs; injectable clock |
//! | `SqliteMemoryStore` | `sqlite` | the embedded default: one machine, survives restarts |
//! | `PostgresMemoryStore` | `postgres` | shared, durable memory for many replicas |
//! | `RedisMemoryStore` | `redis` | low latency; Redis Cluster for scale |
//!
//! # Revisions and conditional writes
//!
//! Every write gets a new [`Revision`], never reused for the same key, not even after delete
//! and re-create. [`MemoryWrite::expected_revision`] turns a `put` into a compare-and-set and
//! [`MemoryWrite::create_only`] into an insert-if-absent; both fail with
//! [`MemoryError::Conflict`]. See [`MemoryStore`] for the read-compute-write loop.
//!
//! One stated exception, on Redis only: after
//! [`delete_user`](MemoryStore::delete_user) nothing naming the user may remain, so the
//! user's revision floor goes too, and the revisions of the user's next records start from the
//! server clock. They are new as long as the Redis server's clock does not step back across the
//! erasure (for example after a failover to a replica whose clock is behind). A caller that
//! kept a revision from before the erasure and the clock stepped back could see it again on a
//! re-created key; compare-and-set with such a revision is the only operation affected. See
//! the Redis provider's "Revisions" and SECURITY.md.
//!
//! # Expiry
//!
//! A record with `expires_at` disappears from `get`, `list`, `search` and revision checks the
//! moment that instant passes by the datastore's clock (PostgreSQL's and Redis's own time for
//! those providers; the injected [`Clock`] for the in-process and SQLite ones). It stays on
//! disk until [`MemoryStore::purge_expired`] (or a delete) removes it: schedule sweeps.
//! Validation checks that a new `expires_at` is in the future by the provider's clock, or by
//! the local system clock for providers whose datastore keeps time.
//!
//! # Listing by key prefix
//!
//! Keys may hold `/` and any other printable character, so they can name a hierarchy
//! (`notes/2024/march.md`). [`PageRequest::prefix`] restricts [`MemoryStore::list`] to the
//! keys that start with a prefix, compared byte for byte (`%`, `_` and `\` are ordinary
//! characters); every provider reads exactly that range of its ordered key index, never a
//! wider page filtered afterwards. The prefix follows the key rules, and the empty prefix means
//! every key.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use agent_memory::{MemoryScope, PageRequest};
//! # use agent_memory::MemoryWrite;
//! let store = agent_memory::open("memory:")?;
//! store.start().await?;
//! let scope = MemoryScope::new("app", "user-1")?;
//! for key in ["notes/a.md", "notes/b.md", "notes-old", "todo"] {
//!     store.put(&scope, key, MemoryWrite::new("…")).await?;
//! }
//! let mut page = PageRequest::new(1).prefix("notes/");
//! let mut keys = Vec::new();
//! loop {
//!     let result = store.list(&scope, page.clone()).await?;
//!     keys.extend(result.items.into_iter().map(|record| record.key));
//!     match result.next_cursor {
//!         Some(cursor) => page = page.after(cursor), // same prefix, next page
//!         None => break,
//!     }
//! }
//! assert_eq!(keys, ["notes/a.md", "notes/b.md"]);
//! # Ok::<(), agent_memory::MemoryError>(())
//! # }).unwrap();
//! ```
//!
//! A cursor from a prefixed listing is bound to its prefix: sent with another prefix (or none)
//! it is [`MemoryError::Invalid`], so changing the prefix between pages cannot silently skip
//! or repeat keys. `search`, `purge_expired` and `list_namespaces` take no prefix and refuse a
//! non-empty one as `Invalid` rather than ignore it. The [`memory_tool`] maps directories onto
//! key prefixes this way.
//!
//! # Quotas
//!
//! A store may limit what one application user holds: `max_records_per_user` and
//! `max_bytes_per_user`, builder methods of every provider (`InMemoryStore::builder`,
//! `SqliteMemoryStore::builder`, …) and URL parameters of the same names
//! (`sqlite:m.db?max_records_per_user=1000`, `memory:?max_bytes_per_user=1048576`). Zero is
//! [`MemoryError::Invalid`]; neither is set by default.
//!
//! - A record is charged its key, content, metadata and source in bytes
//!   ([`quota::record_bytes`]: key + content + compact metadata JSON + compact source JSON).
//! - Usage covers every record the user physically holds, in every namespace, expired ones
//!   included until [`MemoryStore::purge_expired`], a delete or an erasure removes them.
//! - A write that would take the user past a limit fails with
//!   [`MemoryError::QuotaExceeded`] and changes nothing. Replacing a record counts only the
//!   difference; compare-and-set and `create_only` writes obey the limits too. A write that
//!   adds nothing (a replacement no larger than the record it replaces) always succeeds, so a
//!   user over a lowered limit can still shrink or delete.
//! - `delete`, `delete_all`, `delete_user` and `purge_expired` free space at once.
//! - The check and the write are one atomic step in the datastore: concurrent writers, in one
//!   process or across replicas, never overshoot, not even by one record.
//!
//! Every provider keeps a per-user usage count in the datastore whether or not quotas are set,
//! so quotas can be switched on later without a rescan; each provider's guide says how it is
//! kept and how an existing store is upgraded.
//!
//! # Errors and retries
//!
//! A [`MemoryError::Storage`] error on a write means the write may or may not have committed.
//! The library never retries a write on its own: read the key again, and use revisions.
//!
//! # Writing a provider
//!
//! Implement [`MemoryStore`] with the building blocks of [`provider`]: check input with
//! [`MemoryWrite::validate`], the [`validation`] rules and [`PageRequestExt::key_page`](provider::PageRequestExt::key_page) before any
//! I/O; run one atomic operation in the datastore with the whole scope inside it; build replies
//! with [`provider::PageBuilder`], [`provider::namespace_page`], [`provider::user_page`],
//! [`provider::application_page`] and [`provider::key_cursor`]. A
//! `list` reads the keys of [`provider::KeyPage`]'s range: after its cursor (else from its
//! prefix) and below [`provider::KeyPage::prefix_end`], as one range scan; `list_keys` reads
//! the same range but only each key and its content's length, from what the datastore keeps
//! about the value, and replies with [`provider::key_info_page`].
//! Those helpers are the easy path, not a requirement: a datastore with paging tokens of its
//! own may put them on its pages as they are (1 to
//! [`validation::MAX_CURSOR_BYTES`] printable ASCII bytes, through [`Cursor::parse`]); the core
//! carries them opaquely, and the provider then refuses, as `Invalid` naming `cursor`, every
//! token it did not make for the same operation, scope and prefix (see
//! [Whose token it is](Cursor#whose-token-it-is)).
//! The built-in providers get their spans and metrics ([`observe`]) from one shared wrapper
//! around the trait; a provider of your own gets the same by being handed out inside
//! [`observe::Observed`]. A provider that opens from a URL reads it with
//! [`provider::ConnectionUrl`] and takes the options every provider has with
//! [`provider::CommonOptions`].
//! Then run the conformance suite (feature `conformance`) against a real instance of your
//! datastore.
//!
//! A complete provider written this way, outside the crate and through public items only, is
//! `crates/agent-memory/examples/custom_provider.rs` in the repository: an ordered-map store
//! with every method, conditional writes, expiry by an injectable clock, bounded search and
//! quotas, each step commented. `crates/agent-memory/tests/custom_provider.rs` includes it and
//! runs the whole suite on it with `conformance_tests!` (run it with
//! `cargo test -p agent-memory --features conformance --test custom_provider`); copy both to
//! start a provider of your own.
#![deny(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Each provider reads the parts of a URL its scheme has, so a build with only some providers
// leaves the other parts unread.
#[cfg_attr(not(all(feature = "sqlite", feature = "postgres", feature = "redis")), allow(dead_code))]
mod builder;
mod connection_url;
mod error;
mod facts;
mod matching;
mod memory;
mod open;
mod page;
mod record;
mod scope;
mod scoped;
mod search_scan;
mod store;
mod time;
// Only PostgreSQL builds its own rustls configurations (redis-rs builds its own from the
// files), so a Redis-only build leaves those parts unused.
#[cfg(any(feature = "postgres", feature = "redis"))]
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
mod tls;
mod write;

pub mod memory_tool;
pub mod observe;
pub mod prompt;
pub mod provider;
pub mod quota;
#[cfg(feature = "review")]
pub mod review;
pub mod tools;
pub mod validation;

#[cfg(feature = "conformance")]
pub mod conformance;

#[cfg(feature = "sqlite")]
pub mod sqlite;

#[cfg(feature = "postgres")]
pub mod postgres;

#[cfg(feature = "redis")]
pub mod redis;

/// What the exported macros expand to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
}

pub use error::{MemoryError, Result};
pub use facts::{Fact, Facts, Recalled, MAX_RECALL_FACTS};
pub use matching::{
    Case, MatchMode, MetadataFilter, MAX_METADATA_FIELD_BYTES, MAX_METADATA_FILTER_FIELDS,
    MAX_METADATA_VALUE_BYTES, MAX_QUERY_WORDS,
};
pub use memory::{InMemoryStore, InMemoryStoreBuilder};
pub use open::{default_sqlite_path, default_store_url, open};
pub use page::{
    ApplicationPage, Cursor, KeyInfo, KeyInfoPage, MemoryCleanupPage, MemoryPage, NamespacePage,
    PageRequest, UserPage, DEFAULT_PAGE_LIMIT,
};
pub use quota::Quotas;
pub use record::{MemoryRecord, Metadata, Revision, Source};
pub use scope::MemoryScope;
pub use scoped::ScopedMemory;
pub use store::MemoryStore;
pub use time::{Clock, ManualClock, SystemClock, Timestamp};
pub use write::MemoryWrite;

#[cfg(feature = "sqlite")]
pub use sqlite::SqliteMemoryStore;

#[cfg(feature = "postgres")]
pub use postgres::PostgresMemoryStore;

#[cfg(feature = "redis")]
pub use redis::RedisMemoryStore;
