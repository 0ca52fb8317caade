//! The export/import format: JSON Lines, one [`MemoryRecord`] per line, exactly as the library
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
//! the import with its line number and nothing imported.

use std::collections::HashSet;

use agent_memory::{validation, MemoryScope, MemoryWrite, Metadata, Source, Timestamp};
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
#[derive(Debug)]
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

/// What the input holds, once checked.
#[derive(Debug, Default)]
pub struct Plan {
    /// The records to write, in input order.
    pub entries: Vec<Entry>,
    /// Lines whose `expires_at` had already passed: skipped, since a store refuses an expiry in
    /// the past, and the record would be invisible anyway.
    pub expired: u64,
}

/// Parses and validates a whole JSON Lines input against `owner`, with `now` as the instant
/// expiry is judged by. Blank lines are skipped; `\r\n` endings are accepted.
///
/// # Errors
/// [`CliError::Invalid`] naming the first bad line: not UTF-8, not a record object, a field
/// breaking a store rule, another user's scope, or a scope and key already seen on an earlier
/// line (which of the two should win is not ours to guess).
pub fn plan(input: &[u8], owner: &Owner, now: Timestamp) -> CliResult<Plan> {
    let mut plan = Plan::default();
    let mut seen: HashSet<(MemoryScope, String)> = HashSet::new();
    for (index, raw) in input.split(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = std::str::from_utf8(raw)
            .map_err(|_| CliError::Invalid(format!("line {number}: is not valid UTF-8")))?;
        if text.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(text).map_err(|err| {
            // serde_json's message ends in "at line 1 column N" of this one line; say which
            // line of the file instead.
            let message = err.to_string();
            let message = message.rfind(" at line ").map_or(&*message, |at| &message[..at]);
            CliError::Invalid(format!("line {number}, column {}: {message}", err.column()))
        })?;
        if let Owner::User { application_id, user_id } = owner {
            if line.scope.application_id() != application_id || line.scope.user_id() != user_id {
                return Err(CliError::Invalid(format!(
                    "line {number}: belongs to another application user; pass --any-user to \
                     import every line under its own scope"
                )));
            }
        }
        if !seen.insert((line.scope.clone(), line.key.clone())) {
            return Err(CliError::Invalid(format!(
                "line {number}: repeats a scope and key of an earlier line"
            )));
        }
        let write = MemoryWrite::new(line.content)
            .metadata(serde_json::Value::Object(line.metadata))
            .expiry(line.expires_at)
            .source(line.source);
        if line.expires_at.is_some_and(|at| at <= now) {
            // Still checked, so a bad line is never hidden behind its expiry.
            validation::put(&line.key, &write.clone().expiry(None), now)
                .map_err(|e| CliError::from(e).context(&format!("line {number}: ")))?;
            plan.expired += 1;
            continue;
        }
        validation::put(&line.key, &write, now)
            .map_err(|e| CliError::from(e).context(&format!("line {number}: ")))?;
        plan.entries.push(Entry { line: number, scope: line.scope, key: line.key, write });
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner::User { application_id: "app".into(), user_id: "u1".into() }
    }

    fn now() -> Timestamp {
        Timestamp::from_unix_seconds(2_000_000_000.0).unwrap()
    }

    fn invalid_message(result: CliResult<Plan>) -> String {
        match result {
            Err(CliError::Invalid(message)) => message,
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
        assert_eq!(plan.entries[0].write.source_value().agent.as_deref(), Some("bot"));
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
