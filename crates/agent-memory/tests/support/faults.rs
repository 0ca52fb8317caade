//! What every fault test writes and checks, whatever the provider: ids, contents and metadata
//! that name the write that produced them.
//!
//! # What "present and intact" means
//!
//! Each key is written by one task only, one write at a time, and every write carries its own id
//! in its metadata (content and metadata are a function of the id), so the record found
//! afterwards names the write that produced it. A `Storage` error means the write may or may not
//! have committed, so for each key, with its writes in the order they were made:
//!
//! - the record found must be the key's **last acknowledged** write (same content, metadata and
//!   revision), or a write made **after** it that failed with `Storage` (it committed, the
//!   acknowledgement was lost); anything older means an acknowledged write was lost;
//! - a key with no acknowledged write may be absent, or hold one of its failed writes;
//! - each task's counter, incremented with compare-and-set, ends between the number of
//!   acknowledged increments and that plus the increments that failed with `Storage`.

use serde_json::{json, Value};

/// The counter key of one task.
pub fn counter_key(task: usize) -> String {
    format!("t{task:02}-counter")
}

/// The content of a (non-counter) write: a function of the key and the write id.
pub fn data_content(key: &str, id: &str) -> String {
    format!("{key} written by {id}: {}", "payload ".repeat(12))
}

/// The id a record names in its metadata.
pub fn write_id_of(metadata: &agent_memory::Metadata) -> Option<&str> {
    metadata.get("write").and_then(Value::as_str)
}

pub fn data_metadata(id: &str, task: usize) -> Value {
    json!({ "write": id, "task": task })
}

pub fn counter_metadata(id: &str, task: usize, count: u64) -> Value {
    json!({ "write": id, "task": task, "count": count })
}
