//! [`Timestamp`], a UTC instant with microsecond precision, and the [`Clock`] providers read it
//! from.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{MemoryError, Result};

/// Largest accepted instant: 9999-12-31T23:59:59.999999Z, which every datastore can hold.
const MAX_MICROS: i64 = 253_402_300_799_999_999;

/// A UTC instant with microsecond precision, between the Unix epoch and the end of year 9999.
///
/// Its JSON form is Unix epoch seconds as a number (`1767225600.25`), the form the tools, the
/// CLI's export and every provider's timestamps use.
///
/// ```
/// use agent_memory::Timestamp;
///
/// let t = Timestamp::from_unix_seconds(1_767_225_600.25).unwrap();
/// assert_eq!(t.as_micros(), 1_767_225_600_250_000);
/// assert_eq!(t.as_unix_seconds(), 1_767_225_600.25);
/// assert_eq!(serde_json::to_string(&t).unwrap(), "1767225600.25");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// The current instant of the system clock.
    pub fn now() -> Self {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Self(i64::try_from(since.as_micros()).unwrap_or(MAX_MICROS).min(MAX_MICROS))
    }

    /// Microseconds since the Unix epoch, checked to lie between the epoch and year 9999.
    pub fn from_micros(micros: i64) -> Result<Self> {
        if (0..=MAX_MICROS).contains(&micros) {
            Ok(Self(micros))
        } else {
            Err(MemoryError::invalid("timestamp", "must lie between 1970 and the end of year 9999"))
        }
    }

    /// Unix epoch seconds, rounded to the nearest microsecond.
    pub fn from_unix_seconds(seconds: f64) -> Result<Self> {
        if !seconds.is_finite() {
            return Err(MemoryError::invalid("timestamp", "must be a finite number of seconds"));
        }
        let micros = (seconds * 1_000_000.0).round();
        // The range check happens in f64 so the conversion below cannot saturate.
        if !(0.0..=MAX_MICROS as f64).contains(&micros) {
            return Self::from_micros(-1);
        }
        #[allow(clippy::cast_possible_truncation)] // in range, checked above
        Self::from_micros(micros as i64)
    }

    /// Microseconds since the Unix epoch.
    pub fn as_micros(self) -> i64 {
        self.0
    }

    /// Unix epoch seconds with a fractional part.
    pub fn as_unix_seconds(self) -> f64 {
        // Exact for every instant before year 2255 (2^53 microseconds).
        #[allow(clippy::cast_precision_loss)]
        let micros = self.0 as f64;
        micros / 1_000_000.0
    }

    /// This instant moved forward by `duration`, saturating at the largest instant.
    pub fn saturating_add(self, duration: Duration) -> Self {
        let add = i64::try_from(duration.as_micros()).unwrap_or(MAX_MICROS);
        Self(self.0.saturating_add(add).min(MAX_MICROS))
    }

    /// This instant moved back by `duration`, saturating at the epoch.
    pub fn saturating_sub(self, duration: Duration) -> Self {
        let sub = i64::try_from(duration.as_micros()).unwrap_or(MAX_MICROS);
        Self(self.0.saturating_sub(sub).max(0))
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({}.{:06})", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

impl fmt::Display for Timestamp {
    /// Epoch seconds with six decimals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.as_unix_seconds())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let seconds = f64::deserialize(deserializer)?;
        Timestamp::from_unix_seconds(seconds).map_err(serde::de::Error::custom)
    }
}

/// Where a provider reads "now" from, for timestamps and expiry.
///
/// The in-process and SQLite providers take one so tests can move time without sleeping;
/// PostgreSQL and Redis always use their server's clock.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told to; clones share one instant.
///
/// ```
/// use std::time::Duration;
/// use agent_memory::{ManualClock, Clock, Timestamp};
///
/// let clock = ManualClock::new(Timestamp::from_unix_seconds(1000.0).unwrap());
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(clock.now().as_unix_seconds(), 1005.0);
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    micros: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self { micros: Arc::new(AtomicI64::new(start.as_micros())) }
    }

    /// A clock standing at the system clock's current instant.
    pub fn starting_now() -> Self {
        Self::new(Timestamp::now())
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_micros()).unwrap_or(MAX_MICROS);
        self.micros.fetch_add(by, Ordering::SeqCst);
    }

    /// Sets the clock to `to`.
    pub fn set(&self, to: Timestamp) {
        self.micros.store(to.as_micros(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.micros.load(Ordering::SeqCst).clamp(0, MAX_MICROS))
    }
}
