//! Model-facing errors: [`ToolError`], its [`ToolErrorKind`], and how a [`MemoryError`] is
//! told to the model.

use std::fmt;

use serde::Serialize;
use serde_json::{json, Value};

use super::definitions::{ToolDefinition, FORGET, MEMORY_DELETE, MEMORY_GET};
use crate::error::MemoryError;

/// What kind of failure a [`ToolError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// No tool of that name in this tool set.
    UnknownTool,
    /// The arguments broke the schema or a limit; fix them, do not retry as is.
    InvalidArguments,
    /// A revision check failed: read the key again.
    Conflict,
    /// The user's memory is full (a quota of the store): nothing was saved. Delete memories
    /// that are no longer needed, then try again.
    MemoryFull,
    /// The memory store failed; a write may or may not have happened.
    Unavailable,
    /// The call did part of its work, as much as one call may do; the same call again does
    /// the rest (the [memory tool](crate::memory_tool)'s delete and rename of a large
    /// directory).
    Incomplete,
}

/// A failed tool call, with a message written for the model.
///
/// The message names the argument and the rule it broke, or says what to do next; it never
/// contains provider internals, connection details or stored content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    kind: ToolErrorKind,
    field: Option<String>,
    message: String,
}

impl ToolError {
    /// The kind of failure.
    pub fn kind(&self) -> ToolErrorKind {
        self.kind
    }

    /// The argument at fault, when one is.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The message for the model.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error as a JSON object, for runtimes that return tool errors as results:
    /// `{"error": {"kind": "conflict", "field": null, "message": "…"}}`.
    pub fn to_json(&self) -> Value {
        json!({"error": {"kind": self.kind, "field": self.field, "message": self.message}})
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

/// How a tool set's arguments name the library's fields, as `(library field, argument)` pairs.
pub(super) type FieldNames = &'static [(&'static str, &'static str)];

/// The key tools pass a revision as `expected_revision`, an expiry as a duration and a
/// search's case as the `ignore_case` flag.
pub(super) const KEY_FIELD_NAMES: FieldNames = &[
    ("revision", "expected_revision"),
    ("expires_at", "expires_in_seconds"),
    ("timestamp", "expires_in_seconds"),
    ("case", "ignore_case"),
];

/// The fact tools store a fact's text as the content and its id as the key.
pub(super) const FACT_FIELD_NAMES: FieldNames = &[("content", "text"), ("key", "fact_id")];

// Constructors, for the parsers and dispatchers of the model tools only.
impl ToolError {
    pub(crate) fn new(
        kind: ToolErrorKind,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Self { kind, field: field.map(str::to_owned), message: message.into() }
    }

    /// Invalid arguments, blaming `field`.
    pub(super) fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::InvalidArguments, Some(field), message)
    }

    /// `err` from running `tool`, told in the model's terms: the argument at fault under the
    /// name in `names`, "read the key again" for a conflict, and for any other failure only that
    /// the store is unavailable (the provider's error goes to the operators' log).
    pub(super) fn from_memory(err: MemoryError, tool: &ToolDefinition, names: FieldNames) -> Self {
        match err {
            MemoryError::Invalid { field, reason } => {
                if field == "cursor" {
                    return Self::bad_cursor(tool.name, &reason);
                }
                let field =
                    names.iter().find(|(from, _)| *from == field).map_or(field, |(_, to)| *to);
                Self::invalid(field, format!("invalid `{field}`: {reason}"))
            }
            MemoryError::Conflict { .. } => Self::new(
                ToolErrorKind::Conflict,
                Some("expected_revision"),
                format!(
                    "revision is stale: the memory changed or was deleted after you read it. Read \
                     the key again with {MEMORY_GET}, then decide whether to retry {} with its \
                     current revision.",
                    tool.name
                ),
            ),
            MemoryError::QuotaExceeded { quota, limit } => {
                let (delete, what) = if names == FACT_FIELD_NAMES {
                    (FORGET, "facts")
                } else {
                    (MEMORY_DELETE, "memories")
                };
                Self::new(
                    ToolErrorKind::MemoryFull,
                    None,
                    format!(
                        "memory is full: {}; nothing was saved. Free space by deleting {what} \
                         that are no longer needed with {delete} (or saving shorter ones), then \
                         call {} again.",
                        full_because(quota, limit, what),
                        tool.name
                    ),
                )
            }
            other => {
                tracing::warn!(tool = tool.name, error = %other, "memory tool failed");
                // The driver's own words can quote stored rows (a PostgreSQL `DETAIL` line, a
                // Redis script error): only at `debug`, which operators turn on deliberately.
                let source = std::error::Error::source(&other).map(ToString::to_string);
                tracing::debug!(tool = tool.name, source = ?source, "memory tool failure detail");
                let mut message = "the memory store is unavailable; try again later.".to_owned();
                // Only a tool that changes something can have half-done its work.
                if !tool.annotations.read_only {
                    message.push_str(
                        " The change may or may not have been stored: read it back before \
                         trying again.",
                    );
                }
                Self::new(ToolErrorKind::Unavailable, None, message)
            }
        }
    }

    /// No tool called `name` among `available`.
    pub(crate) fn unknown_tool<'n>(
        name: &str,
        available: impl IntoIterator<Item = &'n str>,
    ) -> Self {
        let available: Vec<&str> = available.into_iter().collect();
        Self::new(
            ToolErrorKind::UnknownTool,
            None,
            format!(
                "unknown tool `{}`; available tools: {}",
                printable(name),
                available.join(", ")
            ),
        )
    }

    /// A `cursor` argument of `tool` that is not one of its `next_cursor` values, for `reason`.
    pub(super) fn bad_cursor(tool: &str, reason: &str) -> Self {
        Self::invalid(
            "cursor",
            format!(
                "`cursor` {reason}; pass next_cursor from the previous {tool} result unchanged, \
                 or leave cursor out to start from the beginning"
            ),
        )
    }
}

/// Which quota a full memory reached, as a clause for the model.
pub(crate) fn full_because(quota: &str, limit: u64, what: &str) -> String {
    if quota == crate::quota::MAX_BYTES_PER_USER {
        let bytes = if limit == 1 { "byte" } else { "bytes" };
        format!("this user's {what} may take at most {limit} {bytes} in all")
    } else {
        // `what` is a plural ("memories", "facts", "files"); a limit of one reads as one.
        let what = match (limit, what) {
            (1, "memories") => "memory",
            (1, plural) => plural.strip_suffix('s').unwrap_or(plural),
            (_, plural) => plural,
        };
        format!("this user may keep at most {limit} {what}")
    }
}

/// An argument name as it may appear in a message: at most 64 characters, controls replaced.
pub(crate) fn printable(name: &str) -> String {
    let mut out: String =
        name.chars().take(64).map(|c| if c.is_control() { '?' } else { c }).collect();
    if name.chars().count() > 64 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::full_because;
    use crate::quota::{MAX_BYTES_PER_USER, MAX_RECORDS_PER_USER};

    #[test]
    fn a_limit_of_one_reads_in_the_singular() {
        let cases = [
            (MAX_RECORDS_PER_USER, 1, "memories", "this user may keep at most 1 memory"),
            (MAX_RECORDS_PER_USER, 1, "facts", "this user may keep at most 1 fact"),
            (MAX_RECORDS_PER_USER, 3, "files", "this user may keep at most 3 files"),
            (MAX_BYTES_PER_USER, 1, "files", "this user's files may take at most 1 byte in all"),
        ];
        for (quota, limit, things, expected) in cases {
            assert_eq!(full_because(quota, limit, things), expected);
        }
    }
}
