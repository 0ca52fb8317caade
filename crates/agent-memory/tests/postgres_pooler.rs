//! The PostgreSQL provider through a real PgBouncer in transaction mode (Debian's `pgbouncer`,
//! started by the test kit in front of its own server): the whole conformance suite with
//! `prepared_statements=false`, which Supabase's pooler, PgBouncer and the like need, because
//! each transaction may run on a different server connection. PgBouncer 1.18 (Debian 12) has
//! no support for named prepared statements at all in this mode, so any statement the store
//! prepared by name would fail here.

mod support {
    pub mod apps;
    pub mod fixture;
}

use agent_memory::conformance::Fixture;
use agent_memory::{MemoryStore, MemoryWrite, PageRequest, PostgresMemoryStore};
use agent_memory_testkit::pgbouncer::shared_pooler;
use agent_memory_testkit::tls::shared_certs;
use support::apps::fresh_scope;

/// The pooler's URL with `query` appended.
fn pooled(query: &str) -> String {
    format!("{}?prepared_statements=false&{query}", shared_pooler().url())
}

async fn store() -> Fixture {
    // Two stores with their own pools: two replicas of a service, through one pooler.
    support::fixture::from_url(pooled("max_connections=4"), PostgresMemoryStore::from_url)
}

agent_memory::conformance_tests!(store);

#[tokio::test]
async fn the_builder_turns_prepared_statements_off_too() {
    let store = PostgresMemoryStore::builder(&shared_pooler().url())
        .unwrap()
        .prepared_statements(false)
        .max_connections(2)
        .build()
        .unwrap();
    store.start().await.unwrap();
    let s = fresh_scope("pg-pooler", "user");
    let written = store.put(&s, "k", MemoryWrite::new("through the pooler")).await.unwrap();
    assert_eq!(store.get(&s, "k").await.unwrap(), Some(written));
    assert_eq!(store.delete_all(&s).await.unwrap(), 1, "an execute reports its row count");
    store.close().await.unwrap();
}

#[tokio::test]
async fn a_managed_pooler_url_with_tls_works_unchanged() {
    // Shaped like Supabase's pooler URL: password, TLS verified against the pooler's CA, and
    // prepared statements off.
    let url = pooled(&format!(
        "sslmode=verify-full&sslrootcert={}&max_connections=2",
        shared_certs().ca().display()
    ))
    .replace("127.0.0.1", "localhost");
    let store = agent_memory::open(&url).unwrap();
    store.start().await.unwrap();
    let s = fresh_scope("pg-pooler", "user");
    for i in 0..20 {
        store.put(&s, &format!("k{i:02}"), MemoryWrite::new("v")).await.unwrap();
    }
    let page = store.list(&s, PageRequest::new(100)).await.unwrap();
    assert_eq!(page.items.len(), 20);
    assert_eq!(store.delete_user(s.application_id(), s.user_id()).await.unwrap(), 20);
    store.close().await.unwrap();
}

#[tokio::test]
async fn the_pooled_and_the_direct_store_share_one_table() {
    let direct =
        PostgresMemoryStore::from_url(&shared_pooler().server().url()).expect("direct URL");
    let pooled = PostgresMemoryStore::from_url(&pooled("max_connections=2")).unwrap();
    direct.start().await.unwrap();
    pooled.start().await.unwrap();
    let s = fresh_scope("pg-pooler", "user");
    let written = pooled.put(&s, "k", MemoryWrite::new("v")).await.unwrap();
    assert_eq!(direct.get(&s, "k").await.unwrap(), Some(written.clone()));
    let replaced = direct
        .put(&s, "k", MemoryWrite::new("v2").expected_revision(written.revision.clone()))
        .await
        .unwrap();
    let stale = pooled.put(&s, "k", MemoryWrite::new("v3").expected_revision(written.revision));
    assert!(stale.await.unwrap_err().is_conflict());
    assert_eq!(pooled.get(&s, "k").await.unwrap(), Some(replaced));
}
