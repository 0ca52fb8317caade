//! Reading URLs and checking options.

use tokio_postgres::config::{ChannelBinding, LoadBalanceHosts, TargetSessionAttrs};

use super::*;

fn builder(url: &str) -> PostgresMemoryStoreBuilder {
    PostgresMemoryStore::builder(url).unwrap_or_else(|err| panic!("{url}: {err}"))
}

fn tcp(hosts: &[&str]) -> Vec<Host> {
    hosts.iter().map(|h| Host::Tcp((*h).to_owned())).collect()
}

#[test]
fn store_params_are_split_from_driver_params() {
    let b = builder("postgres://u:p%3Fw@h:5/db?table=t1&connect_timeout=3&max_connections=4");
    assert_eq!(b.config.get_user(), Some("u"));
    assert_eq!(b.config.get_password(), Some(&b"p?w"[..]));
    assert_eq!(b.config.get_hosts(), tcp(&["h"]));
    assert_eq!(b.config.get_ports(), [5]);
    assert_eq!(b.config.get_dbname(), Some("db"));
    assert_eq!(b.options.connect_timeout, Duration::from_secs(3));
    assert_eq!(b.table, "t1");
    assert_eq!(b.options.max_connections, 4);
    let store = PostgresMemoryStore::from_url(
        "postgres://u:hunter2@h/db?table=t1&max_connections=4&setup_schema=false",
    )
    .unwrap();
    assert_eq!(store.names.table(), "\"public\".\"t1\"");
    assert_eq!(store.options.max_connections, 4);
    assert!(!store.options.setup_schema);
    assert!(!format!("{store:?}").contains("hunter2"));
}

#[test]
fn bad_configuration_is_invalid_and_never_echoes_the_url() {
    let err = PostgresMemoryStore::from_url("postgres://u:hunter2@h:notaport/db").unwrap_err();
    assert!(err.is_invalid());
    assert!(!err.to_string().contains("hunter2"));
    let err = PostgresMemoryStore::builder("postgres://h/db").unwrap().table("a\"b").build();
    assert!(err.unwrap_err().is_invalid());
    let err = PostgresMemoryStore::builder("postgres://h/db")
        .unwrap()
        .min_connections(5)
        .max_connections(2)
        .build();
    assert!(err.unwrap_err().is_invalid());
}

#[test]
fn multi_host_urls_pair_each_host_with_its_port() {
    let b = builder("postgresql://app@db1.internal:5433,db2.internal,[::1]:5435/memories");
    assert_eq!(b.config.get_hosts(), tcp(&["db1.internal", "db2.internal", "::1"]));
    assert_eq!(b.config.get_ports(), [5433, 5432, 5435]);
    assert_eq!(b.config.get_dbname(), Some("memories"));
    assert_eq!(b.config.get_user(), Some("app"));

    // Query hosts and ports replace the URL's, as in libpq.
    let b = builder("postgres://h1:5000/db?host=h2,h3&port=5440,");
    assert_eq!(b.config.get_hosts(), tcp(&["h2", "h3"]));
    assert_eq!(b.config.get_ports(), [5440, 5432]);
    let b = builder("postgres://h1,h2/db?port=6000");
    assert_eq!(b.config.get_ports(), [6000], "one port serves every host");
    let b = builder("postgres:///db?hostaddr=10.0.0.1,10.0.0.2&port=1,2");
    assert!(b.config.get_hosts().is_empty());
    assert_eq!(b.config.get_hostaddrs().len(), 2);

    for bad in [
        "postgres://h1,,h2/db",
        "postgres://h1,/db",
        "postgres:///db?host=a,,b",
        "postgres://h1,h2,h3/db?port=1,2",
        "postgres://h1,h2/db?hostaddr=10.0.0.1",
    ] {
        let err = PostgresMemoryStore::builder(bad).unwrap_err();
        assert_eq!(err.invalid_field(), Some("url"), "{bad}");
    }
}

#[cfg(unix)]
#[test]
fn unix_socket_directories_are_hosts() {
    use std::path::PathBuf;

    let b = builder("postgres://%2Fvar%2Frun%2Fpostgresql/db");
    assert_eq!(b.config.get_hosts(), [Host::Unix(PathBuf::from("/var/run/postgresql"))]);
    let b = builder("postgres:///db?host=/tmp/pg&user=me");
    assert_eq!(b.config.get_hosts(), [Host::Unix(PathBuf::from("/tmp/pg"))]);
    assert!(b.config.get_ports().is_empty(), "no port named: the driver's default");
    assert_eq!(b.config.get_user(), Some("me"));
}

#[test]
fn each_store_parameter_sets_its_option() {
    let b = builder(
        "postgres://h/db?schema=s1&table=t1&min_connections=3&max_connections=9\
         &setup_schema=off&connect_timeout=4&acquire_timeout=7&search_scan_limit=50\
         &erase_batch_size=25&search_scan_bytes=4096&write_batch_max=5\
         &write_connections=2",
    );
    assert_eq!((b.schema.as_str(), b.table.as_str()), ("s1", "t1"));
    let o = &b.options;
    assert_eq!((o.min_connections, o.max_connections), (3, 9));
    assert!(!o.setup_schema);
    assert_eq!(o.connect_timeout, Duration::from_secs(4));
    assert_eq!(o.acquire_timeout, Duration::from_secs(7));
    assert_eq!((o.common.search_scan_limit, o.common.erase_batch_size), (50, 25));
    assert_eq!(o.common.search_scan_bytes, 4_096);
    assert_eq!((o.write_batch_max, o.write_connections), (5, Some(2)));
    let store = b.build().expect("in range");
    assert_eq!(store.names.table(), "\"s1\".\"t1\"");

    let defaults = builder("postgres://h/db").options;
    assert_eq!(defaults.min_connections, DEFAULT_MIN_CONNECTIONS);
    assert_eq!(defaults.max_connections, DEFAULT_MAX_CONNECTIONS);
    assert_eq!(defaults.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
    assert_eq!(defaults.acquire_timeout, DEFAULT_ACQUIRE_TIMEOUT);
    assert!(defaults.setup_schema);
    assert_eq!(defaults.common.search_scan_limit, DEFAULT_SEARCH_SCAN_LIMIT);
    assert_eq!(defaults.common.search_scan_bytes, crate::provider::DEFAULT_SEARCH_SCAN_BYTES);
    assert_eq!(defaults.common.erase_batch_size, DEFAULT_ERASE_BATCH_SIZE);
    assert_eq!(defaults.write_batch_max, DEFAULT_WRITE_BATCH_MAX);
    assert_eq!(defaults.write_connections, None);
    assert_eq!(defaults.write_connections(), 4, "a quarter of the default pool of 16");
    let small = Options { max_connections: 3, ..Options::default() };
    assert_eq!(small.write_connections(), 1, "at least one");
    let set = Options { write_connections: Some(16), ..Options::default() };
    assert_eq!(set.write_connections(), 16, "as set");

    // The builder overrides the URL.
    let b = builder("postgres://h/db?connect_timeout=4").connect_timeout(Duration::from_secs(1));
    assert_eq!(b.options.connect_timeout, Duration::from_secs(1));
}

#[test]
fn quota_parameters_set_the_quotas_and_zero_is_invalid() {
    let b = builder("postgres://h/db?max_records_per_user=7&max_bytes_per_user=4096");
    assert_eq!(
        b.options.common.quotas,
        crate::quota::Quotas::default().max_records_per_user(7).max_bytes_per_user(4096)
    );
    for (url, option) in [
        ("postgres://h/db?max_records_per_user=0", "max_records_per_user"),
        ("postgres://h/db?max_bytes_per_user=0", "max_bytes_per_user"),
    ] {
        let err = PostgresMemoryStore::from_url(url).unwrap_err();
        assert!(matches!(err, MemoryError::Invalid { field, .. } if field == option), "{url}");
    }
    let err = PostgresMemoryStore::from_url("postgres://h/db?max_records_per_user=many");
    assert!(err.unwrap_err().to_string().contains("`max_records_per_user`"));
}

#[test]
fn driver_parameters_land_on_the_config() {
    let b = builder(
        "postgres://u:pw@h/db?application_name=a%20b&options=-c%20statement_timeout%3D5s\
         &sslmode=disable&user=other&password=pw2&dbname=db2&hostaddr=10.0.0.7&port=6000\
         &keepalives=0&keepalives_idle=30&keepalives_interval=5&keepalives_retries=4\
         &tcp_user_timeout=9&target_session_attrs=read-write&channel_binding=require\
         &load_balance_hosts=random",
    );
    let c = &b.config;
    assert_eq!(c.get_application_name(), Some("a b"));
    assert_eq!(c.get_options(), Some("-c statement_timeout=5s"));
    assert_eq!(b.tls.mode, Some(SslMode::Disable));
    assert_eq!(c.get_user(), Some("other"), "a query user replaces the URL's");
    assert_eq!(c.get_password(), Some(&b"pw2"[..]));
    assert_eq!(c.get_dbname(), Some("db2"));
    assert_eq!(c.get_hostaddrs(), ["10.0.0.7".parse::<IpAddr>().unwrap()]);
    assert_eq!(c.get_hosts(), tcp(&["h"]));
    assert_eq!(c.get_ports(), [6000], "a query port replaces the URL's");
    assert!(!c.get_keepalives());
    assert_eq!(c.get_keepalives_idle(), Duration::from_secs(30));
    assert_eq!(c.get_keepalives_interval(), Some(Duration::from_secs(5)));
    assert_eq!(c.get_keepalives_retries(), Some(4));
    assert_eq!(c.get_tcp_user_timeout(), Some(&Duration::from_secs(9)));
    assert_eq!(c.get_target_session_attrs(), TargetSessionAttrs::ReadWrite);
    assert_eq!(c.get_channel_binding(), ChannelBinding::Require);
    assert_eq!(c.get_load_balance_hosts(), LoadBalanceHosts::Random);

    // The TLS parameters are the store's (see `tls_parameters_follow_libpq`).
    let b = builder("postgres://h/db?sslmode=require");
    assert_eq!(b.tls.mode, Some(SslMode::Require));
    // Zero keepalive durations mean the system default, as in libpq.
    let c = builder("postgres://h/db?keepalives_idle=0&keepalives_interval=0&tcp_user_timeout=0")
        .config;
    let fresh = tokio_postgres::Config::new();
    assert_eq!(c.get_keepalives_idle(), fresh.get_keepalives_idle());
    assert_eq!(c.get_keepalives_interval(), None);
    assert_eq!(c.get_tcp_user_timeout(), None);
}

#[test]
fn unknown_and_malformed_parameters_are_invalid_naming_the_parameter() {
    let err = PostgresMemoryStore::builder("postgres://h/db?table=t&tabel=x").unwrap_err();
    assert_eq!(err.to_string(), "invalid url: has an unknown parameter `tabel`");
    // The libpq parameters the store does not support, and old names.
    for name in ["sslnegotiation", "sslpassword", "sslcrl", "gssencmode", "delete_batch_size"] {
        let err = PostgresMemoryStore::builder(&format!("postgres://h/db?{name}=x")).unwrap_err();
        assert_eq!(err.to_string(), format!("invalid url: has an unknown parameter `{name}`"));
    }
    for (param, named) in [
        ("max_connections=many", "max_connections"),
        ("connect_timeout=-1", "connect_timeout"),
        ("acquire_timeout=1.5", "acquire_timeout"),
        ("setup_schema=maybe", "setup_schema"),
        ("sslmode=verify_full", "sslmode"),
        ("sslmode=allow", "sslmode"),
        ("prepared_statements=sometimes", "prepared_statements"),
        ("target_session_attrs=primary", "target_session_attrs"),
        ("channel_binding=on", "channel_binding"),
        ("load_balance_hosts=yes", "load_balance_hosts"),
        ("hostaddr=db.internal", "hostaddr"),
        ("port=99999", "port"),
        ("keepalives=on", "keepalives"),
        ("keepalives_retries=-2", "keepalives_retries"),
    ] {
        let err = PostgresMemoryStore::builder(&format!("postgres://h/db?{param}")).unwrap_err();
        assert_eq!(err.invalid_field(), Some("url"), "{param}");
        assert!(err.to_string().contains(&format!("`{named}`")), "{param}: {err}");
    }
    // Not a postgres:// URL, including the driver's key=value form.
    for bad in ["host=h user=u dbname=db", "postgres:db", "redis://h/0", "postgres//h/db"] {
        let err = PostgresMemoryStore::builder(bad).unwrap_err();
        assert_eq!(err.invalid_field(), Some("url"), "{bad}");
    }
}

#[test]
fn tls_parameters_follow_libpq() {
    let b = builder(
        "postgres://h/db?sslmode=verify-full&sslrootcert=/etc/ca.pem&sslcert=/c.pem\
         &sslkey=/k.pem&prepared_statements=false",
    );
    assert_eq!(b.tls.mode, Some(SslMode::VerifyFull));
    assert_eq!(b.tls.root_cert, Some(RootCert::File("/etc/ca.pem".into())));
    assert_eq!(b.tls.cert.as_deref(), Some(std::path::Path::new("/c.pem")));
    assert_eq!(b.tls.key.as_deref(), Some(std::path::Path::new("/k.pem")));
    assert!(!b.options.prepared_statements);
    assert!(builder("postgres://h/db").options.prepared_statements);
    for mode in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
        let b = builder(&format!("postgres://h/db?sslmode={mode}"));
        assert_eq!(b.tls.mode.map(SslMode::as_str), Some(mode));
    }
    assert_eq!(builder("postgres://h/db?sslrootcert=system").tls.root_cert, Some(RootCert::System));

    // The default is prefer; with no root certificate it only encrypts.
    let store = builder("postgres://h/db").build().unwrap();
    assert_eq!(store.tls.mode, SslMode::Prefer);
    assert_eq!(store.config.get_ssl_mode(), tokio_postgres::config::SslMode::Prefer);
    let store =
        builder("postgres://h/db?sslmode=verify-ca&sslrootcert=/x").ssl_mode(SslMode::Disable);
    let store = store.build().expect("disable reads no file");
    assert_eq!(store.config.get_ssl_mode(), tokio_postgres::config::SslMode::Disable);

    // Combinations libpq refuses, refused before anything connects.
    for (url, field_name) in [
        ("postgres://h/db?sslmode=require&sslrootcert=system", "sslmode"),
        ("postgres://h/db?sslmode=verify-ca&sslrootcert=system", "sslmode"),
        ("postgres://h/db?sslmode=disable&sslrootcert=system", "sslmode"),
        ("postgres://h/db?sslmode=verify-full", "sslmode"),
        ("postgres://h/db?sslmode=verify-ca", "sslmode"),
        ("postgres://h/db?sslkey=/k.pem", "sslkey"),
        ("postgres://h/db?sslrootcert=/nonexistent/ca.pem", "sslrootcert"),
        ("postgres://h/db?sslcert=/nonexistent/c.pem&sslkey=/nonexistent/k.pem", "sslcert"),
    ] {
        let err = builder(url).build().unwrap_err();
        assert_eq!(err.invalid_field(), Some(field_name), "{url}: {err}");
        assert!(!err.to_string().contains("nonexistent"), "{err}");
    }
    // libpq's host rules: no TLS on Unix sockets; hostaddr alone gives no name to verify.
    let store = builder("postgres:///db?host=/run/postgresql&sslmode=require").build().unwrap();
    assert_eq!(store.config.get_ssl_mode(), tokio_postgres::config::SslMode::Disable);
    let store = builder("postgres:///db?hostaddr=10.0.0.1&sslmode=require").build().unwrap();
    assert_eq!(store.config.get_hosts(), tcp(&["10.0.0.1"]));
    let err = builder("postgres:///db?hostaddr=10.0.0.1&sslmode=verify-full&sslrootcert=system");
    assert_eq!(err.build().unwrap_err().invalid_field(), Some("sslmode"));
    // Builder methods set the same things.
    let b = builder("postgres://h/db")
        .ssl_mode(SslMode::Require)
        .ssl_root_cert_system()
        .prepared_statements(false);
    assert_eq!(b.build().unwrap_err().invalid_field(), Some("sslmode"));
}

#[test]
fn zero_and_out_of_range_values_name_the_option() {
    let base = || builder("postgres://h/db");
    let cases: [(&str, PostgresMemoryStoreBuilder); 12] = [
        ("max_connections", base().max_connections(0)),
        ("max_connections", base().max_connections(usize::MAX)),
        ("min_connections", base().min_connections(17)),
        ("connect_timeout", base().connect_timeout(Duration::ZERO)),
        ("acquire_timeout", base().acquire_timeout(Duration::ZERO)),
        ("search_scan_limit", base().search_scan_limit(0)),
        ("search_scan_bytes", base().search_scan_bytes(0)),
        ("erase_batch_size", base().erase_batch_size(0)),
        ("write_batch_max", base().write_batch_max(0)),
        ("write_connections", base().write_connections(0)),
        ("write_connections", base().max_connections(4).write_connections(5)),
        ("schema", base().schema("")),
    ];
    for (option, configured) in cases {
        assert_eq!(configured.build().unwrap_err().invalid_field(), Some(option));
    }
    for option in [
        "max_connections",
        "connect_timeout",
        "acquire_timeout",
        "search_scan_limit",
        "search_scan_bytes",
        "erase_batch_size",
        "write_batch_max",
        "write_connections",
    ] {
        let err = PostgresMemoryStore::from_url(&format!("postgres://h/db?{option}=0"));
        assert_eq!(err.unwrap_err().invalid_field(), Some(option));
    }
    assert!(base().max_connections(MAX_POOL_SIZE).min_connections(0).build().is_ok());
}

#[test]
fn the_password_is_never_in_debug_output_or_error_messages() {
    let password = "hunter2-secret";
    let url = format!("postgres://me:{password}@h1,h2:5433/db?password={password}x");
    let b = builder(&url);
    assert!(!format!("{b:?}").contains(password), "{b:?}");
    let store = b.build().unwrap();
    assert!(!format!("{store:?}").contains(password), "{store:?}");
    for suffix in [
        "&max_connections=0",
        "&max_connections=hunter2-secret",
        "&sslmode=hunter2-secret",
        "&hostaddr=hunter2-secret",
        "&table=hunter2-secret",
    ] {
        let err = PostgresMemoryStore::from_url(&format!("{url}{suffix}")).unwrap_err();
        for text in [err.to_string(), format!("{err:?}")] {
            assert!(!text.contains(password), "{suffix}: {text}");
        }
    }
    let err = PostgresMemoryStore::from_url(&format!("postgres://me:{password}@h:x/db"));
    assert!(!format!("{:?}", err.unwrap_err()).contains(password));
}
