//! What the store needs in the database: the table and its revision sequence, the DDL that
//! creates them, their setup at `start()`, and the check that a table matches. The statements
//! the operations run are in [`statements`](super::statements).

use std::fmt;

use tokio_postgres::types::Type;

use super::error::{storage, PROVIDER};
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
    tx.query_typed("SELECT pg_advisory_xact_lock($1)", &[(&names.lock_key(), Type::INT8)])
        .await
        .map_err(storage("could not set up the schema"))?;
    let exists: bool = tx
        .query_typed_one("SELECT to_regclass($1) IS NOT NULL", &[(&names.table(), Type::TEXT)])
        .await
        .map_err(storage("could not set up the schema"))?
        .try_get(0)
        .map_err(storage("could not set up the schema"))?;
    if !exists {
        // `CREATE SCHEMA IF NOT EXISTS` needs the CREATE privilege on the database even when the
        // schema exists, so run it only when the schema is missing.
        let schema_exists: bool = tx
            .query_typed_one(
                "SELECT to_regnamespace($1) IS NOT NULL",
                &[(&quote(&names.schema), Type::TEXT)],
            )
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
        .query_typed_one("SELECT current_setting('server_encoding')", &[])
        .await
        .map_err(storage(what))?
        .try_get(0)
        .map_err(storage(what))?;
    if encoding != "UTF8" {
        return Err(mismatch(format!("the database encoding is {encoding}, expected UTF8")));
    }
    let row = client
        .query_typed_one(
            "SELECT (SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)), \
                    obj_description(to_regclass($1), 'pg_class'), \
                    (SELECT relkind::text FROM pg_class WHERE oid = to_regclass($2))",
            &[(&table, Type::TEXT), (&names.sequence(), Type::TEXT)],
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
        .query_typed(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull, \
                    coalesce(co.collname::text, ''), a.atthasdef \
             FROM pg_attribute a LEFT JOIN pg_collation co ON co.oid = a.attcollation \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped",
            &[(&table, Type::TEXT)],
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
        .query_typed_one(
            "SELECT array_agg(a.attname::text ORDER BY k.ord) \
             FROM pg_index i \
             CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
             WHERE i.indrelid = to_regclass($1) AND i.indisprimary",
            &[(&table, Type::TEXT)],
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

/// Why a table failed the schema check: which columns, types or objects differ. Kept as the
/// source of the [`MemoryError::Storage`] that `start()` returns, so the fixed `Display` of
/// the error stays short while operators still see every difference.
#[derive(Debug)]
struct SchemaMismatch(String);

impl fmt::Display for SchemaMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SchemaMismatch {}
