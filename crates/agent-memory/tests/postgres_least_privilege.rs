//! The PostgreSQL provider under a role with least privilege: `setup_schema(false)` on a table an
//! administrator provisioned with [`PostgresMemoryStore::schema_sql`], and a login role that has
//! only `USAGE` on the schema, `SELECT, INSERT, UPDATE, DELETE` on the table and `USAGE` on its
//! revision sequence (the grants the provider's docs give). The whole conformance suite passes
//! as that role; the tests below show the role really cannot do more.

mod support {
    pub mod apps;
    pub mod fixture;
    pub mod pg;
}

use agent_memory::conformance::Fixture;
use agent_memory::{MemoryScope, MemoryStore, MemoryWrite, PostgresMemoryStore};
use agent_memory_testkit::postgres::shared_url;
use support::apps::{fresh_app, fresh_scope};
use support::pg::{connect, unique};
use tokio::sync::OnceCell;

/// The login role of the application.
const ROLE: &str = "agent_memory_app";
/// The schema the administrator provisions.
const SCHEMA: &str = "memories";

async fn admin() -> tokio_postgres::Client {
    connect(&shared_url()).await
}

/// `shared_url()` as the application role.
fn role_url() -> String {
    let url = shared_url().replacen("postgres://postgres@", &format!("postgres://{ROLE}@"), 1);
    assert_ne!(url, shared_url(), "the test server's URL names the postgres user");
    url
}

/// The store URL as the application role, on the provisioned schema, with `query` appended.
fn as_role(query: &str) -> String {
    format!("{}?schema={SCHEMA}&{query}", role_url())
}

/// Provisions the schema, the table and the role once per test process, exactly as the
/// provider's docs tell an administrator to.
async fn provisioned() -> &'static str {
    static DONE: OnceCell<()> = OnceCell::const_new();
    DONE.get_or_init(|| async {
        let ddl = PostgresMemoryStore::builder(&shared_url())
            .unwrap()
            .schema(SCHEMA)
            .setup_schema(false)
            .build()
            .unwrap()
            .schema_sql();
        let grants = format!(
            "CREATE ROLE {ROLE} LOGIN;\n\
             GRANT USAGE ON SCHEMA {SCHEMA} TO {ROLE};\n\
             GRANT SELECT, INSERT, UPDATE, DELETE ON {SCHEMA}.agent_memory_records TO {ROLE};\n\
             GRANT USAGE ON SEQUENCE {SCHEMA}.agent_memory_records_revision_seq TO {ROLE};\n\
             REVOKE CREATE ON SCHEMA public FROM PUBLIC;\n"
        );
        admin().await.batch_execute(&format!("{ddl}{grants}")).await.expect("provision");
    })
    .await;
    ROLE
}

async fn store() -> Fixture {
    provisioned().await;
    let url = as_role("setup_schema=false&max_connections=4");
    support::fixture::from_url(url, PostgresMemoryStore::from_url)
}

agent_memory::conformance_tests!(store);

#[tokio::test]
async fn with_setup_on_the_role_starts_on_an_existing_table_without_ddl() {
    provisioned().await;
    let store = PostgresMemoryStore::from_url(&as_role("max_connections=2")).unwrap();
    store.start().await.expect("no DDL runs when the table exists");
    let s = fresh_scope("lp", "u");
    store.put(&s, "k", MemoryWrite::new("v")).await.unwrap();
    store.close().await.unwrap();
}

#[tokio::test]
async fn the_role_cannot_create_what_it_was_not_given() {
    provisioned().await;
    // A table of its own: setup needs CREATE, which the role lacks, so start fails and says so.
    let store = PostgresMemoryStore::from_url(&as_role("table=not_provisioned")).unwrap();
    let err = store.start().await.unwrap_err();
    assert!(err.is_storage(), "{err}");
    let client = connect(&role_url()).await;
    for statement in [
        format!("CREATE TABLE {SCHEMA}.other (x int)"),
        "CREATE TABLE public.other (x int)".to_owned(),
        format!("TRUNCATE {SCHEMA}.agent_memory_records"),
        format!("ALTER SEQUENCE {SCHEMA}.agent_memory_records_revision_seq RESTART"),
    ] {
        let refused = client.batch_execute(&statement).await.unwrap_err();
        assert_eq!(refused.code(), Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE));
    }
}

/// A login role with no grants at all: any other user of the database server.
const STRANGER: &str = "agent_memory_stranger";

/// Creates [`STRANGER`] once per test process.
async fn stranger() -> tokio_postgres::Client {
    static DONE: OnceCell<()> = OnceCell::const_new();
    DONE.get_or_init(|| async {
        admin().await.batch_execute(&format!("CREATE ROLE {STRANGER} LOGIN")).await.unwrap();
    })
    .await;
    let url = shared_url().replacen("postgres://postgres@", &format!("postgres://{STRANGER}@"), 1);
    connect(&url).await
}

/// A store the administrator sets up in the `public` schema, whose `USAGE` every role has, so
/// what stops the stranger below is the function's own privileges, not the schema's.
async fn public_store(table: &str, setup: bool) -> PostgresMemoryStore {
    let store = PostgresMemoryStore::builder(&shared_url())
        .unwrap()
        .table(table)
        .setup_schema(setup)
        .max_connections(2)
        .build()
        .unwrap();
    store.start().await.expect("start");
    store
}

/// The victim's usage row: (records, bytes), if any.
async fn usage_of(table: &str, app: &str) -> Option<(i64, i64)> {
    admin()
        .await
        .query_opt(
            &format!("SELECT records, bytes FROM public.\"{table}_usage\" WHERE app = $1"),
            &[&app],
        )
        .await
        .expect("usage")
        .map(|row| (row.get(0), row.get(1)))
}

fn refused(result: Result<(), tokio_postgres::Error>) -> String {
    let err = result.expect_err("refused");
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
        "{:?}",
        err.as_db_error()
    );
    err.as_db_error().map(|db| db.message().to_owned()).unwrap_or_default()
}

/// A store on a fresh table of the `public` schema (see [`public_store`]) where `alice` of a
/// fresh application holds the record `k`.
struct Victim {
    table: String,
    store: PostgresMemoryStore,
    app: String,
    victim: MemoryScope,
}

async fn victim(table_prefix: &str) -> Victim {
    let table = unique(table_prefix);
    let store = public_store(&table, true).await;
    let app = fresh_app("victim");
    let victim = MemoryScope::new(&app, "alice").unwrap();
    store.put(&victim, "k", MemoryWrite::new("held")).await.unwrap();
    Victim { table, store, app, victim }
}

/// The attack a security review ran: a login with no grants created a trigger on its own
/// temporary table naming the usage function and fed it made-up rows, raising other users'
/// usage past their quotas or deleting their usage rows. The function is not executable by
/// `PUBLIC`, so the trigger cannot be created, the function cannot be called, and the usage
/// table cannot be written directly.
#[tokio::test]
async fn a_role_without_grants_cannot_reach_the_usage_trigger_or_the_usage_table() {
    let Victim { table, store, app, victim } = victim("guarded").await;
    let held = usage_of(&table, &app).await.expect("a usage row");

    let client = stranger().await;
    let function = format!("public.\"{table}_usage_count\"");
    client
        .batch_execute("CREATE TEMP TABLE fake (app text, user_id text, bytes bigint)")
        .await
        .expect("temporary tables are every login's");
    let message = refused(
        client
            .batch_execute(&format!(
                "CREATE TRIGGER fake_usage AFTER INSERT OR DELETE ON fake \
                 FOR EACH ROW EXECUTE FUNCTION {function}()"
            ))
            .await,
    );
    assert!(message.contains("function"), "{message}");
    refused(client.batch_execute(&format!("SELECT {function}()")).await);
    for statement in [
        format!("DELETE FROM public.\"{table}_usage\""),
        format!("UPDATE public.\"{table}_usage\" SET records = 0, bytes = 0"),
        format!("INSERT INTO public.\"{table}_usage\" VALUES ('{app}', 'alice', 999, 999)"),
    ] {
        refused(client.batch_execute(&statement).await);
    }
    assert_eq!(usage_of(&table, &app).await, Some(held), "the usage is untouched");
    store.put(&victim, "k2", MemoryWrite::new("still room")).await.expect("the victim writes");
    store.close().await.unwrap();
}

/// Even a role that may execute the function (here the administrator, a superuser) cannot
/// make it count rows of another table: it refuses any `TG_RELID` but the store's own.
#[tokio::test]
async fn the_usage_function_refuses_rows_of_any_other_table() {
    let Victim { table, store, app, .. } = victim("own_table").await;
    let held = usage_of(&table, &app).await.expect("a usage row");

    let client = admin().await;
    client
        .batch_execute(&format!(
            "CREATE TEMP TABLE fake (app text, user_id text, bytes bigint);
             CREATE TRIGGER fake_usage AFTER INSERT OR DELETE ON fake
             FOR EACH ROW EXECUTE FUNCTION public.\"{table}_usage_count\"()"
        ))
        .await
        .expect("a superuser may attach it");
    let raise = client
        .batch_execute(&format!("INSERT INTO fake VALUES ('{app}', 'alice', 1000000000)"))
        .await;
    let message = refused(raise);
    assert!(message.contains("usage of"), "{message}");
    assert_eq!(usage_of(&table, &app).await, Some(held), "the usage is untouched");
    store.close().await.unwrap();
}

/// A count that would go negative means the usage row was changed behind the trigger's back:
/// the write fails (an honest `Storage` error) instead of leaving a row that lifts the quota.
#[tokio::test]
async fn a_usage_count_never_goes_negative() {
    let Victim { table, store, app, victim } = victim("nonneg").await;
    let tampered = admin()
        .await
        .batch_execute(&format!("UPDATE public.\"{table}_usage\" SET bytes = -1"))
        .await
        .expect_err("the CHECK refuses a negative count");
    assert_eq!(tampered.code(), Some(&tokio_postgres::error::SqlState::CHECK_VIOLATION));
    admin()
        .await
        .batch_execute(&format!("UPDATE public.\"{table}_usage\" SET bytes = 1"))
        .await
        .unwrap();
    let err = store.delete(&victim, "k", None).await.expect_err("the count would go negative");
    assert!(err.is_storage(), "{err}");
    assert!(store.get(&victim, "k").await.unwrap().is_some(), "the delete was rolled back");
    assert_eq!(usage_of(&table, &app).await, Some((1, 1)));
    store.close().await.unwrap();
}

/// An install written by an earlier release (the function executable by `PUBLIC`, no
/// `TG_RELID` check, no CHECK on the counts, and counts a stranger may have changed) keeps
/// working under a least-privilege role, which cannot repair it and starts anyway, and is
/// secured by the first start with schema setup as the owner: the function replaced and
/// revoked, the counts recounted from the table, the CHECK added. Replicas starting together
/// repair it once; later starts run no DDL.
#[tokio::test]
async fn an_earlier_install_is_secured_by_the_first_start_with_setup() {
    provisioned().await;
    let table = unique("earlier");
    let store = public_store(&table, true).await;
    let app = fresh_app("victim");
    let victim = MemoryScope::new(&app, "alice").unwrap();
    store.put(&victim, "k1", MemoryWrite::new("one")).await.unwrap();
    store.put(&victim, "k2", MemoryWrite::new("two")).await.unwrap();
    let held = usage_of(&table, &app).await.expect("a usage row");
    store.close().await.unwrap();

    let function = format!("public.\"{table}_usage_count\"()");
    let usage = format!("public.\"{table}_usage\"");
    admin()
        .await
        .batch_execute(&format!(
            "GRANT EXECUTE ON FUNCTION {function} TO PUBLIC;
             ALTER TABLE {usage} DROP CONSTRAINT \"{table}_usage_nonneg\";
             DELETE FROM {usage};
             GRANT SELECT, INSERT, UPDATE, DELETE ON public.\"{table}\" TO {ROLE};
             GRANT USAGE ON SEQUENCE public.\"{table}_revision_seq\" TO {ROLE};"
        ))
        .await
        .expect("an install as an earlier release left it, with the usage row deleted");
    let state = || async {
        let row = admin()
            .await
            .query_one(
                &format!(
                    "SELECT has_function_privilege('public', '{function}', 'EXECUTE'), \
                            EXISTS (SELECT 1 FROM pg_constraint \
                                    WHERE conrelid = '{usage}'::regclass AND contype = 'c')"
                ),
                &[],
            )
            .await
            .expect("catalog");
        (row.get::<_, bool>(0), row.get::<_, bool>(1))
    };

    // The application's role owns nothing: it starts, with or without setup, and changes nothing.
    for setup in [false, true] {
        let url = format!("{}?table={table}&setup_schema={setup}&max_connections=1", role_url());
        let store = PostgresMemoryStore::from_url(&url).unwrap();
        store.start().await.expect("a least-privilege role starts on an earlier install");
        store.close().await.unwrap();
    }
    assert_eq!(state().await, (true, false), "nothing changed");

    let starts: Vec<_> = (0..4)
        .map(|_| {
            let table = table.clone();
            tokio::spawn(async move { public_store(&table, true).await.close().await })
        })
        .collect();
    for start in starts {
        start.await.unwrap().unwrap();
    }
    assert_eq!(state().await, (false, true), "revoked from PUBLIC, counts checked");
    assert_eq!(usage_of(&table, &app).await, Some(held), "the usage is recounted");
    let client = stranger().await;
    client
        .batch_execute("CREATE TEMP TABLE fake (app text, user_id text, bytes bigint)")
        .await
        .unwrap();
    refused(
        client
            .batch_execute(&format!(
                "CREATE TRIGGER fake_usage AFTER INSERT ON fake \
                 FOR EACH ROW EXECUTE FUNCTION {function}"
            ))
            .await,
    );
    admin()
        .await
        .batch_execute(&format!(
            "REVOKE ALL ON public.\"{table}\" FROM {ROLE};
             REVOKE ALL ON SEQUENCE public.\"{table}_revision_seq\" FROM {ROLE};"
        ))
        .await
        .unwrap();
}
