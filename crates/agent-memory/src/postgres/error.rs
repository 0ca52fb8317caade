//! The one place driver and pool errors become [`MemoryError`]s.

use std::fmt;

use crate::error::{BoxError, MemoryError};

/// The provider name in [`MemoryError::Storage`].
pub(crate) const PROVIDER: &str = "postgres";

/// Maps a driver, pool or row-decoding error to [`MemoryError::Storage`] with a fixed `what`
/// and the driver's error as its source.
///
/// The driver's message (which may quote SQL, values or server detail) is reachable only
/// through [`std::error::Error::source`]; `Display` shows `what` alone. Connection strings and
/// passwords are never part of either: the driver does not echo them and we never format them.
pub(crate) fn storage<E: Into<BoxError>>(what: &'static str) -> impl FnOnce(E) -> MemoryError {
    move |err| MemoryError::storage_from(PROVIDER, what, err)
}

/// Why a table failed the schema check: which columns, types or objects differ. Kept as the
/// source of the [`MemoryError::Storage`] that `start()` returns.
#[derive(Debug)]
pub(crate) struct SchemaMismatch(pub(crate) String);

impl fmt::Display for SchemaMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SchemaMismatch {}

/// A value read back from the table that this code could not have written.
#[derive(Debug)]
pub(crate) struct CorruptRow(pub(crate) &'static str);

impl fmt::Display for CorruptRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stored row is malformed: {}", self.0)
    }
}

impl std::error::Error for CorruptRow {}
