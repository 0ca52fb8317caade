//! The CLI on Redis: an unreachable server fails within the connect timeout and a read never
//! says a write may have committed; the durability warning belongs to `setup` and the servers.

use std::time::{Duration, Instant};

mod support;

use support::{assert_one_line_error, Fixture, FAILURE, OK};

/// A port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

#[test]
fn an_unreachable_redis_fails_within_the_connect_timeout_and_reads_say_no_write() {
    let fx = Fixture::new();
    let port = closed_port();
    for (url, limit) in [
        (format!("redis://127.0.0.1:{port}?connect_timeout=1"), Duration::from_millis(2_500)),
        (format!("redis://127.0.0.1:{port}"), Duration::from_millis(6_500)),
    ] {
        let started = Instant::now();
        let mut get = fx.on(&url, "u1");
        get.args(["get", "k"]);
        assert_one_line_error(&mut get, FAILURE, "Redis", &url);
        assert!(started.elapsed() < limit, "{url}: took {:?}", started.elapsed());
        let out = fx.on(&url, "u1").args(["get", "k"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("may have committed"), "a read: {stderr}");
    }
}

#[test]
fn the_durability_warning_is_for_setup_not_for_every_call() {
    let fx = Fixture::new();
    // No persistence at all: the store warns that it can lose acknowledged writes.
    let server = agent_memory_testkit::redis::RedisServer::start();
    let url = server.url();
    let setup = fx.bare().args(["--store", &url, "setup"]).output().unwrap();
    assert_eq!(setup.status.code(), Some(OK));
    let stderr = String::from_utf8_lossy(&setup.stderr);
    assert!(stderr.contains("lose or evict"), "setup shows the warning: {stderr}");
    for args in [&["put", "k", "v"][..], &["get", "k"][..], &["list"][..]] {
        let out = fx.on(&url, "u1").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(OK), "{args:?}");
        assert!(out.stderr.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
