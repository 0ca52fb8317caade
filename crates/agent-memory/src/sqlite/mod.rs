//! [`SqliteMemoryStore`], the embedded provider (feature `sqlite`): one SQLite file, no server.
//!
//! It is the default store of the CLI and the MCP server, and the one to pick for a single
//! machine. Several stores, threads and processes may use one file at the same time: the CLI
//! and an MCP server side by side both work.
//!
//! ```no_run
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use agent_memory::sqlite::{SqliteMemoryStore, Synchronous};
//! use agent_memory::{MemoryScope, MemoryStore, MemoryWrite};
//!
//! // Typed: every option has a builder method.
//! let store = SqliteMemoryStore::builder("/var/lib/my-agent/memories.db")
//!     .busy_timeout(Duration::from_secs(10))
//!     .synchronous(Synchronous::Full)
//!     .build();
//! // Or by URL, as `agent_memory::open` does.
//! let same_file = agent_memory::open("sqlite:/var/lib/my-agent/memories.db")?;
//!
//! store.start().await?; // creates the folder, the file and the schema on first use
//! let scope = MemoryScope::new("support-bot", "user-42")?;
//! store.put(&scope, "tone", MemoryWrite::new("Prefers short answers")).await?;
//! store.close().await?;
//! # Ok::<(), agent_memory::MemoryError>(())
//! # }).unwrap();
//! ```
//!
//! # Opening
//!
//! - [`SqliteMemoryStore::new`]`(path)` and [`SqliteMemoryStore::builder`]`(path)…build()`.
//! - [`SqliteMemoryStore::from_url`] (what [`open`](crate::open) calls) accepts `sqlite:PATH`
//!   and `sqlite://PATH`, both naming `PATH` exactly as written: `sqlite:data/m.db` and
//!   `sqlite://data/m.db` are relative to the working directory, `sqlite:/srv/m.db` and
//!   `sqlite:///srv/m.db` are absolute. A `?` starts options: `?mode=ro` opens read-only and
//!   `?mode=rwc` (the default) read-write, creating the file. Nothing else is recognised, so a
//!   path containing `?` must be given to the typed constructor. `sqlite::memory:` is refused:
//!   use `memory:`.
//! - [`SqliteMemoryStore::at_default_path`]: the file the CLI and the MCP server use when no
//!   store is named, [`default_sqlite_path`](crate::default_sqlite_path) (`memories.db` in an
//!   `agent-memory` folder of the user's data directory: `$XDG_DATA_HOME`, else
//!   `~/.local/share`, on Linux).
//!
//! Building a store touches nothing. [`start`](MemoryStore::start) creates the parent folder
//! (unless read-only), opens the file and creates or checks the schema. Operations before
//! `start()` or after [`close`](MemoryStore::close) return
//! [`Storage`](crate::MemoryError::Storage). `start()` after `close()` opens the file again.
//!
//! # What `start()` accepts
//!
//! `start()` first only *reads* the file (its header and its list of tables), then decides:
//!
//! | the file | `start()` |
//! | --- | --- |
//! | absent or zero bytes, or a SQLite database with no tables and no identifying header | claims it: switches it to WAL and creates the schema in one transaction |
//! | an agent-memory database of this schema version | checks every table and column, then uses it |
//! | an agent-memory database of a newer schema version | `Storage` ("written by a newer release") |
//! | not a SQLite database, or another application's database | `Storage`, and the file is left byte for byte as it was |
//!
//! # Schema (version 1)
//!
//! ```sql
//! CREATE TABLE memory_records (
//!     app_id TEXT NOT NULL COLLATE BINARY,  user_id TEXT NOT NULL COLLATE BINARY,
//!     namespace TEXT NOT NULL COLLATE BINARY,          -- '' is the default namespace
//!     key TEXT NOT NULL COLLATE BINARY,
//!     content TEXT NOT NULL,  metadata TEXT NOT NULL,  -- metadata: a compact JSON object
//!     source_session TEXT,  source_invocation TEXT,  source_agent TEXT,
//!     revision INTEGER NOT NULL,
//!     created_at INTEGER NOT NULL,  updated_at INTEGER NOT NULL,  expires_at INTEGER,
//!     PRIMARY KEY (app_id, user_id, namespace, key)
//! ) STRICT, WITHOUT ROWID;
//! CREATE TABLE memory_meta (name TEXT NOT NULL PRIMARY KEY, value INTEGER NOT NULL)
//!     STRICT, WITHOUT ROWID;                           -- one row: 'last_revision'
//! PRAGMA application_id = 0x41474D45;                  -- "AGME": marks the file as ours
//! PRAGMA user_version = 1;                             -- the schema version, for migrations
//! ```
//!
//! - **Isolation.** The scope is four separate columns of the primary key, never a joined
//!   string, so no choice of ids can make two scopes share a row. Every statement names all of
//!   them in its `WHERE` clause and binds every value as a parameter.
//! - **Byte order.** `BINARY` collation compares with `memcmp`, which on UTF-8 is the byte
//!   order the contract asks for. The default namespace is stored as `""`, which sorts first.
//! - **One B-tree.** `WITHOUT ROWID` keeps each record in the primary-key B-tree itself: a
//!   `get` is one index descent, and `list` walks consecutive leaf cells. Per-operation cost
//!   grows with the logarithm of the table, so it stays flat as the file grows. Records are
//!   expected to be small (a sentence or a paragraph); a large content spills into overflow
//!   pages, which costs extra reads for that record only.
//! - **Times** are integer microseconds since the Unix epoch. "Now" comes from the store's
//!   [`Clock`] (the system clock unless [`builder`](SqliteMemoryStore::builder) got another) and
//!   is bound into every statement that tests expiry, so an injected clock decides expiry
//!   exactly as it does for [`InMemoryStore`](crate::InMemoryStore).
//! - **Revisions** come from one database-wide counter (`memory_meta.last_revision`) that is
//!   incremented in the same transaction as the write; the token is the counter in lowercase
//!   hex. A key can therefore never see a revision twice, not after delete and re-create, not
//!   after `delete_user`, and not across processes. The counter names no user, so erasure
//!   leaves nothing behind. (Restoring an older copy of the file rewinds the counter, as it
//!   rewinds the records.)
//!
//! # Writes and concurrency
//!
//! - Every write runs in a `BEGIN IMMEDIATE` transaction: the condition check of a
//!   compare-and-set (`expected_revision`, `create_only`, delete with a revision) and the write
//!   happen under SQLite's write lock, so they are one atomic step even between processes.
//! - SQLite calls block, so no connection is ever used on an async runtime's thread. A started
//!   store owns one writer thread with the writer connection and a few reader threads
//!   ([`readers`](SqliteMemoryStoreBuilder::readers), 4 by default), each with a read-only
//!   connection; operations are handed to them over channels and their replies awaited. This
//!   also works outside a Tokio runtime. Opening and closing run on Tokio's blocking pool.
//! - **Group commit.** The writer thread runs all writes waiting at that moment (up to 64) in
//!   one transaction, each in its own savepoint: a write that fails (a conflict) is undone
//!   alone, the others commit together, and every caller gets its reply only after `COMMIT`.
//!   Under concurrent load this turns many small commits into few larger ones. If a commit
//!   fails, every write of the group gets `Storage`.
//! - Reads run in parallel on the readers and, thanks to WAL, never wait for writers. A read
//!   issued after a write was acknowledged sees it. Statements are prepared once per
//!   connection and cached, and plans do not depend on bound values (SQLite's query planner
//!   stability guarantee is on), so nothing is re-planned per call. Each connection keeps a
//!   16 MiB page cache and reads the first 1 GiB of the file through a memory map (address
//!   space only: the mapped pages are the operating system's file cache, shared by every
//!   connection), so reads of a large file skip a `read` call and a copy per page.
//! - The threads are named `amem-sql-writer` and `amem-sql-reader`, for `top -H` and
//!   debuggers. Dropping a store without `close()` lets them finish queued work and exit.
//! - `journal_mode=WAL` lets readers and one writer work at once, in this process and in
//!   others. When another process holds the write lock, a writer waits up to the
//!   [`busy_timeout`](SqliteMemoryStoreBuilder::busy_timeout) (5 s by default) before giving up
//!   with a `Storage` error; under normal load nobody waits anywhere near that long.
//! - `delete_all` and `delete_user` erase in transactions of at most 1,000 records, so another
//!   process is never locked out for long; after a failure, calling again removes what is left.
//! - `search` inspects at most 1,000 keys per call and may return an empty page with a cursor.
//!
//! # Erasure
//!
//! `delete`, `delete_all`, `delete_user` and `purge_expired` remove rows, and the writer runs
//! with `PRAGMA secure_delete = ON`, so the removed content is overwritten with zeros in the
//! database file rather than left in free space. The revision counter names no user. Older
//! copies of changed pages can remain in the write-ahead log (`FILE-wal`) until the log is
//! reused, which happens as writing goes on, and the log is removed when the last connection
//! closes; `PRAGMA wal_checkpoint(TRUNCATE)` (for example from the `sqlite3` shell) empties it
//! at once.
//!
//! # Durability
//!
//! A `put` returns only after its transaction committed to the write-ahead log. With the
//! default [`Synchronous::Normal`], the log is handed to the operating system on every commit
//! and flushed to the disk at checkpoints: an acknowledged write survives the process being
//! killed (even with `SIGKILL`), but the last transactions before a power loss or an operating
//! system crash may be lost (the file itself stays consistent). [`Synchronous::Full`] flushes
//! the log to the disk on every commit, which survives power loss at the price of one `fsync`
//! per write.
//!
//! # Read-only use
//!
//! [`read_only(true)`](SqliteMemoryStoreBuilder::read_only) (or `?mode=ro`) opens the file with
//! `SQLITE_OPEN_READONLY`: reads work, every write returns `Storage` before touching the file,
//! and nothing (not even the folder) is created. A file the process cannot write to (mode
//! `0444` for an ordinary user) behaves the same way for writes, which fail with `Storage`.
//! Note that `root` can write to any file whatever its mode, so a program running as root that
//! must not change a file has to ask for read-only explicitly.
//!
//! # Errors
//!
//! Every SQLite error becomes [`Storage`](crate::MemoryError::Storage) with a fixed description
//! of the step that failed (or of the condition: locked past the busy timeout, read-only, not a
//! database, disk full). Its `Display` never contains SQL, paths or memory content; the driver
//! error is kept as its `source()` for operators.

mod error;
mod ops;
mod pool;
mod schema;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rusqlite::Connection;

use self::error::{background, detected, PROVIDER};
use self::pool::Pool;
use crate::error::{MemoryError, Result};
use crate::page::{CursorKind, MemoryCleanupPage, MemoryPage, NamespacePage, PageRequest};
use crate::record::{MemoryRecord, Revision};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::time::{Clock, SystemClock};
use crate::validation;
use crate::write::MemoryWrite;

/// Default time a writer waits for another connection's write lock.
const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Default number of reader connections.
const DEFAULT_READERS: usize = 4;
/// Page cache per connection, in KiB.
const CACHE_KIB: u32 = 16 * 1024;
/// Bytes of the file each connection reads through a memory map instead of `read` calls.
const MMAP_BYTES: u64 = 1024 * 1024 * 1024;

/// How hard SQLite pushes each commit to the disk (`PRAGMA synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `NORMAL` (the default): every acknowledged write survives the process being killed; a
    /// power loss or an operating system crash may lose the last commits, never consistency.
    #[default]
    Normal,
    /// `FULL`: every commit is flushed to the disk before `put` returns, so acknowledged writes
    /// survive power loss too. Slower: one `fsync` per write.
    Full,
}

/// Settings fixed when the store is built.
#[derive(Debug, Clone)]
struct Settings {
    busy_timeout: Duration,
    synchronous_full: bool,
    read_only: bool,
    readers: usize,
    cache_kib: u32,
    mmap_bytes: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            synchronous_full: false,
            read_only: false,
            readers: DEFAULT_READERS,
            cache_kib: CACHE_KIB,
            mmap_bytes: MMAP_BYTES,
        }
    }
}

/// Memories in one SQLite file; see the [module docs](self) for the schema and guarantees.
pub struct SqliteMemoryStore {
    path: PathBuf,
    clock: Arc<dyn Clock>,
    settings: Settings,
    pool: RwLock<Option<Arc<Pool>>>,
    lifecycle: tokio::sync::Mutex<()>,
}

/// Builds a [`SqliteMemoryStore`] with options; start from [`SqliteMemoryStore::builder`].
#[derive(Debug)]
pub struct SqliteMemoryStoreBuilder {
    path: PathBuf,
    clock: Arc<dyn Clock>,
    settings: Settings,
}

impl SqliteMemoryStoreBuilder {
    /// Reads "now" from `clock` for timestamps and expiry (default: the system clock). Tests
    /// pass a [`ManualClock`](crate::ManualClock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How long a write waits for another connection's write lock before failing with
    /// `Storage` (default 5 seconds).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.settings.busy_timeout = timeout;
        self
    }

    /// How hard each commit is pushed to the disk (default [`Synchronous::Normal`]).
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.settings.synchronous_full = synchronous == Synchronous::Full;
        self
    }

    /// Opens the file read-only: reads work, writes return `Storage`, nothing is created.
    /// The file must already hold an agent-memory database.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.settings.read_only = read_only;
        self
    }

    /// How many reads run in parallel, each on its own connection (default 4, at least 1).
    pub fn readers(mut self, readers: usize) -> Self {
        self.settings.readers = readers.max(1);
        self
    }

    /// The unstarted store.
    pub fn build(self) -> SqliteMemoryStore {
        SqliteMemoryStore {
            path: self.path,
            clock: self.clock,
            settings: self.settings,
            pool: RwLock::new(None),
            lifecycle: tokio::sync::Mutex::new(()),
        }
    }
}

impl SqliteMemoryStore {
    /// An unstarted store on the file at `path` with default options.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::builder(path).build()
    }

    /// A builder for a store on the file at `path`.
    pub fn builder(path: impl Into<PathBuf>) -> SqliteMemoryStoreBuilder {
        SqliteMemoryStoreBuilder {
            path: path.into(),
            clock: Arc::new(SystemClock),
            settings: Settings::default(),
        }
    }

    /// An unstarted store from `sqlite:PATH` or `sqlite://PATH`, optionally followed by
    /// `?mode=ro` (read-only) or `?mode=rwc` (read-write, the default). See the
    /// [module docs](self#opening).
    ///
    /// ```
    /// use agent_memory::SqliteMemoryStore;
    ///
    /// let store = SqliteMemoryStore::from_url("sqlite:///srv/agent/memories.db?mode=ro")?;
    /// assert_eq!(store.path(), std::path::Path::new("/srv/agent/memories.db"));
    /// assert!(store.is_read_only());
    /// assert!(SqliteMemoryStore::from_url("sqlite:").is_err());
    /// # Ok::<(), agent_memory::MemoryError>(())
    /// ```
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` for another scheme, an empty path,
    /// `:memory:`, or an unknown option. The message never repeats the URL.
    pub fn from_url(url: &str) -> Result<Self> {
        const SCHEME: &str = "sqlite:";
        let rest = url
            .get(..SCHEME.len())
            .filter(|scheme| scheme.eq_ignore_ascii_case(SCHEME))
            .and_then(|_| url.get(SCHEME.len()..))
            .ok_or_else(|| MemoryError::invalid("url", "is not a sqlite: URL"))?;
        let rest = rest.strip_prefix("//").unwrap_or(rest);
        let (path, options) = match rest.split_once('?') {
            Some((path, options)) => (path, options),
            None => (rest, ""),
        };
        let read_only = match options {
            "" | "mode=rwc" => false,
            "mode=ro" => true,
            _ => {
                return Err(MemoryError::invalid(
                    "url",
                    "has an unknown option: only mode=ro and mode=rwc are recognised",
                ))
            }
        };
        if path.is_empty() {
            return Err(MemoryError::invalid("url", "names no file"));
        }
        if path == ":memory:" {
            return Err(MemoryError::invalid(
                "url",
                "names an in-memory SQLite database: use memory: instead",
            ));
        }
        Ok(Self::builder(path).read_only(read_only).build())
    }

    /// An unstarted store on [`default_sqlite_path`](crate::default_sqlite_path), the file the
    /// CLI and the MCP server use when no store is named. `start()` creates it.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) when the system reports no data directory.
    pub fn at_default_path() -> Result<Self> {
        Ok(Self::new(crate::default_sqlite_path()?))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when the store was built read-only.
    pub fn is_read_only(&self) -> bool {
        self.settings.read_only
    }

    fn pool(&self) -> Result<Arc<Pool>> {
        self.pool
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| MemoryError::not_started(PROVIDER))
    }

    /// Runs `f` on a reader thread and awaits its reply.
    async fn reading<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        // The pool handle is dropped before waiting, so `close()` never waits for callers.
        let reply = self.pool()?.read(f)?;
        reply.await.map_err(|_| detected("a database task stopped before replying"))?
    }

    /// Runs `f` on the writer thread and awaits its reply, which comes after the commit.
    async fn writing<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let pool = self.pool()?;
        if self.settings.read_only {
            return Err(detected("the store was opened read-only"));
        }
        let reply = pool.write(f)?;
        drop(pool);
        reply.await.map_err(|_| detected("a database task stopped before replying"))?
    }
}

/// Runs blocking work (opening or closing the file) on Tokio's blocking pool, or inline
/// outside a Tokio runtime.
async fn off_runtime<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.spawn_blocking(f).await.map_err(background)?,
        Err(_) => f(),
    }
}

impl fmt::Debug for SqliteMemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let started = self.pool.read().unwrap_or_else(PoisonError::into_inner).is_some();
        f.debug_struct("SqliteMemoryStore")
            .field("path", &self.path)
            .field("read_only", &self.settings.read_only)
            .field("started", &started)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl MemoryStore for SqliteMemoryStore {
    async fn start(&self) -> Result<()> {
        let _lifecycle = self.lifecycle.lock().await;
        if self.pool().is_ok() {
            return Ok(());
        }
        let path = self.path.clone();
        let settings = self.settings.clone();
        let pool = off_runtime(move || {
            if !settings.read_only {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent).map_err(|err| {
                        MemoryError::storage_from(
                            PROVIDER,
                            "creating the database folder failed",
                            err,
                        )
                    })?;
                }
            }
            Pool::open(&path, &settings)
        })
        .await?;
        *self.pool.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(pool));
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        let _lifecycle = self.lifecycle.lock().await;
        let Some(pool) = self.pool.write().unwrap_or_else(PoisonError::into_inner).take() else {
            return Ok(());
        };
        match Arc::try_unwrap(pool) {
            // Queued operations finish first; then the threads close their connections.
            Ok(pool) => off_runtime(move || pool.close()).await,
            // A caller is handing over a job this instant; its handle is the last one, and
            // dropping it stops the threads once their queues are empty.
            Err(_) => Ok(()),
        }
    }

    async fn put(
        &self,
        scope: &MemoryScope,
        key: &str,
        write: MemoryWrite,
    ) -> Result<MemoryRecord> {
        let now = self.clock.now();
        write.validate(key, now)?;
        let (scope, key, parts) = (scope.clone(), key.to_owned(), write.into_parts());
        self.writing(move |conn| ops::put(conn, &scope, &key, parts, now)).await
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        validation::key(key)?;
        let now = self.clock.now();
        let (scope, key) = (scope.clone(), key.to_owned());
        self.reading(move |conn| ops::get(conn, &scope, &key, now)).await
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        let page = page.key_page(CursorKind::List, scope)?;
        let now = self.clock.now();
        let scope = scope.clone();
        self.reading(move |conn| ops::list(conn, &scope, &page, now)).await
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        validation::query(query)?;
        let page = page.key_page(CursorKind::Search, scope)?;
        let now = self.clock.now();
        let (scope, query) = (scope.clone(), query.to_owned());
        self.reading(move |conn| ops::search(conn, &scope, &query, &page, now)).await
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool> {
        validation::key(key)?;
        let now = self.clock.now();
        let (scope, key, expected) = (scope.clone(), key.to_owned(), expected_revision.cloned());
        self.writing(move |conn| ops::delete(conn, &scope, &key, expected.as_ref(), now)).await
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let mut removed = 0;
        loop {
            let scope = scope.clone();
            let batch = self.writing(move |conn| ops::erase_namespace_batch(conn, &scope)).await?;
            removed += batch;
            if batch < ops::ERASE_BATCH {
                return Ok(removed);
            }
        }
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        validation::user(application_id, user_id)?;
        let mut removed = 0;
        loop {
            let (app, user) = (application_id.to_owned(), user_id.to_owned());
            let batch = self.writing(move |conn| ops::erase_user_batch(conn, &app, &user)).await?;
            removed += batch;
            if batch < ops::ERASE_BATCH {
                return Ok(removed);
            }
        }
    }

    async fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> Result<NamespacePage> {
        let page = page.namespace_page(application_id, user_id)?;
        let (app, user) = (application_id.to_owned(), user_id.to_owned());
        self.reading(move |conn| ops::list_namespaces(conn, &app, &user, &page)).await
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        let page = page.key_page(CursorKind::Purge, scope)?;
        let now = self.clock.now();
        let scope = scope.clone();
        self.writing(move |conn| ops::purge_expired(conn, &scope, &page, now)).await
    }
}
