//! Owning the connection: the driver client built from the URL, connecting, and sending the
//! scripts' `EVALSHA` calls with the only retries that are safe.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
use redis::{Client, Cmd, ErrorKind, RedisWrite, Script, ServerErrorKind, TlsCertificates, Value};

use super::config::{Endpoint, Options};
use super::durability::DurabilityReport;
use super::error::{did_not_run, storage};
use super::keys::ScopeKeys;
use crate::error::{MemoryError, Result};

/// How often a call that provably did not run (a cluster redirection) is sent again.
const NOT_RUN_RETRIES: u32 = 3;

/// The description of a connection attempt that failed for a reason the error kind does not
/// name (a refused `SELECT` of the database, say).
const CONNECT_FAILED: &str = "Redis refused to set up the connection";

/// The driver client for where the store connects. It holds the credentials, so it is never
/// printed; the URL text itself is not kept at all.
// One per store, built once: its size does not matter (TLS settings make the single
// server's variant large).
#[allow(clippy::large_enum_variant)]
pub(super) enum Target {
    Single(Client),
    Cluster(Box<ClusterClient>),
}

impl Target {
    /// The client for `endpoint`, with the CA and client certificates of a `rediss` URL when
    /// it names any. Nothing connects yet.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` if the driver refuses the configuration.
    pub(super) fn new(
        endpoint: &Endpoint,
        options: &Options,
        certificates: Option<TlsCertificates>,
    ) -> Result<Self> {
        let refused = |_| MemoryError::invalid("url", "is not a valid Redis URL");
        if endpoint.uses_tls() {
            // The driver builds its TLS configurations on rustls's process default provider.
            crate::tls::install_default_provider();
        }
        match endpoint {
            Endpoint::Single(node) => match certificates {
                None => Client::open(node.clone()),
                Some(certificates) => Client::build_with_tls(node.clone(), certificates),
            }
            .map(Self::Single)
            .map_err(refused),
            Endpoint::Cluster(seeds) => {
                let mut builder = ClusterClientBuilder::new(seeds.iter().cloned())
                    // No automatic retries: a retried write whose first attempt lost its reply
                    // could apply twice. Calls that provably did not run are retried by `call`.
                    .retries(0)
                    .tcp_settings(super::url::tcp_settings())
                    .connection_timeout(options.connect_timeout)
                    .response_timeout(options.response_timeout);
                // The driver gives every node it discovers the seeds' TLS mode and these
                // certificates, so no node connection goes without TLS.
                if let Some(certificates) = certificates {
                    builder = builder.certs(certificates);
                }
                builder.build().map(|client| Self::Cluster(Box::new(client))).map_err(refused)
            }
        }
    }

    /// The database number every connection selects (always 0 on a cluster).
    pub(super) fn database(&self) -> i64 {
        match self {
            Self::Single(client) => client.get_connection_info().redis_settings().db(),
            Self::Cluster(_) => 0,
        }
    }

    /// `single server` or `cluster`, for `Debug`.
    pub(super) fn deployment(&self) -> &'static str {
        match self {
            Self::Single(_) => "single server",
            Self::Cluster(_) => "cluster",
        }
    }
}

/// A live connection; clones share it.
#[derive(Clone)]
pub(super) enum Conn {
    /// One multiplexed connection that reconnects by itself.
    Single(ConnectionManager),
    /// The cluster client's connections to every master, rediscovered on redirections.
    Cluster(ClusterConnection),
}

impl Conn {
    /// Connects to `target`: on one server, waits for the first connection; on a cluster,
    /// for the slot map.
    ///
    /// # Errors
    /// [`Storage`](MemoryError::Storage) when the server cannot be reached or refuses the
    /// credentials or the database.
    pub(super) async fn open(target: &Target, options: &Options) -> Result<Self> {
        // The connection manager retries a failed first connection with growing pauses, which
        // added up to several seconds for a server that refuses at once, and its last error
        // would be lost to a timeout. One plain attempt first says at once, and precisely
        // (refused, TLS, credentials), why the server cannot be reached.
        if let Target::Single(client) = target {
            let config = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(options.connect_timeout))
                .set_response_timeout(Some(options.response_timeout));
            client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map_err(storage(CONNECT_FAILED))?;
        }
        // `connect_timeout` bounds the rest (the manager's own first connection, the cluster's
        // slot map), so a server that stops answering fails within the time the caller chose.
        tokio::time::timeout(options.connect_timeout, Self::connect(target, options))
            .await
            .unwrap_or_else(|_| {
                Err(MemoryError::storage(
                    super::error::PROVIDER,
                    "could not connect to Redis within connect_timeout",
                ))
            })
    }

    async fn connect(target: &Target, options: &Options) -> Result<Self> {
        match target {
            Target::Single(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(options.connect_timeout))
                    .set_response_timeout(Some(options.response_timeout))
                    .set_max_delay(Duration::from_secs(2));
                ConnectionManager::new_with_config(client.clone(), config)
                    .await
                    .map(Self::Single)
                    .map_err(storage(CONNECT_FAILED))
            }
            Target::Cluster(client) => client
                .get_async_connection()
                .await
                .map(Self::Cluster)
                .map_err(storage(CONNECT_FAILED)),
        }
    }

    /// Loads every script in `scripts` (on every master of a cluster).
    pub(super) async fn load_all(&mut self, scripts: &[&Script]) -> Result<()> {
        for script in scripts {
            self.load(script).await.map_err(storage("Redis refused to load the scripts"))?;
        }
        Ok(())
    }

    /// Runs one script call; answers that prove the call did not run (cluster redirections)
    /// are retried a few times, after a short pause, and nothing else is.
    pub(super) async fn call(&mut self, call: &Call<'_>) -> Result<Value> {
        let mut attempt = 0;
        loop {
            match self.eval(call.script, &call.cmd).await {
                Ok(value) => return Ok(value),
                Err(err) if did_not_run(&err) && attempt < NOT_RUN_RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                }
                Err(err) => {
                    // The driver replaces a connection it saw drop; operators watch the rate.
                    if err.is_unrecoverable_error()
                        || err.is_connection_dropped()
                        || err.is_io_error()
                    {
                        crate::observe::reconnect("redis");
                    }
                    return Err(storage("a Redis script call failed")(err));
                }
            }
        }
    }

    /// Reads every master's persistence and eviction settings.
    ///
    /// # Errors
    /// [`Storage`](MemoryError::Storage) when `INFO` fails on the whole deployment; a refused
    /// `CONFIG GET` (often renamed or denied) is a finding of the report instead.
    pub(super) async fn durability(&mut self) -> Result<DurabilityReport> {
        let info = self
            .on_every_master(&redis::cmd("INFO"))
            .await
            .map_err(storage("Redis refused INFO, which the durability check reads"))?;
        let mut config_get = redis::cmd("CONFIG");
        config_get.arg("GET").arg("appendfsync");
        let fsync = self.on_every_master(&config_get).await.unwrap_or_default();
        let nodes = info
            .into_iter()
            .enumerate()
            .map(|(i, info)| {
                let info = info.and_then(|value| match value {
                    Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
                    Value::VerbatimString { text, .. } => Some(text),
                    _ => None,
                });
                (info, fsync.get(i).cloned().flatten())
            })
            .collect();
        Ok(DurabilityReport::from_nodes(nodes))
    }

    /// Runs one plain command (the user index's `ZADD`, `ZREM`, `ZRANGEBYLEX`, `EXISTS`), with
    /// no retry.
    pub(super) async fn command(&mut self, cmd: &Cmd, what: &'static str) -> Result<Value> {
        self.query(cmd).await.map_err(storage(what))
    }

    async fn query(&mut self, cmd: &Cmd) -> redis::RedisResult<Value> {
        match self {
            Self::Single(conn) => cmd.query_async(conn).await,
            Self::Cluster(conn) => cmd.query_async(conn).await,
        }
    }

    /// Sends an `EVALSHA` built by [`Call`]; a server that answers `NOSCRIPT` (it lost its
    /// script cache) gets the script loaded and the call once more, which is safe because a
    /// `NOSCRIPT` call did not run.
    async fn eval(&mut self, script: &Script, cmd: &Cmd) -> redis::RedisResult<Value> {
        match self.query(cmd).await {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.load(script).await?;
                self.query(cmd).await
            }
            reply => reply,
        }
    }

    async fn load(&mut self, script: &Script) -> redis::RedisResult<String> {
        match self {
            Self::Single(conn) => script.load_async(conn).await,
            Self::Cluster(conn) => script.load_async(conn).await,
        }
    }

    /// Runs `cmd` on every master and returns each master's reply (`None` where it failed).
    async fn on_every_master(&mut self, cmd: &Cmd) -> redis::RedisResult<Vec<Option<Value>>> {
        match self {
            Self::Single(conn) => Ok(vec![cmd.query_async::<Value>(conn).await.ok()]),
            Self::Cluster(conn) => {
                let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                let reply = conn.route_command(cmd.clone(), routing).await?;
                let Value::Map(pairs) = reply else {
                    return Ok(vec![Some(reply)]);
                };
                Ok(pairs
                    .into_iter()
                    .map(|(_, value)| match value {
                        Value::ServerError(_) => None,
                        value => Some(value),
                    })
                    .collect())
            }
        }
    }
}

/// One `EVALSHA` command under construction: the script's hash, the number of keys, then the
/// keys and arguments in order. Built straight into one buffer, so each argument is copied
/// once.
pub(super) struct Call<'s> {
    script: &'s Script,
    cmd: Cmd,
}

impl<'s> Call<'s> {
    /// A call of `script` whose first `keys` arguments are keys.
    pub(super) fn new(script: &'s Script, keys: usize) -> Self {
        Self::with_capacity(script, keys, 0)
    }

    /// A call whose keys and arguments take about `bytes` bytes, reserved up front.
    pub(super) fn with_capacity(script: &'s Script, keys: usize, bytes: usize) -> Self {
        let mut cmd = Cmd::with_capacity(16, 64 + bytes);
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys);
        Self { script, cmd }
    }

    /// Appends a key or an argument.
    pub(super) fn arg<T: redis::ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    /// Appends the keys every script that changes a namespace takes, in this order: the
    /// namespace's index, the user's namespace set, revision floor and usage hash.
    pub(super) fn scope_keys(&mut self, keys: &ScopeKeys) -> &mut Self {
        self.arg(keys.index()).arg(keys.namespaces()).arg(keys.floor()).arg(keys.usage())
    }

    /// Appends one argument written in place, for the record payload of `put`.
    pub(super) fn arg_writer(&mut self) -> impl std::io::Write + '_ {
        self.cmd.writer_for_next_arg()
    }
}
