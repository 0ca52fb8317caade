//! Throwaway servers for agent-memory's tests: real PostgreSQL and Redis (and a three-master
//! Redis Cluster), plain or with TLS, and a PgBouncer in transaction mode, started on random
//! loopback ports in temporary directories, stopped when dropped or when the test process exits.
//! TLS fixtures use certificates generated for the test process ([`tls`]).
//!
//! Each fixture first honours an environment variable naming an existing server
//! (`AGENT_MEMORY_TEST_POSTGRES_URL`, `AGENT_MEMORY_TEST_REDIS_URL`), and otherwise starts its
//! own from the binaries `scripts/test` installs. Under `CI=true` a fixture that cannot get a
//! server panics: backend tests never pass silently. The ports, failures and watchdogs all
//! fixtures share are in [`util`].

pub mod pgbouncer;
pub mod postgres;
pub mod redis;
pub mod tls;
pub mod util;
