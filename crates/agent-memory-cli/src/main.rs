//! The `agent-memory` command line.

use clap::Parser;

/// Explicit, scoped, long-term memory for AI agents.
#[derive(Debug, Parser)]
#[command(name = "agent-memory", version, about)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
