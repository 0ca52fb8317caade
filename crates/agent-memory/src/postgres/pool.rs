//! Owning connections: the deadpool pool built from the store's configuration, its opening at
//! `start()` (schema setup and check, then warm connections with every statement prepared),
//! and [`Conn`], which keeps a connection an error showed broken out of the pool.

use std::sync::atomic::{AtomicBool, Ordering};

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::error::Severity;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row, Statement};

use super::config::Options;
use super::error::{storage, PROVIDER};
use super::schema::{self, Names};
use super::statements::Statements;
use crate::error::{MemoryError, Result};

/// The `application_name` the server shows for our sessions when the URL sets none.
const APPLICATION_NAME: &str = "agent-memory";

/// A pool on the server `config` names, sized and timed by `options`. Nothing connects yet.
pub(crate) fn build(config: &tokio_postgres::Config, options: &Options) -> Result<Pool> {
    let mut config = config.clone();
    // One limit for the socket and the pool's wait on it, so neither outlives the other.
    config.connect_timeout(options.connect_timeout);
    if config.get_application_name().is_none() {
        config.application_name(APPLICATION_NAME);
    }
    // Plain sockets: a URL with `sslmode=require` then fails to connect instead of silently
    // going without TLS.
    let manager = Manager::from_config(
        config,
        NoTls,
        // No query per checkout; a connection the server closed is noticed by its I/O task,
        // and one an error showed broken is discarded by `Conn`.
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    Pool::builder(manager)
        .max_size(options.max_connections)
        .runtime(Runtime::Tokio1)
        .create_timeout(Some(options.connect_timeout))
        .wait_timeout(Some(options.acquire_timeout))
        .recycle_timeout(Some(options.connect_timeout))
        .build()
        .map_err(storage("could not build the connection pool"))
}

/// Readies a new pool for work: sets up the schema (when `options` say so) and checks it
/// through one connection, then opens `min_connections` connections and prepares every
/// statement on each, so the first operations pay neither for connecting nor for parsing.
pub(crate) async fn open(
    pool: &Pool,
    options: &Options,
    names: &Names,
    sql: &Statements,
) -> Result<()> {
    let mut client = pool.get().await.map_err(storage("could not connect"))?;
    if options.setup_schema {
        schema::setup(&mut client, names).await?;
    }
    schema::validate(&client, names).await?;
    drop(client);
    // Held until all are prepared, so each `get` opens a new connection instead of handing
    // back the one just prepared.
    let mut warm = Vec::with_capacity(options.min_connections);
    for _ in 0..options.min_connections {
        let client = pool.get().await.map_err(storage("could not connect"))?;
        for statement in sql.all() {
            client
                .prepare_cached(statement)
                .await
                .map_err(storage("could not prepare a statement"))?;
        }
        warm.push(client);
    }
    Ok(())
}

/// A pooled connection that leaves the pool, instead of going back to it, once an error shows
/// it is broken.
///
/// The pool recycles without a health check, relying on the driver noticing closed sockets;
/// but when the server kills a session mid-query, the query sees the server's FATAL message a
/// moment before the driver's I/O task sees the socket close. Discarding the connection on such
/// errors means the next operation never gets it.
pub(crate) struct Conn {
    object: Option<Object>,
    broken: AtomicBool,
}

impl Conn {
    /// A connection from `pool`, waiting at most the acquire timeout for a free one.
    pub(crate) async fn get(pool: &Pool) -> Result<Self> {
        let object =
            pool.get().await.map_err(storage("could not get a connection from the pool"))?;
        Ok(Self { object: Some(object), broken: AtomicBool::new(false) })
    }

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

    /// Runs `sql` (prepared once per connection) and returns every row.
    pub(crate) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let statement = self.prepare(sql).await?;
        let result = self.object()?.query(&statement, params).await;
        self.check(result, "the statement failed")
    }

    /// Runs `sql` and returns its row, if any; more than one is an error.
    pub(crate) async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>> {
        let statement = self.prepare(sql).await?;
        let result = self.object()?.query_opt(&statement, params).await;
        self.check(result, "the statement failed")
    }

    /// Runs `sql` and returns its one row; none or several is an error.
    pub(crate) async fn query_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row> {
        let statement = self.prepare(sql).await?;
        let result = self.object()?.query_one(&statement, params).await;
        self.check(result, "the statement failed")
    }

    /// Runs `sql` and returns how many rows it changed.
    pub(crate) async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
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
