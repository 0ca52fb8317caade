//! `review-link`: mints a sign-in link to the review page of `mcp --listen
//! --review-key-file FILE` for one user. It reads only the secret's file, never the store.

use std::path::PathBuf;
use std::time::Duration;

use agent_memory::review::{self, ReviewSecret};
use agent_memory::Timestamp;
use clap::Subcommand;
use serde_json::json;

use super::globals::{Globals, User};
use crate::duration;
use crate::exit::{CliError, CliResult};
use crate::output::Output;

/// The `review-link` command, as clap parses it.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a sign-in link to the review page for --user of --app: opened once, within
    /// --ttl, it shows that person their memories (to see, correct, download and erase).
    ReviewLink {
        /// The server's secret file (the one given to `mcp --review-key-file`).
        #[arg(long, value_name = "FILE")]
        review_key_file: PathBuf,
        /// The server's origin as the browser reaches it, e.g. https://memory.example.com.
        #[arg(long, value_name = "URL")]
        base_url: String,
        /// How long the link works: 15m (the default), 1h; at most 24h.
        #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = duration::parse)]
        ttl: Duration,
    },
}

/// A checked `review-link` command.
#[derive(Debug)]
pub struct Job {
    user: User,
    key_file: PathBuf,
    base_url: String,
    ttl: Duration,
}

impl Command {
    /// Checks the scope and the lifetime.
    ///
    /// # Errors
    /// `Invalid` for a missing `--app` or `--user`, or a `--ttl` over 24 hours.
    pub fn prepare(self, globals: &Globals) -> CliResult<Job> {
        let Command::ReviewLink { review_key_file, base_url, ttl } = self;
        let user = globals.user("review-link")?;
        if ttl.is_zero() || ttl > review::MAX_TTL {
            return Err(CliError::invalid("--ttl must be more than zero and at most 24h"));
        }
        Ok(Job { user, key_file: review_key_file, base_url, ttl })
    }
}

/// Prints the link (with `--json`, an object with `url` and `expires_at`).
pub fn run(job: Job, out: &mut Output) -> CliResult {
    let secret = ReviewSecret::from_file(&job.key_file)?;
    let expires_at = Timestamp::now().saturating_add(job.ttl);
    let url = review::review_link(
        &secret,
        &job.base_url,
        &job.user.application_id,
        &job.user.user_id,
        job.ttl,
    )?;
    out.summary(&url, &json!({"url": url, "expires_at": expires_at}))
}
