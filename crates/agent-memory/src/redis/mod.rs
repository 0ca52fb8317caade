#![doc = include_str!("docs.md")]

mod codec;
mod config;
mod conn;
mod durability;
mod error;
mod keys;
mod narrowing;
mod scripts;
mod url;

use crate::provider::PageRequestExt;
use crate::write::WriteParts;
use std::sync::{PoisonError, RwLock};

use redis::Value;

pub use config::RedisMemoryStoreBuilder;
pub use durability::DurabilityReport;
pub use scripts::ACL_RULES;

use self::codec::{
    count, decode_head, decode_record, encode_source, encode_tail, int, lower_bound, opt_text,
    padded_revision, page_bounds, text, PAYLOAD_AT,
};
use self::config::Options;
use self::conn::{Call, Conn, Target};
use self::error::{malformed_record, unexpected_reply, PROVIDER};
use self::keys::{
    floor_key, hex, namespaces_key, unhex, usage_key, user_prefix, users_key, ScopeKeys,
    APPLICATIONS_KEY,
};
use self::narrowing::Narrowing;
use self::scripts::SCRIPTS;
use crate::error::{MemoryError, Result};
use crate::page::{
    ApplicationPage, CursorKind, KeyInfo, KeyInfoPage, KeyPage, MemoryCleanupPage, MemoryPage,
    NamePage, NamespacePage, PageRequest, UserPage,
};
use crate::provider::{self, key_cursor, key_info_page, TextMatcher};
use crate::quota::{MAX_BYTES_PER_USER, MAX_RECORDS_PER_USER};
use crate::record::{MemoryRecord, Revision};
use crate::scope::MemoryScope;
// The trait comes from `observe`'s one instrumented impl; the docs still link to it.
#[cfg(doc)]
use crate::store::MemoryStore;
use crate::time::Timestamp;
use crate::validation;
use crate::write::{MemoryWrite, WriteCondition};

/// Memories in Redis (one server) or Redis Cluster; see the [module docs](self) for the data
/// model, the URL forms, the options and the guarantees.
///
/// Build it with [`from_url`](Self::from_url), [`builder`](Self::builder) or
/// [`open`](crate::open), then call [`start`](MemoryStore::start), which connects, checks the
/// deployment's durability and loads the scripts.
pub struct RedisMemoryStore {
    target: Target,
    options: Options,
    conn: RwLock<Option<Conn>>,
    lifecycle: tokio::sync::Mutex<()>,
    durability: RwLock<Option<DurabilityReport>>,
}

impl RedisMemoryStore {
    /// What the last successful [`start`](MemoryStore::start) found out about the deployment's
    /// persistence and eviction settings; `None` before that.
    pub fn durability(&self) -> Option<DurabilityReport> {
        self.durability.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// An unstarted store; see [`RedisMemoryStoreBuilder::build`].
    fn new(target: Target, options: Options) -> Self {
        Self {
            target,
            options,
            conn: RwLock::new(None),
            lifecycle: tokio::sync::Mutex::new(()),
            durability: RwLock::new(None),
        }
    }

    fn connection(&self) -> Result<Conn> {
        self.conn
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| MemoryError::not_started(PROVIDER))
    }

    /// Runs one script call on the live connection.
    async fn eval(&self, call: &Call<'_>) -> Result<Value> {
        self.connection()?.call(call).await
    }

    /// One page of `search` (with the `matcher` of its `query`) or `list` (none). A search, or
    /// a list with a metadata filter, is bounded by the search budgets and narrowed in the
    /// script, and each record it returns is confirmed here; a list without a filter only
    /// skips expired records, within the list budget.
    async fn page(
        &self,
        scope: &MemoryScope,
        page: &KeyPage,
        matcher: Option<&TextMatcher>,
        query: &str,
    ) -> Result<MemoryPage> {
        let limit = page.limit;
        let (start, end) = page_bounds(page);
        let keys = ScopeKeys::new(scope);
        let narrowing = Narrowing::new(matcher, query);
        let filter = &page.metadata;
        let (budget, byte_budget) = if matcher.is_some() || !filter.is_empty() {
            // Each needle reads the content once: they share the byte budget, so a query of
            // many words holds the server no longer than a phrase.
            let share =
                self.options.common.search_scan_bytes.div_ceil(narrowing.needles.len().max(1));
            (self.options.common.search_scan_limit, share.to_string())
        } else {
            (self.options.list_scan_limit, String::new())
        };
        // Lua compares numbers as doubles: a filter with one is only a superset.
        let exact = narrowing.exact && filter.iter().all(|(_, value)| !value.is_number());
        let filter_json =
            if filter.is_empty() { String::new() } else { filter.to_json().to_string() };
        let mut call = Call::new(&SCRIPTS.page, 1);
        call.arg(keys.index())
            .arg(keys.record_prefix())
            .arg(start)
            .arg(limit)
            .arg(budget)
            .arg(end)
            .arg(byte_budget)
            .arg(if exact { "1" } else { "0" })
            .arg(narrowing.mode)
            .arg(if narrowing.lowered { "1" } else { "0" })
            .arg(filter_json);
        for needle in &narrowing.needles {
            call.arg(needle);
        }
        let Value::Array(items) = self.eval(&call).await? else {
            return Err(unexpected_reply());
        };
        let mut items = items.into_iter();
        let mut cursor = opt_text(items.next().ok_or_else(unexpected_reply)?)?;
        let mut records = Vec::with_capacity(limit + 1);
        while let Some(key) = items.next() {
            let key = text(key)?;
            let stored = items.next().ok_or_else(unexpected_reply)?;
            let record = decode_record(scope, key, stored)?;
            // The script looked for the needles only; the whole query and the filter are
            // confirmed here, in linear time.
            let holds_text = matcher.is_none_or(|matcher| matcher.matches(&record.content));
            if holds_text && filter.matches(&record.metadata) {
                records.push(record);
            }
        }
        if records.len() > limit {
            // Of limit + 1 candidates, all matched: a full page, and more may follow.
            records.truncate(limit);
            cursor = records.last().map(|last| last.key.clone());
        }
        Ok(MemoryPage {
            items: records,
            next_cursor: cursor.map(|position| page.cursor(scope, &position)),
        })
    }

    /// Puts one user in the application's user index, then the application in the store's
    /// application index; idempotent. In that order, so that whatever lists an application
    /// finds its user, and both are indexed before the user's first record exists.
    async fn index_user(&self, application_id: &str, user_id: &str) -> Result<()> {
        let what = "indexing the user failed";
        let mut conn = self.connection()?;
        let mut add = redis::cmd("ZADD");
        add.arg(users_key(application_id)).arg(0).arg(hex(user_id.as_bytes()));
        conn.command(&add, what).await?;
        let mut add = redis::cmd("ZADD");
        add.arg(APPLICATIONS_KEY).arg(0).arg(hex(application_id.as_bytes()));
        conn.command(&add, what).await?;
        Ok(())
    }

    /// Takes one user out of the application's user index, then puts it back if the user holds
    /// a record again (a write that raced with the erasure).
    async fn unindex_user(&self, application_id: &str, user_id: &str) -> Result<()> {
        let what = "unindexing the user failed";
        let mut conn = self.connection()?;
        let mut remove = redis::cmd("ZREM");
        remove.arg(users_key(application_id)).arg(hex(user_id.as_bytes()));
        conn.command(&remove, what).await?;
        let mut exists = redis::cmd("EXISTS");
        exists.arg(namespaces_key(&user_prefix(application_id, user_id)));
        if int(&conn.command(&exists, what).await?)? == 1 {
            self.index_user(application_id, user_id).await?;
        }
        Ok(())
    }

    /// One page of an id index (a sorted set of hex-encoded ids, read in byte order): up to
    /// `page.limit` ids after `page.after`, and whether more follow.
    async fn index_page(
        &self,
        index: &str,
        page: &NamePage,
        field: &'static str,
        what: &'static str,
    ) -> Result<(Vec<String>, bool)> {
        let min = match &page.after {
            Some(after) => format!("({}", hex(after.as_bytes())),
            None => "-".to_owned(),
        };
        let mut range = redis::cmd("ZRANGEBYLEX");
        range.arg(index).arg(min).arg("+").arg("LIMIT").arg(0).arg(page.limit + 1);
        let Value::Array(members) = self.connection()?.command(&range, what).await? else {
            return Err(unexpected_reply());
        };
        let more = members.len() > page.limit;
        let ids = members
            .into_iter()
            .take(page.limit)
            .map(|member| decode_id(member, field))
            .collect::<Result<Vec<String>>>()?;
        Ok((ids, more))
    }

    /// Loops an erase script until it reports that nothing is left.
    async fn erase_loop(&self, call: &Call<'_>) -> Result<u64> {
        let mut removed = 0u64;
        loop {
            let Value::Array(reply) = self.eval(call).await? else {
                return Err(unexpected_reply());
            };
            let [batch, more] = <[Value; 2]>::try_from(reply).map_err(|_| unexpected_reply())?;
            removed += count(&batch)?;
            if int(&more)? == 0 {
                return Ok(removed);
            }
        }
    }
}

impl crate::observe::Telemetry for RedisMemoryStore {
    fn system(&self) -> &'static str {
        "redis"
    }

    fn db_namespace(&self) -> Option<std::borrow::Cow<'_, str>> {
        Some(self.target.database().to_string().into())
    }
}

impl crate::observe::Backend for RedisMemoryStore {
    async fn start(&self) -> Result<()> {
        let _lifecycle = self.lifecycle.lock().await;
        if self.connection().is_ok() {
            return Ok(());
        }
        if self.options.tls.insecure {
            tracing::warn!(
                "redis TLS certificate verification is off (insecure=true): the connection is \
                 encrypted, but anyone on the network path can pretend to be the server"
            );
        }
        let mut conn = Conn::open(&self.target, &self.options).await?;
        let report = conn.durability().await?;
        report.log();
        let (durable, verified) = (report.is_durable(), report.is_verified());
        *self.durability.write().unwrap_or_else(PoisonError::into_inner) = Some(report);
        if self.options.require_durable && !durable {
            return Err(MemoryError::storage(
                PROVIDER,
                if verified {
                    "the Redis deployment can lose or evict acknowledged writes and \
                     require_durable is set"
                } else {
                    "require_durable is set, but the Redis deployment's persistence settings \
                     could not be verified (CONFIG GET or INFO was refused, as managed services \
                     often do)"
                },
            ));
        }
        conn.load_all(&SCRIPTS.all()).await?;
        *self.conn.write().unwrap_or_else(PoisonError::into_inner) = Some(conn);
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        let _lifecycle = self.lifecycle.lock().await;
        // Dropping the last handle closes the connection(s) this store opened.
        self.conn.write().unwrap_or_else(PoisonError::into_inner).take();
        Ok(())
    }

    async fn put(
        &self,
        scope: &MemoryScope,
        key: &str,
        write: MemoryWrite,
    ) -> Result<MemoryRecord> {
        write.validate(key, Timestamp::now())?;
        let keys = ScopeKeys::new(scope);
        let parts = WriteParts::from(write);
        let source = encode_source(&parts.source)?;
        let (mode, expected) = match &parts.condition {
            WriteCondition::Always => ("a", Vec::new()),
            WriteCondition::CreateOnly => ("c", Vec::new()),
            WriteCondition::Revision(revision) => ("r", padded_revision(revision)),
        };
        let record_key = keys.record(key);
        // Five keys of about the record key's length, the payload, and room for the metadata.
        let bytes = 5 * record_key.len() + PAYLOAD_AT + parts.content.len() + source.len() + 256;
        let charged =
            crate::quota::record_bytes(key, &parts.content, &parts.metadata, &parts.source);
        let quotas = self.options.common.quotas;
        let limit = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_default();
        let build = |indexed: bool| -> Result<Call<'_>> {
            let mut call = Call::with_capacity(&SCRIPTS.put, 5, bytes);
            call.arg(&record_key)
                .scope_keys(&keys)
                .arg(key)
                .arg(&keys.namespace)
                .arg(mode)
                .arg(&expected)
                .arg(&keys.user)
                .arg(charged)
                .arg(limit(quotas.records()))
                .arg(limit(quotas.bytes()));
            // The record from the expiry on, in the stored layout, written straight into the
            // command: the script puts revision, created_at and updated_at in front of it.
            encode_tail(
                &mut call.arg_writer(),
                parts.expires_at,
                &parts.content,
                &source,
                &parts.metadata,
            )?;
            call.arg(if indexed { "1" } else { "0" });
            Ok(call)
        };
        let mut reply = self.eval(&build(false)?).await?;
        if reply == Value::Int(-5) {
            // The user's first record: index the user (and its application), then write (the
            // first call wrote nothing, so this is not a retry of a write). A refused first
            // write leaves the entry: a concurrent first write of the same user may be about
            // to succeed, and taking the user out could hide its record. Listing skips such
            // ghosts; `delete_user` removes them.
            self.index_user(scope.application_id(), scope.user_id()).await?;
            reply = self.eval(&build(true)?).await?;
        }
        let (revision, created_at, updated_at) = match reply {
            Value::Int(-1) => return Err(MemoryError::already_exists()),
            Value::Int(-2) => return Err(MemoryError::stale_revision()),
            Value::Int(-3) => return Err(quota_exceeded(MAX_RECORDS_PER_USER, quotas.records())),
            Value::Int(-4) => return Err(quota_exceeded(MAX_BYTES_PER_USER, quotas.bytes())),
            Value::BulkString(head) => decode_head(&head)?,
            _ => return Err(unexpected_reply()),
        };
        Ok(MemoryRecord {
            scope: scope.clone(),
            key: key.to_owned(),
            revision,
            created_at,
            updated_at,
            content: parts.content,
            metadata: parts.metadata,
            expires_at: parts.expires_at,
            source: parts.source,
        })
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        validation::key(key)?;
        let keys = ScopeKeys::new(scope);
        let mut call = Call::new(&SCRIPTS.get, 1);
        call.arg(keys.record(key));
        match self.eval(&call).await? {
            Value::Nil => Ok(None),
            stored => decode_record(scope, key.to_owned(), stored).map(Some),
        }
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        let page = page.key_page(CursorKind::List, scope)?;
        self.page(scope, &page, None, "").await
    }

    async fn list_keys(&self, scope: &MemoryScope, page: PageRequest) -> Result<KeyInfoPage> {
        let page = page.key_page(CursorKind::Keys, scope)?;
        let (start, end) = page_bounds(&page);
        let keys = ScopeKeys::new(scope);
        let mut call = Call::new(&SCRIPTS.keys, 1);
        call.arg(keys.index())
            .arg(keys.record_prefix())
            .arg(start)
            .arg(page.limit)
            .arg(self.options.list_scan_limit)
            .arg(end);
        let Value::Array(reply) = self.eval(&call).await? else {
            return Err(unexpected_reply());
        };
        let mut reply = reply.into_iter();
        let stopped = opt_text(reply.next().ok_or_else(unexpected_reply)?)?;
        let mut items = Vec::with_capacity(page.limit + 1);
        while let Some(key) = reply.next() {
            let length = int(&reply.next().ok_or_else(unexpected_reply)?)?;
            items.push(KeyInfo::new(
                text(key)?,
                u64::try_from(length).map_err(|_| malformed_record())?,
            ));
        }
        let mut found = key_info_page(scope, &page, items);
        if let Some(position) = stopped {
            // The inspection budget ran out first: continue after the last key inspected.
            found.next_cursor = Some(page.cursor(scope, &position));
        }
        Ok(found)
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        let page = page.key_page(CursorKind::Search, scope)?;
        let matcher = page.matcher(query)?;
        self.page(scope, &page, Some(&matcher), query).await
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool> {
        validation::key(key)?;
        let keys = ScopeKeys::new(scope);
        let mut call = Call::new(&SCRIPTS.delete, 5);
        call.arg(keys.record(key))
            .scope_keys(&keys)
            .arg(key)
            .arg(&keys.namespace)
            .arg(expected_revision.map_or_else(Vec::new, padded_revision))
            .arg(&keys.user);
        match self.eval(&call).await? {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            Value::Int(-2) => Err(MemoryError::stale_revision()),
            _ => Err(unexpected_reply()),
        }
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let keys = ScopeKeys::new(scope);
        let mut call = Call::new(&SCRIPTS.delete_all, 4);
        call.scope_keys(&keys)
            .arg(keys.record_prefix())
            .arg(&keys.namespace)
            .arg(self.options.common.erase_batch_size)
            .arg(&keys.user);
        self.erase_loop(&call).await
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        validation::user(application_id, user_id)?;
        let prefix = user_prefix(application_id, user_id);
        let mut call = Call::new(&SCRIPTS.delete_user, 3);
        call.arg(namespaces_key(&prefix))
            .arg(floor_key(&prefix))
            .arg(usage_key(&prefix))
            .arg(&prefix)
            .arg(self.options.common.erase_batch_size);
        let removed = self.erase_loop(&call).await?;
        self.unindex_user(application_id, user_id).await?;
        Ok(removed)
    }

    async fn list_users(&self, application_id: &str, page: PageRequest) -> Result<UserPage> {
        let page = page.user_page(application_id)?;
        let what = "listing users failed";
        let index = users_key(application_id);
        let (candidates, more) = self.index_page(&index, &page, "user_id", what).await?;
        // A user in the index without a namespace set holds no record (a ghost left by a crash
        // between indexing and the first write, or by removals): checked for every candidate,
        // all at once. In a cluster each check goes to the node of the user's slot.
        let mut checks = tokio::task::JoinSet::new();
        for (i, user) in candidates.iter().enumerate() {
            let mut conn = self.connection()?;
            let mut exists = redis::cmd("EXISTS");
            exists.arg(namespaces_key(&user_prefix(application_id, user)));
            checks.spawn(async move { (i, conn.command(&exists, what).await) });
        }
        let mut holds = vec![false; candidates.len()];
        while let Some(done) = checks.join_next().await {
            let (i, reply) = done.map_err(|_| MemoryError::storage(PROVIDER, what))?;
            holds[i] = int(&reply?)? == 1;
        }
        let next_cursor = match candidates.last() {
            Some(last) if more => Some(provider::user_cursor(application_id, last)),
            _ => None,
        };
        let items = candidates.into_iter().zip(holds).filter_map(|(id, holds)| holds.then_some(id));
        Ok(UserPage { items: items.collect(), next_cursor })
    }

    async fn list_applications(&self, page: PageRequest) -> Result<ApplicationPage> {
        let page = page.application_page()?;
        let what = "listing applications failed";
        let (candidates, more) =
            self.index_page(APPLICATIONS_KEY, &page, "application_id", what).await?;
        // The index keeps every application it ever had (ADR 0013): each candidate is checked
        // for a user holding a record, all at once. In a cluster each check goes to the node
        // of the key it reads.
        let mut checks = tokio::task::JoinSet::new();
        for (i, app) in candidates.iter().enumerate() {
            let conn = self.connection()?;
            let app = app.clone();
            checks.spawn(async move { (i, application_holds(conn, &app).await) });
        }
        let mut holds = vec![false; candidates.len()];
        while let Some(done) = checks.join_next().await {
            let (i, held) = done.map_err(|_| MemoryError::storage(PROVIDER, what))?;
            holds[i] = held?;
        }
        let next_cursor = match candidates.last() {
            Some(last) if more => Some(provider::application_cursor(last)),
            _ => None,
        };
        let items = candidates.into_iter().zip(holds).filter_map(|(id, holds)| holds.then_some(id));
        Ok(ApplicationPage { items: items.collect(), next_cursor })
    }

    async fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> Result<NamespacePage> {
        let page = page.namespace_page(application_id, user_id)?;
        let prefix = user_prefix(application_id, user_id);
        let after_hex = page.after.map(|ns| hex(ns.as_bytes()));
        let mut call = Call::new(&SCRIPTS.namespaces, 1);
        call.arg(namespaces_key(&prefix))
            .arg(lower_bound(after_hex.as_deref().map(str::as_bytes)))
            .arg(page.limit + 1);
        let Value::Array(members) = self.eval(&call).await? else {
            return Err(unexpected_reply());
        };
        let names = members
            .into_iter()
            .map(|member| {
                let Value::BulkString(encoded) = member else {
                    return Err(unexpected_reply());
                };
                let raw = unhex(&encoded).ok_or_else(malformed_record)?;
                String::from_utf8(raw).map_err(|_| malformed_record())
            })
            .collect::<Result<Vec<_>>>()?;
        provider::namespace_page(PROVIDER, application_id, user_id, page.limit, names)
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        let page = page.key_page(CursorKind::Purge, scope)?;
        let (limit, after) = (page.limit, page.after);
        let keys = ScopeKeys::new(scope);
        let mut call = Call::new(&SCRIPTS.purge, 4);
        call.scope_keys(&keys)
            .arg(keys.record_prefix())
            .arg(&keys.namespace)
            .arg(lower_bound(after.as_deref().map(str::as_bytes)))
            .arg(limit)
            .arg(&keys.user);
        let Value::Array(reply) = self.eval(&call).await? else {
            return Err(unexpected_reply());
        };
        let [deleted, cursor] = <[Value; 2]>::try_from(reply).map_err(|_| unexpected_reply())?;
        let deleted = count(&deleted)?;
        let next_cursor =
            opt_text(cursor)?.map(|position| key_cursor(CursorKind::Purge, scope, &position));
        Ok(MemoryCleanupPage { deleted, next_cursor })
    }
}

/// How many of an application's indexed users `list_applications` checks for a record: an
/// application with more users than this, the first this many (in byte order) all ghosts, is
/// listed without looking further, so a page's cost stays bounded (ADR 0013).
const APPLICATION_USER_CHECKS: usize = 4;

/// Whether one indexed application holds a record: whether one of the first
/// [`APPLICATION_USER_CHECKS`] users of its user index has a namespace set. An empty user
/// index (every user erased) or one of ghosts only does not; past the checks, the
/// application counts as holding one.
async fn application_holds(mut conn: Conn, application_id: &str) -> Result<bool> {
    let what = "listing applications failed";
    let mut range = redis::cmd("ZRANGE");
    range.arg(users_key(application_id)).arg(0).arg(APPLICATION_USER_CHECKS);
    let Value::Array(members) = conn.command(&range, what).await? else {
        return Err(unexpected_reply());
    };
    let more = members.len() > APPLICATION_USER_CHECKS;
    for member in members.into_iter().take(APPLICATION_USER_CHECKS) {
        let user = decode_id(member, "user_id")?;
        let mut exists = redis::cmd("EXISTS");
        exists.arg(namespaces_key(&user_prefix(application_id, &user)));
        if int(&conn.command(&exists, what).await?)? == 1 {
            return Ok(true);
        }
    }
    Ok(more)
}

/// An id stored as hex in an index: a `user_id` or an `application_id`.
fn decode_id(member: Value, field: &'static str) -> Result<String> {
    let Value::BulkString(encoded) = member else { return Err(unexpected_reply()) };
    let unreadable = match field {
        "user_id" => "a stored user id is unreadable",
        _ => "a stored application id is unreadable",
    };
    unhex(&encoded)
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .filter(|id| validation::id(field, id).is_ok())
        .ok_or_else(|| MemoryError::storage(PROVIDER, unreadable))
}

/// The error for a put the script refused under `quota`: the store's limit of that name (the
/// script only refuses under a limit it was given).
fn quota_exceeded(quota: &'static str, limit: Option<u64>) -> MemoryError {
    match limit {
        Some(limit) => MemoryError::quota_exceeded(quota, limit),
        None => unexpected_reply(),
    }
}
