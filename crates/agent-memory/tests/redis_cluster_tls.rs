//! The Redis provider against a real three-master Redis Cluster that speaks TLS only
//! (`--port 0 --tls-port`, `--tls-cluster yes`) and requires client certificates: the whole
//! conformance suite over `rediss+cluster://`. The nodes have no plain port at all, so every
//! connection the client opens, to the seeds and to every node it discovers, must use TLS for
//! the suite to pass.

mod support {
    pub mod apps;
    pub mod cluster;
    pub mod fixture;
    pub mod leaks;
}

use agent_memory::conformance::Fixture;
use agent_memory::redis::ACL_RULES;
use agent_memory::{MemoryStore, MemoryWrite, PageRequest, RedisMemoryStore};
use agent_memory_testkit::redis::shared_tls_cluster;
use agent_memory_testkit::tls::shared_certs;
use support::apps::fresh_scope;
use support::cluster::users_on_every_master;
use support::leaks::error_text;

/// The cluster URL with the client's CA, certificate and key; `seeds` of the nodes listed.
fn tls_url(seeds: usize) -> String {
    let cluster = shared_tls_cluster();
    let files = cluster.tls_files().expect("a TLS cluster");
    let nodes: Vec<String> = cluster.addresses().into_iter().take(seeds).collect();
    format!("rediss+cluster://{}?{}", nodes.join(","), files.url_params())
}

async fn store() -> Fixture {
    support::fixture::from_url(tls_url(3), RedisMemoryStore::from_url)
}

agent_memory::conformance_tests!(store);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_seed_is_enough_and_every_discovered_master_is_reached_over_tls() {
    let store = RedisMemoryStore::from_url(&tls_url(1)).unwrap();
    store.start().await.unwrap();
    assert_eq!(store.durability().unwrap().nodes(), 3, "every master answered over TLS");
    let scopes = users_on_every_master(&store, "redis-cluster-tls").await;
    for node in shared_tls_cluster().nodes() {
        let keys = node.cli(&["--scan", "--pattern", "am:*"]);
        assert!(!keys.is_empty(), "a master holds none of the users");
    }
    for scope in &scopes {
        let page = store.list(scope, PageRequest::default()).await.unwrap();
        assert_eq!(page.items.len(), 1);
        let erased = store.delete_user(scope.application_id(), scope.user_id()).await.unwrap();
        assert_eq!(erased, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_ca_is_refused_as_tls_on_a_cluster() {
    let certs = shared_certs();
    let url = tls_url(3).replace(
        &format!("cacert={}", certs.ca().display()),
        &format!("cacert={}", certs.other_ca().display()),
    );
    let store = RedisMemoryStore::builder(&url)
        .unwrap()
        .connect_timeout(std::time::Duration::from_secs(2))
        .build()
        .unwrap();
    let err = store.start().await.unwrap_err();
    assert!(err.is_storage(), "{err}");
    assert!(err.to_string().contains("TLS:"), "{}", error_text(&err));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_least_privilege_acl_user_works_on_a_tls_cluster_from_one_seed() {
    // The shape of a managed cluster (ElastiCache with cluster mode and in-transit encryption):
    // one configuration endpoint as the seed, an ACL user with the documented rules on every
    // node (ACL users are per node in Redis Cluster).
    let (user, password) = ("agent-memory", "cluster-Zq8-secret");
    for node in shared_tls_cluster().nodes() {
        let mut setuser = vec!["ACL", "SETUSER", user, "on"];
        let secret = format!(">{password}");
        setuser.push(&secret);
        setuser.extend(ACL_RULES.split_whitespace());
        assert_eq!(node.cli(&setuser), "OK");
    }
    let url = tls_url(1).replacen(
        "rediss+cluster://",
        &format!("rediss+cluster://{user}:{password}@"),
        1,
    );
    let store = RedisMemoryStore::from_url(&url).unwrap();
    store.start().await.unwrap();
    // The test cluster runs without the append-only file, which INFO alone shows: the report
    // needs no CONFIG GET to say so.
    let report = store.durability().unwrap();
    assert!(report.is_verified() && !report.is_durable(), "{report:?}");
    for i in 0..16 {
        let scope = fresh_scope("redis-cluster-acl", &format!("user-{i}"));
        store.put(&scope, "k", MemoryWrite::new("v")).await.unwrap();
        assert_eq!(store.get(&scope, "k").await.unwrap().unwrap().content, "v");
        let erased = store.delete_user(scope.application_id(), scope.user_id()).await.unwrap();
        assert_eq!(erased, 1);
    }
}
