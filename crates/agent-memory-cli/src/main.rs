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
    Mcp {
        /// Which tools to expose.
        #[arg(long, value_enum, default_value = "keys")]
        tools: mcp::ToolSet,
    },
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Mcp { tools } => {
            let store = agent_memory::open("memory:").expect("memory store");
            let scope = agent_memory::MemoryScope::new("app", "user").expect("scope");
            if let Err(err) = mcp::serve(store, scope, tools).await {
                eprintln!("error: {err}");
                std::process::exit(1);
            }
        }
    }
}
