//! The one place Redis driver errors become [`MemoryError`]s.

use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::error::MemoryError;

/// The provider name in every error.
pub(crate) const PROVIDER: &str = "redis";

/// A closure for `map_err` that maps a driver error to [`MemoryError::Storage`], keeping the
/// driver error as the source for operators; `Display` never shows it.
///
/// `what` is the fixed description of the step that failed. A few kinds of error say more than
/// the step does (the connection was lost, the credentials were refused, the server is loading,
/// the cluster is resharding, the node is a read-only replica, an ACL denied the command, TLS
/// refused the server's or the client's certificate), and for those the description names the
/// condition instead.
pub(crate) fn storage(what: &'static str) -> impl FnOnce(RedisError) -> MemoryError {
    move |err| MemoryError::storage_from(PROVIDER, describe(what, &err), err)
}

/// The fixed description [`storage`] gives `err` when it happened during `what`.
fn describe(what: &'static str, err: &RedisError) -> &'static str {
    // Whether a write may have committed is for the caller to say: a read that loses its
    // connection changed nothing.
    const CONNECTION: &str = "lost or could not open the connection to Redis";
    // A refused certificate or handshake says more than "could not connect".
    // The cluster client reports its first connections' failures as text only.
    if let Some(tls) = crate::tls::describe_failure(err)
        .or_else(|| crate::tls::describe_failure_text(&err.to_string()))
    {
        return tls;
    }
    match err.kind() {
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
        _ => what,
    }
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

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    const STEP: &str = "a Redis script call failed";

    fn mapped(err: RedisError) -> MemoryError {
        storage(STEP)(err)
    }

    #[test]
    fn conditions_take_precedence_over_the_step_and_the_driver_error_stays_the_source() {
        let cases = [
            (ErrorKind::AuthenticationFailed, "Redis refused the credentials"),
            (ErrorKind::Server(ServerErrorKind::BusyLoading), "Redis is loading its data set"),
            (
                ErrorKind::Server(ServerErrorKind::ClusterDown),
                "the Redis Cluster is resharding or unavailable",
            ),
            (ErrorKind::Server(ServerErrorKind::ReadOnly), "the Redis node is a read-only replica"),
            (ErrorKind::Server(ServerErrorKind::NoPerm), "Redis denied the command (ACL)"),
            (ErrorKind::Server(ServerErrorKind::ResponseError), STEP),
        ];
        for (kind, expected) in cases {
            let err = mapped(RedisError::from((kind, "driver detail")));
            assert_eq!(err.to_string(), format!("storage error (redis): {expected}"));
            assert!(err.source().is_some(), "{kind:?}");
        }
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(mapped(io).to_string().contains("connection to Redis"));
    }

    #[test]
    fn only_answers_that_prove_the_call_did_not_run_are_retryable() {
        let kind = |kind| RedisError::from((kind, "x"));
        assert!(did_not_run(&kind(ErrorKind::Server(ServerErrorKind::Moved))));
        assert!(did_not_run(&kind(ErrorKind::Server(ServerErrorKind::TryAgain))));
        assert!(!did_not_run(&kind(ErrorKind::Server(ServerErrorKind::ResponseError))));
        assert!(!did_not_run(&kind(ErrorKind::Io)));
    }
}
