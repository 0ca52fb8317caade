//! [`MemoryWrite`], what [`put`](crate::MemoryStore::put) writes, and its [`WriteCondition`].

use serde_json::Value;

use crate::record::{Revision, Source};
use crate::time::Timestamp;

/// When a [`put`](crate::MemoryStore::put) may write.
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
/// use agent_memory::{MemoryWrite, Source, Timestamp, WriteCondition};
/// use serde_json::json;
///
/// let write = MemoryWrite::new("Prefers metric units")
///     .metadata(json!({"category": "preferences"}))
///     .source(Source::default().session("s-1"))
///     .create_only();
/// assert_eq!(write.condition(), &WriteCondition::CreateOnly);
/// ```
///
/// The builder does not check anything; `put` validates the whole write before any I/O.
/// Setting [`expected_revision`](Self::expected_revision) and [`create_only`](Self::create_only)
/// on one write keeps the one set last.
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

    /// Sets the metadata; `put` rejects anything but a JSON object.
    pub fn metadata(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }

    /// Makes the record invisible from `expires_at` on; `put` rejects an instant in the past.
    pub fn expires_at(mut self, expires_at: Timestamp) -> Self {
        self.expires_at = Some(expires_at);
        self
    }

    /// Sets or clears the expiry.
    pub fn expiry(mut self, expires_at: Option<Timestamp>) -> Self {
        self.expires_at = expires_at;
        self
    }

    /// Replaces only the live record holding exactly `revision`; otherwise `put` fails with
    /// [`Conflict`](crate::MemoryError::Conflict).
    pub fn expected_revision(mut self, revision: Revision) -> Self {
        self.condition = WriteCondition::Revision(revision);
        self
    }

    /// Writes only if no live record has the key; otherwise `put` fails with
    /// [`Conflict`](crate::MemoryError::Conflict).
    pub fn create_only(mut self) -> Self {
        self.condition = WriteCondition::CreateOnly;
        self
    }

    /// Sets the condition directly.
    pub fn condition_is(mut self, condition: WriteCondition) -> Self {
        self.condition = condition;
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
    pub fn metadata_value(&self) -> &Value {
        &self.metadata
    }

    /// The expiry to write.
    pub fn expiry_value(&self) -> Option<Timestamp> {
        self.expires_at
    }

    /// The condition of the write.
    pub fn condition(&self) -> &WriteCondition {
        &self.condition
    }

    /// The provenance to write.
    pub fn source_value(&self) -> &Source {
        &self.source
    }

    /// Splits the write into its parts, for providers.
    pub fn into_parts(self) -> WriteParts {
        WriteParts {
            content: self.content,
            metadata: match self.metadata {
                Value::Object(map) => map,
                _ => serde_json::Map::new(),
            },
            expires_at: self.expires_at,
            condition: self.condition,
            source: self.source,
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
