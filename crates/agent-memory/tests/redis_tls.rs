//! The Redis provider over TLS (`rediss://`), against a real TLS-only server that requires
//! client certificates, with certificates made for this test process by a throwaway CA: the
//! whole conformance suite with `cacert`, `cert` and `key`, then the failures a deployment
//! meets (an unknown CA, a host name the certificate does not hold, no client certificate),
//! each a `Storage` error whose message says it was TLS; `insecure=true`; and an ACL user's
//! `username:password@` in a `rediss` URL.

mod support {
    pub mod apps;
    pub mod fixture;
    pub mod leaks;
    pub mod tls;
}

use agent_memory::conformance::Fixture;
use agent_memory::{MemoryError, MemoryStore, MemoryWrite, RedisMemoryStore};
use agent_memory_testkit::redis::shared_tls_server;
use agent_memory_testkit::tls::{shared_certs, UNNAMED_ADDRESS};
use support::apps::fresh_scope;
use support::leaks::error_text;
use support::tls;

/// The TLS server's URL on `host` with the client's CA, certificate and key.
fn tls_url(host: &str) -> String {
    let server = shared_tls_server();
    let files = server.tls_files().expect("a TLS server");
    format!("rediss://{host}:{}?{}", server.port(), files.url_params())
}

async fn store() -> Fixture {
    support::fixture::from_url(tls_url("127.0.0.1"), RedisMemoryStore::from_url)
}

agent_memory::conformance_tests!(store);

async fn start_error(url: &str) -> MemoryError {
    let store = RedisMemoryStore::builder(url)
        .expect("a valid URL")
        .connect_timeout(std::time::Duration::from_secs(2))
        .build()
        .expect("valid options");
    store.start().await.expect_err("start must fail")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_certificate_is_checked_by_name_and_by_address() {
    for host in ["localhost", "127.0.0.1"] {
        let store = RedisMemoryStore::from_url(&tls_url(host)).unwrap();
        store.start().await.unwrap_or_else(|err| panic!("{host}: {}", error_text(&err)));
        let s = fresh_scope("redis-tls", "user");
        store.put(&s, "k", MemoryWrite::new("over TLS")).await.unwrap();
        assert_eq!(store.get(&s, "k").await.unwrap().unwrap().content, "over TLS");
        store.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_ca_is_refused_as_tls() {
    let certs = shared_certs();
    let url = tls_url("127.0.0.1").replace(
        &format!("cacert={}", certs.ca().display()),
        &format!("cacert={}", certs.other_ca().display()),
    );
    tls::assert_refused(&start_error(&url).await, "redis", tls::UNTRUSTED, "another CA");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_name_the_certificate_lacks_is_refused_as_tls() {
    // The server listens there too; its certificate names localhost and 127.0.0.1 only.
    let err = start_error(&tls_url(UNNAMED_ADDRESS)).await;
    tls::assert_refused(&err, "redis", tls::WRONG_HOST, UNNAMED_ADDRESS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_requires_a_client_certificate_refuses_a_client_without_one() {
    let server = shared_tls_server();
    let ca = shared_certs().ca();
    let url = format!("rediss://127.0.0.1:{}?cacert={}", server.port(), ca.display());
    let reason = "the server requires a client certificate";
    tls::assert_refused(&start_error(&url).await, "redis", reason, "no client certificate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_connects_whatever_the_certificate_says() {
    let certs = shared_certs();
    // The wrong CA and a name the certificate lacks: only insecure=true gets through.
    let url = tls_url(UNNAMED_ADDRESS).replace(
        &format!("cacert={}", certs.ca().display()),
        &format!("cacert={}", certs.other_ca().display()),
    );
    let store = RedisMemoryStore::from_url(&format!("{url}&insecure=true")).unwrap();
    store.start().await.unwrap_or_else(|err| panic!("{}", error_text(&err)));
    let s = fresh_scope("redis-tls", "user");
    store.put(&s, "k", MemoryWrite::new("v")).await.unwrap();
    store.close().await.unwrap();
    let store = RedisMemoryStore::builder(&url).unwrap().tls_insecure(true).build().unwrap();
    store.start().await.expect("the builder sets the same");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_logs_in_over_tls_and_its_password_never_shows() {
    let server = shared_tls_server();
    let password = "pw-Zq8-never-shown";
    let user = format!("tls-user-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let set = server.cli(&["ACL", "SETUSER", &user, "on", &format!(">{password}"), "~*", "+@all"]);
    assert_eq!(set, "OK");
    let url =
        tls_url("127.0.0.1").replacen("rediss://", &format!("rediss://{user}:{password}@"), 1);
    let store = RedisMemoryStore::from_url(&url).unwrap();
    assert!(!format!("{store:?}").contains(password));
    store.start().await.unwrap_or_else(|err| panic!("{}", error_text(&err)));
    store.put(&fresh_scope("redis-tls", "user"), "k", MemoryWrite::new("v")).await.unwrap();

    let wrong = url.replacen(password, "not-the-password", 1);
    let err = start_error(&wrong).await;
    assert_eq!(err.to_string(), "storage error (redis): Redis refused the credentials");
    assert!(!error_text(&err).contains(password));
}
