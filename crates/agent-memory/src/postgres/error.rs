//! The one place driver and pool errors become [`MemoryError`]s.

use crate::error::{BoxError, MemoryError};

/// The provider name in [`MemoryError::Storage`].
pub(crate) const PROVIDER: &str = "postgres";

/// Maps a driver, pool or row-decoding error to [`MemoryError::Storage`] with a fixed `what`
/// and the driver's error as its source.
///
/// The driver's message (which may quote SQL, values or server detail) is reachable only
/// through [`std::error::Error::source`]; `Display` shows `what` alone. Connection URLs and
/// passwords are never part of either: the driver does not echo them and we never format them.
pub(crate) fn storage<E: Into<BoxError>>(what: &'static str) -> impl FnOnce(E) -> MemoryError {
    move |err| MemoryError::storage_from(PROVIDER, what, err)
}
