//! How a stored row becomes a [`MemoryRecord`]: the column list every record query selects,
//! the decoding of a row, revision tokens to and from the database-wide counter, and
//! timestamps (integer microseconds since the Unix epoch).
//!
//! Writing goes the other way in [`super::statements`], which binds the same values.

use rusqlite::Row;

use super::error::{detected, storage, PROVIDER};
use crate::error::{MemoryError, Result};
use crate::record::{MemoryRecord, Metadata, Revision, Source};
use crate::scope::MemoryScope;
use crate::time::Timestamp;

/// The columns a record is read from, in the order [`decode`] expects. A macro, so the SQL
/// text of [`super::statements`] can be spelled with `concat!` at compile time.
macro_rules! record_columns {
    () => {
        "key, content, metadata, revision, created_at, updated_at, expires_at, \
         source_session, source_invocation, source_agent"
    };
}
pub(super) use record_columns;

/// How many columns [`record_columns!`] selects: a query may select more after them.
pub(super) const RECORD_COLUMN_COUNT: usize = 10;

/// The revision token of counter value `n`: lowercase hex without leading zeros.
pub(super) fn revision_token(n: i64) -> Result<Revision> {
    u64::try_from(n)
        .map(|n| Revision::from_counter(n, 16))
        .map_err(|_| detected("a stored revision is unreadable"))
}

/// The counter value of a token this provider issued; `None` for any other token, which then
/// matches no record.
pub(super) fn revision_number(revision: &Revision) -> Option<i64> {
    let token = revision.as_str();
    let n = i64::from_str_radix(token, 16).ok()?;
    (n > 0 && format!("{n:x}") == token).then_some(n)
}

/// The timestamp stored as `micros`.
pub(super) fn timestamp(micros: i64) -> Result<Timestamp> {
    Timestamp::from_micros(micros).map_err(|_| detected("a stored timestamp is unreadable"))
}

/// Builds a record from a row selected with `record_columns!()`.
pub(super) fn decode(row: &Row<'_>, scope: &MemoryScope) -> Result<MemoryRecord> {
    let what = "reading a stored record failed";
    let get_text = |i: usize| row.get::<_, String>(i).map_err(storage(what));
    let get_opt_text = |i: usize| row.get::<_, Option<String>>(i).map_err(storage(what));
    let get_int = |i: usize| row.get::<_, i64>(i).map_err(storage(what));
    // Parsed from the row's own text: no copy of it is made first.
    let metadata_text = row.get_ref(2).and_then(|v| Ok(v.as_str()?)).map_err(storage(what))?;
    let metadata: Metadata = serde_json::from_str(metadata_text)
        .map_err(|err| MemoryError::storage_from(PROVIDER, "stored metadata is unreadable", err))?;
    let expires_at = row.get::<_, Option<i64>>(6).map_err(storage(what))?;
    Ok(MemoryRecord {
        scope: scope.clone(),
        key: get_text(0)?,
        content: get_text(1)?,
        metadata,
        revision: revision_token(get_int(3)?)?,
        created_at: timestamp(get_int(4)?)?,
        updated_at: timestamp(get_int(5)?)?,
        expires_at: expires_at.map(timestamp).transpose()?,
        source: Source {
            session_id: get_opt_text(7)?,
            invocation_id: get_opt_text(8)?,
            agent: get_opt_text(9)?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_tokens_round_trip_and_reject_lookalikes() {
        let token = revision_token(255).expect("valid");
        assert_eq!(token.as_str(), "ff");
        assert_eq!(revision_number(&token), Some(255));
        for foreign in ["0ff", "FF", "0", "-1", "zz", "ffffffffffffffffff"] {
            let revision = Revision::new(foreign).expect("printable");
            assert_eq!(revision_number(&revision), None, "{foreign}");
        }
    }

    #[test]
    fn the_column_count_matches_the_column_list() {
        assert_eq!(record_columns!().split(',').count(), RECORD_COLUMN_COUNT);
    }
}
