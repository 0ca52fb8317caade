//! `completions` and `man`: what a shell and `man` need to know about the command line,
//! generated from the same definitions clap parses with, so they never drift from it.

use clap::Subcommand;

use crate::exit::{CliError, CliResult};

/// The shell-integration commands, as clap parses them.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a completion script for SHELL on stdout, e.g.
    /// `agent-memory completions bash > /etc/bash_completion.d/agent-memory`.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },

    /// Print the manual page (roff) on stdout, e.g. `agent-memory man | man -l -`.
    Man,
}

/// Writes the completion script or the manual page to stdout. Needs no scope and no store.
///
/// # Errors
/// `Failure` when stdout cannot be written.
pub fn run(command: Command) -> CliResult {
    let mut cli = crate::cli_command();
    let mut stdout = std::io::stdout().lock();
    match command {
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut cli, "agent-memory", &mut stdout);
            Ok(())
        }
        Command::Man => clap_mangen::Man::new(cli)
            .render(&mut stdout)
            .map_err(|e| CliError::io("cannot write to stdout", &e)),
    }
}
