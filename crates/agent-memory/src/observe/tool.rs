//! One span per model tool call, named for the tool, with its GenAI memory operation name.

use std::future::Future;

use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::tools::ToolError;

macro_rules! tool_span {
    ($name:literal, $operation:expr) => {
        tracing::info_span!(
            target: "agent_memory::tools",
            $name,
            "gen_ai.operation.name" = $operation,
            "gen_ai.tool.name" = $name,
            "agent_memory.tool.command" = Empty,
            "error.type" = Empty,
            "otel.status_code" = Empty,
        )
    };
}

/// The span of a call of the key or fact tool called `name`. A name that is none of ours
/// gets a span named `tool` that records no name: the model chose it, not us.
pub(crate) fn tool_span(name: &str) -> Span {
    match name {
        "memory_save" => tool_span!("memory_save", "upsert_memory"),
        "memory_get" => tool_span!("memory_get", "search_memory"),
        "memory_list" => tool_span!("memory_list", "search_memory"),
        "memory_search" => tool_span!("memory_search", "search_memory"),
        "memory_delete" => tool_span!("memory_delete", "delete_memory"),
        "remember" => tool_span!("remember", "create_memory"),
        "forget" => tool_span!("forget", "delete_memory"),
        "recall" => tool_span!("recall", "search_memory"),
        _ => tracing::info_span!(
            target: "agent_memory::tools",
            "tool",
            "error.type" = Empty,
            "otel.status_code" = Empty,
        ),
    }
}

/// The span of a call of Claude's memory tool; its command is recorded once parsed.
pub(crate) fn memory_tool_span() -> Span {
    tool_span!("memory", Empty)
}

/// Records the memory tool's `command` and the GenAI operation it is.
pub(crate) fn record_command(span: &Span, command: &'static str) {
    if span.is_disabled() {
        return;
    }
    let operation = match command {
        "view" => "search_memory",
        "create" => "create_memory",
        "delete" => "delete_memory",
        _ => "update_memory",
    };
    span.record("agent_memory.tool.command", command);
    span.record("gen_ai.operation.name", operation);
}

/// Runs a tool call inside `span` and records how it failed, if it did.
pub(crate) async fn tool_call<T>(
    span: Span,
    run: impl Future<Output = Result<T, ToolError>>,
) -> Result<T, ToolError> {
    if span.is_disabled() {
        return run.await;
    }
    let result = run.instrument(span.clone()).await;
    if let Err(err) = &result {
        // The kind's serialized name (`invalid_arguments`, `conflict`, …): a fixed word.
        if let Ok(serde_json::Value::String(kind)) = serde_json::to_value(err.kind()) {
            span.record("error.type", kind.as_str());
        }
        span.record("otel.status_code", "ERROR");
    }
    result
}
