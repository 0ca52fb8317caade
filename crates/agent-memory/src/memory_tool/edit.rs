//! `create`, `str_replace` and `insert`: the commands that write one file.
//!
//! `create` is a create-only write, so of two agents creating one path one wins and the other
//! is told the file exists. `str_replace` and `insert` read the file, compute the new text and
//! write it with the revision they read; when another writer got there first the write is a
//! `Conflict` that changed nothing, and the edit starts over from a fresh read, at most
//! [`MAX_EDIT_ATTEMPTS`] times. No edit is ever lost to another: each lands on the text the
//! other left.

use serde_json::Value;

use super::error;
use super::node::{file_above, is_directory, lookup, Node};
use super::path::MemoryPath;
use super::text::{created, inserted, numbered, replaced};
use crate::error::MemoryError;
use crate::record::MemoryRecord;
use crate::scoped::ScopedMemory;
use crate::tools::ToolError;
use crate::validation::MAX_CONTENT_BYTES;
use crate::write::MemoryWrite;

/// How many times one edit reads and tries to write before it gives up. An attempt fails only
/// when another write of the same file commits between its read and its write, so an edit
/// gives up only after 16 other writes of that file landed during it.
pub(super) const MAX_EDIT_ATTEMPTS: usize = 16;

/// Checks the text a file would hold, before anything is written.
pub(super) fn check_text(path: &str, text: &str) -> Result<(), ToolError> {
    if text.len() > MAX_CONTENT_BYTES {
        return Err(error::too_large(path));
    }
    if text.contains('\0') {
        return Err(error::nul_in_text(path));
    }
    Ok(())
}

/// A write of `content` keeping `record`'s metadata and expiry.
pub(super) fn rewrite(record: &MemoryRecord, content: String) -> MemoryWrite {
    MemoryWrite::new(content)
        .metadata(Value::Object(record.metadata.clone()))
        .expires_at_opt(record.expires_at)
}

/// Runs `create`.
pub(super) async fn create(
    memory: &ScopedMemory,
    path: &MemoryPath<'_>,
    file_text: &str,
) -> Result<String, ToolError> {
    check_text(path.raw, file_text)?;
    let store = error::store("create", true);
    if path.is_root() || is_directory(memory, &path.key).await.map_err(&store)? {
        return Err(error::already_exists(path.raw));
    }
    if let Some(file) = file_above(memory, path).await.map_err(&store)? {
        return Err(error::file_in_the_way(path.raw, &file));
    }
    match memory.put(&path.key, MemoryWrite::new(file_text).create_only()).await {
        Ok(_) => Ok(created(path.raw)),
        Err(err) if err.is_conflict() => Err(error::already_exists(path.raw)),
        Err(err) => Err(store(err)),
    }
}

/// Runs `str_replace`: exactly one occurrence of `old_str` becomes `new_str`.
pub(super) async fn str_replace(
    memory: &ScopedMemory,
    path: &MemoryPath<'_>,
    old_str: &str,
    new_str: &str,
) -> Result<String, ToolError> {
    edit(memory, path, "str_replace", |content| {
        let positions = occurrences(content, old_str);
        let pos = match positions.as_slice() {
            [] => return Err(error::no_match(old_str, path.raw)),
            [pos] => *pos,
            _ => return Err(error::several_matches(old_str, &match_lines(content, old_str))),
        };
        let changed_line = content[..pos].matches('\n').count();
        let new_content = [&content[..pos], new_str, &content[pos + old_str.len()..]].concat();
        let lines: Vec<&str> = new_content.split('\n').collect();
        let (first, end) = (changed_line.saturating_sub(2), (changed_line + 3).min(lines.len()));
        let snippet = numbered(lines[first..end].iter().copied(), first + 1);
        Ok((new_content, replaced(&snippet)))
    })
    .await
}

/// Runs `insert`: `insert_text`, without its trailing newlines, becomes the line after line
/// `insert_line` (0: the first line), and the file ends with a newline.
pub(super) async fn insert(
    memory: &ScopedMemory,
    path: &MemoryPath<'_>,
    insert_line: i64,
    insert_text: &str,
) -> Result<String, ToolError> {
    edit(memory, path, "insert", |content| {
        // The lines of the file; a final newline ends the last line rather than starting one.
        let mut lines: Vec<&str> = content.split('\n').collect();
        if lines.last() == Some(&"") {
            lines.pop();
        }
        let at = usize::try_from(insert_line)
            .ok()
            .filter(|at| *at <= lines.len())
            .ok_or_else(|| error::insert_line_out_of_range(insert_line, lines.len()))?;
        lines.insert(at, insert_text.trim_end_matches('\n'));
        let mut new_content = lines.join("\n");
        if !new_content.ends_with('\n') {
            new_content.push('\n');
        }
        Ok((new_content, inserted(path.raw)))
    })
    .await
}

/// Reads the file at `path`, computes its new text and the reply with `change`, and writes
/// the text with the revision it read, starting over from a fresh read on a `Conflict`.
async fn edit(
    memory: &ScopedMemory,
    path: &MemoryPath<'_>,
    command: &'static str,
    change: impl Fn(&str) -> Result<(String, String), ToolError>,
) -> Result<String, ToolError> {
    let store = error::store(command, true);
    for attempt in 0..MAX_EDIT_ATTEMPTS {
        let record = if attempt == 0 {
            match lookup(memory, path).await.map_err(&store)? {
                Node::File(record) => *record,
                Node::Directory => return Err(error::not_a_file(path.raw)),
                Node::Missing => return Err(error::not_found(path.raw)),
            }
        } else {
            match memory.get(&path.key).await.map_err(&store)? {
                Some(record) => record,
                None => return Err(error::vanished(path.raw)),
            }
        };
        let (content, reply) = change(&record.content)?;
        check_text(path.raw, &content)?;
        let write = rewrite(&record, content).expected_revision(record.revision.clone());
        match memory.put(&path.key, write).await {
            Ok(_) => return Ok(reply),
            // Another write came first, or the file expired since the read: nothing was
            // written; read again.
            Err(err) if err.is_conflict() => {}
            Err(MemoryError::Invalid { field: "expires_at", .. }) => {}
            Err(err) if err.is_invalid() => return Err(error::unwritable(path.raw, &err)),
            Err(err) => return Err(store(err)),
        }
    }
    Err(error::edited_concurrently(path.raw))
}

/// Where `needle` occurs in `haystack` without overlapping, from the left: at most two, which
/// is all `str_replace` needs to know. An empty needle occurs before every character and at
/// the end.
fn occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    if needle.is_empty() {
        let mut at = haystack.char_indices().map(|(i, _)| i).chain([haystack.len()]);
        return at.by_ref().take(2).collect();
    }
    haystack.match_indices(needle).map(|(i, _)| i).take(2).collect()
}

/// The line (from 1) of every place `needle` starts in `haystack`, overlapping ones included,
/// as the reference reports them.
fn match_lines(haystack: &str, needle: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    let (mut start, mut counted, mut line) = (0, 0, 1);
    while start <= haystack.len() {
        let Some(found) = haystack[start..].find(needle) else { break };
        let at = start + found;
        line += haystack[counted..at].matches('\n').count();
        counted = at;
        lines.push(line);
        // The next search starts one character later.
        start = at + haystack[at..].chars().next().map_or(1, char::len_utf8);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occurrences_count_like_the_reference() {
        assert_eq!(occurrences("abc", "x"), Vec::<usize>::new());
        assert_eq!(occurrences("abc", "b"), [1]);
        assert_eq!(occurrences("aaa", "aa"), [0], "non-overlapping: one");
        assert_eq!(occurrences("aaaa", "aa"), [0, 2]);
        assert_eq!(occurrences("", ""), [0], "the empty text holds the empty string once");
        assert_eq!(occurrences("é", ""), [0, 2]);
    }

    #[test]
    fn match_lines_report_overlapping_matches() {
        assert_eq!(match_lines("aaaa", "aa"), [1, 1, 1]);
        assert_eq!(match_lines("x\nab\nab", "ab"), [2, 3]);
        assert_eq!(match_lines("a\né", ""), [1, 1, 2, 2]);
    }
}
