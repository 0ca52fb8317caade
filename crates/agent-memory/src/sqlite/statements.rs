//! The operations, as blocking functions over one connection. Every statement names the whole
//! scope (`app_id`, `user_id`, `namespace`) in its `WHERE` clause, binds every value, and takes
//! "now" as a parameter so expiry follows the store's clock.
//!
//! The writing functions (`put`, `delete`, the erase batches, `purge_expired`) run on the
//! writer's connection inside an open `BEGIN IMMEDIATE` transaction, the writer thread's or a
//! lone write's own (see [`super::pool`]): they neither begin nor commit, and a failure they
//! return rolls back everything they did.

use rusqlite::{params, Connection, OptionalExtension};

use super::codec::{
    decode, record_columns, revision_number, revision_token, timestamp, RECORD_COLUMN_COUNT,
};
use super::error::{storage, PROVIDER};
use super::schema::LAST_REVISION;
use crate::error::{MemoryError, Result};
use crate::page::{
    ApplicationPage, CursorKind, KeyInfo, KeyInfoPage, KeyPage, MemoryCleanupPage, MemoryPage,
    NamePage, NamespacePage, UserPage,
};
use crate::provider::{self, key_cursor, key_info_page, PageBuilder, SearchScan, TextMatcher};
use crate::quota::{record_bytes, Quotas, Usage, UsageChange};
use crate::record::{MemoryRecord, Revision};
use crate::scope::MemoryScope;
use crate::time::Timestamp;
use crate::write::{WriteCondition, WriteParts};

/// The SQL condition for "live at `?now`", with `?now` spelled as given.
macro_rules! live {
    ($now:literal) => {
        concat!("(expires_at IS NULL OR expires_at > ", $now, ")")
    };
}

/// Inserts or replaces one record. The condition check, the quota check and the write run in
/// the writer's `BEGIN IMMEDIATE` transaction, so no other writer (thread or process) comes
/// between them; the usage triggers update the user's count in that same transaction.
pub(super) fn put(
    conn: &Connection,
    scope: &MemoryScope,
    key: &str,
    parts: WriteParts,
    now: Timestamp,
    quotas: &Quotas,
) -> Result<MemoryRecord> {
    let (app, user, ns) = scope.columns();
    let what = "writing a record failed";
    let expected = match &parts.condition {
        WriteCondition::Revision(revision) => {
            // A token this provider never issued matches no live record.
            Some(revision_number(revision).ok_or_else(MemoryError::stale_revision)?)
        }
        WriteCondition::Always | WriteCondition::CreateOnly => None,
    };
    let metadata = serde_json::to_string(&parts.metadata)
        .map_err(|err| MemoryError::storage_from(PROVIDER, "encoding metadata failed", err))?;
    let now_micros = now.as_micros();
    let bytes = record_bytes(key, &parts.content, &parts.metadata, &parts.source);
    // The row at the key, live or expired: an expired one is replaced too, and its bytes are
    // what the write frees. Under quotas, what the user holds comes with it.
    let (held, usage) = held_row(conn, scope, key, now_micros, !quotas.is_unlimited())?;
    let live = held.filter(|row| row.live).map(|row| (row.revision, row.created_at));
    match (&parts.condition, live) {
        (WriteCondition::CreateOnly, Some(_)) => return Err(MemoryError::already_exists()),
        (WriteCondition::Revision(_), Some((revision, _))) if Some(revision) == expected => {}
        (WriteCondition::Revision(_), _) => return Err(MemoryError::stale_revision()),
        _ => {}
    }
    if let Some(usage) = usage {
        let old_bytes = held.map(|row| u64::try_from(row.bytes).unwrap_or(0));
        quotas.admit(usage, UsageChange::of_write(old_bytes, bytes))?;
    }
    let created_at = live.map_or(now_micros, |(_, created_at)| created_at);
    let revision: i64 = conn
        .prepare_cached("UPDATE memory_meta SET value = value + 1 WHERE name = ?1 RETURNING value")
        .and_then(|mut stmt| stmt.query_row([LAST_REVISION], |row| row.get(0)))
        .map_err(storage(what))?;
    let expires_at = parts.expires_at.map(Timestamp::as_micros);
    conn.prepare_cached(
        "INSERT INTO memory_records (app_id, user_id, namespace, key, content, metadata, \
         source_session, source_invocation, source_agent, revision, created_at, updated_at, \
         expires_at, bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) \
         ON CONFLICT (app_id, user_id, namespace, key) DO UPDATE SET \
         content = excluded.content, metadata = excluded.metadata, \
         source_session = excluded.source_session, \
         source_invocation = excluded.source_invocation, source_agent = excluded.source_agent, \
         revision = excluded.revision, created_at = excluded.created_at, \
         updated_at = excluded.updated_at, expires_at = excluded.expires_at, \
         bytes = excluded.bytes",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            app,
            user,
            ns,
            key,
            parts.content,
            metadata,
            parts.source.session_id,
            parts.source.invocation_id,
            parts.source.agent,
            revision,
            created_at,
            now_micros,
            expires_at,
            i64::try_from(bytes).unwrap_or(i64::MAX),
        ])
    })
    .map_err(storage(what))?;
    Ok(MemoryRecord {
        scope: scope.clone(),
        key: key.to_owned(),
        content: parts.content,
        metadata: parts.metadata,
        revision: revision_token(revision)?,
        created_at: timestamp(created_at)?,
        updated_at: now,
        expires_at: parts.expires_at,
        source: parts.source,
    })
}

/// The row a write to a key replaces, live or expired.
#[derive(Clone, Copy)]
struct Held {
    revision: i64,
    created_at: i64,
    bytes: i64,
    live: bool,
}

/// The row at `key`, and with `with_usage` what the scope's user holds (from the row the usage
/// triggers keep), in one statement: a quota check adds a lookup to a put, not a statement.
fn held_row(
    conn: &Connection,
    scope: &MemoryScope,
    key: &str,
    now_micros: i64,
    with_usage: bool,
) -> Result<(Option<Held>, Option<Usage>)> {
    let (app, user, ns) = scope.columns();
    let args = params![app, user, ns, key, now_micros];
    let held = |row: &rusqlite::Row<'_>| -> rusqlite::Result<Option<Held>> {
        // `revision` is never NULL in a stored row: NULL is the outer join finding none.
        Ok(match row.get::<_, Option<i64>>(0)? {
            Some(revision) => Some(Held {
                revision,
                created_at: row.get(1)?,
                bytes: row.get(2)?,
                live: row.get(3)?,
            }),
            None => None,
        })
    };
    let found = if with_usage {
        // One row whatever exists: each table is joined to it by its primary key.
        conn.prepare_cached(concat!(
            "SELECT r.revision, r.created_at, r.bytes, ",
            live!("?5"),
            ", u.records, u.bytes FROM (SELECT 1) ",
            "LEFT JOIN memory_records AS r ",
            "ON r.app_id = ?1 AND r.user_id = ?2 AND r.namespace = ?3 AND r.key = ?4 ",
            "LEFT JOIN memory_usage AS u ON u.app_id = ?1 AND u.user_id = ?2"
        ))
        .and_then(|mut stmt| {
            stmt.query_row(args, |row| {
                let count = |i: usize| -> rusqlite::Result<u64> {
                    // No usage row: the user holds nothing.
                    let n: Option<i64> = row.get(i)?;
                    Ok(n.map_or(0, |n| u64::try_from(n).unwrap_or(0)))
                };
                let usage = Usage { records: count(4)?, bytes: count(5)? };
                Ok((held(row)?, Some(usage)))
            })
        })
    } else {
        conn.prepare_cached(concat!(
            "SELECT revision, created_at, bytes, ",
            live!("?5"),
            " FROM memory_records ",
            "WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND key = ?4"
        ))
        .and_then(|mut stmt| stmt.query_row(args, |row| Ok((held(row)?, None))).optional())
        .map(Option::unwrap_or_default)
    };
    found.map_err(storage("writing a record failed"))
}

/// Reads the live record at `key`.
pub(super) fn get(
    conn: &Connection,
    scope: &MemoryScope,
    key: &str,
    now: Timestamp,
) -> Result<Option<MemoryRecord>> {
    let (app, user, ns) = scope.columns();
    let what = "reading a record failed";
    let mut stmt = conn
        .prepare_cached(concat!(
            "SELECT ",
            record_columns!(),
            " FROM memory_records ",
            "WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND key = ?4 AND ",
            live!("?5")
        ))
        .map_err(storage(what))?;
    let mut rows =
        stmt.query(params![app, user, ns, key, now.as_micros()]).map_err(storage(what))?;
    match rows.next().map_err(storage(what))? {
        Some(row) => decode(row, scope).map(Some),
        None => Ok(None),
    }
}

/// The statements over one scope's key range, one per shape of range (`after` a key or from
/// the prefix, with or without an end): one statement per shape, because SQLite seeks the
/// primary key with at most one lower and one upper bound, so a condition it cannot seek with
/// would become a filter over the rows outside the range. `?1` to `?3` are the scope, `?4` the
/// start, `?5` the time, `?6` the end; see [`in_range`].
macro_rules! range_statement {
    ($name:ident: SELECT $columns:tt $(AND $live:tt)?) => {
        fn $name(after: bool, end: bool) -> &'static str {
            match (after, end) {
                (true, true) => range_statement!(@ $columns "key > ?4 AND key < ?6" $($live)?),
                (true, false) => range_statement!(@ $columns "key > ?4" $($live)?),
                (false, true) => range_statement!(@ $columns "key >= ?4 AND key < ?6" $($live)?),
                (false, false) => range_statement!(@ $columns "key >= ?4" $($live)?),
            }
        }
    };
    (@ [$($columns:tt)*] $range:literal $([$($live:tt)*])?) => {
        concat!(
            "SELECT ", $($columns)*, " FROM memory_records ",
            "WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND ", $range,
            $(" AND ", $($live)*,)? " ORDER BY key"
        )
    };
}

range_statement!(list_statement: SELECT [record_columns!()] AND [live!("?5")]);

// The `list_keys` statement: the keys `list` would read, with `octet_length(content)`, which
// SQLite answers from the row's header (the value's size is stored there) without reading the
// content or its overflow pages.
range_statement!(keys_statement: SELECT ["key, octet_length(content)"] AND [live!("?5")]);

/// Runs `statement`'s shape for `page`'s key range in `scope` at `now`, and hands its rows,
/// in key order, to `read`.
fn in_range<T>(
    conn: &Connection,
    statement: fn(bool, bool) -> &'static str,
    scope: &MemoryScope,
    page: &KeyPage,
    now: Timestamp,
    what: &'static str,
    read: impl FnOnce(rusqlite::Rows<'_>) -> Result<T>,
) -> Result<T> {
    let end = page.prefix_end();
    let mut stmt = conn
        .prepare_cached(statement(page.after.is_some(), end.is_some()))
        .map_err(storage(what))?;
    // The start is the key to continue after, or the prefix ("" for none: every key is at
    // least one byte, so all sort at or after it).
    let start = page.after.as_deref().unwrap_or(&page.prefix);
    let (app, user, ns) = scope.columns();
    let now = now.as_micros();
    let rows = match &end {
        Some(end) => stmt.query(params![app, user, ns, start, now, end]),
        None => stmt.query(params![app, user, ns, start, now]),
    }
    .map_err(storage(what))?;
    read(rows)
}

/// Pages live keys with their content's length, the range [`list`] reads.
pub(super) fn list_keys(
    conn: &Connection,
    scope: &MemoryScope,
    page: &KeyPage,
    now: Timestamp,
) -> Result<KeyInfoPage> {
    let what = "listing keys failed";
    in_range(conn, keys_statement, scope, page, now, what, |mut rows| {
        let mut items = Vec::with_capacity(page.limit.min(128) + 1);
        while items.len() <= page.limit {
            let Some(row) = rows.next().map_err(storage(what))? else { break };
            let key: String = row.get(0).map_err(storage(what))?;
            let length: i64 = row.get(1).map_err(storage(what))?;
            items.push(KeyInfo::new(key, u64::try_from(length).unwrap_or_default()));
        }
        Ok(key_info_page(scope, page, items))
    })
}

/// Pages live records in key order: after the cursor (else from the prefix) up to the
/// prefix's end, a range of the primary key.
pub(super) fn list(
    conn: &Connection,
    scope: &MemoryScope,
    page: &KeyPage,
    now: Timestamp,
) -> Result<MemoryPage> {
    let what = "listing records failed";
    // Rows come from the primary key in order, one step at a time: reading stops after
    // `limit + 1` rows, so no LIMIT is needed (a bound LIMIT would make SQLite re-plan the
    // statement whenever it is rebound).
    in_range(conn, list_statement, scope, page, now, what, |mut rows| {
        let mut reply = PageBuilder::for_page(scope, page);
        while let Some(row) = rows.next().map_err(storage(what))? {
            if reply.is_full() {
                return Ok(reply.finish(true));
            }
            reply.push(decode(row, scope)?);
        }
        Ok(reply.finish(false))
    })
}

// The bounded scan's statement: every record of the page's key range with whether it is
// live, so expired records count against the budget too.
range_statement!(scan_statement: SELECT [record_columns!(), ", ", live!("?5")]);

/// Pages the live records of `page`'s key range whose metadata passes its filter and whose
/// content `matcher` matches (every content for a filtered `list`), inspecting records while
/// `scan` has room (the store's
/// [`search_scan_limit`](super::SqliteMemoryStoreBuilder::search_scan_limit) and
/// [`search_scan_bytes`](super::SqliteMemoryStoreBuilder::search_scan_bytes)): `search`, and
/// `list` with a metadata filter.
pub(super) fn scan(
    conn: &Connection,
    scope: &MemoryScope,
    matcher: Option<&TextMatcher>,
    page: &KeyPage,
    now: Timestamp,
    mut scan: SearchScan,
) -> Result<MemoryPage> {
    let limit = page.limit;
    let what = "searching records failed";
    // The match runs here, on the content and metadata SQLite hands over without a copy:
    // `instr` compares the whole query at every position (quadratic on repetitive text), the
    // shared matcher is linear, and no SQL function folds case as it does. Only matching rows
    // are decoded.
    in_range(conn, scan_statement, scope, page, now, what, |mut rows| {
        let mut items: Vec<MemoryRecord> = Vec::with_capacity(limit.min(128));
        let mut last_inspected: Option<String> = None;
        let mut position: Option<String> = None;
        while scan.has_room() {
            let Some(row) = rows.next().map_err(storage(what))? else {
                last_inspected = None;
                break;
            };
            let content = row.get_ref(1).and_then(|v| Ok(v.as_str()?)).map_err(storage(what))?;
            scan.inspect(content.len());
            let live: bool = row.get(RECORD_COLUMN_COUNT).map_err(storage(what))?;
            if live
                && matcher.is_none_or(|matcher| matcher.matches(content))
                && passes_filter(row, page)?
            {
                if items.len() == limit {
                    // Another match follows a full page.
                    position = items.last().map(|last| last.key.clone());
                    last_inspected = None;
                    break;
                }
                items.push(decode(row, scope)?);
            }
            if !scan.has_room() {
                last_inspected = Some(row.get(0).map_err(storage(what))?);
            }
        }
        if position.is_none() && last_inspected.is_some() {
            // A bound ran out: the next call continues after the last key inspected (and finds
            // nothing if that was the last one).
            position = last_inspected;
        }
        let next_cursor = position.map(|key| page.cursor(scope, &key));
        Ok(MemoryPage { items, next_cursor })
    })
}

/// Whether the row's metadata (JSON text, column 2) passes the page's filter; the text is
/// parsed only when there is a filter.
fn passes_filter(row: &rusqlite::Row<'_>, page: &KeyPage) -> Result<bool> {
    if page.metadata.is_empty() {
        return Ok(true);
    }
    let metadata = row
        .get_ref(2)
        .and_then(|v| Ok(v.as_str()?))
        .map_err(storage("searching records failed"))?;
    Ok(page.metadata.matches_json(metadata))
}

/// Removes the record at `key`; with `expected`, only the live record holding that revision.
pub(super) fn delete(
    conn: &Connection,
    scope: &MemoryScope,
    key: &str,
    expected: Option<&Revision>,
    now: Timestamp,
) -> Result<bool> {
    let (app, user, ns) = scope.columns();
    let what = "deleting a record failed";
    let expected = match expected {
        Some(revision) => Some(revision_number(revision).ok_or_else(MemoryError::stale_revision)?),
        None => None,
    };
    let existed = match expected {
        None => {
            let removed: Option<bool> = conn
                .prepare_cached(concat!(
                    "DELETE FROM memory_records ",
                    "WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND key = ?4 ",
                    "RETURNING ",
                    live!("?5")
                ))
                .and_then(|mut stmt| {
                    stmt.query_row(params![app, user, ns, key, now.as_micros()], |row| row.get(0))
                        .optional()
                })
                .map_err(storage(what))?;
            removed.unwrap_or(false)
        }
        Some(revision) => {
            let removed = conn
                .prepare_cached(concat!(
                    "DELETE FROM memory_records ",
                    "WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND key = ?4 ",
                    "AND revision = ?6 AND ",
                    live!("?5")
                ))
                .and_then(|mut stmt| {
                    stmt.execute(params![app, user, ns, key, now.as_micros(), revision])
                })
                .map_err(storage(what))?;
            if removed == 0 {
                return Err(MemoryError::stale_revision());
            }
            true
        }
    };
    Ok(existed)
}

/// Removes up to `batch_size` records of one namespace, expired ones included.
pub(super) fn erase_namespace_batch(
    conn: &Connection,
    scope: &MemoryScope,
    batch_size: usize,
) -> Result<u64> {
    let (app, user, ns) = scope.columns();
    erase_batch(
        conn,
        "DELETE FROM memory_records WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 \
         AND key IN (SELECT key FROM memory_records \
         WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 ORDER BY key LIMIT ?4)",
        params![app, user, ns, sql_limit(batch_size)],
    )
}

/// Removes up to `batch_size` records of one application user, every namespace.
pub(super) fn erase_user_batch(
    conn: &Connection,
    app: &str,
    user: &str,
    batch_size: usize,
) -> Result<u64> {
    erase_batch(
        conn,
        "DELETE FROM memory_records WHERE app_id = ?1 AND user_id = ?2 \
         AND (namespace, key) IN (SELECT namespace, key FROM memory_records \
         WHERE app_id = ?1 AND user_id = ?2 ORDER BY namespace, key LIMIT ?3)",
        params![app, user, sql_limit(batch_size)],
    )
}

/// `n` as a SQL `LIMIT`. The builder refuses batch sizes above `i64::MAX`, and a larger limit
/// would mean the same ("all rows") anyway.
fn sql_limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Runs one erase statement, prepared once per connection and cached: the batch size is a
/// bound parameter, not part of the SQL text, so one statement serves every batch.
fn erase_batch(conn: &Connection, sql: &str, params: &[&dyn rusqlite::ToSql]) -> Result<u64> {
    let what = "erasing records failed";
    let removed = conn
        .prepare_cached(sql)
        .and_then(|mut stmt| stmt.execute(params))
        .map_err(storage(what))?;
    Ok(u64::try_from(removed).unwrap_or(u64::MAX))
}

/// Pages the namespaces of one application user that hold any record, expired ones included.
/// Each namespace is one index seek, however many records it holds.
pub(super) fn list_namespaces(
    conn: &Connection,
    app: &str,
    user: &str,
    page: &NamePage,
) -> Result<NamespacePage> {
    let what = "listing namespaces failed";
    let mut first = conn
        .prepare_cached(
            "SELECT namespace FROM memory_records WHERE app_id = ?1 AND user_id = ?2 \
             AND namespace >= ?3 ORDER BY namespace LIMIT 1",
        )
        .map_err(storage(what))?;
    let mut next = conn
        .prepare_cached(
            "SELECT namespace FROM memory_records WHERE app_id = ?1 AND user_id = ?2 \
             AND namespace > ?3 ORDER BY namespace LIMIT 1",
        )
        .map_err(storage(what))?;
    let mut names: Vec<String> = Vec::with_capacity(page.limit + 1);
    let mut position = page.after.clone();
    while names.len() <= page.limit {
        let found: Option<String> = match &position {
            // The default namespace is "", the smallest name: a first page starts there.
            None => first.query_row(params![app, user, ""], |row| row.get(0)),
            Some(after) => next.query_row(params![app, user, after], |row| row.get(0)),
        }
        .optional()
        .map_err(storage(what))?;
        let Some(name) = found else { break };
        position = Some(name.clone());
        names.push(name);
    }
    provider::namespace_page(PROVIDER, app, user, page.limit, names)
}

/// The next user id after `?2` that holds a record in application `?1`: one seek on the
/// primary key, however many records the users before it hold.
const NEXT_USER: &str = "SELECT user_id FROM memory_records WHERE app_id = ?1 AND user_id > ?2 \
                         ORDER BY user_id LIMIT 1";

/// Pages the users of one application that hold any record, expired ones included: a skip
/// scan, one primary-key seek per user (at most `limit + 1`), never a scan of their records.
/// `memory_usage` does not decide the listing: the records do.
pub(super) fn list_users(conn: &Connection, app: &str, page: &NamePage) -> Result<UserPage> {
    let what = "listing users failed";
    let mut next = conn.prepare_cached(NEXT_USER).map_err(storage(what))?;
    let mut ids: Vec<String> = Vec::with_capacity(page.limit + 1);
    // User ids are never empty, so "" is before every one of them.
    let mut position = page.after.clone().unwrap_or_default();
    while ids.len() <= page.limit {
        let found: Option<String> = next
            .query_row(params![app, position], |row| row.get(0))
            .optional()
            .map_err(storage(what))?;
        let Some(id) = found else { break };
        position.clone_from(&id);
        ids.push(id);
    }
    provider::user_page(PROVIDER, app, page.limit, ids)
}

/// The next application id after `?1` that holds a record: one seek on the primary key's
/// leading column, however many records the applications before it hold.
const NEXT_APPLICATION: &str =
    "SELECT app_id FROM memory_records WHERE app_id > ?1 ORDER BY app_id LIMIT 1";

/// Pages the applications that hold any record, expired ones included: a skip scan, one
/// primary-key seek per application (at most `limit + 1`), never a scan of their records.
pub(super) fn list_applications(conn: &Connection, page: &NamePage) -> Result<ApplicationPage> {
    let what = "listing applications failed";
    let mut next = conn.prepare_cached(NEXT_APPLICATION).map_err(storage(what))?;
    let mut ids: Vec<String> = Vec::with_capacity(page.limit + 1);
    // Application ids are never empty, so "" is before every one of them.
    let mut position = page.after.clone().unwrap_or_default();
    while ids.len() <= page.limit {
        let found: Option<String> = next
            .query_row(params![position], |row| row.get(0))
            .optional()
            .map_err(storage(what))?;
        let Some(id) = found else { break };
        position.clone_from(&id);
        ids.push(id);
    }
    provider::application_page(PROVIDER, page.limit, ids)
}

/// Inspects at most `limit` keys after `after` and removes the expired ones among them.
pub(super) fn purge_expired(
    conn: &Connection,
    scope: &MemoryScope,
    page: &KeyPage,
    now: Timestamp,
) -> Result<MemoryCleanupPage> {
    let (app, user, ns) = scope.columns();
    let what = "purging expired records failed";
    let (after, limit) = (page.after.as_deref().unwrap_or(""), page.limit);
    let keys: Vec<String> = conn
        .prepare_cached(
            "SELECT key FROM memory_records \
             WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND key > ?4 \
             ORDER BY key",
        )
        .and_then(|mut stmt| {
            stmt.query_map(params![app, user, ns, after], |row| row.get(0))?
                .take(limit + 1)
                .collect()
        })
        .map_err(storage(what))?;
    let more = keys.len() > limit;
    let Some(last) = keys[..keys.len().min(limit)].last() else {
        return Ok(MemoryCleanupPage { deleted: 0, next_cursor: None });
    };
    let deleted = conn
        .prepare_cached(
            "DELETE FROM memory_records \
             WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND key > ?4 AND key <= ?5 \
             AND expires_at IS NOT NULL AND expires_at <= ?6",
        )
        .and_then(|mut stmt| stmt.execute(params![app, user, ns, after, last, now.as_micros()]))
        .map_err(storage(what))?;
    let next_cursor = more.then(|| key_cursor(CursorKind::Purge, scope, last));
    Ok(MemoryCleanupPage { deleted: u64::try_from(deleted).unwrap_or(u64::MAX), next_cursor })
}

#[cfg(test)]
mod tests;
