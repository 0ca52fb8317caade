//! End-to-end: `agent-memory mcp --listen … --metrics` serves the store's metrics in
//! Prometheus's text format, beside `/mcp` or (with `--metrics-listen`) on an address of its
//! own, and `--log-format json` writes one JSON object per log line.

mod support;

use support::{http_get, Fixture, Listening};

/// A server started by a test, logging JSON lines at `info`.
struct Server(Listening);

impl Server {
    fn start(fx: &Fixture, extra: &[&str]) -> Self {
        let keys = fx.path("keys.jsonl");
        std::fs::write(&keys, "").unwrap();
        let store = format!("sqlite:{}", fx.path("metrics.db").display());
        let mut cmd = support::server_command(&fx.path("home"));
        cmd.env("AGENT_MEMORY_LOG", "info")
            .args(["--store", &store, "--app", "metrics", "--log-format", "json", "mcp"])
            .args(["--listen", "127.0.0.1:0", "--api-keys", keys.to_str().unwrap()])
            .args(extra);
        // With --log-format json, the line is an object like every other on stderr.
        Self(Listening::start(&mut cmd, |line| {
            let object = serde_json::from_str::<serde_json::Value>(line).ok()?;
            object["fields"]["message"].as_str().map(str::to_owned)
        }))
    }

    fn addr(&self) -> &str {
        &self.0.addr
    }

    /// SIGTERM, then every stderr line.
    fn stop(self) -> Vec<String> {
        let (status, lines) = self.0.stop_and_read();
        assert!(status.success(), "SIGTERM is a clean exit");
        lines
    }
}

/// A loopback address no one listens on right now.
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// The duration histogram's series for SQLite `get`s that succeeded.
const GET_BUCKETS: &str = "db_client_operation_duration_seconds_bucket{db_system_name=\"sqlite\",db_operation_name=\"get\",outcome=\"ok\"";

#[test]
fn metrics_beside_mcp_show_the_store_operations() {
    let fx = Fixture::new();
    let server = Server::start(&fx, &["--metrics"]);
    // The health probe reads the store once: one `get`.
    assert_eq!(http_get(server.addr(), "/healthz").0, 200);
    let (status, body) = http_get(server.addr(), "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(GET_BUCKETS), "{body}");
    assert!(body.contains("# TYPE db_client_operation_duration_seconds histogram"), "{body}");
    assert!(body.contains("# HELP db_client_operation_duration_seconds"), "{body}");
    let count = body
        .lines()
        .find(|line| {
            line.starts_with("db_client_operation_duration_seconds_count{")
                && line.contains("db_operation_name=\"get\"")
        })
        .expect("a count for get");
    assert!(count.ends_with(" 1"), "{count}");
    assert!(!body.contains("healthz"), "no id or key in the metrics: {body}");
    // The /mcp route still wants a credential; /metrics does not.
    assert_eq!(http_get(server.addr(), "/mcp").0, 401);

    let lines = server.stop();
    assert!(!lines.is_empty());
    for line in lines.iter().filter(|line| line.starts_with('{')) {
        let object: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
        assert!(object["level"].is_string() && object["fields"].is_object(), "{line}");
    }
    assert!(
        lines.iter().any(|line| line.starts_with('{') && line.contains("MCP server starting")),
        "{lines:?}"
    );
}

#[test]
fn healthz_reads_the_store_at_most_once_a_second() {
    let fx = Fixture::new();
    let server = Server::start(&fx, &["--metrics"]);
    for _ in 0..40 {
        assert_eq!(http_get(server.addr(), "/healthz").0, 200);
    }
    let (_, body) = http_get(server.addr(), "/metrics");
    let gets: u64 = body
        .lines()
        .find(|line| {
            line.starts_with("db_client_operation_duration_seconds_count{")
                && line.contains("db_operation_name=\"get\"")
        })
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .expect("a count for get");
    // 40 requests within a second or two: one read, two if they straddled a second.
    assert!((1..=3).contains(&gets), "{gets} store reads for 40 health checks");
    server.stop();
}

#[test]
fn metrics_listen_serves_them_on_their_own_address_only() {
    let fx = Fixture::new();
    let metrics = free_address();
    let server = Server::start(&fx, &["--metrics-listen", &metrics]);
    assert_eq!(http_get(server.addr(), "/healthz").0, 200);
    assert_eq!(http_get(server.addr(), "/metrics").0, 404, "not beside /mcp");
    let (status, body) = http_get(&metrics, "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(GET_BUCKETS), "{body}");
    server.stop();
}

#[test]
fn metrics_options_need_listen() {
    let fx = Fixture::new();
    for args in [vec!["mcp", "--metrics"], vec!["mcp", "--metrics-listen", "127.0.0.1:9"]] {
        let out = fx.bare().args(["--app", "a", "--user", "u"]).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(support::INVALID), "{args:?}");
    }
}

#[test]
fn json_logs_show_operations_with_hashed_ids_only_when_asked_for() {
    let fx = Fixture::new();
    let run = |key: Option<&str>| {
        let mut cmd = fx.bare();
        cmd.env("AGENT_MEMORY_LOG", "agent_memory=info").args(["--log-format", "json"]);
        if let Some(key) = key {
            cmd.env("AGENT_MEMORY_ID_HASH_KEY", key);
        }
        let store = fx.store.clone();
        let out = cmd
            .args(["--store", &store, "--app", "app-secret", "--user", "user-secret"])
            .args(["put", "key-secret", "content-secret"])
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };

    let (code, stderr) = run(None);
    assert_eq!(code, Some(support::OK), "{stderr}");
    let lines: Vec<serde_json::Value> =
        stderr.lines().map(|line| serde_json::from_str(line).expect("JSON")).collect();
    let put = lines
        .iter()
        .find(|line| line["span"]["name"] == "put")
        .unwrap_or_else(|| panic!("a line for the put: {stderr}"));
    assert_eq!(put["span"]["db.system.name"], "sqlite");
    assert!(put["span"].get("agent_memory.user_id.hash").is_none(), "{put}");
    assert!(!stderr.contains("secret"), "{stderr}");

    let (code, stderr) = run(Some("a key of sixteen bytes or more"));
    assert_eq!(code, Some(support::OK), "{stderr}");
    assert!(stderr.contains("agent_memory.user_id.hash"), "{stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");

    let (code, stderr) = run(Some("short"));
    assert_eq!(code, Some(support::INVALID), "{stderr}");
    assert!(stderr.contains("AGENT_MEMORY_ID_HASH_KEY") && !stderr.contains("short"), "{stderr}");
}
