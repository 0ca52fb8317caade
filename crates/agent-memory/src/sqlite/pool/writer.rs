//! The writer's side of the pool: write jobs, the writer thread, and the group and lone
//! commits. See "Group commit" and "Lone writes run where they are asked" in the
//! [pool's docs](super).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::log::{checkpoint, LogKeeper, PAUSE};
use super::{close_connection, lock, stopped, Job};
use crate::error::{MemoryError, Result};
use crate::sqlite::error::{describe, detected, storage, PROVIDER};

/// Most write jobs committed in one transaction.
pub(super) const MAX_GROUP: usize = 64;

/// Groups of one with nothing queued behind them, in a row, after which writes count as no
/// longer contending and may run where they are asked again. One such group is common under
/// load too, between two bursts of replies: leaving group commit on the first one let the
/// caller whose write ran first write on, on its runtime thread, while the callers queued
/// behind it on that thread waited (16 writers: p99 ÷ p50 of 5–13, against 3–4.4 with eight).
pub(super) const LONE_GROUPS: u32 = 8;

/// What the writer thread receives.
pub(super) enum ToWriter {
    /// A write, run in the next group's transaction.
    Job(Box<dyn WriteJob>),
    /// A `wal_checkpoint(TRUNCATE)` once the writes queued before it have committed; the reply
    /// says whether the log could be emptied.
    Checkpoint(oneshot::Sender<Result<bool>>),
    /// Writes ran where they were asked and left a long log: time the next pause in writes
    /// (see [`LogKeeper::on_pause`]).
    Wake,
}

/// The writer's connection and what the writer keeps beside it, behind one mutex: whoever
/// holds it may write.
#[derive(Debug)]
pub(super) struct Writer {
    /// `None` once the writer thread has closed it.
    pub(super) conn: Option<Connection>,
    /// The log bookkeeping, when the store writes.
    pub(super) log: Option<LogKeeper>,
    /// Commits made by [`Pool::write_here`], so the writer thread tells a pause from writes it
    /// did not see.
    pub(super) commits_here: u64,
    /// Whether the writer thread waits without timing a pause (as it does from the start); a
    /// write here that leaves a long log then sends [`ToWriter::Wake`].
    pub(super) idle: bool,
}

/// The writer's count of groups of one with nothing queued behind them, in a row: how it
/// tells when writes stop contending. (A pause in writes ends contention too, in
/// [`next_message`]; the count is left as it is then.)
#[derive(Debug, Default)]
pub(super) struct LoneGroups(u32);

impl LoneGroups {
    /// Notes a committed group of `size` jobs with `left` still queued; true at the
    /// [`LONE_GROUPS`]-th group of one in a row with nothing behind it, and the count starts
    /// again, so each later episode of contention needs as many.
    pub(super) fn stopped_contending(&mut self, size: usize, left: usize) -> bool {
        if size != 1 || left != 0 {
            self.0 = 0;
            return false;
        }
        self.0 += 1;
        if self.0 < LONE_GROUPS {
            return false;
        }
        self.0 = 0;
        true
    }
}

/// A write waiting for the writer thread.
pub(super) trait WriteJob: Send {
    /// Runs the job inside the open transaction; returns whether it succeeded, and how to
    /// reply once the transaction's fate is known.
    fn run(self: Box<Self>, conn: &Connection) -> (bool, Box<dyn Reply>);
    /// Replies with `err` without running.
    fn fail(self: Box<Self>, err: MemoryError);
}

/// The reply of a job that ran, sent once the commit succeeded or failed.
pub(super) trait Reply: Send {
    fn send(self: Box<Self>, commit: std::result::Result<(), &CommitFailure>);
}

/// Why a group's transaction did not commit, shared by every job of the group.
#[derive(Debug, Clone)]
pub(super) struct CommitFailure(Arc<rusqlite::Error>);

impl CommitFailure {
    fn to_error(&self) -> MemoryError {
        let what = describe("committing a write failed", &self.0);
        MemoryError::storage_from(PROVIDER, what, Arc::clone(&self.0))
    }
}

pub(super) struct Pending<T, F> {
    pub(super) f: F,
    pub(super) reply: oneshot::Sender<Result<T>>,
}

pub(super) struct Ready<T> {
    result: Result<T>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T: Send + 'static, F: Job<T>> WriteJob for Pending<T, F> {
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

pub(super) fn writer_loop(
    shared: &Mutex<Writer>,
    jobs: Receiver<ToWriter>,
    waiting: &AtomicUsize,
    grouping: &AtomicBool,
) -> Result<()> {
    let mut next = jobs.recv().ok();
    let mut lone = LoneGroups::default();
    while let Some(message) = next.take() {
        let first = match message {
            ToWriter::Job(job) => job,
            ToWriter::Checkpoint(reply) => {
                let writer = lock(shared);
                let done = writer.conn.as_ref().map_or_else(|| Err(stopped()), checkpoint);
                drop(writer);
                let _ = reply.send(done);
                next = jobs.recv().ok();
                continue;
            }
            ToWriter::Wake => {
                next = next_message(shared, &jobs, grouping);
                continue;
            }
        };
        let mut group = Vec::with_capacity(MAX_GROUP);
        group.push(first);
        while group.len() < MAX_GROUP {
            match jobs.try_recv() {
                Ok(ToWriter::Job(job)) => group.push(job),
                Ok(ToWriter::Wake) => {}
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
        if lone.stopped_contending(group.len(), left) {
            grouping.store(false, Ordering::Relaxed);
        }
        let mut writer = lock(shared);
        let Writer { conn: Some(conn), log, .. } = &mut *writer else { break };
        commit_group(conn, group);
        if let Some(log) = log {
            log.after_commit();
            if log.copy_due {
                log.copy_rest(conn);
            }
        }
        drop(writer);
        if next.is_none() {
            next = next_message(shared, &jobs, grouping);
        }
    }
    let conn = lock(shared).conn.take();
    conn.map_or(Ok(()), close_connection)
}

/// The writer thread's wait for its next message. While the log is kept, it first times a
/// pause in writes, its own and those run where they were asked: after [`PAUSE`] with
/// neither, the checkpointer copies what the log still holds ([`LogKeeper::on_pause`]), and
/// the thread then waits untimed until a message comes.
pub(super) fn next_message(
    shared: &Mutex<Writer>,
    jobs: &Receiver<ToWriter>,
    grouping: &AtomicBool,
) -> Option<ToWriter> {
    loop {
        let seen = {
            let writer = lock(shared);
            if writer.log.is_none() {
                break;
            }
            writer.commits_here
        };
        match jobs.recv_timeout(PAUSE) {
            Ok(message) => return Some(message),
            Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {
                let mut writer = lock(shared);
                let Writer { conn: Some(conn), log: Some(log), commits_here, idle } = &mut *writer
                else {
                    break;
                };
                if *commits_here != seen {
                    // Writes ran where they were asked meanwhile: no pause, but the log may be
                    // due for copying.
                    if log.copy_due {
                        log.copy_rest(conn);
                    }
                    continue;
                }
                log.on_pause(conn);
                *idle = true;
                // Writes paused: the next one may run where it is asked again.
                grouping.store(false, Ordering::Relaxed);
                break;
            }
        }
    }
    let message = jobs.recv().ok();
    lock(shared).idle = false;
    message
}

pub(super) fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Runs one group of write jobs in one transaction; see the module docs.
pub(super) fn commit_group(conn: &Connection, group: Vec<Box<dyn WriteJob>>) {
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

/// Runs `f` in the transaction [`Pool::write_here`] began and commits it when `f` succeeds
/// (rolls it back otherwise), as [`commit_alone`] does for a queued job. A panic in `f` rolls
/// the transaction back and fails the call, as it fails a queued job's.
pub(super) fn commit_here<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    let ran = catch_unwind(AssertUnwindSafe(|| f(conn)));
    let succeeded = matches!(ran, Ok(Ok(_)));
    let outcome = exec(conn, if succeeded { "COMMIT" } else { "ROLLBACK" });
    if outcome.is_err() {
        // Leave no transaction open for the next write; if even this fails, its BEGIN reports
        // it.
        let _ = exec(conn, "ROLLBACK");
    }
    match (ran, outcome) {
        (Err(_), _) => Err(detected("a database task stopped before replying")),
        (Ok(Ok(value)), Ok(())) => Ok(value),
        (Ok(Ok(_)), Err(err)) => Err(CommitFailure(Arc::new(err)).to_error()),
        (Ok(Err(err)), _) => Err(err),
    }
}

/// A group of one job, in the transaction [`commit_group`] began: the transaction is the job's
/// savepoint. A job that fails (or panics) is rolled back whole, as its savepoint would have
/// been; one that succeeds commits. Two statements fewer than a savepoint's `SAVEPOINT` and
/// `RELEASE`, for what a single writer sends most.
pub(super) fn commit_alone(conn: &Connection, job: Box<dyn WriteJob>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_stop_contending_after_enough_lone_groups_every_time() {
        let mut lone = LoneGroups::default();
        for episode in 0..3 {
            for _ in 1..LONE_GROUPS {
                assert!(!lone.stopped_contending(1, 0), "episode {episode}: too early");
            }
            assert!(lone.stopped_contending(1, 0), "episode {episode}: contention never ended");
        }
    }

    #[test]
    fn a_larger_group_or_a_queued_job_starts_the_count_again() {
        let mut lone = LoneGroups::default();
        for _ in 1..LONE_GROUPS {
            assert!(!lone.stopped_contending(1, 0));
        }
        assert!(!lone.stopped_contending(3, 0));
        assert!(!lone.stopped_contending(1, 2));
        for _ in 1..LONE_GROUPS {
            assert!(!lone.stopped_contending(1, 0));
        }
        assert!(lone.stopped_contending(1, 0));
    }
}
