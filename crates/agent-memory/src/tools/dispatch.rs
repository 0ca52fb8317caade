//! The dispatchers: parse a model's tool call into its typed call, run it, and return its JSON
//! result or the model-facing error.

use std::future::Future;

use serde_json::{json, Value};

use super::call::{self, FactToolCall, KeyToolCall};
use super::definitions::{Tool, FACT_TOOLS, KEY_TOOLS};
use super::error::{FieldNames, ToolError, FACT_FIELD_NAMES, KEY_FIELD_NAMES};
use super::results::{fact_json, page_json, record_json, ToolOptions, DATA_NOTE};
use crate::error::MemoryError;
use crate::facts::Facts;
use crate::observe;
use crate::scope::MemoryScope;
use crate::scoped::ScopedMemory;
use crate::time::Timestamp;
use crate::validation;
use crate::write::MemoryWrite;

/// Runs one call of a key-based tool (from [`definitions`](super::definitions())) against
/// `memory` and returns its JSON result.
///
/// `arguments` is the JSON object the model produced (`null` counts as no arguments). Results:
///
/// | tool | result |
/// | --- | --- |
/// | `memory_save` | `{"saved": true, "memory": record}` |
/// | `memory_get` | `{"found": bool, "memory": record or null, "note"}` |
/// | `memory_list`, `memory_search` | `{"items": [record…], "next_cursor": string or null, "note"}`, and `"hint"` when records were cut to fit (see [`ToolOptions::result_bytes`]) |
/// | `memory_delete` | `{"deleted": bool, "key"}` |
///
/// List and search results keep to the default budget of
/// [`DEFAULT_RESULT_BYTES`](super::DEFAULT_RESULT_BYTES); [`dispatch_with`] takes another.
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
    dispatch_with(memory, name, arguments, &ToolOptions::default()).await
}

/// [`dispatch`] with the result shaping of `options` (the byte budget of list and search
/// results).
///
/// # Errors
/// As for [`dispatch`].
pub async fn dispatch_with(
    memory: &ScopedMemory,
    name: &str,
    arguments: &Value,
    options: &ToolOptions,
) -> Result<Value, ToolError> {
    run_call(&*KEY_TOOLS, KEY_FIELD_NAMES, name, arguments, |call| call.run(memory, options)).await
}

/// Runs one call of a fact tool (from [`fact_definitions`](super::fact_definitions())) against
/// `facts` in `scope` and returns its JSON result.
///
/// | tool | result |
/// | --- | --- |
/// | `remember` | `{"remembered": true, "fact": {"fact_id", "text", "created_at"}}` |
/// | `forget` | `{"forgotten": bool, "fact_id"}` |
/// | `recall` | `{"facts": [fact…], "truncated": bool, "note"}`, oldest first; `truncated` says more facts exist |
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
    run_call(&*FACT_TOOLS, FACT_FIELD_NAMES, name, arguments, |call| call.run(facts, scope)).await
}

/// Parses a call of one of `tools`, runs it, and words a failure for the model in the names
/// `fields` gives, all inside the tool call's span.
async fn run_call<C, F>(
    tools: &[Tool<C>],
    fields: FieldNames,
    name: &str,
    arguments: &Value,
    run: impl FnOnce(C) -> F,
) -> Result<Value, ToolError>
where
    F: Future<Output = Result<Value, MemoryError>>,
{
    observe::tool_call(observe::tool_span(name), async {
        let (tool, call) = call::parse(tools, name, arguments)?;
        run(call).await.map_err(|err| ToolError::from_memory(err, tool, fields))
    })
    .await
}

impl KeyToolCall {
    /// Runs the call against `memory`.
    async fn run(self, memory: &ScopedMemory, options: &ToolOptions) -> Result<Value, MemoryError> {
        match self {
            Self::Save { key, content, metadata, expires_in, expected_revision } => {
                let mut write = MemoryWrite::new(content)
                    .metadata(Value::Object(metadata.unwrap_or_default()))
                    .expires_at_opt(expires_in.map(|after| Timestamp::now().saturating_add(after)));
                if let Some(revision) = expected_revision {
                    write = write.expected_revision(revision);
                }
                let record = memory.put(&key, write).await?;
                Ok(json!({"saved": true, "memory": record_json(&record)}))
            }
            Self::Get { key } => {
                validation::key(&key)?;
                let record = memory.get(&key).await?;
                Ok(json!({
                    "found": record.is_some(),
                    "memory": record.as_ref().map(record_json),
                    "note": DATA_NOTE,
                }))
            }
            Self::List { page } => Ok(page_json(&memory.list(page).await?, options)),
            Self::Search { query, page } => {
                Ok(page_json(&memory.search(&query, page).await?, options))
            }
            Self::Delete { key, expected_revision } => {
                validation::key(&key)?;
                let deleted = memory.delete(&key, expected_revision.as_ref()).await?;
                Ok(json!({"deleted": deleted, "key": key}))
            }
        }
    }
}

impl FactToolCall {
    /// Runs the call against `facts` in `scope`.
    async fn run(self, facts: &Facts, scope: &MemoryScope) -> Result<Value, MemoryError> {
        match self {
            Self::Remember { text } => {
                let fact = facts.remember(scope, &text).await?;
                Ok(json!({"remembered": true, "fact": fact_json(&fact)}))
            }
            Self::Forget { fact_id } => {
                validation::key(&fact_id)?;
                let forgotten = facts.forget(scope, &fact_id).await?;
                Ok(json!({"forgotten": forgotten, "fact_id": fact_id}))
            }
            Self::Recall { limit } => {
                // Reads `limit + 1` facts at most, never the whole scope.
                let recalled = facts.recall(scope, Some(limit)).await?;
                Ok(json!({
                    "facts": recalled.iter().map(fact_json).collect::<Vec<_>>(),
                    "truncated": recalled.truncated,
                    "note": DATA_NOTE,
                }))
            }
        }
    }
}
