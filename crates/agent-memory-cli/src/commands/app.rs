//! Whole-application commands: `users` and `migrate`, and the walk over every user of an
//! application that they share with `purge-expired --all-users` and `export --all-users`.
//!
//! Every walk is a sequence of bounded calls: one page of user ids, then one user at a time,
//! namespace by namespace, one page of records at a time. Nothing is kept between users but
//! counters, so memory does not grow with the store.

use std::sync::Arc;

use agent_memory::provider::user_cursor;
use agent_memory::{
    validation::{self, MAX_PAGE_LIMIT},
    Cursor, MemoryError, MemoryRecord, MemoryScope, MemoryStore, MemoryWrite, Metadata,
    PageRequest, Source, Timestamp,
};
use clap::Subcommand;
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use super::globals::Globals;
use crate::exit::{CliError, CliResult, ErrorKind};
use crate::output::{self, escape_text, Output};
use crate::progress;

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

    /// Copy every live record of every user of --app from --store to another store, then
    /// verify record counts and a content checksum per user.
    Migrate {
        /// The target store's URL (same forms as --store).
        #[arg(long, value_name = "URL")]
        to: String,

        /// Continue after this user id: the users up to it are neither copied nor verified.
        #[arg(long, value_name = "USER")]
        after: Option<String>,

        /// Only count the users and live records that would be copied; the target is not
        /// opened.
        #[arg(long)]
        dry_run: bool,
    },
}

/// A whole-application command with its application (and any `--after` user) checked.
#[derive(Debug)]
pub enum Job {
    Users { application_id: String, limit: usize, after: Option<String>, all: bool },
    Migrate { application_id: String, to: String, after: Option<String>, dry_run: bool },
}

impl Command {
    /// Checks `--app` and any `--after` user id before the store is opened.
    ///
    /// # Errors
    /// `Invalid` for a missing or bad application id or `--after` user id.
    pub fn prepare(self, globals: &Globals) -> CliResult<Job> {
        Ok(match self {
            Command::Users { limit, after, all } => {
                let application_id = globals.application("users")?;
                check_after(after.as_deref())?;
                Job::Users { application_id, limit: usize::from(limit), after, all }
            }
            Command::Migrate { to, after, dry_run } => {
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

/// Runs a checked whole-application command against a started store.
pub async fn run(job: Job, store: Arc<dyn MemoryStore>, out: &mut Output) -> CliResult {
    match job {
        Job::Users { application_id, limit, after, all } => {
            users(store.as_ref(), &application_id, limit, after.as_deref(), all, out).await
        }
        Job::Migrate { application_id, to, after, dry_run } => {
            let after = after.as_deref();
            if dry_run {
                return count_only(store.as_ref(), &application_id, after, out).await;
            }
            migrate(store, &application_id, &to, after, out).await
        }
    }
}

/// The users of one application, one bounded `list_users` page at a time.
pub struct UserPages<'a> {
    store: &'a dyn MemoryStore,
    application_id: &'a str,
    cursor: Option<Cursor>,
    started: bool,
}

impl<'a> UserPages<'a> {
    /// Walks the users of `application_id`, starting after the user id `after` (the first
    /// user without one).
    pub fn new(store: &'a dyn MemoryStore, application_id: &'a str, after: Option<&str>) -> Self {
        let cursor = after.map(|user| user_cursor(application_id, user));
        Self { store, application_id, cursor, started: false }
    }

    /// The next page of user ids (up to `limit`, possibly none while more follow), or `None`
    /// once the listing is done.
    ///
    /// # Errors
    /// As [`MemoryStore::list_users`].
    pub async fn next(&mut self, limit: usize) -> CliResult<Option<Vec<String>>> {
        if self.started && self.cursor.is_none() {
            return Ok(None);
        }
        self.started = true;
        let request = PageRequest::new(limit).after_opt(self.cursor.take());
        let page = self.store.list_users(self.application_id, request).await?;
        self.cursor = page.next_cursor;
        Ok(Some(page.items))
    }

    /// Whether more pages may follow.
    pub fn more(&self) -> bool {
        !self.started || self.cursor.is_some()
    }
}

/// `users`: up to `--limit` user ids, or all with `--all`; the user id to continue after is
/// printed on stderr, keeping stdout pure ids.
async fn users(
    store: &dyn MemoryStore,
    application_id: &str,
    limit: usize,
    after: Option<&str>,
    all: bool,
    out: &mut Output,
) -> CliResult {
    let mut pages = UserPages::new(store, application_id, after);
    let mut printed = 0usize;
    let mut last: Option<String> = None;
    loop {
        let want = if all { limit } else { limit - printed };
        let Some(ids) = pages.next(want).await? else { break };
        for id in ids {
            if out.is_json() {
                out.json_line(&json!({"user_id": id}))?;
            } else {
                out.line(&escape_text(&id))?;
            }
            printed += 1;
            last = Some(id);
        }
        if !pages.more() || (!all && printed >= limit) {
            break;
        }
    }
    if pages.more() {
        if let Some(last) = last {
            out.flush()?;
            progress::eprintln_safe(&format!(
                "more users: continue with --after {}",
                escape_text(&last)
            ));
        }
    }
    if printed == 0 && !out.is_json() {
        out.line("no users")?;
    }
    Ok(())
}

/// Every live record of one user, namespace by namespace in ascending order and keys
/// ascending within each, one bounded page at a time: `each` sees every page.
///
/// # Errors
/// A store error, or the first error of `each`.
pub async fn each_page<F>(
    store: &dyn MemoryStore,
    application_id: &str,
    user_id: &str,
    mut each: F,
) -> CliResult<u64>
where
    F: AsyncFnMut(&MemoryScope, Vec<MemoryRecord>) -> CliResult,
{
    let mut namespaces = 0u64;
    let mut namespace_cursor = None;
    loop {
        let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(namespace_cursor);
        let page = store.list_namespaces(application_id, user_id, request).await?;
        for scope in &page.items {
            namespaces += 1;
            let mut cursor = None;
            loop {
                let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(cursor);
                let records = store.list(scope, request).await?;
                cursor = records.next_cursor;
                each(scope, records.items).await?;
                if cursor.is_none() {
                    break;
                }
            }
        }
        namespace_cursor = page.next_cursor;
        if namespace_cursor.is_none() {
            return Ok(namespaces);
        }
    }
}

/// Every live record of one user, as [`each_page`] walks them, one bounded page per call
/// to [`next`](Self::next): usable inside a spawned task, where a closure's future could not
/// be proven `Send`.
struct RecordPages<'a> {
    store: &'a dyn MemoryStore,
    application_id: &'a str,
    user_id: &'a str,
    namespaces: std::vec::IntoIter<MemoryScope>,
    namespace_cursor: Option<Cursor>,
    namespaces_done: bool,
    current: Option<(MemoryScope, Option<Cursor>)>,
}

impl<'a> RecordPages<'a> {
    fn new(store: &'a dyn MemoryStore, application_id: &'a str, user_id: &'a str) -> Self {
        Self {
            store,
            application_id,
            user_id,
            namespaces: Vec::new().into_iter(),
            namespace_cursor: None,
            namespaces_done: false,
            current: None,
        }
    }

    /// The next page of records with its namespace, or `None` once the user is done.
    async fn next(&mut self) -> CliResult<Option<(MemoryScope, Vec<MemoryRecord>)>> {
        loop {
            if let Some((scope, cursor)) = self.current.take() {
                let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(cursor);
                let page = self.store.list(&scope, request).await?;
                if let Some(next) = page.next_cursor {
                    self.current = Some((scope.clone(), Some(next)));
                }
                return Ok(Some((scope, page.items)));
            }
            if let Some(scope) = self.namespaces.next() {
                self.current = Some((scope, None));
                continue;
            }
            if self.namespaces_done {
                return Ok(None);
            }
            let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(self.namespace_cursor.take());
            let page =
                self.store.list_namespaces(self.application_id, self.user_id, request).await?;
            self.namespace_cursor = page.next_cursor;
            self.namespaces_done = self.namespace_cursor.is_none();
            self.namespaces = page.items.into_iter();
        }
    }
}

/// What `migrate` compares of a record: everything the target store does not assign anew
/// (revision, `created_at` and `updated_at` are the target's, as with `import`).
#[derive(Serialize)]
struct Compared<'a> {
    namespace: &'a str,
    key: &'a str,
    content: &'a str,
    metadata: &'a Metadata,
    expires_at: Option<Timestamp>,
    source: &'a Source,
}

/// One user's live records as verification sees them: how many, and a SHA-256 over them in
/// listing order (namespaces ascending, keys ascending), which both stores share.
#[derive(Debug, PartialEq, Eq)]
struct Tally {
    records: u64,
    digest: [u8; 32],
}

/// How far past the start of a verification a record's expiry must lie for it to be compared:
/// one that expires sooner may vanish from one store between the two readings.
const EXPIRY_MARGIN: std::time::Duration = std::time::Duration::from_secs(60);

async fn tally(store: &dyn MemoryStore, application_id: &str, user_id: &str) -> CliResult<Tally> {
    let cutoff = Timestamp::now().saturating_add(EXPIRY_MARGIN);
    let mut hasher = Sha256::new();
    let mut records = 0u64;
    let mut pages = RecordPages::new(store, application_id, user_id);
    while let Some((scope, page)) = pages.next().await? {
        for record in page.iter().filter(|r| r.expires_at.is_none_or(|at| at > cutoff)) {
            let compared = Compared {
                namespace: scope.namespace_or_empty(),
                key: &record.key,
                content: &record.content,
                metadata: &record.metadata,
                expires_at: record.expires_at,
                source: &record.source,
            };
            let bytes = serde_json::to_vec(&compared)
                .map_err(|e| CliError::failure(format!("cannot encode a record: {e}")))?;
            // Length-prefixed, so no two sequences of records hash the same bytes.
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(&bytes);
            records += 1;
        }
    }
    Ok(Tally { records, digest: hasher.finalize().into() })
}

/// `migrate --dry-run`: the users and live records a migration would copy.
async fn count_only(
    store: &dyn MemoryStore,
    application_id: &str,
    after: Option<&str>,
    out: &mut Output,
) -> CliResult {
    let spinner = progress::spinner("counting records");
    let (mut users, mut records) = (0u64, 0u64);
    let mut pages = UserPages::new(store, application_id, after);
    let result: CliResult = async {
        while let Some(ids) = pages.next(MAX_PAGE_LIMIT).await? {
            for user_id in ids {
                users += 1;
                each_page(store, application_id, &user_id, async |_, page| {
                    records += page.len() as u64;
                    spinner.set_position(records);
                    Ok(())
                })
                .await?;
            }
        }
        Ok(())
    }
    .await;
    spinner.finish_and_clear();
    result?;
    out.summary(
        &format!(
            "would copy {} of {}",
            output::count(records, "record"),
            output::count(users, "user")
        ),
        &json!({"dry_run": true, "users": users, "records": records}),
    )
}

/// Opens and starts the target, copies and verifies, and closes the target whatever happened.
async fn migrate(
    source: Arc<dyn MemoryStore>,
    application_id: &str,
    to: &str,
    after: Option<&str>,
    out: &mut Output,
) -> CliResult {
    let target = agent_memory::open(to).map_err(|e| CliError::from(e).context("--to: "))?;
    target.start().await.map_err(|e| CliError::from(e).context("--to: "))?;
    let result = copy_and_verify(&source, &target, application_id, after, out).await;
    let closed = target.close().await.map_err(CliError::from);
    result.and(closed)
}

/// Counts of one migration.
#[derive(Default)]
struct Migrated {
    users: u64,
    records: u64,
    expired: u64,
    differ: u64,
}

async fn copy_and_verify(
    source: &Arc<dyn MemoryStore>,
    target: &Arc<dyn MemoryStore>,
    application_id: &str,
    after: Option<&str>,
    out: &mut Output,
) -> CliResult {
    let spinner = progress::spinner("migrating records");
    let mut done = Migrated::default();
    // The last user copied and verified in full: where a rerun may continue.
    let mut last: Option<String> = after.map(str::to_owned);
    let mut pages = UserPages::new(source.as_ref(), application_id, after);
    let result: CliResult = async {
        while let Some(ids) = pages.next(MAX_PAGE_LIMIT).await? {
            let Some(page_last) = ids.last().cloned() else { continue };
            let results = migrate_users(source, target, application_id, ids, &spinner).await;
            for (user_id, result) in results {
                let user = result?;
                done.records += user.records;
                done.expired += user.expired;
                if user.from != user.into {
                    done.differ += 1;
                    report_difference(out, &user_id, &user.from, &user.into)?;
                }
                done.users += 1;
            }
            // Only once the whole page is copied and verified: users finish out of order.
            last = Some(page_last);
        }
        Ok(())
    }
    .await;
    spinner.finish_and_clear();
    if let Err(err) = result {
        let resume = match &last {
            Some(user) => format!("continue with --after {}", escape_text(user)),
            None => "run it again (every copy replaces the same key)".to_owned(),
        };
        return Err(err.context(&format!(
            "migration stopped after copying {}, {} copied and verified ({resume}): ",
            output::count(done.records, "record"),
            output::count(done.users, "user")
        )));
    }
    let summary = json!({
        "users": done.users,
        "records": done.records,
        "skipped_expired": done.expired,
        "differences": done.differ,
        "verified": done.differ == 0,
    });
    if done.differ > 0 {
        if out.is_json() {
            out.json_line(&summary)?;
        }
        return Err(CliError::new(
            ErrorKind::Failure,
            format!(
                "verification failed: {} differ between the stores",
                output::count(done.differ, "user")
            ),
        ));
    }
    out.summary(
        &format!(
            "migrated {} of {}; verified: record counts and checksums equal",
            output::count(done.records, "record"),
            output::count(done.users, "user")
        ),
        &summary,
    )
}

/// Says which user differs and how, on stdout (one JSON object with `--json`).
fn report_difference(out: &mut Output, user_id: &str, from: &Tally, into: &Tally) -> CliResult {
    if out.is_json() {
        return out.json_line(&json!({
            "user_id": user_id,
            "source_records": from.records,
            "target_records": into.records,
            "checksum_equal": from.digest == into.digest,
        }));
    }
    let what = if from.records == into.records {
        "same record count, different content".to_owned()
    } else {
        format!("{} in the source, {} in the target", from.records, into.records)
    };
    out.line(&format!("differs: user {}: {what}", escape_text(user_id)))
}

/// How many users are copied and verified at once. Each user's records are written one at
/// a time (they share the user's quota usage, so concurrent writes of one user only queue on
/// it); different users' writes proceed side by side.
const CONCURRENT_USERS: usize = 16;

/// What copying and verifying one user found.
struct UserMigrated {
    records: u64,
    expired: u64,
    from: Tally,
    into: Tally,
}

/// Copies and verifies one page of users, up to [`CONCURRENT_USERS`] at a time; the results
/// come back in the page's order.
async fn migrate_users(
    source: &Arc<dyn MemoryStore>,
    target: &Arc<dyn MemoryStore>,
    application_id: &str,
    ids: Vec<String>,
    spinner: &indicatif::ProgressBar,
) -> Vec<(String, CliResult<UserMigrated>)> {
    let mut results: Vec<Option<CliResult<UserMigrated>>> = ids.iter().map(|_| None).collect();
    let mut tasks = JoinSet::new();
    let mut pending = ids.iter().cloned().enumerate();
    loop {
        while tasks.len() < CONCURRENT_USERS {
            let Some((index, user_id)) = pending.next() else { break };
            let (source, target) = (Arc::clone(source), Arc::clone(target));
            let (application_id, spinner) = (application_id.to_owned(), spinner.clone());
            tasks.spawn(async move {
                let result =
                    migrate_user(&source, &target, &application_id, &user_id, &spinner).await;
                (index, result)
            });
        }
        match tasks.join_next().await {
            Some(Ok((index, result))) => results[index] = Some(result),
            Some(Err(_)) => {}
            None => break,
        }
    }
    ids.into_iter()
        .zip(results)
        .map(|(user_id, result)| {
            let result =
                result.unwrap_or_else(|| Err(CliError::failure("a migration task failed")));
            (user_id, result)
        })
        .collect()
}

/// Copies one user, then reads both stores again to compare them.
async fn migrate_user(
    source: &Arc<dyn MemoryStore>,
    target: &Arc<dyn MemoryStore>,
    application_id: &str,
    user_id: &str,
    spinner: &indicatif::ProgressBar,
) -> CliResult<UserMigrated> {
    let (records, expired) = copy_user(source, target, application_id, user_id, spinner).await?;
    let from = tally(source.as_ref(), application_id, user_id).await?;
    let into = tally(target.as_ref(), application_id, user_id).await?;
    Ok(UserMigrated { records, expired, from, into })
}

/// Copies one user's live records: each is written to the target with the source's content,
/// metadata, expiry and source, unconditionally, so a rerun replaces the same keys. Returns
/// the records written and those that expired before their write.
async fn copy_user(
    source: &Arc<dyn MemoryStore>,
    target: &Arc<dyn MemoryStore>,
    application_id: &str,
    user_id: &str,
    spinner: &indicatif::ProgressBar,
) -> CliResult<(u64, u64)> {
    let (mut records, mut expired) = (0u64, 0u64);
    let mut pages = RecordPages::new(source.as_ref(), application_id, user_id);
    while let Some((scope, page)) = pages.next().await? {
        for record in page {
            let write = MemoryWrite::new(record.content)
                .metadata(serde_json::Value::Object(record.metadata))
                .expires_at_opt(record.expires_at)
                .source(record.source);
            match target.put(&scope, &record.key, write).await {
                Ok(_) => records += 1,
                // It expired between the read and the write: nothing left to copy.
                Err(MemoryError::Invalid { field: "expires_at", .. }) => expired += 1,
                Err(err) => return Err(err.into()),
            }
            spinner.inc(1);
        }
    }
    Ok((records, expired))
}
