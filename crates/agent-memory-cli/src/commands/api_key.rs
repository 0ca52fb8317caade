//! `api-key add`, `api-key list`, `api-key revoke`: the key file of `mcp --listen --api-keys`.
//! They touch only that file, never the store. The file format is in [`crate::api_keys`].

use std::path::{Path, PathBuf};

use agent_memory::{MemoryScope, Timestamp};
use clap::Subcommand;
use serde_json::json;

use super::globals::Globals;
use crate::api_keys::{self, FileError, KeyEntry};
use crate::exit::{CliError, CliResult};
use crate::output::{escape_text, format_time, Output};
use crate::progress;

/// Longest label, in bytes.
const MAX_LABEL_BYTES: usize = 256;

/// The `api-key` command group, as clap parses it.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Manage the API keys of the remote MCP server (`mcp --listen --api-keys FILE`).
    #[command(subcommand)]
    ApiKey(ApiKeyCommand),
}

/// The `api-key` commands.
#[derive(Debug, Subcommand)]
pub enum ApiKeyCommand {
    /// Make a key for --user (and --namespace) of --app, print it once on stdout, and append
    /// its hash to FILE (created with mode 0600). The key cannot be shown again. A key made
    /// with --app is refused by servers of other applications.
    Add {
        /// The key file.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
        /// The key may only call the read tools.
        #[arg(long)]
        read_only: bool,
        /// A note about the key: who has it, what for (not secret; shown by `list`).
        #[arg(long, value_name = "TEXT")]
        label: Option<String>,
    },

    /// List the keys of FILE: id, application, user, namespace, access, label, when made and
    /// revoked.
    List {
        /// The key file.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
    },

    /// Revoke the key with this id: a server reading FILE refuses it within a second.
    Revoke {
        /// The key file.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
        /// The key's id, as `list` shows it.
        id: String,
    },
}

/// A checked `api-key` command.
#[derive(Debug)]
pub enum Job {
    Add {
        file: PathBuf,
        app: Option<String>,
        user: String,
        namespace: Option<String>,
        read_only: bool,
        label: Option<String>,
    },
    List {
        file: PathBuf,
    },
    Revoke {
        file: PathBuf,
        id: String,
    },
}

impl Command {
    /// Checks the user, namespace and label of `add`.
    ///
    /// # Errors
    /// `Invalid` when `add` has no `--user`, or the user, namespace or label breaks its rule.
    pub fn prepare(self, globals: &Globals) -> CliResult<Job> {
        let Command::ApiKey(command) = self;
        Ok(match command {
            ApiKeyCommand::Add { file, read_only, label } => {
                let user = globals.user.clone().ok_or_else(|| {
                    CliError::invalid("no user id: pass --user or set AGENT_MEMORY_USER")
                })?;
                // A key's application, user and namespace follow the rules of every scope.
                let scope =
                    MemoryScope::new(globals.app.as_deref().unwrap_or("app"), user.clone())?;
                if user.starts_with(crate::mcp::http::TOKEN_USER_PREFIX) {
                    return Err(CliError::invalid(format!(
                        "invalid `user`: ids starting with `{}` belong to users of OAuth tokens",
                        crate::mcp::http::TOKEN_USER_PREFIX
                    )));
                }
                if let Some(namespace) = &globals.namespace {
                    scope.with_namespace(namespace.clone())?;
                }
                if let Some(label) = &label {
                    if label.len() > MAX_LABEL_BYTES || label.chars().any(char::is_control) {
                        return Err(CliError::invalid(format!(
                            "invalid `label`: at most {MAX_LABEL_BYTES} bytes, no control characters"
                        )));
                    }
                }
                Job::Add {
                    file,
                    app: globals.app.clone(),
                    user,
                    namespace: globals.namespace.clone(),
                    read_only,
                    label,
                }
            }
            ApiKeyCommand::List { file } => Job::List { file },
            ApiKeyCommand::Revoke { file, id } => Job::Revoke { file, id },
        })
    }
}

/// Runs a checked `api-key` command; needs no store.
pub fn run(job: Job, out: &mut Output) -> CliResult {
    match job {
        Job::Add { file, app, user, namespace, read_only, label } => {
            add(&file, app, user, namespace, read_only, label, out)
        }
        Job::List { file } => list(&file, out),
        Job::Revoke { file, id } => revoke(&file, &id, out),
    }
}

/// The entries of `file`; a file that does not exist yet has none.
fn entries(file: &Path) -> CliResult<Vec<KeyEntry>> {
    match api_keys::read(file) {
        Ok(entries) => Ok(entries),
        Err(FileError::Io(err)) if err.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(FileError::Io(err)) => Err(CliError::io("cannot read the key file", &err)),
        Err(err) => Err(CliError::invalid(err.to_string())),
    }
}

fn add(
    file: &Path,
    app: Option<String>,
    user: String,
    namespace: Option<String>,
    read_only: bool,
    label: Option<String>,
    out: &mut Output,
) -> CliResult {
    let taken = entries(file)?;
    let (key, mut entry) = KeyEntry::generate(user, namespace, read_only, label, &taken)
        .map_err(|err| CliError::io("cannot make a random key", &err))?;
    if app.is_none() {
        progress::note(
            "the key names no application (--app): any server reading this file accepts it",
        );
    }
    entry.app = app;
    api_keys::append(file, &entry)
        .map_err(|err| CliError::io("cannot write the key file", &err))?;
    progress::note(&format!(
        "key {} saved to the key file; this is the only time the key is shown",
        entry.id
    ));
    out.summary(&key, &json!({"id": entry.id, "key": key}))
}

fn list(file: &Path, out: &mut Output) -> CliResult {
    let entries = entries(file)?;
    let json = |entry: &KeyEntry| {
        json!({
            "id": entry.id,
            "app": entry.app,
            "user": entry.user,
            "namespace": entry.namespace,
            "read_only": entry.read_only,
            "label": entry.label,
            "created_at": entry.created_at,
            "revoked_at": entry.revoked_at,
        })
    };
    out.listing(
        &entries,
        json,
        "no keys",
        &["ID", "APP", "USER", "NAMESPACE", "ACCESS", "CREATED", "REVOKED", "LABEL"],
        |entry| {
            vec![
                entry.id.clone(),
                entry
                    .app
                    .as_deref()
                    .map_or_else(|| "(any)".to_owned(), |app| escape_text(app).into_owned()),
                escape_text(&entry.user).into_owned(),
                entry
                    .namespace
                    .as_deref()
                    .map_or_else(|| "(default)".to_owned(), |ns| escape_text(ns).into_owned()),
                if entry.read_only { "read-only" } else { "read-write" }.to_owned(),
                format_time(entry.created_at),
                entry.revoked_at.map_or_else(|| "-".to_owned(), format_time),
                entry
                    .label
                    .as_deref()
                    .map_or_else(String::new, |label| escape_text(label).into_owned()),
            ]
        },
    )
}

fn revoke(file: &Path, id: &str, out: &mut Output) -> CliResult {
    let mut entries = match api_keys::read(file) {
        Ok(entries) => entries,
        Err(FileError::Io(err)) => return Err(CliError::io("cannot read the key file", &err)),
        Err(err) => return Err(CliError::invalid(err.to_string())),
    };
    let Some(entry) = entries.iter_mut().find(|entry| entry.id == id) else {
        return Err(CliError::not_found(format!(
            "no key with id `{}` in the key file",
            escape_text(id)
        )));
    };
    if entry.revoked_at.is_some() {
        return out.summary(
            &format!("key {id} was already revoked"),
            &json!({"revoked": id, "already": true}),
        );
    }
    entry.revoked_at = Some(Timestamp::now());
    api_keys::rewrite(file, &entries)?;
    out.summary(&format!("revoked key {id}"), &json!({"revoked": id, "already": false}))
}
