//! The store's options and their defaults, [`PostgresMemoryStoreBuilder`], and reading a
//! `postgres://` URL into the driver's configuration (set with its setters) and our options.
//!
//! The URL is parsed by the crate's one parser ([`ConnectionUrl`]); this module takes the
//! parameters it knows, ours and the driver's, and refuses any other by name. The driver's own
//! parser never sees the text, and nothing here formats the URL or the password.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio_postgres::config::{ChannelBinding, Host, LoadBalanceHosts, TargetSessionAttrs};

use super::schema::{self, Names};
use super::tls::{self, RootCert, SslMode, TlsSettings};
use super::PostgresMemoryStore;
use crate::connection_url::{ConnectionUrl, HostPort, Params};
use crate::error::{MemoryError, Result};

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
/// Default most content bytes one `search` call inspects (the shared default).
pub(crate) const DEFAULT_SEARCH_SCAN_BYTES: usize = crate::provider::DEFAULT_SEARCH_SCAN_BYTES;
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
const DEFAULT_PORT: u16 = 5432;

/// The store's own settings, checked by [`PostgresMemoryStoreBuilder::build`].
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) min_connections: usize,
    pub(crate) max_connections: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) acquire_timeout: Duration,
    pub(crate) setup_schema: bool,
    pub(crate) search_scan_limit: usize,
    pub(crate) search_scan_bytes: usize,
    pub(crate) erase_batch_size: usize,
    pub(crate) write_batch_max: usize,
    /// `None`: the default, [`Options::write_connections`].
    pub(crate) write_connections: Option<usize>,
    pub(crate) prepared_statements: bool,
    pub(crate) quotas: crate::quota::Quotas,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            min_connections: DEFAULT_MIN_CONNECTIONS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
            setup_schema: true,
            search_scan_limit: DEFAULT_SEARCH_SCAN_LIMIT,
            search_scan_bytes: DEFAULT_SEARCH_SCAN_BYTES,
            erase_batch_size: DEFAULT_ERASE_BATCH_SIZE,
            write_batch_max: DEFAULT_WRITE_BATCH_MAX,
            write_connections: None,
            prepared_statements: true,
            quotas: crate::quota::Quotas::unlimited(),
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
    options: Options,
    tls: TlsSettings,
    schema: String,
    table: String,
}

impl PostgresMemoryStoreBuilder {
    /// Most connections the pool keeps open (default 16). At least 1, at most 262,143
    /// (PostgreSQL's own ceiling).
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
    /// Longer than zero.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.options.connect_timeout = timeout;
        self
    }

    /// Longest wait for a free connection when all are busy (default 30 s). Longer than zero.
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

    /// Most content bytes one `search` call inspects before returning what it found with a
    /// cursor (default 1 MiB). At least 1; a call always inspects one record, so it reads at
    /// most this plus one record's content. This bounds how long one call holds a backend,
    /// whatever is stored (see the provider guide, "Search").
    pub fn search_scan_bytes(mut self, bytes: usize) -> Self {
        self.options.search_scan_bytes = bytes;
        self
    }

    /// Rows each `delete_all` or `delete_user` batch (one statement, one transaction) removes
    /// (default 1,000).
    /// At least 1.
    pub fn erase_batch_size(mut self, rows: usize) -> Self {
        self.options.erase_batch_size = rows;
        self
    }

    /// Most writes (`put` and `delete`, in all their forms) that one shared statement and
    /// one commit may carry (default 64; at least 1, and 1 runs every write alone). Writes
    /// that arrive while every connection is busy wait for the next free one, which runs
    /// them together; a write that finds a free connection runs alone at once. See
    /// "Write coalescing" in the [module docs](super). URL parameter `write_batch_max`.
    pub fn write_batch_max(mut self, writes: usize) -> Self {
        self.options.write_batch_max = writes;
        self
    }

    /// Most connections that writes hold at once (default: a quarter of `max_connections`,
    /// at least 1; at least 1, at most `max_connections`). Writes beyond it queue and share
    /// the statements of the writes that hold them, while reads keep the whole pool. See
    /// "Write coalescing" in the [module docs](super). URL parameter `write_connections`.
    pub fn write_connections(mut self, connections: usize) -> Self {
        self.options.write_connections = Some(connections);
        self
    }

    /// The most records one application user may hold, every namespace and expired records
    /// included (default: no limit; at least 1). See [Quotas](crate#quotas). URL parameter
    /// `max_records_per_user`.
    pub fn max_records_per_user(mut self, records: u64) -> Self {
        self.options.quotas = self.options.quotas.max_records_per_user(records);
        self
    }

    /// The most bytes one application user may hold, counted by
    /// [`record_bytes`](crate::quota::record_bytes) (default: no limit; at least 1). URL
    /// parameter `max_bytes_per_user`.
    pub fn max_bytes_per_user(mut self, bytes: u64) -> Self {
        self.options.quotas = self.options.quotas.max_bytes_per_user(bytes);
        self
    }

    /// Sets both limits at once from `quotas`.
    pub fn quotas(mut self, quotas: crate::quota::Quotas) -> Self {
        self.options.quotas = quotas;
        self
    }

    /// Whether each statement is prepared once per connection and then run by name (default
    /// `true`, the fastest). With `false` every operation runs its statement unnamed, still in
    /// one round trip (parse, bind and execute in one message): what transaction-mode poolers
    /// (PgBouncer's `pool_mode = transaction`, Supabase's pooler on port 6543) need, because
    /// they hand each transaction to any server connection, where a named statement prepared
    /// on another does not exist. URL parameter `prepared_statements`.
    pub fn prepared_statements(mut self, prepared: bool) -> Self {
        self.options.prepared_statements = prepared;
        self
    }

    /// How connections use TLS (libpq's `sslmode`; default [`SslMode::Prefer`], or
    /// [`SslMode::VerifyFull`] with [`ssl_root_cert_system`](Self::ssl_root_cert_system)). See
    /// the [module docs](super) ("TLS") for what each mode checks.
    pub fn ssl_mode(mut self, mode: SslMode) -> Self {
        self.tls.mode = Some(mode);
        self
    }

    /// A PEM file of the CA certificates that may sign the server's certificate (libpq's
    /// `sslrootcert=PATH`). With one, every TLS mode checks the certificate chain; the default
    /// is `~/.postgresql/root.crt` when that file exists. Read by [`build`](Self::build).
    pub fn ssl_root_cert(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.root_cert = Some(RootCert::File(path.into()));
        self
    }

    /// Trusts the operating system's CA certificates (libpq's `sslrootcert=system`), as managed
    /// services signed by a public authority need; the mode then defaults to, and must be,
    /// [`SslMode::VerifyFull`].
    pub fn ssl_root_cert_system(mut self) -> Self {
        self.tls.root_cert = Some(RootCert::System);
        self
    }

    /// A PEM file with the client certificate (and any intermediates) to show a server that
    /// asks for one (libpq's `sslcert`; default `~/.postgresql/postgresql.crt` when it exists).
    pub fn ssl_cert(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.cert = Some(path.into());
        self
    }

    /// The PEM file with the client certificate's private key (libpq's `sslkey`; default
    /// `~/.postgresql/postgresql.key`). Like libpq, the store refuses a key file other users can
    /// read.
    pub fn ssl_key(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.key = Some(path.into());
        self
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
        if o.search_scan_limit == 0 {
            return Err(MemoryError::invalid("search_scan_limit", "must be at least 1"));
        }
        if o.search_scan_bytes == 0 {
            return Err(MemoryError::invalid("search_scan_bytes", "must be at least 1"));
        }
        if o.erase_batch_size == 0 {
            return Err(MemoryError::invalid("erase_batch_size", "must be at least 1"));
        }
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
        o.quotas.check()?;
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

/// Takes the store's own parameters, each named after the builder method it calls; the
/// builder's `build` checks their ranges.
fn store_params(
    mut builder: PostgresMemoryStoreBuilder,
    params: &mut Params,
) -> Result<PostgresMemoryStoreBuilder> {
    if let Some(schema) = params.take("schema") {
        builder = builder.schema(schema);
    }
    if let Some(table) = params.take("table") {
        builder = builder.table(table);
    }
    if let Some(min) = params.take_parsed("min_connections")? {
        builder = builder.min_connections(min);
    }
    if let Some(max) = params.take_parsed("max_connections")? {
        builder = builder.max_connections(max);
    }
    if let Some(setup) = params.take_bool("setup_schema")? {
        builder = builder.setup_schema(setup);
    }
    if let Some(timeout) = params.take_seconds("connect_timeout")? {
        builder = builder.connect_timeout(timeout);
    }
    if let Some(timeout) = params.take_seconds("acquire_timeout")? {
        builder = builder.acquire_timeout(timeout);
    }
    if let Some(keys) = params.take_parsed("search_scan_limit")? {
        builder = builder.search_scan_limit(keys);
    }
    if let Some(bytes) = params.take_parsed("search_scan_bytes")? {
        builder = builder.search_scan_bytes(bytes);
    }
    if let Some(rows) = params.take_parsed("erase_batch_size")? {
        builder = builder.erase_batch_size(rows);
    }
    if let Some(writes) = params.take_parsed("write_batch_max")? {
        builder = builder.write_batch_max(writes);
    }
    if let Some(connections) = params.take_parsed("write_connections")? {
        builder = builder.write_connections(connections);
    }
    if let Some(prepared) = params.take_bool("prepared_statements")? {
        builder = builder.prepared_statements(prepared);
    }
    builder = builder.quotas(crate::quota::Quotas::from_params(params)?);
    Ok(builder)
}

/// Takes libpq's TLS parameters; [`tls::resolve`] checks them and reads the files at `build`.
fn tls_params(params: &mut Params) -> Result<TlsSettings> {
    let mode =
        match params.take("sslmode") {
            None => None,
            // libpq's `allow` (plain first, TLS only if the server insists) has no driver support.
            Some(word) if word == "allow" => return Err(MemoryError::invalid(
                "url",
                "has a value for `sslmode`, allow, that is not supported: use prefer, require, \
                 verify-ca or verify-full",
            )),
            Some(word) => Some(SslMode::parse(&word).ok_or_else(|| {
                MemoryError::invalid(
                    "url",
                    "has a value for `sslmode` that is not one of disable, prefer, require, \
                 verify-ca, verify-full",
                )
            })?),
        };
    let root_cert = params.take("sslrootcert").map(|value| match value.as_str() {
        "system" => RootCert::System,
        _ => RootCert::File(PathBuf::from(value)),
    });
    let cert = params.take("sslcert").map(PathBuf::from);
    let key = params.take("sslkey").map(PathBuf::from);
    Ok(TlsSettings { mode, root_cert, cert, key })
}

/// The servers a URL names: hosts (names, addresses or Unix socket directories) and ports, in
/// the order written.
struct Servers {
    hosts: Vec<String>,
    ports: Vec<u16>,
}

/// Takes the libpq parameters tokio-postgres has a setter for and sets them, and the URL's
/// `servers`, on `config`.
///
/// As in libpq, a parameter replaces what the URL itself says: `user`, `password` and
/// `dbname` the credentials and path, `host` and `port` the URL's host list and their ports.
/// `connect_timeout` is ours (see [`store_params`]); the pool sets it on the driver too.
fn driver_params(
    config: &mut tokio_postgres::Config,
    mut servers: Servers,
    params: &mut Params,
) -> Result<()> {
    if let Some(user) = params.take("user") {
        config.user(user);
    }
    if let Some(password) = params.take("password") {
        config.password(password);
    }
    if let Some(dbname) = params.take("dbname") {
        config.dbname(dbname);
    }
    if let Some(hosts) = params.take("host") {
        servers.hosts = hosts.split(',').map(str::to_owned).collect();
        if servers.hosts.iter().any(String::is_empty) {
            return Err(MemoryError::invalid("url", "has an empty entry in `host`"));
        }
    }
    if let Some(ports) = params.take("port") {
        // An empty entry is the default port, as in libpq's port lists.
        servers.ports = ports
            .split(',')
            .map(|port| if port.is_empty() { Ok(DEFAULT_PORT) } else { port.parse() })
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| malformed("port"))?;
    }
    let hostaddrs = match params.take("hostaddr") {
        None => Vec::new(),
        Some(addrs) => addrs
            .split(',')
            .map(str::parse::<IpAddr>)
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| malformed("hostaddr"))?,
    };
    // The driver checks these counts only when it connects; libpq refuses them up front.
    let servers_named = servers.hosts.len().max(hostaddrs.len());
    if !servers.hosts.is_empty() && !hostaddrs.is_empty() && servers.hosts.len() != hostaddrs.len()
    {
        return Err(MemoryError::invalid(
            "url",
            "has a `hostaddr` list that does not match its hosts",
        ));
    }
    if servers.ports.len() > 1 && servers.ports.len() != servers_named {
        return Err(MemoryError::invalid("url", "has a `port` list that does not match its hosts"));
    }
    for host in servers.hosts {
        // On Unix a host starting with `/` becomes a socket directory.
        config.host(host);
    }
    for addr in hostaddrs {
        config.hostaddr(addr);
    }
    for port in servers.ports {
        config.port(port);
    }
    if let Some(name) = params.take("application_name") {
        config.application_name(name);
    }
    if let Some(options) = params.take("options") {
        config.options(options);
    }
    if let Some(on) = params.take_parsed::<u64>("keepalives")? {
        config.keepalives(on != 0);
    }
    // For the three durations below zero means the system default, as in libpq: the driver
    // then keeps its own default, which is the same.
    if let Some(idle) = params.take_seconds("keepalives_idle")?.filter(|d| !d.is_zero()) {
        config.keepalives_idle(idle);
    }
    if let Some(interval) = params.take_seconds("keepalives_interval")?.filter(|d| !d.is_zero()) {
        config.keepalives_interval(interval);
    }
    if let Some(retries) = params.take_parsed::<u32>("keepalives_retries")? {
        config.keepalives_retries(retries);
    }
    // Seconds, as tokio-postgres has always read it here (libpq reads milliseconds).
    if let Some(timeout) = params.take_seconds("tcp_user_timeout")?.filter(|d| !d.is_zero()) {
        config.tcp_user_timeout(timeout);
    }
    let session = [
        ("any", TargetSessionAttrs::Any),
        ("read-write", TargetSessionAttrs::ReadWrite),
        ("read-only", TargetSessionAttrs::ReadOnly),
    ];
    if let Some(attrs) = take_choice(params, "target_session_attrs", &session)? {
        config.target_session_attrs(attrs);
    }
    let binding = [
        ("disable", ChannelBinding::Disable),
        ("prefer", ChannelBinding::Prefer),
        ("require", ChannelBinding::Require),
    ];
    if let Some(binding) = take_choice(params, "channel_binding", &binding)? {
        config.channel_binding(binding);
    }
    let balance = [("disable", LoadBalanceHosts::Disable), ("random", LoadBalanceHosts::Random)];
    if let Some(balance) = take_choice(params, "load_balance_hosts", &balance)? {
        config.load_balance_hosts(balance);
    }
    Ok(())
}

/// Takes parameter `name`, which must be one of the words in `choices`.
fn take_choice<T: Copy>(
    params: &mut Params,
    name: &'static str,
    choices: &[(&str, T)],
) -> Result<Option<T>> {
    let Some(value) = params.take(name) else { return Ok(None) };
    match choices.iter().find(|(word, _)| *word == value) {
        Some((_, choice)) => Ok(Some(*choice)),
        None => {
            let words: Vec<&str> = choices.iter().map(|(word, _)| *word).collect();
            Err(MemoryError::invalid(
                "url",
                format!("has a value for `{name}` that is not one of {}", words.join(", ")),
            ))
        }
    }
}

/// The error for a parameter whose value does not parse; the value is never shown.
fn malformed(name: &str) -> MemoryError {
    MemoryError::invalid("url", format!("has a malformed value for `{name}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder(url: &str) -> PostgresMemoryStoreBuilder {
        PostgresMemoryStore::builder(url).unwrap_or_else(|err| panic!("{url}: {err}"))
    }

    /// The field of an `Invalid` error.
    fn field(err: &MemoryError) -> &'static str {
        match err {
            MemoryError::Invalid { field, .. } => field,
            other => panic!("expected Invalid, got {other}"),
        }
    }

    fn tcp(hosts: &[&str]) -> Vec<Host> {
        hosts.iter().map(|h| Host::Tcp((*h).to_owned())).collect()
    }

    #[test]
    fn store_params_are_split_from_driver_params() {
        let b = builder("postgres://u:p%3Fw@h:5/db?table=t1&connect_timeout=3&max_connections=4");
        assert_eq!(b.config.get_user(), Some("u"));
        assert_eq!(b.config.get_password(), Some(&b"p?w"[..]));
        assert_eq!(b.config.get_hosts(), tcp(&["h"]));
        assert_eq!(b.config.get_ports(), [5]);
        assert_eq!(b.config.get_dbname(), Some("db"));
        assert_eq!(b.options.connect_timeout, Duration::from_secs(3));
        assert_eq!(b.table, "t1");
        assert_eq!(b.options.max_connections, 4);
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
    fn multi_host_urls_pair_each_host_with_its_port() {
        let b = builder("postgresql://app@db1.internal:5433,db2.internal,[::1]:5435/memories");
        assert_eq!(b.config.get_hosts(), tcp(&["db1.internal", "db2.internal", "::1"]));
        assert_eq!(b.config.get_ports(), [5433, 5432, 5435]);
        assert_eq!(b.config.get_dbname(), Some("memories"));
        assert_eq!(b.config.get_user(), Some("app"));

        // Query hosts and ports replace the URL's, as in libpq.
        let b = builder("postgres://h1:5000/db?host=h2,h3&port=5440,");
        assert_eq!(b.config.get_hosts(), tcp(&["h2", "h3"]));
        assert_eq!(b.config.get_ports(), [5440, 5432]);
        let b = builder("postgres://h1,h2/db?port=6000");
        assert_eq!(b.config.get_ports(), [6000], "one port serves every host");
        let b = builder("postgres:///db?hostaddr=10.0.0.1,10.0.0.2&port=1,2");
        assert!(b.config.get_hosts().is_empty());
        assert_eq!(b.config.get_hostaddrs().len(), 2);

        for bad in [
            "postgres://h1,,h2/db",
            "postgres://h1,/db",
            "postgres:///db?host=a,,b",
            "postgres://h1,h2,h3/db?port=1,2",
            "postgres://h1,h2/db?hostaddr=10.0.0.1",
        ] {
            let err = PostgresMemoryStore::builder(bad).unwrap_err();
            assert_eq!(field(&err), "url", "{bad}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn unix_socket_directories_are_hosts() {
        use std::path::PathBuf;

        let b = builder("postgres://%2Fvar%2Frun%2Fpostgresql/db");
        assert_eq!(b.config.get_hosts(), [Host::Unix(PathBuf::from("/var/run/postgresql"))]);
        let b = builder("postgres:///db?host=/tmp/pg&user=me");
        assert_eq!(b.config.get_hosts(), [Host::Unix(PathBuf::from("/tmp/pg"))]);
        assert!(b.config.get_ports().is_empty(), "no port named: the driver's default");
        assert_eq!(b.config.get_user(), Some("me"));
    }

    #[test]
    fn each_store_parameter_sets_its_option() {
        let b = builder(
            "postgres://h/db?schema=s1&table=t1&min_connections=3&max_connections=9\
             &setup_schema=off&connect_timeout=4&acquire_timeout=7&search_scan_limit=50\
             &erase_batch_size=25&search_scan_bytes=4096&write_batch_max=5\
             &write_connections=2",
        );
        assert_eq!((b.schema.as_str(), b.table.as_str()), ("s1", "t1"));
        let o = &b.options;
        assert_eq!((o.min_connections, o.max_connections), (3, 9));
        assert!(!o.setup_schema);
        assert_eq!(o.connect_timeout, Duration::from_secs(4));
        assert_eq!(o.acquire_timeout, Duration::from_secs(7));
        assert_eq!((o.search_scan_limit, o.erase_batch_size), (50, 25));
        assert_eq!(o.search_scan_bytes, 4_096);
        assert_eq!((o.write_batch_max, o.write_connections), (5, Some(2)));
        let store = b.build().expect("in range");
        assert_eq!(store.names.table(), "\"s1\".\"t1\"");

        let defaults = builder("postgres://h/db").options;
        assert_eq!(defaults.min_connections, DEFAULT_MIN_CONNECTIONS);
        assert_eq!(defaults.max_connections, DEFAULT_MAX_CONNECTIONS);
        assert_eq!(defaults.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(defaults.acquire_timeout, DEFAULT_ACQUIRE_TIMEOUT);
        assert!(defaults.setup_schema);
        assert_eq!(defaults.search_scan_limit, DEFAULT_SEARCH_SCAN_LIMIT);
        assert_eq!(defaults.search_scan_bytes, DEFAULT_SEARCH_SCAN_BYTES);
        assert_eq!(defaults.erase_batch_size, DEFAULT_ERASE_BATCH_SIZE);
        assert_eq!(defaults.write_batch_max, DEFAULT_WRITE_BATCH_MAX);
        assert_eq!(defaults.write_connections, None);
        assert_eq!(defaults.write_connections(), 4, "a quarter of the default pool of 16");
        let small = Options { max_connections: 3, ..Options::default() };
        assert_eq!(small.write_connections(), 1, "at least one");
        let set = Options { write_connections: Some(16), ..Options::default() };
        assert_eq!(set.write_connections(), 16, "as set");

        // The builder overrides the URL.
        let b =
            builder("postgres://h/db?connect_timeout=4").connect_timeout(Duration::from_secs(1));
        assert_eq!(b.options.connect_timeout, Duration::from_secs(1));
    }

    #[test]
    fn quota_parameters_set_the_quotas_and_zero_is_invalid() {
        let b = builder("postgres://h/db?max_records_per_user=7&max_bytes_per_user=4096");
        assert_eq!(
            b.options.quotas,
            crate::quota::Quotas::default().max_records_per_user(7).max_bytes_per_user(4096)
        );
        for (url, option) in [
            ("postgres://h/db?max_records_per_user=0", "max_records_per_user"),
            ("postgres://h/db?max_bytes_per_user=0", "max_bytes_per_user"),
        ] {
            let err = PostgresMemoryStore::from_url(url).unwrap_err();
            assert!(matches!(err, MemoryError::Invalid { field, .. } if field == option), "{url}");
        }
        let err = PostgresMemoryStore::from_url("postgres://h/db?max_records_per_user=many");
        assert!(err.unwrap_err().to_string().contains("`max_records_per_user`"));
    }

    #[test]
    fn driver_parameters_land_on_the_config() {
        let b = builder(
            "postgres://u:pw@h/db?application_name=a%20b&options=-c%20statement_timeout%3D5s\
             &sslmode=disable&user=other&password=pw2&dbname=db2&hostaddr=10.0.0.7&port=6000\
             &keepalives=0&keepalives_idle=30&keepalives_interval=5&keepalives_retries=4\
             &tcp_user_timeout=9&target_session_attrs=read-write&channel_binding=require\
             &load_balance_hosts=random",
        );
        let c = &b.config;
        assert_eq!(c.get_application_name(), Some("a b"));
        assert_eq!(c.get_options(), Some("-c statement_timeout=5s"));
        assert_eq!(b.tls.mode, Some(SslMode::Disable));
        assert_eq!(c.get_user(), Some("other"), "a query user replaces the URL's");
        assert_eq!(c.get_password(), Some(&b"pw2"[..]));
        assert_eq!(c.get_dbname(), Some("db2"));
        assert_eq!(c.get_hostaddrs(), ["10.0.0.7".parse::<IpAddr>().unwrap()]);
        assert_eq!(c.get_hosts(), tcp(&["h"]));
        assert_eq!(c.get_ports(), [6000], "a query port replaces the URL's");
        assert!(!c.get_keepalives());
        assert_eq!(c.get_keepalives_idle(), Duration::from_secs(30));
        assert_eq!(c.get_keepalives_interval(), Some(Duration::from_secs(5)));
        assert_eq!(c.get_keepalives_retries(), Some(4));
        assert_eq!(c.get_tcp_user_timeout(), Some(&Duration::from_secs(9)));
        assert_eq!(c.get_target_session_attrs(), TargetSessionAttrs::ReadWrite);
        assert_eq!(c.get_channel_binding(), ChannelBinding::Require);
        assert_eq!(c.get_load_balance_hosts(), LoadBalanceHosts::Random);

        // The TLS parameters are the store's (see `tls_parameters_follow_libpq`).
        let b = builder("postgres://h/db?sslmode=require");
        assert_eq!(b.tls.mode, Some(SslMode::Require));
        // Zero keepalive durations mean the system default, as in libpq.
        let c =
            builder("postgres://h/db?keepalives_idle=0&keepalives_interval=0&tcp_user_timeout=0")
                .config;
        let fresh = tokio_postgres::Config::new();
        assert_eq!(c.get_keepalives_idle(), fresh.get_keepalives_idle());
        assert_eq!(c.get_keepalives_interval(), None);
        assert_eq!(c.get_tcp_user_timeout(), None);
    }

    #[test]
    fn unknown_and_malformed_parameters_are_invalid_naming_the_parameter() {
        let err = PostgresMemoryStore::builder("postgres://h/db?table=t&tabel=x").unwrap_err();
        assert_eq!(err.to_string(), "invalid url: has an unknown parameter `tabel`");
        // The libpq parameters the store does not support, and old names.
        for name in ["sslnegotiation", "sslpassword", "sslcrl", "gssencmode", "delete_batch_size"] {
            let err =
                PostgresMemoryStore::builder(&format!("postgres://h/db?{name}=x")).unwrap_err();
            assert_eq!(err.to_string(), format!("invalid url: has an unknown parameter `{name}`"));
        }
        for (param, named) in [
            ("max_connections=many", "max_connections"),
            ("connect_timeout=-1", "connect_timeout"),
            ("acquire_timeout=1.5", "acquire_timeout"),
            ("setup_schema=maybe", "setup_schema"),
            ("sslmode=verify_full", "sslmode"),
            ("sslmode=allow", "sslmode"),
            ("prepared_statements=sometimes", "prepared_statements"),
            ("target_session_attrs=primary", "target_session_attrs"),
            ("channel_binding=on", "channel_binding"),
            ("load_balance_hosts=yes", "load_balance_hosts"),
            ("hostaddr=db.internal", "hostaddr"),
            ("port=99999", "port"),
            ("keepalives=on", "keepalives"),
            ("keepalives_retries=-2", "keepalives_retries"),
        ] {
            let err =
                PostgresMemoryStore::builder(&format!("postgres://h/db?{param}")).unwrap_err();
            assert_eq!(field(&err), "url", "{param}");
            assert!(err.to_string().contains(&format!("`{named}`")), "{param}: {err}");
        }
        // Not a postgres:// URL, including the driver's key=value form.
        for bad in ["host=h user=u dbname=db", "postgres:db", "redis://h/0", "postgres//h/db"] {
            let err = PostgresMemoryStore::builder(bad).unwrap_err();
            assert_eq!(field(&err), "url", "{bad}");
        }
    }

    #[test]
    fn tls_parameters_follow_libpq() {
        let b = builder(
            "postgres://h/db?sslmode=verify-full&sslrootcert=/etc/ca.pem&sslcert=/c.pem\
             &sslkey=/k.pem&prepared_statements=false",
        );
        assert_eq!(b.tls.mode, Some(SslMode::VerifyFull));
        assert_eq!(b.tls.root_cert, Some(RootCert::File("/etc/ca.pem".into())));
        assert_eq!(b.tls.cert.as_deref(), Some(std::path::Path::new("/c.pem")));
        assert_eq!(b.tls.key.as_deref(), Some(std::path::Path::new("/k.pem")));
        assert!(!b.options.prepared_statements);
        assert!(builder("postgres://h/db").options.prepared_statements);
        for mode in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
            let b = builder(&format!("postgres://h/db?sslmode={mode}"));
            assert_eq!(b.tls.mode.map(SslMode::as_str), Some(mode));
        }
        assert_eq!(
            builder("postgres://h/db?sslrootcert=system").tls.root_cert,
            Some(RootCert::System)
        );

        // The default is prefer; with no root certificate it only encrypts.
        let store = builder("postgres://h/db").build().unwrap();
        assert_eq!(store.tls.mode, SslMode::Prefer);
        assert_eq!(store.config.get_ssl_mode(), tokio_postgres::config::SslMode::Prefer);
        let store =
            builder("postgres://h/db?sslmode=verify-ca&sslrootcert=/x").ssl_mode(SslMode::Disable);
        let store = store.build().expect("disable reads no file");
        assert_eq!(store.config.get_ssl_mode(), tokio_postgres::config::SslMode::Disable);

        // Combinations libpq refuses, refused before anything connects.
        for (url, field_name) in [
            ("postgres://h/db?sslmode=require&sslrootcert=system", "sslmode"),
            ("postgres://h/db?sslmode=verify-ca&sslrootcert=system", "sslmode"),
            ("postgres://h/db?sslmode=disable&sslrootcert=system", "sslmode"),
            ("postgres://h/db?sslmode=verify-full", "sslmode"),
            ("postgres://h/db?sslmode=verify-ca", "sslmode"),
            ("postgres://h/db?sslkey=/k.pem", "sslkey"),
            ("postgres://h/db?sslrootcert=/nonexistent/ca.pem", "sslrootcert"),
            ("postgres://h/db?sslcert=/nonexistent/c.pem&sslkey=/nonexistent/k.pem", "sslcert"),
        ] {
            let err = builder(url).build().unwrap_err();
            assert_eq!(field(&err), field_name, "{url}: {err}");
            assert!(!err.to_string().contains("nonexistent"), "{err}");
        }
        // libpq's host rules: no TLS on Unix sockets; hostaddr alone gives no name to verify.
        let store = builder("postgres:///db?host=/run/postgresql&sslmode=require").build().unwrap();
        assert_eq!(store.config.get_ssl_mode(), tokio_postgres::config::SslMode::Disable);
        let store = builder("postgres:///db?hostaddr=10.0.0.1&sslmode=require").build().unwrap();
        assert_eq!(store.config.get_hosts(), tcp(&["10.0.0.1"]));
        let err =
            builder("postgres:///db?hostaddr=10.0.0.1&sslmode=verify-full&sslrootcert=system");
        assert_eq!(field(&err.build().unwrap_err()), "sslmode");
        // Builder methods set the same things.
        let b = builder("postgres://h/db")
            .ssl_mode(SslMode::Require)
            .ssl_root_cert_system()
            .prepared_statements(false);
        assert_eq!(field(&b.build().unwrap_err()), "sslmode");
    }

    #[test]
    fn zero_and_out_of_range_values_name_the_option() {
        let base = || builder("postgres://h/db");
        let cases: [(&str, PostgresMemoryStoreBuilder); 12] = [
            ("max_connections", base().max_connections(0)),
            ("max_connections", base().max_connections(usize::MAX)),
            ("min_connections", base().min_connections(17)),
            ("connect_timeout", base().connect_timeout(Duration::ZERO)),
            ("acquire_timeout", base().acquire_timeout(Duration::ZERO)),
            ("search_scan_limit", base().search_scan_limit(0)),
            ("search_scan_bytes", base().search_scan_bytes(0)),
            ("erase_batch_size", base().erase_batch_size(0)),
            ("write_batch_max", base().write_batch_max(0)),
            ("write_connections", base().write_connections(0)),
            ("write_connections", base().max_connections(4).write_connections(5)),
            ("schema", base().schema("")),
        ];
        for (option, configured) in cases {
            assert_eq!(field(&configured.build().unwrap_err()), option);
        }
        for option in [
            "max_connections",
            "connect_timeout",
            "acquire_timeout",
            "search_scan_limit",
            "search_scan_bytes",
            "erase_batch_size",
            "write_batch_max",
            "write_connections",
        ] {
            let err = PostgresMemoryStore::from_url(&format!("postgres://h/db?{option}=0"));
            assert_eq!(field(&err.unwrap_err()), option);
        }
        assert!(base().max_connections(MAX_POOL_SIZE).min_connections(0).build().is_ok());
    }

    #[test]
    fn the_password_is_never_in_debug_output_or_error_messages() {
        let password = "hunter2-secret";
        let url = format!("postgres://me:{password}@h1,h2:5433/db?password={password}x");
        let b = builder(&url);
        assert!(!format!("{b:?}").contains(password), "{b:?}");
        let store = b.build().unwrap();
        assert!(!format!("{store:?}").contains(password), "{store:?}");
        for suffix in [
            "&max_connections=0",
            "&max_connections=hunter2-secret",
            "&sslmode=hunter2-secret",
            "&hostaddr=hunter2-secret",
            "&table=hunter2-secret",
        ] {
            let err = PostgresMemoryStore::from_url(&format!("{url}{suffix}")).unwrap_err();
            for text in [err.to_string(), format!("{err:?}")] {
                assert!(!text.contains(password), "{suffix}: {text}");
            }
        }
        let err = PostgresMemoryStore::from_url(&format!("postgres://me:{password}@h:x/db"));
        assert!(!format!("{:?}", err.unwrap_err()).contains(password));
    }
}
