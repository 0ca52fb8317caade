//! The one place Redis driver errors become [`MemoryError`]s.

use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::error::MemoryError;

/// The provider name in every error.
pub(crate) const PROVIDER: &str = "redis";

/// Maps a driver error to [`MemoryError::Storage`] with a fixed description; the driver error is
/// kept as the source for operators and never shown by `Display`.
pub(crate) fn storage(err: RedisError) -> MemoryError {
    const CONNECTION: &str =
        "lost or could not open the connection to Redis; a write may have committed";
    let what = match err.kind() {
        _ if err.is_connection_dropped() || err.is_connection_refusal() || err.is_timeout() => {
            CONNECTION
        }
        ErrorKind::Io => CONNECTION,
        ErrorKind::AuthenticationFailed => "Redis refused the credentials",
        ErrorKind::Server(ServerErrorKind::BusyLoading) => "Redis is loading its data set",
        ErrorKind::Server(
            ServerErrorKind::Moved
            | ServerErrorKind::Ask
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown,
        ) => "the Redis Cluster is resharding or unavailable",
        ErrorKind::Server(ServerErrorKind::ReadOnly) => "the Redis node is a read-only replica",
        ErrorKind::Server(ServerErrorKind::NoPerm) => "Redis denied the command (ACL)",
        _ => "the Redis command failed",
    };
    MemoryError::storage_from(PROVIDER, what, err)
}

/// A reply whose shape the scripts never produce.
pub(crate) fn unexpected_reply() -> MemoryError {
    MemoryError::storage(PROVIDER, "Redis returned an unexpected reply")
}

/// A stored record that does not decode.
pub(crate) fn malformed_record() -> MemoryError {
    MemoryError::storage(PROVIDER, "a stored record is malformed")
}

/// True for errors that prove the command did not run, so sending it again cannot apply a write
/// twice: cluster redirections and "try again later" answers.
pub(crate) fn did_not_run(err: &RedisError) -> bool {
    matches!(
        err.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
        )
    )
}
