//! Exit codes and the one error type every command returns.
//!
//! Scripts branch on the exit code, so each kind of failure has its own, and the codes never
//! change meaning between releases:
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | success |
//! | 1 | not found: `get` or `delete` of a key with no live record |
//! | 2 | invalid input: a bad argument, flag, file line or URL, and every usage error (clap uses 2 too) |
//! | 3 | conflict: `--if-revision` or `--create-only` did not hold |
//! | 4 | failure: the store, a local file, the terminal or the MCP transport failed |
//! | 5 | quota exceeded: the write would take the user past `max_records_per_user` or `max_bytes_per_user`; nothing was written |
//!
//! A closed stdout (`agent-memory export | head`) is no failure: the command stops and exits 0
//! without a word, as `list | head` does.

use std::fmt;
use std::process::ExitCode;

use agent_memory::MemoryError;

use crate::output::escape_line;

/// Longest error message printed; longer ones (a serde error quoting a huge string) are cut so
/// the error stays one readable line.
const MAX_MESSAGE_CHARS: usize = 300;

/// Which kind of failure an error is: what a script branches on, through the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Exit 1.
    NotFound,
    /// Exit 2.
    Invalid,
    /// Exit 3.
    Conflict,
    /// Exit 4.
    Failure,
    /// Exit 5.
    QuotaExceeded,
    /// Exit 0, quietly: the reader of stdout (or of a FIFO) closed it, as `head` does once it
    /// has what it wants. Every command treats a closed pipe so, whatever it was writing.
    ClosedPipe,
}

impl ErrorKind {
    /// The process exit code of this kind; the table above is the contract.
    fn code(self) -> u8 {
        match self {
            ErrorKind::NotFound => 1,
            ErrorKind::Invalid => 2,
            ErrorKind::Conflict => 3,
            ErrorKind::Failure => 4,
            ErrorKind::QuotaExceeded => 5,
            ErrorKind::ClosedPipe => 0,
        }
    }
}

/// What went wrong: its kind (the exit code) and one line for stderr.
#[derive(Debug)]
pub struct CliError {
    kind: ErrorKind,
    message: String,
}

impl CliError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// Exit 1: the record asked for has no live version.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// Exit 2: the input was wrong; running again unchanged fails again.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }

    /// Exit 4: something outside the input failed (the store, a file, a stream).
    pub fn failure(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Failure, message)
    }

    /// A local I/O failure (a file, stdin, stdout), naming what was being done; a closed pipe
    /// is [`ErrorKind::ClosedPipe`] instead.
    pub fn io(what: &str, err: &std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            return Self::new(ErrorKind::ClosedPipe, format!("{what}: {err}"));
        }
        Self::failure(format!("{what}: {err}"))
    }

    /// A failure to write JSON to a stream, naming what was being done; a closed pipe is
    /// [`ErrorKind::ClosedPipe`] as in [`io`](Self::io).
    pub fn json_write(what: &str, err: &serde_json::Error) -> Self {
        if err.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe) {
            return Self::new(ErrorKind::ClosedPipe, format!("{what}: {err}"));
        }
        Self::failure(format!("{what}: {err}"))
    }

    /// The error of a store write: a storage failure also says that the write may have
    /// committed (the reply, not the write, may be what was lost), so the caller reads before
    /// retrying. Reads never say so.
    pub fn from_write(err: MemoryError) -> Self {
        let storage = err.is_storage();
        let mut err = Self::from(err);
        if storage {
            err.message.push_str("; the write may have committed: read before retrying");
        }
        err
    }

    /// The same error with `context` in front, for example "line 7: ".
    #[must_use]
    pub fn context(mut self, context: &str) -> Self {
        self.message.insert_str(0, context);
        self
    }

    /// Which kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message as built, before [`Display`](fmt::Display) escapes and shortens it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.kind().code())
    }
}

impl fmt::Display for CliError {
    /// One line: control characters escaped (messages can quote file content) and cut to a
    /// readable length.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape_line(self.message(), MAX_MESSAGE_CHARS))
    }
}

impl From<MemoryError> for CliError {
    fn from(err: MemoryError) -> Self {
        // The driver's error may name hosts or SQL: operators opt in to it through the log
        // filter; the printed line is the library's fixed sentence only.
        if let Some(source) = std::error::Error::source(&err) {
            tracing::debug!(error = %source, "cause of the store error");
        }
        let kind = match err {
            MemoryError::Invalid { .. } => ErrorKind::Invalid,
            MemoryError::Conflict { .. } => ErrorKind::Conflict,
            MemoryError::QuotaExceeded { .. } => ErrorKind::QuotaExceeded,
            // Storage, and any variant added later: the conservative reading is "it failed".
            _ => ErrorKind::Failure,
        };
        CliError::new(kind, err.to_string())
    }
}

/// `Result` with [`CliError`].
pub type CliResult<T = ()> = Result<T, CliError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_the_documented_exit_codes() {
        let codes: Vec<u8> = [
            ErrorKind::NotFound,
            ErrorKind::Invalid,
            ErrorKind::Conflict,
            ErrorKind::Failure,
            ErrorKind::QuotaExceeded,
            ErrorKind::ClosedPipe,
        ]
        .into_iter()
        .map(ErrorKind::code)
        .collect();
        assert_eq!(codes, [1, 2, 3, 4, 5, 0]);
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert_eq!(CliError::io("cannot write to stdout", &pipe).kind(), ErrorKind::ClosedPipe);
        let read = CliError::from(MemoryError::storage("redis", "lost the connection"));
        assert!(!read.message().contains("may have committed"));
        let write = CliError::from_write(MemoryError::storage("redis", "lost the connection"));
        assert!(write.message().contains("may have committed"));
        let quota = CliError::from(MemoryError::quota_exceeded("max_records_per_user", 3));
        assert_eq!(quota.kind(), ErrorKind::QuotaExceeded);
    }

    #[test]
    fn context_goes_in_front_and_keeps_the_kind() {
        let err = CliError::invalid("bad key").context("line 7: ");
        assert_eq!(err.kind(), ErrorKind::Invalid);
        assert_eq!(err.message(), "line 7: bad key");
    }

    #[test]
    fn display_is_one_escaped_line_of_bounded_length() {
        let shown = CliError::failure(format!("a\nb{}", "x".repeat(400))).to_string();
        assert!(shown.starts_with("a\\nb"), "{shown:?}");
        assert_eq!(shown.chars().count(), MAX_MESSAGE_CHARS);
        assert!(shown.ends_with('…'));
    }
}
