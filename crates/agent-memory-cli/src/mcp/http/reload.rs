//! Files the server re-reads while it runs: the API key file and the JWT keys, one mechanism
//! for both.
//!
//! A [`Watched`] file is read once at start (a file that cannot be used stops the server from
//! starting) and then polled every [`POLL`]: when its size, modification time, inode or device
//! changes, it is read and parsed again. The outcome of a reload:
//!
//! - it parses: the new contents replace the old ones at once, for every later request;
//! - its complete lines parse but its last line has no newline yet (`api-key add` appending
//!   right now, or a file replaced by one that lacks its final newline): the complete lines
//!   replace the old contents at once (so a revocation among them takes effect, and the key of
//!   the unfinished line is not accepted), and the file is read again at every poll; when the
//!   line is still unfinished after [`PENDING_POLLS`] polls (about two seconds), the server
//!   **fails closed** as below, with a fixed `error` line, until the file ends in a newline;
//! - it is missing, unreadable or garbled: the server **fails closed**: every credential of
//!   that kind is refused until the file parses again, and the failure is logged at `error`
//!   (once per failure, not once per retry). Keeping the old contents instead could keep a key
//!   working that the operator just revoked with a hand edit that went wrong. A failed reload
//!   is retried with back-off ([`RETRY_FIRST`] doubling up to [`RETRY_MAX`]) even when the
//!   file's stamp does not change, so a passing fault (descriptors exhausted for a moment) does
//!   not refuse every key until someone touches the file.
//!
//! Polling the metadata (a `stat` four times a second) needs no watcher thread and sees
//! renames, which is how `api-key revoke` replaces the file; a revoked key is refused within
//! about a quarter of a second.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

/// How often a watched file's metadata is checked.
pub const POLL: Duration = Duration::from_millis(250);

/// How many polls a last line without a newline is waited for before the file is refused.
pub const PENDING_POLLS: u32 = 8;

/// The first wait before a failed reload is tried again; each failure doubles it.
pub const RETRY_FIRST: Duration = Duration::from_millis(500);

/// The longest wait between two tries of a failed reload.
pub const RETRY_MAX: Duration = Duration::from_secs(30);

/// How often, and how long apart, a start-up read retries a file whose last line is still
/// being written.
const START_RETRIES: u32 = 20;

/// Why a file's contents could not be used.
#[derive(Debug)]
pub enum LoadError {
    /// The contents are not usable, for this reason (never quoting the contents).
    Invalid(String),
}

/// What a file's bytes hold.
#[derive(Debug)]
pub struct Parsed<T> {
    /// The contents of the complete lines.
    pub value: T,
    /// True when the bytes end in a line without its newline, which `value` leaves out.
    pub tail_pending: bool,
}

impl<T> From<T> for Parsed<T> {
    fn from(value: T) -> Self {
        Self { value, tail_pending: false }
    }
}

/// Turns a file's bytes into what the server uses.
pub type Parse<T> = Box<dyn Fn(&[u8]) -> Result<Parsed<T>, LoadError> + Send + Sync>;

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
                Ok((stamp, parsed)) if !parsed.tail_pending => {
                    watched.set(Some(Arc::new(parsed.value)));
                    break stamp;
                }
                Ok(_) if attempts < START_RETRIES => {
                    attempts += 1;
                    tokio::time::sleep(POLL / 5).await;
                }
                Ok(_) => return Err(format!("the {what} ends in an incomplete line")),
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

    /// Reads and parses the file; returns the stamp it had and what it holds.
    async fn load(&self) -> Result<(Stamp, Parsed<T>), LoadError> {
        let invalid = |err: std::io::Error| LoadError::Invalid(format!("cannot read it: {err}"));
        let meta = tokio::fs::metadata(&self.path).await.map_err(invalid)?;
        let bytes = tokio::fs::read(&self.path).await.map_err(invalid)?;
        Ok((Stamp::of(&meta), (self.parse)(&bytes)?))
    }

    /// Checks the file every [`POLL`] and reloads it when its stamp changes, while its last
    /// line is pending, and, with back-off, after a failure.
    async fn poll(self: Arc<Self>, mut seen: Stamp, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(POLL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut state = State::Current;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let now = tokio::fs::metadata(&self.path).await.ok().map(|meta| Stamp::of(&meta));
            let due = match &state {
                State::Current => now != Some(seen),
                State::Pending { .. } => true,
                State::Failed { at, retry, .. } => now != *at || Instant::now() >= *retry,
            };
            if !due {
                continue;
            }
            let failure = match self.load().await {
                Ok((stamp, parsed)) if !parsed.tail_pending => {
                    seen = stamp;
                    self.set(Some(Arc::new(parsed.value)));
                    if matches!(state, State::Failed { .. }) {
                        tracing::warn!(what = self.what, "the file is usable again");
                    } else {
                        tracing::info!(what = self.what, "reloaded after a change");
                    }
                    state = State::Current;
                    continue;
                }
                Ok((stamp, parsed)) => {
                    seen = stamp;
                    let polls = match state {
                        State::Current => Some(1),
                        State::Pending { polls } if polls + 1 < PENDING_POLLS => Some(polls + 1),
                        // Waited long enough; and a refused file stays refused until its last
                        // line is finished, however often it is retried.
                        State::Pending { .. } | State::Failed { .. } => None,
                    };
                    if let Some(polls) = polls {
                        self.set(Some(Arc::new(parsed.value)));
                        state = State::Pending { polls };
                        continue;
                    }
                    "its last line has had no newline for too long (a write was cut short, or \
                     the file lacks its final newline)"
                        .to_owned()
                }
                Err(LoadError::Invalid(reason)) => reason,
            };
            self.set(None);
            let wait = match state {
                State::Failed { wait, .. } => (wait * 2).min(RETRY_MAX),
                _ => {
                    tracing::error!(
                        what = self.what,
                        reason = %failure,
                        "cannot reload; refusing every credential it checks until it is fixed"
                    );
                    RETRY_FIRST
                }
            };
            state = State::Failed { at: now, retry: Instant::now() + wait, wait };
        }
    }
}

/// Where a watched file stands between two polls.
#[derive(Debug)]
enum State {
    /// The contents of the file with the stamp last seen are in use.
    Current,
    /// The complete lines are in use; the last line has been unfinished for `polls` polls.
    Pending { polls: u32 },
    /// The file is refused: it failed with stamp `at`; tried again when the stamp changes or
    /// at `retry`, whichever comes first; `wait` is the back-off that led to `retry`.
    Failed { at: Option<Stamp>, retry: Instant, wait: Duration },
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::api_keys::KeyEntry;
    use crate::mcp::http::api_keys::{parser, KeySet};

    fn line(entry: &KeyEntry) -> String {
        serde_json::to_string(entry).unwrap()
    }

    /// Replaces the file at `path` with `text` the way `api-key revoke` does: a new file
    /// renamed over it.
    fn replace(path: &Path, text: &str) {
        let temp = path.with_extension("new");
        std::fs::write(&temp, text).unwrap();
        std::fs::rename(&temp, path).unwrap();
    }

    /// Waits up to `within` for `check` to hold of the current key set.
    async fn eventually(
        watched: &Watched<KeySet>,
        within: Duration,
        check: impl Fn(Option<&KeySet>) -> bool,
    ) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if check(watched.current().as_deref()) {
                return true;
            }
            tokio::time::sleep(POLL / 5).await;
        }
        check(watched.current().as_deref())
    }

    fn grants(set: Option<&KeySet>, key: &str) -> bool {
        set.is_some_and(|set| set.authenticate(key).is_some())
    }

    #[tokio::test]
    async fn a_revocation_without_a_final_newline_applies_at_once_then_the_file_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.jsonl");
        let (alice, mut alice_entry) =
            KeyEntry::generate("alice".into(), None, false, None, &[]).unwrap();
        let (bob, bob_entry) = KeyEntry::generate("bob".into(), None, false, None, &[]).unwrap();
        std::fs::write(&path, format!("{}\n{}\n", line(&bob_entry), line(&alice_entry))).unwrap();
        let stop = CancellationToken::new();
        let watched = Watched::start("API key file", &path, parser("app".into()), stop.clone())
            .await
            .unwrap();
        assert!(grants(watched.current().as_deref(), &alice));

        // Alice's key revoked, written atomically, but the file lacks its final newline.
        alice_entry.revoked_at = Some(agent_memory::Timestamp::now());
        replace(&path, &format!("{}\n{}", line(&bob_entry), line(&alice_entry)));
        assert!(
            eventually(&watched, Duration::from_secs(1), |set| !grants(set, &alice)).await,
            "the revoked key must stop working at once"
        );
        assert!(grants(watched.current().as_deref(), &bob), "complete lines apply at once");
        // The unfinished line is waited for a few polls only, then the whole file is refused.
        let bounded = POLL * (PENDING_POLLS + 4);
        assert!(eventually(&watched, bounded, |set| set.is_none()).await, "fails closed");
        assert!(!eventually(&watched, POLL * 4, |set| set.is_some()).await, "stays closed");

        // Finishing the line makes the file usable again.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, b"\n"))
            .unwrap();
        assert!(eventually(&watched, Duration::from_secs(2), |set| grants(set, &bob)).await);
        assert!(!grants(watched.current().as_deref(), &alice));
        stop.cancel();
    }

    #[tokio::test]
    async fn a_failed_reload_is_retried_while_the_file_stays_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.jsonl");
        let (alice, alice_entry) =
            KeyEntry::generate("alice".into(), None, false, None, &[]).unwrap();
        std::fs::write(&path, format!("{}\n", line(&alice_entry))).unwrap();
        // A read that fails while `broken` is set, as when descriptors run out for a moment.
        let broken = Arc::new(AtomicBool::new(false));
        let keys = parser("app".into());
        let flaky: Parse<KeySet> = {
            let broken = Arc::clone(&broken);
            Box::new(move |bytes| {
                if broken.load(Ordering::SeqCst) {
                    return Err(LoadError::Invalid("cannot read it: too many open files".into()));
                }
                keys(bytes)
            })
        };
        let stop = CancellationToken::new();
        let watched = Watched::start("API key file", &path, flaky, stop.clone()).await.unwrap();

        broken.store(true, Ordering::SeqCst);
        replace(&path, &format!("{}\n", line(&alice_entry)));
        assert!(eventually(&watched, Duration::from_secs(2), |set| set.is_none()).await);
        // The fault passes; the file is not touched again.
        broken.store(false, Ordering::SeqCst);
        assert!(
            eventually(&watched, RETRY_FIRST * 4 + POLL * 2, |set| grants(set, &alice)).await,
            "the failed reload must be retried"
        );

        // A file that cannot be read at all (a directory in its place), then put back.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(eventually(&watched, Duration::from_secs(2), |set| set.is_none()).await);
        std::fs::remove_dir(&path).unwrap();
        replace(&path, &format!("{}\n", line(&alice_entry)));
        assert!(eventually(&watched, Duration::from_secs(2), |set| grants(set, &alice)).await);
        stop.cancel();
    }
}
