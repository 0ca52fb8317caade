//! What a run reports: one JSON object per (provider, concurrency, phase), the ceilings, the
//! per-run expected-state checks, and a table for people.

use std::fmt::Write as _;

use serde::Serialize;

use crate::ceiling::CeilingResult;

/// Which (provider, concurrency, mode) run a line belongs to: the fields its phase lines and
/// its run line share, written into each as fields of their own.
#[derive(Debug, Clone, Serialize)]
pub struct RunId {
    /// `standard`, `scale`, or `smoke` and `smoke-scale` (smoke numbers are not a benchmark).
    pub mode: &'static str,
    /// `memory`, `sqlite`, `postgres`, `redis`.
    pub provider: String,
    /// The store URL without credentials or options.
    pub store: String,
    /// Workers (C).
    pub concurrency: usize,
    /// How the store was given C connections.
    pub pool: String,
}

/// One phase of one run: the line WORKLOAD.md asks for, with its checks and, when measured,
/// its ceiling and ratio.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseRecord {
    /// Always `"phase"`.
    pub kind: &'static str,
    /// The run.
    #[serde(flatten)]
    pub run: RunId,
    /// Phase name.
    pub phase: String,
    /// `false` for the five standard phases, `true` for our extra ones.
    pub extra: bool,
    /// Ops run.
    pub ops: usize,
    /// Wall time of the phase.
    pub seconds: f64,
    /// `ops / seconds`.
    pub ops_per_s: f64,
    /// Nearest-rank median, microseconds.
    pub p50_us: f64,
    /// Nearest-rank 99th percentile, microseconds.
    pub p99_us: f64,
    /// Mean, microseconds.
    pub mean_us: f64,
    /// Ops that failed (not counting `put_cas` conflicts).
    pub errors: usize,
    /// The first failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// `get` misses, `delete` of nothing, `put_cas` reads that found nothing.
    pub misses: usize,
    /// `put_cas` writes refused as conflicts.
    pub conflicts: usize,
    /// Mean rows per page for `list` and `search`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg_items: Option<f64>,
    /// The records counted after `delete`.
    #[serde(flatten)]
    pub counted: Option<Counted>,
    /// The phase's expected-state checks held (no errors; no `get` or `delete` misses; the
    /// record count after `delete`).
    pub checks_ok: bool,
    /// The ceiling this phase is compared with, when one was measured.
    #[serde(flatten)]
    pub ceiling: Option<Compared>,
    /// Writes per statement the library formed in this phase (PostgreSQL's write queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_batch: Option<f64>,
    /// The batched ceiling, when one was measured.
    #[serde(flatten)]
    pub batched: Option<BatchedCompared>,
    /// What the scale mode adds.
    #[serde(flatten)]
    pub scale: Option<ScaleRecord>,
}

impl PhaseRecord {
    /// Records held by other users during the phase (0 outside scale mode).
    pub fn extra_records(&self) -> usize {
        self.scale.as_ref().map_or(0, |s| s.extra_records)
    }
}

/// The live benchmark records counted after `delete`, and how many there should be.
#[derive(Debug, Clone, Serialize)]
pub struct Counted {
    /// Live benchmark records counted after `delete`.
    pub records_after: u64,
    /// `20,000 + put_new - delete`.
    pub records_expected: u64,
}

/// A phase beside its ceiling.
#[derive(Debug, Clone, Serialize)]
pub struct Compared {
    /// The ceiling test this phase is compared with.
    pub ceiling_test: String,
    /// The ceiling's ops/s at the same concurrency, measured in the same run.
    pub ceiling_ops_per_s: f64,
    /// `ops_per_s / ceiling_ops_per_s`, when the ceiling did any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
}

/// A phase beside its batched ceiling.
#[derive(Debug, Clone, Serialize)]
pub struct BatchedCompared {
    /// The batched ceiling's writes/s: the provider's coalesced statement with
    /// `mean_batch` writes, run by pgbench at the same concurrency.
    pub batched_ceiling_ops_per_s: f64,
    /// `ops_per_s / batched_ceiling_ops_per_s`, when the batched ceiling did any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batched_ratio: Option<f64>,
}

/// What a phase of the scale mode reports besides the standard fields.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRecord {
    /// Records held by other users during the phase.
    pub extra_records: usize,
    /// The same phase's p50 in the standard run of this invocation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standard_p50_us: Option<f64>,
    /// `p50_us / standard_p50_us` (the target is at most 1.3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_growth: Option<f64>,
}

/// One ceiling measurement, labelled.
#[derive(Debug, Clone, Serialize)]
pub struct CeilingRecord {
    /// Always `"ceiling"`.
    pub kind: &'static str,
    /// Provider the ceiling belongs to.
    pub provider: String,
    /// The server, without credentials.
    pub store: String,
    /// The measurement.
    #[serde(flatten)]
    pub result: CeilingResult,
}

/// The setup of one (provider, concurrency, mode) run: preload, settings and counts.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// Always `"run"`.
    pub kind: &'static str,
    /// The run.
    #[serde(flatten)]
    pub run: RunId,
    /// Op counts per phase, as run.
    pub counts: serde_json::Value,
    /// Records erased before the run (left over from an earlier one).
    pub cleaned: u64,
    /// Seconds the 20,000-record preload took (not timed as a phase).
    pub preload_seconds: f64,
    /// Records held by other users (scale mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_records: Option<usize>,
    /// Server settings that WORKLOAD.md pins, as read from the server.
    pub server: Vec<(String, String)>,
    /// Tokio worker threads.
    pub threads: usize,
}

/// Everything one invocation produced, in order.
#[derive(Debug, Default)]
pub struct Report {
    /// Phase lines.
    pub phases: Vec<PhaseRecord>,
    /// Ceiling lines.
    pub ceilings: Vec<CeilingRecord>,
    /// Run lines.
    pub runs: Vec<RunRecord>,
    /// Problems that did not stop the run (a provider that failed, a setting that differs).
    pub notes: Vec<String>,
    /// A store could not be opened or a run could not finish.
    pub stopped: bool,
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".to_owned())
}

impl Report {
    /// The human-readable tables: one block per (provider, mode, concurrency), then the raw
    /// ceilings, then the targets.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let mut blocks: Vec<(&str, &str, &str, usize)> = Vec::new();
        for p in &self.phases {
            let key =
                (p.run.mode, p.run.provider.as_str(), p.run.store.as_str(), p.run.concurrency);
            if !blocks.contains(&key) {
                blocks.push(key);
            }
        }
        for (mode, provider, store, c) in blocks {
            let rows: Vec<&PhaseRecord> = self
                .phases
                .iter()
                .filter(|p| {
                    p.run.mode == mode
                        && p.run.provider == provider
                        && p.run.store == store
                        && p.run.concurrency == c
                })
                .collect();
            let pool = rows.first().map(|p| p.run.pool.as_str()).unwrap_or("");
            let extra = rows.first().map_or(0, |p| p.extra_records());
            let label = match mode {
                "smoke" => "SMOKE RUN, NOT A BENCHMARK".to_owned(),
                "smoke-scale" => {
                    format!("SMOKE RUN, NOT A BENCHMARK; scale with {extra} extra records")
                }
                "scale" => format!("scale: {extra} extra records held by other users"),
                _ => "standard".to_owned(),
            };
            let _ = writeln!(out, "\n{provider} C={c}  [{label}]  {store}  pool: {pool}");
            let scale = mode.ends_with("scale");
            let _ = writeln!(
                out,
                "  {:<11} {:>7} {:>10} {:>9} {:>9}  {:<6} {:>12} {:>7}{}",
                "phase",
                "ops",
                "ops/s",
                "p50 µs",
                "p99 µs",
                "checks",
                "ceiling/s",
                "ratio",
                if scale { "   std p50   growth" } else { "" }
            );
            for p in rows {
                let check = if p.checks_ok { "ok" } else { "FAIL" };
                let mut line = format!(
                    "  {:<11} {:>7} {:>10} {:>9} {:>9}  {:<6} {:>12} {:>7}",
                    if p.extra { format!("+{}", p.phase) } else { p.phase.clone() },
                    p.ops,
                    num(p.ops_per_s),
                    num(p.p50_us),
                    num(p.p99_us),
                    check,
                    opt(p.ceiling.as_ref().map(|c| c.ceiling_ops_per_s), num),
                    opt(p.ceiling.as_ref().and_then(|c| c.ratio), |r| format!("{:.0}%", r * 100.0)),
                );
                if scale {
                    let _ = write!(
                        line,
                        " {:>9} {:>8}",
                        opt(p.scale.as_ref().and_then(|s| s.standard_p50_us), num),
                        opt(p.scale.as_ref().and_then(|s| s.p50_growth), |g| format!("{g:.2}x"))
                    );
                }
                let mut extras = Vec::new();
                if p.errors > 0 {
                    extras.push(format!("{} errors", p.errors));
                }
                if p.misses > 0 {
                    extras.push(format!("{} misses", p.misses));
                }
                if p.conflicts > 0 {
                    extras.push(format!("{} conflicts", p.conflicts));
                }
                if let Some(items) = p.avg_items {
                    extras.push(format!("{items:.2} rows/page"));
                }
                if let Some(batch) = p.mean_batch {
                    extras.push(format!("{batch:.1} writes/statement"));
                }
                if let Some(ratio) = p.batched.as_ref().and_then(|b| b.batched_ratio) {
                    extras.push(format!("{:.0}% of the batched ceiling", ratio * 100.0));
                }
                if let Some(Counted { records_after, records_expected }) = &p.counted {
                    extras.push(format!(
                        "{records_after} records left (expected {records_expected})"
                    ));
                }
                if !extras.is_empty() {
                    let _ = write!(line, "  {}", extras.join(", "));
                }
                let _ = writeln!(out, "{}", line.trim_end());
                if let Some(err) = &p.first_error {
                    let _ = writeln!(out, "      first error: {err}");
                }
            }
        }
        if !self.ceilings.is_empty() {
            let _ = writeln!(
                out,
                "\nceilings (no library in between, same server, same run, each right after \
                 the library phase it is compared with)"
            );
            let _ = writeln!(
                out,
                "  {:<9} {:<16} {:<11} {:>3} {:<12} {:>10} {:>9} {:>9}",
                "provider", "tool", "test", "C", "after", "ops/s", "p50 µs", "mean µs"
            );
            for c in &self.ceilings {
                let r = &c.result;
                let _ = writeln!(
                    out,
                    "  {:<9} {:<16} {:<11} {:>3} {:<12} {:>10} {:>9} {:>9}{}",
                    c.provider,
                    r.tool,
                    r.test,
                    r.concurrency,
                    r.after_phase.as_deref().unwrap_or("(context)"),
                    num(r.ops_per_s),
                    opt(r.p50_us, num),
                    opt(r.mean_us, num),
                    r.note.as_ref().map(|n| format!("  {n}")).unwrap_or_default()
                );
            }
        }
        let targets = self.targets();
        if !targets.is_empty() {
            let _ = writeln!(out, "\ntargets");
            for line in targets {
                let _ = writeln!(out, "  {line}");
            }
        }
        for note in &self.notes {
            let _ = writeln!(out, "\nnote: {note}");
        }
        out
    }

    /// The targets, each as `MET` or `MISSED` with the figure, for what this run
    /// measured.
    pub fn targets(&self) -> Vec<String> {
        let mut out = Vec::new();
        let verdict = |ok: bool| if ok { "MET   " } else { "MISSED" };
        for p in &self.phases {
            if p.run.mode.starts_with("smoke") || p.extra {
                continue;
            }
            if p.run.mode == "standard" && p.run.concurrency == 16 {
                let goal = match (p.run.provider.as_str(), p.phase.as_str()) {
                    ("postgres", "list") => Some(0.80),
                    ("postgres", _) => Some(0.85),
                    ("redis", "get" | "put_new" | "put_update") => Some(0.70),
                    _ => None,
                };
                let compared = p.ceiling.as_ref().and_then(|c| Some((c.ratio?, &c.ceiling_test)));
                if let (Some(goal), Some((ratio, test))) = (goal, compared) {
                    out.push(format!(
                        "{} {} C=16 {}: {:.0}% of the {} ceiling (goal {:.0}%)",
                        verdict(ratio >= goal),
                        p.run.provider,
                        p.phase,
                        ratio * 100.0,
                        test,
                        goal * 100.0
                    ));
                }
            }
            if let (true, Some(ratio)) = (
                p.run.mode == "standard" && p.run.concurrency == 16,
                p.batched.as_ref().and_then(|b| b.batched_ratio),
            ) {
                out.push(format!(
                    "{} {} C=16 {}: {:.0}% of the batched ceiling (goal 80%)",
                    verdict(ratio >= 0.8),
                    p.run.provider,
                    p.phase,
                    ratio * 100.0
                ));
            }
            if p.run.mode == "standard"
                && p.run.provider == "memory"
                && p.run.concurrency == 1
                && p.phase == "get"
            {
                out.push(format!(
                    "{} memory C=1 get: {:.0} ops/s (goal 1,000,000)",
                    verdict(p.ops_per_s >= 1_000_000.0),
                    p.ops_per_s
                ));
            }
            if p.run.mode == "scale" {
                if let Some(growth) = p.scale.as_ref().and_then(|s| s.p50_growth) {
                    out.push(format!(
                        "{} {} C={} {} p50 with {} extra records: {:.2}x the standard run (goal ≤ 1.30x)",
                        verdict(growth <= 1.3),
                        p.run.provider,
                        p.run.concurrency,
                        p.phase,
                        p.extra_records(),
                        growth
                    ));
                }
            }
        }
        out
    }

    /// Every record as one JSON line each: runs, phases, ceilings.
    pub fn json_lines(&self) -> String {
        let mut out = String::new();
        for run in &self.runs {
            push_json(&mut out, run);
        }
        for phase in &self.phases {
            push_json(&mut out, phase);
        }
        for ceiling in &self.ceilings {
            push_json(&mut out, ceiling);
        }
        out
    }
}

/// Appends `value` as one JSON line.
pub fn push_json<T: Serialize>(out: &mut String, value: &T) {
    match serde_json::to_string(value) {
        Ok(text) => {
            out.push_str(&text);
            out.push('\n');
        }
        Err(err) => {
            let _ = writeln!(out, "{{\"kind\":\"error\",\"error\":{:?}}}", err.to_string());
        }
    }
}
