//! Every example in docs/cli.md is run, in order, as a new user would type it: each `$ `
//! line of a `console` block goes to `bash` in a fresh home (so the default store is a new
//! SQLite file), with the `export`s seen so far, and its output (stdout and stderr, as a
//! terminal shows them) must match the lines printed under it. Numbers (times, revisions,
//! counts) are compared as "a number", and a plural after one as its singular, since they
//! change from run to run; everything else must match word for word.
//!
//! The PostgreSQL examples run against the test kit's server: `$PG_URL` and the documented
//! `postgres://memory:secret@db.internal/memories` both name one table of it, fresh per run.

use std::path::Path;
use std::process::Stdio;

/// One `$ command` and the output documented under it.
#[derive(Debug)]
struct Example {
    line: usize,
    command: String,
    output: Vec<String>,
}

/// The `$ ` lines of every ```console block, with the lines under each.
fn examples(doc: &str) -> Vec<Example> {
    let mut examples: Vec<Example> = Vec::new();
    let mut in_console = false;
    for (index, line) in doc.lines().enumerate() {
        if line.starts_with("```") {
            in_console = !in_console && line.trim() == "```console";
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(command) = line.strip_prefix("$ ") {
            examples.push(Example { line: index + 1, command: command.to_owned(), output: vec![] });
        } else if let Some(last) = examples.last_mut() {
            if !line.trim().is_empty() {
                last.output.push(line.to_owned());
            }
        }
    }
    examples
}

/// Numbers become `N`, a plural right after one its singular, and runs of spaces one space
/// (table columns widen with the values).
fn normalize(text: &str) -> String {
    let mut numbered = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_ascii_digit() {
            numbered.push(c);
            continue;
        }
        while chars.next_if(|c| c.is_ascii_digit() || *c == '.').is_some() {}
        numbered.push('N');
    }
    let mut words: Vec<String> = Vec::new();
    for word in numbered.split_whitespace() {
        let after_number = words.last().is_some_and(|last| last == "N");
        let bare = word.trim_end_matches([';', ',', ':', ')']);
        let word = if after_number && bare.len() > 1 && bare.ends_with('s') {
            format!("{}{}", &bare[..bare.len() - 1], &word[bare.len()..])
        } else {
            word.to_owned()
        };
        words.push(word);
    }
    words.join(" ")
}

#[test]
fn every_example_of_the_cli_guide_runs_as_documented() {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
    let doc = std::fs::read_to_string(&doc_path).expect("docs/cli.md");
    let examples = examples(&doc);
    assert!(examples.len() >= 15, "fewer examples than expected: {}", examples.len());

    let dir = tempfile::tempdir().expect("temp dir");
    let (home, work) = (dir.path().join("home"), dir.path().join("work"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_agent-memory"));
    let path = format!(
        "{}:{}",
        binary.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let pg = agent_memory_testkit::postgres::shared_url();
    let table = format!(
        "docs_{}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    );
    let pg_url = format!("{pg}{}table={table}", if pg.contains('?') { '&' } else { '?' });

    let mut exports = String::new();
    for example in &examples {
        let command = example.command.trim();
        if command.starts_with("cargo install") {
            continue; // the binary under test is already built
        }
        let command =
            command.replace("'postgres://memory:secret@db.internal/memories'", "\"$PG_URL\"");
        if command.starts_with("export ") {
            exports.push_str(&command);
            exports.push('\n');
            continue;
        }
        let script = format!("{exports}set -o pipefail\n{command}\n");
        let mut cmd = std::process::Command::new("bash");
        for (var, _) in std::env::vars() {
            if var.starts_with("AGENT_MEMORY_") || var == "RUST_LOG" || var == "XDG_DATA_HOME" {
                cmd.env_remove(var);
            }
        }
        let out = cmd
            .args(["-c", &format!("{{\n{script}}} 2>&1")])
            .env("HOME", &home)
            .env("PATH", &path)
            .env("PG_URL", &pg_url)
            .current_dir(&work)
            .stdin(Stdio::null())
            .output()
            .expect("bash runs");
        let shown = String::from_utf8_lossy(&out.stdout);
        let place = format!("docs/cli.md line {}: `{}`", example.line, example.command);
        assert!(out.status.success(), "{place} failed ({:?}):\n{shown}", out.status.code());
        let expected: Vec<String> = example.output.iter().map(|line| normalize(line)).collect();
        let actual: Vec<String> =
            shown.lines().filter(|line| !line.trim().is_empty()).map(normalize).collect();
        assert_eq!(actual, expected, "{place} printed:\n{shown}");
    }
}

#[test]
fn normalizing_keeps_words_and_forgets_numbers() {
    assert_eq!(normalize("would copy 1204 records of 37 users"), "would copy N record of N user");
    assert_eq!(
        normalize("exported 1 record from 1 namespace"),
        "exported N record from N namespace"
    );
    assert_eq!(normalize("created   2026-11-30 09:50:35Z"), "created N-N-N N:N:NZ");
    assert_eq!(normalize("\"created_at\":1796032235.57192,"), "\"created_at\":N,");
    assert_eq!(normalize("saved units (revision 2)"), "saved units (revision N)");
}
