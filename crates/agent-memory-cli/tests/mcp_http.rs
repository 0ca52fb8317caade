//! End-to-end tests of `agent-memory mcp --listen`: the built binary serving Streamable HTTP on
//! a loopback port, driven by the official MCP Python SDK (`tests/mcp_http_client.py`, run with
//! the interpreter named by `AGENT_MEMORY_TEST_PYTHON`; `.ci/run` creates that virtual
//! environment). Each scenario starts its own servers; the SIGTERM scenario runs on SQLite and
//! on the testkit's PostgreSQL. The other tests here check the command line itself: the
//! `api-key` commands and the options `--listen` refuses.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{exited, json_lines, Fixture, Listening, INVALID, NOT_FOUND, OK};

const BINARY: &str = env!("CARGO_BIN_EXE_agent-memory");

fn python() -> PathBuf {
    agent_memory_testkit::util::python(
        "The MCP HTTP end-to-end tests need a Python with the official MCP SDK and PyJWT",
        "create one with\n  python3 -m venv ~/.cache/agent-memory/ci-venv && \
         ~/.cache/agent-memory/ci-venv/bin/pip install 'mcp>=1.30,<2' 'pyjwt[crypto]>=2.8,<3'\n\
         and run\n  export AGENT_MEMORY_TEST_PYTHON=~/.cache/agent-memory/ci-venv/bin/python\n\
         (.ci/run does both).",
    )
}

/// Runs one scenario of `mcp_http_client.py` against `store` and fails with its output unless
/// it passes.
fn scenario(name: &str, store: &str) {
    let python = python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("mcp_http_client.py");
    // A fresh application id per run, so runs sharing a PostgreSQL server never meet.
    let app = format!("http-{name}-{}", uuid::Uuid::new_v4().simple());
    let started = Instant::now();
    let mut cmd = Command::new(&python);
    cmd.arg(&script).args([name, BINARY, store, &app]);
    cmd.env_remove("AGENT_MEMORY_LOG").env_remove("RUST_LOG");
    let passed = format!("mcp http scenario {name} passed");
    let stdout = support::run_client(&mut cmd, &format!("scenario {name}"), &passed);
    eprintln!("scenario {name}: {:.1} s\n{stdout}", started.elapsed().as_secs_f64());
}

fn sqlite_store(dir: &tempfile::TempDir) -> String {
    format!("sqlite:{}", dir.path().join("http.db").display())
}

/// One test per scenario, each on a SQLite file of its own.
macro_rules! sqlite_scenarios {
    ($($test:ident: $name:literal,)*) => {
        $(
            #[test]
            fn $test() {
                let dir = tempfile::tempdir().expect("temp dir");
                scenario($name, &sqlite_store(&dir));
            }
        )*
    };
}

sqlite_scenarios! {
    two_users_through_one_server_see_only_their_own_memories: "isolation",
    search_options_and_metadata_filters_work_over_http: "search",
    a_revoked_key_is_refused_within_a_second_without_a_restart: "revoke",
    a_read_only_key_lists_and_runs_only_the_read_tools: "read-only",
    oauth_tokens_are_checked_for_signature_issuer_audience_and_time: "jwt",
    forged_hosts_big_bodies_and_bursts_are_refused_and_tls_works: "hardening",
    the_rate_limit_charges_the_work_of_a_directory_rename: "work",
    fifty_concurrent_clients_lose_and_cross_nothing: "load",
    sigterm_during_load_keeps_every_acknowledged_write_on_sqlite: "sigterm",
}

#[test]
fn sigterm_during_load_keeps_every_acknowledged_write_on_postgres() {
    scenario("sigterm", &agent_memory_testkit::postgres::shared_url());
}

/// Starts the binary with `args` and a private home, and reads its address.
fn listening(fx: &Fixture, args: &[&str]) -> Listening {
    Listening::start(support::server_command(&fx.path("home")).args(args), |line| {
        Some(line.to_owned())
    })
}

/// Waits up to `seconds` for `GET /healthz` to answer `status`.
fn await_health(server: &Listening, status: u16, seconds: u64) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        let got = server.status("/healthz");
        if got == status {
            return;
        }
        assert!(Instant::now() < deadline, "/healthz is {got}, not {status}, after {seconds} s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn healthz_answers_whether_the_store_does() {
    let mut postgres = agent_memory_testkit::postgres::PostgresServer::start();
    let url = postgres.url();
    let fx = Fixture::new();
    let keys = fx.path("keys.jsonl");
    std::fs::write(&keys, "").unwrap();
    let keys = keys.to_str().unwrap();
    let server = listening(
        &fx,
        &["--store", &url, "--app", "health", "mcp", "--listen", "127.0.0.1:0", "--api-keys", keys],
    );
    await_health(&server, 200, 10);
    assert_eq!(server.status("/mcp"), 401, "/mcp needs a credential, /healthz does not");
    postgres.stop();
    await_health(&server, 503, 20);
    postgres.start_again();
    await_health(&server, 200, 30);
    assert!(server.stop().success(), "SIGTERM is a clean exit");
}

/// Makes an API key for user `alice` of application `app` in the fixture's key file; returns
/// the file and the key.
fn alice_key(fx: &Fixture, app: &str) -> (String, String) {
    let file = fx.path("keys.jsonl").to_str().expect("UTF-8 path").to_owned();
    let out = fx
        .bare()
        .args(["--app", app, "--user", "alice", "api-key", "add", "--file", &file])
        .output()
        .expect("run");
    exited(&out, OK);
    let key = String::from_utf8(out.stdout).expect("UTF-8").trim_end().to_owned();
    (file, key)
}

/// A server for application `h2` on a fresh SQLite file, accepting alice's key, with `extra`
/// options; returns it and the key.
fn h2_server(fx: &Fixture, extra: &[&str]) -> (Listening, String) {
    let (keys, key) = alice_key(fx, "h2");
    let store = format!("sqlite:{}", fx.path("h2.db").display());
    let mut args = vec!["--store", &store, "--app", "h2", "mcp", "--listen", "127.0.0.1:0"];
    args.extend(["--api-keys", &keys]);
    args.extend(extra);
    (listening(fx, &args), key)
}

/// `GET /mcp` over HTTP/1.1 with `credential`: the status, and whether `Retry-After` was set.
fn get_mcp(addr: &str, credential: &str) -> (u16, bool) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "GET /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {credential}\r\n\
         Connection: close\r\n\r\n"
    )
    .expect("send");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let code = response.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    (code, response.to_ascii_lowercase().contains("retry-after:"))
}

/// A small runtime for the raw HTTP/2 clients.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// One raw HTTP/2 connection with prior knowledge (h2c), as a client that never closes it.
struct H2 {
    sender: h2::client::SendRequest<&'static [u8]>,
    /// Ends when the server closes the connection.
    connection: tokio::task::JoinHandle<()>,
}

impl H2 {
    async fn open(addr: &str) -> Result<Self, String> {
        let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|err| err.to_string())?;
        let (sender, connection) = h2::client::Builder::new()
            .handshake::<_, &'static [u8]>(tcp)
            .await
            .map_err(|err| err.to_string())?;
        let connection = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self { sender, connection })
    }

    /// `GET path`, with `Authorization: Bearer key` when given; the status.
    async fn get(&mut self, path: &str, key: Option<&str>) -> Result<u16, String> {
        let mut request = http::Request::get(format!("http://localhost{path}"));
        if let Some(key) = key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        let request = request.body(()).expect("request");
        let sender = self.sender.clone().ready().await.map_err(|err| err.to_string())?;
        let mut sender = sender;
        let (response, _) = sender.send_request(request, true).map_err(|err| err.to_string())?;
        let response = response.await.map_err(|err| err.to_string())?;
        Ok(response.status().as_u16())
    }

    /// `POST /mcp` with an MCP `initialize` request and `Authorization: Bearer key`; the
    /// status. HTTP/2 names the host in `:authority` only, never in a `Host` header.
    async fn initialize(&mut self, host: &str, key: &str) -> Result<u16, String> {
        const BODY: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h2","version":"1"}}}"#;
        let request = http::Request::post(format!("http://{host}/mcp"))
            .header("authorization", format!("Bearer {key}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(())
            .expect("request");
        let mut sender = self.sender.clone().ready().await.map_err(|err| err.to_string())?;
        let (response, mut body) =
            sender.send_request(request, false).map_err(|err| err.to_string())?;
        body.send_data(BODY, true).map_err(|err| err.to_string())?;
        let response = response.await.map_err(|err| err.to_string())?;
        Ok(response.status().as_u16())
    }

    /// Waits up to `within` for the server to close the connection; true when it did.
    async fn closed_within(&mut self, within: Duration) -> bool {
        tokio::time::timeout(within, &mut self.connection).await.is_ok()
    }
}

#[test]
fn cleartext_http2_is_refused_unless_asked_for() {
    let fx = Fixture::new();
    let (server, _) = h2_server(&fx, &[]);
    let outcome = block_on(async {
        let mut h2 = H2::open(&server.addr).await?;
        tokio::time::timeout(Duration::from_secs(10), h2.get("/healthz", None))
            .await
            .map_err(|_| "no answer".to_owned())?
    });
    assert!(outcome.is_err(), "h2c must be refused by default, got {outcome:?}");
    assert_eq!(server.status("/healthz"), 200, "HTTP/1.1 still works");
    assert!(server.stop().success());
}

#[test]
fn mcp_over_http2_reads_the_host_from_the_authority() {
    let fx = Fixture::new();
    let (server, key) = h2_server(&fx, &["--h2c"]);
    let (allowed, forged) = block_on(async {
        let mut h2 = H2::open(&server.addr).await.expect("h2c with --h2c");
        (h2.initialize("localhost", &key).await, h2.initialize("evil.example", &key).await)
    });
    assert_eq!(allowed, Ok(200), "an allowed :authority passes the Host check");
    assert_eq!(forged, Ok(403), "a forged :authority is refused like a forged Host");
    assert!(server.stop().success());
}

#[test]
fn idle_http2_connections_are_closed_and_failed_requests_keep_none_open() {
    let fx = Fixture::new();
    let (server, key) = h2_server(&fx, &["--h2c", "--idle-timeout", "2s"]);
    block_on(async {
        // An authenticated request (GET /mcp passes authentication, then gets 405), then
        // nothing: the server closes the connection after the idle timeout, not before.
        let mut h2 = H2::open(&server.addr).await.expect("h2c with --h2c");
        assert_eq!(h2.get("/mcp", Some(&key)).await, Ok(405));
        let started = Instant::now();
        assert!(h2.closed_within(Duration::from_secs(8)).await, "an idle h2 connection");
        assert!(started.elapsed() >= Duration::from_millis(1500), "closed too early");

        // Requests that fail authentication, sent steadily, do not keep a connection open.
        let mut h2 = H2::open(&server.addr).await.expect("h2c");
        let started = Instant::now();
        loop {
            match h2.get("/mcp", Some("amk_000000000000_0000")).await {
                Ok(status) => assert_eq!(status, 401),
                Err(_) => break,
            }
            assert!(started.elapsed() < Duration::from_secs(8), "still open after 8 s");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert!(h2.closed_within(Duration::from_secs(2)).await);
    });
    assert!(server.stop().success());
}

#[test]
fn connections_over_the_cap_wait_for_a_free_slot() {
    let fx = Fixture::new();
    let (server, key) =
        h2_server(&fx, &["--h2c", "--max-connections", "2", "--idle-timeout", "60s"]);
    block_on(async {
        let mut first = H2::open(&server.addr).await.expect("first");
        let mut second = H2::open(&server.addr).await.expect("second");
        assert_eq!(first.get("/mcp", Some(&key)).await, Ok(405));
        assert_eq!(second.get("/mcp", Some(&key)).await, Ok(405));

        // A third connection is not served while two are open...
        let addr = server.addr.clone();
        let key3 = key.clone();
        let mut third = tokio::spawn(async move {
            let mut h2 = H2::open(&addr).await?;
            h2.get("/mcp", Some(&key3)).await
        });
        let waited = tokio::time::timeout(Duration::from_secs(2), &mut third).await;
        assert!(waited.is_err(), "served over the cap: {waited:?}");

        // ...and is served once one of them closes.
        first.connection.abort();
        drop(first);
        let served = tokio::time::timeout(Duration::from_secs(10), third).await;
        assert_eq!(served.expect("served in time").expect("task"), Ok(405));
        assert_eq!(second.get("/mcp", Some(&key)).await, Ok(405), "the others stay served");
    });
    assert!(server.stop().success());
}

#[test]
fn a_peer_that_keeps_failing_authentication_is_refused_before_it() {
    let fx = Fixture::new();
    let (server, key) = h2_server(&fx, &["--peer-failure-limit", "3/s"]);
    let status = |credential: &str| get_mcp(&server.addr, credential);
    assert_eq!(status(&key).0, 405, "a valid key passes");
    let statuses: Vec<u16> = (0..6).map(|_| status("amk_000000000000_0000").0).collect();
    assert_eq!(&statuses[..3], &[401, 401, 401], "{statuses:?}");
    assert!(statuses[3..].iter().all(|&code| code == 429), "{statuses:?}");
    assert_eq!(status("amk_000000000000_0000"), (429, true));
    // The allowance refills.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(status(&key).0, 405);
    assert!(server.stop().success());
}

#[test]
fn a_key_made_for_another_application_is_refused() {
    let fx = Fixture::new();
    let (server, ours) = h2_server(&fx, &[]);
    let file = fx.path("keys.jsonl");
    let add = |app: Option<&str>| {
        let mut cmd = fx.bare();
        if let Some(app) = app {
            cmd.args(["--app", app]);
        }
        let out = cmd
            .args(["--user", "alice", "api-key", "add", "--file", file.to_str().unwrap()])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(OK));
        String::from_utf8(out.stdout).expect("UTF-8").trim_end().to_owned()
    };
    let theirs = add(Some("other-app"));
    let any = add(None);
    let status = |key: &str| get_mcp(&server.addr, key).0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while status(&any) != 405 {
        assert!(Instant::now() < deadline, "the key naming no application is not accepted");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status(&ours), 405, "a key made for this application");
    assert_eq!(status(&theirs), 401, "a key made for another application");
    let listed = json_lines(
        &fx.bare()
            .args(["--json", "api-key", "list", "--file", file.to_str().unwrap()])
            .output()
            .unwrap()
            .stdout,
    );
    let apps: Vec<&Value> = listed.iter().map(|entry| &entry["app"]).collect();
    assert_eq!(apps, [&Value::from("h2"), &Value::from("other-app"), &Value::Null]);
    assert!(server.stop().success());
}

#[test]
fn api_key_add_prints_the_key_once_and_stores_only_its_hash() {
    let fx = Fixture::new();
    let file = fx.path("keys.jsonl");
    let file_arg = file.to_str().expect("UTF-8 path");
    let out = fx
        .bare()
        .args(["api-key", "add", "--file", file_arg, "--user", "u-1", "--label", "ci"])
        .output()
        .expect("run");
    exited(&out, OK);
    let key = String::from_utf8(out.stdout).expect("UTF-8");
    let key = key.strip_suffix('\n').expect("one line");
    assert!(key.starts_with("amk_") && !key.contains('\n'), "{key}");
    let mode = std::fs::metadata(&file).expect("key file").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let stored = std::fs::read_to_string(&file).expect("read");
    assert!(!stored.contains(key) && !stored.contains(key.rsplit('_').next().unwrap()));
    // No store was opened or created.
    assert!(!fx.path("home").join("data").exists());

    fx.bare()
        .args(["api-key", "add", "--file", file_arg, "--user", "u-2", "--namespace", "n"])
        .arg("--read-only")
        .assert()
        .code(OK);
    let listed = json_lines(
        &fx.bare().args(["--json", "api-key", "list", "--file", file_arg]).output().unwrap().stdout,
    );
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["user"], "u-1");
    assert_eq!(listed[0]["label"], "ci");
    assert_eq!(listed[1]["namespace"], "n");
    assert_eq!(listed[1]["read_only"], true);
    let human = fx.bare().args(["api-key", "list", "--file", file_arg]).output().unwrap();
    let human = String::from_utf8(human.stdout).unwrap();
    assert!(human.starts_with("ID") && human.contains("read-only"), "{human}");
    assert!(!human.contains(key), "list never shows a key");

    let id = listed[0]["id"].as_str().expect("id").to_owned();
    fx.bare().args(["api-key", "revoke", "--file", file_arg, &id]).assert().code(OK);
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let again = fx.bare().args(["--json", "api-key", "revoke", "--file", file_arg, &id]).output();
    let again = json_lines(&again.unwrap().stdout);
    assert_eq!(again[0]["already"], true, "revoking twice is a no-op");
    let listed = json_lines(
        &fx.bare().args(["--json", "api-key", "list", "--file", file_arg]).output().unwrap().stdout,
    );
    assert!(listed[0]["revoked_at"].is_number() && listed[1]["revoked_at"].is_null());
    fx.bare()
        .args(["api-key", "revoke", "--file", file_arg, "000000000000"])
        .assert()
        .code(NOT_FOUND);
}

#[test]
fn api_key_add_refuses_bad_input_and_writes_nothing() {
    let fx = Fixture::new();
    let file = fx.path("keys.jsonl");
    let file_arg = file.to_str().expect("UTF-8 path");
    for args in [
        vec!["api-key", "add", "--file", file_arg],
        vec!["api-key", "add", "--file", file_arg, "--user", ""],
        vec!["api-key", "add", "--file", file_arg, "--user", "u\u{7}"],
        vec!["api-key", "add", "--file", file_arg, "--user", "u", "--label", "a\nb"],
        // The id space of token users.
        vec!["api-key", "add", "--file", file_arg, "--user", "oidc:alice"],
    ] {
        fx.bare().args(&args).assert().code(INVALID);
        assert!(!file.exists(), "{args:?} created the key file");
    }
    std::fs::write(&file, "not json\n").unwrap();
    fx.bare().args(["api-key", "add", "--file", file_arg, "--user", "u"]).assert().code(INVALID);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "not json\n",
        "a garbled file is left alone"
    );
}

#[test]
fn listen_takes_the_user_from_credentials_only() {
    let fx = Fixture::new();
    let keys = fx.path("keys.jsonl");
    std::fs::write(&keys, "").unwrap();
    let keys = keys.to_str().unwrap();
    let listen = ["mcp", "--listen", "127.0.0.1:0"];
    let refused: Vec<Vec<&str>> = vec![
        // The user and namespace are never flags of the HTTP server.
        vec!["--app", "a", "--user", "u", "--api-keys", keys],
        vec!["--app", "a", "--namespace", "n", "--api-keys", keys],
        // An application and a credential source are required.
        vec!["--api-keys", keys],
        vec!["--app", "a"],
        // Options that need others.
        vec!["--app", "a", "--jwt-issuer", "https://i"],
        vec!["--app", "a", "--api-keys", keys, "--tls-cert", "c.pem"],
        vec!["--app", "a", "--api-keys", keys, "--rate-limit", "0/s"],
        vec!["--app", "a", "--api-keys", keys, "--rate-limit", "fast"],
        vec!["--app", "a", "--api-keys", keys, "--public-url", "memory.example"],
        // Files that cannot be used stop the server before it listens.
        vec!["--app", "a", "--api-keys", "/nonexistent/keys.jsonl"],
    ];
    for args in refused {
        let mut cmd = fx.with_store();
        let (globals, rest): (Vec<&str>, Vec<&str>) = split_globals(&args);
        cmd.args(&globals).args(listen).args(&rest);
        let out = cmd.output().expect("run");
        assert_eq!(
            out.status.code(),
            Some(INVALID),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // HTTP options without --listen are usage errors; stdio stays as it was.
    fx.with_store()
        .args(["--app", "a", "--user", "u", "mcp", "--api-keys", keys])
        .assert()
        .code(INVALID);
    let garbled = fx.path("garbled.jsonl");
    std::fs::write(&garbled, "{\"id\":\n").unwrap();
    let out = fx
        .with_store()
        .args(["--app", "a", "mcp", "--listen", "127.0.0.1:0", "--api-keys"])
        .arg(&garbled)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(INVALID));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 1"), "names the line: {stderr}");
    // None of the refused starts opened, let alone created, the store.
    assert!(!fx.path("m.db").exists(), "a refused start created the store");
}

/// Splits test arguments into the global options (before `mcp`) and the `mcp` options.
fn split_globals<'a>(args: &[&'a str]) -> (Vec<&'a str>, Vec<&'a str>) {
    let mut globals = Vec::new();
    let mut rest = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let target = if matches!(*arg, "--app" | "--user" | "--namespace") {
            &mut globals
        } else {
            &mut rest
        };
        target.push(*arg);
        if let Some(value) = iter.next() {
            target.push(*value);
        }
    }
    (globals, rest)
}
