//! [`PostgresMemoryStore`]: shared, durable memory in PostgreSQL for many replicas (feature
//! `postgres`).
//!
//! ```no_run
//! # async fn demo() -> agent_memory::Result<()> {
//! use std::time::Duration;
//! use agent_memory::{MemoryScope, MemoryStore, MemoryWrite, PostgresMemoryStore};
//!
//! let store = PostgresMemoryStore::builder("postgres://app:secret@db.internal/memories")?
//!     .max_connections(32)
//!     .min_connections(4)
//!     .connect_timeout(Duration::from_secs(5))
//!     .table("agent_memory_records")
//!     .build()?;
//! store.start().await?; // creates the table if needed, then checks it
//! let scope = MemoryScope::new("support-bot", "user-42")?;
//! store.put(&scope, "tone", MemoryWrite::new("Prefers short answers")).await?;
//! # Ok(()) }
//! ```
//!
//! [`open`](crate::open) accepts the same URL (`postgres://…` or `postgresql://…`). Besides the
//! driver's own parameters (`connect_timeout`, `application_name`, `options`, …) the URL may
//! carry `schema`, `table`, `min_connections`, `max_connections` and `setup_schema`
//! (`true`/`false`), which configure the store and are not passed to the server.
//!
//! # Schema
//!
//! One table (default `public.agent_memory_records`; [`schema`](PostgresStoreBuilder::schema)
//! and [`table`](PostgresStoreBuilder::table) change it) and a sequence owned by it:
//!
//! ```sql
//! CREATE TABLE "public"."agent_memory_records" (
//!     app        text COLLATE "C" NOT NULL,   -- application id
//!     user_id    text COLLATE "C" NOT NULL,
//!     namespace  text COLLATE "C" NOT NULL,   -- '' is the default namespace
//!     key        text COLLATE "C" NOT NULL,
//!     content    text        NOT NULL,
//!     metadata   jsonb       NOT NULL,
//!     source     jsonb       NOT NULL,        -- {"session_id", "invocation_id", "agent"}
//!     revision   bigint      NOT NULL,        -- from the sequence below
//!     created_at timestamptz NOT NULL,
//!     updated_at timestamptz NOT NULL,
//!     expires_at timestamptz,
//!     PRIMARY KEY (app, user_id, namespace, key)
//! );
//! CREATE SEQUENCE "public"."agent_memory_records_revision_seq" AS bigint NO CYCLE;
//! COMMENT ON TABLE "public"."agent_memory_records" IS 'agent-memory schema v1';
//! ```
//!
//! [`PostgresMemoryStore::schema_sql`] prints the exact DDL for a configured store, for
//! operators who provision the table themselves and run the store with
//! [`setup_schema(false)`](PostgresStoreBuilder::setup_schema).
//!
//! - **Isolation.** The scope is four separate columns, never a joined string, so no id can
//!   collide with another whatever characters it holds; every statement binds all of them.
//! - **Byte order.** The scope and key columns use `COLLATE "C"`, so the primary key index
//!   orders keys and namespaces by UTF-8 bytes, exactly as the contract pages them. The
//!   primary key serves every operation: no other index, no extension.
//! - **Revisions** come from the table's own sequence (`nextval`), which never hands out a
//!   number twice, so a key never sees the same revision again, not even after delete and
//!   re-create. Tokens are the decimal numbers. Gaps are normal.
//! - **Time** is the server's: `now()` stamps writes and decides expiry, so replicas with
//!   skewed clocks agree. Validation checks that a new `expires_at` is in the future by the
//!   local clock before any I/O.
//! - **Schema version.** The table comment records the version (`agent-memory schema v1`);
//!   `start()` refuses a table with another or no version, so a future migration has a
//!   place to start from.
//! - **Setup.** With `setup_schema(true)` (the default) `start()` takes a transaction-scoped
//!   advisory lock, creates the schema, table and sequence if the table is missing, and
//!   commits; replicas starting together wait on the lock instead of racing on
//!   `CREATE … IF NOT EXISTS`. When the table already exists no DDL runs, so a role with only
//!   `SELECT, INSERT, UPDATE, DELETE` (and `USAGE` on the sequence) can start the store. Either
//!   way `start()` then checks the table's columns, types, nullability, collations, primary
//!   key, sequence, version and the database encoding (UTF8), and fails with a `Storage`
//!   error whose source lists every difference.
//!
//! # One statement, one round trip
//!
//! Every operation is one prepared statement (`prepare_cached`, so each connection parses it
//! once) sent in one round trip; the pool hands out connections without a health-check query
//! ([`RecyclingMethod::Fast`]: a connection the server closed is noticed by its I/O task and
//! dropped instead of reused).
//!
//! - `put` is `INSERT … ON CONFLICT … DO UPDATE … RETURNING`. `create_only` adds
//!   `WHERE <existing row expired>` to the update arm; `expected_revision` is an
//!   `UPDATE … WHERE revision = $n AND <live> RETURNING`. Zero rows back means `Conflict`, so
//!   the check and the write are one atomic statement. `created_at` is kept when the replaced
//!   row is live and reset when it had expired (a `CASE` on `expires_at <= now()`).
//! - `get`, `list` read through the primary key and skip expired rows with
//!   `expires_at IS NULL OR expires_at > now()`.
//! - `search` is `strpos(content, $query) > 0`: literal and case-sensitive by construction
//!   (no `LIKE`, so `%`, `_` and `\` need no escaping). Each call inspects at most
//!   [`search_scan_limit`](PostgresStoreBuilder::search_scan_limit) keys after the cursor
//!   (default 1,000); when that bound is reached before the page fills, it returns the matches
//!   found (possibly none) and a cursor at the last key inspected, so a user with a million
//!   non-matching records costs a bounded scan per call.
//! - `delete` is one `DELETE … RETURNING`; with an expected revision the revision and
//!   liveness are part of its `WHERE`.
//! - `delete_all` is one `DELETE` of the namespace.
//! - `delete_user` deletes in batches of
//!   [`delete_batch_size`](PostgresStoreBuilder::delete_batch_size) rows (default 1,000), each
//!   its own statement and transaction, so erasing a million records never holds one huge
//!   transaction; a user with fewer records than a batch takes one round trip. If it fails
//!   midway the batches already done stay done, and calling it again removes the rest.
//! - `list_namespaces` walks the primary key with a recursive query (one index probe per
//!   namespace), however many records each namespace holds.
//! - `purge_expired` inspects at most `limit` keys after the cursor and deletes the expired
//!   ones among them, in one statement.
//!
//! # Pool and faults
//!
//! [`deadpool_postgres`] keeps up to `max_connections` connections (default 16), opening them
//! on demand. `start()` opens `min_connections` of them (default 1) and prepares every
//! statement on them, so the first operations do not pay for connecting or parsing; deadpool
//! does not keep a floor afterwards, it reopens connections as load needs them.
//!
//! When a connection dies (the server restarted, an administrator ran
//! `pg_terminate_backend`, the network dropped), the operation using it returns `Storage` (a
//! write may have committed: read again, use revisions) and the connection is discarded; the
//! next operation opens a fresh one. Nothing is retried silently and the application never has
//! to restart the store. Getting a connection waits at most
//! [`acquire_timeout`](PostgresStoreBuilder::acquire_timeout) (default 30 s) when all are in
//! use, and connecting at most [`connect_timeout`](PostgresStoreBuilder::connect_timeout)
//! (default 10 s).
//!
//! # Why tokio-postgres with deadpool-postgres
//!
//! `tokio-postgres` is the mainstream native async PostgreSQL driver: binary protocol, explicit
//! prepared statements, and a request pipeline per connection, with little between our
//! statements and the wire. That matters because the provider's promise is one round trip per
//! operation at close to the speed of the bare statement. `deadpool-postgres` is its
//! standard pool: a per-connection statement cache (`prepare_cached`), a recycling mode with no
//! extra query per checkout, and recovery from dead connections by discarding them. `sqlx`
//! would also work, but brings its own query layer, a heavier row path and compile-time
//! machinery we do not use.
//!
//! Connections are plain TCP or Unix sockets ([`tokio_postgres::NoTls`]): use a private network,
//! a Unix socket, or a TLS-terminating proxy; a URL asking for `sslmode=require` fails to
//! connect rather than silently going without TLS.

mod error;
mod schema;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use serde_json::Value;
use tokio_postgres::error::Severity;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row, Statement};

use self::error::{storage, CorruptRow, PROVIDER};
use self::schema::{Names, Statements};
use crate::error::{MemoryError, Result};
use crate::page::{CursorKind, MemoryCleanupPage, MemoryPage, NamespacePage, PageRequest};
use crate::provider::{self, key_cursor, PageBuilder};
use crate::record::{MemoryRecord, Revision, Source};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::time::Timestamp;
use crate::validation;
use crate::write::{MemoryWrite, WriteCondition};

/// Default schema holding the table.
pub const DEFAULT_SCHEMA: &str = "public";
/// Default table name.
pub const DEFAULT_TABLE: &str = "agent_memory_records";
/// Default most connections the pool keeps.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;
/// Default connections `start()` opens ahead of use.
pub const DEFAULT_MIN_CONNECTIONS: usize = 1;
/// Default limit on opening one connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default limit on waiting for a free connection.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default most keys one `search` call inspects.
pub const DEFAULT_SEARCH_SCAN_LIMIT: usize = 1_000;
/// Default rows one `delete_user` batch removes.
pub const DEFAULT_DELETE_BATCH_SIZE: usize = 1_000;

/// Memories in a PostgreSQL table shared by any number of replicas.
///
/// Build it with [`builder`](Self::builder) (or [`from_url`](Self::from_url), or
/// [`open`](crate::open)), then call [`start`](MemoryStore::start). See the
/// [module docs](self) for the schema, the statements and how faults are handled.
pub struct PostgresMemoryStore {
    config: tokio_postgres::Config,
    options: Options,
    names: Names,
    sql: Statements,
    pool: RwLock<Option<Pool>>,
    lifecycle: tokio::sync::Mutex<()>,
}

#[derive(Debug, Clone)]
struct Options {
    min_connections: usize,
    max_connections: usize,
    connect_timeout: Duration,
    acquire_timeout: Duration,
    setup_schema: bool,
    search_scan_limit: usize,
    delete_batch_size: usize,
}

/// Typed configuration of a [`PostgresMemoryStore`], from
/// [`PostgresMemoryStore::builder`].
///
/// `Debug` shows where it connects, never the password.
#[derive(Clone)]
pub struct PostgresStoreBuilder {
    config: tokio_postgres::Config,
    options: Options,
    schema: String,
    table: String,
}

impl PostgresStoreBuilder {
    /// Most connections the pool keeps open (default 16). At least 1.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.options.max_connections = max;
        self
    }

    /// Connections `start()` opens and prepares ahead of use (default 1; 0 connects lazily,
    /// so `start()` then only checks the schema through one connection). At most
    /// `max_connections`.
    pub fn min_connections(mut self, min: usize) -> Self {
        self.options.min_connections = min;
        self
    }

    /// Longest wait for one new connection (default 10 s, or the URL's `connect_timeout`).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.options.connect_timeout = timeout;
        self
    }

    /// Longest wait for a free connection when all are busy (default 30 s).
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.options.acquire_timeout = timeout;
        self
    }

    /// Whether `start()` creates the table when it is missing (default `true`). With `false`
    /// it only checks a table someone provisioned (see
    /// [`PostgresMemoryStore::schema_sql`]) and fails if it differs.
    pub fn setup_schema(mut self, setup: bool) -> Self {
        self.options.setup_schema = setup;
        self
    }

    /// The schema holding the table (default `public`): ASCII letters, digits and
    /// underscores, at most 48 bytes.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The table name (default `agent_memory_records`), under the same rules as the schema.
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// Most keys one `search` call inspects before returning what it found with a cursor
    /// (default 1,000). At least 1.
    pub fn search_scan_limit(mut self, keys: usize) -> Self {
        self.options.search_scan_limit = keys;
        self
    }

    /// Rows each `delete_user` batch (one statement, one transaction) removes (default 1,000).
    /// At least 1.
    pub fn delete_batch_size(mut self, rows: usize) -> Self {
        self.options.delete_batch_size = rows;
        self
    }

    /// Checks the configuration and builds the (unstarted) store. Nothing connects yet.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) for a bad schema or table name, or pool and batch
    /// sizes out of range.
    pub fn build(self) -> Result<PostgresMemoryStore> {
        schema::identifier("schema", &self.schema)?;
        schema::identifier("table", &self.table)?;
        let o = &self.options;
        if o.max_connections == 0 {
            return Err(MemoryError::invalid("max_connections", "must be at least 1"));
        }
        if o.min_connections > o.max_connections {
            return Err(MemoryError::invalid("min_connections", "must not exceed max_connections"));
        }
        if o.search_scan_limit == 0 {
            return Err(MemoryError::invalid("search_scan_limit", "must be at least 1"));
        }
        if o.delete_batch_size == 0 {
            return Err(MemoryError::invalid("delete_batch_size", "must be at least 1"));
        }
        if o.connect_timeout.is_zero() || o.acquire_timeout.is_zero() {
            return Err(MemoryError::invalid("timeout", "must be longer than zero"));
        }
        let names = Names { schema: self.schema, table: self.table };
        let sql = Statements::new(&names);
        Ok(PostgresMemoryStore {
            config: self.config,
            options: self.options,
            names,
            sql,
            pool: RwLock::new(None),
            lifecycle: tokio::sync::Mutex::new(()),
        })
    }
}

impl fmt::Debug for PostgresStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStoreBuilder")
            .field("server", &Endpoint(&self.config))
            .field("schema", &self.schema)
            .field("table", &self.table)
            .field("options", &self.options)
            .finish()
    }
}

/// Hosts, ports, database and user of a connection config; never the password.
struct Endpoint<'a>(&'a tokio_postgres::Config);

impl fmt::Debug for Endpoint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hosts: Vec<String> = self
            .0
            .get_hosts()
            .iter()
            .map(|host| match host {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .collect();
        f.debug_struct("Endpoint")
            .field("hosts", &hosts)
            .field("ports", &self.0.get_ports())
            .field("dbname", &self.0.get_dbname())
            .field("user", &self.0.get_user())
            .finish()
    }
}

/// Splits the store's own parameters off a URL's query, leaving the driver's.
fn split_store_params(url: &str) -> Result<(String, Vec<(String, String)>)> {
    // A '?' before the last '@' would be inside the credentials.
    let search_from = url.rfind('@').unwrap_or(0);
    let Some(question) = url[search_from..].find('?').map(|i| i + search_from) else {
        return Ok((url.to_owned(), Vec::new()));
    };
    let (base, query) = (&url[..question], &url[question + 1..]);
    let mut driver = Vec::new();
    let mut ours = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "schema" | "table" | "min_connections" | "max_connections" | "setup_schema" => {
                ours.push((name.to_owned(), value.to_owned()));
            }
            _ => driver.push(pair),
        }
    }
    let url =
        if driver.is_empty() { base.to_owned() } else { format!("{base}?{}", driver.join("&")) };
    Ok((url, ours))
}

impl PostgresMemoryStore {
    /// A builder for a store on the server named by `url` (`postgres://user:pass@host:port/db`,
    /// `postgresql://…`, or the driver's `key=value` form), with the defaults above.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` when it cannot be parsed; the message
    /// never repeats the URL.
    pub fn builder(url: &str) -> Result<PostgresStoreBuilder> {
        let (driver_url, params) = split_store_params(url)?;
        let config: tokio_postgres::Config = driver_url
            .parse()
            .map_err(|_| MemoryError::invalid("url", "is not a valid PostgreSQL connection URL"))?;
        let connect_timeout =
            config.get_connect_timeout().copied().unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        let mut builder = PostgresStoreBuilder {
            config,
            options: Options {
                min_connections: DEFAULT_MIN_CONNECTIONS,
                max_connections: DEFAULT_MAX_CONNECTIONS,
                connect_timeout,
                acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
                setup_schema: true,
                search_scan_limit: DEFAULT_SEARCH_SCAN_LIMIT,
                delete_batch_size: DEFAULT_DELETE_BATCH_SIZE,
            },
            schema: DEFAULT_SCHEMA.to_owned(),
            table: DEFAULT_TABLE.to_owned(),
        };
        let number = |value: &str| {
            value
                .parse::<usize>()
                .map_err(|_| MemoryError::invalid("url", "has a non-numeric pool size"))
        };
        for (name, value) in params {
            builder = match name.as_str() {
                "schema" => builder.schema(value),
                "table" => builder.table(value),
                "min_connections" => builder.min_connections(number(&value)?),
                "max_connections" => builder.max_connections(number(&value)?),
                _ => match value.as_str() {
                    "true" | "1" | "on" => builder.setup_schema(true),
                    "false" | "0" | "off" => builder.setup_schema(false),
                    _ => {
                        return Err(MemoryError::invalid(
                            "url",
                            "has a setup_schema that is not true or false",
                        ))
                    }
                },
            };
        }
        Ok(builder)
    }

    /// A store with the defaults (or the URL's own parameters); what [`open`](crate::open)
    /// builds for `postgres://` URLs.
    ///
    /// # Errors
    /// As [`builder`](Self::builder) and [`PostgresStoreBuilder::build`].
    pub fn from_url(url: &str) -> Result<Self> {
        Self::builder(url)?.build()
    }

    /// The DDL `start()` runs for this store's table (schema, table, sequence, version
    /// comment), for operators who provision it themselves and use `setup_schema(false)`.
    pub fn schema_sql(&self) -> String {
        schema::create_sql(&self.names, true)
    }

    fn pool(&self) -> Result<Pool> {
        self.pool
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| MemoryError::not_started(PROVIDER))
    }

    async fn client(&self) -> Result<Conn> {
        let object = self
            .pool()?
            .get()
            .await
            .map_err(storage("could not get a connection from the pool"))?;
        Ok(Conn { object: Some(object), broken: AtomicBool::new(false) })
    }

    fn build_pool(&self) -> Result<Pool> {
        let mut config = self.config.clone();
        config.connect_timeout(self.options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("agent-memory");
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        Pool::builder(manager)
            .max_size(self.options.max_connections)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(self.options.connect_timeout))
            .wait_timeout(Some(self.options.acquire_timeout))
            .recycle_timeout(Some(self.options.connect_timeout))
            .build()
            .map_err(storage("could not build the connection pool"))
    }

    async fn open_pool(&self, pool: &Pool) -> Result<()> {
        let mut client = pool.get().await.map_err(storage("could not connect"))?;
        if self.options.setup_schema {
            schema::setup(&mut client, &self.names).await?;
        }
        schema::validate(&client, &self.names).await?;
        drop(client);
        let mut warm = Vec::with_capacity(self.options.min_connections);
        for _ in 0..self.options.min_connections {
            let client = pool.get().await.map_err(storage("could not connect"))?;
            for sql in self.sql.all() {
                client
                    .prepare_cached(sql)
                    .await
                    .map_err(storage("could not prepare a statement"))?;
            }
            warm.push(client);
        }
        Ok(())
    }
}

impl fmt::Debug for PostgresMemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let started = self.pool.read().unwrap_or_else(PoisonError::into_inner).is_some();
        f.debug_struct("PostgresMemoryStore")
            .field("server", &Endpoint(&self.config))
            .field("table", &self.names)
            .field("options", &self.options)
            .field("started", &started)
            .finish()
    }
}

/// A pooled connection that leaves the pool, instead of going back to it, once an error shows
/// it is broken.
///
/// The pool recycles without a health check, relying on the driver noticing closed sockets;
/// but when the server kills a session mid-query, the query sees the server's FATAL message a
/// moment before the driver's I/O task sees the socket close. Discarding the connection on such
/// errors means the next operation never gets it.
struct Conn {
    object: Option<Object>,
    broken: AtomicBool,
}

impl Conn {
    fn object(&self) -> Result<&Object> {
        self.object.as_ref().ok_or_else(|| MemoryError::not_started(PROVIDER))
    }

    /// Maps a driver result, marking the connection broken when the error says so.
    fn check<T>(
        &self,
        result: std::result::Result<T, tokio_postgres::Error>,
        what: &'static str,
    ) -> Result<T> {
        result.map_err(|err| {
            if connection_is_broken(&err) {
                self.broken.store(true, Ordering::Relaxed);
            }
            storage(what)(err)
        })
    }

    async fn prepare(&self, sql: &str) -> Result<Statement> {
        let result = self.object()?.prepare_cached(sql).await;
        self.check(result, "could not prepare a statement")
    }

    async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        let statement = self.prepare(sql).await?;
        let result = self.object()?.query(&statement, params).await;
        self.check(result, "the statement failed")
    }

    async fn query_opt(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>> {
        let statement = self.prepare(sql).await?;
        let result = self.object()?.query_opt(&statement, params).await;
        self.check(result, "the statement failed")
    }

    async fn query_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row> {
        let statement = self.prepare(sql).await?;
        let result = self.object()?.query_one(&statement, params).await;
        self.check(result, "the statement failed")
    }

    async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let statement = self.prepare(sql).await?;
        let result = self.object()?.execute(&statement, params).await;
        self.check(result, "the statement failed")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if self.broken.load(Ordering::Relaxed) {
            if let Some(object) = self.object.take() {
                drop(Object::take(object));
            }
        }
    }
}

/// Whether an error means the session is gone or unusable (rather than one statement failing):
/// the socket closed, an I/O or protocol error, a FATAL or PANIC from the server, or a
/// connection-exception (08) or operator-intervention (57P) SQLSTATE.
fn connection_is_broken(err: &tokio_postgres::Error) -> bool {
    if err.is_closed() {
        return true;
    }
    match err.as_db_error() {
        None => true,
        Some(db) => {
            let code = db.code().code();
            matches!(db.parsed_severity(), Some(Severity::Fatal | Severity::Panic))
                || code.starts_with("08")
                || code.starts_with("57P")
        }
    }
}

fn corrupt(what: &'static str) -> MemoryError {
    MemoryError::storage_from(PROVIDER, "a stored row could not be read", CorruptRow(what))
}

fn column<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, index: usize) -> Result<T> {
    row.try_get(index).map_err(storage("a stored row could not be read"))
}

fn to_system_time(at: Timestamp) -> SystemTime {
    // Timestamps are never before the epoch.
    UNIX_EPOCH + Duration::from_micros(u64::try_from(at.as_micros()).unwrap_or(0))
}

fn from_system_time(at: SystemTime) -> Result<Timestamp> {
    let since = at.duration_since(UNIX_EPOCH).map_err(|_| corrupt("a timestamp before 1970"))?;
    i64::try_from(since.as_micros())
        .ok()
        .and_then(|micros| Timestamp::from_micros(micros).ok())
        .ok_or_else(|| corrupt("a timestamp after year 9999"))
}

fn revision(number: i64) -> Result<Revision> {
    u64::try_from(number).map(|n| Revision::from_counter(n, 10)).map_err(|_| corrupt("a revision"))
}

/// The sequence number a revision token names; 0 (never issued) for a token this store could
/// not have produced, so the conditional statement finds no row and reports `Conflict`.
fn revision_number(revision: &Revision) -> i64 {
    let token = revision.as_str();
    token.parse::<i64>().ok().filter(|n| *n > 0 && n.to_string() == token).unwrap_or(0)
}

fn limit_param(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A record from a row laid out as `key, content, metadata, source, revision, created_at,
/// updated_at, expires_at`.
fn record(scope: &MemoryScope, row: &Row) -> Result<MemoryRecord> {
    let metadata = match column::<Value>(row, 2)? {
        Value::Object(map) => map,
        _ => return Err(corrupt("metadata that is not an object")),
    };
    let source: Source =
        serde_json::from_value(column::<Value>(row, 3)?).map_err(|_| corrupt("a source"))?;
    Ok(MemoryRecord {
        scope: scope.clone(),
        key: column(row, 0)?,
        content: column(row, 1)?,
        metadata,
        revision: revision(column(row, 4)?)?,
        created_at: from_system_time(column(row, 5)?)?,
        updated_at: from_system_time(column(row, 6)?)?,
        expires_at: column::<Option<SystemTime>>(row, 7)?.map(from_system_time).transpose()?,
        source,
    })
}

#[async_trait::async_trait]
impl MemoryStore for PostgresMemoryStore {
    async fn start(&self) -> Result<()> {
        let _lifecycle = self.lifecycle.lock().await;
        if self.pool.read().unwrap_or_else(PoisonError::into_inner).is_some() {
            return Ok(());
        }
        let pool = self.build_pool()?;
        if let Err(err) = self.open_pool(&pool).await {
            pool.close();
            return Err(err);
        }
        *self.pool.write().unwrap_or_else(PoisonError::into_inner) = Some(pool);
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        let _lifecycle = self.lifecycle.lock().await;
        if let Some(pool) = self.pool.write().unwrap_or_else(PoisonError::into_inner).take() {
            pool.close();
        }
        Ok(())
    }

    async fn put(
        &self,
        scope: &MemoryScope,
        key: &str,
        write: MemoryWrite,
    ) -> Result<MemoryRecord> {
        write.validate(key, Timestamp::now())?;
        let parts = write.into_parts();
        let client = self.client().await?;
        let metadata = Value::Object(parts.metadata);
        let source = serde_json::to_value(&parts.source).map_err(storage("could not encode"))?;
        let expires_at = parts.expires_at.map(to_system_time);
        let (app, user, ns) = (scope.application_id(), scope.user_id(), scope.namespace_or_empty());
        let content = parts.content.as_str();
        let row = match &parts.condition {
            WriteCondition::Always | WriteCondition::CreateOnly => {
                let sql = if parts.condition == WriteCondition::Always {
                    &self.sql.put_always
                } else {
                    &self.sql.put_create_only
                };
                let params: [&(dyn ToSql + Sync); 8] =
                    [&app, &user, &ns, &key, &content, &metadata, &source, &expires_at];
                client.query_opt(sql, &params).await?
            }
            WriteCondition::Revision(expected) => {
                let expected = revision_number(expected);
                let params: [&(dyn ToSql + Sync); 9] =
                    [&app, &user, &ns, &key, &content, &metadata, &source, &expires_at, &expected];
                client.query_opt(&self.sql.put_expected, &params).await?
            }
        };
        let Some(row) = row else {
            return Err(match parts.condition {
                WriteCondition::CreateOnly => MemoryError::already_exists(),
                WriteCondition::Revision(_) => MemoryError::stale_revision(),
                WriteCondition::Always => {
                    MemoryError::storage(PROVIDER, "the write returned no row")
                }
            });
        };
        let Value::Object(metadata) = metadata else {
            return Err(corrupt("metadata that is not an object"));
        };
        Ok(MemoryRecord {
            scope: scope.clone(),
            key: key.to_owned(),
            content: parts.content,
            metadata,
            revision: revision(column(&row, 0)?)?,
            created_at: from_system_time(column(&row, 1)?)?,
            updated_at: from_system_time(column(&row, 2)?)?,
            expires_at: parts.expires_at,
            source: parts.source,
        })
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        validation::key(key)?;
        let client = self.client().await?;
        let (app, user, ns) = (scope.application_id(), scope.user_id(), scope.namespace_or_empty());
        let row = client.query_opt(&self.sql.get, &[&app, &user, &ns, &key]).await?;
        row.map(|row| record(scope, &row)).transpose()
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        let page = page.key_page(CursorKind::List, scope)?;
        let client = self.client().await?;
        let (app, user, ns) = (scope.application_id(), scope.user_id(), scope.namespace_or_empty());
        let after = page.after.as_deref().unwrap_or_default();
        let fetch = limit_param(page.limit + 1);
        let rows = client.query(&self.sql.list, &[&app, &user, &ns, &after, &fetch]).await?;
        let mut reply = PageBuilder::new(CursorKind::List, scope, page.limit);
        for row in rows.iter().take(page.limit) {
            reply.push(record(scope, row)?);
        }
        Ok(reply.finish(rows.len() > page.limit))
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query_text: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        validation::query(query_text)?;
        let page = page.key_page(CursorKind::Search, scope)?;
        let limit = page.limit;
        let client = self.client().await?;
        let (app, user, ns) = (scope.application_id(), scope.user_id(), scope.namespace_or_empty());
        let after = page.after.unwrap_or_default();
        let scan = limit_param(self.options.search_scan_limit);
        let matches = limit_param(limit + 1);
        let params: [&(dyn ToSql + Sync); 7] =
            [&app, &user, &ns, &after, &query_text, &scan, &matches];
        let rows = client.query(&self.sql.search, &params).await?;
        let mut hits = Vec::new();
        for row in &rows {
            if column::<bool>(row, 8)? && hits.len() <= limit {
                hits.push(record(scope, row)?);
            }
        }
        let scanned: i64 = match rows.first() {
            Some(row) => column(row, 9)?,
            None => 0,
        };
        let next_cursor = if hits.len() > limit {
            hits.truncate(limit);
            hits.last().map(|last| key_cursor(CursorKind::Search, scope, &last.key))
        } else if scanned >= scan {
            // The bound was reached: continue after the last key inspected.
            match rows.last() {
                Some(row) => {
                    Some(key_cursor(CursorKind::Search, scope, &column::<String>(row, 0)?))
                }
                None => None,
            }
        } else {
            None
        };
        Ok(MemoryPage { items: hits, next_cursor })
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool> {
        validation::key(key)?;
        let client = self.client().await?;
        let (app, user, ns) = (scope.application_id(), scope.user_id(), scope.namespace_or_empty());
        match expected_revision {
            None => {
                let row = client.query_opt(&self.sql.delete, &[&app, &user, &ns, &key]).await?;
                row.map_or(Ok(false), |row| column::<bool>(&row, 0))
            }
            Some(expected) => {
                let expected = revision_number(expected);
                let params: [&(dyn ToSql + Sync); 5] = [&app, &user, &ns, &key, &expected];
                match client.query_opt(&self.sql.delete_expected, &params).await? {
                    Some(_) => Ok(true),
                    None => Err(MemoryError::stale_revision()),
                }
            }
        }
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let client = self.client().await?;
        let (app, user, ns) = (scope.application_id(), scope.user_id(), scope.namespace_or_empty());
        client.execute(&self.sql.delete_all, &[&app, &user, &ns]).await
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        validation::user(application_id, user_id)?;
        let client = self.client().await?;
        let batch = limit_param(self.options.delete_batch_size);
        let probe = batch.saturating_add(1);
        let mut removed: u64 = 0;
        loop {
            let params: [&(dyn ToSql + Sync); 4] = [&application_id, &user_id, &batch, &probe];
            let row = client.query_one(&self.sql.delete_user_batch, &params).await?;
            let deleted: i64 = column(&row, 0)?;
            removed += u64::try_from(deleted).unwrap_or(0);
            if !column::<bool>(&row, 1)? {
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
        let client = self.client().await?;
        let (sql, start) = match &page.after {
            None => (&self.sql.namespaces_first, ""),
            Some(after) => (&self.sql.namespaces_after, after.as_str()),
        };
        let fetch = limit_param(page.limit + 1);
        let rows = client.query(sql, &[&application_id, &user_id, &start, &fetch]).await?;
        let names = rows.iter().map(|row| column::<String>(row, 0)).collect::<Result<Vec<_>>>()?;
        provider::namespace_page(PROVIDER, application_id, user_id, page.limit, names)
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        let page = page.key_page(CursorKind::Purge, scope)?;
        let client = self.client().await?;
        let (app, user, ns) = (scope.application_id(), scope.user_id(), scope.namespace_or_empty());
        let after = page.after.unwrap_or_default();
        let inspect = limit_param(page.limit);
        let probe = limit_param(page.limit + 1);
        let params: [&(dyn ToSql + Sync); 6] = [&app, &user, &ns, &after, &inspect, &probe];
        let row = client.query_one(&self.sql.purge, &params).await?;
        let deleted: i64 = column(&row, 0)?;
        let last: Option<String> = column(&row, 1)?;
        let more: bool = column(&row, 2)?;
        let next_cursor = match last {
            Some(last) if more => Some(key_cursor(CursorKind::Purge, scope, &last)),
            _ => None,
        };
        Ok(MemoryCleanupPage { deleted: u64::try_from(deleted).unwrap_or(0), next_cursor })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_params_are_split_from_driver_params() {
        let (url, ours) = split_store_params(
            "postgres://u:p%3Fw@h:5/db?table=t1&connect_timeout=3&max_connections=4",
        )
        .unwrap();
        assert_eq!(url, "postgres://u:p%3Fw@h:5/db?connect_timeout=3");
        assert_eq!(
            ours,
            vec![
                ("table".to_owned(), "t1".to_owned()),
                ("max_connections".to_owned(), "4".to_owned())
            ]
        );
        let store = PostgresMemoryStore::from_url(
            "postgres://u:hunter2@h/db?table=t1&max_connections=4&setup_schema=false",
        )
        .unwrap();
        assert_eq!(store.names.table(), "\"public\".\"t1\"");
        assert_eq!(store.options.max_connections, 4);
        assert!(!store.options.setup_schema);
        assert!(!format!("{store:?}").contains("hunter2"));
    }

    #[test]
    fn bad_configuration_is_invalid_and_never_echoes_the_url() {
        let err = PostgresMemoryStore::from_url("postgres://u:hunter2@h:notaport/db").unwrap_err();
        assert!(err.is_invalid());
        assert!(!err.to_string().contains("hunter2"));
        let err = PostgresMemoryStore::builder("postgres://h/db").unwrap().table("a\"b").build();
        assert!(err.unwrap_err().is_invalid());
        let err = PostgresMemoryStore::builder("postgres://h/db")
            .unwrap()
            .min_connections(5)
            .max_connections(2)
            .build();
        assert!(err.unwrap_err().is_invalid());
    }

    #[test]
    fn revision_tokens_map_to_sequence_numbers() {
        assert_eq!(revision_number(&Revision::new("42").unwrap()), 42);
        assert_eq!(revision_number(&Revision::new("042").unwrap()), 0);
        assert_eq!(revision_number(&Revision::new("abc").unwrap()), 0);
        assert_eq!(revision_number(&Revision::new("-1").unwrap()), 0);
    }
}
