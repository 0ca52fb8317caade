//! `agent-memory-bench`: runs the standard memory-store workload against agent-memory stores.

use std::io::Write;
use std::process::ExitCode;

use agent_memory_bench::ceiling::CeilingOptions;
use agent_memory_bench::harness::{self, Config, DEFAULT_SCALE_RECORDS};
use agent_memory_bench::hostile;
use agent_memory_bench::workload::{self, Counts, Phase, MIN_OPS_PER_PHASE};
use clap::Parser;

/// The standard memory-store workload (WORKLOAD.md), its ceilings and its scale run.
///
/// Example: agent-memory-bench --store memory: --store sqlite:/tmp/bench.db
///   --store 'postgres://postgres@127.0.0.1:5432/test' --store redis://127.0.0.1:6390
///   --concurrency 1,16 --ceiling --scale --json results.jsonl
#[derive(Debug, Parser)]
#[command(name = "agent-memory-bench", version)]
struct Cli {
    /// Print the generator checks and the op-list fingerprints, compare them with WORKLOAD.md's
    /// table, and exit (non-zero on a mismatch).
    #[arg(long)]
    check: bool,

    /// Store URL as `agent_memory::open` takes it; repeat or comma-separate for several.
    #[arg(long = "store", value_delimiter = ',', default_value = "memory:")]
    stores: Vec<String>,

    /// Concurrency levels; each starts from an empty store.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    concurrency: Vec<usize>,

    /// Scale every phase's op count by this factor (WORKLOAD.md allows scaling down, never below
    /// 2,000 ops per phase).
    #[arg(long, default_value_t = 1.0)]
    ops_scale: f64,

    /// Explicit op counts, e.g. `get=10000,list=5000` (after --ops-scale).
    #[arg(long, value_delimiter = ',')]
    ops: Vec<String>,

    /// Skip our extra phases (put_cas, search, search_words, list_meta).
    #[arg(long)]
    no_extra: bool,

    /// After the standard runs, run them again with records held by other users.
    #[arg(long)]
    scale: bool,

    /// Records held by other users in the scale run.
    #[arg(long, default_value_t = DEFAULT_SCALE_RECORDS)]
    scale_records: usize,

    /// Measure the ceilings (pgbench, redis-benchmark) after each PostgreSQL or Redis run.
    #[arg(long)]
    ceiling: bool,

    /// pgbench `-T` per script, and the seconds of each SQLite ceiling test.
    #[arg(long, default_value_t = 15)]
    ceiling_seconds: u64,

    /// Rows in the delete pool of pgbench and of the SQLite ceiling (must outlast `-T` seconds
    /// of deletes).
    #[arg(long, default_value_t = 1_000_000)]
    ceiling_delete_pool: u64,

    /// redis-benchmark `-n` per command.
    #[arg(long, default_value_t = 100_000)]
    redis_requests: u64,

    /// The pgbench binary.
    #[arg(long, default_value = "pgbench")]
    pgbench: String,

    /// The redis-benchmark binary.
    #[arg(long, default_value = "redis-benchmark")]
    redis_benchmark: String,

    /// Query parameters added to PostgreSQL store URLs so the library keeps a pool of exactly C
    /// connections; `{c}` stands for C. `none` leaves the provider's default pool.
    #[arg(long, default_value = "max_connections={c}&min_connections={c}")]
    pg_pool_query: String,

    /// Write one JSON object per line (runs, phases, ceilings) to this file; `-` for stdout
    /// (the table then goes to stderr).
    #[arg(long)]
    json: Option<String>,

    /// Tiny op counts to exercise the harness end to end; the results are labelled as a smoke
    /// run and are not a benchmark.
    #[arg(long)]
    smoke: bool,

    /// Tokio worker threads (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,

    /// Run only the hostile search on each store (records of 64 KiB of `a`, queries of `a`s
    /// around one `b`) and print how long one call holds the server.
    #[arg(long)]
    hostile_search: bool,

    /// Records the hostile search stores.
    #[arg(long, default_value_t = 500)]
    hostile_records: usize,

    /// Length of the hostile query, in bytes.
    #[arg(long, default_value_t = 1024)]
    hostile_query_bytes: usize,
}

/// Op counts of `--smoke`: enough to touch every code path, far too few to measure anything.
fn smoke_counts() -> Counts {
    Counts {
        put_new: 200,
        get: 300,
        put_update: 200,
        list: 100,
        delete: 300,
        put_cas: 200,
        search: 100,
        search_words: 100,
        list_meta: 100,
    }
}

fn counts(cli: &Cli) -> Result<Counts, String> {
    let mut counts = if cli.smoke { smoke_counts() } else { Counts::standard() };
    if !cli.smoke && (cli.ops_scale - 1.0).abs() > f64::EPSILON {
        if !(cli.ops_scale > 0.0 && cli.ops_scale <= 1.0) {
            return Err("--ops-scale must be in (0, 1]".to_owned());
        }
        for phase in Phase::STANDARD.into_iter().chain(Phase::EXTRA) {
            let scaled = (phase.standard_ops() as f64 * cli.ops_scale).round();
            counts.set(phase, format!("{scaled:.0}").parse::<usize>().unwrap_or(0));
        }
    }
    for spec in &cli.ops {
        let (name, n) =
            spec.split_once('=').ok_or_else(|| format!("--ops {spec:?}: expected phase=N"))?;
        let phase = Phase::from_name(name.trim())
            .ok_or_else(|| format!("--ops {spec:?}: unknown phase {name:?}"))?;
        let n = n.trim().parse::<usize>().map_err(|_| format!("--ops {spec:?}: not a count"))?;
        counts.set(phase, n);
    }
    if !cli.smoke {
        for phase in Phase::STANDARD.into_iter().chain(Phase::EXTRA) {
            if counts.of(phase) < MIN_OPS_PER_PHASE {
                return Err(format!(
                    "{} would run {} ops; a real run needs at least {MIN_OPS_PER_PHASE} per phase \
                     (use --smoke for a tiny functional run)",
                    phase.name(),
                    counts.of(phase)
                ));
            }
        }
    }
    counts.validate()?;
    Ok(counts)
}

/// `--hostile-search`: the hostile search on every store, then the table (and JSON lines).
fn hostile_search(cli: &Cli) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let mut results = Vec::new();
    for url in &cli.stores {
        match runtime.block_on(hostile::run(
            url.trim(),
            cli.hostile_records,
            cli.hostile_query_bytes,
        )) {
            Ok(found) => results.extend(found),
            Err(err) => {
                print!("{}", hostile::table(&results));
                eprintln!("error: {}: {err}", agent_memory_bench::target::redacted(url));
                return ExitCode::FAILURE;
            }
        }
    }
    print!("{}", hostile::table(&results));
    if let Some(path) = &cli.json {
        let mut lines = String::new();
        for result in &results {
            agent_memory_bench::report::push_json(&mut lines, result);
        }
        if let Err(err) = std::fs::write(path, lines) {
            eprintln!("error: cannot write {path}: {err}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.check {
        let (text, ok) = workload::check_report();
        print!("{text}");
        return if ok {
            println!("all reference fingerprints match");
            ExitCode::SUCCESS
        } else {
            println!("MISMATCH against WORKLOAD.md");
            ExitCode::FAILURE
        };
    }
    if cli.hostile_search {
        return hostile_search(&cli);
    }
    let counts = match counts(&cli) {
        Ok(c) => c,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    if cli.concurrency.contains(&0) {
        eprintln!("error: concurrency must be at least 1");
        return ExitCode::from(2);
    }
    let threads = cli
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    let config = Config {
        stores: cli.stores.iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect(),
        concurrency: cli.concurrency.clone(),
        counts,
        extra: !cli.no_extra,
        scale: cli.scale.then_some(cli.scale_records),
        ceiling: cli.ceiling,
        ceiling_options: CeilingOptions {
            pg_seconds: cli.ceiling_seconds,
            pg_delete_pool: cli.ceiling_delete_pool,
            redis_requests: cli.redis_requests,
            pgbench: cli.pgbench.clone(),
            redis_benchmark: cli.redis_benchmark.clone(),
        },
        pg_pool_query: Some(cli.pg_pool_query.clone()).filter(|p| p != "none" && !p.is_empty()),
        smoke: cli.smoke,
        threads,
    };
    if cli.smoke {
        eprintln!(
            "SMOKE RUN: tiny op counts to exercise the harness; the numbers are not a benchmark"
        );
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };

    let to_stdout = cli.json.as_deref() == Some("-");
    let mut file = match cli.json.as_deref() {
        Some("-") | None => None,
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Some(f),
            Err(err) => {
                eprintln!("error: cannot create {path}: {err}");
                return ExitCode::from(2);
            }
        },
    };
    let mut stdout = std::io::stdout();
    let sink: Option<&mut (dyn Write + Send)> = if to_stdout {
        Some(&mut stdout)
    } else {
        file.as_mut().map(|f| f as &mut (dyn Write + Send))
    };
    let report = runtime.block_on(harness::run(&config, sink));

    let table = report.table();
    if to_stdout {
        eprint!("{table}");
    } else {
        print!("{table}");
    }
    let failed = report.stopped || report.phases.iter().any(|p| !p.checks_ok);
    if failed {
        eprintln!("some expected-state checks failed or a store stopped; see above");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
