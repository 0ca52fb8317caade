//! The SQL text of every operation, built once per store from its table name.
//!
//! Each operation is one statement, so the check and the write it guards are atomic and one
//! round trip; the comments give each statement's bound parameters (`$n`). Identifiers come
//! from the checked configuration ([`Names`]) and are quoted; values are always bound.

use super::schema::Names;

/// The text of every statement, built once per store from its table name.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) put_always: String,
    pub(crate) put_create_only: String,
    pub(crate) put_expected: String,
    pub(crate) get: String,
    /// `list` by the shape of its key range; see [`list`].
    pub(crate) list_after: String,
    pub(crate) list_after_below: String,
    pub(crate) list_from: String,
    pub(crate) list_from_below: String,
    pub(crate) search: String,
    pub(crate) delete: String,
    pub(crate) delete_expected: String,
    pub(crate) delete_all: String,
    pub(crate) delete_user_batch: String,
    pub(crate) namespaces_first: String,
    pub(crate) namespaces_after: String,
    pub(crate) purge: String,
}

/// `expires_at` is in the future, by the server's clock.
const LIVE: &str = "(expires_at IS NULL OR expires_at > now())";

/// The columns of a record, in the order [`record`](super::codec::record) reads them.
const RECORD_COLUMNS: &str =
    "key, content, metadata, source, revision, created_at, updated_at, expires_at";

impl Statements {
    /// The statements on the table and sequence `names` name.
    pub(crate) fn new(names: &Names) -> Self {
        let t = names.table();
        let seq = names.sequence();
        let scope = "app = $1 AND user_id = $2 AND namespace = $3";
        // $1..$4 scope and key, $5 content, $6 metadata, $7 source, $8 expires_at.
        let upsert = format!(
            "INSERT INTO {t} AS r \
               (app, user_id, namespace, key, content, metadata, source, revision, \
                created_at, updated_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, nextval('{seq}'), now(), now(), $8) \
             ON CONFLICT (app, user_id, namespace, key) DO UPDATE SET \
               content = EXCLUDED.content, metadata = EXCLUDED.metadata, \
               source = EXCLUDED.source, revision = EXCLUDED.revision, \
               created_at = CASE WHEN r.expires_at <= now() THEN EXCLUDED.created_at \
                                 ELSE r.created_at END, \
               updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at"
        );
        let returning = "RETURNING revision, created_at, updated_at";
        Self {
            put_always: format!("{upsert} {returning}"),
            // The existing row is replaced only when it has expired; a live one means Conflict.
            put_create_only: format!("{upsert} WHERE r.expires_at <= now() {returning}"),
            // $9 expected revision. No row (deleted, expired, or another revision) is Conflict.
            put_expected: format!(
                "UPDATE {t} SET content = $5, metadata = $6, source = $7, expires_at = $8, \
                   revision = nextval('{seq}'), updated_at = now() \
                 WHERE {scope} AND key = $4 AND revision = $9 AND {LIVE} {returning}"
            ),
            get: format!("SELECT {RECORD_COLUMNS} FROM {t} WHERE {scope} AND key = $4 AND {LIVE}"),
            list_after: list(&t, "key > $4"),
            list_after_below: list(&t, "key > $4 AND key < $6"),
            list_from: list(&t, "key >= $4"),
            list_from_below: list(&t, "key >= $4 AND key < $6"),
            // $4 after, $5 query, $6 keys to inspect at most, $7 matches to return at most.
            // Returns the matches among the next $6 keys, plus the last key inspected (flagged
            // by `hit = false` when it does not match) so the caller can continue after it.
            search: format!(
                "SELECT {RECORD_COLUMNS}, hit, scanned FROM ( \
                   SELECT w.*, \
                     count(*) FILTER (WHERE hit) OVER (ORDER BY key ROWS UNBOUNDED PRECEDING) \
                       AS hit_rank, \
                     row_number() OVER (ORDER BY key) AS position, \
                     count(*) OVER () AS scanned \
                   FROM ( \
                     SELECT {RECORD_COLUMNS}, {LIVE} AND strpos(content, $5) > 0 AS hit \
                     FROM {t} WHERE {scope} AND key > $4 ORDER BY key LIMIT $6 \
                   ) w \
                 ) x \
                 WHERE (hit AND hit_rank <= $7) OR position = scanned \
                 ORDER BY key"
            ),
            delete: format!("DELETE FROM {t} WHERE {scope} AND key = $4 RETURNING {LIVE}"),
            delete_expected: format!(
                "DELETE FROM {t} WHERE {scope} AND key = $4 AND revision = $5 AND {LIVE} \
                 RETURNING 1"
            ),
            delete_all: format!("DELETE FROM {t} WHERE {scope}"),
            // $3 batch size, $4 batch size + 1. Deletes one batch and reports whether the
            // snapshot held more rows than the batch.
            delete_user_batch: format!(
                "WITH picked AS ( \
                   SELECT namespace, key FROM {t} WHERE app = $1 AND user_id = $2 \
                   ORDER BY namespace, key LIMIT $4 \
                 ), batch AS ( \
                   SELECT namespace, key FROM picked ORDER BY namespace, key LIMIT $3 \
                 ), gone AS ( \
                   DELETE FROM {t} WHERE app = $1 AND user_id = $2 \
                     AND (namespace, key) IN (SELECT namespace, key FROM batch) \
                   RETURNING 1 \
                 ) \
                 SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM picked) > $3"
            ),
            // A loose index scan: one index probe per namespace, whatever the record count.
            namespaces_first: namespaces(&t, ">="),
            namespaces_after: namespaces(&t, ">"),
            // $4 after, $5 keys to inspect, $6 = $5 + 1.
            purge: format!(
                "WITH window_keys AS ( \
                   SELECT key, expires_at <= now() AS expired FROM {t} \
                   WHERE {scope} AND key > $4 ORDER BY key LIMIT $6 \
                 ), inspected AS ( \
                   SELECT key, expired FROM window_keys ORDER BY key LIMIT $5 \
                 ), gone AS ( \
                   DELETE FROM {t} WHERE {scope} \
                     AND key IN (SELECT key FROM inspected WHERE expired) \
                     AND expires_at <= now() \
                   RETURNING 1 \
                 ) \
                 SELECT (SELECT count(*) FROM gone), (SELECT max(key) FROM inspected), \
                        (SELECT count(*) FROM window_keys) > $5"
            ),
        }
    }

    /// Every statement, for preparing on a fresh connection.
    pub(crate) fn all(&self) -> [&str; 16] {
        [
            &self.put_always,
            &self.put_create_only,
            &self.put_expected,
            &self.get,
            &self.list_after,
            &self.list_after_below,
            &self.list_from,
            &self.list_from_below,
            &self.search,
            &self.delete,
            &self.delete_expected,
            &self.delete_all,
            &self.delete_user_batch,
            &self.namespaces_first,
            &self.namespaces_after,
            &self.purge,
        ]
    }
}

/// `list` over one shape of key range, `range`: $4 the start (the key to continue after with
/// `>`, the prefix with `>=`), $6 the prefix's end when it has one; $5 rows to fetch. One
/// statement per shape, so the index scan always runs from the start to the end and never
/// reads a row outside them.
fn list(t: &str, range: &str) -> String {
    format!(
        "SELECT {RECORD_COLUMNS} FROM {t} \
         WHERE app = $1 AND user_id = $2 AND namespace = $3 AND {range} AND {LIVE} \
         ORDER BY key LIMIT $5"
    )
}

/// $1 app, $2 user, $3 the namespace to start from, $4 how many to return.
fn namespaces(t: &str, op: &str) -> String {
    format!(
        "WITH RECURSIVE ns AS ( \
           (SELECT namespace FROM {t} WHERE app = $1 AND user_id = $2 AND namespace {op} $3 \
            ORDER BY namespace LIMIT 1) \
           UNION ALL \
           SELECT (SELECT n.namespace FROM {t} n \
                   WHERE n.app = $1 AND n.user_id = $2 AND n.namespace > ns.namespace \
                   ORDER BY n.namespace LIMIT 1) \
           FROM ns WHERE ns.namespace IS NOT NULL \
         ) \
         SELECT namespace FROM ns WHERE namespace IS NOT NULL LIMIT $4"
    )
}
