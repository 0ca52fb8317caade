//! The Redis provider over TLS (`rediss://`), against a real TLS-only server that requires
//! client certificates, with certificates made for this test process by a throwaway CA: the
//! whole conformance suite with `cacert`, `cert` and `key`, then the failures a deployment
//! meets (an unknown CA, a host name the certificate does not hold, no client certificate),
//! each a `Storage` error whose message says it was TLS; `insecure=true`; and an ACL user's
//! `username:password@` in a `rediss` URL.

mod support {
    pub mod quotas;
}

use std::sync::Arc;

use agent_memory::conformance::Fixture;
use agent_memory::{MemoryError, MemoryScope, MemoryStore, MemoryWrite, RedisMemoryStore};
use agent_memory_testkit::redis::shared_tls_server;
use agent_memory_testkit::tls::{shared_certs, UNNAMED_ADDRESS};

/// The TLS server's URL on `host` with the client's CA, certificate and key.
fn tls_url(host: &str) -> String {
    let server = shared_tls_server();
    let files = server.tls_files().expect("a TLS server");
    format!("rediss://{host}:{}?{}", server.port(), files.url_params())
}

async fn store() -> Fixture {
    let url = tls_url("127.0.0.1");
    let open = || Arc::new(RedisMemoryStore::from_url(&url).expect("a valid TLS URL"));
    // A second instance with its own connection: another replica of the service.
    Fixture::new(open()).with_replica(open()).with_quotas(move |quotas| {
        let url = support::quotas::url_with(&url, quotas);
        Arc::new(RedisMemoryStore::from_url(&url).expect("a valid TLS URL"))
    })
}

agent_memory::conformance_tests!(store);

fn scope() -> MemoryScope {
    MemoryScope::new(format!("redis-tls-{}", uuid::Uuid::new_v4().simple()), "user").unwrap()
}

/// Every message in an error's chain, for checks that nothing private leaks.
fn chain(err: &MemoryError) -> String {
    let mut text = format!("{err} | {err:?}");
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        text.push_str(&format!(" | {inner} | {inner:?}"));
        source = inner.source();
    }
    text
}

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
        store.start().await.unwrap_or_else(|err| panic!("{host}: {}", chain(&err)));
        let s = scope();
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
    let err = start_error(&url).await;
    assert!(err.is_storage(), "{err}");
    assert_eq!(
        err.to_string(),
        "storage error (redis): TLS: the server's certificate is not signed by a trusted \
         authority (check the CA certificate setting)",
        "{}",
        chain(&err)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_name_the_certificate_lacks_is_refused_as_tls() {
    // The server listens there too; its certificate names localhost and 127.0.0.1 only.
    let err = start_error(&tls_url(UNNAMED_ADDRESS)).await;
    assert_eq!(
        err.to_string(),
        "storage error (redis): TLS: the server's certificate does not name the host connected to",
        "{}",
        chain(&err)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_requires_a_client_certificate_refuses_a_client_without_one() {
    let server = shared_tls_server();
    let ca = shared_certs().ca();
    let url = format!("rediss://127.0.0.1:{}?cacert={}", server.port(), ca.display());
    let err = start_error(&url).await;
    assert!(err.is_storage(), "{err}");
    assert_eq!(
        err.to_string(),
        "storage error (redis): TLS: the server requires a client certificate",
        "{}",
        chain(&err)
    );
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
    store.start().await.unwrap_or_else(|err| panic!("{}", chain(&err)));
    let s = scope();
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
    store.start().await.unwrap_or_else(|err| panic!("{}", chain(&err)));
    store.put(&scope(), "k", MemoryWrite::new("v")).await.unwrap();

    let wrong = url.replacen(password, "not-the-password", 1);
    let err = start_error(&wrong).await;
    assert_eq!(err.to_string(), "storage error (redis): Redis refused the credentials");
    assert!(!chain(&err).contains(password));
}
