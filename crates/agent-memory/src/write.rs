//! [`MemoryWrite`], what [`put`](crate::MemoryStore::put) writes, and its [`WriteCondition`].

use serde_json::Value;

use crate::error::Result;
use crate::record::{Revision, Source};
use crate::time::Timestamp;
use crate::validation;

/// When a [`put`](crate::MemoryStore::put) may write; providers read it from
/// [`WriteParts::condition`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum WriteCondition {
    /// Insert or replace, whatever is stored.
    #[default]
    Always,
    /// Write only if no live record has the key.
    CreateOnly,
    /// Replace only the live record with exactly this revision.
    Revision(Revision),
}

/// The content and options of one [`put`](crate::MemoryStore::put).
///
/// ```
/// use agent_memory::{MemoryWrite, Source};
/// use serde_json::json;
///
/// let write = MemoryWrite::new("Prefers metric units")
///     .metadata(json!({"category": "preferences"}))
///     .source(Source::default().session("s-1"))
///     .create_only();
/// assert!(write.is_create_only());
/// assert_eq!(write.source_ref().session_id.as_deref(), Some("s-1"));
/// ```
///
/// The builder methods (`metadata`, `expires_at`, `expires_at_opt`, `expected_revision`,
/// `create_only`, `source`) take `self` and return the changed write; the readers (`content`,
/// `metadata_ref`, `expiry`, `source_ref`, `is_create_only`, `expected`) borrow it. No name is
/// both. The builder does not check anything; `put` validates the whole write
/// ([`validate`](Self::validate)) before any I/O. Setting
/// [`expected_revision`](Self::expected_revision) and [`create_only`](Self::create_only) on one
/// write keeps the one set last.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryWrite {
    content: String,
    metadata: Value,
    expires_at: Option<Timestamp>,
    condition: WriteCondition,
    source: Source,
}

impl MemoryWrite {
    /// An unconditional write of `content` with empty metadata, no expiry and no source.
    pub fn new(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            metadata: Value::Object(serde_json::Map::new()),
            expires_at: None,
            condition: WriteCondition::Always,
            source: Source::default(),
        }
    }

    crate::builder::setters! {
        /// Sets the metadata; `put` rejects anything but a JSON object.
        metadata(metadata: Value) => metadata = metadata;

        /// Makes the record invisible from `expires_at` on; `put` rejects an instant in the past.
        expires_at(expires_at: Timestamp) => expires_at = Some(expires_at);

        /// Sets the expiry when `expires_at` is `Some`, clears it when `None`.
        expires_at_opt(expires_at: Option<Timestamp>) => expires_at = expires_at;

        /// Replaces only the live record holding exactly `revision`; otherwise `put` fails with
        /// [`Conflict`](crate::MemoryError::Conflict).
        expected_revision(revision: Revision) => condition = WriteCondition::Revision(revision);
    }

    /// Writes only if no live record has the key; otherwise `put` fails with
    /// [`Conflict`](crate::MemoryError::Conflict).
    pub fn create_only(mut self) -> Self {
        self.condition = WriteCondition::CreateOnly;
        self
    }

    /// Records where the write came from.
    pub fn source(mut self, source: Source) -> Self {
        self.source = source;
        self
    }

    /// The content to write.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// The metadata to write (an object, once validated).
    pub fn metadata_ref(&self) -> &Value {
        &self.metadata
    }

    /// The expiry to write, if any.
    pub fn expiry(&self) -> Option<Timestamp> {
        self.expires_at
    }

    /// True when the write is [`create_only`](Self::create_only).
    pub fn is_create_only(&self) -> bool {
        self.condition == WriteCondition::CreateOnly
    }

    /// The revision the write expects, when it is a compare-and-set.
    pub fn expected(&self) -> Option<&Revision> {
        match &self.condition {
            WriteCondition::Revision(revision) => Some(revision),
            WriteCondition::Always | WriteCondition::CreateOnly => None,
        }
    }

    /// The provenance to write.
    pub fn source_ref(&self) -> &Source {
        &self.source
    }

    /// Checks the whole write for `key`: the key, content, metadata, source and expiry, in that
    /// order. `now` is the provider's current instant (its injected clock, or the system clock
    /// for providers whose datastore keeps time). Every provider calls this before any I/O.
    ///
    /// ```
    /// use agent_memory::{MemoryError, MemoryWrite, Timestamp};
    ///
    /// assert!(MemoryWrite::new("fine").validate("key", Timestamp::now()).is_ok());
    /// let err = MemoryWrite::new("fine").validate("", Timestamp::now()).unwrap_err();
    /// assert!(matches!(err, MemoryError::Invalid { field: "key", .. }));
    /// ```
    ///
    /// # Errors
    /// [`Invalid`](crate::MemoryError::Invalid) naming the first field at fault.
    pub fn validate(&self, key: &str, now: Timestamp) -> Result<()> {
        validation::key(key)?;
        validation::content(&self.content)?;
        let metadata_bytes = validation::metadata(&self.metadata)?;
        self.source.validate()?;
        validation::metadata_budget(metadata_bytes + self.source.budget_bytes())?;
        if let Some(at) = self.expires_at {
            validation::expires_at(at.as_micros(), now.as_micros())?;
        }
        Ok(())
    }
}

/// A write split into its parts, for providers (see [`crate::provider`]); the caller-facing
/// [`MemoryWrite`] keeps only its builder and its check.
impl From<MemoryWrite> for WriteParts {
    fn from(write: MemoryWrite) -> Self {
        WriteParts {
            content: write.content,
            metadata: match write.metadata {
                Value::Object(map) => map,
                _ => serde_json::Map::new(),
            },
            expires_at: write.expires_at,
            condition: write.condition,
            source: write.source,
        }
    }
}

impl From<&str> for MemoryWrite {
    fn from(content: &str) -> Self {
        Self::new(content)
    }
}

impl From<String> for MemoryWrite {
    fn from(content: String) -> Self {
        Self::new(content)
    }
}

/// The parts of a validated [`MemoryWrite`], owned, for providers to store.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteParts {
    /// The content.
    pub content: String,
    /// The metadata object.
    pub metadata: crate::record::Metadata,
    /// The expiry.
    pub expires_at: Option<Timestamp>,
    /// The condition.
    pub condition: WriteCondition,
    /// The provenance.
    pub source: Source,
}
