//! Ids as keyed hashes: on spans when asked for ([`record_hashed_ids`]), and wherever a program
//! must name a user in a log line ([`hash_id`]), never as they are.
//!
//! The hash is HMAC-SHA256 keyed with a secret, cut to 16 hex digits. Unkeyed, a hash of an
//! email address or a numeric id is easily reversed by hashing guesses; keyed, whoever lacks
//! the secret can only tell whether two lines name the same id.

use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tracing::Span;

use crate::error::{MemoryError, Result};

/// The shortest secret [`record_hashed_ids`] takes, in bytes.
pub const MIN_ID_KEY_BYTES: usize = 16;

/// The secret the ids are hashed with; `None` (the default) records no ids on spans.
static KEY: RwLock<Option<Arc<[u8]>>> = RwLock::new(None);

/// The secret [`hash_id`] uses while no key is set: random, made once per process.
static PROCESS_KEY: OnceLock<[u8; 32]> = OnceLock::new();

/// Records, on every store span from now on, the application and user ids as keyed hashes
/// (`agent_memory.application_id.hash`, `agent_memory.user_id.hash`): 16 hex digits of
/// HMAC-SHA256 of the id keyed with `key`, so one user's operations can be followed across
/// spans (and across replicas and restarts given the same secret) without the id itself
/// leaving the process. [`hash_id`] uses the same key from then on. `None` turns the span
/// fields off again (and [`hash_id`] back to the per-process secret). Off by default.
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

/// A keyed hash of `id` for a log line: 16 hex digits of HMAC-SHA256, keyed with the secret
/// given to [`record_hashed_ids`] when there is one, else with a random secret made once per
/// process. Without a configured secret the hashes of one id therefore differ between
/// processes: they correlate the lines of one process only, not across restarts or replicas.
pub fn hash_id(id: &str) -> String {
    let key = KEY.read().unwrap_or_else(PoisonError::into_inner).clone();
    match key {
        Some(key) => hash(&key, id),
        None => hash(PROCESS_KEY.get_or_init(random_key), id),
    }
}

fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    if getrandom::fill(&mut key).is_err() {
        // No operating-system randomness: fall back on what differs between processes and
        // runs, which still keeps the hashes from being computed without access to the host.
        let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
        key = hmac_sha256(b"agent-memory id hash fallback", seed.as_bytes());
    }
    key
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

fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// The first 8 bytes of HMAC-SHA256(key, id), in hex.
fn hash(key: &[u8], id: &str) -> String {
    hmac_sha256(key, id.as_bytes()).iter().take(8).map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::{hash, hash_id, hmac_sha256};

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

    #[test]
    fn the_hash_is_hmac_sha256() {
        // RFC 4231, test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        assert_eq!(hash(b"Jefe", "what do ya want for nothing?"), hex[..16]);
    }

    #[test]
    fn without_a_key_log_hashes_use_a_secret_of_the_process() {
        use sha2::{Digest, Sha256};
        let id = "alice@example.com";
        let unkeyed: String =
            Sha256::digest(id.as_bytes()).iter().take(8).map(|b| format!("{b:02x}")).collect();
        let hashed = hash_id(id);
        assert_eq!(hashed, hash_id(id), "stable within the process");
        assert_ne!(hashed, unkeyed, "not a plain hash anyone could recompute");
        assert_ne!(hashed, hash(&[], id), "not keyed with nothing");
    }
}
