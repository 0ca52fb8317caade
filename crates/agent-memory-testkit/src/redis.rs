//! Throwaway Redis servers and a three-master Redis Cluster on loopback ports.
//!
//! - [`shared_url`]: the URL in `AGENT_MEMORY_TEST_REDIS_URL`, or else one server started lazily
//!   for the whole test process.
//! - [`shared_cluster_url`]: the URL in `AGENT_MEMORY_TEST_REDIS_CLUSTER_URL`, or else one
//!   cluster started lazily for the whole test process.
//! - [`RedisServer`] and [`RedisCluster`]: owned servers, each in its own temporary directory,
//!   stopped when dropped.
//! - [`shared_tls_server`] and [`shared_tls_cluster`]: a TLS-only server and cluster
//!   ([`RedisServer::start_tls`], [`RedisCluster::start_tls`]) with the throwaway certificates of
//!   [`crate::tls`], which require a client certificate.
//!
//! Every server is started from the `redis-server` binary on `PATH` (`redis-cli` too, for the
//! cluster), with a watchdog shell process that kills it once the test process is gone, so no
//! server outlives the tests even when they abort. A fixture that cannot get a server panics
//! with what to install; under `CI=true` it says so loudly, because backend tests never pass
//! silently.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::tls::{shared_certs, UNNAMED_ADDRESS};
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

/// A TLS-only Redis server every TLS test in this process may share, requiring client
/// certificates ([`RedisServer::start_tls`] with `--tls-auth-clients yes`); started on first use.
///
/// # Panics
/// When no server can be started.
pub fn shared_tls_server() -> &'static RedisServer {
    static SHARED: OnceLock<RedisServer> = OnceLock::new();
    SHARED.get_or_init(|| RedisServer::start_tls(&["--tls-auth-clients", "yes"]))
}

/// A three-master TLS-only cluster every TLS test in this process may share
/// ([`RedisCluster::start_tls`]); started on first use.
///
/// # Panics
/// When no cluster can be started.
pub fn shared_tls_cluster() -> &'static RedisCluster {
    static SHARED: OnceLock<RedisCluster> = OnceLock::new();
    SHARED.get_or_init(RedisCluster::start_tls)
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
    /// The client's files for a TLS server: CA, certificate, key.
    tls: Option<ClientFiles>,
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
        Self::start_configured(args, None)
    }

    /// A TLS-only server (`--port 0 --tls-port PORT`, no persistence) with the [`shared_certs`]
    /// server certificate and the test CA for client certificates, listening on `127.0.0.1`
    /// and on [`UNNAMED_ADDRESS`], which the certificate does not name. `args` come after, so
    /// `["--tls-auth-clients", "yes"]` makes client certificates required (the server's default
    /// is to require them too; `no` and `optional` relax it).
    ///
    /// # Panics
    /// When `redis-server` is missing, was built without TLS, or does not start.
    pub fn start_tls(args: &[&str]) -> Self {
        let certs = shared_certs();
        let files =
            ClientFiles { ca: certs.ca(), cert: certs.client_cert(), key: certs.client_key() };
        let mut all: Vec<String> =
            ["--save", "", "--appendonly", "no"].iter().map(|a| (*a).to_owned()).collect();
        for (flag, path) in [
            ("--tls-cert-file", certs.server_cert()),
            ("--tls-key-file", certs.server_key()),
            ("--tls-ca-cert-file", certs.ca()),
        ] {
            all.push(flag.to_owned());
            all.push(path.to_string_lossy().into_owned());
        }
        all.extend(args.iter().map(|a| (*a).to_owned()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        Self::start_configured(&all, Some(files))
    }

    fn start_configured(args: &[&str], tls: Option<ClientFiles>) -> Self {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let mut last_error = String::new();
        // A port found free can be taken before the server binds it: try a few.
        for _ in 0..5 {
            let dir =
                tempfile::Builder::new().prefix("agent-memory-redis-").tempdir().unwrap_or_else(
                    |e| NEEDS.fail(&format!("cannot create a temporary directory: {e}")),
                );
            let mut server = Self {
                port: free_port(),
                args: args.clone(),
                tls: tls.clone(),
                dir,
                process: None,
                watchdog: None,
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        NEEDS.fail(&last_error)
    }

    /// `redis://127.0.0.1:PORT` (with the password, when `--requirepass` was given);
    /// `rediss://127.0.0.1:PORT` for a TLS server, without the certificate parameters (see
    /// [`tls_files`](Self::tls_files)).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "rediss" } else { "redis" };
        match self.password() {
            Some(password) => format!("{scheme}://:{password}@127.0.0.1:{}", self.port),
            None => format!("{scheme}://127.0.0.1:{}", self.port),
        }
    }

    /// For a TLS server, the client's CA, certificate and key files.
    pub fn tls_files(&self) -> Option<&ClientFiles> {
        self.tls.as_ref()
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
        if let Some(files) = &self.tls {
            command.args(files.cli_args());
        }
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
        let port = self.port.to_string();
        let listen: Vec<&str> = match self.tls {
            None => vec!["--port", &port, "--bind", "127.0.0.1"],
            Some(_) => {
                vec!["--port", "0", "--tls-port", &port, "--bind", "127.0.0.1", UNNAMED_ADDRESS]
            }
        };
        let child = Command::new("redis-server")
            .current_dir(self.dir.path())
            .args(listen)
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
            let ready = match self.tls {
                None => {
                    inline_command(self.port, &ping, "+PONG").is_some_and(|r| r.contains("+PONG"))
                }
                // The inline probe speaks plain TCP; over TLS, redis-cli does the handshake.
                Some(_) => self.cli(&["PING"]) == "PONG",
            };
            if ready {
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

/// The files a client of a TLS test server uses.
#[derive(Debug, Clone)]
pub struct ClientFiles {
    /// The CA that signed the server's certificate.
    pub ca: PathBuf,
    /// The client certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

impl ClientFiles {
    /// `redis-cli`'s flags for these files.
    pub fn cli_args(&self) -> Vec<String> {
        let mut args = vec!["--tls".to_owned()];
        for (flag, path) in [("--cacert", &self.ca), ("--cert", &self.cert), ("--key", &self.key)] {
            args.push(flag.to_owned());
            args.push(path.to_string_lossy().into_owned());
        }
        args
    }

    /// The store URL parameters for these files: `cacert=…&cert=…&key=…`.
    pub fn url_params(&self) -> String {
        format!(
            "cacert={}&cert={}&key={}",
            self.ca.display(),
            self.cert.display(),
            self.key.display()
        )
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
        Self::start_nodes(false)
    }

    /// As [`start`](Self::start), with TLS-only nodes ([`RedisServer::start_tls`]) that also
    /// speak TLS to each other (`--tls-cluster yes`, `--tls-replication yes`) and announce
    /// their TLS ports, so clients discover TLS addresses only. Client certificates are
    /// required.
    ///
    /// # Panics
    /// As [`start`](Self::start).
    pub fn start_tls() -> Self {
        Self::start_nodes(true)
    }

    fn start_nodes(tls: bool) -> Self {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                let bus = free_port().to_string();
                let cluster = [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                    "--cluster-port",
                    &bus,
                ];
                if tls {
                    let mut args = cluster.to_vec();
                    args.extend(["--tls-cluster", "yes", "--tls-replication", "yes"]);
                    args.extend(["--tls-auth-clients", "yes"]);
                    RedisServer::start_tls(&args)
                } else {
                    let mut args = vec!["--save", "", "--appendonly", "no"];
                    args.extend(cluster);
                    RedisServer::start_with(&args)
                }
            })
            .collect();
        let addresses: Vec<String> =
            nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())).collect();
        let mut create = Command::new("redis-cli");
        if let Some(files) = nodes.first().and_then(RedisServer::tls_files) {
            create.args(files.cli_args());
        }
        // `redis-cli --cluster create` waits for the nodes to meet for as long as it takes; a
        // cluster bus that cannot connect (a TLS setting, a firewall) must fail the fixture
        // instead of hanging the tests.
        let mut child = create
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| NEEDS.fail(&format!("cannot run redis-cli: {e}")));
        let deadline = Instant::now() + START_TIMEOUT * 3;
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                NEEDS.fail(
                    "redis-cli --cluster create did not finish in time (the nodes never met)",
                );
            }
            sleep(Duration::from_millis(50));
        }
        let output = child
            .wait_with_output()
            .unwrap_or_else(|e| NEEDS.fail(&format!("cannot read redis-cli's output: {e}")));
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
    /// `agent_memory::open` takes (`rediss+cluster://…` for a TLS cluster, without the
    /// certificate parameters: see [`tls_files`](Self::tls_files)).
    pub fn url(&self) -> String {
        let scheme = if self.tls_files().is_some() { "rediss+cluster" } else { "redis+cluster" };
        format!("{scheme}://{}", self.addresses().join(","))
    }

    /// For a TLS cluster, the client's CA, certificate and key files.
    pub fn tls_files(&self) -> Option<&ClientFiles> {
        self.nodes.first().and_then(RedisServer::tls_files)
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
