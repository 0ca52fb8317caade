//! The durability check `start()` runs: can this deployment lose or evict acknowledged writes?

use redis::Value;

/// What [`RedisMemoryStore::start`](crate::MemoryStore::start) found out about the persistence
/// and eviction settings of the Redis deployment (every master, on a cluster).
///
/// The deployment counts as durable when every master has the append-only file on
/// (`appendonly yes`) with `appendfsync always` or `everysec`, and a `maxmemory-policy` that
/// never evicts keys without an expiry (`noeviction` or a `volatile-*` policy: this provider
/// sets no expiry on any key). With `everysec`, a crash of the Redis process loses nothing (the
/// file is written before the reply is sent); a crash of the whole machine can lose about the
/// last second. Replication is asynchronous, so a failover can also lose the last writes a
/// master acknowledged; that is a property of Redis replication this check cannot see.
///
/// A setting that could not be read (`CONFIG GET` renamed or denied, as on many managed
/// services, or an `INFO` without the persistence section) is a problem of its own kind: the
/// report is then not [verified](Self::is_verified), and not durable either, since nothing
/// confirmed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurabilityReport {
    nodes: usize,
    problems: Vec<&'static str>,
}

/// appendonly is off.
pub(crate) const AOF_OFF: &str = "appendonly is off: writes since the last RDB snapshot (all of \
     them, when snapshots are off too) are lost when Redis restarts";
/// appendfsync no.
pub(crate) const FSYNC_NO: &str = "appendfsync is `no`: the operating system decides when writes \
     reach the disk, so a machine crash can lose acknowledged writes";
/// allkeys-* eviction.
pub(crate) const EVICTS: &str = "maxmemory-policy is an allkeys-* policy: Redis evicts records \
     under memory pressure";
/// `CONFIG GET` refused (renamed away or denied by an ACL, as managed services do).
pub(crate) const CONFIG_REFUSED: &str = "CONFIG GET appendfsync was refused (managed services \
     often rename or deny CONFIG), so whether the append-only file is synced to disk could not \
     be verified";
/// `INFO` refused or unreadable.
pub(crate) const UNKNOWN: &str = "INFO was refused or did not show the persistence settings, so \
     durability could not be verified";

impl DurabilityReport {
    /// True when every setting could be read and none can lose or evict acknowledged writes.
    /// A deployment whose settings could not be read is not durable by this test: nothing
    /// confirmed it.
    pub fn is_durable(&self) -> bool {
        self.problems.is_empty()
    }

    /// False when some setting could not be read (`CONFIG GET` or `INFO` refused, as on many
    /// managed services), so the report could not confirm durability either way; the
    /// [`problems`](Self::problems) say which.
    pub fn is_verified(&self) -> bool {
        !self.problems.iter().any(|problem| is_unverified(problem))
    }

    /// Each distinct problem found, as a fixed sentence.
    pub fn problems(&self) -> &[&'static str] {
        &self.problems
    }

    /// How many servers (masters) were inspected.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Builds the report from each node's `INFO` text and `CONFIG GET appendfsync` reply
    /// (`None` where the command failed).
    pub(crate) fn from_nodes(nodes: Vec<(Option<String>, Option<Value>)>) -> Self {
        let mut problems = Vec::new();
        let count = nodes.len();
        for (info, fsync) in nodes {
            for problem in node_problems(info.as_deref(), fsync.as_ref()) {
                if !problems.contains(&problem) {
                    problems.push(problem);
                }
            }
        }
        if count == 0 {
            problems.push(UNKNOWN);
        }
        Self { nodes: count, problems }
    }

    /// Logs the outcome: a warning per problem, or one informational line.
    pub(crate) fn log(&self) {
        if self.is_durable() {
            tracing::info!(nodes = self.nodes, "redis persistence settings are durable");
        }
        for problem in &self.problems {
            if is_unverified(problem) {
                tracing::warn!(
                    nodes = self.nodes,
                    "could not verify that the redis deployment keeps acknowledged memories: \
                     {problem}"
                );
            } else {
                tracing::warn!(
                    nodes = self.nodes,
                    "redis deployment can lose or evict acknowledged memories: {problem}"
                );
            }
        }
    }
}

/// Whether a problem says a setting could not be read, rather than that it is unsafe.
fn is_unverified(problem: &str) -> bool {
    problem == UNKNOWN || problem == CONFIG_REFUSED
}

fn node_problems(info: Option<&str>, fsync: Option<&Value>) -> Vec<&'static str> {
    let Some(info) = info else {
        return vec![UNKNOWN];
    };
    let field = |name: &str| {
        info.lines().find_map(|line| line.trim_end().strip_prefix(name)?.strip_prefix(':'))
    };
    let mut problems = Vec::new();
    match field("aof_enabled") {
        Some("1") => match fsync.and_then(config_value).as_deref() {
            Some("always" | "everysec") => {}
            Some(_) => problems.push(FSYNC_NO),
            None => problems.push(CONFIG_REFUSED),
        },
        Some(_) => problems.push(AOF_OFF),
        None => problems.push(UNKNOWN),
    }
    match field("maxmemory_policy") {
        Some(policy) if policy.starts_with("allkeys-") => problems.push(EVICTS),
        Some(_) => {}
        None => problems.push(UNKNOWN),
    }
    problems
}

/// The value of a one-parameter `CONFIG GET` reply: `[name, value]` in RESP2, a map in RESP3.
fn config_value(reply: &Value) -> Option<String> {
    let value = match reply {
        Value::Array(items) => items.get(1)?,
        Value::Map(pairs) => &pairs.first()?.1,
        _ => return None,
    };
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fsync(value: &str) -> Option<Value> {
        Some(Value::Array(vec![
            Value::BulkString(b"appendfsync".to_vec()),
            Value::BulkString(value.as_bytes().to_vec()),
        ]))
    }

    fn info(aof: u8, policy: &str) -> Option<String> {
        Some(format!(
            "# Persistence\r\naof_enabled:{aof}\r\n# Memory\r\nmaxmemory_policy:{policy}\r\n"
        ))
    }

    #[test]
    fn aof_with_fsync_and_no_eviction_is_durable() {
        let report = DurabilityReport::from_nodes(vec![
            (info(1, "noeviction"), fsync("always")),
            (info(1, "volatile-lru"), fsync("everysec")),
        ]);
        assert!(report.is_durable(), "{report:?}");
        assert_eq!(report.nodes(), 2);
    }

    #[test]
    fn each_risk_is_reported_once() {
        let report = DurabilityReport::from_nodes(vec![
            (info(0, "allkeys-lru"), fsync("everysec")),
            (info(0, "noeviction"), fsync("no")),
            (info(1, "noeviction"), fsync("no")),
            (None, None),
        ]);
        assert_eq!(report.problems(), &[AOF_OFF, EVICTS, FSYNC_NO, UNKNOWN]);
        assert!(!report.is_durable());
        assert!(!report.is_verified());
    }

    #[test]
    fn a_refused_config_get_is_unverified_not_unsafe() {
        let report = DurabilityReport::from_nodes(vec![(info(1, "noeviction"), None)]);
        assert_eq!(report.problems(), &[CONFIG_REFUSED]);
        assert!(!report.is_durable() && !report.is_verified());
        // With the AOF off, INFO alone shows the risk: no CONFIG needed.
        let report = DurabilityReport::from_nodes(vec![(info(0, "noeviction"), None)]);
        assert_eq!(report.problems(), &[AOF_OFF]);
        assert!(report.is_verified());
    }
}
