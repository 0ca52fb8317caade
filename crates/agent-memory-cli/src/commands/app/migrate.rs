//! `migrate`: copy one application (or every one) to another store and verify the copy.

use std::sync::Arc;

use agent_memory::{
    validation::MAX_PAGE_LIMIT, MemoryError, MemoryStore, MemoryWrite, Metadata, Source, Timestamp,
};
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use crate::commands::store::{Access, Lifetime};
use crate::exit::{CliError, CliResult, ErrorKind};
use crate::output::{self, escape_text, Output};
use crate::progress;

use super::pages::{each_page, IdPages, RecordPages};
use super::stopped;

/// What `migrate` compares of a record: everything the target store does not assign anew
/// (revision, `created_at` and `updated_at` are the target's, as with `import`).
#[derive(Serialize)]
pub(super) struct Compared<'a> {
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
pub(super) struct Tally {
    records: u64,
    digest: [u8; 32],
}

/// How far past the start of a verification a record's expiry must lie for it to be compared:
/// one that expires sooner may vanish from one store between the two readings.
pub(super) const EXPIRY_MARGIN: std::time::Duration = std::time::Duration::from_secs(60);

pub(super) async fn tally(
    store: &dyn MemoryStore,
    application_id: &str,
    user_id: &str,
) -> CliResult<Tally> {
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
pub(super) async fn count_only(
    store: &dyn MemoryStore,
    application_id: &str,
    after: Option<&str>,
    out: &mut Output,
) -> CliResult {
    let spinner = progress::spinner("counting records");
    let result = count_application(store, application_id, after, &spinner).await;
    spinner.finish_and_clear();
    let (users, records) = result?;
    would_copy(out, None, users, records, None)
}

/// A dry run's answer: the users and live records a migration would copy, of the application
/// `app` names, or of all of them (`applications` of them when it says).
fn would_copy(
    out: &mut Output,
    app: Option<&str>,
    users: u64,
    records: u64,
    applications: Option<u64>,
) -> CliResult {
    let mut human = format!(
        "would copy {} of {}",
        output::count(records, "record"),
        output::count(users, "user")
    );
    let mut value = json!({"dry_run": true, "users": users, "records": records});
    if let Some(app) = app {
        human = format!("application {}: {human}", escape_text(app));
        value["application_id"] = app.into();
    }
    if let Some(applications) = applications {
        human = format!("{human} in {}", output::count(applications, "application"));
        value["applications"] = applications.into();
    }
    out.summary(&human, &value)
}

/// `migrate --all-apps --dry-run`: per application and in all, the users and live records a
/// migration would copy.
pub(super) async fn count_all(
    store: &dyn MemoryStore,
    after_app: Option<&str>,
    after: Option<&str>,
    out: &mut Output,
) -> CliResult {
    let spinner = progress::spinner("counting records");
    let (mut applications, mut users, mut records) = (0u64, 0u64, 0u64);
    let mut after = after.map(str::to_owned);
    let mut apps = IdPages::applications(store, after_app);
    let result: CliResult = async {
        while let Some(ids) = apps.next(MAX_PAGE_LIMIT).await? {
            for app in ids {
                let first = after.take();
                let (app_users, app_records) =
                    count_application(store, &app, first.as_deref(), &spinner).await?;
                would_copy(out, Some(&app), app_users, app_records, None)?;
                applications += 1;
                users += app_users;
                records += app_records;
            }
        }
        Ok(())
    }
    .await;
    spinner.finish_and_clear();
    result?;
    would_copy(out, None, users, records, Some(applications))
}

/// The users after `after` of one application, and their live records.
pub(super) async fn count_application(
    store: &dyn MemoryStore,
    application_id: &str,
    after: Option<&str>,
    spinner: &indicatif::ProgressBar,
) -> CliResult<(u64, u64)> {
    let (mut users, mut records) = (0u64, 0u64);
    let mut pages = IdPages::users(store, application_id, after);
    while let Some(ids) = pages.next(MAX_PAGE_LIMIT).await? {
        for user_id in ids {
            users += 1;
            each_page(store, application_id, &user_id, async |_, page| {
                records += page.len() as u64;
                spinner.inc(page.len() as u64);
                Ok(())
            })
            .await?;
        }
    }
    Ok((users, records))
}

/// Opens and starts the target store of a migration.
pub(super) async fn open_target(to: Option<&str>) -> CliResult<Arc<dyn MemoryStore>> {
    let to = to.ok_or_else(|| CliError::invalid("migrate needs --to URL (or --dry-run)"))?;
    // A one-run command: a SQLite target is read without a map, like the source.
    crate::commands::store::open_started(to, Lifetime::OneRun, Access::Create)
        .await
        .map_err(|e| e.context("--to: "))
}

/// `--dry-run --to URL`: the target must be reachable (and its schema valid) for the dry run
/// to say the migration would work; a SQLite target that does not exist yet is only noted,
/// since the migration creates it.
pub(super) async fn check_target(to: Option<&str>) -> CliResult {
    let Some(to) = to else { return Ok(()) };
    let exists =
        crate::commands::store::check_reachable(to).await.map_err(|e| e.context("--to: "))?;
    if !exists {
        progress::note("the target has no store yet; the migration will create it");
    }
    Ok(())
}

/// Counts of one migration.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Migrated {
    users: u64,
    records: u64,
    expired: u64,
    differ: u64,
}

impl Migrated {
    fn add(&mut self, other: &Migrated) {
        self.users += other.users;
        self.records += other.records;
        self.expired += other.expired;
        self.differ += other.differ;
    }

    /// How far a stopped migration got, for [`stopped`].
    fn progress(&self) -> String {
        format!(
            "copying {}, {} copied and verified",
            output::count(self.records, "record"),
            output::count(self.users, "user")
        )
    }

    /// The summary's fields, which `--all-apps` adds to.
    fn json(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut map = serde_json::Map::new();
        map.insert("users".to_owned(), self.users.into());
        map.insert("records".to_owned(), self.records.into());
        map.insert("skipped_expired".to_owned(), self.expired.into());
        map.insert("differences".to_owned(), self.differ.into());
        map.insert("verified".to_owned(), (self.differ == 0).into());
        map
    }
}

/// What a rerun after a failure should be told when nothing was finished.
pub(super) const RUN_AGAIN: &str = "run it again (every copy replaces the same key)";

/// Where copying one application stopped: the error, what was done before it, and the last
/// user that was copied and verified in full, with every user before it.
pub(super) struct Stopped {
    err: CliError,
    done: Migrated,
    last: Option<String>,
}

/// `migrate`: one application, then the summary.
pub(super) async fn copy_and_verify(
    source: &Arc<dyn MemoryStore>,
    target: &Arc<dyn MemoryStore>,
    application_id: &str,
    after: Option<&str>,
    out: &mut Output,
) -> CliResult {
    let spinner = progress::spinner("migrating records");
    let result = copy_application(source, target, application_id, after, false, out, &spinner);
    let result = result.await;
    spinner.finish_and_clear();
    let done = result.map_err(|stop| {
        let resume: Vec<(&str, &str)> = stop.last.iter().map(|u| ("--after", u.as_str())).collect();
        stopped(stop.err, "migration", &stop.done.progress(), &resume, RUN_AGAIN)
    })?;
    let human = format!(
        "migrated {} of {}",
        output::count(done.records, "record"),
        output::count(done.users, "user")
    );
    finish(out, &done, human, done.json())
}

/// `migrate --all-apps`: every application after `after_app` in byte order, each reported
/// when done, then the total.
pub(super) async fn copy_and_verify_all(
    source: &Arc<dyn MemoryStore>,
    target: &Arc<dyn MemoryStore>,
    after_app: Option<&str>,
    after: Option<&str>,
    out: &mut Output,
) -> CliResult {
    let spinner = progress::spinner("migrating records");
    let mut total = Migrated::default();
    let mut applications = 0u64;
    // The last application copied and verified in full, and where in the one that failed a
    // rerun may continue.
    let mut last_app: Option<String> = after_app.map(str::to_owned);
    let (mut failed_app, mut last_user): (Option<String>, Option<String>) = (None, None);
    let mut after = after.map(str::to_owned);
    let mut apps = IdPages::applications(source.as_ref(), after_app);
    let result: CliResult = async {
        while let Some(ids) = apps.next(MAX_PAGE_LIMIT).await? {
            for app in ids {
                let first = after.take();
                let copied =
                    copy_application(source, target, &app, first.as_deref(), true, out, &spinner)
                        .await;
                match copied {
                    Ok(done) => {
                        let mut line = done.json();
                        line.insert("application_id".to_owned(), app.clone().into());
                        let human = format!(
                            "application {}: migrated {} of {}",
                            escape_text(&app),
                            output::count(done.records, "record"),
                            output::count(done.users, "user")
                        );
                        out.summary(&human, &serde_json::Value::Object(line))?;
                        total.add(&done);
                        applications += 1;
                        last_app = Some(app);
                    }
                    Err(stop) => {
                        total.add(&stop.done);
                        last_user = stop.last;
                        failed_app = Some(app);
                        return Err(stop.err);
                    }
                }
            }
        }
        Ok(())
    }
    .await;
    spinner.finish_and_clear();
    if let Err(err) = result {
        let mut resume = Vec::new();
        if let Some(app) = &last_app {
            resume.push(("--after-app", app.as_str()));
        }
        if let Some(user) = &last_user {
            resume.push(("--after", user.as_str()));
        }
        let what = match &failed_app {
            Some(app) => format!("migration of application {}", escape_text(app)),
            None => "migration".to_owned(),
        };
        return Err(stopped(err, &what, &total.progress(), &resume, RUN_AGAIN));
    }
    let human = format!(
        "migrated {} of {} in {}",
        output::count(total.records, "record"),
        output::count(total.users, "user"),
        output::count(applications, "application")
    );
    let mut summary = total.json();
    summary.insert("applications".to_owned(), applications.into());
    finish(out, &total, human, summary)
}

/// The end of a migration: the summary, or, when users differ, the summary with `--json` and
/// exit 4.
pub(super) fn finish(
    out: &mut Output,
    done: &Migrated,
    human: String,
    summary: serde_json::Map<String, serde_json::Value>,
) -> CliResult {
    let summary = serde_json::Value::Object(summary);
    if done.differ > 0 {
        if out.is_json() {
            out.json_line(&summary)?;
        }
        return Err(CliError::new(
            ErrorKind::Failure,
            format!(
                "verification failed: {} {} between the stores",
                output::count(done.differ, "user"),
                if done.differ == 1 { "differs" } else { "differ" }
            ),
        ));
    }
    out.summary(&format!("{human}; verified: record counts and checksums equal"), &summary)
}

/// Copies and verifies every user of one application after `after`, a page of users at a
/// time; users that differ are reported as they are found (naming the application when
/// `name_app`).
pub(super) async fn copy_application(
    source: &Arc<dyn MemoryStore>,
    target: &Arc<dyn MemoryStore>,
    application_id: &str,
    after: Option<&str>,
    name_app: bool,
    out: &mut Output,
    spinner: &indicatif::ProgressBar,
) -> Result<Migrated, Stopped> {
    let mut done = Migrated::default();
    // The last user copied and verified in full: where a rerun may continue.
    let mut last: Option<String> = after.map(str::to_owned);
    let mut pages = IdPages::users(source.as_ref(), application_id, after);
    let result: CliResult = async {
        while let Some(ids) = pages.next(MAX_PAGE_LIMIT).await? {
            let Some(page_last) = ids.last().cloned() else { continue };
            let results = migrate_users(source, target, application_id, ids, spinner).await;
            for (user_id, result) in results {
                let user = result?;
                done.records += user.records;
                done.expired += user.expired;
                if user.from != user.into {
                    done.differ += 1;
                    let app = name_app.then_some(application_id);
                    report_difference(out, app, &user_id, &user.from, &user.into)?;
                }
                done.users += 1;
            }
            // Only once the whole page is copied and verified: users finish out of order.
            last = Some(page_last);
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => Ok(done),
        Err(err) => Err(Stopped { err, done, last }),
    }
}

/// Says which user differs and how, on stdout (one JSON object with `--json`), naming the
/// application when `application_id` is given (`--all-apps`).
pub(super) fn report_difference(
    out: &mut Output,
    application_id: Option<&str>,
    user_id: &str,
    from: &Tally,
    into: &Tally,
) -> CliResult {
    if out.is_json() {
        let mut line = json!({
            "user_id": user_id,
            "source_records": from.records,
            "target_records": into.records,
            "checksum_equal": from.digest == into.digest,
        });
        if let (Some(app), Some(object)) = (application_id, line.as_object_mut()) {
            object.insert("application_id".to_owned(), app.into());
        }
        return out.json_line(&line);
    }
    let what = if from.records == into.records {
        "same record count, different content".to_owned()
    } else {
        format!("{} in the source, {} in the target", from.records, into.records)
    };
    let app = match application_id {
        Some(app) => format!("application {}, ", escape_text(app)),
        None => String::new(),
    };
    out.line(&format!("differs: {app}user {}: {what}", escape_text(user_id)))
}

/// How many users are copied and verified at once. Each user's records are written one at
/// a time (they share the user's quota usage, so concurrent writes of one user only queue on
/// it); different users' writes proceed side by side.
pub(super) const CONCURRENT_USERS: usize = 16;

/// What copying and verifying one user found.
pub(super) struct UserMigrated {
    records: u64,
    expired: u64,
    from: Tally,
    into: Tally,
}

/// Copies and verifies one page of users, up to [`CONCURRENT_USERS`] at a time; the results
/// come back in the page's order.
pub(super) async fn migrate_users(
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

/// Copies one user's live records, then reads both stores again to compare them. Each record
/// is written to the target with the source's content, metadata, expiry and source,
/// unconditionally, so a rerun replaces the same keys; one that expires before its write is
/// counted, not copied.
pub(super) async fn migrate_user(
    source: &Arc<dyn MemoryStore>,
    target: &Arc<dyn MemoryStore>,
    application_id: &str,
    user_id: &str,
    spinner: &indicatif::ProgressBar,
) -> CliResult<UserMigrated> {
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
    let from = tally(source.as_ref(), application_id, user_id).await?;
    let into = tally(target.as_ref(), application_id, user_id).await?;
    Ok(UserMigrated { records, expired, from, into })
}
