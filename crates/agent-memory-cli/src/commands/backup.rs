//! `export` and `import`: every record of a user as JSON Lines (format in [`crate::transfer`]),
//! to back memories up or move them between stores.

use std::ffi::OsStr;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_memory::{validation::MAX_PAGE_LIMIT, MemoryError, MemoryStore, PageRequest, Timestamp};
use clap::Subcommand;
use serde_json::json;
use tokio::io::AsyncReadExt;

use super::globals::{Globals, User};
use crate::exit::{CliError, CliResult};
use crate::output::{self, Output};
use crate::progress;
use crate::transfer::{self, Owner, Plan};

/// The backup commands, as clap parses them.
#[derive(Debug, Subcommand)]
pub enum Command {
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
}

/// A backup command with its user checked and, for `import`, the whole input read and
/// checked.
#[derive(Debug)]
pub enum Job {
    Export { user: User, output: Option<PathBuf> },
    Import { plan: Plan, skip_existing: bool },
}

impl Command {
    /// Checks the user (unless `import --any-user`) and reads and checks a whole import,
    /// so a bad line never opens the store.
    ///
    /// # Errors
    /// `Invalid` for a missing or bad user or a bad import line; `Failure` when the input
    /// cannot be read.
    pub async fn prepare(self, globals: &Globals) -> CliResult<Job> {
        Ok(match self {
            Command::Export { output } => Job::Export { user: globals.user("export")?, output },
            Command::Import { input, any_user, skip_existing } => {
                let owner = owner(globals, any_user)?;
                Job::Import { plan: read_plan(input.as_deref(), &owner).await?, skip_existing }
            }
        })
    }
}

/// Runs a checked backup command against a started store.
pub async fn run(job: Job, store: Arc<dyn MemoryStore>, out: &mut Output) -> CliResult {
    let store = store.as_ref();
    match job {
        Job::Export { user, output } => export(store, &user, output, out).await,
        Job::Import { plan, skip_existing } => import(store, plan, skip_existing, out).await,
    }
}

/// Counts of one export.
struct Exported {
    records: u64,
    namespaces: u64,
}

/// Writes every live record of the user, namespace by namespace in ascending order, keys
/// ascending within each. Expired records are not exported: `list` never returns them, and
/// import could not write them back.
///
/// With `--output`, the lines go to a temporary file next to the target, created owner-only,
/// and renamed over the target only once the export completed: a failed export never leaves
/// a truncated backup behind or destroys the previous one.
async fn export(
    store: &dyn MemoryStore,
    user: &User,
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
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file = tempfile::NamedTempFile::new_in(&directory).map_err(|e| {
        CliError::io(&format!("cannot create a file in {}", directory.display()), &e)
    })?;
    let mut writer = BufWriter::new(file);
    let done = write_all(store, user, &mut writer).await?;
    let file =
        writer.into_inner().map_err(|e| CliError::io("cannot write the export file", e.error()))?;
    file.as_file().sync_all().map_err(|e| CliError::io("cannot write the export file", &e))?;
    persist(file, &path)?;
    out.summary(&summary(&done), &json!({"exported": done.records, "namespaces": done.namespaces}))
}

fn persist(file: tempfile::NamedTempFile, path: &Path) -> CliResult {
    file.persist(path)
        .map(drop)
        .map_err(|e| CliError::io(&format!("cannot write {}", path.display()), &e.error))
}

fn summary(done: &Exported) -> String {
    format!(
        "exported {} from {}",
        output::count(done.records, "record"),
        output::count(done.namespaces, "namespace")
    )
}

async fn write_all(
    store: &dyn MemoryStore,
    user: &User,
    sink: &mut impl Write,
) -> CliResult<Exported> {
    let spinner = progress::spinner("exporting records");
    let result = write_pages(store, user, sink, &spinner).await;
    spinner.finish_and_clear();
    result
}

async fn write_pages(
    store: &dyn MemoryStore,
    user: &User,
    sink: &mut impl Write,
    spinner: &indicatif::ProgressBar,
) -> CliResult<Exported> {
    let mut done = Exported { records: 0, namespaces: 0 };
    let mut namespace_cursor = None;
    loop {
        let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(namespace_cursor);
        let namespaces =
            store.list_namespaces(&user.application_id, &user.user_id, request).await?;
        for scope in &namespaces.items {
            done.namespaces += 1;
            let mut cursor = None;
            loop {
                let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(cursor);
                let page = store.list(scope, request).await?;
                for record in &page.items {
                    serde_json::to_writer(&mut *sink, record)
                        .map_err(|e| CliError::failure(format!("cannot write the export: {e}")))?;
                    sink.write_all(b"\n")
                        .map_err(|e| CliError::io("cannot write the export", &e))?;
                    done.records += 1;
                }
                spinner.set_position(done.records);
                cursor = page.next_cursor;
                if cursor.is_none() {
                    break;
                }
            }
        }
        namespace_cursor = namespaces.next_cursor;
        if namespace_cursor.is_none() {
            return Ok(done);
        }
    }
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

/// Reads the whole input and checks every line before the store is even opened.
async fn read_plan(input: Option<&Path>, owner: &Owner) -> CliResult<Plan> {
    let bytes = match input.filter(|p| p.as_os_str() != OsStr::new("-")) {
        Some(path) => std::fs::read(path)
            .map_err(|e| CliError::io(&format!("cannot read {}", path.display()), &e))?,
        None => {
            if std::io::stdin().is_terminal() {
                return Err(CliError::invalid(
                    "import needs input: give a FILE or pipe JSON Lines to stdin",
                ));
            }
            let mut bytes = Vec::new();
            tokio::io::stdin()
                .read_to_end(&mut bytes)
                .await
                .map_err(|e| CliError::io("cannot read stdin", &e))?;
            bytes
        }
    };
    transfer::plan(&bytes, owner, Timestamp::now())
}

/// Writes every planned record. Each line's `put` is unconditional (the file wins over what
/// the store holds) unless `skip_existing` makes it create-only.
///
/// A store failure stops the import: what was written stays, the error says how much, and
/// importing the same file again is safe (every write replaces the same key).
async fn import(
    store: &dyn MemoryStore,
    plan: Plan,
    skip_existing: bool,
    out: &mut Output,
) -> CliResult {
    let total = plan.entries.len();
    let bar = progress::bar(u64::try_from(total).unwrap_or(u64::MAX), "importing");
    let mut imported = 0u64;
    let mut existing = 0u64;
    let mut expired = plan.expired;
    for entry in plan.entries {
        let write = if skip_existing { entry.write.create_only() } else { entry.write };
        match store.put(&entry.scope, &entry.key, write).await {
            Ok(_) => imported += 1,
            Err(MemoryError::Conflict { .. }) if skip_existing => existing += 1,
            // It expired between the check and the write: the same as expired at the check.
            Err(MemoryError::Invalid { field: "expires_at", .. }) => expired += 1,
            Err(err) => {
                bar.finish_and_clear();
                return Err(CliError::from(err).context(&format!(
                    "line {}: after {imported} of {total} records were imported (importing \
                     the file again is safe): ",
                    entry.line
                )));
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
