//! `agent-memory mcp`: the memory tools over the Model Context Protocol, on stdio for one user
//! ([`stdio`]) or over Streamable HTTP for many ([`http`]).
//!
//! Both transports run the same [`handler`]: the tool list is built from the library's
//! [`tools::definitions`](agent_memory::tools::definitions) (or the fact tools) and every call
//! is forwarded to the library's dispatcher, the one place arguments are checked and run. What
//! differs is only where a call's [`Principal`] (the scope it runs in, and whether it may write)
//! comes from:
//!
//! - on stdio, from the trusted flags or environment the server was started with, once;
//! - over HTTP, from the credential of each request, checked by the HTTP layer and read by the
//!   handler on every call. Nothing a client sends in a tool call can change it.

mod handler;
pub mod http;
mod principal;
mod stdio;
pub mod work;

pub use self::principal::{CredentialId, Principal};
pub use self::stdio::serve as serve_stdio;

/// Which tools the server exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolSet {
    /// The five key-based memory tools.
    Keys,
    /// The fact tools: remember, forget, recall.
    Facts,
    /// Claude's memory tool, one tool named `memory`: files under /memories.
    Memory,
}
