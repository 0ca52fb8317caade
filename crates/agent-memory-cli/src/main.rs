//! The `agent-memory` command line and MCP server.
//!
//! `main.rs` holds the clap definitions and hands the parsed command to [`commands::run`].
//! Everything a person or script relies on is written down in `docs/cli.md`: exit codes
//! ([`exit`]), the export format ([`transfer`]), and what each command touches.

mod commands;
mod duration;
mod exit;
mod mcp;
mod output;
mod progress;
mod transfer;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  not found (get or delete of a key with no live record)
  2  invalid input (bad argument, flag, URL or import line; usage errors)
  3  conflict (--if-revision or --create-only did not hold)
  4  failure (the store, a file, the terminal or the MCP transport failed)

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

/// Options every command accepts, before or after the command name.
#[derive(Debug, Args)]
pub struct Globals {
    /// Store URL: sqlite:PATH, postgres://…, redis://…, redis+cluster://h:p,h:p or memory:.
    /// Default: a SQLite file in the user's data directory
    /// (e.g. ~/.local/share/agent-memory/memories.db).
    #[arg(
        long,
        env = "AGENT_MEMORY_STORE",
        global = true,
        hide_env_values = true,
        value_name = "URL"
    )]
    pub store: Option<String>,

    /// Application id (1..=128 bytes, no control characters).
    #[arg(long, env = "AGENT_MEMORY_APP", global = true, value_name = "ID")]
    pub app: Option<String>,

    /// User id within the application.
    #[arg(long, env = "AGENT_MEMORY_USER", global = true, value_name = "ID")]
    pub user: Option<String>,

    /// Namespace within the user; omitted means the default namespace. Commands that cover
    /// every namespace of a user (namespaces, export, import, delete-user) ignore it.
    #[arg(long, env = "AGENT_MEMORY_NAMESPACE", global = true, value_name = "NAME")]
    pub namespace: Option<String>,

    /// Machine-readable output: one JSON object per line (per record where there are records).
    #[arg(long, global = true)]
    pub json: bool,
}

/// Paging options of `list` and `search`.
#[derive(Debug, Args)]
pub struct PageArgs {
    /// Records per page, 1 to 100.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub limit: u8,

    /// Continue after this cursor (printed on stderr when more records are left).
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,

    /// Follow cursors to the end and print every record.
    #[arg(long)]
    pub all: bool,
}

/// Options of `put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    /// The record's key (1..=256 bytes, no control characters).
    pub key: String,

    /// The text to remember; read from stdin when omitted (one trailing newline is dropped).
    pub content: Option<String>,

    /// Metadata as a JSON object, e.g. '{"category":"preferences"}'.
    #[arg(long, value_name = "JSON")]
    pub metadata: Option<String>,

    /// Forget the record after this long: 90s, 15m, 1h30m, 7d, 2w.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub expires_in: Option<Duration>,

    /// Replace only the live record with this revision (exit 3 otherwise).
    #[arg(long, value_name = "REV", conflicts_with = "create_only")]
    pub if_revision: Option<String>,

    /// Write only if no live record has the key (exit 3 otherwise).
    #[arg(long)]
    pub create_only: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Save a memory (insert or replace).
    Put(PutArgs),

    /// Show one memory; exit 1 when there is no live record.
    Get {
        /// The record's key.
        key: String,
    },

    /// List memories in ascending key order.
    List(PageArgs),

    /// List memories whose content contains QUERY (literal, case-sensitive).
    Search {
        /// Text to look for; `%`, `_`, `*` and `\` match themselves.
        query: String,
        #[command(flatten)]
        page: PageArgs,
    },

    /// Delete one memory; exit 1 when there was no live record.
    Delete {
        /// The record's key.
        key: String,
        /// Delete only the live record with this revision (exit 3 otherwise).
        #[arg(long, value_name = "REV")]
        if_revision: Option<String>,
    },

    /// Physically remove expired records of the namespace (follows cursors to the end).
    PurgeExpired,

    /// Erase every record of the namespace, expired ones included.
    DeleteAll {
        /// Confirm the erasure.
        #[arg(long)]
        yes: bool,
    },

    /// Erase every record of the user in every namespace.
    DeleteUser {
        /// Confirm the erasure.
        #[arg(long)]
        yes: bool,
    },

    /// Create the store's schema, or check an existing one.
    Setup,

    /// List every namespace of the user that holds records (expired ones included).
    Namespaces,

    /// Write every live record of the user, all namespaces, as JSON Lines.
    Export {
        /// Write to this file (created with owner-only permissions, replaced only when the
        /// export completed) instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },

    /// Read JSON Lines written by export and save each record (validated in full first).
    Import {
        /// The file to read; stdin when omitted or `-`.
        #[arg(value_name = "FILE")]
        input: Option<PathBuf>,

        /// Import each line under the scope it names, whatever its application and user;
        /// without it, every line must belong to --app/--user.
        #[arg(long)]
        any_user: bool,

        /// Keep records that already exist in the store instead of replacing them.
        #[arg(long)]
        skip_existing: bool,
    },

    /// Serve the memory tools over MCP on stdio for the scope given by the global options.
    Mcp {
        /// Which tools to expose.
        #[arg(long, value_enum, default_value = "keys")]
        tools: mcp::ToolSet,
    },
}

fn main() -> ExitCode {
    // Usage errors exit 2 and --help/--version exit 0, both from clap; an argument that is not
    // UTF-8 is reported here instead, on one line that says which argument it was.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if err.kind() == clap::error::ErrorKind::InvalidUtf8 => {
            return report(&exit::CliError::invalid(not_utf8()));
        }
        Err(err) => err.exit(),
    };
    init_logging();
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

fn report(err: &exit::CliError) -> ExitCode {
    progress::eprintln_safe(&format!("error: {err}"));
    err.exit_code()
}

/// Logs to stderr only: for `mcp`, stdout carries the protocol, and for every other command it
/// carries data. The filter comes from `AGENT_MEMORY_LOG`, then `RUST_LOG`, else `warn`.
fn init_logging() {
    let wanted = std::env::var("AGENT_MEMORY_LOG").or_else(|_| std::env::var("RUST_LOG")).ok();
    let (filter, invalid) = match wanted.as_deref().map(tracing_subscriber::EnvFilter::try_new) {
        Some(Ok(filter)) => (filter, false),
        Some(Err(_)) => (tracing_subscriber::EnvFilter::new("warn"), true),
        None => (tracing_subscriber::EnvFilter::new("warn"), false),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    if invalid {
        tracing::warn!("the log filter in AGENT_MEMORY_LOG or RUST_LOG is invalid; using `warn`");
    }
}
