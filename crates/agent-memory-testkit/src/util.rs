//! What every fixture needs around a server process, in one place: free loopback ports, loud
//! failures (backend tests never pass silently, and under `CI=true` they say so), and a
//! watchdog that cleans up after a test process that died without dropping its fixtures.
//!
//! Test files that need a port of their own (say, one nothing listens on) use [`free_port`]
//! too.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// True under CI (`CI=true` or `CI=1`), where a test that cannot get what it needs must fail
/// and say that CI expected it, never skip.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Fails a fixture loudly on a problem that is not a missing server (a port that cannot be
/// bound, a shell that does not start).
///
/// # Panics
/// Always.
pub fn fail(what: &str) -> ! {
    if ci() {
        panic!("CI=true but a test fixture failed: {what}");
    }
    panic!("a test fixture failed: {what}");
}

/// A server a fixture needs, and how to get it: named in the failure when it cannot start.
#[derive(Debug, Clone, Copy)]
pub struct Needs {
    /// The server's name, such as `"PostgreSQL"`.
    pub server: &'static str,
    /// The Debian packages that provide its binaries.
    pub packages: &'static [&'static str],
    /// The environment variable naming an existing server to use instead.
    pub url_env: &'static str,
}

impl Needs {
    /// Fails the fixture loudly: `what` went wrong, and what to install (or which variable to
    /// set) so it cannot happen again.
    ///
    /// # Panics
    /// Always.
    pub fn fail(&self, what: &str) -> ! {
        let Self { server, packages, url_env } = *self;
        if ci() {
            panic!(
                "CI=true but no {server} server could be started for the tests: {what}. \
                 scripts/test installs {}; or set {url_env}.",
                packages.join(" and ")
            );
        }
        panic!(
            "no {server} server for the tests: {what}. Install {} (Debian: apt-get install {}; \
             scripts/test does it), or set {url_env}.",
            packages.join(" and "),
            packages.join(" ")
        );
    }
}

/// The Python the end-to-end tests run their official clients on, named by
/// `AGENT_MEMORY_TEST_PYTHON` (`scripts/test` makes that environment and sets it).
///
/// # Panics
/// When the variable is not set, saying what `needs` it and how to `make` one.
pub fn python(needs: &str, make: &str) -> PathBuf {
    match std::env::var_os("AGENT_MEMORY_TEST_PYTHON") {
        Some(python) if !python.is_empty() => PathBuf::from(python),
        _ => panic!(
            "AGENT_MEMORY_TEST_PYTHON is not set{}. {needs}; {make}",
            if ci() { " under CI=true" } else { "" }
        ),
    }
}

/// Starts `cmd`, a script run by [`python`], with the streams the caller set.
///
/// # Panics
/// When the interpreter cannot start, naming the variable that chose it.
pub fn spawn_python(cmd: &mut Command) -> Child {
    cmd.spawn().unwrap_or_else(|err| {
        panic!("cannot run {:?} (AGENT_MEMORY_TEST_PYTHON): {err}", cmd.get_program())
    })
}

/// A free loopback TCP port, as reported by the OS at this instant. Another process may take
/// it before the caller binds it, so fixtures retry a start a few times.
///
/// # Panics
/// When no loopback port can be bound.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .unwrap_or_else(|e| fail(&format!("cannot bind a loopback port: {e}")));
    listener.local_addr().map(|addr| addr.port()).unwrap_or_else(|e| fail(&e.to_string()))
}

/// Quotes a word for `sh`, for the watchdog's cleanup commands.
pub fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A shell process that waits for this test process to exit, then runs a cleanup command:
/// a server must not outlive the tests even when they abort or are killed, which skips every
/// `Drop`. Dropping the watchdog stops the shell without running the cleanup (the fixture
/// cleans up itself then).
#[derive(Debug)]
pub struct Watchdog {
    shell: Child,
}

impl Watchdog {
    /// Starts the shell. `cleanup` is an `sh` command line; it runs once this process is gone
    /// or, when `server` names a process id, once that process has exited too.
    ///
    /// # Panics
    /// When `sh` cannot be started.
    pub fn spawn(cleanup: &str, server: Option<u32>) -> Self {
        let me = std::process::id();
        let server_alive =
            server.map_or_else(String::new, |pid| format!(" && kill -0 {pid} 2>/dev/null"));
        let script =
            format!("while kill -0 {me} 2>/dev/null{server_alive}; do sleep 1; done; {cleanup}");
        let shell = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| fail(&format!("cannot start the watchdog shell: {e}")));
        Self { shell }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}
