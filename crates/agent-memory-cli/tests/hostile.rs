//! Hostile input through the real `agent-memory` binary, on a SQLite file in a temp directory:
//! bytes that are not UTF-8 in arguments, environment variables, stdin and import files; NUL
//! and other control characters; SQL and Lua injection strings; oversize content; deeply
//! nested metadata; forged cursors.
//!
//! Each input is either refused with exit code 2, one `error: ` line on stderr and nothing
//! written (checked with `namespaces` and `export`), or stored and read back byte for byte
//! with `get --json`.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use agent_memory::provider::{key_cursor, namespace_cursor, CursorKind};
use agent_memory::MemoryScope;
use assert_cmd::Command;
use serde_json::{json, Value};

mod support;

use support::{assert_one_line_error, stdout_json, Fixture, INVALID, OK};

/// Every record of `app`/`u1` as `export` prints it, and the namespaces as listed.
fn contents(fx: &Fixture) -> (Vec<Value>, Vec<Value>) {
    let export = stdout_json(fx.cmd().arg("export"));
    let namespaces = stdout_json(fx.cmd().args(["namespaces", "--json"]));
    (export, namespaces)
}

fn assert_empty(fx: &Fixture, what: &str) {
    // Reads open existing stores only: a store nothing created holds nothing.
    if !fx.path("m.db").exists() {
        return;
    }
    assert_eq!(contents(fx), (vec![], vec![]), "{what}: a refused input wrote something");
}

/// The bytes as one OS argument (Unix allows any bytes but NUL).
fn os(bytes: &[u8]) -> OsString {
    OsString::from_vec(bytes.to_vec())
}

/// Exit 2, nothing on stdout, one line on stderr starting with `error: ` and containing
/// `contains`.
fn refused(cmd: &mut Command, contains: &str, what: &str) {
    assert_one_line_error(cmd, INVALID, contains, what);
}

/// Byte sequences that are not UTF-8: a stray continuation byte, an overlong NUL, a UTF-16
/// surrogate, a truncated four-byte sequence, bytes that never occur, Latin-1.
const NOT_UTF8: &[&[u8]] = &[
    b"\x80",
    b"a\xc0\x80b",
    b"\xed\xa0\x80",
    b"\xf0\x9f\x98",
    b"\xff\xfe",
    b"caf\xe9",
    b"\xf8\x88\x80\x80\x80",
];

#[test]
fn arguments_that_are_not_utf8_are_refused_and_write_nothing() {
    let fx = Fixture::new();
    for bad in NOT_UTF8 {
        let what = format!("the bytes {bad:?}");
        refused(
            fx.cmd().arg("put").arg(os(bad)).arg("v"),
            "not valid UTF-8",
            &format!("key {what}"),
        );
        refused(
            fx.cmd().args(["put", "k"]).arg(os(bad)),
            "not valid UTF-8",
            &format!("content {what}"),
        );
        refused(fx.cmd().arg("get").arg(os(bad)), "not valid UTF-8", &format!("get {what}"));
        refused(fx.cmd().arg("delete").arg(os(bad)), "not valid UTF-8", &format!("delete {what}"));
        refused(
            fx.cmd().arg("search").arg(os(bad)),
            "not valid UTF-8",
            &format!("search query {what}"),
        );
        refused(
            fx.with_store().args(["--user", "u1", "--app"]).arg(os(bad)).args(["put", "k", "v"]),
            "(--app) is not valid UTF-8",
            &format!("--app {what}"),
        );
        refused(
            fx.with_store()
                .arg("--app")
                .arg("app")
                .arg(os(&[b"--user=", *bad].concat()))
                .args(["put", "k", "v"]),
            "(--user) is not valid UTF-8",
            &format!("--user= {what}"),
        );
        refused(
            fx.cmd().arg("--namespace").arg(os(bad)).args(["put", "k", "v"]),
            "(--namespace) is not valid UTF-8",
            &format!("--namespace {what}"),
        );
        let metadata = [br#"{"a":""#.as_slice(), bad, br#""}"#].concat();
        refused(
            fx.cmd().args(["put", "k", "v", "--metadata"]).arg(os(&metadata)),
            "(--metadata) is not valid UTF-8",
            &format!("--metadata {what}"),
        );
        refused(
            fx.cmd().args(["put", "k", "v", "--if-revision"]).arg(os(bad)),
            "not valid UTF-8",
            &format!("--if-revision {what}"),
        );
        refused(
            fx.cmd().args(["list", "--after"]).arg(os(bad)),
            "not valid UTF-8",
            &format!("--after {what}"),
        );
        for var in ["AGENT_MEMORY_APP", "AGENT_MEMORY_USER", "AGENT_MEMORY_NAMESPACE"] {
            refused(
                fx.with_store()
                    .args(["--app", "app", "--user", "u1"])
                    .env(var, os(bad))
                    .args(["put", "k", "v"]),
                &format!("{var} is not valid UTF-8"),
                &format!("{var} {what}"),
            );
        }
    }
    assert_empty(&fx, "arguments that are not UTF-8");
}

#[test]
fn stdin_and_import_files_that_are_not_utf8_are_refused_and_write_nothing() {
    let fx = Fixture::new();
    let good = r#"{"scope":{"application_id":"app","user_id":"u1"},"key":"ok","content":"fine"}"#;
    for bad in NOT_UTF8 {
        let what = format!("the bytes {bad:?}");
        refused(
            fx.cmd().args(["put", "k"]).write_stdin([b"before ", *bad, b" after\n"].concat()),
            "not valid UTF-8",
            &format!("stdin content with {what}"),
        );
        let line = [
            br#"{"scope":{"application_id":"app","user_id":"u1"},"key":"k","content":""#.as_slice(),
            bad,
            br#""}"#,
        ]
        .concat();
        let input = [good.as_bytes(), b"\n", &line, b"\n"].concat();
        refused(
            fx.cmd().arg("import").write_stdin(input.clone()),
            "line 2: is not valid UTF-8",
            &format!("an import on stdin with {what}"),
        );
        let path = fx.dir.path().join("import.jsonl");
        std::fs::write(&path, &input).expect("write the import file");
        refused(
            fx.cmd().arg("import").arg(&path),
            "line 2: is not valid UTF-8",
            &format!("an import file with {what}"),
        );
    }
    assert_empty(&fx, "stdin and import files that are not UTF-8");
}

#[test]
fn nul_and_control_characters_are_refused_where_the_rules_say() {
    let fx = Fixture::new();
    refused(
        fx.cmd().args(["put", "k"]).write_stdin(b"a\0b".to_vec()),
        "invalid content",
        "NUL in stdin content",
    );
    for control in ["\u{1}", "\u{1b}[31m", "\u{7f}", "\u{85}", "\t", "\r"] {
        let what = format!("{control:?}");
        refused(
            fx.cmd().args(["put", &format!("a{control}b"), "v"]),
            "invalid key",
            &format!("a key holding {what}"),
        );
        refused(
            fx.with_store().args([
                "--app",
                "app",
                "--user",
                &format!("u{control}"),
                "put",
                "k",
                "v",
            ]),
            "invalid user_id",
            &format!("a user id holding {what}"),
        );
        refused(
            fx.cmd().args(["--namespace", &format!("n{control}"), "put", "k", "v"]),
            "invalid namespace",
            &format!("a namespace holding {what}"),
        );
    }
    let nul_lines = [
        r#"{"scope":{"application_id":"app","user_id":"u1"},"key":"a\u0000b","content":"x"}"#,
        r#"{"scope":{"application_id":"app","user_id":"u1"},"key":"k","content":"x\u0000"}"#,
        r#"{"scope":{"application_id":"app","user_id":"u1"},"key":"k","content":"x","metadata":{"a\u0000":1}}"#,
        r#"{"scope":{"application_id":"app","user_id":"u1"},"key":"k","content":"x","metadata":{"a":["\u0000"]}}"#,
        r#"{"scope":{"application_id":"app","user_id":"u1"},"key":"k","content":"x","source":{"agent":"\u0000"}}"#,
        r#"{"scope":{"application_id":"app","user_id":"u1","namespace":"n\u0000"},"key":"k","content":"x"}"#,
        r#"{"scope":{"application_id":"app","user_id":"u1\u0000"},"key":"k","content":"x"}"#,
    ];
    for line in nul_lines {
        refused(fx.cmd().arg("import").write_stdin(line), "line 1", &format!("import of {line}"));
        refused(
            fx.with_store().args(["import", "--any-user"]).write_stdin(line),
            "line 1",
            &format!("import --any-user of {line}"),
        );
    }
    assert_empty(&fx, "NUL and control characters");

    // Content and metadata may hold every control character but NUL, and keep them.
    let controls: String = (1u8..=0x1f).map(char::from).chain(['\u{7f}', '\u{85}']).collect();
    fx.cmd()
        .args(["put", "controls", &controls, "--metadata"])
        .arg(json!({ controls.clone(): controls }).to_string())
        .assert()
        .code(OK);
    let read = stdout_json(fx.cmd().args(["get", "controls", "--json"]));
    assert_eq!(read[0]["content"].as_str().map(str::as_bytes), Some(controls.as_bytes()));
    assert_eq!(read[0]["metadata"][&controls], json!(controls));
    let found = stdout_json(fx.cmd().args(["search", "\u{1b}", "--json"]));
    assert_eq!(found.len(), 1, "a control character is a literal search query");
}

/// Strings that would change a SQL statement or a Lua script if spliced into one.
const INJECTIONS: &[&str] = &[
    "'; DROP TABLE memories; --",
    "\" OR 1=1 --",
    "' OR '1'='1",
    "$1",
    "%s",
    "\\x00",
    "-- comment",
    "--",
    "-",
    "]] redis.call('FLUSHALL') --[[",
    "{tag}",
    "*",
    "%_",
    "\\",
    "`",
    "\u{202e}txet",
    "😀",
];

#[test]
fn injection_strings_are_stored_and_read_back_byte_for_byte() {
    let fx = Fixture::new();
    fx.cmd().args(["put", "canary", "canary content"]).assert().code(OK);
    for (i, s) in INJECTIONS.iter().enumerate() {
        let metadata = json!({ (*s): s, "i": i }).to_string();
        // `=` and `--` keep values that start with a dash from being read as options.
        let mut put = fx.with_store();
        put.args([
            "--app=app",
            &format!("--user={s}"),
            &format!("--namespace={s}"),
            "--json",
            "put",
            &format!("--metadata={metadata}"),
            "--",
            s,
            &format!("content {s}"),
        ]);
        let written = stdout_json(&mut put);
        let mut get = fx.with_store();
        get.args(["--app=app", &format!("--user={s}"), &format!("--namespace={s}"), "--json"])
            .args(["get", "--", s]);
        let read = stdout_json(&mut get);
        assert_eq!(read, written, "{s:?}: get must return exactly what put stored");
        let record = &read[0];
        assert_eq!(record["key"], json!(s), "{s:?}: the key round trips");
        assert_eq!(record["content"], json!(format!("content {s}")), "{s:?}: the content");
        assert_eq!(record["metadata"][s], json!(s), "{s:?}: the metadata");
        assert_eq!(
            record["scope"],
            json!({"application_id": "app", "user_id": s, "namespace": s}),
            "{s:?}: the scope"
        );
        let mut search = fx.with_store();
        search
            .args(["--app=app", &format!("--user={s}"), &format!("--namespace={s}"), "--json"])
            .args(["search", "--", s]);
        assert_eq!(stdout_json(&mut search), written, "{s:?}: a literal search finds it");
    }
    let canary = stdout_json(fx.cmd().args(["export"]));
    assert_eq!(canary.len(), 1, "user u1 still has exactly its canary: {canary:?}");
    assert_eq!(canary[0]["content"], "canary content");
}

#[test]
fn oversize_content_on_stdin_is_refused_and_the_limit_is_exact() {
    let fx = Fixture::new();
    refused(
        fx.cmd().args(["put", "big"]).write_stdin(vec![b'x'; 65_537]),
        "invalid content",
        "65,537 bytes on stdin",
    );
    refused(
        fx.cmd().args(["put", "big"]).write_stdin([vec![b'x'; 65_537], b"\n".to_vec()].concat()),
        "invalid content",
        "65,537 bytes and a newline on stdin",
    );
    refused(
        fx.cmd().args(["put", "big"]).write_stdin(vec![b'x'; 4 << 20]),
        "invalid content",
        "four megabytes on stdin",
    );
    assert_empty(&fx, "oversize content");
    let largest = "é".repeat(32_768);
    fx.cmd().args(["put", "big"]).write_stdin(format!("{largest}\n")).assert().code(OK);
    let read = stdout_json(fx.cmd().args(["get", "big", "--json"]));
    assert_eq!(read[0]["content"].as_str().map(str::len), Some(65_536), "65,536 bytes are kept");
    assert_eq!(read[0]["content"], json!(largest));
}

#[test]
fn deeply_nested_or_huge_metadata_is_refused() {
    let fx = Fixture::new();
    let nested = |levels: usize| format!("{{\"a\":{}1{}}}", "[".repeat(levels), "]".repeat(levels));
    refused(
        fx.cmd().args(["put", "k", "v", "--metadata", &nested(32)]),
        "nested at most 32",
        "metadata 33 levels deep",
    );
    refused(
        fx.cmd().args(["put", "k", "v", "--metadata", &nested(10_000)]),
        "invalid metadata",
        "metadata 10,001 levels deep",
    );
    let huge = json!({ "pad": "x".repeat(16_384) }).to_string();
    refused(fx.cmd().args(["put", "k", "v", "--metadata", &huge]), "16384", "16 KiB of metadata");
    assert_empty(&fx, "nested metadata");
    fx.cmd().args(["put", "k", "v", "--metadata", &nested(31)]).assert().code(OK);
}

#[test]
fn forged_and_foreign_cursors_are_refused() {
    let fx = Fixture::new();
    for i in 0..3 {
        fx.cmd().args(["put", &format!("k{i}"), "needle"]).assert().code(OK);
        let mut other = fx.with_store();
        other.args(["--app", "app", "--user", "u2", "put", &format!("k{i}"), "needle"]);
        other.assert().code(OK);
    }
    let u2 = MemoryScope::new("app", "u2").expect("valid ids");
    let u1 = MemoryScope::new("app", "u1").expect("valid ids");
    let forged = [
        (key_cursor(CursorKind::List, &u2, "k0"), "list", "another user's list cursor"),
        (key_cursor(CursorKind::Search, &u1, "k0"), "list", "a search cursor in list"),
        (key_cursor(CursorKind::List, &u1, "k0"), "search", "a list cursor in search"),
        (namespace_cursor("app", "u1", ""), "list", "a namespaces cursor in list"),
    ];
    for (cursor, command, what) in forged {
        let mut cmd = fx.cmd();
        cmd.arg(command);
        if command == "search" {
            cmd.arg("needle");
        }
        refused(cmd.args(["--after", cursor.as_str()]), "cursor", what);
    }
    let real = key_cursor(CursorKind::List, &u1, "k0");
    let token = real.as_str();
    // The first character encodes the format version (1, so always `A`); `B` is another one.
    for garbled in [format!("B{}", &token[1..]), token[..5].to_owned(), format!("{token}!")] {
        refused(fx.cmd().args(["list", "--after", &garbled]), "cursor", "a garbled cursor");
    }
    let listed = stdout_json(fx.cmd().args(["list", "--json", "--after", token]));
    assert_eq!(
        listed.iter().map(|r| r["key"].as_str().unwrap_or_default()).collect::<Vec<_>>(),
        ["k1", "k2"],
        "a cursor of the user's own scope continues there"
    );
}
