//! Who a tool call runs for: the [`Principal`] a transport binds to each call.

use std::fmt;

use agent_memory::MemoryScope;

/// The scope a tool call runs in, whether it may change anything, and which credential it came
/// from (for logs and provenance).
///
/// Built only by trusted code: the stdio server from its own flags, the HTTP server from a
/// request's verified credential. `Debug` shows the credential id and access, never the scope:
/// user ids are personal data and stay out of logs.
#[derive(Clone)]
pub struct Principal {
    scope: MemoryScope,
    read_only: bool,
    credential: CredentialId,
}

impl Principal {
    /// A principal for `scope`, read-only or not, authenticated by `credential`.
    pub fn new(scope: MemoryScope, read_only: bool, credential: CredentialId) -> Self {
        Self { scope, read_only, credential }
    }

    /// The scope every call of this principal runs in.
    pub fn scope(&self) -> &MemoryScope {
        &self.scope
    }

    /// True when only the read tools are available.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The credential, as it may appear in logs.
    pub fn credential(&self) -> &CredentialId {
        &self.credential
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Principal")
            .field("credential", &self.credential)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

/// What identifies a credential in logs and in the `agent` of the records it writes: never the
/// secret itself and never the user id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialId {
    /// The stdio server's own flags: one trusted local user.
    Local,
    /// An API key, by its id (the part of the key that is not secret).
    ApiKey(String),
    /// An OAuth access token, by a short hash of its issuer and subject.
    Token(String),
}

impl fmt::Display for CredentialId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialId::Local => f.write_str("local"),
            CredentialId::ApiKey(id) => write!(f, "key:{id}"),
            CredentialId::Token(hash) => write!(f, "sub:{hash}"),
        }
    }
}
