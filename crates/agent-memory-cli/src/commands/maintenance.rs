//! Trusted maintenance: `setup`, `namespaces`, `purge-expired`, `delete-all`, `delete-user`.

use std::sync::Arc;

use agent_memory::{validation::MAX_PAGE_LIMIT, MemoryScope, MemoryStore, PageRequest};
use clap::Subcommand;
use serde_json::json;

use super::globals::{Globals, User};
use crate::exit::{CliError, CliResult};
use crate::output::{self, namespace_text, Output};
use crate::progress;

/// The maintenance commands, as clap parses them (in the order `--help` lists them).
#[derive(Debug, Subcommand)]
pub enum Command {
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
}

/// A maintenance command with its scope checked and any erasure confirmed.
#[derive(Debug)]
pub enum Job {
    PurgeExpired(MemoryScope),
    DeleteAll(MemoryScope),
    DeleteUser(User),
    /// Needs no scope: starting the store is the whole job.
    Setup,
    Namespaces(User),
}

impl Command {
    /// Checks the scope (none for `setup`) and the `--yes` of an erasure.
    ///
    /// # Errors
    /// `Invalid` for a missing or bad scope, or an erasure without `--yes`.
    pub fn prepare(self, globals: &Globals) -> CliResult<Job> {
        Ok(match self {
            Command::PurgeExpired => Job::PurgeExpired(globals.scope()?),
            Command::DeleteAll { yes } => {
                let scope = globals.scope()?;
                confirm(yes, "delete-all erases every record of the namespace")?;
                Job::DeleteAll(scope)
            }
            Command::DeleteUser { yes } => {
                let user = globals.user("delete-user")?;
                confirm(yes, "delete-user erases every record of the user in every namespace")?;
                Job::DeleteUser(user)
            }
            Command::Setup => Job::Setup,
            Command::Namespaces => Job::Namespaces(globals.user("namespaces")?),
        })
    }
}

/// An erasure runs only with `--yes`: there is no undo.
fn confirm(yes: bool, what: &str) -> CliResult {
    if yes {
        Ok(())
    } else {
        Err(CliError::invalid(format!("{what}; pass --yes to confirm")))
    }
}

/// Runs a checked maintenance command against a started store.
pub async fn run(job: Job, store: Arc<dyn MemoryStore>, out: &mut Output) -> CliResult {
    let store = store.as_ref();
    match job {
        Job::PurgeExpired(scope) => purge_expired(store, &scope, out).await,
        Job::DeleteAll(scope) => delete_all(store, &scope, out).await,
        Job::DeleteUser(user) => delete_user(store, &user, out).await,
        Job::Setup => setup(out),
        Job::Namespaces(user) => namespaces(store, &user, out).await,
    }
}

/// The store was started by the caller, which creates or validates its schema; this only
/// reports it.
fn setup(out: &mut Output) -> CliResult {
    out.summary("store ready: schema created or validated", &json!({"ready": true}))
}

/// Every namespace of the user that physically holds a record.
async fn namespaces(store: &dyn MemoryStore, user: &User, out: &mut Output) -> CliResult {
    let mut scopes = Vec::new();
    let mut cursor = None;
    loop {
        let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(cursor);
        let page = store.list_namespaces(&user.application_id, &user.user_id, request).await?;
        scopes.extend(page.items);
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    if out.is_json() {
        return scopes.iter().try_for_each(|scope| out.json_line(scope));
    }
    if scopes.is_empty() {
        return out.line("no namespaces");
    }
    let rows: Vec<Vec<String>> = scopes.iter().map(|s| vec![namespace_text(s)]).collect();
    out.table(Some(&["NAMESPACE"]), &rows)
}

/// Sweeps the whole namespace, following cursors even through pages that removed nothing.
async fn purge_expired(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    out: &mut Output,
) -> CliResult {
    let spinner = progress::spinner("purging expired records");
    let mut purged = 0u64;
    let mut cursor = None;
    loop {
        let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(cursor);
        let page = store.purge_expired(scope, request).await;
        let page = match page {
            Ok(page) => page,
            Err(err) => {
                spinner.finish_and_clear();
                return Err(err.into());
            }
        };
        purged += page.deleted;
        spinner.set_position(purged);
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    spinner.finish_and_clear();
    out.summary(
        &format!("purged {}", output::count(purged, "expired record")),
        &json!({"purged": purged}),
    )
}

/// Erases one namespace.
async fn delete_all(store: &dyn MemoryStore, scope: &MemoryScope, out: &mut Output) -> CliResult {
    let deleted = store.delete_all(scope).await?;
    out.summary(
        &format!("deleted {}", output::count(deleted, "record")),
        &json!({"deleted": deleted}),
    )
}

/// Erases every namespace of the user. One library call (the provider batches inside it), so
/// the terminal shows a spinner rather than a count; a retry after a failure removes the rest.
async fn delete_user(store: &dyn MemoryStore, user: &User, out: &mut Output) -> CliResult {
    let spinner = progress::busy("deleting the user's records");
    let result = store.delete_user(&user.application_id, &user.user_id).await;
    spinner.finish_and_clear();
    let deleted = result?;
    out.summary(
        &format!("deleted {} in every namespace of the user", output::count(deleted, "record")),
        &json!({"deleted": deleted}),
    )
}
