//! `mcp`: the scope checked here, the server itself in [`crate::mcp`].

use std::sync::Arc;

use agent_memory::{MemoryScope, MemoryStore};
use clap::Subcommand;

use super::globals::Globals;
use crate::exit::{CliError, CliResult};
use crate::mcp::ToolSet;

/// The `mcp` command, as clap parses it.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the memory tools over MCP on stdio for the scope given by the global options.
    Mcp {
        /// Which tools to expose.
        #[arg(long, value_enum, default_value = "keys")]
        tools: ToolSet,
    },
}

/// The server's scope, from trusted options, and its tool set.
#[derive(Debug)]
pub struct Job {
    scope: MemoryScope,
    tools: ToolSet,
}

impl Command {
    /// Checks the scope: without `--app` and `--user` the server refuses to start.
    ///
    /// # Errors
    /// `Invalid` for a missing or bad scope.
    pub fn prepare(self, globals: &Globals) -> CliResult<Job> {
        let Command::Mcp { tools } = self;
        Ok(Job { scope: globals.scope()?, tools })
    }
}

/// Serves MCP on stdio until the client closes it. The scope was built from trusted options;
/// the MCP client can never choose it. Takes no output: stdout belongs to the protocol.
pub async fn run(job: Job, store: Arc<dyn MemoryStore>) -> CliResult {
    let Job { scope, tools } = job;
    tracing::info!(?scope, ?tools, "serving MCP on stdio");
    crate::mcp::serve(store, scope, tools)
        .await
        .map_err(|err| CliError::failure(format!("the MCP server stopped: {err}")))
}
