//! `put`, `get`, `list`, `search` and `delete`: one namespace of one user.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use agent_memory::{
    validation, Case, Cursor, MatchMode, MemoryPage, MemoryRecord, MemoryScope, MemoryStore,
    MemoryWrite, PageRequest, Revision, Timestamp,
};
use clap::{Args, Subcommand};
use serde_json::json;
use tokio::io::AsyncReadExt;

use super::globals::Globals;
use crate::duration;
use crate::exit::{CliError, CliResult};
use crate::meta::{self, Condition};
use crate::output::{escape_text, Output};
use crate::progress::eprintln_safe;

/// The record commands, as clap parses them.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Save a memory (insert or replace).
    Put(PutArgs),

    /// Show one memory; exit 1 when there is no live record.
    Get {
        /// The record's key.
        key: String,
    },

    /// List memories in ascending key order.
    List {
        /// Only keys that start with PREFIX (at most 256 bytes; a cursor from such a listing
        /// continues only it).
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<String>,
        #[command(flatten)]
        meta: MetaArgs,
        #[command(flatten)]
        page: PageArgs,
    },

    /// List memories whose content contains QUERY (literal; case-sensitive unless
    /// --ignore-case).
    Search {
        /// Text to look for, as one phrase (or words with --all-words/--any-word); `%`, `_`,
        /// `*` and `\` match themselves.
        query: String,
        /// Compare after Unicode simple case folding: "berlin" finds "Berlin".
        #[arg(long)]
        ignore_case: bool,
        /// Match when every word of QUERY (split on white space, at most 16) occurs, in any
        /// order.
        #[arg(long, conflicts_with = "any_word")]
        all_words: bool,
        /// Match when at least one word of QUERY occurs.
        #[arg(long)]
        any_word: bool,
        #[command(flatten)]
        meta: MetaArgs,
        #[command(flatten)]
        page: PageArgs,
    },

    /// Delete one memory; exit 1 when there was no live record.
    Delete {
        /// The record's key.
        key: String,
        /// Delete only the live record with this revision (exit 3 otherwise).
        #[arg(long, value_name = "REV")]
        if_revision: Option<String>,
    },
}

/// Options of `put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    /// The record's key (1..=256 bytes, no control characters).
    key: String,

    /// The text to remember; read from stdin when omitted (one trailing newline is dropped).
    content: Option<String>,

    /// Metadata as a JSON object, e.g. '{"category":"preferences"}'.
    #[arg(long, value_name = "JSON")]
    metadata: Option<String>,

    /// Forget the record after this long: 90s, 15m, 1h30m, 7d, 2w.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    expires_in: Option<Duration>,

    /// Replace only the live record with this revision (exit 3 otherwise).
    #[arg(long, value_name = "REV", conflicts_with = "create_only")]
    if_revision: Option<String>,

    /// Write only if no live record has the key (exit 3 otherwise).
    #[arg(long)]
    create_only: bool,
}

/// The metadata filter of `list` and `search`.
#[derive(Debug, Args)]
pub struct MetaArgs {
    /// Only records whose metadata field FIELD equals VALUE: JSON when VALUE is a JSON scalar
    /// (pinned=true, rank=2, code='"7"'), else the text (category=preferences). Repeat for up
    /// to 8 fields; all must match.
    #[arg(long = "meta", value_name = "FIELD=VALUE", value_parser = meta::parse)]
    conditions: Vec<Condition>,
}

/// Paging options of `list` and `search`.
#[derive(Debug, Args)]
pub struct PageArgs {
    /// Records per page, 1 to 100.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u8).range(1..=100))]
    limit: u8,

    /// Continue after this cursor (printed on stderr when more records are left, with the
    /// options to repeat: a cursor continues only the same selection).
    #[arg(long, value_name = "CURSOR")]
    after: Option<String>,

    /// Follow cursors to the end and print every record.
    #[arg(long)]
    all: bool,
}

/// A record command with its input checked, ready to run in one namespace.
#[derive(Debug)]
pub struct Job {
    scope: MemoryScope,
    action: Action,
}

#[derive(Debug)]
enum Action {
    Put(Put),
    Get { key: String },
    List { query: Option<String>, page: Page },
    Delete { key: String, expected: Option<Revision> },
}

/// A checked `put`: everything but the expiry instant, which is counted from the moment of
/// the write rather than from when stdin was read.
#[derive(Debug)]
struct Put {
    key: String,
    write: MemoryWrite,
    expires_in: Option<Duration>,
}

/// Checked paging and selection options.
#[derive(Debug)]
struct Page {
    limit: usize,
    after: Option<Cursor>,
    all: bool,
    /// What every request of the walk carries besides its limit and cursor: the prefix
    /// (`list`), match mode and case (`search`) and metadata filter.
    select: PageRequest,
    /// The flags that chose `select`, repeated after the cursor in the hint: a cursor
    /// continues only the same selection.
    flags: Vec<String>,
}

impl Page {
    fn prefix(mut self, prefix: String) -> Self {
        if !prefix.is_empty() {
            self.flags.splice(0..0, ["--prefix".to_owned(), prefix.clone()]);
        }
        self.select = self.select.prefix(prefix);
        self
    }

    fn search(mut self, matching: MatchMode, case: Case) -> Self {
        let mut flags = Vec::new();
        match matching {
            MatchMode::AllWords => flags.push("--all-words".to_owned()),
            MatchMode::AnyWord => flags.push("--any-word".to_owned()),
            _ => {}
        }
        if case == Case::Insensitive {
            flags.push("--ignore-case".to_owned());
        }
        self.flags.splice(0..0, flags);
        self.select = self.select.match_mode(matching).case(case);
        self
    }
}

impl Job {
    /// True for `put`, the one record command that may create the store; reads and deletes
    /// open an existing store only (nothing to read or delete in a store that is not there).
    pub fn writes(&self) -> bool {
        matches!(self.action, Action::Put(_))
    }
}

impl Command {
    /// Checks the scope, then the command's own input, and reads the content of a `put` from
    /// stdin when it was not given: all before the store is opened.
    ///
    /// # Errors
    /// `Invalid` for a missing or bad scope, content that is not UTF-8, metadata that is not
    /// JSON, a malformed revision or cursor; `Failure` when stdin cannot be read.
    pub async fn prepare(self, globals: &Globals) -> CliResult<Job> {
        let scope = globals.scope()?;
        let action = match self {
            Command::Put(args) => Action::Put(args.prepare().await?),
            Command::Get { key } => Action::Get { key },
            Command::List { prefix, meta, page } => {
                let prefix = prefix.unwrap_or_default();
                validation::key_prefix(&prefix)?;
                Action::List { query: None, page: page.prepare(&meta)?.prefix(prefix) }
            }
            Command::Search { query, ignore_case, all_words, any_word, meta, page } => {
                let matching = match (all_words, any_word) {
                    (true, _) => MatchMode::AllWords,
                    (_, true) => MatchMode::AnyWord,
                    _ => MatchMode::Phrase,
                };
                let case = if ignore_case { Case::Insensitive } else { Case::Sensitive };
                // The query's words are checked here too, before the store is opened.
                agent_memory::provider::TextMatcher::new(&query, matching, case)?;
                let page = page.prepare(&meta)?.search(matching, case);
                Action::List { query: Some(query), page }
            }
            Command::Delete { key, if_revision } => {
                Action::Delete { key, expected: if_revision.map(Revision::new).transpose()? }
            }
        };
        Ok(Job { scope, action })
    }
}

impl PutArgs {
    async fn prepare(self) -> CliResult<Put> {
        let mut write = MemoryWrite::new(content_arg(self.content).await?);
        if let Some(metadata) = &self.metadata {
            let value: serde_json::Value = serde_json::from_str(metadata).map_err(|err| {
                CliError::invalid(format!("invalid metadata: is not valid JSON ({err})"))
            })?;
            write = write.metadata(value);
        }
        if let Some(revision) = self.if_revision {
            write = write.expected_revision(Revision::new(revision)?);
        }
        if self.create_only {
            write = write.create_only();
        }
        Ok(Put { key: self.key, write, expires_in: self.expires_in })
    }
}

impl PageArgs {
    fn prepare(self, meta: &MetaArgs) -> CliResult<Page> {
        let after = self.after.as_deref().map(Cursor::parse).transpose()?;
        let filter = meta::filter(&meta.conditions)?;
        let flags = meta
            .conditions
            .iter()
            .flat_map(|condition| ["--meta".to_owned(), condition.given().to_owned()])
            .collect();
        Ok(Page {
            limit: usize::from(self.limit),
            after,
            all: self.all,
            select: PageRequest::default().metadata(filter),
            flags,
        })
    }
}

/// Runs a checked record command against a started store.
pub async fn run(job: Job, store: Arc<dyn MemoryStore>, out: &mut Output) -> CliResult {
    let store = store.as_ref();
    let scope = &job.scope;
    match job.action {
        Action::Put(checked) => put(store, scope, checked, out).await,
        Action::Get { key } => get(store, scope, &key, out).await,
        Action::List { query, page } => list(store, scope, query.as_deref(), page, out).await,
        Action::Delete { key, expected } => delete(store, scope, key, expected, out).await,
    }
}

/// The content to write: the argument, or all of stdin without one trailing newline (so
/// `echo text | agent-memory put key` stores `text`).
///
/// # Errors
/// `Invalid` when stdin is not UTF-8; `Failure` when it cannot be read.
async fn content_arg(argument: Option<String>) -> CliResult<String> {
    if let Some(content) = argument {
        return Ok(content);
    }
    if std::io::stdin().is_terminal() {
        eprintln_safe("reading the content from stdin; end it with Ctrl-D");
    }
    let mut bytes = Vec::new();
    tokio::io::stdin()
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| CliError::io("cannot read stdin", &e))?;
    let mut content = String::from_utf8(bytes).map_err(|err| {
        CliError::invalid(format!(
            "invalid content: stdin is not valid UTF-8 (byte {})",
            err.utf8_error().valid_up_to()
        ))
    })?;
    if content.ends_with('\n') {
        content.pop();
        if content.ends_with('\r') {
            content.pop();
        }
    }
    Ok(content)
}

/// Saves one record and shows what was stored.
async fn put(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    put: Put,
    out: &mut Output,
) -> CliResult {
    let mut write = put.write;
    if let Some(after) = put.expires_in {
        write = write.expires_at(Timestamp::now().saturating_add(after));
    }
    let record = store.put(scope, &put.key, write).await.map_err(CliError::from_write)?;
    if out.is_json() {
        out.record(&record)
    } else {
        out.line(&format!("saved {} (revision {})", escape_text(&record.key), record.revision))
    }
}

/// Shows one live record; `NotFound` when there is none.
async fn get(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    key: &str,
    out: &mut Output,
) -> CliResult {
    match store.get(scope, key).await? {
        Some(record) => out.record(&record),
        None => Err(not_found(key)),
    }
}

/// `list` (no query) or `search` (a query): up to `--limit` records, or all with `--all`.
///
/// Without `--all`, pages are requested until `--limit` records arrived or nothing is left,
/// because a provider may return short (even empty) search pages with a cursor; the cursor to
/// continue from is printed on stderr, keeping stdout pure records.
async fn list(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    query: Option<&str>,
    page: Page,
    out: &mut Output,
) -> CliResult {
    let Page { limit, after: mut cursor, all, select, flags } = page;
    let mut collected: Vec<MemoryRecord> = Vec::new();
    loop {
        let want = if all { limit } else { limit - collected.len() };
        let mut request = select.clone().after_opt(cursor.take());
        request.limit = want;
        let page = fetch(store, scope, query, request).await?;
        if all && out.is_json() {
            // Stream: `list --all --json` over a large namespace never holds it all.
            out.records(&page.items)?;
        } else {
            collected.extend(page.items);
        }
        cursor = page.next_cursor;
        if cursor.is_none() || (!all && collected.len() >= limit) {
            break;
        }
    }
    if !(all && out.is_json()) {
        out.records(&collected)?;
    }
    if let Some(cursor) = cursor {
        out.flush()?;
        let mut hint = format!("more records: continue with --after {cursor}");
        for flag in &flags {
            hint.push(' ');
            hint.push_str(&shell_word(flag));
        }
        eprintln_safe(&hint);
    }
    Ok(())
}

async fn fetch(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    query: Option<&str>,
    request: PageRequest,
) -> CliResult<MemoryPage> {
    Ok(match query {
        Some(query) => store.search(scope, query, request).await?,
        None => store.list(scope, request).await?,
    })
}

/// Deletes one record; `NotFound` when no live record had the key (an expired one is removed
/// all the same).
async fn delete(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    key: String,
    expected: Option<Revision>,
    out: &mut Output,
) -> CliResult {
    let deleted =
        store.delete(scope, &key, expected.as_ref()).await.map_err(CliError::from_write)?;
    if !deleted {
        return Err(not_found(&key));
    }
    out.summary(&format!("deleted {}", escape_text(&key)), &json!({"deleted": true, "key": key}))
}

/// `word` as one shell word to paste back: as it is when it holds only characters no shell
/// treats specially, else in single quotes; control characters are shown escaped.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_owned();
    }
    format!("'{}'", escape_text(word).replace('\'', "'\\''"))
}

fn not_found(key: &str) -> CliError {
    CliError::not_found(format!("not found: no live record has the key {key:?}"))
}
