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
//! **Lone writes run where they are asked.** A `put` or `delete` that finds the writer's
//! connection free at that instant and the writes uncontended ([`Pool::write_here`]) runs on
//! the caller's thread, in a transaction of its own on the writer's connection: with
//! `synchronous=NORMAL` its commit does not sync the disk, so it takes tens of microseconds,
//! less than the two thread wake-ups a hand-off to the writer thread costs. It never waits for
//! another process's write lock there (the busy timeout is zero for its `BEGIN`). Once one
//! write has had to queue (the connection was busy), writes are contending: every write then
//! goes to the writer thread, to commit in groups, until the writer has committed
//! [`LONE_GROUPS`](writer::LONE_GROUPS) groups of one in a row with nothing queued behind them,
//! or writes pause for [`PAUSE`](log::PAUSE).
//! (Mixing the two under load left groups smaller and put callers' transactions on runtime
//! threads that the writer thread then waited for: the 99th percentile of 16 writers tripled.)
//! Writes go to the writer thread too when each commit syncs the disk (`synchronous=FULL`) or
//! the log is due for the writer to copy (it copies it right after that write's commit), and
//! erasure batches always do. So a single writer pays no hand-off, and under load writes
//! commit in groups as before.
//!
//! **Group commit.** The writer thread takes every write job that is waiting (up to
//! [`MAX_GROUP`](writer::MAX_GROUP)) and runs them in one `BEGIN IMMEDIATE` transaction, each
//! inside its own savepoint: a job that fails (a revision conflict, say) is rolled back to its
//! savepoint alone, and the others commit. A lone job needs no savepoint: the transaction is rolled
//! back or committed for it alone. Replies are sent only after `COMMIT` returns, so a write is
//! acknowledged only once it is in the log; if the commit fails, every job of the group that had
//! succeeded gets a `Storage` error (its write may or may not have committed). Jobs of one group
//! run one after another under the write lock, so a compare-and-set still sees every write before
//! it.
//!
//! **Checkpoints off the write path.** SQLite's automatic checkpoint runs inside the commit that
//! takes the write-ahead log past 1,000 pages, so that commit, and every write queued behind it,
//! waits while the pages are copied into the database file and both files are synced: the long tail
//! of write latency. The writer's connection turns it off (a write-ahead-log hook replaces it, see
//! [`LogKeeper`](log::LogKeeper)) and keeps the checkpointer thread copying while the log holds
//! [`CHECKPOINT_PAGES`](log::CHECKPOINT_PAGES) pages or more, and whenever writes pause for
//! [`PAUSE`](log::PAUSE); its own connection copies them with `PASSIVE` checkpoints while writes go
//! on. SQLite starts the log over at the first write that begins once every page has been copied,
//! which a pause allows; should writes never pause, the log would only grow, so at
//! [`LOG_PAGES_LIMIT`](log::LOG_PAGES_LIMIT) pages the writer copies the remainder itself, between
//! two groups.
//!
//! After an erasure the store asks the writer thread itself for a `wal_checkpoint(TRUNCATE)`,
//! which runs between groups (a checkpoint cannot run inside a transaction): it copies the
//! zeroed pages into the database file and empties the log, so no old frame holding erased
//! content stays behind.
//!
//! [`writer`] holds the writer's side, [`log`] the log's upkeep and the checkpointer.

mod log;
mod writer;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::config::{Options, Synchronous};
use super::error::{background, detected, storage, PROVIDER};
use super::schema::{self, Role};
use crate::error::{MemoryError, Result};

use self::log::{checkpointer_loop, note_log_pages, Checkpoint, LogKeeper};
use self::writer::{commit_here, exec, writer_loop, Pending, ToWriter, WriteJob, Writer};

/// The store's threads. Dropping the pool closes the channels; each thread then finishes the
/// jobs already queued, closes its connection and exits.
#[derive(Debug)]
pub(super) struct Pool {
    writer: Option<Sender<ToWriter>>,
    /// The writer's connection, used by the writer thread and by [`write_here`](Self::write_here).
    writer_conn: Arc<Mutex<Writer>>,
    /// Whether writes may run where they are asked: not when each commit syncs the disk.
    write_here: bool,
    /// The connections' busy timeout, restored after a write here has begun.
    busy_timeout: Duration,
    /// Write jobs sent and not yet taken by the writer thread, for its queue-depth gauge.
    waiting: Arc<AtomicUsize>,
    /// Set when a write is queued, cleared by the writer thread when writes stop contending
    /// (groups of one with none behind them, or a pause): while writes contend, they all commit
    /// in groups on the writer thread.
    grouping: Arc<AtomicBool>,
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

type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

/// Work for a connection's thread: runs once with its connection, and its result travels back
/// to the caller, who awaits it as an [`Answer`].
pub(super) trait Job<T>: FnOnce(&Connection) -> Result<T> + Send + 'static {}

impl<T, F: FnOnce(&Connection) -> Result<T> + Send + 'static> Job<T> for F {}

/// The caller's end of a queued [`Job`]: its result, once the job has run (for a write, once
/// its group has committed).
pub(super) type Answer<T> = oneshot::Receiver<Result<T>>;

impl Pool {
    /// Opens the writer, creates or checks the schema, opens the readers, and starts one
    /// thread per connection. Blocks.
    pub(super) fn open(path: &Path, options: &Options) -> Result<Self> {
        let mut writer = schema::connect(path, options, Role::Writer)?;
        schema::prepare(&mut writer, options)?;
        let checkpointer = if options.read_only {
            None
        } else {
            Some(schema::connect(path, options, Role::Checkpointer)?)
        };
        let connections = Arc::new(
            (0..options.readers)
                .map(|_| schema::connect(path, options, Role::Reader).map(Mutex::new))
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
        let grouping = Arc::new(AtomicBool::new(false));
        let contended = Arc::clone(&grouping);
        if log.is_some() {
            writer.wal_hook(Some(note_log_pages));
        }
        let writer_conn =
            Arc::new(Mutex::new(Writer { conn: Some(writer), log, commits_here: 0, idle: true }));
        let shared = Arc::clone(&writer_conn);
        threads.push(spawn("amem-sql-writer", move || {
            writer_loop(&shared, write_rx, &queue, &contended)
        })?);
        Ok(Self {
            writer: Some(write_tx),
            writer_conn,
            write_here: !options.read_only && options.synchronous == Synchronous::Normal,
            busy_timeout: options.busy_timeout,
            waiting,
            grouping,
            connections,
            readers: read_txs,
            next_reader: AtomicUsize::new(0),
            threads,
            checkpoints,
        })
    }

    /// Runs `f` on this thread in a transaction of its own on the writer's connection, when
    /// writes are not contending (none queued, none grouped since the writer last committed
    /// groups of one in a row or saw a pause) and the connection is free at this instant, and
    /// gives `f` back otherwise (queue it with [`write`](Self::write) then); see "Lone writes
    /// run where they are asked" above. Only for writes of one record: the caller's thread may
    /// be an async runtime's.
    pub(super) fn write_here<T, F>(&self, f: F) -> std::result::Result<Result<T>, F>
    where
        F: FnOnce(&Connection) -> Result<T>,
    {
        if !self.write_here
            || self.grouping.load(Ordering::Relaxed)
            || self.waiting.load(Ordering::Relaxed) != 0
        {
            return Err(f);
        }
        let mut writer = match self.writer_conn.try_lock() {
            Ok(writer) => writer,
            // Whoever panicked holding it left no transaction open (see `commit_here`).
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(f),
        };
        let Writer { conn: Some(conn), log, commits_here, idle } = &mut *writer else {
            return Err(f);
        };
        if log.as_ref().is_some_and(|log| log.copy_due) {
            // The log is at its limit: copying it is the writer thread's work, right after the
            // commit of this write there. (Left to the writer thread's timer instead, the copy
            // could wait long behind a caller that writes without pause, as it takes this
            // connection back between its writes sooner than the timer's thread is scheduled.)
            return Err(f);
        }
        // Another process's write lock is waited for on the writer thread, never here.
        let began = conn
            .busy_timeout(Duration::ZERO)
            .and_then(|()| exec(conn, "BEGIN IMMEDIATE"))
            .and_then(|()| conn.busy_timeout(self.busy_timeout));
        if began.is_err() {
            // Not begun (or begun and the timeout not restored: give the transaction back).
            let _ = exec(conn, "ROLLBACK");
            let _ = conn.busy_timeout(self.busy_timeout);
            return Err(f);
        }
        let result = commit_here(conn, f);
        *commits_here += 1;
        // A transaction of one write, with none waiting.
        crate::observe::writer(1, 0);
        if let Some(log) = log {
            log.after_commit();
            // The writer thread copies the log at its limit, and times pauses only when it
            // hears of writes.
            if (log.copy_due || log.is_long()) && std::mem::take(idle) {
                if let Some(writer) = &self.writer {
                    let _ = writer.send(ToWriter::Wake);
                }
            }
        }
        Ok(result)
    }

    /// Queues `f` for the writer thread; the reply arrives once its group committed.
    pub(super) fn write<T: Send + 'static>(&self, f: impl Job<T>) -> Result<Answer<T>> {
        let (reply, receiver) = oneshot::channel();
        let job: Box<dyn WriteJob> = Box::new(Pending { f, reply });
        let writer = self.writer.as_ref().ok_or_else(stopped)?;
        self.waiting.fetch_add(1, Ordering::Relaxed);
        self.grouping.store(true, Ordering::Relaxed);
        if writer.send(ToWriter::Job(job)).is_err() {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(stopped());
        }
        Ok(receiver)
    }

    /// Queues a `wal_checkpoint(TRUNCATE)` for the writer thread, after the writes queued
    /// before it; the reply is true when the log was emptied (false when a reader still used
    /// it).
    pub(super) fn checkpoint(&self) -> Result<Answer<bool>> {
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
    pub(super) fn read<T: Send + 'static>(&self, f: impl Job<T>) -> Result<Answer<T>> {
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

pub(super) fn stopped() -> MemoryError {
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

pub(super) fn close_connection(conn: Connection) -> Result<()> {
    conn.close().map_err(|(_, err)| storage("closing the database failed")(err))
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

pub(super) fn lock<T>(connection: &Mutex<T>) -> MutexGuard<'_, T> {
    connection.lock().unwrap_or_else(PoisonError::into_inner)
}
