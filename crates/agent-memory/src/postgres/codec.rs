//! A stored row to a [`MemoryRecord`] and the values bound for one: revision tokens and the
//! sequence numbers behind them, timestamps and the driver's `SystemTime`, page sizes, and the
//! error for a row this code could not have written.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio_postgres::types::FromSql;
use tokio_postgres::Row;

use super::error::{storage, PROVIDER};
use crate::error::{MemoryError, Result};
use crate::record::{MemoryRecord, Revision, Source};
use crate::scope::MemoryScope;
use crate::time::Timestamp;

/// A record from a row laid out as `key, content, metadata, source, revision, created_at,
/// updated_at, expires_at`.
pub(crate) fn record(scope: &MemoryScope, row: &Row) -> Result<MemoryRecord> {
    let metadata = match column::<Value>(row, 2)? {
        Value::Object(map) => map,
        _ => return Err(corrupt("metadata that is not an object")),
    };
    let source: Source =
        serde_json::from_value(column::<Value>(row, 3)?).map_err(|_| corrupt("a source"))?;
    Ok(MemoryRecord {
        scope: scope.clone(),
        key: column(row, 0)?,
        content: column(row, 1)?,
        metadata,
        revision: revision(column(row, 4)?)?,
        created_at: from_system_time(column(row, 5)?)?,
        updated_at: from_system_time(column(row, 6)?)?,
        expires_at: column::<Option<SystemTime>>(row, 7)?.map(from_system_time).transpose()?,
        source,
    })
}

/// Column `index` of `row`; a type or nullability the schema check should have excluded is a
/// `Storage` error, never a panic.
pub(crate) fn column<'a, T: FromSql<'a>>(row: &'a Row, index: usize) -> Result<T> {
    row.try_get(index).map_err(storage("a stored row could not be read"))
}

/// The driver's `timestamptz` value for a timestamp.
pub(crate) fn to_system_time(at: Timestamp) -> SystemTime {
    // Timestamps are never before the epoch.
    UNIX_EPOCH + Duration::from_micros(u64::try_from(at.as_micros()).unwrap_or(0))
}

/// A timestamp from a stored `timestamptz`, which may hold instants no [`Timestamp`] can.
pub(crate) fn from_system_time(at: SystemTime) -> Result<Timestamp> {
    let since = at.duration_since(UNIX_EPOCH).map_err(|_| corrupt("a timestamp before 1970"))?;
    i64::try_from(since.as_micros())
        .ok()
        .and_then(|micros| Timestamp::from_micros(micros).ok())
        .ok_or_else(|| corrupt("a timestamp after year 9999"))
}

/// The revision token of a stored sequence number: its decimal digits.
pub(crate) fn revision(number: i64) -> Result<Revision> {
    u64::try_from(number).map(|n| Revision::from_counter(n, 10)).map_err(|_| corrupt("a revision"))
}

/// The sequence number a revision token names; 0 (never issued) for a token this store could
/// not have produced, so the conditional statement finds no row and reports `Conflict`.
pub(crate) fn revision_number(revision: &Revision) -> i64 {
    let token = revision.as_str();
    token.parse::<i64>().ok().filter(|n| *n > 0 && n.to_string() == token).unwrap_or(0)
}

/// A count bound as a `LIMIT` (a `bigint`). Counts beyond `i64::MAX` cannot be stored anyway,
/// so saturating loses nothing.
pub(crate) fn limit_param(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The `Storage` error for a row holding a value this code could not have written.
pub(crate) fn corrupt(what: &'static str) -> MemoryError {
    MemoryError::storage_from(PROVIDER, "a stored row could not be read", CorruptRow(what))
}

/// A value read back from the table that this code could not have written; the source of the
/// error [`corrupt`] returns.
#[derive(Debug)]
struct CorruptRow(&'static str);

impl fmt::Display for CorruptRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stored row is malformed: {}", self.0)
    }
}

impl std::error::Error for CorruptRow {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_tokens_map_to_sequence_numbers() {
        assert_eq!(revision_number(&Revision::new("42").unwrap()), 42);
        assert_eq!(revision_number(&Revision::new("042").unwrap()), 0);
        assert_eq!(revision_number(&Revision::new("abc").unwrap()), 0);
        assert_eq!(revision_number(&Revision::new("-1").unwrap()), 0);
    }

    #[test]
    fn sequence_numbers_become_decimal_tokens_and_negative_ones_are_corrupt() {
        assert_eq!(revision(42).unwrap().as_str(), "42");
        assert_eq!(revision_number(&revision(7).unwrap()), 7);
        assert!(revision(-1).unwrap_err().is_storage());
    }

    #[test]
    fn timestamps_round_trip_through_system_time() {
        let at = Timestamp::from_micros(1_700_000_000_123_456).unwrap();
        assert_eq!(from_system_time(to_system_time(at)).unwrap(), at);
        let before_epoch = UNIX_EPOCH - Duration::from_secs(1);
        assert!(from_system_time(before_epoch).unwrap_err().is_storage());
    }
}
