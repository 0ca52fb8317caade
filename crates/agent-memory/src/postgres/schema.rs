//! What the store needs in the database: the table and its revision sequence, the DDL that
//! creates them, their setup at `start()`, and the check that a table matches. The statements
//! the operations run are in [`statements`](super::statements).

use std::fmt;

use tokio_postgres::types::{ToSql, Type};

use super::error::{storage, PROVIDER};
use crate::error::{MemoryError, Result};

/// The schema version this code writes and reads, recorded as the table's comment.
pub(crate) const SCHEMA_VERSION: u32 = 2;

/// The session settings through which a `put` hands its store's quotas to the usage trigger,
/// for its own transaction only (`set_config(…, true)`); empty means no limit.
pub(crate) const MAX_RECORDS_SETTING: &str = "agent_memory.max_records_per_user";
/// See [`MAX_RECORDS_SETTING`].
pub(crate) const MAX_BYTES_SETTING: &str = "agent_memory.max_bytes_per_user";

/// The SQLSTATE the usage trigger raises when a write would pass `max_records_per_user`.
pub(crate) const RECORDS_EXCEEDED: &str = "AMQ01";
/// The SQLSTATE the usage trigger raises when a write would pass `max_bytes_per_user`.
pub(crate) const BYTES_EXCEEDED: &str = "AMQ02";

/// Rows the version 1 upgrade charges per statement.
const UPGRADE_BATCH: i64 = 1_000;

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

    /// `"schema"."table_usage"`: one row per application user holding records.
    pub(crate) fn usage(&self) -> String {
        format!("\"{}\".\"{}_usage\"", self.schema, self.table)
    }

    /// `"schema"."table_usage_count"`: the trigger function that keeps the usage table.
    fn usage_function(&self) -> String {
        format!("\"{}\".\"{}_usage_count\"", self.schema, self.table)
    }

    /// The name of the usage table's CHECK that keeps counts from going negative.
    fn usage_check(&self) -> String {
        format!("{}_usage_nonneg", self.table)
    }

    /// The name of the trigger on the table, unqualified (triggers live in their table).
    fn usage_trigger(&self) -> String {
        format!("{}_usage", self.table)
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
             bytes      bigint      NOT NULL,\n    \
             PRIMARY KEY (app, user_id, namespace, key)\n\
         );\n\
         CREATE SEQUENCE IF NOT EXISTS {sequence} AS bigint NO CYCLE;\n\
         ALTER SEQUENCE {sequence} OWNED BY {table}.revision;\n\
         {usage}\
         COMMENT ON TABLE {table} IS '{VERSION_COMMENT_PREFIX}{SCHEMA_VERSION}';\n",
        usage = usage_sql(names)
    )
}

/// The usage table, its trigger function and the trigger (version 2).
///
/// The trigger runs after every row inserted, deleted, or updated in `bytes` (every `put`
/// sets it), in the statement's own transaction: the `UPDATE` of the user's usage row waits
/// for and then sees the latest committed count, and holds the row until commit, so writers
/// of one user count one after another and the check after the update is exact. When the new
/// count passes a quota the `put` handed over in [`MAX_RECORDS_SETTING`] or
/// [`MAX_BYTES_SETTING`], it raises [`RECORDS_EXCEEDED`] or [`BYTES_EXCEEDED`] and the whole
/// statement, the write included, is rolled back. Only growth is checked: a delete, or a
/// replacement that is no larger, always passes.
///
/// The usage table's CHECK keeps counts from going negative: a count that would fall below
/// zero means the usage row was changed behind the trigger's back, and the write fails rather
/// than leave a row that would lift a quota. See [`usage_function_sql`] for the function.
fn usage_sql(names: &Names) -> String {
    let table = names.table();
    let usage = names.usage();
    let trigger = names.usage_trigger();
    let function = names.usage_function();
    let check = names.usage_check();
    format!(
        "CREATE TABLE IF NOT EXISTS {usage} (\n    \
             app     text COLLATE \"C\" NOT NULL,\n    \
             user_id text COLLATE \"C\" NOT NULL,\n    \
             records bigint NOT NULL,\n    \
             bytes   bigint NOT NULL,\n    \
             PRIMARY KEY (app, user_id),\n    \
             CONSTRAINT \"{check}\" CHECK (records >= 0 AND bytes >= 0)\n\
         );\n\
         {function_sql}\
         DROP TRIGGER IF EXISTS \"{trigger}\" ON {table};\n\
         CREATE TRIGGER \"{trigger}\" AFTER INSERT OR DELETE OR UPDATE OF bytes ON {table}\n\
         FOR EACH ROW EXECUTE PROCEDURE {function}();\n",
        function_sql = usage_function_sql(names)
    )
}

/// The trigger function, and the `REVOKE` that leaves `EXECUTE` to its owner alone.
///
/// `SECURITY DEFINER` with a fixed `search_path`, so the application role needs no privilege
/// on the usage table. PostgreSQL checks `EXECUTE` when a trigger is created, not when it
/// fires: revoked from `PUBLIC`, no other role can attach the function to a table of its own
/// (a temporary table, say) and feed it made-up rows, and the store's own trigger still fires
/// for every writer. As a second guard the function refuses to run for any table but the
/// store's (`TG_RELID`), whoever attached it.
fn usage_function_sql(names: &Names) -> String {
    let function = names.usage_function();
    format!(
        "CREATE OR REPLACE FUNCTION {function}() RETURNS trigger\n\
         LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body${body}$body$;\n\
         REVOKE ALL ON FUNCTION {function}() FROM PUBLIC;\n",
        body = usage_function_body(names)
    )
}

/// The body of the trigger function, as `pg_proc.prosrc` stores it: [`secure_usage`] compares
/// it to tell an install written by an earlier release.
fn usage_function_body(names: &Names) -> String {
    let table = names.table();
    let usage = names.usage();
    format!(
        "\n\
         DECLARE\n    \
             held_records bigint;\n    \
             held_bytes bigint;\n\
         BEGIN\n    \
             IF TG_RELID <> '{table}'::regclass THEN\n        \
                 RAISE EXCEPTION 'this function keeps the usage of {table} only' \
                 USING ERRCODE = 'insufficient_privilege';\n    \
             END IF;\n    \
             IF TG_OP = 'DELETE' THEN\n        \
                 UPDATE {usage} SET records = records - 1, bytes = bytes - OLD.bytes\n        \
                 WHERE app = OLD.app AND user_id = OLD.user_id RETURNING records INTO held_records;\n        \
                 IF held_records <= 0 THEN\n            \
                     DELETE FROM {usage} WHERE app = OLD.app AND user_id = OLD.user_id;\n        \
                 END IF;\n        \
                 RETURN NULL;\n    \
             ELSIF TG_OP = 'INSERT' THEN\n        \
                 INSERT INTO {usage} AS u (app, user_id, records, bytes)\n        \
                 VALUES (NEW.app, NEW.user_id, 1, NEW.bytes)\n        \
                 ON CONFLICT (app, user_id) DO UPDATE\n        \
                 SET records = u.records + 1, bytes = u.bytes + EXCLUDED.bytes\n        \
                 RETURNING records, bytes INTO held_records, held_bytes;\n        \
                 IF held_records > nullif(current_setting('{MAX_RECORDS_SETTING}', true), '')::bigint THEN\n            \
                     RAISE EXCEPTION 'quota exceeded' USING ERRCODE = '{RECORDS_EXCEEDED}';\n        \
                 END IF;\n    \
             ELSE\n        \
                 IF NEW.bytes = OLD.bytes THEN\n            \
                     RETURN NULL;\n        \
                 END IF;\n        \
                 UPDATE {usage} SET bytes = bytes - OLD.bytes + NEW.bytes\n        \
                 WHERE app = NEW.app AND user_id = NEW.user_id RETURNING bytes INTO held_bytes;\n        \
                 IF NEW.bytes < OLD.bytes THEN\n            \
                     RETURN NULL;\n        \
                 END IF;\n    \
             END IF;\n    \
             IF held_bytes > nullif(current_setting('{MAX_BYTES_SETTING}', true), '')::bigint THEN\n        \
                 RAISE EXCEPTION 'quota exceeded' USING ERRCODE = '{BYTES_EXCEEDED}';\n    \
             END IF;\n    \
             RETURN NULL;\n\
         END\n"
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
    if exists {
        upgrade(&tx, names).await?;
        secure_usage(&tx, names).await?;
    } else {
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

/// The schema version a table's comment records, if any.
async fn version_of(
    client: &impl tokio_postgres::GenericClient,
    table: &str,
) -> Result<Option<u32>> {
    let what = "could not read the schema version";
    let comment: Option<String> = client
        .query_typed_one(
            "SELECT obj_description(to_regclass($1), 'pg_class')",
            &[(&table, Type::TEXT)],
        )
        .await
        .map_err(storage(what))?
        .try_get(0)
        .map_err(storage(what))?;
    Ok(comment
        .as_deref()
        .and_then(|c| c.strip_prefix(VERSION_COMMENT_PREFIX))
        .and_then(|v| v.trim().parse::<u32>().ok()))
}

/// Upgrades a version 1 table to version 2 inside the setup transaction: adds `bytes`,
/// charges every row by the shared byte count in batches of [`UPGRADE_BATCH`] (the table is
/// locked against writers from the `ALTER TABLE` until the commit), sums each user's usage,
/// adds the trigger, and records version 2. A table at any other version is left to
/// [`validate`]. The column's default is dropped at the end, so a replica still running the
/// previous release fails its writes instead of storing records charged nothing.
async fn upgrade(tx: &tokio_postgres::Transaction<'_>, names: &Names) -> Result<()> {
    let table = names.table();
    if version_of(tx, &table).await? != Some(1) {
        return Ok(());
    }
    let what = "could not upgrade the table to schema version 2";
    tx.batch_execute(&format!("ALTER TABLE {table} ADD COLUMN bytes bigint NOT NULL DEFAULT 0"))
        .await
        .map_err(storage(what))?;
    let read = format!(
        "SELECT app, user_id, namespace, key, content, metadata, source FROM {table} \
         WHERE (app, user_id, namespace, key) > ($1, $2, $3, $4) \
         ORDER BY app, user_id, namespace, key LIMIT $5"
    );
    let write = format!(
        "UPDATE {table} t SET bytes = v.bytes \
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) \
           AS v(app, user_id, namespace, key, bytes) \
         WHERE t.app = v.app AND t.user_id = v.user_id AND t.namespace = v.namespace \
           AND t.key = v.key"
    );
    let mut after = [String::new(), String::new(), String::new(), String::new()];
    loop {
        let rows = tx
            .query_typed(&read, &key_params(&after, Type::TEXT, (&UPGRADE_BATCH, Type::INT8)))
            .await
            .map_err(storage(what))?;
        let mut columns: [Vec<String>; 4] = Default::default();
        let mut charged: Vec<i64> = Vec::with_capacity(rows.len());
        for row in &rows {
            let text = |i: usize| row.try_get::<_, String>(i).map_err(storage(what));
            let (key, content) = (text(3)?, text(4)?);
            let metadata: serde_json::Value = row.try_get(5).map_err(storage(what))?;
            let source: serde_json::Value = row.try_get(6).map_err(storage(what))?;
            let serde_json::Value::Object(metadata) = metadata else {
                return Err(MemoryError::storage(PROVIDER, "a stored metadata is not an object"));
            };
            let source: crate::record::Source = serde_json::from_value(source)
                .map_err(|err| MemoryError::storage_from(PROVIDER, what, err))?;
            let bytes = crate::quota::record_bytes(&key, &content, &metadata, &source);
            charged.push(i64::try_from(bytes).unwrap_or(i64::MAX));
            for (column, value) in columns.iter_mut().zip([text(0)?, text(1)?, text(2)?, key]) {
                column.push(value);
            }
        }
        if !charged.is_empty() {
            tx.execute_typed(
                &write,
                &key_params(&columns, Type::TEXT_ARRAY, (&charged, Type::INT8_ARRAY)),
            )
            .await
            .map_err(storage(what))?;
        }
        if rows.len() < usize::try_from(UPGRADE_BATCH).unwrap_or(usize::MAX) {
            break;
        }
        for (position, column) in after.iter_mut().zip(&columns) {
            *position = column.last().cloned().unwrap_or_default();
        }
    }
    let usage = names.usage();
    let ddl = format!(
        "{create}\
         INSERT INTO {usage} (app, user_id, records, bytes) \
           SELECT app, user_id, count(*), sum(bytes) FROM {table} GROUP BY app, user_id;\n\
         ALTER TABLE {table} ALTER COLUMN bytes DROP DEFAULT;\n\
         COMMENT ON TABLE {table} IS '{VERSION_COMMENT_PREFIX}{SCHEMA_VERSION}';\n",
        create = usage_sql(names)
    );
    tx.batch_execute(&ddl).await.map_err(storage(what))
}

/// What the catalogs say about the usage trigger function and the usage table's CHECK.
struct UsageGuard {
    /// The function's body is this release's (it checks `TG_RELID`).
    current_body: bool,
    /// `PUBLIC` may execute the function (earlier releases left the default grant).
    public_execute: bool,
    /// The usage table has the CHECK that keeps counts from going negative.
    counts_checked: bool,
    /// The connected role owns (or is a member of the owner of) the function and both tables.
    owner: bool,
}

impl UsageGuard {
    fn is_current(&self) -> bool {
        self.current_body && !self.public_execute && self.counts_checked
    }
}

/// Reads [`UsageGuard`] from the catalogs; `None` when the function does not exist (then
/// [`validate`] reports the missing trigger).
async fn usage_guard(
    client: &impl tokio_postgres::GenericClient,
    names: &Names,
) -> Result<Option<UsageGuard>> {
    let what = "could not check the usage trigger";
    let row = client
        .query_typed_opt(
            "SELECT p.prosrc = $4, has_function_privilege('public', p.oid, 'EXECUTE'), \
                    EXISTS (SELECT 1 FROM pg_constraint \
                            WHERE conrelid = to_regclass($2) AND conname = $5 AND convalidated), \
                    pg_has_role(p.proowner, 'USAGE') \
                      AND coalesce(pg_has_role((SELECT relowner FROM pg_class \
                                                WHERE oid = to_regclass($2)), 'USAGE'), false) \
                      AND coalesce(pg_has_role((SELECT relowner FROM pg_class \
                                                WHERE oid = to_regclass($3)), 'USAGE'), false) \
             FROM pg_proc p WHERE p.oid = to_regprocedure($1)",
            &[
                (&format!("{}()", names.usage_function()), Type::TEXT),
                (&names.usage(), Type::TEXT),
                (&names.table(), Type::TEXT),
                (&usage_function_body(names), Type::TEXT),
                (&names.usage_check(), Type::TEXT),
            ],
        )
        .await
        .map_err(storage(what))?;
    let Some(row) = row else { return Ok(None) };
    let flag = |i: usize| row.try_get::<_, bool>(i).map_err(storage(what));
    Ok(Some(UsageGuard {
        current_body: flag(0)?,
        public_execute: flag(1)?,
        counts_checked: flag(2)?,
        owner: flag(3)?,
    }))
}

/// Brings the usage trigger of a version 2 install written by an earlier release up to this
/// release's, inside the setup transaction (under the advisory lock, so replicas starting
/// together repair it once): replaces the function (which now refuses other tables), revokes
/// `EXECUTE` from `PUBLIC`, recounts every user's usage from the table (any login could
/// change the counts through the old function, so they are not trusted), and adds the CHECK
/// that keeps counts from going negative. The table is locked against writers (`SHARE`) until
/// the commit; the recount reads it once, and only on the first start of this release.
///
/// Nothing runs when the install is current, so a role without DDL rights still starts; a
/// role that does not own the objects cannot repair them and leaves them to [`validate`],
/// which warns.
async fn secure_usage(tx: &tokio_postgres::Transaction<'_>, names: &Names) -> Result<()> {
    let Some(guard) = usage_guard(tx, names).await? else { return Ok(()) };
    if guard.is_current() || !guard.owner {
        return Ok(());
    }
    let (table, usage, check) = (names.table(), names.usage(), names.usage_check());
    let ddl = format!(
        "LOCK TABLE {table} IN SHARE MODE;\n\
         {function}\
         ALTER TABLE {usage} DROP CONSTRAINT IF EXISTS \"{check}\";\n\
         DELETE FROM {usage};\n\
         INSERT INTO {usage} (app, user_id, records, bytes) \
           SELECT app, user_id, count(*), sum(bytes) FROM {table} GROUP BY app, user_id;\n\
         ALTER TABLE {usage} ADD CONSTRAINT \"{check}\" CHECK (records >= 0 AND bytes >= 0);\n",
        function = usage_function_sql(names)
    );
    tx.batch_execute(&ddl).await.map_err(storage("could not secure the usage trigger"))
}

/// The four key columns (`app`, `user_id`, `namespace`, `key`) as parameters of type
/// `key_type`, then `last`: what the upgrade's read and write bind.
fn key_params<'a, T: ToSql + Sync>(
    keys: &'a [T; 4],
    key_type: Type,
    last: (&'a (dyn ToSql + Sync), Type),
) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    let keys = keys.iter().map(|key| (key as &(dyn ToSql + Sync), key_type.clone()));
    keys.chain([last]).collect()
}

fn quote(name: &str) -> String {
    format!("\"{name}\"")
}

/// One expected column: name, `format_type` text, NOT NULL, and whether it must sort by bytes.
const COLUMNS: [(&str, &str, bool, bool); 12] = [
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
    ("bytes", "bigint", true, false),
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
        Some(1) => {
            return Err(mismatch(format!(
                "the table {table} has schema version 1; start a store with setup_schema \
                 enabled (or run `agent-memory setup`) once to upgrade it to version \
                 {SCHEMA_VERSION}"
            )))
        }
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
    let usage_row = client
        .query_typed_one(
            "SELECT to_regclass($1) IS NOT NULL, \
                    EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass($2) \
                            AND tgname = $3 AND tgenabled <> 'D')",
            &[
                (&names.usage(), Type::TEXT),
                (&table, Type::TEXT),
                (&names.usage_trigger(), Type::TEXT),
            ],
        )
        .await
        .map_err(storage(what))?;
    if !usage_row.try_get::<_, bool>(0).map_err(storage(what))? {
        problems.push(format!("the usage table {} does not exist", names.usage()));
    }
    if !usage_row.try_get::<_, bool>(1).map_err(storage(what))? {
        problems.push(format!("the trigger {} is missing or disabled", names.usage_trigger()));
    }
    // Not a mismatch: the store works, but other logins can change its users' usage. The
    // repair needs the objects' owner, so a least-privilege role only reports it.
    if usage_guard(client, names).await?.is_some_and(|guard| !guard.is_current()) {
        tracing::warn!(
            provider = PROVIDER,
            table = %table,
            "the usage trigger function was installed by an earlier release: any database \
             login may be able to change usage counts through it; start a store with \
             setup_schema enabled as the table's owner (or run `agent-memory setup`) once \
             to secure it"
        );
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
