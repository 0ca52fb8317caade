//! The table, its revision sequence, the statements every operation runs, and the schema
//! check.

use std::fmt;

use super::error::{storage, SchemaMismatch, PROVIDER};
use crate::error::{MemoryError, Result};

/// The schema version this code writes and reads, recorded as the table's comment.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// Prefix of the table comment that records the schema version.
const VERSION_COMMENT_PREFIX: &str = "agent-memory schema v";

/// Longest schema or table name accepted, in bytes: the sequence name adds `_revision_seq`
/// and PostgreSQL truncates identifiers at 63 bytes.
const MAX_IDENTIFIER_BYTES: usize = 48;

/// Checks a schema or table name: ASCII letters, digits and underscores, not starting with a
/// digit, at most 48 bytes. Names come from trusted configuration and are quoted anyway; the
/// rule keeps them portable and leaves room for the sequence's suffix.
pub(crate) fn identifier(field: &'static str, name: &str) -> Result<()> {
    let valid_chars = name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let valid_start = name.bytes().next().is_some_and(|b| !b.is_ascii_digit());
    if name.is_empty() || name.len() > MAX_IDENTIFIER_BYTES || !valid_chars || !valid_start {
        return Err(MemoryError::invalid(
            field,
            format!(
                "must be 1 to {MAX_IDENTIFIER_BYTES} ASCII letters, digits or underscores, \
                 not starting with a digit"
            ),
        ));
    }
    Ok(())
}

/// The quoted names of the objects the store uses.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Names {
    pub(crate) schema: String,
    pub(crate) table: String,
}

impl Names {
    /// `"schema"."table"`.
    pub(crate) fn table(&self) -> String {
        format!("\"{}\".\"{}\"", self.schema, self.table)
    }

    /// `"schema"."table_revision_seq"`.
    pub(crate) fn sequence(&self) -> String {
        format!("\"{}\".\"{}_revision_seq\"", self.schema, self.table)
    }

    /// The advisory lock key serialising schema setup for this table across replicas.
    fn lock_key(&self) -> i64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in "agent-memory schema setup\0".bytes().chain(self.table().bytes()) {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        i64::from_ne_bytes(hash.to_ne_bytes())
    }
}

impl fmt::Debug for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.table())
    }
}

/// The DDL that creates the table, its revision sequence, and the version comment.
pub(crate) fn create_sql(names: &Names, create_schema: bool) -> String {
    let table = names.table();
    let sequence = names.sequence();
    let schema = if create_schema {
        format!("CREATE SCHEMA IF NOT EXISTS \"{}\";\n", names.schema)
    } else {
        String::new()
    };
    format!(
        "{schema}CREATE TABLE IF NOT EXISTS {table} (\n    \
             app        text COLLATE \"C\" NOT NULL,\n    \
             user_id    text COLLATE \"C\" NOT NULL,\n    \
             namespace  text COLLATE \"C\" NOT NULL,\n    \
             key        text COLLATE \"C\" NOT NULL,\n    \
             content    text        NOT NULL,\n    \
             metadata   jsonb       NOT NULL,\n    \
             source     jsonb       NOT NULL,\n    \
             revision   bigint      NOT NULL,\n    \
             created_at timestamptz NOT NULL,\n    \
             updated_at timestamptz NOT NULL,\n    \
             expires_at timestamptz,\n    \
             PRIMARY KEY (app, user_id, namespace, key)\n\
         );\n\
         CREATE SEQUENCE IF NOT EXISTS {sequence} AS bigint NO CYCLE;\n\
         ALTER SEQUENCE {sequence} OWNED BY {table}.revision;\n\
         COMMENT ON TABLE {table} IS '{VERSION_COMMENT_PREFIX}{SCHEMA_VERSION}';\n"
    )
}

/// Creates the schema objects unless the table exists, under a transaction-scoped advisory
/// lock so replicas starting together do not race on `CREATE … IF NOT EXISTS`.
pub(crate) async fn setup(client: &mut tokio_postgres::Client, names: &Names) -> Result<()> {
    let tx = client.transaction().await.map_err(storage("could not set up the schema"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&names.lock_key()])
        .await
        .map_err(storage("could not set up the schema"))?;
    let exists: bool = tx
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&names.table()])
        .await
        .map_err(storage("could not set up the schema"))?
        .try_get(0)
        .map_err(storage("could not set up the schema"))?;
    if !exists {
        // `CREATE SCHEMA IF NOT EXISTS` needs the CREATE privilege on the database even when the
        // schema exists, so run it only when the schema is missing.
        let schema_exists: bool = tx
            .query_one("SELECT to_regnamespace($1) IS NOT NULL", &[&quote(&names.schema)])
            .await
            .map_err(storage("could not set up the schema"))?
            .try_get(0)
            .map_err(storage("could not set up the schema"))?;
        let ddl = create_sql(names, !schema_exists);
        tx.batch_execute(&ddl).await.map_err(storage("could not create the table"))?;
    }
    tx.commit().await.map_err(storage("could not set up the schema"))
}

fn quote(name: &str) -> String {
    format!("\"{name}\"")
}

/// One expected column: name, `format_type` text, NOT NULL, and whether it must sort by bytes.
const COLUMNS: [(&str, &str, bool, bool); 11] = [
    ("app", "text", true, true),
    ("user_id", "text", true, true),
    ("namespace", "text", true, true),
    ("key", "text", true, true),
    ("content", "text", true, false),
    ("metadata", "jsonb", true, false),
    ("source", "jsonb", true, false),
    ("revision", "bigint", true, false),
    ("created_at", "timestamp with time zone", true, false),
    ("updated_at", "timestamp with time zone", true, false),
    ("expires_at", "timestamp with time zone", false, false),
];

/// Checks that the table has the columns, types, collations, primary key, sequence and
/// schema version this code needs, and that the database stores text as UTF-8.
///
/// Extra columns are allowed if they have defaults; they are never read.
pub(crate) async fn validate(client: &tokio_postgres::Client, names: &Names) -> Result<()> {
    let table = names.table();
    let what = "could not check the schema";
    let encoding: String = client
        .query_one("SELECT current_setting('server_encoding')", &[])
        .await
        .map_err(storage(what))?
        .try_get(0)
        .map_err(storage(what))?;
    if encoding != "UTF8" {
        return Err(mismatch(format!("the database encoding is {encoding}, expected UTF8")));
    }
    let row = client
        .query_one(
            "SELECT (SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)), \
                    obj_description(to_regclass($1), 'pg_class'), \
                    (SELECT relkind::text FROM pg_class WHERE oid = to_regclass($2))",
            &[&table, &names.sequence()],
        )
        .await
        .map_err(storage(what))?;
    let relkind: Option<String> = row.try_get(0).map_err(storage(what))?;
    let comment: Option<String> = row.try_get(1).map_err(storage(what))?;
    let sequence_kind: Option<String> = row.try_get(2).map_err(storage(what))?;
    match relkind.as_deref() {
        None => return Err(mismatch(format!("the table {table} does not exist"))),
        Some("r" | "p") => {}
        Some(_) => return Err(mismatch(format!("{table} is not a table"))),
    }
    if sequence_kind.as_deref() != Some("S") {
        return Err(mismatch(format!("the sequence {} does not exist", names.sequence())));
    }
    let version = comment
        .as_deref()
        .and_then(|c| c.strip_prefix(VERSION_COMMENT_PREFIX))
        .and_then(|v| v.trim().parse::<u32>().ok());
    match version {
        None => {
            return Err(mismatch(format!(
                "the table {table} records no schema version (its comment should read \
                 '{VERSION_COMMENT_PREFIX}{SCHEMA_VERSION}')"
            )))
        }
        Some(SCHEMA_VERSION) => {}
        Some(other) => {
            return Err(mismatch(format!(
                "the table {table} has schema version {other}; this version of agent-memory \
                 reads version {SCHEMA_VERSION}"
            )))
        }
    }

    let rows = client
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull, \
                    coalesce(co.collname::text, ''), a.atthasdef \
             FROM pg_attribute a LEFT JOIN pg_collation co ON co.oid = a.attcollation \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped",
            &[&table],
        )
        .await
        .map_err(storage(what))?;
    let mut found = Vec::with_capacity(rows.len());
    for row in &rows {
        let name: String = row.try_get(0).map_err(storage(what))?;
        let ty: String = row.try_get(1).map_err(storage(what))?;
        let not_null: bool = row.try_get(2).map_err(storage(what))?;
        let collation: String = row.try_get(3).map_err(storage(what))?;
        let has_default: bool = row.try_get(4).map_err(storage(what))?;
        found.push((name, ty, not_null, collation, has_default));
    }
    let mut problems = Vec::new();
    for (name, ty, not_null, bytewise) in COLUMNS {
        let Some((_, found_ty, found_not_null, collation, _)) =
            found.iter().find(|(n, ..)| n == name)
        else {
            problems.push(format!("column {name} is missing"));
            continue;
        };
        if found_ty != ty {
            problems.push(format!("column {name} has type {found_ty}, expected {ty}"));
        }
        if *found_not_null != not_null {
            let expected = if not_null { "NOT NULL" } else { "nullable" };
            problems.push(format!("column {name} should be {expected}"));
        }
        if bytewise && collation != "C" && collation != "POSIX" {
            problems.push(format!("column {name} has collation {collation:?}, expected \"C\""));
        }
    }
    for (name, _, not_null, _, has_default) in &found {
        if !COLUMNS.iter().any(|(n, ..)| n == name) && *not_null && !has_default {
            problems.push(format!("extra column {name} is NOT NULL without a default"));
        }
    }
    let pk: Option<Vec<String>> = client
        .query_one(
            "SELECT array_agg(a.attname::text ORDER BY k.ord) \
             FROM pg_index i \
             CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
             WHERE i.indrelid = to_regclass($1) AND i.indisprimary",
            &[&table],
        )
        .await
        .map_err(storage(what))?
        .try_get(0)
        .map_err(storage(what))?;
    let expected_pk = ["app", "user_id", "namespace", "key"];
    if pk.as_deref().map(|cols| cols.iter().map(String::as_str).eq(expected_pk)) != Some(true) {
        problems.push(format!(
            "the primary key is {}, expected (app, user_id, namespace, key)",
            pk.map_or_else(|| "missing".to_owned(), |cols| format!("({})", cols.join(", ")))
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(mismatch(format!("the table {table} does not match: {}", problems.join("; "))))
    }
}

fn mismatch(detail: String) -> MemoryError {
    MemoryError::storage_from(
        PROVIDER,
        "the table does not have the expected schema (see the error source)",
        SchemaMismatch(detail),
    )
}

/// The text of every statement, built once per store from its table name.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) put_always: String,
    pub(crate) put_create_only: String,
    pub(crate) put_expected: String,
    pub(crate) get: String,
    pub(crate) list: String,
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

const RECORD_COLUMNS: &str =
    "key, content, metadata, source, revision, created_at, updated_at, expires_at";

impl Statements {
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
            // $4 the key to continue after ('' sorts before every key), $5 rows to fetch.
            list: format!(
                "SELECT {RECORD_COLUMNS} FROM {t} \
                 WHERE {scope} AND key > $4 AND {LIVE} ORDER BY key LIMIT $5"
            ),
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
    pub(crate) fn all(&self) -> [&str; 13] {
        [
            &self.put_always,
            &self.put_create_only,
            &self.put_expected,
            &self.get,
            &self.list,
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
