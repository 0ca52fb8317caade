//! Memory paths: what the model writes (`/memories/notes/a.md`) and the key that stores it
//! (`notes/a.md`).
//!
//! A path is checked and normalized the way the reference implementation resolves it on a
//! real disk, without a disk: it must start with `/memories`; empty and `.` segments are
//! dropped and `..` removes the segment before it; the result must be `/memories` or below it.
//! The key is what follows `/memories/`. Directories are key prefixes: the directory
//! `/memories/notes` holds the keys that start with `notes/`.

use super::error;
use crate::tools::ToolError;
use crate::validation::{self, MAX_KEY_BYTES};

/// The root every path lives under.
pub(super) const ROOT: &str = "/memories";

/// A checked memory path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MemoryPath<'a> {
    /// The path as the model wrote it; every message quotes it verbatim.
    pub(super) raw: &'a str,
    /// The key of the file at this path; empty for `/memories` itself.
    pub(super) key: String,
}

impl<'a> MemoryPath<'a> {
    /// Checks `raw` and finds its key.
    ///
    /// # Errors
    /// The reference's messages for a path outside `/memories`, and ours for a
    /// percent-encoded dot, slash, backslash or percent sign (refused outright, so no layer
    /// that decodes it later can turn it into a traversal) and for a key over the key rules.
    pub(super) fn parse(raw: &'a str) -> Result<Self, ToolError> {
        if !raw.starts_with(ROOT) {
            return Err(error::outside_root(raw));
        }
        if has_encoded_separator(raw) {
            return Err(error::escapes_root(raw));
        }
        let mut segments: Vec<&str> = Vec::new();
        for segment in raw.split('/') {
            match segment {
                "" | "." => {}
                // `..` at the top would leave the file system: an escape, as on disk.
                ".." => {
                    segments.pop().ok_or_else(|| error::escapes_root(raw))?;
                }
                name => segments.push(name),
            }
        }
        // `/memoriesX` and `/memories/../X` both end up outside the root.
        let Some((&"memories", below)) = segments.split_first() else {
            return Err(error::escapes_root(raw));
        };
        let key = below.join("/");
        if !key.is_empty() && validation::key(&key).is_err() {
            return Err(error::bad_path(raw, key.len() > MAX_KEY_BYTES));
        }
        Ok(Self { raw, key })
    }

    /// True for `/memories` itself.
    pub(super) fn is_root(&self) -> bool {
        self.key.is_empty()
    }

    /// The key prefix of the directory at this path (`notes/`, or empty for the root);
    /// `None` when it would be longer than a key, so no file can be inside.
    pub(super) fn dir_prefix(&self) -> Option<String> {
        dir_prefix(&self.key)
    }

    /// The keys of the directories above this path, nearest the root first: `a` and `a/b`
    /// for `a/b/c.md`.
    pub(super) fn ancestors(&self) -> impl Iterator<Item = &str> {
        self.key.match_indices('/').map(|(at, _)| &self.key[..at])
    }
}

/// The key prefix of the directory whose key is `key` (empty for the root); `None` when it
/// would be longer than a key.
pub(super) fn dir_prefix(key: &str) -> Option<String> {
    if key.is_empty() {
        return Some(String::new());
    }
    (key.len() < MAX_KEY_BYTES).then(|| format!("{key}/"))
}

/// The path of the file or directory whose key is `key`, as messages show it.
pub(super) fn display(key: &str) -> String {
    if key.is_empty() {
        ROOT.to_owned()
    } else {
        format!("{ROOT}/{key}")
    }
}

/// True when `relative` (a key, or the part of one below a directory) is a path this tool
/// can name: every segment non-empty and neither `.` nor `..`. Keys written through other
/// interfaces that are not (`a//b`, `/x`, `../y`) are left out of listings and directory
/// operations.
pub(super) fn is_file_path(relative: &str) -> bool {
    relative.split('/').all(|segment| !matches!(segment, "" | "." | ".."))
}

/// True when `raw` holds a percent escape of `.`, `/`, `\` or `%` (`%2e`, `%2F`, `%5c`,
/// `%25`, any case): the spellings of a traversal that some layer might decode.
fn has_encoded_separator(raw: &str) -> bool {
    raw.as_bytes().windows(3).any(|w| {
        w[0] == b'%'
            && matches!(
                (w[1].to_ascii_lowercase(), w[2].to_ascii_lowercase()),
                (b'2', b'e' | b'f' | b'5') | (b'5', b'c')
            )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(raw: &str) -> Result<String, String> {
        MemoryPath::parse(raw).map(|p| p.key).map_err(|e| e.message().to_owned())
    }

    #[test]
    fn paths_map_to_keys_as_a_disk_resolves_them() {
        assert_eq!(key("/memories").unwrap(), "");
        assert_eq!(key("/memories/").unwrap(), "");
        assert_eq!(key("/memories/notes/a.md").unwrap(), "notes/a.md");
        assert_eq!(key("/memories//notes/./a.md/").unwrap(), "notes/a.md");
        assert_eq!(key("/memories/x/../a.md").unwrap(), "a.md");
        assert_eq!(key("/memories/../memories/a.md").unwrap(), "a.md");
        assert_eq!(key("/memories/a\\b 50%.md").unwrap(), "a\\b 50%.md");
    }

    #[test]
    fn escapes_and_foreign_roots_are_refused_with_the_reference_messages() {
        assert_eq!(
            key("/etc/passwd").unwrap_err(),
            "Path must start with /memories, got: /etc/passwd"
        );
        assert_eq!(
            key("memories/a").unwrap_err(),
            "Path must start with /memories, got: memories/a"
        );
        for raw in ["/memories/..", "/memories/../x", "/memories/../../memories/x", "/memoriesx"] {
            assert_eq!(
                key(raw).unwrap_err(),
                format!("Path {raw} would escape /memories directory")
            );
        }
        for raw in [
            "/memories/%2e%2e/x",
            "/memories/%2E./x",
            "/memories/a%2fb",
            "/memories/a%5Cb",
            "/memories/%252e",
        ] {
            assert_eq!(
                key(raw).unwrap_err(),
                format!("Path {raw} would escape /memories directory")
            );
        }
    }

    #[test]
    fn keys_follow_the_key_rules() {
        let longest = format!("/memories/{}", "k".repeat(MAX_KEY_BYTES));
        assert_eq!(key(&longest).unwrap().len(), MAX_KEY_BYTES);
        let too_long = format!("/memories/{}", "k".repeat(MAX_KEY_BYTES + 1));
        assert!(key(&too_long).unwrap_err().contains("256 bytes"));
        assert!(key("/memories/a\nb").unwrap_err().contains("control characters"));
    }

    #[test]
    fn directories_are_prefixes_and_ancestors_are_listed_from_the_root() {
        let path = MemoryPath::parse("/memories/a/b/c.md").unwrap();
        assert_eq!(path.ancestors().collect::<Vec<_>>(), ["a", "a/b"]);
        assert_eq!(path.dir_prefix().as_deref(), Some("a/b/c.md/"));
        assert_eq!(MemoryPath::parse("/memories").unwrap().dir_prefix().as_deref(), Some(""));
        assert_eq!(dir_prefix(&"k".repeat(MAX_KEY_BYTES)), None);
        assert!(is_file_path("a/b.md") && is_file_path(".hidden/x"));
        assert!(!is_file_path("a//b") && !is_file_path("/x") && !is_file_path("a/../b"));
    }
}
