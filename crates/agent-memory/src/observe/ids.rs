//! The opt-in: application and user ids on spans, as keyed hashes, never as they are.

use std::sync::{Arc, PoisonError, RwLock};

use sha2::{Digest, Sha256};
use tracing::Span;

use crate::error::{MemoryError, Result};

/// The shortest secret [`record_hashed_ids`] takes, in bytes.
pub const MIN_ID_KEY_BYTES: usize = 16;

/// The secret the ids are hashed with; `None` (the default) records no ids at all.
static KEY: RwLock<Option<Arc<[u8]>>> = RwLock::new(None);

/// Records, on every store span from now on, the application and user ids as keyed hashes
/// (`agent_memory.application_id.hash`, `agent_memory.user_id.hash`): 16 hex digits of
/// SHA-256 over the secret and the id, so one user's operations can be followed across spans
/// (and across replicas given the same secret) without the id itself leaving the process.
/// `None` turns it off again. Off by default.
///
/// Keep `key` secret and random: whoever knows it can test guessed ids against the hashes.
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) naming `key` when it is shorter than
/// [`MIN_ID_KEY_BYTES`].
pub fn record_hashed_ids(key: Option<&[u8]>) -> Result<()> {
    if key.is_some_and(|key| key.len() < MIN_ID_KEY_BYTES) {
        return Err(MemoryError::invalid("key", "must be at least 16 bytes"));
    }
    *KEY.write().unwrap_or_else(PoisonError::into_inner) = key.map(Arc::from);
    Ok(())
}

/// Records the hashed ids on `span` when that was asked for.
/// An operation over a whole application (`list_users`) has no `user_id`.
pub(crate) fn record(span: &Span, application_id: &str, user_id: Option<&str>) {
    let key = KEY.read().unwrap_or_else(PoisonError::into_inner).clone();
    if let Some(key) = key {
        span.record("agent_memory.application_id.hash", hash(&key, application_id).as_str());
        if let Some(user_id) = user_id {
            span.record("agent_memory.user_id.hash", hash(&key, user_id).as_str());
        }
    }
}

/// The first 8 bytes of SHA-256(len(key) ‖ key ‖ id), in hex. The length prefix keeps the
/// secret and the id apart.
fn hash(key: &[u8], id: &str) -> String {
    let digest = Sha256::new()
        .chain_update(u64::try_from(key.len()).unwrap_or(u64::MAX).to_be_bytes())
        .chain_update(key)
        .chain_update(id.as_bytes())
        .finalize();
    digest.iter().take(8).map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::hash;

    #[test]
    fn hashes_are_keyed_short_and_stable() {
        let key = b"0123456789abcdef";
        let a = hash(key, "user-1");
        assert_eq!(a.len(), 16);
        assert_eq!(a, hash(key, "user-1"));
        assert_ne!(a, hash(key, "user-2"));
        assert_ne!(a, hash(b"fedcba9876543210", "user-1"));
        assert!(!a.contains("user"));
    }
}
