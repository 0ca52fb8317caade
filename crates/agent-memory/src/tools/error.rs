//! Model-facing errors: [`ToolError`], its [`ToolErrorKind`], and how a [`MemoryError`] is
//! told to the model.

use std::fmt;

use serde::Serialize;
use serde_json::{json, Value};

use super::definitions::{ToolDefinition, MEMORY_GET};
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
    /// The memory store failed; a write may or may not have happened.
    Unavailable,
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
    pub(super) fn new(
        kind: ToolErrorKind,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Self { kind, field: field.map(str::to_owned), message: message.into() }
    }

    pub(super) fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::InvalidArguments, Some(field), message)
    }

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

/// How one tool names the library's fields, and whether it writes.
pub(super) struct Context {
    pub(super) tool: &'static str,
    pub(super) writes: bool,
    pub(super) renames: &'static [(&'static str, &'static str)],
}

impl Context {
    pub(super) fn error(&self, err: MemoryError) -> ToolError {
        match err {
            MemoryError::Invalid { field, reason } => {
                if field == "cursor" {
                    return bad_cursor(self.tool, &reason);
                }
                let field = self
                    .renames
                    .iter()
                    .find(|(from, _)| *from == field)
                    .map_or(field, |(_, to)| *to);
                ToolError::invalid(field, format!("invalid `{field}`: {reason}"))
            }
            MemoryError::Conflict { .. } => ToolError::new(
                ToolErrorKind::Conflict,
                Some("expected_revision"),
                format!(
                    "revision is stale: the memory changed or was deleted after you read it. Read \
                     the key again with {MEMORY_GET}, then decide whether to retry {} with its \
                     current revision.",
                    self.tool
                ),
            ),
            other => {
                let source = std::error::Error::source(&other).map(ToString::to_string);
                tracing::warn!(tool = self.tool, error = %other, source = ?source, "memory tool failed");
                let mut message = "the memory store is unavailable; try again later.".to_owned();
                if self.writes {
                    message.push_str(
                        " The change may or may not have been stored: read it back before \
                         trying again.",
                    );
                }
                ToolError::new(ToolErrorKind::Unavailable, None, message)
            }
        }
    }
}

pub(super) const KEY_RENAMES: &[(&str, &str)] = &[
    ("revision", "expected_revision"),
    ("expires_at", "expires_in_seconds"),
    ("timestamp", "expires_in_seconds"),
];

pub(super) fn unknown_tool(name: &str, definitions: &[ToolDefinition]) -> ToolError {
    let names: Vec<&str> = definitions.iter().map(|d| d.name).collect();
    ToolError::new(
        ToolErrorKind::UnknownTool,
        None,
        format!("unknown tool `{}`; available tools: {}", printable(name), names.join(", ")),
    )
}

pub(super) fn bad_cursor(tool: &str, reason: &str) -> ToolError {
    ToolError::invalid(
        "cursor",
        format!(
            "`cursor` {reason}; pass next_cursor from the previous {tool} result unchanged, or \
             leave cursor out to start from the beginning"
        ),
    )
}

/// An argument name as it may appear in a message: at most 64 characters, controls replaced.
pub(super) fn printable(name: &str) -> String {
    let mut out: String =
        name.chars().take(64).map(|c| if c.is_control() { '?' } else { c }).collect();
    if name.chars().count() > 64 {
        out.push('…');
    }
    out
}
