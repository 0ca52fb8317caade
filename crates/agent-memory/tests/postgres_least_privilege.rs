//! The PostgreSQL provider under a role with least privilege: `setup_schema(false)` on a table an
//! administrator provisioned with [`PostgresMemoryStore::schema_sql`], and a login role that has
//! only `USAGE` on the schema, `SELECT, INSERT, UPDATE, DELETE` on the table and `USAGE` on its
//! revision sequence (the grants the provider's docs give). The whole conformance suite passes
//! as that role; the tests below show the role really cannot do more.

mod support {
    pub mod quotas;
}

use std::sync::Arc;

use agent_memory::conformance::Fixture;
use agent_memory::{MemoryScope, MemoryStore, MemoryWrite, PostgresMemoryStore};
use agent_memory_testkit::postgres::shared_url;
use tokio::sync::OnceCell;
use tokio_postgres::NoTls;

/// The login role of the application.
const ROLE: &str = "agent_memory_app";
/// The schema the administrator provisions.
const SCHEMA: &str = "memories";

async fn admin() -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(&shared_url(), NoTls).await.expect("connect");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
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
    let open = || Arc::new(PostgresMemoryStore::from_url(&url).expect("a valid URL"));
    Fixture::new(open()).with_replica(open()).with_quotas(move |quotas| {
        let url = support::quotas::url_with(&url, quotas);
        Arc::new(PostgresMemoryStore::from_url(&url).expect("a valid URL"))
    })
}

agent_memory::conformance_tests!(store);

#[tokio::test]
async fn with_setup_on_the_role_starts_on_an_existing_table_without_ddl() {
    provisioned().await;
    let store = PostgresMemoryStore::from_url(&as_role("max_connections=2")).unwrap();
    store.start().await.expect("no DDL runs when the table exists");
    let s = MemoryScope::new(format!("lp-{}", uuid::Uuid::new_v4().simple()), "u").unwrap();
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
    let (client, connection) =
        tokio_postgres::connect(&role_url(), NoTls).await.expect("connect as the role");
    tokio::spawn(async move {
        let _ = connection.await;
    });
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
