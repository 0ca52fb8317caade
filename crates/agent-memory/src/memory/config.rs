//! [`InMemoryStoreBuilder`]: the in-process store's options.

use std::sync::Arc;

use super::InMemoryStore;
use crate::error::{MemoryError, Result};
use crate::quota::Quotas;
use crate::time::{Clock, SystemClock};

/// Builds an [`InMemoryStore`]; start from [`InMemoryStore::builder`].
///
/// ```
/// use agent_memory::InMemoryStore;
///
/// let store = InMemoryStore::builder().max_records_per_user(100).build()?;
/// let err = InMemoryStore::builder().max_bytes_per_user(0).build().unwrap_err();
/// assert_eq!(err.to_string(), "invalid max_bytes_per_user: must be at least 1");
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
#[derive(Debug)]
pub struct InMemoryStoreBuilder {
    pub(super) clock: Arc<dyn Clock>,
    pub(super) quotas: Quotas,
}

impl InMemoryStoreBuilder {
    /// Reads "now" from `clock` (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    crate::quota::quota_setters!(quotas);

    /// The unstarted store.
    ///
    /// # Errors
    /// [`Invalid`](crate::MemoryError::Invalid) naming a quota that is zero.
    pub fn build(self) -> Result<InMemoryStore> {
        self.quotas.check()?;
        Ok(InMemoryStore::unstarted(self.clock, self.quotas))
    }
}

impl InMemoryStore {
    /// A builder, for a store with [quotas](crate#quotas) or a clock.
    pub fn builder() -> InMemoryStoreBuilder {
        InMemoryStoreBuilder { clock: Arc::new(SystemClock), quotas: Quotas::unlimited() }
    }

    /// A store from a `memory:` URL (see [`open`](crate::open)): `memory:` alone, or with the
    /// quota parameters `max_records_per_user` and `max_bytes_per_user`, as in
    /// `memory:?max_records_per_user=100`.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` for anything else after the colon, an
    /// unknown parameter or a malformed value; naming the option for a zero limit.
    pub fn from_url(url: &str) -> Result<Self> {
        let rest = url
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("memory:"))
            .and_then(|_| url.get(7..))
            .ok_or_else(|| MemoryError::invalid("url", "is not a memory: URL"))?;
        let query = rest.strip_prefix("//").unwrap_or(rest);
        if query.is_empty() {
            return Ok(Self::new());
        }
        if !query.starts_with('?') {
            return Err(MemoryError::invalid(
                "url",
                "memory: takes nothing after the colon but quota parameters",
            ));
        }
        let mut params =
            crate::connection_url::ConnectionUrl::parse(&format!("memory:{query}"))?.params;
        let quotas = Quotas::from_params(&mut params)?;
        params.finish()?;
        let mut builder = Self::builder();
        builder.quotas = quotas;
        builder.build()
    }
}
