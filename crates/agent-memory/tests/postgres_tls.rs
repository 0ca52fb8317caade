//! The PostgreSQL provider over TLS, against a real server with `ssl=on` and certificates made
//! for this test process by a throwaway CA: the whole conformance suite with
//! `sslmode=verify-full`, then libpq's modes one by one (what each checks, what it does against
//! a server without TLS) and the failures a deployment meets: an unknown CA, a host name the
//! certificate does not hold, a client certificate required but absent. Each failure is a
//! `Storage` error whose message says it was TLS, and no error or `Debug` output shows a
//! password.

mod support {
    pub mod apps;
    pub mod fixture;
    pub mod leaks;
    pub mod pg;
    pub mod tls;
}

use agent_memory::conformance::Fixture;
use agent_memory::postgres::SslMode;
use agent_memory::{MemoryError, MemoryStore, MemoryWrite, PostgresMemoryStore};
use agent_memory_testkit::postgres::{shared_tls_server, shared_url, PASSWORD_ROLE};
use agent_memory_testkit::tls::{shared_certs, CLIENT_NAME};
use support::apps::fresh_scope;
use support::leaks::error_text;
use support::pg::{connect, unique};
use support::tls;

/// `postgres://postgres@HOST:PORT/postgres?QUERY` on the TLS server.
fn tls_url(host: &str, query: &str) -> String {
    let port = shared_tls_server().port();
    format!("postgres://postgres@{host}:{port}/postgres?{query}")
}

/// The query that pins the server's certificate to the test CA.
fn verify_full() -> String {
    format!("sslmode=verify-full&sslrootcert={}", shared_certs().ca().display())
}

async fn store() -> Fixture {
    let url = tls_url("127.0.0.1", &format!("{}&max_connections=4", verify_full()));
    support::fixture::from_url(url, PostgresMemoryStore::from_url)
}

agent_memory::conformance_tests!(store);

/// A plain admin connection to the TLS server, for checking what the store's sessions use.
async fn admin() -> tokio_postgres::Client {
    connect(&format!("postgres://postgres@127.0.0.1:{}/postgres", shared_tls_server().port())).await
}

/// Starts a store on `url` (tagged with a fresh `application_name`), writes and reads one
/// record, and returns whether its sessions on the TLS server are encrypted.
async fn round_trip_encrypted(url: &str) -> Result<bool, MemoryError> {
    let name = unique("tls_check");
    let separator = if url.contains('?') { '&' } else { '?' };
    let store = PostgresMemoryStore::from_url(&format!("{url}{separator}application_name={name}"))?;
    store.start().await?;
    let s = fresh_scope("pg-tls", "user");
    store.put(&s, "k", MemoryWrite::new("over the wire")).await?;
    assert_eq!(store.get(&s, "k").await?.expect("present").content, "over the wire");
    let row = admin()
        .await
        .query_one(
            "SELECT count(*), coalesce(bool_and(s.ssl), false) FROM pg_stat_ssl s \
             JOIN pg_stat_activity a USING (pid) WHERE a.application_name = $1",
            &[&name],
        )
        .await
        .expect("pg_stat_ssl");
    store.close().await?;
    assert!(row.get::<_, i64>(0) > 0, "the store's sessions are visible");
    Ok(row.get(1))
}

/// Starts a store on `url` and returns the error `start` fails with.
async fn start_error(url: &str) -> MemoryError {
    let store = PostgresMemoryStore::from_url(url).expect("a valid URL");
    store.start().await.expect_err("start must fail")
}

#[tokio::test]
async fn verify_full_checks_the_chain_and_the_host_name_by_name_or_address() {
    for host in ["localhost", "127.0.0.1"] {
        let encrypted = round_trip_encrypted(&tls_url(host, &verify_full())).await.unwrap();
        assert!(encrypted, "{host}: every session is TLS");
    }
}

#[tokio::test]
async fn prefer_is_the_default_and_uses_tls_when_the_server_offers_it() {
    assert!(round_trip_encrypted(&tls_url("127.0.0.1", "")).await.unwrap());
    assert!(round_trip_encrypted(&tls_url("127.0.0.1", "sslmode=prefer")).await.unwrap());
    // Against a server without TLS, prefer (the default) connects in plain text.
    let plain = PostgresMemoryStore::from_url(&shared_url()).unwrap();
    plain.start().await.expect("prefer falls back to plain text");
    plain.close().await.unwrap();
}

#[tokio::test]
async fn disable_never_encrypts() {
    assert!(!round_trip_encrypted(&tls_url("127.0.0.1", "sslmode=disable")).await.unwrap());
    let store = PostgresMemoryStore::builder(&tls_url("127.0.0.1", ""))
        .unwrap()
        .ssl_mode(SslMode::Disable)
        .build()
        .unwrap();
    store.start().await.expect("the builder sets the same mode");
}

#[tokio::test]
async fn require_without_a_root_certificate_encrypts_without_checking() {
    // The server's CA is unknown here, and a name the certificate lacks: require checks neither.
    let url = tls_url(
        "127.0.0.1",
        "sslmode=require&host=not-in-the-certificate.invalid&hostaddr=127.0.0.1",
    );
    assert!(round_trip_encrypted(&url).await.unwrap());
}

#[tokio::test]
async fn an_unknown_ca_is_refused_as_tls_in_every_mode_that_has_a_root_certificate() {
    let other = shared_certs().other_ca();
    // libpq's twist: require with a root certificate checks the chain, as verify-ca does.
    for mode in ["verify-full", "verify-ca", "require"] {
        let url = tls_url("127.0.0.1", &format!("sslmode={mode}&sslrootcert={}", other.display()));
        tls::assert_refused(&start_error(&url).await, "postgres", tls::UNTRUSTED, mode);
    }
    // prefer checks the chain too, but as libpq does, a failed handshake is retried once in
    // plain text (with a warning): the server accepts both here.
    let url = tls_url("127.0.0.1", &format!("sslmode=prefer&sslrootcert={}", other.display()));
    assert!(!round_trip_encrypted(&url).await.unwrap(), "prefer fell back to plain text");
}

#[tokio::test]
async fn a_host_name_the_certificate_lacks_fails_verify_full_but_not_verify_ca() {
    // The TCP connection goes to 127.0.0.1 (hostaddr); the name checked is `host`, as in libpq.
    let target = "host=not-in-the-certificate.invalid&hostaddr=127.0.0.1";
    let ca = shared_certs().ca();
    let url =
        tls_url("127.0.0.1", &format!("{target}&sslmode=verify-full&sslrootcert={}", ca.display()));
    tls::assert_refused(&start_error(&url).await, "postgres", tls::WRONG_HOST, "verify-full");
    let url =
        tls_url("127.0.0.1", &format!("{target}&sslmode=verify-ca&sslrootcert={}", ca.display()));
    assert!(round_trip_encrypted(&url).await.unwrap(), "verify-ca checks the chain only");
}

#[tokio::test]
async fn require_and_stricter_fail_against_a_server_without_tls() {
    let plain = shared_url();
    let ca = shared_certs().ca();
    for query in
        ["sslmode=require".to_owned(), format!("sslmode=verify-full&sslrootcert={}", ca.display())]
    {
        let err = start_error(&format!("{plain}?{query}")).await;
        let reason = "the server does not accept TLS connections, and sslmode requires them";
        tls::assert_refused(&err, "postgres", reason, &query);
    }
}

#[tokio::test]
async fn sslrootcert_system_trusts_the_os_store_and_so_refuses_a_private_ca() {
    let err = start_error(&tls_url("localhost", "sslrootcert=system")).await;
    assert!(err.to_string().contains("TLS: the server's certificate is not signed"), "{err}");
    // As in libpq, anything weaker than verify-full with sslrootcert=system is refused.
    let err =
        PostgresMemoryStore::from_url(&tls_url("localhost", "sslrootcert=system&sslmode=require"));
    assert!(err.unwrap_err().is_invalid());
}

/// Creates the role the client certificate names (its common name), once per server.
async fn client_role() {
    let create = format!(
        "DO $$ BEGIN CREATE ROLE {CLIENT_NAME} LOGIN SUPERUSER; \
         EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    );
    admin().await.batch_execute(&create).await.expect("create the client role");
}

#[tokio::test]
async fn a_client_certificate_logs_in_where_the_server_requires_one() {
    client_role().await;
    let certs = shared_certs();
    let base = format!(
        "postgres://{CLIENT_NAME}@localhost:{}/postgres?{}&table={}",
        shared_tls_server().port(),
        verify_full(),
        unique("cert_auth")
    );
    let with_cert = format!(
        "{base}&sslcert={}&sslkey={}",
        certs.client_cert().display(),
        certs.client_key().display()
    );
    assert!(round_trip_encrypted(&with_cert).await.expect("the certificate authenticates"));
    let store = PostgresMemoryStore::builder(&base)
        .unwrap()
        .ssl_cert(certs.client_cert())
        .ssl_key(certs.client_key())
        .build()
        .unwrap();
    store.start().await.expect("the builder names the same files");
    store.close().await.unwrap();

    // Without the certificate the server refuses the role (pg_hba `cert`).
    let err = start_error(&base).await;
    assert!(err.is_storage(), "{err}");
    assert!(error_text(&err).contains("certificate"), "{}", error_text(&err));
}

#[tokio::test]
async fn a_client_key_other_users_can_read_is_refused_like_libpq() {
    let certs = shared_certs();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("client.key");
    std::fs::copy(certs.client_key(), &key).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let url = tls_url(
        "localhost",
        &format!(
            "{}&sslcert={}&sslkey={}",
            verify_full(),
            certs.client_cert().display(),
            key.display()
        ),
    );
    let err = PostgresMemoryStore::from_url(&url).unwrap_err();
    assert!(matches!(err, MemoryError::Invalid { field: "sslkey", .. }), "{err}");
}

#[tokio::test]
async fn no_password_shows_in_errors_or_debug_output_of_a_tls_store() {
    let password = "pw-Zq8-never-shown";
    let url = format!(
        "postgres://postgres:{password}@127.0.0.1:{}/postgres?sslmode=verify-full&sslrootcert={}",
        shared_tls_server().port(),
        shared_certs().other_ca().display()
    );
    let store = PostgresMemoryStore::from_url(&url).unwrap();
    assert!(!format!("{store:?}").contains(password));
    let err = store.start().await.unwrap_err();
    assert!(!error_text(&err).contains(password), "{}", error_text(&err));
}

#[tokio::test]
async fn a_console_url_with_a_password_and_channel_binding_works_unchanged() {
    // The shape Neon's console gives: a password role, sslmode=require and
    // channel_binding=require (SCRAM bound to the TLS certificate), against a server that
    // requires SCRAM over TLS for that role.
    let password = "console-Zq8-password";
    admin()
        .await
        .batch_execute(&format!(
            "DO $$ BEGIN CREATE ROLE {PASSWORD_ROLE} LOGIN SUPERUSER; \
             EXCEPTION WHEN duplicate_object THEN NULL; END $$; \
             SET password_encryption = 'scram-sha-256'; \
             ALTER ROLE {PASSWORD_ROLE} PASSWORD '{password}'"
        ))
        .await
        .expect("create the password role");
    let url = format!(
        "postgresql://{PASSWORD_ROLE}:{password}@localhost:{}/postgres?sslmode=require\
         &channel_binding=require&table={}",
        shared_tls_server().port(),
        unique("console")
    );
    assert!(round_trip_encrypted(&url).await.unwrap_or_else(|err| panic!("{}", error_text(&err))));
    // Without TLS the server refuses the role, and channel binding cannot be had anyway.
    let plain = url.replace("sslmode=require", "sslmode=disable");
    let err = start_error(&plain).await;
    assert!(err.is_storage());
    assert!(!error_text(&err).contains(password), "{}", error_text(&err));
}
