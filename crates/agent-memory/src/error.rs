//! [`MemoryError`], the one error type every operation returns, and the [`Result`] alias.

use std::error::Error as StdError;

/// A boxed error from a datastore driver, kept for operators behind [`MemoryError::source`](std::error::Error::source).
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// `Result` with [`MemoryError`] as the error.
pub type Result<T, E = MemoryError> = std::result::Result<T, E>;

/// Everything that can go wrong in a memory operation.
///
/// Callers branch on the variant:
///
/// - [`Invalid`](MemoryError::Invalid): the input broke a rule; nothing was changed. Fix the
///   input, do not retry it as is.
/// - [`Conflict`](MemoryError::Conflict): a conditional write or delete found a different live
///   revision (or no live record, or a live record where `create_only` wanted none). Read the key
///   again and decide.
/// - [`QuotaExceeded`](MemoryError::QuotaExceeded): the write would take the user past a
///   limit the store was built with ([`Quotas`](crate::Quotas)); nothing was changed. Free
///   space (delete records the user no longer needs, or purge expired ones) or raise the limit.
/// - [`Storage`](MemoryError::Storage): the datastore failed. A write may or may not have
///   committed: read the key again before retrying, and use revisions so a retry cannot
///   overwrite a later update.
///
/// `Display` is a fixed sentence: it never contains credentials, connection strings, SQL or
/// memory content. The driver's own error, when there is one, is reachable through
/// [`std::error::Error::source`] for logs that operators control.
///
/// ```
/// use agent_memory::{MemoryError, MemoryScope};
///
/// let err = MemoryScope::new("", "user-1").unwrap_err();
/// assert!(matches!(err, MemoryError::Invalid { field: "application_id", .. }));
/// assert_eq!(err.to_string(), "invalid application_id: must be 1 to 128 bytes");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// Bad input: which field, and which rule it broke. Nothing was changed.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The argument or field that broke a rule, for example `key` or `metadata`.
        field: &'static str,
        /// The rule, as a sentence fragment such as `must be at most 256 bytes`.
        reason: String,
    },
    /// A revision check failed: the expected revision is not the live one, or a `create_only`
    /// write found a live record.
    #[error("conflict: {reason}")]
    Conflict {
        /// Which check failed, as a fixed sentence fragment.
        reason: &'static str,
    },
    /// The write would take the application user past a quota; nothing was changed.
    #[error("quota exceeded: {quota} is {limit}")]
    QuotaExceeded {
        /// Which limit: `max_records_per_user` or `max_bytes_per_user`.
        quota: &'static str,
        /// Its value in the store's configuration.
        limit: u64,
    },
    /// The datastore failed. A write may or may not have committed.
    #[error("storage error ({provider}): {what}")]
    Storage {
        /// The provider that failed: `memory`, `sqlite`, `postgres` or `redis`.
        provider: &'static str,
        /// A fixed description of what failed, free of private detail.
        what: &'static str,
        /// The driver's error, for operators.
        #[source]
        source: Option<BoxError>,
    },
}

impl MemoryError {
    /// Builds [`MemoryError::Invalid`].
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid { field, reason: reason.into() }
    }

    /// Builds [`MemoryError::Conflict`].
    pub fn conflict(reason: &'static str) -> Self {
        Self::Conflict { reason }
    }

    /// Builds [`MemoryError::QuotaExceeded`].
    pub fn quota_exceeded(quota: &'static str, limit: u64) -> Self {
        Self::QuotaExceeded { quota, limit }
    }

    /// Builds [`MemoryError::Storage`] without a driver error.
    pub fn storage(provider: &'static str, what: &'static str) -> Self {
        Self::Storage { provider, what, source: None }
    }

    /// Builds [`MemoryError::Storage`] keeping the driver's error as its source.
    pub fn storage_from(
        provider: &'static str,
        what: &'static str,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::Storage { provider, what, source: Some(source.into()) }
    }

    /// The conflict raised when an expected revision does not match a live record.
    pub fn stale_revision() -> Self {
        Self::conflict("the expected revision is not the live record's revision")
    }

    /// The conflict raised when a `create_only` write finds a live record.
    pub fn already_exists() -> Self {
        Self::conflict("a live record already has this key")
    }

    /// The storage error every provider returns for an operation before `start()` or after
    /// `close()`.
    pub fn not_started(provider: &'static str) -> Self {
        Self::storage(provider, "the store is not started")
    }

    /// The variant as a stable, lowercase name: `invalid`, `conflict`, `quota_exceeded` or
    /// `storage`. Spans record it as `error.type` and metrics as the `outcome` label, so it
    /// names the kind of failure and nothing about the input.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Invalid { .. } => "invalid",
            Self::Conflict { .. } => "conflict",
            Self::QuotaExceeded { .. } => "quota_exceeded",
            Self::Storage { .. } => "storage",
        }
    }

    /// The input an [`Invalid`](MemoryError::Invalid) error names (`key`, `url`,
    /// `max_connections`, ...); `None` for the other kinds.
    ///
    /// ```
    /// use agent_memory::MemoryError;
    ///
    /// assert_eq!(MemoryError::invalid("key", "must not be empty").invalid_field(), Some("key"));
    /// assert_eq!(MemoryError::stale_revision().invalid_field(), None);
    /// ```
    pub fn invalid_field(&self) -> Option<&'static str> {
        match self {
            Self::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }

    /// True for [`MemoryError::Invalid`].
    pub fn is_invalid(&self) -> bool {
        matches!(self, Self::Invalid { .. })
    }

    /// True for [`MemoryError::Conflict`].
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict { .. })
    }

    /// True for [`MemoryError::QuotaExceeded`].
    pub fn is_quota_exceeded(&self) -> bool {
        matches!(self, Self::QuotaExceeded { .. })
    }

    /// True for [`MemoryError::Storage`].
    pub fn is_storage(&self) -> bool {
        matches!(self, Self::Storage { .. })
    }
}
