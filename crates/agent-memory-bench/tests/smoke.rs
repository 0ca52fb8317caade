//! Smoke runs of the harness binary, so it cannot rot: tiny op counts (`--smoke`, labelled as
//! not a benchmark) end to end through the CLI, the runner, the checks and the JSON output.
//! Nothing here looks at how fast anything was; only that every phase ran and every
//! expected-state check held.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const PHASES: [&str; 7] = ["put_new", "get", "put_update", "list", "delete", "put_cas", "search"];
/// 20,000 preloaded + 200 `put_new` − 300 `delete` in `--smoke`.
const RECORDS_AFTER_DELETE: u64 = 19_900;

struct Run {
    records: Vec<Value>,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-memory-bench"))
        .args(["--smoke", "--json", "-"])
        .args(args)
        .output()
        .expect("the harness runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "harness failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let records = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    Run { records, stderr }
}

/// A run of `stores` at C=1 and C=4 with their ceilings at one second per test, and `more`
/// options.
fn run_with_ceilings(stores: &[&str], more: &[&str]) -> Run {
    let mut args = Vec::new();
    for store in stores {
        args.extend(["--store", store]);
    }
    args.extend(["--concurrency", "1,4", "--ceiling", "--ceiling-seconds", "1"]);
    args.extend(more);
    run(&args)
}

fn of_kind<'a>(run: &'a Run, kind: &str) -> Vec<&'a Value> {
    run.records.iter().filter(|r| r["kind"] == kind).collect()
}

/// Every (provider, concurrency, mode, phase) ran once, with its checks held.
fn assert_complete(run: &Run, providers: &[&str], concurrency: &[u64], modes: &[&str]) {
    assert!(run.stderr.contains("SMOKE RUN"), "the run must say it is not a benchmark");
    let phases = of_kind(run, "phase");
    let mut seen = BTreeSet::new();
    for p in &phases {
        let key = (
            p["provider"].as_str().expect("provider").to_owned(),
            p["concurrency"].as_u64().expect("concurrency"),
            p["mode"].as_str().expect("mode").to_owned(),
            p["phase"].as_str().expect("phase").to_owned(),
        );
        assert!(seen.insert(key.clone()), "{key:?} reported twice");
        assert_eq!(p["checks_ok"], true, "checks failed: {p}");
        assert_eq!(p["errors"], 0, "errors: {p}");
        assert!(p["ops"].as_u64().expect("ops") > 0);
        assert!(p["p50_us"].as_f64().expect("p50") <= p["p99_us"].as_f64().expect("p99"));
        match key.3.as_str() {
            "get" => assert_eq!(p["misses"], 0),
            "delete" => {
                assert_eq!(p["records_after"], RECORDS_AFTER_DELETE);
                assert_eq!(p["records_expected"], RECORDS_AFTER_DELETE);
            }
            "list" => assert!(p["avg_items"].as_f64().expect("avg_items") >= 10.0),
            _ => {}
        }
        if key.2.ends_with("scale") {
            assert!(p["extra_records"].as_u64().expect("extra_records") > 0);
            assert!(p["standard_p50_us"].is_number(), "scale rows carry the standard p50: {p}");
        }
    }
    for provider in providers {
        for c in concurrency {
            for mode in modes {
                for phase in PHASES {
                    let key = ((*provider).to_owned(), *c, (*mode).to_owned(), phase.to_owned());
                    assert!(seen.contains(&key), "missing {key:?}");
                }
            }
        }
    }
    let runs = of_kind(run, "run");
    assert_eq!(runs.len(), providers.len() * concurrency.len() * modes.len());
}

/// Each of `tests` ran on `provider` at C=1 and at C=4 and measured something, and `also`
/// holds of its line.
fn assert_ceilings(run: &Run, provider: &str, tests: &[&str], also: impl Fn(&Value, &str) -> bool) {
    let ceilings = of_kind(run, "ceiling");
    for c in [1u64, 4] {
        for test in tests {
            assert!(
                ceilings.iter().any(|r| r["provider"] == provider
                    && r["concurrency"] == c
                    && r["test"] == *test
                    && r["ops_per_s"].as_f64().is_some_and(|v| v > 0.0)
                    && also(r, test)),
                "missing ceiling {provider} {test} C={c}"
            );
        }
    }
}

/// Every standard phase carries its ceiling ratio.
fn assert_ratios(run: &Run) {
    for p in of_kind(run, "phase") {
        if p["extra"] == false {
            assert!(p["ratio"].is_number(), "standard phases carry their ceiling ratio: {p}");
        }
    }
}

/// A temporary folder and the URL of a SQLite store in it.
fn sqlite_store() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("bench.db").display());
    (dir, url)
}

#[test]
fn smoke_run_on_memory_and_sqlite_with_scale() {
    let (_dir, sqlite) = sqlite_store();
    let run = run(&[
        "--store",
        "memory:",
        "--store",
        &sqlite,
        "--concurrency",
        "1,4",
        "--scale",
        "--scale-records",
        "2000",
    ]);
    assert_complete(&run, &["memory", "sqlite"], &[1, 4], &["smoke", "smoke-scale"]);
    assert!(of_kind(&run, "ceiling").is_empty(), "no ceiling exists for in-process stores");
}

/// SQLite with its ceiling (bare rusqlite connections beside the store's file) at one second
/// per test.
#[test]
fn smoke_run_on_sqlite_with_ceiling() {
    let (dir, sqlite) = sqlite_store();
    let run = run_with_ceilings(&[&sqlite], &["--ceiling-delete-pool", "5000"]);
    assert_complete(&run, &["sqlite"], &[1, 4], &["smoke"]);
    assert_ceilings(
        &run,
        "sqlite",
        &["put_new", "get", "put_update", "list", "delete"],
        |r, test| r["tool"] == "rusqlite" && r["after_phase"] == test,
    );
    assert_ratios(&run);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("ceiling"))
        .collect();
    assert!(left.is_empty(), "the ceiling database is removed: {left:?}");
}

fn pgbench() -> String {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|version| version.path().join("bin/pgbench"))
        .filter(|path| path.exists())
        .collect();
    found.sort();
    found.pop().map(|p| p.display().to_string()).unwrap_or_else(|| "pgbench".to_owned())
}

/// PostgreSQL and Redis through the test kit's servers (or the ones its environment variables
/// name), with the ceilings at one second / two thousand requests.
#[test]
fn smoke_run_on_postgres_and_redis_with_ceilings() {
    let postgres = agent_memory_testkit::postgres::shared_url();
    let redis = agent_memory_testkit::redis::shared_url();
    let pgbench = pgbench();
    let run = run_with_ceilings(
        &[&postgres, &redis],
        &["--ceiling-delete-pool", "50000", "--redis-requests", "2000", "--pgbench", &pgbench],
    );
    assert_complete(&run, &["postgres", "redis"], &[1, 4], &["smoke"]);
    let any = |_: &Value, _: &str| true;
    assert_ceilings(&run, "postgres", &["put_new", "get", "put_update", "list", "delete"], any);
    assert_ceilings(&run, "redis", &["GET", "SET", "HSET", "EVALSHA"], any);
    assert_ratios(&run);
    // The batched ceiling ran the provider's own statement after each write phase, with the
    // batch the library formed, and left nothing behind.
    let batched = ["put_new_batched", "put_update_batched", "delete_batched"];
    assert_ceilings(&run, "postgres", &batched, |r, _| {
        r["note"].as_str().is_some_and(|note| note.contains("batches of"))
    });
    for p in of_kind(&run, "phase") {
        if p["provider"] == "postgres"
            && ["put_new", "put_update", "delete"].contains(&p["phase"].as_str().unwrap_or(""))
        {
            assert!(p["mean_batch"].as_f64().is_some_and(|b| b >= 1.0), "{p}");
            assert!(p["batched_ratio"].is_number(), "{p}");
        }
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let schemas = runtime.block_on(async {
        let client = agent_memory_bench::ceiling::pg_connect(&postgres).await.expect("connects");
        let row = client
            .query_one(
                "SELECT count(*) FROM pg_namespace WHERE nspname = 'bench_ceiling_batched'",
                &[],
            )
            .await
            .expect("counts");
        row.get::<_, i64>(0)
    });
    assert_eq!(schemas, 0, "the batched ceiling's schema is dropped");
}
