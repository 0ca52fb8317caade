//! A throwaway PgBouncer in transaction mode in front of a test PostgreSQL server: what
//! Supabase's pooler, Neon's pooled endpoints and most self-run poolers put between an
//! application and its database.
//!
//! - [`shared_pooler`]: one PgBouncer per test process, in front of its own
//!   [`PostgresServer`], started on first use.
//! - [`PgBouncer`]: an owned one, stopped when dropped.
//!
//! PgBouncer runs from Debian's `/usr/sbin/pgbouncer` (the `pgbouncer` package, which
//! `scripts/test` installs), as the `postgres` user when the tests run as root (it refuses to run
//! as root). `pool_mode = transaction`: each transaction may run on a different server
//! connection, so a statement prepared by name on one is unknown on the next, exactly the
//! restriction `prepared_statements=false` exists for. Clients authenticate to PgBouncer with a
//! password (user [`USER`], password [`PASSWORD`], `auth_type = md5`: SCRAM's deliberate key
//! stretching costs a debug-built client tens of milliseconds per connection, which doubled the
//! suite's time here); PgBouncer reaches the server over loopback.
//! Client TLS is on (`client_tls_sslmode = allow`) with the [`shared_certs`] server
//! certificate, so URLs shaped like a managed pooler's (`sslmode=verify-full`) work too.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::postgres::PostgresServer;
use crate::tls::shared_certs;
use crate::util::{free_port, Needs, Watchdog};

/// The user clients log in as: the test server's superuser.
pub const USER: &str = "postgres";
/// The password PgBouncer asks clients for (the server behind it trusts loopback).
pub const PASSWORD: &str = "pooler-secret";

/// Where Debian installs PgBouncer.
const BINARY: &str = "/usr/sbin/pgbouncer";

/// How long PgBouncer may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(20);

const NEEDS: Needs = Needs {
    server: "PgBouncer",
    packages: &["pgbouncer"],
    url_env: "(none: the pooler tests always start their own)",
};

/// A PgBouncer and the server behind it, shared by every test in this process; started on
/// first use and stopped when the process exits.
///
/// # Panics
/// When either cannot be started.
pub fn shared_pooler() -> &'static PgBouncer {
    static SHARED: OnceLock<PgBouncer> = OnceLock::new();
    SHARED.get_or_init(|| PgBouncer::start(PostgresServer::start()))
}

/// One PgBouncer process in transaction mode on a loopback port, owning the server it pools.
#[derive(Debug)]
pub struct PgBouncer {
    port: u16,
    process: Option<Child>,
    _watchdog: Watchdog,
    // Dropped after the process: the directory holds its configuration and log.
    dir: TempDir,
    server: PostgresServer,
}

impl PgBouncer {
    /// Starts PgBouncer in front of `server` and waits until it accepts connections.
    ///
    /// # Panics
    /// When PgBouncer is not installed or does not start.
    pub fn start(server: PostgresServer) -> Self {
        if !std::path::Path::new(BINARY).is_file() {
            NEEDS.fail(&format!("{BINARY} is missing"));
        }
        let dir = tempfile::Builder::new()
            .prefix("agent-memory-pgbouncer-")
            .tempdir()
            .unwrap_or_else(|e| NEEDS.fail(&format!("cannot create a temporary directory: {e}")));
        shared_certs().copy_server_files(dir.path());
        let as_postgres = running_as_root();
        let mut last_error = String::new();
        // A port found free can be taken before PgBouncer binds it: try a few.
        for _ in 0..5 {
            let port = free_port();
            write_config(&dir, port, server.port());
            if as_postgres {
                let out = Command::new("chown").args(["-R", "postgres:"]).arg(dir.path()).output();
                if !out.is_ok_and(|out| out.status.success()) {
                    NEEDS.fail("cannot hand the PgBouncer directory to the postgres user");
                }
            }
            let mut command = Command::new(BINARY);
            if as_postgres {
                // PgBouncer refuses to run as root; `-u` makes it switch user after starting.
                command.args(["-u", "postgres"]);
            }
            let mut child = command
                .arg(dir.path().join("pgbouncer.ini"))
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| NEEDS.fail(&format!("cannot run {BINARY}: {e}")));
            let pid = child.id();
            let watchdog =
                Watchdog::spawn(&format!("kill -9 {pid} 2>/dev/null; exit 0"), Some(pid));
            match wait_ready(&mut child, port, &dir.path().join("pgbouncer.log")) {
                Ok(()) => {
                    return Self { port, process: Some(child), _watchdog: watchdog, dir, server }
                }
                Err(e) => {
                    last_error = e;
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
        NEEDS.fail(&last_error)
    }

    /// `postgres://postgres:pooler-secret@127.0.0.1:PORT/postgres`: through PgBouncer.
    pub fn url(&self) -> String {
        format!("postgres://{USER}:{PASSWORD}@127.0.0.1:{}/postgres", self.port)
    }

    /// The loopback port PgBouncer listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server behind PgBouncer, for direct (unpooled) connections.
    pub fn server(&self) -> &PostgresServer {
        &self.server
    }

    /// PgBouncer's log file, for failure messages.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("pgbouncer.log")
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until the PgBouncer `child` accepts connections on `port`.
fn wait_ready(child: &mut Child, port: u16, log: &std::path::Path) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "pgbouncer exited with {status}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            ));
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        sleep(Duration::from_millis(25));
    }
    Err(format!("pgbouncer did not listen on port {port} in time"))
}

/// Writes `pgbouncer.ini` and the user list for a PgBouncer on `port` in front of `upstream`.
fn write_config(dir: &TempDir, port: u16, upstream: u16) {
    let path = dir.path();
    let config = format!(
        "[databases]\n\
         * = host=127.0.0.1 port={upstream}\n\
         \n\
         [pgbouncer]\n\
         listen_addr = 127.0.0.1\n\
         listen_port = {port}\n\
         unix_socket_dir =\n\
         pool_mode = transaction\n\
         auth_type = md5\n\
         auth_file = {auth}\n\
         max_client_conn = 400\n\
         default_pool_size = 40\n\
         ignore_startup_parameters = extra_float_digits\n\
         client_tls_sslmode = allow\n\
         client_tls_cert_file = {cert}\n\
         client_tls_key_file = {key}\n\
         client_tls_ca_file = {ca}\n\
         logfile = {log}\n\
         pidfile = {pid}\n",
        auth = path.join("userlist.txt").display(),
        cert = path.join("server.crt").display(),
        key = path.join("server.key").display(),
        ca = path.join("ca.crt").display(),
        log = path.join("pgbouncer.log").display(),
        pid = path.join("pgbouncer.pid").display(),
    );
    let users = format!("\"{USER}\" \"{PASSWORD}\"\n");
    for (name, text) in [("pgbouncer.ini", config), ("userlist.txt", users)] {
        std::fs::write(path.join(name), text)
            .unwrap_or_else(|e| NEEDS.fail(&format!("cannot write {name}: {e}")));
    }
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}
