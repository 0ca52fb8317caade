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
//! | `content` | at most [`MAX_CONTENT_BYTES`] bytes, no NUL |
//! | `metadata` | a JSON object, nested at most [`MAX_METADATA_DEPTH`] deep, no NUL in any string or name |
//! | `metadata` + `source` | at most [`MAX_METADATA_SOURCE_BYTES`] bytes together as compact JSON |
//! | `expires_at` | after the provider's "now" |
//! | `limit` | 1 to [`MAX_PAGE_LIMIT`] |
//! | search `query` | 1 to [`MAX_CONTENT_BYTES`] bytes, no NUL |
//! | `cursor` | produced by the same operation for the same scope |
//! | revision | 1 to [`MAX_REVISION_BYTES`] printable ASCII bytes |
//!
//! NUL (U+0000) is rejected everywhere because PostgreSQL cannot store it in text; rejecting it
//! in the shared rules means no provider ever surfaces it as a storage error.

use serde_json::Value;

use crate::error::{MemoryError, Result};
use crate::page::{CursorKind, PageRequest};
use crate::record::Source;
use crate::scope::MemoryScope;
use crate::time::Timestamp;
use crate::write::MemoryWrite;

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

fn no_control(field: &'static str, value: &str) -> Result<()> {
    if value.chars().any(char::is_control) {
        return Err(MemoryError::invalid(field, "must not contain control characters"));
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
    if token.is_empty() || token.len() > MAX_REVISION_BYTES {
        return Err(MemoryError::invalid(
            "revision",
            format!("must be 1 to {MAX_REVISION_BYTES} bytes"),
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(MemoryError::invalid("revision", "must be printable ASCII"));
    }
    Ok(())
}

/// Checks content.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `content`.
pub fn content(content: &str) -> Result<()> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(MemoryError::invalid(
            "content",
            format!("must be at most {MAX_CONTENT_BYTES} bytes"),
        ));
    }
    no_nul("content", content)
}

/// Checks a source's fields.
///
/// # Errors
/// [`MemoryError::Invalid`] naming the source field.
pub fn source(source: &Source) -> Result<()> {
    let fields = [
        ("source.session_id", &source.session_id),
        ("source.invocation_id", &source.invocation_id),
        ("source.agent", &source.agent),
    ];
    for (field, value) in fields {
        if let Some(value) = value {
            id(field, value)?;
        }
    }
    Ok(())
}

/// Checks metadata: an object, not nested too deep, no NUL, and within the size shared with
/// `source`.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `metadata` (or the source field at fault).
pub fn metadata_and_source(metadata: &Value, source_value: &Source) -> Result<()> {
    if !metadata.is_object() {
        return Err(MemoryError::invalid("metadata", "must be a JSON object"));
    }
    check_json_tree(metadata)?;
    source(source_value)?;
    let metadata_bytes = compact_len(metadata);
    // An empty source stores nothing, so it costs nothing.
    let source_bytes = if source_value.is_empty() {
        0
    } else {
        compact_len(&serde_json::to_value(source_value).unwrap_or(Value::Null))
    };
    if metadata_bytes + source_bytes > MAX_METADATA_SOURCE_BYTES {
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

fn compact_len(value: &Value) -> usize {
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
    // Serializing a `Value` cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Checks an expiry against the provider's "now".
///
/// # Errors
/// [`MemoryError::Invalid`] naming `expires_at`.
pub fn expires_at(expires_at: Timestamp, now: Timestamp) -> Result<()> {
    if expires_at <= now {
        return Err(MemoryError::invalid("expires_at", "must be in the future"));
    }
    Ok(())
}

/// Checks everything about a `put`: key, content, metadata, source, expiry and the expected
/// revision. `now` is the provider's current instant (its injected clock, or the system clock
/// for providers whose datastore keeps time).
///
/// # Errors
/// [`MemoryError::Invalid`] naming the first field at fault.
pub fn put(key_value: &str, write: &MemoryWrite, now: Timestamp) -> Result<()> {
    key(key_value)?;
    content(write.content())?;
    metadata_and_source(write.metadata_value(), write.source_value())?;
    if let Some(at) = write.expiry_value() {
        expires_at(at, now)?;
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

/// Checks a page request over one scope's keys and returns its limit and the key it continues
/// after.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `limit` or `cursor`.
pub fn key_page(
    kind: CursorKind,
    scope: &MemoryScope,
    page: &PageRequest,
) -> Result<(usize, Option<String>)> {
    limit(page.limit)?;
    let after = match &page.after {
        Some(cursor) => Some(cursor.position(kind, scope)?),
        None => None,
    };
    Ok((page.limit, after))
}

/// Checks a search query.
///
/// # Errors
/// [`MemoryError::Invalid`] naming `query`.
pub fn query(query: &str) -> Result<()> {
    if query.is_empty() {
        return Err(MemoryError::invalid("query", "must not be empty"));
    }
    if query.len() > MAX_CONTENT_BYTES {
        return Err(MemoryError::invalid(
            "query",
            format!("must be at most {MAX_CONTENT_BYTES} bytes"),
        ));
    }
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

/// Checks a page request over one application user's namespaces and returns its limit and the
/// namespace it continues after (empty for the default namespace).
///
/// # Errors
/// [`MemoryError::Invalid`] naming `application_id`, `user_id`, `limit` or `cursor`.
pub fn namespace_page(
    application_id: &str,
    user_id: &str,
    page: &PageRequest,
) -> Result<(usize, Option<String>)> {
    user(application_id, user_id)?;
    limit(page.limit)?;
    let after = match &page.after {
        Some(cursor) => Some(cursor.namespace_position(application_id, user_id)?),
        None => None,
    };
    Ok((page.limit, after))
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
        let err = metadata_and_source(&json!({ "a": deep }), &Source::default()).unwrap_err();
        assert!(err.to_string().contains("nested"));
        let mut ok = json!(1);
        for _ in 0..(MAX_METADATA_DEPTH - 1) {
            ok = json!([ok]);
        }
        assert!(metadata_and_source(&json!({ "a": ok }), &Source::default()).is_ok());
    }

    #[test]
    fn metadata_and_source_share_one_budget() {
        let big = "x".repeat(MAX_METADATA_SOURCE_BYTES - 20);
        let meta = json!({ "k": big });
        assert!(metadata_and_source(&meta, &Source::default()).is_ok());
        let err =
            metadata_and_source(&meta, &Source::default().agent("agent-with-a-name")).unwrap_err();
        assert!(matches!(err, MemoryError::Invalid { field: "metadata", .. }));
    }
}
