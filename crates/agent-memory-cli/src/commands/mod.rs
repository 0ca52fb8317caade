//! The commands, one module per group, and the one path every command takes: check its input,
//! open and start the store, run, close the store. (`api-key` needs no store: it only edits the
//! key file of the remote MCP server, and never opens or creates a database; nor do
//! `completions` and `man`, which print what clap knows of the command line.)
//!
//! Only writes, `setup` and the servers may create a SQLite store that does not exist; every
//! other command opens an existing one only ([`store::Access`]), so a mistyped path fails
//! instead of leaving an empty database behind.
//!
//! Each group module owns its clap arguments, the checked job they become and the code that
//! runs it; this module only composes the groups. A job is built from the arguments and the
//! global options before the store is opened, so a mistake such as a missing `--user` never
//! opens (or creates) a database file, and the store URL is never printed (it may hold a
//! password).

mod api_key;
mod app;
mod backup;
mod globals;
mod maintenance;
mod mcp;
mod records;
mod review;
mod shell;
mod store;

use std::sync::Arc;

use agent_memory::MemoryStore;
use clap::Subcommand;

pub use self::globals::{Globals, LogFormat};
use self::store::{Access, Lifetime};
use crate::exit::CliResult;
use crate::output::Output;

/// Every command: the groups' own commands, flattened so `--help` lists them side by side.
#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(flatten)]
    Records(records::Command),
    #[command(flatten)]
    Maintenance(maintenance::Command),
    #[command(flatten)]
    Backup(backup::Command),
    #[command(flatten)]
    App(app::Command),
    #[command(flatten)]
    Mcp(mcp::Command),
    #[command(flatten)]
    ApiKey(api_key::Command),
    #[command(flatten)]
    Review(review::Command),
    #[command(flatten)]
    Shell(shell::Command),
}

impl Command {
    /// True for the commands that show a Redis deployment's durability warning: `setup` and
    /// the MCP servers (every other command runs once, and would repeat it on every call).
    pub fn reports_durability(&self) -> bool {
        matches!(self, Command::Mcp(_)) || self.is_setup()
    }

    fn is_setup(&self) -> bool {
        matches!(self, Command::Maintenance(command) if command.is_setup())
    }
}

/// One command with its input checked, ready to run against a started store.
#[derive(Debug)]
enum Job {
    Records(records::Job),
    Maintenance(maintenance::Job),
    Backup(backup::Job),
    App(app::Job),
    Mcp(mcp::Job),
    ApiKey(api_key::Job),
    Review(review::Job),
}

/// Runs `command` with the global options: checks its input, then lets
/// [`store::with_store`] open and start the store, run the job and close the store.
pub async fn run(globals: Globals, command: Command) -> CliResult {
    if let Command::Shell(command) = command {
        return shell::run(command);
    }
    let job = prepare(command, &globals).await?;
    // Nothing is written to `out` by `mcp`: there stdout belongs to the MCP protocol.
    let mut out = Output::stdout(globals.json);
    if let Job::ApiKey(job) = job {
        let result = api_key::run(job, &mut out);
        return result.and(out.flush());
    }
    // `review-link` reads only the review secret's file: no store either.
    if let Job::Review(job) = job {
        let result = review::run(job, &mut out);
        return result.and(out.flush());
    }
    let lifetime = if matches!(job, Job::Mcp(_)) { Lifetime::Serving } else { Lifetime::OneRun };
    let access = access(&job);
    store::with_store(globals.store.as_deref(), lifetime, access, |store| async move {
        let result = execute(job, store, &mut out).await;
        // Whatever was printed before a failure is still delivered.
        result.and(out.flush())
    })
    .await
}

async fn prepare(command: Command, globals: &Globals) -> CliResult<Job> {
    Ok(match command {
        Command::Records(command) => Job::Records(command.prepare(globals).await?),
        Command::Maintenance(command) => Job::Maintenance(command.prepare(globals)?),
        Command::Backup(command) => Job::Backup(command.prepare(globals).await?),
        Command::App(command) => Job::App(command.prepare(globals)?),
        Command::Mcp(command) => Job::Mcp(command.prepare(globals)?),
        Command::ApiKey(command) => Job::ApiKey(command.prepare(globals)?),
        Command::Review(command) => Job::Review(command.prepare(globals)?),
        Command::Shell(_) => {
            return Err(crate::exit::CliError::failure("completions and man need no store"))
        }
    })
}

/// Whether `job` may create a missing store: only writes, `setup` and the servers do, so a
/// read of a mistyped path never leaves an empty database behind.
fn access(job: &Job) -> Access {
    let creates = match job {
        Job::Records(job) => job.writes(),
        Job::Maintenance(job) => job.creates(),
        Job::Backup(job) => job.writes(),
        Job::App(_) | Job::ApiKey(_) | Job::Review(_) => false,
        Job::Mcp(_) => true,
    };
    if creates {
        Access::Create
    } else {
        Access::Existing
    }
}

async fn execute(job: Job, store: Arc<dyn MemoryStore>, out: &mut Output) -> CliResult {
    match job {
        Job::Records(job) => records::run(job, store, out).await,
        Job::Maintenance(job) => maintenance::run(job, store, out).await,
        Job::Backup(job) => backup::run(job, store, out).await,
        Job::App(job) => app::run(job, store, out).await,
        Job::Mcp(job) => mcp::run(job, store).await,
        // Run before any store is opened, in `run`.
        Job::ApiKey(job) => api_key::run(job, out),
        Job::Review(job) => review::run(job, out),
    }
}
