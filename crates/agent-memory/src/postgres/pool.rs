//! Owning connections: the deadpool pool built from the store's configuration, opening each
//! connection with libpq's TLS rules, its opening at `start()` (schema setup and check, then warm
//! connections with every statement prepared), and [`Conn`], which runs statements prepared or
//! unnamed and keeps a connection an error showed broken out of the pool.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};

use deadpool_postgres::{Connect, Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::error::Severity;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::config::Options;
use super::error::{connect_failed, storage, PROVIDER};
use super::schema::{self, Names};
use super::statements::{Statement, Statements};
use super::tls::Tls;
use crate::error::{MemoryError, Result};

/// The `application_name` the server shows for our sessions when the URL sets none.
const APPLICATION_NAME: &str = "agent-memory";

/// A pool on the server `config` names, sized and timed by `options`, connecting with `tls`.
/// Nothing connects yet.
pub(crate) fn build(config: &tokio_postgres::Config, options: &Options, tls: &Tls) -> Result<Pool> {
    let mut config = config.clone();
    // One limit for the socket and the pool's wait on it, so neither outlives the other.
    config.connect_timeout(options.connect_timeout);
    if config.get_application_name().is_none() {
        config.application_name(APPLICATION_NAME);
    }
    let connector =
        Connector { tls: tls.connector.clone(), fall_back_to_plain: tls.falls_back_to_plain() };
    let manager = Manager::from_connect(
        config,
        connector,
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

/// Opens one connection with the rustls connector and the driver's `sslmode`, as libpq would.
///
/// The driver already falls back to a plain connection when a server answers `prefer`'s TLS
/// request with "no"; libpq also retries without TLS once when the handshake itself fails
/// (a certificate the configured root refuses, a protocol mismatch), and so does this, with a
/// warning, under `prefer` only.
struct Connector {
    tls: MakeRustlsConnect,
    fall_back_to_plain: bool,
}

type Connected = (tokio_postgres::Client, tokio::task::JoinHandle<()>);

impl Connect for Connector {
    fn connect(
        &self,
        config: &tokio_postgres::Config,
    ) -> Pin<Box<dyn Future<Output = Result<Connected, tokio_postgres::Error>> + Send + '_>> {
        let config = config.clone();
        Box::pin(async move {
            let (client, connection) = match config.connect(self.tls.clone()).await {
                Err(err)
                    if self.fall_back_to_plain && crate::tls::describe_failure(&err).is_some() =>
                {
                    tracing::warn!(
                        "the TLS handshake with PostgreSQL failed under sslmode=prefer; \
                         connecting without TLS, as libpq does (sslmode=require or stricter \
                         refuses plain connections)"
                    );
                    let mut plain = config.clone();
                    plain.ssl_mode(tokio_postgres::config::SslMode::Disable);
                    plain.connect(self.tls.clone()).await?
                }
                result => result?,
            };
            let task = tokio::spawn(async move {
                // The error may quote the server; it is the operation's error that reports it.
                if connection.await.is_err() {
                    tracing::debug!("a PostgreSQL connection ended with an error");
                }
            });
            Ok((client, task))
        })
    }
}

/// Readies a new pool for work: sets up the schema (when `options` say so) and checks it
/// through one connection, then opens `min_connections` connections and (when statements are
/// prepared) prepares every statement on each, so the first operations pay neither for
/// connecting nor for parsing.
pub(crate) async fn open(
    pool: &Pool,
    options: &Options,
    names: &Names,
    sql: &Statements,
) -> Result<()> {
    let mut client = pool.get().await.map_err(connect_failed("could not connect"))?;
    if options.setup_schema {
        schema::setup(&mut client, names).await?;
    }
    schema::validate(&client, names).await?;
    drop(client);
    // Held until all are ready, so each `get` opens a new connection instead of handing
    // back the one just prepared.
    let mut warm = Vec::with_capacity(options.min_connections);
    for _ in 0..options.min_connections {
        let client = pool.get().await.map_err(connect_failed("could not connect"))?;
        if options.prepared_statements {
            for statement in sql.all() {
                client
                    .prepare_typed_cached(&statement.sql, statement.types)
                    .await
                    .map_err(storage("could not prepare a statement"))?;
            }
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
    /// Prepared once per connection (`true`), or unnamed in every call, for poolers.
    prepared: bool,
}

impl Conn {
    /// A connection from `pool`, waiting at most the acquire timeout for a free one; its
    /// statements run `prepared` (see [`Options::prepared_statements`]).
    pub(crate) async fn get(pool: &Pool, prepared: bool) -> Result<Self> {
        let object =
            pool.get().await.map_err(connect_failed("could not get a connection from the pool"))?;
        Ok(Self { object: Some(object), broken: AtomicBool::new(false), prepared })
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

    async fn prepare(&self, statement: &Statement) -> Result<tokio_postgres::Statement> {
        let result = self.object()?.prepare_typed_cached(&statement.sql, statement.types).await;
        self.check(result, "could not prepare a statement")
    }

    /// Runs `statement` and returns every row: by name when statements are prepared, or as
    /// the unnamed statement (parse, bind, execute and sync in one message) when they are not.
    /// Either way it is one round trip.
    pub(crate) async fn query(
        &self,
        statement: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let result = if self.prepared {
            let prepared = self.prepare(statement).await?;
            self.object()?.query(&prepared, params).await
        } else {
            self.object()?.query_typed(&statement.sql, &typed(statement, params)).await
        };
        self.check(result, "the statement failed")
    }

    /// Whether an error has shown this connection broken.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    /// Runs `statement` and returns its row, if any; more than one is an error.
    pub(crate) async fn query_opt(
        &self,
        statement: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>> {
        let mut rows = self.query(statement, params).await?;
        if rows.len() > 1 {
            return Err(MemoryError::storage(PROVIDER, "a statement returned more than one row"));
        }
        Ok(rows.pop())
    }

    /// Runs `statement` and returns its one row; none or several is an error.
    pub(crate) async fn query_one(
        &self,
        statement: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row> {
        self.query_opt(statement, params)
            .await?
            .ok_or_else(|| MemoryError::storage(PROVIDER, "a statement returned no row"))
    }
}

/// `params` paired with the statement's parameter types, for the unnamed statement.
fn typed<'a>(
    statement: &Statement,
    params: &[&'a (dyn ToSql + Sync)],
) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    debug_assert_eq!(params.len(), statement.types.len(), "{}", statement.sql);
    params.iter().copied().zip(statement.types.iter().cloned()).collect()
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
