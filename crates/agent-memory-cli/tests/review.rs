//! End-to-end tests of the review page (`mcp --listen … --review-key-file FILE`): the built
//! binary on a loopback port with a SQLite and a PostgreSQL store, seeded through the library,
//! links minted by the library and the `review-link` command, and the page driven in headless
//! Chromium by `tests/review_browser.py` (Playwright, run with the interpreter named by
//! `AGENT_MEMORY_TEST_PYTHON`; `scripts/test` installs both). After the browser erased one
//! user, the library checks that nothing of theirs is left and the other user is untouched.
//!
//! The screenshots of docs/review-page.md and the latency figure come from the two ignored
//! tests at the end (`cargo test -p agent-memory-cli --test review -- --ignored`).

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use agent_memory::review::{review_link, ReviewSecret};
use agent_memory::{MemoryScope, MemoryStore, MemoryWrite, PageRequest};
use serde_json::{json, Value};

const BINARY: &str = env!("CARGO_BIN_EXE_agent-memory");
const SECRET: &str = "5f0c8a9d2b7e41c6a3d8e9f01b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e";
const ROTATED: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f905f0c8a9d2b7e41c6a3d8e9f01b2c3d4e";
const HOSTILE_KEY: &str = "<img src=x onerror=window.__pwned=3>";
const HOSTILE_CONTENT: &str =
    "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\"> & \"quotes\"";
/// Records of alice's default namespace: the hostile one and `note-00` to `note-22`.
const NOTES: usize = 23;
const TTL: Duration = Duration::from_secs(15 * 60);

fn python() -> PathBuf {
    agent_memory_testkit::util::python(
        "The review page's browser tests need a Python with Playwright and Debian's chromium",
        "run scripts/test, or\n  apt-get install chromium && python3 -m venv VENV && \
         VENV/bin/pip install 'playwright>=1.48,<2'\n  export AGENT_MEMORY_TEST_PYTHON=VENV/bin/python",
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn private_file(path: &Path, contents: &str) {
    std::fs::write(path, contents).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// The server, stopped on drop.
struct Server {
    child: Child,
    base: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(store: &str, app: &str, dir: &Path) -> Self {
        Self::start_with(store, app, dir, &[])
    }

    /// With `extra` options for `mcp` (such as the TLS files).
    fn start_with(store: &str, app: &str, dir: &Path, extra: &[&std::ffi::OsStr]) -> Self {
        let keys = dir.join("api-keys");
        private_file(&keys, "");
        let mut child = Command::new(BINARY)
            .args(["--store", store, "--app", app, "mcp", "--listen", "127.0.0.1:0"])
            .args(extra)
            .arg("--api-keys")
            .arg(&keys)
            .arg("--review-key-file")
            .arg(dir.join("review.key"))
            .arg("--metrics")
            .env_remove("AGENT_MEMORY_LOG")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (found, listening) = mpsc::channel();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let _ = found.send(rest.trim_end_matches("/mcp").to_owned());
                }
                lines.lock().unwrap().push(line);
            }
        });
        let base = listening
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the server did not start: {:?}", log.lock().unwrap()));
        Self { child, base, log }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Seeds alice (the hostile record, `note-00`…`note-22` and `prefs/tone`) and bob.
async fn seed(store: &dyn MemoryStore, app: &str) {
    let alice = MemoryScope::new(app, "alice").unwrap();
    store
        .put(
            &alice,
            HOSTILE_KEY,
            MemoryWrite::new(HOSTILE_CONTENT).metadata(json!({"<b>": "<i>x</i>"})),
        )
        .await
        .unwrap();
    for n in 0..NOTES - 1 {
        let drink = if n % 3 == 0 { "coffee" } else { "tea" };
        let write = MemoryWrite::new(format!("Note {n}: likes {drink} in the morning."))
            .metadata(json!({"topic": "drinks"}));
        store.put(&alice, &format!("note-{n:02}"), write).await.unwrap();
    }
    let prefs = alice.with_namespace("prefs").unwrap();
    store.put(&prefs, "tone", MemoryWrite::new("Be brief.")).await.unwrap();
    let bob = MemoryScope::new(app, "bob").unwrap();
    for n in 1..=3 {
        store
            .put(&bob, &format!("bob-{n}"), MemoryWrite::new(format!("Bob's secret {n}")))
            .await
            .unwrap();
    }
}

/// Runs `review_browser.py MODE` with `config`; returns its stdout.
fn browser(mode: &str, config: &Value, dir: &Path, server: &Server) -> String {
    let config_path = dir.join("browser.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("review_browser.py");
    let started = Instant::now();
    let output = Command::new(python())
        .arg(&script)
        .arg(mode)
        .arg(&config_path)
        .stdin(Stdio::null())
        .output()
        .expect("run the browser script");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("review browser scenario passed"),
        "browser {mode} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}\nserver:\n{}",
        output.status,
        server.log.lock().unwrap().join("\n")
    );
    eprintln!("browser {mode}: {:.1} s", started.elapsed().as_secs_f64());
    stdout
}

/// The links and facts the browser script needs.
fn config(server: &Server, dir: &Path, app: &str) -> Value {
    let secret = ReviewSecret::new(SECRET.as_bytes().to_vec()).unwrap();
    let link =
        |user: &str, ttl: Duration| review_link(&secret, &server.base, app, user, ttl).unwrap();
    let expired = link("alice", Duration::from_secs(1));
    let expired_after =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
            + 2.5;
    let rotated = ReviewSecret::new(ROTATED.as_bytes().to_vec()).unwrap();
    // The command line mints the main link.
    let cli = Command::new(BINARY)
        .args(["--app", app, "review-link", "--user", "alice", "--base-url", &server.base])
        .arg("--review-key-file")
        .arg(dir.join("review.key"))
        .output()
        .unwrap();
    assert!(cli.status.success(), "review-link: {}", String::from_utf8_lossy(&cli.stderr));
    let alice_cli = String::from_utf8(cli.stdout).unwrap().trim().to_owned();
    json!({
        "base": server.base,
        "key_file": dir.join("review.key"),
        "rotated_secret": ROTATED,
        "ttl_seconds": TTL.as_secs(),
        "expired_after": expired_after,
        "hostile_key": HOSTILE_KEY,
        "hostile_content": HOSTILE_CONTENT,
        "default_count": NOTES,
        "alice_count": NOTES + 1,
        "bob_count": 3,
        "coffee_count": (0..NOTES - 1).filter(|n| n % 3 == 0).count(),
        "links": {
            "alice_cli": alice_cli,
            "alice_nojs": link("alice", TTL),
            "alice_spare": link("alice", TTL),
            "bob": link("bob", TTL),
            "expired": expired,
            "other_app": review_link(&secret, &server.base, "another-app", "alice", TTL).unwrap(),
            "bob_rotated": review_link(&rotated, &server.base, app, "bob", TTL).unwrap(),
        },
    })
}

/// The whole scenario on `store_url`: seed, serve, browse, then check the store after the
/// server stopped.
fn scenario(store_url: &str) {
    let dir = tempfile::tempdir().unwrap();
    private_file(&dir.path().join("review.key"), &format!("{SECRET}\n"));
    let app = format!("review-{}", uuid::Uuid::new_v4().simple());
    let rt = runtime();
    let store = agent_memory::open(store_url).unwrap();
    rt.block_on(async {
        store.start().await.unwrap();
        seed(&*store, &app).await;
        store.close().await.unwrap();
    });
    let server = Server::start(store_url, &app, dir.path());
    let config = config(&server, dir.path(), &app);
    let stdout = browser("e2e", &config, dir.path(), &server);
    let result: Value = stdout
        .lines()
        .find_map(|line| line.strip_prefix("RESULT "))
        .map(|line| serde_json::from_str(line).unwrap())
        .expect("a RESULT line");
    assert_eq!(result["erased"], json!(NOTES + 1 - 2));
    drop(server);
    let store = agent_memory::open(store_url).unwrap();
    rt.block_on(async {
        store.start().await.unwrap();
        let left = store.list_namespaces(&app, "alice", PageRequest::new(10)).await.unwrap();
        assert!(left.items.is_empty(), "alice still has namespaces: {left:?}");
        let bob = MemoryScope::new(app.as_str(), "bob").unwrap();
        let page = store.list(&bob, PageRequest::new(10)).await.unwrap();
        let contents: Vec<&str> = page.items.iter().map(|r| r.content.as_str()).collect();
        assert_eq!(contents, ["Bob's secret 1", "Bob's secret 2", "Bob's secret 3"]);
        let users = store.list_users(&app, PageRequest::new(10)).await.unwrap();
        assert_eq!(users.items, ["bob"]);
        store.close().await.unwrap();
    });
}

#[test]
fn the_review_page_works_end_to_end_in_chromium_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    scenario(&format!("sqlite:{}", dir.path().join("review.db").display()));
}

#[test]
fn the_review_page_works_end_to_end_in_chromium_on_postgres() {
    scenario(&agent_memory_testkit::postgres::shared_url());
}

#[test]
fn over_tls_the_session_cookie_is_secure() {
    let dir = tempfile::tempdir().unwrap();
    private_file(&dir.path().join("review.key"), &format!("{SECRET}\n"));
    let certs = agent_memory_testkit::tls::shared_certs();
    let (cert, key) = (certs.server_cert(), certs.server_key());
    let store = format!("sqlite:{}", dir.path().join("tls.db").display());
    let tls = ["--tls-cert".as_ref(), cert.as_os_str(), "--tls-key".as_ref(), key.as_os_str()];
    let server = Server::start_with(&store, "app", dir.path(), &tls);
    assert!(server.base.starts_with("https://"), "{}", server.base);
    let secret = ReviewSecret::new(SECRET.as_bytes().to_vec()).unwrap();
    let link = review_link(&secret, &server.base, "app", "alice", TTL).unwrap();
    browser("tls", &json!({"base": server.base, "links": {"alice": link}}), dir.path(), &server);
}

#[test]
fn a_key_file_that_others_may_read_or_too_short_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("review.key");
    let keys = dir.path().join("api-keys");
    private_file(&keys, "");
    let store = format!("sqlite:{}", dir.path().join("m.db").display());
    let serve = |key: &Path| {
        Command::new(BINARY)
            .args(["--store", &store, "--app", "app", "mcp", "--listen", "127.0.0.1:0"])
            .arg("--api-keys")
            .arg(&keys)
            .arg("--review-key-file")
            .arg(key)
            .output()
            .unwrap()
    };
    std::fs::write(&key, format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let output = serve(&key);
    assert_eq!(output.status.code(), Some(support::INVALID));
    assert!(String::from_utf8_lossy(&output.stderr).contains("chmod 600"), "{output:?}");
    private_file(&key, "too short\n");
    let output = serve(&key);
    assert_eq!(output.status.code(), Some(support::INVALID));
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least 32 bytes"), "{output:?}");
    assert!(!dir.path().join("m.db").exists(), "the store was created");
    // The link command checks the same file the same way.
    let link = Command::new(BINARY)
        .args(["--app", "app", "review-link", "--user", "u", "--base-url", "http://x"])
        .arg("--review-key-file")
        .arg(&key)
        .output()
        .unwrap();
    assert_eq!(link.status.code(), Some(support::INVALID));
}

#[test]
fn review_link_checks_its_options_and_prints_json() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("review.key");
    private_file(&key, SECRET);
    let link = |extra: &[&str]| {
        Command::new(BINARY)
            .args(["--app", "app", "review-link", "--user", "u", "--review-key-file"])
            .arg(&key)
            .args(extra)
            .output()
            .unwrap()
    };
    let output = link(&["--base-url", "https://memory.example.com", "--ttl", "1h", "--json"]);
    assert!(output.status.success(), "{output:?}");
    let line: Value = serde_json::from_slice(&output.stdout).unwrap();
    let url = line["url"].as_str().unwrap();
    assert!(url.starts_with("https://memory.example.com/review/open?token="), "{url}");
    for bad in [
        &["--base-url", "https://memory.example.com", "--ttl", "25h"][..],
        &["--base-url", "memory.example.com"],
        &["--base-url", "https://memory.example.com/path"],
    ] {
        assert_eq!(link(bad).status.code(), Some(support::INVALID), "{bad:?}");
    }
}

/// Every state of the page renders in Chromium and can be photographed: the images of
/// docs/review-page.md. They go to `AGENT_MEMORY_REVIEW_SCREENSHOTS` when it names a directory
/// (docs/review-page/ in the repository, to refresh the docs), else to a temporary one.
#[test]
fn every_state_of_the_page_renders_for_the_docs() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::env::var("AGENT_MEMORY_REVIEW_SCREENSHOTS")
        .unwrap_or_else(|_| dir.path().join("shots").display().to_string());
    std::fs::create_dir_all(&out).unwrap();
    private_file(&dir.path().join("review.key"), &format!("{SECRET}\n"));
    let store_url = format!("sqlite:{}", dir.path().join("review.db").display());
    let app = "support-bot";
    let rt = runtime();
    rt.block_on(async {
        let store = agent_memory::open(&store_url).unwrap();
        store.start().await.unwrap();
        let alice = MemoryScope::new(app, "alice").unwrap();
        let facts = [
            ("address-format", "Ship to the office address, not home.", json!({"topic": "orders"})),
            ("language", "Prefers answers in English, with metric units.", json!({})),
            ("name", "Goes by Ali.", json!({})),
            ("drinks", "Likes coffee, black, in the morning.", json!({"topic": "drinks"})),
            ("reports", "Start reports with a one-line summary.", json!({"topic": "work"})),
            ("timezone", "Works from Lisbon (Europe/Lisbon).", json!({})),
            ("travel", "Avoids flights before 9 am; prefers coffee on arrival.", json!({})),
        ];
        for (key, content, metadata) in facts {
            let write = MemoryWrite::new(content)
                .metadata(metadata)
                .source(agent_memory::Source::default().agent("support-bot"));
            store.put(&alice, key, write).await.unwrap();
        }
        let prefs = alice.with_namespace("preferences").unwrap();
        store.put(&prefs, "tone", MemoryWrite::new("Be brief and friendly.")).await.unwrap();
        store.close().await.unwrap();
    });
    let server = Server::start(&store_url, app, dir.path());
    let mut config = config(&server, dir.path(), app);
    config["screenshots"] = json!(out);
    config["edit_key"] = json!("drinks");
    browser("screenshots", &config, dir.path(), &server);
    let shots: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "png"))
        .collect();
    assert!(shots.len() >= 5, "a picture of each state, got {shots:?}");
    for shot in shots {
        assert!(std::fs::metadata(&shot).unwrap().len() > 1000, "{} is empty", shot.display());
    }
}

/// A user with many records gets 20-record pages on SQLite and PostgreSQL, and the page
/// latency (p50, p90) is printed as `LATENCY {provider} {json}`: a figure to read, not a
/// limit the test enforces. 1,000 records per provider, or
/// `AGENT_MEMORY_REVIEW_LATENCY_RECORDS` (10,000 for the figure in docs/review-page.md).
#[test]
fn pages_of_a_user_with_many_records_and_their_latency() {
    let records: usize = std::env::var("AGENT_MEMORY_REVIEW_LATENCY_RECORDS")
        .map(|n| n.parse().expect("AGENT_MEMORY_REVIEW_LATENCY_RECORDS is a count"))
        .unwrap_or(1000);
    let per_writer = records.div_ceil(10);
    let dir = tempfile::tempdir().unwrap();
    private_file(&dir.path().join("review.key"), &format!("{SECRET}\n"));
    let sqlite = format!("sqlite:{}", dir.path().join("latency.db").display());
    for (provider, store_url) in
        [("sqlite", sqlite), ("postgres", agent_memory_testkit::postgres::shared_url())]
    {
        let app = format!("latency-{}", uuid::Uuid::new_v4().simple());
        let rt = runtime();
        let store = agent_memory::open(&store_url).unwrap();
        rt.block_on(async {
            store.start().await.unwrap();
            let alice = MemoryScope::new(app.as_str(), "alice").unwrap();
            // Ten writers at once.
            let writers: Vec<_> = (0..10)
                .map(|w| {
                    let (store, alice) = (Arc::clone(&store), alice.clone());
                    tokio::spawn(async move {
                        for n in 0..per_writer {
                            let content = format!("Record {w}-{n}: something remembered.");
                            let key = format!("k-{w}-{n:04}");
                            store.put(&alice, &key, MemoryWrite::new(content)).await.unwrap();
                        }
                    })
                })
                .collect();
            for writer in writers {
                writer.await.unwrap();
            }
        });
        let server = Server::start(&store_url, &app, dir.path());
        let mut config = config(&server, dir.path(), &app);
        // A figure wants many rounds; the everyday run only shows that the pages hold.
        config["rounds"] = json!(if records >= 10_000 { 100 } else { 5 });
        let stdout = browser("latency", &config, dir.path(), &server);
        let line = stdout.lines().find_map(|l| l.strip_prefix("LATENCY ")).unwrap().to_owned();
        println!("LATENCY {provider} {line}");
        drop(server);
        rt.block_on(async {
            store.delete_user(&app, "alice").await.unwrap();
            store.close().await.unwrap();
        });
    }
}
