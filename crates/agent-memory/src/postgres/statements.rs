//! The SQL text of every operation, built once per store from its table name, with the types
//! of its parameters.
//!
//! Each operation is one statement, so the check and the write it guards are atomic and one
//! round trip; the comments give each statement's bound parameters (`$n`). Identifiers come
//! from the checked configuration ([`Names`]) and are quoted; values are always bound.

use tokio_postgres::types::Type;

use super::schema::{Names, MAX_BYTES_SETTING, MAX_RECORDS_SETTING};

/// One statement: its SQL text and the types of its parameters (`$1`, `$2`, … in order).
///
/// The types are sent to the server instead of letting it infer them, so the two ways a
/// statement runs (prepared once per connection, or unnamed for poolers; see
/// [`Conn`](super::pool::Conn)) ask the server exactly the same thing.
#[derive(Debug)]
pub(crate) struct Statement {
    pub(crate) sql: String,
    pub(crate) types: &'static [Type],
}

impl Statement {
    fn new(sql: String, types: &'static [Type]) -> Self {
        Self { sql, types }
    }
}

/// The four statements of one read over a scope's key range, one per shape of range: from
/// after a key (the cursor) or from the prefix, with or without the prefix's end. PostgreSQL
/// seeks the primary key with at most one bound on each side, so each shape is its own
/// statement rather than one with conditions it could not seek with.
#[derive(Debug)]
pub(crate) struct Ranged {
    after: Statement,
    after_below: Statement,
    from: Statement,
    from_below: Statement,
}

impl Ranged {
    /// The four shapes, each made by `make(range, below)`: `range` the condition on `key`
    /// over `$4` (the start) and `end` (the parameter holding the end), `below` whether it has
    /// the end.
    fn new(end: &str, make: impl Fn(&str, bool) -> Statement) -> Self {
        Self {
            after: make("key > $4", false),
            after_below: make(&format!("key > $4 AND key < {end}"), true),
            from: make("key >= $4", false),
            from_below: make(&format!("key >= $4 AND key < {end}"), true),
        }
    }

    /// The statement for a range starting after a key (`after`) or at the prefix, with or
    /// without an end (`below`).
    pub(crate) fn pick(&self, after: bool, below: bool) -> &Statement {
        match (after, below) {
            (true, true) => &self.after_below,
            (true, false) => &self.after,
            (false, true) => &self.from_below,
            (false, false) => &self.from,
        }
    }

    fn all(&self) -> [&Statement; 4] {
        [&self.after, &self.after_below, &self.from, &self.from_below]
    }
}

/// Every statement, built once per store from its table name.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) put_always: Statement,
    pub(crate) put_create_only: Statement,
    pub(crate) put_expected: Statement,
    pub(crate) get: Statement,
    /// `list`; see [`list`].
    pub(crate) list: Ranged,
    /// `list_keys`; see [`keys`].
    pub(crate) keys: Ranged,
    /// `search` and `list` with a metadata filter; see [`scan`].
    pub(crate) scan: Ranged,
    pub(crate) delete: Statement,
    pub(crate) delete_expected: Statement,
    pub(crate) delete_all: Statement,
    pub(crate) delete_user_batch: Statement,
    pub(crate) namespaces_first: Statement,
    pub(crate) namespaces_after: Statement,
    pub(crate) users: Statement,
    pub(crate) applications: Statement,
    pub(crate) purge: Statement,
    /// The set-based forms of the writes, one element per array entry; see
    /// [`batch`](super::batch).
    pub(crate) put_always_batch: Statement,
    pub(crate) put_create_only_batch: Statement,
    pub(crate) put_expected_batch: Statement,
    pub(crate) delete_batch: Statement,
    pub(crate) delete_expected_batch: Statement,
}

const TEXT: Type = Type::TEXT;
const JSONB: Type = Type::JSONB;
const TIMESTAMPTZ: Type = Type::TIMESTAMPTZ;
const INT8: Type = Type::INT8;
const TEXTS: Type = Type::TEXT_ARRAY;
const JSONS: Type = Type::JSONB_ARRAY;
const TIMES: Type = Type::TIMESTAMPTZ_ARRAY;
const INTS: Type = Type::INT8_ARRAY;
const BOOL: Type = Type::BOOL;

/// [`PUT`] with an array for each value of a record: what a batch of unconditional or
/// `create_only` `put`s binds.
const PUT_BATCH: [Type; 11] =
    [TEXTS, TEXTS, TEXTS, TEXTS, TEXTS, JSONS, JSONS, TIMES, INTS, TEXT, TEXT];

/// [`PUT_BATCH`], then the expected revisions (`$12`): a batch of compare-and-set `put`s.
const PUT_EXPECTED_BATCH: [Type; 12] =
    [TEXTS, TEXTS, TEXTS, TEXTS, TEXTS, JSONS, JSONS, TIMES, INTS, TEXT, TEXT, INTS];

/// The rows of a batch of `put`s: scope, key, then its revision and timestamps.
const RETURNING_BATCH: &str =
    "RETURNING r.app, r.user_id, r.namespace, r.key, r.revision, r.created_at, r.updated_at";

/// Scope and key, then content, metadata, source and expiry, then the record's bytes and the
/// two quotas as text (empty for none): what an unconditional or `create_only` `put` binds.
const PUT: [Type; 11] = [TEXT, TEXT, TEXT, TEXT, TEXT, JSONB, JSONB, TIMESTAMPTZ, INT8, TEXT, TEXT];

/// [`PUT`], then the expected revision (`$12`): what a compare-and-set `put` binds, so the
/// parameters of the other two forms are its first eleven.
const PUT_EXPECTED: [Type; 12] =
    [TEXT, TEXT, TEXT, TEXT, TEXT, JSONB, JSONB, TIMESTAMPTZ, INT8, TEXT, TEXT, INT8];

/// The columns an upsert inserts, in the order of its values.
const INSERT_COLUMNS: &str = "(app, user_id, namespace, key, content, metadata, source, \
                              revision, created_at, updated_at, expires_at, bytes)";

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
        // $1..$4 scope and key, $5 content, $6 metadata, $7 source, $8 expires_at, $9 bytes,
        // $10 and $11 the quotas. The quotas reach the usage trigger (see `schema::usage_sql`)
        // as settings of this statement's transaction; the row is built from the CTE that sets
        // them, so they are set before the row, and its trigger, exist.
        let quotas = |records: &str, bytes: &str| {
            format!(
                "WITH quota AS (SELECT set_config('{MAX_RECORDS_SETTING}', {records}, true) AS r, \
                   set_config('{MAX_BYTES_SETTING}', {bytes}, true) AS b) "
            )
        };
        // What an upsert sets when the key exists: everything but `created_at`, which a live
        // record keeps (an expired one is replaced as new).
        let replace = "ON CONFLICT (app, user_id, namespace, key) DO UPDATE SET \
             content = EXCLUDED.content, metadata = EXCLUDED.metadata, \
             source = EXCLUDED.source, revision = EXCLUDED.revision, \
             created_at = CASE WHEN r.expires_at <= now() THEN EXCLUDED.created_at \
                               ELSE r.created_at END, \
             updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at, \
             bytes = EXCLUDED.bytes";
        let upsert = format!(
            "{with} INSERT INTO {t} AS r {INSERT_COLUMNS} \
             SELECT $1, $2, $3, $4, $5, $6, $7, nextval('{seq}'), now(), now(), $8, $9 \
             FROM quota WHERE quota.r IS NOT NULL AND quota.b IS NOT NULL \
             {replace}",
            with = quotas("$10", "$11")
        );
        let returning = "RETURNING revision, created_at, updated_at";
        // The batch forms: $1..$4 arrays of scope and key, then arrays of the values, one
        // element per write; each element keeps its own condition and yields its own row,
        // named by scope and key (a batch never holds one key twice). Rows are written in
        // the order of the arrays, which the batch sorts, so two batches lock in one order.
        let record_arrays = "$1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
                             $6::jsonb[], $7::jsonb[], $8::timestamptz[]";
        let upsert_batch = format!(
            "{with} INSERT INTO {t} AS r {INSERT_COLUMNS} \
             SELECT i.app, i.user_id, i.namespace, i.key, i.content, i.metadata, i.source, \
                    nextval('{seq}'), now(), now(), i.expires_at, i.bytes \
             FROM quota, unnest({record_arrays}, $9::bigint[]) WITH ORDINALITY \
               AS i(app, user_id, namespace, key, content, metadata, source, expires_at, \
                    bytes, n) \
             WHERE quota.r IS NOT NULL AND quota.b IS NOT NULL ORDER BY i.n \
             {replace}",
            with = quotas("$10", "$11")
        );
        let matches = "r.app = i.app AND r.user_id = i.user_id AND r.namespace = i.namespace \
                       AND r.key = i.key";
        let live = "(r.expires_at IS NULL OR r.expires_at > now())";
        let put_always_batch =
            Statement::new(format!("{upsert_batch} {RETURNING_BATCH}"), &PUT_BATCH);
        let put_create_only_batch = Statement::new(
            format!("{upsert_batch} WHERE r.expires_at <= now() {RETURNING_BATCH}"),
            &PUT_BATCH,
        );
        // $9 the bytes, $10 and $11 the quotas, $12 the expected revisions.
        let put_expected_batch = Statement::new(
            format!(
                "{with} UPDATE {t} AS r SET content = i.content, metadata = i.metadata, \
                   source = i.source, expires_at = i.expires_at, revision = nextval('{seq}'), \
                   updated_at = now(), bytes = i.bytes \
                 FROM quota, unnest({record_arrays}, $12::bigint[], $9::bigint[]) \
                   WITH ORDINALITY AS i(app, user_id, namespace, key, content, metadata, \
                                        source, expires_at, expected, bytes, n) \
                 WHERE {matches} AND r.revision = i.expected AND {live} \
                   AND quota.r IS NOT NULL AND quota.b IS NOT NULL {RETURNING_BATCH}",
                with = quotas("$10", "$11")
            ),
            &PUT_EXPECTED_BATCH,
        );
        let delete_batch = Statement::new(
            format!(
                "DELETE FROM {t} AS r USING unnest($1::text[], $2::text[], $3::text[], \
                   $4::text[]) AS i(app, user_id, namespace, key) \
                 WHERE {matches} RETURNING r.app, r.user_id, r.namespace, r.key, {live}"
            ),
            &[TEXTS, TEXTS, TEXTS, TEXTS],
        );
        let delete_expected_batch = Statement::new(
            format!(
                "DELETE FROM {t} AS r USING unnest($1::text[], $2::text[], $3::text[], \
                   $4::text[], $5::bigint[]) AS i(app, user_id, namespace, key, expected) \
                 WHERE {matches} AND r.revision = i.expected AND {live} \
                 RETURNING r.app, r.user_id, r.namespace, r.key"
            ),
            &[TEXTS, TEXTS, TEXTS, TEXTS, INTS],
        );
        Self {
            put_always_batch,
            put_create_only_batch,
            put_expected_batch,
            delete_batch,
            delete_expected_batch,
            put_always: Statement::new(format!("{upsert} {returning}"), &PUT),
            // The existing row is replaced only when it has expired; a live one means Conflict.
            put_create_only: Statement::new(
                format!("{upsert} WHERE r.expires_at <= now() {returning}"),
                &PUT,
            ),
            // As `put_always`, then $12 the expected revision. No row (deleted, expired, or
            // another revision) is Conflict.
            put_expected: Statement::new(
                format!(
                    "{with} UPDATE {t} SET content = $5, metadata = $6, source = $7, \
                       expires_at = $8, revision = nextval('{seq}'), updated_at = now(), \
                       bytes = $9 \
                     FROM quota \
                     WHERE {scope} AND key = $4 AND revision = $12 AND {LIVE} \
                       AND quota.r IS NOT NULL AND quota.b IS NOT NULL {returning}",
                    with = quotas("$10", "$11")
                ),
                &PUT_EXPECTED,
            ),
            get: Statement::new(
                format!("SELECT {RECORD_COLUMNS} FROM {t} WHERE {scope} AND key = $4 AND {LIVE}"),
                &[TEXT, TEXT, TEXT, TEXT],
            ),
            // One statement per shape of key range; see `list` below.
            list: Ranged::new("$6", |range, below| {
                list(&t, range, if below { LIST_BELOW } else { LIST })
            }),
            keys: Ranged::new("$6", |range, below| {
                keys(&t, range, if below { LIST_BELOW } else { LIST })
            }),
            // The bounded scans of `search` and of a `list` with a metadata filter; see `scan`.
            scan: Ranged::new("$12", |range, below| {
                scan(&t, range, if below { SCAN_BELOW } else { SCAN })
            }),
            delete: Statement::new(
                format!("DELETE FROM {t} WHERE {scope} AND key = $4 RETURNING {LIVE}"),
                &[TEXT, TEXT, TEXT, TEXT],
            ),
            delete_expected: Statement::new(
                format!(
                    "DELETE FROM {t} WHERE {scope} AND key = $4 AND revision = $5 AND {LIVE} \
                     RETURNING 1"
                ),
                &[TEXT, TEXT, TEXT, TEXT, INT8],
            ),
            // $4 batch size, $5 batch size + 1: one bounded batch of the namespace, like
            // `delete_user_batch`, reporting whether more rows were there.
            delete_all: Statement::new(
                format!(
                    "WITH picked AS ( \
                   SELECT key FROM {t} WHERE {scope} ORDER BY key LIMIT $5 \
                 ), batch AS ( \
                   SELECT key FROM picked ORDER BY key LIMIT $4 \
                 ), gone AS ( \
                   DELETE FROM {t} WHERE {scope} AND key IN (SELECT key FROM batch) \
                   RETURNING 1 \
                 ) \
                 SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM picked) > $4"
                ),
                &[TEXT, TEXT, TEXT, INT8, INT8],
            ),
            // $3 batch size, $4 batch size + 1. Deletes one batch and reports whether the
            // snapshot held more rows than the batch.
            delete_user_batch: Statement::new(
                format!(
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
                &[TEXT, TEXT, INT8, INT8],
            ),
            // A loose index scan: one index probe per namespace, whatever the record count.
            namespaces_first: namespaces(&t, ">="),
            namespaces_after: namespaces(&t, ">"),
            // A loose index scan again: one index probe per user; see [`users`].
            users: users(&t),
            // And one index probe per application; see [`applications`].
            applications: applications(&t),
            // $4 after, $5 keys to inspect, $6 = $5 + 1.
            purge: Statement::new(
                format!(
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
                &[TEXT, TEXT, TEXT, TEXT, INT8, INT8],
            ),
        }
    }

    /// Every statement, for preparing on a fresh connection.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Statement> {
        let ranged = [&self.list, &self.keys, &self.scan].into_iter().flat_map(Ranged::all);
        ranged.chain([
            &self.put_always,
            &self.put_create_only,
            &self.put_expected,
            &self.get,
            &self.delete,
            &self.delete_expected,
            &self.delete_all,
            &self.delete_user_batch,
            &self.namespaces_first,
            &self.namespaces_after,
            &self.users,
            &self.applications,
            &self.purge,
            &self.put_always_batch,
            &self.put_create_only_batch,
            &self.put_expected_batch,
            &self.delete_batch,
            &self.delete_expected_batch,
        ])
    }
}

/// $1 app, $2 user, $3 the namespace to start from, $4 how many to return.
fn namespaces(t: &str, op: &str) -> Statement {
    let sql = format!(
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
    );
    Statement::new(sql, &[TEXT, TEXT, TEXT, INT8])
}

/// $1 app, $2 the user id to continue after (`''` for the first page: user ids are never
/// empty), $3 how many to return. Each step of the recursion is one probe of the primary key
/// (`app = $1 AND user_id > previous`, the first row in index order), so a page costs `$3`
/// probes however many records each user holds: never a `DISTINCT` over the table.
fn users(t: &str) -> Statement {
    let sql = format!(
        "WITH RECURSIVE u AS ( \
           (SELECT user_id FROM {t} WHERE app = $1 AND user_id > $2 ORDER BY user_id LIMIT 1) \
           UNION ALL \
           SELECT (SELECT n.user_id FROM {t} n \
                   WHERE n.app = $1 AND n.user_id > u.user_id \
                   ORDER BY n.user_id LIMIT 1) \
           FROM u WHERE u.user_id IS NOT NULL \
         ) \
         SELECT user_id FROM u WHERE user_id IS NOT NULL LIMIT $3"
    );
    Statement::new(sql, &[TEXT, TEXT, INT8])
}

/// $1 the application id to continue after (`''` for the first page: application ids are
/// never empty), $2 how many to return. Each step of the recursion is one probe of the primary
/// key's leading column (`app > previous`, the first row in index order), so a page costs `$2`
/// probes however many records each application holds: never a `DISTINCT` over the table.
fn applications(t: &str) -> Statement {
    let sql = format!(
        "WITH RECURSIVE a AS ( \
           (SELECT app FROM {t} WHERE app > $1 ORDER BY app LIMIT 1) \
           UNION ALL \
           SELECT (SELECT n.app FROM {t} n WHERE n.app > a.app ORDER BY n.app LIMIT 1) \
           FROM a WHERE a.app IS NOT NULL \
         ) \
         SELECT app FROM a WHERE app IS NOT NULL LIMIT $2"
    );
    Statement::new(sql, &[TEXT, INT8])
}

/// The parameters of a `list` with both ends: scope, start, rows to fetch, then the end.
const LIST_BELOW: &[Type] = &[TEXT, TEXT, TEXT, TEXT, INT8, TEXT];
/// The parameters of `list` and `list_keys` without an upper end.
const LIST: &[Type] = &[TEXT, TEXT, TEXT, TEXT, INT8];

/// `list` over one shape of key range, `range`: $4 the start (the key to continue after with
/// `>`, the prefix with `>=`), $6 the prefix's end when it has one; $5 rows to fetch. One
/// statement per shape, so the index scan always runs from the start to the end and never
/// reads a row outside them.
fn list(t: &str, range: &str, types: &'static [Type]) -> Statement {
    Statement::new(
        format!(
            "SELECT {RECORD_COLUMNS} FROM {t} \
             WHERE app = $1 AND user_id = $2 AND namespace = $3 AND {range} AND {LIVE} \
             ORDER BY key LIMIT $5"
        ),
        types,
    )
}

/// `list_keys` over one shape of key range, with the parameters of [`list`]. `octet_length`
/// reads the stored length of the content (for a large, TOASTed value, from its pointer)
/// without detoasting it, so a page never reads the contents.
fn keys(t: &str, range: &str, types: &'static [Type]) -> Statement {
    Statement::new(
        format!(
            "SELECT key, octet_length(content)::bigint FROM {t} \
             WHERE app = $1 AND user_id = $2 AND namespace = $3 AND {range} AND {LIVE} \
             ORDER BY key LIMIT $5"
        ),
        types,
    )
}

/// The parameters of a bounded scan; see [`scan`].
const SCAN: &[Type] = &[TEXT, TEXT, TEXT, TEXT, TEXTS, INT8, INT8, INT8, BOOL, BOOL, JSONB];

/// The parameters of a bounded scan with an upper end.
const SCAN_BELOW: &[Type] =
    &[TEXT, TEXT, TEXT, TEXT, TEXTS, INT8, INT8, INT8, BOOL, BOOL, JSONB, TEXT];

/// A bounded scan over one shape of key range, `range` ($4 the start, `>` after a cursor, `>=`
/// from a `list` prefix; $12 the prefix's end when it has one): `search`, and `list` with a
/// metadata filter.
///
/// It reads at most $6 keys in key order, cut where the bytes read reach $8: each row's
/// content, plus its stored metadata when there is a filter (`octet_length` and
/// `pg_column_size` read stored lengths without detoasting). Only the rows inside the cut are
/// looked at. A row is a candidate (`hit`) when it is live, its metadata contains the filter
/// $11 (`@>`: `'{}'` for none, which every object contains; numbers compare as numbers) and
/// its content holds the needles $5: every one ($9) or one of them, each a regular expression
/// (`~`, $10, for a case-insensitive search) or a literal (`strpos`); an empty `$5` with $9
/// narrows nothing. The needles are at most 16 characters each (see the provider guide,
/// "Search"), so their cost per byte stays small; the provider confirms each candidate.
///
/// Returned: the candidates up to the $7th and the last row inspected (its `hit` column
/// false when it is not one of them), each with the rows inspected and the rows in the window.
fn scan(t: &str, range: &str, types: &'static [Type]) -> Statement {
    let filtered = "$11 <> '{}'::jsonb";
    let narrowed = "CASE \
         WHEN $10 AND $9 THEN content ~ ALL ($5) \
         WHEN $10 THEN content ~ ANY ($5) \
         WHEN $9 THEN NOT EXISTS (SELECT FROM unnest($5) n WHERE strpos(content, n) = 0) \
         ELSE EXISTS (SELECT FROM unnest($5) n WHERE strpos(content, n) > 0) END";
    Statement::new(
        format!(
            "SELECT {RECORD_COLUMNS}, hit AND hit_rank <= $7, scanned, window_rows FROM ( \
               SELECT b.*, \
                 count(*) FILTER (WHERE hit) OVER (ORDER BY key ROWS UNBOUNDED PRECEDING) \
                   AS hit_rank, \
                 row_number() OVER (ORDER BY key) AS position, \
                 count(*) OVER () AS scanned \
               FROM ( \
                 SELECT {RECORD_COLUMNS}, window_rows, \
                   {LIVE} AND metadata @> $11 AND {narrowed} AS hit \
                 FROM ( \
                   SELECT {RECORD_COLUMNS}, \
                     sum(read_bytes) OVER (ORDER BY key ROWS UNBOUNDED PRECEDING) - read_bytes \
                       AS bytes_before, \
                     count(*) OVER () AS window_rows \
                   FROM ( \
                     SELECT {RECORD_COLUMNS}, octet_length(content) \
                       + CASE WHEN {filtered} THEN pg_column_size(metadata) ELSE 0 END AS read_bytes \
                     FROM {t} \
                     WHERE app = $1 AND user_id = $2 AND namespace = $3 AND {range} \
                     ORDER BY key LIMIT $6 \
                   ) w \
                 ) a WHERE bytes_before < $8 \
               ) b \
             ) x \
             WHERE (hit AND hit_rank <= $7) OR position = scanned \
             ORDER BY key"
        ),
        types,
    )
}
