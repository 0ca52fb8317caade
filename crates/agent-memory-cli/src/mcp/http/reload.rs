//! Files the server re-reads while it runs: the API key file and the JWT keys, one mechanism
//! for both.
//!
//! A [`Watched`] file is read once at start (a file that cannot be used stops the server from
//! starting) and then polled every [`POLL`]: when its size, modification time, inode or device
//! changes, it is read and parsed again. The outcome of a reload:
//!
//! - it parses: the new contents replace the old ones at once, for every later request;
//! - its last line is incomplete (`api-key add` is appending right now): nothing changes, and
//!   the file is read again at the next poll;
//! - it is missing, unreadable or garbled: the server **fails closed**: every credential of
//!   that kind is refused until the file parses again, and the failure is logged at `error` on
//!   each change. Keeping the old contents instead could keep a key working that the operator
//!   just revoked with a hand edit that went wrong.
//!
//! Polling the metadata (a `stat` four times a second) needs no watcher thread and sees
//! renames, which is how `api-key revoke` replaces the file; a revoked key is refused within
//! about a quarter of a second.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often a watched file's metadata is checked.
pub const POLL: Duration = Duration::from_millis(250);

/// How often, and how long apart, a start-up read retries a file whose last line is still
/// being written.
const START_RETRIES: u32 = 20;

/// Why a file's contents could not be used.
#[derive(Debug)]
pub enum LoadError {
    /// A write is in progress (the last line has no newline yet): try again shortly.
    Incomplete,
    /// The contents are not usable, for this reason (never quoting the contents).
    Invalid(String),
}

/// Turns a file's bytes into what the server uses.
pub type Parse<T> = Box<dyn Fn(&[u8]) -> Result<T, LoadError> + Send + Sync>;

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        }
    }
}

/// A file's parsed contents, kept current while the server runs.
pub struct Watched<T> {
    /// What the file holds, for log lines: "API key file", "JWT keys".
    what: &'static str,
    path: PathBuf,
    parse: Parse<T>,
    /// `None` while the file is unusable: every credential it would check is refused.
    current: RwLock<Option<Arc<T>>>,
}

impl<T> std::fmt::Debug for Watched<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched").field("what", &self.what).finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> Watched<T> {
    /// Reads `path` with `parse` now and re-reads it on every change until `stop` is
    /// cancelled.
    ///
    /// # Errors
    /// A sentence naming `what` and the reason, when the file cannot be read or parsed now.
    pub async fn start(
        what: &'static str,
        path: &Path,
        parse: Parse<T>,
        stop: CancellationToken,
    ) -> Result<Arc<Self>, String> {
        let watched =
            Arc::new(Self { what, path: path.to_owned(), parse, current: RwLock::new(None) });
        let mut attempts = 0;
        let stamp = loop {
            match watched.load().await {
                Ok(stamp) => break stamp,
                Err(LoadError::Incomplete) if attempts < START_RETRIES => {
                    attempts += 1;
                    tokio::time::sleep(POLL / 5).await;
                }
                Err(LoadError::Incomplete) => {
                    return Err(format!("the {what} ends in an incomplete line"));
                }
                Err(LoadError::Invalid(reason)) => return Err(format!("the {what}: {reason}")),
            }
        };
        tokio::spawn(Arc::clone(&watched).poll(stamp, stop));
        Ok(watched)
    }

    /// The current contents; `None` while the file is unusable.
    pub fn current(&self) -> Option<Arc<T>> {
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn set(&self, value: Option<Arc<T>>) {
        *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = value;
    }

    /// Reads and parses the file; on success installs the contents and returns their stamp.
    async fn load(&self) -> Result<Stamp, LoadError> {
        let invalid = |err: std::io::Error| LoadError::Invalid(format!("cannot read it: {err}"));
        let meta = tokio::fs::metadata(&self.path).await.map_err(invalid)?;
        let bytes = tokio::fs::read(&self.path).await.map_err(invalid)?;
        let value = (self.parse)(&bytes)?;
        self.set(Some(Arc::new(value)));
        Ok(Stamp::of(&meta))
    }

    /// Checks the file every [`POLL`] and reloads it when its stamp changes.
    async fn poll(self: Arc<Self>, mut seen: Stamp, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(POLL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A stamp of a file that failed to load, so the error is logged once per change.
        let mut failed: Option<Option<Stamp>> = None;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let now = tokio::fs::metadata(&self.path).await.ok().map(|meta| Stamp::of(&meta));
            let unchanged = match failed {
                Some(failed_at) => failed_at == now,
                None => now == Some(seen),
            };
            if unchanged {
                continue;
            }
            match self.load().await {
                Ok(stamp) => {
                    seen = stamp;
                    if failed.take().is_some() {
                        tracing::warn!(what = self.what, "the file is usable again");
                    } else {
                        tracing::info!(what = self.what, "reloaded after a change");
                    }
                }
                // Appending right now: look again at the next tick, keep what we have.
                Err(LoadError::Incomplete) => {}
                Err(LoadError::Invalid(reason)) => {
                    self.set(None);
                    failed = Some(now);
                    tracing::error!(
                        what = self.what,
                        %reason,
                        "cannot reload; refusing every credential it checks until it is fixed"
                    );
                }
            }
        }
    }
}
