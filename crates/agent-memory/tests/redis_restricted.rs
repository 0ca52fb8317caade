//! The Redis provider on a server restricted the way managed services restrict theirs: `CONFIG`
//! renamed away (`rename-command CONFIG ""`, as on ElastiCache and Upstash) and a least-privilege
//! ACL user that may touch only the provider's keys with only the commands it uses
//! ([`agent_memory::redis::ACL_RULES`]). The whole conformance suite passes as that user; the
//! durability check says it could not verify the settings, and `require_durable(true)` refuses
//! naming why.

mod support {
    pub mod apps;
    pub mod fixture;
}

use std::sync::OnceLock;

use agent_memory::conformance::Fixture;
use agent_memory::redis::ACL_RULES;
use agent_memory::{MemoryStore, MemoryWrite, RedisMemoryStore};
use agent_memory_testkit::redis::RedisServer;
use support::apps::fresh_scope;

const USER: &str = "agent-memory";
const PASSWORD: &str = "restricted-Zq8-secret";

/// The restricted server, with the ACL user, started once per test process.
fn server() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let server = RedisServer::start_with(&[
            "--save",
            "",
            "--appendonly",
            "yes",
            "--rename-command",
            "CONFIG",
            "",
        ]);
        let mut setuser = vec!["ACL", "SETUSER", USER, "on"];
        let password = format!(">{PASSWORD}");
        setuser.push(&password);
        setuser.extend(ACL_RULES.split_whitespace());
        assert_eq!(server.cli(&setuser), "OK", "the documented ACL rules are accepted");
        server
    })
}

fn user_url() -> String {
    format!("redis://{USER}:{PASSWORD}@127.0.0.1:{}", server().port())
}

async fn store() -> Fixture {
    support::fixture::from_url(user_url(), RedisMemoryStore::from_url)
}

agent_memory::conformance_tests!(store);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_config_get_leaves_durability_unverified_and_the_store_working() {
    assert!(server().cli(&["CONFIG", "GET", "appendfsync"]).contains("unknown command"));
    let store = RedisMemoryStore::from_url(&user_url()).unwrap();
    store.start().await.expect("an unverifiable deployment still starts");
    let report = store.durability().expect("a report");
    assert!(!report.is_verified(), "{report:?}");
    assert!(!report.is_durable(), "nothing confirmed durability");
    assert!(report.problems().iter().any(|p| p.contains("CONFIG GET")), "{report:?}");
    let scope = fresh_scope("restricted", "u");
    store.put(&scope, "k", MemoryWrite::new("v")).await.unwrap();
    assert_eq!(store.get(&scope, "k").await.unwrap().unwrap().content, "v");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_durable_refuses_an_unverifiable_deployment_and_says_why() {
    let store = RedisMemoryStore::builder(&user_url()).unwrap().require_durable(true).build();
    let err = store.unwrap().start().await.unwrap_err();
    assert!(err.is_storage());
    assert_eq!(
        err.to_string(),
        "storage error (redis): require_durable is set, but the Redis deployment's persistence \
         settings could not be verified (CONFIG GET or INFO was refused, as managed services \
         often do)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acl_user_can_reach_nothing_but_the_providers_keys_and_commands() {
    let server = server();
    let as_user = |args: &[&str]| {
        let mut all = vec!["--user", USER, "--pass", PASSWORD, "--no-auth-warning"];
        all.extend_from_slice(args);
        server.cli(&all)
    };
    assert_eq!(as_user(&["PING"]), "PONG");
    for denied in [
        vec!["SET", "other:key", "x"],
        vec!["GET", "other:key"],
        vec!["KEYS", "*"],
        vec!["FLUSHALL"],
        vec!["EVAL", "return 1", "0"],
        vec!["ACL", "LIST"],
    ] {
        let reply = as_user(&denied);
        assert!(reply.contains("NOPERM"), "{denied:?}: {reply}");
    }
}
