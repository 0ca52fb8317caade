//! [`MemoryRecord`], its [`Revision`] and its provenance, [`Source`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::scope::MemoryScope;
use crate::time::Timestamp;
use crate::validation;

/// JSON object holding a record's metadata.
pub type Metadata = serde_json::Map<String, serde_json::Value>;

/// One stored memory, as a detached copy: changing it changes nothing stored.
///
/// ```
/// # tokio_test_block_on(async {
/// use agent_memory::{InMemoryStore, MemoryScope, MemoryStore, MemoryWrite};
///
/// let store = InMemoryStore::new();
/// store.start().await?;
/// let scope = MemoryScope::new("app", "user-1")?;
/// let record = store.put(&scope, "greeting", MemoryWrite::new("Call me Sam")).await?;
/// assert_eq!(record.content, "Call me Sam");
/// assert_eq!(record.created_at, record.updated_at);
/// # Ok::<(), agent_memory::MemoryError>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Where the record lives.
    pub scope: MemoryScope,
    /// Its key, unique within the scope.
    pub key: String,
    /// The remembered text.
    pub content: String,
    /// Application-defined JSON object.
    pub metadata: Metadata,
    /// The token of the write that produced this version.
    pub revision: Revision,
    /// When a live record first got this key.
    pub created_at: Timestamp,
    /// When this version was written.
    pub updated_at: Timestamp,
    /// When the record stops being visible, if ever.
    pub expires_at: Option<Timestamp>,
    /// Where the write came from.
    pub source: Source,
}

/// Where a write came from: provenance for audits, never an instruction or an authorization.
///
/// Each field, when present, follows the rules for ids: 1 to 128 bytes, no control characters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The conversation or session that wrote the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The single agent invocation (run, turn) that wrote the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation_id: Option<String>,
    /// The agent that wrote the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl Source {
    /// Checks every field that is set: 1 to 128 bytes, no control characters.
    ///
    /// # Errors
    /// [`Invalid`](crate::MemoryError::Invalid) naming the field at fault, for example
    /// `source.agent`.
    pub fn validate(&self) -> Result<()> {
        let fields = [
            ("source.session_id", &self.session_id),
            ("source.invocation_id", &self.invocation_id),
            ("source.agent", &self.agent),
        ];
        for (field, value) in fields {
            if let Some(value) = value {
                validation::id(field, value)?;
            }
        }
        Ok(())
    }

    /// The bytes this source takes of the budget it shares with metadata: its compact JSON
    /// length, or 0 for an empty source, which stores nothing.
    pub fn budget_bytes(&self) -> usize {
        if self.is_empty() {
            0
        } else {
            validation::compact_json_len(self)
        }
    }

    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        self.session_id.is_none() && self.invocation_id.is_none() && self.agent.is_none()
    }

    crate::builder::setters! {
        /// The same source with `session_id` set.
        session(session_id: impl Into<String>) => session_id = Some(session_id.into());

        /// The same source with `invocation_id` set.
        invocation(invocation_id: impl Into<String>) => invocation_id = Some(invocation_id.into());

        /// The same source with `agent` set.
        agent(agent: impl Into<String>) => agent = Some(agent.into());
    }
}

/// Opaque token a provider assigns on every write.
///
/// A key never gets the same revision twice, not even after it was deleted and written again,
/// so a compare-and-set against an old revision can never succeed by accident (no ABA). Compare
/// revisions for equality only; their order and form belong to the provider.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
// Shared text: a record is copied out of the store on every read, and cloning an `Arc` copies
// nothing.
pub struct Revision(Arc<str>);

impl Revision {
    /// Wraps a token, checking that it is 1 to 128 printable ASCII bytes.
    ///
    /// Use this for revisions that arrive from outside (a tool argument, a CLI flag).
    ///
    /// # Errors
    /// [`Invalid`](crate::MemoryError::Invalid) for an empty, oversize or non-printable token.
    pub fn new(token: impl Into<String>) -> Result<Self> {
        let token = token.into();
        validation::revision_token(&token)?;
        Ok(Self(token.into()))
    }

    /// The token of a provider's write counter `n`, spelled in `radix` (2 to 16, lowercase)
    /// without leading zeros, straight into the shared text: providers make a revision for
    /// every record they return.
    pub(crate) fn from_counter(mut n: u64, radix: u64) -> Self {
        debug_assert!((2..=16).contains(&radix), "radix {radix}");
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 64];
        let mut start = text.len();
        loop {
            start -= 1;
            // `n % radix` is below 16: the index is in bounds and the conversion cannot fail.
            text[start] = DIGITS[usize::try_from(n % radix).unwrap_or(0)];
            n /= radix;
            if n == 0 {
                break;
            }
        }
        Self(std::str::from_utf8(&text[start..]).expect("ASCII digits").into())
    }

    /// The token as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `Debug` and `Display` for an opaque token, a newtype over its text: it displays as the
/// text alone (what a caller passes back), and debugs as the text in the type's name.
macro_rules! token_formatting {
    ($token:ident) => {
        impl std::fmt::Debug for $token {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($token), "({})"), self.0)
            }
        }

        impl std::fmt::Display for $token {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}
pub(crate) use token_formatting;

token_formatting!(Revision);

impl TryFrom<String> for Revision {
    type Error = crate::MemoryError;

    fn try_from(token: String) -> Result<Self> {
        Self::new(token)
    }
}

impl From<Revision> for String {
    fn from(revision: Revision) -> Self {
        revision.0.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::Revision;

    #[test]
    fn counters_are_spelled_without_leading_zeros() {
        assert_eq!(Revision::from_counter(0, 16).as_str(), "0");
        assert_eq!(Revision::from_counter(255, 16).as_str(), "ff");
        assert_eq!(Revision::from_counter(u64::MAX, 16).as_str(), "ffffffffffffffff");
        assert_eq!(Revision::from_counter(u64::MAX, 2).as_str(), "1".repeat(64));
        assert_eq!(Revision::from_counter(7, 10).as_str(), "7");
        assert_eq!(Revision::from_counter(u64::MAX, 10).as_str(), u64::MAX.to_string());
        for n in [1, 9, 10, 16, 1_000_000, 0xdead_beef] {
            assert_eq!(Revision::from_counter(n, 16), Revision::new(format!("{n:x}")).unwrap());
            assert_eq!(Revision::from_counter(n, 10), Revision::new(n.to_string()).unwrap());
        }
    }
}
