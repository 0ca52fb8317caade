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

use redis::{ClientTlsConfig, ConnectionAddr, ConnectionInfo, TlsCertificates};

use super::conn::Target;
use super::url::{database, no_host, node_info, scheme, settings, Transport};
use super::RedisMemoryStore;
use crate::connection_url::ConnectionUrl;
use crate::error::{MemoryError, Result};
use crate::provider::CommonOptions;
use crate::validation;

/// The port of a URL host without one.
pub(super) const DEFAULT_PORT: u16 = 6379;
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
    /// The search budgets, erase batch size and quotas every provider takes.
    pub(super) common: CommonOptions,
    /// Most index entries one `list` call inspects.
    pub(super) list_scan_limit: usize,
    /// The TLS files and verification of a `rediss` URL.
    pub(super) tls: TlsFiles,
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
            common: CommonOptions::new(DEFAULT_SEARCH_SCAN_LIMIT, DEFAULT_ERASE_BATCH_SIZE),
            list_scan_limit: DEFAULT_LIST_SCAN_LIMIT,
            tls: TlsFiles::default(),
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
        self.common.check()?;
        if self.list_scan_limit < MIN_LIST_SCAN_LIMIT {
            return Err(MemoryError::invalid(
                "list_scan_limit",
                format!("must be at least {MIN_LIST_SCAN_LIMIT}, so a page of live records fits"),
            ));
        }
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
pub(super) enum Deployment {
    Single,
    Cluster,
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
        if let Some(entries) = params.take_parsed("list_scan_limit")? {
            builder = builder.list_scan_limit(entries);
        }
        builder.options.common.take_params(&mut params)?;
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

    crate::builder::setters! {
        /// Makes [`start`](crate::MemoryStore::start) fail with [`Storage`](MemoryError::Storage)
        /// when the deployment can lose or evict acknowledged writes (see
        /// [`DurabilityReport`](super::DurabilityReport)), instead of only logging a warning. Off
        /// by default.
        require_durable(require: bool) => options.require_durable = require;

        /// How long one operation may wait for its reply before failing with `Storage` (default 10
        /// s; more than zero).
        response_timeout(timeout: Duration) => options.response_timeout = timeout;

        /// How long connecting at `start()` may take, every retry of a refused connection included
        /// (default 5 s; more than zero): an unreachable server fails with `Storage` within it. URL
        /// parameter `connect_timeout`, in whole seconds.
        connect_timeout(timeout: Duration) => options.connect_timeout = timeout;
    }

    crate::provider::common_setters! {
        options.common;
        search_scan_limit: "500", "Each index entry inspected is one record.";
        search_scan_bytes: "Redis runs one script at a time, so this bounds how long one search \
            keeps every other client waiting.";
        erase_batch_size: "500", "Each step is one script call, so one call never blocks the \
            server long.";
    }

    crate::builder::setters! {
        /// Most index entries one `list` call inspects to skip expired records (default 1,000; at
        /// least 101, so a page of live records always fits).
        list_scan_limit(entries: usize) => options.list_scan_limit = entries;

        /// A PEM file of the CA certificates that may sign the servers' certificates, instead of
        /// the system's trusted authorities (URL parameter `cacert`, as `redis-cli --cacert`).
        /// `rediss` URLs only. Read by [`build`](Self::build).
        tls_ca_cert(path: impl Into<PathBuf>) => options.tls.cacert = Some(path.into());

        /// A PEM file with the client certificate to show servers that ask for one
        /// (`--tls-auth-clients yes`; URL parameter `cert`). Needs [`tls_key`](Self::tls_key).
        tls_cert(path: impl Into<PathBuf>) => options.tls.cert = Some(path.into());

        /// The PEM file with the client certificate's private key (URL parameter `key`); refused
        /// when other users can read it, as libpq refuses such keys.
        tls_key(path: impl Into<PathBuf>) => options.tls.key = Some(path.into());

        /// Connects over TLS without checking the servers' certificates at all (URL parameter
        /// `insecure=true`, as `redis-cli --insecure`): the connection is encrypted, but anyone on
        /// the network path can pretend to be the server. `start` logs a warning each time. Off by
        /// default; for trying things out, never for personal data.
        tls_insecure(insecure: bool) => options.tls.insecure = insecure;
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

impl fmt::Debug for RedisMemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Neither the URL nor the client (which holds the password) is printed.
        f.debug_struct("RedisMemoryStore")
            .field("deployment", &self.target.deployment())
            .field("options", &self.options)
            .field("started", &self.connection().is_ok())
            .finish()
    }
}

impl RedisMemoryStore {
    /// A store for `url` (`redis://…`, `redis+cluster://…`, or either over TLS as `rediss`;
    /// options as URL parameters).
    ///
    /// # Errors
    /// As [`builder`](Self::builder) and [`RedisMemoryStoreBuilder::build`].
    pub fn from_url(url: &str) -> Result<Self> {
        Self::builder(url)?.build()
    }

    /// A builder for `url` (`redis://…`, `redis+cluster://…`, `rediss://…` or
    /// `rediss+cluster://…`): the URL and its parameters are read now, the builder's methods
    /// set options on top.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` for a URL that is not one of the forms in
    /// the [module docs](super), or that has a parameter this provider does not know (named in
    /// the message) or cannot read. The message never repeats the URL.
    pub fn builder(url: &str) -> Result<RedisMemoryStoreBuilder> {
        RedisMemoryStoreBuilder::from_url(url)
    }
}

#[cfg(test)]
mod tests;
