//! Errors written out in full, for failure messages and a child process's reports.

use agent_memory::MemoryError;

/// An error with its whole source chain: `Display` alone is a fixed sentence, and the driver's
/// error behind it is what explains a failure.
pub fn chain(err: &MemoryError) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}
