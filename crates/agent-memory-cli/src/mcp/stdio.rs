//! `agent-memory mcp` on stdio: one user, fixed by the flags the server was started with.
//!
//! stdout carries only the protocol; logs go to stderr. The server runs until the client
//! closes stdin, then returns; the store it is given is already started, and the caller closes
//! it, as for every other command.

use std::sync::Arc;

use agent_memory::{MemoryScope, MemoryStore};
use rmcp::service::ServerInitializeError;
use rmcp::ServiceExt;

use super::handler::MemoryServer;
use super::{CredentialId, Principal, ToolSet};

/// Serves `tools` over MCP on stdio for one bound scope until the client closes stdin.
///
/// `store` must be started; it stays open when this returns. Logs go through `tracing`; the
/// caller installs a subscriber that writes to stderr, since stdout carries the protocol.
pub async fn serve(
    store: Arc<dyn MemoryStore>,
    scope: MemoryScope,
    tools: ToolSet,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    tracing::info!(
        tools = ?tools,
        namespace = scope.namespace().unwrap_or(""),
        "agent-memory MCP server starting on stdio"
    );
    let principal = Principal::new(scope, false, CredentialId::Local);
    let server = MemoryServer::fixed(store, tools, principal);
    match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => match running.waiting().await {
            Ok(reason) => {
                tracing::info!(?reason, "MCP client disconnected");
                Ok(())
            }
            Err(err) => Err(err.into()),
        },
        // The client went away before initializing: nothing to serve, a clean exit.
        Err(ServerInitializeError::ConnectionClosed(_)) => {
            tracing::info!("MCP client closed stdin before initializing");
            Ok(())
        }
        Err(err) => {
            // The error may quote the client's message: keep it out of the returned error.
            tracing::debug!(error = %err, "MCP initialization failed");
            Err("the MCP client did not complete the initialize handshake".into())
        }
    }
}
