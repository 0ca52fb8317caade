//! Reading URLs and checking options.

use super::*;

const PASSWORD: &str = "pw-Zq8-never-shown";

fn builder(url: &str) -> RedisMemoryStoreBuilder {
    RedisMemoryStoreBuilder::from_url(url).unwrap_or_else(|err| panic!("{url}: {err}"))
}

fn tcp(info: &ConnectionInfo) -> (&str, u16) {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) => (host.as_str(), *port),
        other => panic!("not TCP: {other:?}"),
    }
}

#[test]
fn a_single_server_url_lands_in_one_connection_info() {
    let parsed = builder(&format!("redis://us%40r:{PASSWORD}%3A@db.internal:6380/3"));
    let Endpoint::Single(info) = &parsed.endpoint else { panic!("not single") };
    assert_eq!(tcp(info), ("db.internal", 6380));
    let settings = info.redis_settings();
    assert_eq!(settings.db(), 3);
    assert_eq!(settings.username(), Some("us@r"));
    assert_eq!(settings.password(), Some(format!("{PASSWORD}:").as_str()));

    for url in ["redis://127.0.0.1", "redis://127.0.0.1/", "REDIS://127.0.0.1:6379/0"] {
        let Endpoint::Single(info) = builder(url).endpoint else { panic!("not single") };
        assert_eq!(tcp(&info), ("127.0.0.1", 6379), "{url}");
        let settings = info.redis_settings();
        assert_eq!((settings.db(), settings.username(), settings.password()), (0, None, None));
    }
    let Endpoint::Single(info) = builder("redis://[::1]:7000").endpoint else { panic!() };
    assert_eq!(tcp(&info), ("::1", 7000));
    builder("redis://h").build().expect("a single-server store builds");
}

#[test]
fn a_cluster_url_gives_every_seed_the_same_credentials() {
    let url = format!("redis+cluster://ops:{PASSWORD}@10.0.0.1:7000,10.0.0.2:7001, [::1]/0");
    let parsed = builder(&url);
    let Endpoint::Cluster(seeds) = &parsed.endpoint else { panic!("not a cluster") };
    let addresses: Vec<(&str, u16)> = seeds.iter().map(tcp).collect();
    assert_eq!(addresses, [("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 6379)]);
    for seed in seeds {
        let settings = seed.redis_settings();
        assert_eq!(settings.username(), Some("ops"));
        assert_eq!(settings.password(), Some(PASSWORD));
        assert_eq!(settings.db(), 0);
    }
    parsed.build().expect("the cluster client builds without connecting");
    for path in ["", "/"] {
        builder(&format!("redis+cluster://h:1{path}"));
    }
}

#[test]
fn every_parameter_sets_the_option_of_its_name() {
    for base in ["redis://h/2", "redis+cluster://h:1,h:2"] {
        let url = format!(
            "{base}?require_durable=true&response_timeout=3&connect_timeout=2\
             &erase_batch_size=7&list_scan_limit=200&search_scan_limit=9\
             &search_scan_bytes=4096"
        );
        let options = builder(&url).options;
        assert!(options.require_durable);
        assert_eq!(options.response_timeout, Duration::from_secs(3));
        assert_eq!(options.connect_timeout, Duration::from_secs(2));
        assert_eq!(options.common.erase_batch_size, 7);
        assert_eq!(options.list_scan_limit, 200);
        assert_eq!(options.common.search_scan_limit, 9);
        assert_eq!(options.common.search_scan_bytes, 4_096);
    }
    let defaults = builder("redis://h").options;
    assert!(!defaults.require_durable);
    assert_eq!(defaults.response_timeout, DEFAULT_RESPONSE_TIMEOUT);
    assert_eq!(defaults.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
    assert_eq!(defaults.common.erase_batch_size, DEFAULT_ERASE_BATCH_SIZE);
    assert_eq!(defaults.list_scan_limit, DEFAULT_LIST_SCAN_LIMIT);
    assert_eq!(defaults.common.search_scan_limit, DEFAULT_SEARCH_SCAN_LIMIT);
    assert_eq!(defaults.common.search_scan_bytes, crate::provider::DEFAULT_SEARCH_SCAN_BYTES);
    // A builder method overrides the URL.
    let options = builder("redis://h?erase_batch_size=7").erase_batch_size(8).options;
    assert_eq!(options.common.erase_batch_size, 8);
    assert!(!builder("redis://h?require_durable=off").options.require_durable);
}

#[test]
fn an_unknown_or_malformed_parameter_is_invalid_naming_it() {
    // The names before ADR 0004 are unknown now, not ignored.
    for old in ["list_scan", "search_scan", "erase_batch", "connection_timeout", "protocol"] {
        let err = RedisMemoryStoreBuilder::from_url(&format!("redis://h/0?{old}=5")).unwrap_err();
        assert_eq!(err.to_string(), format!("invalid url: has an unknown parameter `{old}`"));
    }
    let err = RedisMemoryStoreBuilder::from_url("redis+cluster://h:1?tabel=x").unwrap_err();
    assert_eq!(err.to_string(), "invalid url: has an unknown parameter `tabel`");
    for (url, name) in [
        ("redis://h?connect_timeout=1.5", "connect_timeout"),
        ("redis://h?erase_batch_size=-1", "erase_batch_size"),
        ("redis://h?require_durable=maybe", "require_durable"),
    ] {
        let err = RedisMemoryStoreBuilder::from_url(url).unwrap_err();
        assert_eq!(err.invalid_field(), Some("url"));
        assert!(err.to_string().contains(&format!("`{name}`")), "{err}");
    }
}

#[test]
fn zero_and_out_of_range_values_are_invalid_naming_the_option() {
    let set = |b: RedisMemoryStoreBuilder| {
        b.build()
            .err()
            .map(|err| err.invalid_field().unwrap_or_else(|| panic!("not Invalid: {err}")))
    };
    let b = || builder("redis://h");
    assert_eq!(set(b().response_timeout(Duration::ZERO)), Some("response_timeout"));
    assert_eq!(set(b().connect_timeout(Duration::ZERO)), Some("connect_timeout"));
    assert_eq!(set(b().erase_batch_size(0)), Some("erase_batch_size"));
    assert_eq!(set(b().list_scan_limit(100)), Some("list_scan_limit"));
    assert_eq!(set(b().search_scan_limit(0)), Some("search_scan_limit"));
    assert_eq!(set(b().search_scan_bytes(0)), Some("search_scan_bytes"));
    assert_eq!(set(b().list_scan_limit(101).erase_batch_size(1).search_scan_limit(1)), None);
    for (param, option) in [
        ("response_timeout=0", "response_timeout"),
        ("connect_timeout=0", "connect_timeout"),
        ("erase_batch_size=0", "erase_batch_size"),
        ("list_scan_limit=1", "list_scan_limit"),
        ("search_scan_limit=0", "search_scan_limit"),
        ("search_scan_bytes=0", "search_scan_bytes"),
    ] {
        let err = builder(&format!("redis://h?{param}")).build().unwrap_err();
        assert_eq!(err.invalid_field(), Some(option), "{param}");
    }
}

#[test]
fn rediss_urls_use_tls_on_every_seed_and_take_redis_cli_flags() {
    let parsed = builder(&format!(
        "rediss://acl-user:{PASSWORD}@cache.example:6380/2?cacert=/ca.pem&cert=/c.pem\
         &key=/k.pem&insecure=false"
    ));
    let Endpoint::Single(info) = &parsed.endpoint else { panic!("not single") };
    assert!(matches!(
        info.addr(),
        ConnectionAddr::TcpTls { host, port: 6380, insecure: false, .. } if host == "cache.example"
    ));
    assert_eq!(info.redis_settings().username(), Some("acl-user"));
    assert_eq!(info.redis_settings().db(), 2);
    let tls = &parsed.options.tls;
    assert_eq!(tls.cacert.as_deref(), Some(std::path::Path::new("/ca.pem")));
    assert_eq!((tls.cert.is_some(), tls.key.is_some(), tls.insecure), (true, true, false));

    let cluster = builder("rediss+cluster://h1:7000,h2:7001?insecure=true");
    let endpoint = cluster.endpoint.clone().insecure();
    let Endpoint::Cluster(seeds) = &endpoint else { panic!("not a cluster") };
    assert!(seeds
        .iter()
        .all(|seed| matches!(seed.addr(), ConnectionAddr::TcpTls { insecure: true, .. })));
    cluster.build().expect("an insecure cluster needs no file");
    builder("rediss://h").build().expect("the system's CAs need no file");

    // TLS settings need a TLS scheme; files must exist, and come in pairs.
    for (url, named) in [
        ("redis://h?cacert=/ca.pem", "url"),
        ("redis+cluster://h:1?insecure=true", "url"),
        ("rediss://h?cacert=/nonexistent/ca.pem", "cacert"),
        ("rediss://h?cert=/nonexistent/c.pem", "key"),
        ("rediss://h?key=/nonexistent/k.pem", "cert"),
        ("rediss://h?cert=/nonexistent/c.pem&key=/nonexistent/k.pem", "cert"),
    ] {
        let err = builder(url).build().unwrap_err();
        assert_eq!(err.invalid_field(), Some(named), "{url}: {err}");
        assert!(!err.to_string().contains("nonexistent"), "{err}");
    }
    let err = RedisMemoryStoreBuilder::from_url("rediss://h?insecure=maybe").unwrap_err();
    assert!(err.to_string().contains("`insecure`"), "{err}");
}

#[test]
fn malformed_urls_are_invalid_and_the_password_shows_nowhere() {
    for bad in [
        format!("redis+cluster://:{PASSWORD}@"),
        format!("rediss+cluster://:{PASSWORD}@"),
        format!("redis+cluster://:{PASSWORD}@127.0.0.1:7000/3"),
        format!("redis+cluster://:{PASSWORD}@127.0.0.1:7000,,127.0.0.1:7001"),
        format!("redis://:{PASSWORD}@127.0.0.1:notaport"),
        format!("redis://:{PASSWORD}@127.0.0.1/x"),
        format!("redis://:{PASSWORD}@127.0.0.1/-1"),
        format!("redis://:{PASSWORD}@a:1,b:2"),
        format!("redis://:{PASSWORD}@0.0.0.0"),
        format!("redis://:{PASSWORD}@"),
        format!("redis:{PASSWORD}"),
        format!("memcached://:{PASSWORD}@h"),
    ] {
        let err = RedisMemoryStoreBuilder::from_url(&bad).expect_err(&bad);
        assert!(err.is_invalid(), "{bad}: {err}");
        assert!(!format!("{err} {err:?}").contains(PASSWORD), "{bad}: {err}");
    }

    for url in [
        format!("redis://admin:{PASSWORD}@127.0.0.1:6379/1?connect_timeout=1"),
        format!("redis+cluster://admin:{PASSWORD}@127.0.0.1:7000,127.0.0.1:7001"),
        format!("rediss://admin:{PASSWORD}@127.0.0.1:6379/1?insecure=true"),
        format!("rediss+cluster://admin:{PASSWORD}@127.0.0.1:7000,127.0.0.1:7001"),
    ] {
        let parsed = builder(&url);
        let shown = format!("{parsed:?}");
        assert!(!shown.contains(PASSWORD), "{shown}");
        assert!(shown.contains("127.0.0.1"), "{shown}");
        let store = parsed.build().unwrap();
        assert!(!format!("{store:?}").contains(PASSWORD));
    }
}
