//! What checks that nothing private leaks read of an error.

use agent_memory::MemoryError;

/// Every message in an error's chain, each written with `Display` and with `Debug`.
pub fn error_text(err: &MemoryError) -> String {
    let mut text = format!("{err} | {err:?}");
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        text.push_str(&format!(" | {inner} | {inner:?}"));
        source = inner.source();
    }
    text
}
