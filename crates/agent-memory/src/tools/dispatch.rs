//! The dispatchers: run one model tool call and return its JSON result.

use std::time::Duration;

use serde_json::{json, Value};

use super::call::check_args;
use super::definitions::{
    definitions, fact_definitions, FORGET, MAX_EXPIRES_IN_SECONDS, MEMORY_DELETE, MEMORY_GET,
    MEMORY_LIST, MEMORY_SAVE, MEMORY_SEARCH, RECALL, REMEMBER,
};
use super::error::{unknown_tool, Context, ToolError, KEY_RENAMES};
use super::results::{fact_json, page_json, record_json, DATA_NOTE};
use crate::facts::Facts;
use crate::scope::MemoryScope;
use crate::scoped::ScopedMemory;
use crate::time::Timestamp;
use crate::validation::{self, MAX_PAGE_LIMIT};
use crate::write::MemoryWrite;

/// Runs one call of a key-based tool (from [`definitions`]) against `memory` and returns its
/// JSON result.
///
/// `arguments` is the JSON object the model produced (`null` counts as no arguments). Results:
///
/// | tool | result |
/// | --- | --- |
/// | `memory_save` | `{"saved": true, "memory": record}` |
/// | `memory_get` | `{"found": bool, "memory": record or null, "note"}` |
/// | `memory_list`, `memory_search` | `{"items": [record…], "next_cursor": string or null, "note"}` |
/// | `memory_delete` | `{"deleted": bool, "key"}` |
///
/// # Errors
/// A [`ToolError`] for an unknown tool, arguments the schema does not declare (scope fields
/// included), missing or mistyped arguments, values over a limit, a stale revision, or a
/// storage failure.
pub async fn dispatch(
    memory: &ScopedMemory,
    name: &str,
    arguments: &Value,
) -> Result<Value, ToolError> {
    let definitions = definitions();
    let Some(definition) = definitions.iter().find(|d| d.name == name) else {
        return Err(unknown_tool(name, &definitions));
    };
    let args = check_args(definition, arguments)?;
    let context = |writes| Context { tool: definition.name, writes, renames: KEY_RENAMES };
    match definition.name {
        MEMORY_SAVE => {
            let key = args.required_string("key")?;
            let content = args.required_string("content")?;
            let mut write = MemoryWrite::new(content);
            match args.get("metadata") {
                None => {}
                Some(Value::Object(map)) => write = write.metadata(Value::Object(map.clone())),
                Some(_) => {
                    return Err(ToolError::invalid("metadata", "`metadata` must be a JSON object"))
                }
            }
            if let Some(seconds) = args.integer("expires_in_seconds", MAX_EXPIRES_IN_SECONDS)? {
                write =
                    write.expires_at(Timestamp::now().saturating_add(Duration::from_secs(seconds)));
            }
            if let Some(revision) = args.revision("expected_revision")? {
                write = write.expected_revision(revision);
            }
            let record = memory.put(key, write).await.map_err(|e| context(true).error(e))?;
            Ok(json!({"saved": true, "memory": record_json(&record)}))
        }
        MEMORY_GET => {
            let key = args.required_string("key")?;
            validation::key(key).map_err(|e| context(false).error(e))?;
            let record = memory.get(key).await.map_err(|e| context(false).error(e))?;
            Ok(json!({
                "found": record.is_some(),
                "memory": record.as_ref().map(record_json),
                "note": DATA_NOTE,
            }))
        }
        MEMORY_LIST => {
            let page = args.page(MEMORY_LIST)?;
            let page = memory.list(page).await.map_err(|e| context(false).error(e))?;
            Ok(page_json(&page))
        }
        MEMORY_SEARCH => {
            let query = args.required_string("query")?;
            let page = args.page(MEMORY_SEARCH)?;
            let page = memory.search(query, page).await.map_err(|e| context(false).error(e))?;
            Ok(page_json(&page))
        }
        MEMORY_DELETE => {
            let key = args.required_string("key")?;
            let revision = args.revision("expected_revision")?;
            validation::key(key).map_err(|e| context(false).error(e))?;
            let deleted =
                memory.delete(key, revision.as_ref()).await.map_err(|e| context(true).error(e))?;
            Ok(json!({"deleted": deleted, "key": key}))
        }
        _ => Err(unknown_tool(name, &definitions)),
    }
}

/// Runs one call of a fact tool (from [`fact_definitions`]) against `facts` in `scope` and
/// returns its JSON result.
///
/// | tool | result |
/// | --- | --- |
/// | `remember` | `{"remembered": true, "fact": {"fact_id", "text", "created_at"}}` |
/// | `forget` | `{"forgotten": bool, "fact_id"}` |
/// | `recall` | `{"facts": [fact…], "total": n, "truncated": bool, "note"}`, oldest first |
///
/// `scope` comes from trusted code, exactly as for [`dispatch`]; give facts a namespace of
/// their own when the user also has keyed memories (see [`Facts`]).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use agent_memory::{tools, Facts, InMemoryStore, MemoryScope, MemoryStore};
/// use serde_json::json;
///
/// let store = Arc::new(InMemoryStore::new());
/// store.start().await?;
/// let facts = Facts::new(store);
/// let scope = MemoryScope::new("tenant-a", "user-42")?.with_namespace("facts")?;
///
/// tools::dispatch_facts(&facts, &scope, "remember", &json!({"text": "prefers metric units"}))
///     .await.unwrap();
/// let recalled = tools::dispatch_facts(&facts, &scope, "recall", &json!({})).await.unwrap();
/// assert_eq!(recalled["facts"][0]["text"], "prefers metric units");
/// # Ok::<(), agent_memory::MemoryError>(())
/// # }).unwrap();
/// ```
///
/// # Errors
/// As for [`dispatch`].
pub async fn dispatch_facts(
    facts: &Facts,
    scope: &MemoryScope,
    name: &str,
    arguments: &Value,
) -> Result<Value, ToolError> {
    const RENAMES: &[(&str, &str)] = &[("content", "text"), ("key", "fact_id")];
    let definitions = fact_definitions();
    let Some(definition) = definitions.iter().find(|d| d.name == name) else {
        return Err(unknown_tool(name, &definitions));
    };
    let args = check_args(definition, arguments)?;
    let context = |writes| Context { tool: definition.name, writes, renames: RENAMES };
    match definition.name {
        REMEMBER => {
            let text = args.required_string("text")?;
            if text.is_empty() {
                return Err(ToolError::invalid("text", "`text` must not be empty"));
            }
            let fact = facts.remember(scope, text).await.map_err(|e| context(true).error(e))?;
            Ok(json!({"remembered": true, "fact": fact_json(&fact)}))
        }
        FORGET => {
            let id = args.required_string("fact_id")?;
            validation::key(id).map_err(|e| context(false).error(e))?;
            let forgotten = facts.forget(scope, id).await.map_err(|e| context(true).error(e))?;
            Ok(json!({"forgotten": forgotten, "fact_id": id}))
        }
        RECALL => {
            let limit = args.limit(MAX_PAGE_LIMIT)?;
            let mut all = facts.recall(scope, None).await.map_err(|e| context(false).error(e))?;
            let total = all.len();
            all.truncate(limit);
            Ok(json!({
                "facts": all.iter().map(fact_json).collect::<Vec<_>>(),
                "total": total,
                "truncated": total > all.len(),
                "note": DATA_NOTE,
            }))
        }
        _ => Err(unknown_tool(name, &definitions)),
    }
}
