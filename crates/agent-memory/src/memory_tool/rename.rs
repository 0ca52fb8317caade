//! `rename`: a file or a directory to a path that does not exist yet.
//!
//! A file moves as a create-only copy at the destination and a delete of the source checked
//! against the revision that was copied. When the source changed in between, the delete is a
//! `Conflict` that removed nothing: the copy is undone (deleted at its own revision) and the
//! move starts over from a fresh read, so the destination never holds a stale copy while the
//! source lives on with the newer text.
//!
//! A directory moves file by file that way, a page of keys at a time and at most
//! [`MAX_FILES_PER_CALL`] files per call. Before the first file moves, the tool writes a
//! record at the directory's *journal key* (`/` and the directory's key, which no memory path
//! maps to) naming the destination; it is deleted when the last file has moved. A rename that
//! stopped halfway (at the bound, or because the store failed) leaves files on both sides and
//! the journal: the same rename again finds the journal, so it continues instead of reporting
//! that the destination exists. A file found at the destination with exactly the source's
//! text and metadata is the copy an interrupted call made; its source is then only deleted.

use serde_json::{json, Value};

use super::edit::{rewrite, MAX_EDIT_ATTEMPTS};
use super::error;
use super::node::{file_above, lookup, Node};
use super::path::{display, MemoryPath};
use super::remove::MAX_FILES_PER_CALL;
use super::text::renamed;
use crate::error::MemoryError;
use crate::page::PageRequest;
use crate::record::MemoryRecord;
use crate::scoped::ScopedMemory;
use crate::tools::ToolError;
use crate::validation::{MAX_KEY_BYTES, MAX_PAGE_LIMIT};
use crate::write::MemoryWrite;

/// The metadata field of a journal record; its value is `{"from": key, "to": key}`.
const JOURNAL_FIELD: &str = "memory_tool_rename";

/// The key of the journal of a rename of the directory whose key is `dir_key`.
pub(super) fn journal_key(dir_key: &str) -> String {
    format!("/{dir_key}")
}

/// Runs `rename`.
pub(super) async fn rename(
    memory: &ScopedMemory,
    old: &MemoryPath<'_>,
    new: &MemoryPath<'_>,
) -> Result<String, ToolError> {
    if old.is_root() {
        return Err(error::rename_root());
    }
    let store = error::store("rename", true);
    if !matches!(lookup(memory, new).await.map_err(&store)?, Node::Missing) {
        // The destination exists: because an earlier call of this very rename began it?
        return match journal(memory, &old.key).await? {
            Some(Journal::To(to)) if to == new.key => move_directory(memory, old, new).await,
            _ => Err(error::destination_exists(new.raw)),
        };
    }
    match lookup(memory, old).await.map_err(&store)? {
        Node::Missing => Err(error::does_not_exist(old.raw)),
        Node::File(record) => {
            if let Some(file) = file_above(memory, new).await.map_err(&store)? {
                return Err(error::file_in_the_way(new.raw, &file));
            }
            let full = |quota, limit| error::rename_full(quota, limit, old.raw, 0);
            if move_file(memory, *record, &new.key, old.raw, new.raw, &full).await? {
                Ok(renamed(old.raw, new.raw))
            } else {
                Err(error::vanished(old.raw))
            }
        }
        Node::Directory => {
            // A file in the way first, as the reference finds it first (making the
            // destination's parent directories).
            if let Some(file) = file_above(memory, new).await.map_err(&store)? {
                return Err(error::file_in_the_way(new.raw, &file));
            }
            if new.key.starts_with(&format!("{}/", old.key)) {
                return Err(error::into_itself(old.raw, new.raw));
            }
            check_lengths(memory, old, new).await?;
            begin(memory, old, new).await?;
            move_directory(memory, old, new).await
        }
    }
}

/// What the journal key of a directory holds.
enum Journal {
    /// A rename of the directory to this key is under way.
    To(String),
    /// A record this tool did not write.
    Foreign,
}

async fn journal(memory: &ScopedMemory, dir_key: &str) -> Result<Option<Journal>, ToolError> {
    let record = memory.get(&journal_key(dir_key)).await.map_err(error::store("rename", true))?;
    Ok(record.map(|record| {
        let entry = record.metadata.get(JOURNAL_FIELD);
        let from = entry.and_then(|e| e.get("from")).and_then(Value::as_str);
        match entry.and_then(|e| e.get("to")).and_then(Value::as_str) {
            Some(to) if from == Some(dir_key) => Journal::To(to.to_owned()),
            _ => Journal::Foreign,
        }
    }))
}

/// Writes the journal of renaming `old` to `new`, create-only: when one exists, a rename to
/// the same destination continues, and one to another is refused.
async fn begin(
    memory: &ScopedMemory,
    old: &MemoryPath<'_>,
    new: &MemoryPath<'_>,
) -> Result<(), ToolError> {
    let key = journal_key(&old.key);
    let note = format!(
        "The memory tool is renaming the directory {} to {}; running the same rename again \
         finishes it.",
        display(&old.key),
        display(&new.key)
    );
    let write = MemoryWrite::new(note)
        .metadata(json!({ JOURNAL_FIELD: {"from": old.key, "to": new.key} }))
        .create_only();
    match memory.put(&key, write).await {
        Ok(_) => Ok(()),
        Err(err) if err.is_conflict() => match journal(memory, &old.key).await? {
            Some(Journal::To(to)) if to == new.key => Ok(()),
            Some(Journal::To(to)) => Err(error::rename_in_progress(old.raw, &to)),
            // Gone again (another call just finished) or not ours.
            Some(Journal::Foreign) | None => Err(error::rename_blocked(old.raw, &key)),
        },
        Err(MemoryError::QuotaExceeded { quota, limit }) => {
            Err(error::rename_full(quota, limit, old.raw, 0))
        }
        Err(err) => Err(error::unavailable(&err, "rename", true)),
    }
}

/// Refuses, before anything moves, a rename that would give one of the first
/// [`MAX_FILES_PER_CALL`] files a path over the key limit.
async fn check_lengths(
    memory: &ScopedMemory,
    old: &MemoryPath<'_>,
    new: &MemoryPath<'_>,
) -> Result<(), ToolError> {
    if new.key.len() <= old.key.len() {
        return Ok(());
    }
    let growth = new.key.len() - old.key.len();
    let prefix = old.dir_prefix().unwrap_or_default();
    let mut page = PageRequest::new(MAX_PAGE_LIMIT).prefix(prefix);
    let mut read = 0;
    loop {
        // Keys only: the contents are not needed to check lengths.
        let result = memory.list_keys(page.clone()).await.map_err(error::store("rename", false))?;
        read += result.items.len();
        if let Some(long) = result.items.iter().find(|r| r.key.len() + growth > MAX_KEY_BYTES) {
            return Err(error::renamed_path_too_long(old.raw, new.raw, &long.key));
        }
        match result.next_cursor {
            Some(cursor) if read < MAX_FILES_PER_CALL => page = page.after(cursor),
            _ => return Ok(()),
        }
    }
}

/// Moves every file below `old` to the same place below `new`, then deletes the journal.
async fn move_directory(
    memory: &ScopedMemory,
    old: &MemoryPath<'_>,
    new: &MemoryPath<'_>,
) -> Result<String, ToolError> {
    let store = error::store("rename", true);
    let from = old.dir_prefix().unwrap_or_default();
    let to = format!("{}/", new.key);
    let mut page = PageRequest::new(MAX_PAGE_LIMIT).prefix(from.clone());
    let mut moved = 0;
    loop {
        let result = memory.list(page.clone()).await.map_err(&store)?;
        for record in result.items {
            if moved == MAX_FILES_PER_CALL {
                return Err(error::unfinished(
                    &format!("Moved {moved} files of {} to", old.raw),
                    new.raw,
                    "rename",
                ));
            }
            let target = format!("{to}{}", &record.key[from.len()..]);
            let (old_path, new_path) = (display(&record.key), display(&target));
            // A file deleted meanwhile has nothing to move.
            let full = |quota, limit| error::rename_full(quota, limit, old.raw, moved);
            move_file(memory, record, &target, &old_path, &new_path, &full).await?;
            moved += 1;
        }
        // Moved files are gone from the source; the cursor is a position, so it still
        // continues after the last one.
        match result.next_cursor {
            Some(cursor) => page = page.after(cursor),
            None => break,
        }
    }
    memory.delete(&journal_key(&old.key), None).await.map_err(&store)?;
    Ok(renamed(old.raw, new.raw))
}

/// Moves one file (`record`, read just now) to `target`; false when the source was deleted
/// meanwhile, so there was nothing to move. `old_path` and `new_path` name the two in
/// messages; `full` words the refusal when the copy does not fit the user's quota.
async fn move_file(
    memory: &ScopedMemory,
    mut record: MemoryRecord,
    target: &str,
    old_path: &str,
    new_path: &str,
    full: &(dyn Fn(&'static str, u64) -> ToolError + Sync),
) -> Result<bool, ToolError> {
    let store = error::store("rename", true);
    for _ in 0..MAX_EDIT_ATTEMPTS {
        let write = rewrite(&record, record.content.clone()).create_only();
        let copy = match memory.put(target, write).await {
            Ok(copy) => Some(copy),
            Err(err) if err.is_conflict() => {
                // Left by an interrupted rename when it holds exactly the source; otherwise
                // someone else's file.
                match memory.get(target).await.map_err(&store)? {
                    Some(there)
                        if there.content == record.content && there.metadata == record.metadata =>
                    {
                        None
                    }
                    _ => return Err(error::destination_exists(new_path)),
                }
            }
            Err(MemoryError::QuotaExceeded { quota, limit }) => return Err(full(quota, limit)),
            // The source expired since it was read.
            Err(MemoryError::Invalid { field: "expires_at", .. }) => return Ok(false),
            Err(err) if err.is_invalid() => return Err(error::unwritable(new_path, &err)),
            Err(err) => return Err(store(err)),
        };
        match memory.delete(&record.key, Some(&record.revision)).await {
            Ok(_) => return Ok(true),
            Err(err) if err.is_conflict() => {
                // The source changed or went since it was read: undo this copy, read again.
                if let Some(copy) = copy {
                    match memory.delete(target, Some(&copy.revision)).await {
                        Ok(_) => {}
                        Err(err) if err.is_conflict() => {
                            return Err(error::rename_raced(old_path, new_path));
                        }
                        Err(err) => return Err(store(err)),
                    }
                }
                record = match memory.get(&record.key).await.map_err(&store)? {
                    Some(fresh) => fresh,
                    None => return Ok(false),
                };
            }
            Err(err) => return Err(store(err)),
        }
    }
    Err(error::edited_concurrently(old_path))
}
