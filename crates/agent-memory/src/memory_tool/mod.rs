#![doc = include_str!("docs.md")]
//!
//! [`ToolError`]: crate::tools::ToolError
//! [`ToolErrorKind::Incomplete`]: crate::tools::ToolErrorKind::Incomplete
//! [`ToolErrorKind::Conflict`]: crate::tools::ToolErrorKind::Conflict
//! [`ToolErrorKind::Unavailable`]: crate::tools::ToolErrorKind::Unavailable
//! [`ToolErrorKind::MemoryFull`]: crate::tools::ToolErrorKind::MemoryFull
//! [`ScopedMemory`]: crate::ScopedMemory

mod command;
mod definition;
mod edit;
mod error;
mod node;
mod path;
mod remove;
mod rename;
mod text;
mod view;

use serde_json::Value;

use self::command::Command;
use self::path::MemoryPath;
use crate::observe;
use crate::scoped::ScopedMemory;
use crate::tools::ToolError;

pub use definition::{definition, NAME};

/// Runs a call of the tool `name` as [`run`] does, for runtimes that route every tool call by
/// name through one place (the MCP server does): a name other than [`NAME`] is a
/// [`ToolErrorKind::UnknownTool`](crate::tools::ToolErrorKind::UnknownTool) error.
///
/// # Errors
/// As [`run`], and for an unknown tool name.
pub async fn dispatch(
    memory: &ScopedMemory,
    name: &str,
    input: &Value,
) -> Result<String, ToolError> {
    if name != NAME {
        return Err(ToolError::unknown_tool(name, [NAME]));
    }
    run(memory, input).await
}

/// Runs one memory tool command against `memory` and returns its result text.
///
/// `input` is the tool's input as the model sent it: for the Messages API, the `input` of a
/// `tool_use` block named `memory`; for MCP, the call's arguments. Send the text back as the
/// tool result; send a [`ToolError`]'s [`message`](ToolError::message) back the same way with
/// `"is_error": true`.
///
/// # Errors
/// A [`ToolError`] whose message is what the model should read: the reference
/// implementation's message where it has one (a path outside `/memories`, a missing file, no
/// or several occurrences of `old_str`, an `insert_line` out of range, an existing
/// destination), ours otherwise (malformed input, limits, concurrent edits, a store failure;
/// see the [module docs](self)). Its [`kind`](ToolError::kind) tells a caller what it is.
pub async fn run(memory: &ScopedMemory, input: &Value) -> Result<String, ToolError> {
    let span = observe::memory_tool_span();
    observe::tool_call(span.clone(), async {
        let command = command::parse(input)?;
        observe::record_command(&span, command.name());
        tracing::debug!(command = command.name(), "memory tool command");
        run_command(memory, &command).await
    })
    .await
}

async fn run_command(memory: &ScopedMemory, command: &Command) -> Result<String, ToolError> {
    match command {
        Command::View { path, view_range } => {
            view::view(memory, &MemoryPath::parse(path)?, view_range.as_deref()).await
        }
        Command::Create { path, file_text } => {
            edit::create(memory, &MemoryPath::parse(path)?, file_text).await
        }
        Command::StrReplace { path, old_str, new_str } => {
            edit::str_replace(memory, &MemoryPath::parse(path)?, old_str, new_str).await
        }
        Command::Insert { path, insert_line, insert_text } => {
            edit::insert(memory, &MemoryPath::parse(path)?, *insert_line, insert_text).await
        }
        Command::Delete { path } => remove::delete(memory, &MemoryPath::parse(path)?).await,
        Command::Rename { old_path, new_path } => {
            let (old, new) = (MemoryPath::parse(old_path)?, MemoryPath::parse(new_path)?);
            rename::rename(memory, &old, &new).await
        }
    }
}
