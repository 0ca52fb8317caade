//! [`RedisMemoryStore`]: memories in Redis or Redis Cluster (feature `redis`).
//!
//! Every operation is one call of a server-side Lua script (`EVALSHA`, by hash): one round trip,
//! atomic, with the whole scope applied inside the script. Timestamps, expiry and revisions come
//! from the Redis server's clock (`TIME`), never from the client's. Requires Redis 7.0 or newer
//! (scripts are replicated by their effects, so `TIME` is allowed before writes).
//!
//! # Opening
//!
//! | form | deployment |
//! | --- | --- |
//! | `redis://[user:password@]host[:port][/db]` | one server, through redis-rs's connection manager (one multiplexed connection that reconnects by itself) |
//! | `redis+cluster://[user:password@]host:port[,host:port…]` | a Redis Cluster, through redis-rs's async cluster client; the listed nodes are seeds, the rest is discovered |
//!
//! [`open`](crate::open) takes either form; [`RedisMemoryStore::builder`] takes the same URLs and
//! adds options ([`require_durable`](RedisMemoryStoreBuilder::require_durable), timeouts, batch
//! sizes). `rediss://` (TLS) is not supported by this build: the `redis` dependency is compiled
//! without a TLS stack, and such URLs are rejected as [`Invalid`](MemoryError::Invalid).
//!
//! ```no_run
//! # async fn demo() -> agent_memory::Result<()> {
//! use agent_memory::{MemoryStore, RedisMemoryStore};
//!
//! let store = RedisMemoryStore::builder("redis+cluster://10.0.0.1:6379,10.0.0.2:6379")
//!     .require_durable(true)
//!     .build()?;
//! store.start().await?; // fails if a master runs without AOF or evicts keys
//! # Ok(()) }
//! ```
//!
//! # Data model
//!
//! All keys of one application user share the prefix `am:{<tag>}:`, where the tag is the
//! lowercase hex of `len(application_id) ‖ application_id ‖ user_id` (one length byte). The
//! braces make the tag the Redis Cluster hash tag, so every key a user's operation touches lives
//! in one slot, and the hex encoding keeps it injective and free of `}`. Under the prefix:
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `r:<hex(namespace)>:<key>` | string | one record, in the layout below |
//! | `i:<hex(namespace)>` | sorted set, every score 0 | the namespace's keys; `ZRANGEBYLEX` pages them in byte order |
//! | `n` | sorted set, every score 0 | the user's non-empty namespaces as hex (the default namespace is the empty string, first) |
//! | `s` | string | the user's revision floor: at least every revision of a record removed so far |
//!
//! Hex contains neither `:` nor `}`, so no two scopes share a key whatever their ids contain.
//! Lowercase hex keeps byte order, so namespaces page in the order of their raw bytes. The
//! scripts keep three invariants in every call: a record string exists exactly when its key is
//! in its namespace index, and a namespace is in the user's set exactly when its index is not
//! empty.
//!
//! A record is one string: an 88-byte header of zero-padded decimal fields, then the payload.
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..18 | revision |
//! | 18..36 | `created_at`, µs since the epoch |
//! | 36..54 | `updated_at`, µs since the epoch |
//! | 54..72 | `expires_at`, µs since the epoch; all zeros for none |
//! | 72..80 | content length in bytes |
//! | 80..88 | source length in bytes (0 for none) |
//! | 88.. | content, then source JSON, then metadata JSON (the rest) |
//!
//! Fixed widths let a script read just the header (`GETRANGE 0 71`) and see at once whether a
//! record has an expiry; `get` returns the whole string, which the client decodes. `put` writes
//! the record with one `SET`: the client sends everything from the expiry on, and the script
//! puts the revision and timestamps in front of it. A record is only ever read and written
//! whole by these scripts, so the layout cannot be half updated.
//!
//! # Revisions
//!
//! A revision is a decimal integer: `max(previous + 1, server time in µs)`, where `previous` is
//! the key's current revision while its record exists (live or expired), and otherwise the
//! user's revision floor (`s`, absent counts as 0). Every script that removes a record
//! (`delete`, `delete_all`, `purge_expired`) raises the floor to at least that record's revision
//! in the same atomic step. Revision tokens are the canonical decimal (no leading zeros); the
//! header holds them zero-padded to 18 digits. Lua numbers are doubles, so a `put` whose
//! revision would reach 2^53 (server time in the year 2255) fails with `Storage` rather than
//! lose the `+ 1`. So while the floor exists, a key's revisions strictly increase across updates,
//! deletes and re-creations, without any clock involved. An update reads the record's header
//! and writes the record: no index, set or counter is touched on the hot path (the index and
//! namespace set change only when a key is new, which the header read tells).
//!
//! Only [`delete_user`](crate::MemoryStore::delete_user) removes the floor, because the contract
//! requires that nothing naming an erased user remains. A revision runs ahead of the server
//! clock only if one key is written more than once per microsecond, which Redis cannot do
//! (scripts run one at a time, each taking more than a microsecond); so every revision issued
//! before the erasure is at most the server time of the erasure, and every later one is at
//! least the server time of a later write. The argument needs the server clock not to step
//! back across an erasure (for example after a failover to a replica whose clock is behind).
//!
//! # Expiry
//!
//! Expiry is logical: each script compares a record's `expires_at` with the server's `TIME` and
//! treats expired records as absent (`get` reads the clock only for records that have an
//! expiry). No Redis `EXPIRE` is set: expired records stay until
//! [`purge_expired`](crate::MemoryStore::purge_expired), a delete, `delete_all` or
//! `delete_user` removes them, and they count in `delete_all` as the contract requires. The
//! `expires_at` a caller passes is validated against the local clock before any I/O.
//!
//! # Bounded work per call
//!
//! - `list` inspects at most [`list_scan`](RedisMemoryStoreBuilder::list_scan) index entries
//!   per call (default 1,000) to skip expired records; pages are full unless that many expired
//!   records lie in the way, in which case the page is short and carries a cursor.
//! - `search` inspects at most [`search_scan`](RedisMemoryStoreBuilder::search_scan) entries
//!   (default 500) and may return an empty page with a cursor.
//! - `purge_expired` inspects at most `limit` keys.
//! - `delete_all` and `delete_user` remove at most
//!   [`erase_batch`](RedisMemoryStoreBuilder::erase_batch) records per script call (default
//!   500) and loop until none is left, so one call never blocks the server for long. A failure
//!   in between returns `Storage` with part of the records gone; calling again removes the
//!   rest. `delete_user` removes the user's namespace set and floor in its last batch:
//!   afterwards no key naming the user remains.
//!
//! # Failures
//!
//! Scripts are loaded at `start()` and called by hash; a server that lost its script cache
//! (restart, `SCRIPT FLUSH`) answers `NOSCRIPT`, and the store loads the script and repeats the
//! call once, which is safe because a `NOSCRIPT` call did not run. A lost connection fails the
//! operation in flight with [`Storage`](MemoryError::Storage) (a write may have committed) and
//! the next operations reconnect by themselves. Writes are never retried after an ambiguous
//! failure: the cluster client is built with no automatic retries, and only answers that prove
//! the script did not run (`MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`) are sent
//! again, a few times, after a short pause. Error messages never contain the URL or its
//! password; the driver's error stays reachable through `source()`.
//!
//! # Durability
//!
//! `start()` reads every master's `INFO` and `CONFIG GET appendfsync` and logs a warning (with
//! [`tracing`]) when the deployment can lose or evict acknowledged writes; with
//! [`require_durable(true)`](RedisMemoryStoreBuilder::require_durable) it refuses to start
//! instead. See [`DurabilityReport`] for the rules.

mod durability;
mod error;
mod keys;

use std::fmt;
use std::io::Write;
use std::sync::{LazyLock, PoisonError, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
use redis::{Client, Cmd, ErrorKind, RedisWrite, Script, ServerErrorKind, Value};

pub use durability::DurabilityReport;

use self::error::{did_not_run, malformed_record, storage, unexpected_reply, PROVIDER};
use self::keys::{floor_key, hex, namespaces_key, unhex, user_prefix, ScopeKeys};
use crate::error::{MemoryError, Result};
use crate::page::{CursorKind, MemoryCleanupPage, MemoryPage, NamespacePage, PageRequest};
use crate::provider::{self, key_cursor};
use crate::record::{MemoryRecord, Metadata, Revision, Source};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::time::Timestamp;
use crate::validation;
use crate::write::{MemoryWrite, WriteCondition};

const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_ERASE_BATCH: usize = 500;
const DEFAULT_LIST_SCAN: usize = 1_000;
const DEFAULT_SEARCH_SCAN: usize = 500;
/// How often a call that provably did not run (a cluster redirection) is sent again.
const NOT_RUN_RETRIES: u32 = 3;

/// The scripts, hashed once per process.
struct Scripts {
    put: Script,
    get: Script,
    page: Script,
    delete: Script,
    delete_all: Script,
    delete_user: Script,
    namespaces: Script,
    purge: Script,
}

impl Scripts {
    fn all(&self) -> [&Script; 8] {
        [
            &self.put,
            &self.get,
            &self.page,
            &self.delete,
            &self.delete_all,
            &self.delete_user,
            &self.namespaces,
            &self.purge,
        ]
    }
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    put: Script::new(include_str!("scripts/put.lua")),
    get: Script::new(include_str!("scripts/get.lua")),
    page: Script::new(include_str!("scripts/page.lua")),
    delete: Script::new(include_str!("scripts/delete.lua")),
    delete_all: Script::new(include_str!("scripts/delete_all.lua")),
    delete_user: Script::new(include_str!("scripts/delete_user.lua")),
    namespaces: Script::new(include_str!("scripts/namespaces.lua")),
    purge: Script::new(include_str!("scripts/purge.lua")),
});

/// Where the store connects: parsed from the URL, without keeping the URL text.
enum Target {
    Single(Client),
    Cluster(Box<ClusterClient>),
}

/// A live connection; clones share it.
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Conn {
    async fn query(&mut self, cmd: &Cmd) -> redis::RedisResult<Value> {
        match self {
            Conn::Single(conn) => cmd.query_async(conn).await,
            Conn::Cluster(conn) => cmd.query_async(conn).await,
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
            Conn::Single(conn) => script.load_async(conn).await,
            Conn::Cluster(conn) => script.load_async(conn).await,
        }
    }

    /// Runs `cmd` on every master and returns each master's reply (`None` where it failed).
    async fn on_every_master(&mut self, cmd: &Cmd) -> redis::RedisResult<Vec<Option<Value>>> {
        match self {
            Conn::Single(conn) => Ok(vec![cmd.query_async::<Value>(conn).await.ok()]),
            Conn::Cluster(conn) => {
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

/// Options shared by the builder and the store.
#[derive(Debug, Clone)]
struct Options {
    require_durable: bool,
    response_timeout: Duration,
    connection_timeout: Duration,
    erase_batch: usize,
    list_scan: usize,
    search_scan: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            require_durable: false,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            connection_timeout: DEFAULT_CONNECTION_TIMEOUT,
            erase_batch: DEFAULT_ERASE_BATCH,
            list_scan: DEFAULT_LIST_SCAN,
            search_scan: DEFAULT_SEARCH_SCAN,
        }
    }
}

/// Builds a [`RedisMemoryStore`] from a URL plus options.
///
/// ```no_run
/// use std::time::Duration;
/// use agent_memory::RedisMemoryStore;
///
/// let store = RedisMemoryStore::builder("redis://:secret@127.0.0.1:6379/0")
///     .require_durable(true)
///     .response_timeout(Duration::from_secs(2))
///     .build()?;
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
#[derive(Clone)]
pub struct RedisMemoryStoreBuilder {
    url: String,
    options: Options,
}

impl fmt::Debug for RedisMemoryStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password: never print it.
        f.debug_struct("RedisMemoryStoreBuilder").field("options", &self.options).finish()
    }
}

impl RedisMemoryStoreBuilder {
    /// Makes [`start`](MemoryStore::start) fail with [`Storage`](MemoryError::Storage) when the
    /// deployment can lose or evict acknowledged writes (see [`DurabilityReport`]), instead of
    /// only logging a warning. Off by default.
    pub fn require_durable(mut self, require: bool) -> Self {
        self.options.require_durable = require;
        self
    }

    /// How long one operation may wait for its reply before failing with `Storage`
    /// (default 10 s).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.options.response_timeout = timeout;
        self
    }

    /// How long opening a connection may take (default 5 s).
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.options.connection_timeout = timeout;
        self
    }

    /// Most records one `delete_all` or `delete_user` script call removes (default 500, at
    /// least 1); the store loops until none is left.
    pub fn erase_batch(mut self, records: usize) -> Self {
        self.options.erase_batch = records.max(1);
        self
    }

    /// Most index entries one `list` call inspects to skip expired records (default 1,000;
    /// raised to 101 if lower, so a page of live records always fits).
    pub fn list_scan(mut self, entries: usize) -> Self {
        self.options.list_scan = entries.max(validation::MAX_PAGE_LIMIT + 1);
        self
    }

    /// Most index entries one `search` call inspects (default 500, at least 1).
    pub fn search_scan(mut self, entries: usize) -> Self {
        self.options.search_scan = entries.max(1);
        self
    }

    /// Parses the URL and builds the store; nothing connects until
    /// [`start`](MemoryStore::start).
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) for a URL that is not one of the forms in the
    /// [module docs](self), or that asks for TLS. The message never repeats the URL.
    pub fn build(self) -> Result<RedisMemoryStore> {
        let target = parse_target(&self.url, &self.options)?;
        Ok(RedisMemoryStore {
            target,
            options: self.options,
            conn: RwLock::new(None),
            lifecycle: tokio::sync::Mutex::new(()),
            durability: RwLock::new(None),
        })
    }
}

fn invalid_url() -> MemoryError {
    MemoryError::invalid("url", "is not a valid Redis URL")
}

fn parse_target(url: &str, options: &Options) -> Result<Target> {
    let (scheme, rest) = url.split_once("://").ok_or_else(invalid_url)?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme.starts_with("rediss") {
        return Err(MemoryError::invalid(
            "url",
            "asks for TLS (rediss), which this build of agent-memory does not include",
        ));
    }
    match scheme.as_str() {
        "redis" => Client::open(url).map(Target::Single).map_err(|_| invalid_url()),
        "redis+cluster" => {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(end);
            if !matches!(tail, "" | "/" | "/0") {
                return Err(MemoryError::invalid(
                    "url",
                    "a Redis Cluster URL takes only user, password and host:port list",
                ));
            }
            let (userinfo, hosts) = match authority.rsplit_once('@') {
                Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
                None => (String::new(), authority),
            };
            let nodes: Vec<String> =
                hosts.split(',').map(|host| format!("redis://{userinfo}{}", host.trim())).collect();
            if hosts.is_empty() || nodes.iter().any(|n| n.ends_with('@') || n.ends_with("//")) {
                return Err(invalid_url());
            }
            ClusterClientBuilder::new(nodes)
                // No automatic retries: a retried write whose first attempt lost its reply
                // could apply twice. Calls that provably did not run are retried by `eval`.
                .retries(0)
                .connection_timeout(options.connection_timeout)
                .response_timeout(options.response_timeout)
                .build()
                .map(|client| Target::Cluster(Box::new(client)))
                .map_err(|_| invalid_url())
        }
        _ => Err(MemoryError::invalid("url", "has an unknown scheme")),
    }
}

/// Memories in Redis (one server) or Redis Cluster; see the [module docs](self) for the data
/// model, the URL forms and the guarantees.
///
/// Build it with [`from_url`](Self::from_url), [`builder`](Self::builder) or
/// [`open`](crate::open), then call [`start`](MemoryStore::start), which connects, checks the
/// deployment's durability and loads the scripts.
pub struct RedisMemoryStore {
    target: Target,
    options: Options,
    conn: RwLock<Option<Conn>>,
    lifecycle: tokio::sync::Mutex<()>,
    durability: RwLock<Option<DurabilityReport>>,
}

impl fmt::Debug for RedisMemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Neither the URL nor the client (which holds the password) is printed.
        let deployment = match self.target {
            Target::Single(_) => "single server",
            Target::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisMemoryStore")
            .field("deployment", &deployment)
            .field("options", &self.options)
            .field("started", &self.connection().is_ok())
            .finish()
    }
}

impl RedisMemoryStore {
    /// A store for `url` (`redis://…` or `redis+cluster://…`) with default options.
    ///
    /// # Errors
    /// As [`RedisMemoryStoreBuilder::build`].
    pub fn from_url(url: &str) -> Result<Self> {
        Self::builder(url).build()
    }

    /// A builder for `url` (`redis://…` or `redis+cluster://…`).
    pub fn builder(url: impl Into<String>) -> RedisMemoryStoreBuilder {
        RedisMemoryStoreBuilder { url: url.into(), options: Options::default() }
    }

    /// What the last successful [`start`](MemoryStore::start) found out about the deployment's
    /// persistence and eviction settings; `None` before that.
    pub fn durability(&self) -> Option<DurabilityReport> {
        self.durability.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn connection(&self) -> Result<Conn> {
        self.conn
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| MemoryError::not_started(PROVIDER))
    }

    async fn connect(&self) -> Result<Conn> {
        match &self.target {
            Target::Single(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.options.connection_timeout))
                    .set_response_timeout(Some(self.options.response_timeout))
                    .set_max_delay(Duration::from_secs(2));
                ConnectionManager::new_with_config(client.clone(), config)
                    .await
                    .map(Conn::Single)
                    .map_err(storage)
            }
            Target::Cluster(client) => {
                client.get_async_connection().await.map(Conn::Cluster).map_err(storage)
            }
        }
    }

    async fn check_durability(conn: &mut Conn) -> Result<DurabilityReport> {
        let info = conn.on_every_master(&redis::cmd("INFO")).await.map_err(storage)?;
        let mut config_get = redis::cmd("CONFIG");
        config_get.arg("GET").arg("appendfsync");
        // CONFIG may be renamed or denied: that is a finding, not a failure.
        let fsync = conn.on_every_master(&config_get).await.unwrap_or_default();
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

    /// Runs one script call; answers that prove the call did not run (cluster redirections)
    /// are retried a few times, nothing else is.
    async fn eval(&self, call: &Call<'_>) -> Result<Value> {
        let mut conn = self.connection()?;
        let mut attempt = 0;
        loop {
            match conn.eval(call.script, &call.cmd).await {
                Ok(value) => return Ok(value),
                Err(err) if did_not_run(&err) && attempt < NOT_RUN_RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                }
                Err(err) => return Err(storage(err)),
            }
        }
    }

    async fn page(
        &self,
        kind: CursorKind,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        let page = page.key_page(kind, scope)?;
        let (limit, after) = (page.limit, page.after);
        let keys = ScopeKeys::new(scope);
        let budget = if kind == CursorKind::Search {
            self.options.search_scan
        } else {
            self.options.list_scan
        };
        let mut call = Call::new(&SCRIPTS.page, 1);
        call.arg(keys.index())
            .arg(keys.record_prefix())
            .arg(lower_bound(after.as_deref().map(str::as_bytes)))
            .arg(limit)
            .arg(budget)
            .arg(query);
        let Value::Array(items) = self.eval(&call).await? else {
            return Err(unexpected_reply());
        };
        let mut items = items.into_iter();
        let cursor = opt_text(items.next().ok_or_else(unexpected_reply)?)?;
        let mut records = Vec::with_capacity(limit);
        while let Some(key) = items.next() {
            let key = text(key)?;
            let stored = items.next().ok_or_else(unexpected_reply)?;
            records.push(decode_record(scope, key, stored)?);
        }
        Ok(MemoryPage {
            items: records,
            next_cursor: cursor.map(|position| key_cursor(kind, scope, &position)),
        })
    }

    /// Loops an erase script until it reports that nothing is left.
    async fn erase_loop(&self, call: &Call<'_>) -> Result<u64> {
        let mut removed = 0u64;
        loop {
            let Value::Array(reply) = self.eval(call).await? else {
                return Err(unexpected_reply());
            };
            let [count, more] = <[Value; 2]>::try_from(reply).map_err(|_| unexpected_reply())?;
            removed += u64::try_from(int(&count)?).map_err(|_| unexpected_reply())?;
            if int(&more)? == 0 {
                return Ok(removed);
            }
        }
    }
}

/// A `ZRANGEBYLEX` lower bound: everything (`-`), or strictly after `after`.
fn lower_bound(after: Option<&[u8]>) -> Vec<u8> {
    match after {
        Some(position) => [b"(".as_slice(), position].concat(),
        None => b"-".to_vec(),
    }
}

fn text(value: Value) -> Result<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes).map_err(|_| malformed_record()),
        Value::SimpleString(text) => Ok(text),
        _ => Err(unexpected_reply()),
    }
}

fn opt_text(value: Value) -> Result<Option<String>> {
    match value {
        Value::Nil => Ok(None),
        value => text(value).map(Some),
    }
}

fn int(value: &Value) -> Result<i64> {
    match value {
        Value::Int(n) => Ok(*n),
        _ => Err(unexpected_reply()),
    }
}

/// Width of each number in a stored record's header: enough for every [`Timestamp`] (at most
/// 18 digits) and for revisions (server time in microseconds, 16 digits until the year 2286).
const NUMBER_WIDTH: usize = 18;
/// Width of the content and metadata lengths in a stored record's header.
const LENGTH_WIDTH: usize = 8;
/// Where the expiry starts: after revision, created_at and updated_at. The client writes the
/// record from here on; the script writes the three numbers before it.
const EXPIRY_AT: usize = 3 * NUMBER_WIDTH;
/// Where the content starts: after the expiry and the content and source lengths.
const PAYLOAD_AT: usize = EXPIRY_AT + NUMBER_WIDTH + 2 * LENGTH_WIDTH;

/// One `EVALSHA` command under construction: the script's hash, the number of keys, then the
/// keys and arguments in order. Built straight into one buffer, so each argument is copied
/// once.
struct Call<'s> {
    script: &'s Script,
    cmd: Cmd,
}

impl<'s> Call<'s> {
    fn new(script: &'s Script, keys: usize) -> Self {
        Self::with_capacity(script, keys, 0)
    }

    /// A call whose keys and arguments take about `bytes` bytes, reserved up front.
    fn with_capacity(script: &'s Script, keys: usize, bytes: usize) -> Self {
        let mut cmd = Cmd::with_capacity(16, 64 + bytes);
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys);
        Self { script, cmd }
    }

    fn arg<T: redis::ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.cmd.arg(arg);
        self
    }
}

/// A fixed-width, zero-padded decimal field of a stored record.
fn number(field: &[u8]) -> Result<u64> {
    if field.is_empty() || !field.iter().all(u8::is_ascii_digit) {
        return Err(malformed_record());
    }
    // At most 18 digits: no overflow.
    Ok(field.iter().fold(0, |n, &d| n * 10 + u64::from(d - b'0')))
}

fn timestamp(micros: u64) -> Result<Timestamp> {
    let micros = i64::try_from(micros).map_err(|_| malformed_record())?;
    Timestamp::from_micros(micros).map_err(|_| malformed_record())
}

/// Writes `value` as a fixed-width, zero-padded decimal field. Validation keeps every value
/// in range (timestamps have at most 18 digits, lengths at most 6); a value that would widen
/// the field is refused rather than stored misaligned.
fn write_number(out: &mut impl Write, width: usize, value: u64) -> Result<()> {
    // By hand rather than with `write!`: this runs three times per put. Widths are 8 and 18.
    if width > NUMBER_WIDTH || value >= (0..width).fold(1u64, |limit, _| limit * 10) {
        return Err(MemoryError::invalid("record", "a number does not fit the stored layout"));
    }
    let mut digits = [b'0'; NUMBER_WIDTH];
    let mut rest = value;
    for digit in digits.iter_mut().rev() {
        if rest == 0 {
            break;
        }
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    out.write_all(&digits[NUMBER_WIDTH - width..]).map_err(|_| malformed_record())
}

/// A revision token as the scripts compare it: the zero-padded header field. Tokens this store
/// never issues (not a canonical decimal of at most 18 digits) become `-`, which matches no
/// stored revision.
fn padded_revision(revision: &Revision) -> Vec<u8> {
    let token = revision.as_str().as_bytes();
    let canonical = (1..=NUMBER_WIDTH).contains(&token.len())
        && token[0] != b'0'
        && token.iter().all(u8::is_ascii_digit);
    if !canonical {
        return b"-".to_vec();
    }
    let mut out = Vec::with_capacity(NUMBER_WIDTH);
    out.resize(NUMBER_WIDTH - token.len(), b'0');
    out.extend_from_slice(token);
    out
}

/// Decodes a stored record string (layout in the module docs) with its key.
fn decode_record(scope: &MemoryScope, key: String, stored: Value) -> Result<MemoryRecord> {
    let Value::BulkString(mut bytes) = stored else {
        return Err(unexpected_reply());
    };
    if bytes.len() < PAYLOAD_AT {
        return Err(malformed_record());
    }
    let field = |at: usize, width: usize| number(&bytes[at..at + width]);
    let revision = Revision::from_counter(field(0, NUMBER_WIDTH)?, 10);
    let created_at = timestamp(field(NUMBER_WIDTH, NUMBER_WIDTH)?)?;
    let updated_at = timestamp(field(2 * NUMBER_WIDTH, NUMBER_WIDTH)?)?;
    let expires_at = match field(EXPIRY_AT, NUMBER_WIDTH)? {
        0 => None,
        micros => Some(timestamp(micros)?),
    };
    let lengths = EXPIRY_AT + NUMBER_WIDTH;
    let content_len = usize::try_from(field(lengths, LENGTH_WIDTH)?);
    let source_len = usize::try_from(field(lengths + LENGTH_WIDTH, LENGTH_WIDTH)?);
    let (Ok(content_len), Ok(source_len)) = (content_len, source_len) else {
        return Err(malformed_record());
    };
    let content_end = PAYLOAD_AT + content_len;
    let source_end = content_end + source_len;
    if source_end > bytes.len() {
        return Err(malformed_record());
    }
    let source = &bytes[content_end..source_end];
    let source: Source = if source.is_empty() {
        Source::default()
    } else {
        serde_json::from_slice(source).map_err(|_| malformed_record())?
    };
    let metadata: Metadata =
        serde_json::from_slice(&bytes[source_end..]).map_err(|_| malformed_record())?;
    // The content reuses the reply's buffer.
    bytes.truncate(content_end);
    bytes.drain(..PAYLOAD_AT);
    let content = String::from_utf8(bytes).map_err(|_| malformed_record())?;
    Ok(MemoryRecord {
        scope: scope.clone(),
        key,
        content,
        metadata,
        revision,
        created_at,
        updated_at,
        expires_at,
        source,
    })
}

#[async_trait::async_trait]
impl MemoryStore for RedisMemoryStore {
    async fn start(&self) -> Result<()> {
        let _lifecycle = self.lifecycle.lock().await;
        if self.connection().is_ok() {
            return Ok(());
        }
        let mut conn = self.connect().await?;
        let report = Self::check_durability(&mut conn).await?;
        report.log();
        let durable = report.is_durable();
        *self.durability.write().unwrap_or_else(PoisonError::into_inner) = Some(report);
        if self.options.require_durable && !durable {
            return Err(MemoryError::storage(
                PROVIDER,
                "the Redis deployment can lose or evict acknowledged writes and require_durable is set",
            ));
        }
        for script in SCRIPTS.all() {
            conn.load(script).await.map_err(storage)?;
        }
        *self.conn.write().unwrap_or_else(PoisonError::into_inner) = Some(conn);
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        let _lifecycle = self.lifecycle.lock().await;
        // Dropping the last handle closes the connection(s) this store opened.
        self.conn.write().unwrap_or_else(PoisonError::into_inner).take();
        Ok(())
    }

    async fn put(
        &self,
        scope: &MemoryScope,
        key: &str,
        write: MemoryWrite,
    ) -> Result<MemoryRecord> {
        write.validate(key, Timestamp::now())?;
        let keys = ScopeKeys::new(scope);
        let parts = write.into_parts();
        let source = if parts.source.is_empty() {
            Vec::new()
        } else {
            serde_json::to_vec(&parts.source).map_err(|_| malformed_record())?
        };
        let (mode, expected) = match &parts.condition {
            WriteCondition::Always => ("a", Vec::new()),
            WriteCondition::CreateOnly => ("c", Vec::new()),
            WriteCondition::Revision(revision) => ("r", padded_revision(revision)),
        };
        let record_key = keys.record(key);
        // Four keys of about the record key's length, the payload, and room for the metadata.
        let bytes = 4 * record_key.len() + PAYLOAD_AT + parts.content.len() + source.len() + 256;
        let mut call = Call::with_capacity(&SCRIPTS.put, 4, bytes);
        call.arg(record_key)
            .arg(keys.index())
            .arg(keys.namespaces())
            .arg(keys.floor())
            .arg(key)
            .arg(&keys.namespace)
            .arg(mode)
            .arg(expected);
        // The last argument is the record from the expiry on, in the stored layout, written
        // straight into the command: the script puts revision, created_at and updated_at in
        // front of it.
        {
            let mut tail = call.cmd.writer_for_next_arg();
            let expires = parts.expires_at.map_or(0, |at| at.as_micros().unsigned_abs());
            write_number(&mut tail, NUMBER_WIDTH, expires)?;
            write_number(&mut tail, LENGTH_WIDTH, parts.content.len() as u64)?;
            write_number(&mut tail, LENGTH_WIDTH, source.len() as u64)?;
            tail.write_all(parts.content.as_bytes()).map_err(|_| malformed_record())?;
            tail.write_all(&source).map_err(|_| malformed_record())?;
            serde_json::to_writer(&mut tail, &parts.metadata).map_err(|_| malformed_record())?;
        }
        let head = match self.eval(&call).await? {
            Value::Int(-1) => return Err(MemoryError::already_exists()),
            Value::Int(-2) => return Err(MemoryError::stale_revision()),
            Value::BulkString(head) if head.len() == EXPIRY_AT => head,
            _ => return Err(unexpected_reply()),
        };
        let field = |i: usize| number(&head[i * NUMBER_WIDTH..(i + 1) * NUMBER_WIDTH]);
        Ok(MemoryRecord {
            scope: scope.clone(),
            key: key.to_owned(),
            revision: Revision::from_counter(field(0)?, 10),
            created_at: timestamp(field(1)?)?,
            updated_at: timestamp(field(2)?)?,
            content: parts.content,
            metadata: parts.metadata,
            expires_at: parts.expires_at,
            source: parts.source,
        })
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        validation::key(key)?;
        let keys = ScopeKeys::new(scope);
        let mut call = Call::new(&SCRIPTS.get, 1);
        call.arg(keys.record(key));
        match self.eval(&call).await? {
            Value::Nil => Ok(None),
            stored => decode_record(scope, key.to_owned(), stored).map(Some),
        }
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        self.page(CursorKind::List, scope, "", page).await
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        validation::query(query)?;
        self.page(CursorKind::Search, scope, query, page).await
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool> {
        validation::key(key)?;
        let keys = ScopeKeys::new(scope);
        let mut call = Call::new(&SCRIPTS.delete, 4);
        call.arg(keys.record(key))
            .arg(keys.index())
            .arg(keys.namespaces())
            .arg(keys.floor())
            .arg(key)
            .arg(&keys.namespace)
            .arg(expected_revision.map_or_else(Vec::new, padded_revision));
        match self.eval(&call).await? {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            Value::Int(-2) => Err(MemoryError::stale_revision()),
            _ => Err(unexpected_reply()),
        }
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let keys = ScopeKeys::new(scope);
        let mut call = Call::new(&SCRIPTS.delete_all, 3);
        call.arg(keys.index())
            .arg(keys.namespaces())
            .arg(keys.floor())
            .arg(keys.record_prefix())
            .arg(&keys.namespace)
            .arg(self.options.erase_batch);
        self.erase_loop(&call).await
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        validation::user(application_id, user_id)?;
        let prefix = user_prefix(application_id, user_id);
        let mut call = Call::new(&SCRIPTS.delete_user, 2);
        call.arg(namespaces_key(&prefix))
            .arg(floor_key(&prefix))
            .arg(&prefix)
            .arg(self.options.erase_batch);
        self.erase_loop(&call).await
    }

    async fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> Result<NamespacePage> {
        let page = page.namespace_page(application_id, user_id)?;
        let prefix = user_prefix(application_id, user_id);
        let after_hex = page.after.map(|ns| hex(ns.as_bytes()));
        let mut call = Call::new(&SCRIPTS.namespaces, 1);
        call.arg(namespaces_key(&prefix))
            .arg(lower_bound(after_hex.as_deref().map(str::as_bytes)))
            .arg(page.limit + 1);
        let Value::Array(members) = self.eval(&call).await? else {
            return Err(unexpected_reply());
        };
        let names = members
            .into_iter()
            .map(|member| {
                let Value::BulkString(encoded) = member else {
                    return Err(unexpected_reply());
                };
                let raw = unhex(&encoded).ok_or_else(malformed_record)?;
                String::from_utf8(raw).map_err(|_| malformed_record())
            })
            .collect::<Result<Vec<_>>>()?;
        provider::namespace_page(PROVIDER, application_id, user_id, page.limit, names)
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        let page = page.key_page(CursorKind::Purge, scope)?;
        let (limit, after) = (page.limit, page.after);
        let keys = ScopeKeys::new(scope);
        let mut call = Call::new(&SCRIPTS.purge, 3);
        call.arg(keys.index())
            .arg(keys.namespaces())
            .arg(keys.floor())
            .arg(keys.record_prefix())
            .arg(&keys.namespace)
            .arg(lower_bound(after.as_deref().map(str::as_bytes)))
            .arg(limit);
        let Value::Array(reply) = self.eval(&call).await? else {
            return Err(unexpected_reply());
        };
        let [deleted, cursor] = <[Value; 2]>::try_from(reply).map_err(|_| unexpected_reply())?;
        let deleted = u64::try_from(int(&deleted)?).map_err(|_| unexpected_reply())?;
        let next_cursor =
            opt_text(cursor)?.map(|position| key_cursor(CursorKind::Purge, scope, &position));
        Ok(MemoryCleanupPage { deleted, next_cursor })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_issued_revision_tokens_are_padded_for_comparison() {
        let padded = |token: &str| padded_revision(&Revision::new(token).unwrap());
        assert_eq!(padded("1764500000000001"), b"001764500000000001");
        assert_eq!(padded("7"), b"000000000000000007");
        // Tokens the store never issues match no stored revision.
        for token in ["07", "0", "1x", "-1", "1234567890123456789"] {
            assert_eq!(padded(token), b"-", "{token}");
        }
    }

    #[test]
    fn a_stored_record_decodes_and_a_short_one_is_malformed() {
        let scope = MemoryScope::new("app", "user").unwrap();
        let mut stored = Vec::new();
        for value in [1_764_500_000_000_002_u64, 1_764_500_000_000_000, 1_764_500_000_000_002, 0] {
            write_number(&mut stored, NUMBER_WIDTH, value).unwrap();
        }
        let source = br#"{"agent":"a"}"#;
        write_number(&mut stored, LENGTH_WIDTH, 5).unwrap();
        write_number(&mut stored, LENGTH_WIDTH, source.len() as u64).unwrap();
        stored.extend_from_slice("h\u{e9}ll".as_bytes());
        stored.extend_from_slice(source);
        stored.extend_from_slice(br#"{"n":1}"#);
        let record = decode_record(&scope, "k".into(), Value::BulkString(stored.clone())).unwrap();
        assert_eq!(record.revision.as_str(), "1764500000000002");
        assert_eq!(record.created_at.as_micros(), 1_764_500_000_000_000);
        assert_eq!(record.content, "h\u{e9}ll");
        assert_eq!(record.source.agent.as_deref(), Some("a"));
        assert_eq!(record.metadata.get("n"), Some(&serde_json::json!(1)));
        assert!(record.expires_at.is_none());
        stored.truncate(PAYLOAD_AT - 1);
        assert!(decode_record(&scope, "k".into(), Value::BulkString(stored)).is_err());
        assert!(write_number(&mut Vec::new(), LENGTH_WIDTH, 100_000_000).is_err());
    }
}
