//! What a path names in the store: a file (a record at its key), a directory (records under
//! its key prefix), or nothing.

use super::path::{dir_prefix, MemoryPath};
use crate::error::Result;
use crate::page::PageRequest;
use crate::record::MemoryRecord;
use crate::scoped::ScopedMemory;

/// What a path names.
#[derive(Debug)]
pub(super) enum Node {
    /// A file: the record at the path's key. (A key that is both a file and a directory,
    /// which only other interfaces can write, counts as the file.)
    File(Box<MemoryRecord>),
    /// A directory: `/memories` itself, or a key prefix some record starts with.
    Directory,
    /// Nothing.
    Missing,
}

/// Looks `path` up: one read, and one single-key listing when it is not a file.
pub(super) async fn lookup(memory: &ScopedMemory, path: &MemoryPath<'_>) -> Result<Node> {
    if path.is_root() {
        return Ok(Node::Directory);
    }
    if let Some(record) = memory.get(&path.key).await? {
        return Ok(Node::File(Box::new(record)));
    }
    Ok(if is_directory(memory, &path.key).await? { Node::Directory } else { Node::Missing })
}

/// True when some record lies below the directory whose key is `key`.
pub(super) async fn is_directory(memory: &ScopedMemory, key: &str) -> Result<bool> {
    let Some(prefix) = dir_prefix(key) else {
        return Ok(false);
    };
    // One key, no content.
    let page = memory.list_keys(PageRequest::new(1).prefix(prefix)).await?;
    Ok(!page.items.is_empty())
}

/// The first directory above `path`, from the root down, that is a file, so `path` cannot be
/// made: one read per level.
pub(super) async fn file_above(
    memory: &ScopedMemory,
    path: &MemoryPath<'_>,
) -> Result<Option<String>> {
    for ancestor in path.ancestors() {
        if memory.get(ancestor).await?.is_some() {
            return Ok(Some(ancestor.to_owned()));
        }
    }
    Ok(None)
}
