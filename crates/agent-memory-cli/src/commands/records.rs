//! `put`, `get`, `list`, `search` and `delete`: one namespace of one user.

use std::io::IsTerminal;
use std::sync::Arc;

use agent_memory::{
    Cursor, MemoryPage, MemoryRecord, MemoryScope, MemoryStore, MemoryWrite, PageRequest, Revision,
    Timestamp,
};
use serde_json::json;
use tokio::io::AsyncReadExt;

use crate::exit::{CliError, CliResult};
use crate::output::{escape_text, Output};
use crate::progress::eprintln_safe;
use crate::{PageArgs, PutArgs};

/// The content to write: the argument, or all of stdin without one trailing newline (so
/// `echo text | agent-memory put key` stores `text`).
///
/// # Errors
/// `Invalid` when stdin is not UTF-8; `Failure` when it cannot be read.
pub async fn content_arg(argument: Option<&str>) -> CliResult<String> {
    if let Some(content) = argument {
        return Ok(content.to_owned());
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
pub async fn put(
    store: Arc<dyn MemoryStore>,
    scope: MemoryScope,
    args: PutArgs,
    content: String,
    out: &mut Output,
) -> CliResult {
    let mut write = MemoryWrite::new(content);
    if let Some(metadata) = &args.metadata {
        let value: serde_json::Value = serde_json::from_str(metadata).map_err(|err| {
            CliError::invalid(format!("invalid metadata: is not valid JSON ({err})"))
        })?;
        write = write.metadata(value);
    }
    if let Some(after) = args.expires_in {
        write = write.expires_at(Timestamp::now().saturating_add(after));
    }
    if let Some(revision) = args.if_revision {
        write = write.expected_revision(Revision::new(revision)?);
    }
    if args.create_only {
        write = write.create_only();
    }
    let record = store.put(&scope, &args.key, write).await?;
    if out.is_json() {
        out.record(&record)
    } else {
        out.line(&format!("saved {} (revision {})", escape_text(&record.key), record.revision))
    }
}

/// Shows one live record; `NotFound` when there is none.
pub async fn get(
    store: Arc<dyn MemoryStore>,
    scope: MemoryScope,
    key: String,
    out: &mut Output,
) -> CliResult {
    match store.get(&scope, &key).await? {
        Some(record) => out.record(&record),
        None => Err(not_found(&key)),
    }
}

/// `list` (no query) or `search` (a query): up to `--limit` records, or all with `--all`.
///
/// Without `--all`, pages are requested until `--limit` records arrived or nothing is left,
/// because a provider may return short (even empty) search pages with a cursor; the cursor to
/// continue from is printed on stderr, keeping stdout pure records.
pub async fn list(
    store: Arc<dyn MemoryStore>,
    scope: MemoryScope,
    query: Option<String>,
    args: PageArgs,
    out: &mut Output,
) -> CliResult {
    let limit = usize::from(args.limit);
    let mut cursor = args.after.as_deref().map(Cursor::parse).transpose()?;
    let mut collected: Vec<MemoryRecord> = Vec::new();
    loop {
        let want = if args.all { limit } else { limit - collected.len() };
        let request = PageRequest::new(want).after_opt(cursor.take());
        let page = fetch(store.as_ref(), &scope, query.as_deref(), request).await?;
        if args.all && out.is_json() {
            // Stream: `list --all --json` over a large namespace never holds it all.
            out.records(&page.items)?;
        } else {
            collected.extend(page.items);
        }
        cursor = page.next_cursor;
        if cursor.is_none() || (!args.all && collected.len() >= limit) {
            break;
        }
    }
    if !(args.all && out.is_json()) {
        out.records(&collected)?;
    }
    if let Some(cursor) = cursor {
        out.flush()?;
        eprintln_safe(&format!("more records: continue with --after {cursor}"));
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
pub async fn delete(
    store: Arc<dyn MemoryStore>,
    scope: MemoryScope,
    key: String,
    if_revision: Option<String>,
    out: &mut Output,
) -> CliResult {
    let expected = if_revision.map(Revision::new).transpose()?;
    if !store.delete(&scope, &key, expected.as_ref()).await? {
        return Err(not_found(&key));
    }
    out.summary(&format!("deleted {}", escape_text(&key)), &json!({"deleted": true, "key": key}))
}

fn not_found(key: &str) -> CliError {
    CliError::not_found(format!("not found: no live record has the key {key:?}"))
}
