//! Every error the memory tool returns, one function each.
//!
//! Where the reference implementation has a message for the case, the text is the reference's,
//! byte for byte, since models are trained on them; the others (marked "ours") say what went
//! wrong and what to do next. A path is quoted as the model wrote it.

use super::path::display;
use crate::error::MemoryError;
use crate::tools::{ToolError, ToolErrorKind};
use crate::validation::{MAX_CONTENT_BYTES, MAX_KEY_BYTES};

fn refused(message: String) -> ToolError {
    ToolError::new(ToolErrorKind::InvalidArguments, None, message)
}

fn refused_field(field: &str, message: String) -> ToolError {
    ToolError::new(ToolErrorKind::InvalidArguments, Some(field), message)
}

// Paths.

pub(super) fn outside_root(path: &str) -> ToolError {
    refused_field("path", format!("Path must start with /memories, got: {path}"))
}

pub(super) fn escapes_root(path: &str) -> ToolError {
    refused_field("path", format!("Path {path} would escape /memories directory"))
}

/// Ours: a path whose key breaks the key rules.
pub(super) fn bad_path(path: &str, too_long: bool) -> ToolError {
    let rule = if too_long {
        format!("at most {MAX_KEY_BYTES} bytes may follow /memories/")
    } else {
        "memory paths cannot contain control characters".to_owned()
    };
    refused_field("path", format!("The path {path} is not a valid memory path: {rule}."))
}

/// `view`, `str_replace` and `insert` of a path that names nothing.
pub(super) fn not_found(path: &str) -> ToolError {
    refused(format!("The path {path} does not exist. Please provide a valid path."))
}

/// `delete` and `rename` of a path that names nothing (no period, as in the reference).
pub(super) fn does_not_exist(path: &str) -> ToolError {
    refused(format!("The path {path} does not exist"))
}

pub(super) fn not_a_file(path: &str) -> ToolError {
    refused(format!("The path {path} is not a file."))
}

/// A file that was there when an edit began and is gone when it retried.
pub(super) fn vanished(path: &str) -> ToolError {
    refused(format!(
        "The file {path} no longer exists (may have been deleted or renamed concurrently)."
    ))
}

pub(super) fn already_exists(path: &str) -> ToolError {
    refused(format!("File {path} already exists"))
}

pub(super) fn destination_exists(path: &str) -> ToolError {
    refused(format!("The destination {path} already exists"))
}

pub(super) fn delete_root() -> ToolError {
    refused("Cannot delete the /memories directory itself".to_owned())
}

pub(super) fn rename_root() -> ToolError {
    refused("Cannot rename the /memories directory itself".to_owned())
}

/// Ours: a file is in the way of a directory the path needs (the reference fails with the
/// operating system's "Not a directory").
pub(super) fn file_in_the_way(path: &str, file_key: &str) -> ToolError {
    refused(format!(
        "Cannot use the path {path}: {} is a file, not a directory.",
        display(file_key)
    ))
}

/// Ours: a directory renamed into itself (the reference fails with "Invalid argument").
pub(super) fn into_itself(old_path: &str, new_path: &str) -> ToolError {
    refused(format!("Cannot rename {old_path} to {new_path}: a directory cannot move into itself."))
}

/// Ours: a file of a renamed directory would get a path over the key limit.
pub(super) fn renamed_path_too_long(old_path: &str, new_path: &str, file_key: &str) -> ToolError {
    refused(format!(
        "Cannot rename {old_path} to {new_path}: {} would get a path longer than \
         {MAX_KEY_BYTES} bytes below /memories/. Nothing was moved.",
        display(file_key)
    ))
}

/// Ours: another rename of the same directory, to another destination, is under way or was
/// interrupted.
pub(super) fn rename_in_progress(old_path: &str, other: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::Conflict,
        None,
        format!(
            "The directory {old_path} is being renamed to {}; run that rename again to finish \
             it before renaming the directory elsewhere.",
            display(other)
        ),
    )
}

// Edits.

pub(super) fn no_match(old_str: &str, path: &str) -> ToolError {
    refused(format!(
        "No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}."
    ))
}

pub(super) fn several_matches(old_str: &str, lines: &[usize]) -> ToolError {
    let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
    refused(format!(
        "No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: \
         {}. Please ensure it is unique",
        lines.join(", ")
    ))
}

pub(super) fn insert_line_out_of_range(insert_line: i64, lines: usize) -> ToolError {
    refused_field(
        "insert_line",
        format!(
            "Invalid `insert_line` parameter: {insert_line}. It should be within the range \
             [0, {lines}]."
        ),
    )
}

/// Ours: a file over the content limit.
pub(super) fn too_large(path: &str) -> ToolError {
    refused(format!(
        "The file {path} would be larger than {MAX_CONTENT_BYTES} bytes, the limit of a memory \
         file. Nothing was changed."
    ))
}

/// Ours: content the store cannot hold.
pub(super) fn nul_in_text(path: &str) -> ToolError {
    refused(format!("The file {path} cannot hold the NUL character (U+0000). Nothing was changed."))
}

/// Ours: every attempt of an edit lost to another writer.
pub(super) fn edited_concurrently(path: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::Conflict,
        None,
        format!(
            "The file {path} is being edited concurrently and the change could not be applied. \
             Nothing was changed: view the file and try again."
        ),
    )
}

/// Ours: a delete or rename of a large directory that did as much as one call may.
pub(super) fn unfinished(done: &str, path: &str, again: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::Incomplete,
        None,
        format!("{done} {path}; more files remain. Run the same {again} again to finish it."),
    )
}

/// Ours: a write the store refused for a reason the tool did not check first (metadata
/// written through another interface that leaves no room for this write's source).
pub(super) fn unwritable(path: &str, err: &MemoryError) -> ToolError {
    refused(format!("The file {path} could not be written: {err}. Nothing was changed."))
}

/// Ours: the copy made by a rename was changed by someone else before the rename could undo
/// it, so both files are kept.
pub(super) fn rename_raced(old_path: &str, new_path: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::Conflict,
        None,
        format!(
            "{old_path} changed while it was being renamed, and {new_path} was changed by              someone else before the copy could be undone: both files now exist. View them and              decide which to keep."
        ),
    )
}

/// Ours: the record this tool keeps while renaming a directory cannot be made, because
/// another interface wrote a record at its key.
pub(super) fn rename_blocked(old_path: &str, journal_key: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::Conflict,
        None,
        format!(
            "Cannot rename the directory {old_path}: the record `{journal_key}`, which the memory              tool keeps while a directory is renamed, holds something else."
        ),
    )
}

/// A `map_err` closure for a store call of `command`; `writes` says whether the command may
/// have changed something by the time the call failed.
pub(super) fn store(command: &'static str, writes: bool) -> impl Fn(MemoryError) -> ToolError {
    move |err| match err {
        MemoryError::QuotaExceeded { quota, limit } => memory_full(quota, limit),
        err => unavailable(&err, command, writes),
    }
}

/// Ours: the store's quota for this user is reached; the write did not happen.
pub(super) fn memory_full(quota: &str, limit: u64) -> ToolError {
    ToolError::new(
        ToolErrorKind::MemoryFull,
        None,
        format!(
            "The memory is full: {}. Nothing was changed. Free space by deleting files under \
             /memories that are no longer needed (the delete command) or by shortening files, \
             then try again.",
            crate::tools::full_because(quota, limit, "files")
        ),
    )
}

/// Ours: a rename ran into the store's quota. A rename copies each file before deleting the
/// original (and a directory's rename first writes a small journal record), so it needs room
/// for one more file; `moved` files had moved before the write was refused.
pub(super) fn rename_full(quota: &str, limit: u64, old_path: &str, moved: usize) -> ToolError {
    let done = match moved {
        0 => "Nothing was moved.".to_owned(),
        1 => format!("1 file was moved; the rest are still below {old_path}."),
        n => format!("{n} files were moved; the rest are still below {old_path}."),
    };
    ToolError::new(
        ToolErrorKind::MemoryFull,
        None,
        format!(
            "The memory is full: {}. A rename copies each file before deleting the original, \
             so it needs room for one more file. {done} Free space by deleting files under \
             /memories that are no longer needed (the delete command), then run the same \
             rename again.",
            crate::tools::full_because(quota, limit, "files")
        ),
    )
}

// The command.

pub(super) fn not_an_object() -> ToolError {
    refused("The memory tool's input must be a JSON object with a `command`.".to_owned())
}

pub(super) fn unknown_command(command: &str) -> ToolError {
    refused_field(
        "command",
        format!(
            "Unknown command: {}. The memory tool's commands are: view, create, str_replace, \
             insert, delete, rename.",
            crate::tools::printable_name(command)
        ),
    )
}

pub(super) fn missing(field: &str, command: &str) -> ToolError {
    refused_field(field, format!("The `{field}` parameter is required for the {command} command."))
}

pub(super) fn wrong_type(field: &str, what: &str) -> ToolError {
    refused_field(field, format!("The `{field}` parameter must be {what}."))
}

pub(super) fn unexpected(field: &str, command: &str, accepted: &[&str]) -> ToolError {
    refused_field(
        field,
        format!(
            "The {command} command does not take a `{}` parameter; it takes: {}.",
            crate::tools::printable_name(field),
            accepted.join(", ")
        ),
    )
}

// The store.

/// Ours: the store failed. The provider's error goes to the operators' log, never to the
/// model; `writes` says whether the command may have changed something.
pub(super) fn unavailable(err: &MemoryError, command: &str, writes: bool) -> ToolError {
    tracing::warn!(tool = "memory", command, error = %err, "memory tool failed");
    // The driver's own words can quote stored rows (a PostgreSQL `DETAIL` line): `debug` only.
    let source = std::error::Error::source(err).map(ToString::to_string);
    tracing::debug!(tool = "memory", command, source = ?source, "memory tool failure detail");
    let mut message = "The memory store is unavailable; try again later.".to_owned();
    if writes {
        message.push_str(
            " The change may or may not have been stored: view the path before trying again.",
        );
    }
    ToolError::new(ToolErrorKind::Unavailable, None, message)
}
