#![doc = include_str!("docs.md")]

mod codec;
mod config;
mod error;
mod files;
mod pool;
mod schema;
mod statements;

use crate::provider::PageRequestExt;
use crate::write::WriteParts;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use self::config::Options;
pub use self::config::{SqliteMemoryStoreBuilder, Synchronous};
use self::error::{detected, PROVIDER};
use self::pool::{off_runtime, Job, Pool};
/// The SQL that lays out a new file's tables and triggers, shared with the bench's ceiling.
#[doc(hidden)]
pub use self::schema::SCHEMA_SQL;
use crate::error::{MemoryError, Result};
use crate::page::{
    ApplicationPage, CursorKind, KeyInfoPage, MemoryCleanupPage, MemoryPage, NamespacePage,
    PageRequest, UserPage, DEFAULT_PAGE_LIMIT,
};
use crate::provider::SearchScan;
use crate::record::{MemoryRecord, Revision};
use crate::scope::MemoryScope;
// The trait comes from `observe`'s one instrumented impl; the docs still link to it.
#[cfg(doc)]
use crate::store::MemoryStore;
use crate::time::Clock;
use crate::validation;
use crate::write::MemoryWrite;

/// Memories in one SQLite file; see the [module docs](self) for the schema and guarantees.
pub struct SqliteMemoryStore {
    path: PathBuf,
    clock: Arc<dyn Clock>,
    options: Options,
    pool: RwLock<Option<Arc<Pool>>>,
    lifecycle: tokio::sync::Mutex<()>,
}

impl SqliteMemoryStore {
    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when the store was built read-only.
    pub fn is_read_only(&self) -> bool {
        self.options.read_only
    }

    /// The budget of one `search` or filtered `list` call.
    fn scan_budget(&self) -> SearchScan {
        self.options.common.search_scan()
    }

    /// [`erase_batch_size`](SqliteMemoryStoreBuilder::erase_batch_size) as a count of rows.
    fn erase_batch_size(&self) -> u64 {
        u64::try_from(self.options.common.erase_batch_size).unwrap_or(u64::MAX)
    }

    fn pool(&self) -> Result<Arc<Pool>> {
        self.pool
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| MemoryError::not_started(PROVIDER))
    }

    /// Runs `f` on a reader thread and awaits its reply.
    async fn reading<T: Send + 'static>(&self, f: impl Job<T>) -> Result<T> {
        // The pool handle is dropped before waiting, so `close()` never waits for callers.
        let reply = self.pool()?.read(f)?;
        reply.await.map_err(|_| detected("a database task stopped before replying"))?
    }

    /// Runs `f` on the writer thread and awaits its reply, which comes after the commit.
    async fn writing<T: Send + 'static>(&self, f: impl Job<T>) -> Result<T> {
        let pool = self.pool()?;
        if self.options.read_only {
            return Err(detected("the store was opened read-only"));
        }
        let reply = pool.write(f)?;
        drop(pool);
        reply.await.map_err(|_| detected("a database task stopped before replying"))?
    }

    /// Runs the write of one record `f` on this thread when no write is queued and the
    /// writer's connection is free (see "Lone writes run where they are asked" in `pool`), and
    /// on the writer thread as [`writing`](Self::writing) does otherwise.
    async fn writing_one<T: Send + 'static>(&self, f: impl Job<T>) -> Result<T> {
        if self.options.read_only {
            return Err(detected("the store was opened read-only"));
        }
        match self.pool()?.write_here(f) {
            Ok(done) => done,
            Err(f) => self.writing(f).await,
        }
    }

    /// After an erasure, best effort: moves the zeroed pages into the database file and empties
    /// the write-ahead log, so neither file keeps the erased content (see "Erasure" in the
    /// module docs). A failure or a reader still on the log leaves the erasure itself intact
    /// (it has committed) and is only logged; the log is emptied by a later checkpoint.
    async fn truncate_log(&self) {
        let Ok(pool) = self.pool() else { return };
        let Ok(reply) = pool.checkpoint() else { return };
        drop(pool);
        match reply.await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => {
                tracing::debug!(
                    "the write-ahead log was in use; erased pages reach the file later"
                );
            }
            Ok(Err(err)) => {
                tracing::debug!(error = %err, "checkpointing after an erasure failed");
            }
            Err(_) => {}
        }
    }
}

/// No `db.namespace`: the only name a file has is its path, which stays out of telemetry.
impl crate::observe::Telemetry for SqliteMemoryStore {
    fn system(&self) -> &'static str {
        "sqlite"
    }
}

impl crate::observe::Backend for SqliteMemoryStore {
    async fn start(&self) -> Result<()> {
        let _lifecycle = self.lifecycle.lock().await;
        if self.pool().is_ok() {
            return Ok(());
        }
        let path = self.path.clone();
        let options = self.options.clone();
        let pool = off_runtime(move || {
            if options.read_only {
                // Opening read-only creates nothing.
            } else if options.create {
                files::create_private(&path)?;
            } else if !path.exists() {
                return Err(MemoryError::invalid(
                    "path",
                    "names no database file, and this store opens existing files only (mode=rw)",
                ));
            }
            Pool::open(&path, &options)
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
        let (scope, key, parts) = (scope.clone(), key.to_owned(), WriteParts::from(write));
        let quotas = self.options.common.quotas;
        self.writing_one(move |conn| statements::put(conn, &scope, &key, parts, now, &quotas)).await
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        validation::key(key)?;
        let now = self.clock.now();
        // A point read runs on this thread when a reader connection is free (see "Point reads
        // run where they are asked" in `pool`), and waits for a reader thread otherwise.
        let here = self.pool()?.read_here(|conn| statements::get(conn, scope, key, now));
        if let Ok(found) = here {
            return found;
        }
        let (scope, key) = (scope.clone(), key.to_owned());
        self.reading(move |conn| statements::get(conn, &scope, &key, now)).await
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        let page = page.key_page(CursorKind::List, scope)?;
        let now = self.clock.now();
        if !page.metadata.is_empty() {
            // A filter may pass few records: a bounded scan, as `search` is.
            let (scope, scan) = (scope.clone(), self.scan_budget());
            return self
                .reading(move |conn| statements::scan(conn, &scope, None, &page, now, scan))
                .await;
        }
        // A page of at most the default size is a short range read (see "Point reads run where
        // they are asked" in `pool`); a larger one goes to a reader thread.
        if page.limit <= DEFAULT_PAGE_LIMIT {
            let here = self.pool()?.read_here(|conn| statements::list(conn, scope, &page, now));
            if let Ok(found) = here {
                return found;
            }
        }
        let scope = scope.clone();
        self.reading(move |conn| statements::list(conn, &scope, &page, now)).await
    }

    async fn list_keys(&self, scope: &MemoryScope, page: PageRequest) -> Result<KeyInfoPage> {
        let page = page.key_page(CursorKind::Keys, scope)?;
        let now = self.clock.now();
        let scope = scope.clone();
        self.reading(move |conn| statements::list_keys(conn, &scope, &page, now)).await
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        let page = page.key_page(CursorKind::Search, scope)?;
        let matcher = page.matcher(query)?;
        let now = self.clock.now();
        let scope = scope.clone();
        let scan = self.scan_budget();
        self.reading(move |conn| statements::scan(conn, &scope, Some(&matcher), &page, now, scan))
            .await
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
        self.writing_one(move |conn| statements::delete(conn, &scope, &key, expected.as_ref(), now))
            .await
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let size = self.options.common.erase_batch_size;
        let mut removed = 0;
        loop {
            let scope = scope.clone();
            let batch = self
                .writing(move |conn| statements::erase_namespace_batch(conn, &scope, size))
                .await?;
            removed += batch;
            // Each batch is its own transaction, so other writers get the lock in between; a
            // batch short of the size means nothing is left.
            if batch < self.erase_batch_size() {
                self.truncate_log().await;
                return Ok(removed);
            }
        }
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        validation::user(application_id, user_id)?;
        let size = self.options.common.erase_batch_size;
        let mut removed = 0;
        loop {
            let (app, user) = (application_id.to_owned(), user_id.to_owned());
            let batch = self
                .writing(move |conn| statements::erase_user_batch(conn, &app, &user, size))
                .await?;
            removed += batch;
            if batch < self.erase_batch_size() {
                self.truncate_log().await;
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

    async fn list_users(&self, application_id: &str, page: PageRequest) -> Result<UserPage> {
        let page = page.user_page(application_id)?;
        let app = application_id.to_owned();
        self.reading(move |conn| statements::list_users(conn, &app, &page)).await
    }

    async fn list_applications(&self, page: PageRequest) -> Result<ApplicationPage> {
        let page = page.application_page()?;
        self.reading(move |conn| statements::list_applications(conn, &page)).await
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
