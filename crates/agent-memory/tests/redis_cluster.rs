//! The Redis provider against a real three-master Redis Cluster: the whole conformance suite on
//! a shared cluster, plus erasure and reconnection on a cluster of its own.

mod support {
    pub mod apps;
    pub mod cluster;
    pub mod fixture;
}

use std::time::{Duration, Instant};

use agent_memory::conformance::Fixture;
use agent_memory::{MemoryScope, MemoryStore, MemoryWrite, PageRequest, RedisMemoryStore};
use agent_memory_testkit::redis::{shared_cluster_url, RedisCluster};
use support::apps::{fresh_app, fresh_scope};
use support::cluster::users_on_every_master;

async fn store() -> Fixture {
    support::fixture::from_url(shared_cluster_url(), RedisMemoryStore::from_url)
}

agent_memory::conformance_tests!(store);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_user_leaves_no_key_behind_on_any_master() {
    let cluster = RedisCluster::start();
    let store =
        RedisMemoryStore::builder(&cluster.url()).unwrap().erase_batch_size(4).build().unwrap();
    store.start().await.unwrap();
    assert_eq!(store.durability().unwrap().nodes(), 3, "every master was inspected");
    let app = fresh_app("redis-cluster-test");
    // Users spread over the masters.
    let others: Vec<MemoryScope> =
        (0..20).map(|i| MemoryScope::new(&app, format!("other-{i}")).unwrap()).collect();
    for scope in &others {
        store.put(scope, "k", MemoryWrite::new("stays")).await.unwrap();
    }
    let keys_before = cluster.dbsize();

    let user = MemoryScope::new(&app, "erased:{tag}").unwrap();
    let mut written = 0;
    for namespace in ["a", "b{", "}c", "d:e"] {
        let scope = user.with_namespace(namespace).unwrap();
        for i in 0..5 {
            store.put(&scope, &format!("k{i}"), MemoryWrite::new("erase me")).await.unwrap();
            written += 1;
        }
    }
    store.put(&user, "default", MemoryWrite::new("erase me")).await.unwrap();
    written += 1;
    assert!(cluster.dbsize() > keys_before);

    assert_eq!(store.delete_user(&app, user.user_id()).await.unwrap(), written);
    assert_eq!(cluster.dbsize(), keys_before, "no key of the user remains on any master");
    let page = store.list_namespaces(&app, user.user_id(), PageRequest::default()).await.unwrap();
    assert!(page.items.is_empty());
    for scope in &others {
        assert_eq!(store.get(scope, "k").await.unwrap().unwrap().content, "stays");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connections_fail_then_recover_on_a_cluster() {
    let cluster = RedisCluster::start();
    let store = RedisMemoryStore::from_url(&cluster.url()).unwrap();
    store.start().await.unwrap();
    // Users on every master: the recovery loop below must touch every killed connection, or
    // the NOSCRIPT phase would meet a dead one and test the wrong thing.
    let scopes = users_on_every_master(&store, "redis-cluster-test").await;
    for node in cluster.nodes() {
        assert!(node.dbsize() > 0, "a master holds none of the users");
    }
    for node in cluster.nodes() {
        node.cli(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    }
    // Operations may fail with Storage while the client notices and reconnects, then succeed.
    let deadline = Instant::now() + Duration::from_secs(15);
    for scope in &scopes {
        loop {
            match store.get(scope, "k").await {
                Ok(record) => {
                    assert_eq!(record.unwrap().content, "v");
                    break;
                }
                Err(err) => {
                    assert!(err.is_storage(), "{err}");
                    assert!(Instant::now() < deadline, "did not recover: {err}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    // Masters that forgot the scripts answer NOSCRIPT; the client loads them again by itself.
    for node in cluster.nodes() {
        assert_eq!(node.cli(&["SCRIPT", "FLUSH"]), "OK");
    }
    for scope in &scopes {
        assert_eq!(store.get(scope, "k").await.unwrap().unwrap().content, "v");
        store.put(scope, "k2", MemoryWrite::new("v2")).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_takes_the_cluster_url_form() {
    let url = shared_cluster_url();
    assert!(url.starts_with("redis+cluster://"));
    let store = agent_memory::open(&url).unwrap();
    store.start().await.unwrap();
    let scope = fresh_scope("redis-cluster-test", "user").with_namespace("n").unwrap();
    let written = store.put(&scope, "k", MemoryWrite::new("v")).await.unwrap();
    assert_eq!(store.get(&scope, "k").await.unwrap().unwrap(), written);
    let page = store.list_namespaces(scope.application_id(), "user", PageRequest::default());
    assert_eq!(page.await.unwrap().items, vec![scope.clone()]);
    store.close().await.unwrap();
}
