//! Dispatch: resolve the scope, open and start the store, run one command, close the store.
//!
//! The scope is checked before the store is opened, so a missing `--user` never creates a
//! database file, and the store URL is never printed (it may hold a password).

mod backup;
mod maintenance;
mod records;
mod store;

use std::path::PathBuf;
use std::sync::Arc;

use agent_memory::{MemoryScope, MemoryStore};

use crate::exit::{CliError, CliResult};
use crate::mcp::ToolSet;
use crate::output::Output;
use crate::transfer::Plan;
use crate::{Command, Globals, PageArgs, PutArgs};

/// One command with its input checked, ready to run against a started store.
enum Job {
    Put(MemoryScope, PutArgs, String),
    Get(MemoryScope, String),
    List(MemoryScope, Option<String>, PageArgs),
    Delete(MemoryScope, String, Option<String>),
    PurgeExpired(MemoryScope),
    DeleteAll(MemoryScope),
    DeleteUser(User),
    Setup,
    Namespaces(User),
    Export(User, Option<PathBuf>),
    Import(Plan, bool),
    Mcp(MemoryScope, ToolSet),
}

/// An application id and a user id, both validated.
pub type User = (String, String);

/// Runs `command` with the global options: checks its input, then opens and starts the store,
/// runs it, and closes the store whether it succeeded or not. A failed close after a
/// successful command is reported: for a file store it can mean the last writes did not reach
/// disk.
pub async fn run(globals: Globals, command: Command) -> CliResult {
    let job = prepare(&globals, command).await?;
    // Nothing is written to `out` by `mcp`: there stdout belongs to the MCP protocol.
    let mut out = Output::stdout(globals.json);
    store::with_store(globals.store.as_deref(), |store| async move {
        let result = execute(store, job, &mut out).await;
        // Whatever was printed before a failure is still delivered.
        result.and(out.flush())
    })
    .await
}

/// Everything that can be checked without the store: scope, confirmation, stdin, the import
/// file. A mistake here never opens (or creates) the store.
async fn prepare(globals: &Globals, command: Command) -> CliResult<Job> {
    Ok(match command {
        Command::Put(args) => {
            let scope = scope(globals)?;
            let content = records::content_arg(args.content.as_deref()).await?;
            Job::Put(scope, args, content)
        }
        Command::Get { key } => Job::Get(scope(globals)?, key),
        Command::List(page) => Job::List(scope(globals)?, None, page),
        Command::Search { query, page } => Job::List(scope(globals)?, Some(query), page),
        Command::Delete { key, if_revision } => Job::Delete(scope(globals)?, key, if_revision),
        Command::PurgeExpired => Job::PurgeExpired(scope(globals)?),
        Command::DeleteAll { yes } => {
            let scope = scope(globals)?;
            confirm(yes, "delete-all erases every record of the namespace")?;
            Job::DeleteAll(scope)
        }
        Command::DeleteUser { yes } => {
            let user = user(globals, "delete-user")?;
            confirm(yes, "delete-user erases every record of the user in every namespace")?;
            Job::DeleteUser(user)
        }
        Command::Setup => Job::Setup,
        Command::Namespaces => Job::Namespaces(user(globals, "namespaces")?),
        Command::Export { output } => Job::Export(user(globals, "export")?, output),
        Command::Import { input, any_user, skip_existing } => {
            let owner = backup::owner(globals, any_user)?;
            Job::Import(backup::read_plan(input.as_deref(), &owner).await?, skip_existing)
        }
        Command::Mcp { tools } => Job::Mcp(scope(globals)?, tools),
    })
}

async fn execute(store: Arc<dyn MemoryStore>, job: Job, out: &mut Output) -> CliResult {
    match job {
        Job::Put(scope, args, content) => records::put(store, scope, args, content, out).await,
        Job::Get(scope, key) => records::get(store, scope, key, out).await,
        Job::List(scope, query, page) => records::list(store, scope, query, page, out).await,
        Job::Delete(scope, key, rev) => records::delete(store, scope, key, rev, out).await,
        Job::PurgeExpired(scope) => maintenance::purge_expired(store, scope, out).await,
        Job::DeleteAll(scope) => maintenance::delete_all(store, scope, out).await,
        Job::DeleteUser(user) => maintenance::delete_user(store, user, out).await,
        Job::Setup => maintenance::setup(out).await,
        Job::Namespaces(user) => maintenance::namespaces(store, user, out).await,
        Job::Export(user, output) => backup::export(store, user, output, out).await,
        Job::Import(plan, skip_existing) => backup::import(store, plan, skip_existing, out).await,
        Job::Mcp(scope, tools) => serve(store, scope, tools).await,
    }
}

/// Serves MCP on stdio until the client closes it. The scope was built here from trusted
/// options; the MCP client can never choose it.
async fn serve(store: Arc<dyn MemoryStore>, scope: MemoryScope, tools: ToolSet) -> CliResult {
    tracing::info!(?scope, ?tools, "serving MCP on stdio");
    crate::mcp::serve(store, scope, tools)
        .await
        .map_err(|err| CliError::failure(format!("the MCP server stopped: {err}")))
}

/// The scope of `--app`, `--user` and `--namespace`.
fn scope(globals: &Globals) -> CliResult<MemoryScope> {
    let (application_id, user_id) = required_ids(globals)?;
    let scope = MemoryScope::new(application_id, user_id)?;
    match &globals.namespace {
        Some(namespace) => Ok(scope.with_namespace(namespace.clone())?),
        None => Ok(scope),
    }
}

/// The validated application and user ids of a command that covers every namespace of a user;
/// a `--namespace` given alongside is ignored, and said so.
fn user(globals: &Globals, command: &str) -> CliResult<User> {
    let (application_id, user_id) = required_ids(globals)?;
    MemoryScope::new(application_id.clone(), user_id.clone())?;
    ignore_namespace(globals, command);
    Ok((application_id, user_id))
}

fn required_ids(globals: &Globals) -> CliResult<(String, String)> {
    let application_id = globals.app.clone().ok_or_else(|| {
        CliError::invalid("no application id: pass --app or set AGENT_MEMORY_APP")
    })?;
    let user_id = globals
        .user
        .clone()
        .ok_or_else(|| CliError::invalid("no user id: pass --user or set AGENT_MEMORY_USER"))?;
    Ok((application_id, user_id))
}

fn ignore_namespace(globals: &Globals, command: &str) {
    if globals.namespace.is_some() {
        crate::progress::eprintln_safe(&format!(
            "note: {command} covers every namespace of the user; --namespace is ignored"
        ));
    }
}

fn confirm(yes: bool, what: &str) -> CliResult {
    if yes {
        Ok(())
    } else {
        Err(CliError::invalid(format!("{what}; pass --yes to confirm")))
    }
}
