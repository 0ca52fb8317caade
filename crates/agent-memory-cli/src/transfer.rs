//! The export/import format: JSON Lines, one [`MemoryRecord`](agent_memory::MemoryRecord) per line, exactly as the library
//! serializes it (and as `list --json` prints it):
//!
//! ```json
//! {"scope":{"application_id":"app","user_id":"u1","namespace":"prefs"},"key":"tone","content":"Be brief.","metadata":{},"revision":"…","created_at":1767225600.25,"updated_at":1767225600.25,"expires_at":null,"source":{}}
//! ```
//!
//! Import reads the same objects. `scope`, `key` and `content` are required; `metadata`,
//! `expires_at` and `source` default to empty; `revision`, `created_at` and `updated_at` are
//! accepted and ignored, because the target store assigns them. Any other field is refused, so
//! a typo (`"contnet"`) or a newer format is an error instead of silently lost data.
//!
//! The whole input is parsed and validated before anything is written: an invalid line stops
//! the import with its line number and nothing imported. [`Reader`] does it one line at a
//! time, so an import checks a file in a first pass and writes in a second without holding it
//! in memory.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::io::BufRead;

use agent_memory::{MemoryScope, MemoryWrite, Metadata, Source, Timestamp};
use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::exit::{CliError, CliResult};

/// One line of an import file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    scope: MemoryScope,
    key: String,
    content: String,
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    expires_at: Option<Timestamp>,
    #[serde(default)]
    source: Source,
    // Written by export, assigned anew by the target store.
    #[serde(default, rename = "revision")]
    _revision: Option<IgnoredAny>,
    #[serde(default, rename = "created_at")]
    _created_at: Option<IgnoredAny>,
    #[serde(default, rename = "updated_at")]
    _updated_at: Option<IgnoredAny>,
}

/// A validated record, ready to write.
#[derive(Debug)]
pub struct Entry {
    /// 1-based line number in the input, for messages.
    pub line: usize,
    /// Where to write it.
    pub scope: MemoryScope,
    /// Its key.
    pub key: String,
    /// Content, metadata, expiry and source; unconditional (the caller may add a condition).
    pub write: MemoryWrite,
}

/// Whose records an import may write.
#[derive(Debug, Clone)]
pub enum Owner {
    /// Only this application user's: a line naming anyone else is an error.
    User {
        /// The application id from `--app`.
        application_id: String,
        /// The user id from `--user`.
        user_id: String,
    },
    /// Every line under its own scope (`--any-user`).
    Any,
}

/// What an input held in memory holds, once checked (the tests' view of [`Reader`]).
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Plan {
    /// The records to write, in input order.
    pub entries: Vec<Entry>,
    /// Lines whose `expires_at` had already passed: skipped, since a store refuses an expiry in
    /// the past, and the record would be invisible anyway.
    pub expired: u64,
}

/// What one checked line holds.
// Made once per line and moved straight into the write: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Checked {
    /// A record to write.
    Entry(Entry),
    /// A valid record whose `expires_at` has passed: skipped, since a store refuses an expiry
    /// in the past, and the record would be invisible anyway.
    Expired,
}

/// Reads and checks a JSON Lines input one line at a time, so an import never holds the file
/// in memory: the first pass checks every line, the second reads the same input again and
/// writes. What it keeps between lines is one 16-byte digest per record, to refuse a scope and
/// key seen on an earlier line.
pub struct Reader<R> {
    input: R,
    owner: Owner,
    now: Timestamp,
    line: usize,
    buffer: Vec<u8>,
    seen: HashSet<u128>,
    digests: (RandomState, RandomState),
}

impl<R: BufRead> Reader<R> {
    /// A reader of `input` accepting records of `owner`, judging expiry by `now`.
    pub fn new(input: R, owner: Owner, now: Timestamp) -> Self {
        Self {
            input,
            owner,
            now,
            line: 0,
            buffer: Vec::new(),
            seen: HashSet::new(),
            digests: (RandomState::new(), RandomState::new()),
        }
    }

    /// The next record line, checked, with its 1-based line number; `None` at the end.
    /// Blank lines are skipped; `\r\n` endings are accepted.
    ///
    /// # Errors
    /// An `Invalid` error naming the line: not UTF-8, not a record object, a field breaking a
    /// store rule, another user's scope, or a scope and key already seen on an earlier line
    /// (which of the two should win is not ours to guess). A `Failure` when the input cannot
    /// be read.
    pub fn next_line(&mut self) -> CliResult<Option<(usize, Checked)>> {
        loop {
            self.buffer.clear();
            let read = self
                .input
                .read_until(b'\n', &mut self.buffer)
                .map_err(|e| CliError::io("cannot read the import", &e))?;
            if read == 0 {
                return Ok(None);
            }
            self.line += 1;
            let raw = self.buffer.strip_suffix(b"\n").unwrap_or(&self.buffer);
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let text = std::str::from_utf8(raw).map_err(|_| {
                CliError::invalid(format!("line {}: is not valid UTF-8", self.line))
            })?;
            if text.trim().is_empty() {
                continue;
            }
            let line: Line = serde_json::from_str(text).map_err(|err| {
                // serde_json's message ends in "at line 1 column N" of this one line; say
                // which line of the file instead.
                let message = err.to_string();
                let message = message.rfind(" at line ").map_or(&*message, |at| &message[..at]);
                CliError::invalid(format!("line {}, column {}: {message}", self.line, err.column()))
            })?;
            let checked = self.check(line)?;
            return Ok(Some((self.line, checked)));
        }
    }

    fn check(&mut self, line: Line) -> CliResult<Checked> {
        let number = self.line;
        if let Owner::User { application_id, user_id } = &self.owner {
            if line.scope.application_id() != application_id || line.scope.user_id() != user_id {
                return Err(CliError::invalid(format!(
                    "line {number}: belongs to another application user; pass --any-user to \
                     import every line under its own scope"
                )));
            }
        }
        if !self.seen.insert(self.digest(&line.scope, &line.key)) {
            return Err(CliError::invalid(format!(
                "line {number}: repeats a scope and key of an earlier line"
            )));
        }
        let now = self.now;
        let write = MemoryWrite::new(line.content)
            .metadata(serde_json::Value::Object(line.metadata))
            .expires_at_opt(line.expires_at)
            .source(line.source);
        if line.expires_at.is_some_and(|at| at <= now) {
            // Still checked, so a bad line is never hidden behind its expiry.
            write
                .expires_at_opt(None)
                .validate(&line.key, now)
                .map_err(|e| CliError::from(e).context(&format!("line {number}: ")))?;
            return Ok(Checked::Expired);
        }
        write
            .validate(&line.key, now)
            .map_err(|e| CliError::from(e).context(&format!("line {number}: ")))?;
        Ok(Checked::Entry(Entry { line: number, scope: line.scope, key: line.key, write }))
    }

    /// 128 bits from two independently keyed hashes of the scope and key: a false "repeats"
    /// needs a collision of both, about one in 2^64 per pair of lines.
    fn digest(&self, scope: &MemoryScope, key: &str) -> u128 {
        let half = |state: &RandomState| u128::from(state.hash_one((scope, key)));
        (half(&self.digests.0) << 64) | half(&self.digests.1)
    }
}

/// Parses and validates a whole JSON Lines input held in memory against `owner`, with `now`
/// as the instant expiry is judged by: [`Reader`] over a byte slice, collected.
///
/// # Errors
/// As [`Reader::next_line`], for the first bad line.
#[cfg(test)]
pub fn plan(input: &[u8], owner: &Owner, now: Timestamp) -> CliResult<Plan> {
    let mut reader = Reader::new(input, owner.clone(), now);
    let mut plan = Plan::default();
    while let Some((_, checked)) = reader.next_line()? {
        match checked {
            Checked::Entry(entry) => plan.entries.push(entry),
            Checked::Expired => plan.expired += 1,
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::ErrorKind;

    fn owner() -> Owner {
        Owner::User { application_id: "app".into(), user_id: "u1".into() }
    }

    fn now() -> Timestamp {
        Timestamp::from_unix_seconds(2_000_000_000.0).unwrap()
    }

    fn invalid_message(result: CliResult<Plan>) -> String {
        match result {
            Err(err) if err.kind() == ErrorKind::Invalid => err.message().to_owned(),
            other => panic!("expected an invalid-input error, got {other:?}"),
        }
    }

    #[test]
    fn reads_export_lines_and_ignores_store_assigned_fields() {
        let input = concat!(
            r#"{"scope":{"application_id":"app","user_id":"u1"},"key":"a","content":"x","metadata":{"k":1},"revision":"r1","created_at":1.0,"updated_at":2.0,"expires_at":null,"source":{"agent":"bot"}}"#,
            "\r\n\n",
            r#"{"scope":{"application_id":"app","user_id":"u1","namespace":"ns"},"key":"a","content":"y"}"#,
            "\n"
        );
        let plan = plan(input.as_bytes(), &owner(), now()).unwrap();
        assert_eq!(plan.entries.len(), 2);
        assert_eq!(plan.entries[0].write.source_ref().agent.as_deref(), Some("bot"));
        assert_eq!(plan.entries[1].scope.namespace(), Some("ns"));
        assert_eq!(plan.entries[1].line, 3);
    }

    #[test]
    fn counts_expired_lines_instead_of_importing_them() {
        let input = r#"{"scope":{"application_id":"app","user_id":"u1"},"key":"old","content":"x","expires_at":1000.0}"#;
        let plan = plan(input.as_bytes(), &owner(), now()).unwrap();
        assert!(plan.entries.is_empty());
        assert_eq!(plan.expired, 1);
    }

    #[test]
    fn names_the_line_of_each_kind_of_bad_input() {
        let good = r#"{"scope":{"application_id":"app","user_id":"u1"},"key":"a","content":"x"}"#;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"\xff\xfe\n".to_vec(), "line 1: is not valid UTF-8"),
            (format!("{good}\nnot json").into_bytes(), "line 2, column"),
            (format!("{good}\n{good}").into_bytes(), "line 2: repeats a scope and key"),
            (
                br#"{"scope":{"application_id":"app","user_id":"u2"},"key":"a","content":"x"}"#.to_vec(),
                "line 1: belongs to another application user",
            ),
            (
                br#"{"scope":{"application_id":"app","user_id":"u1"},"key":"a","contnet":"x"}"#.to_vec(),
                "unknown field",
            ),
            (
                br#"{"scope":{"application_id":"app","user_id":"u1"},"key":"a","content":"x\u0000"}"#.to_vec(),
                "line 1: invalid content",
            ),
        ];
        for (input, expected) in cases {
            let message = invalid_message(plan(&input, &owner(), now()));
            assert!(message.contains(expected), "{message:?} should contain {expected:?}");
        }
    }

    #[test]
    fn any_user_keeps_each_line_scope() {
        let input =
            br#"{"scope":{"application_id":"other","user_id":"u9"},"key":"a","content":"x"}"#;
        let plan = plan(input, &Owner::Any, now()).unwrap();
        assert_eq!(plan.entries[0].scope.user_id(), "u9");
    }
}

/// Property tests ("fuzzing") of the import parser: arbitrary bytes, arbitrary JSON lines and
/// mutated export lines through [`plan`]. Every input is a plan of records that pass the
/// store's rules and belong to the owner, or one `Invalid` error naming a line; never a panic
/// or any other error. `AGENT_MEMORY_FUZZ_CASES` sets the case count per property (default
/// 1,000); see `docs/testing.md`.
#[cfg(test)]
mod fuzz {
    use super::*;
    use crate::exit::ErrorKind;
    use proptest::prelude::*;
    use serde_json::{json, Map, Value};

    fn cases() -> u32 {
        std::env::var("AGENT_MEMORY_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000)
    }

    fn now() -> Timestamp {
        Timestamp::from_unix_seconds(2_000_000_000.0).expect("a valid instant")
    }

    fn owners() -> [Owner; 2] {
        [Owner::User { application_id: "app".into(), user_id: "u1".into() }, Owner::Any]
    }

    /// Text that breaks careless code, plus the ids the owner check compares against.
    fn hostile_text() -> BoxedStrategy<String> {
        prop_oneof![
            3 => any::<String>(),
            3 => "[\\x00-\\x1f%_*\\\\:/{}'\"`;<>a-zA-Z0-9 -]{0,30}",
            3 => prop::sample::select(vec![
                "app", "u1", "u2", "other", "ns", "k", "'; DROP TABLE memories; --",
                "]] redis.call('FLUSHALL') --[[", "{tag}", "%", "\u{202e}", "a\u{0}b", "\r", "",
            ])
            .prop_map(str::to_owned),
            1 => (prop::sample::select(vec!['a', 'é', '\0']), prop::sample::select(vec![129usize, 257, 65_537]))
                .prop_map(|(c, n)| std::iter::repeat_n(c, n).collect()),
        ]
        .boxed()
    }

    fn arb_json() -> BoxedStrategy<Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            hostile_text().prop_map(Value::String),
        ];
        leaf.prop_recursive(6, 48, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map(hostile_text(), inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
        .boxed()
    }

    /// A field value: usually of the right shape, sometimes anything.
    fn field(right: BoxedStrategy<Value>) -> BoxedStrategy<Option<Value>> {
        prop::option::weighted(0.97, prop_oneof![80 => right, 1 => arb_json()]).boxed()
    }

    fn scope_value() -> BoxedStrategy<Value> {
        let id = |usual: &'static str| prop_oneof![6 => Just(usual.to_owned()), 1 => Just("u2".to_owned()), 2 => hostile_text()];
        let namespace = prop::option::weighted(
            0.4,
            prop_oneof![Just("ns".to_owned()), Just("{tag} '%'".to_owned()), hostile_text()],
        );
        (id("app"), id("u1"), namespace, prop::option::weighted(0.05, hostile_text()))
            .prop_map(|(app, user, namespace, extra)| {
                let mut scope = json!({"application_id": app, "user_id": user});
                if let Some(namespace) = namespace {
                    scope["namespace"] = json!(namespace);
                }
                if let Some(extra) = extra {
                    scope[extra] = json!(true);
                }
                scope
            })
            .boxed()
    }

    /// One JSON line shaped like an export record, with hostile values and wrong types.
    fn record_line() -> BoxedStrategy<String> {
        let text = || hostile_text().prop_map(Value::String).boxed();
        let seconds = prop_oneof![
            6 => Just(Value::Null),
            3 => (2_000_000_001_u32..4_000_000_000).prop_map(|s| json!(f64::from(s) + 0.25)),
            1 => prop::sample::select(vec![0.0, 1_000.0, 1_999_999_999.0, 2_000_000_000.0, -1.0, 1e300])
                .prop_map(|f| json!(f)),
            1 => any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ]
        .boxed();
        let source = prop::collection::btree_map(
            prop_oneof![
                9 => prop::sample::select(vec!["session_id", "invocation_id", "agent"]),
                1 => Just("user_id"),
            ],
            text(),
            0..3,
        )
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
        .boxed();
        let metadata = prop_oneof![
            9 => prop::collection::btree_map(hostile_text(), arb_json(), 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            1 => arb_json(),
        ]
        .boxed();
        (
            (field(scope_value()), field(text()), field(text()), field(metadata)),
            (field(seconds.clone()), field(source), field(text()), field(seconds)),
            prop::option::weighted(0.05, (hostile_text(), arb_json())),
        )
            .prop_map(
                |((scope, key, content, metadata), (expires, source, revision, created), extra)| {
                    let mut line = Map::new();
                    let fields = [
                        ("scope", scope),
                        ("key", key),
                        ("content", content),
                        ("metadata", metadata),
                        ("expires_at", expires),
                        ("source", source),
                        ("revision", revision),
                        ("created_at", created),
                    ];
                    for (name, value) in fields {
                        if let Some(value) = value {
                            line.insert(name.to_owned(), value);
                        }
                    }
                    if let Some((name, value)) = extra {
                        line.insert(name, value);
                    }
                    Value::Object(line).to_string()
                },
            )
            .boxed()
    }

    /// Runs [`plan`] for every owner and checks what it returned against the input.
    fn check(input: &[u8]) -> Result<(), TestCaseError> {
        let lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        for owner in owners() {
            match plan(input, &owner, now()) {
                Ok(plan) => {
                    let mut last = 0;
                    let mut seen = HashSet::new();
                    for entry in &plan.entries {
                        prop_assert!(entry.line > last, "entries come in input order");
                        last = entry.line;
                        prop_assert!(entry.line <= lines.len());
                        prop_assert!(entry.write.validate(&entry.key, now()).is_ok());
                        prop_assert!(seen.insert((entry.scope.clone(), entry.key.clone())));
                        if let Owner::User { application_id, user_id } = &owner {
                            prop_assert_eq!(entry.scope.application_id(), application_id);
                            prop_assert_eq!(entry.scope.user_id(), user_id);
                        }
                        // What is planned is what the line said, byte for byte.
                        let raw = lines[entry.line - 1];
                        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
                        let value: Value =
                            serde_json::from_slice(raw).expect("a planned line is JSON");
                        prop_assert_eq!(value["key"].as_str(), Some(entry.key.as_str()));
                        prop_assert_eq!(value["content"].as_str(), Some(entry.write.content()));
                    }
                    let non_blank = lines
                        .iter()
                        .filter(|l| std::str::from_utf8(l).map_or(true, |t| !t.trim().is_empty()))
                        .count();
                    let planned = u64::try_from(plan.entries.len()).expect("a small count");
                    prop_assert!(
                        planned + plan.expired <= u64::try_from(non_blank).expect("small")
                    );
                }
                Err(err) if err.kind() == ErrorKind::Invalid => {
                    let message = err.message();
                    let number: usize = message
                        .strip_prefix("line ")
                        .and_then(|rest| rest.split([':', ',']).next())
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(|| {
                            TestCaseError::fail(format!("no line number in {message:?}"))
                        })?;
                    prop_assert!(
                        (1..=lines.len()).contains(&number),
                        "line {} of {}",
                        number,
                        lines.len()
                    );
                    let shown = err.to_string();
                    prop_assert!(!shown.chars().any(char::is_control), "one line: {:?}", shown);
                    prop_assert!(shown.chars().count() <= 300, "short: {:?}", shown);
                }
                Err(other) => {
                    return Err(TestCaseError::fail(format!(
                        "expected a plan or Invalid, got {other:?}"
                    )))
                }
            }
        }
        Ok(())
    }

    /// Bytes that keep a line looking like JSON most of the time, and any byte sometimes.
    fn json_byte() -> BoxedStrategy<u8> {
        prop_oneof![
            6 => prop::sample::select(b"{}[]:,\"\\ \r\n\t0123456789.eE+-tfnulakeyscopecontent".to_vec()),
            1 => 0u8..0x80,
        ]
        .boxed()
    }

    const VALID: &str = r#"{"scope":{"application_id":"app","user_id":"u1","namespace":"ns"},"key":"k","content":"c","metadata":{"a":[1,{"b":null}]},"revision":"7","created_at":1.5,"updated_at":2.5,"expires_at":3000000000.0,"source":{"session_id":"s","agent":"a"}}"#;

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: cases(),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn any_bytes_plan_or_are_invalid(bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..2_000),
            prop::collection::vec(json_byte(), 0..400),
        ]) {
            check(&bytes)?;
        }

        #[test]
        fn any_record_lines_plan_or_are_invalid(
            lines in prop::collection::vec(
                prop_oneof![
                    8 => record_line(),
                    1 => Just(String::new()),
                    1 => Just(VALID.to_owned()),
                    1 => arb_json().prop_map(|v| v.to_string()),
                ],
                1..4,
            ),
            crlf in any::<bool>(),
        ) {
            let input = lines.join(if crlf { "\r\n" } else { "\n" });
            check(input.as_bytes())?;
        }

        #[test]
        fn mutated_export_lines_plan_or_are_invalid(
            edits in prop::collection::vec((0..VALID.len(), json_byte(), 0u8..3), 1..8),
            repeat in 1usize..4,
        ) {
            let mut bytes = VALID.as_bytes().to_vec();
            for (at, byte, op) in edits {
                let at = at.min(bytes.len());
                match op {
                    0 => bytes.insert(at, byte),
                    1 if at < bytes.len() => { bytes.remove(at); }
                    _ if at < bytes.len() => bytes[at] = byte,
                    _ => bytes.push(byte),
                }
            }
            let input: Vec<u8> = vec![bytes; repeat].join(&b'\n');
            check(&input)?;
        }

        #[test]
        fn deeply_nested_lines_are_invalid(depth in 0usize..2_000, open in prop::sample::select(vec![b'[', b'{'])) {
            let mut line = br#"{"scope":{"application_id":"app","user_id":"u1"},"key":"k","content":"c","metadata":{"m":"#.to_vec();
            for _ in 0..depth {
                line.push(open);
                if open == b'{' {
                    line.extend_from_slice(br#""n":"#);
                }
            }
            check(&line)?;
        }
    }
}
