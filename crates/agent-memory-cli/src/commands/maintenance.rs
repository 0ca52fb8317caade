//! Trusted maintenance: `setup`, `namespaces`, `purge-expired`, `delete-all`, `delete-user`.

use std::sync::Arc;

use agent_memory::{validation::MAX_PAGE_LIMIT, MemoryScope, MemoryStore, PageRequest};
use serde_json::json;

use crate::exit::CliResult;
use crate::output::{self, namespace_text, Output};
use crate::progress;

/// The store was started by the caller, which creates or validates its schema; this only
/// reports it.
pub async fn setup(out: &mut Output) -> CliResult {
    out.summary("store ready: schema created or validated", &json!({"ready": true}))
}

/// Every namespace of the user that physically holds a record.
pub async fn namespaces(
    store: Arc<dyn MemoryStore>,
    (application_id, user_id): (String, String),
    out: &mut Output,
) -> CliResult {
    let mut scopes = Vec::new();
    let mut cursor = None;
    loop {
        let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(cursor);
        let page = store.list_namespaces(&application_id, &user_id, request).await?;
        scopes.extend(page.items);
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    if out.is_json() {
        return scopes.iter().try_for_each(|scope| out.json_line(scope));
    }
    if scopes.is_empty() {
        return out.line("no namespaces");
    }
    let rows: Vec<Vec<String>> = scopes.iter().map(|s| vec![namespace_text(s)]).collect();
    out.table(Some(&["NAMESPACE"]), &rows)
}

/// Sweeps the whole namespace, following cursors even through pages that removed nothing.
pub async fn purge_expired(
    store: Arc<dyn MemoryStore>,
    scope: MemoryScope,
    out: &mut Output,
) -> CliResult {
    let spinner = progress::spinner("purging expired records");
    let mut purged = 0u64;
    let mut cursor = None;
    loop {
        let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(cursor);
        let page = store.purge_expired(&scope, request).await;
        let page = match page {
            Ok(page) => page,
            Err(err) => {
                spinner.finish_and_clear();
                return Err(err.into());
            }
        };
        purged += page.deleted;
        spinner.set_position(purged);
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    spinner.finish_and_clear();
    out.summary(
        &format!("purged {}", output::count(purged, "expired record")),
        &json!({"purged": purged}),
    )
}

/// Erases one namespace.
pub async fn delete_all(
    store: Arc<dyn MemoryStore>,
    scope: MemoryScope,
    out: &mut Output,
) -> CliResult {
    let deleted = store.delete_all(&scope).await?;
    out.summary(
        &format!("deleted {}", output::count(deleted, "record")),
        &json!({"deleted": deleted}),
    )
}

/// Erases every namespace of the user. One library call (the provider batches inside it), so
/// the terminal shows a spinner rather than a count; a retry after a failure removes the rest.
pub async fn delete_user(
    store: Arc<dyn MemoryStore>,
    (application_id, user_id): (String, String),
    out: &mut Output,
) -> CliResult {
    let spinner = progress::busy("deleting the user's records");
    let result = store.delete_user(&application_id, &user_id).await;
    spinner.finish_and_clear();
    let deleted = result?;
    out.summary(
        &format!("deleted {} in every namespace of the user", output::count(deleted, "record")),
        &json!({"deleted": deleted}),
    )
}
