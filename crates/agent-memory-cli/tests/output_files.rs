//! Commands that write a file (`export -o`, `api-key add`/`revoke`) write through symbolic
//! links to the real file, write devices and FIFOs in place, and never turn a link or a device
//! into a regular file.
#![cfg(unix)]

use std::os::unix::fs::{FileTypeExt, PermissionsExt};

mod support;

use support::{json_lines, Fixture, INVALID, OK};

#[test]
fn export_to_dev_null_leaves_it_a_character_device() {
    let fx = Fixture::new();
    fx.put("k", "v");
    fx.cmd().args(["export", "-o", "/dev/null"]).assert().code(OK);
    let meta = std::fs::metadata("/dev/null").expect("/dev/null");
    assert!(meta.file_type().is_char_device(), "/dev/null is no longer a device");
    assert_eq!(meta.permissions().mode() & 0o777, 0o666);
}

#[test]
fn export_through_a_symlink_keeps_the_link_and_fills_its_target() {
    let fx = Fixture::new();
    fx.put("k", "v");
    let real = fx.path("backup.jsonl");
    std::fs::write(&real, "old backup\n").expect("write");
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let link = fx.path("link.jsonl");
    std::os::unix::fs::symlink("backup.jsonl", &link).expect("symlink");
    fx.cmd().args(["export", "-o"]).arg(&link).assert().code(OK);
    assert!(std::fs::symlink_metadata(&link).expect("link").file_type().is_symlink());
    let lines = json_lines(&std::fs::read(&real).expect("read"));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["key"], "k");
    assert_eq!(std::fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn export_to_a_fifo_writes_into_the_pipe() {
    let fx = Fixture::new();
    fx.put("k", "v");
    let fifo = fx.path("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).expect("read the FIFO"))
    };
    fx.cmd().args(["export", "-o"]).arg(&fifo).assert().code(OK);
    let lines = json_lines(&reader.join().expect("reader"));
    assert_eq!(lines.len(), 1);
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn export_to_a_directory_is_refused_and_writes_nothing() {
    let fx = Fixture::new();
    fx.put("k", "v");
    let dir = fx.path("folder");
    std::fs::create_dir(&dir).unwrap();
    let out = fx.cmd().args(["export", "-o"]).arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(INVALID));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("it is a directory"), "{stderr}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn api_key_revoke_through_a_symlink_changes_the_real_key_file() {
    let fx = Fixture::new();
    let real = fx.path("keys.jsonl");
    let link = fx.path("linked-keys.jsonl");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let link_arg = link.to_str().unwrap();
    fx.bare().args(["api-key", "add", "--file", link_arg, "--user", "u-1"]).assert().code(OK);
    assert_eq!(std::fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o600);
    let listed = json_lines(
        &fx.bare().args(["--json", "api-key", "list", "--file", link_arg]).output().unwrap().stdout,
    );
    let id = listed[0]["id"].as_str().expect("id").to_owned();
    fx.bare().args(["api-key", "revoke", "--file", link_arg, &id]).assert().code(OK);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    let real_arg = real.to_str().unwrap();
    let listed = json_lines(
        &fx.bare().args(["--json", "api-key", "list", "--file", real_arg]).output().unwrap().stdout,
    );
    assert!(listed[0]["revoked_at"].is_number(), "the real file still holds a valid key");
    assert_eq!(std::fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o600);
}
