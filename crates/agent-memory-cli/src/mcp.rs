//! Placeholder: the MCP server is being written.

use std::sync::Arc;

use agent_memory::{MemoryScope, MemoryStore};

/// Which tools the server exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolSet {
    /// The five key-based memory tools.
    Keys,
    /// The fact tools: remember, forget, recall.
    Facts,
}

/// Serves `tools` over MCP on stdio for one bound scope until the client closes stdin.
pub async fn serve(
    store: Arc<dyn MemoryStore>,
    scope: MemoryScope,
    tools: ToolSet,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let _ = (store, scope, tools);
    Ok(())
}
