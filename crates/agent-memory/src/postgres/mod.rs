#![doc = include_str!("docs.md")]

mod batch;
mod codec;
mod config;
mod error;
mod pool;
mod schema;
mod statements;
mod tls;
mod url;

use crate::provider::PageRequestExt;
use crate::write::WriteParts;
use std::sync::{Arc, PoisonError, RwLock};

use deadpool_postgres::Pool;
use serde_json::Value;
use tokio_postgres::types::ToSql;

pub use self::batch::WriteBatches;
use self::codec::{
    column, corrupt, from_system_time, limit_param, record, revision, revision_number,
    to_system_time,
};
use self::config::Options;
pub use self::config::{
    PostgresMemoryStoreBuilder, DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_ERASE_BATCH_SIZE, DEFAULT_MAX_CONNECTIONS, DEFAULT_MIN_CONNECTIONS, DEFAULT_SCHEMA,
    DEFAULT_SEARCH_SCAN_LIMIT, DEFAULT_TABLE, DEFAULT_WRITE_BATCH_MAX,
};
use self::error::{storage, PROVIDER};
use self::pool::Conn;
use self::schema::Names;
use self::statements::Statements;
pub use self::tls::SslMode;
use self::tls::Tls;
use crate::error::{MemoryError, Result};
use crate::matching::Case;
use crate::page::{
    ApplicationPage, Cursor, CursorKind, KeyInfo, KeyInfoPage, KeyPage, MemoryCleanupPage,
    MemoryPage, NamespacePage, PageRequest, UserPage,
};
use crate::provider::{self, key_cursor, key_info_page, PageBuilder, TextMatcher};
use crate::record::{MemoryRecord, Revision};
use crate::scope::MemoryScope;
// The trait comes from `observe`'s one instrumented impl; the docs still link to it.
#[cfg(doc)]
use crate::store::MemoryStore;
use crate::time::Timestamp;
use crate::validation;
use crate::write::{MemoryWrite, WriteCondition};

/// Memories in a PostgreSQL table shared by any number of replicas.
///
/// Build it with [`builder`](Self::builder) (or [`from_url`](Self::from_url), or
/// [`open`](crate::open)), then call [`start`](MemoryStore::start). See the
/// [module docs](self) for the URL, the schema, the statements and how faults are handled.
pub struct PostgresMemoryStore {
    config: tokio_postgres::Config,
    options: Options,
    tls: Tls,
    names: Names,
    sql: Arc<Statements>,
    /// The queue through which concurrent writes share statements.
    writer: Arc<batch::Writer>,
    /// `None` before `start()` and after `close()`.
    pool: RwLock<Option<Pool>>,
    /// Serialises `start()` and `close()`, so two calls never build two pools.
    lifecycle: tokio::sync::Mutex<()>,
}

impl PostgresMemoryStore {
    /// The unstarted store for a checked configuration (see [`PostgresMemoryStoreBuilder`]).
    fn new(config: tokio_postgres::Config, options: Options, tls: Tls, names: Names) -> Self {
        let sql = Arc::new(Statements::new(&names));
        let writer = Arc::new(batch::Writer::new(
            Arc::clone(&sql),
            options.common.quotas,
            options.write_batch_max,
            options.write_connections(),
        ));
        Self {
            config,
            options,
            tls,
            names,
            sql,
            writer,
            pool: RwLock::new(None),
            lifecycle: tokio::sync::Mutex::new(()),
        }
    }

    /// The DDL `start()` runs for this store's table (schema, table, sequence, version
    /// comment), for operators who provision it themselves and use `setup_schema(false)`.
    pub fn schema_sql(&self) -> String {
        schema::create_sql(&self.names, true)
    }

    /// How this store's writes were grouped into shared statements since it was built.
    ///
    /// Under concurrency, writes that wait for a connection share one statement and one
    /// commit (see the [module docs](self)); [`WriteBatches::mean`] of two readings'
    /// difference is the mean batch size of the work between them.
    pub fn write_batches(&self) -> WriteBatches {
        self.writer.batches()
    }

    /// The text of the set-based statement a batch of unconditional `put`s runs, for tools
    /// that measure the statement on its own (the benchmark's batched ceiling).
    ///
    /// It binds one array element per write: `$1` to `$4` application, user, namespace and
    /// key (`text[]`; the namespace `''` for none), `$5` contents (`text[]`), `$6` metadata and
    /// `$7` sources (`jsonb[]`), `$8` expiries (`timestamptz[]`), `$9` each record's bytes as
    /// quotas count them (`bigint[]`), then `$10` and `$11` the record and byte quotas as text
    /// (`''` for none). Elements are written in array order and must name distinct keys.
    pub fn coalesced_put_sql(&self) -> &str {
        &self.sql.put_always_batch.sql
    }

    /// The text of the set-based statement a batch of unconditional `delete`s runs: `$1` to
    /// `$4` application, user, namespace and key (`text[]`), one element per write. See
    /// [`coalesced_put_sql`](Self::coalesced_put_sql).
    pub fn coalesced_delete_sql(&self) -> &str {
        &self.sql.delete_batch.sql
    }

    /// A write of `scope` and `key` for the write queue.
    fn write(&self, scope: &MemoryScope, key: &str, op: batch::Op) -> batch::Write {
        batch::Write { scope: scope.clone(), key: key.to_owned(), op }
    }

    /// A connection from the started pool.
    async fn client(&self) -> Result<Conn> {
        let pool = self.pool.read().unwrap_or_else(PoisonError::into_inner).clone();
        let pool = pool.ok_or_else(|| MemoryError::not_started(PROVIDER))?;
        Conn::get(&pool, self.options.prepared_statements).await
    }

    /// One page of a bounded scan (see [`statements::scan`]): `search` with its `matcher`, or
    /// `list` with a metadata filter (no matcher). The statement narrows the candidates to a
    /// superset of the matches; each one is confirmed here.
    async fn scan(
        &self,
        scope: &MemoryScope,
        page: &KeyPage,
        matcher: Option<&TextMatcher>,
    ) -> Result<MemoryPage> {
        let limit = page.limit;
        let narrowing = Narrowing::new(matcher);
        let client = self.client().await?;
        let scan = limit_param(self.options.common.search_scan_limit);
        // Each needle reads the content once: they share the byte budget, so a query of many
        // words costs no more per call than a phrase.
        let share = self.options.common.search_scan_bytes.div_ceil(narrowing.needles.len().max(1));
        let bytes = limit_param(share);
        let matches = limit_param(limit + 1);
        let filter = page.metadata.to_json();
        let middle: [&(dyn ToSql + Sync); 7] = [
            &narrowing.needles,
            &scan,
            &matches,
            &bytes,
            &narrowing.every,
            &narrowing.regex,
            &filter,
        ];
        let rows = in_range(&client, &self.sql.scan, scope, page, &middle).await?;
        let (mut hits, mut candidates, mut last_candidate) = (Vec::new(), 0usize, None);
        for row in &rows {
            if !column::<bool>(row, 8)? {
                continue;
            }
            candidates += 1;
            last_candidate = Some(row);
            // The datastore looked for the needles only; the whole query and the filter are
            // confirmed here, in linear time.
            if let Some(matcher) = matcher {
                if !matcher.matches(column::<&str>(row, 1)?) {
                    continue;
                }
            }
            let found = record(scope, row)?;
            if page.metadata.matches(&found.metadata) {
                hits.push(found);
            }
        }
        let (scanned, window_rows): (i64, i64) = match rows.first() {
            Some(row) => (column(row, 9)?, column(row, 10)?),
            None => (0, 0),
        };
        let cursor_at = |row: &tokio_postgres::Row| -> Result<Option<Cursor>> {
            Ok(Some(page.cursor(scope, column::<&str>(row, 0)?)))
        };
        let next_cursor = if hits.len() > limit {
            hits.truncate(limit);
            hits.last().map(|last| page.cursor(scope, &last.key))
        } else if let Some(row) = last_candidate.filter(|_| candidates > limit) {
            // As many candidates as a page takes and one more, not all of them matches:
            // everything up to the last candidate has been looked at.
            cursor_at(row)?
        } else if scanned >= scan || scanned < window_rows {
            // A bound was reached: continue after the last key inspected.
            match rows.last() {
                Some(row) => cursor_at(row)?,
                None => None,
            }
        } else {
            None
        };
        Ok(MemoryPage { items: hits, next_cursor })
    }
}

impl crate::observe::Telemetry for PostgresMemoryStore {
    fn system(&self) -> &'static str {
        "postgresql"
    }

    fn db_namespace(&self) -> Option<std::borrow::Cow<'_, str>> {
        self.config.get_dbname().map(Into::into)
    }

    fn record_gauges(&self) {
        if let Some(pool) = self.pool.read().unwrap_or_else(PoisonError::into_inner).as_ref() {
            let status = pool.status();
            let used = status.size.saturating_sub(status.available);
            crate::observe::connections("postgresql", used, status.available);
        }
    }
}

impl crate::observe::Backend for PostgresMemoryStore {
    async fn start(&self) -> Result<()> {
        let _lifecycle = self.lifecycle.lock().await;
        if self.pool.read().unwrap_or_else(PoisonError::into_inner).is_some() {
            return Ok(());
        }
        let pool = pool::build(&self.config, &self.options, &self.tls)?;
        if let Err(err) = pool::open(&pool, &self.options, &self.names, &self.sql).await {
            pool.close();
            return Err(err);
        }
        *self.pool.write().unwrap_or_else(PoisonError::into_inner) = Some(pool);
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        let _lifecycle = self.lifecycle.lock().await;
        if let Some(pool) = self.pool.write().unwrap_or_else(PoisonError::into_inner).take() {
            pool.close();
        }
        Ok(())
    }

    async fn put(
        &self,
        scope: &MemoryScope,
        key: &str,
        write: MemoryWrite,
    ) -> Result<MemoryRecord> {
        write.validate(key, Timestamp::now())?;
        let parts = WriteParts::from(write);
        let bytes = crate::quota::record_bytes(key, &parts.content, &parts.metadata, &parts.source);
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let metadata = Value::Object(parts.metadata);
        let source = serde_json::to_value(&parts.source).map_err(storage("could not encode"))?;
        let condition = match &parts.condition {
            WriteCondition::Always => batch::PutCondition::Always,
            WriteCondition::CreateOnly => batch::PutCondition::CreateOnly,
            WriteCondition::Revision(expected) => {
                batch::PutCondition::Expected(revision_number(expected))
            }
        };
        let op = batch::Op::Put {
            condition,
            content: parts.content,
            metadata,
            source,
            expires_at: parts.expires_at.map(to_system_time),
            bytes,
        };
        let (write, done) = self.writer.submit(self.write(scope, key, op), self.client()).await?;
        let (
            batch::Op::Put { content, metadata: Value::Object(metadata), .. },
            batch::Done::Put { revision: number, created_at, updated_at },
        ) = (write.op, done)
        else {
            return Err(corrupt("a write outcome of another kind"));
        };
        Ok(MemoryRecord {
            scope: scope.clone(),
            key: write.key,
            content,
            metadata,
            revision: revision(number)?,
            created_at: from_system_time(created_at)?,
            updated_at: from_system_time(updated_at)?,
            expires_at: parts.expires_at,
            source: parts.source,
        })
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        validation::key(key)?;
        let client = self.client().await?;
        let (app, user, ns) = scope.columns();
        let row = client.query_opt(&self.sql.get, &[&app, &user, &ns, &key]).await?;
        row.map(|row| record(scope, &row)).transpose()
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        let page = page.key_page(CursorKind::List, scope)?;
        if !page.metadata.is_empty() {
            return self.scan(scope, &page, None).await;
        }
        let client = self.client().await?;
        let fetch = limit_param(page.limit + 1);
        let rows = in_range(&client, &self.sql.list, scope, &page, &[&fetch]).await?;
        PageBuilder::for_page(scope, &page).fill(&rows, |row| record(scope, row))
    }

    async fn list_keys(&self, scope: &MemoryScope, page: PageRequest) -> Result<KeyInfoPage> {
        let page = page.key_page(CursorKind::Keys, scope)?;
        let client = self.client().await?;
        let fetch = limit_param(page.limit + 1);
        let rows = in_range(&client, &self.sql.keys, scope, &page, &[&fetch]).await?;
        let what = "listing keys failed";
        let mut items = Vec::with_capacity(rows.len());
        for row in &rows {
            let key: String = row.try_get(0).map_err(storage(what))?;
            let length: i64 = row.try_get(1).map_err(storage(what))?;
            items.push(KeyInfo::new(key, u64::try_from(length).unwrap_or_default()));
        }
        Ok(key_info_page(scope, &page, items))
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query_text: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        let page = page.key_page(CursorKind::Search, scope)?;
        let matcher = page.matcher(query_text)?;
        self.scan(scope, &page, Some(&matcher)).await
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool> {
        validation::key(key)?;
        let op = batch::Op::Delete { expected: expected_revision.map(revision_number) };
        match self.writer.submit(self.write(scope, key, op), self.client()).await? {
            (_, batch::Done::Deleted(existed)) => Ok(existed),
            (_, batch::Done::Put { .. }) => Err(corrupt("a write outcome of another kind")),
        }
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let client = self.client().await?;
        let (app, user, ns) = scope.columns();
        let batch = limit_param(self.options.common.erase_batch_size);
        let probe = batch.saturating_add(1);
        let mut removed: u64 = 0;
        // One statement per batch, each its own transaction: a namespace of millions of rows
        // never holds one statement (and its locks) for long. A retry after a failure removes
        // what is left.
        loop {
            let params: [&(dyn ToSql + Sync); 5] = [&app, &user, &ns, &batch, &probe];
            let row = client.query_one(&self.sql.delete_all, &params).await?;
            let deleted: i64 = column(&row, 0)?;
            removed += u64::try_from(deleted).unwrap_or(0);
            if !column::<bool>(&row, 1)? {
                return Ok(removed);
            }
        }
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        validation::user(application_id, user_id)?;
        let client = self.client().await?;
        let batch = limit_param(self.options.common.erase_batch_size);
        let probe = batch.saturating_add(1);
        let mut removed: u64 = 0;
        loop {
            let params: [&(dyn ToSql + Sync); 4] = [&application_id, &user_id, &batch, &probe];
            let row = client.query_one(&self.sql.delete_user_batch, &params).await?;
            let deleted: i64 = column(&row, 0)?;
            removed += u64::try_from(deleted).unwrap_or(0);
            if !column::<bool>(&row, 1)? {
                return Ok(removed);
            }
        }
    }

    async fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> Result<NamespacePage> {
        let page = page.namespace_page(application_id, user_id)?;
        let client = self.client().await?;
        let (sql, start) = match &page.after {
            None => (&self.sql.namespaces_first, ""),
            Some(after) => (&self.sql.namespaces_after, after.as_str()),
        };
        let fetch = limit_param(page.limit + 1);
        let rows = client.query(sql, &[&application_id, &user_id, &start, &fetch]).await?;
        let names = rows.iter().map(|row| column::<String>(row, 0)).collect::<Result<Vec<_>>>()?;
        provider::namespace_page(PROVIDER, application_id, user_id, page.limit, names)
    }

    async fn list_users(&self, application_id: &str, page: PageRequest) -> Result<UserPage> {
        let page = page.user_page(application_id)?;
        let client = self.client().await?;
        let after = page.after.as_deref().unwrap_or("");
        let fetch = limit_param(page.limit + 1);
        let rows = client.query(&self.sql.users, &[&application_id, &after, &fetch]).await?;
        let ids = rows.iter().map(|row| column::<String>(row, 0)).collect::<Result<Vec<_>>>()?;
        provider::user_page(PROVIDER, application_id, page.limit, ids)
    }

    async fn list_applications(&self, page: PageRequest) -> Result<ApplicationPage> {
        let page = page.application_page()?;
        let client = self.client().await?;
        let after = page.after.as_deref().unwrap_or("");
        let fetch = limit_param(page.limit + 1);
        let rows = client.query(&self.sql.applications, &[&after, &fetch]).await?;
        let ids = rows.iter().map(|row| column::<String>(row, 0)).collect::<Result<Vec<_>>>()?;
        provider::application_page(PROVIDER, page.limit, ids)
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        let page = page.key_page(CursorKind::Purge, scope)?;
        let client = self.client().await?;
        let (app, user, ns) = scope.columns();
        let after = page.after.unwrap_or_default();
        let inspect = limit_param(page.limit);
        let probe = limit_param(page.limit + 1);
        let params: [&(dyn ToSql + Sync); 6] = [&app, &user, &ns, &after, &inspect, &probe];
        let row = client.query_one(&self.sql.purge, &params).await?;
        let deleted: i64 = column(&row, 0)?;
        let last: Option<String> = column(&row, 1)?;
        let more: bool = column(&row, 2)?;
        let next_cursor = match last {
            Some(last) if more => Some(key_cursor(CursorKind::Purge, scope, &last)),
            _ => None,
        };
        Ok(MemoryCleanupPage { deleted: u64::try_from(deleted).unwrap_or(0), next_cursor })
    }
}

/// What a bounded scan's statement looks for in the content (its parameters $5, $9 and $10).
struct Narrowing {
    /// Literals for `strpos`, or regular expressions for `~`; none narrows nothing.
    needles: Vec<String>,
    /// Whether every needle must occur, or one is enough.
    every: bool,
    /// Whether the needles are regular expressions.
    regex: bool,
}

impl Narrowing {
    /// The needles of `matcher`'s prefilter, each once: literals for a case-sensitive search,
    /// regular expressions of each character's case class for an insensitive one. Without a
    /// matcher (`list`), nothing.
    fn new(matcher: Option<&TextMatcher>) -> Self {
        let Some(matcher) = matcher else {
            return Self { needles: Vec::new(), every: true, regex: false };
        };
        let prefilter = matcher.prefilter();
        let regex = matcher.case() == Case::Insensitive;
        let mut needles: Vec<String> = Vec::with_capacity(prefilter.needles.len());
        for needle in &prefilter.needles {
            let needle = if regex {
                // Every insensitive needle has classes, so this is never `None`; a needle
                // without would only narrow less.
                match needle.postgres_regex() {
                    Some(regex) => regex,
                    None if prefilter.every => continue,
                    None => return Self { needles: Vec::new(), every: true, regex },
                }
            } else {
                needle.text.clone()
            };
            if !needles.contains(&needle) {
                needles.push(needle);
            }
        }
        Self { needles, every: prefilter.every, regex }
    }
}

/// The rows of `statements`' shape for `page`'s key range in `scope`. Every range statement
/// binds `$1` to `$3` the scope, `$4` the start (the key after the cursor, else the prefix:
/// `''` for none sorts at or before every key), then `middle`, then the prefix's end when it
/// has one.
async fn in_range(
    client: &Conn,
    statements: &statements::Ranged,
    scope: &MemoryScope,
    page: &KeyPage,
    middle: &[&(dyn ToSql + Sync)],
) -> Result<Vec<tokio_postgres::Row>> {
    let (app, user, ns) = scope.columns();
    let start = page.after.as_deref().unwrap_or(&page.prefix);
    let end = page.prefix_end();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&app, &user, &ns, &start];
    params.extend_from_slice(middle);
    if let Some(end) = &end {
        params.push(end);
    }
    let statement = statements.pick(page.after.is_some(), end.is_some());
    client.query(statement, &params).await
}
