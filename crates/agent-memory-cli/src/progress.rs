//! Progress for the long operations (export, import, purge-expired, delete-user).
//!
//! Drawn on stderr, and only when stderr is a terminal: piped or redirected runs, scripts and
//! CI logs stay free of carriage-return noise, and stdout stays pure data either way.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// How often a spinner redraws while the store works.
const TICK: Duration = Duration::from_millis(120);

fn visible() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar counting towards `total`, labelled `what`.
pub fn bar(total: u64, what: &'static str) -> ProgressBar {
    if !visible() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what);
    bar
}

/// A spinner with a running count, for work whose size is unknown up front.
pub fn spinner(what: &'static str) -> ProgressBar {
    ticking("{spinner} {msg}: {pos}", what)
}

/// A spinner without a count, for one long call whose progress the store does not report.
pub fn busy(what: &'static str) -> ProgressBar {
    ticking("{spinner} {msg} ({elapsed})", what)
}

/// A spinner drawn with `template`, labelled `what`, redrawing on its own.
fn ticking(template: &str, what: &'static str) -> ProgressBar {
    if !visible() {
        return ProgressBar::hidden();
    }
    let spinner = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template(template) {
        spinner.set_style(style);
    }
    spinner.set_message(what);
    spinner.enable_steady_tick(TICK);
    spinner
}

/// Writes a note for people on stderr, but only on a terminal, like the progress itself.
pub fn note(text: &str) {
    if visible() {
        eprintln_safe(text);
    }
}

/// Writes one line on stderr, ignoring a closed stderr rather than panicking as `eprintln!`
/// would.
pub fn eprintln_safe(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Set once by `main` when `--log-format json` is on: then every line the CLI itself writes on
/// stderr outside the log (a server's "listening on") is a JSON object too.
static JSON_LINES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Records that stderr carries JSON lines; called once, when logging is set up.
pub fn set_json_lines(json: bool) {
    let _ = JSON_LINES.set(json);
}

/// A line a server prints for its operator whatever the log filter (where it listens): plain
/// text, or with `--log-format json` an object shaped like the log's own lines.
pub fn announce(message: &str) {
    stderr_line("INFO", message, message);
}

/// A note about how a command was understood (an option it ignores): `note: …`, or a `WARN`
/// object with `--log-format json`.
pub fn notice(message: &str) {
    stderr_line("WARN", &format!("note: {message}"), message);
}

/// The error a command ends with: `error: …`, or an `ERROR` object with `--log-format json`.
pub fn error(message: &str) {
    stderr_line("ERROR", &format!("error: {message}"), message);
}

/// `text` on stderr; with `--log-format json`, an object shaped like the log's own lines
/// (`timestamp`, `level`, `fields.message`, `target`) holding `message` instead, so a
/// collector reading one object per line never meets anything else.
fn stderr_line(level: &str, text: &str, message: &str) {
    if !JSON_LINES.get().copied().unwrap_or(false) {
        eprintln_safe(text);
        return;
    }
    let timestamp = crate::output::format_time(agent_memory::Timestamp::now()).replace(' ', "T");
    let line = serde_json::json!({
        "timestamp": timestamp,
        "level": level,
        "fields": {"message": message},
        "target": "agent_memory_cli",
    });
    eprintln_safe(&line.to_string());
}
