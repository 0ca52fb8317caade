//! The store's options and their defaults, [`PostgresMemoryStoreBuilder`], and
//! [`PostgresMemoryStore::builder`], which reads a `postgres://` URL into the driver's
//! configuration (set with its setters) and our options.
//!
//! The URL is parsed by the crate's one parser ([`ConnectionUrl`]); [`super::url`] takes the
//! parameters it knows, ours and the driver's, and refuses any other by name. The driver's own
//! parser never sees the text, and nothing here formats the URL or the password.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio_postgres::config::Host;

use super::schema::{self, Names};
use super::tls::{self, RootCert, SslMode, TlsSettings};
use super::url::{driver_params, store_params, tls_params, Servers};
use super::PostgresMemoryStore;
use crate::connection_url::{ConnectionUrl, HostPort};
use crate::error::{MemoryError, Result};
use crate::provider::CommonOptions;

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
pub const DEFAULT_ERASE_BATCH_SIZE: usize = 1_000;

/// Default most writes one shared statement carries: see
/// [`PostgresMemoryStoreBuilder::write_batch_max`].
pub const DEFAULT_WRITE_BATCH_MAX: usize = 64;

/// Most connections a pool may keep: PostgreSQL's own ceiling on `max_connections`
/// (`MAX_BACKENDS`, 2^18 - 1), so no server could serve more. The pool reserves room for
/// `max_connections` up front, so an unbounded value would exhaust memory at `start()`.
const MAX_POOL_SIZE: usize = 262_143;

/// The port of a host the URL gives without one, as libpq's.
pub(super) const DEFAULT_PORT: u16 = 5432;

/// The store's own settings, checked by [`PostgresMemoryStoreBuilder::build`].
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) min_connections: usize,
    pub(crate) max_connections: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) acquire_timeout: Duration,
    pub(crate) setup_schema: bool,
    pub(crate) common: CommonOptions,
    pub(crate) write_batch_max: usize,
    /// `None`: the default, [`Options::write_connections`].
    pub(crate) write_connections: Option<usize>,
    pub(crate) prepared_statements: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            min_connections: DEFAULT_MIN_CONNECTIONS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
            setup_schema: true,
            common: CommonOptions::new(DEFAULT_SEARCH_SCAN_LIMIT, DEFAULT_ERASE_BATCH_SIZE),
            write_batch_max: DEFAULT_WRITE_BATCH_MAX,
            write_connections: None,
            prepared_statements: true,
        }
    }
}

impl Options {
    /// The connections writes may hold at once: as set, or a quarter of the pool (at least
    /// one), so that under many concurrent writers most of them queue and share statements
    /// while reads keep the rest of the pool.
    pub(crate) fn write_connections(&self) -> usize {
        self.write_connections.unwrap_or((self.max_connections / 4).max(1))
    }
}

/// Typed configuration of a [`PostgresMemoryStore`], from
/// [`PostgresMemoryStore::builder`].
///
/// Every option is also a URL parameter of the same name (see the [module docs](super)).
/// `Debug` shows where it connects, never the password.
#[derive(Clone)]
pub struct PostgresMemoryStoreBuilder {
    config: tokio_postgres::Config,
    pub(super) options: Options,
    tls: TlsSettings,
    schema: String,
    table: String,
}

impl PostgresMemoryStoreBuilder {
    crate::builder::setters! {
        /// Most connections the pool keeps open (default 16). At least 1, at most 262,143
        /// (PostgreSQL's own ceiling).
        max_connections(max: usize) => options.max_connections = max;

        /// Connections `start()` opens and prepares ahead of use (default 1; 0 connects lazily, so
        /// `start()` then only checks the schema through one connection). At most
        /// `max_connections`.
        min_connections(min: usize) => options.min_connections = min;

        /// Longest wait for one new connection (default 10 s, or the URL's `connect_timeout`).
        /// Longer than zero.
        connect_timeout(timeout: Duration) => options.connect_timeout = timeout;

        /// Longest wait for a free connection when all are busy (default 30 s). Longer than zero.
        acquire_timeout(timeout: Duration) => options.acquire_timeout = timeout;

        /// Whether `start()` creates the table when it is missing (default `true`). With `false` it
        /// only checks a table someone provisioned (see [`PostgresMemoryStore::schema_sql`]) and
        /// fails if it differs.
        setup_schema(setup: bool) => options.setup_schema = setup;

        /// The schema holding the table (default `public`): ASCII letters, digits and underscores,
        /// at most 48 bytes.
        schema(schema: impl Into<String>) => schema = schema.into();

        /// The table name (default `agent_memory_records`), under the same rules as the schema.
        table(table: impl Into<String>) => table = table.into();

        /// Most writes (`put` and `delete`, in all their forms) that one shared statement and one
        /// commit may carry (default 64; at least 1, and 1 runs every write alone). Writes that
        /// arrive while every connection is busy wait for the next free one, which runs them
        /// together; a write that finds a free connection runs alone at once. See "Write
        /// coalescing" in the [module docs](super). URL parameter `write_batch_max`.
        write_batch_max(writes: usize) => options.write_batch_max = writes;

        /// Most connections that writes hold at once (default: a quarter of `max_connections`, at
        /// least 1; at least 1, at most `max_connections`). Writes beyond it queue and share the
        /// statements of the writes that hold them, while reads keep the whole pool. See "Write
        /// coalescing" in the [module docs](super). URL parameter `write_connections`.
        write_connections(connections: usize) => options.write_connections = Some(connections);
    }

    crate::provider::common_setters! {
        options.common;
        search_scan_limit: "1,000", "A larger value finds sparse matches in fewer calls; a \
            smaller one keeps each call, and the connection it holds, shorter.";
        search_scan_bytes: "";
        erase_batch_size: "1,000", "Each step is one statement and one transaction.";
    }

    crate::builder::setters! {
        /// Whether each statement is prepared once per connection and then run by name (default
        /// `true`, the fastest). With `false` every operation runs its statement unnamed, still in
        /// one round trip (parse, bind and execute in one message): what transaction-mode poolers
        /// (PgBouncer's `pool_mode = transaction`, Supabase's pooler on port 6543) need, because
        /// they hand each transaction to any server connection, where a named statement prepared on
        /// another does not exist. URL parameter `prepared_statements`.
        prepared_statements(prepared: bool) => options.prepared_statements = prepared;

        /// How connections use TLS (libpq's `sslmode`; default [`SslMode::Prefer`], or
        /// [`SslMode::VerifyFull`] with [`ssl_root_cert_system`](Self::ssl_root_cert_system)). See
        /// the [module docs](super) ("TLS") for what each mode checks.
        ssl_mode(mode: SslMode) => tls.mode = Some(mode);

        /// A PEM file of the CA certificates that may sign the server's certificate (libpq's
        /// `sslrootcert=PATH`). With one, every TLS mode checks the certificate chain; the default
        /// is `~/.postgresql/root.crt` when that file exists. Read by [`build`](Self::build).
        ssl_root_cert(path: impl Into<PathBuf>) => tls.root_cert = Some(RootCert::File(path.into()));
    }

    /// Trusts the operating system's CA certificates (libpq's `sslrootcert=system`), as managed
    /// services signed by a public authority need; the mode then defaults to, and must be,
    /// [`SslMode::VerifyFull`].
    pub fn ssl_root_cert_system(mut self) -> Self {
        self.tls.root_cert = Some(RootCert::System);
        self
    }

    crate::builder::setters! {
        /// A PEM file with the client certificate (and any intermediates) to show a server that
        /// asks for one (libpq's `sslcert`; default `~/.postgresql/postgresql.crt` when it exists).
        ssl_cert(path: impl Into<PathBuf>) => tls.cert = Some(path.into());

        /// The PEM file with the client certificate's private key (libpq's `sslkey`; default
        /// `~/.postgresql/postgresql.key`). Like libpq, the store refuses a key file other users
        /// can read.
        ssl_key(path: impl Into<PathBuf>) => tls.key = Some(path.into());
    }

    /// Checks the configuration, reads the TLS files, and builds the (unstarted) store. Nothing
    /// connects yet.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming the option for a bad schema or table name, or
    /// a count or timeout out of range (zero included); naming the libpq parameter (`sslmode`,
    /// `sslrootcert`, `sslcert`, `sslkey`) for TLS settings libpq refuses or a certificate or
    /// key file that cannot be read or parsed.
    pub fn build(self) -> Result<PostgresMemoryStore> {
        schema::identifier("schema", &self.schema)?;
        schema::identifier("table", &self.table)?;
        let o = &self.options;
        if o.max_connections == 0 {
            return Err(MemoryError::invalid("max_connections", "must be at least 1"));
        }
        if o.max_connections > MAX_POOL_SIZE {
            return Err(MemoryError::invalid(
                "max_connections",
                format!("must be at most {MAX_POOL_SIZE}"),
            ));
        }
        if o.min_connections > o.max_connections {
            return Err(MemoryError::invalid("min_connections", "must not exceed max_connections"));
        }
        if o.connect_timeout.is_zero() {
            return Err(MemoryError::invalid("connect_timeout", "must be longer than zero"));
        }
        if o.acquire_timeout.is_zero() {
            return Err(MemoryError::invalid("acquire_timeout", "must be longer than zero"));
        }
        o.common.check()?;
        if o.write_batch_max == 0 {
            return Err(MemoryError::invalid("write_batch_max", "must be at least 1"));
        }
        match o.write_connections {
            Some(0) => return Err(MemoryError::invalid("write_connections", "must be at least 1")),
            Some(n) if n > o.max_connections => {
                return Err(MemoryError::invalid(
                    "write_connections",
                    "must not exceed max_connections",
                ))
            }
            _ => {}
        }
        let tls = tls::resolve(&self.tls)?;
        let mut config = self.config;
        let mode = tls_mode_for_hosts(&mut config, &tls)?;
        config.ssl_mode(mode);
        let names = Names { schema: self.schema, table: self.table };
        Ok(PostgresMemoryStore::new(config, self.options, tls, names))
    }
}

/// The driver's `sslmode` for the servers `config` names, with libpq's two host rules the
/// driver lacks:
///
/// - libpq never uses TLS on Unix sockets (the server does not offer it there), whatever the
///   mode; so a list of socket directories only connects without TLS;
/// - with `hostaddr` and no `host`, libpq encrypts without a name to check (and refuses
///   `verify-full`, which needs one); the driver needs a name for any handshake, so each
///   address stands in as its own host name, which only `verify-full` would check.
fn tls_mode_for_hosts(
    config: &mut tokio_postgres::Config,
    tls: &tls::Tls,
) -> Result<tokio_postgres::config::SslMode> {
    #[cfg(unix)]
    if !config.get_hosts().is_empty()
        && config.get_hosts().iter().all(|host| matches!(host, Host::Unix(_)))
    {
        return Ok(tokio_postgres::config::SslMode::Disable);
    }
    if config.get_hosts().is_empty() && !config.get_hostaddrs().is_empty() {
        if tls.mode == SslMode::VerifyFull {
            return Err(MemoryError::invalid(
                "sslmode",
                "verify-full needs a host name to check (host), not only hostaddr, as in libpq",
            ));
        }
        if tls.mode != SslMode::Disable {
            let addrs: Vec<IpAddr> = config.get_hostaddrs().to_vec();
            for addr in addrs {
                config.host(addr.to_string());
            }
        }
    }
    Ok(tls.driver_mode())
}

impl fmt::Debug for PostgresMemoryStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresMemoryStoreBuilder")
            .field("server", &Endpoint(&self.config))
            .field("schema", &self.schema)
            .field("table", &self.table)
            .field("options", &self.options)
            .field("tls", &self.tls)
            .finish()
    }
}

/// Hosts, ports, database and user of a connection config; never the password.
pub(crate) struct Endpoint<'a>(pub(crate) &'a tokio_postgres::Config);

impl fmt::Debug for PostgresMemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let started = self.pool.read().unwrap_or_else(std::sync::PoisonError::into_inner).is_some();
        f.debug_struct("PostgresMemoryStore")
            .field("server", &Endpoint(&self.config))
            .field("table", &self.names)
            .field("options", &self.options)
            .field("tls", &self.tls)
            .field("started", &started)
            .finish()
    }
}

impl fmt::Debug for Endpoint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hosts: Vec<String> = self
            .0
            .get_hosts()
            .iter()
            .map(|host| match host {
                Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                Host::Unix(path) => path.display().to_string(),
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

impl PostgresMemoryStore {
    /// A builder for a store on the server named by `url`
    /// (`postgres://user:pass@host:port/db?param=value…` or `postgresql://…`), with the
    /// defaults above. The [module docs](super) list the parameters the URL may carry.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` when it cannot be parsed, is not a
    /// `postgres://` URL, or has a parameter that is unknown or malformed (naming the
    /// parameter); the message never repeats the URL.
    pub fn builder(url: &str) -> Result<PostgresMemoryStoreBuilder> {
        let ConnectionUrl { scheme, username, password, hosts, path, mut params } =
            ConnectionUrl::parse(url)?;
        // No hosts means no `//` after the scheme: not a URL the driver or libpq would read.
        if !matches!(scheme.as_str(), "postgres" | "postgresql") || hosts.is_empty() {
            return Err(MemoryError::invalid(
                "url",
                "must start with postgres:// or postgresql://",
            ));
        }
        let mut config = tokio_postgres::Config::new();
        if !username.is_empty() {
            config.user(username);
        }
        if let Some(password) = password {
            config.password(password);
        }
        if let Some(dbname) = path.strip_prefix('/').filter(|name| !name.is_empty()) {
            config.dbname(dbname);
        }
        // Each host is paired with its port, so `h1:5433,h2` means h1:5433 and h2:5432.
        let (hosts, ports) = hosts
            .into_iter()
            .filter(|h| !h.host.is_empty())
            .map(|HostPort { host, port }| (host, port.unwrap_or(DEFAULT_PORT)))
            .unzip();
        driver_params(&mut config, Servers { hosts, ports }, &mut params)?;
        let builder = PostgresMemoryStoreBuilder {
            config,
            options: Options::default(),
            tls: tls_params(&mut params)?,
            schema: DEFAULT_SCHEMA.to_owned(),
            table: DEFAULT_TABLE.to_owned(),
        };
        let builder = store_params(builder, &mut params)?;
        params.finish()?;
        Ok(builder)
    }

    /// A store with the defaults (or the URL's own parameters); what [`open`](crate::open)
    /// builds for `postgres://` URLs.
    ///
    /// # Errors
    /// As [`builder`](Self::builder) and [`PostgresMemoryStoreBuilder::build`].
    pub fn from_url(url: &str) -> Result<Self> {
        Self::builder(url)?.build()
    }
}

#[cfg(test)]
mod tests;
