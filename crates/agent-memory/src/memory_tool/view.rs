//! `view`: a file with line numbers, or a directory listing two levels deep.

use std::collections::BTreeMap;

use super::error;
use super::node::{lookup, Node};
use super::path::{is_file_path, MemoryPath};
use super::text::{file_header, listing_header, numbered, size, DIRECTORY_SIZE};
use crate::page::PageRequest;
use crate::scoped::ScopedMemory;
use crate::tools::ToolError;
use crate::validation::MAX_PAGE_LIMIT;

/// The most files one directory listing reads; past them, the listing says it stopped.
pub(super) const MAX_LISTED_FILES: usize = 1_000;

/// Runs `view`.
pub(super) async fn view(
    memory: &ScopedMemory,
    path: &MemoryPath<'_>,
    view_range: Option<&[i64]>,
) -> Result<String, ToolError> {
    match lookup(memory, path).await.map_err(error::store("view", false))? {
        Node::File(record) => Ok(file_view(path.raw, &record.content, view_range)),
        Node::Directory => directory_view(memory, path).await,
        Node::Missing => Err(error::not_found(path.raw)),
    }
}

/// A file's lines, numbered from 1, or the lines `view_range` selects.
///
/// Lines are what splitting at every `\n` gives, so a file ending in a newline shows an empty
/// last line. A range `[from, to]` shows lines `from` through `to`, counted from 1: `from`
/// below 1 counts as 1, `to` of -1 means the last line, another negative `to` counts back from
/// the end as a Python slice end does (-2 leaves out the last two lines), and a range that
/// selects nothing shows the header alone. A `view_range` that is not two numbers shows the
/// whole file.
fn file_view(path: &str, content: &str, view_range: Option<&[i64]>) -> String {
    let lines: Vec<&str> = content.split('\n').collect();
    let (shown, first) = match view_range {
        Some(&[from, to]) => {
            let count = i64::try_from(lines.len()).unwrap_or(i64::MAX);
            let start = from.max(1) - 1;
            let end = match to {
                -1 => count,
                to if to < 0 => count.saturating_add(to).max(0),
                to => to.min(count),
            };
            let shown = match (usize::try_from(start), usize::try_from(end)) {
                (Ok(start), Ok(end)) if start < end => &lines[start..end],
                _ => &[],
            };
            (shown, usize::try_from(start).map_or(usize::MAX, |s| s.saturating_add(1)))
        }
        _ => (&lines[..], 1),
    };
    file_header(path) + &numbered(shown.iter().copied(), first)
}

/// Lists a directory two levels deep: the directory itself, then each entry in name order,
/// each directory of the first level followed by its own entries. Names starting with `.` are
/// left out, with everything below them. Files show their size, directories
/// [`DIRECTORY_SIZE`].
async fn directory_view(memory: &ScopedMemory, path: &MemoryPath<'_>) -> Result<String, ToolError> {
    let prefix = path.dir_prefix().unwrap_or_default();
    let mut tree = Tree::default();
    let mut page = PageRequest::new(MAX_PAGE_LIMIT).prefix(prefix.clone());
    let mut read = 0;
    let mut stopped = false;
    loop {
        // Keys and sizes only: a listing of large files reads none of their contents.
        let result = memory.list_keys(page.clone()).await.map_err(error::store("view", false))?;
        read += result.items.len();
        for item in &result.items {
            let bytes = usize::try_from(item.content_len).unwrap_or(usize::MAX);
            tree.add(&item.key[prefix.len()..], bytes);
        }
        match result.next_cursor {
            Some(_) if read >= MAX_LISTED_FILES => {
                stopped = true;
                break;
            }
            Some(cursor) => page = page.after(cursor),
            None => break,
        }
    }
    let mut lines = vec![format!("{DIRECTORY_SIZE}\t{}", path.raw)];
    tree.render(path.raw, &mut lines);
    if stopped {
        lines.push(format!(
            "(The listing stops after the first {MAX_LISTED_FILES} files below {}; view a \
             directory inside it to see the rest.)",
            path.raw
        ));
    }
    Ok(listing_header(path.raw) + &lines.join("\n"))
}

/// The first two levels below a directory.
#[derive(Debug, Default)]
struct Tree {
    entries: BTreeMap<String, Entry<BTreeMap<String, Entry<bool>>>>,
}

/// One name at one level: a file (its size) and/or a directory (below the first level, only
/// whether one exists).
#[derive(Debug, Default)]
struct Entry<D> {
    file: Option<usize>,
    dir: Option<D>,
}

fn hidden(name: &str) -> bool {
    name.starts_with('.')
}

impl Tree {
    /// Adds the file at `relative` (its key below the directory) of `bytes` bytes.
    fn add(&mut self, relative: &str, bytes: usize) {
        if !is_file_path(relative) {
            return;
        }
        let mut names = relative.split('/');
        let Some(first) = names.next().filter(|name| !hidden(name)) else {
            return;
        };
        let entry = self.entries.entry(first.to_owned()).or_default();
        let Some(second) = names.next() else {
            entry.file = Some(bytes);
            return;
        };
        let below = entry.dir.get_or_insert_with(BTreeMap::new);
        if hidden(second) {
            return;
        }
        let entry = below.entry(second.to_owned()).or_default();
        match names.next() {
            None => entry.file = Some(bytes),
            Some(_) => entry.dir = Some(true),
        }
    }

    /// Appends the listing's lines under the directory shown as `base`.
    fn render(&self, base: &str, lines: &mut Vec<String>) {
        for (name, entry) in &self.entries {
            if let Some(bytes) = entry.file {
                lines.push(format!("{}\t{base}/{name}", size(bytes)));
            }
            let Some(below) = &entry.dir else { continue };
            lines.push(format!("{DIRECTORY_SIZE}\t{base}/{name}/"));
            for (inner, entry) in below {
                if let Some(bytes) = entry.file {
                    lines.push(format!("{}\t{base}/{name}/{inner}", size(bytes)));
                }
                if entry.dir.is_some() {
                    lines.push(format!("{DIRECTORY_SIZE}\t{base}/{name}/{inner}/"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(content: &str, range: Option<&[i64]>) -> String {
        file_view("/memories/f", content, range).split_once('\n').unwrap().1.to_owned()
    }

    #[test]
    fn view_ranges_select_lines_like_the_reference() {
        let content = "a\nb\nc\nd\n";
        assert_eq!(shown(content, None), "     1\ta\n     2\tb\n     3\tc\n     4\td\n     5\t");
        assert_eq!(shown(content, Some(&[2, 3])), "     2\tb\n     3\tc");
        assert_eq!(shown(content, Some(&[0, 1])), "     1\ta");
        assert_eq!(shown(content, Some(&[4, -1])), "     4\td\n     5\t");
        assert_eq!(shown(content, Some(&[3, -2])), "     3\tc", "-2 leaves out the last two");
        assert_eq!(shown(content, Some(&[3, 2])), "");
        assert_eq!(shown(content, Some(&[9, 12])), "");
        assert_eq!(shown(content, Some(&[1, -99])), "");
        assert_eq!(shown(content, Some(&[i64::MIN, i64::MAX])).lines().count(), 5);
        assert_eq!(shown(content, Some(&[1])).lines().count(), 5, "not a range: everything");
        assert_eq!(shown("", None), "     1\t");
    }

    #[test]
    fn the_tree_keeps_two_levels_in_name_order_without_hidden_names() {
        let mut tree = Tree::default();
        for (key, bytes) in [
            ("b.md", 10),
            ("a/x.md", 2048),
            ("a/deep/er/file", 1),
            ("a/.secret", 1),
            ("a.md", 0),
            ("a-b", 1),
            (".hidden/x", 1),
            ("c//bad", 1),
        ] {
            tree.add(key, bytes);
        }
        let mut lines = Vec::new();
        tree.render("/memories", &mut lines);
        assert_eq!(
            lines,
            [
                "4K\t/memories/a/",
                "4K\t/memories/a/deep/",
                "2K\t/memories/a/x.md",
                "1B\t/memories/a-b",
                "0B\t/memories/a.md",
                "10B\t/memories/b.md",
            ]
        );
    }
}
