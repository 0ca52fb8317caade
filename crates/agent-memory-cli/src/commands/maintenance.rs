//! Trusted maintenance: `setup`, `namespaces`, `purge-expired`, `delete-all`, `delete-user`.

use std::sync::Arc;

use agent_memory::{validation::MAX_PAGE_LIMIT, MemoryScope, MemoryStore};
use clap::Subcommand;
use serde_json::json;

use super::app::{every_page, stopped, IdPages};
use super::globals::{Globals, User};
use crate::exit::{CliError, CliResult};
use crate::output::{self, namespace_text, Output};
use crate::progress;

/// The maintenance commands, as clap parses them (in the order `--help` lists them).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Physically remove expired records of the namespace (follows cursors to the end), or
    /// of every namespace of every user of --app with --all-users.
    PurgeExpired {
        /// Sweep every namespace of every user of --app (--user and --namespace are ignored).
        #[arg(long)]
        all_users: bool,

        /// With --all-users: continue after this user id (as a stopped sweep says).
        #[arg(long, value_name = "USER", requires = "all_users")]
        after: Option<String>,
    },

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
    PurgeAllUsers {
        application_id: String,
        after: Option<String>,
    },
    DeleteAll(MemoryScope),
    DeleteUser(User),
    /// Needs no scope: starting the store is the whole job.
    Setup,
    Namespaces(User),
}

impl Job {
    /// True for `setup`, which creates the store; the others read or erase, and open an
    /// existing store only.
    pub fn creates(&self) -> bool {
        matches!(self, Job::Setup)
    }
}

impl Command {
    /// True for `setup`.
    pub fn is_setup(&self) -> bool {
        matches!(self, Command::Setup)
    }

    /// Checks the scope (none for `setup`) and the `--yes` of an erasure.
    ///
    /// # Errors
    /// `Invalid` for a missing or bad scope, or an erasure without `--yes`.
    pub fn prepare(self, globals: &Globals) -> CliResult<Job> {
        Ok(match self {
            Command::PurgeExpired { all_users: false, .. } => Job::PurgeExpired(globals.scope()?),
            Command::PurgeExpired { all_users: true, after } => {
                let application_id = globals.application("purge-expired --all-users")?;
                super::app::check_after(after.as_deref())?;
                Job::PurgeAllUsers { application_id, after }
            }
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
        Job::PurgeAllUsers { application_id, after } => {
            purge_all_users(store, &application_id, after.as_deref(), out).await
        }
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
    every_page(async |request| {
        let page = store.list_namespaces(&user.application_id, &user.user_id, request).await?;
        scopes.extend(page.items);
        Ok(page.next_cursor)
    })
    .await?;
    out.listing(
        &scopes,
        |scope| scope,
        "no namespaces",
        &["NAMESPACE"],
        |s| vec![namespace_text(s)],
    )
}

/// Sweeps the whole namespace, following cursors even through pages that removed nothing.
async fn purge_expired(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    out: &mut Output,
) -> CliResult {
    let spinner = progress::spinner("purging expired records");
    let mut purged = 0u64;
    let result = sweep(store, scope, &mut purged, &spinner).await;
    spinner.finish_and_clear();
    result?;
    out.summary(
        &format!("purged {}", output::count(purged, "expired record")),
        &json!({"purged": purged}),
    )
}

/// Sweeps one namespace to the end, adding what it removes to `purged`.
async fn sweep(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    purged: &mut u64,
    spinner: &indicatif::ProgressBar,
) -> CliResult {
    every_page(async |request| {
        let page = store.purge_expired(scope, request).await.map_err(CliError::from_write)?;
        *purged += page.deleted;
        spinner.set_position(*purged);
        Ok(page.next_cursor)
    })
    .await
}

/// Sweeps every namespace of every user of the application, one user at a time after
/// `after`; a failure says which user to continue after.
async fn purge_all_users(
    store: &dyn MemoryStore,
    application_id: &str,
    after: Option<&str>,
    out: &mut Output,
) -> CliResult {
    let spinner = progress::spinner("purging expired records");
    let (mut purged, mut users) = (0u64, 0u64);
    let mut last: Option<String> = after.map(str::to_owned);
    let mut pages = IdPages::users(store, application_id, after);
    let result: CliResult = async {
        while let Some(ids) = pages.next(MAX_PAGE_LIMIT).await? {
            for user_id in ids {
                let user = User { application_id: application_id.to_owned(), user_id };
                purge_user(store, &user, &mut purged, &spinner).await?;
                users += 1;
                last = Some(user.user_id);
            }
        }
        Ok(())
    }
    .await;
    spinner.finish_and_clear();
    if let Err(err) = result {
        let done = format!(
            "{} of {}",
            output::count(purged, "expired record"),
            output::count(users, "user")
        );
        let resume: Vec<(&str, &str)> = last.iter().map(|u| ("--after", u.as_str())).collect();
        return Err(stopped(err, "purge", &done, &resume, "run it again"));
    }
    out.summary(
        &format!(
            "purged {} from {}",
            output::count(purged, "expired record"),
            output::count(users, "user")
        ),
        &json!({"purged": purged, "users": users}),
    )
}

/// Sweeps every namespace of one user.
async fn purge_user(
    store: &dyn MemoryStore,
    user: &User,
    purged: &mut u64,
    spinner: &indicatif::ProgressBar,
) -> CliResult {
    every_page(async |request| {
        let page = store.list_namespaces(&user.application_id, &user.user_id, request).await?;
        for scope in &page.items {
            sweep(store, scope, purged, spinner).await?;
        }
        Ok(page.next_cursor)
    })
    .await
}

/// Erases one namespace.
async fn delete_all(store: &dyn MemoryStore, scope: &MemoryScope, out: &mut Output) -> CliResult {
    let deleted = store.delete_all(scope).await.map_err(CliError::from_write)?;
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
    let deleted = result.map_err(CliError::from_write)?;
    out.summary(
        &format!("deleted {} in every namespace of the user", output::count(deleted, "record")),
        &json!({"deleted": deleted}),
    )
}
