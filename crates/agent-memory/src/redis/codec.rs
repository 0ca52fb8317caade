//! A stored record string to and from a [`MemoryRecord`], revision tokens, timestamps, and the
//! shapes of the scripts' replies.
//!
//! A record is one string: a header of fixed-width, zero-padded decimal fields, then the payload
//! (the table is in the provider's guide, "Data model"). The client writes everything from the
//! expiry on ([`encode_tail`]); the `put` script puts the revision and both timestamps in front
//! of it and returns them ([`decode_head`]); `get`, `list` and `search` return whole strings
//! ([`decode_record`]).

use std::io::Write;

use redis::Value;

use super::error::{malformed_record, unexpected_reply};
use crate::error::{MemoryError, Result};
use crate::page::KeyPage;
use crate::record::{MemoryRecord, Metadata, Revision, Source};
use crate::scope::MemoryScope;
use crate::time::Timestamp;

/// Width of each number in a stored record's header: enough for every [`Timestamp`] (at most
/// 18 digits) and for revisions (server time in microseconds, 16 digits until the year 2286).
pub(super) const NUMBER_WIDTH: usize = 18;
/// Width of the content and metadata lengths in a stored record's header.
pub(super) const LENGTH_WIDTH: usize = 8;
/// Where the expiry starts: after revision, created_at and updated_at. The client writes the
/// record from here on; the script writes the three numbers before it.
pub(super) const EXPIRY_AT: usize = 3 * NUMBER_WIDTH;
/// Where the content starts: after the expiry and the content and source lengths.
pub(super) const PAYLOAD_AT: usize = EXPIRY_AT + NUMBER_WIDTH + 2 * LENGTH_WIDTH;

/// The source as stored: empty for none, JSON otherwise.
pub(super) fn encode_source(source: &Source) -> Result<Vec<u8>> {
    if source.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::to_vec(source).map_err(|_| malformed_record())
}

/// Writes a record from the expiry on, in the stored layout: expiry, content length, source
/// length (from [`encode_source`]), content, source, metadata JSON.
pub(super) fn encode_tail(
    out: &mut impl Write,
    expires_at: Option<Timestamp>,
    content: &str,
    source: &[u8],
    metadata: &Metadata,
) -> Result<()> {
    let expires = expires_at.map_or(0, |at| at.as_micros().unsigned_abs());
    write_number(out, NUMBER_WIDTH, expires)?;
    write_number(out, LENGTH_WIDTH, content.len() as u64)?;
    write_number(out, LENGTH_WIDTH, source.len() as u64)?;
    out.write_all(content.as_bytes()).map_err(|_| malformed_record())?;
    out.write_all(source).map_err(|_| malformed_record())?;
    serde_json::to_writer(out, metadata).map_err(|_| malformed_record())
}

/// The first three header fields `put` returns: revision, `created_at` and `updated_at`.
pub(super) fn decode_head(head: &[u8]) -> Result<(Revision, Timestamp, Timestamp)> {
    if head.len() != EXPIRY_AT {
        return Err(unexpected_reply());
    }
    let field = |i: usize| number(&head[i * NUMBER_WIDTH..(i + 1) * NUMBER_WIDTH]);
    Ok((Revision::from_counter(field(0)?, 10), timestamp(field(1)?)?, timestamp(field(2)?)?))
}

/// Decodes a stored record string with its key.
pub(super) fn decode_record(
    scope: &MemoryScope,
    key: String,
    stored: Value,
) -> Result<MemoryRecord> {
    let Value::BulkString(mut bytes) = stored else {
        return Err(unexpected_reply());
    };
    if bytes.len() < PAYLOAD_AT {
        return Err(malformed_record());
    }
    let field = |at: usize, width: usize| number(&bytes[at..at + width]);
    let revision = Revision::from_counter(field(0, NUMBER_WIDTH)?, 10);
    let created_at = timestamp(field(NUMBER_WIDTH, NUMBER_WIDTH)?)?;
    let updated_at = timestamp(field(2 * NUMBER_WIDTH, NUMBER_WIDTH)?)?;
    let expires_at = match field(EXPIRY_AT, NUMBER_WIDTH)? {
        0 => None,
        micros => Some(timestamp(micros)?),
    };
    let lengths = EXPIRY_AT + NUMBER_WIDTH;
    let content_len = usize::try_from(field(lengths, LENGTH_WIDTH)?);
    let source_len = usize::try_from(field(lengths + LENGTH_WIDTH, LENGTH_WIDTH)?);
    let (Ok(content_len), Ok(source_len)) = (content_len, source_len) else {
        return Err(malformed_record());
    };
    let content_end = PAYLOAD_AT + content_len;
    let source_end = content_end + source_len;
    if source_end > bytes.len() {
        return Err(malformed_record());
    }
    let source = &bytes[content_end..source_end];
    let source: Source = if source.is_empty() {
        Source::default()
    } else {
        serde_json::from_slice(source).map_err(|_| malformed_record())?
    };
    let metadata: Metadata =
        serde_json::from_slice(&bytes[source_end..]).map_err(|_| malformed_record())?;
    // The content reuses the reply's buffer.
    bytes.truncate(content_end);
    bytes.drain(..PAYLOAD_AT);
    let content = String::from_utf8(bytes).map_err(|_| malformed_record())?;
    Ok(MemoryRecord {
        scope: scope.clone(),
        key,
        content,
        metadata,
        revision,
        created_at,
        updated_at,
        expires_at,
        source,
    })
}

/// A fixed-width, zero-padded decimal field of a stored record.
fn number(field: &[u8]) -> Result<u64> {
    if field.is_empty() || !field.iter().all(u8::is_ascii_digit) {
        return Err(malformed_record());
    }
    // At most 18 digits: no overflow.
    Ok(field.iter().fold(0, |n, &d| n * 10 + u64::from(d - b'0')))
}

/// A stored timestamp field (µs since the epoch) as a [`Timestamp`].
fn timestamp(micros: u64) -> Result<Timestamp> {
    let micros = i64::try_from(micros).map_err(|_| malformed_record())?;
    Timestamp::from_micros(micros).map_err(|_| malformed_record())
}

/// Writes `value` as a fixed-width, zero-padded decimal field. Validation keeps every value
/// in range (timestamps have at most 18 digits, lengths at most 6); a value that would widen
/// the field is refused rather than stored misaligned.
fn write_number(out: &mut impl Write, width: usize, value: u64) -> Result<()> {
    // By hand rather than with `write!`: this runs three times per put. Widths are 8 and 18.
    if width > NUMBER_WIDTH || value >= (0..width).fold(1u64, |limit, _| limit * 10) {
        return Err(MemoryError::invalid("record", "a number does not fit the stored layout"));
    }
    let mut digits = [b'0'; NUMBER_WIDTH];
    let mut rest = value;
    for digit in digits.iter_mut().rev() {
        if rest == 0 {
            break;
        }
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    out.write_all(&digits[NUMBER_WIDTH - width..]).map_err(|_| malformed_record())
}

/// A revision token as the scripts compare it: the zero-padded header field. Tokens this store
/// never issues (not a canonical decimal of at most 18 digits) become `-`, which matches no
/// stored revision.
pub(super) fn padded_revision(revision: &Revision) -> Vec<u8> {
    let token = revision.as_str().as_bytes();
    let canonical = (1..=NUMBER_WIDTH).contains(&token.len())
        && token[0] != b'0'
        && token.iter().all(u8::is_ascii_digit);
    if !canonical {
        return b"-".to_vec();
    }
    let mut out = Vec::with_capacity(NUMBER_WIDTH);
    out.resize(NUMBER_WIDTH - token.len(), b'0');
    out.extend_from_slice(token);
    out
}

// The scripts' replies and arguments besides records.

/// A `ZRANGEBYLEX` lower bound: everything (`-`), or strictly after `after`.
pub(super) fn lower_bound(after: Option<&[u8]>) -> Vec<u8> {
    match after {
        Some(position) => [b"(".as_slice(), position].concat(),
        None => b"-".to_vec(),
    }
}

/// The `ZRANGEBYLEX` bounds of the keys `page` asks for: from strictly after its cursor, else
/// from its prefix (`[prefix`, or `-` for none), up to strictly before the prefix's end (or
/// `+` when it has none).
pub(super) fn page_bounds(page: &KeyPage) -> (Vec<u8>, Vec<u8>) {
    let start = match (&page.after, page.prefix.as_str()) {
        (Some(after), _) => lower_bound(Some(after.as_bytes())),
        (None, "") => b"-".to_vec(),
        (None, prefix) => [b"[".as_slice(), prefix.as_bytes()].concat(),
    };
    let end = match page.prefix_end() {
        Some(end) => [b"(".as_slice(), end.as_bytes()].concat(),
        None => b"+".to_vec(),
    };
    (start, end)
}

/// A text reply (a key or a cursor position).
pub(super) fn text(value: Value) -> Result<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes).map_err(|_| malformed_record()),
        Value::SimpleString(text) => Ok(text),
        _ => Err(unexpected_reply()),
    }
}

/// A text reply, or nil for none.
pub(super) fn opt_text(value: Value) -> Result<Option<String>> {
    match value {
        Value::Nil => Ok(None),
        value => text(value).map(Some),
    }
}

/// An integer reply.
pub(super) fn int(value: &Value) -> Result<i64> {
    match value {
        Value::Int(n) => Ok(*n),
        _ => Err(unexpected_reply()),
    }
}

/// A count reply, which the scripts never make negative.
pub(super) fn count(value: &Value) -> Result<u64> {
    u64::try_from(int(value)?).map_err(|_| unexpected_reply())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_issued_revision_tokens_are_padded_for_comparison() {
        let padded = |token: &str| padded_revision(&Revision::new(token).unwrap());
        assert_eq!(padded("1764500000000001"), b"001764500000000001");
        assert_eq!(padded("7"), b"000000000000000007");
        // Tokens the store never issues match no stored revision.
        for token in ["07", "0", "1x", "-1", "1234567890123456789"] {
            assert_eq!(padded(token), b"-", "{token}");
        }
    }

    #[test]
    fn a_stored_record_decodes_and_a_short_one_is_malformed() {
        let scope = MemoryScope::new("app", "user").unwrap();
        let mut stored = Vec::new();
        for value in [1_764_500_000_000_002_u64, 1_764_500_000_000_000, 1_764_500_000_000_002, 0] {
            write_number(&mut stored, NUMBER_WIDTH, value).unwrap();
        }
        let source = br#"{"agent":"a"}"#;
        write_number(&mut stored, LENGTH_WIDTH, 5).unwrap();
        write_number(&mut stored, LENGTH_WIDTH, source.len() as u64).unwrap();
        stored.extend_from_slice("h\u{e9}ll".as_bytes());
        stored.extend_from_slice(source);
        stored.extend_from_slice(br#"{"n":1}"#);
        let record = decode_record(&scope, "k".into(), Value::BulkString(stored.clone())).unwrap();
        assert_eq!(record.revision.as_str(), "1764500000000002");
        assert_eq!(record.created_at.as_micros(), 1_764_500_000_000_000);
        assert_eq!(record.content, "h\u{e9}ll");
        assert_eq!(record.source.agent.as_deref(), Some("a"));
        assert_eq!(record.metadata.get("n"), Some(&serde_json::json!(1)));
        assert!(record.expires_at.is_none());
        let (revision, created_at, _) = decode_head(&stored[..EXPIRY_AT]).unwrap();
        assert_eq!((revision, created_at), (record.revision.clone(), record.created_at));
        stored.truncate(PAYLOAD_AT - 1);
        assert!(decode_record(&scope, "k".into(), Value::BulkString(stored)).is_err());
        assert!(write_number(&mut Vec::new(), LENGTH_WIDTH, 100_000_000).is_err());
    }

    #[test]
    fn an_encoded_tail_behind_a_head_decodes_to_the_same_record() {
        let scope = MemoryScope::new("app", "user").unwrap();
        let mut stored = Vec::new();
        for value in [42_u64, 1_764_500_000_000_000, 1_764_500_000_000_001] {
            write_number(&mut stored, NUMBER_WIDTH, value).unwrap();
        }
        let expires = Timestamp::from_micros(1_864_500_000_000_000).unwrap();
        let metadata: Metadata = serde_json::from_str(r#"{"tag":"x"}"#).unwrap();
        let source = encode_source(&Source::default()).unwrap();
        assert!(source.is_empty(), "no source is stored as nothing");
        encode_tail(&mut stored, Some(expires), "content", &source, &metadata).unwrap();
        let record = decode_record(&scope, "k".into(), Value::BulkString(stored)).unwrap();
        assert_eq!(record.revision.as_str(), "42");
        assert_eq!(record.expires_at, Some(expires));
        assert_eq!(record.content, "content");
        assert_eq!(record.metadata, metadata);
        assert_eq!(record.source, Source::default());
    }
}
