//! The `agent-memory` command line and MCP server.
//!
//! `main.rs` parses the command line (each command group in [`commands`] defines its own
//! arguments), sets up logging and the runtime, hands the command to [`commands::run`] and
//! turns its error into one line on stderr and an exit code. Everything a person or script
//! relies on is written down in `docs/cli.md`: exit codes ([`exit`]), the export format
//! ([`transfer`]), and what each command touches.

mod api_keys;
mod commands;
mod duration;
mod exit;
mod files;
mod mcp;
mod meta;
mod output;
mod progress;
mod transfer;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};

use crate::commands::{Command, Globals, LogFormat};

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  not found (get or delete of a key with no live record)
  2  invalid input (bad argument, flag, URL or import line; usage errors)
  3  conflict (--if-revision or --create-only did not hold)
  4  failure (the store, a file, the terminal or the MCP transport failed)
  5  quota exceeded (a write would take the user past the store's limits; nothing written)

Logging goes to stderr only; set AGENT_MEMORY_LOG (or RUST_LOG), e.g. AGENT_MEMORY_LOG=debug.";

/// Explicit, scoped, long-term memory for AI agents.
///
/// Saves the facts an agent or its application deliberately keeps for one user, and reads them
/// back later. The scope of every command (application, user, namespace) comes from the global
/// options or their environment variables.
#[derive(Debug, Parser)]
#[command(name = "agent-memory", version, about, long_about, after_help = EXIT_CODES)]
struct Cli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: Command,
}

/// The whole command line, for `completions` and `man`.
pub(crate) fn cli_command() -> clap::Command {
    Cli::command()
}

fn main() -> ExitCode {
    // --help/--version exit 0 from clap; usage errors exit 2 with one line (and a hint where
    // to read more); an argument that is not UTF-8 is reported on one line that says which
    // argument it was.
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|matches| Ok((Cli::from_arg_matches(&matches)?, matches)));
    let (mut cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(err) if err.kind() == clap::error::ErrorKind::InvalidUtf8 => {
            return report(&exit::CliError::invalid(not_utf8()));
        }
        Err(err) => return usage_error(err),
    };
    cli.globals.note_typed(&matches);
    init_logging(cli.globals.log_format, cli.command.reports_durability());
    if let Err(err) = hash_ids_in_spans() {
        return report(&err);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => return report(&exit::CliError::io("cannot start the async runtime", &err)),
    };
    match runtime.block_on(commands::run(cli.globals, cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => report(&err),
    }
}

/// Names the first argument (by position, and the option before it) or environment variable
/// that is not UTF-8. The value itself is never shown: it may be a store URL with a password.
fn not_utf8() -> String {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    for (index, arg) in args.iter().enumerate() {
        if arg.to_str().is_some() {
            continue;
        }
        let option = arg
            .as_encoded_bytes()
            .split(|&b| b == b'=')
            .next()
            .and_then(|name| std::str::from_utf8(name).ok())
            .filter(|name| name.starts_with('-') && arg.as_encoded_bytes().contains(&b'='))
            .or_else(|| {
                let before = args.get(index.checked_sub(1)?)?.to_str()?;
                before.starts_with('-').then_some(before)
            });
        let position = index + 1;
        return match option {
            Some(option) => {
                format!("invalid argument: argument {position} ({option}) is not valid UTF-8")
            }
            None => format!("invalid argument: argument {position} is not valid UTF-8"),
        };
    }
    for var in
        ["AGENT_MEMORY_STORE", "AGENT_MEMORY_APP", "AGENT_MEMORY_USER", "AGENT_MEMORY_NAMESPACE"]
    {
        if std::env::var_os(var).is_some_and(|value| value.to_str().is_none()) {
            return format!("invalid argument: {var} is not valid UTF-8");
        }
    }
    "invalid argument: an argument is not valid UTF-8".to_owned()
}

/// The variable that turns on application and user ids in spans, as hashes keyed with its
/// value (at least 16 bytes); unset, spans carry no ids at all. The remote server's log names
/// token users by a hash keyed with it too (with a random per-process secret when unset).
const ID_HASH_KEY: &str = "AGENT_MEMORY_ID_HASH_KEY";

/// Reads [`ID_HASH_KEY`]; the key itself is never printed.
fn hash_ids_in_spans() -> Result<(), exit::CliError> {
    let Some(key) = std::env::var_os(ID_HASH_KEY) else { return Ok(()) };
    agent_memory::observe::record_hashed_ids(Some(key.as_encoded_bytes())).map_err(|_| {
        exit::CliError::invalid(format!(
            "{ID_HASH_KEY} must be at least {} bytes",
            agent_memory::observe::MIN_ID_KEY_BYTES
        ))
    })
}

/// A usage error as one line: clap's first line and its tips, then which `--help` to read.
/// Help and version requests are printed as clap prints them.
fn usage_error(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        err.exit();
    }
    let rendered = err.render().to_string();
    let mut lines = rendered.lines().map(str::trim).filter(|line| !line.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let mut message = first.strip_prefix("error: ").unwrap_or(first).to_owned();
    // The indented lines under the first name the arguments it speaks of (`--to <URL>`);
    // usage and "for more information" are replaced by the hint below.
    let mut named = Vec::new();
    for line in
        lines.take_while(|line| !line.starts_with("Usage:") && !line.starts_with("For more"))
    {
        match line.strip_prefix("tip: ") {
            Some(tip) => message.push_str(&format!(" ({tip})")),
            None => named.push(line),
        }
    }
    if !named.is_empty() {
        message.push_str(&format!(" {}", named.join(", ")));
    }
    let err = exit::CliError::invalid(format!("{message}; see '{} --help'", command_path()));
    progress::eprintln_safe(&format!("error: {err}"));
    ExitCode::from(2)
}

/// `agent-memory` and the (sub)commands named on the command line, for the `--help` to read.
fn command_path() -> String {
    let mut path = vec!["agent-memory".to_owned()];
    let mut command = Cli::command();
    for arg in std::env::args_os().skip(1) {
        let Some(arg) = arg.to_str() else { continue };
        let Some(sub) = command.find_subcommand(arg).cloned() else { continue };
        path.push(sub.get_name().to_owned());
        command = sub;
    }
    path.join(" ")
}

fn report(err: &exit::CliError) -> ExitCode {
    if err.kind() == exit::ErrorKind::ClosedPipe {
        return ExitCode::SUCCESS;
    }
    progress::error(&err.to_string());
    err.exit_code()
}

/// Logs to stderr only: for `mcp`, stdout carries the protocol, and for every other command it
/// carries data. The filter comes from `AGENT_MEMORY_LOG`, then `RUST_LOG`, else `warn`;
/// `format` chooses text lines or one JSON object per line.
///
/// rmcp's own events are capped at `warn` unless the filter names `rmcp` itself: at `info` it
/// logs every stateless HTTP request twice, and at `debug` it prints whole requests and results,
/// stored content included, which our logs never carry.
///
/// A Redis store warns at start when its persistence settings can lose acknowledged writes.
/// Only `setup` and the servers (`reports_durability`) show that warning: it is about the
/// deployment, not the command, and repeating it on every one-shot call buries the output.
/// A filter that names `durability` itself shows it everywhere.
fn init_logging(format: LogFormat, reports_durability: bool) {
    progress::set_json_lines(format == LogFormat::Json);
    let wanted = std::env::var("AGENT_MEMORY_LOG").or_else(|_| std::env::var("RUST_LOG")).ok();
    let (filter, invalid) = match wanted.as_deref().map(tracing_subscriber::EnvFilter::try_new) {
        Some(Ok(filter)) => (filter, false),
        Some(Err(_)) => (tracing_subscriber::EnvFilter::new("warn"), true),
        None => (tracing_subscriber::EnvFilter::new("warn"), false),
    };
    let names = |part: &str| wanted.as_deref().is_some_and(|wanted| wanted.contains(part));
    let mut filter = filter;
    if !names("rmcp") {
        if let Ok(cap) = "rmcp=warn".parse() {
            filter = filter.add_directive(cap);
        }
    }
    if !reports_durability && !names("durability") {
        if let Ok(quiet) = "agent_memory::redis::durability=error".parse() {
            filter = filter.add_directive(quiet);
        }
    }
    // A span that closes is a line too, with its duration, so
    // `AGENT_MEMORY_LOG=agent_memory=info` logs every store operation and tool call.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE);
    match format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        // `span` is the innermost span around the line, with its fields: the store operation or
        // the tool call it belongs to.
        LogFormat::Json => logs.json().with_current_span(true).with_span_list(false).init(),
    }
    if invalid {
        tracing::warn!("the log filter in AGENT_MEMORY_LOG or RUST_LOG is invalid; using `warn`");
    }
}
