//! The benchmark harness of agent-memory: the standard memory-store workload (WORKLOAD.md)
//! against any store `agent_memory::open` accepts, with the same workload's ceilings measured
//! beside it and a scale run that adds two million records held by other users.
//!
//! - [`workload`]: the SplitMix64 generator, the content text, the preload and every phase's op
//!   list, with the fingerprints that prove they match the reference generator.
//! - [`runner`]: C workers pulling op indices from one shared counter, each store call timed
//!   client-side; nearest-rank percentiles; throughput over the time from releasing the workers
//!   to the last one finishing.
//! - [`ceiling`]: pgbench and redis-benchmark with our own scripts of the same shapes.
//! - [`ceiling::sqlite`]: the SQLite provider's statements on bare rusqlite connections.
//! - [`harness`]: the run order (empty state, preload, settle, phases, checks, ceiling, scale).
//! - [`report`]: JSON lines and the table.
//! - [`target`]: store URLs (provider, redaction, pool size).
//! - [`hostile`]: the hostile search, how long one `search` call can hold the server.
//!
//! The binary `agent-memory-bench` is the way in; `--help` lists its options.

pub mod ceiling;
pub mod harness;
pub mod hostile;
pub mod report;
pub mod runner;

pub mod target;
pub mod workload;
