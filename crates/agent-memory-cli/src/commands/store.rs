//! The store's lifecycle, owned in one place for every command, `mcp` included.

use std::future::Future;
use std::sync::Arc;

use agent_memory::MemoryStore;

use crate::exit::{CliError, CliResult};

/// Opens the store of `--store` (without one, the default SQLite file in the user's data
/// directory), starts it, which creates or checks its schema, lends it to `work`, and closes it
/// once `work` is done, whether `work` succeeded or not.
///
/// `work`'s own error wins over a failed close; a failed close after a successful `work` is
/// reported, because for a file store it can mean the last writes did not reach disk. A store
/// that failed to start is not closed: it never held anything to flush.
///
/// The URL is never logged or quoted here: it may carry a password (the store's `Debug`, which
/// the log line uses, hides it).
///
/// With `lifetime` [`Lifetime::OneRun`], a SQLite store reads its file without a memory map
/// unless the URL sets `mmap_size`: a command that runs once reads each page once or twice,
/// where a map saves nothing, and pages mapped by each of the store's reader connections would
/// count in the process's resident memory once per connection, so a whole-application export or
/// migration would appear to grow with the file. Only the long-lived MCP server maps the file.
pub async fn with_store<F, Fut>(url: Option<&str>, lifetime: Lifetime, work: F) -> CliResult
where
    F: FnOnce(Arc<dyn MemoryStore>) -> Fut,
    Fut: Future<Output = CliResult>,
{
    let mut url = match url {
        Some(url) => url.to_owned(),
        None => agent_memory::default_store_url()?,
    };
    if lifetime == Lifetime::OneRun {
        url = without_file_map(url);
    }
    let store = agent_memory::open(&url)?;
    tracing::debug!(store = ?store, "starting the store");
    store.start().await?;
    let result = work(Arc::clone(&store)).await;
    let closed = store.close().await.map_err(CliError::from);
    result.and(closed)
}

/// How long the process keeps the store open, which decides whether a SQLite file is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// One command, then exit.
    OneRun,
    /// A server that answers many requests.
    Serving,
}

/// `url` with `mmap_size=0` added when it is a `sqlite:` URL that does not set `mmap_size`;
/// any other URL unchanged.
pub(super) fn without_file_map(url: String) -> String {
    let is_sqlite = url.get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("sqlite:"));
    // A fragment is refused by the URL parser anyway; leave such a URL for it to refuse.
    if !is_sqlite || url.contains('#') {
        return url;
    }
    let (separator, params) = match url.split_once('?') {
        Some((_, params)) => ("&", params),
        None => ("?", ""),
    };
    let sets_map = params.split('&').any(|param| param.split('=').next() == Some("mmap_size"));
    if sets_map {
        return url;
    }
    let separator = if params.is_empty() && url.ends_with('?') { "" } else { separator };
    format!("{url}{separator}mmap_size=0")
}

#[cfg(test)]
mod tests {
    use super::without_file_map;

    #[test]
    fn one_run_sqlite_urls_turn_the_map_off_unless_they_set_it() {
        for (url, expected) in [
            ("sqlite:m.db", "sqlite:m.db?mmap_size=0"),
            ("SQLite:///srv/m.db", "SQLite:///srv/m.db?mmap_size=0"),
            ("sqlite:m.db?readers=2", "sqlite:m.db?readers=2&mmap_size=0"),
            ("sqlite:m.db?", "sqlite:m.db?mmap_size=0"),
            ("sqlite:m.db?mmap_size=4096", "sqlite:m.db?mmap_size=4096"),
            ("sqlite:m.db?readers=1&mmap_size=0", "sqlite:m.db?readers=1&mmap_size=0"),
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("memory:", "memory:"),
            ("redis://h:6379", "redis://h:6379"),
        ] {
            assert_eq!(without_file_map(url.to_owned()), expected, "{url}");
        }
        let url = "sqlite:m.db?mmap_size=0";
        agent_memory::open(&without_file_map("sqlite:m.db".to_owned())).expect(url);
    }
}
