//! Options, the builder, and the URL forms it reads.
//!
//! [`RedisMemoryStore::builder`] parses the URL at once with the shared
//! [`ConnectionUrl`] parser: the scheme picks the deployment and the transport (TCP or TLS), the
//! hosts become the driver's [`ConnectionInfo`]s with the URL's credentials and database, and
//! the query parameters set the options of the same names. [`RedisMemoryStoreBuilder::build`]
//! then checks every option's range and reads the TLS files. Neither `Debug` nor any error shows
//! the password or key material.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use redis::{
    ClientTlsConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo,
    TlsCertificates,
};

use super::conn::Target;
use super::RedisMemoryStore;
use crate::connection_url::{ConnectionUrl, HostPort};
use crate::error::{MemoryError, Result};
use crate::provider::DEFAULT_SEARCH_SCAN_BYTES;
use crate::validation;

/// The port of a URL host without one.
const DEFAULT_PORT: u16 = 6379;
const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_ERASE_BATCH_SIZE: usize = 500;
const DEFAULT_LIST_SCAN_LIMIT: usize = 1_000;
const DEFAULT_SEARCH_SCAN_LIMIT: usize = 500;
/// The least `list_scan_limit`: one more than the largest page, so a page of live records
/// always fits in one call's budget and only expired records can make a page short.
const MIN_LIST_SCAN_LIMIT: usize = validation::MAX_PAGE_LIMIT + 1;

/// Options shared by the builder and the store.
#[derive(Debug, Clone)]
pub(super) struct Options {
    /// Refuse to start on a deployment that can lose or evict acknowledged writes.
    pub(super) require_durable: bool,
    /// Longest wait for one reply.
    pub(super) response_timeout: Duration,
    /// Longest wait to open one connection.
    pub(super) connect_timeout: Duration,
    /// Most records one erase script call removes.
    pub(super) erase_batch_size: usize,
    /// Most index entries one `list` call inspects.
    pub(super) list_scan_limit: usize,
    /// Most index entries one `search` call inspects.
    pub(super) search_scan_limit: usize,
    /// Most content bytes one `search` call inspects.
    pub(super) search_scan_bytes: usize,
    /// The TLS files and verification of a `rediss` URL.
    pub(super) tls: TlsFiles,
    /// Limits per application user.
    pub(super) quotas: crate::quota::Quotas,
}

/// The TLS settings of a `rediss` URL, named after `redis-cli`'s flags. Paths are not secret;
/// the files are read by [`RedisMemoryStoreBuilder::build`] and their contents never printed.
#[derive(Debug, Clone, Default)]
pub(super) struct TlsFiles {
    /// `cacert`: the CA certificates to trust instead of the system's.
    pub(super) cacert: Option<PathBuf>,
    /// `cert`: the client certificate, for servers that ask for one.
    pub(super) cert: Option<PathBuf>,
    /// `key`: the client certificate's private key.
    pub(super) key: Option<PathBuf>,
    /// `insecure`: no check of the server's certificate at all.
    pub(super) insecure: bool,
}

impl TlsFiles {
    fn is_set(&self) -> bool {
        self.cacert.is_some() || self.cert.is_some() || self.key.is_some() || self.insecure
    }

    /// The files' contents in the driver's form, checked first so a bad file is `Invalid`
    /// naming its parameter; `None` when no file is named (the system's CAs, no client
    /// certificate).
    fn read(&self) -> Result<Option<TlsCertificates>> {
        let root_cert = match &self.cacert {
            None => None,
            Some(path) => {
                let pem = crate::tls::read("cacert", path)?;
                crate::tls::certificates("cacert", &pem)?;
                Some(pem)
            }
        };
        let client_tls = match (&self.cert, &self.key) {
            (None, None) => None,
            (Some(_), None) => {
                return Err(MemoryError::invalid(
                    "key",
                    "is needed with cert: the client certificate has no private key",
                ))
            }
            (None, Some(_)) => return Err(MemoryError::invalid("cert", "is needed with key")),
            (Some(cert), Some(key)) => {
                let client_cert = crate::tls::read("cert", cert)?;
                crate::tls::certificates("cert", &client_cert)?;
                crate::tls::check_key_permissions("key", key)?;
                let client_key = crate::tls::read("key", key)?;
                crate::tls::private_key("key", &client_key)?;
                Some(ClientTlsConfig { client_cert, client_key })
            }
        };
        if root_cert.is_none() && client_tls.is_none() {
            return Ok(None);
        }
        Ok(Some(TlsCertificates { client_tls, root_cert }))
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            require_durable: false,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            erase_batch_size: DEFAULT_ERASE_BATCH_SIZE,
            list_scan_limit: DEFAULT_LIST_SCAN_LIMIT,
            search_scan_limit: DEFAULT_SEARCH_SCAN_LIMIT,
            search_scan_bytes: DEFAULT_SEARCH_SCAN_BYTES,
            tls: TlsFiles::default(),
            quotas: crate::quota::Quotas::unlimited(),
        }
    }
}

impl Options {
    /// Checks every range; nothing is raised or clamped silently.
    fn check(&self) -> Result<()> {
        if self.response_timeout.is_zero() {
            return Err(MemoryError::invalid("response_timeout", "must be longer than zero"));
        }
        if self.connect_timeout.is_zero() {
            return Err(MemoryError::invalid("connect_timeout", "must be longer than zero"));
        }
        if self.erase_batch_size == 0 {
            return Err(MemoryError::invalid("erase_batch_size", "must be at least 1"));
        }
        if self.list_scan_limit < MIN_LIST_SCAN_LIMIT {
            return Err(MemoryError::invalid(
                "list_scan_limit",
                format!("must be at least {MIN_LIST_SCAN_LIMIT}, so a page of live records fits"),
            ));
        }
        if self.search_scan_limit == 0 {
            return Err(MemoryError::invalid("search_scan_limit", "must be at least 1"));
        }
        if self.search_scan_bytes == 0 {
            return Err(MemoryError::invalid("search_scan_bytes", "must be at least 1"));
        }
        self.quotas.check()?;
        Ok(())
    }
}

/// What a URL names: one server, or the seed nodes of a cluster, each with the URL's
/// credentials and database.
// One per store, built once: its size does not matter (TLS settings make the single
// server's variant large).
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub(super) enum Endpoint {
    /// `redis://…`
    Single(ConnectionInfo),
    /// `redis+cluster://…`: the listed nodes; the client discovers the rest.
    Cluster(Vec<ConnectionInfo>),
}

impl Endpoint {
    /// The same nodes over TLS without certificate checks (`insecure=true`).
    fn insecure(self) -> Self {
        let skip = |node: ConnectionInfo| match node.addr().clone() {
            ConnectionAddr::TcpTls { host, port, tls_params, .. } => {
                node.set_addr(ConnectionAddr::TcpTls { host, port, insecure: true, tls_params })
            }
            _ => node,
        };
        match self {
            Self::Single(node) => Self::Single(skip(node)),
            Self::Cluster(nodes) => Self::Cluster(nodes.into_iter().map(skip).collect()),
        }
    }

    /// Whether the nodes are reached over TLS (`rediss`).
    pub(super) fn uses_tls(&self) -> bool {
        self.nodes().iter().any(|node| matches!(node.addr(), ConnectionAddr::TcpTls { .. }))
    }

    fn nodes(&self) -> &[ConnectionInfo] {
        match self {
            Self::Single(node) => std::slice::from_ref(node),
            Self::Cluster(nodes) => nodes,
        }
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Where it connects, never the credentials.
        let nodes: Vec<String> = self
            .nodes()
            .iter()
            .map(|node| match node.addr() {
                ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. }
                    if host.contains(':') =>
                {
                    format!("[{host}]:{port}")
                }
                ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                    format!("{host}:{port}")
                }
                _ => "(other)".to_owned(),
            })
            .collect();
        let deployment = match self {
            Self::Single(_) => "single server",
            Self::Cluster(_) => "cluster",
        };
        let db = self.nodes().first().map_or(0, |node| node.redis_settings().db());
        let tls = self.uses_tls();
        f.debug_struct("Endpoint")
            .field("deployment", &deployment)
            .field("nodes", &nodes)
            .field("db", &db)
            .field("tls", &tls)
            .finish()
    }
}

/// Which deployment a scheme names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deployment {
    Single,
    Cluster,
}

/// How a scheme reaches its nodes; [`address`] turns it into the driver's address, and nothing
/// else needs to know. Cluster nodes found by discovery get the seeds' transport from the
/// driver, so on a `rediss+cluster` URL every node connection uses TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Tcp,
    Tls,
}

/// The deployment and transport of a (lowercase) scheme.
fn scheme(scheme: &str) -> Result<(Deployment, Transport)> {
    match scheme {
        "redis" => Ok((Deployment::Single, Transport::Tcp)),
        "redis+cluster" => Ok((Deployment::Cluster, Transport::Tcp)),
        "rediss" => Ok((Deployment::Single, Transport::Tls)),
        "rediss+cluster" => Ok((Deployment::Cluster, Transport::Tls)),
        _ => Err(MemoryError::invalid("url", "has an unknown scheme")),
    }
}

fn no_host() -> MemoryError {
    MemoryError::invalid("url", "names no host")
}

/// The driver address of one URL host: the one place that decides the address kind.
fn address(transport: Transport, node: &HostPort) -> Result<ConnectionAddr> {
    if node.host.is_empty() {
        return Err(no_host());
    }
    // The driver's own URL parser refuses these too: they name no server to connect to.
    if matches!(node.host.as_str(), "0.0.0.0" | "::") {
        return Err(MemoryError::invalid("url", "names a wildcard address, not a server"));
    }
    let port = node.port.unwrap_or(DEFAULT_PORT);
    Ok(match transport {
        Transport::Tcp => ConnectionAddr::Tcp(node.host.clone(), port),
        // Verified against the system's CAs until `build` adds the URL's files.
        Transport::Tls => ConnectionAddr::TcpTls {
            host: node.host.clone(),
            port,
            insecure: false,
            tls_params: None,
        },
    })
}

/// The connection info of one node: its address, then the URL's credentials and database.
fn node_info(
    transport: Transport,
    node: &HostPort,
    settings: &RedisConnectionInfo,
) -> Result<ConnectionInfo> {
    let info = address(transport, node)?
        .into_connection_info()
        .map_err(|_| MemoryError::invalid("url", "is not a valid Redis URL"))?;
    Ok(info.set_redis_settings(settings.clone()).set_tcp_settings(tcp_settings()))
}

/// The socket settings of every connection: `TCP_NODELAY`, as hiredis and redis-py set it
/// (redis-rs does not by default). Calls are small writes of a request/response protocol; with
/// Nagle's algorithm one waits for the acknowledgement of the previous, which only adds
/// latency (TLS records make such writes more frequent).
pub(super) fn tcp_settings() -> redis::io::tcp::TcpSettings {
    redis::io::tcp::TcpSettings::default().set_nodelay(true)
}

/// The database number of a single-server URL's path: `/N`, or 0 when there is none.
fn database(path: &str) -> Result<i64> {
    match path.strip_prefix('/').unwrap_or(path) {
        "" => Ok(0),
        number => number
            .parse::<u32>()
            .map(i64::from)
            .map_err(|_| MemoryError::invalid("url", "has a path that is not a database number")),
    }
}

/// The URL's credentials and database `db`, which every node of the URL gets.
fn settings(url: &ConnectionUrl, db: i64) -> RedisConnectionInfo {
    let mut settings = RedisConnectionInfo::default().set_db(db);
    if !url.username.is_empty() {
        settings = settings.set_username(&url.username);
    }
    if let Some(password) = &url.password {
        settings = settings.set_password(password);
    }
    settings
}

/// Builds a [`RedisMemoryStore`]: from [`RedisMemoryStore::builder`], which has already read the
/// URL and its parameters; each method sets one option, overriding the URL's.
///
/// | option | URL parameter | default | range |
/// | --- | --- | --- | --- |
/// | [`require_durable`](Self::require_durable) | `require_durable=true` | `false` | |
/// | [`response_timeout`](Self::response_timeout) | `response_timeout=SECONDS` | 10 s | more than zero |
/// | [`connect_timeout`](Self::connect_timeout) | `connect_timeout=SECONDS` | 5 s | more than zero |
/// | [`erase_batch_size`](Self::erase_batch_size) | `erase_batch_size=N` | 500 | at least 1 |
/// | [`list_scan_limit`](Self::list_scan_limit) | `list_scan_limit=N` | 1,000 | at least 101 |
/// | [`search_scan_limit`](Self::search_scan_limit) | `search_scan_limit=N` | 500 | at least 1 |
/// | [`search_scan_bytes`](Self::search_scan_bytes) | `search_scan_bytes=N` | 1,048,576 | at least 1 |
/// | [`max_records_per_user`](Self::max_records_per_user) | `max_records_per_user=N` | no limit | at least 1 |
/// | [`max_bytes_per_user`](Self::max_bytes_per_user) | `max_bytes_per_user=N` | no limit | at least 1 |
/// | [`tls_ca_cert`](Self::tls_ca_cert) | `cacert=PATH` | the system's CAs | `rediss` only |
/// | [`tls_cert`](Self::tls_cert), [`tls_key`](Self::tls_key) | `cert=PATH`, `key=PATH` | none | `rediss` only, both or neither |
/// | [`tls_insecure`](Self::tls_insecure) | `insecure=true` | `false` | `rediss` only |
///
/// A value out of range makes [`build`](Self::build) fail with
/// [`Invalid`](MemoryError::Invalid) naming the option. `Debug` shows the nodes, the database
/// and the options, never the credentials.
///
/// ```no_run
/// use std::time::Duration;
/// use agent_memory::RedisMemoryStore;
///
/// let store = RedisMemoryStore::builder("redis://:secret@127.0.0.1:6379/0?connect_timeout=2")?
///     .require_durable(true)
///     .response_timeout(Duration::from_secs(2))
///     .build()?;
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
#[derive(Clone)]
pub struct RedisMemoryStoreBuilder {
    endpoint: Endpoint,
    transport: Transport,
    options: Options,
}

impl fmt::Debug for RedisMemoryStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisMemoryStoreBuilder")
            .field("endpoint", &self.endpoint)
            .field("options", &self.options)
            .finish()
    }
}

impl RedisMemoryStoreBuilder {
    /// Reads `url` (the forms are in the [module docs](super)) and its parameters.
    pub(super) fn from_url(url: &str) -> Result<Self> {
        let mut url = ConnectionUrl::parse(url)?;
        let (deployment, transport) = scheme(&url.scheme)?;
        let endpoint = match deployment {
            Deployment::Single => {
                let host = url.single_host()?.ok_or_else(no_host)?;
                let settings = settings(&url, database(&url.path)?);
                Endpoint::Single(node_info(transport, host, &settings)?)
            }
            Deployment::Cluster => {
                if !matches!(url.path.as_str(), "" | "/" | "/0") {
                    return Err(MemoryError::invalid(
                        "url",
                        "has a database path, but Redis Cluster only has database 0",
                    ));
                }
                if url.hosts.is_empty() {
                    return Err(no_host());
                }
                let settings = settings(&url, 0);
                Endpoint::Cluster(
                    url.hosts
                        .iter()
                        .map(|host| node_info(transport, host, &settings))
                        .collect::<Result<_>>()?,
                )
            }
        };
        let mut params = std::mem::take(&mut url.params);
        let mut builder = Self { endpoint, transport, options: Options::default() };
        if let Some(require) = params.take_bool("require_durable")? {
            builder = builder.require_durable(require);
        }
        if let Some(timeout) = params.take_seconds("response_timeout")? {
            builder = builder.response_timeout(timeout);
        }
        if let Some(timeout) = params.take_seconds("connect_timeout")? {
            builder = builder.connect_timeout(timeout);
        }
        if let Some(records) = params.take_parsed("erase_batch_size")? {
            builder = builder.erase_batch_size(records);
        }
        if let Some(entries) = params.take_parsed("list_scan_limit")? {
            builder = builder.list_scan_limit(entries);
        }
        if let Some(entries) = params.take_parsed("search_scan_limit")? {
            builder = builder.search_scan_limit(entries);
        }
        if let Some(bytes) = params.take_parsed("search_scan_bytes")? {
            builder = builder.search_scan_bytes(bytes);
        }
        builder = builder.quotas(crate::quota::Quotas::from_params(&mut params)?);
        if let Some(path) = params.take("cacert") {
            builder = builder.tls_ca_cert(path);
        }
        if let Some(path) = params.take("cert") {
            builder = builder.tls_cert(path);
        }
        if let Some(path) = params.take("key") {
            builder = builder.tls_key(path);
        }
        if let Some(insecure) = params.take_bool("insecure")? {
            builder = builder.tls_insecure(insecure);
        }
        params.finish()?;
        Ok(builder)
    }

    /// Makes [`start`](crate::MemoryStore::start) fail with
    /// [`Storage`](MemoryError::Storage) when the deployment can lose or evict acknowledged
    /// writes (see [`DurabilityReport`](super::DurabilityReport)), instead of only logging a
    /// warning. Off by default.
    pub fn require_durable(mut self, require: bool) -> Self {
        self.options.require_durable = require;
        self
    }

    /// How long one operation may wait for its reply before failing with `Storage`
    /// (default 10 s; more than zero).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.options.response_timeout = timeout;
        self
    }

    /// How long connecting at `start()` may take, every retry of a refused connection
    /// included (default 5 s; more than zero): an unreachable server fails with `Storage`
    /// within it. URL parameter `connect_timeout`, in whole seconds.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.options.connect_timeout = timeout;
        self
    }

    /// Most records one `delete_all` or `delete_user` script call removes (default 500; at
    /// least 1); the store loops until none is left, so one call never blocks the server long.
    pub fn erase_batch_size(mut self, records: usize) -> Self {
        self.options.erase_batch_size = records;
        self
    }

    /// The most records one application user may hold, every namespace and expired records
    /// included (default: no limit; at least 1). See [Quotas](crate#quotas).
    pub fn max_records_per_user(mut self, records: u64) -> Self {
        self.options.quotas = self.options.quotas.max_records_per_user(records);
        self
    }

    /// The most bytes one application user may hold, counted by
    /// [`record_bytes`](crate::quota::record_bytes) (default: no limit; at least 1).
    pub fn max_bytes_per_user(mut self, bytes: u64) -> Self {
        self.options.quotas = self.options.quotas.max_bytes_per_user(bytes);
        self
    }

    /// Sets both limits at once from `quotas`.
    pub fn quotas(mut self, quotas: crate::quota::Quotas) -> Self {
        self.options.quotas = quotas;
        self
    }

    /// Most index entries one `list` call inspects to skip expired records (default 1,000; at
    /// least 101, so a page of live records always fits).
    pub fn list_scan_limit(mut self, entries: usize) -> Self {
        self.options.list_scan_limit = entries;
        self
    }

    /// Most index entries one `search` call inspects (default 500; at least 1); a call that
    /// reaches it returns what it found with a cursor.
    pub fn search_scan_limit(mut self, entries: usize) -> Self {
        self.options.search_scan_limit = entries;
        self
    }

    /// Most content bytes one `search` call inspects (default 1 MiB; at least 1; a call always
    /// inspects one record, so it reads at most this plus one record's content); a call that
    /// reaches it returns what it found with a cursor. Redis runs one script at a time, so this
    /// bounds how long one search keeps every other client waiting, whatever is stored.
    pub fn search_scan_bytes(mut self, bytes: usize) -> Self {
        self.options.search_scan_bytes = bytes;
        self
    }

    /// A PEM file of the CA certificates that may sign the servers' certificates, instead of
    /// the system's trusted authorities (URL parameter `cacert`, as `redis-cli --cacert`).
    /// `rediss` URLs only. Read by [`build`](Self::build).
    pub fn tls_ca_cert(mut self, path: impl Into<PathBuf>) -> Self {
        self.options.tls.cacert = Some(path.into());
        self
    }

    /// A PEM file with the client certificate to show servers that ask for one
    /// (`--tls-auth-clients yes`; URL parameter `cert`). Needs [`tls_key`](Self::tls_key).
    pub fn tls_cert(mut self, path: impl Into<PathBuf>) -> Self {
        self.options.tls.cert = Some(path.into());
        self
    }

    /// The PEM file with the client certificate's private key (URL parameter `key`); refused
    /// when other users can read it, as libpq refuses such keys.
    pub fn tls_key(mut self, path: impl Into<PathBuf>) -> Self {
        self.options.tls.key = Some(path.into());
        self
    }

    /// Connects over TLS without checking the servers' certificates at all (URL parameter
    /// `insecure=true`, as `redis-cli --insecure`): the connection is encrypted, but anyone on
    /// the network path can pretend to be the server. `start` logs a warning each time. Off by
    /// default; for trying things out, never for personal data.
    pub fn tls_insecure(mut self, insecure: bool) -> Self {
        self.options.tls.insecure = insecure;
        self
    }

    /// Checks the options, reads the TLS files, and builds the store; nothing connects until
    /// [`start`](crate::MemoryStore::start).
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming the option that is out of range (see the table
    /// above), or naming `cacert`, `cert` or `key` for a file that cannot be read or parsed, a
    /// key other users can read, or TLS settings on a URL that does not use TLS.
    pub fn build(self) -> Result<RedisMemoryStore> {
        self.options.check()?;
        let tls = &self.options.tls;
        if self.transport == Transport::Tcp && tls.is_set() {
            return Err(MemoryError::invalid(
                "url",
                "has TLS settings (cacert, cert, key or insecure), which need rediss:// or \
                 rediss+cluster://",
            ));
        }
        let certificates = tls.read()?;
        let endpoint = if tls.insecure { self.endpoint.insecure() } else { self.endpoint };
        let target = Target::new(&endpoint, &self.options, certificates)?;
        Ok(RedisMemoryStore::new(target, self.options))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWORD: &str = "pw-Zq8-never-shown";

    fn builder(url: &str) -> RedisMemoryStoreBuilder {
        RedisMemoryStoreBuilder::from_url(url).unwrap_or_else(|err| panic!("{url}: {err}"))
    }

    fn field(err: &MemoryError) -> &'static str {
        match err {
            MemoryError::Invalid { field, .. } => field,
            other => panic!("not Invalid: {other}"),
        }
    }

    fn tcp(info: &ConnectionInfo) -> (&str, u16) {
        match info.addr() {
            ConnectionAddr::Tcp(host, port) => (host.as_str(), *port),
            other => panic!("not TCP: {other:?}"),
        }
    }

    #[test]
    fn a_single_server_url_lands_in_one_connection_info() {
        let parsed = builder(&format!("redis://us%40r:{PASSWORD}%3A@db.internal:6380/3"));
        let Endpoint::Single(info) = &parsed.endpoint else { panic!("not single") };
        assert_eq!(tcp(info), ("db.internal", 6380));
        let settings = info.redis_settings();
        assert_eq!(settings.db(), 3);
        assert_eq!(settings.username(), Some("us@r"));
        assert_eq!(settings.password(), Some(format!("{PASSWORD}:").as_str()));

        for url in ["redis://127.0.0.1", "redis://127.0.0.1/", "REDIS://127.0.0.1:6379/0"] {
            let Endpoint::Single(info) = builder(url).endpoint else { panic!("not single") };
            assert_eq!(tcp(&info), ("127.0.0.1", 6379), "{url}");
            let settings = info.redis_settings();
            assert_eq!((settings.db(), settings.username(), settings.password()), (0, None, None));
        }
        let Endpoint::Single(info) = builder("redis://[::1]:7000").endpoint else { panic!() };
        assert_eq!(tcp(&info), ("::1", 7000));
        builder("redis://h").build().expect("a single-server store builds");
    }

    #[test]
    fn a_cluster_url_gives_every_seed_the_same_credentials() {
        let url = format!("redis+cluster://ops:{PASSWORD}@10.0.0.1:7000,10.0.0.2:7001, [::1]/0");
        let parsed = builder(&url);
        let Endpoint::Cluster(seeds) = &parsed.endpoint else { panic!("not a cluster") };
        let addresses: Vec<(&str, u16)> = seeds.iter().map(tcp).collect();
        assert_eq!(addresses, [("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 6379)]);
        for seed in seeds {
            let settings = seed.redis_settings();
            assert_eq!(settings.username(), Some("ops"));
            assert_eq!(settings.password(), Some(PASSWORD));
            assert_eq!(settings.db(), 0);
        }
        parsed.build().expect("the cluster client builds without connecting");
        for path in ["", "/"] {
            builder(&format!("redis+cluster://h:1{path}"));
        }
    }

    #[test]
    fn every_parameter_sets_the_option_of_its_name() {
        for base in ["redis://h/2", "redis+cluster://h:1,h:2"] {
            let url = format!(
                "{base}?require_durable=true&response_timeout=3&connect_timeout=2\
                 &erase_batch_size=7&list_scan_limit=200&search_scan_limit=9\
                 &search_scan_bytes=4096"
            );
            let options = builder(&url).options;
            assert!(options.require_durable);
            assert_eq!(options.response_timeout, Duration::from_secs(3));
            assert_eq!(options.connect_timeout, Duration::from_secs(2));
            assert_eq!(options.erase_batch_size, 7);
            assert_eq!(options.list_scan_limit, 200);
            assert_eq!(options.search_scan_limit, 9);
            assert_eq!(options.search_scan_bytes, 4_096);
        }
        let defaults = builder("redis://h").options;
        assert!(!defaults.require_durable);
        assert_eq!(defaults.response_timeout, DEFAULT_RESPONSE_TIMEOUT);
        assert_eq!(defaults.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(defaults.erase_batch_size, DEFAULT_ERASE_BATCH_SIZE);
        assert_eq!(defaults.list_scan_limit, DEFAULT_LIST_SCAN_LIMIT);
        assert_eq!(defaults.search_scan_limit, DEFAULT_SEARCH_SCAN_LIMIT);
        assert_eq!(defaults.search_scan_bytes, DEFAULT_SEARCH_SCAN_BYTES);
        // A builder method overrides the URL.
        let options = builder("redis://h?erase_batch_size=7").erase_batch_size(8).options;
        assert_eq!(options.erase_batch_size, 8);
        assert!(!builder("redis://h?require_durable=off").options.require_durable);
    }

    #[test]
    fn an_unknown_or_malformed_parameter_is_invalid_naming_it() {
        // The names before ADR 0004 are unknown now, not ignored.
        for old in ["list_scan", "search_scan", "erase_batch", "connection_timeout", "protocol"] {
            let err =
                RedisMemoryStoreBuilder::from_url(&format!("redis://h/0?{old}=5")).unwrap_err();
            assert_eq!(err.to_string(), format!("invalid url: has an unknown parameter `{old}`"));
        }
        let err = RedisMemoryStoreBuilder::from_url("redis+cluster://h:1?tabel=x").unwrap_err();
        assert_eq!(err.to_string(), "invalid url: has an unknown parameter `tabel`");
        for (url, name) in [
            ("redis://h?connect_timeout=1.5", "connect_timeout"),
            ("redis://h?erase_batch_size=-1", "erase_batch_size"),
            ("redis://h?require_durable=maybe", "require_durable"),
        ] {
            let err = RedisMemoryStoreBuilder::from_url(url).unwrap_err();
            assert_eq!(field(&err), "url");
            assert!(err.to_string().contains(&format!("`{name}`")), "{err}");
        }
    }

    #[test]
    fn zero_and_out_of_range_values_are_invalid_naming_the_option() {
        let set = |b: RedisMemoryStoreBuilder| b.build().err().map(|err| field(&err));
        let b = || builder("redis://h");
        assert_eq!(set(b().response_timeout(Duration::ZERO)), Some("response_timeout"));
        assert_eq!(set(b().connect_timeout(Duration::ZERO)), Some("connect_timeout"));
        assert_eq!(set(b().erase_batch_size(0)), Some("erase_batch_size"));
        assert_eq!(set(b().list_scan_limit(100)), Some("list_scan_limit"));
        assert_eq!(set(b().search_scan_limit(0)), Some("search_scan_limit"));
        assert_eq!(set(b().search_scan_bytes(0)), Some("search_scan_bytes"));
        assert_eq!(set(b().list_scan_limit(101).erase_batch_size(1).search_scan_limit(1)), None);
        for (param, option) in [
            ("response_timeout=0", "response_timeout"),
            ("connect_timeout=0", "connect_timeout"),
            ("erase_batch_size=0", "erase_batch_size"),
            ("list_scan_limit=1", "list_scan_limit"),
            ("search_scan_limit=0", "search_scan_limit"),
            ("search_scan_bytes=0", "search_scan_bytes"),
        ] {
            let err = builder(&format!("redis://h?{param}")).build().unwrap_err();
            assert_eq!(field(&err), option, "{param}");
        }
    }

    #[test]
    fn rediss_urls_use_tls_on_every_seed_and_take_redis_cli_flags() {
        let parsed = builder(&format!(
            "rediss://acl-user:{PASSWORD}@cache.example:6380/2?cacert=/ca.pem&cert=/c.pem\
             &key=/k.pem&insecure=false"
        ));
        let Endpoint::Single(info) = &parsed.endpoint else { panic!("not single") };
        assert!(matches!(
            info.addr(),
            ConnectionAddr::TcpTls { host, port: 6380, insecure: false, .. } if host == "cache.example"
        ));
        assert_eq!(info.redis_settings().username(), Some("acl-user"));
        assert_eq!(info.redis_settings().db(), 2);
        let tls = &parsed.options.tls;
        assert_eq!(tls.cacert.as_deref(), Some(std::path::Path::new("/ca.pem")));
        assert_eq!((tls.cert.is_some(), tls.key.is_some(), tls.insecure), (true, true, false));

        let cluster = builder("rediss+cluster://h1:7000,h2:7001?insecure=true");
        let endpoint = cluster.endpoint.clone().insecure();
        let Endpoint::Cluster(seeds) = &endpoint else { panic!("not a cluster") };
        assert!(seeds
            .iter()
            .all(|seed| matches!(seed.addr(), ConnectionAddr::TcpTls { insecure: true, .. })));
        cluster.build().expect("an insecure cluster needs no file");
        builder("rediss://h").build().expect("the system's CAs need no file");

        // TLS settings need a TLS scheme; files must exist, and come in pairs.
        for (url, named) in [
            ("redis://h?cacert=/ca.pem", "url"),
            ("redis+cluster://h:1?insecure=true", "url"),
            ("rediss://h?cacert=/nonexistent/ca.pem", "cacert"),
            ("rediss://h?cert=/nonexistent/c.pem", "key"),
            ("rediss://h?key=/nonexistent/k.pem", "cert"),
            ("rediss://h?cert=/nonexistent/c.pem&key=/nonexistent/k.pem", "cert"),
        ] {
            let err = builder(url).build().unwrap_err();
            assert_eq!(field(&err), named, "{url}: {err}");
            assert!(!err.to_string().contains("nonexistent"), "{err}");
        }
        let err = RedisMemoryStoreBuilder::from_url("rediss://h?insecure=maybe").unwrap_err();
        assert!(err.to_string().contains("`insecure`"), "{err}");
    }

    #[test]
    fn malformed_urls_are_invalid_and_the_password_shows_nowhere() {
        for bad in [
            format!("redis+cluster://:{PASSWORD}@"),
            format!("rediss+cluster://:{PASSWORD}@"),
            format!("redis+cluster://:{PASSWORD}@127.0.0.1:7000/3"),
            format!("redis+cluster://:{PASSWORD}@127.0.0.1:7000,,127.0.0.1:7001"),
            format!("redis://:{PASSWORD}@127.0.0.1:notaport"),
            format!("redis://:{PASSWORD}@127.0.0.1/x"),
            format!("redis://:{PASSWORD}@127.0.0.1/-1"),
            format!("redis://:{PASSWORD}@a:1,b:2"),
            format!("redis://:{PASSWORD}@0.0.0.0"),
            format!("redis://:{PASSWORD}@"),
            format!("redis:{PASSWORD}"),
            format!("memcached://:{PASSWORD}@h"),
        ] {
            let err = RedisMemoryStoreBuilder::from_url(&bad).expect_err(&bad);
            assert!(err.is_invalid(), "{bad}: {err}");
            assert!(!format!("{err} {err:?}").contains(PASSWORD), "{bad}: {err}");
        }

        for url in [
            format!("redis://admin:{PASSWORD}@127.0.0.1:6379/1?connect_timeout=1"),
            format!("redis+cluster://admin:{PASSWORD}@127.0.0.1:7000,127.0.0.1:7001"),
            format!("rediss://admin:{PASSWORD}@127.0.0.1:6379/1?insecure=true"),
            format!("rediss+cluster://admin:{PASSWORD}@127.0.0.1:7000,127.0.0.1:7001"),
        ] {
            let parsed = builder(&url);
            let shown = format!("{parsed:?}");
            assert!(!shown.contains(PASSWORD), "{shown}");
            assert!(shown.contains("127.0.0.1"), "{shown}");
            let store = parsed.build().unwrap();
            assert!(!format!("{store:?}").contains(PASSWORD));
        }
    }
}
