//! Every input rule, in one place. Every provider calls these before any I/O, so bad input is
//! rejected the same way everywhere and changes nothing.
//!
//! All sizes are UTF-8 byte counts, never character counts: a key of 64 four-byte characters
//! (256 bytes) passes, one more byte fails.
//!
//! | input | rule |
//! | --- | --- |
//! | `application_id`, `user_id`, `namespace`, source fields | 1 to [`MAX_ID_BYTES`] bytes, no control characters |
//! | `key` | 1 to [`MAX_KEY_BYTES`] bytes, no control characters |
//! | list `prefix` | empty (every key), or a key: at most [`MAX_KEY_BYTES`] bytes, no control characters |
//! | `content` | at most [`MAX_CONTENT_BYTES`] bytes, no NUL |
//! | `metadata` | a JSON object, nested at most [`MAX_METADATA_DEPTH`] deep, no NUL in any string or name |
//! | `metadata` + `source` | at most [`MAX_METADATA_SOURCE_BYTES`] bytes together as compact JSON |
//! | `expires_at` | after the provider's "now" |
//! | `limit` | 1 to [`MAX_PAGE_LIMIT`] |
//! | search `query` | 1 to [`MAX_QUERY_BYTES`] bytes, no NUL |
//! | revision | 1 to [`MAX_REVISION_BYTES`] printable ASCII bytes |
//! | cursor token | 1 to [`MAX_CURSOR_BYTES`] printable ASCII bytes (the core's cursors, or a provider's own) |
//!
//! NUL (U+0000) is rejected everywhere because PostgreSQL cannot store it in text; rejecting it
//! in the shared rules means no provider ever surfaces it as a storage error.
//!
//! This module is the leaf of the crate: it knows strings, JSON values, sizes and instants
//! (as microseconds), and nothing of the vocabulary types. The checks of whole requests are
//! methods of those types, built from these rules:
//! [`MemoryWrite::validate`](crate::MemoryWrite::validate) for a `put`,
//! [`Source::validate`](crate::Source::validate) for provenance, and
//! [`PageRequestExt::key_page`](crate::provider::PageRequestExt::key_page) and
//! [`PageRequestExt::namespace_page`](crate::provider::PageRequestExt::namespace_page) for pages (which also
//! check the cursor against the operation and scope).

use serde_json::Value;

use crate::error::{MemoryError, Result};

/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// Longest content, in bytes (64 KiB).
pub const MAX_CONTENT_BYTES: usize = 65_536;
/// Largest metadata plus source, in bytes of compact JSON (16 KiB).
pub const MAX_METADATA_SOURCE_BYTES: usize = 16_384;
/// Deepest nesting of metadata values; the object itself is depth 1.
pub const MAX_METADATA_DEPTH: usize = 32;
/// Longest application id, user id, namespace or source field, in bytes.
pub const MAX_ID_BYTES: usize = 128;
/// Largest page.
pub const MAX_PAGE_LIMIT: usize = 100;
/// Longest revision token, in bytes.
pub const MAX_REVISION_BYTES: usize = 128;
/// Longest cursor token, in bytes: the core's own cursors (a header and a 256-byte key,
/// base64 encoded) fit with room, and so must a provider's own tokens.
pub const MAX_CURSOR_BYTES: usize = 512;
/// Longest search query, in bytes (1 KiB). A longer query says nothing a shorter one cannot,
/// and the length bounds what one comparison costs the datastore.
pub const MAX_QUERY_BYTES: usize = 1_024;
/// Longest relative expiry the tools (`expires_in_seconds`) and the command line
/// (`--expires-in`) accept: ten years of 365 days, in seconds. Longer is refused rather than
/// capped: a caller asking for a century has made a mistake worth hearing about.
pub const MAX_EXPIRES_IN_SECONDS: u64 = 10 * 365 * 24 * 60 * 60;

/// Checks an application id, user id, namespace or source field.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `field`.
pub fn id(field: &'static str, value: &str) -> Result<()> {
    if value.is_empty() || value.len() > MAX_ID_BYTES {
        return Err(MemoryError::invalid(field, format!("must be 1 to {MAX_ID_BYTES} bytes")));
    }
    no_control(field, value)
}

/// Checks a key.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `key`.
pub fn key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(MemoryError::invalid("key", format!("must be 1 to {MAX_KEY_BYTES} bytes")));
    }
    no_control("key", key)
}

/// Checks a key prefix for `list`: empty (no restriction), or what a key may be.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `prefix`.
pub fn key_prefix(prefix: &str) -> Result<()> {
    at_most_bytes("prefix", prefix, MAX_KEY_BYTES)?;
    no_control("prefix", prefix)
}

fn no_control(field: &'static str, value: &str) -> Result<()> {
    if value.chars().any(char::is_control) {
        return Err(MemoryError::invalid(field, "must not contain control characters"));
    }
    Ok(())
}

fn at_most_bytes(field: &'static str, value: &str, max: usize) -> Result<()> {
    if value.len() > max {
        return Err(MemoryError::invalid(field, format!("must be at most {max} bytes")));
    }
    Ok(())
}

fn no_nul(field: &'static str, value: &str) -> Result<()> {
    if value.contains('\0') {
        return Err(MemoryError::invalid(field, "must not contain the NUL character"));
    }
    Ok(())
}

/// Checks a revision token that came from outside.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `revision`.
pub fn revision_token(token: &str) -> Result<()> {
    printable_token("revision", token, MAX_REVISION_BYTES)
}

/// Checks the shape of a cursor token: 1 to [`MAX_CURSOR_BYTES`] printable ASCII bytes
/// (`!` to `~`: no space, no control character). That is all the core asks of a token before
/// the provider that made it judges it, so a provider may make its own
/// ([`Cursor`](crate::Cursor) carries it opaquely); the core's own cursors are base64url and
/// always pass.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `cursor`.
pub fn cursor_token(token: &str) -> Result<()> {
    printable_token("cursor", token, MAX_CURSOR_BYTES)
}

/// Checks that an opaque token is 1 to `max` bytes of printable ASCII.
fn printable_token(field: &'static str, token: &str, max: usize) -> Result<()> {
    if token.is_empty() || token.len() > max {
        return Err(MemoryError::invalid(field, format!("must be 1 to {max} bytes")));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(MemoryError::invalid(field, "must be printable ASCII"));
    }
    Ok(())
}

/// Checks content.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `content`.
pub fn content(content: &str) -> Result<()> {
    at_most_bytes("content", content, MAX_CONTENT_BYTES)?;
    no_nul("content", content)
}

/// Checks metadata's shape (a JSON object, nested at most [`MAX_METADATA_DEPTH`] deep, no NUL
/// in any string or name) and returns its length as compact JSON, for [`metadata_budget`].
///
/// # Errors
/// [`MemoryError::Invalid`] naming `metadata`.
pub fn metadata(metadata: &Value) -> Result<usize> {
    if !metadata.is_object() {
        return Err(MemoryError::invalid("metadata", "must be a JSON object"));
    }
    check_json_tree(metadata)?;
    Ok(compact_json_len(metadata))
}

/// Checks the budget metadata shares with the write's source: `bytes` is the compact JSON
/// length of the metadata plus that of a non-empty source.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `metadata`.
pub fn metadata_budget(bytes: usize) -> Result<()> {
    if bytes > MAX_METADATA_SOURCE_BYTES {
        return Err(MemoryError::invalid(
            "metadata",
            format!(
                "together with source must be at most {MAX_METADATA_SOURCE_BYTES} bytes as compact JSON"
            ),
        ));
    }
    Ok(())
}

/// Walks the tree without recursion: depth and NUL checks must not themselves overflow the
/// stack on hostile input.
fn check_json_tree(root: &Value) -> Result<()> {
    let mut stack = vec![(root, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::String(s) => no_nul("metadata", s)?,
            Value::Array(_) | Value::Object(_) if depth > MAX_METADATA_DEPTH => {
                return Err(MemoryError::invalid(
                    "metadata",
                    format!("must be nested at most {MAX_METADATA_DEPTH} levels deep"),
                ));
            }
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(map) => {
                for (name, v) in map {
                    no_nul("metadata", name)?;
                    stack.push((v, depth + 1));
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    Ok(())
}

/// The length of `value` as compact JSON, in bytes.
pub fn compact_json_len(value: &impl serde::Serialize) -> usize {
    // Writing into a counter avoids building the string just to measure it.
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Serializing plain data (JSON values, strings) into a counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Checks an expiry against the provider's "now", both in microseconds since the Unix epoch.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `expires_at`.
pub fn expires_at(expires_at_micros: i64, now_micros: i64) -> Result<()> {
    if expires_at_micros <= now_micros {
        return Err(MemoryError::invalid("expires_at", "must be in the future"));
    }
    Ok(())
}

/// Checks a page size.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `limit`.
pub fn limit(limit: usize) -> Result<()> {
    if !(1..=MAX_PAGE_LIMIT).contains(&limit) {
        return Err(MemoryError::invalid("limit", format!("must be 1 to {MAX_PAGE_LIMIT}")));
    }
    Ok(())
}

/// Checks a search query.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `query`.
pub fn query(query: &str) -> Result<()> {
    if query.is_empty() {
        return Err(MemoryError::invalid("query", "must not be empty"));
    }
    at_most_bytes("query", query, MAX_QUERY_BYTES)?;
    no_nul("query", query)
}

/// Checks the ids of an application user (for `delete_user` and `list_namespaces`).
///
/// # Errors
/// [`MemoryError::Invalid`] naming `application_id` or `user_id`.
pub fn user(application_id: &str, user_id: &str) -> Result<()> {
    id("application_id", application_id)?;
    id("user_id", user_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_limit_counts_bytes() {
        let four_byte = "𝄞".repeat(64);
        assert_eq!(four_byte.len(), 256);
        assert!(key(&four_byte).is_ok());
        assert!(key(&format!("{four_byte}a")).is_err());
        assert!(key("").is_err());
        assert!(key("a\nb").is_err());
        assert!(key("a\u{7f}").is_err());
    }

    #[test]
    fn metadata_depth_is_bounded() {
        let mut deep = json!(1);
        for _ in 0..200 {
            deep = json!([deep]);
        }
        let err = metadata(&json!({ "a": deep })).unwrap_err();
        assert!(err.to_string().contains("nested"));
        let mut ok = json!(1);
        for _ in 0..(MAX_METADATA_DEPTH - 1) {
            ok = json!([ok]);
        }
        assert!(metadata(&json!({ "a": ok })).is_ok());
    }

    #[test]
    fn metadata_and_source_share_one_budget() {
        let big = "x".repeat(MAX_METADATA_SOURCE_BYTES - 20);
        let meta = json!({ "k": big });
        let meta_bytes = metadata(&meta).unwrap();
        assert!(metadata_budget(meta_bytes).is_ok());
        let source_bytes = compact_json_len(&json!({"agent": "agent-with-a-name"}));
        let err = metadata_budget(meta_bytes + source_bytes).unwrap_err();
        assert!(matches!(err, MemoryError::Invalid { field: "metadata", .. }));
    }
}
