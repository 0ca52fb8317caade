//! The batched PostgreSQL ceiling: the limit of the provider's own design.
//!
//! The per-statement ceiling ([`super::postgres`]) is what a naive client gets from one
//! statement per write on a plain table. Under concurrency the provider does something else:
//! writes that wait for a connection share one set-based statement, and every row written also
//! runs the usage trigger and draws a revision from the sequence. This ceiling runs exactly
//! that statement, its text taken from the provider
//! ([`coalesced_put_sql`](PostgresMemoryStore::coalesced_put_sql),
//! [`coalesced_delete_sql`](PostgresMemoryStore::coalesced_delete_sql)), with pgbench, on a
//! table the provider itself created in a schema of its own ([`SCHEMA`]), so the table, the
//! sequence, the usage table and the trigger are the provider's. Each statement carries the
//! mean batch B the library formed in the phase it follows, C / B clients send them (as many
//! writes in flight as the library's C callers), and its writes per second are pgbench's
//! statements per second times B.
//!
//! The statement's array parameters are written out in it from pgbench's variables, so a
//! batch is still one round trip. Within a batch the users ascend (an offset drawn per
//! statement, then a fixed stride), like the library's sorted batches, so two statements lock
//! usage rows in one order.

use std::fmt::Write as _;

use agent_memory::postgres::PostgresMemoryStore;
use agent_memory::MemoryStore;

use super::postgres::{insert_delete_pool, insert_preload, pg_err, MoreColumns};
use super::Error;
use crate::workload;

/// The schema the provider creates its table in for this ceiling.
pub(super) const SCHEMA: &str = "bench_ceiling_batched";
/// The provider's table in [`SCHEMA`], under its default name (a test checks the name).
pub(super) const TABLE: &str = "\"bench_ceiling_batched\".\"agent_memory_records\"";
/// Its usage table, named after the table by the provider.
const USAGE: &str = "\"bench_ceiling_batched\".\"agent_memory_records_usage\"";
/// Its revision sequence, named after the table by the provider.
const SEQUENCE: &str = "\"bench_ceiling_batched\".\"agent_memory_records_revision_seq\"";

/// The write tests this ceiling has, named as the per-statement tests they stand beside.
pub const TESTS: [&str; 3] = ["put_new", "put_update", "delete"];

/// The statements, as the provider wrote them, once its table exists.
#[derive(Debug)]
pub struct BatchedSql {
    put: String,
    delete: String,
}

/// Creates the provider's table in [`SCHEMA`] through the provider, loads the 20,000 preload
/// records and a delete pool of `delete_pool` rows in namespace `scratch` (as the
/// per-statement ceiling's), and returns the provider's coalesced statements.
pub(super) async fn prepare(
    url: &str,
    client: &tokio_postgres::Client,
    delete_pool: u64,
) -> Result<BatchedSql, Error> {
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{SCHEMA}\" CASCADE"))
        .await
        .map_err(pg_err("dropping the batched ceiling's schema"))?;
    let store = PostgresMemoryStore::builder(url)
        .and_then(|b| {
            let b = b.schema(SCHEMA).table(agent_memory::postgres::DEFAULT_TABLE);
            b.max_connections(1).min_connections(0).build()
        })
        .map_err(|err| format!("the batched ceiling's store: {err}"))?;
    store.start().await.map_err(|err| format!("creating the batched ceiling's table: {err}"))?;
    let sql = BatchedSql {
        put: store.coalesced_put_sql().to_owned(),
        delete: store.coalesced_delete_sql().to_owned(),
    };
    let _ = store.close().await;
    // Rows go in as the provider writes them, each with a revision from its sequence. The
    // usage trigger would count 420,000 rows one by one into a thousand usage rows, which takes
    // minutes; a superuser's session skips triggers instead (`replica`) and the usage rows are
    // counted once at the end. Without that right the trigger counts them.
    let counted_here = client.batch_execute("SET session_replication_role = replica").await.is_ok();
    let more = MoreColumns {
        names: ", source, revision, created_at, updated_at, expires_at, bytes",
        preload: &format!(
            ", '{{}}', nextval('{SEQUENCE}'), now(), now(), NULL, \
             octet_length(k) + octet_length(c) + octet_length(m)"
        ),
        pool: &format!(", '{{}}', nextval('{SEQUENCE}'), now(), now(), NULL, 250"),
    };
    insert_preload(client, TABLE, &more, "loading the batched ceiling's preload").await?;
    let what = "loading the batched ceiling's delete pool";
    insert_delete_pool(client, TABLE, &more, delete_pool, what).await?;
    if counted_here {
        client
            .batch_execute(&format!(
                "SET session_replication_role = DEFAULT; \
                 INSERT INTO {USAGE} (app, user_id, records, bytes) \
                 SELECT app, user_id, count(*), sum(bytes) FROM {TABLE} GROUP BY app, user_id"
            ))
            .await
            .map_err(pg_err("counting the batched ceiling's usage"))?;
    }
    client
        .batch_execute(&format!("VACUUM (ANALYZE) {TABLE}, {USAGE}"))
        .await
        .map_err(pg_err("VACUUM (ANALYZE) of the batched ceiling's table"))?;
    Ok(sql)
}

/// Drops [`SCHEMA`] and everything in it.
pub(super) async fn drop_schema(client: &tokio_postgres::Client) -> Result<(), Error> {
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{SCHEMA}\" CASCADE"))
        .await
        .map_err(pg_err("dropping the batched ceiling's schema"))
}

/// The array of `batch` elements, element `g` written out by `element(g)`.
///
/// Written out, not generated: an `ARRAY(SELECT … FROM generate_series(…))` subquery per
/// column costs the server more than the whole write it feeds (measured with pgbench: half the
/// throughput of a batch of one), and the library binds its arrays ready-made.
fn array(batch: usize, element: impl Fn(usize) -> String) -> String {
    let elements: Vec<String> = (0..batch).map(element).collect();
    format!("ARRAY[{}]", elements.join(", "))
}

/// `batch` copies of `value`.
fn fill(batch: usize, value: &str) -> String {
    format!("array_fill({value}, ARRAY[{batch}])")
}

/// The pgbench script of `test` with batches of `batch`, from the provider's statements.
///
/// Within a batch the users ascend: an offset `h` drawn per statement, then a stride of
/// `1000 / batch`, so no user repeats. The statement's block (`seq * nc + client_id`, as in
/// the per-statement scripts) numbers its new keys and the pool rows it deletes.
///
/// # Errors
/// For a test this ceiling does not have.
pub fn script(sql: &BatchedSql, test: &str, batch: usize) -> Result<String, Error> {
    let batch = batch.clamp(1, 1000);
    let stride = 1000 / batch;
    let mut out = String::new();
    let _ =
        writeln!(out, "-- {test}, batched: the provider's coalesced statement, batches of {batch}");
    let _ = writeln!(out, "\\set h random(0, {})", stride - 1);
    let _ = writeln!(out, "\\set seq :seq + 1");
    let _ = writeln!(out, "\\set block :seq * :nc + :client_id");
    let user = |g: usize| format!("'u' || lpad((:h::int + {})::text, 4, '0')", g * stride);
    let namespace = |g: usize| format!("(ARRAY['preferences', 'notes'])[1 + (:h::int + {g}) % 2]");
    let content = format!("'{}'::text", workload::content(3).replace('\'', "''"));
    let statement = match test {
        "put_new" | "put_update" => {
            let keys = if test == "put_new" {
                // Keys nobody wrote: the statement's block, then the element.
                array(batch, |g| {
                    format!("'n' || lpad((:block::bigint * {batch} + {g})::text, 10, '0')")
                })
            } else {
                // One of each user's ten preloaded keys, so the write takes the update path.
                let _ = writeln!(out, "\\set k random(0, 9)");
                array(batch, |_| "'k' || lpad(:k::text, 4, '0')".to_owned())
            };
            // The size quotas count changes with every write, as the workload's contents do,
            // so the trigger updates the usage row each time.
            bind(
                &sql.put,
                &[
                    fill(batch, "'bench-app'::text"),
                    array(batch, user),
                    array(batch, namespace),
                    keys,
                    fill(batch, &content),
                    fill(batch, "'{\"category\": \"notes\", \"n\": 1}'::jsonb"),
                    fill(batch, "'{}'::jsonb"),
                    fill(batch, "NULL::timestamptz"),
                    fill(batch, "(250 + :seq % 64)::bigint"),
                    "''".to_owned(),
                    "''".to_owned(),
                ],
            )?
        }
        "delete" => {
            // Pool row i belongs to user i % 1000; a statement removes its block's rows.
            let id = |g: usize| format!("(:block::bigint * {batch} + {g})");
            bind(
                &sql.delete,
                &[
                    fill(batch, "'bench-app'::text"),
                    array(batch, |g| format!("'u' || lpad(({} % 1000)::text, 4, '0')", id(g))),
                    fill(batch, "'scratch'::text"),
                    array(batch, |g| format!("'d' || lpad({}::text, 8, '0')", id(g))),
                ],
            )?
        }
        other => return Err(format!("no batched ceiling for {other}")),
    };
    let _ = writeln!(out, "{statement};");
    Ok(out)
}

/// `sql` with each `$n` replaced by `values[n - 1]` in parentheses.
///
/// # Errors
/// When the text names a parameter `values` does not have.
fn bind(sql: &str, values: &[String]) -> Result<String, Error> {
    let mut out = String::with_capacity(sql.len() * 2);
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            out.push('$');
            rest = after;
            continue;
        }
        let n: usize = after[..digits].parse().map_err(|_| "a parameter number".to_owned())?;
        let value = n
            .checked_sub(1)
            .and_then(|i| values.get(i))
            .ok_or_else(|| format!("the provider's statement has ${n}, which the ceiling lacks"))?;
        let _ = write!(out, "({value})");
        rest = &after[digits..];
    }
    out.push_str(rest);
    // pgbench reads a statement as one line.
    Ok(out.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_the_providers_default_in_the_ceilings_schema() {
        let table = agent_memory::postgres::DEFAULT_TABLE;
        assert_eq!(TABLE, format!("\"{SCHEMA}\".\"{table}\""));
        assert_eq!(SEQUENCE, format!("\"{SCHEMA}\".\"{table}_revision_seq\""));
        assert_eq!(USAGE, format!("\"{SCHEMA}\".\"{table}_usage\""));
    }

    #[test]
    fn binds_every_parameter_once_and_leaves_other_dollars() {
        let values = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let out = bind("SELECT $1, $3::text[], '$x', $2", &values).expect("binds");
        assert_eq!(out, "SELECT (a), (c)::text[], '$x', (b)");
        assert!(bind("SELECT $4", &values).is_err());
    }

    #[test]
    fn a_script_is_one_statement_on_one_line_after_its_variables() {
        let sql = BatchedSql {
            put: "WITH q AS (SELECT $10, $11) INSERT INTO t SELECT * FROM unnest($1::text[], \
                  $2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[], $7::jsonb[], \
                  $8::timestamptz[], $9::bigint[])"
                .to_owned(),
            delete: "DELETE FROM t USING unnest($1::text[], $2::text[], $3::text[], \
                     $4::text[])"
                .to_owned(),
        };
        for test in TESTS {
            let script = script(&sql, test, 8).expect("script");
            let statements: Vec<_> =
                script.lines().filter(|l| !l.starts_with(['\\', '-'])).collect();
            assert_eq!(statements.len(), 1, "{script}");
            assert!(!statements[0].contains('$'), "{script}");
            assert!(script.contains("\\set h random(0, 124)"), "{script}");
        }
        assert!(script(&sql, "get", 8).is_err());
    }
}
