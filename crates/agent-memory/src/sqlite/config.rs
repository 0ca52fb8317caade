//! The options of a SQLite store: [`Synchronous`], the settings, [`SqliteMemoryStoreBuilder`],
//! [`SqliteMemoryStore::from_url`], and a `Debug` that shows no secret.
//!
//! Every option is checked once, in [`SqliteMemoryStoreBuilder::build`]: a zero or
//! out-of-range value is [`Invalid`](MemoryError::Invalid) naming the option, never raised or
//! clamped (ADR 0004). A URL parameter has the name of the builder method it sets and goes
//! through the same check.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use percent_encoding::percent_decode_str;

use super::SqliteMemoryStore;
use crate::connection_url::ConnectionUrl;
use crate::error::{MemoryError, Result};
use crate::provider::CommonOptions;
use crate::time::{Clock, SystemClock};

/// Default time a writer waits for another connection's write lock.
const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Default number of reader connections.
const DEFAULT_READERS: usize = 4;
/// Default for the most keys one `search` call inspects before it returns with a cursor.
const DEFAULT_SEARCH_SCAN_LIMIT: usize = 1_000;
/// Default for the most records one `delete_all` or `delete_user` transaction removes.
const DEFAULT_ERASE_BATCH_SIZE: usize = 1_000;
/// Page cache per connection, in KiB.
const CACHE_KIB: u32 = 16 * 1024;
/// Default for the bytes of the file each connection reads through a memory map instead of
/// `read` calls.
const MMAP_BYTES: u64 = 1024 * 1024 * 1024;
/// The largest map the bundled SQLite makes (its `SQLITE_MAX_MMAP_SIZE`); it would silently
/// lower a larger `mmap_size`, so one is refused instead.
const MAX_MMAP_BYTES: u64 = 0x7fff_0000;

/// How hard SQLite pushes each commit to the disk (`PRAGMA synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `NORMAL` (the default): every acknowledged write survives the process being killed; a
    /// power loss or an operating system crash may lose the last commits, never consistency.
    #[default]
    Normal,
    /// `FULL`: every commit is flushed to the disk before `put` returns, so acknowledged writes
    /// survive power loss too. Slower: one `fsync` per write.
    Full,
}

impl Synchronous {
    /// The value of `PRAGMA synchronous`.
    pub(super) fn pragma(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Full => "FULL",
        }
    }
}

/// Options fixed when the store is built, checked by [`Options::check`].
#[derive(Debug, Clone)]
pub(super) struct Options {
    pub(super) busy_timeout: Duration,
    pub(super) synchronous: Synchronous,
    pub(super) read_only: bool,
    pub(super) create: bool,
    pub(super) readers: usize,
    pub(super) common: CommonOptions,
    pub(super) cache_kib: u32,
    pub(super) mmap_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            synchronous: Synchronous::Normal,
            read_only: false,
            create: true,
            readers: DEFAULT_READERS,
            common: CommonOptions::new(DEFAULT_SEARCH_SCAN_LIMIT, DEFAULT_ERASE_BATCH_SIZE),
            cache_kib: CACHE_KIB,
            mmap_bytes: MMAP_BYTES,
        }
    }
}

impl Options {
    /// Refuses a zero or out-of-range option, naming it.
    fn check(&self) -> Result<()> {
        // SQLite counts the busy timeout in whole milliseconds in a C `int`: less than one
        // millisecond would be no wait at all, and more than `i32::MAX` milliseconds (about
        // 24.8 days) does not fit (the driver would panic).
        let millis = self.busy_timeout.as_millis();
        if millis == 0 || i32::try_from(millis).is_err() {
            return Err(MemoryError::invalid(
                "busy_timeout",
                "must be at least 1 millisecond and at most 2147483 seconds",
            ));
        }
        at_least_one("readers", self.readers)?;
        self.common.check()?;
        if self.mmap_bytes > MAX_MMAP_BYTES {
            return Err(MemoryError::invalid("mmap_size", "must be at most 2147418112 bytes"));
        }
        Ok(())
    }
}

fn at_least_one(option: &'static str, value: usize) -> Result<()> {
    if value == 0 {
        return Err(MemoryError::invalid(option, "must be at least 1"));
    }
    Ok(())
}

/// Builds a [`SqliteMemoryStore`] with options; start from [`SqliteMemoryStore::builder`].
///
/// Each method sets one option; [`build`](Self::build) checks them all. The URL parameters of
/// [`SqliteMemoryStore::from_url`] have the same names.
///
/// ```
/// use std::time::Duration;
/// use agent_memory::sqlite::{SqliteMemoryStore, Synchronous};
///
/// let store = SqliteMemoryStore::builder("memories.db")
///     .busy_timeout(Duration::from_secs(10))
///     .synchronous(Synchronous::Full)
///     .readers(2)
///     .build()?;
/// assert!(!store.is_read_only());
///
/// let err = SqliteMemoryStore::builder("memories.db").readers(0).build().unwrap_err();
/// assert_eq!(err.to_string(), "invalid readers: must be at least 1");
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
pub struct SqliteMemoryStoreBuilder {
    path: PathBuf,
    clock: Arc<dyn Clock>,
    options: Options,
}

impl SqliteMemoryStoreBuilder {
    crate::builder::setters! {
        /// Reads "now" from `clock` for timestamps and expiry (default: the system clock). Tests
        /// pass a [`ManualClock`](crate::ManualClock).
        clock(clock: Arc<dyn Clock>) => clock = clock;

        /// How long a write waits for another connection's write lock before failing with `Storage`
        /// (default 5 seconds; at least 1 millisecond, at most 2,147,483 seconds). URL parameter
        /// `busy_timeout`, in whole seconds.
        busy_timeout(timeout: Duration) => options.busy_timeout = timeout;

        /// How hard each commit is pushed to the disk (default [`Synchronous::Normal`]). URL
        /// parameter `synchronous=normal` or `synchronous=full`.
        synchronous(synchronous: Synchronous) => options.synchronous = synchronous;

        /// Opens the file read-only: reads work, writes return `Storage`, nothing is created. The
        /// file must already hold an agent-memory database. URL parameter `mode=ro` (and
        /// `mode=rwc`, the default, for read-write).
        read_only(read_only: bool) => options.read_only = read_only;

        /// Whether `start` creates the file and its missing folders when the file does not exist
        /// (default true). With false, `start` on a missing file returns
        /// [`Invalid`](MemoryError::Invalid) naming `path` and creates nothing, so a mistyped path
        /// opened for reading never leaves an empty database (and its folders) behind. URL
        /// parameter `mode=rw` (read-write, existing file only; `mode=rwc` creates it). A read-only
        /// store never creates anything either way.
        create_if_missing(create: bool) => options.create = create;

        /// How many reads run in parallel, each on its own connection and thread (default 4, at
        /// least 1). URL parameter `readers`.
        readers(readers: usize) => options.readers = readers;

        /// How many bytes of the file each connection reads through a memory map rather than `read`
        /// calls (default 1 GiB, at most 2,147,418,112; 0 turns mapping off). Mapped pages save a
        /// copy per page read, but every connection that touched a page counts it in the process's
        /// resident memory: a job that reads a large file once, end to end (an export, a
        /// migration), keeps its resident memory flat with 0. With a map, SQLite also looks up
        /// every page it touches in the write-ahead log's index, cached or not, which costs writes
        /// more than reads (docs/performance.md). URL parameter `mmap_size`.
        mmap_size(bytes: u64) => options.mmap_bytes = bytes;
    }

    crate::provider::common_setters! {
        options.common;
        search_scan_limit: "1,000", "A larger value finds sparse matches in fewer calls; a \
            smaller one keeps each call, and the reader it occupies, shorter.";
        search_scan_bytes: "";
        erase_batch_size: "1,000", "Each step is one transaction: other writers, in this \
            process or another, get the write lock between steps, so a smaller value locks \
            them out for shorter times.";
    }

    /// The unstarted store.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming the option (`busy_timeout`, `readers`,
    /// `search_scan_limit`, `search_scan_bytes`, `erase_batch_size`, `mmap_size`,
    /// `max_records_per_user` or `max_bytes_per_user`) when one is zero or out of range.
    pub fn build(self) -> Result<SqliteMemoryStore> {
        self.options.check()?;
        Ok(unstarted(self.path, self.clock, self.options))
    }
}

/// A store that has not started; its settings have been checked.
fn unstarted(path: PathBuf, clock: Arc<dyn Clock>, options: Options) -> SqliteMemoryStore {
    SqliteMemoryStore {
        path,
        clock,
        options,
        pool: RwLock::new(None),
        lifecycle: tokio::sync::Mutex::new(()),
    }
}

impl SqliteMemoryStore {
    /// An unstarted store on the file at `path` with default options.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        // The defaults are valid (a unit test checks it), so this needs no `build()`.
        unstarted(path.into(), Arc::new(SystemClock), Options::default())
    }

    /// A builder for a store on the file at `path`.
    pub fn builder(path: impl Into<PathBuf>) -> SqliteMemoryStoreBuilder {
        SqliteMemoryStoreBuilder {
            path: path.into(),
            clock: Arc::new(SystemClock),
            options: Options::default(),
        }
    }

    /// An unstarted store from `sqlite:PATH` or `sqlite://PATH`, with options as query
    /// parameters named like the builder methods: `mode=ro|rw|rwc`, `synchronous=normal|full`,
    /// `readers`, `busy_timeout` (whole seconds), `search_scan_limit`, `search_scan_bytes`,
    /// `erase_batch_size`, `mmap_size`, `max_records_per_user`, `max_bytes_per_user`. See
    /// the [module docs](crate::sqlite#opening).
    ///
    /// ```
    /// use agent_memory::SqliteMemoryStore;
    ///
    /// let store = SqliteMemoryStore::from_url("sqlite:///srv/agent/memories.db?mode=ro")?;
    /// assert_eq!(store.path(), std::path::Path::new("/srv/agent/memories.db"));
    /// assert!(store.is_read_only());
    /// let spaced = SqliteMemoryStore::from_url("sqlite:my%20data/m.db?readers=2")?;
    /// assert_eq!(spaced.path(), std::path::Path::new("my data/m.db"));
    /// assert!(SqliteMemoryStore::from_url("sqlite:").is_err());
    /// let err = SqliteMemoryStore::from_url("sqlite:m.db?cache=shared").unwrap_err();
    /// assert_eq!(err.to_string(), "invalid url: has an unknown parameter `cache`");
    /// # Ok::<(), agent_memory::MemoryError>(())
    /// ```
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `url` for another scheme, an empty path,
    /// `:memory:`, a path the URL rules would read differently (see the module docs), an
    /// unknown parameter or a malformed value; naming the option for a value
    /// [`build`](SqliteMemoryStoreBuilder::build) refuses. The message never repeats the URL.
    pub fn from_url(url: &str) -> Result<Self> {
        builder_from_url(url)?.build()
    }

    /// An unstarted store on [`default_sqlite_path`](crate::default_sqlite_path), the file the
    /// CLI and the MCP server use when no store is named. `start()` creates it.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) when the system reports no data directory.
    pub fn at_default_path() -> Result<Self> {
        Ok(Self::new(crate::default_sqlite_path()?))
    }
}

/// The builder a `sqlite:` URL describes; `build()` then checks the values.
fn builder_from_url(text: &str) -> Result<SqliteMemoryStoreBuilder> {
    const SCHEME: &str = "sqlite:";
    let after_scheme = text
        .get(..SCHEME.len())
        .filter(|scheme| scheme.eq_ignore_ascii_case(SCHEME))
        .and_then(|_| text.get(SCHEME.len()..))
        .ok_or_else(|| MemoryError::invalid("url", "is not a sqlite: URL"))?;
    refuse_reinterpreted_paths(after_scheme)?;
    let url = ConnectionUrl::parse(text)?;
    // In `sqlite://data/m.db` the URL rules read `data` as a host; here it is the first
    // segment of the path, as written (`sqlite:///srv/m.db` has an empty one).
    let first_segment = url.single_host()?.map(|first| first.host.clone()).unwrap_or_default();
    let path = first_segment + &url.path;
    if path.is_empty() {
        return Err(MemoryError::invalid("url", "names no file"));
    }
    if path == ":memory:" {
        return Err(MemoryError::invalid(
            "url",
            "names an in-memory SQLite database: use memory: instead",
        ));
    }

    let mut params = url.params;
    let mut builder = SqliteMemoryStore::builder(path);
    if let Some(mode) = params.take("mode") {
        let (read_only, create) = match mode.as_str() {
            "ro" => (true, false),
            "rw" => (false, false),
            "rwc" => (false, true),
            _ => return Err(MemoryError::invalid("url", "has a `mode` that is not ro, rw or rwc")),
        };
        builder = builder.read_only(read_only).create_if_missing(create);
    }
    if let Some(synchronous) = params.take("synchronous") {
        builder = builder.synchronous(match synchronous.as_str() {
            "normal" => Synchronous::Normal,
            "full" => Synchronous::Full,
            _ => {
                return Err(MemoryError::invalid(
                    "url",
                    "has a `synchronous` that is not normal or full",
                ))
            }
        });
    }
    if let Some(readers) = params.take_parsed("readers")? {
        builder = builder.readers(readers);
    }
    if let Some(timeout) = params.take_seconds("busy_timeout")? {
        builder = builder.busy_timeout(timeout);
    }
    if let Some(bytes) = params.take_parsed("mmap_size")? {
        builder = builder.mmap_size(bytes);
    }
    builder.options.common.take_params(&mut params)?;
    params.finish()?;
    Ok(builder)
}

/// Refuses the two spellings the URL rules would turn into another file than the one written,
/// so that a `sqlite:` path either names exactly what it says or fails:
///
/// - in `sqlite://FIRST/REST`, a `FIRST` holding `@`, `:` or `,`, which URL rules read as a
///   user, a port or a host list (`sqlite://C:/m.db` would lose its colon);
/// - in a path that starts with `/`, a `.` or `..` segment (also as `%2e`), which URL rules
///   remove (`sqlite://data/../m.db` would name `data/m.db`). A path that does not start with
///   `/` (`sqlite:../m.db`) is kept as written.
fn refuse_reinterpreted_paths(after_scheme: &str) -> Result<()> {
    let before_query = after_scheme.split(['?', '#']).next().unwrap_or_default();
    let (first_segment, path) = match before_query.strip_prefix("//") {
        Some(rest) => rest.split_at(rest.find('/').unwrap_or(rest.len())),
        None => ("", before_query),
    };
    if first_segment.contains(['@', ':', ',']) {
        return Err(MemoryError::invalid(
            "url",
            "has `@`, `:` or `,` before the first `/` of a sqlite:// path: write sqlite:PATH",
        ));
    }
    let is_dot_segment =
        |segment: &str| matches!(&*percent_decode_str(segment).decode_utf8_lossy(), "." | "..");
    if path.starts_with('/') && path.split('/').any(is_dot_segment) {
        return Err(MemoryError::invalid(
            "url",
            "has a `.` or `..` segment, which URL rules remove: name the file without it",
        ));
    }
    Ok(())
}

impl fmt::Debug for SqliteMemoryStoreBuilder {
    // Written out rather than derived so that an option added later is shown only on purpose.
    // Nothing here is secret: a SQLite store has no credentials, and the path is shown as the
    // store's own `Debug` shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteMemoryStoreBuilder")
            .field("path", &self.path)
            .field("clock", &self.clock)
            .field("busy_timeout", &self.options.busy_timeout)
            .field("synchronous", &self.options.synchronous)
            .field("read_only", &self.options.read_only)
            .field("readers", &self.options.readers)
            .field("search_scan_limit", &self.options.common.search_scan_limit)
            .field("search_scan_bytes", &self.options.common.search_scan_bytes)
            .field("erase_batch_size", &self.options.common.erase_batch_size)
            .field("mmap_size", &self.options.mmap_bytes)
            .field("quotas", &self.options.common.quotas)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for SqliteMemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let started = self.pool.read().unwrap_or_else(PoisonError::into_inner).is_some();
        f.debug_struct("SqliteMemoryStore")
            .field("path", &self.path)
            .field("read_only", &self.options.read_only)
            .field("started", &started)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn options(url: &str) -> Options {
        SqliteMemoryStore::from_url(url).unwrap_or_else(|err| panic!("{url}: {err}")).options
    }

    fn invalid_field(result: Result<SqliteMemoryStore>) -> (&'static str, String) {
        match result {
            Err(MemoryError::Invalid { field, reason }) => (field, reason),
            Err(other) => panic!("not Invalid: {other}"),
            Ok(store) => panic!("accepted: {store:?}"),
        }
    }

    #[test]
    fn the_defaults_are_valid_and_as_documented() {
        let defaults = Options::default();
        defaults.check().expect("the defaults pass the builder's checks");
        assert_eq!(defaults.busy_timeout, Duration::from_secs(5));
        assert_eq!(defaults.synchronous, Synchronous::Normal);
        assert!(!defaults.read_only);
        assert_eq!(defaults.readers, 4);
        assert_eq!(defaults.common.search_scan_limit, 1_000);
        assert_eq!(defaults.common.search_scan_bytes, 1_048_576);
        assert_eq!(defaults.common.erase_batch_size, 1_000);
        assert_eq!(defaults.mmap_bytes, 1 << 30);
        let url = options("sqlite:m.db");
        assert_eq!(format!("{url:?}"), format!("{defaults:?}"), "no parameter, no change");
    }

    #[test]
    fn each_url_parameter_sets_its_option() {
        assert!(options("sqlite:m.db?mode=ro").read_only);
        assert!(!options("sqlite:m.db?mode=rwc").read_only);
        assert!(options("sqlite:m.db?mode=rwc").create && options("sqlite:m.db").create);
        let existing_only = options("sqlite:m.db?mode=rw");
        assert!(!existing_only.read_only && !existing_only.create);
        assert_eq!(options("sqlite:m.db?synchronous=full").synchronous, Synchronous::Full);
        assert_eq!(options("sqlite:m.db?synchronous=normal").synchronous, Synchronous::Normal);
        assert_eq!(options("sqlite:m.db?readers=2").readers, 2);
        assert_eq!(options("sqlite:m.db?busy_timeout=30").busy_timeout, Duration::from_secs(30));
        assert_eq!(options("sqlite:m.db?search_scan_limit=50").common.search_scan_limit, 50);
        assert_eq!(options("sqlite:m.db?search_scan_bytes=4096").common.search_scan_bytes, 4_096);
        assert_eq!(options("sqlite:m.db?erase_batch_size=10").common.erase_batch_size, 10);
        assert_eq!(options("sqlite:m.db?mmap_size=0").mmap_bytes, 0);
        assert_eq!(options("sqlite:m.db?mmap_size=65536").mmap_bytes, 65_536);
        assert_eq!(
            options("sqlite:m.db?max_records_per_user=5&max_bytes_per_user=900").common.quotas,
            crate::quota::Quotas::default().max_records_per_user(5).max_bytes_per_user(900)
        );
        let all = options(
            "sqlite:m.db?mode=ro&synchronous=full&readers=1&busy_timeout=1\
             &search_scan_limit=7&erase_batch_size=3",
        );
        assert!(all.read_only);
        assert_eq!(all.synchronous, Synchronous::Full);
        assert_eq!((all.readers, all.busy_timeout), (1, Duration::from_secs(1)));
        assert_eq!((all.common.search_scan_limit, all.common.erase_batch_size), (7, 3));
    }

    #[test]
    fn malformed_parameter_values_are_invalid_url_without_the_value() {
        for (url, value) in [
            ("sqlite:m.db?mode=readwrite", "readwrite"),
            ("sqlite:m.db?mode=RO", "RO"),
            ("sqlite:m.db?synchronous=sometimes", "sometimes"),
            ("sqlite:m.db?readers=several", "several"),
            ("sqlite:m.db?readers=-1", "-1"),
            ("sqlite:m.db?busy_timeout=2.5", "2.5"),
            ("sqlite:m.db?search_scan_limit=", "m.db"),
            ("sqlite:m.db?erase_batch_size=lots", "lots"),
            ("sqlite:m.db?mmap_size=-1", "-1"),
            ("sqlite:m.db?readers=1&readers=2", "1"),
        ] {
            let (field, reason) = invalid_field(SqliteMemoryStore::from_url(url));
            assert_eq!(field, "url", "{url}");
            assert!(!reason.contains(value) && !reason.contains("m.db"), "{url}: {reason}");
        }
    }

    #[test]
    fn an_unknown_parameter_is_named_in_the_error() {
        let err = SqliteMemoryStore::from_url("sqlite:/srv/m.db?mode=ro&cache=shared")
            .expect_err("unknown parameter");
        assert!(matches!(err, MemoryError::Invalid { field: "url", .. }));
        assert_eq!(err.to_string(), "invalid url: has an unknown parameter `cache`");
        // The old spelling of another provider's option is unknown here too.
        let err = SqliteMemoryStore::from_url("sqlite:m.db?erase_batch=5").expect_err("unknown");
        assert_eq!(err.to_string(), "invalid url: has an unknown parameter `erase_batch`");
    }

    #[test]
    fn zero_and_out_of_range_values_are_invalid_naming_the_option() {
        let builder = || SqliteMemoryStore::builder("m.db");
        let cases = [
            ("readers", builder().readers(0).build()),
            ("busy_timeout", builder().busy_timeout(Duration::ZERO).build()),
            ("busy_timeout", builder().busy_timeout(Duration::from_micros(999)).build()),
            ("busy_timeout", builder().busy_timeout(Duration::from_secs(2_147_484)).build()),
            ("search_scan_limit", builder().search_scan_limit(0).build()),
            ("search_scan_bytes", builder().search_scan_bytes(0).build()),
            ("search_scan_bytes", SqliteMemoryStore::from_url("sqlite:m.db?search_scan_bytes=0")),
            ("erase_batch_size", builder().erase_batch_size(0).build()),
            ("mmap_size", builder().mmap_size(MAX_MMAP_BYTES + 1).build()),
            ("mmap_size", SqliteMemoryStore::from_url("sqlite:m.db?mmap_size=4294967296")),
            ("readers", SqliteMemoryStore::from_url("sqlite:m.db?readers=0")),
            ("busy_timeout", SqliteMemoryStore::from_url("sqlite:m.db?busy_timeout=0")),
            ("search_scan_limit", SqliteMemoryStore::from_url("sqlite:m.db?search_scan_limit=0")),
            ("erase_batch_size", SqliteMemoryStore::from_url("sqlite:m.db?erase_batch_size=0")),
            ("max_records_per_user", builder().max_records_per_user(0).build()),
            ("max_bytes_per_user", builder().max_bytes_per_user(0).build()),
            (
                "max_records_per_user",
                SqliteMemoryStore::from_url("sqlite:m.db?max_records_per_user=0"),
            ),
            ("max_bytes_per_user", SqliteMemoryStore::from_url("sqlite:m.db?max_bytes_per_user=0")),
        ];
        for (option, result) in cases {
            assert_eq!(invalid_field(result).0, option);
        }
        if let Ok(too_big) = usize::try_from(u64::MAX) {
            let result = builder().erase_batch_size(too_big).build();
            assert_eq!(invalid_field(result).0, "erase_batch_size");
        }
        // The edges themselves are accepted.
        builder()
            .readers(1)
            .busy_timeout(Duration::from_millis(1))
            .search_scan_limit(1)
            .erase_batch_size(1)
            .mmap_size(0)
            .build()
            .expect("the smallest values");
        builder().mmap_size(MAX_MMAP_BYTES).build().expect("the largest map");
        builder().busy_timeout(Duration::from_millis(2_147_483_647)).build().expect("the largest");
    }

    #[test]
    fn paths_are_read_as_written_and_percent_decoded() {
        let path = |url: &str| {
            SqliteMemoryStore::from_url(url).unwrap_or_else(|err| panic!("{url}: {err}")).path
        };
        let cases = [
            ("sqlite:data/m.db", "data/m.db"),
            ("sqlite://data/m.db", "data/m.db"),
            ("SQLITE://Data/M.db", "Data/M.db"),
            ("sqlite:/srv/m.db", "/srv/m.db"),
            ("sqlite:///srv/m.db", "/srv/m.db"),
            ("sqlite:m.db", "m.db"),
            ("sqlite://m.db", "m.db"),
            ("sqlite:../m.db", "../m.db"),
            ("sqlite://../m.db", "../m.db"),
            ("sqlite:./a/../m.db", "./a/../m.db"),
            ("sqlite:my%20data/m%25.db", "my data/m%.db"),
            ("sqlite:///srv/a%3Fb%23c.db", "/srv/a?b#c.db"),
            ("sqlite://d%C3%A4ta/%C3%BC.db", "däta/ü.db"),
            ("sqlite://dä/ü.db", "dä/ü.db"),
            ("sqlite:C:/agent/m.db", "C:/agent/m.db"),
        ];
        for (url, expected) in cases {
            assert_eq!(path(url), Path::new(expected), "{url}");
        }
    }

    #[test]
    fn urls_that_would_name_another_file_are_invalid() {
        for url in [
            "sqlite:",
            "sqlite://",
            "sqlite:?mode=ro",
            "sqlite::memory:",
            "sqlite:%3Amemory%3A",
            "sqlite://:memory:",
            "sqlite://C:/agent/m.db",
            "sqlite://data:5/m.db",
            "sqlite://me@data/m.db",
            "sqlite://a,b/m.db",
            "sqlite://data/../m.db",
            "sqlite:/srv/./m.db",
            "sqlite:///srv/%2e%2E/m.db",
            "sqlite:/srv/m.db#part",
            "postgres://h/db",
            "sqlit:m.db",
        ] {
            let (field, reason) = invalid_field(SqliteMemoryStore::from_url(url));
            assert_eq!(field, "url", "{url}");
            assert!(!reason.contains("m.db") && !reason.contains("agent"), "{url}: {reason}");
        }
    }

    #[test]
    fn debug_shows_the_path_and_options_but_never_the_url() {
        let url = "sqlite:///srv/m.db?mode=ro&readers=2&busy_timeout=9";
        let store = SqliteMemoryStore::from_url(url).expect("valid");
        let shown = format!("{store:?}");
        assert!(shown.contains("\"/srv/m.db\"") && shown.contains("read_only: true"), "{shown}");
        assert!(!shown.contains("sqlite:") && !shown.contains('?'), "{shown}");
        let shown = format!("{:?}", builder_from_url(url).expect("valid"));
        assert!(shown.starts_with("SqliteMemoryStoreBuilder {"), "{shown}");
        assert!(shown.contains("readers: 2") && shown.contains("busy_timeout: 9s"), "{shown}");
        assert!(!shown.contains("sqlite:") && !shown.contains('?'), "{shown}");
        // Credentials have no place in a sqlite: URL; one that has them is refused without
        // repeating them.
        let err = SqliteMemoryStore::from_url("sqlite://me:hunter2@data/m.db").expect_err("user");
        assert!(!err.to_string().contains("hunter2") && !err.to_string().contains("me:"));
    }
}
