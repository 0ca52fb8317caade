//! [`Quotas`]: how much one application user may hold, and the byte count every provider
//! charges a record.
//!
//! A store built with quotas refuses a write that would take a user past either limit with
//! [`MemoryError::QuotaExceeded`]. Usage is counted over every record the user physically
//! holds, expired ones included until a purge, a delete or an erasure removes them, in every
//! namespace of that user. Each provider keeps the count in the datastore and checks it in the
//! same atomic step as the write (ADR 0009), so concurrent writers never overshoot.

use crate::error::{MemoryError, Result};
use crate::record::{Metadata, Source};
use crate::validation::compact_json_len;

/// The three quota methods every provider's builder has (`max_records_per_user`,
/// `max_bytes_per_user`, `quotas`), setting the [`Quotas`] at the builder's field path.
macro_rules! quota_setters {
    ($($field:ident).+) => {
        /// The most records one application user may hold, every namespace and expired
        /// records included (default: no limit; at least 1). See [Quotas](crate#quotas). URL
        /// parameter `max_records_per_user`.
        pub fn max_records_per_user(mut self, records: u64) -> Self {
            self.$($field).+ = self.$($field).+.max_records_per_user(records);
            self
        }

        /// The most bytes one application user may hold, counted by
        /// [`record_bytes`](crate::quota::record_bytes) (default: no limit; at least 1). URL
        /// parameter `max_bytes_per_user`.
        pub fn max_bytes_per_user(mut self, bytes: u64) -> Self {
            self.$($field).+ = self.$($field).+.max_bytes_per_user(bytes);
            self
        }

        /// Sets both limits at once from `quotas`.
        pub fn quotas(mut self, quotas: $crate::quota::Quotas) -> Self {
            self.$($field).+ = quotas;
            self
        }
    };
}
pub(crate) use quota_setters;

/// The URL parameter and builder method that limits how many records a user holds.
pub const MAX_RECORDS_PER_USER: &str = "max_records_per_user";
/// The URL parameter and builder method that limits how many bytes a user holds.
pub const MAX_BYTES_PER_USER: &str = "max_bytes_per_user";

/// The limits of one store, per application user; both unset by default (no limit).
///
/// Every provider's builder has `max_records_per_user` and `max_bytes_per_user` methods, and
/// its URL the parameters of the same names; zero is [`Invalid`](MemoryError::Invalid).
///
/// ```
/// use agent_memory::Quotas;
///
/// let quotas = Quotas::default().max_records_per_user(1_000).max_bytes_per_user(1 << 20);
/// assert_eq!(quotas.records(), Some(1_000));
/// quotas.check()?;
/// assert!(Quotas::default().max_records_per_user(0).check().is_err());
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quotas {
    records: Option<u64>,
    bytes: Option<u64>,
}

impl Quotas {
    /// No limits.
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// Limits the records one user holds, every namespace and expired records included.
    pub fn max_records_per_user(mut self, records: u64) -> Self {
        self.records = Some(records);
        self
    }

    /// Limits the bytes one user holds, counted by [`record_bytes`].
    pub fn max_bytes_per_user(mut self, bytes: u64) -> Self {
        self.bytes = Some(bytes);
        self
    }

    /// The records limit, if set.
    pub fn records(&self) -> Option<u64> {
        self.records
    }

    /// The bytes limit, if set.
    pub fn bytes(&self) -> Option<u64> {
        self.bytes
    }

    /// True when neither limit is set.
    pub fn is_unlimited(&self) -> bool {
        self.records.is_none() && self.bytes.is_none()
    }

    /// Refuses a zero limit, naming it. Limits are also kept within `i64::MAX`, the widest
    /// count a SQL column or a Redis integer holds.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `max_records_per_user` or `max_bytes_per_user`.
    pub fn check(&self) -> Result<()> {
        for (name, limit) in
            [(MAX_RECORDS_PER_USER, self.records), (MAX_BYTES_PER_USER, self.bytes)]
        {
            match limit {
                Some(0) => return Err(MemoryError::invalid(name, "must be at least 1")),
                Some(n) if i64::try_from(n).is_err() => {
                    return Err(MemoryError::invalid(name, "must be at most 9223372036854775807"))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Decides a write against the user's usage: `before` is what the user holds now, `change`
    /// what the write adds (negative when it frees). A write is refused only when it adds to a
    /// count that would then pass its limit, so a replacement that shrinks a record, or a
    /// delete, always succeeds, even for a user over a limit lowered since.
    ///
    /// # Errors
    /// [`QuotaExceeded`](MemoryError::QuotaExceeded) naming the first limit passed.
    pub fn admit(&self, before: Usage, change: UsageChange) -> Result<()> {
        let after = |held: u64, delta: i64| held.saturating_add_signed(delta);
        if let Some(limit) = self.records {
            if change.records > 0 && after(before.records, change.records) > limit {
                return Err(MemoryError::quota_exceeded(MAX_RECORDS_PER_USER, limit));
            }
        }
        if let Some(limit) = self.bytes {
            if change.bytes > 0 && after(before.bytes, change.bytes) > limit {
                return Err(MemoryError::quota_exceeded(MAX_BYTES_PER_USER, limit));
            }
        }
        Ok(())
    }

    /// Takes `max_records_per_user` and `max_bytes_per_user` from URL parameters.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` and the parameter when one does not
    /// parse as a whole number.
    pub fn from_params(params: &mut crate::connection_url::Params) -> Result<Self> {
        let mut quotas = Self::default();
        if let Some(n) = params.take_parsed(MAX_RECORDS_PER_USER)? {
            quotas = quotas.max_records_per_user(n);
        }
        if let Some(n) = params.take_parsed(MAX_BYTES_PER_USER)? {
            quotas = quotas.max_bytes_per_user(n);
        }
        Ok(quotas)
    }
}

/// What one user holds: records and their bytes, by [`record_bytes`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Records held, expired ones included.
    pub records: u64,
    /// Bytes held.
    pub bytes: u64,
}

/// What a write changes in a user's [`Usage`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageChange {
    /// +1 for a new record, 0 for a replacement.
    pub records: i64,
    /// The new record's bytes minus the replaced one's.
    pub bytes: i64,
}

impl UsageChange {
    /// The change of writing a record of `new_bytes` over one of `old_bytes` (`None` when the
    /// key holds no record, live or expired).
    pub fn of_write(old_bytes: Option<u64>, new_bytes: u64) -> Self {
        let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        Self {
            records: i64::from(old_bytes.is_none()),
            bytes: signed(new_bytes) - old_bytes.map_or(0, signed),
        }
    }
}

/// The bytes a record is charged: key, content, metadata as compact JSON and source as compact
/// JSON (`{}` when empty), in UTF-8 bytes. The same on every provider, whatever its storage
/// format, so a limit means the same everywhere.
///
/// ```
/// use agent_memory::{quota::record_bytes, Metadata, Source};
///
/// let metadata: Metadata = serde_json::from_str(r#"{"a":1}"#).unwrap();
/// assert_eq!(record_bytes("k", "hello", &metadata, &Source::default()), 1 + 5 + 7 + 2);
/// ```
pub fn record_bytes(key: &str, content: &str, metadata: &Metadata, source: &Source) -> u64 {
    let total = key.len() + content.len() + compact_json_len(metadata) + compact_json_len(source);
    u64::try_from(total).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_growth_past_a_limit_is_refused() {
        let quotas = Quotas::default().max_records_per_user(2).max_bytes_per_user(100);
        let held = Usage { records: 2, bytes: 90 };
        assert!(quotas.admit(held, UsageChange::of_write(Some(10), 20)).is_ok());
        let err = quotas.admit(held, UsageChange::of_write(Some(10), 21)).unwrap_err();
        assert_eq!(err.to_string(), "quota exceeded: max_bytes_per_user is 100");
        let err = quotas.admit(held, UsageChange::of_write(None, 1)).unwrap_err();
        assert_eq!(err.to_string(), "quota exceeded: max_records_per_user is 2");
        // Over a lowered limit, shrinking still works.
        let over = Usage { records: 5, bytes: 500 };
        assert!(quotas.admit(over, UsageChange::of_write(Some(50), 10)).is_ok());
        assert!(Quotas::unlimited().admit(over, UsageChange::of_write(None, 1 << 40)).is_ok());
    }

    #[test]
    fn zero_and_oversized_limits_are_invalid() {
        let err = Quotas::default().max_bytes_per_user(0).check().unwrap_err();
        assert!(matches!(err, MemoryError::Invalid { field: MAX_BYTES_PER_USER, .. }));
        let err = Quotas::default().max_records_per_user(u64::MAX).check().unwrap_err();
        assert!(matches!(err, MemoryError::Invalid { field: MAX_RECORDS_PER_USER, .. }));
        Quotas::default().max_records_per_user(1).max_bytes_per_user(1).check().unwrap();
    }
}
