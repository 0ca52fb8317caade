//! End-to-end tests of the `agent-memory` binary against a SQLite file in a temp directory.
//!
//! Every test runs the real executable as a separate process, so they also prove that memories
//! survive between processes. The environment is cleared of `AGENT_MEMORY_*` variables and
//! `HOME`/`XDG_DATA_HOME` point into the temp directory, so no test can touch the developer's
//! own memories.

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

mod support;

use support::{
    assert_one_line_error, comparable, exited, json_lines, keys, stdout_json, Fixture, CONFLICT,
    FAILURE, INVALID, NOT_FOUND, OK, QUOTA_EXCEEDED,
};

/// An error is one line on stderr, starting with `error: `, and nothing on stdout.
fn one_line_error(cmd: &mut Command, code: i32, contains: &str) {
    assert_one_line_error(cmd, code, contains, "");
}

#[test]
fn put_then_get_in_a_later_process() {
    let fx = Fixture::new();
    fx.cmd()
        .args(["put", "tone", "Prefers short answers", "--metadata", r#"{"category":"style"}"#])
        .assert()
        .code(OK)
        .stdout(predicate::str::starts_with("saved tone (revision "));
    fx.cmd()
        .args(["get", "tone"])
        .assert()
        .code(OK)
        .stdout(predicate::str::contains("Prefers short answers"))
        .stdout(predicate::str::contains(r#"{"category":"style"}"#));

    let records = stdout_json(fx.cmd().args(["--json", "get", "tone"]));
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(record["content"], "Prefers short answers");
    assert_eq!(record["metadata"]["category"], "style");
    assert_eq!(record["scope"]["application_id"], "app");
    assert_eq!(record["scope"]["user_id"], "u1");
    assert_eq!(record["expires_at"], Value::Null);
}

#[test]
fn put_json_prints_the_stored_record_and_honours_revisions() {
    let fx = Fixture::new();
    let first = stdout_json(fx.cmd().args(["put", "k", "one", "--json"]));
    let revision = first[0]["revision"].as_str().expect("revision").to_owned();

    let second =
        stdout_json(fx.cmd().args(["put", "k", "two", "--if-revision", &revision, "--json"]));
    assert_eq!(second[0]["content"], "two");
    assert_ne!(second[0]["revision"], first[0]["revision"]);

    // The old revision is stale now: exit 3, and nothing changes.
    one_line_error(
        fx.cmd().args(["put", "k", "three", "--if-revision", &revision]),
        CONFLICT,
        "conflict",
    );
    one_line_error(fx.cmd().args(["put", "k", "four", "--create-only"]), CONFLICT, "conflict");
    let now = stdout_json(fx.cmd().args(["get", "k", "--json"]));
    assert_eq!(now[0]["content"], "two");
}

#[test]
fn put_reads_content_from_stdin() {
    let fx = Fixture::new();
    fx.cmd().args(["put", "from-stdin"]).write_stdin("line one\nline two\n").assert().code(OK);
    let records = stdout_json(fx.cmd().args(["get", "from-stdin", "--json"]));
    // One trailing newline is dropped, inner ones stay.
    assert_eq!(records[0]["content"], "line one\nline two");
}

#[test]
fn put_refuses_invalid_utf8_on_stdin() {
    let fx = Fixture::new();
    one_line_error(
        fx.cmd().args(["put", "bad"]).write_stdin(b"ok \xff\xfe".to_vec()),
        INVALID,
        "not valid UTF-8",
    );
}

#[test]
fn expires_in_sets_expiry_and_purge_expired_removes_it() {
    let fx = Fixture::new();
    let records = stdout_json(fx.cmd().args(["put", "soon", "x", "--expires-in", "1s", "--json"]));
    let expires = records[0]["expires_at"].as_f64().expect("expiry set");
    let updated = records[0]["updated_at"].as_f64().expect("updated");
    assert!((expires - updated - 1.0).abs() < 1.0, "expires {expires} updated {updated}");
    let later = stdout_json(fx.cmd().args(["put", "later", "y", "--expires-in", "1h", "--json"]));
    assert!(later[0]["expires_at"].as_f64().unwrap() > updated + 3_500.0);

    std::thread::sleep(std::time::Duration::from_millis(1_500));
    fx.cmd().args(["get", "soon"]).assert().code(NOT_FOUND);
    let purged = stdout_json(fx.cmd().args(["purge-expired", "--json"]));
    assert_eq!(purged, vec![serde_json::json!({"purged": 1})]);
    fx.cmd()
        .args(["purge-expired"])
        .assert()
        .code(OK)
        .stdout("purged 0 expired records\n")
        .stderr("");
    fx.cmd().args(["get", "later"]).assert().code(OK);
}

#[test]
fn get_and_delete_of_a_missing_key_exit_not_found() {
    let fx = Fixture::new();
    fx.put("k", "v");
    one_line_error(fx.cmd().args(["get", "nothing"]), NOT_FOUND, "not found");
    fx.cmd().args(["delete", "k"]).assert().code(OK).stdout("deleted k\n");
    one_line_error(fx.cmd().args(["delete", "k"]), NOT_FOUND, "not found");
    one_line_error(fx.cmd().args(["get", "k"]), NOT_FOUND, "not found");
}

#[test]
fn delete_with_a_stale_revision_is_a_conflict() {
    let fx = Fixture::new();
    let first = stdout_json(fx.cmd().args(["put", "k", "one", "--json"]));
    let stale = first[0]["revision"].as_str().unwrap().to_owned();
    let second = stdout_json(fx.cmd().args(["put", "k", "two", "--json"]));
    let live = second[0]["revision"].as_str().unwrap().to_owned();

    one_line_error(fx.cmd().args(["delete", "k", "--if-revision", &stale]), CONFLICT, "conflict");
    let deleted = stdout_json(fx.cmd().args(["delete", "k", "--if-revision", &live, "--json"]));
    assert_eq!(deleted, vec![serde_json::json!({"deleted": true, "key": "k"})]);
}

#[test]
fn invalid_input_exits_2_with_one_line() {
    let fx = Fixture::new();
    one_line_error(
        fx.bare().args(["--store", &fx.store, "--app", "app", "get", "k"]),
        INVALID,
        "no user id",
    );
    one_line_error(
        fx.bare().args(["--store", &fx.store, "--user", "u1", "list"]),
        INVALID,
        "no application id",
    );
    one_line_error(
        fx.cmd().args(["put", "k", "v", "--metadata", "{not json"]),
        INVALID,
        "metadata",
    );
    one_line_error(fx.cmd().args(["put", "k", "v", "--metadata", "[1,2]"]), INVALID, "metadata");
    one_line_error(fx.cmd().args(["put", "bad\tkey", "v"]), INVALID, "invalid key");
    one_line_error(fx.cmd().args(["list", "--after", "not-a-cursor"]), INVALID, "cursor");
    one_line_error(fx.cmd().args(["search", ""]), INVALID, "query");
    one_line_error(
        fx.bare().args(["--store", "ftp://example", "--app", "a", "--user", "u", "list"]),
        INVALID,
        "unknown scheme",
    );
    one_line_error(fx.cmd().args(["--namespace", "", "list"]), INVALID, "invalid namespace");

    // Usage errors come from clap, which also exits 2.
    fx.cmd().args(["put", "k", "v", "--expires-in", "30"]).assert().code(INVALID);
    fx.cmd().args(["list", "--limit", "0"]).assert().code(INVALID);
    fx.cmd().args(["list", "--limit", "101"]).assert().code(INVALID);
    fx.cmd().args(["no-such-command"]).assert().code(INVALID);
    fx.cmd().args(["put", "k", "v", "--if-revision", "r", "--create-only"]).assert().code(INVALID);

    // Nothing above wrote anything.
    fx.cmd().args(["list"]).assert().code(OK).stdout("no records\n");
}

#[test]
fn storage_failure_exits_4_without_leaking_the_url() {
    let fx = Fixture::new();
    // A database path under a regular file cannot be created.
    std::fs::write(fx.path("plain-file"), "x").unwrap();
    let store = format!("sqlite:{}", fx.path("plain-file").join("m.db").display());
    one_line_error(fx.on(&store, "u1").args(["put", "k", "v"]), FAILURE, "storage error");

    // An unreachable server; the password must not appear anywhere.
    let url = "postgres://agent:s3cret-pw@127.0.0.1:9/memories?connect_timeout=2";
    let output = fx.on(url, "u1").args(["get", "k"]).output().unwrap();
    assert_eq!(output.status.code(), Some(FAILURE));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("error: storage error"), "{stderr:?}");
    assert!(!stderr.contains("s3cret-pw"), "{stderr:?}");
}

#[test]
fn a_write_past_a_quota_exits_5_and_deleting_frees_space() {
    let fx = Fixture::new();
    let store = format!("{}?max_records_per_user=2", fx.other_store("quota.db"));
    fx.on(&store, "u1").args(["put", "a", "one"]).assert().code(OK);
    fx.on(&store, "u1").args(["put", "b", "two"]).assert().code(OK);
    one_line_error(
        fx.on(&store, "u1").args(["put", "c", "three"]),
        QUOTA_EXCEEDED,
        "quota exceeded: max_records_per_user is 2",
    );
    fx.on(&store, "u1").args(["get", "c"]).assert().code(NOT_FOUND);
    fx.on(&store, "u2").args(["put", "c", "another user"]).assert().code(OK);
    fx.on(&store, "u1").args(["delete", "a"]).assert().code(OK);
    fx.on(&store, "u1").args(["put", "c", "three"]).assert().code(OK);
    let zero = format!("{}?max_bytes_per_user=0", fx.other_store("quota.db"));
    one_line_error(fx.on(&zero, "u1").args(["list"]), INVALID, "max_bytes_per_user");
}

#[test]
fn list_pages_and_follows_cursors() {
    let fx = Fixture::new();
    for key in ["e", "c", "a", "d", "b"] {
        fx.put(key, &format!("content {key}"));
    }
    let output = fx.cmd().args(["list", "--limit", "2", "--json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(OK));
    assert_eq!(keys(&json_lines(&output.stdout)), ["a", "b"]);
    let stderr = String::from_utf8(output.stderr).unwrap();
    let cursor = stderr
        .trim()
        .strip_prefix("more records: continue with --after ")
        .expect("cursor hint on stderr")
        .to_owned();

    let next =
        fx.cmd().args(["list", "--limit", "2", "--after", &cursor, "--json"]).output().unwrap();
    assert_eq!(keys(&json_lines(&next.stdout)), ["c", "d"]);

    let all = stdout_json(fx.cmd().args(["list", "--all", "--limit", "2", "--json"]));
    assert_eq!(keys(&all), ["a", "b", "c", "d", "e"]);

    // The human table has a header and one row per record, in key order.
    let table = fx.cmd().args(["list", "--all"]).output().unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("KEY"), "{text}");
    assert_eq!(lines.len(), 6, "{text}");
    assert!(lines[1].starts_with("a ") && lines[1].ends_with("content a"), "{text}");
    assert!(table.stderr.is_empty());
}

#[test]
fn list_prefix_keeps_only_the_keys_that_start_with_it() {
    let fx = Fixture::new();
    for key in ["notes/b", "notes", "notes/a", "notes0", "todo/a", "n%/x"] {
        fx.put(key, "v");
    }
    let all = stdout_json(
        fx.cmd().args(["list", "--prefix", "notes/", "--all", "--limit", "1", "--json"]),
    );
    assert_eq!(keys(&all), ["notes/a", "notes/b"]);
    let literal = stdout_json(fx.cmd().args(["list", "--prefix", "n%", "--json"]));
    assert_eq!(keys(&literal), ["n%/x"]);
    // A prefixed listing's cursor continues only that listing.
    let first = fx.cmd().args(["list", "--prefix", "notes", "--limit", "1"]).output().unwrap();
    let (cursor, flags) = cursor_hint(&first.stderr);
    assert_eq!(flags, "--prefix notes", "the hint repeats the prefix");
    one_line_error(fx.cmd().args(["list", "--after", &cursor]), INVALID, "cursor");
    let next =
        stdout_json(fx.cmd().args(["list", "--prefix", "notes", "--after", &cursor, "--json"]));
    assert_eq!(keys(&next), ["notes/a", "notes/b", "notes0"]);
    let long = "p".repeat(257);
    one_line_error(fx.cmd().args(["list", "--prefix", &long]), INVALID, "prefix");
}

/// The cursor and the flags after it in a `more records: continue with --after CURSOR FLAGS…`
/// hint on stderr.
fn cursor_hint(stderr: &[u8]) -> (String, String) {
    let stderr = String::from_utf8(stderr.to_vec()).unwrap();
    let rest = stderr
        .trim_end()
        .strip_prefix("more records: continue with --after ")
        .unwrap_or_else(|| panic!("cursor hint on stderr: {stderr:?}"));
    let (cursor, flags) = rest.split_once(' ').unwrap_or((rest, ""));
    (cursor.to_owned(), flags.to_owned())
}

/// Records a person asks for in other words than they were saved in, with metadata.
fn preferences(fx: &Fixture) {
    for (key, content, metadata) in [
        (
            "units",
            "Reports in metric units",
            r#"{"category":"preferences","pinned":true,"code":"7","note":"it's a b"}"#,
        ),
        ("warehouse", "prefers the Berlin warehouse", r#"{"category":"preferences","code":7}"#),
        ("ticket", "Ticket 7 is about the Warehouse in Hamburg", r#"{"category":"support"}"#),
        ("weight", "weighs 1 unit", r#"{"rank":1.0,"code":"7","note":"it's a b"}"#),
    ] {
        fx.cmd().args(["put", key, content, "--metadata", metadata]).assert().code(OK);
    }
}

fn found(fx: &Fixture, args: &[&str]) -> String {
    let mut cmd = fx.cmd();
    cmd.args(args).arg("--json");
    keys(&stdout_json(&mut cmd)).join(",")
}

#[test]
fn search_matches_words_in_any_case_when_asked() {
    let fx = Fixture::new();
    preferences(&fx);
    // The default is unchanged: one case-sensitive phrase.
    assert_eq!(found(&fx, &["search", "berlin warehouse"]), "");
    assert_eq!(found(&fx, &["search", "Berlin warehouse"]), "warehouse");
    assert_eq!(found(&fx, &["search", "THE BERLIN", "--ignore-case"]), "warehouse");
    let words = ["search", "berlin warehouse", "--all-words", "--ignore-case"];
    assert_eq!(found(&fx, &words), "warehouse");
    assert_eq!(found(&fx, &["search", "berlin warehouse", "--all-words"]), "");
    let any = ["search", "WAREHOUSE metric", "--any-word", "--ignore-case"];
    assert_eq!(found(&fx, &any), "ticket,units,warehouse");
    let all = ["search", "warehouse unit", "--any-word", "--ignore-case", "--all", "--limit", "1"];
    assert_eq!(found(&fx, &all), "ticket,units,warehouse,weight");

    // The two word modes exclude each other, and a word mode needs a word.
    one_line_error(
        fx.cmd().args(["search", "a b", "--all-words", "--any-word"]),
        INVALID,
        "cannot be used with",
    );
    one_line_error(fx.cmd().args(["search", " \t ", "--all-words"]), INVALID, "query");
    let many: Vec<String> = (0..17).map(|i| format!("w{i}")).collect();
    one_line_error(fx.cmd().args(["search", &many.join(" "), "--any-word"]), INVALID, "16 words");
}

#[test]
fn list_and_search_select_by_metadata() {
    let fx = Fixture::new();
    preferences(&fx);
    assert_eq!(found(&fx, &["list", "--meta", "category=preferences"]), "units,warehouse");
    let both = ["list", "--meta", "category=preferences", "--meta", "pinned=true"];
    assert_eq!(found(&fx, &both), "units");
    // VALUE is JSON when it is a JSON scalar, else text; numbers compare as numbers.
    assert_eq!(found(&fx, &["list", "--meta", "pinned=\"true\""]), "");
    assert_eq!(found(&fx, &["list", "--meta", "rank=1"]), "weight");
    assert_eq!(found(&fx, &["list", "--meta", "code=7"]), "warehouse");
    assert_eq!(found(&fx, &["list", "--meta", "code=\"7\""]), "units,weight");
    assert_eq!(found(&fx, &["list", "--meta", "note=it's a b"]), "units,weight");
    assert_eq!(found(&fx, &["list", "--meta", "pinned=null"]), "");
    let search = ["search", "warehouse", "--ignore-case", "--meta", "category=support"];
    assert_eq!(found(&fx, &search), "ticket");
    let listed = ["list", "--meta", "category=preferences", "--all", "--limit", "1"];
    assert_eq!(found(&fx, &listed), "units,warehouse");

    // FIELD=VALUE needs both halves; at most 8 fields, each once.
    for (arg, says) in [("category", "no '='"), ("=preferences", "field name is empty")] {
        let mut cmd = fx.cmd();
        cmd.args(["list", "--meta", arg]);
        assert_one_line_error(&mut cmd, INVALID, says, arg);
    }
    let mut nine = fx.cmd();
    nine.arg("list");
    for i in 0..9 {
        nine.args(["--meta", &format!("f{i}={i}")]);
    }
    one_line_error(&mut nine, INVALID, "at most 8");
    one_line_error(
        fx.cmd().args(["search", "q", "--meta", "a=1", "--meta", "a=2"]),
        INVALID,
        "twice",
    );
    assert!(!fx.path("absent.db").exists());
}

#[test]
fn paging_hints_carry_the_selection_so_the_next_page_works() {
    let fx = Fixture::new();
    preferences(&fx);
    let mut cmd = fx.cmd();
    cmd.args(["list", "--meta", "category=preferences", "--limit", "1", "--json"]);
    let first = cmd.output().unwrap();
    assert_eq!(keys(&json_lines(&first.stdout)), ["units"]);
    let (cursor, flags) = cursor_hint(&first.stderr);
    assert_eq!(flags, "--meta category=preferences");
    let next = ["list", "--limit", "1", "--after", &cursor, "--meta", "category=preferences"];
    assert_eq!(found(&fx, &next), "warehouse");
    // The cursor continues only that filter.
    one_line_error(fx.cmd().args(["list", "--after", &cursor]), INVALID, "cursor");

    let search = ["search", "e", "--any-word", "--ignore-case", "--meta", "note=it's a b"];
    let mut cmd = fx.cmd();
    cmd.args(search).args(["--limit", "1", "--meta", "code=\"7\"", "--json"]);
    let first = cmd.output().unwrap();
    assert_eq!(keys(&json_lines(&first.stdout)), ["units"]);
    // Every flag, quoted for a shell where it needs to be.
    let (cursor, flags) = cursor_hint(&first.stderr);
    assert_eq!(flags, r#"--any-word --ignore-case --meta 'note=it'\''s a b' --meta 'code="7"'"#);
    let mut next = fx.cmd();
    next.args(search).args(["--meta", "code=\"7\"", "--after", &cursor, "--json"]);
    assert_eq!(keys(&stdout_json(&mut next)), ["weight"]);
    let mut search_words = fx.cmd();
    search_words.args(["search", "e", "--all-words", "--ignore-case", "--limit", "1", "--json"]);
    let first = search_words.output().unwrap();
    let (cursor, flags) = cursor_hint(&first.stderr);
    assert_eq!(flags, "--all-words --ignore-case");
    let mut rest = fx.cmd();
    rest.args(["search", "e", "--all-words", "--ignore-case", "--all", "--after", &cursor]);
    let rest = keys(&stdout_json(rest.arg("--json"))).join(",");
    let mut every = keys(&json_lines(&first.stdout)).join(",");
    every.push(',');
    every.push_str(&rest);
    assert_eq!(every, "ticket,units,warehouse,weight");
    for other in [&["--any-word", "--ignore-case"][..], &["--all-words"], &["--ignore-case"]] {
        let mut cmd = fx.cmd();
        cmd.args(["search", "e", "--after", &cursor]).args(other);
        assert_one_line_error(&mut cmd, INVALID, "cursor", &other.join(" "));
    }
}

#[test]
fn search_matches_literal_substrings_with_paging() {
    let fx = Fixture::new();
    fx.put("k1", "likes 100% cotton");
    fx.put("k2", "likes 100 percent wool");
    fx.put("k3", "nothing here");
    fx.put("k4", "100% sure");
    let found = stdout_json(fx.cmd().args(["search", "100%", "--json"]));
    assert_eq!(keys(&found), ["k1", "k4"]);
    let all = stdout_json(fx.cmd().args(["search", "100", "--all", "--limit", "1", "--json"]));
    assert_eq!(keys(&all), ["k1", "k2", "k4"]);
    fx.cmd().args(["search", "absent"]).assert().code(OK).stdout("no records\n");
}

#[test]
fn namespaces_are_isolated_and_listed() {
    let fx = Fixture::new();
    fx.put("k", "default namespace");
    fx.cmd().args(["--namespace", "prefs", "put", "k", "prefs namespace"]).assert().code(OK);
    fx.cmd()
        .args(["--namespace", "prefs", "get", "k"])
        .assert()
        .code(OK)
        .stdout(predicate::str::contains("prefs namespace"));

    let namespaces = stdout_json(fx.cmd().args(["namespaces", "--json"]));
    assert_eq!(
        namespaces,
        vec![
            serde_json::json!({"application_id": "app", "user_id": "u1"}),
            serde_json::json!({"application_id": "app", "user_id": "u1", "namespace": "prefs"}),
        ]
    );
    fx.cmd().args(["namespaces"]).assert().code(OK).stdout("NAMESPACE\n(default)\nprefs\n");
    fx.on(&fx.store, "someone-else")
        .args(["namespaces"])
        .assert()
        .code(OK)
        .stdout("no namespaces\n");
}

#[test]
fn delete_all_and_delete_user_require_yes() {
    let fx = Fixture::new();
    fx.put("a", "1");
    fx.put("b", "2");
    fx.cmd().args(["--namespace", "ns", "put", "c", "3"]).assert().code(OK);
    fx.on(&fx.store, "u2").args(["put", "keep", "other user"]).assert().code(OK);

    one_line_error(fx.cmd().args(["delete-all"]), INVALID, "--yes");
    one_line_error(fx.cmd().args(["delete-user"]), INVALID, "--yes");

    let deleted = stdout_json(fx.cmd().args(["delete-all", "--yes", "--json"]));
    assert_eq!(deleted, vec![serde_json::json!({"deleted": 2})]);
    fx.cmd().args(["--namespace", "ns", "get", "c"]).assert().code(OK);

    fx.cmd().args(["put", "a", "again"]).assert().code(OK);
    fx.cmd()
        .args(["delete-user", "--yes"])
        .assert()
        .code(OK)
        .stdout("deleted 2 records in every namespace of the user\n")
        .stderr("");
    fx.cmd().args(["namespaces"]).assert().code(OK).stdout("no namespaces\n");
    fx.on(&fx.store, "u2").args(["get", "keep"]).assert().code(OK);
}

#[test]
fn setup_creates_the_store_file() {
    let fx = Fixture::new();
    // setup needs no scope.
    fx.bare()
        .args(["--store", &fx.store, "setup"])
        .assert()
        .code(OK)
        .stdout(predicate::str::contains("store ready"));
    assert!(fx.path("m.db").exists());
    let again = stdout_json(fx.bare().args(["--store", &fx.store, "setup", "--json"]));
    assert_eq!(again, vec![serde_json::json!({"ready": true})]);
}

#[test]
fn input_checked_without_the_store_never_creates_it() {
    let fx = Fixture::new();
    let bad_import = fx.path("bad.jsonl");
    std::fs::write(&bad_import, "not json\n").unwrap();
    fx.with_store().args(["--app", "app", "get", "k"]).assert().code(INVALID);
    fx.with_store().args(["--user", "u1", "mcp"]).assert().code(INVALID);
    fx.cmd().arg("import").arg(&bad_import).assert().code(INVALID);
    let refused: [&[&str]; 6] = [
        &["delete-all"],
        &["delete-user"],
        &["put", "k", "v", "--metadata", "{not json"],
        &["put", "k", "v", "--if-revision", "bad\trevision"],
        &["delete", "k", "--if-revision", "bad\trevision"],
        &["list", "--after", "not-a-cursor"],
    ];
    for args in refused {
        fx.cmd().args(args).assert().code(INVALID);
    }
    assert!(!fx.path("m.db").exists(), "a refused command created the store");
}

#[test]
fn default_store_is_a_sqlite_file_in_the_data_dir() {
    let fx = Fixture::new();
    let data = fx.dir.path().join("home").join("data");
    fx.bare().args(["--app", "app", "--user", "u1", "put", "k", "kept"]).assert().code(OK);
    assert!(data.join("agent-memory").join("memories.db").is_file());
    fx.bare()
        .args(["--app", "app", "--user", "u1", "get", "k"])
        .assert()
        .code(OK)
        .stdout(predicate::str::contains("kept"));
    // The same file, named explicitly.
    let explicit = format!("sqlite:{}", data.join("agent-memory").join("memories.db").display());
    fx.on(&explicit, "u1").args(["get", "k"]).assert().code(OK);
}

#[test]
fn environment_variables_replace_the_global_options() {
    let fx = Fixture::new();
    fx.bare()
        .env("AGENT_MEMORY_STORE", &fx.store)
        .env("AGENT_MEMORY_APP", "app")
        .env("AGENT_MEMORY_USER", "u1")
        .env("AGENT_MEMORY_NAMESPACE", "env-ns")
        .args(["put", "k", "from env"])
        .assert()
        .code(OK);
    fx.cmd()
        .args(["--namespace", "env-ns", "get", "k"])
        .assert()
        .code(OK)
        .stdout(predicate::str::contains("from env"));
}

#[test]
fn human_output_escapes_terminal_control_characters() {
    let fx = Fixture::new();
    let hostile = "red \u{1b}[31mALERT\u{1b}[0m\r\nnext\u{7}bell \u{202e}reversed";
    fx.put("hostile", hostile);
    for args in [&["get", "hostile"][..], &["list"][..], &["search", "ALERT"][..]] {
        let output = fx.cmd().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(OK));
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "{text:?}");
        assert!(!text.contains('\r') && !text.contains('\u{202e}'), "{text:?}");
        assert!(text.contains("\\u{1b}[31mALERT"), "{text:?}");
    }
    // JSON keeps the content exact.
    let records = stdout_json(fx.cmd().args(["get", "hostile", "--json"]));
    assert_eq!(records[0]["content"], hostile);
}

#[test]
fn logs_go_to_stderr_only() {
    let fx = Fixture::new();
    fx.put("k", "v");
    let output =
        fx.cmd().env("AGENT_MEMORY_LOG", "debug").args(["get", "k", "--json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(OK));
    assert_eq!(json_lines(&output.stdout).len(), 1);
    assert!(!output.stderr.is_empty(), "debug logs expected on stderr");
}

#[test]
fn mcp_refuses_to_start_without_a_scope() {
    let fx = Fixture::new();
    one_line_error(fx.bare().args(["--store", &fx.store, "mcp"]), INVALID, "no application id");
    one_line_error(
        fx.bare().args(["--store", &fx.store, "--app", "app", "mcp", "--tools", "facts"]),
        INVALID,
        "no user id",
    );
    fx.cmd().args(["mcp", "--tools", "everything"]).assert().code(INVALID);
}

#[test]
fn help_documents_the_exit_codes() {
    let fx = Fixture::new();
    fx.bare()
        .arg("--help")
        .assert()
        .code(OK)
        .stdout(predicate::str::contains("Exit codes:"))
        .stdout(predicate::str::contains("3  conflict"));
}

fn seed_export_source(fx: &Fixture) {
    fx.cmd()
        .args([
            "put",
            "tone",
            "Prefers short answers",
            "--metadata",
            r#"{"category":"style","n":[1,2.5,null]}"#,
        ])
        .assert()
        .code(OK);
    fx.cmd().args(["put", "temp", "expires later", "--expires-in", "2h"]).assert().code(OK);
    fx.cmd()
        .args(["put", "multi", "line one\nline two\ttab \u{1b} esc ünïcødé 日本"])
        .assert()
        .code(OK);
    fx.cmd().args(["--namespace", "work", "put", "project", "Ships on Fridays"]).assert().code(OK);
    fx.cmd().args(["--namespace", "a/b:{c}%_", "put", "odd", "odd namespace"]).assert().code(OK);
    // More than one page (100) of one namespace, written by import to keep the test quick.
    let bulk: String = (0..150)
        .map(|i| {
            format!(
                "{{\"scope\":{{\"application_id\":\"app\",\"user_id\":\"u1\",\"namespace\":\"bulk\"}},\
                 \"key\":\"k{i:03}\",\"content\":\"bulk {i}\",\"source\":{{\"session_id\":\"s{i}\"}}}}\n"
            )
        })
        .collect();
    fx.cmd().arg("import").write_stdin(bulk).assert().code(OK);
    // Another user's records never appear in this user's export.
    fx.on(&fx.store, "u2").args(["put", "secret", "not yours"]).assert().code(OK);
}

#[test]
fn export_and_import_round_trip_between_stores() {
    let fx = Fixture::new();
    seed_export_source(&fx);

    let backup = fx.path("backup.jsonl");
    let summary = stdout_json(fx.cmd().args(["export", "--json", "--output"]).arg(&backup));
    assert_eq!(summary, vec![serde_json::json!({"exported": 155, "namespaces": 4})]);
    let exported = json_lines(&std::fs::read(&backup).unwrap());
    assert_eq!(exported.len(), 155);
    assert!(exported.iter().all(|r| r["scope"]["user_id"] == "u1"));

    // Export to stdout is the same bytes, and (piped) shows no progress.
    let piped = fx.cmd().args(["export"]).output().unwrap();
    assert_eq!(piped.status.code(), Some(OK));
    assert_eq!(piped.stdout, std::fs::read(&backup).unwrap());
    assert!(piped.stderr.is_empty(), "{}", String::from_utf8_lossy(&piped.stderr));

    let target = fx.other_store("target.db");
    let imported = fx.on(&target, "u1").arg("import").arg(&backup).output().unwrap();
    assert_eq!(imported.status.code(), Some(OK));
    assert_eq!(
        String::from_utf8_lossy(&imported.stdout),
        "imported 155 records; skipped 0 already expired, 0 already present\n"
    );
    assert!(imported.stderr.is_empty(), "{}", String::from_utf8_lossy(&imported.stderr));

    let reexported = fx.path("reexport.jsonl");
    fx.on(&target, "u1").args(["export", "-o"]).arg(&reexported).assert().code(OK);
    let again = json_lines(&std::fs::read(&reexported).unwrap());
    assert_eq!(comparable(&again), comparable(&exported));

    // Importing again replaces the same keys: still equal, nothing duplicated.
    fx.on(&target, "u1").arg("import").arg(&backup).assert().code(OK);
    let twice = stdout_json(fx.on(&target, "u1").arg("export"));
    assert_eq!(comparable(&twice), comparable(&exported));
}

#[test]
fn import_reads_stdin_and_can_keep_existing_records() {
    let fx = Fixture::new();
    fx.put("a", "from file");
    fx.put("b", "from file");
    let export = fx.cmd().arg("export").output().unwrap().stdout;

    let target = fx.other_store("target.db");
    fx.on(&target, "u1").args(["put", "a", "already there"]).assert().code(OK);
    let summary = stdout_json(
        fx.on(&target, "u1")
            .args(["import", "--skip-existing", "--json"])
            .write_stdin(export.clone()),
    );
    assert_eq!(
        summary,
        vec![serde_json::json!({"imported": 1, "skipped_expired": 0, "skipped_existing": 1})]
    );
    let a = stdout_json(fx.on(&target, "u1").args(["get", "a", "--json"]));
    assert_eq!(a[0]["content"], "already there");

    // Without --skip-existing the file wins.
    fx.on(&target, "u1").args(["import", "-"]).write_stdin(export).assert().code(OK);
    let a = stdout_json(fx.on(&target, "u1").args(["get", "a", "--json"]));
    assert_eq!(a[0]["content"], "from file");
}

#[test]
fn import_of_another_users_lines_needs_any_user() {
    let fx = Fixture::new();
    fx.put("k", "belongs to u1");
    let export = fx.cmd().arg("export").output().unwrap().stdout;

    let target = fx.other_store("target.db");
    one_line_error(
        fx.on(&target, "u2").arg("import").write_stdin(export.clone()),
        INVALID,
        "line 1: belongs to another application user",
    );
    // Refused before the store was opened: not even the file exists.
    assert!(!fx.path("target.db").exists());

    // With --any-user each line goes to its own scope, and --app/--user are not needed.
    fx.bare()
        .args(["--store", &target, "import", "--any-user"])
        .write_stdin(export)
        .assert()
        .code(OK);
    fx.on(&target, "u1").args(["get", "k"]).assert().code(OK);
    fx.on(&target, "u2").args(["get", "k"]).assert().code(NOT_FOUND);
}

#[test]
fn import_validates_every_line_before_writing_any() {
    let fx = Fixture::new();
    let good = |key: &str| {
        format!(
            r#"{{"scope":{{"application_id":"app","user_id":"u1"}},"key":"{key}","content":"ok"}}"#
        )
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (format!("{}\n{}\n{{\"broken\"\n", good("a"), good("b")).into_bytes(), "line 3"),
        ([good("a").as_bytes(), b"\n\xff\n"].concat(), "line 2: is not valid UTF-8"),
        (format!("{}\n{}\n", good("a"), good("a")).into_bytes(), "line 2: repeats"),
        (
            format!("{}\n{}\n", good("a"), good("a").replace("\"ok\"", "\"ok\",\"extra\":1"))
                .into_bytes(),
            "line 2",
        ),
        (format!("{}\n{}\n", good("a"), good("bad\\tkey")).into_bytes(), "line 2: invalid key"),
    ];
    for (input, expected) in cases {
        one_line_error(fx.cmd().arg("import").write_stdin(input), INVALID, expected);
    }
    assert!(!fx.path("m.db").exists(), "a refused import opened the store");
}

#[test]
fn import_skips_and_counts_expired_lines() {
    let fx = Fixture::new();
    let input = concat!(
        r#"{"scope":{"application_id":"app","user_id":"u1"},"key":"old","content":"gone","expires_at":1000.0}"#,
        "\n",
        r#"{"scope":{"application_id":"app","user_id":"u1"},"key":"new","content":"kept","expires_at":32503680000.0,"source":{"agent":"importer"}}"#,
        "\n"
    );
    let summary = stdout_json(fx.cmd().args(["import", "--json"]).write_stdin(input));
    assert_eq!(
        summary,
        vec![serde_json::json!({"imported": 1, "skipped_expired": 1, "skipped_existing": 0})]
    );
    fx.cmd().args(["get", "old"]).assert().code(NOT_FOUND);
    let kept = stdout_json(fx.cmd().args(["get", "new", "--json"]));
    assert_eq!(kept[0]["expires_at"], 32_503_680_000.0);
    assert_eq!(kept[0]["source"]["agent"], "importer");
}

#[test]
fn export_to_a_file_is_private_and_complete() {
    let fx = Fixture::new();
    fx.put("k", "v");
    let file = fx.path("out.jsonl");
    fx.cmd()
        .args(["export", "--output"])
        .arg(&file)
        .assert()
        .code(OK)
        .stdout("exported 1 record from 1 namespace\n");
    assert_eq!(json_lines(&std::fs::read(&file).unwrap()).len(), 1);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "export readable by others: {mode:o}");
    }
    // A failed export leaves no file behind.
    let missing_dir: &Path = &fx.path("no-such-dir").join("out.jsonl");
    fx.cmd().args(["export", "--output"]).arg(missing_dir).assert().code(FAILURE);
    assert!(!missing_dir.exists());
}

#[test]
fn mcp_serves_the_scope_given_by_the_options() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::sync::mpsc;
    use std::time::Duration;

    let fx = Fixture::new();
    fx.put("tone", "Prefers short answers");
    fx.on(&fx.store, "u2").args(["put", "tone", "another user's"]).assert().code(OK);

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agent-memory"))
        .args(["--store", &fx.store, "--app", "app", "--user", "u1", "mcp"])
        .env("HOME", fx.path("home"))
        .env_remove("XDG_DATA_HOME")
        .env_remove("AGENT_MEMORY_NAMESPACE")
        .env("AGENT_MEMORY_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (lines_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cli-test","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_get","arguments":{"key":"tone"}}}"#,
    ];
    for request in requests {
        writeln!(stdin, "{request}").expect("writes a request");
    }
    stdin.flush().expect("flushes");

    // Every stdout line is a JSON-RPC message (logs went to stderr); wait for the answer to 2.
    let mut answer = None;
    while answer.is_none() {
        let line = lines.recv_timeout(Duration::from_secs(30)).expect("an MCP response");
        let message: Value = serde_json::from_str(&line).expect("stdout carries only JSON-RPC");
        assert_eq!(message["jsonrpc"], "2.0");
        if message["id"] == 2 {
            answer = Some(message);
        }
    }
    let text = answer.unwrap().to_string();
    assert!(text.contains("Prefers short answers"), "{text}");
    assert!(!text.contains("another user's"), "{text}");

    // Closing stdin ends the server cleanly.
    drop(stdin);
    let status = child.wait().expect("exits");
    assert_eq!(status.code(), Some(OK));
}

/// The move README promises: export from the SQLite default, import into PostgreSQL (a real
/// server from the test kit, in a table of its own), and read back the same records.
#[test]
fn export_from_sqlite_imports_into_postgres() {
    let fx = Fixture::new();
    seed_export_source(&fx);
    let backup = fx.path("backup.jsonl");
    fx.cmd().args(["export", "--output"]).arg(&backup).assert().code(OK);
    let exported = json_lines(&std::fs::read(&backup).unwrap());

    let url = agent_memory_testkit::postgres::shared_url();
    let table = format!(
        "cli_move_{}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    );
    let separator = if url.contains('?') { '&' } else { '?' };
    let target = format!("{url}{separator}table={table}");
    fx.bare().args(["--store", &target, "setup"]).assert().code(OK);
    let imported = fx.on(&target, "u1").arg("import").arg(&backup).output().unwrap();
    exited(&imported, OK);
    let moved = stdout_json(fx.on(&target, "u1").arg("export"));
    assert_eq!(comparable(&moved), comparable(&exported));
    let hits = stdout_json(fx.on(&target, "u1").args(["search", "short", "--json"]));
    assert_eq!(keys(&hits), vec!["tone"]);
}

/// The CLI takes the same TLS URLs as the library: PostgreSQL with `sslmode=verify-full` and a
/// CA file, Redis over `rediss://` with a client certificate, both on real TLS servers from the
/// test kit.
#[test]
fn tls_store_urls_work_from_the_command_line() {
    let fx = Fixture::new();
    let certs = agent_memory_testkit::tls::shared_certs();
    let postgres = format!(
        "postgres://postgres@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}&table=cli_tls_{}",
        agent_memory_testkit::postgres::shared_tls_server().port(),
        certs.ca().display(),
        std::process::id()
    );
    let redis_server = agent_memory_testkit::redis::shared_tls_server();
    let redis = format!(
        "rediss://localhost:{}?{}",
        redis_server.port(),
        redis_server.tls_files().expect("a TLS server").url_params()
    );
    for store in [postgres, redis] {
        let user = format!("tls-{}", std::process::id());
        let put = fx.on(&store, &user).args(["put", "k", "over TLS"]).output().unwrap();
        exited(&put, OK);
        fx.on(&store, &user)
            .args(["get", "k"])
            .assert()
            .code(OK)
            .stdout(predicate::str::contains("over TLS"));
        fx.on(&store, &user).args(["delete-user", "--yes"]).assert().code(OK);
    }
    // A TLS failure is one clear line on stderr, naming TLS and no secret.
    let wrong = format!(
        "postgres://postgres:hunter2@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
        agent_memory_testkit::postgres::shared_tls_server().port(),
        certs.other_ca().display()
    );
    let out = fx.on(&wrong, "u1").args(["get", "k"]).output().unwrap();
    assert_ne!(out.status.code(), Some(OK));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("TLS:"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}
