//! The server's view of the API key file: which key grants which principal.

use std::collections::HashMap;

use agent_memory::MemoryScope;
use subtle::ConstantTimeEq;

use super::reload::{LoadError, Parse};
use crate::api_keys::{self, FileError};
use crate::mcp::{CredentialId, Principal};

/// The keys of one key file, by id, with the principal each grants.
pub struct KeySet {
    keys: HashMap<String, Granted>,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySet").field("keys", &self.keys.len()).finish()
    }
}

/// What one key grants.
struct Granted {
    hash: [u8; 32],
    principal: Principal,
    revoked: bool,
}

impl KeySet {
    /// The principal `key` grants, when it is a key of this file that is not revoked.
    ///
    /// The key's id selects the entry (ids are not secret); its hash is then compared with the
    /// stored one in constant time, so the time taken says nothing about how much of a guessed
    /// secret was right.
    pub fn authenticate(&self, key: &str) -> Option<Principal> {
        let granted = self.keys.get(api_keys::key_id(key)?)?;
        let matches: bool = granted.hash.ct_eq(&api_keys::key_hash(key)).into();
        (matches && !granted.revoked).then(|| granted.principal.clone())
    }
}

/// Parses a key file into the keys of application `app`: every entry's user and namespace
/// must make a valid scope.
pub fn parser(app: String) -> Parse<KeySet> {
    Box::new(move |bytes| {
        let entries = api_keys::parse(bytes).map_err(|err| match err {
            FileError::Incomplete => LoadError::Incomplete,
            other => LoadError::Invalid(other.to_string()),
        })?;
        let mut keys = HashMap::with_capacity(entries.len());
        for entry in entries {
            let invalid = |err: agent_memory::MemoryError| {
                LoadError::Invalid(format!(
                    "the user or namespace of key {} is invalid: {err}",
                    entry.id
                ))
            };
            let mut scope = MemoryScope::new(app.clone(), entry.user.clone()).map_err(invalid)?;
            if let Some(namespace) = &entry.namespace {
                scope = scope.with_namespace(namespace.clone()).map_err(invalid)?;
            }
            let hash = entry.hash_bytes().ok_or_else(|| LoadError::Invalid("bad hash".into()))?;
            let principal =
                Principal::new(scope, entry.read_only, CredentialId::ApiKey(entry.id.clone()));
            keys.insert(entry.id, Granted { hash, principal, revoked: entry.revoked_at.is_some() });
        }
        Ok(KeySet { keys })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_keys::KeyEntry;

    fn file(entries: &[KeyEntry]) -> Vec<u8> {
        entries
            .iter()
            .flat_map(|entry| {
                let mut line = serde_json::to_vec(entry).unwrap();
                line.push(b'\n');
                line
            })
            .collect()
    }

    #[test]
    fn a_key_grants_its_own_principal_and_nothing_else_does() {
        let (alice, alice_entry) =
            KeyEntry::generate("alice".into(), None, false, None, &[]).unwrap();
        let (bob, mut bob_entry) =
            KeyEntry::generate("bob".into(), Some("work".into()), true, None, &[]).unwrap();
        let set = parser("app".into())(&file(&[alice_entry.clone(), bob_entry.clone()])).unwrap();
        let principal = set.authenticate(&alice).unwrap();
        assert_eq!(principal.scope().user_id(), "alice");
        assert!(!principal.read_only());
        let principal = set.authenticate(&bob).unwrap();
        assert_eq!(principal.scope().namespace(), Some("work"));
        assert!(principal.read_only());

        // The right id with another secret, and a made-up key, grant nothing.
        let forged = format!(
            "{}{}",
            &alice[..alice.len() - 1],
            if alice.ends_with('0') { '1' } else { '0' }
        );
        assert!(set.authenticate(&forged).is_none());
        assert!(set.authenticate("amk_000000000000_0000").is_none());

        bob_entry.revoked_at = Some(agent_memory::Timestamp::now());
        let set = parser("app".into())(&file(&[alice_entry, bob_entry])).unwrap();
        assert!(set.authenticate(&bob).is_none(), "revoked");
        assert!(set.authenticate(&alice).is_some());
    }
}
