//! What the TLS tests check of a connection TLS refused.

use agent_memory::MemoryError;

use super::leaks::error_text;

/// Why TLS refuses a server whose certificate no trusted authority signed.
pub const UNTRUSTED: &str =
    "the server's certificate is not signed by a trusted authority (check the CA certificate setting)";
/// Why TLS refuses a server whose certificate does not name the host connected to.
pub const WRONG_HOST: &str = "the server's certificate does not name the host connected to";

/// Panics unless `err` is `provider`'s `Storage` error saying that TLS refused the connection
/// because of `reason`; `case` names the case in failures.
pub fn assert_refused(err: &MemoryError, provider: &str, reason: &str, case: &str) {
    assert!(err.is_storage(), "{case}: {}", error_text(err));
    let expected = format!("storage error ({provider}): TLS: {reason}");
    assert_eq!(err.to_string(), expected, "{case}: {}", error_text(err));
}
