//! What the Redis Cluster tests share.

use agent_memory::{MemoryScope, MemoryStore, MemoryWrite};

use super::apps::fresh_scope;

/// Writes the record `k` for 64 users, each in a fresh application `{prefix}-…`, and returns
/// their scopes: enough users that every master of a three-master cluster holds some of them
/// (a master is missed with probability 3 * (2/3)^64).
pub async fn users_on_every_master(store: &dyn MemoryStore, prefix: &str) -> Vec<MemoryScope> {
    let scopes: Vec<MemoryScope> =
        (0..64).map(|i| fresh_scope(prefix, &format!("user-{i}"))).collect();
    for scope in &scopes {
        store.put(scope, "k", MemoryWrite::new("v")).await.expect("put");
    }
    scopes
}
