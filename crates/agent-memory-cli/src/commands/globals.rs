//! The global options and the scope they name, checked before any store is opened.

use agent_memory::MemoryScope;
use clap::Args;

use crate::exit::{CliError, CliResult};
use crate::progress::notice;

/// Options every command accepts, before or after the command name; `--help` lists them
/// under their own heading, apart from the command's.
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct Globals {
    /// Store URL: sqlite:PATH, postgres://…, redis://…, redis+cluster://h:p,h:p or memory:.
    /// Default: a SQLite file in the user's data directory
    /// (e.g. ~/.local/share/agent-memory/memories.db).
    #[arg(
        long,
        env = "AGENT_MEMORY_STORE",
        global = true,
        hide_env_values = true,
        value_name = "URL"
    )]
    pub store: Option<String>,

    /// Application id (1..=128 bytes, no control characters).
    #[arg(long, env = "AGENT_MEMORY_APP", global = true, value_name = "ID")]
    pub app: Option<String>,

    /// User id within the application.
    #[arg(long, env = "AGENT_MEMORY_USER", global = true, value_name = "ID")]
    pub user: Option<String>,

    /// Namespace within the user; omitted means the default namespace. Commands that cover
    /// every namespace of a user (namespaces, export, import, delete-user) ignore it.
    #[arg(long, env = "AGENT_MEMORY_NAMESPACE", global = true, value_name = "NAME")]
    pub namespace: Option<String>,

    /// Machine-readable output: one JSON object per line (per record where there are records).
    #[arg(long, global = true)]
    pub json: bool,

    /// How log lines on stderr look: `text` for people, `json` for one JSON object per line
    /// (for log collectors). Applies to every command and both MCP modes.
    #[arg(
        long,
        env = "AGENT_MEMORY_LOG_FORMAT",
        global = true,
        value_enum,
        default_value = "text",
        value_name = "FORMAT"
    )]
    pub log_format: LogFormat,

    /// Which of `--app`, `--user` and `--namespace` were typed on the command line rather than taken
    /// from the environment: only those get a note when a command ignores them.
    #[arg(skip)]
    typed: Typed,
}

/// Scope options given on the command line (see [`Globals::note_typed`]).
#[derive(Debug, Default, Clone, Copy)]
struct Typed {
    app: bool,
    user: bool,
    namespace: bool,
}

/// The format of log lines on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line: timestamp, level, target, fields and the spans it is in.
    Json,
}

/// An application id and a user id, both validated: the owner of every namespace a
/// user-wide command covers.
#[derive(Debug)]
pub struct User {
    /// From `--app`.
    pub application_id: String,
    /// From `--user`.
    pub user_id: String,
}

impl Globals {
    /// Records which scope options the person typed, from clap's value sources (the command
    /// line, as opposed to `AGENT_MEMORY_USER`/`AGENT_MEMORY_NAMESPACE`), at any level of
    /// subcommands: global options may follow the command name.
    pub fn note_typed(&mut self, matches: &clap::ArgMatches) {
        let typed = |name: &str| {
            let mut level = Some(matches);
            while let Some(current) = level {
                if current.try_get_raw(name).is_ok()
                    && current.value_source(name) == Some(clap::parser::ValueSource::CommandLine)
                {
                    return true;
                }
                level = current.subcommand().map(|(_, sub)| sub);
            }
            false
        };
        self.typed =
            Typed { app: typed("app"), user: typed("user"), namespace: typed("namespace") };
    }

    /// True when `--app` was typed on the command line (not taken from `AGENT_MEMORY_APP`).
    pub fn typed_app(&self) -> bool {
        self.typed.app
    }

    /// The scope of `--app`, `--user` and `--namespace`.
    ///
    /// # Errors
    /// `Invalid` when `--app` or `--user` is missing, or any of the three breaks a scope rule.
    pub fn scope(&self) -> CliResult<MemoryScope> {
        let (application_id, user_id) = self.required_ids()?;
        let scope = MemoryScope::new(application_id, user_id)?;
        match &self.namespace {
            Some(namespace) => Ok(scope.with_namespace(namespace.clone())?),
            None => Ok(scope),
        }
    }

    /// The user of `--app` and `--user`, for `command`, which covers every namespace of the
    /// user; a `--namespace` given alongside is ignored, and said so.
    ///
    /// # Errors
    /// `Invalid` when `--app` or `--user` is missing or breaks a scope rule.
    pub fn user(&self, command: &str) -> CliResult<User> {
        let (application_id, user_id) = self.required_ids()?;
        MemoryScope::new(application_id.clone(), user_id.clone())?;
        self.ignore_namespace(command);
        Ok(User { application_id, user_id })
    }

    /// The application of `--app`, for `command`, which covers every user of the
    /// application; a `--user` or `--namespace` given alongside is ignored, and said so.
    ///
    /// # Errors
    /// `Invalid` when `--app` is missing or breaks a scope rule.
    pub fn application(&self, command: &str) -> CliResult<String> {
        let application_id = self.app.clone().ok_or_else(|| {
            CliError::invalid("no application id: pass --app or set AGENT_MEMORY_APP")
        })?;
        agent_memory::validation::id("application_id", &application_id)?;
        if self.typed.user || self.typed.namespace {
            notice(&format!(
                "{command} covers every user of the application; --user and --namespace are \
                 ignored"
            ));
        }
        Ok(application_id)
    }

    /// Says on stderr that `command` ignores `--namespace`, when one was given: the command
    /// still runs, but not in the namespace the caller may think.
    pub fn ignore_namespace(&self, command: &str) {
        if self.typed.namespace {
            notice(&format!(
                "{command} covers every namespace of the user; --namespace is ignored"
            ));
        }
    }

    fn required_ids(&self) -> CliResult<(String, String)> {
        let application_id = self.app.clone().ok_or_else(|| {
            CliError::invalid("no application id: pass --app or set AGENT_MEMORY_APP")
        })?;
        let user_id = self
            .user
            .clone()
            .ok_or_else(|| CliError::invalid("no user id: pass --user or set AGENT_MEMORY_USER"))?;
        Ok((application_id, user_id))
    }
}
