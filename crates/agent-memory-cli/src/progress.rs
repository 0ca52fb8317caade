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
    if !visible() {
        return ProgressBar::hidden();
    }
    let spinner = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}: {pos}") {
        spinner.set_style(style);
    }
    spinner.set_message(what);
    spinner.enable_steady_tick(TICK);
    spinner
}

/// A spinner without a count, for one long call whose progress the store does not report.
pub fn busy(what: &'static str) -> ProgressBar {
    if !visible() {
        return ProgressBar::hidden();
    }
    let spinner = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
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
