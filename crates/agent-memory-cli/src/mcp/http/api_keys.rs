//! The server's view of the API key file: which key grants which principal.

use std::collections::HashMap;

use agent_memory::MemoryScope;
use subtle::ConstantTimeEq;

use super::jwt::TOKEN_USER_PREFIX;
use super::reload::{LoadError, Parse, Parsed};
use crate::api_keys;
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
/// must make a valid scope, and no user may start with [`TOKEN_USER_PREFIX`] (the id space of
/// token users). Entries naming another application are left out, so their keys are refused;
/// entries naming none are keys of `app`.
pub fn parser(app: String) -> Parse<KeySet> {
    Box::new(move |bytes| {
        let (entries, tail_pending) =
            api_keys::parse_complete(bytes).map_err(|err| LoadError::Invalid(err.to_string()))?;
        let mut keys = HashMap::with_capacity(entries.len());
        for entry in entries {
            if entry.app.as_ref().is_some_and(|other| *other != app) {
                continue;
            }
            if entry.user.starts_with(TOKEN_USER_PREFIX) {
                return Err(LoadError::Invalid(format!(
                    "the user of key {} starts with `{TOKEN_USER_PREFIX}`, which is kept for \
                     users of OAuth tokens",
                    entry.id
                )));
            }
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
        Ok(Parsed { value: KeySet { keys }, tail_pending })
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
        let set =
            parser("app".into())(&file(&[alice_entry.clone(), bob_entry.clone()])).unwrap().value;
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
        let set = parser("app".into())(&file(&[alice_entry, bob_entry])).unwrap().value;
        assert!(set.authenticate(&bob).is_none(), "revoked");
        assert!(set.authenticate(&alice).is_some());
    }

    #[test]
    fn a_key_for_another_application_is_refused_and_one_for_none_is_ours() {
        let (ours, mut ours_entry) =
            KeyEntry::generate("alice".into(), None, false, None, &[]).unwrap();
        ours_entry.app = Some("app".into());
        let (other, mut other_entry) =
            KeyEntry::generate("alice".into(), None, false, None, &[]).unwrap();
        other_entry.app = Some("other-app".into());
        let (legacy, legacy_entry) =
            KeyEntry::generate("bob".into(), None, false, None, &[]).unwrap();
        let set =
            parser("app".into())(&file(&[ours_entry, other_entry, legacy_entry])).unwrap().value;
        assert!(set.authenticate(&ours).is_some());
        assert!(set.authenticate(&other).is_none(), "a key for another application");
        assert!(set.authenticate(&legacy).is_some(), "an entry without an application");
    }

    #[test]
    fn api_key_users_cannot_enter_the_token_users_id_space() {
        let (_, entry) = KeyEntry::generate("oidc:alice".into(), None, false, None, &[]).unwrap();
        assert!(matches!(parser("app".into())(&file(&[entry])), Err(LoadError::Invalid(_))));
    }
}
