//! Throwaway servers for tests that do not run under cargo (the Python package's tests).
//!
//! `agent-memory-test-servers postgres redis` starts each named server with the testkit's
//! fixtures, prints one `NAME=URL` line per server on stdout, and keeps them running until its
//! standard input closes; then it stops them and exits. The testkit's watchdogs stop the
//! servers too if this process is killed. Names: `postgres`, `redis`, `redis-cluster`.
//!
//! A server that cannot start fails as the fixtures do: a message naming what to install
//! (loudly under `CI=true`), and a non-zero exit.

use std::any::Any;
use std::io::{Read, Write};

use agent_memory_testkit::postgres::PostgresServer;
use agent_memory_testkit::redis::{RedisCluster, RedisServer};

fn main() {
    let mut servers: Vec<Box<dyn Any>> = Vec::new();
    let mut out = std::io::stdout().lock();
    for name in std::env::args().skip(1) {
        let url = match name.as_str() {
            "postgres" => keep(&mut servers, PostgresServer::start(), PostgresServer::url),
            "redis" => keep(&mut servers, RedisServer::start(), RedisServer::url),
            "redis-cluster" => keep(&mut servers, RedisCluster::start(), RedisCluster::url),
            other => {
                eprintln!("agent-memory-test-servers: unknown server {other:?} (postgres, redis, redis-cluster)");
                std::process::exit(2);
            }
        };
        writeln!(out, "{name}={url}").and_then(|()| out.flush()).expect("stdout is writable");
    }
    drop(out);
    // Until the caller closes our stdin (or exits): then the servers drop and stop.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(servers);
}

fn keep<S: Any>(servers: &mut Vec<Box<dyn Any>>, server: S, url: fn(&S) -> String) -> String {
    let url = url(&server);
    servers.push(Box::new(server));
    url
}
