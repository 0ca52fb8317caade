//! Tests that run their own binary again as a child process (a writer to kill with `SIGKILL`,
//! a second process on one file): starting it, the line protocol it speaks on stdout, and its
//! runtime.

use std::ffi::OsStr;
use std::io::Write;
use std::process::{Child, Command, Stdio};

/// Runs this test binary again, running only `test`, with `vars` set so that the test plays
/// the child's part. The child's stdout is piped to the caller; its stderr is the caller's.
pub fn spawn_self(test: &str, vars: &[(&str, &OsStr)]) -> Child {
    let mut command = Command::new(std::env::current_exe().expect("the test binary's path"));
    command.args([test, "--exact", "--nocapture", "--test-threads=1", "--quiet"]);
    for (name, value) in vars {
        command.env(name, value);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the test binary starts again as a child")
}

/// Prints one protocol line to the real stdout (not the test harness's capture) at once.
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    out.write_all(format!("{line}\n").as_bytes()).expect("stdout is writable");
    out.flush().expect("stdout flushes");
}

/// A runtime for a test that is not `#[tokio::test]` because it may run as the child.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
