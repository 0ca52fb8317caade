//! The threads and connections one started store owns: one writer thread that commits in
//! groups, a checkpointer thread beside it, and a few reader connections, each with its own
//! thread.
//!
//! SQLite calls block, so scans and writes never run on an async runtime's thread: each
//! connection has a dedicated thread that receives work through a channel, and the caller
//! awaits a one-shot reply. Under load a thread takes the next job without sleeping, so a busy
//! store pays no thread wake-up per operation.
//!
//! **Point reads run where they are asked.** A primary-key read ([`Pool::read_here`], used by
//! `get`) takes a few microseconds, and a `list` page of at most the default 20 records a few
//! tens, less than or about what the two thread wake-ups of a hand-off cost (the reader's and
//! then the caller's), so they run on the caller's thread on the first reader connection that
//! is free at that instant, and are handed to that connection's thread only when every reader
//! is busy. Each reader connection sits behind a mutex that its thread takes for each job, so
//! a connection is never used by two threads at once. Larger pages, searches (up to their byte
//! budget) and namespace and user listings stay on the reader threads, where their length
//! holds up no runtime thread.
//!
//! **Group commit.** The writer thread takes every write job that is waiting (up to
//! [`MAX_GROUP`]) and runs them in one `BEGIN IMMEDIATE` transaction, each inside its own
//! savepoint: a job that fails (a revision conflict, say) is rolled back to its savepoint
//! alone, and the others commit. A lone job needs no savepoint: the transaction is rolled
//! back or committed for it alone. Replies are sent only after `COMMIT` returns, so a write is
//! acknowledged only once it is in the log; if the commit fails, every job of the group that
//! had succeeded gets a `Storage` error (its write may or may not have committed). Jobs of one
//! group run one after another under the write lock, so a compare-and-set still sees every
//! write before it.
//!
//! **Checkpoints off the write path.** SQLite's automatic checkpoint runs inside the commit
//! that takes the write-ahead log past 1,000 pages, so that commit, and every write queued
//! behind it, waits while the pages are copied into the database file and both files are
//! synced: the long tail of write latency. The writer's connection turns it off (a
//! write-ahead-log hook replaces it, see [`LogKeeper`]) and keeps the checkpointer thread
//! copying while the log holds [`CHECKPOINT_PAGES`] pages or more, and whenever writes pause
//! for [`PAUSE`]; its own connection copies them with `PASSIVE` checkpoints while writes go on.
//! SQLite starts the log over at the first write that begins once every page has been copied,
//! which a pause allows; should writes never pause, the log would only grow, so at
//! [`LOG_PAGES_LIMIT`] pages the writer copies the remainder itself, between two groups.
//!
//! After an erasure the store asks the writer thread itself for a `wal_checkpoint(TRUNCATE)`,
//! which runs between groups (a checkpoint cannot run inside a transaction): it copies the
//! zeroed pages into the database file and empties the log, so no old frame holding erased
//! content stays behind.

use std::any::Any;
use std::cell::Cell;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::hooks::Wal;
use rusqlite::Connection;
use tokio::sync::oneshot;

use super::config::Settings;
use super::error::{background, describe, detected, storage, PROVIDER};
use super::schema::{self, Role};
use crate::error::{MemoryError, Result};

/// Most write jobs committed in one transaction.
const MAX_GROUP: usize = 64;

/// Pages in the write-ahead log past which a commit asks the checkpointer to copy them into
/// the database file: SQLite's own automatic checkpoint threshold.
const CHECKPOINT_PAGES: c_int = 1_000;
/// How long an erasure's `wal_checkpoint(TRUNCATE)` is tried again while another checkpoint
/// runs.
const TRUNCATE_PATIENCE: Duration = Duration::from_millis(500);
/// How long the writer waits for the next write before it counts as a pause in writes.
const PAUSE: Duration = Duration::from_millis(10);
/// Pages in the log past which the writer copies the rest itself, so the log starts over even
/// when writes never pause (about 32 MiB of 4 KiB pages).
const LOG_PAGES_LIMIT: c_int = 8 * CHECKPOINT_PAGES;
/// New log pages after which the writer asks for the next checkpoint while the log stays
/// long. Each `PASSIVE` checkpoint first sorts the index of every log segment (up to 4,096
/// frames) that holds frames still to copy, so asking again after every commit (as soon as the
/// last one finished) made a single writer's checkpointer run once every few writes and spend
/// about as many instructions as the writes.
const CHECKPOINT_STEP: c_int = CHECKPOINT_PAGES / 4;

thread_local! {
    /// Pages in the log after the writer thread's last commit, noted by [`note_log_pages`].
    static LOG_PAGES: Cell<c_int> = const { Cell::new(0) };
}

/// The store's threads. Dropping the pool closes the channels; each thread then finishes the
/// jobs already queued, closes its connection and exits.
#[derive(Debug)]
pub(super) struct Pool {
    writer: Option<Sender<ToWriter>>,
    /// Write jobs sent and not yet taken by the writer thread, for its queue-depth gauge.
    waiting: Arc<AtomicUsize>,
    /// The reader connections; reader thread `i` serves connection `i`.
    connections: Arc<Vec<Mutex<Connection>>>,
    /// One channel per reader thread, served in turn.
    readers: Vec<Sender<ReadJob>>,
    next_reader: AtomicUsize,
    /// The reader threads, then the checkpointer's (when the store writes), then the writer's.
    threads: Vec<JoinHandle<Result<()>>>,
    /// The checkpointer thread's channel, when the store writes; `threads` then holds its
    /// thread just before the writer's.
    checkpoints: Option<SyncSender<Checkpoint>>,
}

/// What the checkpointer thread receives.
#[derive(Debug, Clone, Copy)]
enum Checkpoint {
    /// The log has grown: copy what it holds into the database file.
    Run,
    /// The store is closing: close the connection and exit.
    Stop,
}

type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

/// What the writer thread receives.
enum ToWriter {
    /// A write, run in the next group's transaction.
    Job(Box<dyn WriteJob>),
    /// A `wal_checkpoint(TRUNCATE)` once the writes queued before it have committed; the reply
    /// says whether the log could be emptied.
    Checkpoint(oneshot::Sender<Result<bool>>),
}

/// A write waiting for the writer thread.
trait WriteJob: Send {
    /// Runs the job inside the open transaction; returns whether it succeeded, and how to
    /// reply once the transaction's fate is known.
    fn run(self: Box<Self>, conn: &Connection) -> (bool, Box<dyn Reply>);
    /// Replies with `err` without running.
    fn fail(self: Box<Self>, err: MemoryError);
}

/// The reply of a job that ran, sent once the commit succeeded or failed.
trait Reply: Send {
    fn send(self: Box<Self>, commit: std::result::Result<(), &CommitFailure>);
}

/// Why a group's transaction did not commit, shared by every job of the group.
#[derive(Debug, Clone)]
struct CommitFailure(Arc<rusqlite::Error>);

impl CommitFailure {
    fn to_error(&self) -> MemoryError {
        let what = describe("committing a write failed", &self.0);
        MemoryError::storage_from(PROVIDER, what, Arc::clone(&self.0))
    }
}

struct Pending<T, F> {
    f: F,
    reply: oneshot::Sender<Result<T>>,
}

struct Ready<T> {
    result: Result<T>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> WriteJob for Pending<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T> + Send + 'static,
{
    fn run(self: Box<Self>, conn: &Connection) -> (bool, Box<dyn Reply>) {
        let result = (self.f)(conn);
        (result.is_ok(), Box::new(Ready { result, reply: self.reply }))
    }

    fn fail(self: Box<Self>, err: MemoryError) {
        // The caller may have stopped waiting; nothing to do then.
        let _ = self.reply.send(Err(err));
    }
}

impl<T: Send> Reply for Ready<T> {
    fn send(self: Box<Self>, commit: std::result::Result<(), &CommitFailure>) {
        let result = match (commit, self.result) {
            (Err(failure), Ok(_)) => Err(failure.to_error()),
            (_, result) => result,
        };
        let _ = self.reply.send(result);
    }
}

impl Pool {
    /// Opens the writer, creates or checks the schema, opens the readers, and starts one
    /// thread per connection. Blocks.
    pub(super) fn open(path: &Path, settings: &Settings) -> Result<Self> {
        let mut writer = schema::connect(path, settings, Role::Writer)?;
        schema::prepare(&mut writer, settings)?;
        let checkpointer = if settings.read_only {
            None
        } else {
            Some(schema::connect(path, settings, Role::Checkpointer)?)
        };
        let connections = Arc::new(
            (0..settings.readers)
                .map(|_| schema::connect(path, settings, Role::Reader).map(Mutex::new))
                .collect::<Result<Vec<_>>>()?,
        );

        let mut threads = Vec::with_capacity(connections.len() + 2);
        let mut read_txs = Vec::with_capacity(connections.len());
        for index in 0..connections.len() {
            let (read_tx, read_rx) = mpsc::channel::<ReadJob>();
            read_txs.push(read_tx);
            let connections = Arc::clone(&connections);
            threads.push(spawn("amem-sql-reader", move || {
                reader_loop(&connections[index], read_rx);
                Ok(())
            })?);
        }
        // One request waiting is as good as several: a checkpoint copies whatever the log holds.
        let (checkpoints, log) = match checkpointer {
            Some(conn) => {
                let (checkpoints, requests) = mpsc::sync_channel::<Checkpoint>(1);
                let finished = Arc::new(AtomicU64::new(0));
                let counter = Arc::clone(&finished);
                threads.push(spawn("amem-sql-checkpoint", move || {
                    checkpointer_loop(conn, &requests, &counter)
                })?);
                (Some(checkpoints.clone()), Some(LogKeeper::new(checkpoints, finished)))
            }
            None => (None, None),
        };
        let (write_tx, write_rx) = mpsc::channel::<ToWriter>();
        let waiting = Arc::new(AtomicUsize::new(0));
        let queue = Arc::clone(&waiting);
        threads.push(spawn("amem-sql-writer", move || writer_loop(writer, write_rx, &queue, log))?);
        Ok(Self {
            writer: Some(write_tx),
            waiting,
            connections,
            readers: read_txs,
            next_reader: AtomicUsize::new(0),
            threads,
            checkpoints,
        })
    }

    /// Queues `f` for the writer thread; the reply arrives once its group committed.
    pub(super) fn write<T, F>(&self, f: F) -> Result<oneshot::Receiver<Result<T>>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (reply, receiver) = oneshot::channel();
        let job: Box<dyn WriteJob> = Box::new(Pending { f, reply });
        let writer = self.writer.as_ref().ok_or_else(stopped)?;
        self.waiting.fetch_add(1, Ordering::Relaxed);
        if writer.send(ToWriter::Job(job)).is_err() {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(stopped());
        }
        Ok(receiver)
    }

    /// Queues a `wal_checkpoint(TRUNCATE)` for the writer thread, after the writes queued
    /// before it; the reply is true when the log was emptied (false when a reader still used
    /// it).
    pub(super) fn checkpoint(&self) -> Result<oneshot::Receiver<Result<bool>>> {
        let (reply, receiver) = oneshot::channel();
        self.writer
            .as_ref()
            .ok_or_else(stopped)?
            .send(ToWriter::Checkpoint(reply))
            .map_err(|_| stopped())?;
        Ok(receiver)
    }

    /// Runs `f` on this thread with the first reader connection that is free at this instant,
    /// or gives `f` back when every reader is busy (queue it with [`read`](Self::read) then).
    /// Only for reads of a few microseconds: the caller's thread may be an async runtime's.
    pub(super) fn read_here<T, F>(&self, f: F) -> std::result::Result<Result<T>, F>
    where
        F: FnOnce(&Connection) -> Result<T>,
    {
        for connection in self.connections.iter() {
            let conn = match connection.try_lock() {
                Ok(conn) => conn,
                // A job that panicked left no transaction open (see `reader_loop`).
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => continue,
            };
            return Ok(f(&conn));
        }
        Err(f)
    }

    /// Queues `f` for the next reader thread in turn. Every read is short (a bounded number of
    /// rows), so taking turns spreads load as well as picking an idle thread would, without a
    /// shared queue whose lock every thread would wake up for.
    pub(super) fn read<T, F>(&self, f: F) -> Result<oneshot::Receiver<Result<T>>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (reply, receiver) = oneshot::channel();
        let job: ReadJob = Box::new(move |conn| {
            let _ = reply.send(f(conn));
        });
        let turn = self.next_reader.fetch_add(1, Ordering::Relaxed);
        let reader = self.readers.get(turn % self.readers.len().max(1)).ok_or_else(stopped)?;
        reader.send(job).map_err(|_| stopped())?;
        Ok(receiver)
    }

    /// Stops the threads once they have finished the queued jobs, and reports the first
    /// failure to close a connection. Blocks. The readers and the checkpointer close first, so
    /// the writer's connection is the file's last one in this process: closing it checkpoints
    /// the write-ahead log into the database file and removes the log (unless another process
    /// still has the file open).
    pub(super) fn close(mut self) -> Result<()> {
        let mut first_error = None;
        let writer_thread = self.threads.pop();
        let checkpoints = self.checkpoints.take();
        let checkpointer_thread = checkpoints.as_ref().and_then(|_| self.threads.pop());
        self.readers.clear();
        for thread in std::mem::take(&mut self.threads) {
            first_error = first_error.or(join(thread).err());
        }
        let connections = std::mem::take(&mut self.connections);
        if let Ok(connections) = Arc::try_unwrap(connections) {
            for connection in connections {
                let conn = connection.into_inner().unwrap_or_else(PoisonError::into_inner);
                first_error = first_error.or(close_connection(conn).err());
            }
        }
        if let (Some(checkpoints), Some(thread)) = (checkpoints, checkpointer_thread) {
            // Gone already only if the thread panicked, which joining reports.
            let _ = checkpoints.send(Checkpoint::Stop);
            first_error = first_error.or(join(thread).err());
        }
        self.writer = None;
        if let Some(thread) = writer_thread {
            first_error = first_error.or(join(thread).err());
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Runs blocking work (opening or closing the file) on Tokio's blocking pool, or inline
/// outside a Tokio runtime.
pub(super) async fn off_runtime<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.spawn_blocking(f).await.map_err(background)?,
        Err(_) => f(),
    }
}

fn join(thread: JoinHandle<Result<()>>) -> Result<()> {
    thread.join().unwrap_or_else(|_| Err(detected("a database thread panicked")))
}

fn stopped() -> MemoryError {
    detected("the database threads have stopped")
}

fn spawn(
    name: &str,
    body: impl FnOnce() -> Result<()> + Send + 'static,
) -> Result<JoinHandle<Result<()>>> {
    std::thread::Builder::new().name(name.to_owned()).spawn(body).map_err(|err| {
        MemoryError::storage_from(PROVIDER, "starting a database thread failed", err)
    })
}

fn close_connection(conn: Connection) -> Result<()> {
    conn.close().map_err(|(_, err)| storage("closing the database failed")(err))
}

/// The writer's side of checkpoints (see "Checkpoints off the write path" above): when to ask
/// the checkpointer, and when the writer must finish its work itself.
struct LogKeeper {
    checkpoints: SyncSender<Checkpoint>,
    /// Checkpoints the checkpointer thread has finished, counted by it.
    finished: Arc<AtomicU64>,
    /// `finished` when the running request was made; `None` when none is running.
    asked: Option<u64>,
    /// Log pages at which the writer checkpoints itself.
    limit: c_int,
    /// Log pages from which the writer asks for the next checkpoint.
    next_ask: c_int,
}

impl LogKeeper {
    fn new(checkpoints: SyncSender<Checkpoint>, finished: Arc<AtomicU64>) -> Self {
        Self {
            checkpoints,
            finished,
            asked: None,
            limit: LOG_PAGES_LIMIT,
            next_ask: CHECKPOINT_PAGES,
        }
    }

    /// Runs after each commit on the writer thread: keeps the checkpointer copying while the
    /// log holds [`CHECKPOINT_PAGES`] pages or more, a checkpoint per [`CHECKPOINT_STEP`] new
    /// pages, and copies the rest itself at the limit.
    /// (Asking only once per thousand new pages, as SQLite's own checkpoint runs, left each
    /// checkpoint more to copy and sync, and the writes' p99 at 16 writers rose by about half.)
    fn after_commit(&mut self, conn: &Connection) {
        let pages = LOG_PAGES.with(Cell::get);
        if pages < CHECKPOINT_PAGES {
            // The log was started over.
            (self.asked, self.limit, self.next_ask) = (None, LOG_PAGES_LIMIT, CHECKPOINT_PAGES);
            return;
        }
        if self.running() {
            return;
        }
        if pages >= self.limit {
            // Writes have not paused for the log to start over: copy what the checkpointer
            // has not, so the next transaction starts it over. Should a reader of another
            // process still hold old pages, the log cannot start over yet: the writer tries
            // again once as many pages more have been written.
            if let Err(err) = passive_checkpoint(conn) {
                tracing::debug!(error = %err, "a checkpoint on the writer failed");
            }
            (self.asked, self.limit) = (None, pages.saturating_add(LOG_PAGES_LIMIT));
        } else if pages >= self.next_ask {
            self.ask();
            self.next_ask = pages.saturating_add(CHECKPOINT_STEP);
        }
    }

    /// Runs when no write has come for [`PAUSE`]: the checkpointer copies what the log still
    /// holds, so the next write starts it over instead of making it longer.
    fn on_pause(&mut self) {
        // Below the threshold nothing asked for a checkpoint, and the log is short anyway.
        if LOG_PAGES.with(Cell::get) >= CHECKPOINT_PAGES && !self.running() {
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

fn passive_checkpoint(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

/// Serves one reader connection's queue until the pool drops its end; the pool closes the
/// connection afterwards.
fn reader_loop(connection: &Mutex<Connection>, jobs: Receiver<ReadJob>) {
    while let Ok(job) = jobs.recv() {
        let conn = lock(connection);
        // A panicking job drops its reply, which the caller sees as a failed task; the
        // connection holds no transaction between jobs, so it stays usable.
        let _ = catch_unwind(AssertUnwindSafe(|| job(&conn)));
    }
}

fn lock(connection: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    connection.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs a `PASSIVE` checkpoint each time the writer asks, until the store closes, and counts
/// the checkpoints it finished. One that fails or cannot copy everything (a reader of another
/// process still needs old pages) is asked for again later; the log only grows meanwhile.
fn checkpointer_loop(
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
/// each commit. Registering it turns SQLite's automatic checkpoint off on that connection.
fn note_log_pages(_: &Wal, pages: c_int) -> rusqlite::Result<()> {
    LOG_PAGES.with(|noted| noted.set(pages));
    Ok(())
}

fn writer_loop(
    conn: Connection,
    jobs: Receiver<ToWriter>,
    waiting: &AtomicUsize,
    mut log: Option<LogKeeper>,
) -> Result<()> {
    if log.is_some() {
        conn.wal_hook(Some(note_log_pages));
    }
    let mut next = jobs.recv().ok();
    while let Some(message) = next.take() {
        let first = match message {
            ToWriter::Job(job) => job,
            ToWriter::Checkpoint(reply) => {
                let _ = reply.send(checkpoint(&conn));
                next = jobs.recv().ok();
                continue;
            }
        };
        let mut group = Vec::with_capacity(MAX_GROUP);
        group.push(first);
        while group.len() < MAX_GROUP {
            match jobs.try_recv() {
                Ok(ToWriter::Job(job)) => group.push(job),
                // Runs once this group has committed.
                Ok(checkpoint) => {
                    next = Some(checkpoint);
                    break;
                }
                Err(_) => break,
            }
        }
        let left = waiting.fetch_sub(group.len(), Ordering::Relaxed).saturating_sub(group.len());
        crate::observe::writer(group.len(), left);
        commit_group(&conn, group);
        if let Some(log) = &mut log {
            log.after_commit(&conn);
        }
        if next.is_none() {
            next = match &mut log {
                Some(log) => match jobs.recv_timeout(PAUSE) {
                    Ok(message) => Some(message),
                    Err(RecvTimeoutError::Timeout) => {
                        log.on_pause();
                        jobs.recv().ok()
                    }
                    Err(RecvTimeoutError::Disconnected) => None,
                },
                None => jobs.recv().ok(),
            };
        }
    }
    close_connection(conn)
}

/// `wal_checkpoint(TRUNCATE)` on the writer's connection, outside any transaction: true when
/// every frame reached the database file and the log was emptied.
///
/// A checkpoint cannot start while another one runs (SQLite answers "busy" at once, without
/// waiting), and the checkpointer thread may be in the middle of one, which takes
/// milliseconds: so a busy answer is tried again, a millisecond later, until
/// [`TRUNCATE_PATIENCE`] has passed. (Waiting for readers is SQLite's own, through the busy
/// timeout, so a call that waited that long is not repeated.)
fn checkpoint(conn: &Connection) -> Result<bool> {
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

fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Runs one group of write jobs in one transaction; see the module docs.
fn commit_group(conn: &Connection, group: Vec<Box<dyn WriteJob>>) {
    if let Err(err) = exec(conn, "BEGIN IMMEDIATE") {
        let failure = CommitFailure(Arc::new(err));
        for job in group {
            job.fail(failure.to_error());
        }
        return;
    }
    if group.len() == 1 {
        if let Some(job) = group.into_iter().next() {
            commit_alone(conn, job);
        }
        return;
    }
    let mut replies: Vec<Box<dyn Reply>> = Vec::with_capacity(group.len());
    let mut broken: Option<rusqlite::Error> = None;
    for job in group {
        if broken.is_some() {
            job.fail(detected("committing a write failed"));
            continue;
        }
        if let Err(err) = exec(conn, "SAVEPOINT job") {
            job.fail(storage("writing failed")(err));
            continue;
        }
        let ran: std::result::Result<_, Box<dyn Any + Send>> =
            catch_unwind(AssertUnwindSafe(|| job.run(conn)));
        let succeeded = matches!(ran, Ok((true, _)));
        let undo = if succeeded { Ok(()) } else { exec(conn, "ROLLBACK TO job") };
        match undo.and_then(|()| exec(conn, "RELEASE job")) {
            Ok(()) => {}
            // The job's changes could not be undone: none of this group may commit.
            Err(err) => broken = Some(err),
        }
        if let Ok((_, reply)) = ran {
            replies.push(reply);
        }
    }
    let outcome = match broken {
        Some(err) => Err(err),
        None => exec(conn, "COMMIT"),
    };
    match outcome {
        Ok(()) => {
            for reply in replies {
                reply.send(Ok(()));
            }
        }
        Err(err) => {
            // Leave no transaction open for the next group; if even this fails, the next
            // BEGIN reports it.
            let _ = exec(conn, "ROLLBACK");
            let failure = CommitFailure(Arc::new(err));
            for reply in replies {
                reply.send(Err(&failure));
            }
        }
    }
}

/// A group of one job, in the transaction [`commit_group`] began: the transaction is the job's
/// savepoint. A job that fails (or panics) is rolled back whole, as its savepoint would have
/// been; one that succeeds commits. Two statements fewer than a savepoint's `SAVEPOINT` and
/// `RELEASE`, for what a single writer sends most.
fn commit_alone(conn: &Connection, job: Box<dyn WriteJob>) {
    let ran: std::result::Result<_, Box<dyn Any + Send>> =
        catch_unwind(AssertUnwindSafe(|| job.run(conn)));
    let succeeded = matches!(ran, Ok((true, _)));
    let outcome = exec(conn, if succeeded { "COMMIT" } else { "ROLLBACK" });
    if outcome.is_err() {
        // Leave no transaction open for the next group; if even this fails, the next BEGIN
        // reports it.
        let _ = exec(conn, "ROLLBACK");
    }
    // A job that panicked dropped its reply, which its caller sees as a failed task.
    if let Ok((_, reply)) = ran {
        match outcome {
            Ok(()) => reply.send(Ok(())),
            Err(err) => reply.send(Err(&CommitFailure(Arc::new(err)))),
        }
    }
}
