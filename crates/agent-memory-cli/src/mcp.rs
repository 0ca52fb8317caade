//! Placeholder: the MCP server is being written.

pub fn placeholder() {}
