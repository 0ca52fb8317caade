//! The `agent-memory` command line and MCP server.

mod mcp;

use clap::{Parser, Subcommand};

/// Explicit, scoped, long-term memory for AI agents.
#[derive(Debug, Parser)]
#[command(name = "agent-memory", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the memory tools over MCP on stdio.
    Mcp,
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Mcp => mcp::placeholder(),
    }
}
