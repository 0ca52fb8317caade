//! Options, the builder, and the URL forms it reads.
//!
//! [`RedisMemoryStore::builder`] parses the URL at once with the shared
//! [`ConnectionUrl`] parser: the scheme picks the deployment (and, one day, the transport), the
//! hosts become the driver's [`ConnectionInfo`]s with the URL's credentials and database, and
//! the query parameters set the options of the same names. [`RedisMemoryStoreBuilder::build`]
//! then checks every option's range. Neither `Debug` nor any error shows the password.

use std::fmt;
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use super::conn::Target;
use super::RedisMemoryStore;
use crate::connection_url::{ConnectionUrl, HostPort};
use crate::error::{MemoryError, Result};
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
        Ok(())
    }
}

/// What a URL names: one server, or the seed nodes of a cluster, each with the URL's
/// credentials and database.
#[derive(Clone)]
pub(super) enum Endpoint {
    /// `redis://…`
    Single(ConnectionInfo),
    /// `redis+cluster://…`: the listed nodes; the client discovers the rest.
    Cluster(Vec<ConnectionInfo>),
}

impl Endpoint {
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
                ConnectionAddr::Tcp(host, port) if host.contains(':') => format!("[{host}]:{port}"),
                ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
                _ => "(other)".to_owned(),
            })
            .collect();
        let deployment = match self {
            Self::Single(_) => "single server",
            Self::Cluster(_) => "cluster",
        };
        let db = self.nodes().first().map_or(0, |node| node.redis_settings().db());
        f.debug_struct("Endpoint")
            .field("deployment", &deployment)
            .field("nodes", &nodes)
            .field("db", &db)
            .finish()
    }
}

/// Which deployment a scheme names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deployment {
    Single,
    Cluster,
}

/// How a scheme reaches its nodes. TLS (`rediss`) becomes a second variant here, and
/// [`address`] its driver address; nothing else needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Tcp,
}

/// The deployment and transport of a (lowercase) scheme.
fn scheme(scheme: &str) -> Result<(Deployment, Transport)> {
    match scheme {
        "redis" => Ok((Deployment::Single, Transport::Tcp)),
        "redis+cluster" => Ok((Deployment::Cluster, Transport::Tcp)),
        "rediss" | "rediss+cluster" => Err(MemoryError::invalid(
            "url",
            "asks for TLS (rediss), which this build of agent-memory does not include",
        )),
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
    Ok(info.set_redis_settings(settings.clone()))
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
        let mut builder = Self { endpoint, options: Options::default() };
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

    /// How long opening a connection may take (default 5 s; more than zero).
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

    /// Checks the options and builds the store; nothing connects until
    /// [`start`](crate::MemoryStore::start).
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming the option that is out of range (see the table
    /// above).
    pub fn build(self) -> Result<RedisMemoryStore> {
        self.options.check()?;
        let target = Target::new(&self.endpoint, &self.options)?;
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
                 &erase_batch_size=7&list_scan_limit=200&search_scan_limit=9"
            );
            let options = builder(&url).options;
            assert!(options.require_durable);
            assert_eq!(options.response_timeout, Duration::from_secs(3));
            assert_eq!(options.connect_timeout, Duration::from_secs(2));
            assert_eq!(options.erase_batch_size, 7);
            assert_eq!(options.list_scan_limit, 200);
            assert_eq!(options.search_scan_limit, 9);
        }
        let defaults = builder("redis://h").options;
        assert!(!defaults.require_durable);
        assert_eq!(defaults.response_timeout, DEFAULT_RESPONSE_TIMEOUT);
        assert_eq!(defaults.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(defaults.erase_batch_size, DEFAULT_ERASE_BATCH_SIZE);
        assert_eq!(defaults.list_scan_limit, DEFAULT_LIST_SCAN_LIMIT);
        assert_eq!(defaults.search_scan_limit, DEFAULT_SEARCH_SCAN_LIMIT);
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
        assert_eq!(set(b().list_scan_limit(101).erase_batch_size(1).search_scan_limit(1)), None);
        for (param, option) in [
            ("response_timeout=0", "response_timeout"),
            ("connect_timeout=0", "connect_timeout"),
            ("erase_batch_size=0", "erase_batch_size"),
            ("list_scan_limit=1", "list_scan_limit"),
            ("search_scan_limit=0", "search_scan_limit"),
        ] {
            let err = builder(&format!("redis://h?{param}")).build().unwrap_err();
            assert_eq!(field(&err), option, "{param}");
        }
    }

    #[test]
    fn malformed_urls_are_invalid_and_the_password_shows_nowhere() {
        for bad in [
            format!("rediss://:{PASSWORD}@127.0.0.1:6379"),
            format!("rediss+cluster://:{PASSWORD}@127.0.0.1:6379"),
            format!("redis+cluster://:{PASSWORD}@"),
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
        let err = RedisMemoryStoreBuilder::from_url("rediss://h").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid url: asks for TLS (rediss), which this build of agent-memory does not include"
        );

        for url in [
            format!("redis://admin:{PASSWORD}@127.0.0.1:6379/1?connect_timeout=1"),
            format!("redis+cluster://admin:{PASSWORD}@127.0.0.1:7000,127.0.0.1:7001"),
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
