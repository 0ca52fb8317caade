//! `delete`: a file, or a directory with everything below it.

use super::error;
use super::node::{lookup, Node};
use super::path::MemoryPath;
use super::rename::journal_key;
use super::text::deleted;
use crate::page::PageRequest;
use crate::scoped::ScopedMemory;
use crate::tools::ToolError;
use crate::validation::MAX_PAGE_LIMIT;

/// The most files one `delete` (or `rename`) of a directory handles; the same call again
/// handles the next ones.
pub(super) const MAX_FILES_PER_CALL: usize = 1_000;

/// Runs `delete`.
///
/// A directory is deleted key by key, a page of keys at a time, at most
/// [`MAX_FILES_PER_CALL`] per call: each deleted file is gone for good, so a call that stops
/// (at that bound, or when the store fails) leaves the rest for the same call to finish.
pub(super) async fn delete(
    memory: &ScopedMemory,
    path: &MemoryPath<'_>,
) -> Result<String, ToolError> {
    if path.is_root() {
        return Err(error::delete_root());
    }
    let store = error::store("delete", true);
    match lookup(memory, path).await.map_err(&store)? {
        Node::Missing => Err(error::does_not_exist(path.raw)),
        Node::File(_) => {
            if memory.delete(&path.key, None).await.map_err(&store)? {
                Ok(deleted(path.raw))
            } else {
                // Deleted by someone else since the lookup.
                Err(error::does_not_exist(path.raw))
            }
        }
        Node::Directory => {
            let prefix = path.dir_prefix().unwrap_or_default();
            let mut removed = 0;
            loop {
                // Always the first page: what was read is deleted before the next read.
                let page = PageRequest::new(MAX_PAGE_LIMIT).prefix(prefix.clone());
                let page = memory.list(page).await.map_err(&store)?;
                if page.items.is_empty() {
                    break;
                }
                for record in page.items {
                    if removed == MAX_FILES_PER_CALL {
                        return Err(error::unfinished(
                            &format!("Deleted {removed} files below"),
                            path.raw,
                            "delete",
                        ));
                    }
                    memory.delete(&record.key, None).await.map_err(&store)?;
                    removed += 1;
                }
            }
            // An interrupted rename of this directory has nothing left to finish.
            memory.delete(&journal_key(&path.key), None).await.map_err(&store)?;
            Ok(deleted(path.raw))
        }
    }
}
