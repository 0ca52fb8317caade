#![doc = include_str!("docs.md")]

mod error;
mod pool;
mod schema;
mod statements;

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
        self.writing(move |conn| statements::put(conn, &scope, &key, parts, now)).await
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        validation::key(key)?;
        let now = self.clock.now();
        let (scope, key) = (scope.clone(), key.to_owned());
        self.reading(move |conn| statements::get(conn, &scope, &key, now)).await
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        let page = page.key_page(CursorKind::List, scope)?;
        let now = self.clock.now();
        let scope = scope.clone();
        self.reading(move |conn| statements::list(conn, &scope, &page, now)).await
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
        self.reading(move |conn| statements::search(conn, &scope, &query, &page, now)).await
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
        self.writing(move |conn| statements::delete(conn, &scope, &key, expected.as_ref(), now))
            .await
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let mut removed = 0;
        loop {
            let scope = scope.clone();
            let batch =
                self.writing(move |conn| statements::erase_namespace_batch(conn, &scope)).await?;
            removed += batch;
            if batch < statements::ERASE_BATCH {
                return Ok(removed);
            }
        }
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        validation::user(application_id, user_id)?;
        let mut removed = 0;
        loop {
            let (app, user) = (application_id.to_owned(), user_id.to_owned());
            let batch =
                self.writing(move |conn| statements::erase_user_batch(conn, &app, &user)).await?;
            removed += batch;
            if batch < statements::ERASE_BATCH {
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
        self.reading(move |conn| statements::list_namespaces(conn, &app, &user, &page)).await
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        let page = page.key_page(CursorKind::Purge, scope)?;
        let now = self.clock.now();
        let scope = scope.clone();
        self.writing(move |conn| statements::purge_expired(conn, &scope, &page, now)).await
    }
}
