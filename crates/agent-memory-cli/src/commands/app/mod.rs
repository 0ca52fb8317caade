//! Whole-application commands: `users`, `apps` and `migrate` (of one application, or of every
//! one with `--all-apps`), and the walk over every user of an application that they share
//! with `purge-expired --all-users` and `export --all-users`.
//!
//! Every walk is a sequence of bounded calls: one page of ids, then one user at a time,
//! namespace by namespace, one page of records at a time. Nothing is kept between users but
//! counters, so memory does not grow with the store.

use std::sync::Arc;

use agent_memory::{validation, MemoryStore};
use clap::Subcommand;

use super::globals::Globals;
use crate::exit::{CliError, CliResult};
use crate::output::{escape_text, Output};

mod migrate;
mod pages;

use migrate::{
    check_target, copy_and_verify, copy_and_verify_all, count_all, count_only, open_target,
};
pub use pages::{each_page, every_page, IdPages};
use pages::{print_ids, APPLICATIONS, USERS};

/// The whole-application commands, as clap parses them.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the ids of the application's users that hold records (expired ones included), in
    /// ascending byte order.
    Users {
        /// User ids per page, 1 to 100.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u8).range(1..=100))]
        limit: u8,

        /// Continue after this user id (printed on stderr when more users are left).
        #[arg(long, value_name = "USER")]
        after: Option<String>,

        /// Follow the listing to the end and print every user id.
        #[arg(long)]
        all: bool,
    },

    /// List the ids of the store's applications that hold records (expired ones included), in
    /// ascending byte order (--app is not needed).
    Apps {
        /// Application ids per page, 1 to 100.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u8).range(1..=100))]
        limit: u8,

        /// Continue after this application id (printed on stderr when more are left).
        #[arg(long, value_name = "APP")]
        after: Option<String>,

        /// Follow the listing to the end and print every application id.
        #[arg(long)]
        all: bool,
    },

    /// Copy every live record of every user of --app (or of every application, with
    /// --all-apps) from --store to another store, then verify record counts and a content
    /// checksum per user.
    Migrate {
        /// The target store's URL (same forms as --store); optional with --dry-run, which
        /// then only counts.
        #[arg(long, value_name = "URL", required_unless_present = "dry_run")]
        to: Option<String>,

        /// Migrate every application of the store, one after another in ascending byte order,
        /// instead of --app.
        // Not a clap conflict with --app: clap would count AGENT_MEMORY_APP too, and an app
        // exported for everyday use is ignored here (`prepare` refuses a typed --app).
        #[arg(long)]
        all_apps: bool,

        /// With --all-apps: continue with the application after this one (as a stopped
        /// migration says).
        #[arg(long, value_name = "APP", requires = "all_apps")]
        after_app: Option<String>,

        /// Continue after this user id: the users up to it are neither copied nor verified.
        /// With --all-apps, it applies to the first application migrated.
        #[arg(long, value_name = "USER")]
        after: Option<String>,

        /// Only count the users and live records that would be copied; with --to, also check
        /// that the target can be reached (nothing is copied).
        #[arg(long)]
        dry_run: bool,
    },
}

/// A whole-application command with its application (and any `--after` position) checked.
#[derive(Debug)]
pub enum Job {
    Users {
        application_id: String,
        limit: usize,
        after: Option<String>,
        all: bool,
    },
    Apps {
        limit: usize,
        after: Option<String>,
        all: bool,
    },
    Migrate {
        application_id: String,
        to: Option<String>,
        after: Option<String>,
        dry_run: bool,
    },
    MigrateAll {
        to: Option<String>,
        after_app: Option<String>,
        after: Option<String>,
        dry_run: bool,
    },
}

impl Command {
    /// Checks `--app` and any `--after` position before the store is opened.
    ///
    /// # Errors
    /// `Invalid` for a missing or bad application id, or a bad `--after` or `--after-app`.
    pub fn prepare(self, globals: &Globals) -> CliResult<Job> {
        Ok(match self {
            Command::Users { limit, after, all } => {
                let application_id = globals.application("users")?;
                check_after(after.as_deref())?;
                Job::Users { application_id, limit: usize::from(limit), after, all }
            }
            Command::Apps { limit, after, all } => {
                check_after_app(after.as_deref())?;
                Job::Apps { limit: usize::from(limit), after, all }
            }
            Command::Migrate { to, all_apps: true, after_app, after, dry_run } => {
                // A typed --app, before or after the command name; an AGENT_MEMORY_APP exported
                // for everyday use is ignored, like --user is.
                if globals.typed_app() {
                    return Err(CliError::invalid(
                        "--all-apps migrates every application: leave out --app",
                    ));
                }
                check_after_app(after_app.as_deref())?;
                check_after(after.as_deref())?;
                Job::MigrateAll { to, after_app, after, dry_run }
            }
            Command::Migrate { to, all_apps: false, after, dry_run, .. } => {
                let application_id = globals.application("migrate")?;
                check_after(after.as_deref())?;
                Job::Migrate { application_id, to, after, dry_run }
            }
        })
    }
}

/// Checks a `--after USER` option: a user id like any other.
///
/// # Errors
/// `Invalid` for a user id that breaks a scope rule.
pub fn check_after(after: Option<&str>) -> CliResult {
    if let Some(user) = after {
        validation::id("user_id", user)?;
    }
    Ok(())
}

/// Checks an application id given as a position (`apps --after`, `migrate --after-app`).
fn check_after_app(after: Option<&str>) -> CliResult {
    if let Some(app) = after {
        validation::id("application_id", app)?;
    }
    Ok(())
}

/// The error of a walk that stopped midway: "`what` stopped after `done` (continue with
/// FLAG ID …)", the flags being where a rerun resumes (`--after USER`, with `--after-app APP`
/// before it for `migrate --all-apps`), or `fresh` in the parentheses when nothing was
/// finished. The one place `purge-expired --all-users` and `migrate` word it.
pub fn stopped(
    err: CliError,
    what: &str,
    done: &str,
    resume: &[(&str, &str)],
    fresh: &str,
) -> CliError {
    let resume = if resume.is_empty() {
        fresh.to_owned()
    } else {
        let flags: Vec<String> =
            resume.iter().map(|(flag, id)| format!("{flag} {}", escape_text(id))).collect();
        format!("continue with {}", flags.join(" "))
    };
    err.context(&format!("{what} stopped after {done} ({resume}): "))
}

/// Runs a checked whole-application command against a started store.
pub async fn run(job: Job, store: Arc<dyn MemoryStore>, out: &mut Output) -> CliResult {
    match job {
        Job::Users { application_id, limit, after, all } => {
            let pages = IdPages::users(store.as_ref(), &application_id, after.as_deref());
            print_ids(pages, &USERS, limit, all, out).await
        }
        Job::Apps { limit, after, all } => {
            let pages = IdPages::applications(store.as_ref(), after.as_deref());
            print_ids(pages, &APPLICATIONS, limit, all, out).await
        }
        Job::Migrate { application_id, to, after, dry_run } => {
            let after = after.as_deref();
            if dry_run {
                check_target(to.as_deref()).await?;
                return count_only(store.as_ref(), &application_id, after, out).await;
            }
            let target = open_target(to.as_deref()).await?;
            let result = copy_and_verify(&store, &target, &application_id, after, out).await;
            result.and(target.close().await.map_err(CliError::from))
        }
        Job::MigrateAll { to, after_app, after, dry_run } => {
            let (after_app, after) = (after_app.as_deref(), after.as_deref());
            if dry_run {
                check_target(to.as_deref()).await?;
                return count_all(store.as_ref(), after_app, after, out).await;
            }
            let target = open_target(to.as_deref()).await?;
            let result = copy_and_verify_all(&store, &target, after_app, after, out).await;
            result.and(target.close().await.map_err(CliError::from))
        }
    }
}
