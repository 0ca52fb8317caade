//! Fresh application ids, so tests sharing a server never share records.

use agent_memory::MemoryScope;

/// The default namespace of `user` in a fresh application `{prefix}-{random}`, so tests sharing
/// a server never share records.
pub fn fresh_scope(prefix: &str, user: &str) -> MemoryScope {
    MemoryScope::new(fresh_app(prefix), user).expect("valid ids")
}

/// A fresh application id, `{prefix}-{random}`.
pub fn fresh_app(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}
