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

use std::fmt;
use std::process::ExitCode;

use agent_memory::MemoryError;

use crate::output::escape_line;

/// Longest error message printed; longer ones (a serde error quoting a huge string) are cut so
/// the error stays one readable line.
const MAX_MESSAGE_CHARS: usize = 300;

/// What went wrong, as the exit code it maps to and one line for stderr.
#[derive(Debug)]
pub enum CliError {
    /// Exit 1.
    NotFound(String),
    /// Exit 2.
    Invalid(String),
    /// Exit 3.
    Conflict(String),
    /// Exit 4.
    Failure(String),
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            CliError::NotFound(_) => 1,
            CliError::Invalid(_) => 2,
            CliError::Conflict(_) => 3,
            CliError::Failure(_) => 4,
        })
    }

    /// The same error with `context` in front, for example "line 7: ".
    pub fn context(self, context: &str) -> Self {
        match self {
            CliError::NotFound(m) => CliError::NotFound(format!("{context}{m}")),
            CliError::Invalid(m) => CliError::Invalid(format!("{context}{m}")),
            CliError::Conflict(m) => CliError::Conflict(format!("{context}{m}")),
            CliError::Failure(m) => CliError::Failure(format!("{context}{m}")),
        }
    }

    /// A local I/O failure (a file, stdin, stdout), naming what was being done.
    pub fn io(what: &str, err: &std::io::Error) -> Self {
        CliError::Failure(format!("{what}: {err}"))
    }

    fn message(&self) -> &str {
        match self {
            CliError::NotFound(m)
            | CliError::Invalid(m)
            | CliError::Conflict(m)
            | CliError::Failure(m) => m,
        }
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
        match err {
            MemoryError::Invalid { .. } => CliError::Invalid(err.to_string()),
            MemoryError::Conflict { .. } => CliError::Conflict(err.to_string()),
            // Storage, and any variant added later: the conservative reading is "it failed".
            _ => CliError::Failure(err.to_string()),
        }
    }
}

/// `Result` with [`CliError`].
pub type CliResult<T = ()> = Result<T, CliError>;
