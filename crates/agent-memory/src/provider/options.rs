//! [`CommonOptions`]: the options every database provider takes, kept once, and
//! [`common_setters!`], their builder methods.

use crate::connection_url::Params;
use crate::error::{MemoryError, Result};
use crate::quota::Quotas;
use crate::search_scan::{SearchScan, DEFAULT_SEARCH_SCAN_BYTES};

/// The options every database provider takes, with the same meaning, checks and URL
/// parameters: the budgets of one `search` (or filtered `list`) call, the size of one erase
/// batch, and the per-user [quotas](crate#quotas). A provider embeds one in its own options,
/// exposes a builder method per field, reads the URL parameters with
/// [`take_params`](Self::take_params) and refuses bad values with [`check`](Self::check).
///
/// ```
/// use agent_memory::provider::{CommonOptions, ConnectionUrl};
///
/// let mut options = CommonOptions::new(500, 500);
/// let mut params = ConnectionUrl::parse("mine://h?search_scan_limit=50&max_records_per_user=9")?.params;
/// options.take_params(&mut params)?;
/// params.finish()?;
/// assert_eq!(options.search_scan_limit, 50);
/// assert_eq!(options.quotas.records(), Some(9));
/// options.check()?;
///
/// options.erase_batch_size = 0;
/// assert_eq!(options.check().unwrap_err().to_string(), "invalid erase_batch_size: must be at least 1");
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommonOptions {
    /// Most records (keys, index entries) one `search` call inspects before it returns what
    /// it found with a cursor. At least 1. URL parameter `search_scan_limit`.
    pub search_scan_limit: usize,
    /// Most content bytes one `search` call inspects before it returns what it found with a
    /// cursor (a call always inspects one record). At least 1. URL parameter
    /// `search_scan_bytes`.
    pub search_scan_bytes: usize,
    /// Most records one step of `delete_all` or `delete_user` removes. At least 1, at most
    /// `i64::MAX` (bound as a SQL `LIMIT`). URL parameter `erase_batch_size`.
    pub erase_batch_size: usize,
    /// Limits per application user (URL parameters `max_records_per_user`,
    /// `max_bytes_per_user`).
    pub quotas: Quotas,
}

impl CommonOptions {
    /// The provider's defaults for the scan and the erase batch, [`DEFAULT_SEARCH_SCAN_BYTES`]
    /// and no quotas.
    pub fn new(search_scan_limit: usize, erase_batch_size: usize) -> Self {
        Self {
            search_scan_limit,
            search_scan_bytes: DEFAULT_SEARCH_SCAN_BYTES,
            erase_batch_size,
            quotas: Quotas::unlimited(),
        }
    }

    /// The budget of one `search` or filtered `list` call.
    pub fn search_scan(&self) -> SearchScan {
        SearchScan::new(self.search_scan_limit, self.search_scan_bytes)
    }

    /// Takes `search_scan_limit`, `search_scan_bytes`, `erase_batch_size`,
    /// `max_records_per_user` and `max_bytes_per_user` from `params`, keeping the value of each
    /// one the URL does not give.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` and the parameter when one does not
    /// parse as a whole number.
    pub fn take_params(&mut self, params: &mut Params) -> Result<()> {
        if let Some(limit) = params.take_parsed("search_scan_limit")? {
            self.search_scan_limit = limit;
        }
        if let Some(bytes) = params.take_parsed("search_scan_bytes")? {
            self.search_scan_bytes = bytes;
        }
        if let Some(size) = params.take_parsed("erase_batch_size")? {
            self.erase_batch_size = size;
        }
        let quotas = Quotas::from_params(params)?;
        if let Some(records) = quotas.records() {
            self.quotas = self.quotas.max_records_per_user(records);
        }
        if let Some(bytes) = quotas.bytes() {
            self.quotas = self.quotas.max_bytes_per_user(bytes);
        }
        Ok(())
    }

    /// Refuses a zero or out-of-range option, naming it.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming the first bad option.
    pub fn check(&self) -> Result<()> {
        for (name, value) in [
            ("search_scan_limit", self.search_scan_limit),
            ("search_scan_bytes", self.search_scan_bytes),
            ("erase_batch_size", self.erase_batch_size),
        ] {
            if value == 0 {
                return Err(MemoryError::invalid(name, "must be at least 1"));
            }
        }
        if i64::try_from(self.erase_batch_size).is_err() {
            return Err(MemoryError::invalid(
                "erase_batch_size",
                "must be at most 9223372036854775807",
            ));
        }
        self.quotas.check()
    }
}

/// The builder methods of [`CommonOptions`] (`search_scan_limit`, `search_scan_bytes`,
/// `erase_batch_size`) and of the quotas, for a builder holding the options at the given field
/// path. Each provider names its defaults and adds a sentence on what the budget bounds there.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
macro_rules! common_setters {
    (
        $($field:ident).+;
        search_scan_limit: $scan_default:literal, $scan_note:literal;
        search_scan_bytes: $bytes_note:literal;
        erase_batch_size: $erase_default:literal, $erase_note:literal $(;)?
    ) => {
        $crate::builder::setters! {
            #[doc = concat!(
                "The most keys one `search` (or filtered `list`) call inspects before it \
                 returns what it found, with a cursor to continue (default ", $scan_default,
                ", at least 1). ", $scan_note, " URL parameter `search_scan_limit`."
            )]
            search_scan_limit(keys: usize) => $($field).+.search_scan_limit = keys;
            #[doc = concat!(
                "The most content bytes one `search` call inspects before it returns what it \
                 found, with a cursor to continue (default 1 MiB, at least 1; a call always \
                 inspects one record, so it reads at most this plus one record's content). \
                 This bounds what one call costs whatever is stored: the matcher is linear, so \
                 time follows bytes. ", $bytes_note, " URL parameter `search_scan_bytes`."
            )]
            search_scan_bytes(bytes: usize) => $($field).+.search_scan_bytes = bytes;
            #[doc = concat!(
                "The most records one step of `delete_all` or `delete_user` removes (default ",
                $erase_default, ", at least 1); the store takes steps until none is left. ",
                $erase_note, " URL parameter `erase_batch_size`."
            )]
            erase_batch_size(records: usize) => $($field).+.erase_batch_size = records;
        }

        $crate::quota::quota_setters!($($field).+.quotas);
    };
}
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
pub(crate) use common_setters;
