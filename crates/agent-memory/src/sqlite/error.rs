//! The one place SQLite errors become [`MemoryError`]s.

use rusqlite::ErrorCode;

use crate::error::MemoryError;

/// The provider name every SQLite error carries.
pub(super) const PROVIDER: &str = "sqlite";

/// A closure for `map_err` that maps a driver error to [`MemoryError::Storage`], keeping the
/// driver error as its source.
///
/// `what` is the fixed description of the step that failed. A few error codes say more than
/// the step does (the file is locked, read-only, not a database, the disk is full), and for
/// those the description names the condition instead. Neither ever contains SQL, a path or
/// memory content; the driver's message (which may) is only reachable through `source()`.
pub(super) fn storage(what: &'static str) -> impl FnOnce(rusqlite::Error) -> MemoryError {
    move |err| MemoryError::storage_from(PROVIDER, describe(what, &err), err)
}

/// The fixed description [`storage`] gives `err` when it happened during `what`.
pub(super) fn describe(what: &'static str, err: &rusqlite::Error) -> &'static str {
    match err.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            "the database stayed locked longer than the busy timeout"
        }
        Some(ErrorCode::ReadOnly) => "the database is read-only",
        Some(ErrorCode::NotADatabase) => "the file is not a SQLite database",
        Some(ErrorCode::DatabaseCorrupt) => "the database file is corrupt",
        Some(ErrorCode::DiskFull) => "the disk is full",
        Some(ErrorCode::CannotOpen) => "the database file cannot be opened",
        Some(ErrorCode::PermissionDenied) => "permission to the database file was denied",
        _ => what,
    }
}

/// A storage error without a driver error, for conditions this provider detects itself.
pub(super) fn detected(what: &'static str) -> MemoryError {
    MemoryError::storage(PROVIDER, what)
}

/// The error for a blocking task that panicked or was cancelled before reporting.
pub(super) fn background(err: tokio::task::JoinError) -> MemoryError {
    MemoryError::storage_from(PROVIDER, "a background database task failed", err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_condition_not_the_driver_message() {
        let driver = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOTADB),
            Some("file /secret/path is not a database".to_owned()),
        );
        let err = storage("reading a record failed")(driver);
        assert_eq!(err.to_string(), "storage error (sqlite): the file is not a SQLite database");
        let source = std::error::Error::source(&err).expect("the driver error is kept");
        assert!(source.to_string().contains("not a database"));
    }

    #[test]
    fn other_codes_keep_the_step() {
        let err = storage("writing a record failed")(rusqlite::Error::InvalidQuery);
        assert_eq!(err.to_string(), "storage error (sqlite): writing a record failed");
    }
}
