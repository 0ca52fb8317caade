//! Write coalescing: concurrent `put`s and `delete`s that arrive while every connection is busy
//! share one statement and one commit.
//!
//! Every write joins the store's queue and asks the pool for a connection. Whichever caller
//! gets one first takes a batch from the front of the queue (writes of one form, at most
//! [`write_batch_max`](super::PostgresMemoryStoreBuilder::write_batch_max), never two to the
//! same scope and key), runs it, and hands each caller its own outcome; callers whose write
//! was taken stop waiting for a connection. A write that finds the queue empty and a
//! connection free is a batch of one and runs its single statement, as without coalescing.
//!
//! A batch of several runs one set-based statement over arrays (`unnest`), each element with
//! its own condition; its rows say which elements were written. When the server rejects that
//! statement (a quota the usage trigger enforces, a deadlock), nothing of it committed, and
//! the batch runs again one statement per element, so each caller gets exactly its own
//! outcome. When the connection fails instead, every caller of the batch gets a `Storage`
//! error: the commit may or may not have happened.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::codec::column;
use super::error::{self, PROVIDER};
use super::pool::Conn;
use super::statements::Statements;
use crate::error::{MemoryError, Result};
use crate::quota::Quotas;
use crate::scope::MemoryScope;

/// One write, owning what it binds, so that it can wait in the queue and run on another
/// caller's connection. The scope's ids are shared text: queueing a write copies only its key
/// and values.
pub(crate) struct Write {
    pub(crate) scope: MemoryScope,
    pub(crate) key: String,
    pub(crate) op: Op,
}

/// What a [`Write`] does.
pub(crate) enum Op {
    /// A `put`: its condition and the values of the record.
    Put {
        condition: PutCondition,
        content: String,
        metadata: Value,
        source: Value,
        expires_at: Option<SystemTime>,
        bytes: i64,
    },
    /// A `delete`, with the revision it expects, if any.
    Delete { expected: Option<i64> },
}

/// The condition of a `put`, with the expected revision's sequence number.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PutCondition {
    Always,
    CreateOnly,
    Expected(i64),
}

/// What a write that succeeded produced.
pub(crate) enum Done {
    /// A `put`: the record's new revision and its timestamps.
    Put { revision: i64, created_at: SystemTime, updated_at: SystemTime },
    /// A `delete`: whether a live record existed.
    Deleted(bool),
}

/// The statement a write takes; a batch holds writes of one form only.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    PutAlways,
    PutCreateOnly,
    PutExpected,
    Delete,
    DeleteExpected,
}

impl Write {
    fn form(&self) -> Form {
        match &self.op {
            Op::Put { condition: PutCondition::Always, .. } => Form::PutAlways,
            Op::Put { condition: PutCondition::CreateOnly, .. } => Form::PutCreateOnly,
            Op::Put { condition: PutCondition::Expected(_), .. } => Form::PutExpected,
            Op::Delete { expected: None } => Form::Delete,
            Op::Delete { expected: Some(_) } => Form::DeleteExpected,
        }
    }

    /// A hash of scope and key. Two writes with equal hashes never share a batch; a collision
    /// only delays one of them to the next batch.
    fn slot(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        self.identity().hash(&mut hasher);
        hasher.finish()
    }

    /// Application id, user id, namespace ("" for the default) and key: the primary key.
    fn identity(&self) -> (&str, &str, &str, &str) {
        let (app, user, namespace) = self.scope.columns();
        (app, user, namespace, &self.key)
    }
}

/// A caller's outcome: its write handed back with what it produced, or its error.
type Reply = Result<(Write, Done)>;

/// A write waiting in the queue.
struct Pending {
    id: u64,
    write: Write,
    reply: oneshot::Sender<Reply>,
}

#[derive(Default)]
struct Queue {
    next_id: u64,
    pending: VecDeque<Pending>,
}

/// How a store's writes were grouped into statements since it was built: see
/// [`PostgresMemoryStore::write_batches`](super::PostgresMemoryStore::write_batches).
///
/// A batch is what the writer took from its queue at once: a write that found the queue empty
/// is a batch of one. Batches the server refused and the writer ran again write by write count
/// once, as formed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteBatches {
    /// Batches formed.
    pub batches: u64,
    /// Writes those batches held.
    pub writes: u64,
}

impl WriteBatches {
    /// Writes per batch, `None` before the first batch.
    ///
    /// ```
    /// use agent_memory::postgres::WriteBatches;
    ///
    /// assert_eq!(WriteBatches::default().mean(), None);
    /// ```
    pub fn mean(&self) -> Option<f64> {
        // Counts of writes stay far below 2^52: the conversions are exact.
        (self.batches > 0).then(|| self.writes as f64 / self.batches as f64)
    }

    /// What was added between `earlier` and `self`: the batches of one phase of work.
    pub fn since(&self, earlier: WriteBatches) -> WriteBatches {
        WriteBatches {
            batches: self.batches.saturating_sub(earlier.batches),
            writes: self.writes.saturating_sub(earlier.writes),
        }
    }
}

/// The per-store write queue, and what running a batch needs.
pub(crate) struct Writer {
    sql: Arc<Statements>,
    quotas: Quotas,
    /// The quotas as the statements bind them: the limit as text, empty for none.
    max_records: String,
    max_bytes: String,
    batch_max: usize,
    /// Permits for the connections writes may hold at once.
    connections: Arc<tokio::sync::Semaphore>,
    queue: Mutex<Queue>,
    /// The [`WriteBatches`] counts: two relaxed increments per batch.
    batches: AtomicU64,
    writes: AtomicU64,
}

/// Removes a caller's write from the queue if it is still there when the caller stops
/// waiting (its future dropped, or its connection refused).
struct Ticket<'a> {
    writer: &'a Writer,
    id: u64,
}

impl Ticket<'_> {
    /// The caller's write, if no batch has taken it yet.
    fn withdraw(&self) -> Option<Pending> {
        let mut queue = self.writer.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let position = queue.pending.iter().position(|p| p.id == self.id)?;
        queue.pending.remove(position)
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        drop(self.withdraw());
    }
}

impl Writer {
    /// The queue of a store running `sql`, with its quotas and its batch bound.
    /// Writes hold at most `connections` connections at once.
    pub(crate) fn new(
        sql: Arc<Statements>,
        quotas: Quotas,
        batch_max: usize,
        connections: usize,
    ) -> Self {
        let limit = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_default();
        Self {
            sql,
            quotas,
            max_records: limit(quotas.records()),
            max_bytes: limit(quotas.bytes()),
            batch_max: batch_max.max(1),
            connections: Arc::new(tokio::sync::Semaphore::new(connections.max(1))),
            queue: Mutex::new(Queue::default()),
            batches: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        }
    }

    /// The batches formed so far.
    pub(crate) fn batches(&self) -> WriteBatches {
        WriteBatches {
            batches: self.batches.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
        }
    }

    /// Runs `write`, alone or in a batch with others, on a connection from `connect` (this
    /// caller's, or another caller's that took it first), and returns its own outcome once
    /// its statement has committed.
    pub(crate) async fn submit(
        self: &Arc<Self>,
        write: Write,
        connect: impl Future<Output = Result<Conn>>,
    ) -> Reply {
        let (reply, mut outcome) = oneshot::channel();
        let id = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            let id = queue.next_id;
            queue.next_id = id.wrapping_add(1);
            queue.pending.push_back(Pending { id, write, reply });
            id
        };
        let ticket = Ticket { writer: self, id };
        let connect = async {
            // Closed never: the semaphore lives as long as the writer.
            let permit = Arc::clone(&self.connections).acquire_owned().await.ok();
            connect.await.map(|conn| (permit, conn))
        };
        let connected = tokio::select! {
            biased;
            done = &mut outcome => return done.unwrap_or_else(|_| Err(interrupted())),
            connected = connect => connected,
        };
        let (permit, conn) = match connected {
            Ok(connected) => connected,
            Err(err) => {
                if ticket.withdraw().is_some() {
                    return Err(err);
                }
                // Already taken by a batch: its outcome follows.
                return outcome.await.unwrap_or_else(|_| Err(interrupted()));
            }
        };
        // The connection and its write permit travel together, into a batch's task and back.
        let mut held = Some((conn, permit));
        while let Some(batch) = self.take(id) {
            let Some((current, permit)) = held.take() else { break };
            let own_alone = batch.len() == 1 && batch[0].id == id;
            if own_alone {
                self.run(&current, batch).await;
                held = Some((current, permit));
            } else {
                // Other callers' writes run in their own task, so that this caller going
                // away (its future dropped) never leaves them without an outcome.
                let writer = Arc::clone(self);
                let task = tokio::spawn(async move {
                    writer.run(&current, batch).await;
                    (current, permit)
                });
                held = task.await.ok();
            }
        }
        drop(held);
        drop(ticket);
        outcome.await.unwrap_or_else(|_| Err(interrupted()))
    }

    /// The next batch, if the write `own` is still queued: writes of the front write's form,
    /// in queue order, at most `batch_max`, one per scope and key.
    fn take(&self, own: u64) -> Option<Vec<Pending>> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if !queue.pending.iter().any(|p| p.id == own) {
            return None;
        }
        let form = queue.pending.front()?.write.form();
        let mut batch = Vec::new();
        let mut slots = HashSet::new();
        let mut index = 0;
        while index < queue.pending.len() && batch.len() < self.batch_max {
            let write = &queue.pending[index].write;
            if write.form() == form && slots.insert(write.slot()) {
                batch.extend(queue.pending.remove(index));
            } else {
                index += 1;
            }
        }
        Some(batch)
    }

    /// Runs `batch` on `conn` and answers every caller in it.
    async fn run(&self, conn: &Conn, mut batch: Vec<Pending>) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.writes.fetch_add(batch.len() as u64, Ordering::Relaxed);
        if batch.len() == 1 {
            let pending = batch.remove(0);
            let result = self.one(conn, &pending.write).await;
            let _ = pending.reply.send(result.map(|done| (pending.write, done)));
            return;
        }
        // One order for every batch, so two batches lock rows in the same order.
        batch.sort_by(|a, b| a.write.identity().cmp(&b.write.identity()));
        match self.shared(conn, &batch).await {
            Ok(results) => {
                for (pending, result) in batch.into_iter().zip(results) {
                    let _ = pending.reply.send(result.map(|done| (pending.write, done)));
                }
            }
            Err(err) if refused(&err) && !conn.is_broken() => {
                // The server refused the statement, so none of it committed: run each
                // write alone, so that each gets its own outcome.
                tracing::debug!("a shared write statement failed; running its writes one by one");
                for pending in batch {
                    let result = self.one(conn, &pending.write).await;
                    let _ = pending.reply.send(result.map(|done| (pending.write, done)));
                }
            }
            Err(err) => {
                let cause: Option<Arc<dyn std::error::Error + Send + Sync>> = match err {
                    MemoryError::Storage { source, .. } => source.map(Arc::from),
                    _ => None,
                };
                for pending in batch {
                    let what = "the shared write statement failed";
                    let shared = match &cause {
                        Some(cause) => MemoryError::storage_from(PROVIDER, what, Arc::clone(cause)),
                        None => MemoryError::storage(PROVIDER, what),
                    };
                    let _ = pending.reply.send(Err(shared));
                }
            }
        }
    }

    /// Runs one write alone, with its single statement.
    async fn one(&self, conn: &Conn, write: &Write) -> Result<Done> {
        let (app, user, ns, key) = write.identity();
        let sql = &self.sql;
        match &write.op {
            Op::Put { condition, content, metadata, source, expires_at, bytes } => {
                let (max_records, max_bytes) = (&self.max_records, &self.max_bytes);
                // Bound only by `put_expected`, whose last parameter it is.
                let expected = match condition {
                    PutCondition::Expected(revision) => *revision,
                    PutCondition::Always | PutCondition::CreateOnly => 0,
                };
                let params: [&(dyn ToSql + Sync); 12] = [
                    &app,
                    &user,
                    &ns,
                    &key,
                    content,
                    metadata,
                    source,
                    expires_at,
                    bytes,
                    max_records,
                    max_bytes,
                    &expected,
                ];
                let (statement, params) = match condition {
                    PutCondition::Always => (&sql.put_always, &params[..11]),
                    PutCondition::CreateOnly => (&sql.put_create_only, &params[..11]),
                    PutCondition::Expected(_) => (&sql.put_expected, &params[..]),
                };
                let row = conn
                    .query_opt(statement, params)
                    .await
                    .map_err(|err| error::quota_exceeded(err, &self.quotas))?;
                match row {
                    Some(row) => put_done(&row, 0),
                    None => Err(missing(write.form())),
                }
            }
            Op::Delete { expected: None } => {
                let row = conn.query_opt(&sql.delete, &[&app, &user, &ns, &key]).await?;
                Ok(Done::Deleted(row.map_or(Ok(false), |row| column::<bool>(&row, 0))?))
            }
            Op::Delete { expected: Some(expected) } => {
                let params: [&(dyn ToSql + Sync); 5] = [&app, &user, &ns, &key, expected];
                match conn.query_opt(&sql.delete_expected, &params).await? {
                    Some(_) => Ok(Done::Deleted(true)),
                    None => Err(MemoryError::stale_revision()),
                }
            }
        }
    }

    /// Runs a batch of one form as one statement. Each element's outcome comes from the row
    /// the statement returned for its scope and key, or from there being none.
    async fn shared(&self, conn: &Conn, batch: &[Pending]) -> Result<Vec<Result<Done>>> {
        let form = batch[0].write.form();
        let writes = || batch.iter().map(|p| &p.write);
        let apps: Vec<&str> = writes().map(|w| w.scope.application_id()).collect();
        let users: Vec<&str> = writes().map(|w| w.scope.user_id()).collect();
        let namespaces: Vec<&str> = writes().map(|w| w.scope.namespace_or_empty()).collect();
        let keys: Vec<&str> = writes().map(|w| w.key.as_str()).collect();
        let rows = match form {
            Form::PutAlways | Form::PutCreateOnly | Form::PutExpected => {
                let mut contents = Vec::with_capacity(batch.len());
                let mut metadatas = Vec::with_capacity(batch.len());
                let mut sources = Vec::with_capacity(batch.len());
                let mut expiries = Vec::with_capacity(batch.len());
                let mut expected = Vec::with_capacity(batch.len());
                let mut sizes = Vec::with_capacity(batch.len());
                for write in writes() {
                    if let Op::Put { condition, content, metadata, source, expires_at, bytes } =
                        &write.op
                    {
                        contents.push(content.as_str());
                        metadatas.push(metadata);
                        sources.push(source);
                        expiries.push(*expires_at);
                        sizes.push(*bytes);
                        if let PutCondition::Expected(revision) = condition {
                            expected.push(*revision);
                        }
                    }
                }
                let (max_records, max_bytes) = (&self.max_records, &self.max_bytes);
                let params: [&(dyn ToSql + Sync); 12] = [
                    &apps,
                    &users,
                    &namespaces,
                    &keys,
                    &contents,
                    &metadatas,
                    &sources,
                    &expiries,
                    &sizes,
                    max_records,
                    max_bytes,
                    &expected,
                ];
                // The expected revisions are the last parameter, bound only by their form.
                let (statement, params) = match form {
                    Form::PutExpected => (&self.sql.put_expected_batch, &params[..]),
                    Form::PutAlways => (&self.sql.put_always_batch, &params[..11]),
                    _ => (&self.sql.put_create_only_batch, &params[..11]),
                };
                conn.query(statement, params).await?
            }
            Form::Delete => {
                let params: [&(dyn ToSql + Sync); 4] = [&apps, &users, &namespaces, &keys];
                conn.query(&self.sql.delete_batch, &params).await?
            }
            Form::DeleteExpected => {
                let expected: Vec<i64> = writes()
                    .filter_map(|w| match w.op {
                        Op::Delete { expected } => expected,
                        Op::Put { .. } => None,
                    })
                    .collect();
                let params: [&(dyn ToSql + Sync); 5] =
                    [&apps, &users, &namespaces, &keys, &expected];
                conn.query(&self.sql.delete_expected_batch, &params).await?
            }
        };
        Ok(outcomes(form, batch, &rows))
    }
}

/// Each element's outcome from the rows of its batch's statement, which start with scope and
/// key (`app, user_id, namespace, key`).
fn outcomes(form: Form, batch: &[Pending], rows: &[Row]) -> Vec<Result<Done>> {
    let mut found: Vec<Option<&Row>> = vec![None; batch.len()];
    let index: HashMap<(&str, &str, &str, &str), usize> =
        batch.iter().enumerate().map(|(i, p)| (p.write.identity(), i)).collect();
    let mut unreadable = false;
    for row in rows {
        let identity = (|| -> Result<_> {
            Ok((column::<&str>(row, 0)?, column(row, 1)?, column(row, 2)?, column(row, 3)?))
        })();
        match identity.ok().and_then(|identity| index.get(&identity)) {
            Some(&i) => found[i] = Some(row),
            None => unreadable = true,
        }
    }
    found
        .into_iter()
        .map(|row| {
            if unreadable {
                // The statement committed, but which row is whose cannot be told.
                return Err(MemoryError::storage(PROVIDER, "a shared write returned a stray row"));
            }
            match (form, row) {
                (Form::PutAlways | Form::PutCreateOnly | Form::PutExpected, Some(row)) => {
                    put_done(row, 4)
                }
                (Form::Delete, Some(row)) => Ok(Done::Deleted(column::<bool>(row, 4)?)),
                (Form::Delete, None) => Ok(Done::Deleted(false)),
                (Form::DeleteExpected, Some(_)) => Ok(Done::Deleted(true)),
                (form, None) => Err(missing(form)),
            }
        })
        .collect()
}

/// Whether `err` is the server refusing a statement (an error it answered with, rather than a
/// connection that failed): then the statement's transaction rolled back and nothing of it
/// committed.
fn refused(err: &MemoryError) -> bool {
    let MemoryError::Storage { source: Some(source), .. } = err else { return false };
    source
        .downcast_ref::<tokio_postgres::Error>()
        .is_some_and(|driver| driver.as_db_error().is_some())
}

/// A `put`'s outcome from `revision, created_at, updated_at` starting at column `at`.
fn put_done(row: &Row, at: usize) -> Result<Done> {
    Ok(Done::Put {
        revision: column(row, at)?,
        created_at: column(row, at + 1)?,
        updated_at: column(row, at + 2)?,
    })
}

/// The outcome of a write whose statement returned no row for it.
fn missing(form: Form) -> MemoryError {
    match form {
        Form::PutCreateOnly => MemoryError::already_exists(),
        Form::PutExpected | Form::DeleteExpected => MemoryError::stale_revision(),
        Form::PutAlways | Form::Delete => {
            MemoryError::storage(PROVIDER, "the write returned no row")
        }
    }
}

/// The error of a caller whose batch stopped before answering it (the task running it ended):
/// the write may or may not have committed.
fn interrupted() -> MemoryError {
    MemoryError::storage(PROVIDER, "the shared write was interrupted before its outcome was known")
}
