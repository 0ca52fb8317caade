//! A load generator for the remote MCP server, run by hand in release mode:
//!
//! ```text
//! cargo build --release -p agent-memory-cli --bin agent-memory --example mcp_http_load
//! cargo run --release -p agent-memory-cli --example mcp_http_load -- [--clients 16] [--calls 2000] [--binary PATH]
//! ```
//!
//! On one SQLite file in a temporary folder it runs `memory_get` and `memory_save`, each
//! `--calls` times from each of `--clients` concurrent clients (one user each, 100 keys per
//! user, preloaded), twice:
//!
//! 1. **direct**: the library's tool dispatcher (`agent_memory::tools::dispatch`) on a
//!    `ScopedMemory`, in this process: what an application embedding the library pays;
//! 2. **http**: the same calls as MCP `tools/call` requests to `agent-memory mcp --listen` (the
//!    release binary next to this example, or `--binary`), each client on its own keep-alive
//!    connection with its own API key: what the server adds (HTTP, authentication, rate limit,
//!    rmcp, JSON-RPC).
//!
//! For comparison it also sends `GET /healthz` the same way: hyper and axum, without
//! authentication or rmcp (the store's answer is kept for a second, so nearly every one is
//! answered without a store read).
//!
//! Then it repeats everything with a single client, where latency is not queueing behind the other
//! clients. It prints calls per second and the p50 and p99 latency of each, and the difference
//! of the p50s; it asserts nothing. The clients share the machine's cores with the server, so
//! on a small machine the HTTP figures include the client's own work.
//!
//! On Linux it also prints CPU time per call (from `/proc/PID/stat`), which stays meaningful
//! when other work shares the machine and wall-clock figures do not: for the direct runs this
//! process's (the library's work and the loop around it), for the HTTP runs the server
//! process's and, separately, this client process's.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::{tools, MemoryScope, MemoryStore, ScopedMemory};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{json, Value};

type Error = Box<dyn std::error::Error + Send + Sync>;

const APP: &str = "bench";
const KEYS_PER_USER: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Get,
    Save,
    /// `GET /healthz`: hyper and axum (the store's answer is cached), without authentication or
    /// rmcp; the baseline that shows what the MCP layer itself costs.
    Health,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Get => "memory_get",
            Op::Save => "memory_save",
            Op::Health => "healthz",
        }
    }

    /// The arguments of call `i`: a key of the user's 100, and for a save a ~200-byte content.
    fn arguments(self, client: usize, i: usize) -> Value {
        let key = format!("fact-{:03}", i % KEYS_PER_USER);
        match self {
            Op::Get | Op::Health => json!({"key": key}),
            Op::Save => json!({
                "key": key,
                "content": format!("client {client} call {i}: {}", "prefers metric units. ".repeat(8)),
            }),
        }
    }
}

/// Latencies of one run, its wall time, and the CPU seconds it cost: `(measured, client)`,
/// where `measured` is this process for a direct run and the server for an HTTP run.
struct Run {
    latencies: Vec<Duration>,
    wall: Duration,
    cpu: (Option<f64>, Option<f64>),
}

/// User plus system CPU time of process `pid` (`"self"` for this one) so far, in seconds.
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let user: f64 = fields.next()?.parse().ok()?;
    let system: f64 = fields.next()?.parse().ok()?;
    Some((user + system) / 100.0) // clock ticks; 100 per second on Linux
}

/// The CPU seconds `pid` spent while `run` ran.
async fn measured<F: std::future::Future<Output = Result<Run, Error>>>(
    pid: &str,
    run: F,
) -> Result<Run, Error> {
    let (before, client_before) = (cpu_seconds(pid), cpu_seconds("self"));
    let mut result = run.await?;
    let spent = |before: Option<f64>, pid: &str| Some(cpu_seconds(pid)? - before?);
    result.cpu =
        (spent(before, pid), if pid == "self" { None } else { spent(client_before, "self") });
    Ok(result)
}

impl Run {
    fn report(&self, label: &str) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        // The nearest-rank percentile, in whole percent.
        let at = |percent: usize| sorted[(sorted.len() - 1) * percent / 100];
        let (p50, p99) = (at(50), at(99));
        let calls = sorted.len() as f64;
        let per_call = |cpu: Option<f64>| {
            cpu.map_or_else(|| "-".to_owned(), |s| format!("{:.0}", s / calls * 1e6))
        };
        println!(
            "{label:<22} {:>8.0} calls/s   p50 {:>6.3} ms   p99 {:>6.3} ms   cpu/call {:>4} µs{}",
            calls / self.wall.as_secs_f64(),
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            per_call(self.cpu.0),
            self.cpu
                .1
                .map_or_else(String::new, |_| format!(" (client {} µs)", per_call(self.cpu.1))),
        );
        p50
    }
}

/// The clients of one run, each a task returning its calls' latencies, and when they started.
struct Clients {
    started: Instant,
    tasks: Vec<tokio::task::JoinHandle<Result<Vec<Duration>, String>>>,
}

impl Clients {
    fn start() -> Self {
        Self { started: Instant::now(), tasks: Vec::new() }
    }

    fn spawn(
        &mut self,
        client: impl std::future::Future<Output = Result<Vec<Duration>, String>> + Send + 'static,
    ) {
        self.tasks.push(tokio::spawn(client));
    }

    /// Every client's latencies, once all have finished: the run, timed from the start.
    async fn joined(self) -> Result<Run, Error> {
        let mut latencies = Vec::new();
        for task in self.tasks {
            latencies.extend(task.await??);
        }
        Ok(Run { latencies, wall: self.started.elapsed(), cpu: (None, None) })
    }
}

fn scope(client: usize) -> Result<MemoryScope, Error> {
    Ok(MemoryScope::new(APP, format!("bench-user-{client:02}"))?)
}

async fn direct(
    store: &Arc<dyn MemoryStore>,
    op: Op,
    clients: usize,
    calls: usize,
) -> Result<Run, Error> {
    let mut run = Clients::start();
    for client in 0..clients {
        let memory = ScopedMemory::new(Arc::clone(store), scope(client)?);
        run.spawn(async move {
            let mut latencies = Vec::with_capacity(calls);
            for i in 0..calls {
                let arguments = op.arguments(client, i);
                let t = Instant::now();
                tools::dispatch(&memory, op.name(), &arguments).await.map_err(|e| e.to_string())?;
                latencies.push(t.elapsed());
            }
            Ok(latencies)
        });
    }
    run.joined().await
}

async fn http(
    addr: &str,
    keys: &[String],
    op: Op,
    clients: usize,
    calls: usize,
) -> Result<Run, Error> {
    let mut run = Clients::start();
    for (client, key) in keys.iter().enumerate().take(clients) {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let io = hyper_util::rt::TokioIo::new(stream);
        let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
        tokio::spawn(connection);
        let authorization = format!("Bearer {key}");
        let host = addr.to_owned();
        run.spawn(async move {
            let mut latencies = Vec::with_capacity(calls);
            for i in 0..calls {
                let body = json!({
                    "jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": op.name(), "arguments": op.arguments(client, i)},
                });
                let request = if op == Op::Health {
                    hyper::Request::get("/healthz")
                } else {
                    hyper::Request::post("/mcp")
                };
                let request = request
                    .header("host", &host)
                    .header("authorization", &authorization)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2025-06-18")
                    .body(Full::new(Bytes::from(body.to_string())))
                    .map_err(|e| e.to_string())?;
                let t = Instant::now();
                sender.ready().await.map_err(|e| e.to_string())?;
                let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
                let status = response.status();
                let bytes =
                    response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
                latencies.push(t.elapsed());
                if op == Op::Health {
                    if !status.is_success() {
                        return Err(format!("GET /healthz: {status}"));
                    }
                    continue;
                }
                let reply: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
                if !status.is_success() || reply["result"]["isError"] != false {
                    return Err(format!("call failed ({status}): {reply}"));
                }
            }
            Ok(latencies)
        });
    }
    run.joined().await
}

/// Makes one API key per client with the binary's `api-key add`.
fn make_keys(binary: &Path, file: &Path, clients: usize) -> Result<Vec<String>, Error> {
    (0..clients)
        .map(|client| {
            let out = Command::new(binary)
                .args(["api-key", "add", "--file"])
                .arg(file)
                .args(["--user", &format!("bench-user-{client:02}")])
                .output()?;
            if !out.status.success() {
                return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
            }
            Ok(String::from_utf8(out.stdout)?.trim().to_owned())
        })
        .collect()
}

/// Starts the server and returns it with its `host:port`, read from its stderr.
fn start_server(binary: &Path, store: &str, keys: &Path) -> Result<(Child, String), Error> {
    let mut child = Command::new(binary)
        .args(["--store", store, "--app", APP, "mcp", "--listen", "127.0.0.1:0", "--api-keys"])
        .arg(keys)
        .args(["--rate-limit", "1000000/s", "--max-concurrent", "64"])
        .env_remove("AGENT_MEMORY_LOG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads the address, then keeps draining stderr so the server never blocks on it.
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on http://").nth(1) {
                let _ = tx.send(rest.trim_end_matches("/mcp").to_owned());
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(30)).map_err(|_| "the server did not start")?;
    Ok((child, addr))
}

struct Args {
    clients: usize,
    calls: usize,
    binary: PathBuf,
}

fn args() -> Result<Args, Error> {
    let exe = std::env::current_exe()?;
    let default_binary = exe.parent().and_then(Path::parent).map(|dir| dir.join("agent-memory"));
    let mut args = Args { clients: 16, calls: 2000, binary: default_binary.ok_or("no binary")? };
    let mut argv = std::env::args().skip(1);
    while let Some(flag) = argv.next() {
        let value = argv.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--clients" => args.clients = value.parse()?,
            "--calls" => args.calls = value.parse()?,
            "--binary" => args.binary = value.into(),
            _ => return Err(format!("unknown option {flag}").into()),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let Args { clients, calls, binary } = args()?;
    if !binary.exists() {
        return Err(format!("{} not found: build it with --release first", binary.display()).into());
    }
    let dir = tempfile::tempdir()?;
    let store_url = format!("sqlite:{}", dir.path().join("bench.db").display());
    let key_file = dir.path().join("keys.jsonl");
    let keys = make_keys(&binary, &key_file, clients)?;

    println!("{clients} clients × {calls} calls per operation, SQLite, loopback");
    let mut results = Vec::new();
    for concurrency in [clients, 1] {
        let store = agent_memory::open(&store_url)?;
        store.start().await?;
        // Preload every key, so every get finds a record.
        direct(&store, Op::Save, clients, KEYS_PER_USER).await?;
        let direct_get = measured("self", direct(&store, Op::Get, concurrency, calls)).await?;
        let direct_save = measured("self", direct(&store, Op::Save, concurrency, calls)).await?;
        store.close().await?;

        let (mut server, addr) = start_server(&binary, &store_url, &key_file)?;
        let pid = server.id().to_string();
        let http_get = measured(&pid, http(&addr, &keys, Op::Get, concurrency, calls)).await;
        let http_save = measured(&pid, http(&addr, &keys, Op::Save, concurrency, calls)).await;
        let health = measured(&pid, http(&addr, &keys, Op::Health, concurrency, calls)).await;
        let _ = Command::new("kill").arg("-TERM").arg(server.id().to_string()).status();
        let _ = server.wait();
        results.push((concurrency, [direct_get, direct_save, http_get?, http_save?, health?]));
    }
    for (concurrency, [direct_get, direct_save, http_get, http_save, health]) in &results {
        println!("\n{concurrency} concurrent client(s):");
        let dg = direct_get.report("direct memory_get");
        let hg = http_get.report("http   memory_get");
        let ds = direct_save.report("direct memory_save");
        let hs = http_save.report("http   memory_save");
        println!(
            "server adds to p50: memory_get {:+.3} ms, memory_save {:+.3} ms",
            (hg.as_secs_f64() - dg.as_secs_f64()) * 1e3,
            (hs.as_secs_f64() - ds.as_secs_f64()) * 1e3,
        );
        health.report("http   GET /healthz");
    }
    Ok(())
}
