//! What people expect of a command-line tool: one-line usage errors, `--help` with the exit
//! codes and the global options apart, completions and a man page, logs that say what each
//! operation did, quiet closed pipes, no notes about options nobody typed, and one expiry limit.

use std::io::Read;
use std::process::Stdio;

use predicates::prelude::*;

mod support;

use support::{assert_one_line_error, exited, Fixture, INVALID, OK};

#[test]
fn usage_errors_are_one_line_with_a_hint() {
    let fx = Fixture::new();
    for (args, contains) in [
        (&["get"][..], "get --help"),
        (&["lst"][..], "agent-memory --help"),
        (&["list", "--jsno"][..], "--json"),
        (&["list", "--limit", "0"][..], "list --help"),
        (&["put", "k", "v", "--expires-in", "100000w"][..], "ten years"),
    ] {
        let mut cmd = fx.cmd();
        cmd.args(args);
        assert_one_line_error(&mut cmd, INVALID, contains, &args.join(" "));
    }
    assert!(!fx.path("m.db").exists());
}

#[test]
fn help_lists_every_exit_code_and_the_global_options_under_their_own_heading() {
    let fx = Fixture::new();
    let out = fx.bare().arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("5  quota exceeded"), "{help}");
    let global = help.find("Global options:").expect("a Global options heading");
    assert!(help[global..].contains("--store <URL>"), "{help}");
    let out = fx.bare().args(["get", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let global = help.find("Global options:").expect("a Global options heading");
    let own = help.find("Options:").expect("the command's options");
    assert!(own < global && !help[own..global].contains("--store"), "{help}");
}

#[test]
fn completions_and_man_page_are_printed_on_stdout() {
    let fx = Fixture::new();
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let out = fx.bare().args(["completions", shell]).output().unwrap();
        assert_eq!(out.status.code(), Some(OK), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains("agent-memory") && script.contains("purge-expired"), "{shell}");
    }
    fx.bare().args(["completions", "tcsh"]).assert().code(INVALID);
    fx.bare()
        .arg("man")
        .assert()
        .code(OK)
        .stdout(predicate::str::starts_with(".ie"))
        .stdout(predicate::str::contains(".TH agent-memory"));
    assert!(!fx.path("home").join("data").exists(), "completions or man opened a store");
}

#[test]
fn the_expiry_limit_is_the_tools_limit() {
    let fx = Fixture::new();
    fx.cmd().args(["put", "k", "v", "--expires-in", "3650d"]).assert().code(OK);
    let mut cmd = fx.cmd();
    cmd.args(["put", "k", "v", "--expires-in", "3650d1s"]);
    assert_one_line_error(&mut cmd, INVALID, "ten years", "just over");
    assert_eq!(agent_memory::validation::MAX_EXPIRES_IN_SECONDS, 3650 * 86_400);
    assert_eq!(agent_memory::tools::MAX_EXPIRES_IN_SECONDS, 3650 * 86_400);
}

#[test]
fn info_logs_a_line_per_store_operation_in_text_and_json() {
    let fx = Fixture::new();
    fx.put("k", "v");
    let out = fx.cmd().env("AGENT_MEMORY_LOG", "agent_memory=info").args(["get", "k"]).output();
    let stderr = String::from_utf8(out.unwrap().stderr).unwrap();
    assert!(stderr.lines().any(|line| line.contains("get") && line.contains("close")), "{stderr}");
    let out = fx
        .cmd()
        .env("AGENT_MEMORY_LOG", "agent_memory=info")
        .args(["--log-format", "json", "get", "k"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.is_empty());
    for line in stderr.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("each stderr line is JSON");
    }
    // The error a command ends with, and a note about an ignored option, are objects too.
    let out = fx.cmd().args(["--log-format", "json", "--namespace", "n", "namespaces"]).output();
    let out = out.unwrap();
    let out2 = fx.cmd().args(["--log-format", "json", "get", "nope"]).output().unwrap();
    assert_eq!(out2.status.code(), Some(support::NOT_FOUND));
    let stderr = [out.stderr, out2.stderr].concat();
    let levels: Vec<String> = String::from_utf8(stderr)
        .unwrap()
        .lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).expect("JSON");
            value["level"].as_str().expect("a level").to_owned()
        })
        .collect();
    assert_eq!(levels, ["WARN", "ERROR"]);
}

#[test]
fn the_remote_servers_first_line_is_json_with_json_logs() {
    let fx = Fixture::new();
    let keys = fx.path("keys.jsonl");
    std::fs::write(&keys, "").unwrap();
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_agent-memory"))
        .env_remove("AGENT_MEMORY_LOG")
        .env_remove("RUST_LOG")
        .env("HOME", fx.path("home"))
        .args(["--store", &fx.store, "--app", "app", "--log-format", "json", "mcp"])
        .args(["--listen", "127.0.0.1:0", "--api-keys"])
        .arg(&keys)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let mut stderr = server.stderr.take().expect("stderr");
    let mut first = Vec::new();
    let mut byte = [0u8; 1];
    while stderr.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
        first.push(byte[0]);
    }
    let _ = server.kill();
    let _ = server.wait();
    let line: serde_json::Value = serde_json::from_slice(&first)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&first)));
    let message = line["fields"]["message"].as_str().expect("a message");
    assert!(message.contains("listening on http://127.0.0.1:"), "{message}");
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let fx = Fixture::new();
    let content = "x".repeat(60_000);
    for i in 0..30 {
        fx.put(&format!("k{i:02}"), &content);
    }
    for args in [&["export"][..], &["list", "--all", "--json"][..]] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agent-memory"))
            .env_remove("AGENT_MEMORY_LOG")
            .env_remove("RUST_LOG")
            .args(["--store", &fx.store, "--app", "app", "--user", "u1"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read one line, then close the pipe, as `head -1` does.
        let mut stdout = child.stdout.take().unwrap();
        let mut byte = [0u8; 1];
        while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {}
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(OK), "{args:?}: {stderr}");
        assert!(!stderr.contains("error"), "{args:?}: {stderr}");
    }
}

#[test]
fn exported_scope_variables_bring_no_notes() {
    let fx = Fixture::new();
    fx.put("k", "v");
    let target = fx.other_store("t.db");
    let commands: [&[&str]; 4] =
        [&["users"], &["purge-expired", "--all-users"], &["migrate", "--to", &target], &["export"]];
    for args in commands {
        let out = fx
            .bare()
            .env("AGENT_MEMORY_STORE", &fx.store)
            .env("AGENT_MEMORY_APP", "app")
            .env("AGENT_MEMORY_USER", "u1")
            .env("AGENT_MEMORY_NAMESPACE", "n")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(OK), "{args:?}");
        assert!(out.stderr.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // Typed on the command line, the note stays: the person may think it applies.
    let out = fx.cmd().args(["users", "--namespace", "n"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--user and --namespace are ignored"), "{stderr}");
}

#[test]
fn a_dry_run_counts_without_a_target_and_checks_one_that_is_given() {
    let fx = Fixture::new();
    fx.put("k", "v");
    let dry = fx.with_store().args(["--app", "app", "migrate", "--dry-run"]).output().unwrap();
    exited(&dry, OK);
    assert_eq!(String::from_utf8_lossy(&dry.stdout), "would copy 1 record of 1 user\n");
    // A SQLite target that does not exist yet is fine, and not created by the dry run.
    let new_target = fx.other_store("new.db");
    fx.with_store()
        .args(["--app", "app", "migrate", "--dry-run", "--to", &new_target])
        .assert()
        .code(OK);
    assert!(!fx.path("new.db").exists());
    // An unreachable target fails the dry run as it would fail the migration.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let unreachable = format!("redis://127.0.0.1:{port}?connect_timeout=1");
    let mut cmd = fx.with_store();
    cmd.args(["--app", "app", "migrate", "--dry-run", "--to", &unreachable]);
    assert_one_line_error(&mut cmd, support::FAILURE, "--to: ", "unreachable target");
    // Without --dry-run, --to is required.
    let mut cmd = fx.with_store();
    cmd.args(["--app", "app", "migrate"]);
    assert_one_line_error(&mut cmd, INVALID, "--to <URL>", "no target");
}
