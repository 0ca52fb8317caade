//! The write-ahead log's upkeep: the checkpointer thread, the writer's bookkeeping of the log
//! ([`LogKeeper`]) and the checkpoints the writer runs itself. See "Checkpoints off the write
//! path" in the [pool's docs](super).

use std::cell::Cell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::hooks::Wal;
use rusqlite::Connection;

use super::close_connection;
use crate::error::Result;
use crate::sqlite::error::storage;

/// Pages in the write-ahead log past which a commit asks the checkpointer to copy them into
/// the database file: SQLite's own automatic checkpoint threshold.
pub(super) const CHECKPOINT_PAGES: c_int = 1_000;
/// How long an erasure's `wal_checkpoint(TRUNCATE)` is tried again while another checkpoint
/// runs.
pub(super) const TRUNCATE_PATIENCE: Duration = Duration::from_millis(500);
/// How long the writer waits for the next write before it counts as a pause in writes.
pub(super) const PAUSE: Duration = Duration::from_millis(10);
/// Pages in the log past which the writer copies the rest itself, so the log starts over even
/// when writes never pause (about 128 MiB of 4 KiB pages). That copy ends with two syncs and
/// holds every write queued behind it for their length (about 10 ms on a disk): at 8,000
/// pages it came often enough to delay about 1% of the writes of 16 writers, and so set their
/// 99th percentile; at 32,000 it delays about a quarter of that. The log's file keeps its
/// largest size until the store closes or an erasure empties it.
pub(super) const LOG_PAGES_LIMIT: c_int = 32 * CHECKPOINT_PAGES;
/// New log pages after which the writer asks for the next checkpoint while the log stays
/// long. Each `PASSIVE` checkpoint first sorts the index of every log segment (up to 4,096
/// frames) that holds frames still to copy, so asking again after every commit (as soon as the
/// last one finished) made a single writer's checkpointer run once every few writes and spend
/// about as many instructions as the writes.
pub(super) const CHECKPOINT_STEP: c_int = CHECKPOINT_PAGES / 4;

thread_local! {
    /// Pages in the log after the last commit on this thread of a writer's connection, noted
    /// by [`note_log_pages`] and taken by [`LogKeeper::after_commit`]; -1 when nothing was
    /// noted since (a commit that wrote no page calls no hook).
    static LOG_PAGES: Cell<c_int> = const { Cell::new(-1) };
}

/// What the checkpointer thread receives.
#[derive(Debug, Clone, Copy)]
pub(super) enum Checkpoint {
    /// The log has grown: copy what it holds into the database file.
    Run,
    /// The store is closing: close the connection and exit.
    Stop,
}

/// The writer's side of checkpoints (see "Checkpoints off the write path" above): when to ask
/// the checkpointer, and when the writer must finish its work itself.
#[derive(Debug)]
pub(super) struct LogKeeper {
    checkpoints: SyncSender<Checkpoint>,
    /// Checkpoints the checkpointer thread has finished, counted by it.
    finished: Arc<AtomicU64>,
    /// `finished` when the running request was made; `None` when none is running.
    asked: Option<u64>,
    /// Pages in the log after the last commit that wrote any.
    pages: c_int,
    /// Log pages at which the writer checkpoints itself.
    limit: c_int,
    /// Log pages from which the writer asks for the next checkpoint.
    next_ask: c_int,
    /// The log has reached `limit`: the writer thread copies it before its next group.
    pub(super) copy_due: bool,
}

impl LogKeeper {
    pub(super) fn new(checkpoints: SyncSender<Checkpoint>, finished: Arc<AtomicU64>) -> Self {
        Self {
            checkpoints,
            finished,
            asked: None,
            pages: 0,
            limit: LOG_PAGES_LIMIT,
            next_ask: CHECKPOINT_PAGES,
            copy_due: false,
        }
    }

    /// Runs after each transaction on the writer's connection, on the thread that ran it:
    /// keeps the checkpointer copying while the log holds [`CHECKPOINT_PAGES`] pages or more,
    /// a checkpoint per [`CHECKPOINT_STEP`] new pages, and marks the log for the writer
    /// thread to copy itself ([`copy_rest`](Self::copy_rest)) at the limit.
    /// (Asking only once per thousand new pages, as SQLite's own checkpoint runs, left each
    /// checkpoint more to copy and sync, and the writes' p99 at 16 writers rose by about half.)
    pub(super) fn after_commit(&mut self) {
        if let Some(pages) = take_noted_pages() {
            self.pages = pages;
        }
        let pages = self.pages;
        if pages < CHECKPOINT_PAGES {
            // The log was started over.
            (self.asked, self.limit, self.next_ask) = (None, LOG_PAGES_LIMIT, CHECKPOINT_PAGES);
            self.copy_due = false;
            return;
        }
        if self.running() {
            return;
        }
        if pages >= self.limit {
            self.copy_due = true;
        } else if pages >= self.next_ask {
            self.ask();
            self.next_ask = pages.saturating_add(CHECKPOINT_STEP);
        }
    }

    /// Writes have not paused for the log to start over: copies what the checkpointer has
    /// not, between two transactions, so the next one starts it over. Should a reader of
    /// another process still hold old pages, the log cannot start over yet: the writer tries
    /// again once as many pages more have been written.
    pub(super) fn copy_rest(&mut self, conn: &Connection) {
        if let Err(err) = passive_checkpoint(conn) {
            tracing::debug!(error = %err, "a checkpoint on the writer failed");
        }
        (self.asked, self.limit) = (None, self.pages.saturating_add(LOG_PAGES_LIMIT));
        self.copy_due = false;
    }

    /// Whether the log holds enough pages for the checkpointer to copy.
    pub(super) fn is_long(&self) -> bool {
        self.pages >= CHECKPOINT_PAGES
    }

    /// Runs on the writer thread when no write has come for [`PAUSE`]: the checkpointer
    /// copies what the log still holds, so the next write starts it over instead of making it
    /// longer (or the writer copies it, when it is due to).
    pub(super) fn on_pause(&mut self, conn: &Connection) {
        if self.copy_due {
            self.copy_rest(conn);
        } else if self.is_long() && !self.running() {
            // Below the threshold nothing asked for a checkpoint, and the log is short anyway.
            self.ask();
        }
    }

    fn running(&self) -> bool {
        self.asked.is_some_and(|asked| self.finished.load(Ordering::Acquire) == asked)
    }

    fn ask(&mut self) {
        // Read before asking: a checkpoint that finishes at once must count as finished.
        let finished = self.finished.load(Ordering::Acquire);
        self.asked = match self.checkpoints.try_send(Checkpoint::Run) {
            // Full: a request is waiting already, and will run.
            Ok(()) | Err(TrySendError::Full(_)) => Some(finished),
            // The checkpointer has stopped (the store is closing, or its thread died): the
            // writer copies the log itself at the limit.
            Err(TrySendError::Disconnected(_)) => None,
        };
    }
}

pub(super) fn passive_checkpoint(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

/// Runs a `PASSIVE` checkpoint each time the writer asks, until the store closes, and counts
/// the checkpoints it finished. One that fails or cannot copy everything (a reader of another
/// process still needs old pages) is asked for again later; the log only grows meanwhile.
pub(super) fn checkpointer_loop(
    conn: Connection,
    requests: &Receiver<Checkpoint>,
    finished: &AtomicU64,
) -> Result<()> {
    while let Ok(Checkpoint::Run) = requests.recv() {
        if let Err(err) = passive_checkpoint(&conn) {
            tracing::debug!(error = %err, "a background checkpoint failed");
        }
        finished.fetch_add(1, Ordering::Release);
    }
    close_connection(conn)
}

/// The writer connection's write-ahead-log hook: notes how many pages the log holds after
/// each commit, on the committing thread. Registering it turns SQLite's automatic checkpoint
/// off on that connection.
pub(super) fn note_log_pages(_: &Wal, pages: c_int) -> rusqlite::Result<()> {
    LOG_PAGES.with(|noted| noted.set(pages));
    Ok(())
}

/// What [`note_log_pages`] noted on this thread since the last call, if anything.
pub(super) fn take_noted_pages() -> Option<c_int> {
    Some(LOG_PAGES.with(|noted| noted.replace(-1))).filter(|pages| *pages >= 0)
}

/// `wal_checkpoint(TRUNCATE)` on the writer's connection, outside any transaction: true when
/// every frame reached the database file and the log was emptied.
///
/// A checkpoint cannot start while another one runs (SQLite answers "busy" at once, without
/// waiting), and the checkpointer thread may be in the middle of one, which takes
/// milliseconds: so a busy answer is tried again, a millisecond later, until
/// [`TRUNCATE_PATIENCE`] has passed. (Waiting for readers is SQLite's own, through the busy
/// timeout, so a call that waited that long is not repeated.)
pub(super) fn checkpoint(conn: &Connection) -> Result<bool> {
    let started = Instant::now();
    loop {
        let busy: i64 = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
            .map_err(storage("checkpointing the write-ahead log failed"))?;
        if busy == 0 {
            return Ok(true);
        }
        if started.elapsed() >= TRUNCATE_PATIENCE {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
