//! `export` and `import`: every record of a user as JSON Lines (format in [`crate::transfer`]),
//! to back memories up or move them between stores.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{BufReader, BufWriter, IsTerminal, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_memory::{validation::MAX_PAGE_LIMIT, MemoryError, MemoryStore, Timestamp};
use clap::Subcommand;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::app::{each_page, IdPages};
use super::globals::{Globals, User};
use crate::exit::{CliError, CliResult};
use crate::files::{Mode, OutputFile};
use crate::output::{self, Output};
use crate::progress;
use crate::transfer::{self, Checked, Owner};

/// The backup commands, as clap parses them.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write every live record of the user, all namespaces, as JSON Lines (of every user of
    /// --app with --all-users).
    Export {
        /// Export every user of --app, one after another (--user is ignored); import such a
        /// file with --any-user.
        #[arg(long)]
        all_users: bool,

        /// Write to this file (created with owner-only permissions, replaced only when the
        /// export completed) instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },

    /// Read JSON Lines written by export and save each record (validated in full first,
    /// streamed in two passes).
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
}

/// A backup command with its user checked and, for `import`, the whole input checked.
#[derive(Debug)]
pub enum Job {
    Export { owner: Exporting, output: Option<PathBuf> },
    Import { input: CheckedInput, skip_existing: bool },
}

/// Whose records an export writes.
#[derive(Debug)]
pub enum Exporting {
    /// One user's (`--app`, `--user`).
    User(User),
    /// Every user's of one application (`--all-users`).
    Application(String),
}

/// An import input whose every line passed the first pass: the file (stdin spooled to a
/// private temporary file), rewound for the second pass, and what the first pass counted.
#[derive(Debug)]
pub struct CheckedInput {
    file: File,
    owner: Owner,
    /// The instant expiry was judged by; the second pass judges by the same one.
    now: Timestamp,
    records: u64,
    expired: u64,
}

impl Job {
    /// True for `import`, which may create the store; `export` reads an existing one only.
    pub fn writes(&self) -> bool {
        matches!(self, Job::Import { .. })
    }
}

impl Command {
    /// Checks the user (unless `import --any-user`) and reads and checks a whole import, one
    /// line at a time, so a bad line never opens the store.
    ///
    /// # Errors
    /// `Invalid` for a missing or bad user or a bad import line; `Failure` when the input
    /// cannot be read.
    pub async fn prepare(self, globals: &Globals) -> CliResult<Job> {
        Ok(match self {
            Command::Export { output, all_users } => {
                let owner = if all_users {
                    Exporting::Application(globals.application("export --all-users")?)
                } else {
                    Exporting::User(globals.user("export")?)
                };
                Job::Export { owner, output }
            }
            Command::Import { input, any_user, skip_existing } => {
                let owner = owner(globals, any_user)?;
                Job::Import { input: check_input(input.as_deref(), owner).await?, skip_existing }
            }
        })
    }
}

/// Runs a checked backup command against a started store.
pub async fn run(job: Job, store: Arc<dyn MemoryStore>, out: &mut Output) -> CliResult {
    let store = store.as_ref();
    match job {
        Job::Export { owner, output } => export(store, &owner, output, out).await,
        Job::Import { input, skip_existing } => import(store, input, skip_existing, out).await,
    }
}

/// Counts of one export.
struct Exported {
    records: u64,
    namespaces: u64,
    /// Set for `--all-users` only.
    users: Option<u64>,
}

/// Writes every live record of the user, namespace by namespace in ascending order, keys
/// ascending within each. Expired records are not exported: `list` never returns them, and
/// import could not write them back.
///
/// With `--output`, the lines go through [`OutputFile`]: for a regular file (or a link to one),
/// a temporary file beside the final target, created owner-only, renamed over it only once the
/// export completed, so a failed export never leaves a truncated backup behind or destroys the
/// previous one; a device or FIFO is written in place.
async fn export(
    store: &dyn MemoryStore,
    user: &Exporting,
    output: Option<PathBuf>,
    out: &mut Output,
) -> CliResult {
    let Some(path) = output.filter(|p| p.as_os_str() != OsStr::new("-")) else {
        let mut stdout = BufWriter::new(std::io::stdout());
        let done = write_all(store, user, &mut stdout).await?;
        stdout.flush().map_err(|e| CliError::io("cannot write to stdout", &e))?;
        // Stdout is the data; the count is for a person watching, on stderr.
        progress::note(&summary(&done));
        return Ok(());
    };
    let mut file = OutputFile::create(&path, Mode::Private)?;
    let done = write_all(store, user, &mut file).await?;
    file.finish()?;
    let mut counts = json!({"exported": done.records, "namespaces": done.namespaces});
    if let Some(users) = done.users {
        counts["users"] = json!(users);
    }
    out.summary(&summary(&done), &counts)
}

fn summary(done: &Exported) -> String {
    let users = match done.users {
        Some(users) => format!(" of {}", output::count(users, "user")),
        None => String::new(),
    };
    format!(
        "exported {} from {}{users}",
        output::count(done.records, "record"),
        output::count(done.namespaces, "namespace")
    )
}

async fn write_all(
    store: &dyn MemoryStore,
    owner: &Exporting,
    sink: &mut impl Write,
) -> CliResult<Exported> {
    let spinner = progress::spinner("exporting records");
    let mut done = Exported { records: 0, namespaces: 0, users: None };
    let result = match owner {
        Exporting::User(user) => {
            write_user(store, &user.application_id, &user.user_id, sink, &spinner, &mut done).await
        }
        Exporting::Application(application_id) => {
            write_users(store, application_id, sink, &spinner, &mut done).await
        }
    };
    spinner.finish_and_clear();
    result.map(|()| done)
}

/// Every user of the application, one after another, each as [`write_user`] writes one.
async fn write_users(
    store: &dyn MemoryStore,
    application_id: &str,
    sink: &mut impl Write,
    spinner: &indicatif::ProgressBar,
    done: &mut Exported,
) -> CliResult {
    let mut users = 0u64;
    let mut pages = IdPages::users(store, application_id, None);
    while let Some(ids) = pages.next(MAX_PAGE_LIMIT).await? {
        for user_id in ids {
            write_user(store, application_id, &user_id, sink, spinner, done).await?;
            users += 1;
        }
    }
    done.users = Some(users);
    Ok(())
}

/// One user's live records, namespace by namespace in ascending order, keys ascending within
/// each.
async fn write_user(
    store: &dyn MemoryStore,
    application_id: &str,
    user_id: &str,
    sink: &mut impl Write,
    spinner: &indicatif::ProgressBar,
    done: &mut Exported,
) -> CliResult {
    let mut records = done.records;
    let namespaces = each_page(store, application_id, user_id, async |_, page| {
        for record in &page {
            serde_json::to_writer(&mut *sink, record)
                .map_err(|e| CliError::json_write("cannot write the export", &e))?;
            sink.write_all(b"\n").map_err(|e| CliError::io("cannot write the export", &e))?;
            records += 1;
        }
        spinner.set_position(records);
        Ok(())
    })
    .await;
    done.records = records;
    done.namespaces += namespaces?;
    Ok(())
}

/// Whose lines an import accepts: `--any-user`, or the user of `--app`/`--user`.
fn owner(globals: &Globals, any_user: bool) -> CliResult<Owner> {
    if any_user {
        globals.ignore_namespace("import");
        return Ok(Owner::Any);
    }
    let User { application_id, user_id } = globals.user("import")?;
    Ok(Owner::User { application_id, user_id })
}

/// Opens the input (spooling stdin to a private temporary file, which is gone when the
/// import ends) and checks every line before the store is even opened, holding one line at a
/// time.
async fn check_input(input: Option<&Path>, owner: Owner) -> CliResult<CheckedInput> {
    let mut file = match input.filter(|p| p.as_os_str() != OsStr::new("-")) {
        Some(path) => File::open(path)
            .map_err(|e| CliError::io(&format!("cannot read {}", path.display()), &e))?,
        None => {
            if std::io::stdin().is_terminal() {
                return Err(CliError::invalid(
                    "import needs input: give a FILE or pipe JSON Lines to stdin",
                ));
            }
            // Unlinked at creation and owner-only: nobody else can read the spooled memories.
            let spool = tempfile::tempfile().map_err(|e| CliError::io("cannot spool stdin", &e))?;
            let mut writer = tokio::fs::File::from_std(spool);
            tokio::io::copy(&mut tokio::io::stdin(), &mut writer)
                .await
                .map_err(|e| CliError::io("cannot read stdin", &e))?;
            writer.flush().await.map_err(|e| CliError::io("cannot spool stdin", &e))?;
            writer.into_std().await
        }
    };
    file.rewind().map_err(|e| CliError::io("cannot read the import", &e))?;
    let now = Timestamp::now();
    let (mut records, mut expired) = (0u64, 0u64);
    {
        let mut reader = transfer::Reader::new(BufReader::new(&file), owner.clone(), now);
        while let Some((_, checked)) = reader.next_line()? {
            match checked {
                Checked::Entry(_) => records += 1,
                Checked::Expired => expired += 1,
            }
        }
    }
    file.rewind().map_err(|e| CliError::io("cannot read the import again", &e))?;
    Ok(CheckedInput { file, owner, now, records, expired })
}

/// Writes every record of the checked input, reading it a second time. Each line's `put` is
/// unconditional (the file wins over what the store holds) unless `skip_existing` makes it
/// create-only.
///
/// A store failure stops the import: what was written stays, the error says how much, and
/// importing the same file again is safe (every write replaces the same key). An input that
/// changed since the first pass fails the same way at its first line that no longer passes.
async fn import(
    store: &dyn MemoryStore,
    input: CheckedInput,
    skip_existing: bool,
    out: &mut Output,
) -> CliResult {
    let CheckedInput { file, owner, now, records: total, mut expired } = input;
    let bar = progress::bar(total, "importing");
    let mut imported = 0u64;
    let mut existing = 0u64;
    let mut reader = transfer::Reader::new(BufReader::new(file), owner, now);
    let stopped = |bar: &indicatif::ProgressBar, imported: u64, line: usize| {
        bar.finish_and_clear();
        format!(
            "line {line}: after {imported} of {total} records were imported (importing the \
             file again is safe): "
        )
    };
    loop {
        let entry = match reader.next_line() {
            Ok(Some((_, Checked::Entry(entry)))) => entry,
            Ok(Some((_, Checked::Expired))) => continue,
            Ok(None) => break,
            Err(err) => {
                bar.finish_and_clear();
                return Err(err.context(&format!(
                    "the input changed after it was checked, {imported} of {total} records \
                     were imported: "
                )));
            }
        };
        let write = if skip_existing { entry.write.create_only() } else { entry.write };
        match store.put(&entry.scope, &entry.key, write).await {
            Ok(_) => imported += 1,
            Err(MemoryError::Conflict { .. }) if skip_existing => existing += 1,
            // It expired between the check and the write: the same as expired at the check.
            Err(MemoryError::Invalid { field: "expires_at", .. }) => expired += 1,
            Err(err) => {
                let err = CliError::from_write(err);
                return Err(err.context(&stopped(&bar, imported, entry.line)));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    out.summary(
        &format!(
            "imported {}; skipped {expired} already expired, {existing} already present",
            output::count(imported, "record")
        ),
        &json!({"imported": imported, "skipped_expired": expired, "skipped_existing": existing}),
    )
}
