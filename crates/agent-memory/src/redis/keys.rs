//! Key encoding: every scope maps to its own keys, whatever characters its ids contain.
//!
//! All keys of one application user start with the same prefix
//! `am:{<hex(len(app) ‖ app ‖ user)>}:`. The braces hold the Redis Cluster hash tag: its content
//! is lowercase hex, which contains no `}`, and it encodes `(application_id, user_id)`
//! injectively because the one-byte length of the application id (1 to 128 bytes) says where the
//! user id starts. Under the prefix:
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `…r:<hex(namespace)>:<key>` | string | one record (layout in the provider's module docs) |
//! | `…i:<hex(namespace)>` | sorted set, all scores 0 | the namespace's keys, for byte-order paging |
//! | `…n` | sorted set, all scores 0 | the user's namespaces as hex, default (empty) first |
//! | `…s` | string | the user's revision floor |
//!
//! Beside the users' keys, each application has one user index, `am:{<hex(len(app) ‖ app)>}:u`:
//! a sorted set, all scores 0, of its user ids as hex, for `list_users` (see
//! `docs/adr/0011-redis-user-index.md`). Its tag is shorter than every user tag of the
//! application (user ids are never empty), so it is a key of its own, in its own slot.
//!
//! Beside those, the store has one application index, [`APPLICATIONS_KEY`]: a sorted set, all
//! scores 0, of the application ids as hex, for `list_applications` (see
//! `docs/adr/0013-listing-applications.md`). Every other key starts with `am:{`, so it is
//! distinct from all of them; without a hash tag, it lives in whatever slot its name hashes to.
//!
//! The default namespace is the empty string, so its hex is empty too; named namespaces are at
//! least one byte. Hex never contains `:`, so the namespace part of a record key ends at the
//! first `:` after `r:`, and everything after it is the record key, verbatim. Lowercase hex keeps
//! byte order (two digits per byte), so the namespace set sorts exactly as the raw names do.

use crate::scope::MemoryScope;

/// The prefix shared by every key of one application user, hash tag included.
pub(crate) fn user_prefix(application_id: &str, user_id: &str) -> String {
    let app = application_id.as_bytes();
    let user = user_id.as_bytes();
    let mut prefix = String::with_capacity(8 + 2 * (1 + app.len() + user.len()));
    prefix.push_str("am:{");
    // Validation bounds ids to 128 bytes; saturate rather than wrap if that ever changed.
    let len = u8::try_from(app.len()).unwrap_or(u8::MAX);
    push_hex(&mut prefix, &[len]);
    push_hex(&mut prefix, app);
    push_hex(&mut prefix, user);
    prefix.push_str("}:");
    prefix
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
}

/// Decodes lowercase hex produced by [`hex`]; `None` for anything else.
pub(crate) fn unhex(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    text.chunks_exact(2).map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?)).collect()
}

/// The keys of one scope (application, user, namespace).
#[derive(Debug, Clone)]
pub(crate) struct ScopeKeys {
    /// `am:{tag}:`
    pub(crate) user: String,
    /// Hex of the namespace; empty for the default one.
    pub(crate) namespace: String,
}

impl ScopeKeys {
    pub(crate) fn new(scope: &MemoryScope) -> Self {
        Self {
            user: user_prefix(scope.application_id(), scope.user_id()),
            namespace: hex(scope.namespace_or_empty().as_bytes()),
        }
    }

    /// The prefix of every record key in the namespace: `am:{tag}:r:<hex ns>:`.
    pub(crate) fn record_prefix(&self) -> String {
        self.record_with_capacity(0)
    }

    /// The record string of `key`.
    pub(crate) fn record(&self, key: &str) -> String {
        let mut out = self.record_with_capacity(key.len());
        out.push_str(key);
        out
    }

    fn record_with_capacity(&self, extra: usize) -> String {
        let mut out = String::with_capacity(self.user.len() + self.namespace.len() + 3 + extra);
        out.push_str(&self.user);
        out.push_str("r:");
        out.push_str(&self.namespace);
        out.push(':');
        out
    }

    /// The namespace's ordered index.
    pub(crate) fn index(&self) -> String {
        let mut out = String::with_capacity(self.user.len() + self.namespace.len() + 2);
        out.push_str(&self.user);
        out.push_str("i:");
        out.push_str(&self.namespace);
        out
    }

    /// The user's namespace set.
    pub(crate) fn namespaces(&self) -> String {
        namespaces_key(&self.user)
    }

    /// The user's revision floor.
    pub(crate) fn floor(&self) -> String {
        floor_key(&self.user)
    }

    /// The user's usage hash, for quotas.
    pub(crate) fn usage(&self) -> String {
        usage_key(&self.user)
    }
}

/// The store's application index: every application a user's first write indexed, as hex.
pub(crate) const APPLICATIONS_KEY: &str = "am:apps";

/// The user index of one application: `am:{<hex(len(app) ‖ app)>}:u`.
pub(crate) fn users_key(application_id: &str) -> String {
    let app = application_id.as_bytes();
    let mut key = String::with_capacity(8 + 2 * (1 + app.len()));
    key.push_str("am:{");
    let len = u8::try_from(app.len()).unwrap_or(u8::MAX);
    push_hex(&mut key, &[len]);
    push_hex(&mut key, app);
    key.push_str("}:u");
    key
}

/// The namespace set under a user prefix.
pub(crate) fn namespaces_key(user_prefix: &str) -> String {
    [user_prefix, "n"].concat()
}

/// The usage hash (records and bytes held, for quotas) under a user prefix.
pub(crate) fn usage_key(user_prefix: &str) -> String {
    [user_prefix, "q"].concat()
}

/// The revision floor under a user prefix.
pub(crate) fn floor_key(user_prefix: &str) -> String {
    [user_prefix, "s"].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(app: &str, user: &str, ns: Option<&str>) -> ScopeKeys {
        let scope = MemoryScope::new(app, user).unwrap();
        let scope = match ns {
            Some(ns) => scope.with_namespace(ns).unwrap(),
            None => scope,
        };
        ScopeKeys::new(&scope)
    }

    #[test]
    fn ids_that_would_collide_when_joined_get_different_keys() {
        let a = keys("a:b", "c", None);
        let b = keys("a", "b:c", None);
        assert_ne!(a.user, b.user);
        let c = keys("x{", "}y", Some(":"));
        let d = keys("x", "{}y", Some(":"));
        assert_ne!(c.record("k"), d.record("k"));
        // The namespace part ends at the first ':' after it, whatever the key holds.
        assert_ne!(keys("a", "u", Some("n")).record(":k"), keys("a", "u", Some("n:")).record("k"));
        assert_ne!(keys("a", "u", None).record("k"), keys("a", "u", Some("k")).record(""));
    }

    #[test]
    fn the_hash_tag_is_the_whole_user_encoding() {
        fn tag(key: &str) -> &str {
            let open = key.find('{').unwrap();
            let close = open + key[open..].find('}').unwrap();
            &key[open + 1..close]
        }
        let record = keys("app}", "{user", Some("ns}")).record("{k}");
        let prefix = user_prefix("app}", "{user");
        assert_eq!(tag(&record), tag(&prefix));
        assert!(tag(&record).bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(tag(&prefix), tag(&user_prefix("app", "}{user")));
    }

    #[test]
    fn hex_round_trips_and_keeps_byte_order() {
        let names = ["", "a", "ab", "b", "z", "\u{e9}", "\u{10000}"];
        let encoded: Vec<String> = names.iter().map(|n| hex(n.as_bytes())).collect();
        let mut sorted = encoded.clone();
        sorted.sort();
        assert_eq!(sorted, encoded);
        for (name, enc) in names.iter().zip(&encoded) {
            assert_eq!(unhex(enc.as_bytes()).unwrap(), name.as_bytes());
        }
        assert!(unhex(b"0").is_none());
        assert!(unhex(b"zz").is_none());
    }
}
