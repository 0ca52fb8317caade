//! Throwaway PostgreSQL servers on loopback ports.
//!
//! - [`shared_url`]: the URL in `AGENT_MEMORY_TEST_POSTGRES_URL`, or else one server started
//!   lazily for the whole test process (a fresh cluster, so a fresh database per process).
//! - [`PostgresServer`]: an owned server in its own temporary directory, for tests that
//!   restart or stop it; stopped when dropped.
//! - [`shared_tls_server`]: one server per test process that also accepts TLS
//!   ([`PostgresServer::start_tls`]), with the throwaway certificates of [`crate::tls`].
//!
//! Servers run from the highest version under `/usr/lib/postgresql/*/bin` (what `scripts/test`
//! installs), or from the directory in `AGENT_MEMORY_TEST_POSTGRES_BIN`. PostgreSQL refuses to
//! run as root, so when the tests run as root the data directory is handed to the `postgres`
//! system user and `initdb`/`pg_ctl` run through `runuser -u postgres --`. Authentication is
//! `trust` on loopback only. A watchdog shell process stops the server and removes its
//! directory once the test process is gone, so no server outlives the tests even when they
//! abort. A fixture that cannot get a server panics with what to install; under `CI=true` it
//! says so loudly, because backend tests never pass silently.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use tempfile::TempDir;

use crate::tls::{shared_certs, CLIENT_NAME};
use crate::util::{free_port, sh_quote, Needs, Watchdog};

/// The environment variable naming an existing PostgreSQL server for the tests
/// (`postgres://user:password@host:port/database`).
pub const URL_ENV: &str = "AGENT_MEMORY_TEST_POSTGRES_URL";
/// The environment variable naming a directory holding `initdb` and `pg_ctl`, overriding the
/// search under `/usr/lib/postgresql`.
pub const BIN_ENV: &str = "AGENT_MEMORY_TEST_POSTGRES_BIN";

/// The role of [`PostgresServer::start_tls`] servers that must log in over TLS with a password
/// (SCRAM), as on managed services; the role itself is not created.
pub const PASSWORD_ROLE: &str = "agent_memory_password";

/// Seconds `pg_ctl` waits for a start or stop.
const PG_CTL_WAIT_SECS: &str = "60";

/// A PostgreSQL URL every test in this process may share: `AGENT_MEMORY_TEST_POSTGRES_URL`
/// when set, otherwise a server started on first use (with `fsync=off`: fast, not
/// crash-safe) and stopped when the process exits.
///
/// Tests sharing it must isolate their data (the conformance suite uses a fresh application id
/// per case; other tests use their own table names); tests that restart or stop the server
/// start their own [`PostgresServer`].
///
/// # Panics
/// When no URL is set and no server can be started.
pub fn shared_url() -> String {
    if let Some(url) = std::env::var(URL_ENV).ok().filter(|url| !url.trim().is_empty()) {
        return url;
    }
    static SHARED: OnceLock<PostgresServer> = OnceLock::new();
    SHARED.get_or_init(PostgresServer::start).url()
}

/// The server every TLS test in this process may share ([`PostgresServer::start_tls`]), started
/// on first use. There is no variable naming an existing one: the tests need the certificates
/// it was started with.
///
/// # Panics
/// When no server can be started.
pub fn shared_tls_server() -> &'static PostgresServer {
    static SHARED: OnceLock<PostgresServer> = OnceLock::new();
    SHARED.get_or_init(PostgresServer::start_tls)
}

/// What the fixtures need; [`Needs::fail`] names it when a server cannot start.
const NEEDS: Needs = Needs { server: "PostgreSQL", packages: &["postgresql"], url_env: URL_ENV };

/// The directory holding `initdb` and `pg_ctl`.
fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(BIN_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let versions = std::fs::read_dir("/usr/lib/postgresql")
        .unwrap_or_else(|e| NEEDS.fail(&format!("cannot read /usr/lib/postgresql: {e}")));
    versions
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<f64>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, bin)| bin)
        .unwrap_or_else(|| NEEDS.fail("no /usr/lib/postgresql/*/bin/initdb"))
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// One PostgreSQL server (a fresh cluster) on a loopback port, in its own temporary directory.
///
/// Stopped when dropped; its directory is removed with it.
///
/// ```no_run
/// let mut server = agent_memory_testkit::postgres::PostgresServer::start();
/// let url = server.url();
/// server.restart();
/// # drop(url);
/// ```
#[derive(Debug)]
pub struct PostgresServer {
    port: u16,
    bin: PathBuf,
    as_postgres: bool,
    settings: Vec<String>,
    dir: TempDir,
    running: bool,
    watchdog: Option<Watchdog>,
}

impl PostgresServer {
    /// A server tuned for fast tests: `fsync=off`, `synchronous_commit=off`,
    /// `full_page_writes=off`. A clean stop or restart keeps the data; a
    /// [`crash_restart`](Self::crash_restart) may lose the last commits (use
    /// [`start_durable`](Self::start_durable) for that).
    ///
    /// # Panics
    /// When the PostgreSQL binaries are missing or the server does not start.
    pub fn start() -> Self {
        Self::start_with(&["fsync=off", "synchronous_commit=off", "full_page_writes=off"])
    }

    /// A server with PostgreSQL's durable defaults, for durability-sensitive tests.
    ///
    /// # Panics
    /// As [`start`](Self::start).
    pub fn start_durable() -> Self {
        Self::start_with(&[])
    }

    /// A server with extra `-c name=value` settings such as `"max_connections=50"`.
    ///
    /// # Panics
    /// As [`start`](Self::start).
    pub fn start_with(settings: &[&str]) -> Self {
        Self::start_configured(settings, false)
    }

    /// A fast server (as [`start`](Self::start)) that also accepts TLS: `ssl=on` with the
    /// [`shared_certs`] server certificate, for `localhost` and `127.0.0.1`, and the test CA as
    /// `ssl_ca_file`, so it can check client certificates. Every role may connect over loopback
    /// with or without TLS (trust), except [`CLIENT_NAME`], which must connect over TLS with a
    /// client certificate for its name (`hostssl … cert`), and [`PASSWORD_ROLE`], which must
    /// connect over TLS with a SCRAM password (`hostssl … scram-sha-256`). The roles themselves
    /// are not created.
    ///
    /// # Panics
    /// As [`start`](Self::start).
    pub fn start_tls() -> Self {
        Self::start_configured(
            &["fsync=off", "synchronous_commit=off", "full_page_writes=off"],
            true,
        )
    }

    fn start_configured(settings: &[&str], tls: bool) -> Self {
        let bin = bin_dir();
        let as_postgres = running_as_root();
        let dir = tempfile::Builder::new()
            .prefix("agent-memory-pg-")
            .tempdir()
            .unwrap_or_else(|e| NEEDS.fail(&format!("cannot create a temporary directory: {e}")));
        let sockets = dir.path().join("sockets");
        std::fs::create_dir(&sockets)
            .unwrap_or_else(|e| NEEDS.fail(&format!("cannot create the socket directory: {e}")));
        if as_postgres {
            let out = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(dir.path())
                .output()
                .unwrap_or_else(|e| NEEDS.fail(&format!("cannot run chown: {e}")));
            if !out.status.success() {
                NEEDS.fail(&format!(
                    "cannot hand the data directory to the postgres user (is there one? \
                     `useradd --system postgres`): {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        let mut server = Self {
            port: 0,
            bin,
            as_postgres,
            settings: settings.iter().map(|s| (*s).to_owned()).collect(),
            dir,
            running: false,
            watchdog: None,
        };
        let data = server.data_dir();
        let out = server.run_tool(
            "initdb",
            &[
                "-D",
                path_str(&data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        if !out.status.success() {
            NEEDS.fail(&format!("initdb failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        if tls {
            server.enable_tls();
        }
        server.watchdog = Some(server.spawn_watchdog());
        // A port found free can be taken before the server binds it: try a few.
        let mut last_error = String::new();
        for _ in 0..5 {
            server.port = free_port();
            match server.try_start() {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        NEEDS.fail(&format!("the server did not start: {last_error}"))
    }

    /// Puts the certificates in the data directory (owned by the server's user, the key
    /// `0600` as PostgreSQL demands), turns TLS on, and writes the `pg_hba.conf` described at
    /// [`start_tls`](Self::start_tls).
    fn enable_tls(&mut self) {
        let data = self.data_dir();
        shared_certs().copy_server_files(&data);
        let hba = format!(
            "local all all trust\n\
             hostssl all {CLIENT_NAME} 127.0.0.1/32 cert\n\
             host all {CLIENT_NAME} 127.0.0.1/32 reject\n\
             hostssl all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n\
             host all {PASSWORD_ROLE} 127.0.0.1/32 reject\n\
             host all all 127.0.0.1/32 trust\n\
             host all all ::1/128 trust\n"
        );
        std::fs::write(data.join("pg_hba.conf"), hba)
            .unwrap_or_else(|e| NEEDS.fail(&format!("cannot write pg_hba.conf: {e}")));
        if self.as_postgres {
            let out = Command::new("chown")
                .args(["postgres:", "ca.crt", "server.crt", "server.key", "pg_hba.conf"])
                .current_dir(&data)
                .output()
                .unwrap_or_else(|e| NEEDS.fail(&format!("cannot run chown: {e}")));
            if !out.status.success() {
                NEEDS.fail("cannot hand the certificates to the postgres user");
            }
        }
        for setting in
            ["ssl=on", "ssl_cert_file=server.crt", "ssl_key_file=server.key", "ssl_ca_file=ca.crt"]
        {
            self.settings.push(setting.to_owned());
        }
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres` (trust authentication, no password).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server (fast shutdown: open sessions are terminated) and starts it again on
    /// the same port with the same data, waiting until it accepts connections.
    ///
    /// # Panics
    /// When the server does not stop or start again.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }

    /// Stops the server the way a crash would (immediate shutdown: every process quits at
    /// once, nothing is committed or released on the way out, crash recovery runs on start) and
    /// starts it again on the same port.
    ///
    /// # Panics
    /// When the server does not stop or start again.
    pub fn crash_restart(&mut self) {
        self.stop_mode("immediate");
        self.start_again();
    }

    /// Stops the server (fast shutdown), waiting until it is down. Does nothing if stopped.
    ///
    /// # Panics
    /// When `pg_ctl stop` fails on a running server.
    pub fn stop(&mut self) {
        self.stop_mode("fast");
    }

    fn stop_mode(&mut self, mode: &str) {
        if !self.running {
            return;
        }
        let data = self.data_dir();
        let out = self.run_tool(
            "pg_ctl",
            &["-D", path_str(&data), "-m", mode, "-w", "-t", PG_CTL_WAIT_SECS, "stop"],
        );
        if !out.status.success() {
            panic!("pg_ctl stop failed: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        self.running = false;
    }

    /// Starts a stopped server again on the same port with the same data.
    ///
    /// # Panics
    /// When it does not start.
    pub fn start_again(&mut self) {
        if self.running {
            return;
        }
        if let Err(e) = self.try_start() {
            panic!("the PostgreSQL server did not start again: {e}");
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn try_start(&mut self) -> Result<(), String> {
        let data = self.data_dir();
        let mut options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c max_connections=300",
            self.port,
            path_str(&self.dir.path().join("sockets")),
        );
        for setting in &self.settings {
            options.push_str(" -c ");
            options.push_str(setting);
        }
        let log = self.dir.path().join("postgres.log");
        let out = self.run_tool(
            "pg_ctl",
            &[
                "-D",
                path_str(&data),
                "-l",
                path_str(&log),
                "-o",
                &options,
                "-w",
                "-t",
                PG_CTL_WAIT_SECS,
                "start",
            ],
        );
        if out.status.success() {
            self.running = true;
            Ok(())
        } else {
            let log_text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = log_text.lines().rev().take(5).collect();
            Err(format!(
                "{} {}",
                String::from_utf8_lossy(&out.stderr).trim(),
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            ))
        }
    }

    /// Runs a PostgreSQL tool, as the `postgres` user when the tests run as root.
    fn run_tool(&self, tool: &str, args: &[&str]) -> Output {
        let program = self.bin.join(tool);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        // The server's own output goes to its log file; nothing may hold the test's pipes.
        command
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                // Name the program that could not start: as root that is `runuser`, which
                // lives in /usr/sbin, not the tool.
                let started = if self.as_postgres {
                    format!("runuser (to run {} as postgres; is /usr/sbin on PATH?)", tool)
                } else {
                    program.display().to_string()
                };
                NEEDS.fail(&format!("cannot run {started}: {e}"))
            })
    }

    /// A watchdog that stops the server and removes its directory once this test process is
    /// gone.
    fn spawn_watchdog(&self) -> Watchdog {
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = format!(
            "{}{} -D {} -m immediate -w -t 30 stop",
            if self.as_postgres { "runuser -u postgres -- " } else { "" },
            sh_quote(path_str(&pg_ctl)),
            sh_quote(path_str(&self.data_dir())),
        );
        let dir = sh_quote(path_str(self.dir.path()));
        Watchdog::spawn(&format!("{stop} >/dev/null 2>&1; rm -rf {dir}"), None)
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap_or_else(|| NEEDS.fail("the temporary directory path is not UTF-8"))
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if self.running {
            let data = self.data_dir();
            let _ = self.run_tool(
                "pg_ctl",
                &["-D", path_str(&data), "-m", "immediate", "-w", "-t", PG_CTL_WAIT_SECS, "stop"],
            );
            self.running = false;
        }
        // The server is down: its watchdog has nothing left to do.
        drop(self.watchdog.take());
    }
}
