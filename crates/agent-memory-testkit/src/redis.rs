//! Throwaway Redis servers and a three-master Redis Cluster on loopback ports.
//!
//! - [`shared_url`]: the URL in `AGENT_MEMORY_TEST_REDIS_URL`, or else one server started lazily
//!   for the whole test process.
//! - [`shared_cluster_url`]: the URL in `AGENT_MEMORY_TEST_REDIS_CLUSTER_URL`, or else one
//!   cluster started lazily for the whole test process.
//! - [`RedisServer`] and [`RedisCluster`]: owned servers, each in its own temporary directory,
//!   stopped when dropped.
//!
//! Every server is started from the `redis-server` binary on `PATH` (`redis-cli` too, for the
//! cluster), with a watchdog shell process that kills it once the test process is gone, so no
//! server outlives the tests even when they abort. A fixture that cannot get a server panics
//! with what to install; under `CI=true` it says so loudly, because backend tests never pass
//! silently.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::util::{free_port, Needs, Watchdog};

/// The environment variable naming an existing Redis server for the tests.
pub const URL_ENV: &str = "AGENT_MEMORY_TEST_REDIS_URL";
/// The environment variable naming an existing Redis Cluster for the tests, in the
/// `redis+cluster://host:port,host:port` form.
pub const CLUSTER_URL_ENV: &str = "AGENT_MEMORY_TEST_REDIS_CLUSTER_URL";

/// How long a server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A Redis URL every test in this process may share: `AGENT_MEMORY_TEST_REDIS_URL` when set,
/// otherwise a server started on first use and stopped when the process exits.
///
/// Tests sharing it must isolate their data (the conformance suite uses a fresh application id
/// per case); tests that count keys or reconfigure the server start their own
/// [`RedisServer`].
///
/// # Panics
/// When no URL is set and no server can be started.
pub fn shared_url() -> String {
    if let Some(url) = env_url(URL_ENV) {
        return url;
    }
    static SHARED: OnceLock<RedisServer> = OnceLock::new();
    SHARED.get_or_init(RedisServer::start).url()
}

/// A Redis Cluster URL every test in this process may share:
/// `AGENT_MEMORY_TEST_REDIS_CLUSTER_URL` when set, otherwise a three-master cluster started on
/// first use and stopped when the process exits.
///
/// # Panics
/// When no URL is set and no cluster can be started.
pub fn shared_cluster_url() -> String {
    if let Some(url) = env_url(CLUSTER_URL_ENV) {
        return url;
    }
    static SHARED: OnceLock<RedisCluster> = OnceLock::new();
    SHARED.get_or_init(RedisCluster::start).url()
}

fn env_url(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|url| !url.trim().is_empty())
}

/// What the fixtures need; [`Needs::fail`] names it when a server cannot start.
const NEEDS: Needs =
    Needs { server: "Redis", packages: &["redis-server", "redis-tools"], url_env: URL_ENV };

/// Sends inline commands and returns the raw replies once `until` appears in them, or `None`
/// when the server does not answer in time.
fn inline_command(port: u16, commands: &str, until: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(format!("{commands}\r\n").as_bytes()).ok()?;
    let mut reply = String::new();
    let mut buf = [0u8; 512];
    while !reply.contains(until) {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        reply.push_str(&String::from_utf8_lossy(&buf[..n]));
        if reply.starts_with('-') {
            break;
        }
    }
    Some(reply)
}

/// One `redis-server` process on a loopback port, with its own temporary directory.
///
/// Stopped (killed) when dropped; its directory is removed with it.
///
/// ```no_run
/// let server = agent_memory_testkit::redis::RedisServer::start_with(&["--appendonly", "yes"]);
/// let url = server.url();
/// # drop(url);
/// ```
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    args: Vec<String>,
    dir: TempDir,
    process: Option<Child>,
    watchdog: Option<Watchdog>,
}

impl RedisServer {
    /// A server with default settings (no persistence).
    ///
    /// # Panics
    /// When `redis-server` is missing or does not start.
    pub fn start() -> Self {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// A server with extra `redis-server` arguments, such as `["--appendonly", "yes"]`.
    ///
    /// # Panics
    /// When `redis-server` is missing or does not start.
    pub fn start_with(args: &[&str]) -> Self {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let mut last_error = String::new();
        // A port found free can be taken before the server binds it: try a few.
        for _ in 0..5 {
            let dir =
                tempfile::Builder::new().prefix("agent-memory-redis-").tempdir().unwrap_or_else(
                    |e| NEEDS.fail(&format!("cannot create a temporary directory: {e}")),
                );
            let mut server =
                Self { port: free_port(), args: args.clone(), dir, process: None, watchdog: None };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        NEEDS.fail(&last_error)
    }

    /// `redis://127.0.0.1:PORT` (with the password, when `--requirepass` was given).
    pub fn url(&self) -> String {
        match self.password() {
            Some(password) => format!("redis://:{password}@127.0.0.1:{}", self.port),
            None => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    /// The loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's working directory (where its RDB and AOF files live).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn password(&self) -> Option<&str> {
        let at = self.args.iter().position(|a| a == "--requirepass")?;
        self.args.get(at + 1).map(String::as_str)
    }

    /// Runs `redis-cli` against this server and returns its standard output, trimmed.
    ///
    /// # Panics
    /// When `redis-cli` cannot run.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut command = Command::new("redis-cli");
        command.args(["-h", "127.0.0.1", "-p", &self.port.to_string()]);
        if let Some(password) = self.password() {
            command.env("REDISCLI_AUTH", password);
        }
        let output = command
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| NEEDS.fail(&format!("cannot run redis-cli: {e}")));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// The number of keys in database 0 (`DBSIZE`).
    ///
    /// # Panics
    /// When the server does not answer with a number.
    pub fn dbsize(&self) -> u64 {
        let reply = self.cli(&["DBSIZE"]);
        reply.parse().unwrap_or_else(|_| panic!("DBSIZE answered {reply:?}"))
    }

    /// Kills the server abruptly (SIGKILL, no shutdown save), then starts it again on the same
    /// port, directory and arguments, and waits until it serves requests. Data survives only as
    /// far as the server's persistence settings make it.
    ///
    /// # Panics
    /// When the server does not come back.
    pub fn restart(&mut self) {
        self.kill();
        let mut last_error = String::new();
        // The port was just freed; retry briefly in case the OS holds it for a moment.
        for _ in 0..20 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) => {
                    last_error = e;
                    self.kill();
                    sleep(Duration::from_millis(100));
                }
            }
        }
        NEEDS.fail(&format!("restart failed: {last_error}"))
    }

    /// Kills the server (SIGKILL) without starting it again.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        drop(self.watchdog.take());
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.path().join("redis.log");
        let child = Command::new("redis-server")
            .current_dir(self.dir.path())
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--dir", &self.dir.path().to_string_lossy()])
            .args(["--logfile", &log.to_string_lossy(), "--daemonize", "no"])
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run redis-server: {e}"))?;
        // Kills the server once this test process is gone (or ends with the server itself).
        let pid = child.id();
        self.watchdog =
            Some(Watchdog::spawn(&format!("kill -9 {pid} 2>/dev/null; exit 0"), Some(pid)));
        self.process = Some(child);
        self.wait_ready(&log)
    }

    fn wait_ready(&mut self, log: &Path) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let ping = match self.password() {
            Some(password) => format!("AUTH {password}\r\nPING"),
            None => "PING".to_owned(),
        };
        while Instant::now() < deadline {
            if let Some(child) = self.process.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!(
                        "redis-server exited with {status}: {}",
                        std::fs::read_to_string(log).unwrap_or_default()
                    ));
                }
            }
            if inline_command(self.port, &ping, "+PONG").is_some_and(|r| r.contains("+PONG")) {
                return Ok(());
            }
            sleep(Duration::from_millis(25));
        }
        Err(format!("redis-server did not answer on port {} in time", self.port))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A three-master Redis Cluster (no replicas) on loopback ports, each node in its own
/// temporary directory. Stopped when dropped.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three `redis-server --cluster-enabled yes` nodes, joins them with
    /// `redis-cli --cluster create … --cluster-replicas 0 --cluster-yes`, and waits until every
    /// node reports `cluster_state:ok`.
    ///
    /// # Panics
    /// When the binaries are missing or the cluster does not form.
    pub fn start() -> Self {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                let bus = free_port().to_string();
                RedisServer::start_with(&[
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                    "--cluster-port",
                    &bus,
                ])
            })
            .collect();
        let addresses: Vec<String> =
            nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())).collect();
        let output = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| NEEDS.fail(&format!("cannot run redis-cli: {e}")));
        if !output.status.success() {
            NEEDS.fail(&format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let cluster = Self { nodes };
        cluster.wait_ok();
        cluster
    }

    fn wait_ok(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if self.nodes.iter().all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok")) {
                return;
            }
            sleep(Duration::from_millis(50));
        }
        NEEDS.fail("the cluster did not reach cluster_state:ok in time")
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`, the form
    /// `agent_memory::open` takes.
    pub fn url(&self) -> String {
        format!("redis+cluster://{}", self.addresses().join(","))
    }

    /// The nodes' `host:port` addresses.
    pub fn addresses(&self) -> Vec<String> {
        self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())).collect()
    }

    /// The nodes, for per-node commands.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The total number of keys over all masters.
    pub fn dbsize(&self) -> u64 {
        self.nodes.iter().map(RedisServer::dbsize).sum()
    }
}
